//! The reviewer's run at a stop whose check passed ([`crate::checks::review`]): what it is shown
//! (the task, the check, the change since the loop started) and the run itself, in verify's tier:
//! a command as verify runs, or the built-in agent ([`crate::checks::review`]), which in
//! the strict tier runs in a sandbox of its own where the project is read-only.

use std::ffi::OsString;

use crate::checks::VerifyOutcome;
use crate::checks::{Change, ReviewInput, ReviewOutcome, VerifySeen, review};
use crate::host::Agent;
use crate::host::UsageCursor;
use crate::state::LoopState;
use crate::support::Environment;
use crate::worktree::WorkTree;

/// Runs the loop's reviewer (a command, or an agent that asks its model) on this stop's passing
/// check, `verified` (a reviewer never sees a failure, so it cannot turn one into a pass:
/// [`crate::verdict::decision::Ask::Review`]); `None` when the loop has no reviewer or no check.
/// `now` is the tree the scope was read from at this stop, which is the tree now.
pub(super) fn run_reviewer(
    env: &Environment,
    state: &LoopState,
    verified: &VerifyOutcome,
    now: Option<&str>,
    worktree: &WorkTree,
    sandbox: &[OsString],
) -> Option<ReviewOutcome> {
    let settings = state.meta.settings.review.as_ref()?;
    // What passed: the current story's check in a plan loop, otherwise `--verify`.
    let verify_command = state.current_check()?;
    let change = change_since_start(state, worktree, now);
    let story = current_story(state);
    let input = ReviewInput {
        task: &state.task,
        story: story.as_deref(),
        iteration: state.meta.iteration,
        verify: VerifySeen::of(verify_command, verified),
        change: &change,
    };
    Some(match settings.agent() {
        Some(agent) => by_agent(env, state, agent, &input, sandbox),
        None => review::run_reviewer(&super::plan::check_spec(state, &settings.command, sandbox), &input),
    })
}

/// The built-in reviewer's run: the CLI found as `env` names it, with the variables it needs to
/// reach its model, in a read-only sandbox of its own when verify has one (the strict tier).
fn by_agent(
    env: &Environment,
    state: &LoopState,
    agent: Agent,
    input: &ReviewInput<'_>,
    verify_sandbox: &[OsString],
) -> ReviewOutcome {
    let sandbox = if verify_sandbox.is_empty() {
        Vec::new()
    } else {
        crate::checks::sandbox::review_sandbox(&state.meta.cwd, &agent.config_paths(env))
    };
    let spec = super::plan::check_spec(state, agent.program(), &sandbox);
    let vars = agent
        .own_variables()
        .iter()
        .filter_map(|name| env.var(name).map(|value| (*name, value.to_string())))
        .collect();
    let program = agent.find(env);
    crate::checks::review::ask_reviewer_agent(
        agent,
        program.as_deref().map_err(String::as_str),
        &spec,
        input,
        vars,
    )
}

/// The loop's usage with the tokens the reviewer reported added: they count toward
/// `--max-tokens` as the session's own do. A host whose transcript gives no usage starts from
/// the loop's last count, and one that gave none yet from an empty one, which the next read of
/// the transcript, finding no file read, reads from the loop's start.
pub(super) fn counted(
    state: &LoopState,
    usage: Option<UsageCursor>,
    review: Option<&ReviewOutcome>,
) -> Option<UsageCursor> {
    let spent = review.map(|r| &r.usage).filter(|u| !u.0.is_empty());
    let Some(spent) = spent else { return usage };
    let mut counted = usage.or_else(|| state.meta.usage.clone()).unwrap_or_default();
    counted.used.merge(spent);
    Some(counted)
}

/// A plan loop's current story, as the model was given it; `None` without a plan.
fn current_story(state: &LoopState) -> Option<String> {
    let progress = state.meta.plan.as_ref()?;
    Some(crate::verdict::message::plan::story_brief(state, progress.current).trim().to_string())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::usage::{TokenCounts, Usage};
    use crate::state::sample;

    fn spent(input: u64) -> ReviewOutcome {
        let mut usage = Usage::default();
        usage.add("claude-sonnet-4-5", TokenCounts { input, ..TokenCounts::default() });
        ReviewOutcome { usage, ..review::not_run("test") }
    }

    #[test]
    fn the_reviewers_tokens_join_the_loops_usage_wherever_it_stands() {
        let state = sample();
        let review = spent(700);
        // No usage read yet: the reviewer's tokens alone, in a cursor that has read no file.
        let alone = counted(&state, None, Some(&review)).unwrap();
        assert_eq!(alone.used.total().counted(), 700);
        assert_eq!(alone.transcript, std::path::PathBuf::new());
        // Read this stop, or kept from the last: added to what was read.
        let mut read = UsageCursor::default();
        read.used.add("claude-sonnet-4-5", TokenCounts { input: 300, ..TokenCounts::default() });
        assert_eq!(counted(&state, Some(read.clone()), Some(&review)).unwrap().used.total().counted(), 1000);
        let mut earlier = sample();
        earlier.meta.usage = Some(read.clone());
        assert_eq!(counted(&earlier, None, Some(&review)).unwrap().used.total().counted(), 1000);
        // A reviewer that reported nothing, or none at all, changes nothing.
        assert_eq!(counted(&state, Some(read.clone()), Some(&review::not_run("x"))), Some(read.clone()));
        assert_eq!(counted(&state, None, None), None);
    }
}
