//! The oracle: the verify command and the files it stands on, fingerprinted when the loop starts.
//!
//! A model that cannot make the check pass can make the check easier: replace `check.sh` with
//! `exit 0`, delete a failing test, rewrite the `test` script in package.json. The loop records a
//! digest of every file the verify command runs and of every `--protect` path at start, and
//! at each stop a passing verify counts only while they are all unchanged. Restoring them makes
//! passes count again. This detects and refuses the common ways an oracle gets gamed; it is not a
//! sandbox against a process running as the same user that sets out to forge it.

mod between;
mod change;
mod programs;
mod skip_marker;
mod test_suite;
mod watch;

pub(crate) use between::suite_rules;
pub(crate) use change::{ChangeKind, OracleChange};
pub(crate) use programs::{Programs, Surroundings};
pub(crate) use skip_marker::{SkipMarker, since_start as skip_markers_since_start};
pub(crate) use test_suite::{MAX_TEST_FILES, SuiteGuard, is_runner_file, is_test_file};
#[cfg(test)]
pub(crate) use test_suite::{RUNNER_FILES, TEST_FILES};
pub(crate) use watch::{OracleWatch, Touched};

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::checks::plan;
use crate::checks::protect::Protect;
use crate::support::digest::hex;
use crate::support::read::bounded_read;
use crate::support::read::walk;
use crate::support::text::relative_path::relative_to;
use crate::worktree::{TreeLook, WorkTree};

/// Originals kept for restoring, in all.
const MAX_SAVED_BYTES: u64 = 8 << 20;
/// Oracle files are hashed whole up to this size. A larger one (a data fixture) is known by its
/// first this-many bytes, its length and its modification time, so a stop never spends seconds
/// hashing.
const MAX_HASHED_BYTES: u64 = 64 << 20;
/// The digests of an oracle file that is not there, is not a file, or cannot be read.
const MISSING: &str = "missing";
const NOT_A_FILE: &str = "not-a-file";
const UNREADABLE: &str = "unreadable";

/// What the oracle was at start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Oracle {
    /// The user's `--protect` paths and globs, relative to the loop's directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<String>,
    /// Each oracle file (relative path, `/`-separated) and what it was: `sha256:…` (see
    /// [`digest`]), or `missing`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// The walk for `--protect` files was cut at its bound at start: a cut walk at a stop is then
    /// expected, not a sign of files created to hide others.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approximate: bool,
    /// The test suite behind the check, protected by default ([`crate::checks::oracle`]): its
    /// files are among `files`; this keeps its runner hooks and sections.
    #[serde(default, skip_serializing_if = "SuiteGuard::is_off")]
    pub tests: SuiteGuard,
    /// What the check runs from outside the project: programs as `PATH` finds them, their
    /// interpreters, Python's start-up hooks, start-up variables ([`Programs`]).
    #[serde(default, skip_serializing_if = "Programs::is_empty")]
    pub programs: Programs,
}

impl Oracle {
    /// Fingerprints the files `verify` runs and the `protect` paths, under `cwd`, and with
    /// `tests`, the test suite behind the check ([`crate::checks::oracle`]).
    #[cfg(test)]
    pub(crate) fn capture(cwd: &Path, verify: Option<&str>, protect: &[String], tests: bool) -> Oracle {
        Oracle::capture_within(cwd, verify.as_slice(), protect, tests, walk::MAX_ENTRIES)
    }

    /// [`Oracle::capture`] for several commands that judge the loop (verify, a metric, a guard).
    pub(crate) fn capture_commands(cwd: &Path, commands: &[&str], protect: &[String], tests: bool) -> Oracle {
        Oracle::capture_within(cwd, commands, protect, tests, walk::MAX_ENTRIES)
    }

