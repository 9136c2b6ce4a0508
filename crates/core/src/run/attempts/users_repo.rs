//! The user's repository as a best-of-K run found it and left it: the working tree, git's
//! config and its hooks. The attempts work elsewhere; a difference at the end was made by the
//! user, or by an attempt that reached outside its work tree, and is reported either way.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::worktree::WorkTree;

/// One look at the user's repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RepoLook {
    /// The tree `git add -A` would stage: tracked files and untracked ones git does not ignore.
    tree: Option<String>,
    /// `config` and every file under `hooks/` of the git directory, by name, to a digest.
    git_files: BTreeMap<String, String>,
}

impl RepoLook {
    /// Looks at `user` now.
    pub(crate) fn take(user: &WorkTree) -> RepoLook {
        let git_files = common_dir(user).map(|dir| git_files(&dir)).unwrap_or_default();
        RepoLook { tree: user.tree_id().ok(), git_files }
    }

    /// Looks at `user` again after `self`; git's own files first, and the working tree through
    /// git only when its config is as it was (a config changed behind the run could make that
    /// git run a program of its own).
    pub(crate) fn again(&self, user: &WorkTree) -> RepoLook {
        let git_files = common_dir(user).map(|dir| git_files(&dir)).unwrap_or_default();
        let tree =
            if git_files.get("config") == self.git_files.get("config") { user.tree_id().ok() } else { None };
        RepoLook { tree, git_files }
    }

    /// What differs in `after`, one line each, in words.
    pub(crate) fn changes(&self, after: &RepoLook, user: &WorkTree) -> Vec<String> {
        let mut lines = Vec::new();
        let names =
            self.git_files.keys().chain(after.git_files.keys()).collect::<std::collections::BTreeSet<_>>();
        for name in names {
            let what = match (self.git_files.get(name), after.git_files.get(name)) {
                (None, Some(_)) => "added",
                (Some(_), None) => "removed",
                (Some(a), Some(b)) if a != b => "changed",
                _ => continue,
            };
            lines.push(format!(".git/{name} {what}"));
        }
        match (&self.tree, &after.tree) {
            (Some(before), Some(now)) if before != now => {
                let files = user.changed_files(before, now).unwrap_or_default();
                lines.extend(files.into_iter().map(|file| format!("{file} changed in the working tree")));
                if lines.is_empty() {
                    lines.push("the working tree changed".into());
                }
            }
            (Some(_), None) => lines.push("the working tree was not read again: git's config changed".into()),
            _ => {}
        }
        lines
    }
}

/// The git directory the user's work trees share.
fn common_dir(user: &WorkTree) -> Option<PathBuf> {
    user.git_dirs().ok().map(|(_, common)| common)
}

/// `config` and the files under `hooks/` (two levels), each to its content's digest.
fn git_files(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut add = |name: String, path: &Path| {
        if let Ok(bytes) = fs::read(path) {
            files.insert(name, crate::support::digest::sha256_hex(&bytes));
        }
    };
    add("config".into(), &dir.join("config"));
    for entry in fs::read_dir(dir.join("hooks")).into_iter().flatten().flatten() {
        let name = format!("hooks/{}", entry.file_name().to_string_lossy());
        if entry.path().is_dir() {
            for inner in fs::read_dir(entry.path()).into_iter().flatten().flatten() {
                add(format!("{name}/{}", inner.file_name().to_string_lossy()), &inner.path());
            }
        } else {
            add(name, &entry.path());
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worktree::testing::{repo, write};

    #[test]
    fn a_changed_file_hook_and_config_are_each_named() {
        let dir = repo(&[("check.sh", "exit 1\n")]);
        let user = WorkTree::open(dir.path());
        let before = RepoLook::take(&user);
        assert!(before.changes(&before.again(&user), &user).is_empty());
        write(dir.path(), "check.sh", "exit 0\n");
        write(dir.path(), ".git/hooks/pre-commit", "evil\n");
        let after = before.again(&user);
        let changes = before.changes(&after, &user);
        assert_eq!(changes, [".git/hooks/pre-commit added", "check.sh changed in the working tree"]);
        let mut config = fs::read_to_string(dir.path().join(".git/config")).unwrap();
        config.push_str("[core]\n\tfsmonitor = ./evil\n");
        fs::write(dir.path().join(".git/config"), config).unwrap();
        let changes = before.changes(&before.again(&user), &user);
        assert!(changes.contains(&".git/config changed".to_string()), "{changes:?}");
        assert!(changes.iter().any(|c| c.contains("was not read again")), "{changes:?}");
    }
}
