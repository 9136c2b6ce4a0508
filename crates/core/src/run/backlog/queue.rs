//! The merge queue and its judge. One task at a time, the queue merges the task's commit onto
//! the run's integration branch in a work tree of its own, then runs on the merged tree the
//! task's check, the check of every task landed before it (in landing order) and the run's
//! `--verify`. Only when all pass does the integration ref move, from the head it was on to the
//! merge; a conflict, a failing check or a step that fails (git, the disk) leaves it where it was.
//! What a task or its agent claims is never read: the commit and the checks decide.
//!
//! [`Queue::land_all`] is the whole queue with nobody to send a task back to, for commits made
//! elsewhere (one machine per task): what does not land is named with why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::checks::VerifySpec;
use crate::checks::{ChangeKind, OracleChange, SuiteGuard};
use crate::checks::{RatchetStatus, TestRatchet};
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
    /// The test-count ratchet of the task's own loop when its check passed there, when known:
    /// the merge must run as many of its tests and skip no more.
    pub(crate) tests: Option<TestRatchet>,
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
    /// The test suite is protected as a session loop protects it (no `--allow-test-edits`): the
    /// oracle's rules on test and runner files, and the test-count ratchet, judge each merge.
    suite: bool,
    /// The test-count ratchet of each check command on the integration head: what it ran there,
    /// learnt at the head before the command's first judged merge and at every landing.
    tests: BTreeMap<String, TestRatchet>,
}

