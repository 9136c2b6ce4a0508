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
    /// The session's own background work in flight, where the host's event lists it; `None`
    /// where it does not (the stop is then judged as ever).
    pub background: Option<Vec<crate::host::background::BackgroundTask>>,
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

    /// Whether `field` is the string `value`.
    pub(crate) fn is(&self, field: &str, value: &str) -> bool {
        self.0.get(field).and_then(Value::as_str) == Some(value)
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
            background: crate::host::background::in_flight(object),
        })
    }
}

/// A turn the host ended on an error instead of a normal stop (Claude Code's `StopFailure`,
/// Cursor's `stop` with `status:"error"`). No Stop hook runs for it: it is told and recorded,
/// never judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TurnFailure {
    pub session_id: String,
    pub error: TurnError,
    /// The host's words for the error, on one line (empty when it gave none).
    pub said: String,
}

/// What ended the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnError {
    /// The conversation no longer fits the model's context window (`prompt is too long`).
    ContextExhausted,
    /// A rate or usage limit; `resets_at` when the host said when it lifts.
    Limited { resets_at: Option<jiff::Timestamp> },
    /// Any other error, by the host's name for it (`unknown` when it gave none).
    Other { kind: String },
}

/// The most of the host's words kept.
const SAID_CHARS: usize = 300;

impl TurnError {
    /// Classifies the host's error `kind` and its words `said`, reading a reset time given in
    /// local time in `now`'s zone. The words decide before the kind: Claude Code names a prompt
    /// too long `invalid_request`, and the same kind covers errors that are no such thing.
    pub(crate) fn classify(kind: &str, said: &str, now: &jiff::Zoned) -> TurnError {
        let lower = said.to_lowercase();
        let exhausted =
            ["prompt is too long", "context window", "context_length_exceeded", "input is too long"];
        let limited = ["rate limit", "rate_limit", "usage limit", "hit your limit", "limit reached", "(429)"];
        if exhausted.iter().any(|needle| lower.contains(needle)) {
            TurnError::ContextExhausted
        } else if kind == "rate_limit" || limited.iter().any(|needle| lower.contains(needle)) {
            TurnError::Limited { resets_at: resets_at(said, now) }
        } else {
            let kind = kind.trim();
            TurnError::Other { kind: if kind.is_empty() { "unknown".into() } else { kind.to_string() } }
        }
    }
}

/// `text` on one line, cut to [`SAID_CHARS`].
pub(crate) fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(SAID_CHARS).collect()
}

/// When a limit lifts, as the host's words give it: a Unix time after a `|` (`Claude AI usage
/// limit reached|1764000000`), a wait (`resets in 30 minutes`, `try again in 7 seconds`), or a
/// clock time after `reset` (`resets 3pm (Europe/Berlin)`, `will reset at 5:30pm`), the next
/// time that clock shows in the zone named in brackets, else in `now`'s.
pub(crate) fn resets_at(said: &str, now: &jiff::Zoned) -> Option<jiff::Timestamp> {
    if let Some((_, after)) = said.rsplit_once('|') {
        let digits: String = after.trim().chars().take_while(char::is_ascii_digit).collect();
        if (9..=11).contains(&digits.len()) {
            return jiff::Timestamp::from_second(digits.parse().ok()?).ok();
        }
    }
    let lower = said.to_lowercase();
    for marker in ["resets in ", "reset in ", "try again in ", "retry after "] {
        if let Some(at) = lower.find(marker) {
            return wait_from(&lower[at + marker.len()..], now);
        }
    }
    let at = lower.find("reset")?;
    let rest = &lower[at..];
    let clock = rest.split_whitespace().skip(1).take(3).find_map(clock_time)?;
    let zone = zone_in(&said[at..]).unwrap_or_else(|| now.time_zone().clone());
    let here = now.with_time_zone(zone);
    let today = here.date().to_datetime(clock).to_zoned(here.time_zone().clone()).ok()?;
    let next = if today.timestamp() > now.timestamp() { today } else { today.tomorrow().ok()? };
    Some(next.timestamp())
}

/// `now` plus the wait in `7 seconds`, `30 minutes`, `2 hours` or `45s`.
fn wait_from(text: &str, now: &jiff::Zoned) -> Option<jiff::Timestamp> {
    let digits: String = text.trim_start().chars().take_while(char::is_ascii_digit).collect();
    let n: i64 = digits.parse().ok()?;
    let unit = text.trim_start()[digits.len()..].trim_start();
    let secs = match unit.chars().next() {
        Some('h') => n * 3600,
        Some('m') if !unit.starts_with("ms") => n * 60,
        _ => n,
    };
    now.timestamp().checked_add(jiff::SignedDuration::from_secs(secs)).ok()
}

