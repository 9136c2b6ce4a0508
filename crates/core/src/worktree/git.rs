//! Git plumbing for the working tree: finding the repository, running git isolated from the
//! variables around it, and temporary index files.

#[cfg(unix)]
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, SystemTime};

use super::{WorkTreeError, io_error};
use crate::support::read::bounded_read;

/// Variables a host, a hook or a parent git may have set that would point git at another
/// repository, index or object store (`git rev-parse --local-env-vars`).
pub(super) const GIT_LOCAL_VARS: &[&str] = &[
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
];
/// The identity checkpoint commits are made with, so they work without any user config.
const IDENTITY: (&str, &str) = ("for-loop", "for-loop@localhost");
/// The name every temporary index directory starts with, in the system's temporary directory
/// (and, from earlier versions, in git directories), so a later run can sweep what a killed one
/// left.
pub(super) const TEMP_INDEX_PREFIX: &str = "for-loop-index-";
/// A temporary index this old belongs to no live snapshot (one takes seconds).
const STALE_AFTER: Duration = Duration::from_secs(15 * 60);

/// A git work tree: its top level and its git directory (per work tree, for linked ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Repo {
    pub(super) top: PathBuf,
    pub(super) git_dir: PathBuf,
}

impl Repo {
    /// The work tree `dir` is in, found the way git finds it (the nearest ancestor holding a
    /// `.git` directory, or a `.git` file naming one) but without starting a process. None in a
    /// plain directory, and inside a git directory or a bare repository, where git sees no work
    /// tree. The paths are canonical, as git prints them.
    pub(super) fn discover(dir: &Path) -> Option<Repo> {
        let dir = fs::canonicalize(dir).ok()?;
        for candidate in dir.ancestors() {
            let dot_git = candidate.join(".git");
            if let Some(git_dir) = git_dir_at(&dot_git) {
                return Some(Repo { top: candidate.to_path_buf(), git_dir });
            }
            if is_git_dir(candidate) {
                return None;
            }
        }
        None
    }
}

/// The git directory `.git` stands for: itself, or the one its `gitdir:` line names.
fn git_dir_at(dot_git: &Path) -> Option<PathBuf> {
    let meta = fs::metadata(dot_git).ok()?;
    if meta.is_dir() {
        return is_git_dir(dot_git).then(|| dot_git.to_path_buf());
    }
    let text = bounded_read::read(dot_git, 4096).ok()?;
    let text = String::from_utf8(text).ok()?;
    let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let git_dir = fs::canonicalize(dot_git.parent()?.join(named)).ok()?;
    is_git_dir(&git_dir).then_some(git_dir)
}

/// Whether `dir` looks like a git directory to git: a HEAD, and objects of its own or of the
/// repository it is a linked work tree of (`commondir`).
fn is_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file() && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
}

/// Runs `git -C <dir> <args>` with the repository-pointing variables cleared, every filter the
/// configuration defines switched off, stdin closed (or fed `input`), and `index` as
/// `GIT_INDEX_FILE` if given.
pub(super) fn run_git(
    dir: &Path,
    args: &[&str],
    index: Option<&Path>,
    input: Option<Vec<u8>>,
) -> Result<Output, WorkTreeError> {
    run_git_filtered(dir, args, index, input, &filter_overrides(dir))
}

