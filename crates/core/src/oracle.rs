//! The oracle: the verify command and the files it stands on, fingerprinted when the loop starts.
//!
//! A model that cannot make the check pass can make the check easier: replace `check.sh` with
//! `exit 0`, delete a failing test, rewrite the `test` script in package.json. The loop records a
//! digest of every file the verify command runs and of every `--protect` path at start, and
//! at each stop a passing verify counts only while they are all unchanged. Restoring them makes
//! passes count again. This detects and refuses the common ways an oracle gets gamed; it is not a
//! sandbox against a process running as the same user that sets out to forge it.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::bounded_read;
use crate::digest::hex;

/// Files examined per walk of the project for `--protect` globs; beyond this a walk stops.
const MAX_WALK_FILES: usize = 50_000;
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
/// Directories never walked for globs: build output and dependencies, not sources.
const SKIP_DIRS: &[&str] = &[".git", "target", "node_modules", ".venv", "__pycache__"];

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ChangeKind {
    Modified,
    Deleted,
    Added,
}

/// One oracle file that is not as it was at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OracleChange {
    pub path: String,
    pub kind: ChangeKind,
}

impl Oracle {
    /// Fingerprints the files `verify` runs and the `protect` paths, under `cwd`.
    pub(crate) fn capture(cwd: &Path, verify: Option<&str>, protect: &[String]) -> Oracle {
        let mut paths: Vec<String> = verify.map(|v| files_run_by(cwd, v)).unwrap_or_default();
        paths.extend(matching_files(cwd, protect));
        paths.sort();
        paths.dedup();
        let files = paths.into_iter().map(|p| (digest(&cwd.join(&p)), p)).map(|(d, p)| (p, d)).collect();
        Oracle { protect: protect.to_vec(), files }
    }

    /// The oracle files that differ from the start, in path order.
    pub(crate) fn changes(&self, cwd: &Path) -> Vec<OracleChange> {
        let mut changes: Vec<OracleChange> = self
            .files
            .iter()
            .filter_map(|(path, was)| {
                let now = digest(&cwd.join(path));
                let kind = match (was.as_str(), now.as_str()) {
                    (a, b) if a == b => return None,
                    (_, MISSING) => ChangeKind::Deleted,
                    (MISSING, _) => ChangeKind::Added,
                    _ => ChangeKind::Modified,
                };
                Some(OracleChange { path: path.clone(), kind })
            })
            .collect();
        for path in matching_files(cwd, &self.protect) {
            if !self.files.contains_key(&path) {
                changes.push(OracleChange { path, kind: ChangeKind::Added });
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        changes
    }

    /// True when `path` (absolute, or relative to `cwd`) is an oracle file or matches a protected
    /// path or glob.
    pub(crate) fn covers(&self, cwd: &Path, path: &Path) -> bool {
        let Some(relative) = relative_to(cwd, path) else { return false };
        self.files.contains_key(&relative)
            || self.protect.iter().any(|pattern| glob_matches(pattern, &relative))
    }

    /// Copies the oracle files as they are now (at start) into `dir`, so a changed one can be
    /// restored even outside git. Skipped when they are too large to keep.
    pub(crate) fn save_originals(&self, cwd: &Path, dir: &Path) -> io::Result<bool> {
        let present: Vec<&String> =
            self.files.iter().filter(|(_, d)| d.starts_with("sha256:")).map(|(p, _)| p).collect();
        let total: u64 = present.iter().filter_map(|p| fs::metadata(cwd.join(p)).ok()).map(|m| m.len()).sum();
        if total > MAX_SAVED_BYTES || present.is_empty() {
            return Ok(false);
        }
        for path in present {
            let target = dir.join(path);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent)?;
            }
            // Read like every oracle file: a FIFO put there since the fingerprint cannot block.
            fs::write(target, bounded_read::read(&cwd.join(path), MAX_SAVED_BYTES)?)?;
        }
        Ok(true)
    }
}

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

/// `path` relative to `cwd` with `/` separators, if it is inside `cwd`. Purely lexical: `..`
/// components are resolved without touching the disk, so a deleted file still maps.
pub(crate) fn relative_to(cwd: &Path, path: &Path) -> Option<String> {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { cwd.join(path) };
    let mut parts: Vec<String> = Vec::new();
    let base: Vec<String> = normal_components(cwd)?;
    for component in normal_components(&absolute)? {
        parts.push(component);
    }
    if parts.len() <= base.len() || parts[..base.len()] != base[..] {
        return None;
    }
    Some(parts[base.len()..].join("/"))
}

fn normal_components(path: &Path) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::Normal(part) => out.push(part.to_string_lossy().into_owned()),
        }
    }
    Some(out)
}

