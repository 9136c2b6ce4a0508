//! Qwen Code's `Stop` (measured on 0.24.4): Claude Code's `snake_case` shape (`session_id`,
//! `transcript_path`, `cwd`, `hook_event_name:"Stop"`, `stop_hook_active`,
//! `last_assistant_message`) plus `crons` and `background_tasks` always, and `context_usage`,
//! `context_limit`, `input_tokens` once the model reported usage.
//!
//! Output: `{"decision":"block","reason":R}` (exit 0) sends R back as the next user message, and
//! the next event has `stop_hook_active:true`; an empty stdout lets the turn end; `systemMessage`
//! is shown to the user. The CLI honours at most a cap of blocks in a row per prompt (8 unless
//! set, 100 at most): the last block of the chain is overridden and the turn ends, which the next
//! stop's `stop_hook_active:false` shows.
//!
//! The transcript (JSONL under `~/.qwen/projects/<slug>/chats/`) is not Claude Code's format,
//! so it is only searched as text.
//!
//! A turn that ends on an API error sends `StopFailure` in place of `Stop`, in Claude Code's
//! shape (`error`, `error_details`, `last_assistant_message`, plus `prompt_id`), but only from the
//! interactive UI and ACP sessions: a headless `-p` run sends none (measured on 0.24.4). The
//! event is fire-and-forget: the CLI does not wait for its hooks and shows nothing they print.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::spec::{FailureRead, HostSpec, Markers};
use crate::host::config_watch::{Kind, Watched};
use crate::host::event::{EventError, Fields, StopEvent, Transcript, TurnFailure};
use crate::host::hook_response::HookResponse;
use crate::host::install::{
    self, BinaryFacts, Check, Extension, Install, Installation, Launch, Look, home_dir, read_json,
};
use crate::host::origin::{HookRunner, HookSession};
use crate::host::user_command;
use crate::host::{Commands, Host, foreign_marker};
use crate::support::Environment;

/// Fields only Qwen Code's `Stop` sends (`crons` always; Claude Code's is `session_crons`).
pub(in crate::host) const MARKERS: &[&str] = &["crons", "context_usage", "context_limit"];

/// Claude Code's and Codex's own `Stop` fields, which Qwen Code never sends.
const OTHERS: &[&str] = &["session_crons", "effort", "turn_id"];

/// The variable Qwen Code puts in the environment of the agent's shell and never in a hook's: a
/// hook or command that sees it was started from the agent's shell (or from a Qwen Code the
/// agent started there).
pub(in crate::host) const AGENT_SHELL_VAR: &str = "QWEN_CODE";

/// Qwen Code's cap of Stop blocks in a row when nothing sets it, and the most it takes.
pub(crate) const DEFAULT_BLOCK_CAP: u32 = 8;
pub(crate) const MAX_BLOCK_CAP: u32 = 100;
/// The variable that sets the cap, ahead of the settings.
pub(crate) const BLOCK_CAP_VAR: &str = "QWEN_CODE_STOP_HOOK_BLOCK_CAP";
/// The settings key that sets the cap.
pub(crate) const BLOCK_CAP_SETTING: &str = "stopHookBlockingCap";

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    let fields = Fields(object);
    if fields.string("hook_event_name")?.as_deref() != Some("Stop") {
        return Err(EventError::Foreign("not a Stop event"));
    }
    if let Some(what) = foreign_marker(Host::QwenCode, &fields) {
        return Err(EventError::Foreign(what));
    }
    if fields.has_any(OTHERS) || !fields.has_any(MARKERS) {
        return Err(EventError::Foreign("a Stop event without Qwen Code's fields"));
    }
    Ok(StopEvent {
        session_id: fields.required_string("session_id")?,
        // The flag means exactly "continuing because a Stop hook blocked", and the cap can
        // override a block: a block followed by `false` is an override.
        stop_hook_active: Some(fields.boolean("stop_hook_active")?.unwrap_or(false)),
        last_assistant_message: fields.string("last_assistant_message")?,
        transcript: fields.path("transcript_path")?.map(Transcript::Opaque),
        // Qwen Code 0.24.4 lists its background agents here (with finished ones), not the
        // shells its agent started in the background.
        background: crate::host::background::in_flight(object),
    })
}

