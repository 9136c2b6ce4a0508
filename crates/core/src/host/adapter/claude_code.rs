//! Claude Code's `Stop`: `snake_case` input with `hook_event_name:"Stop"`; output
//! `{"decision":"block","reason":…,"systemMessage":…}`, `{"systemMessage":…}` or nothing.
//!
//! Cursor and Copilot CLI also run the hooks in Claude Code's settings, with their own payloads;
//! those are refused here, so one turn end is never judged twice or answered in the wrong shape.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::spec::{FailureRead, HostSpec, QuietBlockCap};
use crate::host::config_watch::{self, Kind, Watched};
use crate::host::event::{EventError, Fields, StopEvent, TurnFailure};
use crate::host::hook_response::HookResponse;
use crate::host::install::{
    self, BinaryFacts, Check, Install, Installation, Launch, Look, home_dir, is_absolute, not_installed, read_json,
};
use crate::host::origin::{HookRunner, HookSession};
use crate::host::{Commands, Host, foreign_marker};
use crate::support::Environment;

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    if let Some(what) = foreign_marker(Host::ClaudeCode, &Fields(object)) {
        return Err(EventError::Foreign(what));
    }
    StopEvent::from_claude(object)
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

/// A `StopFailure`, when `object` is one; any other event is left to [`parse`].
pub(in crate::host) fn parse_failure(
    object: &Map<String, Value>,
    now: &jiff::Zoned,
) -> Option<Result<TurnFailure, EventError>> {
    if object.get("hook_event_name").and_then(Value::as_str) != Some("StopFailure") {
        return None;
    }
    if let Some(what) = foreign_marker(Host::ClaudeCode, &Fields(object)) {
        return Some(Err(EventError::Foreign(what)));
    }
    Some(TurnFailure::from_claude(object, now))
}

/// The session a `SessionStart` whose `source` is `compact` is for: Claude Code compacted the
/// conversation (automatically or by `/compact`). `None` for any other source.
pub(in crate::host) fn parse_compacted(object: &Map<String, Value>) -> Result<Option<String>, EventError> {
    let fields = Fields(object);
    if fields.string("hook_event_name")?.is_some_and(|name| name != "SessionStart") {
        return Err(EventError::Foreign("not a SessionStart event"));
    }
    if fields.string("source")?.as_deref() != Some("compact") {
        return Ok(None);
    }
    fields.required_string("session_id").map(Some)
}

/// `SessionStart`'s answer that adds `text` to the agent's context.
pub(in crate::host) fn render_session_context(text: &str) -> String {
    serde_json::json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}})
        .to_string()
}

/// The variable that sets Claude Code's cap of Stop blocks in a row without a tool call (2.1.143+),
/// read from the hook's environment, which is the CLI's.
pub(crate) const BLOCK_CAP_VAR: &str = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP";
/// The cap when the variable is not set (`Docs:env-vars`; measured on 2.1.332).
pub(crate) const DEFAULT_BLOCK_CAP: u32 = 8;

/// The cap of Stop blocks in a row in which the agent called no tool that the Claude Code running
/// this hook applies: after that many, it ends the turn whatever a hook answers. `None`: no cap
/// (`0`). A value it would not take reads as the default.
pub(crate) fn block_cap(env: &Environment) -> Option<u32> {
    match env.var(BLOCK_CAP_VAR).map(|v| v.trim().parse::<u32>()) {
        Some(Ok(0)) => None,
        Some(Ok(cap)) => Some(cap),
        _ => Some(DEFAULT_BLOCK_CAP),
    }
}

