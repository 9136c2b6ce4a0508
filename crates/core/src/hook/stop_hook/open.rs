//! Opening a stop's loop: the loop as last committed (restored when something changed it behind
//! for-loop's back), whether this stop is the loop's to judge, and everything to tell about it;
//! then, after verify, opening it again to see what changed while verify ran.

use crate::host::HookResponse;
use crate::host::StopEvent;
use crate::provenance::claim;
use crate::state::Incident;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::state::{LoopState, Status};
use crate::store::Custody;
use crate::store::{Change, CommitError, Notes, OpenError, Transaction};
use crate::store::{Found, Judgment, Marked};
use crate::support::Environment;
use crate::verdict::{Gate, decision};

use super::context::{Settled, StopContext};
use super::fault::{fault, record};
use super::{Round, no_loop};

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

/// A stop that reaches no verdict on its loop.
pub(super) enum Unjudged<'p> {
    /// Answered as it stands; nothing to commit.
    Answer(HookResponse),
    /// The loop is over, or another session's: the command it settled (if any) is committed by
    /// the stop, then [`Over::after`] answers.
    Over(Transaction<'p>, Box<Over>),
    /// A loop no trusted copy vouches for, ended as tampered by the stop's commit, then
    /// [`Untrusted::answer`] answers.
    Untrusted(Transaction<'p>, Box<Untrusted>),
}

impl From<HookResponse> for Unjudged<'_> {
    fn from(response: HookResponse) -> Self {
        Unjudged::Answer(response)
    }
}

/// A loop that is over (ended) or another session's, as this stop read it.
pub(super) struct Over {
    state: LoopState,
    /// The settlement of the awaited command, for the stop's commit.
    pub(super) settled: Option<Settled>,
    /// Another session's loop, with what custody found in it; `None`: an ended loop.
    foreign: Option<Vec<Incident>>,
}

impl Over {
    /// The state to commit with a settled command's line.
    pub(super) fn state(&self) -> &LoopState {
        &self.state
    }

    /// What follows the commit (made, failed or not needed): an ended loop may be replaced by a
    /// new one this conversation started (judge again); another session's loop is recorded as
    /// such.
    pub(super) fn after(self, stop: &StopContext<'_>, transaction: Transaction<'_>) -> Round {
        let (env, event) = (stop.env, stop.event);
        let Some(incidents) = self.foreign else {
            drop(transaction);
            // A new loop this conversation started, on a host whose commands cannot name it, may
            // be waiting to replace the ended one.
            return if claim::attach(&stop.store, stop.host, event, env.now) {
                Round::Again
            } else {
                Round::NotJudged(handed_over(&self.state))
            };
        };
        for incident in &incidents {
            record(Notes::Held(&transaction), &self.state, event, env, incident.code, Some(&incident.what));
        }
        record(Notes::Held(&transaction), &self.state, event, env, ReasonCode::ForeignSession, None);
        Round::NotJudged(HookResponse::allow())
    }
}

/// The end of a loop whose state no trusted copy vouches for, and the words that tell it.
pub(super) struct Untrusted {
    pub(super) change: Change,
    said: String,
}

impl Untrusted {
    /// The answer once the stop's commit recorded the end, or failed to.
    pub(super) fn answer(
        &self,
        transaction: &Transaction<'_>,
        committed: Result<(), CommitError>,
    ) -> HookResponse {
        let recorded = match committed {
            Ok(()) => format!("ledger: {}", transaction.paths().ledger.display()),
            Err(e) => format!("this could not be recorded: {e}"),
        };
        HookResponse::allow_with(format!("{}\n  {recorded}", self.said))
    }
}

/// Opens the session's loop for this stop. `Err` is the answer when there is nothing to judge:
/// no loop, another session's, an ended one, or a fault of ours.
pub(super) fn open<'p>(stop: &'p StopContext<'_>) -> Result<Box<Opened<'p>>, Unjudged<'p>> {
    let (env, event, paths) = (stop.env, stop.event, &stop.paths);
    let (transaction, custody) = match Transaction::open_known(paths, env.now, &stop.known) {
        Ok(opened) => opened,
        Err(e) => return Err(not_opened(stop, e)),
    };
    let (state, mut incidents) = match custody {
        Custody::None => return Err(no_loop(event).into()),
        Custody::Untrusted { state, why } => {
            return Err(match decision::gate(&state, &event.session_id) {
                Gate::Judge => {
                    Unjudged::Untrusted(transaction, Box::new(untrusted(&state, &why, event, env)))
                }
                _ => HookResponse::allow().into(),
            });
        }
        Custody::Loop { state, incidents } => (state, incidents),
    };
    let (state, settled) = stop.settled(state);
    match decision::gate(&state, &event.session_id) {
        Gate::Ended => {
            return Err(Unjudged::Over(transaction, Box::new(Over { state, settled, foreign: None })));
        }
        Gate::Foreign => {
            let over = Over { state, settled, foreign: Some(incidents) };
            return Err(Unjudged::Over(transaction, Box::new(over)));
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
            return Err(fault(Notes::Held(&transaction), Some(&state), event, env, &what).into());
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
    Ok(Box::new(Opened { state, incidents, judging, settled }))
}

/// The answer to a stop whose loop could not be opened: its lock could not be taken, or its
/// state could not be read and has no last good copy. A fault of ours: the stop is allowed.
fn not_opened<'p>(stop: &'p StopContext<'_>, e: OpenError) -> Unjudged<'p> {
    let (env, event, paths) = (stop.env, stop.event, &stop.paths);
    let what = match e {
        OpenError::Lock(e) => format!("{e}. This stop is allowed."),
        OpenError::Unreadable(e) => format!(
            "{e}. There is no last good copy to restore it from (the loop is older than those copies), \
             so this stop is allowed; the file is kept for inspection. {} moves it aside and ends the loop.",
            stop.host.commands().cancel
        ),
    };
    fault(Notes::Free(paths), None, event, env, &what).into()
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

/// Opens the loop again after verify, and keeps it open for the commit. The state may have been
/// changed meanwhile: by the user (a cancel, a new loop: this stop is then allowed), or behind
/// for-loop's back (restored again, and told).
pub(super) fn reopen<'p>(
    stop: &'p StopContext<'_>,
    state: &mut LoopState,
    incidents: &mut Vec<Incident>,
) -> Result<Transaction<'p>, Unjudged<'p>> {
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
        Ok(Custody::Untrusted { state, why }) => {
            let untrusted = untrusted(&state, &why, event, env);
            Err(Unjudged::Untrusted(transaction, Box::new(untrusted)))
        }
        _ => Err(HookResponse::allow().into()),
    }
}

/// The end of a loop whose state no trusted copy vouches for: its settings may be the agent's, so
/// neither judging by them nor going on is safe. The user is told, and the receipt says tampered.
fn untrusted(state: &LoopState, why: &str, event: &StopEvent, env: &Environment) -> Untrusted {
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
    let headline = format!(
        "for-loop: {why}. for-loop cannot tell what the loop's settings really were, so the loop is \
         over: ended as tampered, not verified. If it was not you, it was the agent; start the loop \
         again with the for-loop command."
    );
    Untrusted { change: Change::new(next, vec![entry]), said: receipt.render(&headline, state.meta.host) }
}