/// A `StopFailure`, when `object` is one, read at `now`. The time zone (for a reset time such as
/// "resets 8pm") is looked up only for a `StopFailure`: the lookup reads the zone database, which
/// the quiet path of every turn end must not pay for.
pub(in crate::host) fn read_failure(object: &Map<String, Value>, now: jiff::Timestamp) -> FailureRead {
    if object.get("hook_event_name").and_then(Value::as_str) != Some("StopFailure") {
        return None;
    }
    parse_failure(object, &now.to_zoned(jiff::tz::TimeZone::system()))
}

/// A `StopFailure`, when `object` is one; any other event is left to [`parse`]. Its `error` is
/// one of `rate_limit`, `authentication_failed`, `billing_error`, `invalid_request`,
/// `server_error`, `max_output_tokens`, `loop_detected`, `unknown`; the words decide as on
/// Claude Code (a prompt too long is an `invalid_request`).
pub(in crate::host) fn parse_failure(
    object: &Map<String, Value>,
    now: &jiff::Zoned,
) -> Option<Result<TurnFailure, EventError>> {
    let fields = Fields(object);
    if fields.string("hook_event_name").ok().flatten().as_deref() != Some("StopFailure") {
        return None;
    }
    if let Some(what) = foreign_marker(Host::QwenCode, &fields) {
        return Some(Err(EventError::Foreign(what)));
    }
    Some(TurnFailure::from_claude(object, now))
}

pub(in crate::host) fn render(response: &HookResponse) -> String {
    // Claude Code's keys, which Qwen Code reads the same way.
    response.to_claude_json()
}

/// The cap of Stop blocks in a row the Qwen Code running in `cwd` applies, as its hooks can see
/// it: the variable, else the settings (system, then the project's, then the user's), else the
/// default. A value the CLI would not take reads as it reads it.
pub(crate) fn block_cap(env: &Environment, cwd: &Path) -> u32 {
    if let Some(value) = env.var(BLOCK_CAP_VAR).filter(|v| !v.trim().is_empty()) {
        return value.trim().parse::<i64>().map_or(DEFAULT_BLOCK_CAP, normalize);
    }
    let system = env
        .var("QWEN_CODE_SYSTEM_SETTINGS_PATH")
        .map_or_else(|| PathBuf::from("/etc/qwen-code/settings.json"), PathBuf::from);
    let project = cwd.join(".qwen/settings.json");
    let user = env.var("HOME").map(|home| PathBuf::from(home).join(".qwen/settings.json"));
    [Some(system), Some(project), user]
        .into_iter()
        .flatten()
        .find_map(|path| setting(&path))
        .map_or(DEFAULT_BLOCK_CAP, normalize)
}

fn normalize(value: i64) -> u32 {
    if value >= 1 {
        u32::try_from(value.min(i64::from(MAX_BLOCK_CAP))).unwrap_or(MAX_BLOCK_CAP)
    } else {
        DEFAULT_BLOCK_CAP
    }
}

/// The cap a settings file sets, if it sets one.
fn setting(path: &Path) -> Option<i64> {
    let bytes = crate::support::read::bounded_read::read(path, 1 << 20).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let cap = value.get(BLOCK_CAP_SETTING)?;
    // The CLI floors a fractional number; any cap worth reading fits an i64 exactly.
    #[allow(clippy::cast_possible_truncation)]
    let floored = cap.as_f64().filter(|f| f.is_finite()).map(|f| f.floor().clamp(-1.0, 1000.0) as i64);
    cap.as_i64().or(floored)
}

