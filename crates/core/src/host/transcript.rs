//! Finding the agent's last message in a Claude Code transcript (JSONL), for hosts too old to
//! send `last_assistant_message` with the Stop event.
//!
//! The walk goes backwards from the end and stops at the start of the current turn, so a
//! promise written in an earlier turn, in the task or in our own re-injected prompt never counts.
//! Subagent (sidechain) records and synthetic error records are skipped; malformed lines (raw
//! control characters are common) are passed over.

use std::io;
use std::path::Path;

use serde_json::Value;

use crate::support::ReverseLines;

/// The most of a transcript read to find one turn.
pub(crate) const MAX_TRANSCRIPT_BYTES: u64 = 8 << 20;

/// What the current turn holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Turn {
    /// The text blocks of the turn's assistant records, oldest first, joined by newlines; `None`
    /// when there is none (yet: the host may not have flushed it).
    pub text: Option<String>,
    /// Tool calls the agent made in the turn.
    pub tool_uses: usize,
}

/// The text blocks of the current turn's assistant records, oldest first, joined by newlines.
/// `None` when the turn has no assistant text (yet: the host may not have flushed it).
#[cfg(test)]
pub(crate) fn last_assistant_text(path: &Path) -> io::Result<Option<String>> {
    current_turn(path).map(|turn| turn.text)
}

/// Reads the current turn from the end of the transcript.
pub(crate) fn current_turn(path: &Path) -> io::Result<Turn> {
    let mut tool_uses = 0;
    let mut texts: Vec<String> = Vec::new();
    for line in ReverseLines::open(path, MAX_TRANSCRIPT_BYTES)? {
        let Ok(record) = serde_json::from_slice::<Value>(&line?) else {
            continue;
        };
        if record.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        match record.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                if is_synthetic(&record) {
                    continue;
                }
                let blocks = record.pointer("/message/content").and_then(Value::as_array);
                for block in blocks.into_iter().flatten().rev() {
                    if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                        tool_uses += 1;
                    }
                    if block.get("type").and_then(Value::as_str) == Some("text")
                        && let Some(text) = block.get("text").and_then(Value::as_str)
                    {
                        texts.push(text.to_string());
                    }
                }
            }
            Some("user") if !carries_tool_results(&record) => break,
            _ => {}
        }
    }
    texts.reverse();
    Ok(Turn { text: (!texts.is_empty()).then(|| texts.join("\n")), tool_uses })
}