/// How Claude Code 2.1.332 starts a hook on Linux: each in a session of its own, a direct child of
/// the `claude` process, reading its event from a socket `claude` made. The agent's Bash tool
/// shell is a session of its own under `claude` too; `exec`ed into the hook it still reads a
/// socket it did not get from `claude`.
pub(in crate::host) const HOOK_RUNNER: HookRunner = HookRunner {
    names: &[("claude", "")],
    session: HookSession::Own,
    stdin_from_host: true,
    tool_sandbox: None,
};
/// What decides whether for-loop runs on Claude Code, for the watch of the host's configuration:
/// the keys of every settings file, managed ones and their drop-ins included, that can switch its
/// hooks off, keep only managed ones, stop the plugin loading or point the hooks elsewhere; the
/// host's record of the installed plugin; and the plugin's manifest, hook list and launcher (one
/// byte of `.claude-plugin/plugin.json` broken and the host loads none of the plugin).
pub(in crate::host) fn watched(env: &Environment, project: &Path) -> Vec<Watched> {
    const KEYS: &[&str] = &[
        "disableAllHooks",
        "allowManagedHooksOnly",
        "hooks",
        "enabledPlugins",
        "strictKnownMarketplaces",
        "disableSideloadFlags",
        "sandbox",
        "disableSkillShellExecution",
    ];
    let config =
        env.var("CLAUDE_CONFIG_DIR").map(PathBuf::from).or_else(|| config_watch::home(env, ".claude"));
    let mut files: Vec<PathBuf> = config.iter().map(|c| c.join("settings.json")).collect();
    let mut projects = vec![project.to_path_buf()];
    projects.extend(env.var("CLAUDE_PROJECT_DIR").map(PathBuf::from).filter(|p| p != project));
    for project in projects {
        files.push(project.join(".claude/settings.json"));
        files.push(project.join(".claude/settings.local.json"));
    }
    let managed = managed_dir(env);
    files.push(managed.join("managed-settings.json"));
    let mut watched: Vec<Watched> =
        files.into_iter().map(|f| Watched::new(Kind::Settings(KEYS), f)).collect();
    watched.push(Watched::new(Kind::SettingsFolder(KEYS), managed.join("managed-settings.d")));
    if let Some(config) = config {
        watched.push(Watched::new(
            Kind::PluginRecord { object: "plugins", prefix: "for-loop@" },
            config.join("plugins/installed_plugins.json"),
        ));
    }
    if let Some(root) = env.var("CLAUDE_PLUGIN_ROOT").map(PathBuf::from) {
        watched.push(Watched::new(Kind::Manifest, root.join(".claude-plugin/plugin.json")));
        watched.push(Watched::new(Kind::Hooks, root.join("hooks/hooks.json")));
        watched.push(Watched::new(Kind::Launcher, root.join("scripts/loop-hook")));
        if cfg!(windows) {
            watched.push(Watched::new(Kind::Launcher, root.join("scripts/loop-hook.ps1")));
        }
    }
    watched
}

/// The folder of Claude Code's managed settings (`managed-settings.json` and the drop-ins of
/// `managed-settings.d/`) on this platform, as the pinned CLI reads it; `FOR_LOOP_MANAGED_DIR`
/// names another, for a test that may not write the system's.
fn managed_dir(env: &Environment) -> PathBuf {
    if let Some(dir) = env.var("FOR_LOOP_MANAGED_DIR") {
        return PathBuf::from(dir);
    }
    PathBuf::from(if cfg!(target_os = "macos") {
        "/Library/Application Support/ClaudeCode"
    } else if cfg!(windows) {
        r"C:\Program Files\ClaudeCode"
    } else {
        "/etc/claude-code"
    })
}

/// What for-loop knows about claude-code: read by [`Host`]'s methods.
pub(in crate::host) const SPEC: HostSpec = HostSpec {
    aliases: &["claude"],
    tells_commands_the_session: true,
    has_prompt_hook: true,
    keeps_claude_transcript: true,
    transcript_records_usage: true,
    sends_last_message: true,
    offers_strict_tier: true,
    quiet_block_cap: Some(QuietBlockCap { read: block_cap, setting: BLOCK_CAP_VAR }),
    commands: Commands::SLASH,
    handoff_command: Some("/for-loop:handoff"),
    hook_runner: Some(HOOK_RUNNER),
    failure_hook_runner: Some(HOOK_RUNNER),
    watched: Some(watched),
    parse_failure: read_failure,
    parse_compacted,
    render_session_context: Some(render_session_context),
    ..HostSpec::of(Host::ClaudeCode, "claude-code", "claude", parse, HookResponse::to_claude_json, DOCTOR)
};

