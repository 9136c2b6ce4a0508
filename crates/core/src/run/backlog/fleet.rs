//! A backlog across machines (`docs/ci/for-loop-backlog.yml`). Each machine, a CI job, runs one
//! task: `loop-hook run --backlog FILE --task N --run-id ID` works task N as a backlog works each
//! of its tasks (its loop in a work tree of its own, from the clean checkout), then pushes the
//! task's end state, one commit on the checkout's commit with the task's claim in its message,
//! to `refs/for-loop/backlog/ID/tasks/N` on the remote. Then one machine runs `loop-hook run
//! --backlog FILE --merge --run-id ID` on that same commit: it fetches the task refs and runs
//! the backlog's merge queue ([`super::queue`]) over them in task order, with nobody to send a
//! task back to. The integration it ends on is kept as `refs/for-loop/backlog/ID/integration`
//! and pushed there.
//!
//! A claim is only shown. A task lands when its commit starts from the merge's commit, leaves
//! the files of every check as they are there, and the merged tree then passes its check, the
//! check of every task landed before it and `--verify`, each run here. `--list` names the tasks
//! (a job matrix), refusing a backlog a run would refuse before any machine starts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::queue::{Offered, Queue};
use super::tasks::{self, Task};
use crate::checks::Oracle;
use crate::commands::LoopRequest;
use crate::run::RunOptions;
use crate::run::attempts::{DEFAULT_REMOTE, Ended, remote_problem, run_id_problem};
use crate::run::driver::SharedLimit;
use crate::run::options::Fleet;
use crate::run::sandbox::GitDirs;
use crate::state::LoopState;
use crate::store::Store;
use crate::support::Environment;
use crate::support::{Code, Outcome};
use crate::worktree::WorkTree;

/// Where a backlog's refs live: `REFS/ID/tasks/N` and `REFS/ID/integration`.
const REFS: &str = "refs/for-loop/backlog";
/// The line of a task's commit message that holds its claim, as JSON.
const CLAIM_LINE: &str = "for-loop-claim: ";
/// A commit message longer than this holds no claim worth reading.
const MAX_MESSAGE_BYTES: u64 = 64 << 10;

/// What a task's machine says of it: shown beside what the merge finds, never trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Claim {
    task: u32,
    outcome: String,
    passed: bool,
    iterations: u32,
    seconds: u64,
}

impl Claim {
    /// Task `n` as its loop ended (`None`: it never started).
    fn of(n: u32, state: Option<&LoopState>) -> Claim {
        let Ended { outcome, passed, iterations, seconds } = Ended::of(state);
        Claim { task: n, outcome, passed, iterations, seconds }
    }

    /// The message of the commit pushed: a summary line, then the claim as one JSON line.
    fn message(&self, id: &str, title: &str) -> String {
        let claim = serde_json::to_string(self).unwrap_or_default();
        format!("for-loop: backlog task {} (run {id}): {title}\n\n{CLAIM_LINE}{claim}\n", self.task)
    }

    /// The claim in a commit's message, if it holds one. The message is the job's to write: the
    /// outcome is cut to plain words before anything shows it.
    fn read(message: &str) -> Option<Claim> {
        let line = message.lines().rev().find_map(|line| line.strip_prefix(CLAIM_LINE))?;
        let mut claim: Claim = serde_json::from_str(line.trim()).ok()?;
        claim.outcome = claim
            .outcome
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '-' | ':'))
            .take(60)
            .collect();
        Some(claim)
    }

    /// `it claims its check passed after 2 iterations in 40 s`.
    fn describe(&self) -> String {
        let what = if self.passed {
            "its check passed".to_string()
        } else {
            format!("not passed ({})", self.outcome)
        };
        let plural = if self.iterations == 1 { "" } else { "s" };
        format!("it claims {what} after {} iteration{plural} in {} s", self.iterations, self.seconds)
    }
}

/// Whether the options ask for a backlog across machines (or list one): this module's to run.
pub(in crate::run) fn asked(options: &RunOptions) -> bool {
    options.fleet.is_some()
        || (options.backlog.is_some() && (options.run_id.is_some() || options.remote.is_some()))
}

