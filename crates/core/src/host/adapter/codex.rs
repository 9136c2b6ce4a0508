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
use crate::host::install::{
    self, BinaryFacts, Check, Install, Installation, Launch, Look, home_dir, not_installed, shell_quote,
};
use crate::host::user_command::CommandKind;
use crate::support::Environment;

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
    // Codex names a plugin's skills `PLUGIN:NAME`: only `$for-loop:NAME` puts the skill in
    // front of the model, and the bare `$NAME` is still taken.
    typed_commands: &[
        ("$for-loop:for-loop", CommandKind::Start),
        ("$for-loop:cancel-loop", CommandKind::Cancel),
        ("$for-loop:loop-status", CommandKind::Status),
        ("$for-loop:resume-loop", CommandKind::Resume),
        ("$for-loop", CommandKind::Start),
        ("$cancel-loop", CommandKind::Cancel),
        ("$loop-status", CommandKind::Status),
        ("$resume-loop", CommandKind::Resume),
    ],
    hook_runner: Some(HOOK_RUNNER),
    failure_hook_runner: Some(HOOK_RUNNER),
    looks_like: Some(|fields| fields.is("hook_event_name", "Stop") && fields.has_any(&["turn_id"])),
    watched: Some(watched),
    ..HostSpec::of(Host::Codex, "codex", "codex", parse, render, DOCTOR)
};

// What `loop-hook doctor` checks of Codex's installation: the installed plugin, `config.toml`'s
// plugin and feature switches, and the trust records Codex needs before it runs a plugin's hook.

const DOCTOR: Install = Install { home, check: doctor };

fn doctor(look: &Look) -> Option<Installation> {
    let home = home(look.env).filter(|_| look.present)?;
    let facts = install_facts(look.env, home);
    let installed = facts.plugin_root.is_some();
    Some(Installation { installed, checks: codex_lines(&facts, look.binary, look.asked) })
}

/// `$CODEX_HOME`, else `~/.codex`.
fn home(env: &Environment) -> Option<PathBuf> {
    home_dir(env, "CODEX_HOME", ".codex")
}

fn install_facts(env: &Environment, home: PathBuf) -> CodexFacts {
    let config =
        crate::support::read::bounded_read::read(&home.join("config.toml"), 4 << 20).unwrap_or_default();
    let config = String::from_utf8_lossy(&config);
    let plugin_root = plugin_root(&home);
    let (plugin_disabled, hooks_feature_off) = switches(&config);
    CodexFacts {
        launch: plugin_root.as_ref().map(|root| install::launch(env, root)),
        plugin_root,
        plugin_disabled,
        hooks_feature_off,
        stop_trusted: super::codex_trust::hook_trusted(&config, "stop"),
        prompt_trusted: super::codex_trust::hook_trusted(&config, "user_prompt_submit"),
        home,
    }
}

/// `plugins/cache/MARKETPLACE/for-loop/VERSION`: the newest installed copy of ours.
fn plugin_root(home: &Path) -> Option<PathBuf> {
    let mut roots: Vec<PathBuf> = std::fs::read_dir(home.join("plugins/cache"))
        .ok()?
        .flatten()
        .filter_map(|marketplace| std::fs::read_dir(marketplace.path().join("for-loop")).ok())
        .flat_map(|versions| versions.flatten().map(|v| v.path()))
        .filter(|root| root.join("hooks/hooks.json").is_file())
        .collect();
    roots.sort();
    roots.pop()
}

/// `enabled = false` under our `[plugins."for-loop@…"]` table, and `hooks = false` under
/// `[features]`: the two switches in `config.toml` that turn our hooks off.
fn switches(config: &str) -> (bool, bool) {
    let mut table = String::new();
    let (mut plugin_off, mut hooks_off) = (false, false);
    for line in config.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']').trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let off = value.split('#').next().is_some_and(|v| v.trim() == "false");
        if table.starts_with("plugins.\"for-loop@") && key.trim() == "enabled" {
            plugin_off = off;
        } else if table == "features" && matches!(key.trim(), "hooks" | "codex_hooks") {
            hooks_off = off;
        }
    }
    (plugin_off, hooks_off)
}