/// How Qwen Code 0.24.4 starts a hook on Linux: each in a session of its own, a direct child of
/// its innermost `node` process (it relaunches itself twice), reading a socket that process
/// made. Its shell tool runs in a session of its own under the same process.
pub(in crate::host) const HOOK_RUNNER: HookRunner = HookRunner {
    names: &[("node", "qwen")],
    session: HookSession::Own,
    stdin_from_host: true,
    tool_sandbox: None,
};
/// What decides whether for-loop runs on Qwen Code, for the watch of the host's configuration:
/// the hook keys and the block cap of its settings (the user's, the project's, the system's),
/// and the installed extension's manifest, hook list and launcher, and which extensions are on.
pub(in crate::host) fn watched(env: &Environment, project: &Path) -> Vec<Watched> {
    const KEYS: &[&str] = &["hooks", "hooksConfig", "disableAllHooks", BLOCK_CAP_SETTING];
    // The system settings and the system defaults beside them, where the pinned CLI reads them.
    let [system, defaults] = crate::host::config_watch::system_settings(
        env,
        ("QWEN_CODE_SYSTEM_SETTINGS_PATH", "QWEN_CODE_SYSTEM_DEFAULTS_PATH"),
        ["/Library/Application Support/QwenCode/settings.json", r"C:\ProgramData\qwen-code\settings.json", "/etc/qwen-code/settings.json"],
    );
    let mut watched = vec![
        Watched::new(Kind::Settings(KEYS), project.join(".qwen/settings.json")),
        Watched::new(Kind::Settings(KEYS), system),
        Watched::new(Kind::Settings(KEYS), defaults),
    ];
    let home = env.var("HOME").map(|home| PathBuf::from(home).join(".qwen"));
    if let Some(user) = &home {
        watched.push(Watched::new(Kind::Settings(KEYS), user.join("settings.json")));
    }
    if let Some(dir) = env.var("QWEN_HOME").map(PathBuf::from).or(home) {
        let extensions = dir.join("extensions");
        watched.push(Watched::new(Kind::Manifest, extensions.join("extension-enablement.json")));
        watched.push(Watched::new(Kind::Manifest, extensions.join("for-loop/qwen-extension.json")));
        watched.push(Watched::new(Kind::Hooks, extensions.join("for-loop/hooks/hooks.json")));
        watched.push(Watched::new(Kind::Launcher, extensions.join("for-loop/scripts/loop-hook")));
    }
    watched
}

/// What for-loop knows about qwen-code: read by [`Host`]'s methods.
pub(in crate::host) const SPEC: HostSpec = HostSpec {
    aliases: &["qwen"],
    tells_commands_the_session: true,
    has_prompt_hook: true,
    sends_last_message: true,
    prompt_hook_adds_context: true,
    typed_prompt_field: "submitted_prompt",
    agent_shell_marker: Some(AGENT_SHELL_VAR),
    settable_block_cap: Some(block_cap),
    commands: Commands::NO_ROLLBACK,
    // Qwen Code names an extension's commands by their file names, with no namespace.
    typed_commands: user_command::BARE,
    hook_runner: Some(HOOK_RUNNER),
    // Its StopFailure hook runs under a supervisor of Qwen Code's own: see [`Host::failure_hook_runner`].
    failure_hook_runner: None,
    markers: Some(Markers { fields: MARKERS, what: "a Qwen Code event" }),
    looks_like: Some(|fields| fields.is("hook_event_name", "Stop") && fields.has_any(MARKERS)),
    watched: Some(watched),
    parse_failure: read_failure,
    ..HostSpec::of(Host::QwenCode, "qwen-code", "qwen", parse, render, DOCTOR)
};

// What `loop-hook doctor` checks of Qwen Code's installation: the extension, its enablement for
// this folder, the settings that turn hooks off, and the cap of blocked stops in a row, read as
// Qwen Code 0.24 reads them.

const DOCTOR: Install = Install { home, check: doctor };

fn doctor(look: &Look) -> Option<Installation> {
    let home = home(look.env).filter(|_| look.present)?;
    let facts = install_facts(look.env, home, look.project);
    let installed = facts.extension.is_some();
    Some(Installation { installed, checks: qwen_lines(&facts, look.binary, look.asked) })
}

/// `$QWEN_HOME`, else `~/.qwen`.
fn home(env: &Environment) -> Option<PathBuf> {
    home_dir(env, "QWEN_HOME", ".qwen")
}

