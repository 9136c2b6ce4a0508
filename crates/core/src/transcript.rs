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

use crate::reverse_lines::ReverseLines;

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
    fn a_missing_transcript_is_an_error() {
        assert!(last_assistant_text(Path::new("/no/such/transcript.jsonl")).is_err());
    }
}
