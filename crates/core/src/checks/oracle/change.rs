//! How an oracle file differs from the start: modified, deleted, added, unchecked, or changed
//! while verify ran.

use std::fmt;

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
    /// after, but not during the run that passed ([`crate::checks::oracle`]).
    ChangedDuringVerify,
    /// A story's box in the plan file ticked although the loop has not verified the story: only
    /// for-loop ticks one, when the story's check passes ([`crate::checks::plan`]).
    Ticked,
    /// Something outside the project that the check runs: a program as `PATH` finds it, an
    /// interpreter, a start-up hook, a start-up variable (`checks::oracle::programs`). The path
    /// says what and how.
    Outside,
}

/// The kind in the words the model and the user read (`modified`, `changed while verify ran`).
impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Added => "added",
            ChangeKind::Unchecked => "too many files to look through for added ones",
            ChangeKind::ChangedDuringVerify => "changed while verify ran",
            ChangeKind::Ticked => "ticked, but not verified",
            ChangeKind::Outside => {
                "outside the project, and the check runs it: remove what was added, put back what was \
                 changed; if the user changed it, the loop must be started again to take it in"
            }
        })
    }
}

/// One oracle file that is not as it was at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OracleChange {
    pub path: String,
    pub kind: ChangeKind,
}

/// `check.sh (modified)`.
impl fmt::Display for OracleChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.path, self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_reads_as_words_not_as_its_rust_name() {
        let during = OracleChange { path: "check.sh".into(), kind: ChangeKind::ChangedDuringVerify };
        assert_eq!(during.to_string(), "check.sh (changed while verify ran)");
        let words: Vec<String> = [
            ChangeKind::Modified,
            ChangeKind::Deleted,
            ChangeKind::Added,
            ChangeKind::Unchecked,
            ChangeKind::Ticked,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            words,
            [
                "modified",
                "deleted",
                "added",
                "too many files to look through for added ones",
                "ticked, but not verified"
            ]
        );
    }
}
