//! Repositories for the working tree's tests.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::git::{GIT_LOCAL_VARS, TEMP_INDEX_PREFIX};

/// Runs git for a test's setup, isolated from the variables a hook running the tests may set.
pub(crate) fn try_git(dir: &Path, args: &[&str]) -> Output {
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

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = try_git(dir, args);
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn write(dir: &Path, path: &str, content: &str) {
    let path = dir.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

pub(crate) fn read(dir: &Path, path: &str) -> Option<String> {
    fs::read_to_string(dir.join(path)).ok()
}

/// A repository with one commit of `files` and a .gitignore of `*.log` and `ignored/`.
pub(crate) fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
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
pub(crate) fn user_state(dir: &Path) -> Vec<String> {
    let index = fs::read(dir.join(".git/index")).map_or_else(|_| "no index".into(), |b| format!("{b:?}"));
    let head = String::from_utf8(try_git(dir, &["rev-parse", "-q", "--verify", "HEAD"]).stdout).unwrap();
    let refs = git(dir, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/stash"]);
    vec![
        index,
        head,
        git(dir, &["symbolic-ref", "HEAD"]),
        git(dir, &["status", "--porcelain=v1", "-z"]),
        refs,
    ]
}

/// No temporary index of ours in the repository's git directory.
pub(crate) fn no_temp_index_left(dir: &Path) -> bool {
    fs::read_dir(dir.join(".git"))
        .unwrap()
        .all(|e| !e.unwrap().file_name().to_string_lossy().starts_with(TEMP_INDEX_PREFIX))
}
