//! Something that went wrong around a loop that its user and its agent must hear about: the
//! state changed behind for-loop's back, the lock held by a stranger, a stop that could not be
//! recorded. Where an incident waits when nothing else can be written is the store's
//! ([`crate::store`]).

use std::path::PathBuf;

use jiff::Timestamp;

use crate::state::{LedgerDecision, LedgerEntry, LoopState, ReasonCode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Incident {
    pub(crate) code: ReasonCode,
    pub(crate) at: Timestamp,
    /// What happened and what was done about it, in a sentence.
    pub(crate) what: String,
    /// Already in the ledger, and told again now; otherwise the stop that tells it records it.
    pub(crate) recorded: bool,
    /// The fallback file it was read from, removed once the incident is recorded.
    pub(crate) file: Option<PathBuf>,
}

impl Incident {
    pub(crate) fn new(code: ReasonCode, at: Timestamp, what: impl Into<String>) -> Incident {
        Incident { code, at, what: what.into(), recorded: false, file: None }
    }

    /// The ledger line that records this incident against `state`'s loop.
    pub(crate) fn note(&self, state: &LoopState, now: Timestamp) -> LedgerEntry {
        LedgerEntry {
            detail: Some(self.what.clone()),
            ..LedgerEntry::new(state, now, LedgerDecision::Note, self.code)
        }
    }

    /// A stop recorded in the ledger without a verdict, to be told again.
    pub(crate) fn from_ledger(entry: &LedgerEntry) -> Incident {
        let what = match &entry.detail {
            Some(detail) if entry.reason == ReasonCode::ForgedStop => detail.clone(),
            Some(detail) if entry.reason == ReasonCode::HostConfigChanged => {
                format!("something that decides whether for-loop's hooks run at all changed: {detail}")
            }
            Some(detail) => format!("a stop was let through unjudged: {detail}"),
            None => format!("a stop was let through unjudged ({})", entry.reason),
        };
        Incident { code: entry.reason, at: entry.time, what, recorded: true, file: None }
    }
}
