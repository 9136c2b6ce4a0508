//! The scope's reading at a stop ([`crate::checks::scope`]): the files that differ between the
//! start (the loop's, or the current story's) and now, as the reviewer reads them (git's trees,
//! compared by `git diff-tree`), judged against the globs in force. A metric attempt is read
//! from its checkpoint, which is the tree now; otherwise the tree is written once and shared with
//! the rest of the stop ([`super::gather`]).

use std::path::Path;

use crate::checks::scope::ScopeCheck;
use crate::store::state::LoopState;
use crate::verdict::decision;
use crate::verdict::facts::StopFacts;
use crate::verdict::scope_message;
use crate::worktree::WorkTree;

/// Reads this stop's change against the scope when the verdict needs it
/// ([`decision::awaits_scope`]); `checkpoint` is the commit a metric attempt was saved in.
pub(super) fn at_stop(
    state: &LoopState,
    facts: &StopFacts<'_>,
    worktree: &WorkTree,
    checkpoint: Option<&str>,
) -> Option<ScopeCheck> {
    if !decision::awaits_scope(state, facts) {
        return None;
    }
    let now = match checkpoint {
        Some(commit) => commit.to_string(),
        None => match worktree.tree_id() {
            Ok(tree) => tree,
            Err(e) => return Some(ScopeCheck::unknown(format!("the tree now could not be read: {e}"))),
        },
    };
    let Some(scope) = scope_message::scope_of(state) else {
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
    let prefix = below_top(worktree.root(), &state.meta.cwd);
    let oracle = &state.meta.oracle.files;
    Some(ScopeCheck::of(&scope, &changed, &prefix, |path| oracle.contains_key(path), now))
}

/// Where `cwd` is below the work tree's top level `root`, `/`-separated (empty at the top).
fn below_top(root: &Path, cwd: &Path) -> String {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (root, cwd) = (canonical(root), canonical(cwd));
    let below = cwd.strip_prefix(&root).map(Path::to_path_buf).unwrap_or_default();
    below.to_string_lossy().replace('\\', "/")
}
