//! What the hook prints: nothing (allow silently), a message (allow and tell the user), or a
//! block with the prompt that keeps the agent working. Always with exit code 0: a non-zero exit
//! is read by hosts as a hook error, shown at every turn, or as a block.

use serde_json::{Map, Value, json};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct HookResponse {
    /// `Some`: block the stop with this prompt.
    pub block: Option<String>,
    /// Shown to the user, never to the model.
    pub system_message: Option<String>,
}

impl HookResponse {
    pub(crate) fn allow() -> HookResponse {
        HookResponse::default()
    }

    pub(crate) fn allow_with(message: impl Into<String>) -> HookResponse {
        HookResponse { block: None, system_message: Some(message.into()) }
    }

    pub(crate) fn block(reason: String, message: String) -> HookResponse {
        HookResponse { block: Some(reason), system_message: Some(message) }
    }

    /// Claude Code's Stop output: `{"decision":"block","reason":…,"systemMessage":…}`, or
    /// `{"systemMessage":…}`, or nothing. Never `continue:false`, which would end the session's
    /// processing outright.
    pub(crate) fn to_claude_json(&self) -> String {
        let mut object = Map::new();
        if let Some(reason) = &self.block {
            object.insert("decision".into(), json!("block"));
            object.insert("reason".into(), json!(reason));
        }
        if let Some(message) = &self.system_message {
            object.insert("systemMessage".into(), json!(message));
        }
        if object.is_empty() { String::new() } else { Value::Object(object).to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_shapes() {
        assert_eq!(HookResponse::allow().to_claude_json(), "");
        assert_eq!(HookResponse::allow_with("hi").to_claude_json(), r#"{"systemMessage":"hi"}"#);
        assert_eq!(
            HookResponse::block("go on".into(), "1/3".into()).to_claude_json(),
            r#"{"decision":"block","reason":"go on","systemMessage":"1/3"}"#
        );
    }
}
