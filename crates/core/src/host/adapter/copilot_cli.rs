//! GitHub Copilot CLI's `agentStop`: camelCase input (`sessionId`, `cwd`, `transcriptPath`,
//! `stopReason`, `timestamp` in epoch milliseconds) and, since 1.0.72, `stop_hook_active`, true
//! when the turn goes on because a stop hook blocked the last stop.
//!
//! Output: `{"decision":"block","reason":P}` queues P as the next user prompt; `{}` lets it stop.
//! Exit code 2 only warns, so nothing is ever signalled through the exit code. There is no
//! field shown to the user.
//!
//! Since 1.0.72 the CLI ends the turn after 8 blocks in a row: the 9th stop's block is ignored
//! and the run ends with the loop on. That stop was blocked, so the next stop (after the user's
//! next prompt) arrives with `stop_hook_active:false` while the loop's last verdict was a block:
//! the same override Claude Code's cap leaves, recorded and counted the same way. The prompt hook
//! tells the user before that ([`crate::prompt_hook`]).
//!
//! Refused, so one turn end is judged once and answered in the shape its reader expects: VS
//! Code's `Stop` (it reads `.github/hooks/` too and sends `hookEventName`), and every event with
//! `hook_event_name`: Claude Code's, and Copilot CLI's own `Stop`, the `snake_case` form it sends a
//! hook configured under Claude's event name. Measured on 1.0.102, the CLI's own `agentStop` is
//! the only one of these with neither field. Only `stopReason:"end_turn"` is judged.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::spec::{HostSpec, Markers};
use crate::host::config_watch::{Kind, Watched};
use crate::host::install::{
    self, BinaryFacts, Check, HookFile, Install, Installation, Look, home_dir, not_installed, read_json,
    runs_us, shell_quote,
};
use crate::host::user_command::CommandKind;
use crate::support::Environment;

use crate::host::event::{EventError, Fields, StopEvent, Transcript};
use crate::host::hook_response::HookResponse;
use crate::host::origin::{HookRunner, HookSession};
use crate::host::{Commands, Host, foreign_marker, object_line};

pub(in crate::host) fn parse(object: &Map<String, Value>) -> Result<StopEvent, EventError> {
    let fields = Fields(object);
    if fields.has_any(&["hookEventName", "hook_event_name"]) {
        return Err(EventError::Foreign("a VS Code or Claude-style event, not Copilot CLI's agentStop"));
    }
    if let Some(what) = foreign_marker(Host::CopilotCli, &fields) {
        return Err(EventError::Foreign(what));
    }
    if !fields.has_any(&["sessionId"]) {
        return Err(EventError::Foreign("not a Copilot CLI event (no sessionId)"));
    }
    if fields.string("stopReason")?.as_deref() != Some("end_turn") {
        return Err(EventError::Foreign("the turn did not end normally"));
    }
    Ok(StopEvent {
        session_id: fields.required_string("sessionId")?,
        // Absent before 1.0.72, which had no block cap to override a block either.
        stop_hook_active: fields.boolean("stop_hook_active")?,
        last_assistant_message: None,
        transcript: fields.path("transcriptPath")?.map(Transcript::Opaque),
        background: None,
    })
}

/// How many blocks in a row Copilot CLI honours before it ends the turn anyway (1.0.72 and
/// newer; measured on 1.0.102: the 9th block is ignored).
pub(crate) const BLOCK_CAP: u32 = 8;

pub(in crate::host) fn render(response: &HookResponse) -> String {
    match &response.block {
        Some(reason) => object_line([("decision", json!("block")), ("reason", json!(reason))]),
        None => "{}".to_string(),
    }
}

