//! The scope's reading at a stop ([`crate::checks::scope`]): the files that differ between the
//! start (the loop's, or the current story's) and now, as the reviewer reads them (git's trees,
//! compared by `git diff-tree`), judged against the globs in force. A metric attempt is read
//! from its checkpoint, which is the tree now; otherwise the tree is written once and shared with
//! the rest of the stop ([`super::gather`]).

use std::path::Path;

use crate::checks::ScopeCheck;
use crate::state::LoopState;
use crate::verdict::message::scope;
use crate::worktree::WorkTree;

/// Reads this stop's change against the scope (the verdict needs it:
/// [`crate::verdict::decision::Ask::Scope`]); `checkpoint` is the commit a metric attempt was
/// saved in. `None` only where the tree cannot be read and no scope is in force at this story.
pub(super) fn read_scope(
    state: &LoopState,
    worktree: &WorkTree,
    checkpoint: Option<&str>,
    store: &[&Path],
) -> Option<ScopeCheck> {
    let scope = scope::scope_of(state);
    let now = match checkpoint {
        Some(commit) => commit.to_string(),
        None => match worktree.tree_id() {
            Ok(tree) => tree,
            // Without a scope at this story there is nothing to hold: a later story starts
            // from the loop's start instead.
            Err(e) => {
                return scope.map(|_| ScopeCheck::unknown(format!("the tree now could not be read: {e}")));
            }
        },
    };
    let Some(scope) = scope else {
        // No scope at this story: only where it ends is kept, for a later story's.
        return Some(ScopeCheck { now: Some(now), ..ScopeCheck::default() });
    };
    let story_start = state.meta.plan.as_ref().and_then(|p| p.story_tree.as_deref());
    let Some(start) = story_start.or(state.meta.baseline_tree.as_deref()) else {
        return Some(ScopeCheck::unknown(
            "the loop's start was not recorded as a git tree (not a git repository)".into(),
        ));
    };
    let changed = match worktree.changed_files(start, &now) {
        Ok(files) => files,
        Err(e) => return Some(ScopeCheck::unknown(format!("the change could not be read: {e}"))),
    };
    let prefix = below_top(worktree.root(), &state.meta.cwd).unwrap_or_default();
    let store: Vec<String> = store.iter().filter_map(|dir| below_top(worktree.root(), dir)).collect();
    let exempt = |path: &str| store.iter().any(|dir| is_below(path, dir)) || is_oracle(state, &prefix, path);
    Some(ScopeCheck::of(&scope, &changed, &prefix, exempt, now))
}

/// Whether `path` is `store` or below it (both relative to the top level): the loop's own files,
/// where the store is inside the work tree.
fn is_below(path: &str, store: &str) -> bool {
    store.is_empty() || path == store || path.strip_prefix(store).is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `path` (relative to the top level) is one of the check's files, which the oracle
/// keeps relative to the loop's directory `prefix`.
fn is_oracle(state: &LoopState, prefix: &str, path: &str) -> bool {
    let relative = if prefix.is_empty() {
        Some(path)
    } else {
        path.strip_prefix(prefix).and_then(|r| r.strip_prefix('/'))
    };
    relative.is_some_and(|relative| state.meta.oracle.files.contains_key(relative))
}

/// Where `dir` is below the work tree's top level `root`, `/`-separated (empty at the top);
/// `None` for a directory outside it.
fn below_top(root: &Path, dir: &Path) -> Option<String> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (root, dir) = (canonical(root), canonical(dir));
    let below = dir.strip_prefix(&root).ok()?;
    Some(below.to_string_lossy().replace('\\', "/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_placed_below_the_top_or_outside_it() {
        let top = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(top.path().join("app/src")).unwrap();
        assert_eq!(below_top(top.path(), top.path()).as_deref(), Some(""));
        assert_eq!(below_top(top.path(), &top.path().join("app/src")).as_deref(), Some("app/src"));
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(below_top(top.path(), elsewhere.path()), None);
        assert!(is_below("home/.state/x", "home") && is_below("x", "") && is_below("a.md", "a.md"));
        assert!(!is_below("homes/x", "home"));
    }
}