/// The options of a backlog across machines that make no sense, or make no sense together.
fn misuse(options: &RunOptions) -> Option<String> {
    if options.backlog.is_none() {
        return Some("--task N, --merge and --list go with --backlog FILE".into());
    }
    let elsewhere = options.resume.is_some() || options.apply.is_some() || options.attempts.is_some();
    let text = !options.task.trim().is_empty();
    if options.fleet == Some(Fleet::List) {
        let extra = options.run_id.is_some() || options.remote.is_some() || options.agent.is_some();
        if extra || elsewhere || text || options.parallel || options.max_merge_tries.is_some() {
            return Some(
                "--list names the tasks of the backlog and runs nothing: `loop-hook run --backlog FILE \
                 --list [--verify CMD] [--json]`"
                    .into(),
            );
        }
        return None;
    }
    if options.fleet.is_none() {
        return Some("--run-id and --remote go with --task N or --merge".into());
    }
    let Some(id) = options.run_id.as_deref() else {
        return Some(
            "--task N and --merge work a backlog spread over machines: give --run-id ID, the same on \
             every machine (in GitHub Actions, the workflow run's id)"
                .into(),
        );
    };
    if options.fleet == Some(Fleet::Merge) {
        let agent = options.agent.is_some() || !options.agent_args.is_empty() || options.backoff.is_some();
        if agent || elsewhere || text || options.parallel || options.max_merge_tries.is_some() {
            return Some(
                "--merge merges the pushed tasks of a run and runs no agent: `loop-hook run --backlog \
                 FILE --merge --run-id ID [--verify CMD] [--remote REMOTE] [--json]`, with none of \
                 --agent, --agent-arg, --backoff, --parallel, --max-merge-tries, --resume, --apply, --attempts"
                    .into(),
            );
        }
    } else if elsewhere || text || options.parallel || options.max_merge_tries.is_some() {
        return Some(
            "--task N runs one task of the backlog: leave out the task text, --parallel, \
             --max-merge-tries, --resume, --apply and --attempts"
                .into(),
        );
    }
    run_id_problem(id).or_else(|| remote_problem(options))
}

/// Runs what the options ask: `--list`, `--task N` or `--merge`.
pub(in crate::run) fn run(env: &Environment, options: &RunOptions) -> Outcome {
    if let Some(wrong) = misuse(options) {
        return Outcome {
            code: Code::Usage,
            stdout: format!("loop-hook run: {wrong}\n\n{}", crate::run::usage()),
        };
    }
    let file = options.backlog.as_deref().unwrap_or_default();
    let request = match LoopRequest::checks_only(&options.loop_flags) {
        Ok(request) => request,
        Err(e) => return Outcome::refused(format!("for-loop: run --backlog {file}: {e}")),
    };
    let tasks = match tasks::read(&env.cwd.join(file), request.verify.as_deref()) {
        Ok(tasks) => tasks,
        Err(why) => return Outcome::refused(format!("for-loop: run --backlog {file}: {why}")),
    };
    match options.fleet {
        Some(Fleet::List) => return list(file, &tasks, options.json),
        Some(Fleet::Task(n)) => return task(env, options, file, &tasks, n),
        _ => {}
    }
    Merge::new(env, options, file, &request).map_or_else(|why| why, |merge| merge.run(&tasks))
}

/// The backlog's tasks, one a line; with `--json`, one object naming each.
fn list(file: &str, tasks: &[Task], json: bool) -> Outcome {
    if json {
        let listed: Vec<_> =
            tasks.iter().map(|t| json!({"task": t.n, "title": t.title, "check": t.check})).collect();
        return Outcome::ok(json!({"event": "backlog", "backlog": file, "tasks": listed}).to_string());
    }
    let mut text = format!("for-loop: the backlog {file} has {} tasks", tasks.len());
    for t in tasks {
        text.push_str(&format!("\n  {}. {}\n     check: {}", t.n, t.title, t.check));
    }
    Outcome::ok(text)
}