/// How Copilot CLI 1.0.102 starts a hook on Linux: in the session of its process (named
/// `MainThread`, started by the `copilot` launcher), as a direct child in a process group of its
/// own, reading a pipe. The agent's shell tool runs in a session of its own.
pub(in crate::host) const HOOK_RUNNER: HookRunner = HookRunner {
    names: &[("MainThread", "copilot"), ("node", "copilot")],
    session: HookSession::Host,
    stdin_from_host: false,
    tool_sandbox: None,
};
/// What decides whether for-loop runs on Copilot CLI, for the watch of the host's
/// configuration: its hook folders (the user's, where for-loop's hook file is installed, and
/// the repository's), and the hook keys of its settings.
pub(in crate::host) fn watched(env: &Environment, project: &Path) -> Vec<Watched> {
    const KEYS: &[&str] = &["hooks", "disableAllHooks"];
    let home = env
        .var("COPILOT_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|h| PathBuf::from(h).join(".copilot")));
    let mut watched = vec![Watched::new(Kind::Folder, project.join(".github/hooks"))];
    if let Some(home) = home {
        watched.push(Watched::new(Kind::Folder, home.join("hooks")));
        watched.push(Watched::new(Kind::Settings(KEYS), home.join("config.json")));
        watched.push(Watched::new(Kind::Settings(KEYS), home.join("settings.json")));
    }
    watched
}

/// What for-loop knows about copilot-cli: read by [`Host`]'s methods.
pub(in crate::host) const SPEC: HostSpec = HostSpec {
    aliases: &["copilot"],
    tells_commands_the_session: true,
    has_prompt_hook: true,
    caps_blocks_in_a_row: true,
    resubmits_block_reason_as_prompt: true,
    prompt_hook_answers_in_place: true,
    commands: Commands::SLASH_UNPREFIXED,
    // Copilot CLI invokes a skill as `/NAME` and passes the typed text to its prompt hook.
    typed_commands: &[
        ("/for-loop", CommandKind::Start),
        ("/cancel-loop", CommandKind::Cancel),
        ("/loop-status", CommandKind::Status),
        ("/resume-loop", CommandKind::Resume),
        ("/for-loop:rollback", CommandKind::Rollback),
    ],
    hook_runner: Some(HOOK_RUNNER),
    failure_hook_runner: Some(HOOK_RUNNER),
    // Copilot CLI and VS Code spell their fields in camelCase; Copilot CLI's `Stop` (a hook
    // configured under Claude's event name) is snake_case but has a `stop_reason`.
    markers: Some(Markers {
        fields: &["sessionId", "hookEventName", "stop_reason"],
        what: "a Copilot CLI or VS Code event",
    }),
    looks_like: Some(|fields| fields.has_any(&["stopReason"]) && fields.has_any(&["sessionId"])),
    watched: Some(watched),
    ..HostSpec::of(Host::CopilotCli, "copilot-cli", "copilot", parse, render, DOCTOR)
};

// What `loop-hook doctor` checks of Copilot CLI's installation: its hook files, the user's and
// the repository's.

const DOCTOR: Install = Install { home: copilot_home, check: doctor };

fn doctor(look: &Look) -> Option<Installation> {
    let in_project = look.project.join(".github/hooks").is_dir();
    let home = copilot_home(look.env).filter(|_| look.present || in_project)?;
    let facts = copilot(look.env, home, look.project);
    let installed = facts.user_hook.is_some() || facts.repo_hook.is_some();
    Some(Installation { installed, checks: copilot_lines(&facts, look.binary, look.asked) })
}

/// `$COPILOT_HOME`, else `~/.copilot`.
fn copilot_home(env: &Environment) -> Option<PathBuf> {
    home_dir(env, "COPILOT_HOME", ".copilot")
}

/// The first `*.json` in `dir` whose `agentStop` hook runs for-loop.
fn copilot_hook(dir: &Path) -> Option<HookFile> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).collect();
    files.sort();
    files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "json")).find_map(|path| {
        let hooks = read_json(&path)?;
        let ours = hooks.get("hooks")?.get("agentStop")?.as_array()?.iter().any(|hook| {
            ["bash", "command"]
                .iter()
                .any(|key| hook.get(key).and_then(Value::as_str).is_some_and(|c| runs_us(c, "copilot-cli")))
        });
        ours.then_some(HookFile { path, limit: None })
    })
}

fn copilot(env: &Environment, home: PathBuf, project: &Path) -> CopilotFacts {
    CopilotFacts {
        user_hook: copilot_hook(&home.join("hooks")),
        repo_hook: copilot_hook(&project.join(".github/hooks")),
        allow_all: env.var("COPILOT_ALLOW_ALL") == Some("true"),
        home,
    }
}

/// Copilot CLI: its hook files.
#[derive(Debug, Clone, Default)]
struct CopilotFacts {
    pub home: PathBuf,
    /// `~/.copilot/hooks/*.json` running for-loop.
    pub user_hook: Option<HookFile>,
    /// `<repo>/.github/hooks/*.json` running for-loop.
    pub repo_hook: Option<HookFile>,
    /// `COPILOT_ALLOW_ALL=true` in this environment, which lets repository hooks load in `-p`.
    pub allow_all: bool,
}

