//! The project's working tree: a fingerprint of its content, the files that changed between two
//! fingerprints, and checkpoints a loop can roll back to.
//!
//! In a git work tree everything goes through git plumbing on a *temporary* index: the user's
//! index, HEAD, branches, stash and files are never touched, except by [`WorkTree::rollback`],
//! which rewrites files and nothing else. A fingerprint is then the id of the tree `git add -A`
//! would stage, so ignored files (build output, dependencies) do not count as changes, and two
//! fingerprints can be compared file by file. Checkpoints are commits under
//! `refs/for-loop/<loop-id>/<n>`: outside `refs/heads`, so no branch moves and neither a clone nor
//! a push of branches carries them (`git log --all` and `push --mirror` do see them), yet they keep
//! their objects from `git gc`.
//!
//! Outside git there are no ignore rules to go by, so the fingerprint is a walk hashing each
//! file's path, length, modification time (and mode, on Unix). It skips hidden directories
//! (`.git`, `.venv`, tool caches) and the usual dependency and build directories, which change
//! whenever verify runs without the loop having changed anything. The walk stops after
//! [`MAX_WALK_FILES`] files and says so in the fingerprint ([`is_approximate`]).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::digest::hex;

/// Files hashed by the walk outside git; beyond this the fingerprint is marked approximate.
pub(crate) const MAX_WALK_FILES: usize = 50_000;
/// Directories the walk outside git skips besides hidden ones: dependencies and build output.
const SKIP_DIRS: &[&str] = &["target", "node_modules", "__pycache__"];
/// The prefixes of a walk's fingerprint: complete, or cut off at [`MAX_WALK_FILES`].
const WALK: &str = "walk:";
const WALK_TOO_LARGE: &str = "walk-too-large:";
/// Where a loop's checkpoints live, as `<REFS>/<loop-id>/<n>`.
const REFS: &str = "refs/for-loop";
/// The ref holding the working tree as it was before the last rollback, under the loop's refs.
const BEFORE_ROLLBACK: &str = "before-rollback";
/// Variables a host, a hook or a parent git may have set that would point git at another
/// repository, index or object store (`git rev-parse --local-env-vars`).
const GIT_LOCAL_VARS: &[&str] = &[
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
/// A gitlink's mode: a submodule, which rollback leaves alone.
const GITLINK_MODE: &str = "160000";

#[derive(Debug, Error)]
pub(crate) enum WorkTreeError {
    #[error("{} is not inside a git work tree; checkpoints and rollback need git (run `git init` there)", dir.display())]
    NotGit { dir: PathBuf },
    #[error("git was not found on PATH; install git to use checkpoints and rollback")]
    GitNotFound,
    #[error("`{command}` failed: {stderr}")]
    Git { command: String, stderr: String },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("{}", describe_missing(*.n, .available))]
    NoSuchCheckpoint { n: u32, available: Vec<u32> },
    #[error("loop id {0:?} cannot name a git ref; use letters, digits, '-', '_' and inner '.'")]
    BadLoopId(String),
    #[error("{0:?} is not a git object id; compare fingerprints taken in a git work tree")]
    BadFingerprint(String),
}

fn describe_missing(n: u32, available: &[u32]) -> String {
    if available.is_empty() {
        return format!("there is no checkpoint {n}: this loop has none (start it with --checkpoint)");
    }
    let list: Vec<String> = available.iter().map(u32::to_string).collect();
    format!("there is no checkpoint {n}; this loop has checkpoints {}", list.join(", "))
}

fn io_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> WorkTreeError {
    let what = what.into();
    move |source| WorkTreeError::Io { what, source }
}

/// A project directory, and the git work tree it is in, if any.
#[derive(Debug, Clone)]
pub(crate) struct WorkTree {
    /// The work tree's top level in git, else the directory as given.
    root: PathBuf,
    repo: Option<Repo>,
    /// Whether git could not be run at all, to say so rather than "not a git work tree".
    git_missing: bool,
}

#[derive(Debug, Clone)]
struct Repo {
    /// Absolute; holds the index (per work tree, for linked work trees).
    git_dir: PathBuf,
}

/// What restoring a checkpoint does. Paths are relative to the work tree's root, `/`-separated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RollbackPlan {
    /// The checkpoint's commit.
    pub commit: String,
    /// Files written from the checkpoint: changed since, or deleted since.
    pub restore: Vec<String>,
    /// Files deleted: present now, absent from the checkpoint, not ignored.
    pub delete: Vec<String>,
    /// The tree id of the working tree before the rollback, to undo it by hand.
    pub before: String,
}

/// A plan with the paths as git gave them, which need not be UTF-8.
struct RawPlan {
    commit: String,
    before: String,
    restore: Vec<Vec<u8>>,
    delete: Vec<Vec<u8>>,
}

impl RawPlan {
    fn public(&self) -> RollbackPlan {
        let text =
            |paths: &[Vec<u8>]| paths.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect();
        RollbackPlan {
            commit: self.commit.clone(),
            restore: text(&self.restore),
            delete: text(&self.delete),
            before: self.before.clone(),
        }
    }
}

