//! Opening a stop's loop: the loop as last committed (restored when something changed it behind
//! for-loop's back), whether this stop is the loop's to judge, and everything to tell about it;
//! then, after verify, opening it again to see what changed while verify ran.

use crate::host::event::StopEvent;
use crate::host::hook_response::HookResponse;
use crate::provenance::claim;
use crate::state::Incident;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::state::{LoopState, Status};
use crate::store::custody::Custody;
use crate::store::judgment::{Found, Judgment, Marked};
use crate::store::transaction::{Notes, OpenError, Transaction};
use crate::support::environment::Environment;
use crate::verdict::decision::{self, Gate};

use super::context::{Settled, StopContext};
use super::fault::{fault, record};
use super::no_loop;

/// A loop open for judging this stop: its state as read before verify, what to tell about it,
/// and the mark that says a judgment is running (cleared when it is dropped).
pub(super) struct Opened<'p> {
    pub(super) state: LoopState,
    pub(super) incidents: Vec<Incident>,
    pub(super) judging: Marked<'p>,
    /// The settlement of the command the loop awaited, applied to `state`, for the verdict's
    /// commit to record.
    pub(super) settled: Option<Settled>,
}

/// What opening found.
pub(super) enum Opening<'p> {
    /// The loop, to judge.
    Judge(Box<Opened<'p>>),
    /// A new loop this conversation started was claimed in place of its ended one: open again.
    Again,
}

/// Opens the session's loop for this stop. `Err` is the answer when there is nothing to judge:
/// no loop, another session's, an ended one, or a fault of ours.
pub(super) fn open<'p>(stop: &'p StopContext<'_>) -> Result<Opening<'p>, HookResponse> {
    let (env, host, event, paths) = (stop.env, stop.host, stop.event, &stop.paths);
    let (transaction, custody) = match Transaction::open_known(paths, env.now, &stop.known) {
        Ok(opened) => opened,
        Err(OpenError::Lock(e)) => {
            return Err(fault(Notes::Free(paths), None, event, env, &format!("{e}. This stop is allowed.")));
        }
        Err(OpenError::Unreadable(e)) => {
            return Err(fault(
                Notes::Free(paths),
                None,
                event,
                env,
                &format!(
                    "{e}. There is no last good copy to restore it from (the loop is older than \
                     those copies), so this stop is allowed; the file is kept for inspection. \
                     {} moves it aside and ends the loop.",
                    host.commands().cancel
                ),
            ));
        }
    };
    let (state, mut incidents) = match custody {
        Custody::None => return Err(no_loop(event)),
        Custody::Untrusted { state, why } => {
            return Err(match decision::gate(&state, &event.session_id) {
                Gate::Judge => end_untrusted(&transaction, &state, &why, event, env),
                _ => HookResponse::allow(),
            });
        }
        Custody::Loop { state, incidents } => (state, incidents),
    };
    let (state, settled) = stop.settled(state);
    match decision::gate(&state, &event.session_id) {
        // A new loop this conversation started, on a host whose commands cannot name it, may
        // be waiting to replace the ended one.
        Gate::Ended => {
            commit_settled(stop, &transaction, &state, settled);
            drop(transaction);
            return if claim::attach(&stop.store, host, event, env.now) {
                Ok(Opening::Again)
            } else {
                Err(handed_over(&state))
            };
        }
        Gate::Foreign => {
            commit_settled(stop, &transaction, &state, settled);
            for incident in &incidents {
                record(Notes::Held(&transaction), &state, event, env, incident.code, Some(&incident.what));
            }
            record(Notes::Held(&transaction), &state, event, env, ReasonCode::ForeignSession, None);
            return Err(HookResponse::allow());
        }
        Gate::Judge => {}
    }
    // What decides whether for-loop's hooks run, looked at again (issue 32): a change is told
    // and recorded by this stop's commit, and takes this stop's pass away.
    let mut state = state;
    if let Some((incident, now)) = crate::hook::guard_host_config::at_stop(env, &state) {
        incidents.push(incident);
        state.meta.host_config = Some(now);
    }
    // Stops let through unjudged since the last verdict are told again.
    incidents.extend(
        LedgerEntry::since_last_verdict(&paths.ledger, &state.meta.loop_id).iter().map(Incident::from_ledger),
    );
    incidents.extend(Incident::fallbacks(&paths.dir));
    // A judgment of this loop that never finished (its hook was killed), or one still running in
    // another hook process (the hook installed twice: that one answers).
    match Judgment::found(paths, env.now) {
        Found::Running(other) => {
            let what = format!(
                "another for-loop hook (process {}) is judging this stop right now, so this one lets it \
                 through and that one answers; if the hook is installed twice, remove one",
                other.pid
            );
            return Err(fault(Notes::Held(&transaction), Some(&state), event, env, &what));
        }
        Found::Interrupted(judgment) => {
            if judgment.loop_id == state.meta.loop_id {
                incidents.push(judgment.incident(env.now));
            }
            Judgment::clear(paths);
        }
        Found::None => {}
    }
    let judging = Judgment::begin(paths, &state, env.now);
    Ok(Opening::Judge(Box::new(Opened { state, incidents, judging, settled })))
}

