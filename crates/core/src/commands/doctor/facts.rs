//! What `loop-hook doctor` found on this machine and in this project, as plain data: the
//! gatherers fill it in, and [`super::lines`] judges it without touching anything.

use std::path::PathBuf;

use crate::host::Host;

/// Everything the checks look at.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// The project doctor was run in (its git top level when it is in git).
    pub project: PathBuf,
    /// The host `--host` named: its checks count even when it looks not installed.
    pub asked: Option<Host>,
    /// The hosts on this machine: their program on `PATH` or their configuration directory.
    pub hosts_found: Vec<Host>,
    pub binary: BinaryFacts,
    pub store: StoreFacts,
    pub claude: Option<ClaudeFacts>,
    pub gemini: Option<GeminiFacts>,
    pub codex: Option<CodexFacts>,
    pub copilot: Option<CopilotFacts>,
    pub cursor: Option<CursorFacts>,
    pub antigravity: Option<AntigravityFacts>,
    pub qwen: Option<QwenFacts>,
    pub tier: TierFacts,
    pub opencode: Option<OpencodeFacts>,
    pub loops: Vec<LoopFact>,
    /// How a judged command's descendants are kept from writing after its exit here.
    pub containment: Option<crate::checks::verify::Containment>,
}

/// A `loop-hook` executable and the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binary {
    pub path: PathBuf,
    /// `None` when it did not say (it failed, or it is not a loop-hook).
    pub version: Option<String>,
}

/// The binaries that could run, and the version they should be.
#[derive(Debug, Clone, Default)]
pub(crate) struct BinaryFacts {
    /// The version this binary is: the one the checks expect of every other.
    pub this_version: String,
    pub this_path: Option<PathBuf>,
    /// The plugin's version, when the plugin's launcher started this run.
    pub launcher_plugin_version: Option<String>,
    /// `$FOR_LOOP_BIN` as set in this environment, and whether it names a file.
    pub for_loop_bin: Option<(String, bool)>,
    /// The first `loop-hook` on `PATH` (absolute entries only, as every lookup reads it).
    pub first_on_path: Option<Binary>,
    /// `${CARGO_HOME:-~/.cargo}/bin/loop-hook`, when it is there.
    pub cargo: Option<Binary>,
    /// The checkout `cargo install --path` built for-loop from, when it still holds the Claude
    /// Code marketplace: the place a user can install the plugin from.
    pub cargo_checkout: Option<PathBuf>,
}

/// What a package's launcher (`scripts/loop-hook`) would run, found as the launcher finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The package's root, holding `scripts/loop-hook`.
    pub root: PathBuf,
    /// The version the launcher announces (`plugin_version=` in it).
    pub plugin_version: Option<String>,
    /// The binary it runs and where it was found (`FOR_LOOP_BIN`, `checkout`, `cargo`,
    /// `shipped`, `PATH`), or why it runs none.
    pub runs: Result<(Binary, &'static str), String>,
}

/// Where the loop store is and whether a hook can write there.
#[derive(Debug, Clone)]
pub(crate) struct StoreFacts {
    pub root: Option<PathBuf>,
    /// `Err`: why a file could not be created there.
    pub writable: Result<(), String>,
}

impl Default for StoreFacts {
    fn default() -> StoreFacts {
        StoreFacts { root: None, writable: Ok(()) }
    }
}

/// A setting that names another binary or store, and the settings file that sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvOverride {
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
pub(crate) struct ClaudeFacts {
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

/// Whether Gemini CLI trusts the project folder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum FolderTrust {
    /// Trusted, and how (`trustedFolders.json` entry, `GEMINI_CLI_TRUST_WORKSPACE`, trust off).
    Trusted(String),
    #[default]
    NotTrusted,
    /// Marked untrusted on purpose (`DO_NOT_TRUST`).
    Distrusted(PathBuf),
}

