//! A backlog run (`loop-hook run --backlog FILE --parallel N`): the stories of a plan file worked
//! as independent tasks, at most N agents at once, and merged back only when the whole still
//! passes.
//!
//! Design. Every task starts from one commit, a snapshot of the user's working tree, in a git
//! work tree of its own under the store (`backlog/RUN/tasks/N`), and is a `loop-hook run` loop
//! of its own (`backlog-RUN-N`): fresh session per iteration, the run sandbox, budgets, stall
//! breaker, reviewer, with the task's check as its verify. When a task's loop ends verified, its
//! work tree is kept as a commit on `refs/for-loop/backlog/RUN/tasks/N` and offered to the merge
//! queue ([`queue`]), which merges it onto `refs/for-loop/backlog/RUN/integration` in a work
//! tree of its own and runs, on the merged tree, the task's check, every landed task's check and
//! `--verify`. Only then does the integration ref move. A conflict or a broken check sends the
//! task back to its agent, its work tree reset to the merge (with the conflict markers) and the
//! conflict or the failing output in its next prompt; after `--max-merge-tries` it parks
//! (`merge_failed`). Nothing an agent says decides a merge.
//!
//! The user's branch and working tree are untouched until `run --apply`, which brings the
//! integration branch's change in only after every landed task's check and `--verify` pass
//! there too. The run is saved after every step (`backlog/RUN/run.json`): Ctrl-C parks every task
//! and leaves the work trees, and `run --resume RUN` goes on from where the run stopped, after a
//! Ctrl-C or a killed driver alike. The agents' sandbox is the attempts' one: the store (so other
//! tasks' work trees and the queue's) and the user's repository (so its refs) are read-only to
//! each agent, its own work tree writable.

mod apply;
mod events;
mod fleet;
mod queue;
mod record;
mod schedule;
mod status;
mod tasks;

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::json;

use super::RunOptions;
use super::attempts;
use super::sandbox::RunTier;
use crate::commands::{Flag, LoopRequest};
use crate::store::Store;
use crate::support::Environment;
use crate::support::{Code, Outcome};
use crate::worktree::WorkTree;
use events::Events;
use queue::Queue;
use record::{BacklogRun, Stage, TaskRun};
use schedule::Schedule;

/// A backlog across machines: `--task N`, `--merge` and `--list`.
pub(super) use fleet::{asked as fleet_asked, run as fleet};
pub(crate) use record::REFS;

/// `loop-hook status --all`: the store's backlog runs after its loops.
pub(crate) fn add_to_status(env: &Environment, stdout: &mut String, as_json: bool) {
    if let Ok(store) = Store::locate(env) {
        status::add_to(&store, stdout, as_json);
    }
}

/// Tasks merged this many times without landing park, unless `--max-merge-tries` says otherwise.
const DEFAULT_MERGE_TRIES: u32 = 3;

/// Options that do not go with `--backlog`, or backlog options without it.
pub(crate) fn misuse(options: &RunOptions) -> Option<&'static str> {
    if options.backlog.is_none() {
        return if options.parallel_count.is_some() {
            Some("--parallel N goes with --backlog FILE (with --attempts K, write just --parallel)")
        } else if options.max_merge_tries.is_some() {
            Some("--max-merge-tries goes with --backlog FILE")
        } else {
            None
        };
    }
    if options.attempts.is_some() {
        Some("--backlog works each task once, in a work tree of its own: leave out --attempts")
    } else if !options.task.trim().is_empty() {
        Some("--backlog FILE lists the tasks: leave out the task text (or quote the file name)")
    } else if options.loop_flags.has(Flag::Plan) {
        Some("--backlog FILE is read as a plan already: leave out --plan")
    } else if options.resume.is_some() || options.apply.is_some() || options.pick.is_some() {
        Some(
            "--backlog starts a new run: continue one with `loop-hook run --resume RUN`, apply it with `loop-hook run --apply RUN`",
        )
    } else if options.parallel && options.parallel_count.is_none() {
        Some("--parallel takes how many agents work at once with --backlog: --parallel N")
    } else {
        None
    }
}

