//! One change to a loop, from its lock to its commit: the only way anything writes a loop.
//!
//! A [`Transaction`] takes the loop's lock (waiting at most [`LOCK_WAIT`], then taking over a
//! lock that a process which has ended or is not for-loop's holds; a for-loop process at work on
//! the loop is waited for, up to [`LIVE_WAIT`], and never taken over), reads the loop through [`Custody`] (which finishes an
//! interrupted commit and restores a state changed behind for-loop's back, each with its
//! incident), lets the caller decide, and commits the caller's next state with its ledger lines
//! through the [`Journal`] (ledger, state, last good copy, in the order that survives a kill).
//! The lock is held until the transaction is dropped.
//!
//! Every writer (the Stop hook, the prompt hook's commands, claims, confirmations, cancel,
//! resume, rollback, the run driver) goes through here, so a cancel landing mid-judgment is seen
//! by the judgment's second read instead of being overwritten, and the protocol is written once.
//!
//! A ledger line that is not part of a change (a failed notification, a stop let through, a
//! refused command) goes through [`note_best_effort`]: under the lock, or, when the lock stays
//! busy, into an incident file the next judged stop tells. Never into the ledger unlocked: a
//! commit being undone removes its own bytes and nobody else's only if nobody else wrote.

use std::io;
use std::time::Duration;

use jiff::Timestamp;
use thiserror::Error;

use crate::state::Incident;
use crate::state::LedgerEntry;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::store::LoopPaths;
use crate::store::StoreError;
use crate::store::custody::{Custody, Known};
pub(crate) use crate::store::journal::CommitError;
use crate::store::journal::Journal;
use crate::store::lock::{LIVE_WAIT, LOCK_WAIT, LockError, StateLock};

/// How long a note outside a transaction waits for the loop's lock. A commit holds it for
/// milliseconds; a holder past this is slow, stuck or hostile, and the note is kept for the next
/// judged stop instead, which is worth more than a hook that waits.
pub(crate) const NOTE_WAIT: Duration = Duration::from_millis(250);

/// Where a note went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Noted {
    /// Appended to the ledger, under the loop's lock.
    Ledger,
    /// Kept in an incident file beside the ledger; the next judged stop tells and records it.
    Kept,
    /// Neither could be written (no loop directory, or no room even for a file name).
    Lost,
}

/// Why a transaction could not be opened.
#[derive(Debug, Error)]
pub(crate) enum OpenError {
    /// The lock could not be taken, even by taking it over.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The state cannot be read and no last good copy is left to restore it from.
    #[error(transparent)]
    Unreadable(#[from] StoreError),
}

/// A loop held for one change. Dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct Transaction<'p> {
    paths: &'p LoopPaths,
    lock: StateLock,
    /// What of the store was opened to other users and made private by this transaction.
    tightened: Option<String>,
}

