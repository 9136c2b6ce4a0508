//! The turn-end hook, as the stages it runs:
//!
//! 1. read the event (a host's adapter normalises it; a forged stop is set apart, [`forged`]);
//! 2. open the loop: lock, custody, whether this stop is its to judge ([`open`]);
//! 3. gather the facts with the lock released: the turn, one look at the tree, verify, the same
//!    look after it ([`gather`]);
//! 4. open the loop again and see what changed while verify ran ([`open::reopen`]);
//! 5. decide: [`crate::verdict::decision::decide`], pure, returns the final verdict and words;
//! 6. commit the verdict as decided, through the loop's transaction;
//! 7. effects: lessons, a metric rollback, the notification, the answer.
//!
//! No stage calls back into an earlier one. Fail closed on the model, open on ourselves: whatever
//! goes wrong on for-loop's side (bad input, unreadable state, a full disk, a stuck lock) allows
//! the stop with one line saying what happened and what to do ([`fault`]). Only a judged,
//! recorded verdict ever blocks.

mod after_verify;
mod fault;
mod forged;
mod gather;
mod open;
mod plan;
mod review;

use std::fs;
use std::io::Read;

use crate::host::Host;
use crate::host::event::{self, EventError, StopEvent};
use crate::host::hook_response::HookResponse;
use crate::provenance::claim;
use crate::store::custody;
use crate::store::ledger::LedgerEntry;
use crate::store::reason_code::ReasonCode;
use crate::store::state::Status;
use crate::store::transaction::Transaction;
use crate::store::{LoopPaths, Store};
use crate::support::environment::Environment;
use crate::verdict::decision::{self, Decision};
use crate::verdict::facts::StopFacts;

pub(crate) use fault::misinvoked;
use fault::{fault, record_fault, unreadable_event};
use forged::{Forgery, Seen, forged_stop};
use gather::Gathered;
use open::{Opened, Opening};

/// Handles one turn-end event of `host`.
pub(crate) fn run(env: &Environment, host: Host, stdin: impl Read) -> HookResponse {
    let event = event::read_bounded(stdin)
        .and_then(|bytes| event::parse_object(&bytes))
        .and_then(|object| host.parse_stop(&object));
    match event {
        // A forged stop is answered without the user's notices: its reader is the agent.
        Ok(event) => {
            // A loop command the user never sent (the agent ran the prompt hook itself) is undone
            // first, so this stop is judged against the loop as the user left it.
            let mut unconfirmed = crate::provenance::confirmation::settle(env, &event.session_id);
            let (forged, seen) = match forged_stop(env, &event) {
                Forgery::Answered(response) => (Some(response), Seen::default()),
                Forgery::Judge(seen) => (None, seen),
            };
            let judged = || told(env, &event.session_id, &seen, judge_seen(env, host, &event, &seen));
            let judging = forged.is_none();
            let mut response = forged.unwrap_or_else(&judged);
            // A command carried out after the settle above and before the judgment read the loop
            // (a forged cancel timed to land there) let this stop through: settled now, and a
            // loop it ended is judged again.
            if judging
                && response.block.is_none()
                && let Some(told) = crate::provenance::confirmation::settle(env, &event.session_id)
            {
                unconfirmed = Some(match unconfirmed {
                    Some(first) => format!("{first}\n{told}"),
                    None => told,
                });
                response = judged();
            }
            let response = crate::provenance::confirmation::tell(response, unconfirmed);
            if host == Host::CopilotCli
                && let Some(reason) = &response.block
            {
                crate::hook::copilot_block::remember_block(env, &event.session_id, reason);
            }
            response
        }
        Err(EventError::Foreign(why)) => {
            eprintln!("for-loop: {why}; nothing to do");
            HookResponse::allow()
        }
        Err(error) => unreadable_event(env, &error),
    }
}

/// The user's notices go with the answer of a stop that came from the end of a turn. A stop that
/// may have been forged is answered to whoever sent it, perhaps the agent: what it says is kept
/// for the user's next stop or prompt instead, and their notices wait there too.
fn told(env: &Environment, session_id: &str, seen: &Seen, response: HookResponse) -> HookResponse {
    if !seen.gave_way {
        return crate::provenance::origin::with_notices(env, session_id, response);
    }
    if let (Ok(store), Some(message)) = (Store::locate(env), &response.system_message) {
        crate::provenance::origin::Notice::post(
            &store.paths(session_id).dir,
            &format!("for-loop judged a stop that may have been sent by the agent; it said: {message}"),
        );
    }
    response
}

/// Judges a normalised stop event of `host` against the session's loop.
pub(crate) fn judge(env: &Environment, host: Host, event: &StopEvent) -> HookResponse {
    judge_seen(env, host, event, &Seen::default())
}

/// Judges a stop with what the forged-stop checks saw of it.
fn judge_seen(env: &Environment, host: Host, event: &StopEvent, seen: &Seen) -> HookResponse {
    match judged(env, host, event, seen) {
        Ok(response) | Err(response) => response,
    }
}

