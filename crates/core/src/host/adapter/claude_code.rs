//! Claude Code's `Stop`: `snake_case` input with `hook_event_name:"Stop"`; output
//! `{"decision":"block","reason":…,"systemMessage":…}`, `{"systemMessage":…}` or nothing.
//!
//! Cursor and Copilot CLI also run the hooks in Claude Code's settings, with their own payloads;
//! those are refused here, so one turn end is never judged twice or answered in the wrong shape.

use serde_json::{Map, Value};

use crate::host::event::{EventError, Fields, StopEvent};
use crate::host::{Host, foreign_marker};

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    if let Some(what) = foreign_marker(Host::ClaudeCode, &Fields(object)) {
        return Err(EventError::Foreign(what));
    }
    StopEvent::from_claude(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::event::parse_object;

    fn parse_text(text: &str) -> Result<StopEvent, EventError> {
        parse(&parse_object(text.as_bytes()).unwrap())
    }

    #[test]
    fn a_cursor_payload_sent_to_claudes_hook_is_foreign() {
        // Cursor maps its `stop` onto Claude's `Stop` hooks; whatever it names the event, its
        // fields give it away.
        let cursor = r#"{"conversation_id":"c","session_id":"c","hook_event_name":"Stop","status":"completed","loop_count":0,"workspace_roots":["/p"],"cursor_version":"3.17.19"}"#;
        assert_eq!(parse_text(cursor), Err(EventError::Foreign("a Cursor event")));
        let copilot =
            r#"{"sessionId":"s","session_id":"s","hook_event_name":"Stop","stopReason":"end_turn"}"#;
        assert_eq!(parse_text(copilot), Err(EventError::Foreign("a Copilot CLI or VS Code event")));
    }

    #[test]
    fn its_own_payload_reads_as_before() {
        let event =
            parse_text(r#"{"session_id":"s1","hook_event_name":"Stop","stop_hook_active":true}"#).unwrap();
        assert_eq!(event.session_id, "s1");
        assert_eq!(event.stop_hook_active, Some(true));
    }
}