impl<'p> Transaction<'p> {
    /// Takes the loop's lock, waiting at most [`LOCK_WAIT`]. Reads nothing: for a change that
    /// creates the loop (a start, a claim).
    pub(crate) fn lock(paths: &'p LoopPaths) -> Result<Transaction<'p>, LockError> {
        Transaction::lock_within(paths, LOCK_WAIT)
    }

    /// [`Transaction::lock`] with a wait of its own, for a caller that must answer sooner.
    pub(crate) fn lock_within(paths: &'p LoopPaths, wait: Duration) -> Result<Transaction<'p>, LockError> {
        let tightened = tighten_store(paths);
        // The loop's folder before its lock file: the lock would create it with the umask's mode.
        let _ = crate::store::private::create_dir_all(&paths.dir);
        let lock = StateLock::acquire(&paths.lock, wait, LIVE_WAIT.max(wait))?;
        let _ = crate::store::private::restrict(&paths.lock);
        Ok(Transaction { paths, lock, tightened })
    }

    /// Takes the lock and reads the loop as last committed. A lock that had to be taken over is
    /// one more incident of the loop it guards.
    pub(crate) fn open(
        paths: &'p LoopPaths,
        now: Timestamp,
    ) -> Result<(Transaction<'p>, Custody), OpenError> {
        Transaction::open_known(paths, now, &Known::default())
    }

    /// [`Transaction::open`], parsing only state texts `known` has not read.
    pub(crate) fn open_known(
        paths: &'p LoopPaths,
        now: Timestamp,
        known: &Known,
    ) -> Result<(Transaction<'p>, Custody), OpenError> {
        let transaction = Transaction::lock(paths)?;
        let mut custody = transaction.read_known(now, known)?;
        if let (Custody::Loop { incidents, .. }, Some(taken)) = (&mut custody, transaction.taken_over(now)) {
            incidents.insert(0, taken);
        }
        // Recorded at once, as a caller may record no incident; told by the stop that tells them.
        if let (Custody::Loop { state, incidents }, Some(what)) = (&mut custody, &transaction.tightened) {
            let mut incident = Incident::new(ReasonCode::StoreTightened, now, what.clone());
            incident.recorded = transaction.note_or_keep(&incident.note(state, now)) != Noted::Lost;
            incidents.push(incident);
        }
        Ok((transaction, custody))
    }

    /// The loop as last committed, read again under the held lock (restored first when
    /// something changed it).
    pub(crate) fn read(&self, now: Timestamp) -> Result<Custody, StoreError> {
        self.read_known(now, &Known::default())
    }

    /// [`Transaction::read`], parsing only state texts `known` has not read.
    pub(crate) fn read_known(&self, now: Timestamp, known: &Known) -> Result<Custody, StoreError> {
        Custody::check(self.paths, now, known)
    }

    /// The incident of a lock that had to be taken over to open this transaction.
    pub(crate) fn taken_over(&self, now: Timestamp) -> Option<Incident> {
        self.lock.taken_over().map(|what| Incident::new(ReasonCode::LockHeld, now, what))
    }

    /// Commits `next` with `lines`, all or nothing. The lock stays held.
    pub(crate) fn commit(&self, next: &LoopState, lines: &[LedgerEntry]) -> Result<(), CommitError> {
        Journal::commit(self.paths, next, lines)
    }

    /// Appends `entry` to the ledger alone (a note that changes nothing in the state: a stop let
    /// through unjudged), or, when the ledger cannot be written, keeps it for the next judged
    /// stop.
    pub(crate) fn note_or_keep(&self, entry: &LedgerEntry) -> Noted {
        append_or_keep(self.paths, entry)
    }

    /// Moves aside a state that cannot be read and has no last good copy to restore it from,
    /// with any copy left of it, so that the loop is over (a cancel of a broken loop, a start
    /// in its place); returns where it went.
    pub(crate) fn set_unreadable_state_aside(&self, now: Timestamp) -> io::Result<std::path::PathBuf> {
        let aside = self.paths.state.with_extension(format!("md.corrupt-{}", now.as_second()));
        if let Some(armed) = &self.paths.armed {
            let _ = crate::store::remove_if_present(armed);
        }
        std::fs::rename(&self.paths.state, &aside)?;
        Ok(aside)
    }

    /// Moves the ledger of a loop waiting to be claimed (held by `waiting`) to this
    /// transaction's loop, which claims it.
    pub(crate) fn adopt_ledger(&self, waiting: &Transaction<'_>) -> io::Result<()> {
        if waiting.paths.ledger.exists() {
            std::fs::rename(&waiting.paths.ledger, &self.paths.ledger)?;
        }
        Ok(())
    }

    /// Begins this transaction's loop with a copy of the ledger of `from` (both held): a loop
    /// handed over from `from` keeps one ledger, what it recorded there and then what it records
    /// here. Whatever this loop's ledger held is replaced, so a handoff tried again copies afresh.
    pub(crate) fn copy_ledger_from(&self, from: &Transaction<'_>) -> io::Result<()> {
        std::fs::create_dir_all(&self.paths.dir)?;
        let bytes: Vec<u8> = crate::store::read_regular(&from.paths.ledger, u64::MAX)?.unwrap_or_default();
        crate::store::write_atomic(&self.paths.ledger, &bytes, true)
    }

    pub(crate) fn paths(&self) -> &'p LoopPaths {
        self.paths
    }
}

/// What one stage of a hook run changes in its loop: the state it leaves, the ledger lines that
/// record it, and the incidents those lines tell (their kept copies are forgotten once the change
/// is committed). A stage returns it instead of committing, so that a hook run commits what its
/// stages decided once, in the one place that holds its transaction.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub(crate) next: LoopState,
    pub(crate) lines: Vec<LedgerEntry>,
    pub(crate) told: Vec<Incident>,
}

impl Change {
    pub(crate) fn new(next: LoopState, lines: Vec<LedgerEntry>) -> Change {
        Change { next, lines, told: Vec::new() }
    }

    /// Commits this change in `transaction`, all or nothing, and forgets the kept copies of the
    /// incidents it told. For the one owner of a hook run's commit.
    pub(crate) fn commit_in(&self, transaction: &Transaction<'_>) -> Result<(), CommitError> {
        transaction.commit(&self.next, &self.lines)?;
        self.told.iter().for_each(Incident::forget_fallback);
        Ok(())
    }
}

