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
use crate::host::install::{
    self, BinaryFacts, Check, Extension, Install, Installation, Launch, Look, read_json,
};
use crate::support::Environment;

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
    let [system, defaults] = crate::host::config_watch::system_settings(
        env,
        ("GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"),
        ["/Library/Application Support/GeminiCli/settings.json", r"C:\ProgramData\gemini-cli\settings.json", "/etc/gemini-cli/settings.json"],
    );
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
    ..HostSpec::of(Host::GeminiCli, "gemini-cli", "gemini", parse, render, DOCTOR)
};

// What `loop-hook doctor` checks of Gemini CLI's installation: the extension, its enablement for
// this folder and the folder's trust, read as Gemini CLI 0.61 reads them
// (`extension-enablement.json`, `trustedFolders.json`).

const DOCTOR: Install = Install { home: extensions_dir, check: doctor };

/// `~/.gemini/extensions`: where Gemini CLI keeps extensions (Antigravity shares `~/.gemini`).
fn extensions_dir(env: &Environment) -> Option<PathBuf> {
    home(env).map(|home| home.join("extensions"))
}

fn doctor(look: &Look) -> Option<Installation> {
    let home = home(look.env).filter(|_| look.present)?;
    let facts = install_facts(look.env, home, look.project);
    let installed = facts.extension.is_some();
    Some(Installation { installed, checks: gemini_lines(&facts, look.project, look.binary, look.asked) })
}

/// `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub(in crate::host) fn home(env: &Environment) -> Option<PathBuf> {
    env.var("GEMINI_CLI_HOME").or_else(|| env.var("HOME")).map(|home| Path::new(home).join(".gemini"))
}

fn install_facts(env: &Environment, home: PathBuf, project: &Path) -> GeminiFacts {
    let extension =
        Some(home.join("extensions/for-loop")).filter(|dir| dir.join("gemini-extension.json").is_file());
    let trusted_folders_file = env
        .var("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .map_or_else(|| home.join("trustedFolders.json"), PathBuf::from);
    GeminiFacts {
        launch: extension.as_ref().map(|dir| install::launch(env, dir)),
        enabled: extension
            .as_ref()
            .map(|_| enabled(&home.join("extensions/extension-enablement.json"), project)),
        trust: trust(env, &home, &trusted_folders_file, project),
        extension,
        trusted_folders_file,
        home,
    }
}

/// Whether the extension is enabled in `project`: the last override rule that matches wins
/// (`/dir/*` enables in and below it, `!/dir/*` disables).
pub(in crate::host) fn enabled(file: &Path, project: &Path) -> bool {
    let here = format!("{}/", project.display().to_string().trim_end_matches('/'));
    let rules = read_json(file);
    let rules = rules.as_ref().and_then(|v| v.get("for-loop")?.get("overrides")?.as_array().cloned());
    let mut on = true;
    for rule in rules.unwrap_or_default().iter().filter_map(Value::as_str) {
        let (disable, rule) = rule.strip_prefix('!').map_or((false, rule), |r| (true, r));
        let matches = match rule.strip_suffix('*') {
            Some(base) => here.starts_with(&format!("{}/", base.trim_end_matches('/'))),
            None => here == rule,
        };
        if matches {
            on = !disable;
        }
    }
    on
}

fn trust(env: &Environment, home: &Path, file: &Path, project: &Path) -> FolderTrust {
    match env.var("GEMINI_CLI_TRUST_WORKSPACE") {
        Some("true") => return FolderTrust::Trusted("GEMINI_CLI_TRUST_WORKSPACE=true".into()),
        Some("false") => return FolderTrust::NotTrusted,
        _ => {}
    }
    let settings = read_json(&home.join("settings.json"));
    let trust_on = settings
        .as_ref()
        .and_then(|s| s.get("security")?.get("folderTrust")?.get("enabled")?.as_bool())
        .unwrap_or(true);
    if !trust_on {
        return FolderTrust::Trusted("folder trust is off in settings.json".into());
    }
    let project = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
    let rules = read_json(file);
    let mut best: Option<(usize, &str)> = None;
    for (rule, level) in rules.as_ref().and_then(Value::as_object).into_iter().flatten() {
        let Some(level) = level.as_str() else { continue };
        let path = Path::new(rule);
        let effective = if level == "TRUST_PARENT" { path.parent().unwrap_or(path) } else { path };
        let effective = std::fs::canonicalize(effective).unwrap_or_else(|_| effective.to_path_buf());
        if project.starts_with(&effective) && best.is_none_or(|(len, _)| rule.len() > len) {
            best = Some((rule.len(), level));
        }
    }
    match best {
        Some((_, "TRUST_FOLDER" | "TRUST_PARENT")) => FolderTrust::Trusted(format!("{}", file.display())),
        Some((_, "DO_NOT_TRUST")) => FolderTrust::Distrusted(file.to_path_buf()),
        _ => FolderTrust::NotTrusted,
    }
}

/// Whether Gemini CLI trusts the project folder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum FolderTrust {
    /// Trusted, and how (`trustedFolders.json` entry, `GEMINI_CLI_TRUST_WORKSPACE`, trust off).
    Trusted(String),
    #[default]
    NotTrusted,
    /// Marked untrusted on purpose (`DO_NOT_TRUST`).
    Distrusted(PathBuf),
}

