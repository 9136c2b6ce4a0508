//! The `OpenAI` Chat Completions API as OpenAI-compatible clients use it: Copilot CLI with
//! `COPILOT_PROVIDER_BASE_URL` set to the mock's `/v1` (its default wire API, `completions`).
//!
//! `POST /v1/chat/completions` with a non-empty `tools` array is the agent's own loop; a request
//! without tools (a session title, a summary) is a side request. A streamed reply is a series of
//! `chat.completion.chunk` events: the assistant's text or one call of the shell tool the request
//! declared, then a chunk with the finish reason and the usage, then `data: [DONE]`.

use serde_json::{Value, json};

use crate::script::{ShellTurn, Step};

/// What a step becomes in a reply: text, or one function call (name, JSON arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Turn {
    Text(String),
    Call { name: String, arguments: String },
}

/// The declared tool that runs shell commands, and how it takes its command: Copilot CLI 1.0.102
/// calls it `bash` with `{"command", "description"}`; other clients say `shell`.
fn shell_call(tools: &[Value], command: &str) -> (String, Value) {
    let declared = |name: &str| tools.iter().any(|tool| tool["function"]["name"] == name);
    let name =
        ["bash", "shell", "run_shell_command"].into_iter().find(|name| declared(name)).unwrap_or("bash");
    let mut arguments = json!({"command": command, "description": "Run the command scripted by mock-model"});
    // Copilot CLI's `bash` asks whether to wait for the command; a scripted call always waits.
    let wants_mode = tools.iter().any(|tool| {
        tool["function"]["name"] == name && tool["function"]["parameters"]["properties"]["mode"].is_object()
    });
    if wants_mode {
        arguments["mode"] = json!("sync");
    }
    (name.to_owned(), arguments)
}

/// What `step` becomes ([`ShellTurn::of`]).
pub(crate) fn turn(step: Option<&Step>, exhausted: &str, tools: &[Value]) -> Turn {
    if let Some(Step::Call { name, input }) = step {
        return Turn::Call { name: name.clone(), arguments: input.to_string() };
    }
    if let Some(Step::Background { command }) = step
        && let Some((name, arguments)) = background_call(tools, command)
    {
        return Turn::Call { name, arguments: arguments.to_string() };
    }
    let command = match ShellTurn::of(step, exhausted) {
        ShellTurn::Say(text) => return Turn::Text(text),
        ShellTurn::Run(command) => command,
    };
    let (name, arguments) = shell_call(tools, &command);
    Turn::Call { name, arguments: arguments.to_string() }
}

/// The shell tool's own way to start `command` in the background, where it has one: Qwen Code's
/// `is_background`, Copilot CLI's `mode: "async"`. `None`: the shell's `&` does it.
fn background_call(tools: &[Value], command: &str) -> Option<(String, Value)> {
    let (name, mut arguments) = shell_call(tools, command);
    let declares = |param: &str| {
        tools.iter().any(|tool| {
            tool["function"]["name"] == name.as_str()
                && tool["function"]["parameters"]["properties"][param].is_object()
        })
    };
    if declares("is_background") {
        arguments["is_background"] = json!(true);
    } else if declares("mode") {
        arguments["mode"] = json!("async");
    } else {
        return None;
    }
    Some((name, arguments))
}

const USAGE: fn() -> Value = || json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2});

/// The whole event stream of one streamed completion.
pub(crate) fn sse(turn: &Turn, model: &str, serial: u64) -> Vec<u8> {
    let id = format!("chatcmpl-mock-{serial}");
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let (delta, finish) = match turn {
        Turn::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Turn::Call { name, arguments } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": format!("call_mock_{serial}"), "type": "function",
                "function": {"name": name, "arguments": arguments},
            }]}),
            "tool_calls",
        ),
    };
    let mut last = chunk(json!({}), json!(finish));
    last["usage"] = USAGE();
    let mut body = String::new();
    for event in [chunk(delta, Value::Null), last] {
        body.push_str(&format!("data: {event}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// The same completion, not streamed.
pub(crate) fn completion(turn: &Turn, model: &str, serial: u64) -> Value {
    let (message, finish) = match turn {
        Turn::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Turn::Call { name, arguments } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call_mock_{serial}"), "type": "function",
                "function": {"name": name, "arguments": arguments},
            }]}),
            "tool_calls",
        ),
    };
    json!({
        "id": format!("chatcmpl-mock-{serial}"), "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE(),
    })
}

/// The text of the last user message, with the results of any tool calls that came after it.
pub(crate) fn last_user_text(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let last_user = messages.iter().rposition(|m| m["role"] == "user");
    let mut texts = Vec::new();
    if let Some(index) = last_user {
        texts.push(content_text(&messages[index]["content"]));
    }
    let after = last_user.map_or(0, |i| i + 1);
    texts.extend(
        messages[after..].iter().filter(|m| m["role"] == "tool").map(|m| content_text(&m["content"])),
    );
    if last_user.is_none() && texts.is_empty() { None } else { Some(texts.join("\n")) }
}

