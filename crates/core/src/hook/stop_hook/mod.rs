//! The turn-end hook, as the stages it runs:
//!
//! 1. read the event (a host's adapter normalises it) and locate the loop store once
//!    ([`context`]); a forged stop is set apart ([`forged`]);
//! 2. open the loop: lock, custody, whether this stop is its to judge ([`open`]);
//! 3. gather every fact the verdict needs with the lock released: the turn, one look at the
//!    tree, verify, the same look after it, then what [`decision::asks`] says is still unknown
//!    ([`gather`]);
//! 4. open the loop again and see what changed while verify ran ([`open::reopen`]);
//! 5. decide: [`crate::verdict::decision::decide`], pure, returns the final verdict and words;
//! 6. commit the verdict as decided, through the loop's transaction;
//! 7. effects: lessons, a metric rollback, a plan's boxes, the notification, the answer.
//!
//! No stage calls back into an earlier one; a stop that must be judged again (a new loop claimed
//! in place of an ended one, a command settled after the judgment read the loop) goes round the
//! one bounded loop in [`StopContext::judge_rounds`]. Fail closed on the model, open on ourselves:
//! whatever goes wrong on for-loop's side (bad input, unreadable state, a full disk, a stuck lock)
//! allows the stop with one line saying what happened and what to do ([`fault`]). Only a judged,
//! recorded verdict ever blocks.

mod background;
mod context;
mod fault;
mod forged;
mod gather;
mod open;
mod plan;
mod review;
mod scope;

use std::fs;
use std::io::Read;

use crate::hook::turn_failure;
use crate::host::HookResponse;
use crate::host::Host;
use crate::host::{EventError, StopEvent, TurnFailure, event};
use crate::provenance::Settlement;
use crate::provenance::claim;
use crate::state::Incident;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::Rhythm;
use crate::store::custody;
use crate::store::{Change, CommitError, Notes, Transaction};
use crate::support::Environment;
use crate::verdict::{Decision, decision};

use context::StopContext;
pub(crate) use fault::misinvoked;
use fault::{fault, record_fault, unreadable_event};
use forged::{Forgery, Seen, forged_stop};
use gather::Gathered;
use open::{Opened, Unjudged};

/// How many times one stop may be judged. A stop is judged again only when a judgment reached no
/// verdict and something changed that: a new loop this conversation started was claimed in place
/// of the ended one, or a command the agent forged (a cancel timed to land before or while verify
/// ran) was undone. Verify runs again only in that second case, which only an attack brings.
const MAX_ROUNDS: usize = 3;

/// Handles one turn-end event of `host`.
pub(crate) fn run(env: &Environment, host: Host, stdin: impl Read) -> HookResponse {
    let object = event::read_bounded(stdin).and_then(|bytes| event::parse_object(&bytes));
    // A turn that ended on an error comes to the same hook: it is told and recorded, not judged.
    if let Ok(object) = &object
        && let Some(failure) = host.parse_failure(object, env.now)
    {
        return failed_turn(env, host, failure);
    }
    let event = object.and_then(|object| host.parse_stop(&object));
    match event {
        // Without a store no loop can exist: the quiet path of every session without one.
        Ok(event) => {
            StopContext::locate(env, host, &event).map_or_else(HookResponse::allow, StopContext::answer)
        }
        Err(EventError::Foreign(why)) => {
            eprintln!("for-loop: {why}; nothing to do");
            HookResponse::allow()
        }
        Err(error) => unreadable_event(env, &error),
    }
}

/// A turn the host ended on an error (its `StopFailure`): a stage of the stop's context, whose
/// record the stop's one commit makes.
fn failed_turn(env: &Environment, host: Host, failure: Result<TurnFailure, EventError>) -> HookResponse {
    let failure = match turn_failure::read(failure) {
        Ok(failure) => failure,
        Err(response) => return response,
    };
    let event = StopEvent { session_id: failure.session_id.clone(), ..StopEvent::default() };
    let Some(stop) = StopContext::locate(env, host, &event) else {
        return turn_failure::nothing_to_record(&failure, "no loop store");
    };
    if !stop.paths.state.exists() {
        return turn_failure::nothing_to_record(&failure, "this session has no loop");
    }
    match turn_failure::record(env, host, &stop.paths, &failure) {
        Ok(failed) => {
            let committed = commit(&stop, &failed.transaction, &failed.change);
            failed.answer(env, &failure, committed)
        }
        Err(response) => response,
    }
}

