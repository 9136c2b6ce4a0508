//! A turn the host ended on an error (Claude Code's `StopFailure`, Cursor's `stop` with
//! `status:"error"`): never an iteration, never silent.
//!
//! No Stop hook runs for such a turn, so nothing was judged: the loop keeps its iteration, forgets
//! that its last stop was blocked (the next stop follows a new prompt, not a block the host
//! overrode), and records why the turn ended (`context_exhausted`, `agent_limited` with the reset
//! time when the host gave one, `agent_error`). A usage limit parks the loop ([`park_limited`]);
//! the user's first prompt after the reset continues it ([`after_limit`]). The user is told at
//! once where the host shows this hook's output, and again at their next prompt.
//!
//! It comes to the Stop hook as a stage of the stop's context: [`record`] returns what the turn
//! changes, and the stop's one commit records it.
//!
//! A fault here lets the turn end as it did with one line, like every hook of for-loop: the
//! host has ended it already.

use jiff::Timestamp;

use crate::host::HookResponse;
use crate::host::Host;
use crate::host::{EventError, TurnError, TurnFailure};
use crate::provenance::Notice;
use crate::state::{FailedTurn, LedgerDecision, LedgerEntry, LoopState, OnLimit, ReasonCode, Status};
use crate::store::Custody;
use crate::store::LoopPaths;
use crate::store::{Change, CommitError, Transaction};
use crate::support::Environment;
use crate::verdict::message::failed_turn as words;

/// The host's report of a turn that ended on an error, read; `Err` is the answer when it cannot
/// be recorded (another host's event, or one that cannot be read).
pub(crate) fn read(failure: Result<TurnFailure, EventError>) -> Result<TurnFailure, HookResponse> {
    outlive_the_host();
    match failure {
        Ok(failure) => Ok(failure),
        Err(EventError::Foreign(why)) => {
            eprintln!("for-loop: {why}; nothing to do");
            Err(HookResponse::allow())
        }
        Err(e) => Err(HookResponse::allow_with(format!(
            "for-loop: a turn ended on an error, but the host's report of it could not be read ({e}); \
             nothing was recorded. `loop-hook status` shows the loop as it stands."
        ))),
    }
}

/// The answer to a failed turn with no loop to record it in (`why`: no store, no loop).
pub(crate) fn nothing_to_record(failure: &TurnFailure, why: &str) -> HookResponse {
    eprintln!("for-loop: the turn ended on an error ({}); {why}, nothing to record", kind(failure));
    HookResponse::allow()
}

/// Lets the record be finished when the host exits right after sending the event: Claude Code's
/// `-p` ends on the error it reports and sends its hooks SIGTERM as it goes (measured on 2.1.332),
/// which would lose the record of the very turn the user needs to hear about. The event is on
/// stdin already; the answer, if nobody reads it any more, is lost harmlessly.
fn outlive_the_host() {
    #[cfg(unix)]
    {
        use nix::sys::signal::{SigHandler, Signal, signal};
        for terminating in [Signal::SIGTERM, Signal::SIGHUP] {
            // SAFETY: ignoring a signal installs no handler; nothing else in this short-lived
            // process handles these two.
            #[allow(unsafe_code)]
            let _ = unsafe { signal(terminating, SigHandler::SigIgn) };
        }
    }
}

/// The reason code of `failure`.
fn code(error: &TurnError) -> ReasonCode {
    match error {
        TurnError::ContextExhausted => ReasonCode::ContextExhausted,
        TurnError::Limited { .. } => ReasonCode::AgentLimited,
        TurnError::Other { .. } => ReasonCode::AgentError,
    }
}

/// `failure`'s code, and the host's kind for an error for-loop has no code of its own for.
fn kind(failure: &TurnFailure) -> String {
    match &failure.error {
        TurnError::Other { kind } => format!("{}: {kind}", ReasonCode::AgentError),
        error => code(error).to_string(),
    }
}

/// A failed turn's record, decided in the transaction it was read in, for the stop's one commit;
/// [`Failed::answer`] says what happened once it is committed.
pub(crate) struct Failed<'p> {
    pub(crate) transaction: Transaction<'p>,
    pub(crate) change: Change,
    turn: FailedTurn,
}

