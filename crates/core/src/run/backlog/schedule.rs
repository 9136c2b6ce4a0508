//! The backlog's driver: at most N task loops at once, each on a thread of its own driving the
//! fresh-context loop in the task's work tree, and the merge queue on this thread. A task whose
//! loop ends verified is kept as a commit on its branch and offered to the queue; the queue
//! lands it, or sends it back (its work tree reset to the merge, the conflict or the failing
//! output in its next prompt, its loop active again), or after `--max-merge-tries` parks it.
//! The run is saved after every step.

use std::collections::BTreeMap;
use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::json;

use super::events::Events;
use super::queue::{self, Judged, Offered, Queue};
use super::record::{BacklogRun, Stage, tree_exists};
use crate::commands::ResumeOptions;
use crate::run::RunOptions;
use crate::run::driver::{Attempt, Driver, SharedLimit, interrupted, park_loop, trusted};
use crate::state::{LedgerDecision, LedgerEntry, ReasonCode, Status};
use crate::store::LoopFile;
use crate::store::Transaction;
use crate::store::{LoopPaths, Store};
use crate::support::Environment;
use crate::worktree::WorkTree;

/// How often the driver looks at the running tasks (their iterations, their work trees, the file).
const TICK: Duration = Duration::from_millis(250);

/// How one drive of a task ended.
enum Ended {
    /// Its check passed; its end state is `commit`, kept on its branch.
    Passed {
        commit: String,
    },
    Parked {
        reason: String,
        what: String,
    },
}

/// What a task's thread needs, owned.
struct Job {
    n: u32,
    loop_id: String,
    tree: PathBuf,
    prefix: PathBuf,
    base: String,
    task_ref: String,
    resume: bool,
    env: Environment,
    options: RunOptions,
    paths: LoopPaths,
    user: WorkTree,
    cancel: Arc<AtomicBool>,
    limit: SharedLimit,
}

/// One run being driven.
pub(crate) struct Schedule<'a> {
    pub(crate) env: &'a Environment,
    pub(crate) options: &'a RunOptions,
    pub(crate) store: &'a Store,
    pub(crate) user: WorkTree,
    pub(crate) run: BacklogRun,
    pub(crate) queue: Queue,
    pub(crate) events: Events,
    /// Whether the change of the backlog file was said already.
    file_changed: bool,
    /// The limit every task's agent waits for when one hits it.
    limit: SharedLimit,
}

