//! Whether a loop command the prompt hook carried out was really the user's: the host's
//! transcript must show the user's prompt for it.
//!
//! The prompt hook is a program like any other: the agent can run `loop-hook prompt-hook` itself
//! with a made-up event (from a background job, a copy of the binary, python), and nothing in the
//! event tells that apart from the host's own call. What the agent cannot make the host do is
//! record a prompt the user did not send. Claude Code writes the user's prompt into the transcript
//! after `UserPromptSubmit` returns: a prompt that goes on to the model as a `user` record (a
//! plugin command as `<command-name>/for-loop:for-loop</command-name>`), a prompt a hook blocked
//! as a `system` record reading `UserPromptSubmit operation blocked by hook: … Original prompt:
//! /cancel-loop`. A forged run of the hook leaves neither.
//!
//! So a change the prompt hook makes is recorded in the loop's state as [`Awaiting`], in the same
//! commit as the change (or before it), and the session's next hook run (a stop or a prompt)
//! looks for that record in the transcript the user's own start named. Found: confirmed, nothing
//! else happens. Not found, after the transcript has had time to catch up: the command was sent
//! by a program, most likely the agent. It is recorded (`command_unconfirmed`, origin agent), the
//! user and the agent are told, and what can be undone is: a cancelled loop is active again and
//! the stop is judged as usual; a started loop is ended. A resume or a rollback only holds the
//! agent to the check again or moves its work back to a checkpoint, neither releases the loop, so
//! they are reported and left as they are.
//!
//! The marker lives in the state because the state is witnessed (its last good copy, the digest
//! on the ledger): an agent that deletes the marker changes the state, which custody finds and
//! restores or reports. It is never the case that a missing record counts as a confirmation.

use std::path::Path;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::Value;

use crate::host::HookResponse;
use crate::host::Origin;
use crate::host::UserCommand;
use crate::state::Incident;
use crate::state::ReasonCode;
use crate::state::{Awaiting, AwaitingKind as Kind};
use crate::state::{LedgerDecision, LedgerEntry};
use crate::state::{LoopState, Status};
use crate::store::LoopPaths;
use crate::store::{Change, CommitError, Transaction};
use crate::store::{Custody, Known};
use crate::support::ReverseLines;

/// How long the transcript is given to show the user's prompt: Claude Code writes it
/// asynchronously (the flush race, anthropics/claude-code#74340), as it does a turn's replies.
const SETTLE: Duration = Duration::from_secs(3);
/// How much earlier than the hook's own clock reading a record may be stamped and still count.
const SLACK_MS: i64 = 1_000;
/// How far back a record is looked for: records older than this before the command are not read.
const LOOKBACK_SECS: i64 = 600;
/// The prefix Claude Code gives the record of a prompt a `UserPromptSubmit` hook blocked.
const BLOCKED: &str = "UserPromptSubmit operation blocked by hook:";
const ORIGINAL: &str = "Original prompt: ";

/// Whether one transcript record is the host's record of the user sending `awaiting`'s command:
/// the user's own prompt (not meta, not a tool result, not a subagent's), or the host's note of a
/// prompt a hook blocked, stamped no earlier than the command (less a small slack).
pub(crate) fn confirms(record: &Value, awaiting: &Awaiting) -> bool {
    if record["isSidechain"] == true || record["isMeta"] == true {
        return false;
    }
    let Some(time) = record["timestamp"].as_str().and_then(|t| t.parse::<Timestamp>().ok()) else {
        return false;
    };
    if time.as_millisecond() < awaiting.at.as_millisecond() - SLACK_MS {
        return false;
    }
    let names = |text: &str| {
        let command = text
            .split_once("<command-name>")
            .and_then(|(_, rest)| rest.split_once("</command-name>"))
            .map_or(text, |(name, _)| name);
        UserCommand::in_claude_transcript(command).is_some_and(|c| awaiting.kind.matches(c.kind))
    };
    match (record["type"].as_str(), record["subtype"].as_str()) {
        (Some("user"), _) => match &record["message"]["content"] {
            Value::String(text) => names(text),
            // A prompt with pasted images arrives as blocks; a tool's result never counts.
            Value::Array(blocks) => {
                blocks.iter().all(|b| b["type"] != "tool_result")
                    && blocks.iter().any(|b| b["type"] == "text" && b["text"].as_str().is_some_and(names))
            }
            _ => false,
        },
        (Some("system"), Some("informational")) => record["content"]
            .as_str()
            .filter(|text| text.starts_with(BLOCKED))
            .and_then(|text| text.rsplit_once(ORIGINAL))
            .is_some_and(|(_, prompt)| names(prompt)),
        _ => false,
    }
}

