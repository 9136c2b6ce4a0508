//! `loop-hook cancel`: end this session's loop at once, deterministically.
//!
//! The user's `/cancel-loop` runs this before the model sees anything, so a cancel never depends
//! on the model agreeing to delete a file. Other sessions' loops are untouched. Where the host
//! gives commands no session id, the loop is found by [`Target::here`] instead.

use crate::commands::session::{self, Target};
use crate::host::origin::Origin;
use crate::provenance::claim;
use crate::provenance::origin::{self, Mutation};
use crate::store::Store;
use crate::store::custody::Custody;
use crate::store::incident::Incident;
use crate::store::ledger::{LedgerDecision, LedgerEntry};
use crate::store::reason_code::ReasonCode;
use crate::store::state::Status;
use crate::support::environment::Environment;
use crate::support::outcome::Outcome;
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
    // The loop as last committed: deleting or editing its state does not get a cancel past this.
    if let Ok(Some(state)) = crate::store::custody::trusted_state(&paths)
        && state.meta.status == Status::Active
        && let Some(refusal) = origin::gate(env, &paths, &state, Mutation::Cancel, origin)
    {
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
        // A state we cannot read cannot block either; moving it aside makes that plain.
        Err(e) => {
            let aside = paths.state.with_extension(format!("md.corrupt-{}", env.now.as_second()));
            if let Some(armed) = &paths.armed {
                let _ = crate::store::remove_if_present(armed);
            }
            return match std::fs::rename(&paths.state, &aside) {
                Ok(()) => Outcome::ok(format!(
                    "for-loop: the loop's state was unreadable ({e}); it is moved to {} and the loop is over.",
                    aside.display()
                )),
                Err(move_error) => Outcome::refused(format!("for-loop: could not cancel: {e}; {move_error}")),
            };
        }
    };
    if state.meta.status != Status::Active {
        return Outcome::ok("for-loop: the loop in this session has already ended; nothing to cancel.");
    }
    state.meta.status = Status::Ended;
    state.meta.outcome = Some(ReasonCode::Cancelled);
    state.meta.updated_at = env.now;
    state.meta.last_blocked = false;
    let receipt = state.receipt(ReasonCode::Cancelled, env.now, None);
    state.meta.receipt = Some(receipt.clone());
    let mut lines: Vec<LedgerEntry> = noticed.iter().map(|incident| incident.note(&state, env.now)).collect();
    lines.push(LedgerEntry {
        receipt: Some(receipt.clone()),
        origin: Some(origin),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Cancel, ReasonCode::Cancelled)
    });
    if let Err(e) = transaction.commit(&state, &lines) {
        return Outcome::refused(format!("for-loop: could not cancel, nothing changed: {e}"));
    }
    origin::after(&paths, &state, Mutation::Cancel, origin);
    drop(transaction);
    crate::commands::notify::after_end(&paths, &state, &receipt, env.now);
    let mut ledger = paths.ledger.clone();
    // A loop still waiting to be claimed is moved out of the way of the stops that search for it.
    if state.meta.session_id.is_empty()
        && let (Ok(store), Some(name)) = (Store::locate(env), paths.dir.file_name())
    {
        claim::sweep(&store, env.now);
        let moved = store.root().join("unclaimed").join(name).join("ledger.jsonl");
        if moved.exists() {
            ledger = moved;
        }
    }
    Outcome::ok(format!(
        "{}{}\nThe loop is over (cancelled {}); the next stop is allowed. Ledger: {}",
        crate::verdict::message::incident_lines(&noticed),
        receipt.render(&headline(&state, ReasonCode::Cancelled, None, false), state.meta.host),
        origin.by_whom(),
        ledger.display()
    ))
}