/// Whether a fingerprint covers only part of the tree (a walk cut off at [`MAX_WALK_FILES`]):
/// equal approximate fingerprints do not prove that nothing changed.
#[cfg(test)]
pub(crate) fn is_approximate(fingerprint: &str) -> bool {
    fingerprint.starts_with(WALK_TOO_LARGE)
}

/// The ref of checkpoint `n` of a loop.
pub(crate) fn checkpoint_ref(loop_id: &str, n: u32) -> String {
    format!("{REFS}/{loop_id}/{n}")
}

/// The ref [`WorkTree::rollback`] saves the working tree at before changing it.
pub(crate) fn before_rollback_ref(loop_id: &str) -> String {
    format!("{REFS}/{loop_id}/{BEFORE_ROLLBACK}")
}

impl WorkTree {
    /// The work tree `dir` is in. Never fails: a directory git does not know (or git missing) is a
    /// plain directory, fingerprinted by a walk.
    pub(crate) fn open(dir: &Path) -> WorkTree {
        let plain = |git_missing| WorkTree { root: dir.to_path_buf(), repo: None, git_missing };
        let ask = |flag: &str| match run_git(dir, &["rev-parse", flag], None, None) {
            Ok(out) if out.status.success() => Ok(Some(path_from_git(trim_newline(&out.stdout)))),
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        };
        // `--show-toplevel` fails in a bare repository and inside `.git`: no work tree there.
        let root = match ask("--show-toplevel") {
            Ok(Some(root)) => root,
            Ok(None) => return plain(false),
            Err(e) => return plain(matches!(e, WorkTreeError::GitNotFound)),
        };
        match ask("--absolute-git-dir") {
            Ok(Some(git_dir)) => WorkTree { root, repo: Some(Repo { git_dir }), git_missing: false },
            _ => plain(false),
        }
    }

    pub(crate) fn is_git(&self) -> bool {
        self.repo.is_some()
    }

    /// The work tree's top level in git, else the directory it was opened on.
    #[cfg(test)]
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// A digest of the working tree's content: tracked files and untracked files that are not
    /// ignored. In git, a tree id (40 or 64 hex digits) usable with [`WorkTree::changed_files`];
    /// the files' contents are written to the object store as loose objects, which `git gc`
    /// prunes once unreachable and expired. Outside git, `walk:<sha256>`, or
    /// `walk-too-large:<sha256>` when the walk was cut off.
    pub(crate) fn fingerprint(&self) -> Result<String, WorkTreeError> {
        match &self.repo {
            Some(repo) => self.snapshot(repo),
            None => walk_digest(&self.root, MAX_WALK_FILES),
        }
    }

    /// The files whose content or mode differs between two git fingerprints (or commits), in
    /// git's path order.
    pub(crate) fn changed_files(&self, from: &str, to: &str) -> Result<Vec<String>, WorkTreeError> {
        self.repo()?;
        let (from, to) = (object_id(from)?, object_id(to)?);
        let out =
            self.git(&["diff-tree", "-r", "-z", "--no-renames", "--name-only", from, to], None, None)?;
        Ok(split_z(&out).map(|p| String::from_utf8_lossy(p).into_owned()).collect())
    }

    /// Snapshots the working tree as checkpoint `n` of the loop: a commit whose parent is the
    /// loop's latest checkpoint before `n`, else HEAD (none in a repository without commits),
    /// at `refs/for-loop/<loop_id>/<n>`, replacing any checkpoint `n` there was. Returns the
    /// commit id.
    pub(crate) fn checkpoint(&self, loop_id: &str, n: u32) -> Result<String, WorkTreeError> {
        let repo = self.repo()?;
        check_loop_id(loop_id)?;
        let tree = self.snapshot(repo)?;
        let parent = match self.checkpoints(loop_id)?.into_iter().rev().find(|(k, _)| *k < n) {
            Some((_, commit)) => Some(commit),
            None => self.head()?,
        };
        let commit =
            self.commit_tree(&tree, parent.as_deref(), &format!("for-loop {loop_id} iteration {n}"))?;
        self.update_ref(&checkpoint_ref(loop_id, n), &commit)?;
        Ok(commit)
    }

    /// The loop's checkpoints and their commits, by `n`.
    pub(crate) fn checkpoints(&self, loop_id: &str) -> Result<Vec<(u32, String)>, WorkTreeError> {
        self.repo()?;
        check_loop_id(loop_id)?;
        let prefix = format!("{REFS}/{loop_id}/");
        // A pattern without a glob matches refs under it at a `/`: loop `a` never sees loop `ab`.
        let pattern = format!("{REFS}/{loop_id}");
        let out = self.git(&["for-each-ref", "--format=%(refname) %(objectname)", &pattern], None, None)?;
        let text = String::from_utf8_lossy(&out);
        let mut found: Vec<(u32, String)> = text
            .lines()
            .filter_map(|line| {
                let (name, commit) = line.split_once(' ')?;
                let n: u32 = name.strip_prefix(&prefix)?.parse().ok()?;
                // `01` or `+1` are not refs this module writes.
                (name == checkpoint_ref(loop_id, n)).then(|| (n, commit.to_string()))
            })
            .collect();
        found.sort_by_key(|(n, _)| *n);
        Ok(found)
    }

