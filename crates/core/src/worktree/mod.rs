//! The project's working tree: a fingerprint of its content at each stop, the files that
//! changed between two snapshots, and checkpoints a loop can roll back to ([`checkpoint`]).
//!
//! In a git work tree the user's index, HEAD, branches, stash and files are never touched, except
//! by [`WorkTree::rollback`], which rewrites files and nothing else. The repository is found
//! without running git ([`git::Repo::discover`]), and a stop's fingerprint comes from `git status`
//! without its optional index refresh, whose list of files that differ from HEAD (untracked ones
//! included, ignored ones not) is hashed with HEAD's id and each listed file's content. A stop
//! takes that status once after verify, in a look it shares with the oracle's search
//! ([`TreeLook`]). Ignored files (build output, dependencies) do not count as changes. A snapshot that
//! can be compared file by file ([`WorkTree::tree_id`]) is the id of the tree `git add -A` would
//! stage, written through a temporary index: it takes two processes and is only needed at the
//! start and end of a loop and for checkpoints.
//!
//! Outside git there are no ignore rules to go by, so the fingerprint hashes each file's path,
//! length, modification time (and mode, on Unix) as the shared walk ([`crate::support::read::walk`]) finds them.
//! A walk cut at its bound says so in the fingerprint ([`is_approximate`]): two equal
//! approximate fingerprints do not show that nothing changed.

mod checkpoint;
pub(crate) use checkpoint::{check_loop_id, checkpoint_ref};
mod git;
mod look;
mod merge;
mod repository;
pub(crate) use look::TreeLook;
#[cfg(test)]
pub(crate) mod testing;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use thiserror::Error;

use git::{Repo, TempIndex, object_id, path_from_git, run_git, split_z, trim_newline};

use crate::support::digest::hex;
use crate::support::read::bounded_read;
use crate::support::read::walk;

/// The prefixes of a fingerprint: from git's status, from a complete walk, from a cut one.
const STATUS: &str = "status:";
const WALK: &str = "walk:";
const WALK_TOO_LARGE: &str = "walk-too-large:";
/// A changed file's content is hashed up to this size, and all of them up to the total; beyond,
/// its length, modification time and mode stand for it.
const MAX_HASHED_FILE: u64 = 1 << 20;
const MAX_HASHED_TOTAL: u64 = 32 << 20;

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
    #[error("{0:?} is not a git object id; compare snapshots taken in a git work tree")]
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
}

/// Whether a fingerprint covers only part of the tree (a walk cut off at its bound): equal
/// approximate fingerprints do not prove that nothing changed.
pub(crate) fn is_approximate(fingerprint: &str) -> bool {
    fingerprint.starts_with(WALK_TOO_LARGE)
}

impl WorkTree {
    /// The work tree `dir` is in. Never fails, and starts no process: a directory git does not
    /// know is a plain directory, fingerprinted by a walk.
    pub(crate) fn open(dir: &Path) -> WorkTree {
        match Repo::discover(dir) {
            Some(repo) => WorkTree { root: repo.top.clone(), repo: Some(repo) },
            None => WorkTree { root: dir.to_path_buf(), repo: None },
        }
    }

    pub(crate) fn is_git(&self) -> bool {
        self.repo.is_some()
    }

    /// The work tree's top level in git, else the directory it was opened on.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// A digest of the working tree's content, to tell whether anything changed between two
    /// stops: tracked files and untracked files that are not ignored. In git, `status:<sha256>`
    /// from one git process; where git cannot run there, or outside git, `walk:<sha256>`, or
    /// `walk-too-large:<sha256>` when the walk was cut off. Also sweeps the temporary indexes
    /// earlier versions left in the git directory.
    #[cfg(test)]
    pub(crate) fn fingerprint(&self) -> Result<String, WorkTreeError> {
        self.fingerprint_in(None)
    }

    /// [`WorkTree::fingerprint`] from `look`, a look at the tree taken now, when there is one.
    pub(crate) fn fingerprint_in(&self, look: Option<&TreeLook>) -> Result<String, WorkTreeError> {
        if let Some(repo) = &self.repo {
            git::sweep_git_dir(repo);
            let status = match look {
                Some(look) => Ok(look.status.clone()),
                None => self.git(look::STATUS_ARGS, None, None),
            };
            if let Ok(status) = status {
                return Ok(self.status_fingerprint(&status));
            }
        }
        walk_digest(&self.root, walk::MAX_ENTRIES)
    }