/// Judges a normalised stop event of `host` against the session's loop, as `loop-hook run` does
/// after each fresh session: no forged-stop checks (the driver itself sent the event) and no
/// commands to settle.
pub(crate) fn judge(env: &Environment, host: Host, event: &StopEvent) -> HookResponse {
    StopContext::locate(env, host, event)
        .map_or_else(HookResponse::allow, |stop| stop.judge_rounds(&Seen::default(), false).0)
}

/// How one judgment of a stop ended.
enum Round {
    /// Judged: the verdict's answer, or a fault of ours met while judging.
    Judged(HookResponse),
    /// No verdict (no loop, another session's, an ended one, one changed while verify ran): the
    /// answer as it stands.
    NotJudged(HookResponse),
    /// A new loop was claimed in place of an ended one: judge again.
    Again,
}

impl StopContext<'_> {
    /// The answer to this stop.
    fn answer(mut self) -> HookResponse {
        if let Some(response) = self.without_loop() {
            return response;
        }
        // A loop command the user never sent (the agent ran the prompt hook itself) is undone
        // before anything reads the loop, so this stop is judged against the loop as the user
        // left it; the undoing is recorded by the stop's own commit.
        self.settlement = Settlement::find(&self.paths, &self.known);
        let response = match forged_stop(&self) {
            // A forged stop is answered without the user's notices: its reader is the agent.
            Forgery::Forged(transaction, change) => {
                if commit(&self, &transaction, &change).is_err() {
                    Incident::record_fallback(&self.paths.dir, ReasonCode::ForgedStop, self.now());
                }
                drop(transaction);
                crate::provenance::confirmation::tell(forged::answer(), self.settled_words())
            }
            Forgery::Judge(seen) => {
                let (response, late) = self.judge_rounds(&seen, true);
                let unconfirmed = match (self.settled_words(), late) {
                    (Some(first), Some(late)) => Some(format!("{first}\n{late}")),
                    (first, late) => first.or(late),
                };
                crate::provenance::confirmation::tell(self.told(&seen, response), unconfirmed)
            }
        };
        if self.host.caps_blocks_in_a_row()
            && let Some(reason) = &response.block
        {
            crate::hook::copilot_block::remember_block(self.env, &self.event.session_id, reason);
        }
        response
    }

    /// Judges this stop, again when a round finds that the loop it is for changed under it, at
    /// most [`MAX_ROUNDS`] times. With `settle`, a command carried out after the settle before
    /// the judgment and before the judgment read the loop (a forged cancel timed to land there)
    /// is settled, and the loop it ended judged again; what settling told comes back with the
    /// answer.
    fn judge_rounds(&self, seen: &Seen, settle: bool) -> (HookResponse, Option<String>) {
        let mut told: Option<String> = None;
        for _ in 0..MAX_ROUNDS {
            let response = match self.judged(seen) {
                Round::Again => continue,
                Round::Judged(response) => return (response, told),
                Round::NotJudged(response) => response,
            };
            let settled = if settle && response.block.is_none() {
                crate::provenance::confirmation::settle_at(&self.paths, self.now(), &self.known).and_then(
                    |settling| {
                        let committed = commit(self, &settling.transaction, &settling.change);
                        settling.told(committed)
                    },
                )
            } else {
                None
            };
            let Some(line) = settled else { return (response, told) };
            told = Some(match told {
                Some(first) => format!("{first}\n{line}"),
                None => line,
            });
        }
        let what = format!(
            "the loop of this session changed {MAX_ROUNDS} times while this stop was being judged (a new \
             loop claimed, or a command undone), so this stop is allowed; the next stop is judged as usual"
        );
        (HookResponse::allow_with(format!("for-loop: {what}.")), told)
    }

    /// The answer to a stop in a session with no loop (no state, no last good copy, none waiting
    /// to be claimed), or `None` when there is one to settle, check and judge. Every turn end of
    /// every session without a loop takes this path, so it looks once: a session that never had
    /// a loop has no directory, hence no state and no notice, and costs two failed stats (the
    /// directory, the last good copy).
    fn without_loop(&self) -> Option<HookResponse> {
        let armed = self.paths.armed.as_ref().is_some_and(|armed| fs::symlink_metadata(armed).is_ok());
        let dir = fs::symlink_metadata(&self.paths.dir).is_ok();
        if armed
            || (dir && self.paths.state.exists())
            || claim::attach(&self.store, self.host, self.event, self.now())
        {
            return None;
        }
        let response = no_loop(self.event);
        Some(if dir {
            crate::provenance::origin::with_notices(self.env, &self.event.session_id, response)
        } else {
            response
        })
    }

    /// The user's notices go with the answer of a stop that came from the end of a turn. A stop
    /// that may have been forged is answered to whoever sent it, perhaps the agent: what it says
    /// is kept for the user's next stop or prompt instead, and their notices wait there too.
    fn told(&self, seen: &Seen, response: HookResponse) -> HookResponse {
        if !seen.gave_way {
            return crate::provenance::origin::with_notices(self.env, &self.event.session_id, response);
        }
        if let Some(message) = &response.system_message {
            crate::provenance::Notice::post(
                &self.paths.dir,
                &format!("for-loop judged a stop that may have been sent by the agent; it said: {message}"),
            );
        }
        response
    }

    /// One judgment of this stop: open, gather, reopen, decide, commit, effects.
    fn judged(&self, seen: &Seen) -> Round {
        // Looked for again: `loop-hook run` judges without [`Self::without_loop`], and the loop a
        // hook found may have ended since (a cancel the settle carried out).
        if !self.has_loop_files() && !claim::attach(&self.store, self.host, self.event, self.now()) {
            return Round::NotJudged(no_loop(self.event));
        }
        let mut opened = match open::open(self) {
            Ok(opened) => *opened,
            Err(unjudged) => return self.unjudged(unjudged),
        };
        // Which host process sent this stop: a handoff takes the loop at once once it has exited.
        crate::provenance::host_process::record(&self.paths.dir, self.host, self.now());
        // The session's own background work in flight: the stop waits for it, unjudged.
        let (rhythm, cut) = match self.background(&mut opened) {
            Ok(judge) => judge,
            Err(round) => return round,
        };
        let mut incidents = std::mem::take(&mut opened.incidents);
        incidents.extend(cut);
        let mut gathered = Gathered::stop(self, &opened.state, seen, incidents);
        // A loop changed while verify ran was not judged: a cancel landed, perhaps one to undo.
        let transaction = match open::reopen(self, &mut opened.state, &mut gathered.incidents) {
            Ok(transaction) => transaction,
            Err(unjudged) => return self.unjudged(unjudged),
        };
        opened.state.meta.rhythm = Rhythm { block_cap: self.host.quiet_block_cap(self.env), ..rhythm };
        let decision = decision::decide(&opened.state, gathered.facts());
        // The command this stop settled goes first, then the verdict's lines.
        let mut lines = self.recorded(opened.settled.take());
        lines.extend(decision.ledger.iter().cloned());
        let change = Change { next: decision.next.clone(), lines, told: gathered.incidents.clone() };
        if let Err(response) = self.finish(&transaction, &opened.state, &change) {
            return Round::Judged(response);
        }
        Round::Judged(self.effects(transaction, opened, &gathered, &decision).unwrap_or_else(|r| r))
    }

    /// A stop that reached no verdict: what it changes (a settled command, a loop ended as
    /// tampered) is committed here, then it is answered.
    fn unjudged(&self, unjudged: Unjudged<'_>) -> Round {
        match unjudged {
            Unjudged::Answer(response) => Round::NotJudged(response),
            Unjudged::Untrusted(transaction, untrusted) => {
                let committed = commit(self, &transaction, &untrusted.change);
                Round::NotJudged(untrusted.answer(&transaction, committed))
            }
            Unjudged::Over(transaction, mut over) => {
                let lines = self.recorded(over.settled.take());
                if !lines.is_empty() {
                    // A failure leaves the command awaiting: the next stop settles it again.
                    let _ = commit(self, &transaction, &Change::new(over.state().clone(), lines));
                }
                over.after(self, transaction)
            }
        }
    }

    /// Commits a judged stop's change (a verdict, or a wait on background work); or changes
    /// nothing and lets the stop through with the fault recorded.
    fn finish(
        &self,
        transaction: &Transaction<'_>,
        state: &LoopState,
        change: &Change,
    ) -> Result<(), HookResponse> {
        if let Err(e) = commit(self, transaction, change) {
            let what = format!(
                "could not record this stop ({e}), so nothing changed. This stop is allowed; the loop \
                 goes on at the next stop. Free some disk space (or raise the file-size limit)"
            );
            record_fault(
                Notes::Held(transaction),
                state,
                self.event,
                self.env,
                ReasonCode::RecordFailed,
                &what,
            );
            return Err(HookResponse::allow_with(format!("for-loop: {what}.")));
        }
        Ok(())
    }

    /// What follows a committed verdict: the project's lessons, a discarded attempt rolled back
    /// (under the lock: it is part of the verdict), then, outside it, the user's notification.
    fn effects(
        &self,
        transaction: Transaction<'_>,
        opened: Opened<'_>,
        gathered: &Gathered,
        decision: &Decision,
    ) -> Result<HookResponse, HookResponse> {
        let Opened { state, judging, .. } = opened;
        // The judgment is over: a later stop must not take a slow notification for one in progress.
        drop(judging);
        if let Some(lesson) = &decision.lesson {
            // Best effort: lessons help the next loop; losing one must not end this one.
            let _ = lesson.append_to(&crate::metric::lessons::path(self.store.root(), &state.meta.cwd));
        }
        let paths = transaction.paths();
        if let Some(n) = decision.rollback_to
            && let Err(e) = gathered.roll_back(&state.meta.loop_id, n)
        {
            return Err(fault(
                Notes::Held(&transaction),
                Some(&decision.next),
                self.event,
                self.env,
                &format!(
                    "the discarded change could not be rolled back to checkpoint {n} ({e}). This stop \
                     is allowed; /for-loop:rollback {n} restores it by hand."
                ),
            ));
        }
        // Under the lock: two stops of one loop never set the plan's boxes at once.
        let boxes = plan::tick_boxes(&state, &decision.next, self.store.root());
        drop(transaction);
        if let Some(receipt) = &decision.receipt {
            crate::commands::notify::after_end(paths, &decision.next, receipt, self.now());
        }
        Ok(with_notice(decision.response(), boxes))
    }
}