/// A failed turn whose report never reached for-loop, found at the user's next prompt in the
/// transcript's last reply (`reply`): `state` changed as the report would have changed it, the
/// ledger line, and the words for the user. Claude Code's `-p` ends on the error and sends its
/// hooks SIGTERM as it goes; a hook that had not yet begun to ignore it (on a loaded machine, the
/// shell that starts it) records nothing, and a turn with no reply but the error would otherwise
/// go untold. The transcript is the agent's to write: what it says here is told and recorded,
/// and a usage limit read there parks nothing (a parked loop lets the agent stop).
pub(crate) fn recovered(
    state: &mut LoopState,
    reply: &crate::host::ApiErrorReply,
    now: Timestamp,
) -> (LedgerEntry, String) {
    let local = now.to_zoned(jiff::tz::TimeZone::system());
    let failure = TurnFailure {
        session_id: state.meta.session_id.clone(),
        error: TurnError::classify(&reply.kind, &reply.said, &local),
        said: reply.said.clone(),
    };
    let failed = failed_turn(&failure, now);
    let next = after_failure(state, failed.clone(), now, false);
    let line = LedgerEntry {
        detail: Some(format!(
            "{}{}; found in the transcript at the next prompt: the host's report of the failed turn \
             (written at {}) never reached for-loop",
            kind(&failure),
            failed.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default(),
            reply.at.strftime("%H:%M:%S UTC")
        )),
        ..LedgerEntry::new(&next, now, LedgerDecision::Note, failed.kind)
    };
    let told = words::told_from_transcript(&next, &failed, now);
    *state = next;
    (line, told)
}

/// The loop's record of `failure`: what it changes, for the hook's one commit; `Err` is the
/// answer when nothing is to be committed (no running loop of this session, a report the agent
/// forged, a fault of ours).
pub(crate) fn record<'p>(
    env: &Environment,
    host: Host,
    paths: &'p LoopPaths,
    failure: &TurnFailure,
) -> Result<Failed<'p>, HookResponse> {
    let (transaction, state, incidents) = match Transaction::open(paths, env.now) {
        Ok((transaction, Custody::Loop { state, incidents })) => (transaction, state, incidents),
        Ok((_, Custody::None)) => return Err(HookResponse::allow()),
        Ok((_, Custody::Untrusted { why, .. })) => {
            return Err(HookResponse::allow_with(format!(
                "for-loop: the loop's turn ended on an error ({}), and its state cannot be trusted ({why}); \
                 nothing was recorded. The next stop tells what happened to it.",
                kind(failure)
            )));
        }
        Err(e) => {
            return Err(HookResponse::allow_with(format!(
                "for-loop: the loop's turn ended on an error ({}), and the loop could not be opened to record \
                 it ({e}). Nothing changed; `loop-hook status` shows the loop.",
                kind(failure)
            )));
        }
    };
    let limited_again =
        state.meta.status == Status::Parked && state.meta.outcome == Some(ReasonCode::AgentLimited);
    if state.meta.session_id != failure.session_id || !(state.is_active() || limited_again) {
        eprintln!(
            "for-loop: the turn ended on an error ({}); the session's loop is not running",
            kind(failure)
        );
        return Err(HookResponse::allow());
    }
    // Fail closed on the model: a report the agent sent from its shell changes nothing, and only
    // a limit the transcript bears out parks the loop (a parked loop lets the agent stop).
    if host.agent_shell_marker().is_some_and(|marker| env.var(marker).is_some()) {
        return Err(forged(&forged_note(&state, env.now, "from the agent's shell"), &transaction));
    }
    // Nor does one its process tree shows the agent sent (provenance::ancestry), by the rule for
    // how the loop's host starts this hook.
    if let crate::provenance::Provenance::Agent(path) =
        crate::provenance::ancestry::by_rule(state.meta.host.failure_hook_runner())
    {
        let how = format!("{} (the hook's process tree shows it)", path.how());
        return Err(forged(&forged_note(&state, env.now, &how), &transaction));
    }
    let transcript =
        state.meta.transcript.clone().filter(|t| t.is_file() && state.meta.host.keeps_claude_transcript());
    if let Some(transcript) = &transcript
        && crate::host::transcript::tool_call_still_pending(transcript)
    {
        return Err(forged(
            &forged_note(&state, env.now, "while a tool call was still running"),
            &transaction,
        ));
    }
    let failed = failed_turn(failure, env.now);
    // Read only for a limit: the host may not wait long for this hook (see `outlive_the_host`).
    let borne_out = failed.kind != ReasonCode::AgentLimited
        || transcript.as_deref().is_none_or(crate::host::transcript::ends_on_api_error);
    let next = after_failure(&state, failed.clone(), env.now, borne_out);
    let mut lines: Vec<LedgerEntry> =
        incidents.iter().filter(|i| !i.recorded).map(|i| i.note(&state, env.now)).collect();
    lines.push(LedgerEntry {
        detail: Some(format!(
            "{}{}",
            kind(failure),
            failed.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default()
        )),
        ..LedgerEntry::new(&next, env.now, LedgerDecision::Note, failed.kind)
    });
    Ok(Failed { transaction, change: Change { next, lines, told: incidents }, turn: failed })
}

