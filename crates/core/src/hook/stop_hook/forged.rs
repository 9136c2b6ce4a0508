//! Stops the agent forges from its own shell: a Stop event that arrives while one of its tool
//! calls is still running came from that tool call, not from the end of a turn.

use std::fs;

use crate::host::event::StopEvent;
use crate::host::hook_response::HookResponse;
use crate::host::transcript;
use crate::store::Store;
use crate::store::custody::Custody;
use crate::store::incident::Incident;
use crate::store::ledger::{LedgerDecision, LedgerEntry};
use crate::store::reason_code::ReasonCode;
use crate::store::transaction::Transaction;
use crate::support::environment::Environment;
use crate::verdict::decision::{self, Gate};

use super::fault::record;

/// Forged stops taken in a row, with no judged stop between, after which the next is judged
/// anyway. A real stop finds no tool call pending: the host writes a call before running it and
/// ends a turn only on a reply without one. Were the transcript ever to lag behind, a real stop
/// taken for forged is blocked (the agent works on; nothing is released and no turn is used), and
/// at most this many in a row: the one after is judged as usual, so no one is ever trapped. The
/// cost is that an agent forging stops on purpose spends one iteration per this many plus one,
/// each forgery recorded and shown to the user and in the receipt.
const FORGED_STREAK: u32 = 2;

/// A Stop event that arrived while the agent's tool call was still pending came from that tool
/// call: the agent ran `loop-hook stop-hook` itself, most likely to use up the loop's iterations.
/// It is recorded (origin agent), nothing else changes, and the forging process is told only that
/// it was not judged. `None` when the stop is not forged, or there is no running loop of this
/// session to protect: the usual judgment then runs.
pub(super) fn forged_stop(env: &Environment, event: &StopEvent) -> Option<HookResponse> {
    let paths = Store::locate(env).ok()?.paths(&event.session_id);
    let armed = paths.armed.as_ref().is_some_and(|armed| fs::symlink_metadata(armed).is_ok());
    if !paths.state.exists() && !armed {
        return None;
    }
    // Any trouble with the loop's files is the usual judgment's to report: until the stop is
    // known to be forged, nothing is read in a way that repairs (and so hides) it.
    let trusted = crate::store::custody::trusted_state(&paths).ok()??;
    // The transcript the user's own start named, where there is one: a forged event may name
    // another (an empty file, /dev/null).
    let transcript =
        trusted.meta.transcript.as_deref().filter(|t| t.is_file()).or(event.claude_transcript())?;
    if decision::gate(&trusted, &event.session_id) != Gate::Judge
        || !transcript::tool_call_still_pending(transcript)
    {
        return None;
    }
    // Locked before the streak is read, and read through custody only once the stop is known to
    // be forged: a stop judged as usual must still find (and report) what custody would repair.
    let transaction = Transaction::lock(&paths).ok()?;
    if LedgerEntry::forged_streak(&paths.ledger, &trusted.meta.loop_id) >= FORGED_STREAK {
        return None;
    }
    let Ok(Custody::Loop { state, incidents }) = transaction.read(env.now) else { return None };
    for incident in &incidents {
        record(&paths, &state, event, env, incident.code, Some(&incident.what));
    }
    let entry = LedgerEntry {
        stop_hook_active: event.stop_hook_active,
        origin: Some(crate::host::origin::Origin::Agent),
        detail: Some(format!(
            "the agent ran the Stop hook itself from a tool call at iteration {} ({}): that forged stop \
             was not judged and used no iteration",
            state.meta.iteration,
            env.now.strftime("%H:%M:%S UTC")
        )),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Note, ReasonCode::ForgedStop)
    };
    if transaction.note(&entry).is_err() {
        Incident::record_fallback(&paths.dir, ReasonCode::ForgedStop, env.now);
    }
    Some(HookResponse {
        block: Some(
            "for-loop: this stop was not judged: it arrived while a tool call was still running, so \
             it came from that tool call, not from the end of a turn. It is recorded and the user \
             will be told. Keep working on the task."
                .into(),
        ),
        system_message: None,
    })
}