    fn capture_within(
        cwd: &Path,
        commands: &[&str],
        protect: &[String],
        tests: bool,
        limit: usize,
    ) -> Oracle {
        let mut paths: Vec<String> = commands.iter().flat_map(|c| files_run_by(cwd, c)).collect();
        if tests {
            let named = test_suite::named_by_scripts(cwd, &paths);
            paths.extend(named);
        }
        let programs = Programs::capture(cwd, commands, &paths, &Surroundings::of_this_process());
        let found = matching_files(cwd, protect, limit, None);
        paths.extend(found.files);
        let mut approximate = !found.complete;
        let mut suite = SuiteGuard::default();
        if tests {
            let found = matching_files(cwd, &test_suite::patterns(), limit, None);
            approximate |= !found.complete;
            let (runner, mut tests): (Vec<String>, Vec<String>) = found
                .files
                .into_iter()
                .filter(|path| !test_suite::is_artifact(path))
                .partition(|path| test_suite::is_runner_file(path));
            // In git, a test file is one git tracks or sees: what a run writes and git ignores
            // (reports, snapshots, a fixture's output) changes at every run and proves nothing.
            let tree = WorkTree::open(cwd);
            if tree.is_git()
                && let Ok(visible) = tree.visible_files(cwd, &found.scopes, &|_| true)
            {
                let visible: std::collections::BTreeSet<String> =
                    visible.iter().map(|p| slash_path(p)).collect();
                tests.retain(|path| visible.contains(path));
            }
            let unchecked = tests.len().saturating_sub(test_suite::MAX_TEST_FILES);
            paths.extend(runner);
            paths.extend(tests.into_iter().take(test_suite::MAX_TEST_FILES));
            suite = SuiteGuard::on(cwd, u32::try_from(unchecked).unwrap_or(u32::MAX));
        }
        paths.sort();
        paths.dedup();
        let files = paths.into_iter().map(|p| (digest(&cwd.join(&p)), p)).map(|(d, p)| (p, d)).collect();
        Oracle { protect: protect.to_vec(), files, approximate, tests: suite, programs }
    }

    /// The oracle files that differ from the start, in path order.
    pub(crate) fn changes(&self, cwd: &Path) -> Vec<OracleChange> {
        self.changes_within(cwd, walk::MAX_ENTRIES)
    }

    /// [`Oracle::changes`] from `look`, a look at the work tree taken now (in git), which other
    /// consumers of the same moment share.
    pub(crate) fn changes_in(&self, cwd: &Path, look: Option<&TreeLook>) -> Vec<OracleChange> {
        self.changes_looked(cwd, look, walk::MAX_ENTRIES)
    }

    /// [`Oracle::changes`], with the search for added files cut after `limit` entries.
    fn changes_within(&self, cwd: &Path, limit: usize) -> Vec<OracleChange> {
        self.changes_looked(cwd, WorkTree::open(cwd).look().as_ref(), limit)
    }