    /// What [`WorkTree::rollback`] to checkpoint `n` would do now.
    pub(crate) fn rollback_plan(&self, loop_id: &str, n: u32) -> Result<RollbackPlan, WorkTreeError> {
        Ok(self.plan(loop_id, n)?.public())
    }

    /// Makes the working tree's files what they were at checkpoint `n`: deletes the files the
    /// plan lists, then writes the ones that differ. Ignored files, the index, HEAD, branches and
    /// stash are left as they are. The working tree as it was is kept first as a commit at
    /// [`before_rollback_ref`], so a mistaken rollback can be undone with
    /// `git restore --source=<that ref> --worktree -- .`. Returns the plan it applied.
    pub(crate) fn rollback(&self, loop_id: &str, n: u32) -> Result<RollbackPlan, WorkTreeError> {
        let plan = self.plan(loop_id, n)?;
        let before = self.commit_tree(
            &plan.before,
            Some(&plan.commit),
            &format!("for-loop {loop_id} before rollback to {n}"),
        )?;
        self.update_ref(&before_rollback_ref(loop_id), &before)?;

        // Read the checkpoint before deleting anything, so a failure here changes nothing.
        let index = TempIndex::create(self.repo()?, false)?;
        self.git(&["read-tree", &plan.commit], Some(&index), None)?;
        for path in &plan.delete {
            self.delete(&path_from_git(path))?;
        }
        if !plan.restore.is_empty() {
            // Only the files that differ are written, so unchanged files keep their timestamps
            // and builds stay incremental.
            let mut list = Vec::new();
            for path in &plan.restore {
                list.extend_from_slice(path);
                list.push(0);
            }
            self.git(&["checkout-index", "-f", "-z", "--stdin"], Some(&index), Some(list))?;
        }
        Ok(plan.public())
    }

    fn plan(&self, loop_id: &str, n: u32) -> Result<RawPlan, WorkTreeError> {
        let repo = self.repo()?;
        let checkpoints = self.checkpoints(loop_id)?;
        let Some((_, commit)) = checkpoints.iter().find(|(k, _)| *k == n) else {
            let available = checkpoints.iter().map(|(k, _)| *k).collect();
            return Err(WorkTreeError::NoSuchCheckpoint { n, available });
        };
        let before = self.snapshot(repo)?;
        // Raw `-z` output: ":<mode now> <mode then> <id> <id> <status>\0<path>\0" per file.
        let out = self.git(&["diff-tree", "-r", "-z", "--no-renames", &before, commit], None, None)?;
        let mut plan = RawPlan { commit: commit.clone(), before, restore: Vec::new(), delete: Vec::new() };
        let mut fields = split_z(&out);
        while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
            let meta = String::from_utf8_lossy(meta);
            let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let [mode_now, mode_then, _, _, status] = parts[..] else { continue };
            if mode_now == GITLINK_MODE || mode_then == GITLINK_MODE {
                continue;
            }
            match status {
                "D" => plan.delete.push(path.to_vec()),
                _ => plan.restore.push(path.to_vec()),
            }
        }
        Ok(plan)
    }

    /// Deletes one file of the work tree, then the directories it leaves empty.
    fn delete(&self, relative: &Path) -> Result<(), WorkTreeError> {
        let path = self.root.join(relative);
        match fs::symlink_metadata(&path) {
            // A directory now where the plan saw a file: changed since planning; not ours to remove.
            Ok(meta) if meta.is_dir() => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_error(format!("could not examine {}", path.display()))(e)),
        }
        fs::remove_file(&path).map_err(io_error(format!("could not delete {}", path.display())))?;
        let mut dir = relative.parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            // Fails, as it should, when anything (an ignored file, say) is left in it.
            if fs::remove_dir(self.root.join(d)).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }

    /// The tree `git add -A` would stage now, written through a copy of the user's index (its
    /// stat data spares rehashing unchanged files).
    fn snapshot(&self, repo: &Repo) -> Result<String, WorkTreeError> {
        let index = TempIndex::create(repo, true)?;
        self.git(&["add", "-A"], Some(&index), None)?;
        let out = self.git(&["write-tree"], Some(&index), None)?;
        Ok(String::from_utf8_lossy(trim_newline(&out)).into_owned())
    }

    fn head(&self) -> Result<Option<String>, WorkTreeError> {
        let out = run_git(&self.root, &["rev-parse", "-q", "--verify", "HEAD^{commit}"], None, None)?;
        let id = String::from_utf8_lossy(trim_newline(&out.stdout)).into_owned();
        Ok((out.status.success() && !id.is_empty()).then_some(id))
    }

    fn commit_tree(&self, tree: &str, parent: Option<&str>, message: &str) -> Result<String, WorkTreeError> {
        // `--no-gpg-sign`: commit-tree honours commit.gpgSign, and a passphrase prompt would hang.
        let mut args = vec!["commit-tree", "--no-gpg-sign", "-m", message];
        if let Some(parent) = parent {
            args.extend(["-p", parent]);
        }
        args.push(tree);
        let out = self.git(&args, None, None)?;
        Ok(String::from_utf8_lossy(trim_newline(&out)).into_owned())
    }

    fn update_ref(&self, name: &str, commit: &str) -> Result<(), WorkTreeError> {
        self.git(&["update-ref", "-m", "for-loop checkpoint", name, commit], None, None).map(drop)
    }

    fn repo(&self) -> Result<&Repo, WorkTreeError> {
        match (&self.repo, self.git_missing) {
            (Some(repo), _) => Ok(repo),
            (None, true) => Err(WorkTreeError::GitNotFound),
            (None, false) => Err(WorkTreeError::NotGit { dir: self.root.clone() }),
        }
    }

    /// Runs git in the work tree and returns its stdout, or fails naming the command.
    fn git(
        &self,
        args: &[&str],
        index: Option<&TempIndex>,
        input: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, WorkTreeError> {
        let out = run_git(&self.root, args, index.map(|i| i.path.as_path()), input)?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(WorkTreeError::Git {
            command: format!("git {}", args.join(" ")),
            stderr: if stderr.is_empty() { format!("{} with no message", out.status) } else { stderr },
        })
    }
}