/// Starts a backlog run and drives it to its end (or Ctrl-C).
pub(crate) fn run(env: &Environment, options: &RunOptions) -> Outcome {
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --backlog: {what}"));
    let Some(file) = options.backlog.as_deref() else { return refuse("no backlog file".into()) };
    // The run's own flags, checked as /for-loop checks them: `--verify` and its timeout.
    let checks = match LoopRequest::checks_only(&options.loop_flags) {
        Ok(checks) => checks,
        Err(e) => return refuse(e.to_string()),
    };
    let path = env.cwd.join(file);
    let tasks = match tasks::read(&path, checks.verify.as_deref()) {
        Ok(tasks) => tasks,
        Err(e) => return refuse(e),
    };
    let digest = tasks::digest(&path);
    if let Err(why) = RunTier::choose(options.sandbox) {
        return refuse(why);
    }
    attempts::sweep_orphans(env);
    let store = match Store::locate(env) {
        Ok(store) => store,
        Err(e) => return refuse(e.to_string()),
    };
    let user = WorkTree::open(&env.cwd);
    let start = match attempts::starting_point(env, &store, &user) {
        Ok(start) => start,
        Err(what) => return refuse(what.replace("drop --attempts", "drop --backlog")),
    };
    let id = attempts::group_id(env);
    let now = Timestamp::now();
    let mut run = BacklogRun {
        id: id.clone(),
        repo: start.repo,
        prefix: start.prefix,
        base: start.base,
        file: file.to_string(),
        path,
        digest,
        verify: checks.verify.clone(),
        parallel: options.parallel_count.unwrap_or(1),
        max_merge_tries: options.max_merge_tries.unwrap_or(DEFAULT_MERGE_TRIES),
        words: options.words.0.clone(),
        tasks: tasks
            .into_iter()
            .map(|task| TaskRun {
                loop_id: format!("backlog-{id}-{}", task.n),
                task,
                stage: Stage::Waiting,
                merge_tries: 0,
                started: false,
                millis: 0,
            })
            .collect(),
        head: None,
        tests: std::collections::BTreeMap::default(),
        started_at: now,
        updated_at: now,
    };
    if let Err(e) = run.save(&store) {
        return refuse(e);
    }
    let _ = user.update_ref(&format!("{REFS}/{id}/base"), &run.base);
    let tasks: Vec<_> = run.tasks.iter().map(|t| json!({"task": t.task.n, "title": t.task.title})).collect();
    Events::new(options.json).say(
        json!({"event": "backlog_started", "run": id, "tasks": tasks, "parallel": run.parallel}),
        &format!(
            "backlog run {id}: {} tasks from {file}, at most {} at once, merged onto {}",
            run.tasks.len(),
            run.parallel,
            run.integration_ref()
        ),
    );
    drive(env, options, &store, &user, run, checks.verify_timeout_secs)
}

