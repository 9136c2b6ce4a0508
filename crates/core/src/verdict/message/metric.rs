//! The words of a metric loop: the re-injected prompt after a keep or a discard, the status
//! line, and the headline when the loop ends or parks.

use crate::checks::OracleChange;
use crate::checks::VerifyOutcome;
use crate::metric::{Discard, Judgement, MetricFacts, MetricProgress, MetricSettings, Rung, keep};
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::verdict::facts::LoopFiles;
use crate::verdict::message::reinjection::Reinjection;

/// What a metric stop decided, for the words.
pub(crate) struct Step<'a> {
    pub before: &'a MetricProgress,
    pub facts: &'a MetricFacts,
    pub judgement: &'a Judgement,
    pub rung: Rung,
    pub verify: Option<&'a VerifyOutcome>,
}

/// The prompt that keeps the agent working. `state` is the loop after this stop.
pub(crate) fn reinjection(
    state: &LoopState,
    step: &Step<'_>,
    files: &LoopFiles,
    oracle: &[OracleChange],
) -> String {
    let (Some(settings), Some(after)) = (&state.meta.settings.metric, &state.meta.metric) else {
        return state.task.clone();
    };
    let mut notices = vec![progress(after, step)];
    if !oracle.is_empty() {
        notices.push(rolled_back_notice(oracle));
    }
    let history = keep::history(after);
    if !history.is_empty() {
        notices.push(format!("\nLast attempts:\n{history}"));
    }
    if let Some(note) = keep::rung_note(step.rung, after.ladder, settings) {
        notices.push(format!("\n{note}\n"));
    }
    let failed = failed_check(state, settings, step);
    Reinjection {
        task: &state.task,
        files,
        headline: headline_of(state, settings),
        notices,
        failed: failed.as_ref().map_or_else(String::new, |(command, outcome)| {
            format!("\n`{command}` failed ({}); correctness comes first. Its output:\n", outcome.describe())
        }),
        output: failed.map(|(_, outcome)| outcome),
        change: None,
        budget: crate::verdict::message::reinjection::budget_chars(state.meta.settings.feedback_tokens),
        rules: "\nMake one focused change, run the metric yourself to see its number, then end your turn: \
                the loop measures it again and keeps or rolls it back. Do not change the metric command or the \
                files it runs."
            .into(),
    }
    .to_string()
}

/// How metric mode works: the re-injection's headline.
fn headline_of(state: &LoopState, settings: &MetricSettings) -> String {
    let meta = &state.meta;
    format!(
        "\n\n---\nfor-loop (metric mode): this is iteration {} of {}. The loop keeps each change that makes {} \
         better and rolls back each one that does not; it ends when {}.\n\n",
        meta.iteration,
        meta.settings.max_iterations,
        format_args!("`{}` {}", settings.command, settings.direction.word()),
        match settings.target {
            Some(target) => format!("a kept state measures {target}"),
            None => "the iterations are used up".into(),
        },
    )
}

/// This attempt's outcome and the progress so far.
fn progress(after: &MetricProgress, step: &Step<'_>) -> String {
    let mut status = keep::outcome_line(step.before, &step.facts.measured, step.judgement);
    status.push_str(&format!(
        ".\nBaseline → best: {} (noise floor {}, {} kept, {} discarded).\n",
        after.baseline_to_best(),
        after.noise,
        after.keeps,
        after.discards
    ));
    status
}

/// What the re-injection says about the metric's changed files, which were rolled back.
fn rolled_back_notice(oracle: &[OracleChange]) -> String {
    let names: Vec<String> = oracle.iter().map(ToString::to_string).collect();
    format!(
        "\nThe files the metric, guard or verify command runs were changed ({}); a metric that changes its own \
         definition does not count. They were rolled back with your change.\n",
        names.join(", ")
    )
}

/// The command whose failure discarded this attempt, and its run: the guard, or else verify.
fn failed_check<'a>(
    state: &LoopState,
    settings: &MetricSettings,
    step: &Step<'a>,
) -> Option<(String, &'a VerifyOutcome)> {
    if !matches!(step.judgement, Judgement::Discarded(Discard::GuardFailed)) {
        return None;
    }
    step.facts
        .guard
        .as_ref()
        .filter(|g| !g.passed())
        .map(|g| (settings.guard.clone().unwrap_or_default(), g))
        .or_else(|| {
            step.verify
                .filter(|v| !v.passed())
                .map(|v| (state.meta.settings.verify.clone().unwrap_or_default(), v))
        })
}

