//! opencode (`opencode-ai`): no hook that can hold a turn. Its plugins are JavaScript modules
//! that receive events; for-loop's (`plugin/opencode/for-loop.js`) passes three of them to
//! `loop-hook` and does what the answer says, with no loop logic of its own.
//!
//! What the plugin sends on stdin, one object with `opencode_hook` naming the plugin hook:
//!
//! - `{"opencode_hook":"event","event":E,"directory":D,"session":S}` to `stop-hook`: E is the
//!   event exactly as opencode gave it (`{"type":"session.idle","properties":{"sessionID":…}}`),
//!   S the session's info as the SDK returns it (`parentID` marks a subagent's session), or null.
//! - `{"opencode_hook":"command.execute.before","input":{"command","sessionID","arguments"},
//!   "directory":D}` to `prompt-hook`: the user ran one of opencode's commands.
//! - `{"opencode_hook":"tool.execute.before","input":{"tool","sessionID","callID"},
//!   "output":{"args":…},"directory":D}` to `guard`: the agent is about to run a tool.
//!
//! What the plugin reads back, one object, every key optional: `prompt` (send the session this
//! text as the next user message: after an idle, to keep it working; for a command, in place of
//! the command's own text), `message` (a line for the user, never the model) and `deny` (a tool
//! call must not run, and why). `{}` is "do nothing": let the session stay idle, let the command
//! and the tool call go ahead unchanged.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::spec::{HostSpec, Markers};
use crate::host::config_watch::{Kind, Watched};
use crate::host::install::{
    self, BinaryFacts, Check, Install, Installation, Look, not_installed, shell_quote,
};
use crate::host::user_command;
use crate::support::Environment;

use crate::host::event::{EventError, Fields, StopEvent};
use crate::host::hook_response::HookResponse;
use crate::host::origin::{HookRunner, HookSession};
use crate::host::{Commands, Host, foreign_marker, object_line};

/// The field every payload of the plugin carries, and no other host's.
pub(in crate::host) const MARKER: &str = "opencode_hook";

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    let fields = Fields(object);
    if let Some(what) = foreign_marker(Host::Opencode, &fields) {
        return Err(EventError::Foreign(what));
    }
    match fields.string(MARKER)?.as_deref() {
        Some("event") => {}
        Some(_) => return Err(EventError::Foreign("not an opencode event")),
        None => return Err(EventError::Foreign("not sent by the opencode plugin (no opencode_hook)")),
    }
    let event = fields.object("event")?.ok_or(EventError::Missing("event"))?;
    if event.string("type")?.as_deref() != Some("session.idle") {
        return Err(EventError::Foreign("not a session.idle event"));
    }
    let properties = event.object("properties")?.ok_or(EventError::Missing("properties"))?;
    let session_id = properties.required_string("sessionID")?;
    // A subagent's session (the task tool) goes idle when its work is handed back: the loop is
    // its parent's, and the parent's own idle is judged.
    if let Some(session) = fields.object("session")?
        && session.string("parentID")?.is_some_and(|parent| !parent.is_empty())
    {
        return Err(EventError::Foreign("a subagent's session"));
    }
    fields.string("directory")?;
    Ok(StopEvent {
        session_id,
        // opencode has no flag for a turn a plugin sent, and no cap that overrides one.
        stop_hook_active: None,
        last_assistant_message: None,
        transcript: None,
        background: None,
    })
}

/// The user's command in a `command.execute.before` payload, as the text they would have typed
/// (`/for-loop fix it --verify "cargo test"`), with the session and the directory it ran in.
pub(in crate::host) fn command(object: &Map<String, Value>) -> Option<Command> {
    let fields = Fields(object);
    if fields.string(MARKER).ok()??.as_str() != "command.execute.before" {
        return None;
    }
    let input = fields.object("input").ok()??;
    let name = input.required_string("command").ok()?;
    let arguments = input.string("arguments").ok()?.unwrap_or_default();
    let prompt = if arguments.is_empty() { format!("/{name}") } else { format!("/{name} {arguments}") };
    Some(Command {
        session_id: input.required_string("sessionID").ok()?,
        prompt,
        directory: fields.path("directory").ok()?,
    })
}

