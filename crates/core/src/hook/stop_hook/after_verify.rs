//! What runs after verify at a stop whose check passed: the end of a plan (every story's check
//! again, [`super::plan`]) and then the reviewer ([`super::review`]). Both only ever take a pass
//! away, so neither runs when the check failed.

use std::ffi::OsString;

use crate::checks::oracle_change::OracleChange;
use crate::checks::plan::PlanSweep;
use crate::checks::review::ReviewOutcome;
use crate::store::state::LoopState;
use crate::support::environment::Environment;
use crate::verdict::facts::StopFacts;
use crate::worktree::WorkTree;

/// The plan's sweep and the reviewer's verdict, where they ran.
#[derive(Debug, Default)]
pub(super) struct AfterVerify {
    pub(super) plan: Option<PlanSweep>,
    pub(super) review: Option<ReviewOutcome>,
}

impl AfterVerify {
    /// Runs the plan's sweep, then the reviewer, each when this stop calls for it. `facts` says
    /// what verify found; the sweep goes into the facts the reviewer is asked on.
    #[allow(clippy::large_types_passed_by_value)] // a `Copy` bundle of borrows, as `decide` takes it
    pub(super) fn run(
        env: &Environment,
        state: &LoopState,
        facts: StopFacts<'_>,
        worktree: &WorkTree,
        sandbox: &[OsString],
    ) -> AfterVerify {
        let plan = super::plan::sweep(state, &facts, sandbox);
        let review = super::review::at_stop(
            env,
            state,
            &StopFacts { plan: plan.as_ref(), ..facts },
            worktree,
            sandbox,
        );
        AfterVerify { plan, review }
    }

    /// The check's files that differ now, after the sweep and the reviewer ran, and are not in
    /// `known` already: a check changed while they ran does not count either.
    pub(super) fn late_oracle_changes(&self, state: &LoopState, known: &[OracleChange]) -> Vec<OracleChange> {
        if self.plan.is_none() && self.review.is_none() {
            return Vec::new();
        }
        let mut now = state.meta.oracle.changes(&state.meta.cwd);
        now.extend(super::plan::unverified_ticks(state));
        now.into_iter().filter(|change| !known.iter().any(|k| k.path == change.path)).collect()
    }
}
