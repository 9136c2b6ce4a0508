//! Gemini CLI's `AfterAgent`: `snake_case` input (`session_id`, `cwd`, `prompt`, `prompt_response`,
//! `stop_hook_active`, `hook_event_name:"AfterAgent"`). It fires only at the outermost turn end
//! with no tool call pending.
//!
//! Output: `{"decision":"block","reason":P}` sends P back as the next user prompt, and the next
//! event has `stop_hook_active:true`. `systemMessage` is shown to the user. An allow is
//! `{"decision":"allow"}` rather than nothing: with an empty stdout the CLI parses stderr instead
//! and shows it, and our stderr carries diagnostics.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::spec::{HostSpec, Markers};
use crate::host::config_watch::{Kind, Watched};
use crate::support::environment::Environment;

use crate::host::event::{EventError, Fields, StopEvent};
use crate::host::hook_response::HookResponse;
use crate::host::origin::{HookRunner, HookSession};
use crate::host::{Commands, Host, foreign_marker, object_line};

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    let fields = Fields(object);
    if fields.string("hook_event_name")?.as_deref() != Some("AfterAgent") {
        return Err(EventError::Foreign("not an AfterAgent event"));
    }
    if let Some(what) = foreign_marker(Host::GeminiCli, &fields) {
        return Err(EventError::Foreign(what));
    }
    // Read for its type only: a wrong one is reported like any malformed field.
    fields.boolean("stop_hook_active")?;
    Ok(StopEvent {
        session_id: fields.required_string("session_id")?,
        // Gemini CLI has no block cap that overrides a block (only a budget of turns), so its
        // flag is not relied on.
        stop_hook_active: None,
        last_assistant_message: fields.string("prompt_response")?,
        // Gemini CLI's transcript is not in Claude Code's format; `prompt_response` has the text.
        transcript: None,
        background: None,
    })
}

pub(in crate::host) fn render(response: &HookResponse) -> String {
    let mut pairs = Vec::new();
    match &response.block {
        Some(reason) => {
            pairs.push(("decision", json!("block")));
            pairs.push(("reason", json!(reason)));
        }
        None => pairs.push(("decision", json!("allow"))),
    }
    if let Some(message) = &response.system_message {
        pairs.push(("systemMessage", json!(message)));
    }
    object_line(pairs)
}

/// How Gemini CLI 0.61.0 starts a hook on Linux: in the session of its `node` process (the one
/// it relaunches itself as), as a direct child, reading a socket that process made. Its shell
/// tool and its commands' `!{…}` lines run in sessions of their own.
pub(in crate::host) const HOOK_RUNNER: HookRunner = HookRunner {
    names: &[("node", "gemini")],
    session: HookSession::Host,
    stdin_from_host: true,
    tool_sandbox: None,
};
/// What decides whether for-loop runs on Gemini CLI, for the watch of the host's configuration:
/// the hook keys of its settings (the user's, the project's, the system's), and the installed
/// extension's manifest, hook list and launcher, and which extensions are on.
pub(in crate::host) fn watched(env: &Environment, project: &Path) -> Vec<Watched> {
    // `admin` holds `admin.extensions.enabled`, which turns every extension off.
    const KEYS: &[&str] = &["hooks", "hooksConfig", "disableAllHooks", "extensions", "admin"];
    // The system settings and the system defaults beside them, where the pinned CLI reads them.
    let system = env.var("GEMINI_CLI_SYSTEM_SETTINGS_PATH").map_or_else(
        || {
            PathBuf::from(if cfg!(target_os = "macos") {
                "/Library/Application Support/GeminiCli/settings.json"
            } else if cfg!(windows) {
                r"C:\ProgramData\gemini-cli\settings.json"
            } else {
                "/etc/gemini-cli/settings.json"
            })
        },
        PathBuf::from,
    );
    let defaults = env
        .var("GEMINI_CLI_SYSTEM_DEFAULTS_PATH")
        .map_or_else(|| system.with_file_name("system-defaults.json"), PathBuf::from);
    let mut watched = vec![
        Watched::new(Kind::Settings(KEYS), project.join(".gemini/settings.json")),
        Watched::new(Kind::Settings(KEYS), system),
        Watched::new(Kind::Settings(KEYS), defaults),
    ];
    if let Some(home) = env.var("GEMINI_CLI_HOME").or_else(|| env.var("HOME")) {
        let gemini = PathBuf::from(home).join(".gemini");
        let extensions = gemini.join("extensions");
        watched.push(Watched::new(Kind::Settings(KEYS), gemini.join("settings.json")));
        watched.push(Watched::new(Kind::Manifest, extensions.join("extension-enablement.json")));
        watched.push(Watched::new(Kind::Manifest, extensions.join("for-loop/gemini-extension.json")));
        watched.push(Watched::new(Kind::Hooks, extensions.join("for-loop/hooks/hooks.json")));
        watched.push(Watched::new(Kind::Launcher, extensions.join("for-loop/scripts/loop-hook")));
    }
    watched
}

/// What for-loop knows about gemini-cli: read by [`Host`]'s methods.
pub(in crate::host) const SPEC: HostSpec = HostSpec {
    aliases: &["gemini"],
    tells_commands_the_session: true,
    sends_last_message: true,
    commands: Commands::SLASH_UNPREFIXED,
    hook_runner: Some(HOOK_RUNNER),
    failure_hook_runner: Some(HOOK_RUNNER),
    markers: Some(Markers { fields: &["prompt_response"], what: "a Gemini CLI event" }),
    looks_like: Some(|fields| fields.is("hook_event_name", "AfterAgent")),
    watched: Some(watched),
    ..HostSpec::of(Host::GeminiCli, "gemini-cli", "gemini", parse, render)
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::event::parse_object;

    fn parse_text(text: &str) -> Result<StopEvent, EventError> {
        parse(&parse_object(text.as_bytes()).unwrap())
    }

    #[test]
    fn reads_the_0_61_0_payload() {
        let event = parse_text(
            r#"{"session_id":"g-1","transcript_path":"/t.json","cwd":"/p","hook_event_name":"AfterAgent",
                "timestamp":"2026-11-22T00:00:00.000Z","prompt":"task","prompt_response":"done","stop_hook_active":true}"#,
        )
        .unwrap();
        assert_eq!(event.session_id, "g-1");
        assert_eq!(event.last_assistant_message.as_deref(), Some("done"));
        assert_eq!((event.transcript, event.stop_hook_active), (None, None));
    }

    #[test]
    fn refuses_other_events() {
        for text in [
            r#"{"session_id":"s","hook_event_name":"BeforeAgent"}"#,
            r#"{"session_id":"s","hook_event_name":"Stop"}"#,
            r#"{"session_id":"s"}"#,
        ] {
            assert!(matches!(parse_text(text), Err(EventError::Foreign(_))), "{text}");
        }
        assert_eq!(parse_text(r#"{"hook_event_name":"AfterAgent"}"#), Err(EventError::Missing("session_id")));
    }

    #[test]
    fn output_contract() {
        assert_eq!(render(&HookResponse::allow()), r#"{"decision":"allow"}"#);
        assert_eq!(
            render(&HookResponse::allow_with("verified")),
            r#"{"decision":"allow","systemMessage":"verified"}"#
        );
        assert_eq!(
            render(&HookResponse::block("go on".into(), "1/3".into())),
            r#"{"decision":"block","reason":"go on","systemMessage":"1/3"}"#
        );
    }
}
