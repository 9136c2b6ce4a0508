//! The merge queue and its judge. One task at a time, the queue merges the task's commit onto
//! the run's integration branch in a work tree of its own, then runs on the merged tree the
//! task's check, the check of every task landed before it (in landing order) and the run's
//! `--verify`. Only when all pass does the integration ref move, from the head it was on to the
//! merge; a conflict, a failing check or a step that fails (git, the disk) leaves it where it was.
//! What a task or its agent claims is never read: the commit and the checks decide.
//!
//! [`Queue::land_all`] is the whole queue with nobody to send a task back to, for commits made
//! elsewhere (one machine per task): what does not land is named with why.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::checks::verify::VerifySpec;
use crate::worktree::WorkTree;

/// A task's check that failed on a merged tree, or the run's `--verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub(crate) enum Failing {
    Task(u32),
    /// Serialized as the word `verify`.
    Verify(&'static str),
}

/// The `--verify` entry of a failing list.
pub(crate) const VERIFY: Failing = Failing::Verify("verify");

/// What the queue made of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judged {
    /// Merged and every check passed: the integration ref is on `head` now.
    Landed { head: String },
    /// The merge conflicts in `files`. `marked` is a commit on the integration head holding the
    /// task's change with git's conflict markers, for the task's agent to resolve.
    Conflict { files: Vec<String>, said: String, marked: String },
    /// Merged cleanly, but checks failed on the merged tree; `merged` is that merge (not landed).
    Broken { failing: Vec<Failing>, output: String, merged: String },
    /// A step of the queue's own failed (git, the disk): nothing moved, the task may try again.
    Fault(String),
}

/// A task offered to the queue: its number, its check and the commit of its end state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Offered {
    pub(crate) n: u32,
    pub(crate) check: String,
    pub(crate) commit: String,
}

// The merge job of a backlog spread over machines is its caller; on one machine the queue is
// driven a task at a time ([`Queue::judge`]).
#[allow(dead_code)]
/// What [`Queue::land_all`] gives: what landed in order, why the rest did not, the final head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Landing {
    pub(crate) landed: Vec<u32>,
    pub(crate) not_landed: Vec<(u32, String)>,
    pub(crate) head: String,
}

/// The queue of one run: the user's repository, the queue's own work tree, the integration ref.
pub(crate) struct Queue {
    repo: WorkTree,
    scratch: PathBuf,
    /// Where in the repository the checks run (the user's place in it at start).
    prefix: PathBuf,
    integration: String,
    head: String,
    /// The tasks landed so far, in order, with their checks.
    landed: Vec<(u32, String)>,
    verify: Option<String>,
    timeout: Duration,
    /// bubblewrap's read-only paths when the checks run sandboxed, else `None`.
    sandbox: Option<Vec<PathBuf>>,
    /// The files the checks stand on (repository paths), each with whose check it is.
    protected: Vec<(String, Failing)>,
}

impl Queue {
    /// The queue on `repo`'s ref `integration` (created at `base` when missing), checking in the
    /// work tree `scratch` (added at the head when missing). `landed` are the tasks already
    /// landed by an earlier driver of the same run.
    pub(crate) fn open(
        repo: &WorkTree,
        scratch: &Path,
        integration: &str,
        base: &str,
        landed: Vec<(u32, String)>,
    ) -> Result<Queue, String> {
        let head = if let Ok(head) = repo.resolve(&format!("{integration}^{{commit}}")) {
            head
        } else {
            repo.update_ref(integration, base).map_err(|e| format!("cannot create {integration}: {e}"))?;
            base.to_string()
        };
        if !scratch.join(".git").exists() {
            repo.add_linked_tree(scratch, &head)
                .map_err(|e| format!("cannot add the queue's work tree {}: {e}", scratch.display()))?;
        }
        Ok(Queue {
            repo: repo.clone(),
            scratch: scratch.to_path_buf(),
            prefix: PathBuf::new(),
            integration: integration.to_string(),
            head,
            landed,
            verify: None,
            timeout: Duration::from_secs(600),
            sandbox: None,
            protected: Vec::new(),
        })
    }