/// Runs task `n` of the backlog on this machine, then pushes its end state and claim.
fn task(env: &Environment, options: &RunOptions, file: &str, tasks: &[Task], n: u32) -> Outcome {
    let id = options.run_id.as_deref().unwrap_or_default();
    let refuse =
        |what: String| Outcome::refused(format!("for-loop: run --backlog {file} --task {n}: {what}"));
    let Some(task) = tasks.iter().find(|t| t.n == n) else {
        return refuse(format!("the backlog has tasks 1 to {}", tasks.len()));
    };
    let remote = options.remote.as_deref().unwrap_or(DEFAULT_REMOTE);
    let user = WorkTree::open(&env.cwd);
    let base = match crate::run::attempts::clean_head(env, &user) {
        Ok(base) => base,
        Err(what) => return refuse(what),
    };
    let name = format!("{REFS}/{id}/tasks/{n}");
    // Found out before the agent's time is spent, not after.
    if let Err(e) = user.remote_refs(remote, &name) {
        return refuse(format!("cannot reach the remote {remote:?}: {e}"));
    }
    let store = match Store::locate(env) {
        Ok(store) => store,
        Err(e) => return refuse(e.to_string()),
    };
    crate::run::attempts::sweep_orphans(env);
    let tree =
        match crate::run::attempts::OwnedTree::add(&store, &user, &base, &format!("backlog-{id}-task-{n}")) {
            Ok(tree) => tree,
            Err(what) => return refuse(what),
        };
    let loop_id = format!("backlog-{id}-{n}");
    let one = RunOptions { task: task.brief(file), task_check: Some(task.check.clone()), ..options.clone() };
    let prefix = crate::run::attempts::prefix_in(env, user.root());
    let attempt = crate::run::driver::Attempt {
        n,
        cancel: std::sync::Arc::default(),
        limit: SharedLimit::default(),
        kind: "task",
    };
    let ran = crate::run::driver::Driver::run_attempt(
        &env.with_cwd(tree.dir.join(prefix)),
        &one,
        loop_id.clone(),
        attempt,
    );
    let state = store.paths(&loop_id).load().ok().flatten();
    let claim = Claim::of(n, state.as_ref());
    let pushed = keep_and_push(&user, &tree.dir, (&base, &name), remote, &claim.message(id, &task.title));
    drop(tree);
    let code = if pushed.is_ok() && claim.passed { Code::Success } else { Code::Refused };
    let said = if options.json {
        match &pushed {
            Ok(commit) => json!({"event": "pushed", "run": id, "task": n, "remote": remote, "ref": name,
                "commit": commit, "claim": claim})
            .to_string(),
            Err(what) => json!({"event": "not_pushed", "run": id, "task": n, "remote": remote, "what": what})
                .to_string(),
        }
    } else {
        match &pushed {
            Ok(commit) => format!(
                "  pushed to {remote} as {name} (commit {commit}), where {}; `loop-hook run --backlog {file} \
                 --merge --run-id {id}` judges it",
                claim.describe()
            ),
            Err(what) => format!("  for-loop: task {n} was not pushed: {what}"),
        }
    };
    Outcome { code, stdout: format!("{}\n{said}", ran.stdout) }
}

/// Keeps the work tree at `tree` as one commit on `base` with `message`, under the ref `name`,
/// and pushes it (forced: a job run again replaces its own task). The commit pushed.
fn keep_and_push(
    user: &WorkTree,
    tree: &Path,
    (base, name): (&str, &str),
    remote: &str,
    message: &str,
) -> Result<String, String> {
    let commit = WorkTree::open(tree)
        .snapshot(Some(base), message)
        .map_err(|e| format!("its end state could not be kept: {e}"))?;
    user.update_ref(name, &commit).map_err(|e| e.to_string())?;
    user.push_ref(remote, &commit, name).map_err(|e| {
        format!("{e}\n  it is kept here as {name}: push it with `git push {remote} +{name}:{name}`")
    })?;
    Ok(commit)
}

/// One task's line in the merge's table.
#[derive(Debug, Serialize)]
struct Row {
    task: u32,
    title: String,
    landed: bool,
    /// Its place in the landing order, from 1.
    order: Option<usize>,
    detail: String,
    #[serde(rename = "ref")]
    git_ref: String,
    commit: Option<String>,
    claim: Option<Claim>,
}

/// The merge of one run's pushed tasks, on this checkout's commit.
struct Merge<'a> {
    env: &'a Environment,
    user: WorkTree,
    store: Store,
    id: String,
    remote: String,
    file: String,
    base: String,
    base_tree: String,
    verify: Option<String>,
    timeout: Duration,
    protect: Vec<String>,
    tests: bool,
    prefix: PathBuf,
    json: bool,
}