impl Failed<'_> {
    /// The words for the user once the hook's commit recorded the failed turn, or failed to.
    pub(crate) fn answer(
        self,
        env: &Environment,
        failure: &TurnFailure,
        committed: Result<(), CommitError>,
    ) -> HookResponse {
        let Failed { transaction, change, turn: failed } = self;
        if let Err(e) = committed {
            return HookResponse::allow_with(format!(
                "for-loop: the loop's turn ended on an error ({}), and it could not be recorded ({e}). Nothing \
                 changed; free some disk space.",
                kind(failure)
            ));
        }
        let paths = transaction.paths();
        drop(transaction);
        let next = &change.next;
        let mut told = words::told(next, &failed, env.now);
        if next.meta.status == Status::Parked && next.meta.settings.on_limit == OnLimit::Handoff {
            told = format!("{told}\n{}", hand_over_on_limit(env, paths, &failure.session_id));
        }
        // Again at the user's next prompt: where the host shows this hook's output, if anywhere, it
        // is easily missed at the end of a session.
        Notice::post(&paths.dir, &told);
        HookResponse::allow_with(told)
    }
}

/// The loop's record of `failure` at `now`.
fn failed_turn(failure: &TurnFailure, now: Timestamp) -> FailedTurn {
    let resets_at = match failure.error {
        TurnError::Limited { resets_at } => resets_at,
        _ => None,
    };
    let detail = Some(failure.said.clone()).filter(|said| !said.is_empty());
    FailedTurn { kind: code(&failure.error), at: now, resets_at, detail }
}

/// `state` after a turn that ended on `failed`: the same iteration, no block pending, the failure
/// kept; parked when the account is limited and the host's transcript bears the error out.
fn after_failure(state: &LoopState, failed: FailedTurn, now: Timestamp, borne_out: bool) -> LoopState {
    let mut next = state.clone();
    next.meta.updated_at = now;
    // The next stop follows the user's next prompt: a block the host overrode it is not.
    next.meta.last_blocked = false;
    let limited = failed.kind == ReasonCode::AgentLimited && borne_out;
    next.meta.failed_turn = Some(failed);
    if limited { park_limited(next) } else { next }
}

/// The ledger line of a failed-turn report that arrived `how` only the agent's own run of the
/// hook can: the agent sent it.
fn forged_note(state: &LoopState, now: Timestamp, how: &str) -> LedgerEntry {
    LedgerEntry {
        origin: Some(crate::host::Origin::Agent),
        detail: Some(format!(
            "a report of a turn that ended on an error arrived {how}, at iteration {}: the agent sent \
             it, and it changed nothing",
            state.meta.iteration
        )),
        ..LedgerEntry::new(state, now, LedgerDecision::Note, ReasonCode::ForgedStop)
    }
}

/// Records a forged report and changes nothing else.
fn forged(note: &LedgerEntry, transaction: &Transaction<'_>) -> HookResponse {
    let _ = transaction.note_or_keep(note);
    HookResponse::allow()
}