    /// Guards the files `checks` (each task's, by number) and `--verify` run, as the head's tree
    /// has them: a merge that changes one does not land, whatever the checks then say, for a
    /// task may not rewrite what judges it or another task.
    pub(crate) fn protecting(mut self, checks: &[(u32, String)]) -> Queue {
        let tree = WorkTree::open(&self.scratch);
        if !self.scratch.join(".git").is_file() || tree.reset_to(&self.head).is_err() {
            return self;
        }
        let cwd = self.scratch.join(&self.prefix);
        let named = checks
            .iter()
            .map(|(n, check)| (Failing::Task(*n), check.as_str()))
            .chain(self.verify.as_deref().map(|v| (VERIFY, v)));
        let mut protected = Vec::new();
        for (who, command) in named {
            for file in crate::checks::oracle::files_run_by(&cwd, command) {
                let path = self.prefix.join(&file).to_string_lossy().replace('\\', "/");
                protected.push((path, who.clone()));
            }
        }
        self.protected = protected;
        self
    }

    /// The checks run at `prefix` in the tree, each for at most `timeout`, then `verify`.
    pub(crate) fn checking(mut self, prefix: &Path, verify: Option<String>, timeout: Duration) -> Queue {
        self.prefix = prefix.to_path_buf();
        self.verify = verify.filter(|v| !v.trim().is_empty());
        self.timeout = timeout;
        self
    }

    /// The checks run in verify's sandbox, with `read_only` read-only (the store, for-loop, the
    /// user's repository), when `available`.
    pub(crate) fn sandboxed(mut self, available: bool, read_only: Vec<PathBuf>) -> Queue {
        self.sandbox = available.then_some(read_only);
        self
    }

    /// Merges task `offered` onto the integration head and judges the merged tree.
    pub(crate) fn judge(&mut self, offered: &Offered) -> Judged {
        let Offered { n, check, commit } = offered;
        let merged = match self.repo.merge_commits(&self.head, commit) {
            Ok(merged) => merged,
            Err(e) => return Judged::Fault(format!("the merge of task {n} failed: {e}")),
        };
        let message = format!("for-loop: backlog task {n}");
        if !merged.conflicts.is_empty() {
            return match self.repo.commit_merge(
                &merged.tree,
                &[&self.head],
                &format!("{message}, conflicted"),
            ) {
                Ok(marked) => Judged::Conflict { files: merged.conflicts, said: merged.said, marked },
                Err(e) => Judged::Fault(format!("the conflict of task {n} could not be kept: {e}")),
            };
        }
        let commit = match self.repo.commit_merge(&merged.tree, &[&self.head, commit], &message) {
            Ok(commit) => commit,
            Err(e) => return Judged::Fault(format!("the merge of task {n} could not be written: {e}")),
        };
        // Without its `.git` file, git would find whatever repository lies around the directory.
        let reset = if self.scratch.join(".git").is_file() {
            WorkTree::open(&self.scratch).reset_to(&commit).map_err(|e| e.to_string())
        } else {
            Err(format!("{} is gone", self.scratch.display()))
        };
        let changed = match self.repo.changed_files(&self.head, &commit) {
            Ok(changed) => changed,
            Err(e) => return Judged::Fault(format!("the files task {n} changes could not be read: {e}")),
        };
        let touched: Vec<&(String, Failing)> =
            self.protected.iter().filter(|(file, _)| changed.contains(file)).collect();
        if !touched.is_empty() {
            let mut failing: Vec<Failing> = Vec::new();
            for (_, who) in &touched {
                if !failing.contains(who) {
                    failing.push(who.clone());
                }
            }
            let files: Vec<&str> = touched.iter().map(|(file, _)| file.as_str()).collect();
            let output = format!(
                "the change edits files the checks run ({}): a task may not change what judges it or \
                 another task; leave them as they are\n",
                files.join(", ")
            );
            return Judged::Broken { failing, output, merged: commit };
        }
        if let Err(e) = reset {
            return Judged::Fault(format!("the queue's work tree could not take the merge of task {n}: {e}"));
        }
        let marked: Vec<&str> = changed
            .iter()
            .filter(|file| has_conflict_markers(&self.scratch.join(file)))
            .map(String::as_str)
            .collect();
        if !marked.is_empty() {
            // A check that greps for one side passes on a file holding both: never landed.
            let output = format!(
                "git's conflict markers are left in {}: resolve each conflict and remove the markers\n",
                marked.join(", ")
            );
            return Judged::Broken { failing: vec![Failing::Task(*n)], output, merged: commit };
        }
        let (failing, output) = self.run_checks(*n, check);
        if !failing.is_empty() {
            return Judged::Broken { failing, output, merged: commit };
        }
        if let Err(e) = self.repo.move_ref(&self.integration, &commit, &self.head) {
            return Judged::Fault(format!(
                "{} could not be moved to task {n}'s merge: {e}",
                self.integration
            ));
        }
        self.head = commit;
        self.landed.push((*n, check.clone()));
        Judged::Landed { head: self.head.clone() }
    }