/// Gemini CLI: the extension and the trusted folders.
#[derive(Debug, Clone, Default)]
pub(crate) struct GeminiFacts {
    pub home: PathBuf,
    /// The installed extension's directory.
    pub extension: Option<PathBuf>,
    pub launch: Option<Launch>,
    /// `Some(false)` when the extension is disabled for this project or everywhere.
    pub enabled: Option<bool>,
    pub trust: FolderTrust,
    pub trusted_folders_file: PathBuf,
}

/// Qwen Code: the extension, the settings that switch hooks off, and the cap of blocked stops.
#[derive(Debug, Clone, Default)]
pub(crate) struct QwenFacts {
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

/// Codex: the plugin, the hooks feature and the trust records.
// Four independent switches of one config file, each a check of its own: a state machine
// would hide which one failed.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Default)]
pub(crate) struct CodexFacts {
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

/// A hook file of Copilot CLI or Cursor that runs for-loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HookFile {
    pub path: PathBuf,
    /// For Cursor: `loop_limit` is `null` or missing a cap below which the loop would end early.
    pub limit: Option<String>,
}

/// Copilot CLI: its hook files.
#[derive(Debug, Clone, Default)]
pub(crate) struct CopilotFacts {
    pub home: PathBuf,
    /// `~/.copilot/hooks/*.json` running for-loop.
    pub user_hook: Option<HookFile>,
    /// `<repo>/.github/hooks/*.json` running for-loop.
    pub repo_hook: Option<HookFile>,
    /// `COPILOT_ALLOW_ALL=true` in this environment, which lets repository hooks load in `-p`.
    pub allow_all: bool,
}

/// Cursor: its hook files.
#[derive(Debug, Clone, Default)]
pub(crate) struct CursorFacts {
    pub home: PathBuf,
    pub user_hook: Option<HookFile>,
    pub project_hook: Option<HookFile>,
}

/// Antigravity: the plugin folder.
#[derive(Debug, Clone, Default)]
pub(crate) struct AntigravityFacts {
    pub plugin_dir: Option<PathBuf>,
    /// Why Antigravity would drop the plugin's hooks.json, if it would.
    pub hooks_problem: Option<String>,
    pub launch: Option<Launch>,
}

/// opencode: the plugin file and the command files.
#[derive(Debug, Clone, Default)]
pub(crate) struct OpencodeFacts {
    /// The user's config folder (`~/.config/opencode`).
    pub config: PathBuf,
    /// for-loop's plugin, in that folder or the project's `.opencode/`.
    pub plugin: Option<PathBuf>,
    /// The command files of for-loop's found in neither folder.
    pub missing_commands: Vec<&'static str>,
}

/// Which tier a Claude Code loop here gets, and what the strict tier lacks.
#[derive(Debug, Clone)]
pub(crate) struct TierFacts {
    /// Claude Code's settings ask for the sandbox strict mode needs; `Err` says what is missing.
    pub sandbox_settings: Result<(), String>,
    /// Why verify cannot be sandboxed here (`None`: bubblewrap works).
    pub bubblewrap: Option<String>,
    /// `socat` is on PATH (Claude Code's sandbox needs it on Linux for its network proxy).
    pub socat: bool,
    pub linux: bool,
}

impl Default for TierFacts {
    /// A machine with every tool, whose Claude Code settings ask for no sandbox.
    fn default() -> TierFacts {
        TierFacts { sandbox_settings: Err("no sandbox".into()), bubblewrap: None, socat: true, linux: true }
    }
}

/// A loop of this project that waits for someone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopFact {
    pub session_id: String,
    pub host: Host,
    pub kind: LoopKind,
    /// Hours since its state last changed.
    pub idle_hours: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoopKind {
    /// Active, but no stop judged for a long time: its session is probably gone.
    Stale,
    /// Parked by a breaker, a budget or Ctrl-C, kept for `resume`.
    Parked,
    /// Started on a host without session ids and never claimed by a conversation.
    Unclaimed,
}
