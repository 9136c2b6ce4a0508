//! The one integration-test binary. Each module holds one area:
//!
//! - `cli`: `loop-hook` commands as a user or a slash command runs them (start, cancel, status).
//! - `stop_hook`: Stop events piped into the binary, and the JSON it answers.
//! - `guard`: PreToolUse events and the guard's deny JSON.
//! - `faults`: bad input and broken surroundings; every one must allow the stop with a message.
//! - `claude_code`: the real Claude Code CLI with this plugin, driven by a scripted model.
//! - `hosts`: every other host: recorded payloads, foreign and malformed events, loops claimed by
//!   their transcript, and the real Gemini CLI and Codex CLIs with the packaging under `plugin/`.
//! - `demo`: `scripts/demo` run end to end, so it cannot rot.

mod util;

mod claude_code;
mod cli;
mod demo;
mod faults;
mod guard;
mod hosts;
mod stop_hook;