/// The stages of a judged stop. `Err` is an early answer: nothing to judge, or a fault of ours.
fn judged(
    env: &Environment,
    host: Host,
    event: &StopEvent,
    seen: &Seen,
) -> Result<HookResponse, HookResponse> {
    let store = Store::locate(env).map_err(|_| HookResponse::allow())?;
    let paths = store.paths(&event.session_id);
    // The path every plain session takes: two failed stats (the state, its last good copy) and,
    // on hosts whose commands cannot name their session, one failed read_dir for loops waiting
    // to be claimed.
    let armed = paths.armed.as_ref().is_some_and(|armed| fs::symlink_metadata(armed).is_ok());
    if !paths.state.exists() && !armed && !claim::attach(&store, host, event, env.now) {
        return Err(no_loop(event));
    }
    let mut opened = match open::open(env, host, event, &store, &paths)? {
        Opening::Judge(opened) => *opened,
        Opening::Again => return Ok(judge_seen(env, host, event, seen)),
    };
    let gathered = Gathered::stop(env, store.root(), &paths, &opened.state, event);
    opened.incidents.extend(gathered.untrusted_status(env.now));
    let transaction = open::reopen(env, &paths, event, &mut opened)?;
    let decision = decide(&opened, &gathered, &paths, event, env, seen);
    commit(&transaction, &opened, &decision, event, env)?;
    effects(env, &store, transaction, opened, &gathered, &decision, event)
}

/// The verdict: the gathered facts with what opening found, through the pure decision.
fn decide(
    opened: &Opened<'_>,
    gathered: &Gathered,
    paths: &LoopPaths,
    event: &StopEvent,
    env: &Environment,
    seen: &Seen,
) -> Decision {
    let state = &opened.state;
    let facts = StopFacts {
        reply: seen.reply(),
        detector_gave_way: seen.gave_way,
        ..gathered.facts(paths, event, env, &opened.incidents)
    };
    // Forged stops are counted only for the receipt of a loop that ends or parks here.
    let forged_stops = match decision::status_after(decision::code(state, &facts)) {
        Status::Active => 0,
        _ => LedgerEntry::forged_stops(&paths.ledger, &state.meta.loop_id),
    };
    decision::decide(state, StopFacts { forged_stops, ..facts })
}

/// Commits the verdict as decided, or changes nothing and lets the stop through.
fn commit(
    transaction: &Transaction<'_>,
    opened: &Opened<'_>,
    decision: &Decision,
    event: &StopEvent,
    env: &Environment,
) -> Result<(), HookResponse> {
    if let Err(e) = transaction.commit(&decision.next, &decision.ledger) {
        let what = format!(
            "could not record this stop ({e}), so nothing changed. This stop is allowed; the loop goes \
             on at the next stop. Free some disk space (or raise the file-size limit)"
        );
        record_fault(transaction.paths(), &opened.state, event, env, ReasonCode::RecordFailed, &what);
        return Err(HookResponse::allow_with(format!("for-loop: {what}.")));
    }
    opened.incidents.iter().for_each(crate::store::incident::Incident::forget_fallback);
    Ok(())
}

/// What follows a committed verdict: the project's lessons, a discarded attempt rolled back
/// (under the lock: it is part of the verdict), then, outside it, the user's notification.
fn effects(
    env: &Environment,
    store: &Store,
    transaction: Transaction<'_>,
    opened: Opened<'_>,
    gathered: &Gathered,
    decision: &Decision,
    event: &StopEvent,
) -> Result<HookResponse, HookResponse> {
    let Opened { state, judging, .. } = opened;
    // The judgment is over: a later stop must not take a slow notification for one in progress.
    drop(judging);
    if let Some(lesson) = &decision.lesson {
        // Best effort: lessons help the next loop; losing one must not end this one.
        let _ = lesson.append_to(&crate::metric::lessons::path(store.root(), &state.meta.cwd));
    }
    let paths = transaction.paths();
    if let Some(n) = decision.rollback_to
        && let Err(e) = gathered.roll_back(&state.meta.loop_id, n)
    {
        return Err(fault(
            paths,
            Some(&decision.next),
            event,
            env,
            &format!(
                "the discarded change could not be rolled back to checkpoint {n} ({e}). This stop is \
                 allowed; /for-loop:rollback {n} restores it by hand."
            ),
        ));
    }
    drop(transaction);
    if let Some(receipt) = &decision.receipt {
        crate::commands::notify::after_end(paths, &decision.next, receipt, env.now);
    }
    Ok(decision.response())
}

/// A session without a loop. On a continuation (a stop hook blocked the last stop) whose
/// transcript shows the block was for-loop's, the loop's files were deleted under it: the user is
/// told, since nothing is left to restore.
pub(super) fn no_loop(event: &StopEvent) -> HookResponse {
    if event.stop_hook_active == Some(true)
        && let Some(transcript) = event.claude_transcript()
        && let Some(words) = custody::tell_deleted_store(transcript)
    {
        return HookResponse::allow_with(words);
    }
    HookResponse::allow()
}
