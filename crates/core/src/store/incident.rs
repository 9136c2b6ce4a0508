//! Something that went wrong around a loop that its user and its agent must hear about: the
//! state changed behind for-loop's back, the lock held by a stranger, a stop that could not be
//! recorded.
//!
//! An incident found at a stop is told at that stop and recorded by its commit. One that let a
//! stop through unjudged is recorded when it happens (in the ledger, or when even that cannot be
//! written, as an empty file named after it) and told again at the next judged stop, so an
//! allowed stop is never silent.

use std::fs;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::store::ledger::{LedgerDecision, LedgerEntry};
use crate::store::reason_code::ReasonCode;
use crate::store::state::LoopState;

/// Files named `incident.<seconds>.<code>` in a loop's directory: incidents that could not be
/// written anywhere else. An empty file needs no free blocks, only a directory entry.
const FALLBACK_PREFIX: &str = "incident.";

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
            Some(detail) => format!("a stop was let through unjudged: {detail}"),
            None => format!("a stop was let through unjudged ({})", entry.reason),
        };
        Incident { code: entry.reason, at: entry.time, what, recorded: true, file: None }
    }

    /// Records that a stop was let through when nothing else could be written: an empty file
    /// named after the time and the code, in the loop's directory.
    pub(crate) fn record_fallback(dir: &Path, code: ReasonCode, at: Timestamp) {
        let _ = fs::File::create(dir.join(format!("{FALLBACK_PREFIX}{}.{code}", at.as_second())));
    }

    /// The incidents recorded as fallback files in `dir`, oldest first.
    pub(crate) fn fallbacks(dir: &Path) -> Vec<Incident> {
        let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
        let mut found: Vec<Incident> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let (seconds, code) = name.strip_prefix(FALLBACK_PREFIX)?.split_once('.')?;
                let at = Timestamp::from_second(seconds.parse().ok()?).ok()?;
                let code: ReasonCode = serde_json::from_value(serde_json::Value::String(code.into())).ok()?;
                let what = format!(
                    "a stop was let through unjudged and could not even be written to the ledger ({code}; \
                     most likely the disk was full)"
                );
                Some(Incident { code, at, what, recorded: false, file: Some(entry.path()) })
            })
            .collect();
        found.sort_by_key(|incident| incident.at);
        found
    }

    /// Removes the fallback file this incident came from, once it is recorded.
    pub(crate) fn forget_fallback(&self) {
        if let Some(file) = &self.file {
            let _ = fs::remove_file(file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_records_are_found_again_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let at: Timestamp = "2026-11-22T03:00:00Z".parse().unwrap();
        Incident::record_fallback(dir.path(), ReasonCode::RecordFailed, at);
        fs::write(dir.path().join("incident.x.y"), "").unwrap();
        let found = Incident::fallbacks(dir.path());
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].code, found[0].at, found[0].recorded), (ReasonCode::RecordFailed, at, false));
        assert!(found[0].what.contains("most likely the disk was full"), "{}", found[0].what);
        found[0].forget_fallback();
        assert!(Incident::fallbacks(dir.path()).is_empty());
    }
}