/// Where code that may run inside a transaction writes its notes: the transaction its caller
/// holds is handed down, never found again (a second take of the lock would wait on itself).
#[derive(Clone, Copy)]
pub(crate) enum Notes<'a, 'p> {
    /// Under the transaction the caller holds.
    Held(&'a Transaction<'p>),
    /// Nobody here holds the loop's lock: [`note_best_effort`].
    Free(&'a LoopPaths),
}

impl Notes<'_, '_> {
    /// Appends `entry` under the lock, or keeps it in an incident file.
    pub(crate) fn note(self, entry: &LedgerEntry) -> Noted {
        match self {
            Notes::Held(transaction) => transaction.note_or_keep(entry),
            Notes::Free(paths) => note_best_effort(paths, entry),
        }
    }
}

/// Appends `entry`, a note that is part of no change, to the loop's ledger under its lock, taken
/// within [`NOTE_WAIT`] and never taken over. For a caller that does not hold the lock: one that
/// does writes through its transaction ([`Notes::Held`]). When the lock stays busy or the ledger
/// cannot be written, the note is kept in an incident file instead, so the next judged stop tells
/// it; it is never appended without the lock.
pub(crate) fn note_best_effort(paths: &LoopPaths, entry: &LedgerEntry) -> Noted {
    match StateLock::try_acquire(&paths.lock, NOTE_WAIT) {
        Some(_held) => append_or_keep(paths, entry),
        None => keep(paths, entry),
    }
}

/// Makes the store (and the sibling that keeps active loops' last good copies) its user's
/// alone when an older for-loop left it open to others; in words, what was done, once.
fn tighten_store(paths: &LoopPaths) -> Option<String> {
    // A loop's folder is `<root>/sessions/<key>` or `<root>/pending/<key>`; its copy is
    // `<root>-armed/sessions/<key>.md`.
    let roots = [
        paths.dir.parent().and_then(std::path::Path::parent),
        paths.armed.as_deref().and_then(|a| a.parent()?.parent()),
    ];
    let mut changed = 0;
    let mut where_ = Vec::new();
    for root in roots.into_iter().flatten() {
        let n = crate::store::private::tighten(root, &["sessions", "pending"]);
        if n > 0 {
            changed += n;
            where_.push(root.display().to_string());
        }
    }
    (changed > 0).then(|| {
        format!(
            "the loop store was readable by other users of this machine; its folders are now 0700 and its \
             files 0600 ({changed} made private in {})",
            where_.join(" and ")
        )
    })
}

/// Appends `entry` (the lock held), or keeps it when the ledger cannot be written.
fn append_or_keep(paths: &LoopPaths, entry: &LedgerEntry) -> Noted {
    match entry.append_to(&paths.ledger) {
        Ok(()) => Noted::Ledger,
        Err(_) => keep(paths, entry),
    }
}

fn keep(paths: &LoopPaths, entry: &LedgerEntry) -> Noted {
    if Incident::keep_fallback(&paths.dir, entry) { Noted::Kept } else { Noted::Lost }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LedgerDecision;
    use crate::state::sample;
    use crate::store::Store;

    fn now() -> Timestamp {
        "2026-11-22T03:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_commit_is_read_back_by_the_next_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().to_path_buf());
        let paths = store.paths("s1");
        let state = sample();
        {
            let transaction = Transaction::lock(&paths).unwrap();
            let started = LedgerEntry::new(&state, now(), LedgerDecision::Start, ReasonCode::Started);
            transaction.commit(&state, &[started]).unwrap();
        }
        let (_transaction, custody) = Transaction::open(&paths, now()).unwrap();
        match custody {
            Custody::Loop { state: read, incidents } => {
                assert_eq!(read, state);
                assert!(incidents.is_empty(), "{incidents:?}");
            }
            other => panic!("expected the loop, got {other:?}"),
        }
    }

    #[test]
    fn a_second_transaction_waits_for_the_first_and_then_takes_it_over_with_an_incident() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().to_path_buf());
        let paths = store.paths("s1");
        let state = sample();
        let first = Transaction::lock(&paths).unwrap();
        first.commit(&state, &[]).unwrap();
        let second = Transaction::lock_within(&paths, Duration::from_millis(50)).unwrap();
        let incident = second.taken_over(now()).expect("the held lock was taken over");
        assert_eq!(incident.code, ReasonCode::LockHeld);
        drop(first);
    }

    fn notify_failed(state: &LoopState) -> LedgerEntry {
        LedgerEntry {
            detail: Some("notify `x` failed: exit 3".into()),
            ..LedgerEntry::new(state, now(), LedgerDecision::Note, ReasonCode::NotifyFailed)
        }
    }

    #[test]
    fn a_best_effort_note_is_appended_under_a_free_lock() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().to_path_buf()).paths("s1");
        let state = sample();
        Transaction::lock(&paths).unwrap().commit(&state, &[]).unwrap();
        assert_eq!(note_best_effort(&paths, &notify_failed(&state)), Noted::Ledger);
        let lines = LedgerEntry::read_last(&paths.ledger, 10).unwrap();
        assert_eq!(lines.iter().map(|e| e.reason).collect::<Vec<_>>(), [ReasonCode::NotifyFailed]);
        assert!(Incident::fallbacks(&paths.dir).is_empty());
    }

    /// Code that runs inside a transaction (a refusal recorded while a resume holds the loop) is
    /// handed it and appends under that hold at once; the same note sent as if the lock were
    /// free would wait on its own hold and be kept, never appended unlocked.
    #[test]
    fn a_note_through_the_held_transaction_is_appended_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().to_path_buf()).paths("s1");
        let state = sample();
        let held = Transaction::lock(&paths).unwrap();
        held.commit(&state, &[]).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(Notes::Held(&held).note(&notify_failed(&state)), Noted::Ledger);
        assert!(started.elapsed() < NOTE_WAIT, "{:?}", started.elapsed());
        assert_eq!(Notes::Free(&paths).note(&notify_failed(&state)), Noted::Kept);
        drop(held);
        assert_eq!(LedgerEntry::read_last(&paths.ledger, 10).unwrap().len(), 1);
        assert_eq!(Incident::fallbacks(&paths.dir).len(), 1);
    }

    /// A lock held elsewhere (another hook committing, or a process squatting on it) is waited
    /// for briefly and never taken over; the note is kept for the next judged stop, not
    /// appended beside a commit that may yet be undone.
    #[test]
    fn a_best_effort_note_under_a_busy_lock_is_kept_for_the_next_stop_not_appended() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().to_path_buf()).paths("s1");
        let state = sample();
        Transaction::lock(&paths).unwrap().commit(&state, &[]).unwrap();
        let ledger_before = std::fs::read(&paths.ledger).unwrap_or_default();
        let squatter = std::fs::OpenOptions::new().write(true).open(&paths.lock).unwrap();
        squatter.lock().unwrap();
        let noted = std::thread::scope(|scope| {
            scope.spawn(|| note_best_effort(&paths, &notify_failed(&state))).join().unwrap()
        });
        assert_eq!(noted, Noted::Kept);
        assert_eq!(std::fs::read(&paths.ledger).unwrap_or_default(), ledger_before, "appended unlocked");
        let kept = Incident::fallbacks(&paths.dir);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].code, ReasonCode::NotifyFailed);
        assert!(kept[0].what.starts_with("notify `x` failed: exit 3"), "{}", kept[0].what);
        drop(squatter);
        // The squatter's lock was not taken over: the next transaction finds its file in place.
        assert_eq!(Transaction::lock(&paths).unwrap().taken_over(now()), None);
    }

    #[test]
    fn a_note_the_ledger_cannot_take_is_kept_for_the_next_stop() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().to_path_buf()).paths("s1");
        let state = sample();
        let held = Transaction::lock(&paths).unwrap();
        held.commit(&state, &[]).unwrap();
        std::fs::create_dir(&paths.ledger).unwrap();
        assert_eq!(held.note_or_keep(&notify_failed(&state)), Noted::Kept);
        assert_eq!(note_best_effort(&paths, &notify_failed(&state)), Noted::Kept);
        assert_eq!(Incident::fallbacks(&paths.dir).len(), 2);
    }

    #[test]
    fn a_state_edited_behind_the_loops_back_is_restored_when_the_transaction_opens() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("store"));
        let paths = store.paths("s1");
        let state = sample();
        Transaction::lock(&paths).unwrap().commit(&state, &[]).unwrap();
        let edited =
            std::fs::read_to_string(&paths.state).unwrap().replace("verify: cargo test", "verify: 'true'");
        std::fs::write(&paths.state, edited).unwrap();
        let (_transaction, custody) = Transaction::open(&paths, now()).unwrap();
        match custody {
            Custody::Loop { state: read, incidents } => {
                assert_eq!(read.meta.settings.verify, state.meta.settings.verify);
                assert!(incidents.iter().any(|i| i.code == ReasonCode::StateTampered), "{incidents:?}");
            }
            other => panic!("expected the restored loop, got {other:?}"),
        }
    }
}
