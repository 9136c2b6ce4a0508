//! `loop-hook run`, the fresh-context driver, with the real agent CLIs as its agents, driven by
//! the scripted model: every iteration is a new session, judged by verify.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use mock_model::{Agent, Api, MockModel, Recorded, Script, Step};
use serde_json::Value;

use super::gemini_cli::gemini_settings;
use super::run_text;
use crate::util::{TestEnv, client_bin};

mod backlog;
mod hostile;

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

/// Claude Code as the agent: a rate limit (Claude Code's retries are off) is waited out and not
/// counted; iteration 2 is a fresh session that fixes what iteration 1 only claimed.
#[test]
fn run_with_claude_code_is_fresh_each_iteration_and_waits_out_a_rate_limit() {
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    // Outside /tmp, which the run's sandbox leaves writable: the home is read-only, as yours is.
    let env = TestEnv::outside_tmp();
    let config = env.home.join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let limit = Step::Error { status: 429, retry_after: Some(1) };
    let before = files_of(&config);
    assert_fresh_run_survives_a_limit(&env, Agent::ClaudeCode { config_dir: &config }, &claude, limit, &[]);
    // In the sandbox Claude Code wrote its sessions and settings to a private copy.
    assert_eq!(files_of(&config), before, "Claude Code wrote the user's own settings directory");
}

/// Every file under `dir`, with its content, in order.
fn files_of(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(next) = dirs.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    files.sort();
    files
}

/// The roles of the turns a model request carries, without system and developer text: a fresh
/// session's first request has only the user's.
fn turn_roles(request: &Recorded) -> Vec<String> {
    let turns = match request.api {
        Api::Messages | Api::ChatCompletions => &request.body["messages"],
        Api::Gemini => &request.body["contents"],
        Api::Responses => &request.body["input"],
    };
    turns
        .as_array()
        .into_iter()
        .flatten()
        .map(|turn| turn["role"].as_str().or(turn["type"].as_str()).unwrap_or("?").to_string())
        .filter(|role| role != "system" && role != "developer")
        .collect()
}