/// A `tool.execute.before` payload in the shape the guard reads (Claude Code's `PreToolUse`):
/// opencode's `bash` is `Bash`, `write` and `edit` are `Write` and `Edit` with `filePath` as
/// `file_path`. Any other tool keeps its name and its arguments.
pub(in crate::host) fn tool_call(object: &Map<String, Value>) -> Option<Map<String, Value>> {
    let fields = Fields(object);
    if fields.string(MARKER).ok()??.as_str() != "tool.execute.before" {
        return None;
    }
    let input = fields.object("input").ok()??;
    let session_id = input.required_string("sessionID").ok()?;
    let tool = input.required_string("tool").ok()?;
    let args = object.get("output")?.get("args")?.as_object()?.clone();
    let (name, args) = match tool.as_str() {
        "bash" => ("Bash".to_string(), args),
        "write" | "edit" => {
            let mut args = args;
            if let Some(path) = args.remove("filePath") {
                args.insert("file_path".into(), path);
            }
            (if tool == "write" { "Write" } else { "Edit" }.to_string(), args)
        }
        _ => (tool, args),
    };
    let mut event = Map::new();
    event.insert("hook_event_name".into(), json!("PreToolUse"));
    event.insert("session_id".into(), json!(session_id));
    event.insert("tool_name".into(), json!(name));
    event.insert("tool_input".into(), Value::Object(args));
    if let Some(directory) = fields.string("directory").ok()? {
        event.insert("cwd".into(), json!(directory));
    }
    Some(event)
}

/// A user's command, read from the plugin's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    pub(crate) session_id: String,
    pub(crate) prompt: String,
    pub(crate) directory: Option<std::path::PathBuf>,
}

pub(in crate::host) fn render(response: &HookResponse) -> String {
    let mut pairs = Vec::new();
    if let Some(prompt) = &response.block {
        pairs.push(("prompt", json!(prompt)));
    }
    if let Some(message) = &response.system_message {
        pairs.push(("message", json!(message)));
    }
    object_line(pairs)
}

/// How opencode 1.18.33 starts for-loop's plugin programs on Linux: in the session of the
/// `opencode` process, as its direct children, reading a socket it made. Its bash tool runs in
/// a session of its own.
pub(in crate::host) const HOOK_RUNNER: HookRunner = HookRunner {
    names: &[("opencode", "")],
    session: HookSession::Host,
    stdin_from_host: true,
    tool_sandbox: None,
};
/// What decides whether for-loop runs on opencode, for the watch of the host's configuration:
/// the plugin file in the user's and the project's config folders, and the `plugin` key of
/// their `opencode.json` (which can name the plugin and its binary).
pub(in crate::host) fn watched(env: &Environment, project: &Path) -> Vec<Watched> {
    const KEYS: &[&str] = &["plugin"];
    let user = env
        .var("XDG_CONFIG_HOME")
        .map(|config| PathBuf::from(config).join("opencode"))
        .or_else(|| env.var("HOME").map(|home| PathBuf::from(home).join(".config/opencode")));
    let mut watched = Vec::new();
    for dir in user.into_iter().chain([project.join(".opencode")]) {
        watched.push(Watched::new(Kind::Hooks, dir.join("plugins/for-loop.js")));
        watched.push(Watched::new(Kind::Settings(KEYS), dir.join("opencode.json")));
    }
    watched.push(Watched::new(Kind::Settings(KEYS), project.join("opencode.json")));
    if let Some(config) = env.var("OPENCODE_CONFIG") {
        watched.push(Watched::new(Kind::Settings(KEYS), config));
    }
    if let Some(dir) = env.var("OPENCODE_CONFIG_DIR").map(PathBuf::from) {
        watched.push(Watched::new(Kind::Hooks, dir.join("plugins/for-loop.js")));
        watched.push(Watched::new(Kind::Settings(KEYS), dir.join("opencode.json")));
    }
    // The managed configuration, where the pinned CLI reads it.
    let managed = if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/opencode")
    } else if cfg!(windows) {
        PathBuf::from(env.var("ProgramData").unwrap_or(r"C:\ProgramData")).join("opencode")
    } else {
        PathBuf::from("/etc/opencode")
    };
    for name in ["opencode.json", "opencode.jsonc"] {
        watched.push(Watched::new(Kind::Settings(KEYS), managed.join(name)));
    }
    watched
}

/// What for-loop knows about opencode: read by [`Host`]'s methods.
pub(in crate::host) const SPEC: HostSpec = HostSpec {
    tells_commands_the_session: true,
    has_prompt_hook: true,
    prompt_hook_replaces_the_command: true,
    commands: Commands::NO_ROLLBACK,
    // The plugin passes the command's name and its arguments, read as `/NAME ARGS`.
    typed_commands: user_command::BARE,
    hook_runner: Some(HOOK_RUNNER),
    failure_hook_runner: Some(HOOK_RUNNER),
    markers: Some(Markers { fields: &[MARKER], what: "an opencode plugin event" }),
    looks_like: Some(|fields| fields.has_any(&[MARKER])),
    watched: Some(watched),
    ..HostSpec::of(Host::Opencode, "opencode", "opencode", parse, render, DOCTOR)
};

