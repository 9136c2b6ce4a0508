//! Where a command line that changes a loop was run from, as far as the host's variables tell:
//! the user's prompt (read by a prompt hook), a terminal, or an agent's shell. What for-loop does
//! about each is [`crate::provenance::origin`]'s business.

use serde::{Deserialize, Serialize};

use crate::support::Environment;

/// Where a loop mutation came from. Written on the mutation's ledger line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Origin {
    /// The user's own prompt, read by the host's prompt hook.
    User,
    /// A shell outside any agent, as far as can be told: the user's terminal, or the agent's
    /// shell with its variables removed.
    Terminal,
    /// A command run inside an agent's shell (a tool call, or a slash command's `!` line on hosts
    /// without a prompt hook).
    Agent,
}

impl Origin {
    /// Where a `loop-hook` command line was run from.
    pub(crate) fn of_command_line(env: &Environment) -> Origin {
        if AGENT_SHELL_VARS.iter().any(|name| env.var(name).is_some()) {
            Origin::Agent
        } else {
            Origin::Terminal
        }
    }

    /// "by the user", "from a terminal", "by the agent", for messages and receipts.
    pub(crate) fn by_whom(self) -> &'static str {
        match self {
            Origin::User => "by the user",
            Origin::Terminal => "from a terminal outside the session",
            Origin::Agent => "by the agent, through its shell",
        }
    }
}

/// Variables the hosts put in the environment of the commands their agent runs.
pub(crate) const AGENT_SHELL_VARS: &[&str] = &[
    // Claude Code: every Bash tool call and `!` line (and hooks, which never mutate through the
    // command line).
    "CLAUDECODE",
    "CLAUDE_CODE_SESSION_ID",
    // Codex: every shell command of the agent.
    "CODEX_THREAD_ID",
    "CODEX_SESSION_ID",
    // Gemini CLI's shell tool.
    "GEMINI_CLI",
    // Copilot CLI's shell tool (1.0.102); its hooks get `COPILOT_CLI` but not this one.
    "COPILOT_AGENT_SESSION_ID",
    // opencode's shell tool (1.18.33). Its plugins' programs get them too, but those are the
    // hooks, which never mutate through the command line.
    "OPENCODE",
    "OPENCODE_PID",
    // Qwen Code's shell tool (0.24.4); its hooks and commands' `!{…}` lines do not get it.
    "QWEN_CODE",
];

/// How a host starts its hooks, as a hook sees it in its own process tree: what
/// [`crate::provenance::ancestry`] tells the host's hook runner from the agent's shell by.
/// Each adapter states its host's, as measured on the real client (docs/integrity.md, "Who sent
/// an event").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HookRunner {
    /// The host's own processes: the kernel's name of each (`comm`) and a word its command line
    /// holds (empty: any), for hosts that run as a generic `node`.
    pub(crate) names: &'static [(&'static str, &'static str)],
    /// Where the host starts a hook.
    pub(crate) session: HookSession,
    /// The hook reads its event from a Unix socket the host process made (Node and Bun hosts),
    /// which no process of the agent's can make.
    pub(crate) stdin_from_host: bool,
    /// The name of the process that is the first (pid 1) of the PID namespace the host runs
    /// the agent's commands in, when it runs them in one (Codex's sandbox).
    pub(crate) tool_sandbox: Option<&'static str>,
}

/// Where a host starts a hook, measured; the agent's tool shell is in a session of its own on
/// every host measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookSession {
    /// The hook leads a session of its own, as a direct child of the host. So does the agent's
    /// tool shell, which the hook is told apart from by its stdin or the tool's sandbox.
    Own,
    /// The hook runs in the host's own session, which no process of the agent's can rejoin.
    Host,
}
