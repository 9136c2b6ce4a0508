//! `loop-hook cancel`: end this session's loop at once, deterministically.
//!
//! The user's `/cancel-loop` runs this before the model sees anything, so a cancel never depends
//! on the model agreeing to delete a file. Other sessions' loops are untouched.

use crate::environment::Environment;
use crate::ledger::LedgerEntry;
use crate::lock::StateLock;
use crate::message::headline;
use crate::outcome::Outcome;
use crate::reason_code::ReasonCode;
use crate::receipt::Receipt;
use crate::state::Status;
use crate::stop_hook::LOCK_WAIT;
use crate::store::Store;

pub fn run(env: &Environment, session_id: Option<&str>) -> Outcome {
    let Some(session_id) = session_id.filter(|s| !s.is_empty()).or(env.session_id()) else {
        return Outcome::refused("for-loop: no session id: pass --session ID (the host's session id).");
    };
    let store = match Store::locate(env) {
        Ok(store) => store,
        Err(e) => return Outcome::refused(format!("for-loop: {e}")),
    };
    let paths = store.paths(session_id);
    if !paths.state.exists() {
        return Outcome::ok("for-loop: no loop in this session; nothing to cancel.");
    }
    let _lock = match StateLock::acquire(&paths.lock, LOCK_WAIT) {
        Ok(lock) => lock,
        Err(e) => return Outcome::refused(format!("for-loop: could not cancel: {e}")),
    };
    let mut state = match paths.load() {
        Ok(Some(state)) => state,
        Ok(None) => return Outcome::ok("for-loop: no loop in this session; nothing to cancel."),
        // A state we cannot read cannot block either; moving it aside makes that plain.
        Err(e) => {
            let aside = paths.state.with_extension(format!("md.corrupt-{}", env.now.as_second()));
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
    let receipt = Receipt::of(&state, ReasonCode::Cancelled, env.now, None);
    state.meta.receipt = Some(receipt.clone());
    if let Err(e) = paths.save(&state) {
        return Outcome::refused(format!("for-loop: could not cancel: {e}"));
    }
    let _ = LedgerEntry {
        receipt: Some(receipt.clone()),
        ..LedgerEntry::new(&state, env.now, "cancel", ReasonCode::Cancelled)
    }
    .append_to(&paths.ledger);
    Outcome::ok(format!(
        "{}\nThe loop is over; the next stop is allowed. Ledger: {}",
        receipt.render(&headline(&state, ReasonCode::Cancelled, None)),
        paths.ledger.display()
    ))
}
