//! Our own faults at a stop, and stops let through unjudged: each allowed with one line that says
//! what happened and what to do, and recorded so that the next judged stop tells it again.

use std::io::Read;

use crate::host::HookResponse;
use crate::host::Host;
use crate::host::{EventError, StopEvent, event};
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::Store;
use crate::store::{Noted, Notes};
use crate::support::Environment;
use crate::verdict::{Gate, decision};

/// The hook was started with arguments this binary does not understand: most likely a newer
/// plugin's hook line (a host added after this build) run by an older `loop-hook`. The stop is
/// allowed in the shape of the host named on the line, else the host whose payload this looks
/// like; a session with a running loop is told why its stop was not judged.
pub(crate) fn misinvoked(
    env: &Environment,
    named: Option<Host>,
    problem: &str,
    stdin: impl Read,
) -> (Host, HookResponse) {
    let object = event::read_bounded(stdin).and_then(|bytes| event::parse_object(&bytes)).ok();
    let host = named.or_else(|| object.as_ref().map(Host::guess)).unwrap_or_default();
    eprintln!("for-loop: stop-hook: {problem}; the stop is allowed");
    let Some(event) = object.and_then(|object| host.parse_stop(&object).ok()) else {
        return (host, HookResponse::allow());
    };
    let Ok(store) = Store::locate(env) else { return (host, HookResponse::allow()) };
    let paths = store.paths(&event.session_id);
    let state = match paths.load() {
        Ok(Some(state)) if decision::gate(&state, &event.session_id) == Gate::Judge => state,
        _ => return (host, HookResponse::allow()),
    };
    let what = format!(
        "the hook ran `loop-hook stop-hook` with arguments this loop-hook does not understand \
         ({problem}), so this stop was not judged and is allowed. The plugin is newer than the \
         binary: update loop-hook (`cargo install --locked --path <for-loop checkout>`)"
    );
    (host, fault(Notes::Free(&paths), Some(&state), &event, env, &what))
}

/// The event could not be read. If the session (known from the environment) has an active
/// loop, say so; a plain session hears nothing.
pub(super) fn unreadable_event(env: &Environment, error: &EventError) -> HookResponse {
    let active = env
        .session_id()
        .and_then(|id| Store::locate(env).ok().map(|store| store.paths(id)))
        .and_then(|paths| paths.load().ok().flatten())
        .is_some_and(|state| state.is_active());
    if !active {
        eprintln!("for-loop: {error}; no loop to judge, stop allowed");
        return HookResponse::allow();
    }
    HookResponse::allow_with(format!(
        "for-loop: {error}, so this stop was not judged and is allowed. The host sent something \
         loop-hook does not understand: update for-loop, or report it with the host's version."
    ))
}

/// One of our own faults: record it when there is a loop, and allow with one line.
pub(super) fn fault(
    notes: Notes<'_, '_>,
    state: Option<&LoopState>,
    event: &StopEvent,
    env: &Environment,
    what: &str,
) -> HookResponse {
    if let Some(state) = state {
        record_fault(notes, state, event, env, ReasonCode::InternalError, what);
    }
    HookResponse::allow_with(format!("for-loop: {what}"))
}

/// Records a stop let through unjudged, so that the next judged stop tells it again.
pub(super) fn record_fault(
    notes: Notes<'_, '_>,
    state: &LoopState,
    event: &StopEvent,
    env: &Environment,
    code: ReasonCode,
    what: &str,
) {
    record(notes, state, event, env, code, Some(what));
}

/// Records a stop that was allowed without a verdict on the loop: in the ledger under the loop's
/// lock (through the transaction this hook holds, or taken briefly), else in an incident file
/// beside it; whether either could be written.
pub(super) fn record(
    notes: Notes<'_, '_>,
    state: &LoopState,
    event: &StopEvent,
    env: &Environment,
    reason: ReasonCode,
    detail: Option<&str>,
) -> bool {
    let entry = LedgerEntry {
        stop_hook_active: event.stop_hook_active,
        detail: detail.map(str::to_string),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Allow, reason)
    };
    notes.note(&entry) != Noted::Lost
}
