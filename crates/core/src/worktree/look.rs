//! One look at a git work tree, shared by everything a stop asks of the tree at one moment: the
//! stall fingerprint ([`super::WorkTree::fingerprint_in`]) and the oracle's search for protected
//! and runner files ([`TreeLook::files_below`]).
//!
//! It takes two git processes, started together after one reading of the filter settings
//! ([`super::git::filter_overrides`]): `git status` (porcelain v2, untracked files one by one,
//! ignored ones too) and `git ls-files --cached`, which only reads the index. Git's
//! index and its stat cache do the work a walk of our own would repeat: what git tracks or sees
//! comes from them, and only directories git reports as ignored as a whole are walked, by the
//! shared walk and its rules ([`crate::support::read::walk`]), because an ignore line the model wrote
//! must not hide an added protected file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;

use super::git::{filter_overrides, path_from_git, run_git_filtered, split_z};
use super::{WorkTree, WorkTreeError, git_failure};
use crate::support::read::walk;

/// `git status` as the fingerprint reads it. `--no-optional-locks`: status would otherwise
/// refresh and rewrite the user's index.
pub(super) const STATUS_ARGS: &[&str] = &[
    "--no-optional-locks",
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--no-ahead-behind",
    "--untracked-files=all",
    "--no-renames",
    "--ignore-submodules=dirty",
];

/// What git said about the work tree at one moment.
#[derive(Debug, Clone)]
pub(crate) struct TreeLook {
    /// The work tree's top level.
    root: PathBuf,
    /// `git status` output, with the ignored entries (`!`), which the fingerprint passes over.
    pub(super) status: Vec<u8>,
    /// Every path in the index (`git ls-files --cached`), and the index file it was read from.
    tracked: Arc<Vec<String>>,
    index: Option<[i64; 7]>,
    /// Files git tracks or sees that exist, relative to the top level, `/`-separated.
    visible: Vec<String>,
    /// Ignored files git lists one by one.
    ignored_files: Vec<String>,
    /// Directories git reports as ignored as a whole (without their trailing `/`).
    ignored_dirs: Vec<String>,
}

/// What [`TreeLook::files_below`] found.
#[derive(Debug, Default)]
pub(crate) struct Below {
    /// Relative to the directory asked about, `/`-separated, sorted.
    pub(crate) files: Vec<String>,
    /// False when more than the bound of entries were looked at: files git does not see may be
    /// missing (every file git tracks or sees is there whatever the bound).
    pub(crate) complete: bool,
}

impl WorkTree {
    /// One look at the tree, or `None` outside git or where git cannot run.
    pub(crate) fn look(&self) -> Option<TreeLook> {
        self.look_again(None)
    }

    /// A look at the tree now that reuses `earlier`'s list of the index while the index file is
    /// the same file, unwritten since (its device, inode, size, modification and change times:
    /// git replaces the index by renaming a new file over it, and no process can set a file's
    /// change time back). `git status` runs every time.
    pub(crate) fn look_again(&self, earlier: Option<&TreeLook>) -> Option<TreeLook> {
        let repo = self.repo.as_ref()?;
        let stamp = index_stamp(&repo.git_dir.join("index"));
        let mut status_args = STATUS_ARGS.to_vec();
        status_args.push("--ignored=matching");
        let reused = earlier.filter(|e| stamp.is_some() && e.index == stamp).map(|e| Arc::clone(&e.tracked));
        let overrides = filter_overrides(&self.root);
        let (status, tracked) = thread::scope(|scope| {
            let listing = reused
                .is_none()
                .then(|| scope.spawn(|| self.git_stdout(&["ls-files", "-z", "--cached"], &overrides)));
            let status = self.git_stdout(&status_args, &overrides);
            let tracked = match (reused, listing) {
                (Some(tracked), _) => Some(tracked),
                (None, Some(listing)) => listing
                    .join()
                    .ok()
                    .and_then(Result::ok)
                    .map(|out| Arc::new(split_z(&out).map(text).collect())),
                (None, None) => None,
            };
            (status, tracked)
        });
        Some(TreeLook::read(self.root.clone(), status.ok()?, tracked?, stamp))
    }

    fn git_stdout(&self, args: &[&str], overrides: &[String]) -> Result<Vec<u8>, WorkTreeError> {
        let out = run_git_filtered(&self.root, args, None, None, overrides)?;
        if out.status.success() { Ok(out.stdout) } else { Err(git_failure(args, &out)) }
    }
}

