//! Checkpoints a loop can roll back to: commits of the working tree under
//! `refs/for-loop/<loop-id>/<n>`, outside `refs/heads`, so no branch moves and neither a clone nor
//! a push of branches carries them (`git log --all` and `push --mirror` do see them), yet they keep
//! their objects from `git gc`. Rollback rewrites files and nothing else.

use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::git::{TempIndex, object_id, path_from_git, run_git, split_z, trim_newline};
use super::{WorkTree, WorkTreeError, io_error};

/// Where a loop's checkpoints live, as `<REFS>/<loop-id>/<n>`.
const REFS: &str = "refs/for-loop";
/// The ref holding the working tree as it was before the last rollback, under the loop's refs.
const BEFORE_ROLLBACK: &str = "before-rollback";
/// A gitlink's mode: a submodule, which rollback leaves alone.
const GITLINK_MODE: &str = "160000";

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

/// The ref of checkpoint `n` of a loop.
pub(crate) fn checkpoint_ref(loop_id: &str, n: u32) -> String {
    format!("{REFS}/{loop_id}/{n}")
}

/// The ref [`WorkTree::rollback`] saves the working tree at before changing it.
pub(crate) fn before_rollback_ref(loop_id: &str) -> String {
    format!("{REFS}/{loop_id}/{BEFORE_ROLLBACK}")
}

impl WorkTree {
    /// Snapshots the working tree as checkpoint `n` of the loop: a commit whose parent is the
    /// loop's latest checkpoint before `n`, else HEAD (none in a repository without commits),
    /// at `refs/for-loop/<loop_id>/<n>`, replacing any checkpoint `n` there was. Returns the
    /// commit id.
    pub(crate) fn checkpoint(&self, loop_id: &str, n: u32) -> Result<String, WorkTreeError> {
        let repo = self.repo()?;
        check_loop_id(loop_id)?;
        let tree = self.tree_id_in(repo)?;
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

    /// A one-line summary of what changed between two commits or trees, from the diff stat:
    /// `2 files (+14 -3): src/lib.rs, src/parse.rs`, or `no change`.
    pub(crate) fn diff_summary(&self, from: &str, to: &str) -> Result<String, WorkTreeError> {
        self.repo()?;
        let (from, to) = (object_id(from)?, object_id(to)?);
        let out = self.git(&["diff-tree", "-r", "-z", "--no-renames", "--numstat", from, to], None, None)?;
        let (mut added, mut deleted, mut files) = (0u64, 0u64, Vec::new());
        for record in split_z(&out).filter(|r| !r.is_empty()) {
            let text = String::from_utf8_lossy(record);
            let mut parts = text.splitn(3, '\t');
            let (Some(a), Some(d), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
            // Binary files count as `-`.
            added += a.parse::<u64>().unwrap_or(0);
            deleted += d.parse::<u64>().unwrap_or(0);
            files.push(path.to_string());
        }
        if files.is_empty() {
            return Ok("no change".into());
        }
        let named: Vec<&str> = files.iter().take(3).map(String::as_str).collect();
        let more = if files.len() > 3 { format!(" and {} more", files.len() - 3) } else { String::new() };
        let plural = if files.len() == 1 { "" } else { "s" };
        Ok(format!("{} file{plural} (+{added} -{deleted}): {}{more}", files.len(), named.join(", ")))
    }

    /// The unified diff between two commits or trees, as git prints it (binary files named, not
    /// shown). Unbounded: the caller cuts it.
    pub(crate) fn unified_diff(&self, from: &str, to: &str) -> Result<Vec<u8>, WorkTreeError> {
        self.repo()?;
        let (from, to) = (object_id(from)?, object_id(to)?);
        self.git(
            &["diff-tree", "-r", "-p", "--no-renames", "--no-color", "--no-ext-diff", from, to],
            None,
            None,
        )
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
        let before = self.tree_id_in(repo)?;
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

    /// A commit of the tree `git add -A` would stage now, on `parent` (else on HEAD, if there is
    /// one), that no branch points to: what `run --attempts` starts from and keeps.
    pub(crate) fn snapshot(&self, parent: Option<&str>, message: &str) -> Result<String, WorkTreeError> {
        let tree = self.tree_id()?;
        let parent = match parent {
            Some(parent) => Some(parent.to_string()),
            None => self.head()?,
        };
        self.commit_tree(&tree, parent.as_deref(), message)
    }

    fn head(&self) -> Result<Option<String>, WorkTreeError> {
        let out = run_git(&self.root, &["rev-parse", "-q", "--verify", "HEAD^{commit}"], None, None)?;
        let id = String::from_utf8_lossy(trim_newline(&out.stdout)).into_owned();
        Ok((out.status.success() && !id.is_empty()).then_some(id))
    }
}

/// Loop ids become a ref's path component: keep them to a set git accepts everywhere.
pub(crate) fn check_loop_id(id: &str) -> Result<(), WorkTreeError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !id.starts_with(['.', '-'])
        && !id.ends_with('.')
        && !id.to_ascii_lowercase().ends_with(".lock")
        && !id.contains("..");
    if ok { Ok(()) } else { Err(WorkTreeError::BadLoopId(id.to_string())) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worktree::testing::{git, no_temp_index_left, read, repo, user_state, write};

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
        let changed = tree.tree_id().unwrap();

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
        assert_eq!(tree.tree_id().unwrap(), git(path, &["rev-parse", &format!("{commit}^{{tree}}")]).trim());
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
    fn rollback_undoes_files_becoming_directories_and_symlinks() {
        let dir = repo(&[("x", "file"), ("d/f.txt", "f")]);
        let path = dir.path();
        std::os::unix::fs::symlink("x", path.join("link")).unwrap();
        let tree = WorkTree::open(path);
        let start = tree.tree_id().unwrap();
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
        assert_eq!(tree.tree_id().unwrap(), start);
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
}