// What `loop-hook doctor` checks of Claude Code's installation: the plugin's install record,
// `enabledPlugins`, `disableAllHooks` and the `env` of every settings file, read as Claude Code
// layers them (user, project, local; managed last).

const DOCTOR: Install = Install { home: config_dir, check: doctor };

fn doctor(look: &Look) -> Option<Installation> {
    let dir = config_dir(look.env)?;
    // A project's own Claude Code settings are read even where Claude Code is not installed
    // yet: a `disableAllHooks` there would keep the loop from holding once it is.
    if !look.present && !look.project.join(".claude").is_dir() {
        return None;
    }
    let facts = install_facts(look.env, dir, look.project);
    let installed = !facts.installed.is_empty();
    Some(Installation { installed, checks: claude_lines(&facts, look.binary, look.asked) })
}

/// Claude Code's managed settings on Linux, which override every other layer.
const MANAGED: &str = "/etc/claude-code/managed-settings.json";

fn config_dir(env: &Environment) -> Option<PathBuf> {
    home_dir(env, "CLAUDE_CONFIG_DIR", ".claude")
}

fn install_facts(env: &Environment, config_dir: PathBuf, project: &Path) -> ClaudeFacts {
    let installed_file = read_json(&config_dir.join("plugins/installed_plugins.json"));
    let mut installed = Vec::new();
    let mut install_path = None;
    if let Some(plugins) = installed_file.as_ref().and_then(|v| v.get("plugins")).and_then(Value::as_object) {
        for (id, installs) in plugins.iter().filter(|(id, _)| id.starts_with("for-loop@")) {
            installed.push(id.clone());
            let path = installs.as_array().into_iter().flatten().find_map(|i| i.get("installPath")?.as_str());
            install_path = install_path.or_else(|| path.map(PathBuf::from));
        }
    }
    // Lowest precedence first: a later file has the last word.
    let files = [
        (config_dir.join("settings.json"), false),
        (project.join(".claude/settings.json"), true),
        (project.join(".claude/settings.local.json"), true),
        (PathBuf::from(MANAGED), false),
    ];
    let mut facts = ClaudeFacts {
        installed,
        launch: install_path.filter(|p| p.is_dir()).map(|root| install::launch(env, &root)),
        ..ClaudeFacts::default()
    };
    for (file, in_project) in files {
        let Some(settings) = read_json(&file) else { continue };
        let enabled = settings.get("enabledPlugins").and_then(Value::as_object);
        if let Some(on) = enabled.and_then(|enabled| facts.installed.iter().find_map(|id| enabled.get(id))) {
            facts.enabled = Some((file.clone(), on.as_bool().unwrap_or(false)));
        }
        if settings.get("disableAllHooks") == Some(&Value::Bool(true)) {
            facts.hooks_disabled_by.push(file.clone());
        }
        for name in ["FOR_LOOP_BIN", "FOR_LOOP_HOME"] {
            if let Some(value) = settings.get("env").and_then(|e| e.get(name)).and_then(Value::as_str) {
                facts.env_overrides.push(EnvOverride {
                    file: file.clone(),
                    in_project,
                    name: name.to_string(),
                    value: value.to_string(),
                    is_file: Path::new(value).is_file(),
                });
            }
        }
    }
    facts.config_dir = config_dir;
    facts
}

/// A setting that names another binary or store, and the settings file that sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EnvOverride {
    pub file: PathBuf,
    /// The file is the project's (`.claude/settings*.json`), which the agent can write.
    pub in_project: bool,
    pub name: String,
    pub value: String,
    /// The value names an existing file (what matters for `FOR_LOOP_BIN`).
    pub is_file: bool,
}