/// What identifies one version of the index file, where the platform says.
#[cfg(unix)]
fn index_stamp(index: &Path) -> Option<[i64; 7]> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(index).ok()?;
    let wide = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    Some([
        wide(meta.dev()),
        wide(meta.ino()),
        wide(meta.size()),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ])
}

#[cfg(not(unix))]
fn index_stamp(_index: &Path) -> Option<[i64; 7]> {
    None
}

impl TreeLook {
    fn read(root: PathBuf, status: Vec<u8>, tracked: Arc<Vec<String>>, index: Option<[i64; 7]>) -> TreeLook {
        let mut deleted = BTreeSet::new();
        let (mut visible, mut ignored_files, mut ignored_dirs) = (Vec::new(), Vec::new(), Vec::new());
        for record in split_z(&status) {
            match record {
                [b'1', b' ', _, b'D', ..] => {
                    // `1 XY sub mH mI mW hH hI path`: tracked, and gone from the work tree.
                    if let Some(path) = record.splitn(9, |b| *b == b' ').nth(8) {
                        deleted.insert(text(path));
                    }
                }
                [b'?', b' ', path @ ..] => visible.push(text(path)),
                [b'!', b' ', path @ ..] => match path.strip_suffix(b"/") {
                    Some(dir) => ignored_dirs.push(text(dir)),
                    None => ignored_files.push(text(path)),
                },
                _ => {}
            }
        }
        visible.extend(tracked.iter().filter(|path| !deleted.contains(*path)).cloned());
        visible.sort();
        visible.dedup();
        TreeLook { root, status, tracked, index, visible, ignored_files, ignored_dirs }
    }

    /// The files below `scopes` of `dir` (paths relative to `dir`; the empty path is all of it)
    /// that `keep` accepts: every file git tracks or sees, and the ignored files the shared walk
    /// would find there. `None` when `dir` is not inside the work tree.
    pub(crate) fn files_below(
        &self,
        dir: &Path,
        scopes: &[String],
        limit: usize,
        keep: impl Fn(&str) -> bool,
    ) -> Option<Below> {
        let dir = std::fs::canonicalize(dir).ok()?;
        let prefix = slash(dir.strip_prefix(&self.root).ok()?);
        let relative = |path: &str| -> Option<String> {
            if prefix.is_empty() {
                return Some(path.to_string());
            }
            path.strip_prefix(prefix.as_str())?.strip_prefix('/').map(str::to_string)
        };
        let mut seen = 0usize;
        let mut files = Vec::new();
        let seen_files =
            self.visible.iter().map(|p| (p, false)).chain(self.ignored_files.iter().map(|p| (p, true)));
        for (path, ignored) in seen_files {
            let Some(path) = relative(path) else { continue };
            let Some(scope) = scopes.iter().find(|scope| is_below(&path, scope)) else { continue };
            if ignored && !walk_reaches(scope, parent(&path)) {
                continue;
            }
            seen += 1;
            if keep(&path) {
                files.push(path);
            }
        }
        let mut complete = seen <= limit;
        for ignored in self.ignored_dirs.iter().filter_map(|d| relative(d)) {
            for scope in scopes {
                // The part of both the walk would go through: the ignored directory below the
                // scope, or the scope inside the ignored directory.
                let start = if is_below(&ignored, scope) && walk_reaches(scope, &ignored) {
                    ignored.clone()
                } else if is_below(scope, &ignored) && !scope.is_empty() {
                    scope.clone()
                } else {
                    continue;
                };
                let walked = walk::paths(&dir, &[start], limit.saturating_sub(seen), |p| keep(&slash(p)));
                seen += walked.files.len();
                complete &= walked.complete;
                files.extend(walked.files.iter().map(|p| slash(p)));
            }
        }
        files.sort();
        files.dedup();
        Some(Below { files, complete: complete && seen <= limit })
    }
}

/// Whether `path` is `scope` or below it (every path is below the empty scope).
fn is_below(path: &str, scope: &str) -> bool {
    scope.is_empty() || path == scope || path.strip_prefix(scope).is_some_and(|rest| rest.starts_with('/'))
}

