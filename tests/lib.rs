//! The one integration-test binary. Each module holds one area:
//!
//! - `cli`: `loop-hook` commands as a user or a slash command runs them (start, cancel, status).
//! - `doctor`: `loop-hook doctor` on fake homes of each host, one silent failure at a time.
//! - `stop_hook`: Stop events piped into the binary, and the JSON it answers.
//! - `guard`: `PreToolUse` events and the guard's deny JSON.
//! - `faults`: bad input, broken surroundings and tampering with the loop's own files; each is
//!   undone with the loop going on, or allows the stop with a message.
//! - `hosts`: every other host: recorded payloads, foreign and malformed events, loops claimed by
//!   their transcript, and the hook commands of the packaging under `plugin/`.
//! - `packaging`: every host's hook configuration, generated from one source, and the launcher
//!   that finds the binary, run as each host runs it.
//! - `layers`: the engine's layers: imports run downwards only, no import cycles, no IO in
//!   `verdict` (the rules of docs/architecture.md).
//! - `release_workflow`: the release workflow, validated against the GitHub workflow schema.
//! - `attempts_workflow`: the best-of-K workflow example (docs/ci), validated against the schema
//!   and run job by job as a runner runs it, against a bare repository standing in for GitHub.
//! - `latest_clients`: `scripts/test-latest-clients` (the end-to-end tests against the newest
//!   published agent CLIs), offline with a stand-in cargo, and the weekly workflow that runs it.
//! - `stress`: many sessions' stops at once with hooks killed at random moments.
//! - `properties`: arbitrary bytes as event, state and transcript, for every host.
//! - `red_team`: attacks a hostile model would try, each sent past the guard: held or reported,
//!   never silent, except the limits docs/integrity.md names.
//! - `check_programs`: what the check runs from outside the project (a `python3` first on
//!   `PATH`, a `.pth` in the user's site-packages), planted and refused by name.
//! - `rhythms`: real agents' rhythms as Stop events: stops while the session's background work
//!   runs, the host's cap of blocks without a tool call, Qwen Code's background agents.
//! - `runners`: real test suites (cargo, pytest, unittest, node --test) behind a loop's check.
//! - `e2e`: the real Claude Code, Gemini CLI and Codex CLIs, driven by a scripted model, and the
//!   demo. `FOR_LOOP_SKIP_E2E=1 scripts/test` leaves exactly this module out.
//! - `strict`: the strict tier: which tier a loop is in and why, `--require-strict`, and verify
//!   run in its own sandbox.
//! - `handoff`: a session's loop handed over to `loop-hook run` with a stand-in agent CLI: one
//!   ledger, the session's stops let through, one driver at a time, and each bad input refused.
//! - `run_driver`: `loop-hook run` with a stand-in agent CLI: Ctrl-C, resume, failures, `--json`.
//! - `backlog_fleet`: a backlog across machines, simulated with a bare repository: the Actions
//!   workflow's task jobs and its merge job, which trusts no claim.
//! - `run_backlog`: `loop-hook run --backlog` with a stand-in agent CLI: tasks at once, the merge
//!   queue's conflicts and broken checks, apply, resume, and bad backlogs refused.
//! - `run_fleet`: best of K across machines, simulated with a bare repository and one clone
//!   per machine: attempts pushed, one lying and one killed, and the pick that re-checks them.
//! - `report`: `loop-hook report`'s HTML page, its structure, hostile text, and the page as
//!   headless Chromium loads, shows and prints it.
//! - `tokens`: `--max-tokens` on a Claude Code transcript that grows while the loop runs.
//! - `notify`: `--notify` commands that work, fail, hang or flood their output.
//! - `plan`: `--plan` loops over a Markdown checklist and a prd.json, and plans refused at start.
//! - `review`: `--review` scripts that veto, approve, flood or hang, on a git project's check.
//! - `scope`: `--scope` and a story's `scope:`: passes outside the scope that do not count, new
//!   files, a story's own start, a metric attempt rolled back, and bad scopes refused.
//! - `docs`: the README and docs/: links and anchors resolve, the README stays short, and every
//!   `loop-hook` subcommand and flag they show exists.
//! - `windows`: Claude Code's events as Windows sends them, verify commands for `cmd.exe`, and
//!   the hook commands through Git Bash and PowerShell.
//! - `origin`: who sent a hook event, told from a real process tree: a stand-in host's hook
//!   runner and its tool shell, plain, `exec`ed and left behind (Linux).
//! - `windows_workflow`: the windows workflow, validated against the schema, running what
//!   `scripts/test-windows` runs under Wine.
//!
//! On Windows (natively, or under Wine by `scripts/test-windows`) this binary holds `docs`,
//! `layers` and `windows` only. Every other module is `cfg(unix)`: its checks are POSIX shell
//! scripts run by `/bin/sh`, and it uses Unix file modes and symlinks, git, bubblewrap, pgrep or
//! the agent CLIs installed for Linux. The Windows behaviour they would cover (the Stop, prompt
//! and guard hooks, plans, verify's runner) is what `windows` tests with Windows commands.

// On Windows most of its helpers serve modules that are not built there.
#[cfg_attr(windows, allow(dead_code, unused_imports))]
mod util;

#[cfg(unix)]
mod attempts_workflow;
#[cfg(unix)]
mod backlog_fleet;
#[cfg(unix)]
mod check_programs;
#[cfg(unix)]
mod cli;
mod docs;
#[cfg(unix)]
mod doctor;
#[cfg(target_os = "linux")]
mod driver_mark;
#[cfg(unix)]
mod e2e;
#[cfg(unix)]
mod faults;
#[cfg(unix)]
mod feedback;
#[cfg(unix)]
mod guard;
#[cfg(unix)]
mod handoff;
#[cfg(unix)]
mod host_config_watch;
#[cfg(unix)]
mod host_config_watch_launch;
#[cfg(unix)]
mod hosts;
#[cfg(unix)]
mod latest_clients;
mod layers;
#[cfg(unix)]
mod metric;
#[cfg(unix)]
mod notify;
#[cfg(target_os = "linux")]
mod origin;
#[cfg(unix)]
mod packaging;
#[cfg(unix)]
mod plan;
#[cfg(unix)]
mod properties;
#[cfg(unix)]
mod red_team;
#[cfg(unix)]
mod release_workflow;
#[cfg(unix)]
mod report;
#[cfg(unix)]
mod review;
#[cfg(unix)]
mod rhythms;
#[cfg(unix)]
mod run_attempts;
#[cfg(unix)]
mod run_backlog;
#[cfg(unix)]
mod run_driver;
#[cfg(unix)]
mod run_fleet;
#[cfg(unix)]
mod runners;
#[cfg(unix)]
mod scope;
#[cfg(unix)]
mod stop_hook;
#[cfg(unix)]
mod store_private;
#[cfg(unix)]
mod stress;
#[cfg(unix)]
mod strict;
#[cfg(unix)]
mod tokens;
#[cfg(windows)]
mod windows;
#[cfg(unix)]
mod windows_workflow;
