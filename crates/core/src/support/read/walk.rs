//! The one walk of a project's files, shared by the oracle (which files match `--protect`) and
//! the working tree outside git (its fingerprint).
//!
//! It skips what is not the project's own work: the directories in [`SKIP_DIRS`] and hidden
//! directories, which hold dependencies, build output, tool caches and version control data,
//! and change whenever verify runs. A directory a caller names as a scope is walked even if
//! the rule would skip it (`--protect ".github/**"`). Ignore files (`.gitignore`, `.ignore`)
//! are not read: the model can write them, and one added line would hide an added test file
//! from the oracle. In a git work tree the oracle adds git's own list of the files it tracks and
//! sees ([`crate::worktree::WorkTree::visible_files`]), which no walk bound can cut short.
//!
//! A walk stops after [`MAX_ENTRIES`] files and directories, in name order, and says so: a
//! cut walk is never taken as the whole tree. Symlinks are listed, not followed.

use std::ffi::OsStr;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

/// Files and directories looked at in one walk; beyond this it is cut and marked incomplete.
pub(crate) const MAX_ENTRIES: usize = 50_000;

/// Directories never walked (below a scope): dependencies, build output, caches, other version
/// control systems. Hidden directories are skipped too.
const SKIP_DIRS: &[&str] = &["target", "node_modules", "__pycache__", "venv", "vendor", "bower_components"];

/// A file the walk found.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Relative to the walk's root.
    pub(crate) path: PathBuf,
    /// Its own metadata, not a symlink's target's.
    pub(crate) meta: Metadata,
}

/// What a walk found.
#[derive(Debug, Default)]
pub(crate) struct Walked {
    /// Every file (anything but a directory), in path order.
    pub(crate) files: Vec<Entry>,
    /// Directories that could not be read, relative to the root.
    pub(crate) unreadable: Vec<PathBuf>,
    /// False when the walk was cut at its bound: files may be missing.
    pub(crate) complete: bool,
}

/// Walks `scopes` (relative to `root`; the empty path is all of it) for at most `limit` entries.
/// A scope that does not exist adds nothing; one that is a file is that file.
pub(crate) fn walk(root: &Path, scopes: &[String], limit: usize) -> Walked {
    let mut files = Vec::new();
    let (complete, unreadable) = visit(root, scopes, limit, |entry, path| {
        // One stat per file: the fingerprint outside git reads each file's metadata.
        if let Ok(meta) = entry.metadata() {
            files.push(Entry { path: path.to_path_buf(), meta });
        }
    });
    Walked { files, unreadable, complete }
}

/// The paths [`walk`] would find that `keep` accepts, without reading any file's metadata: a
/// search by name (the runner files behind a check) costs one `getdents` per directory, not one
/// `stat` per file.
pub(crate) fn paths(root: &Path, scopes: &[String], limit: usize, keep: impl Fn(&Path) -> bool) -> Paths {
    let mut files = Vec::new();
    let (complete, _) = visit(root, scopes, limit, |_, path| {
        if keep(path) {
            files.push(path.to_path_buf());
        }
    });
    Paths { files, complete }
}

/// What [`paths`] found.
#[derive(Debug, Default)]
pub(crate) struct Paths {
    /// The kept files, relative to the root, in path order.
    pub(crate) files: Vec<PathBuf>,
    /// False when the walk was cut at its bound: files may be missing.
    pub(crate) complete: bool,
}