/// Drives `run` until every task is landed or parked, or Ctrl-C, then says how it ended.
fn drive(
    env: &Environment,
    options: &RunOptions,
    store: &Store,
    user: &WorkTree,
    run: BacklogRun,
    timeout_secs: u64,
) -> Outcome {
    let before = attempts::RepoLook::take(user);
    let allow_test_edits =
        LoopRequest::checks_only(&options.loop_flags).is_ok_and(|request| request.allow_test_edits);
    if let Some(moved) = moved_integration(user, &run) {
        // Moved outside the queue (by hand, or by an agent outside its sandbox): put back where
        // the queue left it, so nothing lands on a head no check judged.
        let _ = user.update_ref(&run.integration_ref(), run.expected_head());
        Events::new(options.json).say(
            json!({"event": "integration_restored", "run": run.id, "was": moved}),
            &format!(
                "{} was moved outside the merge queue (to {moved}); it is put back to {}",
                run.integration_ref(),
                run.expected_head()
            ),
        );
    }
    let queue = Queue::open(
        user,
        &BacklogRun::queue_tree(store, &run.id),
        &run.integration_ref(),
        &run.base,
        run.landed(),
    )
    .map(|queue| {
        queue
            .checking(&run.prefix, run.verify.clone(), std::time::Duration::from_secs(timeout_secs.max(1)))
            .sandboxed(
                crate::checks::sandbox::sandbox_unavailable().is_none(),
                read_only(env, store, &run.repo),
            )
            .allowing_test_edits(allow_test_edits)
            .with_test_records(run.tests.clone())
            .protecting(&run.tasks.iter().map(|t| (t.task.n, t.task.check.clone())).collect::<Vec<_>>())
    });
    let queue = match queue {
        Ok(queue) => queue,
        Err(e) => return Outcome::refused(format!("for-loop: run --backlog: {e}")),
    };
    let mut schedule = Schedule::new(env, options, store, user.clone(), run, queue);
    schedule.drive();
    let run = schedule.run;
    if run.settled() {
        attempts::remove_tree(&BacklogRun::queue_tree(store, &run.id));
        for task in run.tasks.iter().filter(|t| matches!(t.stage, Stage::Landed { .. })) {
            attempts::remove_tree(&BacklogRun::task_tree(store, &run.id, task.task.n));
        }
    }
    let changed = before.changes(&before.again(user), user);
    attempts::with_changes(finished(&run, options.json), &changed, options.json)
}

/// Where the integration ref is, when that is not where the queue left it.
fn moved_integration(user: &WorkTree, run: &BacklogRun) -> Option<String> {
    let now = user.resolve(&format!("{}^{{commit}}", run.integration_ref())).ok()?;
    (now != run.expected_head()).then_some(now)
}

/// What the checks of the queue may not write: the store, for-loop, the user's repository.
fn read_only(env: &Environment, store: &Store, repo: &Path) -> Vec<PathBuf> {
    let mut paths = crate::checks::sandbox::read_only_paths(env, store.root());
    paths.push(repo.to_path_buf());
    paths
}

/// The end of a drive: what landed in which order, what did not and why, and what to do next.
fn finished(run: &BacklogRun, json: bool) -> Outcome {
    let landed: Vec<u32> = run.landed().into_iter().map(|(n, _)| n).collect();
    let not_landed = schedule::not_landed(run);
    let interrupted = super::driver::interrupted();
    let code = if not_landed.is_empty() { Code::Success } else { Code::Refused };
    if json {
        let not: Vec<_> = not_landed
            .iter()
            .map(|(n, reason, what)| json!({"task": n, "reason": reason, "what": what}))
            .collect();
        let event = json!({"event": "backlog_finished", "run": run.id, "landed": landed, "not_landed": not,
            "integration": run.integration_ref(), "interrupted": interrupted});
        return Outcome { code, stdout: event.to_string() };
    }
    let mut text = format!(
        "for-loop: backlog run {}: {} of {} tasks landed on {}",
        run.id,
        landed.len(),
        run.tasks.len(),
        run.integration_ref()
    );
    if !landed.is_empty() {
        let order: Vec<String> = landed.iter().map(|n| format!("task {n}")).collect();
        text.push_str(&format!(" (in this order: {})", order.join(", ")));
    }
    text.push('.');
    for (n, reason, what) in &not_landed {
        text.push_str(&format!("\n  task {n} did not land ({reason}): {what}"));
    }
    if !landed.is_empty() {
        text.push_str(&format!(
            "\n  see the change: git diff {} {}\n  apply it: loop-hook run --apply {}",
            run.base,
            run.integration_ref(),
            run.id
        ));
    }
    if !not_landed.is_empty() {
        text.push_str(&format!("\n  go on with the rest: loop-hook run --resume {}", run.id));
    }
    Outcome { code, stdout: text }
}

