//! The turn-end event a host sends the hook on stdin, read leniently and normalised.
//!
//! Every field is optional on some version of some host, so each one is read on its own and a
//! wrong type is named in the error rather than failing the whole parse with a serde message.

use std::io::{self, Read};
use std::path::PathBuf;

use serde_json::{Map, Value};
use thiserror::Error;

/// More than this on stdin is not a turn-end event. The largest real field, the last message, is
/// bounded by the model's output limit, far below this.
pub(crate) const MAX_EVENT_BYTES: usize = 32 << 20;

/// A turn end, whichever host sent it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct StopEvent {
    pub session_id: String,
    /// Whether the host is continuing because a stop hook blocked the last stop, where the
    /// adapter knows the host's flag to mean exactly that; `None` where it does not (then no
    /// override of a block is ever inferred).
    pub stop_hook_active: Option<bool>,
    /// The agent's final message, when the host sends it.
    pub last_assistant_message: Option<String>,
    pub transcript: Option<Transcript>,
}

/// The session's transcript, and whose format it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transcript {
    /// Claude Code's JSONL: read for the current turn's text and tool calls.
    ClaudeCode(PathBuf),
    /// The host's own format: only searched as text for the token of a loop waiting to be
    /// claimed ([`crate::provenance::claim`]).
    Opaque(PathBuf),
}

impl Transcript {
    pub(crate) fn path(&self) -> &std::path::Path {
        match self {
            Transcript::ClaudeCode(path) | Transcript::Opaque(path) => path,
        }
    }
}

impl StopEvent {
    /// The transcript, when it is in Claude Code's format.
    pub(crate) fn claude_transcript(&self) -> Option<&std::path::Path> {
        match &self.transcript {
            Some(Transcript::ClaudeCode(path)) => Some(path),
            _ => None,
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum EventError {
    #[error("the event on stdin was empty")]
    Empty,
    #[error("the event on stdin was over {} MiB", MAX_EVENT_BYTES >> 20)]
    TooLarge,
    #[error("the event on stdin is not JSON ({0})")]
    NotJson(String),
    #[error("the event on stdin is JSON but not an object")]
    NotObject,
    #[error("the event's `{field}` should be {expected}")]
    WrongType { field: &'static str, expected: &'static str },
    #[error("the event has no `{0}`")]
    Missing(&'static str),
    #[error("could not read stdin: {0}")]
    Read(String),
    /// Another host's payload, or another event: not ours to judge, and not an error to report.
    #[error("the event is not this host's turn end ({0})")]
    Foreign(&'static str),
}

/// Reads stdin up to [`MAX_EVENT_BYTES`].
pub(crate) fn read_bounded(reader: impl Read) -> Result<Vec<u8>, EventError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_EVENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e: io::Error| EventError::Read(e.to_string()))?;
    if bytes.len() > MAX_EVENT_BYTES {
        return Err(EventError::TooLarge);
    }
    Ok(bytes)
}

/// Parses bytes into a JSON object. A leading UTF-8 byte order mark is skipped: Cursor has been
/// measured sending one, and serde would otherwise reject the whole event.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, EventError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(EventError::Empty);
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(EventError::NotObject),
        Err(e) => Err(EventError::NotJson(e.to_string())),
    }
}

/// Typed access to optional fields of an event object.
pub(crate) struct Fields<'a>(pub &'a Map<String, Value>);

impl Fields<'_> {
    pub(crate) fn string(&self, field: &'static str) -> Result<Option<String>, EventError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(EventError::WrongType { field, expected: "a string" }),
        }
    }

    /// A path; an empty string is no path (Antigravity 1.2.9 sends `"transcriptPath": ""`).
    pub(crate) fn path(&self, field: &'static str) -> Result<Option<PathBuf>, EventError> {
        Ok(self.string(field)?.filter(|s| !s.is_empty()).map(PathBuf::from))
    }

    pub(crate) fn required_string(&self, field: &'static str) -> Result<String, EventError> {
        self.string(field)?.filter(|s| !s.is_empty()).ok_or(EventError::Missing(field))
    }

    pub(crate) fn boolean(&self, field: &'static str) -> Result<Option<bool>, EventError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(EventError::WrongType { field, expected: "true or false" }),
        }
    }

    /// A non-negative integer (counters such as Cursor's `loop_count`).
    pub(crate) fn count(&self, field: &'static str) -> Result<Option<u64>, EventError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => {
                value.as_u64().map(Some).ok_or(EventError::WrongType { field, expected: "a count" })
            }
        }
    }

    /// The first entry of an array of strings (`workspace_roots`, `workspacePaths`).
    #[cfg(test)]
    pub(crate) fn first_of_strings(&self, field: &'static str) -> Result<Option<String>, EventError> {
        let wrong = EventError::WrongType { field, expected: "an array of strings" };
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => match items.first() {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
                Some(_) => Err(wrong),
            },
            Some(_) => Err(wrong),
        }
    }

    /// A nested object, for hosts whose events group fields (Antigravity's `snake_case` dialect).
    pub(crate) fn object(&self, field: &'static str) -> Result<Option<Fields<'_>>, EventError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Fields(map))),
            Some(_) => Err(EventError::WrongType { field, expected: "an object" }),
        }
    }

    /// Whether any of `fields` is present (even as `null`): how a payload shows which host sent it.
    pub(crate) fn has_any(&self, fields: &[&str]) -> bool {
        fields.iter().any(|field| self.0.contains_key(*field))
    }
}