/// `3pm`, `3:30pm`, `11am,` as a time of day.
fn clock_time(word: &str) -> Option<jiff::civil::Time> {
    let word = word.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    let (clock, pm) = match (word.strip_suffix("pm"), word.strip_suffix("am")) {
        (Some(clock), _) => (clock, true),
        (_, Some(clock)) => (clock, false),
        _ => return None,
    };
    let (hour, minute) = clock.split_once(':').unwrap_or((clock, "0"));
    let (hour, minute): (i8, i8) = (hour.parse().ok()?, minute.parse().ok()?);
    if !(1..=12).contains(&hour) {
        return None;
    }
    jiff::civil::Time::new(hour % 12 + if pm { 12 } else { 0 }, minute, 0, 0).ok()
}

/// The time zone named in brackets, `(Europe/Berlin)`, when this machine knows it.
fn zone_in(text: &str) -> Option<jiff::tz::TimeZone> {
    let (_, after) = text.split_once('(')?;
    let (name, _) = after.split_once(')')?;
    jiff::tz::TimeZone::get(name.trim()).ok()
}

impl TurnFailure {
    /// Claude Code's `StopFailure`: `error` (its kind: `rate_limit`, `invalid_request`,
    /// `server_error`, ...), `error_details`, `last_assistant_message`. A subagent's failure
    /// (it has an `agent_id`: Claude Code's compaction agent fails this way while the session's
    /// turn goes on) is not the session's turn end.
    pub(crate) fn from_claude(
        object: &Map<String, Value>,
        now: &jiff::Zoned,
    ) -> Result<TurnFailure, EventError> {
        let fields = Fields(object);
        if fields.string("agent_id")?.is_some_and(|id| !id.is_empty()) {
            return Err(EventError::Foreign("a subagent's failed turn, not the session's"));
        }
        let session_id = fields.required_string("session_id")?;
        let kind = fields.string("error")?.unwrap_or_default();
        let details = fields.string("error_details")?.unwrap_or_default();
        let last = fields.string("last_assistant_message")?.unwrap_or_default();
        let said = one_line(&format!("{last} {details}"));
        Ok(TurnFailure { session_id, error: TurnError::classify(&kind, &said, now), said })
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

    /// 2026-11-23 18:29:16 UTC.
    fn now() -> jiff::Zoned {
        jiff::civil::DateTime::constant(2026, 11, 23, 18, 29, 16, 0)
            .to_zoned(jiff::tz::TimeZone::UTC)
            .unwrap()
    }

    fn reset(said: &str) -> Option<String> {
        resets_at(said, &now()).map(|t| t.to_string())
    }

    #[test]
    fn a_reset_time_is_read_in_each_form_the_hosts_give() {
        assert_eq!(
            reset("Claude AI usage limit reached|1764000000").as_deref(),
            Some("2025-11-24T16:00:00Z")
        );
        assert_eq!(
            reset("You've hit your limit · resets in 30 minutes").as_deref(),
            Some("2026-11-23T18:59:16Z")
        );
        assert_eq!(reset("Try again in 7 seconds.").as_deref(), Some("2026-11-23T18:29:23Z"));
        assert_eq!(reset("usage limit reached · resets 8pm").as_deref(), Some("2026-11-23T20:00:00Z"));
        assert_eq!(
            reset("Your limit will reset at 5:30am").as_deref(),
            Some("2026-11-24T05:30:00Z"),
            "tomorrow"
        );
        assert_eq!(
            reset("You've hit your limit · resets 8pm (Europe/Berlin)").as_deref(),
            Some("2026-11-23T19:00:00Z"),
            "in the zone named"
        );
        for none in ["API Error: Request rejected (429)", "resets soon", "resets 13pm", "limit|12", ""] {
            assert_eq!(reset(none), None, "{none}");
        }
    }

    #[test]
    fn an_error_is_classified_by_its_words_before_its_kind() {
        let now = now();
        assert_eq!(
            TurnError::classify("invalid_request", "Prompt is too long", &now),
            TurnError::ContextExhausted
        );
        assert_eq!(
            TurnError::classify("invalid_request", "400 bad tool schema", &now),
            TurnError::Other { kind: "invalid_request".into() }
        );
        assert_eq!(TurnError::classify("rate_limit", "", &now), TurnError::Limited { resets_at: None });
        assert!(matches!(
            TurnError::classify("unknown", "Claude usage limit reached. resets 8pm", &now),
            TurnError::Limited { resets_at: Some(_) }
        ));
        assert_eq!(TurnError::classify(" ", "", &now), TurnError::Other { kind: "unknown".into() });
        assert_eq!(one_line(&format!("a\n  b{}", "c".repeat(400))).chars().count(), SAID_CHARS);
    }

    #[test]
    fn stdin_is_bounded() {
        let huge = std::io::repeat(b' ').take(MAX_EVENT_BYTES as u64 + 10);
        assert_eq!(read_bounded(huge), Err(EventError::TooLarge));
        assert_eq!(read_bounded(&b"{}"[..]).unwrap(), b"{}");
    }
}
