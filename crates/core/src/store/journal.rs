//! The commit protocol: a change to a loop (a judged stop, a cancel, a resume, a start) is
//! either fully recorded, in the ledger and the state and its last good copy, or changes nothing.
//!
//! A commit first writes a journal (what it is about to write, and how long the ledger was), then
//! appends its ledger lines, then replaces the state (the commit point), then the last good copy,
//! then removes the journal. A failure before the commit point undoes the ledger lines and leaves
//! the state as it was, so a full disk never uses up a turn. A process killed midway leaves the
//! journal behind: the next run, holding the loop's lock, finishes the commit when the state was
//! already replaced and undoes it otherwise ([`Journal::recover`]).
//!
//! Undoing or finishing touches only the commit's own bytes: the lines found at the offset the
//! journal names, byte for byte, or the start of them at the ledger's end. A note appended after
//! a killed commit, before the next run recovered it, stays; bytes that cannot be shown to be
//! the commit's own are left as they are.
//!
//! Every ledger line a commit writes carries the digest of the state it leaves, which is how the
//! ledger and the state cross-check each other ([`crate::store::custody`]).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::state::LedgerEntry;
use crate::state::LoopState;
use crate::store::ledger;
use crate::store::{self, LoopPaths};

/// The largest journal read back: a state at its largest plus its ledger lines.
const MAX_JOURNAL_BYTES: u64 = store::MAX_STATE_BYTES * 3;

/// A commit in progress, as written to `journal.json` before anything else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Journal {
    /// The digest of the state this commit writes.
    pub(crate) after: String,
    /// The ledger's length before this commit's lines.
    pub(crate) ledger_len: u64,
    /// This commit's ledger lines, as written.
    pub(crate) lines: String,
    /// The state this commit writes.
    pub(crate) state: String,
    /// Whether that state is an active loop, which keeps a last good copy.
    pub(crate) active: bool,
}

/// Why a commit changed nothing.
#[derive(Debug, Error)]
pub(crate) enum CommitError {
    #[error("could not write the journal {path}: {source}")]
    Journal { path: String, source: io::Error },
    #[error("could not append to the ledger {path}: {source}")]
    Ledger { path: String, source: io::Error },
    #[error("could not write the state {path}: {source}")]
    State { path: String, source: io::Error },
    #[error("could not write the state {path}: {source}")]
    Render { path: String, source: crate::state::StateError },
}

/// What the recovery of an interrupted commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// No commit was interrupted.
    Clean,
    /// The state had been replaced: the ledger lines and the last good copy were completed.
    RolledForward,
    /// The state had not been replaced: the ledger lines were removed.
    RolledBack,
    /// The journal could not be read; it was removed.
    Discarded,
}

/// `sha256:<hex>` of a state file's text.
pub(crate) fn state_digest(text: &str) -> String {
    format!("sha256:{}", crate::support::digest::sha256_hex(text.as_bytes()))
}

