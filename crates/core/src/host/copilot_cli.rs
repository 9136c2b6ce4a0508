//! GitHub Copilot CLI's `agentStop`: camelCase input (`sessionId`, `cwd`, `transcriptPath`,
//! `stopReason`, `timestamp` in epoch milliseconds) and, since 1.0.72, `stop_hook_active`, true
//! when the turn goes on because a stop hook blocked the last stop.
//!
//! Output: `{"decision":"block","reason":P}` queues P as the next user prompt; `{}` lets it stop.
//! Exit code 2 only warns, so nothing is ever signalled through the exit code. There is no
//! field shown to the user.
//!
//! Since 1.0.72 the CLI ends the turn after 8 blocks in a row: the 9th stop's block is ignored
//! and the run ends with the loop on. That stop was blocked, so the next stop (after the user's
//! next prompt) arrives with `stop_hook_active:false` while the loop's last verdict was a block:
//! the same override Claude Code's cap leaves, recorded and counted the same way. The prompt hook
//! tells the user before that ([`crate::prompt_hook`]).
//!
//! Refused, so one turn end is judged once and answered in the shape its reader expects: VS
//! Code's `Stop` (it reads `.github/hooks/` too and sends `hookEventName`), and every event with
//! `hook_event_name`: Claude Code's, and Copilot CLI's own `Stop`, the `snake_case` form it sends a
//! hook configured under Claude's event name. Measured on 1.0.102, the CLI's own `agentStop` is
//! the only one of these with neither field. Only `stopReason:"end_turn"` is judged.

use serde_json::{Map, Value, json};

use super::{Host, foreign_marker, object_line};
use crate::custody::Custody;
use crate::digest::sha256_hex;
use crate::environment::Environment;
use crate::event::{EventError, Fields, StopEvent, Transcript};
use crate::hook_response::HookResponse;
use crate::journal::Journal;
use crate::ledger::{LedgerDecision, LedgerEntry};
use crate::lock::StateLock;
use crate::prompt_hook::PromptResponse;
use crate::reason_code::ReasonCode;
use crate::stop_hook::LOCK_WAIT;
use crate::store::LoopPaths;

pub(super) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    let fields = Fields(object);
    if fields.has_any(&["hookEventName", "hook_event_name"]) {
        return Err(EventError::Foreign("a VS Code or Claude-style event, not Copilot CLI's agentStop"));
    }
    if let Some(what) = foreign_marker(Host::CopilotCli, &fields) {
        return Err(EventError::Foreign(what));
    }
    if !fields.has_any(&["sessionId"]) {
        return Err(EventError::Foreign("not a Copilot CLI event (no sessionId)"));
    }
    if fields.string("stopReason")?.as_deref() != Some("end_turn") {
        return Err(EventError::Foreign("the turn did not end normally"));
    }
    Ok(StopEvent {
        session_id: fields.required_string("sessionId")?,
        // Absent before 1.0.72, which had no block cap to override a block either.
        stop_hook_active: fields.boolean("stop_hook_active")?,
        last_assistant_message: None,
        transcript: fields.path("transcriptPath")?.map(Transcript::Opaque),
    })
}

/// How many blocks in a row Copilot CLI honours before it ends the turn anyway (1.0.72 and
/// newer; measured on 1.0.102: the 9th block is ignored).
pub(crate) const BLOCK_CAP: u32 = 8;

/// The words for the user when their prompt arrives while this session's loop last blocked a
/// stop, or `None` when it did not. A blocked stop keeps the agent working, so a prompt can come
/// only after the CLI ended the turn in spite of the block: its cap of [`BLOCK_CAP`] blocks in a
/// row, or the user interrupting it. The CLI tells nobody (one line in its log file), so this
/// hook does, once: the override is recorded as the stop hook records one, and the loop stays on.
pub(crate) fn block_overridden(env: &Environment, paths: &LoopPaths) -> Option<String> {
    let _lock = StateLock::acquire(&paths.lock, LOCK_WAIT).ok()?;
    let Ok(Custody::Loop { state, .. }) = Custody::check(paths, env.now) else { return None };
    if state.meta.host != Host::CopilotCli || !state.is_active() || !state.meta.last_blocked {
        return None;
    }
    let mut next = state.clone();
    next.meta.last_blocked = false;
    next.meta.harness_overrides += 1;
    next.meta.updated_at = env.now;
    let entry = LedgerEntry {
        detail: Some(format!(
            "Copilot CLI ended the turn although the last stop was blocked (its cap of {BLOCK_CAP} \
             blocks in a row, or the user interrupted the agent); the user was told at their next prompt"
        )),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Note, ReasonCode::HarnessOverride)
    };
    Journal::commit(paths, &next, &[entry]).ok()?;
    Some(format!(
        "for-loop: Copilot CLI ended the agent's last turn although for-loop had blocked it: it \
         honours at most {BLOCK_CAP} blocks in a row (or you interrupted the agent). Your loop is still \
         on, at iteration {} of {}, and verify has not passed. This prompt was not sent to the \
         agent: send it again to go on with the loop, or /cancel-loop to end it (/loop-status shows it).",
        state.meta.iteration, state.meta.settings.max_iterations
    ))
}

/// Where the digest of the last reason a stop of this session was blocked with is kept.
const LAST_BLOCK: &str = "copilot-last-block";