/// `run --resume RUN` naming a backlog run (or, with no name, when the newest run of the store is
/// an unfinished backlog): goes on with every task not landed. `None`: not a backlog's resume.
pub(crate) fn resume(env: &Environment, options: &RunOptions) -> Option<Outcome> {
    let wanted = options.resume.as_deref()?;
    let store = Store::locate(env).ok()?;
    let mut run = BacklogRun::find(&store, wanted)?;
    if wanted.is_empty() && (run.settled_landed() || newer_run_loop(&store, run.updated_at)) {
        return None;
    }
    if run.tasks.iter().any(|t| t.loop_id == wanted) && wanted != run.id {
        // A task's own loop named: it is resumed alone by the driver, outside the queue.
        return None;
    }
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --resume: {what}"));
    if let Err(why) = RunTier::choose(options.sandbox) {
        return Some(refuse(why));
    }
    let user = WorkTree::open(&env.cwd);
    if !user.is_git() || user.root() != run.repo {
        return Some(refuse(format!(
            "backlog run {} was made in {}; resume it there",
            run.id,
            run.repo.display()
        )));
    }
    let original = match RunOptions::parse(run.words.iter().map(std::ffi::OsString::from).collect()) {
        // This command line's --json and --more (room for the tasks whose loops hit a cap or a
        // budget) go with the run's own options.
        Ok(original) => {
            RunOptions { json: options.json || original.json, more: options.more.clone(), ..original }
        }
        Err(e) => return Some(refuse(format!("the run's own command line no longer parses ({e})"))),
    };
    let timeout = LoopRequest::checks_only(&original.loop_flags).map_or(600, |c| c.verify_timeout_secs);
    for task in &mut run.tasks {
        task.stage = match std::mem::replace(&mut task.stage, Stage::Waiting) {
            Stage::Parked { .. } | Stage::Working => resumed_stage(&user, &run.id, task),
            other => other,
        };
    }
    let tasks: Vec<_> = run.tasks.iter().map(|t| json!({"task": t.task.n, "title": t.task.title})).collect();
    Events::new(original.json).say(
        json!({"event": "backlog_started", "run": run.id, "tasks": tasks, "parallel": run.parallel, "resumed": true}),
        &format!("backlog run {}: resumed", run.id),
    );
    Some(drive(env, &original, &store, &user, run, timeout))
}

/// Where a parked or unfinished task goes on: a task whose check passed and whose commit is kept
/// waits for the queue again; any other goes back to its agent, with its merge tries afresh.
fn resumed_stage(user: &WorkTree, id: &str, task: &mut TaskRun) -> Stage {
    task.merge_tries = 0;
    let kept = user.resolve(&format!("{REFS}/{id}/tasks/{}^{{commit}}", task.task.n)).ok();
    match (&task.stage, kept) {
        (Stage::Parked { reason, .. }, Some(commit)) if reason == "merge_fault" => Stage::Queued { commit },
        _ if !task.started => Stage::Waiting,
        _ => Stage::SentBack { why: "resumed".into() },
    }
}

impl BacklogRun {
    /// Whether every task landed: nothing to resume.
    fn settled_landed(&self) -> bool {
        self.tasks.iter().all(|t| matches!(t.stage, Stage::Landed { .. }))
    }
}

/// Whether a plain run loop changed after `at`: `--resume` with no name then means that one.
fn newer_run_loop(store: &Store, at: Timestamp) -> bool {
    store
        .all()
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|paths| paths.load().ok().flatten())
        .any(|state| state.meta.session_id.starts_with("run-") && state.meta.updated_at > at)
}

/// `run --apply RUN` naming a backlog run (or, with no name, when the newest run to apply is a
/// backlog). `None`: not a backlog's apply.
pub(crate) fn apply(env: &Environment, wanted: &str) -> Option<Outcome> {
    let store = Store::locate(env).ok()?;
    let run = BacklogRun::find(&store, wanted)?;
    if wanted.is_empty() && attempts::newest_group_id(&store).is_some_and(|group| group > run.id) {
        return None;
    }
    Some(apply::apply(env, &store, &run))
}