/// [`run_git`] with the filter settings already read ([`filter_overrides`]), for git commands
/// started together at one moment: the configuration is read once for all of them.
pub(super) fn run_git_filtered(
    dir: &Path,
    args: &[&str],
    index: Option<&Path>,
    input: Option<Vec<u8>>,
    overrides: &[String],
) -> Result<Output, WorkTreeError> {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir);
    // The project's own git configuration is the model's to write: nothing in it may run a
    // program inside the hook, which could put a fix in while the hook judges and take it out
    // after. fsmonitor runs on every look at the tree; repository hooks (reference-transaction)
    // on every checkpoint. Command-line settings win over every configuration file.
    command.args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"]);
    if index.is_some() {
        // A split index would leave shared index files of ours in the git directory.
        command.args(["-c", "core.splitIndex=false"]);
    }
    command.args(args);
    for var in GIT_LOCAL_VARS {
        command.env_remove(var);
    }
    // Filters too: each clean, smudge or process command defined for a driver is set empty,
    // which git takes for none (`git add` would run the clean filter, a rollback the smudge).
    // Set through the environment, which takes any driver name as it is. Textconv and external
    // diffs need no setting: only porcelain (`git diff`, `git log`) runs them, never the plumbing
    // used here.
    command.env("GIT_CONFIG_COUNT", overrides.len().to_string());
    for (n, key) in overrides.iter().enumerate() {
        command.env(format!("GIT_CONFIG_KEY_{n}"), key).env(format!("GIT_CONFIG_VALUE_{n}"), "");
    }
    if let Some(index) = index {
        command.env("GIT_INDEX_FILE", index);
    }
    command
        .env("GIT_AUTHOR_NAME", IDENTITY.0)
        .env("GIT_AUTHOR_EMAIL", IDENTITY.1)
        .env("GIT_COMMITTER_NAME", IDENTITY.0)
        .env("GIT_COMMITTER_EMAIL", IDENTITY.1)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => WorkTreeError::GitNotFound,
        _ => io_error("could not run git")(e),
    })?;
    // Written from a thread: git may fill its output pipe before it has read all its input.
    let writer = match (input, child.stdin.take()) {
        (Some(bytes), Some(mut stdin)) => Some(thread::spawn(move || stdin.write_all(&bytes))),
        _ => None,
    };
    let out = child.wait_with_output().map_err(io_error("could not run git"))?;
    if let Some(writer) = writer {
        // A write error means git exited early; its status and stderr say why.
        let _ = writer.join();
    }
    Ok(out)
}

/// The settings that switch off every filter driver the configuration git reads in `dir` defines
/// (the project's, the user's, the system's): `filter.<driver>.clean`, `.smudge` and `.process`.
/// Reading the configuration runs nothing. Empty when it cannot be read: git then fails on the
/// same configuration itself.
pub(super) fn filter_overrides(dir: &Path) -> Vec<String> {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir).args(["config", "--null", "--name-only", "--get-regexp", r"^filter\."]);
    for var in GIT_LOCAL_VARS {
        command.env_remove(var);
    }
    let Ok(out) = command.stdin(Stdio::null()).stderr(Stdio::null()).output() else { return Vec::new() };
    let mut drivers: Vec<String> = split_z(&out.stdout)
        .filter_map(|name| {
            let name = String::from_utf8_lossy(name);
            let (driver, _key) = name.strip_prefix("filter.")?.rsplit_once('.')?;
            Some(driver.to_string())
        })
        .collect();
    drivers.sort();
    drivers.dedup();
    drivers
        .iter()
        .flat_map(|driver| ["clean", "smudge", "process"].map(|key| format!("filter.{driver}.{key}")))
        .collect()
}