/// Whether the transcript holds the user's record of `awaiting`'s command now.
fn recorded(transcript: &Path, awaiting: &Awaiting) -> bool {
    let Ok(lines) = ReverseLines::open(transcript, crate::host::MAX_TRANSCRIPT_BYTES) else {
        return false;
    };
    let oldest = awaiting.at.as_second() - LOOKBACK_SECS;
    for line in lines.map_while(Result::ok) {
        let Ok(record) = serde_json::from_slice::<Value>(&line) else { continue };
        if confirms(&record, awaiting) {
            return true;
        }
        let time = record["timestamp"].as_str().and_then(|t| t.parse::<Timestamp>().ok());
        if time.is_some_and(|t| t.as_second() < oldest) {
            return false;
        }
    }
    false
}

/// Whether the transcript shows the record within [`SETTLE`]: a command just carried out may
/// not be written yet. Costs nothing more when the record is already there.
fn recorded_within_settle(transcript: &Path, awaiting: &Awaiting) -> bool {
    let deadline = Instant::now() + SETTLE;
    loop {
        if recorded(transcript, awaiting) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What becomes of a loop whose awaited command was not confirmed: the state to commit, its
/// ledger line, and what the user and the agent are told. Pure.
/// `transcript_gone`: the transcript could not be read at all. A start is then kept: ending it
/// would let an agent end the user's loop by deleting the transcript, and a loop only holds the
/// agent to its check; the user is told it could not be confirmed.
pub(crate) fn undo(
    state: &LoopState,
    awaiting: &Awaiting,
    transcript_gone: bool,
    now: Timestamp,
) -> (LoopState, LedgerEntry, String) {
    let mut next = state.clone();
    next.meta.awaiting = None;
    next.meta.updated_at = now;
    let when = awaiting.at.strftime("%H:%M:%S UTC");
    let what = match awaiting.kind {
        Kind::Cancel
            if state.meta.status == Status::Ended && state.meta.outcome == Some(ReasonCode::Cancelled) =>
        {
            next.meta.status = Status::Active;
            next.meta.outcome = None;
            next.meta.receipt = None;
            next.meta.last_blocked = false;
            "it cancelled this loop; the cancel is undone and the loop is on again".to_string()
        }
        Kind::Start if state.is_active() && transcript_gone => {
            "the host's transcript is gone, so it could not be confirmed; the loop is kept".to_string()
        }
        Kind::Start if state.is_active() => {
            next.meta.status = Status::Ended;
            next.meta.outcome = Some(ReasonCode::CommandUnconfirmed);
            next.meta.last_blocked = false;
            next.meta.receipt = Some(next.receipt(ReasonCode::CommandUnconfirmed, now, None));
            "it started this loop; that loop is ended".to_string()
        }
        Kind::Resume => {
            "it resumed this loop, which stays resumed: that only holds the agent to the check".into()
        }
        Kind::Rollback => "it rolled the working tree back to a checkpoint; that is left as it is".into(),
        _ => "it changed nothing that needs undoing".into(),
    };
    let detail = format!(
        "`{}` at {when} was not typed by the user: no prompt of the user's for it reached the host's \
         transcript, so a program sent it (most likely the agent ran loop-hook prompt-hook itself); {what}",
        awaiting.command
    );
    let entry = LedgerEntry {
        origin: Some(Origin::Agent),
        detail: Some(detail),
        ..LedgerEntry::new(&next, now, LedgerDecision::Note, ReasonCode::CommandUnconfirmed)
    };
    let told = format!(
        "for-loop: `{}` at {when} did not come from the user's prompt: the host never recorded the user \
         sending it, so a program sent it (most likely the agent, running for-loop's prompt hook itself). \
         {}.{RECORDED}",
        awaiting.command,
        capitalised(&what)
    );
    (next, entry, told)
}

/// How the words of a settled command end once a commit has taken it.
const RECORDED: &str = " This is recorded in the ledger.";

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| c.to_uppercase().collect::<String>() + chars.as_str())
}

