//! The Gemini API (`generativelanguage`, v1beta) as Gemini CLI uses it, for
//! `GOOGLE_GEMINI_BASE_URL`.
//!
//! `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` carries the agent's own loop when
//! its body declares tools; every other call (the model router's `:generateContent`, checks
//! without tools) is a side request. A reply is one SSE event holding one candidate with one
//! part: a text, or a `functionCall` of the CLI's own tools.

use serde_json::{Value, json};

use crate::script::Step;

/// Whether the request declares any function to the model: the agent's own loop does.
pub(crate) fn is_main(body: &Value) -> bool {
    body["tools"].as_array().is_some_and(|tools| {
        tools.iter().any(|tool| tool["functionDeclarations"].as_array().is_some_and(|d| !d.is_empty()))
    })
}

/// The part a step becomes: Gemini CLI's `run_shell_command`, `write_file` and `replace` tools.
pub(crate) fn part(step: Option<&Step>, exhausted: &str) -> Value {
    match step {
        None => json!({"text": exhausted}),
        Some(Step::Text(text)) => json!({"text": text}),
        // Served as an HTTP error before a reply is built.
        Some(Step::Error { status, .. }) => json!({"text": format!("error {status}")}),
        Some(Step::UsageLimit { .. }) => json!({"text": "usage limit"}),
        Some(Step::PromptTooLong) => json!({"text": "prompt is too long"}),
        // Served as [`Step::heard`] makes it, a command.
        Some(Step::Listen { .. }) => json!({"text": "listen"}),
        Some(Step::Bash { command }) => {
            json!({"functionCall": {"name": "run_shell_command", "args": {"command": command}}})
        }
        Some(Step::Background { command }) => json!({"functionCall": {
            "name": "run_shell_command",
            "args": {"command": command, "is_background": true},
        }}),
        Some(Step::Write { file_path, content }) => {
            json!({"functionCall": {"name": "write_file", "args": {"file_path": file_path, "content": content}}})
        }
        Some(Step::Call { name, input }) => json!({"functionCall": {"name": name, "args": input}}),
        Some(Step::Edit { file_path, old_string, new_string }) => json!({"functionCall": {
            "name": "replace",
            "args": {"file_path": file_path, "old_string": old_string, "new_string": new_string},
        }}),
    }
}

/// The answer to a side request: JSON when JSON was asked for (the CLI's model router retries
/// with backoff for minutes on anything else), else `text`.
pub(crate) fn filler<'a>(body: &Value, text: &'a str) -> &'a str {
    if body["generationConfig"]["responseMimeType"] == "application/json" { "{}" } else { text }
}

/// A whole `generateContent` response with one part.
pub(crate) fn response(part: &Value) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    })
}

/// The streaming form: the same response as one `data:` event.
pub(crate) fn sse(part: &Value) -> Vec<u8> {
    format!("data: {}\n\n", response(part)).into_bytes()
}

/// The text of the last `user` turn: its text parts and the output of its function responses.
pub(crate) fn last_user_text(body: &Value) -> Option<String> {
    let content = body["contents"].as_array()?.iter().rev().find(|c| c["role"] == "user")?;
    let texts: Vec<String> = content["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|part| {
            if let Some(text) = part["text"].as_str() {
                return Some(text.to_owned());
            }
            let response = &part["functionResponse"]["response"];
            match &response["output"] {
                Value::String(output) => Some(output.clone()),
                Value::Null if response.is_null() => None,
                Value::Null => Some(response.to_string()),
                other => Some(other.to_string()),
            }
        })
        .collect();
    Some(texts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_user_text() {
        assert_eq!(part(None, "x"), json!({"text": "x"}));
        let call = part(Some(&Step::Bash { command: "ls".into() }), "x");
        assert_eq!(call["functionCall"]["name"], "run_shell_command");
        assert_eq!(call["functionCall"]["args"]["command"], "ls");
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "task"}]},
            {"role": "model", "parts": [{"text": "done"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "hi"}}},
                                        {"text": "more"}]},
        ]});
        assert_eq!(last_user_text(&body).unwrap(), "hi\nmore");
        assert!(is_main(&json!({"tools": [{"functionDeclarations": [{"name": "x"}]}]})));
        assert!(!is_main(&json!({"contents": []})));
        let event = String::from_utf8(sse(&json!({"text": "t"}))).unwrap();
        assert!(event.starts_with("data: {") && event.ends_with("}\n\n"), "{event}");
    }
}