/// A loaded machine, for the tests of debug builds: `FOR_LOOP_TEST_SLOW_COMMIT_MS` delays every
/// commit by that many milliseconds, under the lock, before its journal is written. Release
/// builds have no such switch.
#[cfg(debug_assertions)]
fn slowed_for_a_test() {
    if let Some(ms) = std::env::var("FOR_LOOP_TEST_SLOW_COMMIT_MS").ok().and_then(|ms| ms.parse().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

impl Journal {
    /// Commits `next` with `entries` (each stamped with the digest of `next`), for a
    /// [`crate::store::transaction::Transaction`], which holds the loop's lock. On `Err`, nothing changed.
    pub(in crate::store) fn commit(
        paths: &LoopPaths,
        next: &LoopState,
        entries: &[LedgerEntry],
    ) -> Result<(), CommitError> {
        Journal::commit_with(paths, next, entries, ledger::append_lines)
    }

    fn commit_with(
        paths: &LoopPaths,
        next: &LoopState,
        entries: &[LedgerEntry],
        append: fn(&Path, &[u8]) -> io::Result<()>,
    ) -> Result<(), CommitError> {
        let state = next
            .render()
            .map_err(|source| CommitError::Render { path: paths.state.display().to_string(), source })?;
        let after = state_digest(&state);
        let stamped: Vec<LedgerEntry> =
            entries.iter().map(|e| LedgerEntry { state_digest: Some(after.clone()), ..e.clone() }).collect();
        let journal_error =
            |source| CommitError::Journal { path: paths.journal.display().to_string(), source };
        let lines = String::from_utf8(ledger::lines_of(&stamped).map_err(journal_error)?)
            .map_err(|e| journal_error(io::Error::other(e)))?;
        let journal = Journal {
            after,
            ledger_len: fs::metadata(&paths.ledger).map_or(0, |m| m.len()),
            lines,
            state,
            active: next.is_active(),
        };
        store::private::create_dir_all(&paths.dir).map_err(journal_error)?;
        #[cfg(debug_assertions)]
        slowed_for_a_test();
        let bytes = serde_json::to_vec(&journal).map_err(|e| journal_error(io::Error::other(e)))?;
        store::write_atomic(&paths.journal, &bytes, true).map_err(journal_error)?;

        let undo = |error: CommitError| {
            journal.remove_own_lines(&paths.ledger);
            let _ = fs::remove_file(&paths.journal);
            Err(error)
        };
        if !journal.lines.is_empty()
            && let Err(source) = append(&paths.ledger, journal.lines.as_bytes())
        {
            return undo(CommitError::Ledger { path: paths.ledger.display().to_string(), source });
        }
        if let Err(source) = store::write_atomic(&paths.state, journal.state.as_bytes(), true) {
            return undo(CommitError::State { path: paths.state.display().to_string(), source });
        }
        // Past the commit point. Should the copy fail, the journal stays and the next run
        // finishes it.
        if journal.keep_copy(paths).is_ok() {
            let _ = fs::remove_file(&paths.journal);
        }
        Ok(())
    }

    /// Finishes or undoes a commit a killed process left behind. Call it holding the lock.
    pub(crate) fn recover(paths: &LoopPaths) -> Recovery {
        let journal = match store::read_regular(&paths.journal, MAX_JOURNAL_BYTES) {
            Ok(None) => return Recovery::Clean,
            Ok(Some(bytes)) => serde_json::from_slice::<Journal>(&bytes).ok(),
            Err(_) => None,
        };
        let Some(journal) = journal else {
            let _ = store::move_aside(&paths.journal, jiff::Timestamp::now());
            return Recovery::Discarded;
        };
        let on_disk = paths.load_text().ok().flatten().map(|text| state_digest(&text));
        if on_disk.as_deref() == Some(journal.after.as_str()) {
            if journal.complete_own_lines(&paths.ledger).is_err() {
                return Recovery::RolledForward;
            }
            if journal.keep_copy(paths).is_ok() {
                let _ = fs::remove_file(&paths.journal);
            }
            Recovery::RolledForward
        } else {
            journal.remove_own_lines(&paths.ledger);
            let _ = fs::remove_file(&paths.journal);
            Recovery::RolledBack
        }
    }

    /// Removes this commit's lines from the ledger, keeping whatever was appended after them.
    /// Bytes it cannot show to be its own are left.
    fn remove_own_lines(&self, ledger: &Path) {
        let lines = self.lines.as_bytes();
        if lines.is_empty() {
            return;
        }
        match OwnLines::find(ledger, self.ledger_len, lines) {
            OwnLines::All => {
                let _ = cut(ledger, self.ledger_len, lines.len() as u64);
            }
            OwnLines::Start(written) if written > 0 => {
                let _ = cut(ledger, self.ledger_len, written);
            }
            OwnLines::Start(_) | OwnLines::NotThere => {}
        }
    }

    /// Writes what is missing of this commit's lines: the rest of them after a start at the
    /// ledger's end, or all of them at the end when they are not where the journal says (the
    /// state already names them, so the ledger must too).
    fn complete_own_lines(&self, ledger: &Path) -> io::Result<()> {
        let lines = self.lines.as_bytes();
        match OwnLines::find(ledger, self.ledger_len, lines) {
            OwnLines::All => Ok(()),
            OwnLines::Start(written) => {
                let rest = &lines[usize::try_from(written).unwrap_or(lines.len())..];
                if rest.is_empty() { Ok(()) } else { ledger::append_lines(ledger, rest) }
            }
            OwnLines::NotThere => ledger::append_lines(ledger, lines),
        }
    }

    /// Keeps the last good copy of an active loop's state, or removes the copy of one that is
    /// no longer active (an ended loop cannot be ended by tampering).
    fn keep_copy(&self, paths: &LoopPaths) -> io::Result<()> {
        let Some(armed) = &paths.armed else { return Ok(()) };
        if !self.active {
            return store::remove_if_present(armed);
        }
        if let Some(parent) = armed.parent() {
            if fs::symlink_metadata(parent).is_ok_and(|m| !m.is_dir()) {
                store::move_aside(parent, jiff::Timestamp::now())?;
            }
            store::private::create_dir_all(parent)?;
        }
        if fs::symlink_metadata(armed).is_ok_and(|m| !m.is_file()) {
            store::move_aside(armed, jiff::Timestamp::now())?;
        }
        store::write_atomic(armed, self.state.as_bytes(), false)
    }
}

/// Where a commit's lines stand in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnLines {
    /// All of them, at the journal's offset (whatever follows them).
    All,
    /// Their first bytes, this many, at the journal's offset and up to the ledger's end: a write
    /// cut short. Zero when the ledger ends at the offset.
    Start(u64),
    /// Something else stands at the offset, or the ledger is shorter than it.
    NotThere,
}

impl OwnLines {
    fn find(ledger: &Path, offset: u64, lines: &[u8]) -> OwnLines {
        let Ok(mut file) = fs::File::open(ledger) else { return OwnLines::Start(0) };
        let Ok(len) = file.metadata().map(|m| m.len()) else { return OwnLines::NotThere };
        if len < offset || file.seek(SeekFrom::Start(offset)).is_err() {
            return OwnLines::NotThere;
        }
        let mut found = Vec::with_capacity(lines.len());
        if file.take(lines.len() as u64).read_to_end(&mut found).is_err() {
            return OwnLines::NotThere;
        }
        if found == lines {
            OwnLines::All
        } else if offset + found.len() as u64 == len && lines.starts_with(&found) {
            OwnLines::Start(found.len() as u64)
        } else {
            OwnLines::NotThere
        }
    }
}

/// Removes `len` bytes at `offset` from the ledger. At its end that is a truncation; otherwise
/// the ledger is written again without them, through a temporary file, so that a kill midway
/// leaves the old ledger whole.
fn cut(ledger: &Path, offset: u64, len: u64) -> io::Result<()> {
    // Never through a link: custody sets aside a ledger that is not a file.
    let meta = fs::symlink_metadata(ledger)?;
    if !meta.is_file() {
        return Ok(());
    }
    let mut file = fs::File::open(ledger)?;
    if offset + len >= meta.len() {
        return OpenOptions::new().write(true).open(ledger)?.set_len(offset);
    }
    let dir = ledger.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new().prefix(&store::temp_prefix(ledger)).tempfile_in(dir)?;
    io::copy(&mut (&mut file).take(offset), &mut temp)?;
    file.seek(SeekFrom::Start(offset + len))?;
    io::copy(&mut file, &mut temp)?;
    temp.as_file().set_permissions(meta.permissions())?;
    temp.as_file().sync_data()?;
    temp.persist(ledger).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LedgerDecision;
    use crate::state::ReasonCode;
    use crate::state::Status;
    use crate::state::sample;
    use crate::store::Store;
    use crate::store::transaction::{Noted, note_best_effort};

    fn world() -> (tempfile::TempDir, LoopPaths, LoopState) {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().join("for-loop")).paths("s");
        let state = sample();
        Journal::commit(&paths, &state, &[]).unwrap();
        (dir, paths, state)
    }

    fn entry(state: &LoopState) -> LedgerEntry {
        LedgerEntry::new(state, state.meta.updated_at, LedgerDecision::Block, ReasonCode::VerifyFailed)
    }

    fn note(state: &LoopState) -> LedgerEntry {
        LedgerEntry {
            detail: Some("notify `x` failed".into()),
            ..LedgerEntry::new(state, state.meta.updated_at, LedgerDecision::Note, ReasonCode::NotifyFailed)
        }
    }

    fn advanced(state: &LoopState) -> LoopState {
        let mut next = state.clone();
        next.meta.iteration += 1;
        next
    }

    fn ledger_lines(paths: &LoopPaths) -> Vec<LedgerEntry> {
        fs::read_to_string(&paths.ledger)
            .unwrap_or_default()
            .lines()
            // A commit's broken start may stay; readers skip it.
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    #[test]
    fn a_commit_writes_the_lines_the_state_and_its_copy_and_no_journal() {
        let (_dir, paths, state) = world();
        let next = advanced(&state);
        Journal::commit(&paths, &next, &[entry(&state)]).unwrap();
        let text = paths.load_text().unwrap().unwrap();
        assert_eq!(paths.load().unwrap().unwrap(), next);
        assert_eq!(fs::read_to_string(paths.armed.as_ref().unwrap()).unwrap(), text);
        let lines = ledger_lines(&paths);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].state_digest.as_deref(), Some(state_digest(&text).as_str()));
        assert!(!paths.journal.exists());
        assert!(state_digest(&text).starts_with("sha256:") && state_digest(&text).len() == 71);
    }

    /// A full disk (or any failed append) must not use up a turn: the state stays as it was.
    #[test]
    fn a_failed_ledger_write_changes_nothing() {
        fn full(path: &Path, bytes: &[u8]) -> io::Result<()> {
            // Half a line reaches the disk before it fills.
            ledger::append_lines(path, &bytes[..bytes.len() / 2])?;
            Err(io::Error::from_raw_os_error(28))
        }
        let (_dir, paths, state) = world();
        Journal::commit(&paths, &advanced(&state), &[entry(&state)]).unwrap();
        let before = fs::read(&paths.ledger).unwrap();
        let next = advanced(&advanced(&state));
        let err = Journal::commit_with(&paths, &next, &[entry(&state)], full).unwrap_err();
        assert!(err.to_string().contains("could not append to the ledger"), "{err}");
        assert_eq!(paths.load().unwrap().unwrap(), advanced(&state), "the turn was used up");
        assert_eq!(fs::read(&paths.ledger).unwrap(), before, "half a line was left");
        assert!(!paths.journal.exists());
    }

    /// The journal of a commit from `state` to `next`, written as a commit writes it first.
    fn journal_written(paths: &LoopPaths, state: &LoopState, next: &LoopState) -> Journal {
        let journal = Journal {
            after: state_digest(&next.render().unwrap()),
            ledger_len: 0,
            lines: String::from_utf8(ledger::lines_of(&[entry(state)]).unwrap()).unwrap(),
            state: next.render().unwrap(),
            active: true,
        };
        fs::write(&paths.journal, serde_json::to_vec(&journal).unwrap()).unwrap();
        journal
    }

    #[test]
    fn a_commit_killed_before_the_state_is_rolled_back() {
        let (_dir, paths, state) = world();
        let before = paths.load_text().unwrap().unwrap();
        let next = advanced(&state);
        // As if killed right after appending: the journal and the lines are there, the state old.
        let journal = journal_written(&paths, &state, &next);
        ledger::append_lines(&paths.ledger, journal.lines.as_bytes()).unwrap();
        assert_eq!(Journal::recover(&paths), Recovery::RolledBack);
        assert_eq!(paths.load_text().unwrap().unwrap(), before);
        assert!(ledger_lines(&paths).is_empty());
        assert!(!paths.journal.exists());
    }

    #[test]
    fn a_commit_killed_after_the_state_is_rolled_forward() {
        let (_dir, paths, state) = world();
        let next = advanced(&state);
        let journal = journal_written(&paths, &state, &next);
        // The state was replaced, half the line made it: the kill came between.
        ledger::append_lines(&paths.ledger, &journal.lines.as_bytes()[..10]).unwrap();
        paths.save(&next).unwrap();
        assert_eq!(Journal::recover(&paths), Recovery::RolledForward);
        assert_eq!(ledger_lines(&paths).len(), 1);
        assert_eq!(fs::read_to_string(paths.armed.as_ref().unwrap()).unwrap(), next.render().unwrap());
        assert!(!paths.journal.exists());
        assert_eq!(Journal::recover(&paths), Recovery::Clean);
        assert_eq!(ledger_lines(&paths).len(), 1, "recovery twice adds nothing");
    }

    /// A note (a stop let through, a failed notification) written between a killed commit and
    /// the recovery of it: the recovery takes out the commit's lines and nothing else.
    #[test]
    fn an_interrupted_commit_racing_a_note_is_rolled_back_and_the_note_kept() {
        let (_dir, paths, state) = world();
        let before = paths.load_text().unwrap().unwrap();
        let journal = journal_written(&paths, &state, &advanced(&state));
        ledger::append_lines(&paths.ledger, journal.lines.as_bytes()).unwrap();
        assert_eq!(note_best_effort(&paths, &note(&state)), Noted::Ledger);
        assert_eq!(Journal::recover(&paths), Recovery::RolledBack);
        assert_eq!(paths.load_text().unwrap().unwrap(), before);
        let reasons: Vec<ReasonCode> = ledger_lines(&paths).iter().map(|e| e.reason).collect();
        assert_eq!(reasons, [ReasonCode::NotifyFailed], "the commit's line is gone, the note stays");
        assert_eq!(Journal::recover(&paths), Recovery::Clean);
    }

    /// The same race with the commit cut short mid-line: the note is a line of its own, and the
    /// commit's broken start is left rather than cut out of the middle of the ledger.
    #[test]
    fn a_commit_cut_short_mid_line_racing_a_note_loses_the_note_neither_way() {
        for state_replaced in [false, true] {
            let (_dir, paths, state) = world();
            let next = advanced(&state);
            let journal = journal_written(&paths, &state, &next);
            ledger::append_lines(&paths.ledger, &journal.lines.as_bytes()[..10]).unwrap();
            assert_eq!(note_best_effort(&paths, &note(&state)), Noted::Ledger);
            if state_replaced {
                paths.save(&next).unwrap();
            }
            let recovered = Journal::recover(&paths);
            let reasons: Vec<ReasonCode> = ledger_lines(&paths).iter().map(|e| e.reason).collect();
            if state_replaced {
                assert_eq!(recovered, Recovery::RolledForward);
                assert_eq!(reasons, [ReasonCode::NotifyFailed, ReasonCode::VerifyFailed]);
            } else {
                assert_eq!(recovered, Recovery::RolledBack);
                assert_eq!(reasons, [ReasonCode::NotifyFailed]);
            }
        }
    }

    #[test]
    fn an_interrupted_commit_racing_a_note_is_rolled_forward_and_the_note_kept() {
        let (_dir, paths, state) = world();
        let next = advanced(&state);
        let journal = journal_written(&paths, &state, &next);
        ledger::append_lines(&paths.ledger, journal.lines.as_bytes()).unwrap();
        paths.save(&next).unwrap();
        assert_eq!(note_best_effort(&paths, &note(&state)), Noted::Ledger);
        assert_eq!(Journal::recover(&paths), Recovery::RolledForward);
        let reasons: Vec<ReasonCode> = ledger_lines(&paths).iter().map(|e| e.reason).collect();
        assert_eq!(reasons, [ReasonCode::VerifyFailed, ReasonCode::NotifyFailed], "neither lost nor doubled");
        assert!(!paths.journal.exists());
    }

    /// Whatever a failed commit's append left, the undo takes out only the commit's bytes.
    #[test]
    fn a_failed_commit_takes_out_its_own_lines_and_keeps_the_line_after_them() {
        fn then_a_note_then_full(path: &Path, bytes: &[u8]) -> io::Result<()> {
            ledger::append_lines(path, bytes)?;
            ledger::append_lines(path, br#"{"note":"not the commit's"}"#)?;
            ledger::append_lines(path, b"\n")?;
            Err(io::Error::from_raw_os_error(28))
        }
        let (_dir, paths, state) = world();
        Journal::commit(&paths, &advanced(&state), &[entry(&state)]).unwrap();
        let before = fs::read_to_string(&paths.ledger).unwrap();
        let next = advanced(&advanced(&state));
        Journal::commit_with(&paths, &next, &[entry(&state)], then_a_note_then_full).unwrap_err();
        assert_eq!(
            fs::read_to_string(&paths.ledger).unwrap(),
            format!("{before}{{\"note\":\"not the commit's\"}}\n")
        );
        assert_eq!(paths.load().unwrap().unwrap(), advanced(&state));
    }

    /// A ledger that no longer holds the commit's lines where the journal says (replaced, cut
    /// by hand) loses nothing to a rollback.
    #[test]
    fn a_rollback_removes_nothing_it_cannot_show_is_its_own() {
        let (_dir, paths, state) = world();
        let journal = journal_written(&paths, &state, &advanced(&state));
        let other = String::from_utf8(ledger::lines_of(&[note(&state)]).unwrap()).unwrap();
        fs::write(&paths.ledger, format!("{other}{other}")).unwrap();
        assert!(journal.lines.len() > 10);
        assert_eq!(Journal::recover(&paths), Recovery::RolledBack);
        assert_eq!(fs::read_to_string(&paths.ledger).unwrap(), format!("{other}{other}"));
    }

    #[test]
    #[cfg(unix)]
    fn a_rollback_never_cuts_through_a_link_at_the_ledgers_place() {
        let (dir, paths, state) = world();
        let journal = journal_written(&paths, &state, &advanced(&state));
        let elsewhere = dir.path().join("elsewhere.jsonl");
        fs::write(&elsewhere, &journal.lines).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &paths.ledger).unwrap();
        assert_eq!(Journal::recover(&paths), Recovery::RolledBack);
        assert_eq!(fs::read_to_string(&elsewhere).unwrap(), journal.lines);
    }

    #[test]
    fn a_garbled_journal_is_set_aside() {
        let (_dir, paths, _) = world();
        fs::write(&paths.journal, "{not json").unwrap();
        assert_eq!(Journal::recover(&paths), Recovery::Discarded);
        assert!(!paths.journal.exists());
    }

    #[test]
    fn an_ended_loop_keeps_no_copy() {
        let (_dir, paths, state) = world();
        let armed = paths.armed.clone().unwrap();
        assert!(armed.is_file());
        let mut ended = state.clone();
        ended.meta.status = Status::Ended;
        Journal::commit(&paths, &ended, &[]).unwrap();
        assert!(!armed.exists());
    }
}