impl<'a> Merge<'a> {
    fn new(
        env: &'a Environment,
        options: &RunOptions,
        file: &str,
        request: &LoopRequest,
    ) -> Result<Merge<'a>, Outcome> {
        let id = options.run_id.clone().unwrap_or_default();
        let refuse = |what: String| {
            Outcome::refused(format!("for-loop: run --backlog {file} --merge --run-id {id}: {what}"))
        };
        let user = WorkTree::open(&env.cwd);
        if !user.is_git() {
            return Err(refuse(format!("{} is not in a git repository", env.cwd.display())));
        }
        let store = Store::locate(env).map_err(|e| refuse(e.to_string()))?;
        let base = user.head_commit().map_err(|_| {
            refuse("this checkout has no commit: check out the commit the tasks started from".into())
        })?;
        let base_tree = user.resolve(&format!("{base}^{{tree}}")).map_err(|e| refuse(e.to_string()))?;
        Ok(Merge {
            env,
            prefix: crate::run::attempts::prefix_in(env, user.root()),
            user,
            store,
            remote: options.remote.clone().unwrap_or_else(|| DEFAULT_REMOTE.into()),
            id,
            file: file.to_string(),
            base,
            base_tree,
            verify: request.verify.clone(),
            timeout: Duration::from_secs(request.verify_timeout_secs),
            protect: request.protect.clone(),
            tests: !request.allow_test_edits,
            json: options.json,
        })
    }

    fn refuse(&self, what: &str) -> Outcome {
        Outcome::refused(format!(
            "for-loop: run --backlog {} --merge --run-id {}: {what}",
            self.file, self.id
        ))
    }

    fn tasks_ref(&self, n: u32) -> String {
        format!("{REFS}/{}/tasks/{n}", self.id)
    }

    fn integration(&self) -> String {
        format!("{REFS}/{}/integration", self.id)
    }

    /// Fetches, judges and merges every pushed task, keeps and pushes the integration, and says
    /// what landed.
    fn run(self, tasks: &[Task]) -> Outcome {
        let pushed = match self.fetch() {
            Ok(pushed) => pushed,
            Err(what) => return self.refuse(&what),
        };
        // The queue's own work tree, at the start: the checks' files are read there first.
        let scratch = match crate::run::attempts::OwnedTree::add(
            &self.store,
            &self.user,
            &self.base,
            &format!("merge-{}", self.id),
        ) {
            Ok(tree) => tree,
            Err(what) => return self.refuse(&what),
        };
        let commands: Vec<&str> =
            tasks.iter().map(|t| t.check.as_str()).chain(self.verify.as_deref()).collect();
        let oracle =
            Oracle::capture_commands(&scratch.dir.join(&self.prefix), &commands, &self.protect, self.tests);
        let mut rows: Vec<Row> = tasks.iter().map(|t| self.row(t, pushed.contains(&t.n), &oracle)).collect();
        let offered: Vec<Offered> = rows
            .iter()
            .zip(tasks)
            .filter(|(row, _)| row.detail.is_empty())
            .filter_map(|(row, t)| {
                Some(Offered { n: t.n, check: t.check.clone(), commit: row.commit.clone()?, tests: None })
            })
            .collect();
        let integration = self.integration();
        // A merge is made again from the start each time it runs, whatever an earlier one left.
        if let Err(e) = self.user.update_ref(&integration, &self.base) {
            return self.refuse(&format!("cannot create {integration}: {e}"));
        }
        let queue = Queue::open(&self.user, &scratch.dir, &integration, &self.base, vec![]);
        let mut queue = match queue {
            Ok(queue) => queue
                .checking(&self.prefix, self.verify.clone(), self.timeout)
                .sandboxed(crate::checks::sandbox::sandbox_unavailable().is_none(), self.read_only())
                .allowing_test_edits(!self.tests)
                .protecting(&tasks.iter().map(|t| (t.n, t.check.clone())).collect::<Vec<_>>()),
            Err(what) => return self.refuse(&what),
        };
        let landing = queue.land_all(&offered);
        drop(scratch);
        for row in &mut rows {
            if let Some(order) = landing.landed.iter().position(|n| *n == row.task) {
                (row.landed, row.order, row.detail) = (true, Some(order + 1), "landed".into());
            } else if let Some((_, why)) = landing.not_landed.iter().find(|(n, _)| *n == row.task) {
                row.detail = format!("not landed: {why}");
            }
        }
        let pushed = self.user.push_ref(&self.remote, &landing.head, &integration).map_err(|e| e.to_string());
        self.report(&rows, &landing.head, &pushed)
    }

    /// Fetches the run's task refs from the remote; the task numbers pushed.
    fn fetch(&self) -> Result<BTreeSet<u32>, String> {
        let (remote, id) = (&self.remote, &self.id);
        let prefix = format!("{REFS}/{id}/tasks/");
        let listed = self
            .user
            .remote_refs(remote, &format!("{prefix}*"))
            .map_err(|e| format!("cannot list the tasks on the remote {remote:?}: {e}"))?;
        let pushed: BTreeSet<u32> =
            listed.iter().filter_map(|(_, name)| name.strip_prefix(&prefix)?.parse::<u32>().ok()).collect();
        if !pushed.is_empty() {
            self.user
                .fetch_refs(remote, &format!("+{prefix}*:{prefix}*"))
                .map_err(|e| format!("cannot fetch the tasks of run {id} from {remote:?}: {e}"))?;
        }
        Ok(pushed)
    }

    /// What stays read-only while a task's code runs under a check: the store, for-loop's files,
    /// this repository and its git directories.
    fn read_only(&self) -> Vec<PathBuf> {
        let mut read_only = crate::checks::sandbox::read_only_paths(self.env, self.store.root());
        read_only.push(self.user.root().to_path_buf());
        read_only.extend(GitDirs::of(self.user.root()).into_iter().flat_map(|git| [git.own, git.common]));
        read_only
    }

    /// Task `t`'s row before the queue: its commit when it may be offered (the detail left
    /// empty), else why not.
    fn row(&self, t: &Task, pushed: bool, oracle: &Oracle) -> Row {
        let git_ref = self.tasks_ref(t.n);
        let mut row = Row {
            task: t.n,
            title: t.title.clone(),
            landed: false,
            order: None,
            detail: String::new(),
            git_ref,
            commit: None,
            claim: None,
        };
        if !pushed {
            row.detail = "missing: nothing was pushed (its job was killed, or failed before its end)".into();
            return row;
        }
        let Ok(commit) = self.user.resolve(&format!("{}^{{commit}}", row.git_ref)) else {
            let kind = self.user.object_kind(&row.git_ref).unwrap_or_else(|_| "unreadable".into());
            row.detail = format!("refused: {} is not a commit (it is a {kind})", row.git_ref);
            return row;
        };
        row.claim = self
            .user
            .commit_text(&commit, MAX_MESSAGE_BYTES)
            .ok()
            .flatten()
            .and_then(|text| Claim::read(&String::from_utf8_lossy(&text)));
        row.commit = Some(commit.clone());
        if let Err(what) = self.honest(&commit, oracle) {
            row.detail = format!("refused: {what}");
        }
        row
    }

    /// Whether `commit` may be merged at all: one commit on the merge's start that leaves every
    /// check's files as they are there.
    fn honest(&self, commit: &str, oracle: &Oracle) -> Result<(), String> {
        let parent = self.user.resolve(&format!("{commit}^1^{{tree}}")).ok();
        if parent.as_deref() != Some(self.base_tree.as_str()) {
            return Err(format!(
                "it does not start from this checkout's commit {} (run the merge on the commit the tasks started from)",
                self.base
            ));
        }
        let changed = self.user.changed_files(&self.base, commit).map_err(|e| e.to_string())?;
        let checks: Vec<String> = oracle
            .files
            .keys()
            .map(|file| repo_path(&self.prefix, file))
            .filter(|f| changed.contains(f))
            .collect();
        if checks.is_empty() {
            Ok(())
        } else {
            Err(format!("it changed the checks' own files: {}", checks.join(", ")))
        }
    }

    /// The table of tasks and what landed; with `--json`, one JSON object saying the same.
    fn report(&self, rows: &[Row], head: &str, pushed: &Result<(), String>) -> Outcome {
        let integration = self.integration();
        let mut landed: Vec<&Row> = rows.iter().filter(|r| r.landed).collect();
        landed.sort_by_key(|r| r.order);
        // What landed goes on to its pull request even when other tasks did not land.
        let code = if pushed.is_ok() && !landed.is_empty() { Code::Success } else { Code::Refused };
        if self.json {
            let order: Vec<u32> = landed.iter().map(|r| r.task).collect();
            let event = json!({"event": "merged", "run": self.id, "backlog": self.file, "remote": self.remote,
                "base": self.base, "verify": self.verify, "commit": head, "ref": integration,
                "pushed": pushed.as_ref().err().map_or(json!(true), |e| json!(e)),
                "landed": order, "tasks": rows});
            return Outcome { code, stdout: event.to_string() };
        }
        let verify = self.verify.as_deref().map(|v| format!(" and `{v}`")).unwrap_or_default();
        let mut text = format!(
            "for-loop: run {}: the tasks of {} from {}, merged here one at a time on {}, each merged tree \
             judged by the checks of the tasks landed so far{verify}",
            self.id, self.file, self.remote, self.base
        );
        for row in rows {
            let said = row.claim.as_ref().map(|c| format!("; {}", c.describe())).unwrap_or_default();
            let commit = row.commit.as_deref().map(|c| format!(" {c}")).unwrap_or_default();
            text.push_str(&format!(
                "\n  task {}. {}: {}{said}\n    {}{commit}",
                row.task, row.title, row.detail, row.git_ref
            ));
        }
        let order: Vec<String> = landed.iter().map(|r| r.task.to_string()).collect();
        text.push_str(&match (order.is_empty(), pushed) {
            (true, _) => "\nno task landed".to_string(),
            (false, Ok(())) => format!(
                "\nlanded, in order: {}; kept as {integration} (commit {head}), pushed to {}\n  see it: git diff {} {integration}",
                order.join(", "),
                self.remote,
                self.base
            ),
            (false, Err(e)) => format!(
                "\nlanded, in order: {}; kept here as {integration} (commit {head}), but not pushed: {e}\n  push it with \
                 `git push {} +{integration}:{integration}`",
                order.join(", "),
                self.remote
            ),
        });
        Outcome { code, stdout: text }
    }
}