/// Claude Code: the plugin, its enablement and the settings that switch hooks off.
#[derive(Debug, Clone, Default)]
struct ClaudeFacts {
    pub config_dir: PathBuf,
    /// `for-loop@MARKETPLACE` ids recorded as installed.
    pub installed: Vec<String>,
    /// What the installed plugin's launcher runs.
    pub launch: Option<Launch>,
    /// The settings file with the last word on `enabledPlugins` for our plugin, and its value.
    pub enabled: Option<(PathBuf, bool)>,
    /// Settings files that set `disableAllHooks: true`.
    pub hooks_disabled_by: Vec<PathBuf>,
    pub env_overrides: Vec<EnvOverride>,
}

/// The Claude Code install from a clone, whose root is the marketplace: the one `cargo install`
/// built this machine's loop-hook from when it is known, else any. A release's repository is
/// not known here, and a placeholder is no fix.
pub(in crate::host) fn install_command(binary: &BinaryFacts) -> String {
    let clone = binary
        .cargo_checkout
        .as_deref()
        .map_or_else(|| "<a for-loop checkout>".to_string(), |dir| shell_word(&dir.display().to_string()));
    format!("claude plugin marketplace add {clone} && claude plugin install for-loop@for-loop")
}

/// `text` as one shell word: as it is when it needs no quoting, else single-quoted.
fn shell_word(text: &str) -> String {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,".contains(c)) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn claude_lines(claude: &ClaudeFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("claude-code: {what}");
    let mut out = Vec::new();
    let Some(id) = claude.installed.first() else {
        // What would switch the plugin's hooks off once it is installed is worth knowing now.
        let off = claude.hooks_disabled_by.iter().map(|file| {
            let check = Check::fail(
                name("hooks on"),
                format!(
                    "{} sets disableAllHooks, so no hook will run there and no loop hold",
                    file.display()
                ),
                format!("remove \"disableAllHooks\": true from {}", file.display()),
            );
            if asked { check } else { check.minor() }
        });
        let missing = not_installed(
            Host::ClaudeCode,
            format!("the for-loop plugin is not installed in {}", claude.config_dir.display()),
            install_command(binary),
            asked,
        );
        return std::iter::once(missing).chain(off).collect();
    };
    out.push(Check::pass(name("installed"), format!("{id} is installed")));
    out.push(match &claude.enabled {
        Some((_, true)) => Check::pass(name("enabled"), format!("{id} is enabled")),
        Some((file, false)) => Check::fail(
            name("enabled"),
            format!("{} turns {id} off, so none of its hooks run", file.display()),
            format!("claude plugin enable {id}"),
        ),
        None => Check::fail(
            name("enabled"),
            format!("no settings file enables {id}, so none of its hooks run"),
            format!("claude plugin enable {id}"),
        ),
    });
    out.extend(install::hooks_on_lines(Host::ClaudeCode, &claude.hooks_disabled_by));
    out.extend(claude.env_overrides.iter().map(env_override_line));
    out.push(install::binary_line(&name("binary"), claude.launch.as_ref(), binary));
    out
}

