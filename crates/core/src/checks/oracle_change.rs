//! How an oracle file differs from the start: modified, deleted, added, unchecked, or changed
//! while verify ran.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ChangeKind {
    Modified,
    Deleted,
    Added,
    /// Too many files where protected ones may be added to look at them all, when there were
    /// not at start: the path is the directory that was walked.
    Unchecked,
    /// Changed while verify ran and put back (or restored by verify itself): the same before and
    /// after, but not during the run that passed ([`crate::checks::oracle_watch`]).
    ChangedDuringVerify,
    /// A story's box in the plan file ticked although the loop has not verified the story: only
    /// for-loop ticks one, when the story's check passes ([`crate::checks::plan_file`]).
    Ticked,
}

/// One oracle file that is not as it was at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OracleChange {
    pub path: String,
    pub kind: ChangeKind,
}
