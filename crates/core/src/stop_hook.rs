//! The turn-end hook: read the event, find the session's loop, run verify, decide, record.
//!
//! Fail closed on the model, open on ourselves: whatever goes wrong on for-loop's side (bad
//! input, unreadable state, a full disk, a stuck lock) allows the stop with one line saying what
//! happened and what to do. Only a judged, recorded verdict ever blocks.

use std::io::Read;
use std::thread;
use std::time::Duration;

use crate::decision::{self, Gate, StopFacts, Verdict};
use crate::environment::Environment;
use crate::event::{self, EventError, StopEvent};
use crate::hook_response::HookResponse;
use crate::host::Host;
use crate::ledger::{LedgerEntry, VerifyRecord};
use crate::lock::StateLock;
use crate::reason_code::ReasonCode;
use crate::state::LoopState;
use crate::store::{LoopPaths, Store};
use crate::transcript;
use crate::verify::VerifySpec;

/// The longest the hook waits for a loop's lock before giving up on this stop.
pub const LOCK_WAIT: Duration = Duration::from_secs(3);
/// Hosts may write the transcript's last lines after the hook starts; one retry after this.
const TRANSCRIPT_RETRY: Duration = Duration::from_millis(1_500);

/// Handles one turn-end event of `host`.
pub fn run(env: &Environment, host: Host, stdin: impl Read) -> HookResponse {
    let event = event::read_bounded(stdin)
        .and_then(|bytes| event::parse_object(&bytes))
        .and_then(|object| host.parse_stop(&object));
    match event {
        Ok(event) => judge(env, &event),
        Err(EventError::Foreign(why)) => {
            eprintln!("for-loop: {why}; nothing to do");
            HookResponse::allow()
        }
        Err(error) => unreadable_event(env, &error),
    }
}

/// Judges a normalised stop event against the session's loop.
pub fn judge(env: &Environment, event: &StopEvent) -> HookResponse {
    let Ok(store) = Store::locate(env) else {
        return HookResponse::allow();
    };
    let paths = store.paths(&event.session_id);
    // The path every plain session takes: one failed stat.
    if !paths.state.exists() {
        return HookResponse::allow();
    }
    let state = {
        let _lock = match StateLock::acquire(&paths.lock, LOCK_WAIT) {
            Ok(lock) => lock,
            Err(e) => {
                return fault(
                    &paths,
                    None,
                    event,
                    env,
                    &format!("{e}. This stop is allowed; the loop resumes at the next one."),
                );
            }
        };
        match paths.load() {
            Ok(Some(state)) => state,
            Ok(None) => return HookResponse::allow(),
            Err(e) => {
                return fault(
                    &paths,
                    None,
                    event,
                    env,
                    &format!(
                        "{e}. This stop is allowed and the file is kept for inspection: fix it, or \
                         delete it to end the loop."
                    ),
                );
            }
        }
    };
    match decision::gate(&state, &event.session_id) {
        Gate::Ended => return HookResponse::allow(),
        Gate::Foreign => {
            record(&paths, &state, event, env, ReasonCode::ForeignSession, None);
            return HookResponse::allow();
        }
        Gate::Judge => {}
    }

    let last_message = last_message(&state, event);
    let outcome = match &state.meta.settings.verify {
        None => None,
        Some(command) => {
            let spec = VerifySpec {
                command: command.clone(),
                cwd: state.meta.cwd.clone(),
                timeout: Duration::from_secs(state.meta.settings.verify_timeout_secs),
            };
            match spec.run() {
                Ok(outcome) => Some(outcome),
                Err(e) => {
                    return fault(
                        &paths,
                        Some(&state),
                        event,
                        env,
                        &format!("{e}. This stop is allowed; /cancel-loop ends the loop."),
                    );
                }
            }
        }
    };

    let _lock = match StateLock::acquire(&paths.lock, LOCK_WAIT) {
        Ok(lock) => lock,
        Err(e) => {
            return fault(&paths, Some(&state), event, env, &format!("{e}. This stop is allowed."));
        }
    };
    // The loop may have been cancelled, or replaced, while verify ran.
    match paths.load() {
        Ok(Some(now))
            if now.meta.loop_id == state.meta.loop_id
                && now.meta.iteration == state.meta.iteration
                && now.is_active() => {}
        _ => return HookResponse::allow(),
    }
    let decision = decision::decide(
        &state,
        StopFacts {
            last_message: last_message.as_deref(),
            verify: outcome.as_ref(),
            now: env.now,
            state_path: &paths.state,
        },
    );
    if let Err(e) = paths.save(&decision.next) {
        return fault(
            &paths,
            Some(&state),
            event,
            env,
            &format!("{e}. This stop is allowed; free some disk space."),
        );
    }
    let verdict = if matches!(decision.verdict, Verdict::Block { .. }) { "block" } else { "allow" };
    if let Err(e) = (LedgerEntry {
        time: env.now,
        loop_id: state.meta.loop_id.clone(),
        iteration: state.meta.iteration,
        max_iterations: state.meta.settings.max_iterations,
        decision: verdict.into(),
        reason: decision.code,
        stop_hook_active: Some(event.stop_hook_active),
        verify: outcome.as_ref().map(VerifyRecord::of),
        promise_kept: decision.promise_kept,
        detail: None,
    })
    .append_to(&paths.ledger)
    {
        return HookResponse::allow_with(format!(
            "for-loop: could not write the ledger {} ({e}); this stop is allowed. Free some disk space.",
            paths.ledger.display()
        ));
    }
    match decision.verdict {
        Verdict::Block { reason } => HookResponse::block(reason, decision.system_message),
        Verdict::Allow => HookResponse::allow_with(format!(
            "{}\n  ledger: {}",
            decision.system_message,
            paths.ledger.display()
        )),
    }
}