/// An index file of our own, in a directory removed with it (with any `index.lock` git left).
struct TempIndex {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempIndex {
    /// In the git directory when it is writable (it must be, for git to write objects), else the
    /// system's temporary directory; never in the work tree, where `git add -A` would see it.
    /// `seeded`: starts as a copy of the user's index rather than empty.
    fn create(repo: &Repo, seeded: bool) -> Result<TempIndex, WorkTreeError> {
        let builder = || {
            let mut b = tempfile::Builder::new();
            b.prefix("for-loop-index-");
            b
        };
        let dir = builder()
            .tempdir_in(&repo.git_dir)
            .or_else(|_| builder().tempdir())
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

/// Copies an index with its modification time. Git trusts an entry's stat data only when the
/// file was modified before the index was written (by mtime); for the others, "racily clean", it
/// compares content. A copy dated now would make an edit of the same size in the same second as
/// the user's last `git add` look unchanged.
fn copy_keeping_mtime(from: &Path, to: &Path) -> io::Result<()> {
    fs::copy(from, to)?;
    let modified = fs::metadata(from)?.modified()?;
    fs::File::options().write(true).open(to)?.set_modified(modified)
}

/// Runs `git -C <dir> <args>` with the repository-pointing variables cleared, stdin closed (or
/// fed `input`), and `index` as `GIT_INDEX_FILE` if given.
fn run_git(
    dir: &Path,
    args: &[&str],
    index: Option<&Path>,
    input: Option<Vec<u8>>,
) -> Result<Output, WorkTreeError> {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir);
    if index.is_some() {
        // A split index would leave shared index files of ours in the git directory.
        command.args(["-c", "core.splitIndex=false"]);
    }
    command.args(args);
    for var in GIT_LOCAL_VARS {
        command.env_remove(var);
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

/// A fingerprint or commit id as git's object id, refusing anything git could read as an option
/// or a revision expression.
fn object_id(id: &str) -> Result<&str, WorkTreeError> {
    let hex = id.bytes().all(|b| b.is_ascii_hexdigit());
    if hex && (id.len() == 40 || id.len() == 64) {
        Ok(id)
    } else {
        Err(WorkTreeError::BadFingerprint(id.to_string()))
    }
}

/// Loop ids become a ref's path component: keep them to a set git accepts everywhere.
fn check_loop_id(id: &str) -> Result<(), WorkTreeError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !id.starts_with(['.', '-'])
        && !id.ends_with('.')
        && !id.to_ascii_lowercase().ends_with(".lock")
        && !id.contains("..");
    if ok { Ok(()) } else { Err(WorkTreeError::BadLoopId(id.to_string())) }
}

fn split_z(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == 0).filter(|s| !s.is_empty())
}

fn trim_newline(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// A path git printed, relative to the work tree or absolute.
#[cfg(unix)]
fn path_from_git(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// A path git printed: git for Windows prints UTF-8.
#[cfg(not(unix))]
fn path_from_git(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

/// The walk's fingerprint of `root`: depth first in name order, each file's relative path,
/// length, modification time and mode. Unreadable directories count as such, not as errors.
fn walk_digest(root: &Path, max_files: usize) -> Result<String, WorkTreeError> {
    let meta = fs::metadata(root).map_err(io_error(format!("could not read {}", root.display())))?;
    if !meta.is_dir() {
        let e = io::Error::new(io::ErrorKind::NotADirectory, "not a directory");
        return Err(io_error(format!("could not walk {}", root.display()))(e));
    }
    let mut hasher = Sha256::new();
    let mut files = 0;
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(root.join(&dir)) else {
            hash_entry(&mut hasher, &dir, b"unreadable");
            continue;
        };
        let mut entries: Vec<(OsString, fs::FileType)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| Some((e.file_name(), e.file_type().ok()?)))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut subdirs = Vec::new();
        for (name, kind) in entries {
            let path = dir.join(&name);
            if kind.is_dir() {
                if !skipped_dir(&name) {
                    subdirs.push(path);
                }
                continue;
            }
            if files == max_files {
                return Ok(format!("{WALK_TOO_LARGE}{}", hex(&hasher.finalize())));
            }
            files += 1;
            // Symlinks are not followed: their own metadata is what changes when they change.
            let stamp = match fs::symlink_metadata(root.join(&path)) {
                Ok(meta) => file_stamp(&meta),
                Err(_) => b"vanished".to_vec(),
            };
            hash_entry(&mut hasher, &path, &stamp);
        }
        // Reversed, so that the stack hands them out in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(format!("{WALK}{}", hex(&hasher.finalize())))
}

fn skipped_dir(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b".") || SKIP_DIRS.iter().any(|skip| skip.as_bytes() == name)
}

fn hash_entry(hasher: &mut Sha256, path: &Path, stamp: &[u8]) {
    let path = path.as_os_str().as_encoded_bytes();
    // Length-prefixed, so no path and stamp can run into the next.
    hasher.update((path.len() as u64).to_le_bytes());
    hasher.update(path);
    hasher.update((stamp.len() as u64).to_le_bytes());
    hasher.update(stamp);
}

fn file_stamp(meta: &fs::Metadata) -> Vec<u8> {
    let mut stamp = Vec::with_capacity(32);
    stamp.extend(meta.len().to_le_bytes());
    let mtime = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).unwrap_or_default();
    stamp.extend(mtime.as_secs().to_le_bytes());
    stamp.extend(mtime.subsec_nanos().to_le_bytes());
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        stamp.extend(meta.mode().to_le_bytes());
    }
    stamp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs git for a test's setup, isolated from the variables a hook running the tests may set.
    fn try_git(dir: &Path, args: &[&str]) -> Output {
        let mut command = Command::new("git");
        command.arg("-C").arg(dir).args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "-c",
            "commit.gpgSign=false",
        ]);
        for var in GIT_LOCAL_VARS {
            command.env_remove(var);
        }
        // `git status` would otherwise refresh the user's index, which the tests compare.
        command.env("GIT_OPTIONAL_LOCKS", "0").args(args).stdin(Stdio::null()).output().unwrap()
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = try_git(dir, args);
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(dir: &Path, path: &str, content: &str) {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn read(dir: &Path, path: &str) -> Option<String> {
        fs::read_to_string(dir.join(path)).ok()
    }

    /// A repository with one commit of `files` and a .gitignore of `*.log` and `ignored/`.
    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        write(dir.path(), ".gitignore", "*.log\nignored/\n");
        for (path, content) in files {
            write(dir.path(), path, content);
        }
        git(dir.path(), &["add", "-A"]);
        git(dir.path(), &["commit", "-q", "-m", "start"]);
        dir
    }

