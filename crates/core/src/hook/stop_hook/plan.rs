//! The end of a plan (`--plan`): at the stop where its last story passed, every other story's
//! check and the loop's own `--verify` run again, in order, each as verify runs. The first that
//! fails makes its story current again; the plan is done only when all pass at one stop.

use std::ffi::OsString;
use std::time::Duration;

use crate::checks::plan::PlanSweep;
use crate::checks::verify::{VerifyOutcome, VerifySpec};
use crate::store::state::LoopState;
use crate::verdict::decision;
use crate::verdict::facts::StopFacts;

/// The check that runs at this stop (the current story's in a plan loop, else `--verify`), run
/// as verify runs: its outcome, or why it could not run. `(None, None)` without a check.
pub(super) fn run_current_check(
    state: &LoopState,
    sandbox: &[OsString],
) -> (Option<VerifyOutcome>, Option<String>) {
    let Some(command) = crate::verdict::plan_message::current_check(state) else { return (None, None) };
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

/// Runs the plan's checks again when this stop's story was the last; `None` otherwise.
pub(super) fn sweep(state: &LoopState, facts: &StopFacts<'_>, sandbox: &[OsString]) -> Option<PlanSweep> {
    let (plan, progress) = (state.meta.settings.plan.as_ref()?, state.meta.plan.as_ref()?);
    if !decision::awaits_sweep(state, facts) {
        return None;
    }
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
                let mut output = crate::checks::capture::Captured::default();
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
