//! Merges without a working tree, for the backlog's merge queue: `git merge-tree --write-tree`
//! writes the merged tree (conflicted files with their markers) and names the conflicts, and a
//! linked work tree is reset to a commit to run checks on it. Nothing here moves a ref.

use super::{WorkTree, WorkTreeError, git_failure, run_git};

/// What a merge of two commits gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Merged {
    /// The merged tree; with conflicts, the files hold git's conflict markers.
    pub(crate) tree: String,
    /// The files that conflict, empty when the merge is clean.
    pub(crate) conflicts: Vec<String>,
    /// What git said about the merge (the `CONFLICT (content): ...` lines), for the agent.
    pub(crate) said: String,
}

impl WorkTree {
    /// Merges `theirs` into `ours` (their merge base found by git), writing only objects.
    pub(crate) fn merge_commits(&self, ours: &str, theirs: &str) -> Result<Merged, WorkTreeError> {
        let args = ["merge-tree", "--write-tree", "--name-only", "--messages", ours, theirs];
        let out = run_git(self.root(), &args, None, None)?;
        // Exit 1 is a merge with conflicts; anything else but 0 is a failure of git's own.
        if !matches!(out.status.code(), Some(0 | 1)) {
            return Err(git_failure(&args, &out));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let (head, said) = text.split_once("\n\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let tree = lines.next().unwrap_or_default().trim().to_string();
        if tree.is_empty() {
            return Err(git_failure(&args, &out));
        }
        let mut conflicts: Vec<String> = lines.map(str::to_string).filter(|l| !l.is_empty()).collect();
        conflicts.dedup();
        Ok(Merged { tree, conflicts, said: said.trim_end().to_string() })
    }

    /// Writes a commit of `tree` on `parents` (the first one's history first); its id.
    pub(crate) fn commit_merge(
        &self,
        tree: &str,
        parents: &[&str],
        message: &str,
    ) -> Result<String, WorkTreeError> {
        let mut args = vec!["commit-tree", "--no-gpg-sign", "-m", message];
        for parent in parents {
            args.extend(["-p", parent]);
        }
        args.push(tree);
        let out = self.git(&args, None, None)?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    /// Points the ref `name` at `commit` only if it still points at `old`: a queue that lost a
    /// race, or a step that failed half way, never moves it.
    pub(crate) fn move_ref(&self, name: &str, commit: &str, old: &str) -> Result<(), WorkTreeError> {
        self.git(&["update-ref", "-m", "for-loop", name, commit, old], None, None).map(|_| ())
    }

    /// Resets this (linked) work tree to `commit`, detached: its files become the commit's,
    /// and files git does not ignore that the commit lacks are removed. Ignored files (build
    /// output) stay, as a checkout leaves them.
    pub(crate) fn reset_to(&self, commit: &str) -> Result<(), WorkTreeError> {
        self.git(&["checkout", "--quiet", "--force", "--detach", commit], None, None)?;
        self.git(&["clean", "--quiet", "--force", "-d"], None, None).map(|_| ())
    }

    /// [`WorkTree::reset_to`], ignored files too (`git clean -x`): the tree holds the commit's
    /// files and nothing else. What one check compiled or cached (a `__pycache__`, a build
    /// directory) cannot decide the next check run on another commit.
    pub(crate) fn reset_clean_to(&self, commit: &str) -> Result<(), WorkTreeError> {
        self.git(&["checkout", "--quiet", "--force", "--detach", commit], None, None)?;
        self.git(&["clean", "--quiet", "--force", "-d", "-x"], None, None).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worktree::testing::{git, repo, write};

    /// Two commits on the start, each changing `a.txt` to `ours` and `theirs`, and one adding b.txt.
    fn three_ways() -> (tempfile::TempDir, WorkTree, [String; 4]) {
        let dir = repo(&[("a.txt", "one\ntwo\nthree\n")]);
        let tree = WorkTree::open(dir.path());
        let start = tree.head_commit().unwrap();
        let commit = |file: &str, text: &str| {
            git(dir.path(), &["checkout", "-q", "--detach", &start]);
            write(dir.path(), file, text);
            git(dir.path(), &["add", "-A"]);
            git(dir.path(), &["commit", "-qm", file]);
            tree.head_commit().unwrap()
        };
        let ours = commit("a.txt", "one\nOURS\nthree\n");
        let theirs = commit("a.txt", "one\nTHEIRS\nthree\n");
        let other = commit("b.txt", "b\n");
        (dir, tree, [start, ours, theirs, other])
    }

    #[test]
    fn a_clean_merge_has_both_changes_and_a_conflict_names_its_file() {
        let (dir, tree, [_, ours, theirs, other]) = three_ways();
        let clean = tree.merge_commits(&ours, &other).unwrap();
        assert!(clean.conflicts.is_empty(), "{clean:?}");
        let commit = tree.commit_merge(&clean.tree, &[&ours, &other], "merged").unwrap();
        assert_eq!(git(dir.path(), &["show", &format!("{commit}:b.txt")]), "b\n");
        assert_eq!(git(dir.path(), &["show", &format!("{commit}:a.txt")]), "one\nOURS\nthree\n");
        assert_eq!(git(dir.path(), &["rev-parse", &format!("{commit}^2")]).trim(), other);

        let conflict = tree.merge_commits(&ours, &theirs).unwrap();
        assert_eq!(conflict.conflicts, ["a.txt"]);
        assert!(conflict.said.contains("CONFLICT"), "{}", conflict.said);
        let marked = tree.commit_merge(&conflict.tree, &[&ours], "conflict").unwrap();
        let text = git(dir.path(), &["show", &format!("{marked}:a.txt")]);
        assert!(text.contains("<<<<<<<") && text.contains("THEIRS") && text.contains("OURS"), "{text}");
        assert!(tree.merge_commits(&ours, "no-such-commit").is_err());
    }

    #[test]
    fn a_ref_moves_only_from_the_commit_it_was_on_and_a_tree_resets_to_a_commit() {
        let (dir, tree, [start, ours, theirs, other]) = three_ways();
        tree.update_ref("refs/for-loop/t/integration", &start).unwrap();
        tree.move_ref("refs/for-loop/t/integration", &ours, &start).unwrap();
        assert!(tree.move_ref("refs/for-loop/t/integration", &theirs, &start).is_err());
        assert_eq!(tree.resolve("refs/for-loop/t/integration").unwrap(), ours);
        let linked = dir.path().join("linked");
        tree.add_linked_tree(&linked, &ours).unwrap();
        write(&linked, "stray.txt", "left by an agent\n");
        write(&linked, "a.txt", "edited\n");
        WorkTree::open(&linked).reset_to(&other).unwrap();
        assert!(!linked.join("stray.txt").exists());
        assert_eq!(std::fs::read_to_string(linked.join("a.txt")).unwrap(), "one\ntwo\nthree\n");
        assert!(linked.join("b.txt").is_file());
    }

    /// Regression: a `__pycache__` one check compiled survived the queue's reset and decided the
    /// next merge's check.
    #[test]
    fn a_clean_reset_removes_ignored_files_a_plain_one_keeps() {
        let (dir, tree, [start, ours, ..]) = three_ways();
        let linked = dir.path().join("linked");
        tree.add_linked_tree(&linked, &start).unwrap();
        // Ignored by the repository's own exclude file, which its linked work trees share.
        std::fs::create_dir_all(dir.path().join(".git/info")).unwrap();
        std::fs::write(dir.path().join(".git/info/exclude"), "__pycache__/\n").unwrap();
        write(&linked, "__pycache__/calc.pyc", "compiled by another check\n");
        WorkTree::open(&linked).reset_to(&ours).unwrap();
        assert!(linked.join("__pycache__/calc.pyc").is_file(), "a plain reset keeps ignored files");
        WorkTree::open(&linked).reset_clean_to(&start).unwrap();
        assert!(!linked.join("__pycache__").exists());
        assert_eq!(std::fs::read_to_string(linked.join("a.txt")).unwrap(), "one\ntwo\nthree\n");
    }
}