/// The line of a for-loop variable a settings file's `env` sets for every hook: a project file
/// the agent can write must not choose the binary or the store; a binary must be a file.
fn env_override_line(over: &EnvOverride) -> Check {
    let name = |what: &str| format!("claude-code: {what}");
    let set = format!("{} sets {}={}", over.file.display(), over.name, over.value);
    if over.in_project {
        Check::fail(
            name("settings env"),
            format!(
                "{set}: a project file the agent can write decides which {} the hooks use",
                if over.name == "FOR_LOOP_BIN" { "binary" } else { "loop store" }
            ),
            format!(
                "remove {} from the env of {} (set it in ~/.claude/settings.json if you need it)",
                over.name,
                over.file.display()
            ),
        )
    } else if over.name == "FOR_LOOP_BIN" && !is_absolute(&over.value) {
        Check::fail(
            name("settings env"),
            format!("{set}, which is not an absolute path, so the launcher ignores it"),
            format!("set {} to an absolute path in {}, or remove it", over.name, over.file.display()),
        )
    } else if over.name == "FOR_LOOP_BIN" && !over.is_file {
        Check::fail(
            name("settings env"),
            format!("{set}, which names no file"),
            format!("point {} in {} at a built loop-hook, or remove it", over.name, over.file.display()),
        )
    } else {
        Check::pass(name("settings env"), format!("{set}: every Claude Code hook uses it"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::event::{TurnError, parse_object};

    fn parse_text(text: &str) -> Result<StopEvent, EventError> {
        parse(&parse_object(text.as_bytes()).unwrap())
    }

    #[test]
    fn the_block_cap_is_read_as_the_cli_reads_it() {
        let cap = |value: Option<&str>| {
            let vars: Vec<(String, String)> =
                value.map(|v| (BLOCK_CAP_VAR.to_string(), v.to_string())).into_iter().collect();
            block_cap(&Environment::new(vars, std::path::PathBuf::from("/"), jiff::Timestamp::UNIX_EPOCH))
        };
        assert_eq!(cap(None), Some(8));
        assert_eq!(cap(Some("20")), Some(20));
        assert_eq!(cap(Some(" 3 ")), Some(3));
        assert_eq!(cap(Some("0")), None, "0 turns the cap off");
        assert_eq!(cap(Some("lots")), Some(8));
        assert_eq!(cap(Some("-1")), Some(8));
        assert_eq!(cap(Some("")), Some(8));
    }

    #[test]
    fn the_background_work_in_flight_is_read() {
        let event = parse_text(
            r#"{"session_id":"s","hook_event_name":"Stop","background_tasks":[{"id":"b1","type":"local_bash","status":"running","description":"sleep 5 && make"}],"session_crons":[]}"#,
        )
        .unwrap();
        assert_eq!(event.background.map(|tasks| tasks.len()), Some(1));
        let old = parse_text(r#"{"session_id":"s","hook_event_name":"Stop"}"#).unwrap();
        assert_eq!(old.background, None, "a version without the field changes nothing");
    }

    #[test]
    fn a_cursor_payload_sent_to_claudes_hook_is_foreign() {
        // Cursor maps its `stop` onto Claude's `Stop` hooks; whatever it names the event, its
        // fields give it away.
        let cursor = r#"{"conversation_id":"c","session_id":"c","hook_event_name":"Stop","status":"completed","loop_count":0,"workspace_roots":["/p"],"cursor_version":"3.17.19"}"#;
        assert_eq!(parse_text(cursor), Err(EventError::Foreign("a Cursor event")));
        let copilot =
            r#"{"sessionId":"s","session_id":"s","hook_event_name":"Stop","stopReason":"end_turn"}"#;
        assert_eq!(parse_text(copilot), Err(EventError::Foreign("a Copilot CLI or VS Code event")));
    }

    #[test]
    fn a_stop_failure_is_read_and_a_subagents_is_not_the_sessions() {
        let now = jiff::Timestamp::from_second(1_000).unwrap().to_zoned(jiff::tz::TimeZone::UTC);
        let object = |text: &str| parse_object(text.as_bytes()).unwrap();
        let too_long = object(
            r#"{"session_id":"s","hook_event_name":"StopFailure","error":"invalid_request","error_details":"400 {\"error\":{\"message\":\"prompt is too long: 1012345 tokens > 1000000 maximum\"}}","last_assistant_message":"Prompt is too long"}"#,
        );
        let failure = parse_failure(&too_long, &now).unwrap().unwrap();
        assert_eq!((failure.session_id.as_str(), &failure.error), ("s", &TurnError::ContextExhausted));
        assert!(failure.said.starts_with("Prompt is too long 400"), "{}", failure.said);
        let sub = object(
            r#"{"session_id":"s","agent_id":"a1","hook_event_name":"StopFailure","error":"invalid_request"}"#,
        );
        assert!(matches!(parse_failure(&sub, &now), Some(Err(EventError::Foreign(_)))));
        let limited = object(
            r#"{"session_id":"s","hook_event_name":"StopFailure","error":"rate_limit","last_assistant_message":"API Error: Request rejected (429)"}"#,
        );
        assert_eq!(
            parse_failure(&limited, &now).unwrap().unwrap().error,
            TurnError::Limited { resets_at: None }
        );
        let odd = object(r#"{"session_id":"s","hook_event_name":"StopFailure","error":"something_new"}"#);
        let odd = parse_failure(&odd, &now).unwrap().unwrap();
        assert_eq!((odd.error, odd.said), (TurnError::Other { kind: "something_new".into() }, String::new()));
        let bare = object(r#"{"session_id":"s","hook_event_name":"StopFailure"}"#);
        assert_eq!(
            parse_failure(&bare, &now).unwrap().unwrap().error,
            TurnError::Other { kind: "unknown".into() }
        );
        assert_eq!(
            parse_failure(&object(r#"{"hook_event_name":"StopFailure"}"#), &now),
            Some(Err(EventError::Missing("session_id")))
        );
        assert!(matches!(
            parse_failure(&object(r#"{"session_id":"s","hook_event_name":"StopFailure","error":7}"#), &now),
            Some(Err(EventError::WrongType { field: "error", .. }))
        ));
        assert_eq!(parse_failure(&object(r#"{"session_id":"s","hook_event_name":"Stop"}"#), &now), None);
    }

    #[test]
    fn only_a_compaction_start_is_read() {
        let object = |text: &str| parse_object(text.as_bytes()).unwrap();
        let compact = object(r#"{"session_id":"s","hook_event_name":"SessionStart","source":"compact"}"#);
        assert_eq!(parse_compacted(&compact), Ok(Some("s".into())));
        for source in ["startup", "resume", "clear"] {
            let other = object(&format!(
                r#"{{"session_id":"s","hook_event_name":"SessionStart","source":"{source}"}}"#
            ));
            assert_eq!(parse_compacted(&other), Ok(None), "{source}");
        }
        assert!(matches!(
            parse_compacted(&object(r#"{"hook_event_name":"Stop","source":"compact"}"#)),
            Err(EventError::Foreign(_))
        ));
        assert_eq!(
            parse_compacted(&object(r#"{"source":"compact"}"#)),
            Err(EventError::Missing("session_id"))
        );
        assert_eq!(
            render_session_context("brief"),
            r#"{"hookSpecificOutput":{"additionalContext":"brief","hookEventName":"SessionStart"}}"#
        );
    }

    #[test]
    fn its_own_payload_reads_as_before() {
        let event =
            parse_text(r#"{"session_id":"s1","hook_event_name":"Stop","stop_hook_active":true}"#).unwrap();
        assert_eq!(event.session_id, "s1");
        assert_eq!(event.stop_hook_active, Some(true));
    }
}

/// The tests of what doctor checks of this host's installation.
#[cfg(test)]
mod install_tests {
    use std::path::PathBuf;

    use super::*;
    use crate::host::install::all_pass;
    use crate::host::install::tests::{binary, failing};
    fn claude() -> ClaudeFacts {
        ClaudeFacts {
            config_dir: PathBuf::from("/h/.claude"),
            installed: vec!["for-loop@for-loop".into()],
            enabled: Some((PathBuf::from("/h/.claude/settings.json"), true)),
            ..ClaudeFacts::default()
        }
    }

    #[test]
    fn a_healthy_claude_code_install_passes_every_check() {
        let checks = claude_lines(&claude(), &binary(), false);
        assert!(all_pass(&checks), "{checks:#?}");
        assert!(checks.iter().any(|c| c.name == "claude-code: enabled" && c.ok));
    }
    #[test]
    fn a_missing_claude_code_plugin_is_fixed_from_a_clone_not_a_placeholder() {
        let none = ClaudeFacts { installed: Vec::new(), enabled: None, ..claude() };
        let checks = claude_lines(&none, &binary(), true);
        let check = failing(&checks, "claude-code: installed");
        assert_eq!(
            check.fix.as_deref(),
            Some(
                "claude plugin marketplace add <a for-loop checkout> && claude plugin install for-loop@for-loop"
            )
        );
        assert!(checks.iter().filter_map(|c| c.fix.as_deref()).all(|fix| !fix.contains("OWNER/REPO")));
    }
    #[test]
    fn a_missing_claude_code_plugin_is_fixed_from_the_clone_cargo_installed_from() {
        let none = ClaudeFacts { installed: Vec::new(), enabled: None, ..claude() };
        for (dir, shown) in [("/src/for-loop", "/src/for-loop"), ("/src/it's here", "'/src/it'\\''s here'")] {
            let binary = BinaryFacts { cargo_checkout: Some(PathBuf::from(dir)), ..binary() };
            let checks = claude_lines(&none, &binary, true);
            assert_eq!(
                failing(&checks, "claude-code: installed").fix,
                Some(format!(
                    "claude plugin marketplace add {shown} && claude plugin install for-loop@for-loop"
                ))
            );
        }
    }
    #[test]
    fn a_plugin_turned_off_in_settings_fails_with_the_enable_command() {
        let off = ClaudeFacts {
            enabled: Some((PathBuf::from("/p/.claude/settings.local.json"), false)),
            ..claude()
        };
        let checks = claude_lines(&off, &binary(), false);
        let check = failing(&checks, "claude-code: enabled");
        assert!(check.detail.contains("/p/.claude/settings.local.json"), "{check:?}");
        assert_eq!(check.fix.as_deref(), Some("claude plugin enable for-loop@for-loop"));
        let never = ClaudeFacts { enabled: None, ..claude() };
        failing(&claude_lines(&never, &binary(), false), "claude-code: enabled");
    }
    #[test]
    fn disable_all_hooks_fails_naming_the_file() {
        let off =
            ClaudeFacts { hooks_disabled_by: vec![PathBuf::from("/h/.claude/settings.json")], ..claude() };
        let checks = claude_lines(&off, &binary(), false);
        let check = failing(&checks, "claude-code: hooks on");
        assert_eq!(
            check.fix.as_deref(),
            Some("remove \"disableAllHooks\": true from /h/.claude/settings.json")
        );
    }
    #[test]
    fn a_binary_or_store_set_from_project_settings_fails() {
        let over = EnvOverride {
            file: PathBuf::from("/p/.claude/settings.local.json"),
            in_project: true,
            name: "FOR_LOOP_BIN".into(),
            value: "/p/evil".into(),
            is_file: true,
        };
        let checks =
            claude_lines(&ClaudeFacts { env_overrides: vec![over.clone()], ..claude() }, &binary(), false);
        assert!(failing(&checks, "claude-code: settings env").detail.contains("the agent can write"));
        let user = EnvOverride { file: PathBuf::from("/h/.claude/settings.json"), in_project: false, ..over };
        let checks =
            claude_lines(&ClaudeFacts { env_overrides: vec![user.clone()], ..claude() }, &binary(), false);
        assert!(all_pass(&checks), "{checks:#?}");
        let missing = EnvOverride { is_file: false, ..user };
        let checks =
            claude_lines(&ClaudeFacts { env_overrides: vec![missing], ..claude() }, &binary(), false);
        failing(&checks, "claude-code: settings env");
    }
    #[test]
    fn a_projects_disable_all_hooks_is_listed_before_the_plugin_is_installed() {
        let none = ClaudeFacts {
            installed: Vec::new(),
            enabled: None,
            hooks_disabled_by: vec![PathBuf::from("/p/.claude/settings.json")],
            ..claude()
        };
        let checks = claude_lines(&none, &binary(), false);
        let off = checks.iter().find(|c| c.name == "claude-code: hooks on").expect("listed");
        assert!(!off.ok && off.detail.contains("/p/.claude/settings.json sets disableAllHooks"), "{off:?}");
        let asked = claude_lines(&none, &binary(), true);
        failing(&asked, "claude-code: hooks on");
    }
}
