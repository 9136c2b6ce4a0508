//! The agent hosts `loop-hook` serves, and each one's turn-end contract: how its event reads and
//! what its hook must print. The loop logic never sees a host; it works on [`StopEvent`] and
//! [`HookResponse`].
//!
//! What each host can do is a table: every adapter declares a [`HostSpec`], and the methods
//! of [`Host`] read it; [`Host::spec`] finds a host's in one array, so nothing, here or
//! elsewhere, matches on the host to learn what it can do.
//!
//! The host is named on the hook's command line in each host's hook config (`stop-hook --host
//! NAME`), because payloads are too alike to tell apart reliably. [`Host::guess`] exists only as
//! a fallback for a hook line that names no host, from each spec's `looks_like`.
//!
//! Every adapter refuses what is not its own host's normal turn end with
//! [`EventError::Foreign`]: another host's payload (a field of another spec's `markers`; Cursor
//! and Copilot CLI also run Claude Code's hooks, VS Code reads Copilot's), another event, or a
//! turn that ended abnormally. The hook then judges nothing and prints only the host's plain
//! "let it stop" answer.

mod adapter;
pub(crate) mod agent;
pub(crate) mod background;
pub(crate) mod config_watch;
pub(crate) mod event;
pub(crate) mod hook_response;
pub(crate) mod install;
pub(crate) mod origin;
pub(crate) mod transcript;
pub(crate) mod usage;
pub(crate) mod user_command;

use serde_json::{Map, Value};

pub(crate) use crate::host::event::{EventError, Fields, StopEvent};

pub(crate) use self::agent::Agent;
pub(crate) use self::background::BackgroundTask;
pub(crate) use self::config_watch::Snapshot;
pub(crate) use self::event::Transcript;
pub(crate) use self::event::TurnError;
pub(crate) use self::event::TurnFailure;
pub(crate) use self::install::Binary;
pub(crate) use self::install::BinaryFacts;
pub(crate) use self::install::Check;
pub(crate) use self::install::INSTALL;
pub(crate) use self::install::Installation;
pub(crate) use self::install::Look;
pub(crate) use self::origin::AGENT_SHELL_VARS;
pub(crate) use self::origin::HookRunner;
pub(crate) use self::origin::HookSession;
pub(crate) use self::origin::Origin;
pub(crate) use self::transcript::ApiErrorReply;
pub(crate) use self::transcript::MAX_TRANSCRIPT_BYTES;
pub(crate) use self::transcript::Turn;
pub(crate) use self::usage::TokenCounts;
pub(crate) use self::usage::Usage;
pub(crate) use self::usage::UsageCursor;
pub(crate) use self::user_command::CommandKind;
pub(crate) use self::user_command::UserCommand;
pub(crate) use crate::host::hook_response::HookResponse;
pub(crate) use adapter::Host;
use adapter::SPECS;
use adapter::claude_code;
use adapter::opencode;
pub(crate) use adapter::opencode::Command as OpencodeCommand;
pub(crate) use adapter::qwen_code::{
    BLOCK_CAP_SETTING as QWEN_BLOCK_CAP_SETTING, BLOCK_CAP_VAR as QWEN_BLOCK_CAP_VAR,
    MAX_BLOCK_CAP as QWEN_MAX_BLOCK_CAP,
};
pub(crate) use adapter::spec::HostSpec;
pub(crate) use adapter::{codex_trust, copilot_cli::BLOCK_CAP as COPILOT_BLOCK_CAP};

// Each spec names the host of its place in the list, so that `Host::spec` reads the host's own.
const _: () = {
    let mut i = 0;
    while i < SPECS.len() {
        assert!(SPECS[i].host as usize == i, "SPECS is not in the order of Host's variants");
        i += 1;
    }
};

