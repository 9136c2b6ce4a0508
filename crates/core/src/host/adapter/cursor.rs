//! Cursor's `stop` (IDE and `cursor-agent`): `snake_case` input with `hook_event_name:"stop"`,
//! `status` (`completed`, `aborted`, `error`), `loop_count`, `conversation_id`,
//! `workspace_roots[]`. No last message is sent.
//!
//! Output: `{"followup_message":P}` submits P as the next user message; `{}` lets it stop. There
//! is no field shown to the user, so an allow's message is not printed. Cursor stops following
//! up after `loop_limit` follow-ups per hook (default 5), whatever the hook says; our hook config
//! raises it.
//!
//! Only a `completed` turn is judged: an aborted or failed turn is the user's or the model's
//! business, not a claim of done.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::spec::{FailureRead, HostSpec, Markers};
use crate::host::config_watch::{Kind, Watched};
use crate::host::install::{
    self, BinaryFacts, Check, HookFile, Install, Installation, Look, not_installed, read_json, runs_us,
    shell_quote,
};
use crate::support::Environment;

use crate::host::event::{EventError, Fields, StopEvent, Transcript, TurnError, TurnFailure};
use crate::host::hook_response::HookResponse;
use crate::host::{Host, foreign_marker, object_line};

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    let fields = Fields(object);
    if let Some(name) = fields.string("hook_event_name")?
        && name != "stop"
    {
        return Err(EventError::Foreign("not a stop event"));
    }
    if let Some(what) = foreign_marker(Host::Cursor, &fields) {
        return Err(EventError::Foreign(what));
    }
    if !fields.has_any(&["conversation_id", "loop_count", "cursor_version"]) {
        return Err(EventError::Foreign("not a Cursor event (no conversation_id)"));
    }
    if fields.string("status")?.as_deref() != Some("completed") {
        return Err(EventError::Foreign("the turn did not complete"));
    }
    // Read for its type only: a wrong one is reported like any malformed field.
    fields.count("loop_count")?;
    Ok(StopEvent {
        session_id: fields.required_string("conversation_id")?,
        // `loop_count` counts follow-ups, but our hook config lifts Cursor's `loop_limit`, so
        // it never overrides a block and the counter is not relied on.
        stop_hook_active: None,
        // Cursor's transcript is not in Claude Code's format, and there is no last message.
        last_assistant_message: None,
        transcript: fields.path("transcript_path")?.map(Transcript::Opaque),
        background: None,
    })
}

/// A `stop` whose `status` is `error`, as the host table reads it (no time is needed).
pub(in crate::host) fn read_failure(object: &Map<String, Value>, _now: jiff::Timestamp) -> FailureRead {
    parse_failure(object)
}

/// A `stop` whose `status` is `error`, when `object` is one: Cursor names no kind and gives no
/// words, so it is an `agent_error`. Any other event is left to [`parse`].
pub(in crate::host) fn parse_failure(object: &Map<String, Value>) -> Option<Result<TurnFailure, EventError>> {
    let fields = Fields(object);
    let is_stop = fields.string("hook_event_name").ok().flatten().is_none_or(|name| name == "stop");
    if !is_stop
        || fields.string("status").ok().flatten().as_deref() != Some("error")
        || foreign_marker(Host::Cursor, &fields).is_some()
        || !fields.has_any(&["conversation_id", "loop_count", "cursor_version"])
    {
        return None;
    }
    Some(fields.required_string("conversation_id").map(|session_id| TurnFailure {
        session_id,
        error: TurnError::Other { kind: "error".into() },
        said: String::new(),
    }))
}

pub(in crate::host) fn render(response: &HookResponse) -> String {
    match &response.block {
        Some(reason) => object_line([("followup_message", json!(reason))]),
        None => "{}".to_string(),
    }
}