/// Gemini CLI: the extension and the trusted folders.
#[derive(Debug, Clone, Default)]
struct GeminiFacts {
    pub home: PathBuf,
    /// The installed extension's directory.
    pub extension: Option<PathBuf>,
    pub launch: Option<Launch>,
    /// `Some(false)` when the extension is disabled for this project or everywhere.
    pub enabled: Option<bool>,
    pub trust: FolderTrust,
    pub trusted_folders_file: PathBuf,
}

fn gemini_lines(gemini: &GeminiFacts, project: &Path, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("gemini-cli: {what}");
    let mut out = Extension {
        host: Host::GeminiCli,
        home: &gemini.home,
        found: gemini.extension.as_deref(),
        enabled: gemini.enabled,
        program: "gemini",
        install: "gemini extensions install <for-loop checkout>/plugin/gemini-cli",
    }
    .lines(asked);
    if gemini.extension.is_none() {
        return out;
    }
    let entry = format!(
        "add \"{}\": \"TRUST_FOLDER\" to {} (or run gemini there and trust the folder; for one run: GEMINI_CLI_TRUST_WORKSPACE=true gemini ...)",
        project.display(),
        gemini.trusted_folders_file.display()
    );
    out.push(match &gemini.trust {
        FolderTrust::Trusted(how) => Check::pass(name("folder trusted"), format!("{} is trusted ({how})", project.display())),
        FolderTrust::NotTrusted => Check::fail(
            name("folder trusted"),
            format!("Gemini CLI does not trust {}: gemini -p refuses to run there and the loop's hooks do not load", project.display()),
            entry,
        ),
        FolderTrust::Distrusted(file) => Check::fail(
            name("folder trusted"),
            format!("{} marks {} DO_NOT_TRUST", file.display(), project.display()),
            entry,
        ),
    });
    out.push(install::binary_line(&name("binary"), gemini.launch.as_ref(), binary));
    out
}

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

/// The tests of what doctor checks of this host's installation.
#[cfg(test)]
mod install_tests {
    use std::path::PathBuf;

    use super::*;
    use crate::host::install::all_pass;
    use crate::host::install::tests::{binary, failing};
    #[test]
    fn an_untrusted_gemini_folder_fails_with_the_trusted_folders_entry() {
        let gemini = GeminiFacts {
            home: PathBuf::from("/h/.gemini"),
            extension: Some(PathBuf::from("/h/.gemini/extensions/for-loop")),
            trusted_folders_file: PathBuf::from("/h/.gemini/trustedFolders.json"),
            ..GeminiFacts::default()
        };
        let checks = gemini_lines(&gemini, &PathBuf::from("/p"), &binary(), false);
        let check = failing(&checks, "gemini-cli: folder trusted");
        assert!(
            check
                .fix
                .as_deref()
                .unwrap()
                .contains("\"/p\": \"TRUST_FOLDER\" to /h/.gemini/trustedFolders.json")
        );
        let trusted = GeminiFacts { trust: FolderTrust::Trusted("env".into()), ..gemini };
        assert!(all_pass(&gemini_lines(&trusted, &PathBuf::from("/p"), &binary(), false)));
    }
}
