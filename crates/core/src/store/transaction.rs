//! One change to a loop, from its lock to its commit: the only way anything writes a loop.
//!
//! A [`Transaction`] takes the loop's lock (waiting at most [`LOCK_WAIT`], then taking over a
//! lock a dead or stuck process left), reads the loop through [`Custody`] (which finishes an
//! interrupted commit and restores a state changed behind for-loop's back, each with its
//! incident), lets the caller decide, and commits the caller's next state with its ledger lines
//! through the [`Journal`] (ledger, state, last good copy, in the order that survives a kill).
//! The lock is held until the transaction is dropped.
//!
//! Every writer (the Stop hook, the prompt hook's commands, claims, confirmations, cancel,
//! resume, rollback, the run driver) goes through here, so a cancel landing mid-judgment is seen
//! by the judgment's second read instead of being overwritten, and the protocol is written once.

use std::io;
use std::time::Duration;

use jiff::Timestamp;
use thiserror::Error;

use crate::store::LoopPaths;
use crate::store::StoreError;
use crate::store::custody::Custody;
use crate::store::incident::Incident;
use crate::store::journal::{CommitError, Journal};
use crate::store::ledger::LedgerEntry;
use crate::store::lock::{LOCK_WAIT, LockError, StateLock};
use crate::store::reason_code::ReasonCode;
use crate::store::state::LoopState;

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
}

impl<'p> Transaction<'p> {
    /// Takes the loop's lock, waiting at most [`LOCK_WAIT`]. Reads nothing: for a change that
    /// creates the loop (a start, a claim).
    pub(crate) fn lock(paths: &'p LoopPaths) -> Result<Transaction<'p>, LockError> {
        Transaction::lock_within(paths, LOCK_WAIT)
    }

    /// [`Transaction::lock`] with a wait of its own, for a caller that must answer sooner.
    pub(crate) fn lock_within(paths: &'p LoopPaths, wait: Duration) -> Result<Transaction<'p>, LockError> {
        Ok(Transaction { paths, lock: StateLock::acquire(&paths.lock, wait)? })
    }

    /// Takes the lock and reads the loop as last committed. A lock that had to be taken over is
    /// one more incident of the loop it guards.
    pub(crate) fn open(
        paths: &'p LoopPaths,
        now: Timestamp,
    ) -> Result<(Transaction<'p>, Custody), OpenError> {
        let transaction = Transaction::lock(paths)?;
        let mut custody = transaction.read(now)?;
        if let (Custody::Loop { incidents, .. }, Some(taken)) = (&mut custody, transaction.taken_over(now)) {
            incidents.insert(0, taken);
        }
        Ok((transaction, custody))
    }

    /// The loop as last committed, read again under the held lock (restored first when
    /// something changed it).
    pub(crate) fn read(&self, now: Timestamp) -> Result<Custody, StoreError> {
        Custody::check(self.paths, now)
    }

    /// The incident of a lock that had to be taken over to open this transaction.
    pub(crate) fn taken_over(&self, now: Timestamp) -> Option<Incident> {
        self.lock.taken_over().map(|what| Incident::new(ReasonCode::LockHeld, now, what))
    }

    /// Commits `next` with `lines`, all or nothing. The lock stays held.
    pub(crate) fn commit(&self, next: &LoopState, lines: &[LedgerEntry]) -> Result<(), CommitError> {
        Journal::commit(self.paths, next, lines)
    }

    /// Appends `entry` to the ledger alone: a note that changes nothing in the state (a forged
    /// stop, a stop let through unjudged).
    pub(crate) fn note(&self, entry: &LedgerEntry) -> io::Result<()> {
        entry.append_to(&self.paths.ledger)
    }

    pub(crate) fn paths(&self) -> &'p LoopPaths {
        self.paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::ledger::LedgerDecision;
    use crate::store::state::tests::sample;

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
