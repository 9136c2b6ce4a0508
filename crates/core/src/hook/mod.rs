//! The hooks a host runs: the Stop hook, the prompt hook, the `PreToolUse` guard and its reading
//! of shell command lines, and the user's notification command.

pub(crate) mod config_change;
pub(crate) mod copilot_block;
pub(crate) mod guard;
pub(crate) mod guard_host_config;
pub(crate) mod prompt_hook;
pub(crate) mod session_start;
pub(crate) mod shell_command;
pub(crate) mod stop_hook;
pub(crate) mod turn_failure;