/// Codex: the plugin, the hooks feature and the trust records.
// Four independent switches of one config file, each a check of its own: a state machine
// would hide which one failed.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Default)]
struct CodexFacts {
    pub home: PathBuf,
    /// The installed plugin's root (`plugins/cache/MARKETPLACE/for-loop/VERSION`).
    pub plugin_root: Option<PathBuf>,
    pub launch: Option<Launch>,
    /// `[plugins."for-loop@…"] enabled = false` in `config.toml`.
    pub plugin_disabled: bool,
    /// `[features] hooks = false` (or `codex_hooks = false`) in `config.toml`.
    pub hooks_feature_off: bool,
    pub stop_trusted: bool,
    pub prompt_trusted: bool,
}

fn codex_lines(codex: &CodexFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("codex: {what}");
    let config = codex.home.join("config.toml");
    let Some(root) = &codex.plugin_root else {
        return vec![not_installed(
            Host::Codex,
            format!("the for-loop plugin is not in {}", codex.home.join("plugins/cache").display()),
            "codex plugin marketplace add <for-loop checkout>/plugin && codex plugin add for-loop@for-loop"
                .into(),
            asked,
        )];
    };
    let mut out = vec![Check::pass(name("installed"), format!("plugin at {}", root.display()))];
    if codex.plugin_disabled {
        out.push(Check::fail(
            name("enabled"),
            format!("{} disables the for-loop plugin", config.display()),
            format!("set enabled = true under [plugins.\"for-loop@…\"] in {}", config.display()),
        ));
    }
    if codex.hooks_feature_off {
        out.push(Check::fail(
            name("hooks on"),
            format!("{} turns Codex's hooks feature off, so no hook runs", config.display()),
            format!("set hooks = true under [features] in {}", config.display()),
        ));
    }
    let trust = format!("sh {}", shell_quote(&root.join("scripts/trust-hooks")));
    for (trusted, hook, why) in [
        (codex.stop_trusted, "Stop hook", "Codex skips it silently and no loop holds"),
        (
            codex.prompt_trusted,
            "prompt hook",
            "Codex skips it silently and $for-loop:for-loop starts nothing",
        ),
    ] {
        out.push(if trusted {
            Check::pass(
                name(&format!("{hook} trusted")),
                format!("{} trusts for-loop's {hook}", config.display()),
            )
        } else {
            Check::fail(
                name(&format!("{hook} trusted")),
                format!("{} has no trust record for for-loop's {hook}: {why}", config.display()),
                format!("{trust} (or review it in /hooks in a Codex session)"),
            )
        });
    }
    out.push(install::binary_line(&name("binary"), codex.launch.as_ref(), binary));
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

/// The tests of what doctor checks of this host's installation.
#[cfg(test)]
mod install_tests {
    use std::path::PathBuf;

    use super::*;
    use crate::host::install::all_pass;
    use crate::host::install::tests::{binary, failing};
    #[test]
    fn an_untrusted_codex_hook_fails_with_the_trust_script_of_the_installed_plugin() {
        let codex = CodexFacts {
            home: PathBuf::from("/h/.codex"),
            plugin_root: Some(PathBuf::from("/h/.codex/plugins/cache/for-loop/for-loop/1.2.0")),
            stop_trusted: false,
            prompt_trusted: true,
            ..CodexFacts::default()
        };
        let checks = codex_lines(&codex, &binary(), false);
        let check = failing(&checks, "codex: Stop hook trusted");
        assert!(
            check
                .fix
                .as_deref()
                .unwrap()
                .starts_with("sh /h/.codex/plugins/cache/for-loop/for-loop/1.2.0/scripts/trust-hooks"),
            "{check:?}"
        );
    }
    #[test]
    fn a_host_without_for_loop_counts_only_when_asked_for() {
        let bare = CodexFacts { home: PathBuf::from("/h/.codex"), ..CodexFacts::default() };
        let checks = codex_lines(&bare, &binary(), false);
        assert!(all_pass(&checks), "{checks:#?}");
        assert!(checks.iter().any(|c| c.name == "codex: installed" && !c.ok && !c.matters));
        failing(&codex_lines(&bare, &binary(), true), "codex: installed");
    }

    #[test]
    fn the_switches_that_turn_our_hooks_off_are_read_from_their_tables() {
        assert_eq!(switches("[plugins.\"for-loop@for-loop\"]\nenabled = true\n"), (false, false));
        assert_eq!(switches("[plugins.\"for-loop@x\"]\nenabled = false\n"), (true, false));
        assert_eq!(switches("[features]\nhooks = false # off\n"), (false, true));
        assert_eq!(
            switches("[plugins.\"other@x\"]\nenabled = false\n[other]\nhooks = false\n"),
            (false, false)
        );
    }
}