    /// The id of the tree `git add -A` would stage now (40 or 64 hex digits), usable with
    /// [`WorkTree::changed_files`]. The files' contents are written to the object store as
    /// loose objects, which `git gc` prunes once unreachable and expired.
    pub(crate) fn tree_id(&self) -> Result<String, WorkTreeError> {
        self.tree_id_in(self.repo()?)
    }

    /// The files whose content or mode differs between two tree ids (or commits), in git's
    /// path order.
    pub(crate) fn changed_files(&self, from: &str, to: &str) -> Result<Vec<String>, WorkTreeError> {
        self.repo()?;
        let (from, to) = (object_id(from)?, object_id(to)?);
        let out =
            self.git(&["diff-tree", "-r", "-z", "--no-renames", "--name-only", from, to], None, None)?;
        Ok(split_z(&out).map(|p| String::from_utf8_lossy(p).into_owned()).collect())
    }

    /// [`WorkTree::changed_files`], each with git's letter for how it changed: `A` added, `D`
    /// deleted, `M` modified, `T` its type changed.
    pub(crate) fn changed_files_by_kind(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Vec<(char, String)>, WorkTreeError> {
        self.repo()?;
        let (from, to) = (object_id(from)?, object_id(to)?);
        let out =
            self.git(&["diff-tree", "-r", "-z", "--no-renames", "--name-status", from, to], None, None)?;
        let mut fields = split_z(&out);
        let mut changed = Vec::new();
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            let kind = status.first().map_or('M', |b| char::from(*b));
            changed.push((kind, String::from_utf8_lossy(path).into_owned()));
        }
        Ok(changed)
    }

    /// The content of each of `paths` (relative to the top level) in the tree or commit `tree`:
    /// `None` for a path that is not there, or is larger than `max_bytes`. One git process.
    pub(crate) fn files_at(
        &self,
        tree: &str,
        paths: &[String],
        max_bytes: usize,
    ) -> Result<Vec<Option<Vec<u8>>>, WorkTreeError> {
        self.repo()?;
        let tree = object_id(tree)?;
        // One object name per line: a path with a line break in it cannot be asked for.
        let asked: Vec<&String> = paths.iter().filter(|p| !p.contains(['\n', '\r'])).collect();
        let input: String = asked.iter().fold(String::new(), |mut input, path| {
            let _ = writeln!(input, "{tree}:{path}");
            input
        });
        let out = self.git(&["cat-file", "--batch"], None, Some(input.into_bytes()))?;
        let mut found: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        let mut rest = out.as_slice();
        for path in &asked {
            let Some(end) = rest.iter().position(|b| *b == b'\n') else { break };
            let header = String::from_utf8_lossy(&rest[..end]).into_owned();
            rest = &rest[end + 1..];
            // `<oid> <type> <size>`, then the content and a newline; or `<name> missing`.
            let mut fields = header.rsplitn(3, ' ');
            let (size, kind) = (fields.next(), fields.next());
            if !matches!(kind, Some("blob" | "tree" | "commit" | "tag")) {
                continue;
            }
            let Some(size) = size.and_then(|s| s.parse::<usize>().ok()).filter(|s| *s <= rest.len()) else {
                break;
            };
            if size <= max_bytes && kind == Some("blob") {
                found.insert(path.as_str(), rest[..size].to_vec());
            }
            rest = rest.get(size + 1..).unwrap_or_default();
        }
        Ok(paths.iter().map(|p| found.remove(p.as_str())).collect())
    }

    /// The files git tracks or sees (untracked and not ignored) below `scopes` of `dir` (paths
    /// relative to `dir`; the empty path is all of it), that `keep` accepts and that exist,
    /// relative to `dir`. One git process; a listing no number of untracked files can cut short.
    pub(crate) fn visible_files(
        &self,
        dir: &Path,
        scopes: &[String],
        keep: &dyn Fn(&Path) -> bool,
    ) -> Result<Vec<PathBuf>, WorkTreeError> {
        self.repo()?;
        let pathspecs: Vec<String> = scopes
            .iter()
            .map(|scope| if scope.is_empty() { ".".to_string() } else { format!(":(literal){scope}") })
            .collect();
        let mut args = vec!["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"];
        args.extend(pathspecs.iter().map(String::as_str));
        let out = run_git(dir, &args, None, None)?;
        if !out.status.success() {
            return Err(git_failure(&args, &out));
        }
        let mut files: Vec<PathBuf> = split_z(&out.stdout).map(path_from_git).filter(|f| keep(f)).collect();
        // Only the kept ones are looked up: one stat per file would cost as much as git's listing.
        files.retain(|file| fs::symlink_metadata(dir.join(file)).is_ok());
        files.sort();
        files.dedup();
        Ok(files)
    }

