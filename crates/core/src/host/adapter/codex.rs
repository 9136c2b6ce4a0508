//! `OpenAI` Codex CLI's `Stop`: `snake_case` input like Claude Code's plus `turn_id` and `model`
//! (`session_id`, `cwd`, `stop_hook_active`, `last_assistant_message`).
//!
//! Output: `{"decision":"block","reason":P}` makes P the continuation prompt. Codex parses the
//! output into a struct that denies unknown fields, so a block carries exactly those two keys: a
//! third makes the hook count as failed instead of blocking. An allow with a message is
//! `{"systemMessage":…}` (an allowed key), a plain allow prints nothing.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::spec::HostSpec;
use crate::host::config_watch::{Kind, Watched};
use crate::support::environment::Environment;

use crate::host::event::{EventError, Fields, StopEvent};
use crate::host::hook_response::HookResponse;
use crate::host::origin::{HookRunner, HookSession};
use crate::host::{Commands, Host, foreign_marker, object_line};

/// Codex refuses an empty block reason; ours always has the task, but never send an empty one.
const FALLBACK_REASON: &str = "Continue working on the task.";

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    if let Some(what) = foreign_marker(Host::Codex, &Fields(object)) {
        return Err(EventError::Foreign(what));
    }
    // Claude Code's `Stop` shape, but the rollout file is not in Claude Code's transcript format
    // (the last message comes with the event), and Codex has no block cap that could override a
    // block, so its flag is not relied on.
    Ok(StopEvent { transcript: None, stop_hook_active: None, ..StopEvent::from_claude(object)? })
}

pub(in crate::host) fn render(response: &HookResponse) -> String {
    match (&response.block, &response.system_message) {
        (Some(reason), _) => {
            let reason = if reason.trim().is_empty() { FALLBACK_REASON } else { reason.as_str() };
            object_line([("decision", json!("block")), ("reason", json!(reason))])
        }
        (None, Some(message)) => object_line([("systemMessage", json!(message))]),
        (None, None) => String::new(),
    }
}

/// How Codex 0.171.0 starts a hook on Linux: in a session of its own, a direct child of the
/// `codex` process, reading a pipe. The agent's commands run in its sandbox, a PID namespace
/// whose first process is `codex-linux-sandbox` (the kernel keeps 15 bytes of the name), from
/// which no process sees `codex`.
pub(in crate::host) const HOOK_RUNNER: HookRunner = HookRunner {
    names: &[("codex", "")],
    session: HookSession::Own,
    stdin_from_host: false,
    tool_sandbox: Some("codex-linux-san"),
};
/// What decides whether for-loop runs on Codex, for the watch of the host's configuration: in
/// each `config.toml` (the user's and the project's) the hook tables (trust records included),
/// the features, the plugins' switches and `notify`; each layer's `hooks.json`; and the
/// installed plugin's hook list and launcher, where the hook was told its root.
pub(in crate::host) fn watched(env: &Environment, project: &Path) -> Vec<Watched> {
    const TOML: Kind = Kind::Toml { tables: &["hooks", "features", "plugins"], keys: &["notify"] };
    let user = env
        .var("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|h| PathBuf::from(h).join(".codex")));
    let mut watched = Vec::new();
    for layer in user.into_iter().chain([project.join(".codex")]) {
        watched.push(Watched::new(TOML, layer.join("config.toml")));
        watched.push(Watched::new(Kind::Hooks, layer.join("hooks.json")));
    }
    // The system layer and what an administrator imposes, where the pinned CLI reads them: the
    // requirements are watched whole, as nothing of them is a user's everyday setting.
    if !cfg!(windows) {
        watched.push(Watched::new(TOML, "/etc/codex/config.toml"));
        watched.push(Watched::new(TOML, "/etc/codex/managed_config.toml"));
        watched.push(Watched::new(Kind::Toml { tables: &[""], keys: &[] }, "/etc/codex/requirements.toml"));
    }
    if let Some(root) = env.var("PLUGIN_ROOT").or_else(|| env.var("CLAUDE_PLUGIN_ROOT")).map(PathBuf::from) {
        watched.push(Watched::new(Kind::Hooks, root.join("hooks/hooks.json")));
        watched.push(Watched::new(Kind::Launcher, root.join("scripts/loop-hook")));
    }
    watched
}

/// What for-loop knows about codex: read by [`Host`]'s methods.
pub(in crate::host) const SPEC: HostSpec = HostSpec {
    tells_commands_the_session: true,
    has_prompt_hook: true,
    sends_last_message: true,
    skips_untrusted_hooks: true,
    commands: Commands {
        resume: "$resume-loop",
        cancel: "$cancel-loop",
        status: "$loop-status",
        start: "$for-loop",
        rollback: "`loop-hook rollback` in a terminal",
    },
    hook_runner: Some(HOOK_RUNNER),
    failure_hook_runner: Some(HOOK_RUNNER),
    looks_like: Some(|fields| fields.is("hook_event_name", "Stop") && fields.has_any(&["turn_id"])),
    watched: Some(watched),
    ..HostSpec::of(Host::Codex, "codex", "codex", parse, render)
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::event::parse_object;

    fn parse_text(text: &str) -> Result<StopEvent, EventError> {
        parse(&parse_object(text.as_bytes()).unwrap())
    }

    #[test]
    fn reads_the_0_169_0_payload() {
        let event = parse_text(
            r#"{"session_id":"019a-1","turn_id":"t-1","transcript_path":null,"cwd":"/p","hook_event_name":"Stop",
                "model":"gpt-5","permission_mode":"default","stop_hook_active":false,"last_assistant_message":"done"}"#,
        )
        .unwrap();
        assert_eq!(event.session_id, "019a-1");
        assert_eq!(event.last_assistant_message.as_deref(), Some("done"));
        assert_eq!((event.transcript, event.stop_hook_active), (None, None));
    }

    #[test]
    fn refuses_other_events() {
        assert!(matches!(
            parse_text(r#"{"session_id":"s","hook_event_name":"UserPromptSubmit"}"#),
            Err(EventError::Foreign(_))
        ));
        assert_eq!(parse_text(r#"{"hook_event_name":"Stop"}"#), Err(EventError::Missing("session_id")));
    }

    #[test]
    fn a_block_has_exactly_two_keys() {
        let out = render(&HookResponse::block("go on".into(), "iteration 1/3".into()));
        assert_eq!(out, r#"{"decision":"block","reason":"go on"}"#);
        let out = render(&HookResponse::block(" ".into(), "m".into()));
        assert_eq!(out, r#"{"decision":"block","reason":"Continue working on the task."}"#);
        assert_eq!(render(&HookResponse::allow_with("verified")), r#"{"systemMessage":"verified"}"#);
        assert_eq!(render(&HookResponse::allow()), "");
    }
}
