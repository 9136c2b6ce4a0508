//! One assistant message in the Messages API's two encodings: the server-sent event stream the
//! CLI asks for (`"stream": true`) and the plain JSON message.
//!
//! Each message has exactly one content block, a text or a tool call, which is all a script step
//! can say. Token counts are token-sized placeholders: the CLI adds them up for its cost line but
//! nothing in it depends on their values.

use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub(crate) enum Content {
    Text(String),
    ToolUse { id: String, name: String, input: Value },
}

#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub id: String,
    pub model: String,
    pub content: Content,
}

impl Reply {
    fn stop_reason(&self) -> &'static str {
        match self.content {
            Content::Text(_) => "end_turn",
            Content::ToolUse { .. } => "tool_use",
        }
    }

    fn usage() -> Value {
        json!({
            "input_tokens": 1,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        })
    }

    /// The message as the non-streaming endpoint returns it.
    pub(crate) fn message(&self) -> Value {
        let block = match &self.content {
            Content::Text(text) => json!({"type": "text", "text": text}),
            Content::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        };
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [block],
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": Reply::usage(),
        })
    }

    /// The message as a complete `text/event-stream` body.
    pub(crate) fn sse(&self) -> Vec<u8> {
        // The block starts empty and its whole value comes in one delta, as the API does for
        // short outputs; tool input arrives as JSON text to be parsed once the block stops.
        let (start, delta) = match &self.content {
            Content::Text(text) => {
                (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": text}))
            }
            Content::ToolUse { id, name, input } => (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            ),
        };
        let events = [
            json!({
                "type": "message_start",
                "message": {
                    "id": self.id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": Reply::usage(),
                },
            }),
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
                "usage": {"output_tokens": 1},
            }),
            json!({"type": "message_stop"}),
        ];
        let mut body = String::new();
        for event in events {
            // serde_json never writes a raw newline, so each data field is one line.
            body.push_str(&format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap_or_default()
            ));
        }
        body.into_bytes()
    }
}
