//! One adapter per host: its Stop event into a [`crate::host::event::StopEvent`], and an answer
//! into the JSON it reads, and its [`spec::HostSpec`]: what the host can do, in one table.
//! Nothing outside `host/` sees which host it talks to.

pub(crate) mod codex_trust;
pub(crate) mod spec;

use serde::{Deserialize, Serialize};

use self::spec::HostSpec;

/// Declares the hosts from one list: each line a variant of [`Host`] and its adapter's module
/// (`adapter/<module>.rs`, which declares the host's `SPEC`), the first the default. The
/// variants, the modules and the table of specs [`Host::spec`] reads are made from the same
/// lines, so that none can be added without the others.
macro_rules! hosts {
    (
        $(#[$first_meta:meta])* $first:ident => $first_module:ident,
        $($(#[$meta:meta])* $variant:ident => $module:ident,)*
    ) => {
        pub(in crate::host) mod $first_module;
        $(pub(in crate::host) mod $module;)*

        /// Serialized by [`Host::name`] (`claude-code`, `gemini-cli`, ...), as state files store it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub(crate) enum Host {
            $(#[$first_meta])*
            #[default]
            $first,
            $($(#[$meta])* $variant,)*
        }

        /// Every adapter's spec, in the order of [`Host`]'s variants.
        pub(in crate::host) const SPECS: &[&HostSpec] = &[&$first_module::SPEC, $(&$module::SPEC,)*];
    };
}

// Adding a host: its adapter file, and its line here.
hosts! {
    ClaudeCode => claude_code,
    /// Google Antigravity 2.x: the `agy` CLI, the IDE and the desktop app share one contract.
    Antigravity => antigravity,
    GeminiCli => gemini_cli,
    Codex => codex,
    Cursor => cursor,
    CopilotCli => copilot_cli,
    /// opencode: its plugin passes session events, commands and tool calls to the hook.
    Opencode => opencode,
    /// Qwen Code 0.24: a fork of Gemini CLI whose hooks take Claude Code's shape (`Stop`,
    /// `UserPromptSubmit`).
    QwenCode => qwen_code,
}