impl StopEvent {
    /// A Claude Code `Stop` event. `SubagentStop` and other events are not turn ends of the
    /// session and are refused, so a misrouted hook never advances a loop.
    pub(crate) fn from_claude(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
        let fields = Fields(object);
        if let Some(name) = fields.string("hook_event_name")?
            && name != "Stop"
        {
            return Err(EventError::Foreign("not a Stop event"));
        }
        Ok(StopEvent {
            session_id: fields.required_string("session_id")?,
            transcript: fields.path("transcript_path")?.map(Transcript::ClaudeCode),
            // Absent on old versions: absent means no hook is continuing the turn.
            stop_hook_active: Some(fields.boolean("stop_hook_active")?.unwrap_or(false)),
            last_assistant_message: fields.string("last_assistant_message")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude(text: &str) -> Result<StopEvent, EventError> {
        StopEvent::from_claude(&parse_object(text.as_bytes())?)
    }

    #[test]
    fn reads_the_2_1_328_payload() {
        let event = claude(
            r#"{"session_id":"s1","transcript_path":"/t.jsonl","cwd":"/p","prompt_id":"x","permission_mode":"default",
               "effort":{"level":"high"},"hook_event_name":"Stop","stop_hook_active":true,
               "last_assistant_message":"done","background_tasks":[],"session_crons":[]}"#,
        )
        .unwrap();
        assert_eq!(event.session_id, "s1");
        assert_eq!(event.stop_hook_active, Some(true));
        assert_eq!(event.last_assistant_message.as_deref(), Some("done"));
        assert_eq!(event.claude_transcript(), Some(std::path::Path::new("/t.jsonl")));
    }

    #[test]
    fn old_payloads_without_optional_fields() {
        let event = claude(r#"{"session_id":"s1"}"#).unwrap();
        assert_eq!(event.stop_hook_active, Some(false));
        assert_eq!(event.last_assistant_message, None);
    }

    #[test]
    fn bad_input_is_named() {
        assert_eq!(claude(""), Err(EventError::Empty));
        assert_eq!(claude(" \n"), Err(EventError::Empty));
        assert!(matches!(claude("not json"), Err(EventError::NotJson(_))));
        assert_eq!(claude("[1]"), Err(EventError::NotObject));
        assert_eq!(claude("{}"), Err(EventError::Missing("session_id")));
        assert_eq!(claude(r#"{"session_id":""}"#), Err(EventError::Missing("session_id")));
        assert_eq!(
            claude(r#"{"session_id":7}"#),
            Err(EventError::WrongType { field: "session_id", expected: "a string" })
        );
        assert_eq!(
            claude(r#"{"session_id":"s","stop_hook_active":"yes"}"#),
            Err(EventError::WrongType { field: "stop_hook_active", expected: "true or false" })
        );
        assert_eq!(
            claude(r#"{"session_id":"s","hook_event_name":"SubagentStop"}"#),
            Err(EventError::Foreign("not a Stop event"))
        );
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let object = parse_object(b"\xEF\xBB\xBF{\"a\":1}").unwrap();
        assert_eq!(object["a"], 1);
        assert_eq!(parse_object(b"\xEF\xBB\xBF"), Err(EventError::Empty));
    }

    #[test]
    fn typed_accessors() {
        let object =
            parse_object(br#"{"n":3,"neg":-1,"roots":["/a","/b"],"empty":[],"bad":[1],"o":{"k":"v"}}"#)
                .unwrap();
        let fields = Fields(&object);
        assert_eq!(fields.count("n"), Ok(Some(3)));
        assert_eq!(fields.count("missing"), Ok(None));
        assert!(fields.count("neg").is_err());
        assert_eq!(fields.first_of_strings("roots"), Ok(Some("/a".into())));
        assert_eq!(fields.first_of_strings("empty"), Ok(None));
        assert!(fields.first_of_strings("bad").is_err());
        assert!(fields.first_of_strings("n").is_err());
        assert_eq!(fields.object("o").unwrap().unwrap().string("k"), Ok(Some("v".into())));
        assert!(fields.object("n").is_err());
        assert!(fields.has_any(&["x", "n"]));
        assert!(!fields.has_any(&["x"]));
    }

    #[test]
    fn stdin_is_bounded() {
        let huge = std::io::repeat(b' ').take(MAX_EVENT_BYTES as u64 + 10);
        assert_eq!(read_bounded(huge), Err(EventError::TooLarge));
        assert_eq!(read_bounded(&b"{}"[..]).unwrap(), b"{}");
    }
}