impl Host {
    /// Every host, in the order of the variants.
    pub(crate) const ALL: &'static [Host] = &{
        let mut all = [Host::ClaudeCode; SPECS.len()];
        let mut i = 0;
        while i < SPECS.len() {
            all[i] = SPECS[i].host;
            i += 1;
        }
        all
    };

    /// What this host's adapter declares about it: every other method reads it, so no code
    /// tells one host from another.
    pub(crate) fn spec(self) -> &'static HostSpec {
        SPECS[self as usize]
    }

    pub(crate) fn name(self) -> &'static str {
        self.spec().name
    }

    pub(crate) fn from_name(name: &str) -> Option<Host> {
        Host::ALL
            .iter()
            .map(|host| host.spec())
            .find(|spec| spec.name == name || spec.aliases.contains(&name))
            .map(|spec| spec.host)
    }

    /// The program on `PATH` whose presence says the host is installed here.
    pub(crate) fn program(self) -> &'static str {
        self.spec().program
    }

    /// Whether the commands the agent runs can learn the session id, from a placeholder or an
    /// environment variable. Where they cannot, a new loop waits to be claimed by the
    /// conversation whose transcript holds its token ([`crate::provenance::claim`]).
    ///
    /// Copilot CLI (1.0.72 and newer, measured on 1.0.102) names the session in its
    /// `userPromptSubmitted` event, where the prompt hook starts the loop, and in the agent's
    /// shell (`COPILOT_AGENT_SESSION_ID`). Its loops are bound to that id at once rather than
    /// claimed by transcript: the CLI writes a tool's output to `events.jsonl` 70-150 ms after
    /// the result, so a model that answers at once ends its turn before the token is in the
    /// file, and waiting for it would hold every stop of the project for a guessed time.
    /// opencode's plugin names the session of every command it passes on.
    pub(crate) fn tells_commands_the_session(self) -> bool {
        self.spec().tells_commands_the_session
    }

    /// Whether the host runs a hook on the user's submitted prompt that for-loop installs
    /// (`UserPromptSubmit`), outside the model's sandbox: then the user's commands are carried
    /// out there, and the same commands from the agent's shell are refused ([`crate::provenance::origin`]).
    /// Copilot CLI's is `userPromptSubmitted`, which can answer a prompt itself (`handled`);
    /// opencode's is the plugin's `command.execute.before`; Qwen Code's `UserPromptSubmit` names
    /// what the user typed in `submitted_prompt`.
    pub(crate) fn has_prompt_hook(self) -> bool {
        self.spec().has_prompt_hook
    }

    /// Whether the host keeps the conversation in Claude Code's transcript format, the one the
    /// forged-stop checks read (a tool call still pending, the turn's final reply). Another
    /// host's transcript (Codex's rollout, say) shows neither, and must not be read as if every
    /// stop had no final reply.
    pub(crate) fn keeps_claude_transcript(self) -> bool {
        self.spec().keeps_claude_transcript
    }

    /// Whether for-loop can read the model usage from the host's transcript (for `--max-tokens`
    /// and the tokens in receipts and reports).
    pub(crate) fn transcript_records_usage(self) -> bool {
        self.spec().transcript_records_usage
    }

    /// Whether the turn-end event carries the agent's last message, which a completion promise
    /// is checked against.
    pub(crate) fn sends_last_message(self) -> bool {
        self.spec().sends_last_message
    }

    /// Whether verify can run in the host's own sandbox (the strict tier): only Claude Code's
    /// sandbox settings are ones for-loop can read and reuse for verify.
    pub(crate) fn offers_strict_tier(self) -> bool {
        self.spec().offers_strict_tier
    }

    /// Whether the host ends a turn by itself after some blocked stops in a row, telling nobody
    /// (Copilot CLI's cap): the hook remembers each block so the user hears of the override.
    pub(crate) fn caps_blocks_in_a_row(self) -> bool {
        self.spec().caps_blocks_in_a_row
    }

    /// Whether a block's reason comes back as the user's next prompt, through the prompt hook
    /// (Copilot CLI submits it): that prompt is the loop going on, never a command.
    pub(crate) fn resubmits_block_reason_as_prompt(self) -> bool {
        self.spec().resubmits_block_reason_as_prompt
    }

    /// Whether a user's command can be confirmed from the host's transcript, after the prompt
    /// hook marked it ([`crate::provenance::confirmation`]): the transcript format read is
    /// Claude Code's.
    pub(crate) fn confirms_commands_from_transcript(self) -> bool {
        self.keeps_claude_transcript()
    }

    /// Whether the prompt hook's answer takes the place of the prompt (Copilot CLI's `handled`):
    /// the host shows the user nothing else a hook says, so what they must hear is that answer.
    pub(crate) fn prompt_hook_answers_in_place(self) -> bool {
        self.spec().prompt_hook_answers_in_place
    }

    /// Whether the host silently skips a hook the user has not trusted (Codex): a loop started
    /// there is told so, so that it does not look like one that holds.
    pub(crate) fn skips_untrusted_hooks(self) -> bool {
        self.spec().skips_untrusted_hooks
    }

    /// Whether the settings that switch the host's hooks off can be watched while a loop runs
    /// ([`crate::host::config_watch`]; each adapter names what its host reads). Every host's
    /// adapter names files the agent can edit (issue 32).
    pub(crate) fn hook_settings_can_be_watched(self) -> bool {
        self.spec().watched.is_some()
    }

    /// Whether the prompt hook's answer takes the place of the text the user's command sends
    /// the model (opencode's `command.execute.before`): the command always goes on to the model,
    /// so what the user must hear is sent for the model to pass on.
    pub(crate) fn prompt_hook_replaces_the_command(self) -> bool {
        self.spec().prompt_hook_replaces_the_command
    }

    /// The prompt hook's field that holds what the user typed. Qwen Code's `prompt` is the text
    /// after a command's expansion, and is also sent (empty) after a tool result; its
    /// `submitted_prompt` is sent only for a prompt the user typed.
    pub(crate) fn typed_prompt_field(self) -> &'static str {
        self.spec().typed_prompt_field
    }

    /// A variable the host puts in the environment of the agent's shell and never in its hooks':
    /// a hook that sees it was started from the agent's shell, so it judges no stop and carries
    /// out no command.
    pub(crate) fn agent_shell_marker(self) -> Option<&'static str> {
        self.spec().agent_shell_marker
    }

    /// Whether the prompt hook tells the model what a start or a resume did through the host's
    /// `additionalContext` (Qwen Code appends it to the prompt), rather than through a command
    /// file that shows it.
    pub(crate) fn prompt_hook_adds_context(self) -> bool {
        self.spec().prompt_hook_adds_context
    }

    /// The most blocks in a row the host honours for a loop started with the environment and
    /// directory given, where that cap is the user's to set (Qwen Code's): a loop needs as many
    /// as its iterations, so a longer one is refused at the start.
    pub(crate) fn settable_block_cap(
        self,
        env: &crate::support::Environment,
        cwd: &std::path::Path,
    ) -> Option<u32> {
        self.spec().settable_block_cap.map(|read| read(env, cwd))
    }

    /// The host's cap of Stop blocks in a row in which the agent called no tool, past which it
    /// ends the turn whatever the hook answers (Claude Code's `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`,
    /// read from the hook's environment); `None` where the host has no such cap, or it is off.
    /// Qwen Code's and Copilot CLI's caps count every block, and are kept by
    /// [`Host::settable_block_cap`] and [`Host::caps_blocks_in_a_row`].
    pub(crate) fn quiet_block_cap(self, env: &crate::support::Environment) -> Option<u32> {
        self.spec().quiet_block_cap.and_then(|cap| (cap.read)(env))
    }

    /// What sets [`Host::quiet_block_cap`], for the words that tell the user how to raise it.
    pub(crate) fn quiet_block_cap_setting(self) -> Option<&'static str> {
        self.spec().quiet_block_cap.map(|cap| cap.setting)
    }

    /// How this host's user resumes, cancels and inspects a loop, in the words the receipt and
    /// messages use. Each host gets its own: the commands exist in different forms, or not at all.
    pub(crate) fn commands(self) -> Commands {
        self.spec().commands
    }

    /// The names `--host` accepts, for error messages.
    pub(crate) fn names() -> String {
        Host::ALL.iter().map(|h| h.name()).collect::<Vec<_>>().join(", ")
    }

    /// The host whose turn-end payload this looks like, for a hook line without `--host`. Only
    /// fields unique to one host count; anything else is taken as Claude Code's, the default.
    pub(crate) fn guess(object: &Map<String, Value>) -> Host {
        let fields = Fields(object);
        Host::ALL
            .iter()
            .copied()
            .find(|host| host.spec().looks_like.is_some_and(|looks_like| looks_like(&fields)))
            .unwrap_or_default()
    }

    /// Reads this host's turn-end event. [`EventError::Foreign`] means the payload belongs to
    /// another host or another event, or the turn did not end normally: the hook then does
    /// nothing at all.
    pub(crate) fn parse_stop(self, object: &Map<String, Value>) -> Result<StopEvent, EventError> {
        (self.spec().parse_stop)(object)
    }

    /// What the hook prints for `response`, exactly as this host expects it: one JSON object or
    /// nothing, with exit code 0.
    pub(crate) fn render(self, response: &HookResponse) -> String {
        (self.spec().render)(response)
    }
}

