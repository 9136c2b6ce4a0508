//! The words of a metric loop: the re-injected prompt after a keep or a discard, the status
//! line, and the headline when the loop ends or parks.

use std::path::Path;

use crate::checks::oracle_change::OracleChange;
use crate::checks::verify::VerifyOutcome;
use crate::metric::keep::{self, Discard, Judgement, MetricFacts, MetricProgress, MetricSettings, Rung};
use crate::store::reason_code::ReasonCode;
use crate::store::state::LoopState;
use crate::verdict::message::REASON_BUDGET;

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
    state_path: &Path,
    oracle: &[OracleChange],
) -> String {
    let (Some(settings), Some(after)) = (&state.meta.settings.metric, &state.meta.metric) else {
        return state.task.clone();
    };
    let mut status = progress(state, settings, after, step);
    if !oracle.is_empty() {
        status.push_str(&oracle_notice(oracle));
    }
    let history = keep::history(after);
    if !history.is_empty() {
        status.push_str(&format!("\nLast attempts:\n{history}"));
    }
    if let Some(note) = keep::rung_note(step.rung, after.ladder, settings) {
        status.push_str(&format!("\n{note}\n"));
    }
    let advice = "\nMake one focused change, run the metric yourself to see its number, then end your turn: \
                  the loop measures it again and keeps or rolls it back. Do not change the metric command or the \
                  files it runs.";
    let mut reason = task_or_reference(state, state_path, status.chars().count() + advice.len());
    reason.push_str(&status);
    if let Some((command, outcome)) = failed_check(state, settings, step) {
        let room = REASON_BUDGET.saturating_sub(reason.chars().count() + advice.len() + 80);
        reason.push_str(&format!(
            "\n`{command}` failed ({}); correctness comes first. Its output:\n```text\n{}\n```\n",
            outcome.describe(),
            outcome.output.excerpt(room).replace("```", "'''").trim_end()
        ));
    }
    reason.push_str(advice);
    reason
}

/// How metric mode works, then this attempt's outcome and the progress so far.
fn progress(state: &LoopState, settings: &MetricSettings, after: &MetricProgress, step: &Step<'_>) -> String {
    let meta = &state.meta;
    let mut status = format!(
        "\n\n---\nfor-loop (metric mode): this is iteration {} of {}. The loop keeps each change that makes {} \
         better and rolls back each one that does not; it ends when {}.\n\n",
        meta.iteration,
        meta.settings.max_iterations,
        format_args!("`{}` {}", settings.command, settings.direction.word()),
        match settings.target {
            Some(target) => format!("a kept state measures {target}"),
            None => "the iterations are used up".into(),
        },
    );
    status.push_str(&keep::outcome_line(step.before, &step.facts.measured, step.judgement));
    status.push_str(&format!(
        ".\nBaseline → best: {} (noise floor {}, {} kept, {} discarded).\n",
        after.baseline_to_best(),
        after.noise,
        after.keeps,
        after.discards
    ));
    status
}

/// What the re-injection says about the metric's changed files.
fn oracle_notice(oracle: &[OracleChange]) -> String {
    let names: Vec<String> =
        oracle.iter().map(|c| format!("{} ({})", c.path, format!("{:?}", c.kind).to_lowercase())).collect();
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

/// The task, or where to read it when it would crowd out the failed check's output beside the
/// `rest` of the prompt.
fn task_or_reference(state: &LoopState, state_path: &Path, rest: usize) -> String {
    let task = state.task.trim_end().to_string();
    if task.chars().count() + rest + 1_500 > REASON_BUDGET {
        format!(
            "Your task is {} characters long, too long to repeat here. Read it in full, below the settings, in {}.",
            state.task.chars().count(),
            state_path.display()
        )
    } else {
        task
    }
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
