//! The reviewer's run at a stop whose check passed ([`crate::checks::review`]): what it is shown
//! (the task, the check, the change since the loop started) and the run itself, in verify's tier.

use std::ffi::OsString;

use crate::checks::review::{self, Change, ReviewInput, ReviewOutcome, VerifySeen};
use crate::store::state::LoopState;
use crate::verdict::decision;
use crate::verdict::facts::StopFacts;
use crate::worktree::WorkTree;

/// Runs the loop's reviewer when this stop's check passed; `None` when it has none or the check
/// did not pass (a reviewer never sees a failure, so it cannot turn one into a pass).
pub(super) fn at_stop(
    state: &LoopState,
    facts: &StopFacts<'_>,
    worktree: &WorkTree,
    sandbox: &[OsString],
) -> Option<ReviewOutcome> {
    let settings = state.meta.settings.review.as_ref()?;
    let (verify_command, verified) = (state.meta.settings.verify.as_deref()?, facts.verify?);
    if !decision::awaits_review(state, facts) {
        return None;
    }
    // The tree the scope was read from at this stop is the tree now: it is not written again.
    let now = facts.scope.and_then(|check| check.now.as_deref());
    let change = change_since_start(state, worktree, now);
    let story = current_story(state);
    let input = ReviewInput {
        task: &state.task,
        story: story.as_deref(),
        iteration: state.meta.iteration,
        verify: VerifySeen::of(verify_command, verified),
        change: &change,
    };
    Some(review::review(&super::plan::check_spec(state, &settings.command, sandbox), &input))
}

/// A plan loop's current story, as the model was given it; `None` without a plan.
fn current_story(state: &LoopState) -> Option<String> {
    let progress = state.meta.plan.as_ref()?;
    Some(crate::verdict::plan_message::story_brief(state, progress.current).trim().to_string())
}

/// The files changed and the diff since the loop's start (up to `now`, when the tree now was
/// read already), or why they are not known.
fn change_since_start(state: &LoopState, worktree: &WorkTree, now: Option<&str>) -> Change {
    let Some(baseline) = state.meta.baseline_tree.as_deref() else {
        return Change::unknown(
            "the loop's start was not recorded as a git tree (not a git repository)".into(),
        );
    };
    let now = now.map_or_else(|| worktree.tree_id(), |tree| Ok(tree.to_string()));
    let read = now.and_then(|now| {
        let files = worktree.changed_files(baseline, &now)?;
        Ok((files, worktree.unified_diff(baseline, &now)?))
    });
    match read {
        Ok((files, diff)) => Change::of(files, &diff),
        Err(e) => Change::unknown(format!("the change could not be read: {e}")),
    }
}