/// Marks `state` (the session's loop, as the prompt hook holds it) as awaiting confirmation of
/// `awaiting`; the ledger line that records the mark. The hook commits the mark before it
/// carries the command out: a hook killed between the two leaves the mark, never a change
/// without one; a mark that cannot be committed keeps the command from running.
pub(crate) fn mark(state: &mut LoopState, awaiting: &Awaiting, now: Timestamp) -> LedgerEntry {
    state.meta.awaiting = Some(awaiting.clone());
    LedgerEntry {
        origin: Some(Origin::User),
        detail: Some(format!(
            "`{}` from the prompt hook; the host's transcript is to confirm it",
            awaiting.command
        )),
        ..LedgerEntry::new(state, now, LedgerDecision::Note, ReasonCode::CommandPending)
    }
}

/// A settled command, read under the loop's lock, for its hook run's one commit: the transaction
/// it was decided in, what it changes, and what it tells.
pub(crate) struct Settling<'p> {
    pub(crate) transaction: Transaction<'p>,
    pub(crate) change: Change,
    told: Option<String>,
}

impl Settling<'_> {
    /// What the user and the agent are told once the hook's commit recorded the settlement, or
    /// failed to.
    pub(crate) fn told(self, committed: Result<(), CommitError>) -> Option<String> {
        match committed {
            Ok(()) => self.told,
            Err(e) => Some(Settlement::not_recorded(self.told, &e.to_string())),
        }
    }
}

/// Settles the command the loop whose files are `paths` awaits, if there is one: confirmed from
/// the transcript, or recorded as sent by a program and undone where it can be. Looked up and
/// applied at `now` under the loop's lock, parsing only state texts `known` has not read, for
/// the stop to commit (a stop whose judgment reached no verdict; the prompt hook settles in the
/// loop it holds, [`Settlement::settle`]). Cheap when no loop waits: one `stat`.
pub(crate) fn settle_at<'p>(paths: &'p LoopPaths, now: Timestamp, known: &Known) -> Option<Settling<'p>> {
    let settlement = Settlement::find(paths, known)?;
    let Ok((transaction, Custody::Loop { state, incidents })) = Transaction::open_known(paths, now, known)
    else {
        return None;
    };
    let mut next = state;
    let (lines, told) = settlement.settle(&mut next, &incidents, now)?;
    Some(Settling { transaction, change: Change::new(next, lines), told })
}

/// A command the session's loop awaits confirmation of, looked up in the host's transcript. A
/// stop carries it from its start to the commit that ends it (the verdict's, a forged stop's, or
/// one of its own when the stop reaches neither), so settling takes no commit of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settlement {
    awaiting: Awaiting,
    /// The user's prompt for it is in the transcript.
    confirmed: bool,
    /// The transcript could not be read at all.
    transcript_gone: bool,
}

