//! `run --apply RUN` for a backlog run: every landed task's check and `--verify` run in a clean
//! copy of the integration head, held to what the merge queue counted there; only when they pass
//! is the integration branch's change (base to head) applied to the user's working tree with
//! `git apply` (nothing staged or committed). Every task that did not land is named, with why.

use std::ffi::OsString;
use std::time::Duration;

use super::queue::Queue;
use super::record::BacklogRun;
use super::schedule::not_landed;
use crate::commands::LoopRequest;
use crate::store::Store;
use crate::support::Environment;
use crate::support::Outcome;
use crate::worktree::WorkTree;

pub(super) fn apply(env: &Environment, store: &Store, run: &BacklogRun) -> Outcome {
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --apply: {what}"));
    let user = WorkTree::open(&env.cwd);
    if !user.is_git() || user.root() != run.repo {
        return refuse(format!(
            "backlog run {} was made in {}; run --apply there",
            run.id,
            run.repo.display()
        ));
    }
    let landed = run.landed();
    let missing = not_landed_lines(run);
    if landed.is_empty() {
        return refuse(format!(
            "no task of backlog run {} landed, so there is nothing to apply.{missing}",
            run.id
        ));
    }
    let integration = run.integration_ref();
    let diff = match change_to_apply(&user, run, &missing) {
        Ok(diff) => diff,
        Err(outcome) => return outcome,
    };
    // Judged first in a clean copy of the integration head, as the queue judged it (ignored files
    // removed, the test counts it recorded): the user's tree is touched only after they pass,
    // and no check runs in it, so nothing a check leaves behind (a `__pycache__`, a build
    // directory) lands there that the integration branch lacks.
    let checks = match check_clean_copy(env, store, run, &user, &landed) {
        Ok(checks) => checks,
        Err(failed) => {
            return refuse(format!(
                "the landed tasks of backlog run {} do not pass in a clean copy of {integration}; nothing was \
                 changed:\n{}{missing}",
                run.id,
                failed.trim_end()
            ));
        }
    };
    let stat = match user.apply_patch(&diff) {
        Ok(stat) => stat,
        Err(e) => return refuse(format!("git apply failed: {e}")),
    };
    Outcome::ok(format!(
        "for-loop: applied backlog run {} to the working tree (nothing staged or committed); {} pass in a clean \
         copy of {integration}:\n{stat}{missing}",
        run.id,
        checks.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
    ))
}

/// The run's change as a patch that applies to the user's working tree, or what ends `--apply`
/// before anything is run or changed: the integration ref moved outside the queue, a change that
/// is empty or already applied, a conflict with local changes.
fn change_to_apply(user: &WorkTree, run: &BacklogRun, missing: &str) -> Result<Vec<u8>, Outcome> {
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --apply: {what}"));
    let integration = run.integration_ref();
    match user.resolve(&format!("{integration}^{{commit}}")) {
        Ok(head) if head == run.expected_head() => {}
        Ok(head) => {
            return Err(refuse(format!(
                "{integration} is on {head}, where the merge queue did not put it (it left it on {}): it was \
                 moved outside the queue, so nothing is applied. `loop-hook run --resume {}` puts it back",
                run.expected_head(),
                run.id
            )));
        }
        Err(e) => return Err(refuse(format!("cannot read {integration}: {e}"))),
    }
    let diff = user
        .binary_diff(&run.base, run.expected_head())
        .map_err(|e| refuse(format!("cannot read the run's change ({integration}): {e}")))?;
    if diff.is_empty() {
        return Err(Outcome::ok(format!(
            "for-loop: the landed tasks of backlog run {} changed nothing.{missing}",
            run.id
        )));
    }
    if let Err(why) = user.patch_applies(&diff) {
        if user.holds_patch(&diff) {
            return Err(Outcome::ok(format!(
                "for-loop: backlog run {}'s change is already in the working tree.{missing}",
                run.id
            )));
        }
        return Err(refuse(format!(
            "the run's change conflicts with local changes in {}; nothing was changed. Commit or stash yours, \
             then run `loop-hook run --apply {}` again (see the change with `git diff {} {integration}`).\n  {}",
            run.repo.display(),
            run.id,
            run.base,
            why.to_string().trim()
        )));
    }
    Ok(diff)
}

/// Every landed task's check and `--verify`, run in a new work tree at the integration head,
/// which is removed after: the commands that passed, or what failed.
fn check_clean_copy(
    env: &Environment,
    store: &Store,
    run: &BacklogRun,
    user: &WorkTree,
    landed: &[(u32, String)],
) -> Result<Vec<String>, String> {
    let copy = BacklogRun::dir(store, &run.id).join("apply");
    // A copy an interrupted --apply left: made again, so nothing of an earlier run is in it.
    crate::run::attempts::remove_tree(&copy);
    let allow_test_edits = crate::run::RunOptions::parse(run.words.iter().map(OsString::from).collect())
        .ok()
        .and_then(|options| LoopRequest::checks_only(&options.loop_flags).ok())
        .is_some_and(|request| request.allow_test_edits);
    let checked =
        Queue::open(user, &copy, &run.integration_ref(), &run.base, landed.to_vec()).and_then(|queue| {
            queue
                .checking(&run.prefix, run.verify.clone(), Duration::from_secs(600))
                .sandboxed(
                    crate::checks::sandbox::sandbox_unavailable().is_none(),
                    super::read_only(env, store, &run.repo),
                )
                .allowing_test_edits(allow_test_edits)
                .with_test_records(run.tests.clone())
                .check_head()
        });
    crate::run::attempts::remove_tree(&copy);
    checked
}

/// The tasks that did not land, one line each, for the end of what `--apply` says.
fn not_landed_lines(run: &BacklogRun) -> String {
    let mut lines = String::new();
    for (n, reason, what) in not_landed(run) {
        let title = run.tasks.iter().find(|t| t.task.n == n).map_or("", |t| t.task.title.as_str());
        lines.push_str(&format!("\n  task {n} ({title}) did not land ({reason}): {what}"));
    }
    lines
}