/// Walks `scopes` as [`walk`] describes, calling `found` with every file (anything but a
/// directory) and its path relative to `root`; returns whether the walk was complete and the
/// directories it could not read.
fn visit(
    root: &Path,
    scopes: &[String],
    limit: usize,
    mut found: impl FnMut(&ignore::DirEntry, &Path),
) -> (bool, Vec<PathBuf>) {
    let mut unreadable = Vec::new();
    let mut seen = 0usize;
    for scope in scopes {
        let start = if scope.is_empty() { root.to_path_buf() } else { root.join(scope) };
        let walker = ignore::WalkBuilder::new(&start)
            .standard_filters(false)
            .follow_links(false)
            .sort_by_file_name(OsStr::cmp)
            .filter_entry(|entry| entry.depth() == 0 || !skipped(entry))
            .build();
        for entry in walker {
            seen += 1;
            if seen > limit {
                return (false, unreadable);
            }
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    if let Some(path) = unreadable_path(&error) {
                        unreadable.extend(path.strip_prefix(root).ok().map(Path::to_path_buf));
                    }
                    continue;
                }
            };
            if entry.file_type().is_some_and(|kind| kind.is_dir()) {
                continue;
            }
            if let Ok(path) = entry.path().strip_prefix(root) {
                found(&entry, path);
            }
        }
    }
    (true, unreadable)
}

fn skipped(entry: &ignore::DirEntry) -> bool {
    entry.file_type().is_some_and(|kind| kind.is_dir())
        && is_skipped_name(entry.file_name().as_encoded_bytes())
}

/// Whether a directory of this name is passed over below a scope: hidden, or in [`SKIP_DIRS`].
pub(crate) fn is_skipped_name(name: &[u8]) -> bool {
    name.starts_with(b".") || SKIP_DIRS.iter().any(|skip| skip.as_bytes() == name)
}

fn unreadable_path(error: &ignore::Error) -> Option<&Path> {
    match error {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            unreadable_path(err)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for file in files {
            let path = dir.path().join(file);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, file).unwrap();
        }
        dir
    }

    fn names(walked: &Walked) -> Vec<String> {
        walked.files.iter().map(|e| e.path.to_string_lossy().replace('\\', "/")).collect()
    }

    #[test]
    fn walks_in_name_order_skipping_dependencies_build_output_and_hidden_directories() {
        let dir = tree(&[
            "b.txt",
            "a/z.txt",
            "a/y/x.txt",
            ".env",
            ".git/config",
            ".venv/lib/x.py",
            "target/debug/out",
            "node_modules/p/index.js",
            "src/__pycache__/m.pyc",
            "src/m.py",
        ]);
        let walked = walk(dir.path(), &[String::new()], 100);
        assert!(walked.complete);
        assert_eq!(names(&walked), [".env", "a/y/x.txt", "a/z.txt", "b.txt", "src/m.py"]);
    }

    #[test]
    fn a_scope_is_walked_even_where_the_rule_would_skip_it() {
        let dir = tree(&[".github/workflows/ci.yml", "target/golden/out.txt", "target/debug/x", "a.txt"]);
        let scopes = [".github".to_string(), "target/golden".to_string(), "missing".to_string()];
        assert_eq!(
            names(&walk(dir.path(), &scopes, 100)),
            [".github/workflows/ci.yml", "target/golden/out.txt"]
        );
        assert_eq!(names(&walk(dir.path(), &["a.txt".to_string()], 100)), ["a.txt"]);
    }

    #[test]
    fn ignore_files_are_not_read() {
        let dir = tree(&[".gitignore", "tests/hidden_by_gitignore.rs", "tests/.ignore"]);
        fs::write(dir.path().join(".gitignore"), "tests/hidden_by_gitignore.rs\n").unwrap();
        fs::write(dir.path().join("tests/.ignore"), "*\n").unwrap();
        let walked = walk(dir.path(), &["tests".to_string()], 100);
        assert_eq!(names(&walked), ["tests/.ignore", "tests/hidden_by_gitignore.rs"]);
    }

    #[test]
    fn a_walk_past_its_bound_says_it_is_incomplete() {
        let dir = tree(&["a", "b", "c"]);
        // The root counts as an entry.
        assert!(walk(dir.path(), &[String::new()], 4).complete);
        let cut = walk(dir.path(), &[String::new()], 3);
        assert!(!cut.complete);
        assert_eq!(names(&cut), ["a", "b"]);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_listed_not_followed() {
        let dir = tree(&["real/file.txt"]);
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let walked = walk(dir.path(), &[String::new()], 100);
        assert_eq!(names(&walked), ["link", "real/file.txt"]);
        assert!(walked.files[0].meta.file_type().is_symlink());
    }
}