/// `--on-limit handoff`: the parked loop goes to `loop-hook run`, which waits the window out
/// itself. The words for the user, whether it went or why not (then it stays parked, as with
/// `--on-limit wait`).
fn hand_over_on_limit(env: &Environment, paths: &LoopPaths, session: &str) -> String {
    match crate::commands::handoff::hand_over_in_background(env, paths, Some(session)) {
        Ok((handed, Ok(log))) => format!(
            "for-loop: as asked (--on-limit handoff), the loop was handed over to loop-hook run ({run}), \
             which waits out the limit and goes on in fresh sessions; follow it with `loop-hook status \
             --session {run}` (its output: {log}).",
            run = handed.run_id,
            log = log.display()
        ),
        Ok((handed, Err(e))) => format!(
            "for-loop: the loop was handed over to loop-hook run ({run}) as asked (--on-limit handoff), but \
             the run could not be started ({e}); start it with `loop-hook run --resume {run}`.",
            run = handed.run_id
        ),
        Err(e) => format!(
            "for-loop: --on-limit handoff could not hand the loop over ({e}); it stays parked until the \
             limit lifts."
        ),
    }
}

/// Parks a loop whose account hit a rate or usage limit, until the user's first prompt after the
/// reset ([`after_limit`]). The one place a limited loop is parked.
fn park_limited(mut state: LoopState) -> LoopState {
    state.meta.status = Status::Parked;
    state.meta.outcome = Some(ReasonCode::AgentLimited);
    state
}

/// Whether `trusted`, the loop as the prompt hook of `host` read it, is parked on a usage limit
/// that the user's prompt may lift ([`after_limit`]). `loop-hook run` parks its loops on limits
/// too, and waits them out itself.
pub(crate) fn parked_on_limit(host: Host, trusted: &LoopState) -> bool {
    trusted.meta.status == Status::Parked
        && trusted.meta.outcome == Some(ReasonCode::AgentLimited)
        && trusted.meta.host == host
        && trusted.meta.failed_turn.is_some()
}

/// What the user's prompt does to a loop parked on a usage limit.
pub(crate) enum AfterLimit {
    /// The limit has not lifted: left parked, with these words.
    Waits(String),
    /// Continued: its words once the prompt hook's one commit is made, and the command that
    /// continues it when that commit failed.
    Lifted { continued: String, resume: String },
}

impl AfterLimit {
    /// The words for the user, once the prompt hook's commit recorded the change, or failed to.
    pub(crate) fn told(&self, committed: Result<(), &CommitError>) -> String {
        match (self, committed) {
            (AfterLimit::Waits(words), _) | (AfterLimit::Lifted { continued: words, .. }, Ok(())) => {
                words.clone()
            }
            (AfterLimit::Lifted { resume, .. }, Err(e)) => format!(
                "for-loop: the usage limit has lifted, but the loop could not be continued ({e}); \
                 {resume} continues it."
            ),
        }
    }
}

