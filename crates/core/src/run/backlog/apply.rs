//! `run --apply RUN` for a backlog run: the integration branch's change (base to head) applied
//! to the user's working tree with `git apply` (nothing staged or committed), then every landed
//! task's check and `--verify` run there; when one fails, the change is taken back. Every task
//! that did not land is named, with why.

use std::path::PathBuf;
use std::time::Duration;

use super::record::BacklogRun;
use super::schedule::not_landed;
use crate::checks::verify::VerifySpec;
use crate::store::Store;
use crate::support::environment::Environment;
use crate::support::outcome::Outcome;
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
    match user.resolve(&format!("{integration}^{{commit}}")) {
        Ok(head) if head == run.expected_head() => {}
        Ok(head) => {
            return refuse(format!(
                "{integration} is on {head}, where the merge queue did not put it (it left it on {}): it was \
                 moved outside the queue, so nothing is applied. `loop-hook run --resume {}` puts it back",
                run.expected_head(),
                run.id
            ));
        }
        Err(e) => return refuse(format!("cannot read {integration}: {e}")),
    }
    let diff = match user.binary_diff(&run.base, run.expected_head()) {
        Ok(diff) => diff,
        Err(e) => return refuse(format!("cannot read the run's change ({integration}): {e}")),
    };
    if diff.is_empty() {
        return Outcome::ok(format!(
            "for-loop: the landed tasks of backlog run {} changed nothing.{missing}",
            run.id
        ));
    }
    if let Err(why) = user.patch_applies(&diff) {
        if user.holds_patch(&diff) {
            return Outcome::ok(format!(
                "for-loop: backlog run {}'s change is already in the working tree.{missing}",
                run.id
            ));
        }
        return refuse(format!(
            "the run's change conflicts with local changes in {}; nothing was changed. Commit or stash yours, \
             then run `loop-hook run --apply {}` again (see the change with `git diff {} {integration}`).\n  {}",
            run.repo.display(),
            run.id,
            run.base,
            why.to_string().trim()
        ));
    }
    let stat = match user.apply_patch(&diff) {
        Ok(stat) => stat,
        Err(e) => return refuse(format!("git apply failed: {e}")),
    };
    let mut checks: Vec<String> = Vec::new();
    for check in landed.into_iter().map(|(_, check)| check).chain(run.verify.clone()) {
        if !checks.contains(&check) {
            checks.push(check);
        }
    }
    let cwd = run.repo.join(&run.prefix);
    let sandbox = if crate::checks::sandbox::sandbox_unavailable().is_none() {
        let read_only = crate::checks::sandbox::read_only_paths(env, store.root());
        crate::checks::sandbox::verify_sandbox(&cwd, &read_only)
    } else {
        Vec::new()
    };
    for command in &checks {
        if let Err(failed) = run_check(command, &cwd, &sandbox) {
            let undone = match user.take_back_patch(&diff) {
                Ok(()) => "The change was taken back: your working tree is as it was.".to_string(),
                Err(e) => format!(
                    "Taking the change back failed ({e}): undo it with `git diff {} {integration} | git apply -R`.",
                    run.base
                ),
            };
            return refuse(format!(
                "the landed tasks of backlog run {} pass on the integration branch, but {failed}\n{undone}{missing}",
                run.id
            ));
        }
    }
    Outcome::ok(format!(
        "for-loop: applied backlog run {} to the working tree (nothing staged or committed); {} pass here:\n{stat}{missing}",
        run.id,
        checks.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
    ))
}

/// One check in the user's working tree: `Err` says how it failed.
fn run_check(command: &str, cwd: &std::path::Path, sandbox: &[std::ffi::OsString]) -> Result<(), String> {
    let spec = VerifySpec {
        command: command.to_string(),
        cwd: PathBuf::from(cwd),
        timeout: Duration::from_secs(600),
        sandbox: sandbox.to_vec(),
    };
    match spec.run() {
        Ok(outcome) if outcome.passed() => Ok(()),
        Ok(outcome) => Err(format!(
            "`{command}` fails in your working tree ({}):\n{}",
            outcome.describe(),
            outcome.output.last_lines(12, 2_000)
        )),
        Err(e) => Err(format!("`{command}` could not run in your working tree: {e}")),
    }
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
