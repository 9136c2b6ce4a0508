//! The turn-end hook: read the event, find the session's loop, run verify, decide, record.
//!
//! Fail closed on the model, open on ourselves: whatever goes wrong on for-loop's side (bad
//! input, unreadable state, a full disk, a stuck lock) allows the stop with one line saying what
//! happened and what to do. Only a judged, recorded verdict ever blocks.

use std::io::Read;
use std::thread;
use std::time::Duration;

use crate::claim;
use crate::decision::{self, Gate, StopFacts, Verdict};
use crate::environment::Environment;
use crate::event::{self, EventError, StopEvent};
use crate::hook_response::HookResponse;
use crate::host::Host;
use crate::ledger::{LedgerEntry, VerifyRecord};
use crate::lock::StateLock;
use crate::message;
use crate::reason_code::ReasonCode;
use crate::state::LoopState;
use crate::store::{LoopPaths, Store};
use crate::transcript::{self, Turn};
use crate::verify::VerifySpec;
use crate::worktree::WorkTree;

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
        Ok(event) => judge(env, host, &event),
        Err(EventError::Foreign(why)) => {
            eprintln!("for-loop: {why}; nothing to do");
            HookResponse::allow()
        }
        Err(error) => unreadable_event(env, &error),
    }
}

/// Judges a normalised stop event of `host` against the session's loop.
pub fn judge(env: &Environment, host: Host, event: &StopEvent) -> HookResponse {
    let Ok(store) = Store::locate(env) else {
        return HookResponse::allow();
    };
    let paths = store.paths(&event.session_id);
    // The path every plain session takes: one failed stat (and, on hosts whose commands cannot
    // name their session, one failed read_dir for loops waiting to be claimed).
    if !paths.state.exists() && !claim::attach(&store, host, event, env.now) {
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
        // A new loop this conversation started, on a host whose commands cannot name it, may
        // be waiting to replace the ended one.
        Gate::Ended if claim::attach(&store, host, event, env.now) => return judge(env, host, event),
        Gate::Ended => return HookResponse::allow(),
        Gate::Foreign => {
            record(&paths, &state, event, env, ReasonCode::ForeignSession, None);
            return HookResponse::allow();
        }
        Gate::Judge => {}
    }

    let (last_message, tool_uses) = current_turn(&state, event);
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
    let oracle_changes = state.meta.oracle.changes(&state.meta.cwd);
    let worktree = WorkTree::open(&state.meta.cwd);
    let tree = worktree.fingerprint().ok();

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
    // Only Claude Code's flag is known to mean "continuing because a hook blocked".
    let stop_hook_active = (state.meta.host == Host::ClaudeCode.name()).then_some(event.stop_hook_active);
    let mut decision = decision::decide(
        &state,
        StopFacts {
            last_message: last_message.as_deref(),
            verify: outcome.as_ref(),
            now: env.now,
            state_path: &paths.state,
            oracle_changes: &oracle_changes,
            tree: tree.as_deref(),
            tool_uses,
            stop_hook_active,
        },
    );
    if let Some(receipt) = decision.receipt.as_mut() {
        receipt.files_changed = match (&state.meta.baseline_tree, &tree) {
            (Some(from), Some(to)) => worktree.changed_files(from, to).ok(),
            _ => None,
        };
        let headline = message::headline(&decision.next, decision.code, outcome.as_ref());
        decision.system_message = receipt.render(&headline);
        decision.next.meta.receipt = Some(receipt.clone());
    }
    if let Err(e) = paths.save(&decision.next) {
        return fault(
            &paths,
            Some(&state),
            event,
            env,
            &format!("{e}. This stop is allowed; free some disk space."),
        );
    }
    if decision.harness_override {
        let note = LedgerEntry {
            stop_hook_active: Some(event.stop_hook_active),
            detail: Some("the host ended the turn although the last stop was blocked".into()),
            ..LedgerEntry::new(&state, env.now, "note", ReasonCode::HarnessOverride)
        };
        let _ = note.append_to(&paths.ledger);
    }
    let mut checkpoint_error = None;
    if state.meta.settings.checkpoint
        && let Err(e) = worktree.checkpoint(&state.meta.loop_id, state.meta.iteration)
    {
        checkpoint_error = Some(format!("checkpoint failed: {e}"));
    }
    let verdict = if matches!(decision.verdict, Verdict::Block { .. }) { "block" } else { "allow" };
    let entry = LedgerEntry {
        stop_hook_active: Some(event.stop_hook_active),
        verify: outcome.as_ref().map(VerifyRecord::of),
        promise_kept: decision.promise_kept,
        detail: checkpoint_error,
        oracle_changed: oracle_changes.iter().map(|c| c.path.clone()).collect(),
        receipt: decision.receipt.clone(),
        ..LedgerEntry::new(&state, env.now, verdict, decision.code)
    };
    if let Err(e) = entry.append_to(&paths.ledger) {
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

/// The current turn from the transcript, when the host keeps one: its text (unless the event
/// carries the final message) and its tool calls. The text is retried once when a promise needs
/// it, since hosts may write the transcript's last lines after the hook starts.
fn current_turn(state: &LoopState, event: &StopEvent) -> (Option<String>, Option<usize>) {
    let from_event = event.last_assistant_message.clone().filter(|m| !m.is_empty());
    let needs_text = state.meta.settings.completion_promise.is_some() && from_event.is_none();
    let mut read: Option<Turn> = None;
    if let Some(path) = event.transcript_path.as_ref() {
        for attempt in 0..2 {
            if attempt > 0 {
                thread::sleep(TRANSCRIPT_RETRY);
            }
            read = transcript::current_turn(path).ok().or(read);
            if !needs_text || read.as_ref().is_some_and(|turn| turn.text.is_some()) {
                break;
            }
        }
    }
    let tool_uses = read.as_ref().map(|turn| turn.tool_uses);
    (from_event.or(read.and_then(|turn| turn.text)), tool_uses)
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
        stop_hook_active: Some(event.stop_hook_active),
        detail: detail.map(str::to_string),
        ..LedgerEntry::new(state, env.now, "allow", reason)
    };
    // Best effort: the ledger failing must not turn a fault into a trap.
    let _ = entry.append_to(&paths.ledger);
}