/// What decides whether for-loop runs on Cursor, for the watch of the host's configuration: the
/// user's and the project's `hooks.json`, and the plugin's hook list and launcher where the hook
/// was told the plugin's root.
pub(in crate::host) fn watched(env: &Environment, project: &Path) -> Vec<Watched> {
    // The enterprise hook list, where Cursor documents it for each platform.
    let enterprise = if cfg!(target_os = "macos") {
        "/Library/Application Support/Cursor/hooks.json"
    } else if cfg!(windows) {
        r"C:\ProgramData\Cursor\hooks.json"
    } else {
        "/etc/cursor/hooks.json"
    };
    let mut watched = vec![
        Watched::new(Kind::Hooks, project.join(".cursor/hooks.json")),
        Watched::new(Kind::Hooks, enterprise),
    ];
    if let Some(home) = env.var("HOME") {
        watched.push(Watched::new(Kind::Hooks, PathBuf::from(home).join(".cursor/hooks.json")));
    }
    if let Some(root) = env.var("CURSOR_PLUGIN_ROOT").map(PathBuf::from) {
        watched.push(Watched::new(Kind::Hooks, root.join("hooks/hooks.json")));
        watched.push(Watched::new(Kind::Launcher, root.join("scripts/loop-hook")));
    }
    watched
}

/// What for-loop knows about cursor: read by [`Host`]'s methods.
pub(in crate::host) const SPEC: HostSpec = HostSpec {
    aliases: &["cursor-agent"],
    markers: Some(Markers {
        fields: &["cursor_version", "loop_count", "conversation_id"],
        what: "a Cursor event",
    }),
    looks_like: Some(|fields| {
        fields.has_any(&["loop_count", "cursor_version"]) || fields.is("hook_event_name", "stop")
    }),
    watched: Some(watched),
    parse_failure: read_failure,
    ..HostSpec::of(Host::Cursor, "cursor", "cursor-agent", parse, render, DOCTOR)
};

// What `loop-hook doctor` checks of Cursor's installation: its hook files, the user's and the
// project's.

const DOCTOR: Install = Install { home: cursor_home, check: doctor };

fn doctor(look: &Look) -> Option<Installation> {
    let in_project = look.project.join(".cursor/hooks.json").is_file();
    let home = cursor_home(look.env).filter(|_| look.present || in_project)?;
    let facts = cursor(home, look.project);
    let installed = facts.user_hook.is_some() || facts.project_hook.is_some();
    Some(Installation { installed, checks: cursor_lines(&facts, look.binary, look.asked) })
}

/// `~/.cursor`.
fn cursor_home(env: &Environment) -> Option<PathBuf> {
    env.var("HOME").map(|home| Path::new(home).join(".cursor"))
}

/// for-loop's `stop` hook in a Cursor `hooks.json`, with its `loop_limit` when that is a cap.
fn cursor_hook(path: PathBuf) -> Option<HookFile> {
    let hooks = read_json(&path)?;
    let ours = hooks
        .get("hooks")?
        .get("stop")?
        .as_array()?
        .iter()
        .find(|hook| hook.get("command").and_then(Value::as_str).is_some_and(|c| runs_us(c, "cursor")))?;
    // Cursor caps follow-ups at 5 when `loop_limit` is missing; `null` lifts the cap.
    let limit = match ours.get("loop_limit") {
        Some(Value::Null) => None,
        Some(other) => Some(other.to_string()),
        None => Some("5 (Cursor's default, when loop_limit is missing)".into()),
    };
    Some(HookFile { path, limit })
}

fn cursor(home: PathBuf, project: &Path) -> CursorFacts {
    CursorFacts {
        user_hook: cursor_hook(home.join("hooks.json")),
        project_hook: cursor_hook(project.join(".cursor/hooks.json")),
        home,
    }
}

/// Cursor: its hook files.
#[derive(Debug, Clone, Default)]
struct CursorFacts {
    pub home: PathBuf,
    pub user_hook: Option<HookFile>,
    pub project_hook: Option<HookFile>,
}

