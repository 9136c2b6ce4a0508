//! Google Antigravity 2.x (`agy` CLI, IDE, desktop app), `Stop` event.
//!
//! Input is camelCase with no event name: `conversationId`, `workspacePaths[]`, `transcriptPath`,
//! and for `Stop` only `executionNum`, `terminationReason`, `error`, `fullyIdle`. A `snake_case`
//! nested dialect (`common.conversation_id`, `stop_hook_args.fully_idle`, `termination_reason`)
//! has been seen too; both are read.
//!
//! Output: `{"decision":"continue","reason":P}` keeps the agent working (P arrives as a system
//! message); `{"decision":"stop"}` lets it stop. A decision is required, so even a refused or
//! unreadable event gets `{"decision":"stop"}`. There is no field shown to the user, so an
//! allow's message is not printed.
//!
//! Antigravity has no `stop_hook_active` and no cap of its own, and its `Stop` also fires when a
//! run ends on an error, a cancel or with background tasks still running. Only a normal, fully
//! idle turn end is judged; any other is refused, so it neither continues nor uses an iteration.
//! The hook's working directory is the hooks.json folder, never the project; the loop's own
//! directory is in its state, so `workspacePaths` is not needed.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::spec::{HostSpec, Markers};
use crate::host::config_watch::{Kind, Watched};
use crate::host::install::{
    self, BinaryFacts, Check, INSTALL, Install, Installation, Launch, Look, not_installed, shell_quote,
};
use crate::support::Environment;

use crate::host::event::{EventError, Fields, StopEvent, Transcript};
use crate::host::hook_response::HookResponse;
use crate::host::{Host, foreign_marker, object_line};

/// Fields only Antigravity sends.
pub(in crate::host) const MARKERS: &[&str] =
    &["conversationId", "workspacePaths", "executionNum", "terminationReason", "fullyIdle", "stop_hook_args"];

/// Termination reasons of a turn the model ended itself: the docs' `model_stop`, and the
/// `NO_TOOL_CALL` live runs report.
const NORMAL_ENDS: &[&str] = &["model_stop", "no_tool_call"];

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    let top = Fields(object);
    if top.has_any(&["hook_event_name"]) {
        return Err(EventError::Foreign("an event with a hook_event_name, which Antigravity never sends"));
    }
    if let Some(what) = foreign_marker(Host::Antigravity, &top) {
        return Err(EventError::Foreign(what));
    }
    let common = top.object("common")?;
    let stop_args = top.object("stop_hook_args")?;
    let is_stop = top.has_any(&["executionNum", "terminationReason", "fullyIdle", "termination_reason"])
        || stop_args.is_some();
    if !is_stop {
        return Err(EventError::Foreign("not a Stop event"));
    }

    let fully_idle = match top.boolean("fullyIdle")? {
        Some(idle) => Some(idle),
        None => match &stop_args {
            Some(args) => args.boolean("fully_idle")?,
            None => None,
        },
    };
    let reason = match top.string("terminationReason")? {
        Some(reason) => Some(reason),
        None => match &stop_args {
            Some(args) => args.string("termination_reason")?.or(top.string("termination_reason")?),
            None => top.string("termination_reason")?,
        },
    };
    let error = match object.get("error").or_else(|| stop_args.as_ref().and_then(|a| a.0.get("error"))) {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    if error {
        return Err(EventError::Foreign("the turn ended on an error"));
    }
    if fully_idle != Some(true) {
        return Err(EventError::Foreign("the turn is not fully idle (background tasks may still run)"));
    }
    if !reason.as_deref().is_some_and(|r| NORMAL_ENDS.iter().any(|n| r.eq_ignore_ascii_case(n))) {
        return Err(EventError::Foreign("the turn did not end normally"));
    }

    // Each field in the camelCase dialect, else in the snake_case one's `common` object.
    let in_common = |read: &dyn Fn(&Fields) -> Result<Option<String>, EventError>| match &common {
        Some(common) => read(common),
        None => Ok(None),
    };
    let conversation = match top.string("conversationId")? {
        Some(id) => Some(id),
        None => in_common(&|c| c.string("conversation_id"))?,
    };
    let transcript = match top.string("transcriptPath")? {
        Some(path) => Some(path),
        None => in_common(&|c| c.string("transcript_path"))?,
    };
    Ok(StopEvent {
        session_id: conversation.filter(|id| !id.is_empty()).ok_or(EventError::Missing("conversationId"))?,
        stop_hook_active: None,
        // Antigravity's transcript is not in Claude Code's format, and there is no last message.
        last_assistant_message: None,
        transcript: transcript.filter(|p| !p.is_empty()).map(|p| Transcript::Opaque(PathBuf::from(p))),
        background: None,
    })
}