impl Settlement {
    /// The command the loop at `paths` awaits, looked up in its transcript (which may take up to
    /// [`SETTLE`] for a record not written yet); `None` when it awaits none. Cheap when no loop
    /// waits: one `stat`.
    pub(crate) fn find(paths: &LoopPaths, known: &Known) -> Option<Settlement> {
        if !paths.state.exists() {
            return None;
        }
        let state = crate::store::custody::trusted_state_known(paths, known).ok()??;
        let awaiting = state.meta.awaiting.clone()?;
        let transcript = state.meta.transcript.as_deref().filter(|t| t.is_file());
        let confirmed = transcript.is_some_and(|t| recorded_within_settle(t, &awaiting));
        Some(Settlement { awaiting, confirmed, transcript_gone: transcript.is_none() })
    }

    /// `state` with this command settled: the state to commit, its ledger line, and what the
    /// user and the agent are told (nothing for a confirmed command). `None` when `state` no
    /// longer awaits this command (settled meanwhile, or another one marked since). Pure.
    pub(crate) fn apply(
        &self,
        state: &LoopState,
        now: Timestamp,
    ) -> Option<(LoopState, LedgerEntry, Option<String>)> {
        if state.meta.awaiting.as_ref() != Some(&self.awaiting) {
            return None;
        }
        if self.confirmed {
            let mut next = state.clone();
            next.meta.awaiting = None;
            let line = LedgerEntry {
                origin: Some(Origin::User),
                ..LedgerEntry::new(&next, now, LedgerDecision::Note, ReasonCode::CommandConfirmed)
            };
            return Some((next, line, None));
        }
        let (next, line, told) = undo(state, &self.awaiting, self.transcript_gone, now);
        Some((next, line, Some(told)))
    }

    /// Settles this command in `state`, the loop as read under its lock, where custody found
    /// `incidents`: the lines to commit (what custody found and repaired on the way, recorded and
    /// told here as the stop's own judgment would have, then the settlement's), and what the
    /// user and the agent are told once they are. `None`, and `state` unchanged, when it no
    /// longer awaits this command (settled meanwhile by another hook run).
    pub(crate) fn settle(
        &self,
        state: &mut LoopState,
        incidents: &[Incident],
        now: Timestamp,
    ) -> Option<(Vec<LedgerEntry>, Option<String>)> {
        let (next, line, told) = self.apply(state, now)?;
        let mut lines: Vec<LedgerEntry> =
            incidents.iter().map(|incident| incident.note(state, now)).collect();
        lines.push(line);
        let noticed = incidents.iter().fold(String::new(), |mut out, incident| {
            out.push_str(&format!("for-loop noticed: {}.\n", incident.what));
            out
        });
        let told = match told {
            Some(told) => Some(format!("{noticed}{told}")),
            None => (!noticed.is_empty()).then(|| noticed.trim_end().to_string()),
        };
        *state = next;
        Some((lines, told))
    }

    /// The words of a settlement whose commit failed.
    pub(crate) fn not_recorded(told: Option<String>, error: &str) -> String {
        let told = told.unwrap_or_else(|| "for-loop: your command's confirmation.".into());
        format!(
            "{} But for-loop could not record this ({error}), so nothing has changed yet; the next stop \
             or prompt tries again.",
            told.strip_suffix(RECORDED).unwrap_or(&told)
        )
    }
}

