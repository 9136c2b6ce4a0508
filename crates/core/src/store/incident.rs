//! Something that went wrong around a loop that its user and its agent must hear about: the
//! state changed behind for-loop's back, the lock held by a stranger, a stop that could not be
//! recorded.
//!
//! An incident found at a stop is told at that stop and recorded by its commit. One that let a
//! stop through unjudged is recorded when it happens (in the ledger, or when even that cannot be
//! written, as a file named after it) and told again at the next judged stop, so an allowed stop
//! is never silent. A ledger line written outside a transaction that finds the ledger busy or
//! unwritable is kept in such a file too ([`crate::store::transaction::note_best_effort`]).

use std::fs;
use std::io::Write;
use std::path::Path;

use jiff::Timestamp;

use crate::state::{Incident, LedgerEntry, ReasonCode};

/// Files named `incident.<seconds>.<code>` (then `.<n>` when that name is taken) in a loop's
/// directory: incidents that could not be written anywhere else. The file holds the ledger line
/// that could not be written, when there is one and the disk took it; an empty file needs no
/// free blocks, only a directory entry.
const FALLBACK_PREFIX: &str = "incident.";

/// The largest fallback file read: one ledger line, with room to spare.
const MAX_FALLBACK_BYTES: u64 = 256 << 10;

/// How many fallback files one second and one code may have.
const MAX_FALLBACKS_PER_NAME: u32 = 100;

impl Incident {
    /// Records that a stop was let through when nothing else could be written: an empty file
    /// named after the time and the code, in the loop's directory.
    pub(crate) fn record_fallback(dir: &Path, code: ReasonCode, at: Timestamp) {
        let _ = new_fallback_file(dir, code, at);
    }

    /// Keeps `entry`, a ledger line that could not be appended, in a fallback file, so that the
    /// next judged stop tells and records it. Whether the file could be made; when the disk is
    /// full it may be left empty, and is still told.
    pub(in crate::store) fn keep_fallback(dir: &Path, entry: &LedgerEntry) -> bool {
        let Some(mut file) = new_fallback_file(dir, entry.reason, entry.time) else { return false };
        if let Ok(line) = serde_json::to_vec(entry) {
            let _ = file.write_all(&line);
        }
        true
    }

    /// The incidents recorded as fallback files in `dir`, oldest first.
    pub(crate) fn fallbacks(dir: &Path) -> Vec<Incident> {
        let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
        let mut found: Vec<Incident> =
            entries.flatten().filter_map(|entry| fallback(&entry.path())).collect();
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

/// A new, empty fallback file for `code` at `at`; never one that exists already, nor anything a
/// link at its name points to.
fn new_fallback_file(dir: &Path, code: ReasonCode, at: Timestamp) -> Option<fs::File> {
    let name = format!("{FALLBACK_PREFIX}{}.{code}", at.as_second());
    (0..MAX_FALLBACKS_PER_NAME).find_map(|n| {
        let path = if n == 0 { dir.join(&name) } else { dir.join(format!("{name}.{n}")) };
        crate::store::private::file_options().write(true).create_new(true).open(path).ok()
    })
}

/// The incident a fallback file at `path` records, if it is one.
fn fallback(path: &Path) -> Option<Incident> {
    let name = path.file_name()?.to_str()?;
    let (seconds, rest) = name.strip_prefix(FALLBACK_PREFIX)?.split_once('.')?;
    let code = rest.split('.').next()?;
    let at = Timestamp::from_second(seconds.parse().ok()?).ok()?;
    let code: ReasonCode = serde_json::from_value(serde_json::Value::String(code.into())).ok()?;
    let kept = crate::store::read_regular(path, MAX_FALLBACK_BYTES)
        .ok()
        .flatten()
        .and_then(|bytes| serde_json::from_slice::<LedgerEntry>(&bytes).ok());
    let (code, at, what) = match kept {
        Some(entry) => (entry.reason, entry.time, kept_line(&entry)),
        None => (
            code,
            at,
            format!(
                "a stop was let through unjudged and could not even be written to the ledger ({code}; \
                 most likely the disk was full)"
            ),
        ),
    };
    Some(Incident { code, at, what, recorded: false, file: Some(path.to_path_buf()) })
}

/// What a ledger line kept beside the ledger says, in a sentence.
fn kept_line(entry: &LedgerEntry) -> String {
    let what = match &entry.detail {
        Some(detail) if entry.reason.let_through_unjudged() => {
            format!("a stop was let through unjudged: {detail}")
        }
        Some(detail) => detail.clone(),
        None => format!("{} ({})", entry.decision, entry.reason),
    };
    format!("{what} (kept beside the ledger: its lock was busy or it could not be written)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LedgerDecision;
    use crate::state::sample;

    #[test]
    fn a_kept_ledger_line_is_told_with_its_own_words_and_never_overwrites_another() {
        let dir = tempfile::tempdir().unwrap();
        let at: Timestamp = "2026-11-22T03:00:00Z".parse().unwrap();
        let entry = LedgerEntry {
            detail: Some("notify `x` failed: exit 3".into()),
            ..LedgerEntry::new(&sample(), at, LedgerDecision::Note, ReasonCode::NotifyFailed)
        };
        assert!(Incident::keep_fallback(dir.path(), &entry));
        assert!(Incident::keep_fallback(dir.path(), &entry));
        Incident::record_fallback(dir.path(), ReasonCode::NotifyFailed, at);
        let found = Incident::fallbacks(dir.path());
        assert_eq!(found.len(), 3, "{found:?}");
        let told: Vec<&str> = found.iter().map(|i| i.what.as_str()).collect();
        assert_eq!(
            told.iter().filter(|w| w.starts_with("notify `x` failed: exit 3 (kept beside")).count(),
            2
        );
        assert_eq!(told.iter().filter(|w| w.contains("most likely the disk was full")).count(), 1);
        assert!(found.iter().all(|i| (i.code, i.at, i.recorded) == (ReasonCode::NotifyFailed, at, false)));
        found.iter().for_each(Incident::forget_fallback);
        assert!(Incident::fallbacks(dir.path()).is_empty());
    }

    #[test]
    #[cfg(unix)]
    fn a_link_at_a_fallback_name_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let at: Timestamp = "2026-11-22T03:00:00Z".parse().unwrap();
        let target = dir.path().join("precious");
        fs::write(&target, "keep me").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("incident.1795316400.record_failed")).unwrap();
        Incident::record_fallback(dir.path(), ReasonCode::RecordFailed, at);
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep me");
        assert!(dir.path().join("incident.1795316400.record_failed.1").is_file());
    }

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