pub(in crate::host) fn render(response: &HookResponse) -> String {
    match &response.block {
        Some(reason) => object_line([("decision", json!("continue")), ("reason", json!(reason))]),
        None => object_line([("decision", json!("stop"))]),
    }
}

/// What decides whether for-loop runs on Antigravity, for the watch of the host's
/// configuration: the global and the workspace's `hooks.json`, and the plugin's hook list and
/// manifest in either place.
pub(in crate::host) fn watched(env: &Environment, project: &std::path::Path) -> Vec<Watched> {
    let mut dirs = vec![project.join(".agents")];
    dirs.extend(env.var("HOME").map(|home| PathBuf::from(home).join(".gemini/config")));
    let mut watched = Vec::new();
    for dir in dirs {
        watched.push(Watched::new(Kind::Hooks, dir.join("hooks.json")));
        watched.push(Watched::new(Kind::Hooks, dir.join("plugins/for-loop/hooks.json")));
        watched.push(Watched::new(Kind::Manifest, dir.join("plugins/for-loop/plugin.json")));
    }
    watched
}

/// What for-loop knows about antigravity: read by [`Host`]'s methods.
pub(in crate::host) const SPEC: HostSpec = HostSpec {
    aliases: &["agy"],
    markers: Some(Markers { fields: MARKERS, what: "an Antigravity event" }),
    looks_like: Some(|fields| fields.has_any(MARKERS)),
    watched: Some(watched),
    ..HostSpec::of(Host::Antigravity, "antigravity", "agy", parse, render, DOCTOR)
};

// What `loop-hook doctor` checks of Antigravity's installation: the plugin folder, and the
// hooks.json Antigravity drops whole when one entry is wrong.

const DOCTOR: Install = Install { home: config_dir, check: doctor };

/// `~/.gemini/config`, where Antigravity keeps its plugins (Gemini CLI shares `~/.gemini`).
fn config_dir(env: &Environment) -> Option<PathBuf> {
    super::gemini_cli::home(env).map(|home| home.join("config"))
}

fn doctor(look: &Look) -> Option<Installation> {
    if !look.present {
        return None;
    }
    let gemini_home = super::gemini_cli::home(look.env);
    let facts = antigravity(look.env, gemini_home.as_deref(), look.project);
    let installed = facts.plugin_dir.is_some();
    Some(Installation { installed, checks: antigravity_lines(&facts, look.binary, look.asked) })
}

/// `~/.gemini/config/plugins/for-loop`, else the project's `.agents/plugins/for-loop`.
fn antigravity(env: &Environment, gemini_home: Option<&Path>, project: &Path) -> AntigravityFacts {
    let dirs = [
        gemini_home.map(|h| h.join("config/plugins/for-loop")),
        Some(project.join(".agents/plugins/for-loop")),
    ];
    let Some(dir) = dirs.into_iter().flatten().find(|d| d.join("plugin.json").is_file()) else {
        return AntigravityFacts::default();
    };
    let hooks = dir.join("hooks.json");
    let problem = match std::fs::read(&hooks) {
        Err(e) => Some(format!("{} cannot be read: {e}", hooks.display())),
        Ok(bytes) if bytes.starts_with(&[0xef, 0xbb, 0xbf]) => {
            Some(format!("{} starts with a byte order mark", hooks.display()))
        }
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Err(e) => Some(format!("{} is not valid JSON ({e})", hooks.display())),
            Ok(value) => stop_hook_problem(&value, &dir),
        },
    };
    let launch = dir.join("scripts/loop-hook").is_file().then(|| install::launch(env, &dir));
    AntigravityFacts { plugin_dir: Some(dir), hooks_problem: problem, launch }
}

/// Why for-loop's `Stop` entry would not run: a timeout that is not an integer, or a script that
/// is missing or not executable.
fn stop_hook_problem(hooks: &Value, dir: &Path) -> Option<String> {
    let stop = hooks.get("for-loop")?.get("Stop")?.as_array()?.first()?;
    if stop.get("timeout").is_some_and(|t| !t.is_u64()) {
        return Some("the Stop hook's timeout is not a whole number of seconds".into());
    }
    let command = stop.get("command").and_then(Value::as_str)?;
    let script = dir.join(command);
    (!install::is_executable(&script)).then(|| format!("{} is missing or not executable", script.display()))
}

/// Antigravity: the plugin folder.
#[derive(Debug, Clone, Default)]
struct AntigravityFacts {
    pub plugin_dir: Option<PathBuf>,
    /// Why Antigravity would drop the plugin's hooks.json, if it would.
    pub hooks_problem: Option<String>,
    pub launch: Option<Launch>,
}