/// The results of the tool calls after the last assistant message: (call id, text).
pub(crate) fn tool_results(body: &Value) -> Vec<(String, String)> {
    let Some(messages) = body["messages"].as_array() else { return Vec::new() };
    let after = messages.iter().rposition(|m| m["role"] == "assistant").map_or(0, |i| i + 1);
    messages[after..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["tool_call_id"].as_str().unwrap_or_default().to_owned(), content_text(&m["content"])))
        .collect()
}

/// A message's content: a string, or parts whose text is joined with newlines.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|part| part["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash_tool(with_mode: bool) -> Value {
        let mut properties = json!({"command": {"type": "string"}, "description": {"type": "string"}});
        if with_mode {
            properties["mode"] = json!({"type": "string"});
        }
        json!({"type": "function", "function": {"name": "bash", "parameters": {"properties": properties}}})
    }

    #[test]
    fn steps_become_text_or_a_call_of_the_declared_shell_tool() {
        let tools = [bash_tool(true)];
        let Turn::Call { name, arguments } = turn(Some(&Step::Bash { command: "ls".into() }), "x", &tools)
        else {
            panic!("not a call");
        };
        assert_eq!(name, "bash");
        let arguments: Value = serde_json::from_str(&arguments).unwrap();
        assert_eq!((arguments["command"].as_str(), arguments["mode"].as_str()), (Some("ls"), Some("sync")));
        let Turn::Call { arguments, .. } =
            turn(Some(&Step::Bash { command: "ls".into() }), "x", &[bash_tool(false)])
        else {
            panic!("not a call");
        };
        let arguments: Value = serde_json::from_str(&arguments).unwrap();
        assert!(arguments.get("mode").is_none(), "{arguments}");
        let write =
            turn(Some(&Step::Write { file_path: "/a b".into(), content: "it's".into() }), "x", &tools);
        assert!(
            matches!(&write, Turn::Call { arguments, .. } if arguments.contains(r"printf '%s' 'it'\\''s' > '/a b'")),
            "{write:?}"
        );
        assert_eq!(turn(None, "gone", &tools), Turn::Text("gone".into()));
    }

    #[test]
    fn the_stream_ends_with_a_finish_reason_and_done() {
        let text = String::from_utf8(sse(&Turn::Text("hi".into()), "m", 2)).unwrap();
        let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert_eq!(events.len(), 3, "{text}");
        let first: Value = serde_json::from_str(events[0].trim_start_matches("data: ")).unwrap();
        assert_eq!(first["choices"][0]["delta"]["content"], "hi");
        let last: Value = serde_json::from_str(events[1].trim_start_matches("data: ")).unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert_eq!(events[2], "data: [DONE]");
        let call = Turn::Call { name: "bash".into(), arguments: "{}".into() };
        let text = String::from_utf8(sse(&call, "m", 3)).unwrap();
        assert!(text.contains(r#""finish_reason":"tool_calls""#) && text.contains("call_mock_3"), "{text}");
        assert_eq!(completion(&call, "m", 3)["choices"][0]["message"]["tool_calls"][0]["id"], "call_mock_3");
    }

    #[test]
    fn user_text_includes_later_tool_results() {
        let body = json!({"messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "task"}]},
            {"role": "assistant", "tool_calls": [{"id": "c"}]},
            {"role": "tool", "tool_call_id": "c", "content": "hello"},
        ]});
        assert_eq!(last_user_text(&body).unwrap(), "task\nhello");
        assert_eq!(tool_results(&body), [("c".to_owned(), "hello".to_owned())]);
        assert_eq!(last_user_text(&json!({"messages": []})), None);
    }

    #[test]
    fn a_background_step_uses_the_shell_tools_own_flag_or_the_shells_ampersand() {
        let step = Step::Background { command: "make".into() };
        let qwen = [json!({"type": "function", "function": {"name": "run_shell_command",
            "parameters": {"properties": {"command": {}, "is_background": {"type": "boolean"}}}}})];
        let Turn::Call { name, arguments } = turn(Some(&step), "", &qwen) else { panic!() };
        let arguments: Value = serde_json::from_str(&arguments).unwrap();
        assert_eq!((name.as_str(), &arguments["is_background"]), ("run_shell_command", &json!(true)));
        let plain = [json!({"type": "function", "function": {"name": "shell"}})];
        let Turn::Call { arguments, .. } = turn(Some(&step), "", &plain) else { panic!() };
        assert!(arguments.contains("nohup sh -c 'make'") && arguments.contains('&'), "{arguments}");
    }
}
