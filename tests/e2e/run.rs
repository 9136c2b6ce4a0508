//! `loop-hook run`, the fresh-context driver, with the real agent CLIs as its agents, driven by
//! the scripted model: every iteration is a new session, judged by verify.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use mock_model::{Agent, MockModel, Script};
use serde_json::Value;

use super::run_text;
use crate::util::{TestEnv, client_bin};

/// `loop-hook run ARGS` in `env`'s project, with `cli` first on PATH and `agent`'s variables
/// pointing it at `model`.
fn run_command(env: &TestEnv, model: &MockModel, agent: Agent<'_>, cli: &Path, args: &[&str]) -> Command {
    let mut cmd =
        model.agent_command(Path::new(env!("CARGO_BIN_EXE_loop-hook")), agent, &env.home, &["loop-hook"]);
    let mut path = OsString::from(cli.parent().unwrap());
    path.push(":");
    path.push(mock_model::path_without(&["loop-hook", "claude", "gemini", "codex"]));
    cmd.env("PATH", path).arg("run").args(args).current_dir(&env.project);
    cmd
}

fn run_sessions(env: &TestEnv) -> Vec<String> {
    std::fs::read_dir(env.store().join("sessions"))
        .map(|dir| dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// Claude Code as the agent: the first run is held by a rate limit (waited out, not an
/// iteration), iteration 1 claims done without fixing, iteration 2 is a fresh session (its
/// request carries nothing of the first) that fixes it; verified in 2 iterations with a receipt.
#[test]
fn run_with_claude_code_is_fresh_each_iteration_and_waits_out_a_rate_limit() {
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let config = env.home.join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let fixed = env.project.join("fixed");
    let model = MockModel::start(
        Script::new()
            .error(429, Some(1))
            .text("I have finished the task.")
            .write(fixed.to_str().unwrap(), "ok\n")
            .text("Fixed it."),
    )
    .unwrap();
    let cmd = run_command(
        &env,
        &model,
        Agent::ClaudeCode { config_dir: &config },
        &claude,
        &[
            "create the file named fixed",
            "--verify",
            "sh check.sh",
            "--max-iterations",
            "5",
            "--backoff",
            "1s",
        ],
    );
    let (stdout, stderr) = run_text(cmd, "loop-hook run", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    let requests = model.main_requests();
    // The limited run, iteration 1's claim, iteration 2's edit and its final text.
    assert_eq!(requests.len(), 4, "{dump}");
    // Iteration 2's first request: one user message, the re-injected task with verify's output.
    let fresh = &requests[2];
    let messages = fresh.body["messages"].as_array().unwrap();
    let roles: Vec<&str> =
        messages.iter().filter_map(|m| m["role"].as_str()).filter(|r| *r != "system").collect();
    assert_eq!(roles, ["user"], "iteration 2 carried an earlier conversation: {messages:?}");
    let said = fresh.body.to_string();
    assert!(!said.contains("I have finished the task"), "{said}");
    assert!(said.contains("FAIL: fixed is missing") && said.contains("iteration 2 of 5"), "{said}");
    assert!(said.contains("progress.md"), "the progress file is not shown: {said}");
    assert!(stdout.contains("Verified") || stdout.contains("verified"), "{dump}");
    assert!(stderr.contains("hit a limit") && stderr.contains("not counted"), "{dump}");
    let sessions = run_sessions(&env);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(sessions[0].starts_with("run-"));
    assert_eq!(env.ledger_reasons(&sessions[0]), ["agent_limited", "verify_failed", "verified"], "{dump}");
    let last: Value = env.ledger_of(&sessions[0]).pop().unwrap();
    assert_eq!(last["iteration"], 2);
    assert!(fixed.exists());
    let logs = env.session_dir(&sessions[0]).join("logs");
    for log in ["iteration-1.jsonl", "iteration-1-retry-1.jsonl", "iteration-2.jsonl"] {
        assert!(logs.join(log).exists(), "no {log}: {dump}");
    }
}
