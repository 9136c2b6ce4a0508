//! Stops the agent forges from its own shell: a Stop event that arrives while one of its tool
//! calls is still running came from that tool call, not from the end of a turn; nor did one that
//! finds no new final reply of the agent in the loop's transcript.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::host::HookResponse;
use crate::host::transcript;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::Custody;
use crate::store::{Change, Notes, Transaction};
use crate::verdict::FinalReply;
use crate::verdict::{Gate, decision};

use super::context::StopContext;
use super::fault::record;

/// Forged stops taken in a row, with no judged stop between, after which the next is judged
/// anyway. A real stop finds no tool call pending and a new final reply: the host writes a call
/// before running it and ends a turn only on a reply without one. Were the transcript ever to lag
/// behind, a real stop taken for forged is blocked (the agent works on; nothing is released and
/// no turn is used), and at most this many in a row: the one after is judged, so no one is ever
/// trapped, but a pass there does not count ([`Seen::gave_way`]). The cost is that an agent
/// forging stops on purpose spends one iteration per this many plus one when its check fails,
/// each forgery recorded and shown to the user and in the receipt.
const FORGED_STREAK: u32 = 2;

/// The final reply in the loop's transcript, as read (the owned form of [`FinalReply`]).
#[derive(Debug, Clone, Default)]
enum Reply {
    /// No transcript to read.
    #[default]
    Unknown,
    /// The transcript shows no final reply.
    Missing,
    /// A digest of the final reply.
    Seen(String),
}

impl Reply {
    fn read(transcript: &Path) -> Reply {
        match transcript::final_reply(transcript) {
            Err(_) => Reply::Unknown,
            Ok(None) => Reply::Missing,
            Ok(Some(digest)) => Reply::Seen(digest),
        }
    }

    fn as_facts(&self) -> FinalReply<'_> {
        match self {
            Reply::Unknown => FinalReply::Unknown,
            Reply::Missing => FinalReply::Missing,
            Reply::Seen(digest) => FinalReply::Seen(digest),
        }
    }
}

/// What the forged-stop checks saw, for a stop that is judged.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    reply: Reply,
    /// The stop looked forged and is judged only because the streak was full.
    pub(super) gave_way: bool,
}

impl Seen {
    /// The final reply, as the verdict reads it.
    pub(super) fn reply(&self) -> FinalReply<'_> {
        self.reply.as_facts()
    }
}

/// A stop's standing before it is judged.
pub(super) enum Forgery<'p> {
    /// Forged: not judged. Its record, decided in the transaction it was read in, is for the
    /// stop's one commit; then it is answered with [`answer`].
    Forged(Transaction<'p>, Box<Change>),
    /// Judged, with what the checks saw.
    Judge(Seen),
}

/// The answer to a forged stop, whose reader is the agent.
pub(super) fn answer() -> HookResponse {
    HookResponse {
        block: Some(
            "for-loop: this stop was not judged: it arrived while a tool call was still running, or \
             before the agent's turn had ended, so it did not come from the end of a turn. It is \
             recorded and the user will be told. Keep working on the task."
                .into(),
        ),
        system_message: None,
    }
}

/// A Stop event that arrived while the agent's tool call was still pending came from that tool
/// call: the agent ran `loop-hook stop-hook` itself, most likely to use up the loop's iterations.
/// So did one with no new final reply since the last judged stop (a background job that fires
/// while the model works). It is recorded (origin agent), nothing else changes, and the forging
/// process is told only that it was not judged. Otherwise the stop is judged: as usual when it is
/// not forged or there is no running loop of this session to protect, and unable to pass when
/// the streak is full.
pub(super) fn forged_stop<'p>(stop: &'p StopContext<'_>) -> Forgery<'p> {
    if let Some(forgery) = from_the_agents_shell(stop) {
        return forgery;
    }
    // The process tree is asked about a stop the transcript takes for real: the agent can write
    // the transcript (close its own tool call, add a reply), never its tree.
    let Some((trusted, transcript)) = loop_and_transcript(stop) else {
        return from_the_agents_process_tree(stop).unwrap_or_else(|| Forgery::Judge(Seen::default()));
    };
    let pending = transcript::tool_call_still_pending(&transcript);
    let reply = if pending { Reply::Missing } else { settled_reply(&trusted, &transcript) };
    let seen = Seen { reply, gave_way: false };
    if !pending && decision::reply_is_new(&trusted, seen.reply()) {
        return from_the_agents_process_tree(stop).unwrap_or(Forgery::Judge(seen));
    }
    let how = if pending {
        "from a tool call"
    } else {
        "while no turn had ended (no new reply of the agent since the last judged stop)"
    };
    not_judged(stop, &trusted.meta.loop_id, Seen { gave_way: true, ..seen }, how)
}

/// A Stop hook started with the variable the host gives only the agent's shell (Qwen Code's
/// `QWEN_CODE`) is the agent running `loop-hook stop-hook` itself, or a session it started: a
/// forged stop of the running loop, whatever its payload says.
fn from_the_agents_shell<'p>(stop: &'p StopContext<'_>) -> Option<Forgery<'p>> {
    let marker = stop.host.agent_shell_marker()?;
    stop.env.var(marker)?;
    if !stop.has_loop_files() {
        return None;
    }
    let trusted = stop.settled(crate::store::custody::trusted_state_known(&stop.paths, &stop.known).ok()??).0;
    if decision::gate(&trusted, &stop.event.session_id) != Gate::Judge {
        return None;
    }
    let seen = Seen { reply: Reply::Missing, gave_way: true };
    Some(not_judged(
        stop,
        &trusted.meta.loop_id,
        seen,
        "from its shell (a hook started where the host's agent-shell variable is set)",
    ))
}