// What `loop-hook doctor` checks of opencode's installation: the plugin file and the command
// files, in the user's config folder or the project's `.opencode/`, where opencode loads them
// from.

const DOCTOR: Install = Install { home: config_dir, check: doctor };

fn doctor(look: &Look) -> Option<Installation> {
    let in_project = look.project.join(".opencode").is_dir();
    let dir = config_dir(look.env).filter(|_| look.present || in_project)?;
    let facts = install_facts(dir, look.project);
    let installed = facts.plugin.is_some();
    Some(Installation { installed, checks: opencode_lines(&facts, look.binary, look.asked) })
}

/// The command files for-loop ships, by name.
const COMMANDS: &[&str] = &["for-loop", "cancel-loop", "loop-status", "resume-loop"];

/// `$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`.
fn config_dir(env: &Environment) -> Option<PathBuf> {
    env.var("XDG_CONFIG_HOME")
        .filter(|dir| Path::new(dir).is_absolute())
        .map(|dir| Path::new(dir).join("opencode"))
        .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".config/opencode")))
}

/// Whether a plugin file is for-loop's: it passes the session's idle to loop-hook's Stop hook.
fn is_ours(path: &Path) -> bool {
    crate::support::read::bounded_read::read(path, 1 << 20)
        .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(r#""stop-hook", "--host", "opencode""#))
}

/// The first plugin file of for-loop's in `dir`'s `plugins/` or `plugin/`.
fn plugin_in(dir: &Path) -> Option<PathBuf> {
    ["plugins", "plugin"].iter().find_map(|sub| {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(dir.join(sub)).ok()?.flatten().map(|entry| entry.path()).collect();
        files.sort();
        files
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "js" || e == "ts"))
            .find(|f| is_ours(f))
    })
}

/// The command files missing from both `dir`'s and the project's `commands/` (or `command/`).
fn missing_commands(dirs: &[PathBuf]) -> Vec<&'static str> {
    COMMANDS
        .iter()
        .copied()
        .filter(|name| {
            !dirs.iter().any(|dir| {
                ["commands", "command"].iter().any(|sub| dir.join(sub).join(format!("{name}.md")).is_file())
            })
        })
        .collect()
}

fn install_facts(config: PathBuf, project: &Path) -> OpencodeFacts {
    let dirs = [config.clone(), project.join(".opencode")];
    OpencodeFacts {
        plugin: dirs.iter().find_map(|dir| plugin_in(dir)),
        missing_commands: missing_commands(&dirs),
        config,
    }
}

/// opencode: the plugin file and the command files.
#[derive(Debug, Clone, Default)]
struct OpencodeFacts {
    /// The user's config folder (`~/.config/opencode`).
    pub config: PathBuf,
    /// for-loop's plugin, in that folder or the project's `.opencode/`.
    pub plugin: Option<PathBuf>,
    /// The command files of for-loop's found in neither folder.
    pub missing_commands: Vec<&'static str>,
}