fn cursor_lines(cursor: &CursorFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("cursor: {what}");
    let hooks: Vec<&HookFile> = cursor.user_hook.iter().chain(&cursor.project_hook).collect();
    if hooks.is_empty() {
        return vec![not_installed(
            Host::Cursor,
            format!(
                "no stop hook of for-loop in {} or .cursor/hooks.json",
                cursor.home.join("hooks.json").display()
            ),
            format!(
                "cp <for-loop checkout>/plugin/cursor/hooks/hooks.json {}",
                shell_quote(&cursor.home.join("hooks.json"))
            ),
            asked,
        )];
    }
    let mut out = Vec::new();
    for hook in hooks {
        out.push(match &hook.limit {
            Some(limit) => Check::fail(
                name("loop_limit"),
                format!(
                    "{} sets loop_limit {limit}: Cursor ends the loop after that many follow-ups",
                    hook.path.display()
                ),
                format!("set \"loop_limit\": null in for-loop's stop hook in {}", hook.path.display()),
            ),
            None => Check::pass(name("installed"), format!("{} runs for-loop", hook.path.display())),
        });
    }
    if cursor.user_hook.is_none() {
        out.push(
            Check::pass(
                name("workspace trust"),
                "project hooks run only in a trusted workspace: trust it in Cursor",
            )
            .minor(),
        );
    }
    out.push(install::binary_line(&name("binary"), None, binary));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::event::parse_object;

    fn parse_text(text: &str) -> Result<StopEvent, EventError> {
        parse(&parse_object(text.as_bytes()).unwrap())
    }

    const STOP: &str = r#"{"conversation_id":"cv-1","generation_id":"g","model":"m","hook_event_name":"stop",
        "cursor_version":"3.17.19","workspace_roots":["/w"],"user_email":"u@example.com","transcript_path":"/t",
        "status":"completed","loop_count":2}"#;

    #[test]
    fn reads_the_stop() {
        let event = parse_text(STOP).unwrap();
        assert_eq!(event.session_id, "cv-1");
        assert_eq!(event.transcript, Some(Transcript::Opaque("/t".into())));
        assert!(matches!(
            parse_text(&STOP.replace(r#""loop_count":2"#, r#""loop_count":-1"#)),
            Err(EventError::WrongType { field: "loop_count", .. })
        ));
    }

    #[test]
    fn only_a_completed_turn_is_judged() {
        for status in ["\"aborted\"", "\"error\"", "null"] {
            let text = STOP.replace("\"completed\"", status);
            assert_eq!(parse_text(&text), Err(EventError::Foreign("the turn did not complete")));
        }
    }

    #[test]
    fn an_error_end_is_a_failed_turn_and_nothing_else_is() {
        let failed =
            parse_failure(&parse_object(STOP.replace("\"completed\"", "\"error\"").as_bytes()).unwrap());
        assert_eq!(
            failed,
            Some(Ok(TurnFailure {
                session_id: "cv-1".into(),
                error: TurnError::Other { kind: "error".into() },
                said: String::new()
            }))
        );
        for status in ["\"completed\"", "\"aborted\"", "null"] {
            let text = STOP.replace("\"completed\"", status);
            assert_eq!(parse_failure(&parse_object(text.as_bytes()).unwrap()), None, "{status}");
        }
        let claude = r#"{"session_id":"s","hook_event_name":"StopFailure","status":"error"}"#;
        assert_eq!(parse_failure(&parse_object(claude.as_bytes()).unwrap()), None);
        let nameless = STOP.replace("\"completed\"", "\"error\"").replace(r#""conversation_id":"cv-1","#, "");
        assert_eq!(
            parse_failure(&parse_object(nameless.as_bytes()).unwrap()),
            Some(Err(EventError::Missing("conversation_id")))
        );
    }

    #[test]
    fn refuses_other_hosts() {
        assert!(matches!(
            parse_text(r#"{"session_id":"s","hook_event_name":"Stop","stop_hook_active":false}"#),
            Err(EventError::Foreign(_))
        ));
        assert!(matches!(parse_text(r#"{"session_id":"s"}"#), Err(EventError::Foreign(_))));
    }

    #[test]
    fn output_contract() {
        assert_eq!(render(&HookResponse::allow()), "{}");
        assert_eq!(render(&HookResponse::allow_with("verified")), "{}");
        assert_eq!(
            render(&HookResponse::block("go on".into(), "1/3".into())),
            r#"{"followup_message":"go on"}"#
        );
    }
}