/// A turn that ended on an error (issue 31): which hosts report one, and how it reads.
impl Host {
    /// Reads this host's report of a turn that ended on an error; `None` when the event is none
    /// (a normal turn end, another event), which is then read as a stop. Claude Code sends
    /// `StopFailure`, and so does Qwen Code from its interactive UI (never from `-p`); Cursor a
    /// `stop` whose `status` is `error`. Gemini CLI's `AfterAgent`,
    /// Codex's `Stop` and Copilot CLI's `agentStop` fire only for a turn that ended normally.
    /// opencode (1.18.33) was seen to end no turn on an API error: it compacts the conversation
    /// and retries a prompt too long (`session.error`, then `session.compacted`), retries server
    /// errors, and waits out a usage limit in the session; its `session.idle` follows a turn that
    /// went on.
    pub(crate) fn parse_failure(
        self,
        object: &Map<String, Value>,
        now: jiff::Timestamp,
    ) -> Option<Result<crate::host::event::TurnFailure, EventError>> {
        (self.spec().parse_failure)(object, now)
    }

    /// The session whose conversation the host just compacted, when this start of a session
    /// says so (Claude Code's `SessionStart` with `source:"compact"`); `None` for any other.
    pub(crate) fn parse_compacted(self, object: &Map<String, Value>) -> Result<Option<String>, EventError> {
        (self.spec().parse_compacted)(object)
    }

