//! The turn-end hook, as the stages it runs:
//!
//! 1. read the event (a host's adapter normalises it; a forged stop is set apart, [`forged`]);
//! 2. open the loop: lock, custody, whether this stop is its to judge ([`open`]);
//! 3. gather the facts with the lock released: the turn, one look at the tree, verify, the same
//!    look after it ([`gather`]);
//! 4. open the loop again and see what changed while verify ran ([`open::reopen`]);
//! 5. decide: [`crate::verdict::decision::decide`], pure, returns the final verdict and words;
//! 6. commit the verdict as decided, through the loop's transaction;
//! 7. effects: lessons, a metric rollback, a plan's boxes, the notification, the answer.
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
mod scope;

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
            if let Some(response) = without_loop(env, host, &event) {
                return response;
            }
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
            if host.caps_blocks_in_a_row()
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

/// The answer to a stop in a session with no loop (no state, no last good copy, none waiting to
/// be claimed), or `None` when there is one to settle, check and judge. Every turn end of every
/// session without a loop takes this path, so it looks once: a session that never had a loop has
/// no directory, hence no state and no notice, and costs two failed stats (the directory, the
/// last good copy).
fn without_loop(env: &Environment, host: Host, event: &StopEvent) -> Option<HookResponse> {
    let Ok(store) = Store::locate(env) else { return Some(HookResponse::allow()) };
    let paths = store.paths(&event.session_id);
    let armed = paths.armed.as_ref().is_some_and(|armed| fs::symlink_metadata(armed).is_ok());
    let dir = fs::symlink_metadata(&paths.dir).is_ok();
    if armed || (dir && paths.state.exists()) || claim::attach(&store, host, event, env.now) {
        return None;
    }
    let response = no_loop(event);
    Some(if dir {
        crate::provenance::origin::with_notices(env, &event.session_id, response)
    } else {
        response
    })
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
    // Looked for again: `loop-hook run` judges without [`without_loop`], and the loop a hook
    // found may have ended since (a cancel the settle carried out).
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
        ..gathered.facts(event, env, &opened.incidents)
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
    // Under the lock: two stops of one loop never set the plan's boxes at once.
    let boxes = plan::tick_boxes(&state, &decision.next, store.root());
    drop(transaction);
    if let Some(receipt) = &decision.receipt {
        crate::commands::notify::after_end(paths, &decision.next, receipt, env.now);
    }
    Ok(with_notice(decision.response(), boxes))
}

/// `response` with `line` for the user, after what it says already.
fn with_notice(mut response: HookResponse, line: Option<String>) -> HookResponse {
    if let Some(line) = line {
        response.system_message = Some(match response.system_message.take().filter(|m| !m.is_empty()) {
            Some(message) => format!("{message}\n{line}"),
            None => line,
        });
    }
    response
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::origin::Notice;

    fn env(home: &std::path::Path) -> Environment {
        let vars = [("FOR_LOOP_HOME".to_string(), home.join("store").display().to_string())];
        Environment::new(vars, home.to_path_buf(), jiff::Timestamp::now())
    }

    fn stop(env: &Environment, session: &str) -> HookResponse {
        let event =
            format!(r#"{{"session_id":"{session}","hook_event_name":"Stop","stop_hook_active":false}}"#);
        run(env, Host::ClaudeCode, event.as_bytes())
    }

    fn event(session: &str) -> StopEvent {
        let object = event::parse_object(format!(r#"{{"session_id":"{session}"}}"#).as_bytes()).unwrap();
        Host::ClaudeCode.parse_stop(&object).unwrap()
    }

    #[test]
    fn a_session_that_never_had_a_loop_is_let_through_and_nothing_is_written() {
        let home = tempfile::tempdir().unwrap();
        let env = env(home.path());
        assert_eq!(stop(&env, "s-1"), HookResponse::allow());
        assert!(!home.path().join("store").exists());
    }

    /// A loop that ended leaves its directory, where a notice can wait for the next stop.
    #[test]
    fn a_session_whose_loop_ended_still_gets_its_notice_once() {
        let home = tempfile::tempdir().unwrap();
        let env = env(home.path());
        let dir = Store::locate(&env).unwrap().paths("s-1").dir;
        fs::create_dir_all(&dir).unwrap();
        Notice::post(&dir, "the loop was cancelled by the agent");
        let told = stop(&env, "s-1");
        assert_eq!(told.block, None);
        assert_eq!(told.system_message.as_deref(), Some("the loop was cancelled by the agent"));
        assert_eq!(stop(&env, "s-1"), HookResponse::allow());
    }

    /// A last good copy without its state is a deleted loop: judged (and restored), never the
    /// quiet path; so is a state file.
    #[test]
    fn a_last_good_copy_or_a_state_is_not_a_session_without_a_loop() {
        let home = tempfile::tempdir().unwrap();
        let env = env(home.path());
        let paths = Store::locate(&env).unwrap().paths("s-1");
        assert!(without_loop(&env, Host::ClaudeCode, &event("s-1")).is_some());
        let armed = paths.armed.clone().unwrap();
        fs::create_dir_all(armed.parent().unwrap()).unwrap();
        fs::write(&armed, "---\n").unwrap();
        assert!(without_loop(&env, Host::ClaudeCode, &event("s-1")).is_none());
        fs::remove_file(&armed).unwrap();
        fs::create_dir_all(&paths.dir).unwrap();
        assert!(without_loop(&env, Host::ClaudeCode, &event("s-1")).is_some());
        fs::write(&paths.state, "---\n").unwrap();
        assert!(without_loop(&env, Host::ClaudeCode, &event("s-1")).is_none());
    }
}