/// `loop-hook run` on the task "create the file named fixed" in `env` with `cli` as the agent,
/// against a model whose first answer is `limit`, whose iteration 1 claims done without fixing,
/// and whose iteration 2 writes the file. Asserts what every agent must show: the limit waited
/// out and not counted, iteration 2 a fresh session (its request carries nothing of the first),
/// verified in 2 iterations with a receipt and a log per agent run.
fn assert_fresh_run_survives_a_limit(
    env: &TestEnv,
    agent: Agent<'_>,
    cli: &Path,
    limit: Step,
    extra: &[&str],
) {
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let fixed = env.project.join("fixed");
    let model = MockModel::start(
        [limit, Step::Text("I have finished the task.".into())]
            .into_iter()
            .collect::<Script>()
            .write(fixed.to_str().unwrap(), "ok\n")
            .text("Fixed it."),
    )
    .unwrap();
    if let Agent::Codex { codex_home } = agent {
        std::fs::create_dir_all(codex_home).unwrap();
        std::fs::write(codex_home.join("config.toml"), model.codex_config()).unwrap();
    }
    let mut args = vec![
        "create the file named fixed",
        "--verify",
        "sh check.sh",
        "--max-iterations",
        "5",
        "--backoff",
        "1s",
    ];
    args.extend_from_slice(extra);
    let cmd = run_command(env, &model, agent, cli, &args);
    let (stdout, stderr) = run_text(cmd, "loop-hook run", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    assert!(stderr.starts_with("for-loop: sandbox: bubblewrap"), "bubblewrap must be installed: {dump}");
    let requests = model.main_requests();
    // The limited run, iteration 1's claim, iteration 2's edit and its final text.
    assert_eq!(requests.len(), 4, "{dump}");
    assert_eq!(model.exhausted_requests(), 0, "{dump}");
    let fresh = &requests[2];
    let roles = turn_roles(fresh);
    assert!(
        !roles.is_empty() && roles.iter().all(|role| role == "user"),
        "iteration 2 carried an earlier conversation: {roles:?}\n{}",
        fresh.body
    );
    let said = fresh.body.to_string();
    assert!(!said.contains("I have finished the task"), "{said}");
    assert!(said.contains("FAIL: fixed is missing") && said.contains("iteration 2 of 5"), "{said}");
    assert!(said.contains("progress.md"), "the progress file is not shown: {said}");
    assert!(stdout.contains("erified"), "{dump}");
    assert!(stderr.contains("hit a limit") && stderr.contains("not counted"), "{dump}");
    let sessions = run_sessions(env);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(env.ledger_reasons(&sessions[0]), ["agent_limited", "verify_failed", "verified"], "{dump}");
    let last: Value = env.ledger_of(&sessions[0]).pop().unwrap();
    assert_eq!(last["iteration"], 2);
    assert!(fixed.exists());
    let logs = env.session_dir(&sessions[0]).join("logs");
    for log in ["iteration-1.jsonl", "iteration-1-retry-1.jsonl", "iteration-2.jsonl"] {
        assert!(logs.join(log).exists(), "no {log}: {dump}");
    }
}

/// `loop-hook run --plan` with Claude Code: each story gets a fresh session whose prompt is that
/// story alone; a claim without the file is not a pass; for-loop ticks each story's box in the
/// user's plan as it passes.
#[test]
fn run_with_claude_code_works_a_plan_one_fresh_session_per_story() {
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    let env = TestEnv::outside_tmp();
    let plan = "# Two files\n\n- [ ] Write a\n  verify: test -f a\n- [ ] Write b\n  verify: test -f b\n";
    env.write("PLAN.md", plan);
    let config = env.home.join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let (a, b) = (env.project.join("a"), env.project.join("b"));
    let model = MockModel::start(
        Script::new()
            .text("Both are written.")
            .write(a.to_str().unwrap(), "a\n")
            .text("Wrote a.")
            .write(b.to_str().unwrap(), "b\n")
            .text("Wrote b."),
    )
    .unwrap();
    let args = ["--plan", "PLAN.md", "--max-iterations", "5"];
    let cmd = run_command(&env, &model, Agent::ClaudeCode { config_dir: &config }, &claude, &args);
    let (stdout, stderr) = run_text(cmd, "loop-hook run --plan", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    assert!(stderr.starts_with("for-loop: sandbox: bubblewrap"), "bubblewrap must be installed: {dump}");
    let requests = model.main_requests();
    assert_eq!(requests.len(), 5, "{dump}");
    assert_eq!(model.exhausted_requests(), 0, "{dump}");
    let (second, third) = (&requests[1], &requests[3]);
    for fresh in [second, third] {
        let roles = turn_roles(fresh);
        assert!(roles.iter().all(|role| role == "user"), "not a fresh session: {roles:?}");
    }
    let said = second.last_user_text().unwrap_or_default();
    assert!(said.contains("`test -f a` exits 0 for the current story"), "{said}");
    assert!(!second.body.to_string().contains("Both are written"), "{said}");
    let said = third.last_user_text().unwrap_or_default();
    assert!(said.contains("Now: story 2 of 2: 2. Write b"), "{said}");
    assert!(!third.body.to_string().contains("Wrote a."), "{said}");
    let sessions = run_sessions(&env);
    assert_eq!(env.ledger_reasons(&sessions[0]), ["verify_failed", "story_verified", "verified"], "{dump}");
    let ticked = plan.replace("- [ ] Write", "- [x] Write");
    assert_eq!(std::fs::read_to_string(env.project.join("PLAN.md")).unwrap(), ticked, "{dump}");
}

/// Gemini CLI as the agent: a daily quota (which Gemini CLI does not retry) is waited out and
/// not counted; iteration 2 is a fresh session that fixes what iteration 1 only claimed.
#[test]
fn run_with_gemini_cli_is_fresh_each_iteration_and_waits_out_a_daily_quota() {
    let gemini = client_bin("gemini", "FOR_LOOP_GEMINI");
    // Outside /tmp, which the run's sandbox leaves writable: the home is read-only, as yours is.
    let env = TestEnv::outside_tmp();
    gemini_settings(&env);
    let limit = Step::UsageLimit { resets_in: 1 };
    assert_fresh_run_survives_a_limit(&env, Agent::GeminiCli, &gemini, limit, &["--agent", "gemini"]);
}

/// Codex as the agent, under its default `workspace-write` sandbox: a usage-window limit
/// (`usage_limit_reached`, told as a local reset time) is waited out and not counted; iteration 2
/// is a fresh session that fixes what iteration 1 only claimed.
#[test]
fn run_with_codex_is_fresh_each_iteration_and_waits_out_a_usage_limit() {
    let codex = client_bin("codex", "FOR_LOOP_CODEX");
    // Codex's sandbox will not set itself up under /tmp: see e2e::codex.
    let env = TestEnv::outside_tmp();
    let codex_home = env.home.join("codex-home");
    let limit = Step::UsageLimit { resets_in: 1 };
    assert_fresh_run_survives_a_limit(
        &env,
        Agent::Codex { codex_home: &codex_home },
        &codex,
        limit,
        &["--agent", "codex"],
    );
}

/// Best of two attempts with Claude Code as the agent: attempt 1 claims done without fixing and
/// ends at its cap, attempt 2 (a fresh session in a work tree of its own) fixes it and wins; the
/// user's tree changes only with `run --apply`.
#[test]
fn run_best_of_two_attempts_with_claude_code_only_the_second_verifies() {
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    for args in [&["init", "-q"][..], &["add", "check.sh"], &["commit", "-qm", "init"]] {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgSign=false"])
            .args(args)
            .current_dir(&env.project)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let config = env.home.join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let model = MockModel::start(
        Script::new().text("I have finished the task.").bash("touch fixed").text("Fixed it."),
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
            "1",
            "--attempts",
            "2",
            "--agent-arg",
            "--permission-mode",
            "--agent-arg",
            "acceptEdits",
            "--agent-arg",
            "--allowedTools",
            "--agent-arg",
            "Bash(touch fixed)",
        ],
    );
    let (stdout, stderr) = run_text(cmd, "loop-hook run --attempts 2", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    assert!(stdout.contains("attempt 2 of 2 verified first"), "{dump}");
    let requests = model.main_requests();
    // Attempt 1's claim; attempt 2's command and its final text.
    assert_eq!(requests.len(), 3, "{dump}");
    assert_eq!(turn_roles(&requests[1]), ["user"], "attempt 2 carried attempt 1's conversation");
    assert!(!requests[1].body.to_string().contains("I have finished the task"), "{dump}");
    // Claude Code tells the model its working directory: each attempt's own work tree.
    let trees = env.store().join("worktrees");
    for (request, n) in [(&requests[0], 1), (&requests[2], 2)] {
        let said = request.body.to_string();
        let prefix = format!("{}/", trees.display());
        let name: Option<String> = said.find(&prefix).map(|at| {
            said[at + prefix.len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect()
        });
        assert!(
            name.as_deref().is_some_and(|name| name.ends_with(&format!("-{n}"))),
            "attempt {n} not in its work tree ({name:?}): {said}"
        );
    }
    assert!(!env.project.join("fixed").exists(), "an attempt wrote in the user's tree");
    let mut sessions = run_sessions(&env);
    sessions.sort();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(env.ledger_reasons(&sessions[0]), ["cap_reached"], "{dump}");
    assert_eq!(env.ledger_reasons(&sessions[1]), ["verified"], "{dump}");

    let applied = env.run(&["run", "--apply"], b"");
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    assert!(env.project.join("fixed").exists(), "{}", applied.stdout);
}