/// Whether the shared walk of `scope` goes into directory `dir` (below it): no directory on
/// the way is one the walk passes over (hidden, dependencies, build output).
fn walk_reaches(scope: &str, dir: &str) -> bool {
    let below = if scope.is_empty() { dir } else { dir.strip_prefix(scope).unwrap_or(dir) };
    below.split('/').filter(|part| !part.is_empty()).all(|part| !walk::is_skipped_name(part.as_bytes()))
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

fn text(bytes: &[u8]) -> String {
    slash(&path_from_git(bytes))
}

fn slash(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worktree::testing::{git, repo, write};

    fn below(dir: &Path, scopes: &[&str], limit: usize) -> Below {
        let look = WorkTree::open(dir).look().unwrap();
        let scopes: Vec<String> = scopes.iter().map(ToString::to_string).collect();
        look.files_below(dir, &scopes, limit, |_| true).unwrap()
    }

    /// What the shared walk and git's listing found together before, from one look: tracked and
    /// untracked files, ignored files and ignored directories the walk would enter, and not
    /// what the walk passes over (hidden and dependency directories) nor a deleted tracked file.
    #[test]
    fn the_look_finds_what_the_walk_and_gits_listing_found() {
        let dir = repo(&[("tests/a.rs", "a"), ("tests/gone.rs", "g"), (".hidden/tracked.rs", "t")]);
        let cwd = dir.path();
        write(cwd, ".gitignore", "tests/ignored.rs\ntests/built/\n.cache/\nnode_modules/\n");
        write(cwd, "tests/new.rs", "n");
        write(cwd, "tests/ignored.rs", "i");
        write(cwd, "tests/built/deep/x.rs", "x");
        write(cwd, ".cache/tests/c.rs", "c");
        write(cwd, "node_modules/p/test.js", "p");
        std::fs::remove_file(cwd.join("tests/gone.rs")).unwrap();
        let found = below(cwd, &[""], 100);
        assert!(found.complete);
        assert_eq!(
            found.files,
            [
                ".gitignore",
                ".hidden/tracked.rs",
                "tests/a.rs",
                "tests/built/deep/x.rs",
                "tests/ignored.rs",
                "tests/new.rs"
            ]
        );
        assert_eq!(below(cwd, &["tests/built"], 100).files, ["tests/built/deep/x.rs"]);
        assert_eq!(
            below(cwd, &[".cache"], 100).files,
            [".cache/tests/c.rs"],
            "a scope is walked whatever its name"
        );
    }

    /// Paths are relative to the directory asked about, which may be below the top level.
    #[test]
    fn a_loop_below_the_top_level_sees_its_own_paths() {
        let dir = repo(&[("app/tests/a.rs", "a"), ("other/b.rs", "b")]);
        write(dir.path(), "app/tests/new.rs", "n");
        assert_eq!(below(&dir.path().join("app"), &["tests"], 100).files, ["tests/a.rs", "tests/new.rs"]);
    }

    /// More entries than the bound: the look says it was cut, and still lists every file git
    /// sees.
    #[test]
    fn a_look_past_its_bound_says_so_and_still_lists_what_git_sees() {
        let dir = repo(&[("a.txt", "a")]);
        for n in 0..20 {
            write(dir.path(), &format!("junk/{n}.txt"), "j");
        }
        let found = below(dir.path(), &[""], 10);
        assert!(!found.complete);
        assert_eq!(found.files.len(), 22, "a.txt, .gitignore and the junk");
    }

    /// A second look reuses the first's list of the index only while the index is the same file:
    /// a file staged (or committed) in between is seen, though it differs from nothing.
    #[test]
    fn a_second_look_sees_what_was_staged_or_committed_in_between() {
        let dir = repo(&[("a.txt", "a")]);
        let tree = WorkTree::open(dir.path());
        let first = tree.look().unwrap();
        let again = tree.look_again(Some(&first)).unwrap();
        assert_eq!(again.tracked, first.tracked, "unchanged index, same list");
        write(dir.path(), "tests/new.rs", "n");
        git(dir.path(), &["add", "tests/new.rs"]);
        git(dir.path(), &["commit", "-qm", "new"]);
        let after = tree.look_again(Some(&again)).unwrap();
        assert!(after.tracked.contains(&"tests/new.rs".to_string()), "{:?}", after.tracked);
        let found = after.files_below(dir.path(), &["tests".to_string()], 100, |_| true).unwrap();
        assert_eq!(found.files, ["tests/new.rs"]);
    }

    /// The fingerprint from a shared look is the one a look of its own gives.
    #[test]
    fn the_fingerprint_from_a_look_is_the_fingerprint() {
        let dir = repo(&[("a.txt", "a")]);
        write(dir.path(), "b.txt", "b");
        write(dir.path(), ".gitignore", "c.txt\n");
        write(dir.path(), "c.txt", "c");
        git(dir.path(), &["add", ".gitignore"]);
        let tree = WorkTree::open(dir.path());
        assert_eq!(tree.fingerprint_in(tree.look().as_ref()).unwrap(), tree.fingerprint().unwrap());
    }
}