/// One line for the user at a blocked stop.
pub(crate) fn status_line(state: &LoopState, step: &Step<'_>) -> String {
    let line = keep::outcome_line(step.before, &step.facts.measured, step.judgement);
    let short = line.split(';').next().unwrap_or(&line).to_string();
    format!("for-loop {}/{} · {short}", state.meta.iteration, state.meta.settings.max_iterations)
}

/// The headline of a metric loop that ends or parks, when its reason is metric mode's own.
pub(crate) fn headline(state: &LoopState, code: ReasonCode) -> Option<String> {
    let meta = &state.meta;
    let (settings, progress) = (meta.settings.metric.as_ref()?, meta.metric.as_ref()?);
    let at = format!("{}/{}", meta.iteration, meta.settings.max_iterations);
    match code {
        ReasonCode::TargetMet => Some(format!(
            "for-loop: done, target {} met at iteration {at}: {} (baseline → best).",
            settings.target.map(|t| t.to_string()).unwrap_or_default(),
            progress.baseline_to_best()
        )),
        ReasonCode::MetricPlateau => Some(format!(
            "for-loop: parked at iteration {at}: {} pivots without a keep; best {} (baseline → best). The loop is kept.",
            progress.ladder.pivots,
            progress.baseline_to_best()
        )),
        _ => None,
    }
}

/// A metric loop's re-injection, through [`crate::verdict::decision::decide`].
#[cfg(test)]
mod tests {

    use crate::checks::oracle::{ChangeKind, OracleChange};
    use crate::checks::verify::VerifyOutcome;
    use crate::metric::keep::{Measured, MetricFacts, MetricProgress};
    use crate::state::LoopState;
    use crate::state::sample;
    use crate::verdict::decision::{Verdict, decide};
    use crate::verdict::facts::StopFacts;
    use crate::verdict::message::review::tests::facts;

    fn metric_loop(guard: Option<&str>) -> LoopState {
        let mut state = sample();
        state.meta.settings.verify = None;
        let mut settings = crate::metric::keep::tests::settings();
        settings.guard = guard.map(str::to_string);
        state.meta.settings.metric = Some(settings);
        state.meta.metric = Some(MetricProgress::at_baseline(&[131.0], Some("ms".into())));
        state
    }

    fn run(exit: i32, output: &str) -> VerifyOutcome {
        VerifyOutcome::exited(exit, output)
    }

    fn reason(state: &LoopState, facts: StopFacts<'_>) -> String {
        match decide(state, facts).verdict {
            Verdict::Block { reason } => reason,
            Verdict::Allow => panic!("expected a block"),
        }
    }

    #[test]
    fn a_changed_check_is_named_in_words_not_by_its_rust_name() {
        let state = metric_loop(None);
        let attempt = MetricFacts {
            measured: Measured::Value { value: 100.0, name: Some("ms".into()) },
            guard: None,
            summary: "bench.sh: 1 line".into(),
        };
        let changes = [
            OracleChange { path: "bench.sh".into(), kind: ChangeKind::ChangedDuringVerify },
            OracleChange { path: "data.txt".into(), kind: ChangeKind::Modified },
        ];
        let unused = run(0, "");
        let shown = reason(
            &state,
            StopFacts {
                verify: None,
                metric: Some(&attempt),
                oracle_changes: &changes,
                ..facts(&unused, None)
            },
        );
        assert!(
            shown.contains("were changed (bench.sh (changed while verify ran), data.txt (modified));"),
            "{shown}"
        );
        assert!(!shown.contains("changedduringverify"), "{shown}");
    }

    #[test]
    fn a_failed_guard_shows_its_output_in_a_fence_it_cannot_close() {
        let state = metric_loop(Some("sh guard.sh"));
        let guard = run(1, "guard says no\n```\n");
        let attempt = MetricFacts {
            measured: Measured::Value { value: 100.0, name: Some("ms".into()) },
            guard: Some(guard),
            summary: "bench.sh: 1 line".into(),
        };
        let unused = run(0, "");
        let shown =
            reason(&state, StopFacts { verify: None, metric: Some(&attempt), ..facts(&unused, None) });
        assert!(
            shown.contains(
                "`sh guard.sh` failed (exit 1); correctness comes first. Its output:\n\n````text\nguard says no\n```\n````\n"
            ),
            "{shown}"
        );
        assert!(shown.starts_with("fix the login"), "the task comes first: {shown}");
        assert!(shown.ends_with("Do not change the metric command or the files it runs."), "{shown}");
    }
}
