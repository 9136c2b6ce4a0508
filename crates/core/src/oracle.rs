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

use crate::digest::hex;

/// Files examined per walk of the project for `--protect` globs; beyond this a walk stops.
const MAX_WALK_FILES: usize = 50_000;
/// Originals kept for restoring, in all.
const MAX_SAVED_BYTES: u64 = 8 << 20;
/// Directories never walked for globs: build output and dependencies, not sources.
const SKIP_DIRS: &[&str] = &[".git", "target", "node_modules", ".venv", "__pycache__"];

/// What the oracle was at start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Oracle {
    /// The user's `--protect` paths and globs, relative to the loop's directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<String>,
    /// Each oracle file (relative path, `/`-separated) and its digest: `sha256:…`, or `missing`.
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
                    (_, "missing") => ChangeKind::Deleted,
                    ("missing", _) => ChangeKind::Added,
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
            self.files.iter().filter(|(_, d)| *d != "missing").map(|(p, _)| p).collect();
        let total: u64 = present.iter().filter_map(|p| fs::metadata(cwd.join(p)).ok()).map(|m| m.len()).sum();
        if total > MAX_SAVED_BYTES || present.is_empty() {
            return Ok(false);
        }
        for path in present {
            let target = dir.join(path);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::copy(cwd.join(path), target)?;
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

/// `sha256:<hex>` of a file's bytes, or `missing`.
fn digest(path: &Path) -> String {
    let Ok(mut file) = fs::File::open(path) else { return "missing".into() };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return "unreadable".into(),
        }
    }
    format!("sha256:{}", hex(&hasher.finalize()))
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
