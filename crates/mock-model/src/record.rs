//! What the mock saw: every request, with what it answered, for tests to assert on.

use serde_json::Value;

/// What a request was answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The script step with this index (0-based).
    Step(usize),
    /// A main request that came after the last step; it got [`crate::EXHAUSTED_TEXT`].
    Exhausted,
    /// A side request (title, summary): a short fixed text, no step consumed.
    Filler,
    /// A side request answered with a text queued by [`crate::MockModel::answer_side_request`].
    SideAnswer,
    /// `/v1/messages/count_tokens`.
    CountTokens,
    /// An unknown route.
    NotFound,
    /// A body that was not JSON, or that the mock could not decode.
    BadRequest,
}

/// Which API a request spoke, by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages, `/v1/messages` (Claude Code). Unknown paths are recorded as this.
    Messages,
    /// Gemini, `/v1beta/models/<model>:…` (Gemini CLI).
    Gemini,
    /// `OpenAI` Responses, `/v1/responses` (Codex).
    Responses,
    /// `OpenAI` Chat Completions, `/v1/chat/completions` (Copilot CLI with its own provider).
    ChatCompletions,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub api: Api,
    pub method: String,
    /// The path without its query string.
    pub path: String,
    pub query: Option<String>,
    /// In arrival order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The parsed JSON body; `Null` when there was none or it was not JSON.
    pub body: Value,
    /// A `/v1/messages` request with a non-empty `tools` array: the agent's own loop.
    pub is_main: bool,
    pub served: Served,
}

/// A `tool_result` block sent back by the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub tool_use_id: String,
    /// The result's text blocks joined with newlines.
    pub text: String,
    pub is_error: bool,
}

impl Recorded {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::http::header(&self.headers, name)
    }

    /// The request's `messages` array, empty if it has none.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The text of the last user message: its string content, or its text blocks and the text
    /// of its tool results, joined with newlines. `None` when there is no user message.
    ///
    /// The CLI may fold reminders into the same message, so assert with `contains`.
    pub fn last_user_text(&self) -> Option<String> {
        match self.api {
            Api::Messages => self.last_user_message().map(|message| content_text(&message["content"])),
            Api::Gemini => crate::gemini::last_user_text(&self.body),
            Api::Responses => crate::responses::last_user_text(&self.body),
            Api::ChatCompletions => crate::chat::last_user_text(&self.body),
        }
    }

    /// The tool results in the last user message (Messages API), or after the last assistant
    /// message (Chat Completions). Other dialects give none.
    pub fn tool_results(&self) -> Vec<ToolResult> {
        if self.api == Api::ChatCompletions {
            return crate::chat::tool_results(&self.body)
                .into_iter()
                .map(|(tool_use_id, text)| ToolResult { tool_use_id, text, is_error: false })
                .collect();
        }
        let Some(blocks) = self.last_user_message().and_then(|m| m["content"].as_array()) else {
            return Vec::new();
        };
        blocks
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| ToolResult {
                tool_use_id: b["tool_use_id"].as_str().unwrap_or_default().to_owned(),
                text: content_text(&b["content"]),
                is_error: b["is_error"].as_bool().unwrap_or(false),
            })
            .collect()
    }

    fn last_user_message(&self) -> Option<&Value> {
        self.messages().iter().rev().find(|m| m["role"] == "user")
    }
}

/// The text of the last user message of a request `body` in `api`'s dialect, as
/// [`Recorded::last_user_text`] reads it: what a listening step hears.
pub(crate) fn told(api: Api, body: &Value) -> String {
    let recorded = Recorded {
        api,
        method: String::new(),
        path: String::new(),
        query: None,
        headers: Vec::new(),
        body: body.clone(),
        is_main: true,
        served: Served::Filler,
    };
    recorded.last_user_text().unwrap_or_default()
}

/// Whether a Messages request asks for a summary of the conversation to compact it: Claude
/// Code's last user message then holds `CRITICAL: Respond with TEXT ONLY`, after any reminders and,
/// when the turn before ended on an error, after that turn's prompt.
pub(crate) fn is_compaction(body: &Value) -> bool {
    let last = body["messages"].as_array().and_then(|m| m.iter().rev().find(|m| m["role"] == "user"));
    last.is_some_and(|message| content_text(&message["content"]).contains("CRITICAL: Respond with TEXT ONLY"))
}

/// The text of a `content` value: a string, or an array of blocks whose text and tool-result
/// contents are joined with newlines. Images and other blocks have no text.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => {
            let texts: Vec<String> = blocks
                .iter()
                .filter_map(|block| match block["type"].as_str() {
                    Some("text") => block["text"].as_str().map(str::to_owned),
                    Some("tool_result") => Some(content_text(&block["content"])),
                    _ => None,
                })
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recorded(body: Value) -> Recorded {
        Recorded {
            api: Api::Messages,
            method: "POST".into(),
            path: "/v1/messages".into(),
            query: None,
            headers: vec![("x-api-key".into(), "k".into())],
            body,
            is_main: true,
            served: Served::Step(0),
        }
    }

    #[test]
    fn last_user_text_of_a_string_content() {
        let r = recorded(json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": "Stop hook feedback:\nrun the tests"},
        ]}));
        assert_eq!(r.last_user_text().unwrap(), "Stop hook feedback:\nrun the tests");
        assert_eq!(r.header("X-Api-Key"), Some("k"));
    }

    #[test]
    fn last_user_text_joins_blocks_and_tool_results() {
        let r = recorded(json!({"messages": [
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                 "content": [{"type": "text", "text": "boom"}, {"type": "image"}]},
                {"type": "text", "text": "<system-reminder>x</system-reminder>"},
            ]},
            {"role": "assistant", "content": "trailing assistant text is skipped"},
        ]}));
        assert_eq!(r.last_user_text().unwrap(), "hello\nboom\n<system-reminder>x</system-reminder>");
        assert_eq!(
            r.tool_results(),
            vec![
                ToolResult { tool_use_id: "toolu_1".into(), text: "hello".into(), is_error: false },
                ToolResult { tool_use_id: "toolu_2".into(), text: "boom".into(), is_error: true },
            ]
        );
    }

    #[test]
    fn no_user_message() {
        let r = recorded(Value::Null);
        assert!(r.messages().is_empty());
        assert!(r.last_user_text().is_none());
        assert!(r.tool_results().is_empty());
    }
}