    /// Runs task `n`'s check, then every landed task's, then `--verify`, each command once; the
    /// ones that failed and what they said.
    fn run_checks(&self, n: u32, check: &str) -> (Vec<Failing>, String) {
        let mut runs: Vec<(Failing, &str)> = vec![(Failing::Task(n), check)];
        runs.extend(self.landed.iter().map(|(n, check)| (Failing::Task(*n), check.as_str())));
        runs.extend(self.verify.as_deref().map(|v| (VERIFY, v)));
        let mut failing = Vec::new();
        let mut output = String::new();
        let mut passed: Vec<&str> = Vec::new();
        for (who, command) in runs {
            if passed.contains(&command) {
                continue;
            }
            match self.run_one(command) {
                Ok(()) => passed.push(command),
                Err(said) => {
                    output.push_str(&said);
                    failing.push(who);
                }
            }
        }
        (failing, output)
    }

    fn run_one(&self, command: &str) -> Result<(), String> {
        let cwd = self.scratch.join(&self.prefix);
        let sandbox = match &self.sandbox {
            Some(read_only) => crate::checks::sandbox::verify_sandbox(&cwd, read_only),
            None => Vec::new(),
        };
        let spec = VerifySpec { command: command.to_string(), cwd, timeout: self.timeout, sandbox };
        match spec.run() {
            Ok(outcome) if outcome.passed() => Ok(()),
            Ok(outcome) => Err(format!(
                "`{command}` fails on the merged tree ({}):\n{}\n",
                outcome.describe(),
                outcome.output.last_lines(20, 3_000)
            )),
            Err(e) => Err(format!("`{command}` could not run on the merged tree: {e}\n")),
        }
    }

    #[allow(dead_code)]
    /// Judges every task of `offered` in order, nobody to send one back to: what does not land
    /// now does not land, with why.
    pub(crate) fn land_all(&mut self, offered: &[Offered]) -> Landing {
        let mut landing = Landing { landed: vec![], not_landed: vec![], head: String::new() };
        for task in offered {
            match self.judge(task) {
                Judged::Landed { .. } => landing.landed.push(task.n),
                Judged::Conflict { files, .. } => {
                    landing.not_landed.push((task.n, format!("conflict in {}", files.join(", "))));
                }
                Judged::Broken { failing, .. } => landing.not_landed.push((task.n, broken(&failing))),
                Judged::Fault(why) => landing.not_landed.push((task.n, why)),
            }
        }
        landing.head.clone_from(&self.head);
        landing
    }
}

/// Whether `file` holds a conflict as git marks one: a `<<<<<<< ` line, then `=======`, then
/// `>>>>>>> `. Files past 4 MiB, unreadable or binary ones are not looked at.
fn has_conflict_markers(file: &Path) -> bool {
    let Ok(bytes) = crate::support::read::bounded_read::read(file, 4 << 20) else { return false };
    let Ok(text) = std::str::from_utf8(&bytes) else { return false };
    let mut seen = 0;
    for line in text.lines() {
        seen = match (seen, line) {
            (0, l) if l.starts_with("<<<<<<< ") => 1,
            (1, "=======") => 2,
            (2, l) if l.starts_with(">>>>>>> ") => return true,
            (seen, _) => seen,
        };
    }
    false
}