    /// Everything of the user's that fingerprints and checkpoints must leave alone.
    fn user_state(dir: &Path) -> Vec<String> {
        let index = fs::read(dir.join(".git/index")).map_or_else(|_| "no index".into(), |b| format!("{b:?}"));
        let head = String::from_utf8(try_git(dir, &["rev-parse", "-q", "--verify", "HEAD"]).stdout).unwrap();
        let refs =
            git(dir, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/stash"]);
        vec![
            index,
            head,
            git(dir, &["symbolic-ref", "HEAD"]),
            git(dir, &["status", "--porcelain=v1", "-z"]),
            refs,
        ]
    }

    fn no_temp_index_left(dir: &Path) -> bool {
        fs::read_dir(dir.join(".git"))
            .unwrap()
            .all(|e| !e.unwrap().file_name().to_string_lossy().starts_with("for-loop-"))
    }

    #[test]
    fn fingerprint_follows_tracked_and_untracked_files_but_not_ignored_ones() {
        let dir = repo(&[("a.txt", "a"), ("sub/b.txt", "b")]);
        let tree = WorkTree::open(&dir.path().join("sub"));
        assert!(tree.is_git());
        assert_eq!(tree.root().canonicalize().unwrap(), dir.path().canonicalize().unwrap());

        let start = tree.fingerprint().unwrap();
        assert_eq!(start.len(), 40);
        assert_eq!(start, git(dir.path(), &["rev-parse", "HEAD^{tree}"]).trim(), "the committed tree");
        assert_eq!(tree.fingerprint().unwrap(), start);

        write(dir.path(), "build.log", "noise");
        write(dir.path(), "ignored/cache.bin", "noise");
        assert_eq!(tree.fingerprint().unwrap(), start, "ignored files do not count");

        write(dir.path(), "sub/b.txt", "b2");
        let edited = tree.fingerprint().unwrap();
        assert_ne!(edited, start);
        write(dir.path(), "new.txt", "n");
        let added = tree.fingerprint().unwrap();
        assert_ne!(added, edited);

        assert_eq!(tree.changed_files(&start, &added).unwrap(), ["new.txt", "sub/b.txt"]);
        assert_eq!(tree.changed_files(&edited, &added).unwrap(), ["new.txt"]);
        assert!(tree.changed_files(&added, &added).unwrap().is_empty());
        assert!(!is_approximate(&added));
        assert!(no_temp_index_left(dir.path()));
    }

    #[test]
    fn an_edit_git_has_to_compare_by_content_is_seen() {
        let dir = repo(&[("a.txt", "v1")]);
        let path = dir.path();
        let set_mtime = |file: &str, time| {
            fs::File::options().write(true).open(path.join(file)).unwrap().set_modified(time).unwrap();
        };
        // The racy case, shifted into the past so that it does not depend on the clock: the
        // index was written no later than the file's last change, and the edit keeps the size
        // and mtime it had when staged. Only a comparison of content can see it.
        git(path, &["config", "core.trustctime", "false"]);
        let staged = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        set_mtime("a.txt", staged);
        git(path, &["add", "a.txt"]);
        set_mtime(".git/index", staged - std::time::Duration::from_secs(10));
        let start = WorkTree::open(path).fingerprint().unwrap();

        write(path, "a.txt", "v2");
        set_mtime("a.txt", staged);
        assert_ne!(WorkTree::open(path).fingerprint().unwrap(), start);
    }

    #[test]
    fn fingerprint_and_checkpoint_leave_the_users_index_head_and_stash_alone() {
        let dir = repo(&[("a.txt", "a"), ("b.txt", "b")]);
        let path = dir.path();
        write(path, "a.txt", "stashed");
        git(path, &["stash", "-q"]);
        write(path, "a.txt", "staged");
        git(path, &["add", "a.txt"]);
        write(path, "a.txt", "staged then edited");
        write(path, "b.txt", "unstaged");
        write(path, "untracked.txt", "u");
        let before = user_state(path);

        let tree = WorkTree::open(path);
        let fingerprint = tree.fingerprint().unwrap();
        let commit = tree.checkpoint("L1", 1).unwrap();

        assert_eq!(user_state(path), before);
        assert_eq!(read(path, "a.txt").as_deref(), Some("staged then edited"));
        assert_eq!(git(path, &["rev-parse", &format!("{commit}^{{tree}}")]).trim(), fingerprint);
        assert_eq!(git(path, &["show", &format!("{commit}:a.txt")]), "staged then edited");
        assert_eq!(git(path, &["show", &format!("{commit}:untracked.txt")]), "u");
        assert!(no_temp_index_left(path));
    }

    #[test]
    fn checkpoints_are_refs_chained_and_listed_by_number() {
        let dir = repo(&[("a.txt", "a")]);
        let path = dir.path();
        let tree = WorkTree::open(path);
        let head = git(path, &["rev-parse", "HEAD"]).trim().to_string();
        let mut commits = Vec::new();
        for n in [1, 2, 10] {
            write(path, "a.txt", &format!("a{n}"));
            commits.push(tree.checkpoint("20261122-031900-1a2b3c", n).unwrap());
        }
        tree.checkpoint("20261122-031900-1a2b3cd", 5).unwrap();

        let listed = tree.checkpoints("20261122-031900-1a2b3c").unwrap();
        let expected: Vec<(u32, String)> = [1, 2, 10].into_iter().zip(commits.iter().cloned()).collect();
        assert_eq!(listed, expected, "numeric order, and not the loop whose id it prefixes");
        assert_eq!(git(path, &["rev-parse", "refs/for-loop/20261122-031900-1a2b3c/2"]).trim(), commits[1]);

        let parent = |c: &str| git(path, &["rev-parse", &format!("{c}^")]).trim().to_string();
        assert_eq!(parent(&commits[0]), head);
        assert_eq!(parent(&commits[1]), commits[0]);
        assert_eq!(parent(&commits[2]), commits[1]);
        let message = git(path, &["log", "-1", "--format=%s %an <%ae>", &commits[1]]);
        assert_eq!(
            message.trim(),
            "for-loop 20261122-031900-1a2b3c iteration 2 for-loop <for-loop@localhost>"
        );
        assert!(tree.checkpoints("other").unwrap().is_empty());
    }

    #[test]
    fn rollback_restores_the_snapshot_and_leaves_ignored_files_and_the_index_alone() {
        let dir = repo(&[("a.txt", "a"), ("b.txt", "b"), ("dir/c.txt", "c")]);
        let path = dir.path();
        write(path, "untracked.txt", "u");
        let tree = WorkTree::open(path);
        let commit = tree.checkpoint("L", 1).unwrap();

        write(path, "a.txt", "a changed");
        git(path, &["add", "a.txt"]);
        fs::remove_file(path.join("b.txt")).unwrap();
        fs::remove_file(path.join("untracked.txt")).unwrap();
        write(path, "new/deep/n.txt", "n");
        write(path, "new/keep.log", "ignored");
        write(path, "build.log", "ignored");
        write(path, "dir/c.txt", "c");
        let before = user_state(path);
        let changed = tree.fingerprint().unwrap();

        let plan = tree.rollback_plan("L", 1).unwrap();
        assert_eq!(plan.commit, commit);
        assert_eq!(plan.restore, ["a.txt", "b.txt", "untracked.txt"]);
        assert_eq!(plan.delete, ["new/deep/n.txt"]);
        assert_eq!(plan.before, changed);
        assert_eq!(read(path, "new/deep/n.txt").as_deref(), Some("n"), "planning changes nothing");

        let applied = tree.rollback("L", 1).unwrap();
        assert_eq!(applied, plan);
        assert_eq!(read(path, "a.txt").as_deref(), Some("a"));
        assert_eq!(read(path, "b.txt").as_deref(), Some("b"));
        assert_eq!(read(path, "untracked.txt").as_deref(), Some("u"));
        assert!(!path.join("new/deep").exists(), "emptied directories go too");
        assert_eq!(read(path, "new/keep.log").as_deref(), Some("ignored"));
        assert_eq!(read(path, "build.log").as_deref(), Some("ignored"));

        let index = |s: &[String]| s[0].clone();
        assert_eq!(index(&user_state(path)), index(&before), "the user's index");
        assert_eq!(user_state(path)[1..3], before[1..3], "HEAD");
        assert_eq!(
            tree.fingerprint().unwrap(),
            git(path, &["rev-parse", &format!("{commit}^{{tree}}")]).trim()
        );
        let saved = git(path, &["rev-parse", "refs/for-loop/L/before-rollback^{tree}"]);
        assert_eq!(saved.trim(), changed, "the tree before the rollback is kept");
        assert_eq!(tree.checkpoints("L").unwrap().len(), 1);
        assert!(no_temp_index_left(path));
    }

    #[test]
    fn rollback_writes_only_the_files_that_differ() {
        let dir = repo(&[("same.txt", "s"), ("other.txt", "o")]);
        let path = dir.path();
        let tree = WorkTree::open(path);
        tree.checkpoint("L", 1).unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        fs::File::options().write(true).open(path.join("same.txt")).unwrap().set_modified(old).unwrap();
        write(path, "other.txt", "changed");
        tree.rollback("L", 1).unwrap();
        assert_eq!(fs::metadata(path.join("same.txt")).unwrap().modified().unwrap(), old);
        assert_eq!(read(path, "other.txt").as_deref(), Some("o"));
    }

    #[cfg(unix)]
    #[test]
    fn paths_with_spaces_unicode_and_newlines() {
        let names = ["with space.txt", "ünïcödé/ñ.txt", "new\nline.txt", "-dash.txt", "quote\"d.txt"];
        let files: Vec<(&str, &str)> = names.iter().map(|n| (*n, "v1")).collect();
        let dir = repo(&files);
        let path = dir.path();
        let tree = WorkTree::open(path);
        let start = tree.fingerprint().unwrap();
        tree.checkpoint("L", 1).unwrap();

        write(path, "new\nline.txt", "v2");
        fs::remove_file(path.join("ünïcödé/ñ.txt")).unwrap();
        write(path, "another\nnew file.txt", "added");
        let now = tree.fingerprint().unwrap();
        assert_eq!(
            tree.changed_files(&start, &now).unwrap(),
            ["another\nnew file.txt", "new\nline.txt", "ünïcödé/ñ.txt"]
        );

        let plan = tree.rollback("L", 1).unwrap();
        assert_eq!(plan.restore, ["new\nline.txt", "ünïcödé/ñ.txt"]);
        assert_eq!(plan.delete, ["another\nnew file.txt"]);
        for name in names {
            assert_eq!(read(path, name).as_deref(), Some("v1"), "{name:?}");
        }
        assert!(!path.join("another\nnew file.txt").exists());
        assert_eq!(tree.fingerprint().unwrap(), start);
    }

    #[cfg(unix)]
    #[test]
    fn rollback_undoes_files_becoming_directories_and_symlinks() {
        let dir = repo(&[("x", "file"), ("d/f.txt", "f")]);
        let path = dir.path();
        std::os::unix::fs::symlink("x", path.join("link")).unwrap();
        let tree = WorkTree::open(path);
        let start = tree.fingerprint().unwrap();
        tree.checkpoint("L", 1).unwrap();

        fs::remove_file(path.join("x")).unwrap();
        write(path, "x/inner.txt", "now a directory");
        fs::remove_dir_all(path.join("d")).unwrap();
        write(path, "d", "now a file");
        fs::remove_file(path.join("link")).unwrap();
        write(path, "link", "now a file");

        let plan = tree.rollback("L", 1).unwrap();
        assert_eq!(plan.delete, ["d", "x/inner.txt"]);
        assert_eq!(plan.restore, ["d/f.txt", "link", "x"]);
        assert_eq!(read(path, "x").as_deref(), Some("file"));
        assert_eq!(read(path, "d/f.txt").as_deref(), Some("f"));
        assert_eq!(fs::read_link(path.join("link")).unwrap(), Path::new("x"));
        assert_eq!(tree.fingerprint().unwrap(), start);
    }

    #[test]
    fn a_repository_without_commits_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        git(path, &["init", "-q"]);
        write(path, "a.txt", "a");
        let before = user_state(path);
        let tree = WorkTree::open(path);
        let start = tree.fingerprint().unwrap();
        let commit = tree.checkpoint("L", 1).unwrap();
        assert_eq!(git(path, &["rev-list", "--parents", "-n", "1", &commit]).trim(), commit, "no parent");
        assert_eq!(user_state(path), before);
        assert!(!path.join(".git/index").exists(), "no index was created");

        write(path, "a.txt", "changed");
        write(path, "b.txt", "b");
        assert_ne!(tree.fingerprint().unwrap(), start);
        tree.rollback("L", 1).unwrap();
        assert_eq!(read(path, "a.txt").as_deref(), Some("a"));
        assert!(!path.join("b.txt").exists());
        assert_eq!(tree.fingerprint().unwrap(), start);
        assert!(!try_git(path, &["rev-parse", "-q", "--verify", "HEAD"]).status.success(), "HEAD is unborn");
        assert!(!path.join(".git/index").exists());
    }