    /// The tree `git add -A` would stage now, written through a copy of the user's index (its
    /// stat data spares rehashing unchanged files).
    fn tree_id_in(&self, repo: &Repo) -> Result<String, WorkTreeError> {
        let index = TempIndex::create(repo, true)?;
        self.git(&["add", "-A"], Some(&index), None)?;
        let out = self.git(&["write-tree"], Some(&index), None)?;
        Ok(String::from_utf8_lossy(trim_newline(&out)).into_owned())
    }

    /// HEAD and what differs from it, as `git status --porcelain=v2` lists it in `out`, with
    /// the content of each listed file as it is now. Ignored files (`!`) do not count.
    fn status_fingerprint(&self, out: &[u8]) -> String {
        let mut head: &[u8] = b"";
        let mut entries: Vec<(&[u8], Vec<u8>)> = Vec::new();
        let mut budget = MAX_HASHED_TOTAL;
        for record in split_z(out) {
            if let Some(oid) = record.strip_prefix(b"# branch.oid ") {
                head = oid;
                continue;
            }
            // Fields before the path: ordinary changes, unmerged paths, untracked files.
            let before_path = match record.first() {
                Some(b'1') => 8,
                Some(b'u') => 10,
                Some(b'?') => 1,
                _ => continue,
            };
            let fields: Vec<&[u8]> = record.splitn(before_path + 1, |b| *b == b' ').collect();
            let Some(path) = fields.get(before_path) else { continue };
            // A submodule's own changes are not this tree's; its flags and ids stand for it.
            let content = if fields.get(2).is_some_and(|sub| sub.starts_with(b"S")) {
                record.to_vec()
            } else {
                content_id(&self.root.join(path_from_git(path)), &mut budget)
            };
            entries.push((path, content));
        }
        // By path: staging a file moves it from git's untracked list to its tracked one.
        entries.sort();
        let mut hasher = Sha256::new();
        hash_entry(&mut hasher, b"HEAD", head);
        for (path, content) in &entries {
            hash_entry(&mut hasher, path, content);
        }
        format!("{STATUS}{}", hex(&hasher.finalize()))
    }

    fn repo(&self) -> Result<&Repo, WorkTreeError> {
        self.repo.as_ref().ok_or_else(|| WorkTreeError::NotGit { dir: self.root.clone() })
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
        Err(git_failure(args, &out))
    }
}

fn git_failure(args: &[&str], out: &std::process::Output) -> WorkTreeError {
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    WorkTreeError::Git {
        command: format!("git {}", args.join(" ")),
        stderr: if stderr.is_empty() { format!("{} with no message", out.status) } else { stderr },
    }
}

/// What a file of the working tree holds now: its content's digest (and executable bit), a
/// symlink's target, `missing`, or, past the hashing budget and for anything else, its stamp.
fn content_id(path: &Path, budget: &mut u64) -> Vec<u8> {
    let Ok(meta) = fs::symlink_metadata(path) else { return b"missing".to_vec() };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path).unwrap_or_default();
        return [b"link:".as_slice(), target.as_os_str().as_encoded_bytes()].concat();
    }
    if meta.is_file()
        && meta.len() <= MAX_HASHED_FILE.min(*budget)
        && let Ok(bytes) = bounded_read::read(path, MAX_HASHED_FILE)
    {
        *budget -= bytes.len() as u64;
        let mut id = b"sha256:".to_vec();
        id.extend_from_slice(&Sha256::digest(&bytes));
        id.push(u8::from(is_executable(&meta)));
        return id;
    }
    [b"stat:".as_slice(), &file_stamp(&meta)].concat()
}

#[cfg(unix)]
fn is_executable(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &fs::Metadata) -> bool {
    false
}