/// A Stop hook whose process tree shows the agent started it (under its tool shell, left behind
/// by it, a copy of the host it ran): a forged stop of the running loop, whatever its payload and
/// the transcript say. The tree is read only for a running loop of this session, by the loop's
/// own host's rule.
fn from_the_agents_process_tree<'p>(stop: &'p StopContext<'_>) -> Option<Forgery<'p>> {
    if !stop.has_loop_files() {
        return None;
    }
    let trusted = stop.settled(crate::store::custody::trusted_state_known(&stop.paths, &stop.known).ok()??).0;
    if decision::gate(&trusted, &stop.event.session_id) != Gate::Judge {
        return None;
    }
    let crate::provenance::Provenance::Agent(path) =
        crate::provenance::ancestry::of_this_hook(trusted.meta.host)
    else {
        return None;
    };
    let seen = Seen { reply: Reply::Missing, gave_way: true };
    let how = format!("{} (the hook's process tree shows it)", path.how());
    Some(not_judged(stop, &trusted.meta.loop_id, seen, &how))
}

/// What a stop taken for forged changes (its note, `how` it arrived, and the count of forged
/// stops), for the stop's one commit; or, when the streak of forged stops is full or the loop
/// cannot be read, the stop judged as `doubted`.
fn not_judged<'p>(stop: &'p StopContext<'_>, loop_id: &str, doubted: Seen, how: &str) -> Forgery<'p> {
    let (env, event, paths) = (stop.env, stop.event, &stop.paths);
    // Locked before the streak is read, and read through custody only once the stop is known to
    // be forged: a stop judged as usual must still find (and report) what custody would repair.
    // Any trouble here judges the stop, never as a pass.
    let Ok(transaction) = Transaction::lock(paths) else { return Forgery::Judge(doubted) };
    if LedgerEntry::forged_streak(&paths.ledger, loop_id) >= FORGED_STREAK {
        return Forgery::Judge(doubted);
    }
    let Ok(Custody::Loop { state, incidents }) = transaction.read_known(env.now, &stop.known) else {
        return Forgery::Judge(doubted);
    };
    // The command the stop settles is recorded by this stop's one commit, the forged stop's.
    let (state, settled) = stop.settled(state);
    for incident in &incidents {
        record(Notes::Held(&transaction), &state, event, env, incident.code, Some(&incident.what));
    }
    let entry = LedgerEntry {
        stop_hook_active: event.stop_hook_active,
        origin: Some(crate::host::Origin::Agent),
        detail: Some(format!(
            "the agent ran the Stop hook itself {how} at iteration {} ({}): that forged stop was not \
             judged and used no iteration",
            state.meta.iteration,
            env.now.strftime("%H:%M:%S UTC")
        )),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Note, ReasonCode::ForgedStop)
    };
    // Counted in the state, so that the receipt of the stop that ends the loop has the count
    // without reading the ledger back.
    let mut next = state.clone();
    next.meta.forged_stops = Some(
        state
            .meta
            .forged_stops
            .unwrap_or_else(|| LedgerEntry::forged_stops(&paths.ledger, &state.meta.loop_id))
            + 1,
    );
    let mut lines = stop.recorded(settled);
    lines.push(entry);
    Forgery::Forged(transaction, Box::new(Change::new(next, lines)))
}

/// The session's running loop, as last trusted, and the transcript to look in: the one the
/// user's own start named, where there is one (a forged event may name another: an empty file,
/// /dev/null). `None` when there is no loop this stop is for, or no transcript.
fn loop_and_transcript(stop: &StopContext<'_>) -> Option<(LoopState, std::path::PathBuf)> {
    let event = stop.event;
    if !stop.has_loop_files() {
        return None;
    }
    // Any trouble with the loop's files is the usual judgment's to report: until the stop is
    // known to be forged, nothing is read in a way that repairs (and so hides) it.
    // The loop as the stop will judge it: with the command it settles settled.
    let trusted = stop.settled(crate::store::custody::trusted_state_known(&stop.paths, &stop.known).ok()??).0;
    if !trusted.meta.host.keeps_claude_transcript() {
        return None;
    }
    let transcript = trusted
        .meta
        .transcript
        .as_deref()
        .filter(|t| t.is_file())
        .or(event.claude_transcript())?
        .to_path_buf();
    (decision::gate(&trusted, &event.session_id) == Gate::Judge).then_some((trusted, transcript))
}

/// The final reply in `transcript`, given the time a real stop's reply takes to be written (the
/// flush race): one the loop has not judged yet is taken at once; otherwise the transcript is
/// read again until [`transcript::FLUSH_SETTLE`] has passed.
fn settled_reply(state: &LoopState, transcript: &Path) -> Reply {
    let deadline = Instant::now() + transcript::FLUSH_SETTLE;
    loop {
        let reply = Reply::read(transcript);
        if decision::reply_is_new(state, reply.as_facts()) || Instant::now() >= deadline {
            return reply;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}
