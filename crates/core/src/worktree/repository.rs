//! The repository operations `loop-hook run` needs around the work trees it owns: naming
//! objects, refs and commits, remotes, patches, and linked work trees. Each is one git command
//! run as the rest of this layer runs git (no project filters, hooks or fsmonitor), so no caller
//! outside `worktree` builds a git command line of its own.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use super::{WorkTree, WorkTreeError};

/// How often a linked work tree is tried, and the pause before the second try (longer after).
const ADD_TRIES: u32 = 4;
const ADD_PAUSE: Duration = Duration::from_millis(50);

impl WorkTree {
    /// The object `rev` names, as a full id: a commit with `^{commit}`, a tree with `^{tree}`.
    /// An error when it names nothing (or not an object of that kind).
    pub(crate) fn resolve(&self, rev: &str) -> Result<String, WorkTreeError> {
        self.first_line(&["rev-parse", "--verify", "-q", rev])
    }

    /// The commit HEAD is on; an error in a repository with no commit yet.
    pub(crate) fn head_commit(&self) -> Result<String, WorkTreeError> {
        self.resolve("HEAD^{commit}")
    }

    /// What kind of object `name` names (`commit`, `tree`, `blob`, `tag`).
    pub(crate) fn object_kind(&self, name: &str) -> Result<String, WorkTreeError> {
        self.first_line(&["cat-file", "-t", name])
    }

    /// The raw text of commit `id` (headers and message), read only when it is at most `limit`
    /// bytes; `Ok(None)` when it is larger.
    pub(crate) fn commit_text(&self, id: &str, limit: u64) -> Result<Option<Vec<u8>>, WorkTreeError> {
        let size = self.first_line(&["cat-file", "-s", id])?;
        if size.parse::<u64>().map_or(true, |size| size > limit) {
            return Ok(None);
        }
        self.git(&["cat-file", "commit", id], None, None).map(Some)
    }

    /// Writes a commit of `tree` (on `parent`, when given) with `message`; its id.
    pub(crate) fn commit_tree(
        &self,
        tree: &str,
        parent: Option<&str>,
        message: &str,
    ) -> Result<String, WorkTreeError> {
        // `--no-gpg-sign`: commit-tree honours commit.gpgSign, and a passphrase prompt would hang.
        let mut args = vec!["commit-tree", "--no-gpg-sign", "-m", message];
        if let Some(parent) = parent {
            args.extend(["-p", parent]);
        }
        args.push(tree);
        self.first_line(&args)
    }

    /// Points the ref `name` at `commit`, saying in its log that for-loop moved it.
    pub(crate) fn update_ref(&self, name: &str, commit: &str) -> Result<(), WorkTreeError> {
        self.git(&["update-ref", "-m", "for-loop", name, commit], None, None).map(|_| ())
    }