/// A file of the oracle (relative to the checks' directory) as a path in the repository.
fn repo_path(prefix: &Path, file: &str) -> String {
    let joined = prefix.join(file);
    joined.to_string_lossy().replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> RunOptions {
        RunOptions::parse(args.iter().map(std::ffi::OsString::from).collect()).unwrap()
    }

    #[test]
    fn a_claim_reads_back_from_its_message_and_hostile_text_is_cut() {
        let claim = Claim { task: 2, outcome: "verified".into(), passed: true, iterations: 1, seconds: 7 };
        let message = claim.message("r-1", "Add the flag");
        assert!(message.starts_with("for-loop: backlog task 2 (run r-1): Add the flag\n"), "{message}");
        assert_eq!(Claim::read(&message), Some(claim));
        let hostile = format!(
            "{CLAIM_LINE}{}",
            json!({"task": 1, "outcome": "x\u{1b}[2J\n", "passed": false, "iterations": 2, "seconds": 0})
        );
        assert_eq!(Claim::read(&hostile).unwrap().outcome, "x2J");
        for bad in ["", "no claim here", &format!("{CLAIM_LINE}{{"), &format!("{CLAIM_LINE}[1]")] {
            assert_eq!(Claim::read(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn options_of_a_backlog_over_machines_that_do_not_fit_are_refused() {
        let wrong = |args: &[&str]| misuse(&parse(args));
        assert_eq!(wrong(&["--backlog", "B.md", "--task", "2", "--run-id", "42"]), None);
        assert_eq!(wrong(&["--backlog", "B.md", "--merge", "--run-id", "42", "--verify", "make"]), None);
        assert_eq!(wrong(&["--backlog", "B.md", "--list", "--json"]), None);
        for (args, said) in [
            (&["--task", "1", "--run-id", "1"][..], "go with --backlog FILE"),
            (&["--merge"], "go with --backlog FILE"),
            (&["--backlog", "B.md", "--task", "1"], "give --run-id ID"),
            (&["--backlog", "B.md", "--merge", "--run-id", "..x"], "cannot name a git ref"),
            (&["--backlog", "B.md", "--merge", "--run-id", "1", "--backoff", "1s"], "runs no agent"),
            (&["--backlog", "B.md", "--merge", "--run-id", "1", "--max-merge-tries", "2"], "runs no agent"),
            (&["--backlog", "B.md", "--task", "1", "--run-id", "1", "--remote", ""], "--remote"),
            (&["--backlog", "B.md", "--task", "1", "--run-id", "1", "--attempts", "2"], "leave out"),
            (&["--backlog", "B.md", "--remote", "origin"], "go with --task N or --merge"),
            (&["--backlog", "B.md", "--list", "--remote", "origin"], "runs nothing"),
        ] {
            let found = wrong(args).unwrap_or_default();
            assert!(found.contains(said), "{args:?}: {found:?}");
        }
        for bad in [&["--backlog", "B.md", "--task", "0"][..], &["--backlog", "B.md", "--task=x"]] {
            assert!(
                RunOptions::parse(bad.iter().map(std::ffi::OsString::from).collect()).is_err(),
                "{bad:?}"
            );
        }
        let both = ["--backlog", "B.md", "--task", "1", "--merge"].map(std::ffi::OsString::from).to_vec();
        assert!(RunOptions::parse(both).unwrap_err().contains("give one"));
        assert!(asked(&parse(&["--backlog", "B.md", "--run-id", "1"])));
        assert!(!asked(&parse(&["--backlog", "B.md", "--parallel", "2"])));
    }
}
