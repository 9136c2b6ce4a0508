//! `loop-hook cancel`: end this session's loop at once, deterministically.
//!
//! The user's `/cancel-loop` runs this before the model sees anything, so a cancel never depends
//! on the model agreeing to delete a file. Other sessions' loops are untouched. Where the host
//! gives commands no session id, the loop is found by [`Target::here`] instead.

use std::path::PathBuf;

use jiff::Timestamp;

use crate::commands::session::{self, Target};
use crate::host::Origin;
use crate::provenance::claim;
use crate::provenance::{Mutation, origin};
use crate::state::Incident;
use crate::state::ReasonCode;
use crate::state::Receipt;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::state::{LoopState, Status};
use crate::store::Custody;
use crate::store::{LoopPaths, Store, StoreError};
use crate::store::{Notes, Transaction};
use crate::support::Environment;
use crate::support::Outcome;
use crate::verdict::message::headline;

pub(crate) fn run(env: &Environment, target: &Target, origin: Origin) -> Outcome {
    cancel(env, target, origin, true)
}

/// `again`: whether a loop that vanished while we waited for its lock is looked for once more.
/// A loop waiting to be claimed moves to its conversation's directory when claimed.
fn cancel(env: &Environment, target: &Target, origin: Origin, again: bool) -> Outcome {
    let paths = match target.loop_paths(env) {
        Ok(Some(paths)) => paths,
        Ok(None) => return Outcome::ok("for-loop: no loop in this session; nothing to cancel."),
        Err(refusal) => return refusal,
    };
    // Refused before the lock: inside a sandbox the agent's shell cannot even open the lock file,
    // and the refusal is the message it should get.
    if let Some(refusal) = refused_by_origin(env, &paths, origin) {
        return refusal;
    }
    let transaction = match session::locked(&paths, "cancel") {
        Ok(transaction) => transaction,
        Err(refusal) => return refusal,
    };
    // The loop as last committed: a state changed behind for-loop's back is restored first, so
    // the cancel ends the real loop and its last good copy cannot bring it back.
    let (mut state, noticed) = match transaction.read(env.now) {
        Ok(Custody::Loop { state, incidents }) => (state, incidents),
        Ok(Custody::Untrusted { state, why }) => {
            (state, vec![Incident::new(ReasonCode::StateTampered, env.now, why)])
        }
        Ok(Custody::None) if again && target.session_id(env).is_none() => {
            drop(transaction);
            return cancel(env, target, origin, false);
        }
        Ok(Custody::None) => return Outcome::ok("for-loop: no loop in this session; nothing to cancel."),
        Err(e) => return end_unreadable(env, &transaction, &e),
    };
    if state.meta.status != Status::Active {
        return Outcome::ok("for-loop: the loop in this session has already ended; nothing to cancel.");
    }
    let receipt = end_cancelled(&mut state, env.now);
    let lines = cancel_lines(&state, &noticed, &receipt, origin, env.now);
    if let Err(e) = transaction.commit(&state, &lines) {
        return Outcome::refused(format!("for-loop: could not cancel, nothing changed: {e}"));
    }
    origin::after(Notes::Held(&transaction), &state, Mutation::Cancel, origin);
    drop(transaction);
    crate::commands::notify::after_end(&paths, &state, &receipt, env.now);
    let ledger = ledger_after_cancel(env, &paths, &state);
    Outcome::ok(format!(
        "{}{}\nThe loop is over (cancelled {}); the next stop is allowed. Ledger: {}",
        crate::verdict::message::incident_lines(&noticed),
        receipt.render(&headline(&state, ReasonCode::Cancelled, None, false), state.meta.host),
        origin.by_whom(),
        ledger.display()
    ))
}

/// Whether `origin` may not cancel this loop. Judged on the loop as last committed: deleting or
/// editing its state does not get a cancel past this.
fn refused_by_origin(env: &Environment, paths: &LoopPaths, origin: Origin) -> Option<Outcome> {
    let state = crate::store::custody::trusted_state(paths).ok().flatten()?;
    if state.meta.status != Status::Active {
        return None;
    }
    origin::gate(env, Notes::Free(paths), &state, Mutation::Cancel, origin)
}

/// Ends a loop whose state cannot be read. Such a state cannot block either; moving it aside
/// makes that plain.
fn end_unreadable(env: &Environment, transaction: &Transaction<'_>, e: &StoreError) -> Outcome {
    match transaction.set_unreadable_state_aside(env.now) {
        Ok(aside) => Outcome::ok(format!(
            "for-loop: the loop's state was unreadable ({e}); it is moved to {} and the loop is over.",
            aside.display()
        )),
        Err(move_error) => Outcome::refused(format!("for-loop: could not cancel: {e}; {move_error}")),
    }
}

/// Marks `state` ended by a cancel, and returns the receipt it now carries.
fn end_cancelled(state: &mut LoopState, now: Timestamp) -> Receipt {
    state.meta.status = Status::Ended;
    state.meta.outcome = Some(ReasonCode::Cancelled);
    state.meta.updated_at = now;
    state.meta.last_blocked = false;
    let receipt = state.receipt(ReasonCode::Cancelled, now, None);
    state.meta.receipt = Some(receipt.clone());
    receipt
}

/// The ledger lines of a cancel: what custody noticed, then the cancel itself.
fn cancel_lines(
    state: &LoopState,
    noticed: &[Incident],
    receipt: &Receipt,
    origin: Origin,
    now: Timestamp,
) -> Vec<LedgerEntry> {
    let mut lines: Vec<LedgerEntry> = noticed.iter().map(|incident| incident.note(state, now)).collect();
    lines.push(LedgerEntry {
        receipt: Some(receipt.clone()),
        origin: Some(origin),
        ..LedgerEntry::new(state, now, LedgerDecision::Cancel, ReasonCode::Cancelled)
    });
    lines
}

/// Where the cancelled loop's ledger is now. A loop still waiting to be claimed is moved out of
/// the way of the stops that search for it, and its ledger with it.
fn ledger_after_cancel(env: &Environment, paths: &LoopPaths, state: &LoopState) -> PathBuf {
    if state.meta.session_id.is_empty()
        && let (Ok(store), Some(name)) = (Store::locate(env), paths.dir.file_name())
    {
        claim::sweep(&store, env.now);
        let moved = store.root().join("unclaimed").join(name).join("ledger.jsonl");
        if moved.exists() {
            return moved;
        }
    }
    paths.ledger.clone()
}