    /// The refs of `remote` that match `pattern`, each as `(id, name)`.
    pub(crate) fn remote_refs(
        &self,
        remote: &str,
        pattern: &str,
    ) -> Result<Vec<(String, String)>, WorkTreeError> {
        let listed = self.git(&["ls-remote", remote, pattern], None, None)?;
        Ok(String::from_utf8_lossy(&listed)
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(id, name)| (id.to_string(), name.to_string()))
            .collect())
    }

    /// Fetches `refspec` from `remote`, without tags.
    pub(crate) fn fetch_refs(&self, remote: &str, refspec: &str) -> Result<(), WorkTreeError> {
        self.git(&["fetch", "--quiet", "--no-tags", remote, refspec], None, None).map(|_| ())
    }

    /// Pushes `commit` to the ref `name` of `remote`, forced, without the user's pre-push hook.
    pub(crate) fn push_ref(&self, remote: &str, commit: &str, name: &str) -> Result<(), WorkTreeError> {
        let spec = format!("+{commit}:{name}");
        self.git(&["push", "--quiet", "--no-verify", remote, &spec], None, None).map(|_| ())
    }

    /// The change from `from` to `to` as a patch `git apply` takes, binary files included.
    pub(crate) fn binary_diff(&self, from: &str, to: &str) -> Result<Vec<u8>, WorkTreeError> {
        self.git(&["diff", "--binary", "--full-index", from, to], None, None)
    }

    /// Whether `patch` applies to the working tree as it is: `Err` says why not. Changes nothing.
    pub(crate) fn patch_applies(&self, patch: &[u8]) -> Result<(), WorkTreeError> {
        self.git(&["apply", "--check", "-"], None, Some(patch.to_vec())).map(|_| ())
    }

    /// Whether the working tree holds `patch` already (it applies in reverse). Changes nothing.
    pub(crate) fn holds_patch(&self, patch: &[u8]) -> bool {
        self.git(&["apply", "--reverse", "--check", "-"], None, Some(patch.to_vec())).is_ok()
    }

    /// Applies `patch` to the working tree (nothing staged); the summary of what it changed.
    pub(crate) fn apply_patch(&self, patch: &[u8]) -> Result<String, WorkTreeError> {
        let stat = self.git(&["apply", "--stat", "--apply", "-"], None, Some(patch.to_vec()))?;
        Ok(String::from_utf8_lossy(&stat).trim_end().to_string())
    }

    /// Takes `patch` back out of the working tree.
    pub(crate) fn take_back_patch(&self, patch: &[u8]) -> Result<(), WorkTreeError> {
        self.git(&["apply", "--reverse", "-"], None, Some(patch.to_vec())).map(|_| ())
    }

    /// Adds a linked work tree at `dir`, detached at `commit`. The user's checkout hooks do not
    /// run (no hook runs in any git this layer starts).
    ///
    /// Two `git worktree add` at once in one repository can fail: one reads the other's record
    /// while it is half written ("failed to read .git/worktrees/N/commondir", about one add in 50
    /// with three at once). The adds of this process take turns, and an add that failed before
    /// putting anything at `dir` (another process's add in the way) is tried again.
    pub(crate) fn add_linked_tree(&self, dir: &Path, commit: &str) -> Result<(), WorkTreeError> {
        static ADDING: Mutex<()> = Mutex::new(());
        let name = dir.to_str().ok_or_else(|| WorkTreeError::Git {
            command: "git worktree add".into(),
            stderr: format!("{} is not UTF-8", dir.display()),
        })?;
        let mut tries = 0;
        loop {
            let added = {
                let _turn = ADDING.lock().unwrap_or_else(PoisonError::into_inner);
                self.git(&["worktree", "add", "--detach", "--quiet", name, commit], None, None).map(|_| ())
            };
            tries += 1;
            let untouched = fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_none());
            match added {
                Err(_) if tries < ADD_TRIES && untouched => thread::sleep(ADD_PAUSE * tries),
                added => return added,
            }
        }
    }

    /// This work tree's own git directory and the one its linked work trees share, absolute.
    pub(crate) fn git_dirs(&self) -> Result<(PathBuf, PathBuf), WorkTreeError> {
        let out = self.git(&["rev-parse", "--absolute-git-dir", "--git-common-dir"], None, None)?;
        let text = String::from_utf8_lossy(&out);
        let mut lines = text.lines();
        let missing = || WorkTreeError::Git {
            command: "git rev-parse --absolute-git-dir --git-common-dir".into(),
            stderr: "it printed fewer than two lines".into(),
        };
        let own = PathBuf::from(lines.next().ok_or_else(missing)?);
        let common = PathBuf::from(lines.next().ok_or_else(missing)?.trim());
        let common = if common.is_absolute() { common } else { self.root().join(common) };
        Ok((own, common))
    }

    /// The first line git printed, trimmed.
    fn first_line(&self, args: &[&str]) -> Result<String, WorkTreeError> {
        let out = self.git(args, None, None)?;
        Ok(String::from_utf8_lossy(&out).lines().next().unwrap_or_default().trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git").arg("-C").arg(dir).args(args).status().unwrap().success();
        assert!(ok, "git {args:?}");
    }

    fn repo() -> (tempfile::TempDir, WorkTree) {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        git(dir.path(), &["config", "user.email", "t@example.com"]);
        git(dir.path(), &["config", "user.name", "t"]);
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        git(dir.path(), &["add", "-A"]);
        git(dir.path(), &["commit", "-qm", "start"]);
        let tree = WorkTree::open(dir.path());
        (dir, tree)
    }

    #[test]
    fn names_resolve_to_ids_and_a_missing_one_is_an_error() {
        let (_dir, tree) = repo();
        let head = tree.head_commit().unwrap();
        assert_eq!(head.len(), 40);
        assert_eq!(tree.object_kind(&head).unwrap(), "commit");
        assert_eq!(tree.object_kind(&tree.resolve("HEAD^{tree}").unwrap()).unwrap(), "tree");
        assert!(tree.resolve("refs/heads/nothing-here").is_err());
        let (_empty, fresh) = {
            let dir = tempfile::tempdir().unwrap();
            git(dir.path(), &["init", "-q"]);
            let tree = WorkTree::open(dir.path());
            (dir, tree)
        };
        assert!(fresh.head_commit().is_err(), "a repository without a commit has no HEAD commit");
    }

    #[test]
    fn a_commit_written_on_a_ref_reads_back_and_a_large_one_is_not_read() {
        let (_dir, tree) = repo();
        let head = tree.head_commit().unwrap();
        let root = tree.resolve("HEAD^{tree}").unwrap();
        let commit = tree.commit_tree(&root, Some(&head), "claim: attempt 1\n\nverified").unwrap();
        tree.update_ref("refs/for-loop/t/1", &commit).unwrap();
        assert_eq!(tree.resolve("refs/for-loop/t/1^{commit}").unwrap(), commit);
        let text = String::from_utf8(tree.commit_text(&commit, 4096).unwrap().unwrap()).unwrap();
        assert!(text.contains("claim: attempt 1") && text.contains(&format!("parent {head}")), "{text}");
        assert_eq!(tree.commit_text(&commit, 10).unwrap(), None);
    }

    #[test]
    fn a_patch_applies_once_is_then_held_and_can_be_taken_back() {
        let (dir, tree) = repo();
        let start = tree.head_commit().unwrap();
        std::fs::write(dir.path().join("a.txt"), "two\n").unwrap();
        git(dir.path(), &["commit", "-qam", "change"]);
        let changed = tree.head_commit().unwrap();
        let patch = tree.binary_diff(&start, &changed).unwrap();
        git(dir.path(), &["checkout", "-q", &start]);
        assert!(tree.patch_applies(&patch).is_ok() && !tree.holds_patch(&patch));
        let stat = tree.apply_patch(&patch).unwrap();
        assert!(stat.contains("a.txt"), "{stat}");
        assert!(tree.holds_patch(&patch) && tree.patch_applies(&patch).is_err());
        tree.take_back_patch(&patch).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one\n");
    }

    #[test]
    fn a_linked_tree_shares_the_common_git_directory() {
        let (dir, tree) = repo();
        let linked = dir.path().join("linked");
        tree.add_linked_tree(&linked, &tree.head_commit().unwrap()).unwrap();
        let (own, common) = WorkTree::open(&linked).git_dirs().unwrap();
        let (main_own, main_common) = tree.git_dirs().unwrap();
        let canonical = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
        assert_eq!(canonical(common), canonical(main_common.clone()));
        assert_eq!(canonical(main_own), canonical(main_common));
        assert_ne!(canonical(own), canonical(dir.path().join(".git")));
    }

    #[test]
    fn linked_trees_added_at_once_all_come_to_be() {
        let (dir, tree) = repo();
        let head = tree.head_commit().unwrap();
        // Three at once, as a backlog starts its tasks, many times over: without turns, git
        // fails about one add in fifty.
        for round in 0..25 {
            std::thread::scope(|scope| {
                for n in 1..=3 {
                    let (tree, head) = (&tree, &head);
                    let linked = dir.path().join(format!("trees/{round}/{n}"));
                    scope.spawn(move || {
                        tree.add_linked_tree(&linked, head).unwrap_or_else(|e| panic!("{linked:?}: {e}"));
                        assert!(linked.join("a.txt").is_file());
                    });
                }
            });
        }
    }

    #[test]
    fn an_add_where_files_stand_fails_and_leaves_them() {
        let (dir, tree) = repo();
        let taken = dir.path().join("taken");
        std::fs::create_dir_all(&taken).unwrap();
        std::fs::write(taken.join("mine.txt"), "the user's\n").unwrap();
        assert!(tree.add_linked_tree(&taken, &tree.head_commit().unwrap()).is_err());
        assert_eq!(std::fs::read_to_string(taken.join("mine.txt")).unwrap(), "the user's\n");
    }

    #[test]
    fn refs_go_to_a_remote_and_come_back_listed() {
        let (dir, tree) = repo();
        let remote = tempfile::tempdir().unwrap();
        git(remote.path(), &["init", "-q", "--bare"]);
        let url = remote.path().to_str().unwrap();
        let head = tree.head_commit().unwrap();
        tree.push_ref(url, &head, "refs/for-loop/r/1").unwrap();
        let listed = tree.remote_refs(url, "refs/for-loop/*").unwrap();
        assert_eq!(listed, [(head.clone(), "refs/for-loop/r/1".to_string())]);
        let (_other_dir, other) = repo();
        other.fetch_refs(url, "+refs/for-loop/r/*:refs/for-loop/r/*").unwrap();
        assert_eq!(other.resolve("refs/for-loop/r/1^{commit}").unwrap(), head);
        assert!(tree.remote_refs(&dir.path().join("no-such").display().to_string(), "*").is_err());
    }
}