/// The agent's final message: from the event, else from the end of the transcript. Only read
/// when a promise is needed, since the transcript can be large and lag behind.
fn last_message(state: &LoopState, event: &StopEvent) -> Option<String> {
    state.meta.settings.completion_promise.as_ref()?;
    if let Some(message) = event.last_assistant_message.as_ref().filter(|m| !m.is_empty()) {
        return Some(message.clone());
    }
    let path = event.transcript_path.as_ref()?;
    for attempt in 0..2 {
        if attempt > 0 {
            thread::sleep(TRANSCRIPT_RETRY);
        }
        if let Ok(Some(text)) = transcript::last_assistant_text(path) {
            return Some(text);
        }
    }
    None
}

/// The event could not be read. If the session (known from the environment) has an active
/// loop, say so; a plain session hears nothing.
fn unreadable_event(env: &Environment, error: &EventError) -> HookResponse {
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
fn fault(
    paths: &LoopPaths,
    state: Option<&LoopState>,
    event: &StopEvent,
    env: &Environment,
    what: &str,
) -> HookResponse {
    if let Some(state) = state {
        record(paths, state, event, env, ReasonCode::InternalError, Some(what));
    }
    HookResponse::allow_with(format!("for-loop: {what}"))
}

/// Records a stop that was allowed without a verdict on the loop.
fn record(
    paths: &LoopPaths,
    state: &LoopState,
    event: &StopEvent,
    env: &Environment,
    reason: ReasonCode,
    detail: Option<&str>,
) {
    let entry = LedgerEntry {
        time: env.now,
        loop_id: state.meta.loop_id.clone(),
        iteration: state.meta.iteration,
        max_iterations: state.meta.settings.max_iterations,
        decision: "allow".into(),
        reason,
        stop_hook_active: Some(event.stop_hook_active),
        verify: None,
        promise_kept: None,
        detail: detail.map(str::to_string),
    };
    // Best effort: the ledger failing must not turn a fault into a trap.
    let _ = entry.append_to(&paths.ledger);
}