impl<'a> Schedule<'a> {
    pub(crate) fn new(
        env: &'a Environment,
        options: &'a RunOptions,
        store: &'a Store,
        user: WorkTree,
        run: BacklogRun,
        queue: Queue,
    ) -> Schedule<'a> {
        let events = Events::new(options.json);
        Schedule {
            env,
            options,
            store,
            user,
            run,
            queue,
            events,
            file_changed: false,
            limit: SharedLimit::default(),
        }
    }

    /// Drives every task that is not landed or parked until each is, or Ctrl-C.
    pub(crate) fn drive(&mut self) {
        let (sender, receiver) = mpsc::channel::<(u32, Ended, u64)>();
        let mut working: BTreeMap<u32, Arc<AtomicBool>> = BTreeMap::new();
        let mut seen: BTreeMap<u32, u32> = BTreeMap::new();
        loop {
            self.notice_file_change();
            self.judge_queued();
            if !interrupted() {
                while working.len() < self.run.parallel as usize {
                    let Some(job) = self.next_job() else { break };
                    // Iterations an earlier driver of the run judged were said then.
                    seen.entry(job.n).or_insert_with(|| {
                        judged_stops(&job.paths).last().map_or(0, |(iteration, _)| *iteration)
                    });
                    working.insert(job.n, Arc::clone(&job.cancel));
                    let sender = sender.clone();
                    thread::spawn(move || {
                        let started = Instant::now();
                        let n = job.n;
                        // A fault of ours in one task's driver parks that task, never the run.
                        let ended =
                            panic::catch_unwind(AssertUnwindSafe(|| work(&job))).unwrap_or_else(|_| {
                                Ended::Parked {
                                reason: "internal_error".into(),
                                what: "its driver stopped on a fault of for-loop's own; --resume continues it"
                                    .into(),
                            }
                            });
                        let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                        let _ = sender.send((n, ended, millis));
                    });
                }
            }
            if working.is_empty() {
                break;
            }
            match receiver.recv_timeout(TICK) {
                Ok((n, ended, millis)) => {
                    working.remove(&n);
                    self.watch(&[n], &mut seen);
                    self.ended(n, ended, millis);
                }
                Err(RecvTimeoutError::Timeout) => {
                    let running: Vec<u32> = working.keys().copied().collect();
                    self.watch(&running, &mut seen);
                    for (n, cancel) in &working {
                        if !tree_exists(&BacklogRun::task_tree(self.store, &self.run.id, *n)) {
                            // Its agent is stopped; the task parks when its thread sees the tree gone.
                            cancel.store(true, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// The next task to drive (a waiting one, or one sent back), marked working and saved.
    fn next_job(&mut self) -> Option<Job> {
        let index =
            self.run.tasks.iter().position(|t| matches!(t.stage, Stage::Waiting | Stage::SentBack { .. }))?;
        let id = self.run.id.clone();
        let task_ref = self.run.task_ref(self.run.tasks[index].task.n);
        let task = &mut self.run.tasks[index];
        task.stage = Stage::Working;
        let resume = task.started;
        task.started = true;
        let n = task.task.n;
        let mut options = self.options.clone();
        options.task = task.task.brief(&self.run.file);
        options.task_check = Some(task.task.check.clone());
        // Each task's driver prints plain lines: several redraw no line together.
        options.parallel = true;
        options.json = self.options.json;
        let job = Job {
            n,
            loop_id: task.loop_id.clone(),
            tree: BacklogRun::task_tree(self.store, &id, n),
            prefix: self.run.prefix.clone(),
            base: self.run.base.clone(),
            task_ref,
            resume,
            env: self.env.clone(),
            options,
            paths: self.store.paths(&task.loop_id),
            user: self.user.clone(),
            cancel: Arc::new(AtomicBool::new(false)),
            limit: self.limit.clone(),
        };
        self.save();
        Some(job)
    }

    /// Says each running task's iterations as they are judged, from its loop's ledger: every
    /// judged stop since the last one said (`seen`: the iteration said last, per task).
    fn watch(&self, running: &[u32], seen: &mut BTreeMap<u32, u32>) {
        for &n in running {
            let Some(task) = self.run.tasks.iter().find(|t| t.task.n == n) else { continue };
            let judged = judged_stops(&self.store.paths(&task.loop_id));
            let last = seen.entry(n).or_insert(0);
            let since = *last;
            for (iteration, passed) in judged.into_iter().filter(|(iteration, _)| *iteration > since) {
                *last = iteration;
                let check = if passed { "passed" } else { "failed" };
                self.events.say(
                    json!({"event": "task_iteration", "task": n, "iteration": iteration, "check": check}),
                    &format!("task {n}: iteration {iteration}, check {check}"),
                );
            }
        }
    }

    /// A task's drive ended: its commit goes to the queue, or it parks.
    fn ended(&mut self, n: u32, ended: Ended, millis: u64) {
        let Some(task) = self.run.tasks.iter_mut().find(|t| t.task.n == n) else { return };
        task.millis = task.millis.saturating_add(millis);
        match ended {
            Ended::Passed { commit } => {
                task.stage = Stage::Queued { commit };
                let position =
                    self.run.tasks.iter().filter(|t| matches!(t.stage, Stage::Queued { .. })).count();
                self.events.say(
                    json!({"event": "queued", "task": n, "position": position}),
                    &format!("task {n}: check passed; queued to merge, position {position}"),
                );
                self.save();
            }
            Ended::Parked { reason, what } => self.park(n, &reason, &what),
        }
    }

    /// Judges every queued task, in the order they were queued (by task number within a step).
    fn judge_queued(&mut self) {
        if interrupted() {
            return;
        }
        while let Some(index) = self.run.tasks.iter().position(|t| matches!(t.stage, Stage::Queued { .. })) {
            // Ctrl-C between two merges: the rest stay queued, and --resume judges them.
            if interrupted() {
                return;
            }
            let task = &self.run.tasks[index];
            let Stage::Queued { commit } = &task.stage else { return };
            // What the task's own loop counted when its check passed there: the merge is held to it.
            let tests = self.store.paths(&task.loop_id).load().ok().flatten().map(|state| state.meta.tests);
            let offered =
                Offered { n: task.task.n, check: task.task.check.clone(), commit: commit.clone(), tests };
            match self.queue.judge(&offered) {
                Judged::Landed { head } => {
                    self.run.head = Some(head);
                    self.run.tests.clone_from(self.queue.test_records());
                    self.landed(index);
                }
                Judged::Conflict { files, said, marked } => {
                    let why = format!(
                        "your change conflicts with tasks landed meanwhile, in {}. Your work tree now holds the \
                         integration head with your change merged in and git's conflict markers in those files: \
                         resolve each conflict keeping what both sides meant, remove the markers, and make the \
                         check pass again. Git said:\n\n```\n{}\n```",
                        files.join(", "),
                        said.trim()
                    );
                    self.send_back(index, "conflict", &[], &marked, &why);
                }
                Judged::Broken { failing, output, merged } => {
                    let why = format!(
                        "merged onto the tasks landed before it, {}. Your work tree now holds that merge: make \
                         every check pass on it without breaking the tasks landed before yours. The output:\n\n\
                         ```\n{}\n```",
                        queue::broken(&failing),
                        output.trim_end()
                    ) + &named_in(&output);
                    let failing = serde_json::to_value(&failing).unwrap_or_default();
                    self.send_back(
                        index,
                        "check_failed",
                        failing.as_array().map_or(&[][..], Vec::as_slice),
                        &merged,
                        &why,
                    );
                }
                Judged::Fault(what) => {
                    // The queue's own step failed (git, the disk): nothing moved; the task parks
                    // with its commit kept on its branch, and --resume offers it again.
                    self.park(offered.n, "merge_fault", &format!("the queue could not judge it: {what}"));
                }
            }
        }
    }

    fn landed(&mut self, index: usize) {
        let order = u32::try_from(self.run.landed().len() + 1).unwrap_or(u32::MAX);
        let task = &mut self.run.tasks[index];
        task.stage = Stage::Landed { order };
        let n = task.task.n;
        self.events.say(
            json!({"event": "landed", "task": n, "order": order}),
            &format!("task {n} landed (#{order}): every landed task's check passes on the merged tree"),
        );
        self.save();
    }

    /// Sends task `index` back to its agent with `why`, its tree reset to `onto`; or parks it
    /// after its last merge try.
    fn send_back(&mut self, index: usize, kind: &str, failing: &[serde_json::Value], onto: &str, why: &str) {
        let max = self.run.max_merge_tries;
        let task = &mut self.run.tasks[index];
        task.merge_tries += 1;
        let (n, tries) = (task.task.n, task.merge_tries);
        let title = task.task.title.clone();
        let check = task.task.check.clone();
        let paths = self.store.paths(&task.loop_id);
        // The work tree takes the merge and the prompt says why, even for a task that parks now:
        // `--resume` then goes on from there.
        let tree = BacklogRun::task_tree(self.store, &self.run.id, n);
        let reset = if tree_exists(&tree) {
            WorkTree::open(&tree).reset_to(onto).map_err(|e| e.to_string())
        } else {
            Err(format!("its work tree {} is gone", tree.display()))
        };
        let prompt = format!(
            "Task {n} ({title}): your change passed its check `{check}` in your work tree, but the merge queue \
             did not land it: {why}\n\nThe queue has sent this task back {tries} time(s); the task lands only \
             when every check passes on the merged tree."
        );
        let ready = reset.and_then(|()| {
            LoopFile::NextPrompt.write(&paths.dir, prompt.as_bytes()).map_err(|e| e.to_string())
        });
        if tries >= max {
            let what =
                format!("its change failed to merge {tries} times (--max-merge-tries {max}); last: {kind}");
            let _ = park_loop(&paths, ReasonCode::MergeFailed, &what);
            self.park(n, ReasonCode::MergeFailed.as_str(), &what);
            return;
        }
        self.events.say(
            json!({"event": "sent_back", "task": n, "try": tries, "why": kind, "failing": failing}),
            &format!("task {n}: sent back to its agent ({kind}), merge try {tries} of {max}"),
        );
        match ready.and_then(|()| reopen(&paths, &format!("sent back by the merge queue: {kind}"))) {
            Ok(()) => {
                self.run.tasks[index].stage = Stage::SentBack { why: kind.to_string() };
                self.save();
            }
            Err(e) => self.park(n, "not_sent_back", &format!("it could not be sent back: {e}")),
        }
    }

    /// Parks task `n`: its work tree and branch stay for `--resume`.
    fn park(&mut self, n: u32, reason: &str, what: &str) {
        if let Some(task) = self.run.tasks.iter_mut().find(|t| t.task.n == n) {
            task.stage = Stage::Parked { reason: reason.to_string(), what: what.to_string() };
        }
        self.events.say(
            json!({"event": "parked", "task": n, "reason": reason, "what": what}),
            &format!("task {n} parked ({reason}): {what}"),
        );
        self.save();
    }

    /// Says, once, that the backlog file changed since the run read it.
    fn notice_file_change(&mut self) {
        if self.file_changed || super::tasks::digest(&self.run.path) == self.run.digest {
            return;
        }
        self.file_changed = true;
        self.events.say(
            json!({"event": "backlog_changed", "file": self.run.file}),
            &format!(
                "the backlog {} changed while the run goes; the run goes on with the tasks as it read them at \
                 start (start a new run for the new ones)",
                self.run.file
            ),
        );
    }

    fn save(&mut self) {
        if let Err(e) = self.run.save(self.store) {
            self.events.say(json!({"event": "save_failed", "what": e}), &e);
        }
    }
}

/// The judged stops of a task's loop among its last ledger lines, oldest first: each one's
/// iteration and whether its check passed.
fn judged_stops(paths: &LoopPaths) -> Vec<(u32, bool)> {
    LedgerEntry::read_last(&paths.ledger, 64)
        .unwrap_or_default()
        .into_iter()
        .filter(|entry| entry.reason.is_verdict())
        .filter_map(|entry| entry.verify.map(|verify| (entry.iteration, verify.exit_code == Some(0))))
        .collect()
}

/// Drives one task once: starts its loop in a new work tree, or continues it in its own.
fn work(job: &Job) -> Ended {
    let gone = || Ended::Parked {
        reason: "worktree_gone".into(),
        what: format!("its work tree {} was deleted; nothing of it could be kept", job.tree.display()),
    };
    if !tree_exists(&job.tree) {
        if job.resume {
            return gone();
        }
        let added = job
            .tree
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .map_err(|e| e.to_string())
            .and_then(|()| job.user.add_linked_tree(&job.tree, &job.base).map_err(|e| e.to_string()));
        if let Err(e) = added {
            return Ended::Parked {
                reason: "not_started".into(),
                what: format!("its work tree could not be added: {e}"),
            };
        }
    }
    let env = job.env.with_cwd(job.tree.join(&job.prefix));
    let attempt =
        Attempt { n: job.n, cancel: Arc::clone(&job.cancel), limit: job.limit.clone(), kind: "task" };
    let outcome = if job.resume {
        let options = RunOptions { resume: Some(job.loop_id.clone()), ..job.options.clone() };
        Driver::resume_attempt(&env, &options, attempt)
    } else {
        Driver::run_attempt(&env, &job.options, job.loop_id.clone(), attempt)
    };
    if !tree_exists(&job.tree) {
        let ended = gone();
        if let Ended::Parked { what, .. } = &ended {
            let _ = park_loop(&job.paths, ReasonCode::Interrupted, what);
        }
        return ended;
    }
    let Ok(Some(state)) = job.paths.load() else {
        let said = outcome.stdout.lines().next().unwrap_or("its loop could not be read").to_string();
        return Ended::Parked { reason: "not_started".into(), what: said };
    };
    // Every end state is kept on the task's branch; a verified one goes to the queue.
    let kept = keep(job);
    match state.meta.outcome {
        Some(ReasonCode::Verified | ReasonCode::Promise) => kept,
        Some(code) => Ended::Parked { reason: code.as_str().into(), what: format!("its loop ended: {code}") },
        None => {
            let last = LedgerEntry::read_last(&job.paths.ledger, 1).unwrap_or_default();
            let entry = last.last();
            let reason = entry.map_or(ReasonCode::Interrupted, |e| e.reason);
            let what = entry
                .and_then(|e| e.detail.clone())
                .unwrap_or_else(|| format!("{:?}", state.meta.status).to_lowercase());
            let reason = if state.meta.status == Status::Active {
                "interrupted".into()
            } else {
                reason.as_str().to_string()
            };
            Ended::Parked { reason, what }
        }
    }
}

/// Keeps a verified task's work tree as a commit on its branch.
fn keep(job: &Job) -> Ended {
    let tree = WorkTree::open(&job.tree);
    let kept = tree
        .snapshot(None, &format!("for-loop: backlog task {}", job.n))
        .and_then(|commit| job.user.update_ref(&job.task_ref, &commit).map(|()| commit));
    match kept {
        Ok(commit) => Ended::Passed { commit },
        Err(e) => {
            Ended::Parked { reason: "not_kept".into(), what: format!("its end state could not be kept: {e}") }
        }
    }
}

/// Makes a task's loop active again for another iteration, recorded in its ledger.
fn reopen(paths: &LoopPaths, why: &str) -> Result<(), String> {
    let now = Timestamp::now();
    let (transaction, custody) = Transaction::open(paths, now).map_err(|e| e.to_string())?;
    let mut state = trusted(custody)?;
    state.meta.iteration += 1;
    crate::commands::resume::reopen(&mut state.meta, &ResumeOptions::default(), now);
    state.meta.updated_at = now;
    let entry = LedgerEntry {
        detail: Some(why.to_string()),
        ..LedgerEntry::new(&state, now, LedgerDecision::Resume, ReasonCode::Resumed)
    };
    transaction.commit(&state, &[entry]).map_err(|e| e.to_string())
}

/// The tasks that are not landed, for the end of the run: number and reason.
pub(crate) fn not_landed(run: &BacklogRun) -> Vec<(u32, String, String)> {
    run.tasks
        .iter()
        .filter_map(|t| match &t.stage {
            Stage::Landed { .. } => None,
            Stage::Parked { reason, what } => Some((t.task.n, reason.clone(), what.clone())),
            Stage::Queued { .. } => {
                Some((t.task.n, "queued".into(), "its check passed; waiting for the queue".into()))
            }
            Stage::Waiting => Some((t.task.n, "not_started".into(), "not started yet".into())),
            Stage::Working | Stage::SentBack { .. } => {
                Some((t.task.n, "interrupted".into(), "unfinished".into()))
            }
        })
        .collect()
}

/// What a failed check's output names failing, as a sentence after it: the same words the
/// loop's own stops use ([`crate::state::describe_failing`]); empty when no runner's report is
/// in it.
fn named_in(output: &str) -> String {
    let mut captured = crate::checks::Captured::default();
    captured.push(output.as_bytes());
    crate::state::FailingNames::of(&captured.failures())
        .filter(|names| names.count() > 0)
        .map(|names| format!("\n\nThe output names {}.", crate::state::describe_failing(None, &names)))
        .unwrap_or_default()
}

#[cfg(test)]
mod named_in_tests {
    #[test]
    fn a_task_sent_back_is_told_the_failures_its_merged_check_named() {
        let output = "running 2 tests\ntest tests::adds ... ok\ntest tests::subtracts ... FAILED\n\nfailures:\n\n\
                      ---- tests::subtracts stdout ----\nassertion failed\n\nfailures:\n    tests::subtracts\n\n\
                      test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n";
        assert_eq!(super::named_in(output), "\n\nThe output names 1 failing: tests::subtracts.");
        assert_eq!(super::named_in("make: *** [all] Error 2\n"), "", "no runner, nothing more to say");
    }
}