    fn changes_looked(&self, cwd: &Path, look: Option<&TreeLook>, limit: usize) -> Vec<OracleChange> {
        let mut changes: Vec<OracleChange> = self
            .files
            .iter()
            .filter_map(|(path, was)| {
                let now = digest_as(was, &cwd.join(path));
                let kind = match (was.as_str(), now.as_str()) {
                    (a, b) if a == b => return None,
                    (_, MISSING) => ChangeKind::Deleted,
                    (MISSING, _) => ChangeKind::Added,
                    _ => ChangeKind::Modified,
                };
                Some(OracleChange { path: path.clone(), kind })
            })
            .collect();
        // New files that match a `--protect` glob, or that a test runner loads by itself.
        let patterns: Vec<String> = self.protect.iter().chain(&self.tests.hooks).cloned().collect();
        let found = matching_files(cwd, &patterns, limit, look);
        for path in found.files {
            if !self.files.contains_key(&path) {
                changes.push(OracleChange { path, kind: ChangeKind::Added });
            }
        }
        changes.extend(self.tests.section_changes(cwd));
        changes.extend(self.programs.changes(cwd, &Surroundings::of_this_process()));
        if !found.complete && !self.approximate {
            let walked: Vec<&str> = found
                .scopes
                .iter()
                .map(|scope| if scope.is_empty() { "." } else { scope.as_str() })
                .collect();
            changes.push(OracleChange { path: walked.join(", "), kind: ChangeKind::Unchecked });
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        changes
    }

    /// True when `path` (absolute, or relative to `cwd`) is an oracle file or matches a protected
    /// path or glob.
    pub(crate) fn covers(&self, cwd: &Path, path: &Path) -> bool {
        let Some(relative) = relative_to(cwd, path) else { return false };
        self.files.keys().any(|file| crate::support::text::relative_path::same_name(file, &relative))
            || Protect::stored(&self.protect).matches(&relative)
            || (!self.tests.is_off() && Protect::stored(&self.tests.hooks).matches(&relative))
    }

    /// Whether the oracle file at `relative` (to `cwd`) was there at start and is not as it was:
    /// one file's check, where [`Oracle::changes`] walks every protected path.
    pub(crate) fn is_changed(&self, cwd: &Path, relative: &str) -> bool {
        self.files.get(relative).is_some_and(|was| *was != digest_as(was, &cwd.join(relative)))
    }

    /// Records the plan file `file` (as the user named it) by its fingerprint without the
    /// stories' boxes ([`plan::fingerprint`]): for-loop's own ticks are no change of it.
    pub(crate) fn fingerprint_plan(&mut self, cwd: &Path, file: &str) {
        if let Some(relative) = relative_to(cwd, Path::new(file)) {
            let was = self.files.get(&relative).cloned().unwrap_or_default();
            let path = cwd.join(&relative);
            let fingerprint = plan::fingerprint(&path).unwrap_or_else(|e| unread(&e));
            // A plan that is not a file now is recorded as it is, and any change shows.
            self.files.insert(relative, if was.starts_with("sha256:") { fingerprint } else { digest(&path) });
        }
    }

    /// The oracle files as they are now (at start), each by its path in the project, for the
    /// store to keep so that a changed one can be restored even outside git; `None` when there
    /// are none or they are too large to keep. Only read here: the loop's files are the store's
    /// to write.
    pub(crate) fn originals(&self, cwd: &Path) -> io::Result<Option<Vec<Original>>> {
        let present: Vec<&String> =
            self.files.iter().filter(|(_, d)| d.starts_with("sha256:")).map(|(p, _)| p).collect();
        let total: u64 = present.iter().filter_map(|p| fs::metadata(cwd.join(p)).ok()).map(|m| m.len()).sum();
        if total > MAX_SAVED_BYTES || present.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(present.len());
        for path in present {
            // Read like every oracle file: a FIFO put there since the fingerprint cannot block.
            out.push((path.clone(), bounded_read::read(&cwd.join(path), MAX_SAVED_BYTES)?));
        }
        Ok(Some(out))
    }
}

/// An oracle file as it was at start: its path in the project and its bytes.
pub(crate) type Original = (String, Vec<u8>);

/// The project files a verify command runs: each word of it (one level into `sh -c "…"`) that
/// names an existing file inside `cwd`, plus the build file that `make`, `just` or a Node package
/// manager reads its recipes and scripts from.
pub(crate) fn files_run_by(cwd: &Path, verify: &str) -> Vec<String> {
    let mut words = split_words(verify);
    let inner: Vec<String> =
        words.iter().filter(|w| w.contains(char::is_whitespace)).flat_map(|w| split_words(w)).collect();
    words.extend(inner);
    let mut files = Vec::new();
    for word in &words {
        let word = word.trim_start_matches(['<', '>']);
        if word.is_empty() || word.starts_with('-') || word.contains(['$', '*', '?', '`']) {
            continue;
        }
        if let Some(relative) = relative_to(cwd, Path::new(word))
            && cwd.join(&relative).is_file()
        {
            files.push(relative);
        }
    }
    let programs: Vec<&str> = words.iter().map(|w| w.rsplit('/').next().unwrap_or(w)).collect();
    let recipes: &[(&[&str], &[&str])] = &[
        (&["make", "gmake"], &["Makefile", "makefile", "GNUmakefile"]),
        (&["just"], &["justfile", "Justfile", ".justfile"]),
        (&["npm", "yarn", "pnpm", "bun", "npx"], &["package.json"]),
    ];
    for (tools, build_files) in recipes {
        if programs.iter().any(|p| tools.contains(p)) {
            files.extend(
                build_files.iter().filter(|f| cwd.join(f).is_file()).map(std::string::ToString::to_string),
            );
        }
    }
    files
}

fn split_words(command: &str) -> Vec<String> {
    shell_words::split(command).unwrap_or_else(|_| command.split_whitespace().map(str::to_string).collect())
}

/// What a search for protected files found.
#[derive(Debug, Default)]
struct Found {
    /// Relative to the loop's directory, `/`-separated, sorted.
    pub(crate) files: Vec<String>,
    /// False when the walk was cut at its bound: protected files may be missing.
    pub(crate) complete: bool,
    /// The directories searched.
    pub(crate) scopes: Vec<String>,
}

/// The files under `cwd` matching any of `patterns` (see [`crate::checks::oracle`]): what the shared
/// walk finds below the patterns' directories in at most `limit` entries, plus, in a git work
/// tree, every file git tracks or sees there, which no number of created files can push past
/// the walk's bound. With `look`, a look at the git work tree taken now, git's index and status
/// stand for the walk, and only what git reports as ignored is walked.
fn matching_files(cwd: &Path, patterns: &[String], limit: usize, look: Option<&TreeLook>) -> Found {
    if patterns.is_empty() {
        return Found { complete: true, ..Found::default() };
    }
    let protect = Protect::stored(patterns);
    let scopes = protect.scopes().to_vec();
    if let Some(below) = look.and_then(|look| look.files_below(cwd, &scopes, limit, |p| protect.matches(p))) {
        return Found { files: below.files, complete: below.complete, scopes };
    }
    let walked = walk::paths(cwd, &scopes, limit, |path| protect.matches(&slash_path(path)));
    let mut files: Vec<String> = walked.files.iter().map(|path| slash_path(path)).collect();
    let tree = WorkTree::open(cwd);
    if tree.is_git()
        && let Ok(visible) = tree.visible_files(cwd, &scopes, &|path| protect.matches(&slash_path(path)))
    {
        files.extend(visible.iter().map(|path| slash_path(path)));
    }
    files.retain(|path| protect.matches(path));
    files.sort();
    files.dedup();
    Found { files, complete: walked.complete, scopes }
}

fn slash_path(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// What an oracle file is now: `sha256:<hex>` of its bytes; for a file over
/// [`MAX_HASHED_BYTES`], `sha256-head:<hex of its first bytes>:<length>:<mtime>`; `missing`;
/// `not-a-file` when something else stands at its path (a FIFO, a device, a socket, a
/// directory), which is never read and always a change; or `unreadable`.
fn digest(path: &Path) -> String {
    digest_within(path, MAX_HASHED_BYTES)
}

/// What the file at `path` is now, taken the way `was` was taken: a plan file without its boxes,
/// any other whole.
fn digest_as(was: &str, path: &Path) -> String {
    if was.starts_with(plan::DIGEST_PREFIX) {
        plan::fingerprint(path).unwrap_or_else(|e| unread(&e))
    } else {
        digest(path)
    }
}

/// The digest of a file that could not be read, by why.
fn unread(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => MISSING.into(),
        io::ErrorKind::InvalidInput | io::ErrorKind::IsADirectory => NOT_A_FILE.into(),
        _ => UNREADABLE.into(),
    }
}

fn digest_within(path: &Path, max_hashed: u64) -> String {
    let file = match bounded_read::open(path) {
        Ok(file) => file,
        Err(e) => return unread(&e),
    };
    let Ok(meta) = file.metadata() else { return UNREADABLE.into() };
    let mut hasher = Sha256::new();
    let mut reader = file.take(max_hashed);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return UNREADABLE.into(),
        }
    }
    let hash = hex(&hasher.finalize());
    if meta.len() <= max_hashed {
        return format!("sha256:{hash}");
    }
    let mtime =
        meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
    format!("sha256-head:{hash}:{}:{}", meta.len(), mtime.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        dir
    }

    #[test]
    fn finds_the_scripts_a_verify_command_runs() {
        let dir = project(&[
            ("check.sh", "x"),
            ("scripts/verify.sh", "y"),
            ("Makefile", "m"),
            ("package.json", "{}"),
        ]);
        let cwd = dir.path();
        assert_eq!(files_run_by(cwd, "./check.sh"), ["check.sh"]);
        assert_eq!(files_run_by(cwd, "sh check.sh --fast"), ["check.sh"]);
        assert_eq!(files_run_by(cwd, "bash -c 'scripts/verify.sh && echo ok'"), ["scripts/verify.sh"]);
        assert_eq!(files_run_by(cwd, "make check"), ["Makefile"]);
        assert_eq!(files_run_by(cwd, "npm test"), ["package.json"]);
        assert!(files_run_by(cwd, "cargo test").is_empty());
        assert!(files_run_by(cwd, "cat /etc/passwd").is_empty());
        assert!(files_run_by(cwd, "sh ../outside.sh").is_empty());
    }

    #[test]
    fn detects_modified_deleted_and_added_oracle_files() {
        let dir =
            project(&[("check.sh", "exit 1"), ("tests/a.rs", "a"), ("tests/b.rs", "b"), ("src/lib.rs", "l")]);
        let cwd = dir.path();
        let oracle = Oracle::capture(cwd, Some("sh check.sh"), &["tests/**".to_string()], false);
        assert_eq!(oracle.files.len(), 3);
        assert!(oracle.changes(cwd).is_empty());

        fs::write(cwd.join("src/lib.rs"), "changed").unwrap();
        assert!(oracle.changes(cwd).is_empty(), "code under test is not the oracle");

        fs::write(cwd.join("check.sh"), "exit 0").unwrap();
        fs::remove_file(cwd.join("tests/a.rs")).unwrap();
        fs::write(cwd.join("tests/c.rs"), "c").unwrap();
        let kinds: Vec<(String, ChangeKind)> =
            oracle.changes(cwd).into_iter().map(|c| (c.path, c.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("check.sh".to_string(), ChangeKind::Modified),
                ("tests/a.rs".to_string(), ChangeKind::Deleted),
                ("tests/c.rs".to_string(), ChangeKind::Added),
            ]
        );

        fs::write(cwd.join("check.sh"), "exit 1").unwrap();
        fs::write(cwd.join("tests/a.rs"), "a").unwrap();
        fs::remove_file(cwd.join("tests/c.rs")).unwrap();
        assert!(oracle.changes(cwd).is_empty(), "restoring the files makes the oracle whole again");
    }

    fn kinds(changes: &[OracleChange]) -> Vec<(&str, ChangeKind)> {
        changes.iter().map(|c| (c.path.as_str(), c.kind)).collect()
    }

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgSign=false"])
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_INDEX_FILE")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Regression: the hand-written matcher knew no brace sets, so this protected nothing.
    #[test]
    fn brace_sets_protect_what_they_name() {
        let dir = project(&[("tests/unit/a.rs", "a"), ("tests/e2e/b.rs", "b"), ("tests/other/c.rs", "c")]);
        let cwd = dir.path();
        let oracle = Oracle::capture(cwd, None, &["tests/{unit,e2e}/**".to_string()], false);
        assert_eq!(oracle.files.keys().collect::<Vec<_>>(), ["tests/e2e/b.rs", "tests/unit/a.rs"]);
        fs::write(cwd.join("tests/unit/new.rs"), "n").unwrap();
        fs::write(cwd.join("tests/other/d.rs"), "not protected").unwrap();
        fs::write(cwd.join("tests/e2e/b.rs"), "edited").unwrap();
        assert_eq!(
            kinds(&oracle.changes(cwd)),
            [("tests/e2e/b.rs", ChangeKind::Modified), ("tests/unit/new.rs", ChangeKind::Added)]
        );
    }

    /// A `.gitignore` line the model writes does not hide an added protected file.
    #[test]
    fn ignore_files_do_not_hide_added_protected_files() {
        let dir = project(&[("tests/a.rs", "a")]);
        let cwd = dir.path();
        git(cwd, &["init", "-q"]);
        git(cwd, &["add", "-A"]);
        git(cwd, &["commit", "-qm", "start"]);
        let oracle = Oracle::capture(cwd, None, &["tests/**".to_string()], false);
        fs::write(cwd.join(".gitignore"), "tests/sneaky.rs\n").unwrap();
        fs::write(cwd.join("tests/sneaky.rs"), "x").unwrap();
        assert_eq!(kinds(&oracle.changes(cwd)), [("tests/sneaky.rs", ChangeKind::Added)]);
    }

    /// Regression: 50,000 files created where protected ones may be added used to end the walk
    /// (at 50,000 files) before it reached the added file, and the oracle looked intact. Now a
    /// cut walk is never taken as complete, and in git every file git sees is checked whatever
    /// the walk's bound. (A bound of 100 here, so the test creates 150 files, not 50,000.)
    #[test]
    fn junk_files_past_the_walks_bound_do_not_hide_an_added_protected_file() {
        for in_git in [true, false] {
            let dir = project(&[("tests/a.rs", "a")]);
            let cwd = dir.path();
            if in_git {
                git(cwd, &["init", "-q"]);
                git(cwd, &["add", "-A"]);
                git(cwd, &["commit", "-qm", "start"]);
            }
            let oracle = Oracle::capture_within(cwd, &[], &["tests/**".to_string()], false, 100);
            assert!(!oracle.approximate);
            fs::create_dir(cwd.join("tests/aaa")).unwrap();
            for n in 0..150 {
                fs::File::create(cwd.join(format!("tests/aaa/junk{n}"))).unwrap();
            }
            fs::write(cwd.join("tests/zz_added.rs"), "x").unwrap();
            let changes = oracle.changes_within(cwd, 100);
            assert!(
                changes.contains(&OracleChange { path: "tests".into(), kind: ChangeKind::Unchecked }),
                "{changes:?}"
            );
            let added = OracleChange { path: "tests/zz_added.rs".into(), kind: ChangeKind::Added };
            assert_eq!(changes.contains(&added), in_git, "in git: {in_git}: {changes:?}");
        }
    }

    /// A project with more files than one walk looks at: the start says protection of added files
    /// is approximate, and stops do not hold that against the model.
    #[test]
    fn a_walk_cut_at_start_is_approximate_not_a_change() {
        let dir = project(&[("tests/a.rs", "a")]);
        let cwd = dir.path();
        fs::create_dir(cwd.join("tests/many")).unwrap();
        for n in 0..150 {
            fs::File::create(cwd.join(format!("tests/many/f{n}"))).unwrap();
        }
        let oracle = Oracle::capture_within(cwd, &[], &["tests/**".to_string()], false, 100);
        assert!(oracle.approximate);
        fs::write(cwd.join("tests/many/f0"), "edited").unwrap();
        let changes = oracle.changes_within(cwd, 100);
        assert!(changes.iter().all(|c| c.kind != ChangeKind::Unchecked), "{changes:?}");
        assert!(changes.contains(&OracleChange { path: "tests/many/f0".into(), kind: ChangeKind::Modified }));
    }

    #[test]
    fn covers_oracle_files_and_protected_globs_only() {
        let dir = project(&[("check.sh", "x"), ("tests/a.rs", "a")]);
        let cwd = dir.path();
        let oracle = Oracle::capture(cwd, Some("./check.sh"), &["tests".to_string()], false);
        assert!(oracle.covers(cwd, Path::new("check.sh")));
        assert!(oracle.covers(cwd, &cwd.join("./tests/new.rs")));
        assert!(oracle.covers(cwd, &cwd.join("src/../check.sh")));
        assert!(!oracle.covers(cwd, &cwd.join("src/lib.rs")));
        assert!(!oracle.covers(cwd, Path::new("/etc/passwd")));
    }

    #[cfg(unix)]
    #[test]
    fn an_oracle_file_that_is_no_longer_a_file_is_modified_without_being_read() {
        let dir = project(&[("check.sh", "exit 1"), ("tests/a.rs", "a")]);
        let cwd = dir.path().to_path_buf();
        let oracle = Oracle::capture(&cwd, Some("sh check.sh"), &["tests/**".to_string()], false);
        fs::remove_file(cwd.join("check.sh")).unwrap();
        crate::support::read::bounded_read::tests::mkfifo(&cwd.join("check.sh"));
        fs::remove_file(cwd.join("tests/a.rs")).unwrap();
        fs::create_dir(cwd.join("tests/a.rs")).unwrap();
        let changes =
            crate::support::read::bounded_read::tests::within_two_seconds(move || oracle.changes(&cwd));
        let kinds: Vec<(&str, ChangeKind)> = changes.iter().map(|c| (c.path.as_str(), c.kind)).collect();
        assert_eq!(kinds, [("check.sh", ChangeKind::Modified), ("tests/a.rs", ChangeKind::Modified)]);
    }

    #[test]
    fn a_large_file_is_known_by_its_head_length_and_time() {
        let dir = project(&[("data.bin", "0123456789")]);
        let path = dir.path().join("data.bin");
        let whole = digest_within(&path, 10);
        assert!(whole.starts_with("sha256:"), "{whole}");
        let large = digest_within(&path, 4);
        assert!(large.starts_with("sha256-head:") && large.contains(":10:"), "{large}");
        assert_eq!(digest_within(&path, 4), large, "stable");
        fs::write(&path, "0123456789a").unwrap();
        assert_ne!(digest_within(&path, 4), large, "a longer file differs");
        let time = fs::metadata(&path).unwrap().modified().unwrap();
        let head_edit = digest_within(&path, 4);
        fs::write(&path, "x123456789a").unwrap();
        fs::File::options().write(true).open(&path).unwrap().set_modified(time).unwrap();
        assert_ne!(digest_within(&path, 4), head_edit, "an edit in the head differs, whatever the time");
        assert_eq!(digest(&dir.path().join("none")), MISSING);
    }

    #[test]
    fn reads_the_originals_to_keep_for_restoring() {
        let dir = project(&[("scripts/check.sh", "exit 1")]);
        let cwd = dir.path();
        let oracle = Oracle::capture(cwd, Some("sh scripts/check.sh"), &[], false);
        let originals = oracle.originals(cwd).unwrap().unwrap();
        assert_eq!(originals, [("scripts/check.sh".to_string(), b"exit 1".to_vec())]);
        assert_eq!(Oracle::capture(cwd, Some("true"), &[], false).originals(cwd).unwrap(), None);
    }
}