    /// The answer to a session's start that gives the agent `text` (empty: nothing to add).
    pub(crate) fn render_session_context(self, text: &str) -> String {
        match self.spec().render_session_context {
            Some(render) if !text.is_empty() => render(text),
            _ => String::new(),
        }
    }

    /// The command that hands an in-session loop to `loop-hook run`'s fresh sessions, where the
    /// host has one.
    pub(crate) fn handoff_command(self) -> Option<&'static str> {
        self.spec().handoff_command
    }
}

/// The watch of what decides whether for-loop runs on a host (issue 32): each adapter names
/// what its host reads; [`config_watch`] looks at it.
impl Host {
    /// What this host reads that decides whether for-loop runs at all, for a loop in `project`.
    pub(crate) fn watched_config(
        self,
        env: &crate::support::Environment,
        project: &std::path::Path,
    ) -> Vec<config_watch::Watched> {
        self.spec().watched.map(|watched| watched(env, project)).unwrap_or_default()
    }

    /// The snapshot now of what decides whether for-loop runs on this host, for a loop in
    /// `project`, with the binary answering.
    pub(crate) fn config_snapshot(
        self,
        env: &crate::support::Environment,
        project: &std::path::Path,
    ) -> config_watch::Snapshot {
        config_watch::snapshot(env, &self.watched_config(env, project))
    }