/// Whether the current turn holds a tool call still without its result: the host writes a call
/// before running the tool, and runs its hooks between turns, never while a tool runs. So a hook
/// event arriving now was sent by a tool, i.e. forged by the agent. (A turn ends on a reply
/// without a tool call, so a real stop never finds one pending.) Every call of the turn is
/// matched to its result by id, not only the last record: in a reply with several calls, the
/// first one's result is written while the second still runs.
pub(crate) fn tool_call_pending(path: &Path) -> bool {
    let Ok(lines) = ReverseLines::open(path, MAX_TRANSCRIPT_BYTES) else { return false };
    let mut answered = std::collections::HashSet::new();
    for line in lines.map_while(Result::ok) {
        let Ok(record) = serde_json::from_slice::<Value>(&line) else { continue };
        if record["isSidechain"] == true {
            continue;
        }
        let blocks = record["message"]["content"].as_array().cloned().unwrap_or_default();
        match record["type"].as_str() {
            Some("user") if carries_tool_results(&record) => {
                answered.extend(blocks.iter().filter_map(|b| b["tool_use_id"].as_str().map(str::to_owned)));
            }
            // The prompt (the user's, or a Stop hook's feedback) that began the turn.
            Some("user") => return false,
            Some("assistant") => {
                let open = blocks.iter().any(|b| {
                    b["type"] == "tool_use" && b["id"].as_str().is_none_or(|id| !answered.contains(id))
                });
                if open {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// A digest of the turn's final reply: the last record of the main conversation, when it is a
/// reply of the model that calls no tool. `None` when the last word is a prompt (the user's, or a
/// Stop hook's feedback), a tool call or a tool's result: the turn has not ended, so a Stop event
/// now did not come from the host. Each record carries its own id and time, so two replies of
/// the same text still differ.
pub(crate) fn final_reply(path: &Path) -> io::Result<Option<String>> {
    for line in ReverseLines::open(path, MAX_TRANSCRIPT_BYTES)? {
        let line = line?;
        let Ok(record) = serde_json::from_slice::<Value>(&line) else { continue };
        if record["isSidechain"] == true {
            continue;
        }
        match record["type"].as_str() {
            Some("assistant") if is_synthetic(&record) => {}
            Some("assistant") => {
                let blocks = record["message"]["content"].as_array().cloned().unwrap_or_default();
                let calls = blocks.iter().any(|b| b["type"] == "tool_use");
                return Ok((!calls).then(|| crate::support::digest::sha256_hex(&line)));
            }
            Some("user") => return Ok(None),
            _ => {}
        }
    }
    Ok(None)
}

/// How long a tool call must stay pending in the transcript before a stop is taken for forged.
/// Claude Code writes its transcript asynchronously, so a real stop can arrive before the turn's
/// last reply is written (the flush race: anthropics/claude-code#74340, #81825). A forged stop
/// holds its tool call open while it waits, so its transcript cannot move on; a real one's
/// catches up within this time.
pub(crate) const FLUSH_SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether a tool call is still pending after [`FLUSH_SETTLE`]: a call is believed pending only
/// once the transcript has shown it for that long. Costs nothing when no call is pending.
pub(crate) fn tool_call_still_pending(path: &Path) -> bool {
    let deadline = std::time::Instant::now() + FLUSH_SETTLE;
    while tool_call_pending(path) {
        if std::time::Instant::now() >= deadline {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    false
}

/// Whether the main conversation's last reply is the host's record of an API error (Claude Code
/// writes a synthetic reply, `isApiErrorMessage`, for a turn that ended on one), waiting up to
/// [`FLUSH_SETTLE`] for it to be written. A report of a failed turn that the transcript does not
/// bear out was not sent by the host.
pub(crate) fn ends_on_api_error(path: &Path) -> bool {
    let deadline = std::time::Instant::now() + FLUSH_SETTLE;
    loop {
        if last_reply_is_api_error(path) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

fn last_reply_is_api_error(path: &Path) -> bool {
    last_reply(path)
        .is_some_and(|record| record.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true))
}

/// The main conversation's last reply, when no prompt follows it. A compaction's summary is no
/// prompt: the host writes it as the user's, after the reply that ended the turn it compacted.
fn last_reply(path: &Path) -> Option<Value> {
    for line in ReverseLines::open(path, MAX_TRANSCRIPT_BYTES).ok()?.map_while(Result::ok) {
        let Ok(record) = serde_json::from_slice::<Value>(&line) else { continue };
        if record["isSidechain"] == true || record["isCompactSummary"] == true {
            continue;
        }
        match record["type"].as_str() {
            Some("assistant") => return Some(record),
            Some("user") => return None,
            _ => {}
        }
    }
    None
}

/// The host's record of the API error that ended the last turn, as its transcript keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiErrorReply {
    /// The host's name for the error (`invalid_request`, `rate_limit`; `unknown` when absent).
    pub(crate) kind: String,
    /// Its words: the reply's text and the error's details.
    pub(crate) said: String,
    pub(crate) at: jiff::Timestamp,
}

/// The API error the main conversation's last reply records, when it is one and says when it
/// was written: what the host's report of the failed turn (`StopFailure`) would have said.
pub(crate) fn last_reply_api_error(path: &Path) -> Option<ApiErrorReply> {
    let record = last_reply(path)?;
    if record.get("isApiErrorMessage").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let at = record.get("timestamp").and_then(Value::as_str)?.parse().ok()?;
    let text = record
        .pointer("/message/content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let details = record.get("errorDetails").and_then(Value::as_str).unwrap_or_default();
    let kind = record.get("error").and_then(Value::as_str).filter(|k| !k.is_empty()).unwrap_or("unknown");
    Some(ApiErrorReply {
        kind: kind.to_string(),
        said: crate::host::event::one_line(&format!("{text} {details}")),
        at,
    })
}

/// When the last turn in the transcript began: the time of its first reply from the model, after
/// the last prompt (the user's, or a Stop hook's feedback). `None` when that turn has no reply
/// (an interrupted or empty turn) or no time. Read at the user's next prompt, before the host
/// writes it, this is the turn a Stop hook should have judged.
pub(crate) fn last_turn_began(path: &Path) -> Option<jiff::Timestamp> {
    let mut began = None;
    for line in ReverseLines::open(path, MAX_TRANSCRIPT_BYTES).ok()?.map_while(Result::ok) {
        let Ok(record) = serde_json::from_slice::<Value>(&line) else { continue };
        if record.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        match record.get("type").and_then(Value::as_str) {
            Some("assistant") if !is_synthetic(&record) => {
                began =
                    record.get("timestamp").and_then(Value::as_str).and_then(|t| t.parse().ok()).or(began);
            }
            Some("user") if !carries_tool_results(&record) => break,
            _ => {}
        }
    }
    began
}

fn is_synthetic(record: &Value) -> bool {
    record.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true)
        || record.pointer("/message/model").and_then(Value::as_str) == Some("<synthetic>")
}

/// Tool results come back in user records inside a turn; they do not start a new one.
fn carries_tool_results(record: &Value) -> bool {
    record.pointer("/message/content").and_then(Value::as_array).is_some_and(|blocks| {
        !blocks.is_empty()
            && blocks.iter().all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write;

    fn transcript(records: &[Value], raw_tail: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        for record in records {
            writeln!(file, "{record}").unwrap();
        }
        file.write_all(raw_tail.as_bytes()).unwrap();
        file
    }

    fn user(text: &str) -> Value {
        json!({"type": "user", "message": {"role": "user", "content": text}})
    }

    fn assistant(blocks: &Value) -> Value {
        json!({"type": "assistant", "message": {"role": "assistant", "model": "m", "content": blocks}})
    }

    #[test]
    fn joins_the_current_turn_text_across_tool_use() {
        let file = transcript(
            &[
                user("old prompt"),
                assistant(&json!([{"type": "text", "text": "<promise>OLD</promise>"}])),
                user("new prompt"),
                assistant(&json!([{"type": "text", "text": "first"}])),
                assistant(&json!([{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}])),
                json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}}),
                assistant(&json!([{"type": "text", "text": "second"}])),
                json!({"type": "system", "subtype": "turn_duration"}),
            ],
            "",
        );
        assert_eq!(last_assistant_text(file.path()).unwrap().as_deref(), Some("first\nsecond"));
        assert_eq!(current_turn(file.path()).unwrap().tool_uses, 1);
    }

    #[test]
    fn a_turn_ends_on_an_api_error_only_when_its_last_reply_is_the_hosts_error_record() {
        let mut error = assistant(&json!([{"type": "text", "text": "API Error: Request rejected (429)"}]));
        error["isApiErrorMessage"] = json!(true);
        let mut sidechain = assistant(&json!([{"type": "text", "text": "subagent"}]));
        sidechain["isSidechain"] = json!(true);
        let ended =
            transcript(&[user("go on"), error.clone(), sidechain, json!({"type": "system"})], "{broken");
        assert!(last_reply_is_api_error(ended.path()));
        let replied =
            transcript(&[user("go on"), error, assistant(&json!([{"type": "text", "text": "ok"}]))], "");
        assert!(!last_reply_is_api_error(replied.path()), "a reply after the error");
        assert!(!last_reply_is_api_error(transcript(&[user("go on")], "").path()), "no reply yet");
        assert!(!last_reply_is_api_error(Path::new("/nonexistent/transcript.jsonl")));
    }

    #[test]
    fn the_api_error_that_ended_the_last_turn_is_read_with_its_kind_words_and_time() {
        let mut error = assistant(&json!([{"type": "text", "text": "Prompt is too long"}]));
        error["isApiErrorMessage"] = json!(true);
        error["error"] = json!("invalid_request");
        error["errorDetails"] = json!("1012345 tokens >\n 1000000 maximum");
        error["timestamp"] = json!("2026-11-22T03:00:30Z");
        let summary = json!({"type": "user", "isCompactSummary": true, "message": {"content": "summary"}});
        let file = transcript(&[user("go on"), error.clone(), summary, json!({"type": "system"})], "");
        let read = last_reply_api_error(file.path()).unwrap();
        assert_eq!(read.kind, "invalid_request");
        assert_eq!(read.said, "Prompt is too long 1012345 tokens > 1000000 maximum");
        assert_eq!(read.at, "2026-11-22T03:00:30Z".parse().unwrap());
        // No kind given: unknown. No time: nothing to order it by, so not read.
        let mut bare = error.clone();
        bare.as_object_mut().unwrap().remove("error");
        assert_eq!(last_reply_api_error(transcript(&[bare.clone()], "").path()).unwrap().kind, "unknown");
        bare.as_object_mut().unwrap().remove("timestamp");
        assert_eq!(last_reply_api_error(transcript(&[bare], "").path()), None);
        // A prompt after it, or a reply that is no error: none.
        assert_eq!(last_reply_api_error(transcript(&[error.clone(), user("go on")], "").path()), None);
        let ok = assistant(&json!([{"type": "text", "text": "ok"}]));
        assert_eq!(last_reply_api_error(transcript(&[error, ok], "").path()), None);
    }

    #[test]
    fn our_reinjected_prompt_starts_a_turn() {
        let meta = json!({"type": "user", "isMeta": true, "message": {"content": "Stop hook feedback:\n<promise>X</promise>"}});
        let file =
            transcript(&[assistant(&json!([{"type": "text", "text": "<promise>X</promise>"}])), meta], "");
        assert_eq!(last_assistant_text(file.path()).unwrap(), None);
    }

    #[test]
    fn skips_sidechain_synthetic_and_malformed_lines() {
        let mut sidechain = assistant(&json!([{"type": "text", "text": "subagent"}]));
        sidechain["isSidechain"] = json!(true);
        let mut synthetic = assistant(&json!([{"type": "text", "text": "API Error: 529"}]));
        synthetic["message"]["model"] = json!("<synthetic>");
        let file = transcript(
            &[user("go"), assistant(&json!([{"type": "text", "text": "real"}])), sidechain, synthetic],
            "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"raw\nnewline\"}]}}\nnot json\n",
        );
        assert_eq!(last_assistant_text(file.path()).unwrap().as_deref(), Some("real"));
    }

    #[test]
    fn a_turn_without_text_gives_none() {
        let file = transcript(
            &[user("go"), assistant(&json!([{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]))],
            "",
        );
        assert_eq!(last_assistant_text(file.path()).unwrap(), None);
        let empty = transcript(&[], "");
        assert_eq!(last_assistant_text(empty.path()).unwrap(), None);
    }

    #[test]
    fn a_pending_tool_call_is_the_last_word_of_the_main_conversation() {
        let call = assistant(&json!([{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]));
        let result = json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}});
        let mut sidechain = assistant(&json!([{"type": "text", "text": "sub"}]));
        sidechain["isSidechain"] = json!(true);
        let queued = json!({"type": "queue-operation", "operation": "enqueue"});
        let pending = transcript(&[user("go"), call.clone(), sidechain.clone(), queued], "");
        assert!(tool_call_pending(pending.path()));
        let answered = transcript(&[user("go"), call.clone(), result.clone()], "");
        assert!(!tool_call_pending(answered.path()));
        let done = assistant(&json!([{"type": "text", "text": "done"}]));
        let ended = transcript(&[user("go"), call.clone(), result.clone(), done.clone()], "");
        assert!(!tool_call_pending(ended.path()));
        assert!(!tool_call_pending(Path::new("/no/such/transcript.jsonl")));

        // One reply with two calls: the first one's result is written while the second runs.
        let second = assistant(&json!([{"type": "tool_use", "id": "u", "name": "Bash", "input": {}}]));
        let first_answered = transcript(&[user("go"), call.clone(), second.clone(), result.clone()], "");
        assert!(tool_call_pending(first_answered.path()));
        // A result for some other id, or a text reply appended after, answers nothing.
        let forged = json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "x", "content": "ok"}]}});
        let faked = transcript(&[user("go"), second.clone(), forged, done.clone()], "");
        assert!(tool_call_pending(faked.path()));
        // A call left open in an earlier turn is not this turn's.
        let earlier = transcript(&[user("go"), second, user("next"), done], "");
        assert!(!tool_call_pending(earlier.path()));
    }

    /// The flush race: the turn's last reply is written after the Stop hook started. A call
    /// answered within the settle time was not pending; one that stays open is.
    #[test]
    fn a_call_is_pending_only_while_the_transcript_does_not_catch_up() {
        let call = assistant(&json!([{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]));
        let lagging = transcript(&[user("go"), call.clone()], "");
        let path = lagging.path().to_path_buf();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
            let result = json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}});
            writeln!(file, "{result}\n{}", assistant(&json!([{"type": "text", "text": "done"}]))).unwrap();
        });
        assert!(!tool_call_still_pending(lagging.path()));
        writer.join().unwrap();
        let open = transcript(&[user("go"), call], "");
        let began = std::time::Instant::now();
        assert!(tool_call_still_pending(open.path()));
        assert!(began.elapsed() >= FLUSH_SETTLE);
    }

    #[test]
    fn the_last_turn_began_at_its_first_reply_after_the_last_prompt() {
        let at = |record: Value, time: &str| {
            let mut record = record;
            record["timestamp"] = json!(time);
            record
        };
        let feedback =
            json!({"type": "user", "isMeta": true, "message": {"content": "Stop hook feedback:\nx"}});
        let file = transcript(
            &[
                at(user("go"), "2026-11-22T03:00:00Z"),
                at(assistant(&json!([{"type": "text", "text": "a"}])), "2026-11-22T03:00:01Z"),
                at(feedback, "2026-11-22T03:00:05Z"),
                at(
                    assistant(&json!([{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}])),
                    "2026-11-22T03:00:06Z",
                ),
                at(
                    json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}}),
                    "2026-11-22T03:00:07Z",
                ),
                at(assistant(&json!([{"type": "text", "text": "b"}])), "2026-11-22T03:00:08Z"),
            ],
            "",
        );
        assert_eq!(last_turn_began(file.path()), Some("2026-11-22T03:00:06Z".parse().unwrap()));
        // An interrupted turn (the user's interruption is the last prompt) has no reply.
        let interrupted = transcript(
            &[
                at(assistant(&json!([{"type": "text", "text": "a"}])), "2026-11-22T03:00:01Z"),
                user("[Request interrupted by user]"),
            ],
            "",
        );
        assert_eq!(last_turn_began(interrupted.path()), None);
        assert_eq!(last_turn_began(Path::new("/no/such/transcript.jsonl")), None);
    }

    #[test]
    fn the_final_reply_is_the_last_word_of_a_turn_that_called_no_tool_more() {
        let call = assistant(&json!([{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]));
        let result = json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}});
        let done = assistant(&json!([{"type": "text", "text": "done"}]));
        let feedback =
            json!({"type": "user", "isMeta": true, "message": {"content": "Stop hook feedback:\nx"}});
        let mut sidechain = assistant(&json!([{"type": "text", "text": "sub"}]));
        sidechain["isSidechain"] = json!(true);
        let summary = json!({"type": "system", "subtype": "turn_duration"});
        let ended = transcript(&[user("go"), call.clone(), result.clone(), done.clone(), summary], "");
        let digest = final_reply(ended.path()).unwrap().expect("a final reply");
        assert_eq!(digest.len(), 64);
        // Mid-turn (a call running, its result just in, the model thinking after a prompt or
        // after the hook's feedback), there is none: a subagent's record is not the turn's.
        for unfinished in [
            vec![user("go"), call.clone()],
            vec![user("go"), call.clone(), result.clone(), sidechain],
            vec![user("go"), done.clone(), feedback],
            vec![user("go")],
            vec![],
        ] {
            assert_eq!(final_reply(transcript(&unfinished, "").path()).unwrap(), None, "{unfinished:?}");
        }
        // The same words in a later reply are a new reply.
        let mut again = done.clone();
        again["uuid"] = json!("u-2");
        let later = transcript(&[user("go"), done, user("more"), again], "");
        assert_ne!(final_reply(later.path()).unwrap().unwrap(), digest);
        assert!(final_reply(Path::new("/no/such/transcript.jsonl")).is_err());
    }

    #[test]
    fn a_missing_transcript_is_an_error() {
        assert!(last_assistant_text(Path::new("/no/such/transcript.jsonl")).is_err());
    }
}