/// The files under `cwd` matching any of `patterns` (relative paths or globs with `*`, `?` and
/// `**`; a directory stands for everything below it).
pub(crate) fn matching_files(cwd: &Path, patterns: &[String]) -> Vec<String> {
    if patterns.is_empty() {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    let mut seen = 0usize;
    while let Some(relative_dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(cwd.join(&relative_dir)) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_WALK_FILES {
                return found;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = relative_dir.join(&name);
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if !SKIP_DIRS.contains(&name.as_str()) {
                    stack.push(relative);
                }
            } else if kind.is_file() {
                let path = relative.to_string_lossy().replace('\\', "/");
                if patterns.iter().any(|p| glob_matches(p, &path)) {
                    found.push(path);
                }
            }
        }
    }
    found.sort();
    found
}

/// Glob matching on `/`-separated relative paths. `**` spans any number of directories, `*` and
/// `?` stay within one. A pattern without wildcards also matches everything below it, so
/// `--protect tests` protects the directory.
pub(crate) fn glob_matches(pattern: &str, path: &str) -> bool {
    let pattern = pattern.trim_start_matches("./").trim_end_matches('/');
    if pattern.is_empty() {
        return false;
    }
    if !pattern.contains(['*', '?']) {
        return path == pattern || path.starts_with(&format!("{pattern}/"));
    }
    let pattern: Vec<&str> = pattern.split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    match_segments(&pattern, &path)
}

fn match_segments(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| match_segments(rest, &path[skip..])),
        Some((segment, rest)) => {
            !path.is_empty()
                && match_segment(segment.as_bytes(), path[0].as_bytes())
                && match_segments(rest, &path[1..])
        }
    }
}

fn match_segment(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| match_segment(rest, &name[skip..])),
        Some((b'?', rest)) => !name.is_empty() && match_segment(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && match_segment(rest, &name[1..]),
    }
}

/// What an oracle file is now: `sha256:<hex>` of its bytes; for a file over
/// [`MAX_HASHED_BYTES`], `sha256-head:<hex of its first bytes>:<length>:<mtime>`; `missing`;
/// `not-a-file` when something else stands at its path (a FIFO, a device, a socket, a
/// directory), which is never read and always a change; or `unreadable`.
fn digest(path: &Path) -> String {
    digest_within(path, MAX_HASHED_BYTES)
}

fn digest_within(path: &Path, max_hashed: u64) -> String {
    let file = match bounded_read::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return MISSING.into(),
        Err(e) if matches!(e.kind(), io::ErrorKind::InvalidInput | io::ErrorKind::IsADirectory) => {
            return NOT_A_FILE.into();
        }
        Err(_) => return UNREADABLE.into(),
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
    fn globs() {
        assert!(glob_matches("tests/**", "tests/a.rs"));
        assert!(glob_matches("tests/**", "tests/deep/b.rs"));
        assert!(glob_matches("tests", "tests/a.rs"));
        assert!(glob_matches("./tests/", "tests/a.rs"));
        assert!(glob_matches("*.py", "x.py"));
        assert!(!glob_matches("*.py", "src/x.py"));
        assert!(glob_matches("**/*.py", "src/x.py"));
        assert!(glob_matches("**/test_?.py", "a/b/test_1.py"));
        assert!(!glob_matches("tests/**", "src/tests.rs"));
        assert!(!glob_matches("tests", "testsuite/a"));
        assert!(!glob_matches("", "a"));
    }

    #[test]
    fn detects_modified_deleted_and_added_oracle_files() {
        let dir =
            project(&[("check.sh", "exit 1"), ("tests/a.rs", "a"), ("tests/b.rs", "b"), ("src/lib.rs", "l")]);
        let cwd = dir.path();
        let oracle = Oracle::capture(cwd, Some("sh check.sh"), &["tests/**".to_string()]);
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

    #[test]
    fn covers_oracle_files_and_protected_globs_only() {
        let dir = project(&[("check.sh", "x"), ("tests/a.rs", "a")]);
        let cwd = dir.path();
        let oracle = Oracle::capture(cwd, Some("./check.sh"), &["tests".to_string()]);
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
        let oracle = Oracle::capture(&cwd, Some("sh check.sh"), &["tests/**".to_string()]);
        fs::remove_file(cwd.join("check.sh")).unwrap();
        crate::bounded_read::tests::mkfifo(&cwd.join("check.sh"));
        fs::remove_file(cwd.join("tests/a.rs")).unwrap();
        fs::create_dir(cwd.join("tests/a.rs")).unwrap();
        let changes = crate::bounded_read::tests::within_two_seconds(move || oracle.changes(&cwd));
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
    fn saves_originals_for_restoring() {
        let dir = project(&[("scripts/check.sh", "exit 1")]);
        let cwd = dir.path();
        let oracle = Oracle::capture(cwd, Some("sh scripts/check.sh"), &[]);
        let saved = tempfile::tempdir().unwrap();
        assert!(oracle.save_originals(cwd, saved.path()).unwrap());
        assert_eq!(fs::read_to_string(saved.path().join("scripts/check.sh")).unwrap(), "exit 1");
    }
}