    #[test]
    fn a_plain_directory_is_walked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        let tree = WorkTree::open(path);
        assert!(!tree.is_git(), "the system's temporary directory is inside a git work tree");
        write(path, "a.txt", "a");
        write(path, "src/deep/b.txt", "b");
        let start = tree.fingerprint().unwrap();
        assert!(start.starts_with("walk:") && !is_approximate(&start), "{start}");
        assert_eq!(tree.fingerprint().unwrap(), start);

        write(path, "target/debug/out", "build output");
        write(path, "node_modules/x/index.js", "dependency");
        write(path, ".cache/x", "tool cache");
        fs::create_dir_all(path.join("empty")).unwrap();
        assert_eq!(tree.fingerprint().unwrap(), start, "skipped directories and empty ones do not count");

        write(path, "src/deep/b.txt", "b, edited");
        let edited = tree.fingerprint().unwrap();
        assert_ne!(edited, start);
        write(path, ".env", "hidden files count");
        assert_ne!(tree.fingerprint().unwrap(), edited);

        assert!(matches!(tree.checkpoint("L", 1), Err(WorkTreeError::NotGit { .. })));
        assert!(matches!(tree.changed_files(&start, &edited), Err(WorkTreeError::NotGit { .. })));
        assert!(matches!(tree.rollback("L", 1), Err(WorkTreeError::NotGit { .. })));
        let missing = WorkTree::open(&path.join("nowhere"));
        assert!(matches!(missing.fingerprint(), Err(WorkTreeError::Io { .. })));
    }

    #[test]
    fn the_walk_is_bounded_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            write(dir.path(), name, name);
        }
        assert!(walk_digest(dir.path(), 3).unwrap().starts_with("walk:"));
        let cut = walk_digest(dir.path(), 2).unwrap();
        assert!(cut.starts_with("walk-too-large:") && is_approximate(&cut), "{cut}");
    }

    #[test]
    fn an_unknown_checkpoint_names_the_ones_there_are() {
        let dir = repo(&[("a.txt", "a")]);
        let tree = WorkTree::open(dir.path());
        tree.checkpoint("L", 1).unwrap();
        tree.checkpoint("L", 3).unwrap();
        let err = tree.rollback("L", 2).unwrap_err();
        assert!(matches!(&err, WorkTreeError::NoSuchCheckpoint { n: 2, available } if available == &[1, 3]));
        assert_eq!(err.to_string(), "there is no checkpoint 2; this loop has checkpoints 1, 3");
        let err = tree.rollback_plan("none", 1).unwrap_err();
        assert!(err.to_string().contains("has none (start it with --checkpoint)"), "{err}");
        let refs = git(dir.path(), &["for-each-ref", "refs/for-loop/L/before-rollback"]);
        assert!(refs.is_empty(), "a refused rollback saves nothing");
    }

    #[test]
    fn hostile_ids_are_refused_before_git_sees_them() {
        let dir = repo(&[("a.txt", "a")]);
        let tree = WorkTree::open(dir.path());
        let good = tree.fingerprint().unwrap();
        for bad in ["--output=x", "HEAD", "HEAD~1", &good[..39], &format!("{good} ")] {
            assert!(
                matches!(tree.changed_files(bad, &good), Err(WorkTreeError::BadFingerprint(_))),
                "{bad:?}"
            );
        }
        for bad in ["", "../x", "a/b", ".x", "-x", "x.lock", "a..b", "x.", "a b", "a\nb"] {
            assert!(matches!(tree.checkpoint(bad, 1), Err(WorkTreeError::BadLoopId(_))), "{bad:?}");
        }
        assert!(git(dir.path(), &["for-each-ref", "refs/for-loop"]).is_empty());
    }

    #[test]
    fn git_failures_name_the_command() {
        let dir = repo(&[("a.txt", "a")]);
        let tree = WorkTree::open(dir.path());
        let unknown = "0123456789abcdef0123456789abcdef01234567";
        let err = tree.changed_files(unknown, unknown).unwrap_err();
        assert!(
            matches!(&err, WorkTreeError::Git { command, .. } if command.starts_with("git diff-tree")),
            "{err}"
        );
    }
}
