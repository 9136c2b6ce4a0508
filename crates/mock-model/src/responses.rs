//! The `OpenAI` Responses API as the Codex CLI uses it: a custom model provider whose `base_url`
//! is the mock's `/v1`, with `wire_api = "responses"`.
//!
//! `POST /v1/responses` with a non-empty `tools` array is the agent's own loop. The reply is an
//! event stream of `response.created`, one `response.output_item.done` (an assistant message, or
//! a function call of the shell tool the request declared) and `response.completed`.

use serde_json::{Value, json};

use crate::script::{ShellTurn, Step};

/// The shell tools Codex versions have declared, with how each takes its command.
fn shell_call(tools: &[Value], command: &str) -> (String, Value) {
    let declared = |name: &str| tools.iter().any(|tool| tool["name"] == name);
    if declared("exec_command") {
        ("exec_command".into(), json!({"cmd": command}))
    } else if declared("shell_command") {
        ("shell_command".into(), json!({"command": command}))
    } else {
        ("shell".into(), json!({"command": ["bash", "-lc", command]}))
    }
}

/// The output item a step becomes. Codex edits files through its shell or `apply_patch`, so
/// Write and Edit steps are written as shell commands.
pub(crate) fn item(step: Option<&Step>, exhausted: &str, tools: &[Value], serial: u64) -> Value {
    let command = match ShellTurn::of(step, exhausted) {
        ShellTurn::Say(text) => return message(&text, serial),
        ShellTurn::Run(command) => command,
    };
    let (name, arguments) = shell_call(tools, &command);
    json!({
        "type": "function_call",
        "id": format!("fc_mock_{serial}"),
        "call_id": format!("call_mock_{serial}"),
        "name": name,
        "arguments": arguments.to_string(),
        "status": "completed",
    })
}

fn message(text: &str, serial: u64) -> Value {
    json!({
        "type": "message",
        "id": format!("msg_mock_{serial}"),
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// The whole event stream of one response.
pub(crate) fn sse(item: &Value, model: &str, serial: u64) -> Vec<u8> {
    let id = format!("resp_mock_{serial}");
    let usage = json!({
        "input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2,
    });
    let events = [
        json!({"type": "response.created", "response": {"id": id, "model": model, "status": "in_progress"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({
            "type": "response.completed",
            "response": {"id": id, "model": model, "status": "completed", "output": [item], "usage": usage},
        }),
    ];
    let mut body = String::new();
    for event in events {
        body.push_str(&format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or_default()));
    }
    body.into_bytes()
}

/// The text of the last user message in `input`, with the outputs of any function calls that
/// came after it.
pub(crate) fn last_user_text(body: &Value) -> Option<String> {
    let input = body["input"].as_array()?;
    let last_user = input.iter().rposition(|item| item["role"] == "user");
    let mut texts = Vec::new();
    if let Some(index) = last_user {
        for block in input[index]["content"].as_array().into_iter().flatten() {
            if let Some(text) = block["text"].as_str() {
                texts.push(text.to_owned());
            }
        }
    }
    let after = last_user.map_or(0, |i| i + 1);
    for item in &input[after..] {
        if item["type"] == "function_call_output" {
            match &item["output"] {
                Value::String(output) => texts.push(output.clone()),
                other => texts.push(other.to_string()),
            }
        }
    }
    if last_user.is_none() && texts.is_empty() { None } else { Some(texts.join("\n")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_follow_the_declared_shell_tool() {
        let tools = [json!({"type": "function", "name": "exec_command"})];
        let call = item(Some(&Step::Bash { command: "ls".into() }), "x", &tools, 3);
        assert_eq!(call["name"], "exec_command");
        assert_eq!(call["arguments"], r#"{"cmd":"ls"}"#);
        let call = item(Some(&Step::Bash { command: "ls".into() }), "x", &[], 3);
        assert_eq!(call["arguments"], r#"{"command":["bash","-lc","ls"]}"#);
        let write =
            item(Some(&Step::Write { file_path: "/a b".into(), content: "it's".into() }), "x", &tools, 1);
        assert!(write["arguments"].as_str().unwrap().contains(r"printf '%s' 'it'\\''s' > '/a b'"), "{write}");
        assert_eq!(item(None, "gone", &tools, 1)["content"][0]["text"], "gone");
    }

    #[test]
    fn user_text_includes_later_tool_outputs() {
        let body = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]},
            {"type": "function_call", "call_id": "c"},
            {"type": "function_call_output", "call_id": "c", "output": "hello"},
        ]});
        assert_eq!(last_user_text(&body).unwrap(), "task\nhello");
        assert_eq!(last_user_text(&json!({"input": []})), None);
    }
}