/// The answer to a stop of a loop that is over: silence, or, for a loop handed over to
/// `loop-hook run`, one line saying where it went.
fn handed_over(state: &LoopState) -> HookResponse {
    match (&state.meta.handoff, state.meta.outcome) {
        (Some(handoff), Some(ReasonCode::HandedOver)) => {
            HookResponse::allow_with(crate::commands::handoff::stop_line(handoff))
        }
        _ => HookResponse::allow(),
    }
}

/// Commits a settlement alone, for a stop that reaches no verdict to commit it with.
fn commit_settled(
    stop: &StopContext<'_>,
    transaction: &Transaction<'_>,
    state: &LoopState,
    settled: Option<Settled>,
) {
    if settled.is_some() {
        // A failure leaves the command awaiting: the next stop settles it again.
        let _ = transaction.commit(state, &stop.recorded(settled));
    }
}

/// Opens the loop again after verify, and keeps it open for the commit. The state may have been
/// changed meanwhile: by the user (a cancel, a new loop: this stop is then allowed), or behind
/// for-loop's back (restored again, and told).
pub(super) fn reopen<'p>(
    stop: &'p StopContext<'_>,
    state: &mut LoopState,
    incidents: &mut Vec<Incident>,
) -> Result<Transaction<'p>, HookResponse> {
    let (env, event, paths) = (stop.env, stop.event, &stop.paths);
    let transaction = Transaction::lock(paths).map_err(|e| {
        fault(Notes::Free(paths), Some(state), event, env, &format!("{e}. This stop is allowed."))
    })?;
    incidents.extend(transaction.taken_over(env.now));
    match transaction.read_known(env.now, &stop.known).map(|custody| match custody {
        // Read as settled: the command this stop settles is still awaited on disk until its commit.
        Custody::Loop { state: now, incidents } => Custody::Loop { state: stop.settled(now).0, incidents },
        other => other,
    }) {
        Ok(Custody::Loop { state: now, incidents: found })
            if now.meta.loop_id == state.meta.loop_id
                && now.meta.iteration == state.meta.iteration
                && now.is_active() =>
        {
            incidents.extend(found);
            // A command the prompt hook marked meanwhile still awaits its confirmation: the
            // verdict, made from the state read before verify, must not drop the mark.
            state.meta.awaiting = now.meta.awaiting;
            Ok(transaction)
        }
        Ok(Custody::Untrusted { state, why }) => Err(end_untrusted(&transaction, &state, &why, event, env)),
        _ => Err(HookResponse::allow()),
    }
}

/// Ends a loop whose state no trusted copy vouches for: its settings may be the agent's, so
/// neither judging by them nor going on is safe. The user is told, and the receipt says tampered.
pub(super) fn end_untrusted(
    transaction: &Transaction<'_>,
    state: &LoopState,
    why: &str,
    event: &StopEvent,
    env: &Environment,
) -> HookResponse {
    let mut next = state.clone();
    next.meta.status = Status::Ended;
    next.meta.outcome = Some(ReasonCode::StateTampered);
    next.meta.updated_at = env.now;
    next.meta.last_blocked = false;
    let receipt = next.receipt(ReasonCode::StateTampered, env.now, None);
    next.meta.receipt = Some(receipt.clone());
    let entry = LedgerEntry {
        stop_hook_active: event.stop_hook_active,
        detail: Some(why.to_string()),
        receipt: Some(receipt.clone()),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Allow, ReasonCode::StateTampered)
    };
    let recorded = match transaction.commit(&next, &[entry]) {
        Ok(()) => format!("ledger: {}", transaction.paths().ledger.display()),
        Err(e) => format!("this could not be recorded: {e}"),
    };
    let headline = format!(
        "for-loop: {why}. for-loop cannot tell what the loop's settings really were, so the loop is \
         over: ended as tampered, not verified. If it was not you, it was the agent; start the loop \
         again with the for-loop command."
    );
    HookResponse::allow_with(format!("{}\n  {recorded}", receipt.render(&headline, state.meta.host)))
}
