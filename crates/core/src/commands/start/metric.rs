//! Starting a metric loop: the baseline measured `--metric-runs` times (its spread is the noise
//! floor), checkpoint 0 holding the baseline's tree, the baseline's ledger line, and the
//! project's last lessons in the banner.

use std::time::Duration;

use jiff::Timestamp;

use crate::metric::{Lesson, lessons};
use crate::metric::{Measured, MetricProgress, MetricRecord, MetricSettings};
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::Store;
use crate::support::Environment;
use crate::worktree::{WorkTree, checkpoint_ref};

/// Measures the baseline into `state` and checkpoints it; returns the project's last lessons.
/// `Err` says, in one line, why the loop cannot start.
pub(crate) fn baseline(
    env: &Environment,
    store: &Store,
    state: &mut LoopState,
    settings: &MetricSettings,
) -> Result<Vec<Lesson>, String> {
    let cwd = state.meta.cwd.clone();
    let sandbox = crate::checks::sandbox::sandbox_for_verify(
        env,
        store.root(),
        state.meta.host,
        &state.meta.cwd,
        state.meta.oracle.files.keys(),
    );
    let timeout = Duration::from_secs(state.meta.settings.verify_timeout_secs);
    let measurement = crate::metric::measure::run_metric(settings, None, &cwd, timeout, &sandbox)
        .map_err(|e| format!("the metric command could not run: {e}"))?;
    let name = match measurement.measured {
        Measured::Value { name, .. } => name,
        Measured::Failed(why) => {
            return Err(format!(
                "the baseline could not be measured: `{}`: {why}. Fix the metric command first.",
                settings.command
            ));
        }
    };
    WorkTree::open(&cwd)
        .checkpoint(&state.meta.loop_id, 0)
        .map_err(|e| format!("the baseline could not be checkpointed: {e}"))?;
    state.meta.metric = Some(MetricProgress::at_baseline(&measurement.runs, name));
    Ok(Lesson::read_last(&lessons::path(store.root(), &cwd), lessons::SHOWN))
}

/// The baseline's ledger line, so a plotted series starts at it: committed with the start.
pub(crate) fn baseline_line(state: &LoopState, now: Timestamp) -> Option<LedgerEntry> {
    let (Some(settings), Some(progress)) = (&state.meta.settings.metric, &state.meta.metric) else {
        return None;
    };
    let mut record = MetricRecord::of(settings, progress, progress.baseline.0, true);
    record.baseline = true;
    Some(LedgerEntry {
        iteration: 0,
        detail: Some(format!(
            "baseline of {} run(s), noise floor {}",
            progress.baseline_runs.len(),
            progress.noise
        )),
        metric: Some(record),
        ..LedgerEntry::new(state, now, LedgerDecision::Note, ReasonCode::MetricKept)
    })
}

/// The banner's metric lines, for a metric loop.
pub(crate) fn banner(state: &LoopState, lessons: &[Lesson]) -> Option<String> {
    let (settings, progress) = (state.meta.settings.metric.as_ref()?, state.meta.metric.as_ref()?);
    let mut out = format!(
        "Metric:      {}  ({} is better{})\n",
        settings.command,
        settings.direction.word(),
        settings.target.map_or_else(|| ", no target: runs to the cap".into(), |t| format!(", target {t}"))
    );
    out.push_str(&format!(
        "Baseline:    {}{} (median of {} run(s), noise floor {}; a change is kept when it beats the best by \
         more than {} and the noise floor)\n",
        progress.baseline,
        progress.unit(),
        progress.baseline_runs.len(),
        progress.noise,
        settings.min_gain
    ));
    if let Some(guard) = &settings.guard {
        out.push_str(&format!("Guard:       {guard}  (must pass for a change to be kept)\n"));
    }
    out.push_str(&format!(
        "Checkpoints: the baseline is {}; a discarded change is rolled back to the best\n",
        checkpoint_ref(&state.meta.loop_id, 0)
    ));
    if settings.target.is_some_and(|t| t.is_met_by(progress.baseline.0)) {
        out.push_str("Note:        the baseline already meets the target; the first stop that keeps it ends the loop\n");
    }
    if !lessons.is_empty() {
        out.push_str(
            "\nLessons from earlier metric loops here (value, change from the best then, the change):\n",
        );
        for lesson in lessons {
            out.push_str(&format!("  - {}\n", lesson.line()));
        }
    }
    Some(out)
}