    /// The snapshot now, compared with `before` (the one recorded at the last hook) from any
    /// for-loop process: what `before` looked at and this process's environment does not name
    /// (the plugin's folder, outside a hook) is looked at again where it was.
    pub(crate) fn config_snapshot_since(
        self,
        env: &crate::support::Environment,
        project: &std::path::Path,
        before: &config_watch::Snapshot,
    ) -> config_watch::Snapshot {
        config_watch::snapshot_since(env, &self.watched_config(env, project), before)
    }
}

/// Fields only one other host sends (its spec's [`HostSpec::markers`]), so a payload holding
/// any of them is not `host`'s. Each adapter checks these before anything else.
fn foreign_marker(host: Host, fields: &Fields) -> Option<&'static str> {
    Host::ALL
        .iter()
        .filter(|other| **other != host)
        .filter_map(|other| other.spec().markers)
        .find(|markers| fields.has_any(markers.fields))
        .map(|markers| markers.what)
}

/// What a machine where for-loop is installed for no host is told to install first: the host
/// for-loop was made for first, and its package.
pub(crate) struct FirstInstall {
    pub(crate) host: Host,
    /// The host itself and how to get it.
    pub(crate) get_host: &'static str,
    /// for-loop's package for it, and the command that installs it.
    pub(crate) package: String,
}

pub(crate) fn first_install(binary: &install::BinaryFacts) -> FirstInstall {
    FirstInstall {
        host: Host::ClaudeCode,
        get_host: "Claude Code (npm install -g @anthropic-ai/claude-code)",
        package: format!("Claude Code's plugin: {}", claude_code::install_command(binary)),
    }
}

/// The user's command in the payload of opencode's plugin (`command.execute.before`), if it is
/// one: read by the prompt hook, whatever host it was started for.
pub(crate) fn opencode_command(object: &Map<String, Value>) -> Option<OpencodeCommand> {
    opencode::command(object)
}

/// The tool call in the payload of opencode's plugin (`tool.execute.before`), in the shape of
/// Claude Code's `PreToolUse` the guard reads, if it is one.
pub(crate) fn opencode_tool_call(object: &Map<String, Value>) -> Option<Map<String, Value>> {
    opencode::tool_call(object)
}

/// How a host's user runs for-loop's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Commands {
    pub(crate) resume: &'static str,
    pub(crate) cancel: &'static str,
    pub(crate) status: &'static str,
    /// How the user starts a loop, for a refusal that sends them there.
    pub(crate) start: &'static str,
    /// How the user rolls a loop back, for a refusal that sends them there.
    pub(crate) rollback: &'static str,
}

impl Commands {
    /// The slash commands of the hosts that run them, where a host differs only in some.
    pub(in crate::host) const SLASH: Commands = Commands {
        resume: "/for-loop:resume",
        cancel: "/cancel-loop",
        status: "/loop-status",
        start: "/for-loop",
        rollback: "/for-loop:rollback",
    };

    /// The slash commands of the hosts whose commands take no plugin prefix (Gemini CLI, Copilot
    /// CLI): resume has a name of its own.
    pub(in crate::host) const SLASH_UNPREFIXED: Commands =
        Commands { resume: "/resume-loop", ..Commands::SLASH };

    /// The hosts whose commands are skills the agent is asked to run.
    pub(in crate::host) const SKILLS: Commands = Commands {
        resume: "the resume-loop skill (ask for /resume-loop)",
        cancel: "the cancel-loop skill (ask for /cancel-loop)",
        status: "the loop-status skill (ask for /loop-status)",
        ..Commands::SLASH
    };

    /// The hosts with slash commands of their own and no rollback command.
    pub(in crate::host) const NO_ROLLBACK: Commands = Commands {
        resume: "/resume-loop",
        cancel: "/cancel-loop",
        status: "/loop-status",
        start: "/for-loop",
        rollback: "`loop-hook rollback` in a terminal",
    };
}