/// At the user's prompt, a loop parked on a usage limit: `state` (the loop as the prompt hook
/// holds it) continued when the limit has lifted (or the host never said when it would), else
/// left parked; the ledger line of a continued loop, for the prompt hook's one commit. `None`
/// when the loop is not parked on a limit.
pub(crate) fn after_limit(
    env: &Environment,
    state: &mut LoopState,
) -> Option<(Option<LedgerEntry>, AfterLimit)> {
    let failed = state.meta.failed_turn.clone()?;
    if state.meta.status != Status::Parked || state.meta.outcome != Some(ReasonCode::AgentLimited) {
        return None;
    }
    if !failed.has_reset(env.now) {
        return Some((None, AfterLimit::Waits(words::after_limit(state, &failed, env.now, false))));
    }
    state.meta.status = Status::Active;
    state.meta.outcome = None;
    state.meta.updated_at = env.now;
    let line = LedgerEntry {
        detail: Some("the usage limit lifted; continued at the user's prompt".into()),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Note, ReasonCode::Resumed)
    };
    let lifted = AfterLimit::Lifted {
        continued: words::after_limit(state, &failed, env.now, true),
        resume: state.meta.host.commands().resume.to_string(),
    };
    Some((Some(line), lifted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LedgerEntry;
    use crate::store::Store;

    const SESSION: &str = "s-1";

    fn env_at(home: &std::path::Path, now: Timestamp) -> Environment {
        let vars = [("FOR_LOOP_HOME".to_string(), home.join("store").display().to_string())];
        Environment::new(vars, home.to_path_buf(), now)
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    /// A running loop of session [`SESSION`] at iteration 2 whose last stop was blocked.
    fn running(env: &Environment) -> LoopPaths {
        let paths = Store::locate(env).unwrap().paths(SESSION);
        std::fs::create_dir_all(&paths.dir).unwrap();
        let mut state = crate::state::sample();
        state.meta.session_id = SESSION.into();
        state.meta.iteration = 2;
        state.meta.last_blocked = true;
        paths.save(&state).unwrap();
        paths
    }

    fn failure(env: &Environment, event: &str) -> HookResponse {
        crate::hook::stop_hook::run(env, Host::ClaudeCode, event.as_bytes())
    }

    fn stop_failure(error: &str, said: &str) -> String {
        serde_json::json!({"session_id": SESSION, "hook_event_name": "StopFailure", "error": error,
            "last_assistant_message": said})
        .to_string()
    }

    /// What the prompt hook of `host` tells the user of session [`SESSION`] at a plain prompt.
    fn prompt(env: &Environment, host: Host) -> Option<String> {
        let event = serde_json::json!({"session_id": SESSION, "prompt": "go on", "cwd": env.cwd});
        crate::hook::prompt_hook::respond(env, host, event.as_object().unwrap()).system_message
    }

    fn state(paths: &LoopPaths) -> LoopState {
        paths.load().unwrap().unwrap()
    }

    fn ledger(paths: &LoopPaths) -> Vec<LedgerEntry> {
        LedgerEntry::read_last(&paths.ledger, 50).unwrap_or_default()
    }

    #[test]
    fn a_session_without_a_loop_is_let_be_and_nothing_is_written() {
        let home = tempfile::tempdir().unwrap();
        let env = env_at(home.path(), at(1_000));
        assert_eq!(
            failure(&env, &stop_failure("invalid_request", "Prompt is too long")),
            HookResponse::allow()
        );
        assert!(!home.path().join("store").exists());
    }

    #[test]
    fn a_context_exhausted_turn_uses_no_iteration_and_is_told_now_and_at_the_next_prompt() {
        let home = tempfile::tempdir().unwrap();
        let env = env_at(home.path(), at(1_000));
        let paths = running(&env);
        let told = failure(&env, &stop_failure("invalid_request", "Prompt is too long"));
        assert_eq!(told.block, None);
        let message = told.system_message.unwrap();
        assert!(message.contains("outgrew the model's context window (Prompt is too long)"), "{message}");
        let after = state(&paths);
        assert_eq!(
            (after.meta.iteration, after.meta.status, after.meta.last_blocked),
            (2, Status::Active, false)
        );
        let failed = after.meta.failed_turn.unwrap();
        assert_eq!((failed.kind, failed.at), (ReasonCode::ContextExhausted, at(1_000)));
        let lines = ledger(&paths);
        let last = lines.last().unwrap();
        assert_eq!(
            (last.decision, last.reason, last.iteration),
            (LedgerDecision::Note, ReasonCode::ContextExhausted, 2)
        );
        assert_eq!(Notice::take(&paths.dir).as_deref(), Some(message.as_str()));
    }

    #[test]
    fn an_unknown_error_kind_is_an_agent_error_that_names_it() {
        let home = tempfile::tempdir().unwrap();
        let env = env_at(home.path(), at(1_000));
        let paths = running(&env);
        let told = failure(&env, &stop_failure("brand_new_kind", ""));
        assert!(told.system_message.unwrap().contains("ended on an API error. No iteration was used"));
        let last = ledger(&paths).pop().unwrap();
        assert_eq!(last.reason, ReasonCode::AgentError);
        assert_eq!(last.detail.as_deref(), Some("agent_error: brand_new_kind"));
        assert!(state(&paths).is_active());
    }

    #[test]
    fn a_usage_limit_parks_the_loop_until_the_first_prompt_after_its_reset() {
        let home = tempfile::tempdir().unwrap();
        let start = 1_764_000_000;
        let reset = start + 3_600;
        let env = env_at(home.path(), at(start));
        let paths = running(&env);
        let told =
            failure(&env, &stop_failure("rate_limit", &format!("Claude AI usage limit reached|{reset}")));
        assert!(told.system_message.unwrap().contains("parked (agent_limited)"));
        let parked = state(&paths);
        assert_eq!(
            (parked.meta.status, parked.meta.outcome),
            (Status::Parked, Some(ReasonCode::AgentLimited))
        );
        assert_eq!(parked.meta.failed_turn.as_ref().unwrap().resets_at, Some(at(reset)));
        assert_eq!(parked.meta.iteration, 2, "no iteration used");
        // The failure's notice is taken by the first prompt; what follows is the limit's alone.
        let _ = prompt(&env_at(home.path(), at(start + 30)), Host::ClaudeCode);
        // Before the reset the loop waits, and says until when.
        let early = prompt(&env_at(home.path(), at(start + 60)), Host::ClaudeCode).unwrap();
        assert!(early.contains("A prompt before then meets the same limit"), "{early}");
        assert_eq!(state(&paths).meta.status, Status::Parked);
        // Another host's prompt does not continue it.
        assert_eq!(prompt(&env_at(home.path(), at(reset)), Host::Codex), None);
        assert_eq!(state(&paths).meta.status, Status::Parked);
        let lifted = prompt(&env_at(home.path(), at(reset)), Host::ClaudeCode).unwrap();
        assert!(lifted.contains("the loop goes on at iteration 2"), "{lifted}");
        let resumed = state(&paths);
        assert_eq!(
            (resumed.meta.status, resumed.meta.outcome, resumed.meta.iteration),
            (Status::Active, None, 2)
        );
        assert_eq!(ledger(&paths).pop().unwrap().reason, ReasonCode::Resumed);
        assert_eq!(prompt(&env_at(home.path(), at(reset)), Host::ClaudeCode), None, "once");
    }

    /// The loop's transcript, holding `records`, named in its state as the user's start named it.
    fn with_transcript(paths: &LoopPaths, dir: &std::path::Path, records: &[serde_json::Value]) {
        let path = dir.join("transcript.jsonl");
        let text: String = records.iter().map(|r| r.to_string() + "\n").collect();
        std::fs::write(&path, text).unwrap();
        let mut state = state(paths);
        state.meta.transcript = Some(path);
        paths.save(&state).unwrap();
    }

    /// Fail closed on the model: the agent cannot park its loop (and so stop unjudged) by sending
    /// a limit from its shell, nor by one the transcript does not show.
    #[test]
    fn a_report_from_a_tool_call_changes_nothing_and_an_unshown_limit_parks_nothing() {
        let home = tempfile::tempdir().unwrap();
        let env = env_at(home.path(), at(1_000));
        let paths = running(&env);
        let pending = serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "loop-hook stop-hook"}}]}});
        with_transcript(
            &paths,
            home.path(),
            &[serde_json::json!({"type": "user", "message": {"content": "go"}}), pending],
        );
        let before = state(&paths);
        assert_eq!(
            failure(&env, &stop_failure("rate_limit", "usage limit reached|1764000000")),
            HookResponse::allow()
        );
        assert_eq!(state(&paths), before, "nothing changed");
        let last = ledger(&paths).pop().unwrap();
        assert_eq!(
            (last.reason, last.origin),
            (ReasonCode::ForgedStop, Some(crate::host::origin::Origin::Agent))
        );

        let reply = serde_json::json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "hm"}]}});
        with_transcript(
            &paths,
            home.path(),
            &[serde_json::json!({"type": "user", "message": {"content": "go"}}), reply],
        );
        failure(&env, &stop_failure("rate_limit", "usage limit reached"));
        let after = state(&paths);
        assert_eq!(after.meta.status, Status::Active, "a limit the transcript does not show parks nothing");
        assert_eq!(after.meta.failed_turn.unwrap().kind, ReasonCode::AgentLimited);

        let error = serde_json::json!({"type": "assistant", "isApiErrorMessage": true,
            "message": {"model": "<synthetic>", "content": [{"type": "text", "text": "API Error (429)"}]}});
        with_transcript(
            &paths,
            home.path(),
            &[serde_json::json!({"type": "user", "message": {"content": "go"}}), error],
        );
        failure(&env, &stop_failure("rate_limit", "usage limit reached"));
        assert_eq!(state(&paths).meta.status, Status::Parked, "the host's own error record bears it out");
    }

    /// Qwen Code's `StopFailure` is recorded as Claude Code's is; the same report from a hook the
    /// agent started in its shell (Qwen Code gives only that shell `QWEN_CODE`) changes nothing,
    /// so the agent cannot park its loop with a limit it made up.
    #[test]
    fn a_qwen_code_failure_is_recorded_and_one_from_the_agents_shell_changes_nothing() {
        let home = tempfile::tempdir().unwrap();
        let env = env_at(home.path(), at(1_000));
        let paths = running(&env);
        let event = |error: &str, said: &str| {
            serde_json::json!({"session_id": SESSION, "hook_event_name": "StopFailure", "prompt_id": "p",
                "error": error, "error_details": said, "last_assistant_message": format!("[API Error: {said}]")})
            .to_string()
        };
        let mut vars: Vec<(String, String)> =
            vec![("FOR_LOOP_HOME".into(), home.path().join("store").display().to_string())];
        vars.push(("QWEN_CODE".into(), "1".into()));
        let shell = Environment::new(vars, home.path().to_path_buf(), at(1_000));
        let before = state(&paths);
        let limit = event("rate_limit", "429 usage limit reached");
        assert_eq!(
            crate::hook::stop_hook::run(&shell, Host::QwenCode, limit.as_bytes()),
            HookResponse::allow()
        );
        assert_eq!(state(&paths), before, "nothing changed");
        let last = ledger(&paths).pop().unwrap();
        assert_eq!(
            (last.reason, last.origin),
            (ReasonCode::ForgedStop, Some(crate::host::origin::Origin::Agent))
        );
        assert!(last.detail.unwrap().contains("from the agent's shell"));

        let too_long = event("invalid_request", "400 prompt is too long: 1012345 tokens > 1000000 maximum");
        let told = crate::hook::stop_hook::run(&env, Host::QwenCode, too_long.as_bytes());
        assert!(told.system_message.unwrap().contains("outgrew the model's context window"));
        let after = state(&paths);
        assert_eq!((after.meta.iteration, after.meta.last_blocked), (2, false), "no iteration used");
        assert_eq!(after.meta.failed_turn.unwrap().kind, ReasonCode::ContextExhausted);
        assert_eq!(ledger(&paths).pop().unwrap().reason, ReasonCode::ContextExhausted);
        assert!(Notice::take(&paths.dir).is_some(), "told again at the next prompt");
    }

    #[test]
    fn an_ended_loop_and_an_unreadable_report_change_nothing() {
        let home = tempfile::tempdir().unwrap();
        let env = env_at(home.path(), at(1_000));
        let paths = running(&env);
        let mut ended = state(&paths);
        ended.meta.status = Status::Ended;
        paths.save(&ended).unwrap();
        assert_eq!(failure(&env, &stop_failure("server_error", "boom")), HookResponse::allow());
        assert_eq!(state(&paths), ended);
        let wrong = r#"{"session_id":"s-1","hook_event_name":"StopFailure","error":["x"]}"#;
        let told = failure(&env, wrong).system_message.unwrap();
        assert!(told.contains("could not be read (the event's `error` should be a string)"), "{told}");
        let subagent = r#"{"session_id":"s-1","agent_id":"a","hook_event_name":"StopFailure","error":"invalid_request"}"#;
        assert_eq!(failure(&env, subagent), HookResponse::allow());
        assert_eq!(state(&paths), ended);
    }
}