/// Which checks broke, in words: `the checks of tasks 1, 3 and verify fail on the merged tree`.
pub(crate) fn broken(failing: &[Failing]) -> String {
    let names: Vec<String> = failing
        .iter()
        .map(|f| match f {
            Failing::Task(n) => format!("task {n}'s check"),
            Failing::Verify(_) => "--verify".to_string(),
        })
        .collect();
    format!("{} failed on the merged tree", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worktree::testing::{git, repo, write};

    const INTEGRATION: &str = "refs/for-loop/backlog/r/integration";

    /// A repository whose `a.txt` three tasks edit, and the commit of each task's change.
    struct Fixture {
        dir: tempfile::TempDir,
        repo: WorkTree,
        base: String,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = repo(&[("a.txt", "one\ntwo\nthree\n")]);
            let repo = WorkTree::open(dir.path());
            let base = repo.head_commit().unwrap();
            Fixture { dir, repo, base }
        }

        /// A commit on the start with `files` written.
        fn task(&self, files: &[(&str, &str)]) -> String {
            git(self.dir.path(), &["checkout", "-q", "--detach", &self.base]);
            for (file, text) in files {
                write(self.dir.path(), file, text);
            }
            git(self.dir.path(), &["add", "-A"]);
            git(self.dir.path(), &["commit", "-qm", "task"]);
            self.repo.head_commit().unwrap()
        }

        fn queue(&self, scratch: &tempfile::TempDir) -> Queue {
            Queue::open(&self.repo, &scratch.path().join("queue"), INTEGRATION, &self.base, vec![])
                .unwrap()
                .checking(Path::new(""), None, Duration::from_secs(30))
        }

        fn integration(&self) -> String {
            self.repo.resolve(INTEGRATION).unwrap()
        }
    }

    fn offered(n: u32, check: &str, commit: &str) -> Offered {
        Offered { n, check: check.into(), commit: commit.into() }
    }

    #[test]
    fn tasks_land_in_order_and_each_later_merge_runs_the_earlier_checks() {
        let f = Fixture::new();
        let scratch = tempfile::tempdir().unwrap();
        let one = f.task(&[("b.txt", "b\n")]);
        let two = f.task(&[("c.txt", "c\n")]);
        let mut queue = f.queue(&scratch);
        assert_eq!(f.integration(), f.base, "the integration ref starts at the base");
        assert!(matches!(queue.judge(&offered(1, "test -f b.txt", &one)), Judged::Landed { .. }));
        let Judged::Landed { head } = queue.judge(&offered(2, "test -f c.txt && test -f b.txt", &two)) else {
            panic!("task 2 did not land")
        };
        assert_eq!(f.integration(), head);
        assert_eq!(git(f.dir.path(), &["show", &format!("{head}:b.txt")]), "b\n");
        assert_eq!(git(f.dir.path(), &["show", &format!("{head}:c.txt")]), "c\n");
    }

    #[test]
    fn a_conflict_does_not_land_and_gives_a_tree_with_the_markers_on_the_head() {
        let f = Fixture::new();
        let scratch = tempfile::tempdir().unwrap();
        let one = f.task(&[("a.txt", "one\nONE\nthree\n")]);
        let two = f.task(&[("a.txt", "one\nTWO\nthree\n")]);
        let mut queue = f.queue(&scratch);
        let Judged::Landed { head } = queue.judge(&offered(1, "true", &one)) else { panic!() };
        let Judged::Conflict { files, said, marked } = queue.judge(&offered(2, "true", &two)) else {
            panic!("no conflict")
        };
        assert_eq!(files, ["a.txt"]);
        assert!(said.contains("CONFLICT"), "{said}");
        assert_eq!(f.integration(), head, "a conflict moved the integration ref");
        assert_eq!(git(f.dir.path(), &["rev-parse", &format!("{marked}^")]).trim(), head);
        assert!(git(f.dir.path(), &["show", &format!("{marked}:a.txt")]).contains("<<<<<<<"));
    }

    #[test]
    fn a_task_breaking_a_landed_tasks_check_or_verify_is_never_merged() {
        let f = Fixture::new();
        let scratch = tempfile::tempdir().unwrap();
        let one = f.task(&[("b.txt", "b\n")]);
        let breaker = f.task(&[("gone.txt", "")]);
        let verify = "test ! -f gone.txt || { echo 'FAIL: gone.txt is back'; exit 1; }";
        let mut queue = Queue::open(&f.repo, &scratch.path().join("q"), INTEGRATION, &f.base, vec![])
            .unwrap()
            .checking(Path::new(""), Some(verify.into()), Duration::from_secs(30));
        let Judged::Landed { head } = queue.judge(&offered(1, "test -f b.txt && test ! -f gone.txt", &one))
        else {
            panic!("task 1 did not land")
        };
        // Task 2 passes its own check; on the merged tree task 1's check and --verify fail.
        let Judged::Broken { failing, output, .. } = queue.judge(&offered(2, "test -f gone.txt", &breaker))
        else {
            panic!("a broken merge was not refused")
        };
        assert_eq!(failing, [Failing::Task(1), VERIFY]);
        assert!(output.contains("FAIL: gone.txt is back"), "{output}");
        assert_eq!(f.integration(), head, "a broken merge moved the integration ref");
        assert_eq!(serde_json::to_string(&failing).unwrap(), r#"[1,"verify"]"#);
        let landing = queue.land_all(&[offered(2, "test -f gone.txt", &breaker)]);
        assert_eq!((landing.landed, landing.head), (vec![], head));
        assert_eq!(
            landing.not_landed,
            [(2, "task 1's check, --verify failed on the merged tree".to_string())]
        );
    }

    #[test]
    fn a_failing_merge_step_leaves_the_integration_ref_where_it_was() {
        let f = Fixture::new();
        let scratch = tempfile::tempdir().unwrap();
        let one = f.task(&[("b.txt", "b\n")]);
        let mut queue = f.queue(&scratch);
        let missing = "0123456789012345678901234567890123456789";
        assert!(matches!(queue.judge(&offered(1, "true", missing)), Judged::Fault(_)));
        // The queue's own tree gone (a full disk, a sweep): the merge cannot be checked, so it does not land.
        std::fs::remove_dir_all(scratch.path().join("queue")).unwrap();
        let Judged::Fault(why) = queue.judge(&offered(1, "true", &one)) else { panic!("landed unchecked") };
        assert!(why.contains("queue's work tree"), "{why}");
        assert_eq!(f.integration(), f.base);
    }

    #[test]
    fn a_task_that_rewrites_a_check_does_not_land_whatever_the_checks_then_say() {
        let f = Fixture::new();
        write(f.dir.path(), "checks/one.sh", "grep -q ONE a.txt\n");
        git(f.dir.path(), &["add", "-A"]);
        git(f.dir.path(), &["commit", "-qm", "checks"]);
        let f = Fixture { base: f.repo.head_commit().unwrap(), ..f };
        let scratch = tempfile::tempdir().unwrap();
        let cheat = f.task(&[("checks/one.sh", "exit 0\n"), ("b.txt", "b\n")]);
        let checks = [(1, "sh checks/one.sh".to_string()), (2, "test -f b.txt".to_string())];
        let mut queue = f.queue(&scratch).protecting(&checks);
        let Judged::Broken { failing, output, .. } = queue.judge(&offered(2, "test -f b.txt", &cheat)) else {
            panic!("a task that rewrote task 1's check landed")
        };
        assert_eq!(failing, [Failing::Task(1)]);
        assert!(output.contains("checks/one.sh"), "{output}");
        assert_eq!(f.integration(), f.base);
        let honest = f.task(&[("b.txt", "b\n")]);
        assert!(matches!(queue.judge(&offered(2, "test -f b.txt", &honest)), Judged::Landed { .. }));
    }

    #[test]
    fn a_merge_that_leaves_conflict_markers_does_not_land_though_its_checks_pass() {
        let f = Fixture::new();
        let scratch = tempfile::tempdir().unwrap();
        let marked = "one\n<<<<<<< ours\nONE\n=======\nTWO\n>>>>>>> theirs\nthree\n";
        let sloppy = f.task(&[("a.txt", marked)]);
        let mut queue = f.queue(&scratch);
        let Judged::Broken { failing, output, .. } = queue.judge(&offered(1, "grep -q TWO a.txt", &sloppy))
        else {
            panic!("a tree with conflict markers landed")
        };
        assert_eq!(failing, [Failing::Task(1)]);
        assert!(output.contains("conflict markers are left in a.txt"), "{output}");
        let dir = tempfile::tempdir().unwrap();
        for (text, marks) in [(marked, true), ("<<<<<<< only\n", false), ("a\n=======\nb\n", false)] {
            std::fs::write(dir.path().join("f"), text).unwrap();
            assert_eq!(has_conflict_markers(&dir.path().join("f")), marks, "{text:?}");
        }
    }
}