/// Adds what [`settle_at`] found to a stop's answer: the user reads it in the system message, and
/// the agent in the block's reason when the stop is blocked.
pub(crate) fn tell(mut response: HookResponse, told: Option<String>) -> HookResponse {
    let Some(told) = told else { return response };
    response.system_message = Some(match response.system_message {
        Some(message) => format!("{told}\n{message}"),
        None => told.clone(),
    });
    if let Some(reason) = response.block {
        response.block = Some(format!("{told}\n\n{reason}"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn awaiting(kind: Kind) -> Awaiting {
        Awaiting { command: "/cancel-loop".into(), kind, at: "2026-11-22T03:00:10Z".parse().unwrap() }
    }

    fn at(mut record: Value, time: &str) -> Value {
        record["timestamp"] = json!(time);
        record
    }

    #[test]
    fn the_hosts_record_of_a_typed_or_blocked_command_confirms_it() {
        let cancel = awaiting(Kind::Cancel);
        let blocked = json!({"type": "system", "subtype": "informational", "isMeta": false,
            "content": "UserPromptSubmit operation blocked by hook:\nfor-loop: cancelled at iteration 3/30.\n\nOriginal prompt: /for-loop:cancel-loop"});
        assert!(confirms(&at(blocked.clone(), "2026-11-22T03:00:11Z"), &cancel));
        let typed = json!({"type": "user", "message": {"role": "user", "content": "/cancel-loop"}});
        assert!(confirms(&at(typed, "2026-11-22T03:00:10Z"), &cancel));
        let start = Awaiting { kind: Kind::Start, ..awaiting(Kind::Start) };
        let command = json!({"type": "user", "message": {"role": "user", "content":
            "<command-message>for-loop:for-loop</command-message>\n<command-name>/for-loop:for-loop</command-name>\n<command-args>fix --verify false</command-args>"}});
        assert!(confirms(&at(command.clone(), "2026-11-22T03:00:12Z"), &start));
        // Another command's record does not confirm this one.
        assert!(!confirms(&at(command, "2026-11-22T03:00:12Z"), &cancel));
        // Within the slack, but not older.
        assert!(confirms(&at(blocked.clone(), "2026-11-22T03:00:09.500Z"), &cancel));
        assert!(!confirms(&at(blocked.clone(), "2026-11-22T03:00:08Z"), &cancel));
        // No time, no confirmation.
        assert!(!confirms(&blocked, &cancel));
    }

    #[test]
    fn what_the_agent_can_write_into_the_conversation_never_confirms() {
        let cancel = awaiting(Kind::Cancel);
        let time = "2026-11-22T03:00:11Z";
        let tool_result = json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "/cancel-loop"},
            {"type": "text", "text": "/cancel-loop"}]}});
        let output = json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t",
             "content": "UserPromptSubmit operation blocked by hook:\nx\n\nOriginal prompt: /cancel-loop"}]}});
        let said = json!({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "/cancel-loop"}]}});
        let meta = json!({"type": "user", "isMeta": true, "message": {"content": "/cancel-loop"}});
        let sidechain = json!({"type": "user", "isSidechain": true, "message": {"content": "/cancel-loop"}});
        let mention = json!({"type": "user", "message": {"content": "please do not run /cancel-loop"}});
        let other_system = json!({"type": "system", "subtype": "informational",
            "content": "A hook blocked the turn. Original prompt: /cancel-loop"});
        for record in [tool_result, output, said, meta, sidechain, mention, other_system] {
            assert!(!confirms(&at(record.clone(), time), &cancel), "{record}");
        }
    }

    #[test]
    fn the_transcript_is_searched_back_to_the_command_and_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let cancel = awaiting(Kind::Cancel);
        let old = at(json!({"type": "user", "message": {"content": "/cancel-loop"}}), "2026-11-22T02:00:00Z");
        let reply = at(json!({"type": "assistant", "message": {"content": []}}), "2026-11-22T03:00:05Z");
        std::fs::write(&path, format!("{old}\n{reply}\n")).unwrap();
        assert!(!recorded(&path, &cancel));
        let began = Instant::now();
        assert!(!recorded_within_settle(&path, &cancel));
        assert!(began.elapsed() >= SETTLE);
        // Written late, within the settle time.
        let late = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let typed =
                at(json!({"type": "user", "message": {"content": "/cancel-loop"}}), "2026-11-22T03:00:11Z");
            let text = std::fs::read_to_string(&late).unwrap();
            std::fs::write(&late, format!("{text}{typed}\n")).unwrap();
        });
        assert!(recorded_within_settle(&path, &cancel));
        writer.join().unwrap();
        assert!(!recorded(Path::new("/no/such/transcript.jsonl"), &cancel));
    }
}