/// Keeps the digest of `reason`, which the CLI is about to submit as the next prompt, for
/// [`block_overridden`] to know it. A failure only means a continuation may be taken for the
/// user's prompt once: the user is told the loop is on and asked to send the prompt again.
pub(crate) fn remember_block(env: &Environment, session_id: &str, reason: &str) {
    let Ok(store) = crate::store::Store::locate(env) else { return };
    let dir = store.paths(session_id).dir;
    if dir.is_dir() {
        let _ = std::fs::write(dir.join(LAST_BLOCK), sha256_hex(reason.as_bytes()));
    }
}

/// Whether `prompt` is the reason the last stop of this loop was blocked with. The CLI submits
/// a block's reason as the next prompt, through the same `userPromptSubmitted` hook: that prompt
/// is the loop going on, not the user. Matched by content, so a user who pastes it is only not
/// told of an override.
pub(crate) fn is_reinjection(paths: &LoopPaths, prompt: &str) -> bool {
    let remembered = crate::bounded_read::read(&paths.dir.join(LAST_BLOCK), 64).ok();
    remembered.as_deref() == Some(sha256_hex(prompt.as_bytes()).as_bytes())
}

/// The prompt hook's answer in the shape `userPromptSubmitted` reads (1.0.44 and newer):
/// `{"handled":true,"responseContent":R}` shows R to the user and sends nothing to the model;
/// `{"additionalContext":C}` sends the prompt on with C beside it (1.0.65 and newer), which is
/// how the model learns the loop a start began. The CLI has no line for the user alone, so a
/// `system_message` is not printed.
pub(crate) fn prompt_answer(response: &PromptResponse) -> String {
    match (&response.block, &response.context) {
        (Some(shown), _) => object_line([("handled", json!(true)), ("responseContent", json!(shown))]),
        (None, Some(context)) => object_line([("additionalContext", json!(context))]),
        (None, None) => "{}".to_string(),
    }
}

pub(super) fn render(response: &HookResponse) -> String {
    match &response.block {
        Some(reason) => object_line([("decision", json!("block")), ("reason", json!(reason))]),
        None => "{}".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_object;

    fn parse_text(text: &str) -> Result<StopEvent, EventError> {
        parse(&parse_object(text.as_bytes()).unwrap())
    }

    #[test]
    fn reads_the_agent_stop() {
        let event = parse_text(
            r#"{"timestamp":1763800000000,"cwd":"/p","sessionId":"cp-1","transcriptPath":"/t","stopReason":"end_turn"}"#,
        )
        .unwrap();
        assert_eq!(event.session_id, "cp-1");
        assert_eq!(event.transcript, Some(Transcript::Opaque("/t".into())));
        assert_eq!(event.stop_hook_active, None);
    }

    /// 1.0.102's `agentStop`, as the CLI sent it on a continuation.
    #[test]
    fn reads_the_flag_1_0_72_added() {
        let event = parse_text(
            r#"{"sessionId":"11111111-2222-4333-8444-555555555556","timestamp":1795709402735,"cwd":"/p",
                "transcriptPath":"/h/.copilot/session-state/11111111-2222-4333-8444-555555555556/events.jsonl",
                "stopReason":"end_turn","stop_hook_active":true}"#,
        )
        .unwrap();
        assert_eq!(event.session_id, "11111111-2222-4333-8444-555555555556");
        assert_eq!(event.stop_hook_active, Some(true));
        assert!(matches!(
            parse_text(r#"{"sessionId":"s","stopReason":"end_turn","stop_hook_active":"yes"}"#),
            Err(EventError::WrongType { field: "stop_hook_active", .. })
        ));
    }

    #[test]
    fn refuses_vs_code_its_own_stop_form_and_abnormal_ends() {
        let vs_code =
            r#"{"sessionId":"s","hookEventName":"Stop","transcript_path":"/t","stop_hook_active":false}"#;
        assert!(matches!(parse_text(vs_code), Err(EventError::Foreign(_))));
        // What 1.0.102 sends a hook configured as `Stop` for the same turn end.
        let snake = r#"{"hook_event_name":"Stop","session_id":"s","timestamp":"2026-11-26T16:08:59.550Z","cwd":"/p",
            "transcript_path":"/t","stop_reason":"end_turn","stop_hook_active":false}"#;
        assert!(matches!(parse_text(snake), Err(EventError::Foreign(_))));
        assert_eq!(
            parse_text(r#"{"sessionId":"s","stopReason":"error"}"#),
            Err(EventError::Foreign("the turn did not end normally"))
        );
        assert_eq!(
            parse_text(r#"{"sessionId":"","stopReason":"end_turn"}"#),
            Err(EventError::Missing("sessionId"))
        );
    }

    #[test]
    fn prompt_answers_are_handled_or_context() {
        let shown = PromptResponse { block: Some("status".into()), ..PromptResponse::default() };
        assert_eq!(prompt_answer(&shown), r#"{"handled":true,"responseContent":"status"}"#);
        let started = PromptResponse {
            system_message: Some("for the user".into()),
            context: Some("for-loop: started".into()),
            ..PromptResponse::default()
        };
        assert_eq!(prompt_answer(&started), r#"{"additionalContext":"for-loop: started"}"#);
        assert_eq!(prompt_answer(&PromptResponse::default()), "{}");
    }

    #[test]
    fn output_contract() {
        assert_eq!(render(&HookResponse::allow()), "{}");
        assert_eq!(render(&HookResponse::allow_with("x")), "{}");
        assert_eq!(
            render(&HookResponse::block("go on".into(), "1/3".into())),
            r#"{"decision":"block","reason":"go on"}"#
        );
    }
}