fn install_facts(env: &Environment, home: PathBuf, project: &Path) -> QwenFacts {
    let extension =
        Some(home.join("extensions/for-loop")).filter(|dir| dir.join("qwen-extension.json").is_file());
    let hooks_disabled_by = [home.join("settings.json"), project.join(".qwen/settings.json")]
        .into_iter()
        .filter(|file| read_json(file).and_then(|s| s.get("disableAllHooks")?.as_bool()).unwrap_or(false))
        .collect();
    QwenFacts {
        launch: extension.as_ref().map(|dir| install::launch(env, dir)),
        // The same enablement file and rules as Gemini CLI's, which Qwen Code forked.
        enabled: extension
            .as_ref()
            .map(|_| super::gemini_cli::enabled(&home.join("extensions/extension-enablement.json"), project)),
        hooks_disabled_by,
        block_cap: block_cap(env, project),
        extension,
        home,
    }
}

/// Qwen Code: the extension, the settings that switch hooks off, and the cap of blocked stops.
#[derive(Debug, Clone, Default)]
struct QwenFacts {
    /// `$QWEN_HOME` or `~/.qwen`.
    pub home: PathBuf,
    /// The installed extension's directory.
    pub extension: Option<PathBuf>,
    pub launch: Option<Launch>,
    /// `Some(false)` when the extension is disabled for this project or everywhere.
    pub enabled: Option<bool>,
    /// Settings files with `disableAllHooks: true`.
    pub hooks_disabled_by: Vec<PathBuf>,
    /// The most blocked stops in a row Qwen Code honours here, so the longest loop it holds.
    pub block_cap: u32,
}

