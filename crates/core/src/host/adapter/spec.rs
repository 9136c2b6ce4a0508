//! A host as a table: what each adapter declares about its host, read by [`Host`]'s methods.
//! Adding a host is one adapter file with its [`HostSpec`], a variant, its `mod` line and its
//! line in the array of specs in `host/mod.rs` (which [`Host::ALL`] is built from); the rest of
//! the engine, doctor included, asks the host what it can do and never learns which one it is.

use std::path::Path;

use serde_json::{Map, Value};

use crate::host::config_watch::Watched;
use crate::host::event::{EventError, Fields, StopEvent, TurnFailure};
use crate::host::hook_response::HookResponse;
use crate::host::install::Install;
use crate::host::origin::HookRunner;
use crate::host::user_command::{self, TypedCommands};
use crate::host::{Commands, Host};
use crate::support::Environment;

/// Everything for-loop knows about one host, as its adapter declares it. The doc of each field is
/// on the [`Host`] method that reads it.
// The yes-or-no facts are a table's columns, each read by its own method; a state machine of
// them would hide what a host can do.
#[allow(clippy::struct_excessive_bools)]
pub(crate) struct HostSpec {
    pub(crate) host: Host,
    /// As `--host` takes it and state files store it (`claude-code`).
    pub(crate) name: &'static str,
    /// Other spellings people type: the host's executable names.
    pub(crate) aliases: &'static [&'static str],
    /// The program on `PATH` that says the host is installed here.
    pub(crate) program: &'static str,
    pub(crate) tells_commands_the_session: bool,
    pub(crate) has_prompt_hook: bool,
    pub(crate) keeps_claude_transcript: bool,
    pub(crate) transcript_records_usage: bool,
    pub(crate) sends_last_message: bool,
    pub(crate) offers_strict_tier: bool,
    pub(crate) caps_blocks_in_a_row: bool,
    pub(crate) resubmits_block_reason_as_prompt: bool,
    pub(crate) prompt_hook_answers_in_place: bool,
    pub(crate) skips_untrusted_hooks: bool,
    pub(crate) prompt_hook_replaces_the_command: bool,
    pub(crate) prompt_hook_adds_context: bool,
    pub(crate) typed_prompt_field: &'static str,
    /// The command names the user types, as the prompt hook receives them.
    pub(crate) typed_commands: TypedCommands,
    /// Fields only this host sends: every other adapter refuses a payload holding one.
    pub(crate) markers: Option<Markers>,
    /// Whether a payload is surely this host's, from fields only it sends: the guess for a hook
    /// line that names no host. `None` for the default host, which is guessed when no other is.
    pub(crate) looks_like: Option<fn(&Fields) -> bool>,
    pub(crate) agent_shell_marker: Option<&'static str>,
    /// Reads the cap of blocks in a row the user sets for this host, where they can.
    pub(crate) settable_block_cap: Option<fn(&Environment, &Path) -> u32>,
    /// Reads the host's cap of quiet blocks in a row, and what sets it.
    pub(crate) quiet_block_cap: Option<QuietBlockCap>,
    pub(crate) commands: Commands,
    pub(crate) handoff_command: Option<&'static str>,
    pub(crate) hook_runner: Option<HookRunner>,
    pub(crate) failure_hook_runner: Option<HookRunner>,
    /// What this host reads that decides whether for-loop runs; `None` where it is not watched.
    pub(crate) watched: Option<fn(&Environment, &Path) -> Vec<Watched>>,
    pub(crate) parse_stop: fn(&Map<String, Value>) -> Result<StopEvent, EventError>,
    pub(crate) parse_failure: fn(&Map<String, Value>, jiff::Timestamp) -> FailureRead,
    pub(crate) parse_compacted: fn(&Map<String, Value>) -> CompactionRead,
    pub(crate) render: fn(&HookResponse) -> String,
    /// The answer to a session's start that adds text to the agent's context, where the host
    /// takes one.
    pub(crate) render_session_context: Option<fn(&str) -> String>,
    /// What `loop-hook doctor` checks of the host's installation, and where it looks.
    pub(crate) install: Install,
}

/// What reading a turn-end event as a failed turn gives: `None` when it is no failure report.
impl HostSpec {
    /// A host that can do none of the optional things: no prompt hook, no transcript of Claude
    /// Code's shape, no cap, no watch, commands as skills, no turn failures or compactions read.
    /// Each adapter names what its host does beyond this (`..HostSpec::of(...)`), so its spec
    /// lists only what sets it apart.
    pub(crate) const fn of(
        host: Host,
        name: &'static str,
        program: &'static str,
        parse_stop: fn(&Map<String, Value>) -> Result<StopEvent, EventError>,
        render: fn(&HookResponse) -> String,
        install: Install,
    ) -> HostSpec {
        HostSpec {
            host,
            name,
            aliases: &[],
            program,
            tells_commands_the_session: false,
            has_prompt_hook: false,
            keeps_claude_transcript: false,
            transcript_records_usage: false,
            sends_last_message: false,
            offers_strict_tier: false,
            caps_blocks_in_a_row: false,
            resubmits_block_reason_as_prompt: false,
            prompt_hook_answers_in_place: false,
            skips_untrusted_hooks: false,
            prompt_hook_replaces_the_command: false,
            prompt_hook_adds_context: false,
            typed_prompt_field: "prompt",
            typed_commands: user_command::NAMESPACED,
            markers: None,
            looks_like: None,
            agent_shell_marker: None,
            settable_block_cap: None,
            quiet_block_cap: None,
            commands: Commands::SKILLS,
            handoff_command: None,
            hook_runner: None,
            failure_hook_runner: None,
            watched: None,
            parse_stop,
            parse_failure: no_failure,
            parse_compacted: no_compaction,
            render,
            render_session_context: None,
            install,
        }
    }
}

pub(crate) type FailureRead = Option<Result<TurnFailure, EventError>>;

/// What reading a session's start gives: the session that was compacted, if it was.
pub(crate) type CompactionRead = Result<Option<String>, EventError>;

/// The fields only one host sends, and what a payload holding one is, for the refusal.
#[derive(Clone, Copy)]
pub(crate) struct Markers {
    pub(crate) fields: &'static [&'static str],
    /// `a Cursor event`.
    pub(crate) what: &'static str,
}

/// A host's cap of Stop blocks in a row in which the agent called no tool.
#[derive(Clone, Copy)]
pub(crate) struct QuietBlockCap {
    /// The cap in force for a hook with this environment; `None` where it is off.
    pub(crate) read: fn(&Environment) -> Option<u32>,
    /// What sets it, for the words that tell the user how to raise it.
    pub(crate) setting: &'static str,
}

/// For a host that reports no turn that ended on an error.
pub(crate) fn no_failure(_: &Map<String, Value>, _: jiff::Timestamp) -> FailureRead {
    None
}

/// For a host that tells nothing of a compacted conversation. The `Result` is the table's
/// column type: another host's reader can fail.
#[allow(clippy::unnecessary_wraps)]
pub(crate) fn no_compaction(_: &Map<String, Value>) -> CompactionRead {
    Ok(None)
}
