//! GitHub Copilot CLI's `agentStop`: camelCase input (`sessionId`, `cwd`, `transcriptPath`,
//! `stopReason`, `timestamp`).
//!
//! Output: `{"decision":"block","reason":P}` queues P as the next user prompt; `{}` lets it stop.
//! Exit code 2 only warns, so nothing is ever signalled through the exit code. There is no
//! documented field shown to the user.
//!
//! VS Code reads the same `.github/hooks/` files but sends `hookEventName` and
//! `stop_hook_active` and expects another output shape, so its events are refused. Only
//! `stopReason:"end_turn"` is judged.

use serde_json::{Map, Value, json};

use super::{Host, foreign_marker, object_line};
use crate::host::event::{EventError, Fields, StopEvent, Transcript};
use crate::host::hook_response::HookResponse;

pub(super) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    let fields = Fields(object);
    if fields.has_any(&["hookEventName", "hook_event_name", "stop_hook_active"]) {
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
        stop_hook_active: None,
        last_assistant_message: None,
        transcript: fields.path("transcriptPath")?.map(Transcript::Opaque),
    })
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
    use crate::host::event::parse_object;

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
    }

    #[test]
    fn refuses_vs_code_and_abnormal_ends() {
        assert!(matches!(
            parse_text(r#"{"sessionId":"s","hookEventName":"Stop","stop_hook_active":false}"#),
            Err(EventError::Foreign(_))
        ));
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
    fn output_contract() {
        assert_eq!(render(&HookResponse::allow()), "{}");
        assert_eq!(render(&HookResponse::allow_with("x")), "{}");
        assert_eq!(
            render(&HookResponse::block("go on".into(), "1/3".into())),
            r#"{"decision":"block","reason":"go on"}"#
        );
    }
}