/// An index file of our own, in a directory removed with it (with any `index.lock` git left).
pub(super) struct TempIndex {
    pub(super) path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempIndex {
    /// In the system's temporary directory: never in the work tree, where `git add -A` would see
    /// it, nor in the user's git directory, where a killed run would leave it for good. Stale
    /// ones a killed run left are swept first. `seeded`: starts as a copy of the user's index
    /// (its stat data spares rehashing unchanged files) rather than empty.
    pub(super) fn create(repo: &Repo, seeded: bool) -> Result<TempIndex, WorkTreeError> {
        sweep_stale(&std::env::temp_dir(), STALE_AFTER);
        let dir = tempfile::Builder::new()
            .prefix(TEMP_INDEX_PREFIX)
            .tempdir()
            .map_err(io_error("could not create a temporary git index"))?;
        // GIT_INDEX_FILE is taken relative to the work tree: keep it absolute.
        let path = std::path::absolute(dir.path().join("index"))
            .map_err(io_error("could not locate the temporary git index"))?;
        if seeded {
            let real = repo.git_dir.join("index");
            match copy_keeping_mtime(&real, &path) {
                Ok(()) => {}
                // A repository nothing was ever staged in has no index yet.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(format!("could not copy {}", real.display()))(e)),
            }
        }
        Ok(TempIndex { path, _dir: dir })
    }
}

/// Removes the temporary index directories in `parent` older than `age`: left by a run that was
/// killed, or (in a git directory) by an earlier version that kept them there. Best effort: a
/// directory another user owns, or one that vanishes meanwhile, is left alone.
pub(super) fn sweep_stale(parent: &Path, age: Duration) {
    let Ok(entries) = fs::read_dir(parent) else { return };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().starts_with(TEMP_INDEX_PREFIX.as_bytes()) {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|modified| now.duration_since(modified).unwrap_or_default() >= age);
        if old && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Sweeps what earlier versions left in the user's git directory, which they used for their
/// temporary indexes.
pub(super) fn sweep_git_dir(repo: &Repo) {
    sweep_stale(&repo.git_dir, STALE_AFTER);
}

/// Copies an index with its modification time. Git trusts an entry's stat data only when the
/// file was modified before the index was written (by mtime); for the others, "racily clean", it
/// compares content. A copy dated now would make an edit of the same size in the same second as
/// the user's last `git add` look unchanged.
fn copy_keeping_mtime(from: &Path, to: &Path) -> io::Result<()> {
    fs::copy(from, to)?;
    let modified = fs::metadata(from)?.modified()?;
    fs::File::options().write(true).open(to)?.set_modified(modified)
}

/// A fingerprint or commit id as git's object id, refusing anything git could read as an option
/// or a revision expression.
pub(super) fn object_id(id: &str) -> Result<&str, WorkTreeError> {
    let hex = id.bytes().all(|b| b.is_ascii_hexdigit());
    if hex && (id.len() == 40 || id.len() == 64) {
        Ok(id)
    } else {
        Err(WorkTreeError::BadFingerprint(id.to_string()))
    }
}

/// The NUL-separated fields of git's `-z` output.
pub(super) fn split_z(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == 0).filter(|s| !s.is_empty())
}

pub(super) fn trim_newline(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// A path git printed, relative to the work tree or absolute.
#[cfg(unix)]
pub(super) fn path_from_git(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// A path git printed: git for Windows prints UTF-8.
#[cfg(not(unix))]
pub(super) fn path_from_git(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

#[cfg(test)]
// Some helpers serve only the tests that run on Unix.
#[cfg_attr(not(unix), allow(unused_imports, dead_code))]
mod tests {
    use super::*;
    use crate::worktree::testing::{git, repo, try_git, write};

    #[test]
    fn finds_the_repository_as_git_does_without_running_it() {
        let dir = repo(&[("a.txt", "a"), ("sub/b.txt", "b")]);
        let top = fs::canonicalize(dir.path()).unwrap();
        let found = Repo::discover(&dir.path().join("sub")).unwrap();
        assert_eq!(found, Repo { top: top.clone(), git_dir: top.join(".git") });
        assert_eq!(git(&top.join("sub"), &["rev-parse", "--show-toplevel"]).trim(), top.to_str().unwrap());
        assert_eq!(Repo::discover(&top.join(".git/objects")), None, "inside the git directory");
        let plain = tempfile::tempdir().unwrap();
        assert_eq!(Repo::discover(plain.path()), None);
        assert_eq!(Repo::discover(&plain.path().join("missing")), None);
    }

    #[test]
    fn a_linked_work_tree_has_its_own_git_directory() {
        let dir = repo(&[("a.txt", "a")]);
        let linked = dir.path().join("linked");
        git(dir.path(), &["worktree", "add", "-q", linked.to_str().unwrap()]);
        let found = Repo::discover(&linked).unwrap();
        assert_eq!(found.top, fs::canonicalize(&linked).unwrap());
        let expected = git(&linked, &["rev-parse", "--absolute-git-dir"]);
        assert_eq!(found.git_dir, PathBuf::from(expected.trim()));
    }

    /// A script that records each run in `marker` and passes its input through, as a filter or
    /// a textconv would.
    #[cfg(unix)]
    fn payload(dir: &Path, marker: &Path) -> String {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("payload.sh");
        fs::write(&script, format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\ncat\n", marker.display())).unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        script.display().to_string()
    }

    fn ran(marker: &Path) -> String {
        fs::read_to_string(marker).unwrap_or_default()
    }

    /// The project's `.git/config` and `.gitattributes` name a clean, smudge or process filter
    /// (under a driver name git reads with a dot and an `=` in it): git run as the user runs it,
    /// the hook's git never does, at a look at the tree, a checkpoint or a rollback.
    #[test]
    #[cfg(unix)]
    fn the_projects_filters_never_run_inside_the_hook() {
        for key in ["clean", "smudge", "process"] {
            let dir = repo(&[("a.txt", "a")]);
            // Outside the work tree, which a rollback puts back as it was.
            let outside = tempfile::tempdir().unwrap();
            let marker = outside.path().join("ran");
            let script = payload(outside.path(), &marker);
            write(dir.path(), ".gitattributes", "* filter=ev.il=x\n");
            git(dir.path(), &["config", &format!("filter.ev.il=x.{key}"), &script]);
            let tree = crate::worktree::WorkTree::open(dir.path());
            tree.checkpoint("loop-1", 1).unwrap();
            write(dir.path(), "a.txt", "changed");
            tree.fingerprint().unwrap();
            tree.tree_id().unwrap();
            tree.checkpoint("loop-1", 2).unwrap();
            tree.rollback("loop-1", 1).unwrap();
            assert_eq!(ran(&marker), "", "the project's {key} filter ran inside the hook");
            // The payload is live: git run as the user runs it.
            let plain = try_git(dir.path(), &["add", "-A"]);
            fs::remove_file(dir.path().join("a.txt")).unwrap();
            try_git(dir.path(), &["checkout", "--", "a.txt"]);
            assert!(
                !ran(&marker).is_empty(),
                "the {key} filter did not run for plain git either, so this proves nothing: {plain:?}"
            );
        }
    }

    /// A textconv and an external diff set for every file run for `git diff` as the user runs it;
    /// the hook compares trees with plumbing only, which never runs them.
    #[test]
    #[cfg(unix)]
    fn textconv_and_external_diff_never_run_inside_the_hook() {
        let dir = repo(&[("a.txt", "a")]);
        let outside = tempfile::tempdir().unwrap();
        let marker = outside.path().join("ran");
        let script = payload(outside.path(), &marker);
        write(dir.path(), ".gitattributes", "* diff=conv\n");
        git(dir.path(), &["config", "diff.conv.textconv", &script]);
        git(dir.path(), &["config", "diff.external", &script]);
        let tree = crate::worktree::WorkTree::open(dir.path());
        let before = tree.tree_id().unwrap();
        let first = tree.checkpoint("loop-1", 1).unwrap();
        write(dir.path(), "a.txt", "changed");
        let after = tree.tree_id().unwrap();
        let second = tree.checkpoint("loop-1", 2).unwrap();
        tree.changed_files(&before, &after).unwrap();
        tree.diff_summary(&first, &second).unwrap();
        assert_eq!(ran(&marker), "", "a textconv or external diff ran inside the hook");
        try_git(dir.path(), &["diff", "HEAD"]);
        assert!(
            !ran(&marker).is_empty(),
            "the payload did not run for plain git diff, so this proves nothing"
        );
    }

    #[test]
    fn stale_temporary_indexes_are_swept_and_fresh_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join(format!("{TEMP_INDEX_PREFIX}killed"));
        let fresh = dir.path().join(format!("{TEMP_INDEX_PREFIX}running"));
        let other = dir.path().join("someone-elses");
        for path in [&stale, &fresh, &other] {
            write(path, "index", "x");
        }
        let old = SystemTime::now() - Duration::from_secs(3_600);
        fs::File::open(&stale).unwrap().set_modified(old).unwrap();
        fs::File::open(&other).unwrap().set_modified(old).unwrap();
        sweep_stale(dir.path(), STALE_AFTER);
        assert!(!stale.exists());
        assert!(fresh.exists() && other.exists());
    }
}