fn opencode_lines(opencode: &OpencodeFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("opencode: {what}");
    let copy = |what: &str| {
        let dir = opencode.config.join(what);
        format!(
            "mkdir -p {dir} && cp <for-loop checkout>/plugin/opencode/{what}/* {dir}/",
            dir = shell_quote(&dir)
        )
    };
    let Some(plugin) = &opencode.plugin else {
        return vec![not_installed(
            Host::Opencode,
            format!(
                "no plugin of for-loop's in {} or .opencode/plugins: no idle is judged",
                opencode.config.join("plugins").display()
            ),
            copy("plugins"),
            asked,
        )];
    };
    let mut out = vec![Check::pass(name("installed"), format!("{} runs for-loop", plugin.display()))];
    out.push(if opencode.missing_commands.is_empty() {
        Check::pass(name("commands"), "/for-loop, /cancel-loop, /loop-status and /resume-loop are there")
    } else {
        Check::fail(
            name("commands"),
            format!(
                "no command file for /{} in {} or .opencode/commands: opencode does not know the command, so \
                 the plugin never sees it",
                opencode.missing_commands.join(", /"),
                opencode.config.join("commands").display()
            ),
            copy("commands"),
        )
    });
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

    /// The idle event 1.18.33 gave the plugin, as the plugin passes it on.
    const IDLE: &str = r#"{"opencode_hook":"event","directory":"/p","session":{"id":"ses_ddb13e4c3ffeCnfvNqwKdFzQd7","version":"1.18.33"},
        "event":{"id":"evt_224ec2572002qIzxUHUy7tJMra","type":"session.idle","properties":{"sessionID":"ses_ddb13e4c3ffeCnfvNqwKdFzQd7"}}}"#;

    #[test]
    fn reads_the_1_18_33_idle_event() {
        let event = parse_text(IDLE).unwrap();
        assert_eq!(event.session_id, "ses_ddb13e4c3ffeCnfvNqwKdFzQd7");
        assert_eq!(
            (event.stop_hook_active, event.last_assistant_message, event.transcript),
            (None, None, None)
        );
    }

    #[test]
    fn refuses_other_events_and_subagent_sessions() {
        let busy = IDLE.replace("session.idle", "session.status");
        assert_eq!(parse_text(&busy), Err(EventError::Foreign("not a session.idle event")));
        let command =
            IDLE.replace(r#""opencode_hook":"event""#, r#""opencode_hook":"command.execute.before""#);
        assert_eq!(parse_text(&command), Err(EventError::Foreign("not an opencode event")));
        let subagent = IDLE.replace(r#""version":"1.18.33""#, r#""parentID":"ses_parent""#);
        assert_eq!(parse_text(&subagent), Err(EventError::Foreign("a subagent's session")));
        let plain = IDLE.replace(r#""opencode_hook":"event","#, "");
        assert!(matches!(parse_text(&plain), Err(EventError::Foreign(_))));
    }

    #[test]
    fn malformed_fields_are_named() {
        let cases = [
            (r#"{"opencode_hook":"event"}"#, EventError::Missing("event")),
            (
                r#"{"opencode_hook":"event","event":"session.idle"}"#,
                EventError::WrongType { field: "event", expected: "an object" },
            ),
            (
                r#"{"opencode_hook":"event","event":{"type":"session.idle"}}"#,
                EventError::Missing("properties"),
            ),
            (
                r#"{"opencode_hook":"event","event":{"type":"session.idle","properties":{"sessionID":7}}}"#,
                EventError::WrongType { field: "sessionID", expected: "a string" },
            ),
            (
                r#"{"opencode_hook":"event","event":{"type":"session.idle","properties":{"sessionID":""}}}"#,
                EventError::Missing("sessionID"),
            ),
            (
                r#"{"opencode_hook":7}"#,
                EventError::WrongType { field: "opencode_hook", expected: "a string" },
            ),
            (
                r#"{"opencode_hook":"event","session":[],"event":{"type":"session.idle","properties":{"sessionID":"s"}}}"#,
                EventError::WrongType { field: "session", expected: "an object" },
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_text(text), Err(expected), "{text}");
        }
    }

    #[test]
    fn a_command_reads_as_the_text_the_user_typed() {
        let object = parse_object(
            br#"{"opencode_hook":"command.execute.before","directory":"/p",
                "input":{"command":"for-loop","sessionID":"ses_1","arguments":"fix the tests --verify \"cargo test\""},
                "output":{"parts":[{"type":"text","text":"expanded"}]}}"#,
        )
        .unwrap();
        let read = command(&object).unwrap();
        assert_eq!(read.session_id, "ses_1");
        assert_eq!(read.prompt, "/for-loop fix the tests --verify \"cargo test\"");
        assert_eq!(read.directory.as_deref(), Some(std::path::Path::new("/p")));
        let bare = parse_object(
            br#"{"opencode_hook":"command.execute.before","input":{"command":"loop-status","sessionID":"s","arguments":""}}"#,
        )
        .unwrap();
        assert_eq!(command(&bare).unwrap().prompt, "/loop-status");
        for text in [
            r#"{"opencode_hook":"event","input":{"command":"x","sessionID":"s"}}"#,
            r#"{"opencode_hook":"command.execute.before","input":{"command":"x"}}"#,
            r#"{"opencode_hook":"command.execute.before","input":{"command":7,"sessionID":"s"}}"#,
            r#"{"opencode_hook":"command.execute.before"}"#,
            r#"{"command":"x","sessionID":"s"}"#,
        ] {
            assert_eq!(command(&parse_object(text.as_bytes()).unwrap()), None, "{text}");
        }
    }

    #[test]
    fn a_tool_call_reads_as_a_pre_tool_use_event() {
        let object = parse_object(
            br#"{"opencode_hook":"tool.execute.before","directory":"/p",
                "input":{"tool":"bash","sessionID":"ses_1","callID":"call_2"},
                "output":{"args":{"command":"loop-hook cancel","description":"d"}}}"#,
        )
        .unwrap();
        let event = Value::Object(tool_call(&object).unwrap());
        assert_eq!(
            event,
            json!({"hook_event_name":"PreToolUse","session_id":"ses_1","tool_name":"Bash","cwd":"/p",
                   "tool_input":{"command":"loop-hook cancel","description":"d"}})
        );
        let write = parse_object(
            br#"{"opencode_hook":"tool.execute.before","input":{"tool":"write","sessionID":"s"},
                "output":{"args":{"filePath":"/p/check.sh","content":"exit 0"}}}"#,
        )
        .unwrap();
        let event = tool_call(&write).unwrap();
        assert_eq!(
            (event["tool_name"].as_str(), event["tool_input"]["file_path"].as_str()),
            (Some("Write"), Some("/p/check.sh"))
        );
        let no_args = parse_object(
            br#"{"opencode_hook":"tool.execute.before","input":{"tool":"bash","sessionID":"s"}}"#,
        )
        .unwrap();
        assert_eq!(tool_call(&no_args), None);
    }

    #[test]
    fn output_contract() {
        assert_eq!(render(&HookResponse::allow()), "{}");
        assert_eq!(render(&HookResponse::allow_with("verified")), r#"{"message":"verified"}"#);
        assert_eq!(
            render(&HookResponse::block("go on".into(), "1/3".into())),
            r#"{"message":"1/3","prompt":"go on"}"#
        );
    }
}

/// The tests of what doctor checks of this host's installation.
#[cfg(test)]
mod install_tests {
    use std::path::PathBuf;

    use super::*;
    use crate::host::install::all_pass;
    use crate::host::install::tests::{binary, failing};
    #[test]
    fn opencode_needs_its_plugin_its_commands_and_a_binary() {
        let bare = OpencodeFacts { config: PathBuf::from("/h/.config/opencode"), ..OpencodeFacts::default() };
        let asked = opencode_lines(&bare, &binary(), true);
        let check = failing(&asked, "opencode: installed");
        // The folder as this platform joins it (and quotes it, where it holds a backslash).
        let plugins = shell_quote(&bare.config.join("plugins"));
        assert_eq!(
            check.fix,
            Some(format!(
                "mkdir -p {plugins} && cp <for-loop checkout>/plugin/opencode/plugins/* {plugins}/"
            ))
        );
        let plugin = Some(PathBuf::from("/h/.config/opencode/plugins/for-loop.js"));
        let partial =
            OpencodeFacts { plugin: plugin.clone(), missing_commands: vec!["resume-loop"], ..bare.clone() };
        let checks = opencode_lines(&partial, &binary(), false);
        let commands = failing(&checks, "opencode: commands");
        assert!(commands.detail.contains("/resume-loop"), "{commands:?}");
        let whole = OpencodeFacts { plugin, ..bare };
        let checks = opencode_lines(&whole, &binary(), false);
        assert!(all_pass(&checks), "{checks:#?}");
        assert!(checks.iter().any(|c| c.name == "opencode: binary" && c.ok), "{checks:#?}");
    }

    #[test]
    fn finds_the_plugin_and_the_commands_in_either_folder() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        let project = dir.path().join("project");
        let empty = install_facts(config.clone(), &project);
        assert_eq!((empty.plugin, empty.missing_commands.len()), (None, 4));
        std::fs::create_dir_all(config.join("plugins")).unwrap();
        std::fs::write(config.join("plugins/other.js"), "export const X = 1").unwrap();
        std::fs::create_dir_all(project.join(".opencode/plugin")).unwrap();
        let ours = project.join(".opencode/plugin/for-loop.js");
        std::fs::write(&ours, r#"run(["stop-hook", "--host", "opencode"])"#).unwrap();
        std::fs::create_dir_all(config.join("commands")).unwrap();
        for name in ["for-loop", "cancel-loop", "loop-status"] {
            std::fs::write(config.join("commands").join(format!("{name}.md")), "x").unwrap();
        }
        let found = install_facts(config, &project);
        assert_eq!(found.plugin, Some(ours));
        assert_eq!(found.missing_commands, ["resume-loop"]);
    }
}