fn copilot_lines(copilot: &CopilotFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("copilot-cli: {what}");
    let user_dir = copilot.home.join("hooks");
    let mut out = Vec::new();
    match (&copilot.user_hook, &copilot.repo_hook) {
        (None, None) => {
            return vec![not_installed(
                Host::CopilotCli,
                format!("no hook file in {} or .github/hooks runs for-loop", user_dir.display()),
                format!(
                    "mkdir -p {dir} && cp <for-loop checkout>/plugin/copilot-cli/for-loop.json {dir}/",
                    dir = shell_quote(&user_dir)
                ),
                asked,
            )];
        }
        (Some(hook), _) => {
            out.push(Check::pass(name("installed"), format!("{} runs for-loop", hook.path.display())));
        }
        (None, Some(hook)) if copilot.allow_all => out.push(Check::pass(
            name("installed"),
            format!("{} runs for-loop (repository hooks load: COPILOT_ALLOW_ALL=true)", hook.path.display()),
        )),
        (None, Some(hook)) => out.push(Check::fail(
            name("installed"),
            format!(
                "{} runs for-loop, but repository hooks load in copilot -p only with --trust-folder or \
                 COPILOT_ALLOW_ALL=true, so a headless loop would not hold",
                hook.path.display()
            ),
            format!("mkdir -p {dir} && cp {} {dir}/", shell_quote(&hook.path), dir = shell_quote(&user_dir)),
        )),
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

    #[test]
    fn reads_the_agent_stop() {
        let event = parse_text(
            r#"{"timestamp":1763800000000,"cwd":"/p","sessionId":"cp-1","transcriptPath":"/t","stopReason":"end_turn"}"#,
        )
        .unwrap();
        assert_eq!(event.session_id, "cp-1");
        assert_eq!(event.transcript, Some(Transcript::Opaque("/t".into())));
        assert_eq!(event.stop_hook_active, None);
    }

    /// 1.0.102's `agentStop`, as the CLI sent it on a continuation.
    #[test]
    fn reads_the_flag_1_0_72_added() {
        let event = parse_text(
            r#"{"sessionId":"11111111-2222-4333-8444-555555555556","timestamp":1795709402735,"cwd":"/p",
                "transcriptPath":"/h/.copilot/session-state/11111111-2222-4333-8444-555555555556/events.jsonl",
                "stopReason":"end_turn","stop_hook_active":true}"#,
        )
        .unwrap();
        assert_eq!(event.session_id, "11111111-2222-4333-8444-555555555556");
        assert_eq!(event.stop_hook_active, Some(true));
        assert!(matches!(
            parse_text(r#"{"sessionId":"s","stopReason":"end_turn","stop_hook_active":"yes"}"#),
            Err(EventError::WrongType { field: "stop_hook_active", .. })
        ));
    }

    #[test]
    fn refuses_vs_code_its_own_stop_form_and_abnormal_ends() {
        let vs_code =
            r#"{"sessionId":"s","hookEventName":"Stop","transcript_path":"/t","stop_hook_active":false}"#;
        assert!(matches!(parse_text(vs_code), Err(EventError::Foreign(_))));
        // What 1.0.102 sends a hook configured as `Stop` for the same turn end.
        let snake = r#"{"hook_event_name":"Stop","session_id":"s","timestamp":"2026-11-26T16:08:59.550Z","cwd":"/p",
            "transcript_path":"/t","stop_reason":"end_turn","stop_hook_active":false}"#;
        assert!(matches!(parse_text(snake), Err(EventError::Foreign(_))));
        assert_eq!(
            parse_text(r#"{"sessionId":"s","stopReason":"error"}"#),
            Err(EventError::Foreign("the turn did not end normally"))
        );
        assert_eq!(
            parse_text(r#"{"sessionId":"","stopReason":"end_turn"}"#),
            Err(EventError::Missing("sessionId"))
        );
    }

    #[test]
    fn output_contract() {
        assert_eq!(render(&HookResponse::allow()), "{}");
        assert_eq!(render(&HookResponse::allow_with("x")), "{}");
        assert_eq!(
            render(&HookResponse::block("go on".into(), "1/3".into())),
            r#"{"decision":"block","reason":"go on"}"#
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
    fn copilot_repository_hooks_alone_fail_for_headless_runs_unless_allowed() {
        let copilot = CopilotFacts {
            home: PathBuf::from("/h/.copilot"),
            repo_hook: Some(HookFile { path: PathBuf::from("/p/.github/hooks/for-loop.json"), limit: None }),
            ..CopilotFacts::default()
        };
        let checks = copilot_lines(&copilot, &binary(), false);
        let check = failing(&checks, "copilot-cli: installed");
        assert!(check.detail.contains("--trust-folder or COPILOT_ALLOW_ALL=true"), "{check:?}");
        assert_eq!(
            check.fix.as_deref(),
            Some("mkdir -p /h/.copilot/hooks && cp /p/.github/hooks/for-loop.json /h/.copilot/hooks/")
        );
        assert!(all_pass(&copilot_lines(&CopilotFacts { allow_all: true, ..copilot }, &binary(), false)));
    }
}
