//! End to end with the real agent CLIs pinned in tests/clients, driven offline by the scripted
//! model in `mock-model`, with this repository's packaging loaded as users load it.
//!
//! - `claude_code`: Claude Code with this repository as its plugin.
//! - `demo`: `scripts/demo` run end to end, so it cannot rot.
//! - `gemini_cli`, `codex`, `copilot_cli`: the packaging under `plugin/`, installed the way
//!   users install it.
//! - `opencode`: the plugin under `plugin/opencode`, installed as docs/hosts.md says, in
//!   `opencode serve` driven by `opencode run --attach`.
//! - `handoff`: a Claude Code session's loop handed over to `loop-hook run` with `/for-loop:handoff`.
//! - `reviewer`: Codex and Gemini CLI as the built-in reviewer (`--review codex`, `gemini`).
//! - `install`: the install from a built clone copies only the plugin and runs cargo's binary.
//! - `release`: `scripts/release --local` installed from its marketplace on a machine without Rust.
//! - `qwen_code`: Qwen Code with `plugin/qwen-code` installed as an extension, and its built-in
//!   `/goal` run on the same lying model.
//! - `forge`: the agent sending its own cancel and stop through for-loop's hooks, as each
//!   client's `red_team_origin` tests send them.
//!
//! Every test here needs a real CLI, and a missing one fails the test. `FOR_LOOP_SKIP_E2E=1
//! scripts/test` filters this module out (`e2e::`), so its tests are reported as skipped; CI
//! never sets it.

use std::process::Command;

use crate::util::{TestEnv, run_bounded};

mod claude_code;
mod codex;
mod copilot_cli;
mod demo;
mod forge;
mod gemini_cli;
mod handoff;
mod install;
mod opencode;
mod qwen_code;
mod release;
mod reviewer;
mod run;

/// The shell lines of a host's install in docs/hosts.md: the `sh` block of the section headed
/// `heading`, with the clone's path in place of `/path/to/for-loop`.
pub(crate) fn documented_install(heading: &str) -> Vec<String> {
    let docs = std::fs::read_to_string(crate::util::repo().join("docs/hosts.md")).unwrap();
    let section = docs
        .split(&format!("### {heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("docs/hosts.md has a {heading} section"));
    let block = section.split("```sh\n").nth(1).and_then(|rest| rest.split("```").next());
    let block = block.unwrap_or_else(|| panic!("the {heading} section has an sh block"));
    let lines: Vec<String> = block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| line.replace("/path/to/for-loop", crate::util::repo().to_str().unwrap()))
        .collect();
    assert!(!lines.is_empty(), "no install lines in: {block}");
    lines
}

/// Runs `cmd` with `stdin` to completion within the run limit, returning stdout and stderr.
pub(crate) fn run_text(cmd: Command, what: &str, stdin: &[u8]) -> (String, String) {
    let output = run_bounded(cmd, what, stdin);
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

pub(crate) fn only_session(env: &TestEnv) -> String {
    let sessions: Vec<String> = std::fs::read_dir(env.store().join("sessions"))
        .map(|dir| dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert_eq!(sessions.len(), 1, "expected one loop session, found {sessions:?}");
    sessions[0].clone()
}