fn antigravity_lines(antigravity: &AntigravityFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("antigravity: {what}");
    let Some(dir) = &antigravity.plugin_dir else {
        return vec![not_installed(
            Host::Antigravity,
            "no for-loop plugin in ~/.gemini/config/plugins or .agents/plugins".into(),
            "mkdir -p ~/.gemini/config/plugins && ln -s <for-loop checkout>/plugin/antigravity ~/.gemini/config/plugins/for-loop && agy plugin validate".into(),
            asked,
        )];
    };
    let mut out = vec![match &antigravity.hooks_problem {
        None => Check::pass(name("installed"), format!("plugin at {}", dir.display())),
        Some(why) => Check::fail(
            name("hooks.json"),
            format!("{why}: Antigravity drops the whole file silently"),
            format!(
                "ln -sfn <for-loop checkout>/plugin/antigravity {} && agy plugin validate",
                shell_quote(dir)
            ),
        ),
    }];
    out.push(install::binary_line(&name("binary"), antigravity.launch.as_ref(), binary));
    // The skills (the slash commands) run loop-hook from PATH or FOR_LOOP_BIN.
    if binary.first_on_path.is_none() && binary.for_loop_bin.is_none() {
        out.push(Check::fail(
            name("skills"),
            "the skills run loop-hook from PATH, and there is none on PATH",
            format!("{INSTALL}, with ~/.cargo/bin on the agent's PATH"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::event::parse_object;

    fn parse_text(text: &str) -> Result<StopEvent, EventError> {
        parse(&parse_object(text.as_bytes()).unwrap())
    }

    const DOCS: &str = r#"{"conversationId":"c-1","workspacePaths":["/w","/x"],"transcriptPath":"/t.jsonl",
        "artifactDirectoryPath":"/a","modelName":"m","executionNum":2,"terminationReason":"model_stop","fullyIdle":true}"#;

    #[test]
    fn reads_the_camel_case_stop() {
        let event = parse_text(DOCS).unwrap();
        assert_eq!(event.session_id, "c-1");
        assert!(parse_text(&DOCS.replace("model_stop", "NO_TOOL_CALL")).is_ok());
        assert_eq!(event.transcript, Some(Transcript::Opaque("/t.jsonl".into())));
        let no_error = DOCS.replace(r#""executionNum":2"#, r#""executionNum":2,"error":false"#);
        assert!(parse_text(&no_error).is_ok());
        // Measured on 1.2.9: an empty transcript path, which is no path at all.
        let empty = parse_text(&DOCS.replace("/t.jsonl", "")).unwrap();
        assert_eq!(empty.transcript, None);
    }

    #[test]
    fn reads_the_snake_case_dialect() {
        let event = parse_text(
            r#"{"common":{"conversation_id":"c-2","workspace_paths":["/w"]},
                "stop_hook_args":{"fully_idle":true,"termination_reason":"NO_TOOL_CALL"}}"#,
        )
        .unwrap();
        assert_eq!(event.session_id, "c-2");
    }

    #[test]
    fn only_a_normal_fully_idle_end_is_judged() {
        for (from, to) in [
            (r#""fullyIdle":true"#, r#""fullyIdle":false"#),
            (r#","fullyIdle":true"#, ""),
            ("model_stop", "cancelled"),
            ("model_stop", "ERROR"),
            (r#""executionNum":2"#, r#""executionNum":2,"error":"quota exceeded (429)""#),
        ] {
            let text = DOCS.replace(from, to);
            assert!(matches!(parse_text(&text), Err(EventError::Foreign(_))), "{text}");
        }
    }

    #[test]
    fn refuses_other_events_and_hosts() {
        assert_eq!(
            parse_text(r#"{"conversationId":"c","workspacePaths":["/w"],"modelName":"m"}"#),
            Err(EventError::Foreign("not a Stop event"))
        );
        assert!(matches!(
            parse_text(r#"{"session_id":"s","hook_event_name":"Stop"}"#),
            Err(EventError::Foreign(_))
        ));
        assert_eq!(
            parse_text(r#"{"fullyIdle":true,"terminationReason":"model_stop"}"#),
            Err(EventError::Missing("conversationId"))
        );
        assert!(matches!(parse_text(r#"{"fullyIdle":"yes"}"#), Err(EventError::WrongType { .. })));
    }

    #[test]
    fn output_contract() {
        assert_eq!(render(&HookResponse::allow()), r#"{"decision":"stop"}"#);
        assert_eq!(render(&HookResponse::allow_with("verified")), r#"{"decision":"stop"}"#);
        assert_eq!(
            render(&HookResponse::block("go on".into(), "1/3".into())),
            r#"{"decision":"continue","reason":"go on"}"#
        );
    }
}