/// The one place a stop commits: what one of its stages decided (a verdict, a wait on background
/// work, a forged stop's record, a settled command, a loop ended as tampered, a turn that ended
/// on an error), in the transaction that stage was handed, all or nothing. The stages return
/// their [`Change`] and never commit themselves. The words of a command the change settled go
/// with the answer as recorded only when the commit took them.
fn commit(stop: &StopContext<'_>, transaction: &Transaction<'_>, change: &Change) -> Result<(), CommitError> {
    let committed = change.commit_in(transaction);
    stop.committed(committed.as_ref().err());
    committed
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

    fn without_loop(env: &Environment, event: &StopEvent) -> Option<HookResponse> {
        StopContext::locate(env, Host::ClaudeCode, event).unwrap().without_loop()
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
        let dir = crate::store::Store::locate(&env).unwrap().paths("s-1").dir;
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
        let paths = crate::store::Store::locate(&env).unwrap().paths("s-1");
        assert!(without_loop(&env, &event("s-1")).is_some());
        let armed = paths.armed.clone().unwrap();
        fs::create_dir_all(armed.parent().unwrap()).unwrap();
        fs::write(&armed, "---\n").unwrap();
        assert!(without_loop(&env, &event("s-1")).is_none());
        fs::remove_file(&armed).unwrap();
        fs::create_dir_all(&paths.dir).unwrap();
        assert!(without_loop(&env, &event("s-1")).is_some());
        fs::write(&paths.state, "---\n").unwrap();
        assert!(without_loop(&env, &event("s-1")).is_none());
    }
}