/// One JSON object as a single line.
pub(crate) fn object_line(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> String {
    let object: Map<String, Value> = pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    Value::Object(object).to_string()
}

impl Host {
    /// How this host starts its hooks, as the hook sees it in its process tree, where it was
    /// measured (Linux); `None` for a host not measured, whose events the transcript checks
    /// alone judge.
    pub(crate) fn hook_runner(self) -> Option<origin::HookRunner> {
        self.spec().hook_runner
    }

    /// How this host starts the hook that reports a turn ended on an error (`StopFailure`), where
    /// that differs from its other hooks. Qwen Code 0.24.4 starts it through a supervisor of its
    /// own (a `node --eval` child that outlives the CLI and hands the event over in a file), which
    /// its Stop hook's rule would take for the agent's: there the transcript checks decide.
    pub(crate) fn failure_hook_runner(self) -> Option<origin::HookRunner> {
        self.spec().failure_hook_runner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::event::parse_object;

    /// The hosts that have a capability, in [`Host::ALL`]'s order.
    fn having(capability: fn(Host) -> bool) -> Vec<&'static str> {
        Host::ALL.iter().copied().filter(|host| capability(*host)).map(Host::name).collect()
    }

    #[test]
    fn each_capability_belongs_to_the_hosts_that_have_it() {
        assert_eq!(having(Host::offers_strict_tier), ["claude-code"]);
        assert_eq!(having(Host::caps_blocks_in_a_row), ["copilot-cli"]);
        assert_eq!(having(Host::resubmits_block_reason_as_prompt), ["copilot-cli"]);
        assert_eq!(having(Host::prompt_hook_answers_in_place), ["copilot-cli"]);
        assert_eq!(having(Host::confirms_commands_from_transcript), ["claude-code"]);
        assert_eq!(having(Host::skips_untrusted_hooks), ["codex"]);
        assert_eq!(
            having(Host::hook_settings_can_be_watched).len(),
            Host::ALL.len(),
            "every host is watched"
        );
        let starts: Vec<(&str, &str)> =
            Host::ALL.iter().map(|h| (h.commands().start, h.commands().rollback)).collect();
        assert_eq!(starts[0], ("/for-loop", "/for-loop:rollback"));
        assert_eq!(
            starts[3],
            ("$for-loop", "`loop-hook rollback` in a terminal"),
            "Codex has no slash commands"
        );
        assert_eq!(
            starts[6],
            ("/for-loop", "`loop-hook rollback` in a terminal"),
            "opencode has no rollback command"
        );
        assert_eq!(
            starts[7],
            ("/for-loop", "`loop-hook rollback` in a terminal"),
            "Qwen Code ships no rollback"
        );
        assert!(starts.iter().enumerate().all(|(i, s)| i == 3 || i >= 6 || *s == starts[0]), "{starts:?}");
        assert_eq!(having(Host::prompt_hook_replaces_the_command), ["opencode"]);
        assert_eq!(having(Host::prompt_hook_adds_context), ["qwen-code"]);
        let markers: Vec<&str> = Host::ALL.iter().filter_map(|h| h.agent_shell_marker()).collect();
        assert_eq!(markers, ["QWEN_CODE"]);
        let fields: Vec<&str> = Host::ALL.iter().map(|h| h.typed_prompt_field()).collect();
        assert_eq!(fields.iter().filter(|f| **f == "submitted_prompt").count(), 1);
    }

    /// Adding a host is one adapter file, as far as a test can tell: every file in `adapter/`
    /// that declares a spec is one host's, named after it, and every host has one; each spec
    /// says how to tell its payload from the others' and where doctor looks for its files; and
    /// doctor's checks of it, on a machine with nothing of it, are its own lines and say it is
    /// missing.
    #[test]
    fn a_host_is_one_adapter_file_whose_spec_is_complete() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/host/adapter");
        let mut adapters: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                std::fs::read_to_string(path).unwrap().contains("pub(in crate::host) const SPEC: HostSpec")
            })
            .map(|path| path.file_stem().unwrap().to_string_lossy().replace('_', "-"))
            .collect();
        adapters.sort();
        let mut names: Vec<&str> = Host::ALL.iter().map(|host| host.name()).collect();
        names.sort_unstable();
        assert_eq!(adapters, names, "one adapter file per host, named after it");

        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let vars = [
            ("HOME".to_string(), home.path().display().to_string()),
            ("PATH".to_string(), "/nonexistent".to_string()),
        ];
        let env =
            crate::support::environment::Environment::new(vars, project.clone(), jiff::Timestamp::UNIX_EPOCH);
        let binary = install::BinaryFacts::default();
        let mut homes = Vec::new();
        let mut markers: Vec<&str> = Vec::new();
        for host in Host::ALL.iter().copied() {
            let (spec, name) = (host.spec(), host.name());
            assert_eq!(
                spec.looks_like.is_none(),
                host == Host::default(),
                "{name}: only the default host is guessed without fields of its own"
            );
            markers.extend(spec.markers.iter().flat_map(|m| m.fields.iter().copied()));
            let at = host.install_home(&env).unwrap_or_else(|| panic!("{name}: no home under HOME"));
            assert!(at.starts_with(home.path()), "{name}: {}", at.display());
            homes.push(at);
            let look =
                install::Look { env: &env, project: &project, binary: &binary, asked: true, present: true };
            let found =
                host.check_install(&look).unwrap_or_else(|| panic!("{name}: asked for, checked nothing"));
            assert!(!found.installed, "{name}: installed on an empty machine");
            let first = &found.checks[0];
            assert!(
                first.name == format!("{name}: installed") && !first.ok && first.matters,
                "{name}: {first:?}"
            );
            assert!(first.fix.as_deref().is_some_and(|fix| !fix.is_empty()), "{name}: {first:?}");
            for check in &found.checks {
                assert!(
                    check.name.starts_with(&format!("{name}: ")),
                    "{name} answers for another: {check:?}"
                );
            }
        }
        assert_unique(homes, "two hosts share the folder that says one is installed");
        assert_unique(markers, "a field only one host sends is claimed by two");
    }

    /// The table holds one spec per host, each naming its own host, and no two hosts answer to
    /// one name, alias or program.
    #[test]
    fn every_host_has_its_own_spec_and_no_name_is_shared() {
        let mut names: Vec<&str> = Vec::new();
        let mut programs: Vec<&str> = Vec::new();
        for host in Host::ALL {
            let spec = host.spec();
            assert_eq!(spec.host, *host, "{}'s spec names another host", spec.name);
            names.push(spec.name);
            names.extend(spec.aliases);
            programs.push(spec.program);
            assert!(!spec.name.is_empty() && !spec.program.is_empty() && !spec.typed_prompt_field.is_empty());
            assert!(
                spec.failure_hook_runner.is_none() || spec.hook_runner.is_some(),
                "{}: a failure hook's runner without a Stop hook's",
                spec.name
            );
        }
        assert_unique(names, "a name or alias is shared");
        assert_unique(programs, "a program is shared");
    }

    /// Fails, saying `what`, when `items` holds one item twice.
    fn assert_unique<T: Ord + std::fmt::Debug>(mut items: Vec<T>, what: &str) {
        let all = items.len();
        items.sort();
        items.dedup();
        assert_eq!(items.len(), all, "{what}: {items:?}");
    }

    #[test]
    fn names_round_trip() {
        for host in Host::ALL {
            assert_eq!(Host::from_name(host.name()), Some(*host));
            assert_eq!(serde_json::to_string(host).unwrap(), format!("\"{}\"", host.name()));
        }
        assert_eq!(Host::from_name("agy"), Some(Host::Antigravity));
        assert_eq!(Host::from_name("gemini"), Some(Host::GeminiCli));
        assert_eq!(Host::from_name("vim"), None);
        assert_eq!(Host::from_name("qwen"), Some(Host::QwenCode));
        assert_eq!(
            Host::names(),
            "claude-code, antigravity, gemini-cli, codex, cursor, copilot-cli, opencode, qwen-code"
        );
    }

    #[test]
    fn guesses_from_unique_fields_only() {
        let guess = |text: &str| Host::guess(&parse_object(text.as_bytes()).unwrap());
        assert_eq!(guess(r#"{"hook_event_name":"AfterAgent","session_id":"s"}"#), Host::GeminiCli);
        assert_eq!(guess(r#"{"hook_event_name":"stop","loop_count":0}"#), Host::Cursor);
        assert_eq!(guess(r#"{"conversationId":"c","fullyIdle":true}"#), Host::Antigravity);
        assert_eq!(guess(r#"{"common":{},"stop_hook_args":{}}"#), Host::Antigravity);
        assert_eq!(guess(r#"{"sessionId":"s","stopReason":"end_turn"}"#), Host::CopilotCli);
        assert_eq!(guess(r#"{"hook_event_name":"Stop","turn_id":"t"}"#), Host::Codex);
        assert_eq!(guess(r#"{"hook_event_name":"Stop","session_id":"s"}"#), Host::ClaudeCode);
        assert_eq!(guess(r#"{"opencode_hook":"event","event":{}}"#), Host::Opencode);
        assert_eq!(guess(r#"{"hook_event_name":"Stop","session_id":"s","crons":[]}"#), Host::QwenCode);
    }

    /// Every adapter, fed every other host's turn end, refuses it as foreign.
    #[test]
    fn every_adapter_refuses_every_other_hosts_payload() {
        let samples = [
            (
                Host::ClaudeCode,
                r#"{"session_id":"s","cwd":"/p","hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"x","permission_mode":"default"}"#,
            ),
            (
                Host::Antigravity,
                r#"{"conversationId":"c","workspacePaths":["/p"],"executionNum":1,"terminationReason":"model_stop","fullyIdle":true}"#,
            ),
            (
                Host::GeminiCli,
                r#"{"session_id":"s","cwd":"/p","hook_event_name":"AfterAgent","prompt":"x","prompt_response":"y","stop_hook_active":false}"#,
            ),
            (
                Host::Cursor,
                r#"{"conversation_id":"c","generation_id":"g","hook_event_name":"stop","status":"completed","loop_count":0,"workspace_roots":["/p"],"cursor_version":"3.17.19"}"#,
            ),
            (Host::CopilotCli, r#"{"sessionId":"s","cwd":"/p","stopReason":"end_turn","timestamp":1}"#),
            (
                Host::Opencode,
                r#"{"opencode_hook":"event","directory":"/p","event":{"type":"session.idle","properties":{"sessionID":"ses_1"}}}"#,
            ),
            (
                Host::QwenCode,
                r#"{"session_id":"s","cwd":"/p","hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"x","background_tasks":[],"crons":[],"context_usage":0.1,"context_limit":200000}"#,
            ),
        ];
        for host in Host::ALL {
            for (sender, text) in samples {
                let object = parse_object(text.as_bytes()).unwrap();
                let parsed = host.parse_stop(&object);
                // Claude Code and Codex send the same Stop shape; Codex's has a turn_id.
                let same = sender == *host || (sender == Host::ClaudeCode && *host == Host::Codex);
                if sender == *host {
                    assert!(parsed.is_ok(), "{} refused its own payload: {parsed:?}", host.name());
                } else if !same {
                    assert!(
                        matches!(parsed, Err(EventError::Foreign(_))),
                        "{} took a {} payload: {parsed:?}",
                        host.name(),
                        sender.name()
                    );
                }
            }
        }
    }

    /// Every adapter's allow is something its host reads as "let it stop": never a block, never
    /// a shape the host counts as a failed hook.
    #[test]
    fn plain_allows() {
        let allow = HookResponse::allow();
        let expected = [
            (Host::ClaudeCode, ""),
            (Host::Antigravity, r#"{"decision":"stop"}"#),
            (Host::GeminiCli, r#"{"decision":"allow"}"#),
            (Host::Codex, ""),
            (Host::Cursor, "{}"),
            (Host::CopilotCli, "{}"),
            (Host::Opencode, "{}"),
            (Host::QwenCode, ""),
        ];
        for (host, output) in expected {
            assert_eq!(host.render(&allow), output, "{}", host.name());
        }
    }
}