/// The walk's fingerprint of `root`: each file's relative path, length, modification time and
/// mode, in path order. Unreadable directories count as such, not as errors.
fn walk_digest(root: &Path, limit: usize) -> Result<String, WorkTreeError> {
    let meta = fs::metadata(root).map_err(io_error(format!("could not read {}", root.display())))?;
    if !meta.is_dir() {
        let e = io::Error::new(io::ErrorKind::NotADirectory, "not a directory");
        return Err(io_error(format!("could not walk {}", root.display()))(e));
    }
    let walked = walk::walk(root, &[String::new()], limit);
    let mut hasher = Sha256::new();
    for entry in &walked.files {
        hash_entry(&mut hasher, entry.path.as_os_str().as_encoded_bytes(), &file_stamp(&entry.meta));
    }
    for dir in &walked.unreadable {
        hash_entry(&mut hasher, dir.as_os_str().as_encoded_bytes(), b"unreadable");
    }
    let prefix = if walked.complete { WALK } else { WALK_TOO_LARGE };
    Ok(format!("{prefix}{}", hex(&hasher.finalize())))
}

fn hash_entry(hasher: &mut Sha256, path: &[u8], stamp: &[u8]) {
    // Length-prefixed, so no path and stamp can run into the next.
    hasher.update((path.len() as u64).to_le_bytes());
    hasher.update(path);
    hasher.update((stamp.len() as u64).to_le_bytes());
    hasher.update(stamp);
}

