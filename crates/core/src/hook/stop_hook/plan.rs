//! A plan loop's stop (`--plan`): the current story's check, the plan's boxes ticked that the
//! loop has not verified, the end of the plan, and the boxes set after the verdict.
//!
//! At the stop where its last story passed, every other story's check and the loop's own
//! `--verify` run again, in order, each as verify runs. The first that fails makes its story
//! current again; the plan is done only when all pass at one stop.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::checks::PlanSweep;
use crate::checks::plan;
use crate::checks::{ChangeKind, OracleChange};
use crate::checks::{VerifyOutcome, VerifySpec};
use crate::state::LoopState;

/// The check that runs at this stop (the current story's in a plan loop, else `--verify`), run
/// as verify runs: its outcome, or why it could not run. `(None, None)` without a check.
pub(super) fn run_current_check(
    state: &LoopState,
    sandbox: &[OsString],
) -> (Option<VerifyOutcome>, Option<String>) {
    let Some(command) = state.current_check() else { return (None, None) };
    match check_spec(state, command, sandbox).run() {
        Ok(outcome) => (Some(outcome), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// `command` run as verify runs: in the loop's directory and tier, with verify's timeout.
pub(super) fn check_spec(state: &LoopState, command: &str, sandbox: &[OsString]) -> VerifySpec {
    VerifySpec {
        command: command.to_string(),
        cwd: state.meta.cwd.clone(),
        timeout: Duration::from_secs(state.meta.settings.verify_timeout_secs),
        sandbox: sandbox.to_vec(),
    }
}

/// Runs every other story's check and `--verify` again, in order, up to the first that fails
/// (this stop's story was the last to pass: [`crate::verdict::decision::Ask::Sweep`]); `None`
/// for a loop without a plan.
pub(super) fn run_sweep(state: &LoopState, sandbox: &[OsString]) -> Option<PlanSweep> {
    let (plan, progress) = (state.meta.settings.plan.as_ref()?, state.meta.plan.as_ref()?);
    let verify = state.meta.settings.verify.as_deref();
    let stories = (0..plan.stories.len())
        .filter(|&i| i != progress.current)
        .filter_map(|i| plan.check(i, verify).map(|check| (Some(i), check)));
    let checks = stories.chain(verify.map(|check| (None, check)));
    for (index, command) in checks {
        match check_spec(state, command, sandbox).run() {
            Ok(outcome) if outcome.passed() => {}
            Ok(outcome) => return Some(PlanSweep { broken: Some((index, outcome)) }),
            Err(e) => {
                let mut output = crate::checks::Captured::default();
                output.push(format!("it could not run: {e}\n").as_bytes());
                let outcome = VerifyOutcome {
                    exit_code: None,
                    signal: None,
                    timed_out: false,
                    untrusted: None,
                    duration: Duration::ZERO,
                    output,
                };
                return Some(PlanSweep { broken: Some((index, outcome)) });
            }
        }
    }
    Some(PlanSweep { broken: None })
}

/// The plan's boxes ticked that the loop has not verified, as changes of the check: a story is
/// claimed by its check passing, never by its box.
pub(super) fn unverified_ticks(state: &LoopState) -> Vec<OracleChange> {
    let (Some(plan), Some(progress)) = (&state.meta.settings.plan, &state.meta.plan) else {
        return Vec::new();
    };
    let ticked = plan::unverified_ticks(&state.meta.cwd.join(&plan.file), progress);
    ticked
        .into_iter()
        .filter_map(|i| plan.stories.get(i))
        .map(|story| OracleChange {
            path: format!("{}, the box of story {}", plan.file, story.label()),
            kind: ChangeKind::Ticked,
        })
        .collect()
}

/// Sets the boxes in the user's plan file of the stories this stop passed or found broken, from
/// `before` (the loop as the stop found it) to `after` (as committed). Best effort: the loop's
/// record is the state, never the file, so a box that cannot be set is one line for the user
/// (`Some`) and nothing else. A loop in a work tree of for-loop's own under `store_root` (an
/// attempt of `loop-hook run --attempts`) leaves its copy of the plan alone: the winner's change
/// is applied to the user's tree, where a changed plan would be a change of the check.
pub(super) fn tick_boxes(before: &LoopState, after: &LoopState, store_root: &Path) -> Option<String> {
    let plan = after.meta.settings.plan.as_ref().filter(|plan| !plan.no_tick)?;
    if after.meta.cwd.starts_with(store_root) {
        return None;
    }
    let (was, now) = (before.meta.plan.as_ref()?, after.meta.plan.as_ref()?);
    let path = after.meta.cwd.join(&plan.file);
    let mut cleared = false;
    let failed: Vec<String> = (plan.stories.iter().enumerate())
        .filter_map(|(i, story)| {
            let done = now.stories.get(i)?.done;
            if was.stories.get(i)?.done == done {
                return None;
            }
            let e = plan::tick(&path, story, i, done).err()?;
            cleared |= !done;
            let what = if done { "tick" } else { "clear" };
            Some(format!("could not {what} the box of story {} in {} ({e})", story.label(), plan.file))
        })
        .collect();
    if failed.is_empty() {
        return None;
    }
    let advice = if cleared {
        " Clear that box by hand: a ticked box the loop has not verified counts as a change of the check."
    } else {
        ""
    };
    Some(format!(
        "for-loop: {}; the loop's own record of its stories is kept and it goes on.{advice}",
        failed.join("; ")
    ))
}