/// One check run on a tree.
struct Ran {
    passed: bool,
    /// Why it failed, in words for the task's agent; empty when it passed.
    said: String,
    /// The test counts it printed; `None` when it timed out (it may not have reached them).
    tests: Option<crate::checks::Tally>,
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
            suite: true,
            tests: BTreeMap::new(),
        })
    }

    /// Test edits are allowed (`--allow-test-edits`): neither the suite's rules nor the
    /// test-count ratchet judge a merge, as in a loop started with that flag.
    pub(crate) fn allowing_test_edits(mut self, allowed: bool) -> Queue {
        self.suite = !allowed;
        self
    }

    /// The test-count records of the integration head, kept from an earlier driver of the run.
    pub(crate) fn with_test_records(mut self, records: BTreeMap<String, TestRatchet>) -> Queue {
        self.tests = records;
        self
    }

    /// The test-count records of the integration head, for the run's record.
    pub(crate) fn test_records(&self) -> &BTreeMap<String, TestRatchet> {
        &self.tests
    }

    /// Guards the files `checks` (each task's, by number) and `--verify` run, as the head's tree
    /// has them: a merge that changes one does not land, whatever the checks then say, for a
    /// task may not rewrite what judges it or another task.
    pub(crate) fn protecting(mut self, checks: &[(u32, String)]) -> Queue {
        let tree = WorkTree::open(&self.scratch);
        if !self.scratch.join(".git").is_file() || tree.reset_clean_to(&self.head).is_err() {
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
        let Offered { n, check, commit, .. } = offered;
        let (merged, changed) = match self.merge(*n, commit) {
            Ok(merged) => merged,
            Err(judged) => return judged,
        };
        if let Some(judged) = self.edits_what_judges(&changed, &merged) {
            return judged;
        }
        let runs = self.runs(*n, check);
        if let Err(judged) = self.take_merge(*n, &runs, &merged) {
            return judged;
        }
        if let Some(judged) = self.markers_left(*n, &changed, &merged) {
            return judged;
        }
        let (failing, output, learnt) = self.run_checks(&runs, offered.tests.as_ref());
        if !failing.is_empty() {
            return Judged::Broken { failing, output, merged };
        }
        if let Err(e) = self.repo.move_ref(&self.integration, &merged, &self.head) {
            return Judged::Fault(format!(
                "{} could not be moved to task {n}'s merge: {e}",
                self.integration
            ));
        }
        self.head = merged;
        self.tests.extend(learnt);
        self.landed.push((*n, check.clone()));
        Judged::Landed { head: self.head.clone() }
    }

    /// Task `n`'s `commit` merged onto the head and written: the merge and the files it changes,
    /// or what ends the judging (a conflict, kept as a commit for its agent; a fault).
    fn merge(&self, n: u32, commit: &str) -> Result<(String, Vec<String>), Judged> {
        let merged = self
            .repo
            .merge_commits(&self.head, commit)
            .map_err(|e| Judged::Fault(format!("the merge of task {n} failed: {e}")))?;
        let message = format!("for-loop: backlog task {n}");
        if !merged.conflicts.is_empty() {
            return Err(
                match self.repo.commit_merge(&merged.tree, &[&self.head], &format!("{message}, conflicted")) {
                    Ok(marked) => Judged::Conflict { files: merged.conflicts, said: merged.said, marked },
                    Err(e) => Judged::Fault(format!("the conflict of task {n} could not be kept: {e}")),
                },
            );
        }
        let written = self
            .repo
            .commit_merge(&merged.tree, &[&self.head, commit], &message)
            .map_err(|e| Judged::Fault(format!("the merge of task {n} could not be written: {e}")))?;
        // Without its `.git` file, git would find whatever repository lies around the directory.
        if !self.scratch.join(".git").is_file() {
            let gone = format!("{} is gone", self.scratch.display());
            return Err(Judged::Fault(format!(
                "the queue's work tree could not take the merge of task {n}: {gone}"
            )));
        }
        let changed = self
            .repo
            .changed_files(&self.head, &written)
            .map_err(|e| Judged::Fault(format!("the files task {n} changes could not be read: {e}")))?;
        Ok((written, changed))
    }

    /// A merge that edits a file a check or `--verify` runs is broken for every check it edits,
    /// whatever the checks would say.
    fn edits_what_judges(&self, changed: &[String], merged: &str) -> Option<Judged> {
        let touched: Vec<&(String, Failing)> =
            self.protected.iter().filter(|(file, _)| changed.contains(file)).collect();
        if touched.is_empty() {
            return None;
        }
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
        Some(Judged::Broken { failing, output, merged: merged.to_string() })
    }

    /// Puts the merge in the queue's work tree. The head first, cleaned of ignored files: its
    /// runner sections, and the test counts of every check that never ran on the integration,
    /// learnt before the merge is judged; a merge that edits the test suite is broken.
    fn take_merge(&mut self, n: u32, runs: &[(Failing, String)], merged: &str) -> Result<(), Judged> {
        let tree = WorkTree::open(&self.scratch);
        let cwd = self.scratch.join(&self.prefix);
        let mut guard = None;
        if self.suite {
            tree.reset_clean_to(&self.head).map_err(|e| {
                Judged::Fault(format!("the queue's work tree could not take the integration head: {e}"))
            })?;
            guard = Some(SuiteGuard::on(&cwd, 0));
            self.learn_head(runs);
        }
        tree.reset_clean_to(merged).map_err(|e| {
            Judged::Fault(format!("the queue's work tree could not take the merge of task {n}: {e}"))
        })?;
        let Some(guard) = &guard else { return Ok(()) };
        let broken = self
            .suite_changes(merged, guard)
            .map_err(|e| Judged::Fault(format!("the files task {n} changes could not be read: {e}")))?;
        if broken.is_empty() {
            return Ok(());
        }
        let named: Vec<String> = broken.iter().map(ToString::to_string).collect();
        let output = format!(
            "the change edits the test suite as a loop may not ({}): a test runner's own files (a \
             conftest.py, a .pth, a setup file) and the tests already there judge every task; \
             leave them as they are and add new test files instead\n",
            named.join(", ")
        );
        Err(Judged::Broken { failing: vec![Failing::Task(n)], output, merged: merged.to_string() })
    }

    /// A merge that leaves git's conflict markers in a file it changes is broken: a check that
    /// greps for one side passes on a file holding both.
    fn markers_left(&self, n: u32, changed: &[String], merged: &str) -> Option<Judged> {
        let marked: Vec<&str> = changed
            .iter()
            .filter(|file| has_conflict_markers(&self.scratch.join(file)))
            .map(String::as_str)
            .collect();
        if marked.is_empty() {
            return None;
        }
        let output = format!(
            "git's conflict markers are left in {}: resolve each conflict and remove the markers\n",
            marked.join(", ")
        );
        Some(Judged::Broken { failing: vec![Failing::Task(n)], output, merged: merged.to_string() })
    }

    /// Checks the integration head as it stands, in the queue's work tree cleaned of ignored
    /// files: every landed task's check and `--verify`, held to the test counts the queue
    /// recorded. `Err` says what failed.
    pub(crate) fn check_head(&self) -> Result<Vec<String>, String> {
        if !self.scratch.join(".git").is_file() {
            return Err(format!("{} is gone", self.scratch.display()));
        }
        WorkTree::open(&self.scratch)
            .reset_clean_to(&self.head)
            .map_err(|e| format!("a clean copy of the integration head could not be made: {e}"))?;
        let mut runs: Vec<(Failing, String)> =
            self.landed.iter().map(|(n, check)| (Failing::Task(*n), check.clone())).collect();
        runs.extend(self.verify.clone().map(|v| (VERIFY, v)));
        let (failing, output, _) = self.run_checks(&runs, None);
        if failing.is_empty() {
            let mut commands: Vec<String> = Vec::new();
            for (_, command) in runs {
                if !commands.contains(&command) {
                    commands.push(command);
                }
            }
            Ok(commands)
        } else {
            Err(output)
        }
    }

    /// What a merge of task `n` runs: its check, every landed task's, then `--verify`.
    fn runs(&self, n: u32, check: &str) -> Vec<(Failing, String)> {
        let mut runs: Vec<(Failing, String)> = vec![(Failing::Task(n), check.to_string())];
        runs.extend(self.landed.iter().map(|(n, check)| (Failing::Task(*n), check.clone())));
        runs.extend(self.verify.clone().map(|v| (VERIFY, v)));
        runs
    }

    /// Runs, on the head in the work tree, each command of `runs` the queue has no test counts
    /// for, and records what it ran: a failing run teaches too (counts only rise).
    fn learn_head(&mut self, runs: &[(Failing, String)]) {
        for (_, command) in runs {
            if self.tests.contains_key(command) {
                continue;
            }
            let ran = self.run_one(command);
            let record = TestRatchet::new(false);
            let learnt = match &ran.tests {
                Some(tally) => record.judge(tally, ran.passed).next,
                None => record,
            };
            self.tests.insert(command.clone(), learnt);
        }
    }

    /// The oracle's rules on the suite, as a session loop applies them, on the files the merge
    /// `merged` changes from the head and the runner sections of shared files.
    fn suite_changes(&self, merged: &str, guard: &SuiteGuard) -> Result<Vec<OracleChange>, String> {
        let prefix = self.prefix.to_string_lossy().replace('\\', "/");
        let prefix = prefix.trim_end_matches('/');
        let changed = self.repo.changed_files_by_kind(&self.head, merged).map_err(|e| e.to_string())?;
        let mut kinds: Vec<OracleChange> = Vec::new();
        for (letter, path) in &changed {
            let relative = match prefix {
                "" => path.as_str(),
                prefix => match path.strip_prefix(prefix).and_then(|p| p.strip_prefix('/')) {
                    Some(relative) => relative,
                    None => continue,
                },
            };
            let kind = match letter {
                'A' => ChangeKind::Added,
                'D' => ChangeKind::Deleted,
                _ => ChangeKind::Modified,
            };
            kinds.push(OracleChange { path: relative.to_string(), kind });
        }
        let mut broken = crate::checks::oracle::suite_rules(&kinds);
        broken.extend(guard.section_changes(&self.scratch.join(&self.prefix)));
        Ok(broken)
    }

    /// Runs each command of `runs` once, in order; the ones that failed, what they said, and
    /// the test-count records each would leave on the integration if the merge lands. A pass
    /// that runs fewer tests, or skips more, than the integration's record (or, for the task's
    /// own check, than `own`, its loop's record) fails, as it would at a session loop's stop.
    fn run_checks(
        &self,
        runs: &[(Failing, String)],
        own: Option<&TestRatchet>,
    ) -> (Vec<Failing>, String, BTreeMap<String, TestRatchet>) {
        let mut failing = Vec::new();
        let mut output = String::new();
        let mut learnt: BTreeMap<String, TestRatchet> = BTreeMap::new();
        let mut passed: Vec<&str> = Vec::new();
        for (index, (who, command)) in runs.iter().enumerate() {
            if passed.contains(&command.as_str()) {
                continue;
            }
            let ran = self.run_one(command);
            let mut said = ran.said.clone();
            if let Some(tally) = &ran.tests {
                let record =
                    self.tests.get(command).cloned().unwrap_or_else(|| TestRatchet::new(!self.suite));
                let judged = record.judge(tally, ran.passed);
                // The task's own check is the first run; its loop's record holds it too.
                let mine = own
                    .filter(|own| index == 0 && self.suite && own.status == RatchetStatus::Armed)
                    .and_then(|own| own.judge(tally, ran.passed).shortfall);
                if let Some(shortfall) = judged.shortfall.or(mine).filter(|_| ran.passed) {
                    said = format!(
                        "`{command}` passes on the merged tree, but does not count:{}",
                        shortfall.explain(command)
                    );
                }
                learnt.insert(command.clone(), judged.next);
            }
            if said.is_empty() {
                passed.push(command);
            } else {
                output.push_str(&said);
                failing.push(who.clone());
            }
        }
        (failing, output, learnt)
    }

    fn run_one(&self, command: &str) -> Ran {
        let cwd = self.scratch.join(&self.prefix);
        let sandbox = match &self.sandbox {
            Some(read_only) => crate::checks::sandbox::verify_sandbox(&cwd, read_only),
            None => Vec::new(),
        };
        let spec = VerifySpec { command: command.to_string(), cwd, timeout: self.timeout, sandbox };
        match spec.run() {
            Ok(outcome) => {
                let tests = (!outcome.timed_out).then(|| outcome.output.tests());
                let said = if outcome.passed() {
                    String::new()
                } else {
                    format!(
                        "`{command}` fails on the merged tree ({}):\n{}\n",
                        outcome.describe(),
                        outcome.output.last_lines(20, 3_000)
                    )
                };
                Ran { passed: outcome.passed(), said, tests }
            }
            Err(e) => Ran {
                passed: false,
                said: format!("`{command}` could not run on the merged tree: {e}\n"),
                tests: None,
            },
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
        Offered { n, check: check.into(), commit: commit.into(), tests: None }
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

    /// A project whose tests a runner counts as pytest does (a start line, then `N passed`),
    /// sourcing every `tests/test_*.sh`: one that exits at its import ends the run at 0 with
    /// no summary, as a `conftest.py` or a test module calling `os._exit(0)` does.
    fn counted() -> Fixture {
        let f = Fixture::new();
        write(
            f.dir.path(),
            "run_tests.sh",
            "echo '============================= test session starts =============================='\n\
             n=0; for t in tests/test_*.sh; do . \"./$t\"; n=$((n+1)); done\n\
             grep -q ONE a.txt || { echo \"=== 1 failed, $((n-1)) passed in 0.01s ===\"; exit 1; }\n\
             echo \"============================== $n passed in 0.01s ==============================\"\n",
        );
        write(f.dir.path(), "tests/test_a.sh", "true\n");
        write(f.dir.path(), "tests/test_b.sh", "true\n");
        git(f.dir.path(), &["add", "-A"]);
        git(f.dir.path(), &["commit", "-qm", "tests"]);
        Fixture { base: f.repo.head_commit().unwrap(), ..f }
    }

    /// Regression: a task adding a test file that exits 0 when the runner imports it landed on
    /// the exit status alone, while the same trick ends a session loop `tests_dropped`.
    #[test]
    fn a_merge_that_runs_fewer_tests_than_the_integration_had_does_not_land() {
        let f = counted();
        let scratch = tempfile::tempdir().unwrap();
        let hidden = f.task(&[("a.txt", "one\ntwo\n"), ("tests/test_zz.sh", "exit 0\n")]);
        let mut queue = f.queue(&scratch);
        let Judged::Broken { failing, output, .. } = queue.judge(&offered(1, "sh run_tests.sh", &hidden))
        else {
            panic!("a merge that ran no test landed")
        };
        assert_eq!(failing, [Failing::Task(1)]);
        assert!(output.contains("does not count"), "{output}");
        assert!(output.contains("no summary this time, 2 ran before"), "{output}");
        assert_eq!(f.integration(), f.base);
        let honest = f.task(&[("a.txt", "ONE\n"), ("tests/test_c.sh", "true\n")]);
        assert!(matches!(queue.judge(&offered(1, "sh run_tests.sh", &honest)), Judged::Landed { .. }));
        assert_eq!(
            queue.test_records()["sh run_tests.sh"].most_ran(),
            Some(3),
            "the landing raised the record"
        );
    }

    /// The task's own loop counted more tests than the merge runs: the merge does not count,
    /// though the integration never ran them.
    #[test]
    fn a_merge_that_runs_fewer_tests_than_the_tasks_own_pass_does_not_land() {
        let f = counted();
        let scratch = tempfile::tempdir().unwrap();
        let task = f.task(&[("a.txt", "ONE\n")]);
        let own = TestRatchet::new(false)
            .judge(
                &crate::checks::test_count::tally("=== test session starts ===\n=== 5 passed in 1s ===\n"),
                true,
            )
            .next;
        let mut queue = f.queue(&scratch);
        let with_own = Offered { tests: Some(own), ..offered(1, "sh run_tests.sh", &task) };
        let Judged::Broken { output, .. } = queue.judge(&with_own) else {
            panic!("landed short of its own pass")
        };
        assert!(output.contains("pytest: 2 ran, 5 before"), "{output}");
        assert!(matches!(queue.judge(&offered(1, "sh run_tests.sh", &task)), Judged::Landed { .. }));
    }

    /// A runner's file added (a `conftest.py`, a `.pth`) or a test already there edited does
    /// not land, whatever the checks say; a new test file does.
    #[test]
    fn a_merge_that_adds_a_runner_file_or_edits_a_test_does_not_land() {
        let f = counted();
        let scratch = tempfile::tempdir().unwrap();
        let mut queue = f.queue(&scratch);
        for (files, named) in [
            (&[("conftest.py", "import os\nos._exit(0)\n")][..], "conftest.py (added)"),
            (&[("tests/test_a.sh", "exit 0\n")][..], "tests/test_a.sh (modified)"),
            (&[("sub/hook.pth", "import os; os._exit(0)\n")][..], "sub/hook.pth (added)"),
        ] {
            let mut files = files.to_vec();
            files.push(("a.txt", "ONE\n"));
            let task = f.task(&files);
            let Judged::Broken { failing, output, .. } = queue.judge(&offered(1, "sh run_tests.sh", &task))
            else {
                panic!("{named}: landed")
            };
            assert_eq!(failing, [Failing::Task(1)]);
            assert!(output.contains(named) && output.contains("test runner's own files"), "{output}");
        }
        assert_eq!(f.integration(), f.base);
        let allowed = f.task(&[("a.txt", "ONE\n"), ("conftest.py", "")]);
        let other = tempfile::tempdir().unwrap();
        let mut lenient = f.queue(&other).allowing_test_edits(true);
        assert!(matches!(lenient.judge(&offered(1, "sh run_tests.sh", &allowed)), Judged::Landed { .. }));
    }

    /// Regression: a cache one task's check wrote, ignored by git, survived the reset between
    /// merges and made a broken task's check pass.
    #[test]
    fn what_a_check_leaves_in_ignored_files_does_not_decide_the_next_merge() {
        let f = Fixture::new();
        write(f.dir.path(), ".gitignore", ".cache/\n");
        // A check that trusts its cache, as Python trusts a `__pycache__` that looks current.
        write(
            f.dir.path(),
            "check.sh",
            "test -f .cache/ok && exit 0\ngrep -q \"$1\" a.txt || exit 1\nmkdir -p .cache && touch .cache/ok\n",
        );
        git(f.dir.path(), &["add", "-A"]);
        git(f.dir.path(), &["commit", "-qm", "check"]);
        let f = Fixture { base: f.repo.head_commit().unwrap(), ..f };
        let scratch = tempfile::tempdir().unwrap();
        let one = f.task(&[("a.txt", "one\nONE\nthree\n")]);
        let broken = f.task(&[("b.txt", "b\n")]);
        let mut queue = f.queue(&scratch);
        assert!(matches!(queue.judge(&offered(1, "sh check.sh ONE", &one)), Judged::Landed { .. }));
        let Judged::Broken { failing, .. } = queue.judge(&offered(2, "sh check.sh TWO", &broken)) else {
            panic!("a broken task passed on what the last check left")
        };
        assert_eq!(failing, [Failing::Task(2)]);
    }

    /// `run --apply`'s check: the integration head in a clean copy, held to the queue's counts.
    #[test]
    fn the_head_is_checked_clean_and_held_to_the_counts_recorded() {
        let f = counted();
        let scratch = tempfile::tempdir().unwrap();
        let task = f.task(&[("a.txt", "ONE\n")]);
        let mut queue = f.queue(&scratch);
        assert!(matches!(queue.judge(&offered(1, "sh run_tests.sh", &task)), Judged::Landed { .. }));
        assert_eq!(queue.check_head(), Ok(vec!["sh run_tests.sh".to_string()]));
        let records = queue.test_records().clone();
        let mut fewer = records.clone();
        let armed = fewer.get_mut("sh run_tests.sh").unwrap();
        armed.suites.get_mut("pytest").unwrap().most_ran = 9;
        let head = f.integration();
        let again = Queue::open(
            &f.repo,
            &scratch.path().join("again"),
            INTEGRATION,
            &f.base,
            vec![(1, "sh run_tests.sh".into())],
        )
        .unwrap()
        .checking(Path::new(""), None, Duration::from_secs(30))
        .with_test_records(fewer);
        let said = again.check_head().unwrap_err();
        assert!(said.contains("pytest: 2 ran, 9 before"), "{said}");
        assert_eq!(f.integration(), head, "a check of the head moves nothing");
    }
}