fn file_stamp(meta: &fs::Metadata) -> Vec<u8> {
    let mut stamp = Vec::with_capacity(32);
    stamp.extend(meta.len().to_le_bytes());
    let mtime =
        meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
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
    use testing::{git, no_temp_index_left, read, repo, try_git, user_state, write};

    #[test]
    #[cfg(unix)]
    fn the_projects_git_configuration_runs_nothing_inside_the_hook() {
        use std::os::unix::fs::PermissionsExt;
        let dir = repo(&[("a.txt", "a")]);
        let marker = dir.path().join("ran");
        let script = dir.path().join("payload.sh");
        std::fs::write(&script, format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\nexit 0\n", marker.display()))
            .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let hooks = dir.path().join("hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        for hook in ["reference-transaction", "post-index-change", "pre-commit"] {
            std::fs::copy(&script, hooks.join(hook)).unwrap();
        }
        git(dir.path(), &["config", "core.fsmonitor", &script.display().to_string()]);
        git(dir.path(), &["config", "core.hooksPath", &hooks.display().to_string()]);
        // The payload is live: git run as the user runs it.
        git(dir.path(), &["update-ref", "refs/probe", "HEAD"]);
        assert!(marker.exists(), "the test's hook did not run for plain git, so it proves nothing");
        std::fs::remove_file(&marker).unwrap();

        let tree = WorkTree::open(dir.path());
        write(dir.path(), "a.txt", "changed");
        tree.fingerprint().unwrap();
        tree.tree_id().unwrap();
        tree.visible_files(dir.path(), &[String::new()], &|_| true).unwrap();
        tree.checkpoint("loop-1", 1).unwrap();
        tree.checkpoints("loop-1").unwrap();
        assert!(
            !marker.exists(),
            "the project's git configuration ran: {}",
            std::fs::read_to_string(&marker).unwrap()
        );
    }

    #[test]
    fn fingerprint_follows_tracked_and_untracked_files_but_not_ignored_ones() {
        let dir = repo(&[("a.txt", "a"), ("sub/b.txt", "b")]);
        let tree = WorkTree::open(&dir.path().join("sub"));
        assert!(tree.is_git());
        assert_eq!(tree.root().canonicalize().unwrap(), dir.path().canonicalize().unwrap());

        let start = tree.fingerprint().unwrap();
        let start_tree = tree.tree_id().unwrap();
        assert!(start.starts_with(STATUS), "{start}");
        assert_eq!(start_tree.len(), 40);
        assert_eq!(start_tree, git(dir.path(), &["rev-parse", "HEAD^{tree}"]).trim(), "the committed tree");
        assert_eq!(tree.fingerprint().unwrap(), start);

        write(dir.path(), "build.log", "noise");
        write(dir.path(), "ignored/cache.bin", "noise");
        assert_eq!(tree.fingerprint().unwrap(), start, "ignored files do not count");
        assert_eq!(tree.tree_id().unwrap(), start_tree);

        write(dir.path(), "sub/b.txt", "b2");
        let edited = tree.fingerprint().unwrap();
        let edited_tree = tree.tree_id().unwrap();
        assert_ne!(edited, start);
        write(dir.path(), "sub/b.txt", "b3");
        assert_ne!(tree.fingerprint().unwrap(), edited, "a second edit of a changed file");
        write(dir.path(), "sub/b.txt", "b2");
        assert_eq!(tree.fingerprint().unwrap(), edited, "the same content, the same fingerprint");
        write(dir.path(), "new.txt", "n");
        let added = tree.fingerprint().unwrap();
        let added_tree = tree.tree_id().unwrap();
        assert_ne!(added, edited);
        git(dir.path(), &["add", "new.txt"]);
        assert_eq!(tree.fingerprint().unwrap(), added, "staging changes no content");

        assert_eq!(tree.changed_files(&start_tree, &added_tree).unwrap(), ["new.txt", "sub/b.txt"]);
        assert_eq!(tree.changed_files(&edited_tree, &added_tree).unwrap(), ["new.txt"]);
        assert!(tree.changed_files(&added_tree, &added_tree).unwrap().is_empty());
        assert!(!is_approximate(&added));
        git(dir.path(), &["commit", "-qam", "next"]);
        assert_ne!(tree.fingerprint().unwrap(), added, "a commit moves HEAD");
        assert!(no_temp_index_left(dir.path()));
    }

    /// Earlier versions kept their temporary indexes in the git directory, where a killed run
    /// left them for good; the next fingerprint sweeps the stale ones. Ours now live in the
    /// system's temporary directory.
    #[test]
    fn temporary_indexes_left_in_the_git_directory_are_swept() {
        let dir = repo(&[("a.txt", "a")]);
        let path = dir.path();
        let stale = path.join(".git/for-loop-index-killed");
        write(&stale, "index", "x");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3_600);
        fs::File::open(&stale).unwrap().set_modified(old).unwrap();
        let tree = WorkTree::open(path);
        tree.fingerprint().unwrap();
        tree.tree_id().unwrap();
        tree.checkpoint("L", 1).unwrap();
        assert!(no_temp_index_left(path));
    }

    /// Where git cannot run in what looks like a repository (a broken one, a foreign owner's),
    /// the fingerprint is a walk rather than none.
    #[test]
    fn a_repository_git_cannot_read_is_walked() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".git/HEAD", "not a ref\n");
        fs::create_dir_all(dir.path().join(".git/objects")).unwrap();
        write(dir.path(), "a.txt", "a");
        let tree = WorkTree::open(dir.path());
        assert!(tree.is_git());
        let walked = tree.fingerprint().unwrap();
        assert!(walked.starts_with(WALK), "{walked}");
        write(dir.path(), "a.txt", "changed");
        assert_ne!(tree.fingerprint().unwrap(), walked);
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
        tree.fingerprint().unwrap();
        let snapshot = tree.tree_id().unwrap();
        let commit = tree.checkpoint("L1", 1).unwrap();

        assert_eq!(user_state(path), before);
        assert_eq!(read(path, "a.txt").as_deref(), Some("staged then edited"));
        assert_eq!(git(path, &["rev-parse", &format!("{commit}^{{tree}}")]).trim(), snapshot);
        assert_eq!(git(path, &["show", &format!("{commit}:a.txt")]), "staged then edited");
        assert_eq!(git(path, &["show", &format!("{commit}:untracked.txt")]), "u");
        assert!(no_temp_index_left(path));
    }

    #[test]
    fn paths_with_spaces_unicode_and_newlines() {
        let names = ["with space.txt", "ünïcödé/ñ.txt", "new\nline.txt", "-dash.txt", "quote\"d.txt"];
        let files: Vec<(&str, &str)> = names.iter().map(|n| (*n, "v1")).collect();
        let dir = repo(&files);
        let path = dir.path();
        let tree = WorkTree::open(path);
        let start = tree.fingerprint().unwrap();
        let start_tree = tree.tree_id().unwrap();
        tree.checkpoint("L", 1).unwrap();

        write(path, "new\nline.txt", "v2");
        fs::remove_file(path.join("ünïcödé/ñ.txt")).unwrap();
        write(path, "another\nnew file.txt", "added");
        assert_ne!(tree.fingerprint().unwrap(), start);
        let now = tree.tree_id().unwrap();
        assert_eq!(
            tree.changed_files(&start_tree, &now).unwrap(),
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
        // The root directory is an entry too.
        assert!(walk_digest(dir.path(), 4).unwrap().starts_with("walk:"));
        let cut = walk_digest(dir.path(), 3).unwrap();
        assert!(cut.starts_with("walk-too-large:") && is_approximate(&cut), "{cut}");
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
