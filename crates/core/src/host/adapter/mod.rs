//! One adapter per host: its Stop event into a [`crate::host::event::StopEvent`], and an answer
//! into the JSON it reads, and its [`spec::HostSpec`]: what the host can do, in one table.
//! Nothing outside `host/` sees which host it talks to.

pub(in crate::host) mod antigravity;
pub(in crate::host) mod claude_code;
pub(in crate::host) mod codex;
pub(crate) mod codex_trust;
pub(in crate::host) mod copilot_cli;
pub(in crate::host) mod cursor;
pub(in crate::host) mod gemini_cli;
pub(in crate::host) mod opencode;
pub(in crate::host) mod qwen_code;
pub(crate) mod spec;
