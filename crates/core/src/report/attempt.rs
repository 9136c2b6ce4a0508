//! Where a best-of-K attempt's changes can still be read once its work tree is gone.
//!
//! An attempt works in a linked git work tree under the store, which its run removes when it
//! ends. Its checkpoints and end state are refs of the repository the attempt was made from
//! (refs are shared by every work tree of a repository), named in the run's record,
//! `attempts/RUN.json` in the store, which `loop-hook run --attempts` writes.

use std::fs;
use std::path::PathBuf;

use serde::Deserialize;

use crate::store::Store;
use crate::support::read::bounded_read;
use crate::worktree::WorkTree;

/// The part of a best-of-K run's record the report reads.
#[derive(Deserialize)]
struct RunRecord {
    repo: PathBuf,
}

/// The repository attempt `session_id` (`attempt-RUN-N`) was made from, if it is one and its
/// run's record names a git repository that is still there.
pub(super) fn repository(store: &Store, session_id: &str) -> Option<WorkTree> {
    let (run, n) = session_id.strip_prefix("attempt-")?.rsplit_once('-')?;
    n.parse::<u32>().ok()?;
    if run.is_empty() || run.contains(['/', '\\', '.']) {
        return None;
    }
    let path = store.root().join("attempts").join(format!("{run}.json"));
    let text = bounded_read::read(&path, 1 << 20).ok()?;
    let record: RunRecord = serde_json::from_slice(&text).ok()?;
    fs::metadata(&record.repo).ok()?;
    let tree = WorkTree::open(&record.repo);
    tree.is_git().then_some(tree)
}