fn qwen_lines(qwen: &QwenFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("qwen-code: {what}");
    let mut out = Extension {
        host: Host::QwenCode,
        home: &qwen.home,
        found: qwen.extension.as_deref(),
        enabled: qwen.enabled,
        program: "qwen",
        install: "qwen extensions install <for-loop checkout>/plugin/qwen-code --consent",
    }
    .lines(asked);
    if qwen.extension.is_none() {
        return out;
    }
    out.extend(install::hooks_on_lines(Host::QwenCode, &qwen.hooks_disabled_by));
    let settings = qwen.home.join("settings.json");
    let most = MAX_BLOCK_CAP;
    out.push(if qwen.block_cap >= most {
        Check::pass(
            name("block cap"),
            format!("Qwen Code honours {most} blocked stops in a row: loops of up to {most} iterations"),
        )
    } else {
        Check::fail(
            name("block cap"),
            format!(
                "Qwen Code ends a turn after {} blocked stops in a row, so /for-loop refuses more than \
                 --max-iterations {} (the default is 30)",
                qwen.block_cap, qwen.block_cap
            ),
            format!(
                "add \"{}\": {most} to {}, then restart qwen (unset {} if it is set lower)",
                BLOCK_CAP_SETTING,
                settings.display(),
                BLOCK_CAP_VAR
            ),
        )
        .minor()
    });
    out.push(install::binary_line(&name("binary"), qwen.launch.as_ref(), binary));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::event::{TurnError, parse_object};

    fn parse_text(text: &str) -> Result<StopEvent, EventError> {
        parse(&parse_object(text.as_bytes()).unwrap())
    }

    /// Captured from Qwen Code 0.24.4, a hook-forced continuation.
    const STOP: &str = r#"{"session_id":"773d544c","transcript_path":"/h/.qwen/projects/-w/chats/773d544c.jsonl","cwd":"/w","hook_event_name":"Stop","timestamp":"2026-11-29T00:40:51.954Z","permission_mode":"yolo","prompt_id":"773d544c########0","stop_hook_active":true,"last_assistant_message":"done 2","background_tasks":[],"crons":[],"context_usage":0.000005,"context_limit":200000,"input_tokens":1}"#;

    #[test]
    fn reads_the_0_24_4_payload() {
        let event = parse_text(STOP).unwrap();
        assert_eq!(event.session_id, "773d544c");
        assert_eq!(event.stop_hook_active, Some(true));
        assert_eq!(event.last_assistant_message.as_deref(), Some("done 2"));
        assert_eq!(
            event.transcript,
            Some(Transcript::Opaque("/h/.qwen/projects/-w/chats/773d544c.jsonl".into()))
        );
        assert_eq!(event.claude_transcript(), None, "not Claude Code's format");
        // Without usage reported, the context fields are absent; `crons` is always sent.
        let bare = STOP.replace(r#","context_usage":0.000005,"context_limit":200000,"input_tokens":1"#, "");
        assert_eq!(parse_text(&bare).unwrap().session_id, "773d544c");
    }

    #[test]
    fn refuses_other_events_and_hosts() {
        for text in [
            STOP.replace(r#""hook_event_name":"Stop""#, r#""hook_event_name":"SubagentStop""#),
            STOP.replace(r#""hook_event_name":"Stop""#, r#""hook_event_name":"UserPromptSubmit""#),
            STOP.replace(r#","hook_event_name":"Stop""#, ""),
            r#"{"session_id":"s","hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"x"}"#.into(),
            r#"{"session_id":"s","hook_event_name":"Stop","session_crons":[],"crons":[]}"#.into(),
            r#"{"session_id":"s","hook_event_name":"Stop","turn_id":"t","crons":[]}"#.into(),
            r#"{"session_id":"s","hook_event_name":"Stop","crons":[],"cursor_version":"3"}"#.into(),
            r#"{"session_id":"s","hook_event_name":"AfterAgent","prompt_response":"x"}"#.into(),
        ] {
            assert!(matches!(parse_text(&text), Err(EventError::Foreign(_))), "{text}");
        }
    }

    #[test]
    fn malformed_fields_are_named() {
        assert_eq!(
            parse_text(r#"{"hook_event_name":"Stop","crons":[]}"#),
            Err(EventError::Missing("session_id"))
        );
        assert_eq!(
            parse_text(r#"{"session_id":"","hook_event_name":"Stop","crons":[]}"#),
            Err(EventError::Missing("session_id"))
        );
        assert!(matches!(
            parse_text(r#"{"session_id":7,"hook_event_name":"Stop","crons":[]}"#),
            Err(EventError::WrongType { field: "session_id", .. })
        ));
        assert!(matches!(
            parse_text(r#"{"session_id":"s","hook_event_name":"Stop","crons":[],"stop_hook_active":"yes"}"#),
            Err(EventError::WrongType { field: "stop_hook_active", .. })
        ));
        assert!(matches!(
            parse_text(
                r#"{"session_id":"s","hook_event_name":"Stop","crons":[],"last_assistant_message":[1]}"#
            ),
            Err(EventError::WrongType { field: "last_assistant_message", .. })
        ));
        assert!(matches!(
            parse_text(r#"{"session_id":"s","hook_event_name":7,"crons":[]}"#),
            Err(EventError::WrongType { field: "hook_event_name", .. })
        ));
    }

    /// Captured from Qwen Code 0.24.4's interactive UI: the model API answered `prompt is too
    /// long` (HTTP 400).
    const STOP_FAILURE: &str = r#"{"session_id":"0c0ffee0","transcript_path":"/h/.qwen/projects/-w/chats/0c0ffee0.jsonl","cwd":"/w","hook_event_name":"StopFailure","timestamp":"2026-11-29T02:39:57.771Z","permission_mode":"yolo","prompt_id":"0c0ffee0########0","error":"invalid_request","error_details":"400 prompt is too long: 1012345 tokens > 1000000 maximum","last_assistant_message":"[API Error: 400 prompt is too long: 1012345 tokens > 1000000 maximum]"}"#;

    fn failure(text: &str) -> Option<Result<TurnFailure, EventError>> {
        let now = jiff::Timestamp::from_second(1_000).unwrap().to_zoned(jiff::tz::TimeZone::UTC);
        parse_failure(&parse_object(text.as_bytes()).unwrap(), &now)
    }

    #[test]
    fn reads_the_0_24_4_stop_failure() {
        let read = failure(STOP_FAILURE).unwrap().unwrap();
        assert_eq!((read.session_id.as_str(), &read.error), ("0c0ffee0", &TurnError::ContextExhausted));
        assert!(read.said.starts_with("[API Error: 400 prompt is too long"), "{}", read.said);
        let limited = STOP_FAILURE
            .replace("invalid_request", "rate_limit")
            .replace("400 prompt is too long: 1012345 tokens > 1000000 maximum", "429 Too many requests");
        assert_eq!(failure(&limited).unwrap().unwrap().error, TurnError::Limited { resets_at: None });
        let looped = r#"{"session_id":"s","hook_event_name":"StopFailure","error":"loop_detected","error_details":"consecutive_identical_tool_calls"}"#;
        assert_eq!(
            failure(looped).unwrap().unwrap().error,
            TurnError::Other { kind: "loop_detected".into() }
        );
    }

    #[test]
    fn a_stop_failure_that_is_malformed_or_not_qwens_is_named_and_other_events_are_left_alone() {
        assert_eq!(failure(STOP), None, "a Stop is read by parse");
        assert_eq!(failure(r#"{"session_id":"s","hook_event_name":"SessionStart"}"#), None);
        assert_eq!(failure(r#"{"session_id":"s"}"#), None);
        assert_eq!(
            failure(r#"{"hook_event_name":"StopFailure","error":"unknown"}"#),
            Some(Err(EventError::Missing("session_id")))
        );
        assert!(matches!(
            failure(r#"{"session_id":"s","hook_event_name":"StopFailure","error":["x"]}"#),
            Some(Err(EventError::WrongType { field: "error", .. }))
        ));
        assert!(matches!(
            failure(r#"{"session_id":"s","hook_event_name":"StopFailure","error_details":7}"#),
            Some(Err(EventError::WrongType { field: "error_details", .. }))
        ));
        let cursor = r#"{"conversation_id":"c","session_id":"c","hook_event_name":"StopFailure","cursor_version":"3"}"#;
        assert!(matches!(failure(cursor), Some(Err(EventError::Foreign(_)))));
        let bare = failure(r#"{"session_id":"s","hook_event_name":"StopFailure"}"#).unwrap().unwrap();
        assert_eq!(bare.error, TurnError::Other { kind: "unknown".into() });
    }

    #[test]
    fn output_contract() {
        assert_eq!(render(&HookResponse::allow()), "");
        assert_eq!(render(&HookResponse::allow_with("verified")), r#"{"systemMessage":"verified"}"#);
        assert_eq!(
            render(&HookResponse::block("go on".into(), "1/3".into())),
            r#"{"decision":"block","reason":"go on","systemMessage":"1/3"}"#
        );
    }

    fn env(home: &Path, vars: &[(&str, &str)]) -> Environment {
        let mut all: Vec<(String, String)> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        all.push(("HOME".into(), home.display().to_string()));
        all.push(("QWEN_CODE_SYSTEM_SETTINGS_PATH".into(), home.join("system.json").display().to_string()));
        Environment::new(all, home.to_path_buf(), jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn the_block_cap_is_read_as_the_cli_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let (home, project) = (dir.path().join("home"), dir.path().join("project"));
        std::fs::create_dir_all(home.join(".qwen")).unwrap();
        std::fs::create_dir_all(project.join(".qwen")).unwrap();
        let cap = |vars: &[(&str, &str)]| block_cap(&env(&home, vars), &project);
        assert_eq!(cap(&[]), DEFAULT_BLOCK_CAP, "nothing set");
        std::fs::write(home.join(".qwen/settings.json"), r#"{"stopHookBlockingCap": 40}"#).unwrap();
        assert_eq!(cap(&[]), 40, "the user's settings");
        std::fs::write(project.join(".qwen/settings.json"), r#"{"stopHookBlockingCap": 12}"#).unwrap();
        assert_eq!(cap(&[]), 12, "the project's beat the user's");
        std::fs::write(home.join("system.json"), r#"{"stopHookBlockingCap": 500}"#).unwrap();
        assert_eq!(cap(&[]), MAX_BLOCK_CAP, "the system's beat both, clamped to the most");
        assert_eq!(cap(&[(BLOCK_CAP_VAR, "3")]), 3, "the variable beats every setting");
        assert_eq!(cap(&[(BLOCK_CAP_VAR, "0")]), DEFAULT_BLOCK_CAP);
        assert_eq!(cap(&[(BLOCK_CAP_VAR, "many")]), DEFAULT_BLOCK_CAP);
        assert_eq!(cap(&[(BLOCK_CAP_VAR, " ")]), MAX_BLOCK_CAP, "blank is unset");
        std::fs::write(home.join("system.json"), "not json").unwrap();
        assert_eq!(cap(&[]), 12, "an unreadable file sets nothing");
    }
}
