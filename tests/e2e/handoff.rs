//! A loop started in a real Claude Code session, whose session then ends on an API error with the
//! loop still running, handed over with `/for-loop:handoff`: it ends verified under `loop-hook run`
//! (the real CLI again, one fresh session per iteration), with one ledger across both, and the
//! session's next stop is let through saying where the loop went.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mock_model::{Agent, MockModel, Script, Step};
use serde_json::Value;

use crate::util::{TestEnv, client_bin, run_bounded};

const SESSION: &str = "cccccccc-0000-4000-8000-00000000000c";

/// `claude -p PROMPT` in the session, the plugin loaded, with `claude` itself on PATH so the
/// hand-over's `loop-hook run` finds it; returns its stream-json events as one text.
fn claude(env: &TestEnv, model: &MockModel, cli: &Path, config: &Path, prompt: &str, resume: bool) -> String {
    let plugin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("plugin/claude-code");
    let mut cmd: Command =
        model.agent_command(cli, Agent::ClaudeCode { config_dir: config }, &env.home, &["loop-hook"]);
    let mut path = std::ffi::OsString::from(cli.parent().unwrap());
    path.push(":");
    path.push(mock_model::path_without(&["loop-hook"]));
    let session = if resume { "--resume" } else { "--session-id" };
    cmd.args(["-p", prompt, "--output-format", "stream-json", "--verbose", "--include-hook-events"])
        .arg("--plugin-dir")
        .arg(&plugin)
        .args([session, SESSION])
        .env("PATH", path)
        .env("FOR_LOOP_BIN", env!("CARGO_BIN_EXE_loop-hook"))
        .current_dir(&env.project)
        .stdin(Stdio::null());
    let output = run_bounded(cmd, &format!("claude -p {prompt}"), b"");
    format!(
        "{}\n--- stderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn ledger(env: &TestEnv, session: &str) -> Vec<Value> {
    std::fs::read_to_string(env.session_dir(session).join("ledger.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn reasons(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|line| line["reason"].as_str().unwrap()).collect()
}

#[test]
fn a_session_loop_handed_over_ends_verified_under_run_with_one_ledger() {
    let cli = client_bin("claude", "FOR_LOOP_CLAUDE");
    let env = TestEnv::outside_tmp();
    let config = env.home.join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let fixed = env.project.join("fixed");
    let model = MockModel::start(
        [
            // The session: a claim the check refutes, then the API fails the next turn and the
            // session ends with the loop still running.
            Step::Text("I have finished the task.".into()),
            Step::Error { status: 500, retry_after: None },
        ]
        .into_iter()
        .collect::<Script>()
        // The run's fresh session: the fix.
        .write(fixed.to_str().unwrap(), "ok\n")
        .text("Fixed it.")
        // The session again, after the handoff.
        .text("Hello again."),
    )
    .unwrap();
    let started = claude(
        &env,
        &model,
        &cli,
        &config,
        "/for-loop create the file named fixed --verify \"sh check.sh\"",
        false,
    );
    let state = std::fs::read_to_string(env.session_dir(SESSION).join("state.md")).unwrap_or_default();
    assert!(state.contains("status: active") && state.contains("iteration: 2"), "{state}\n{started}");
    let loop_id = state.lines().find_map(|l| l.strip_prefix("loop_id: ")).unwrap().to_string();

    let handed = claude(&env, &model, &cli, &config, "/for-loop:handoff", true);
    let run_id = format!("run-{loop_id}");
    assert!(handed.contains(&format!("handed over to loop-hook run ({run_id})")), "{handed}");
    assert_eq!(model.main_requests().len(), 2, "the handoff never reaches the model: {handed}");

    let run_state = env.session_dir(&run_id).join("state.md");
    let began = Instant::now();
    while !std::fs::read_to_string(&run_state).unwrap_or_default().contains("status: ended") {
        let log =
            std::fs::read_to_string(env.session_dir(&run_id).join("logs/driver.log")).unwrap_or_default();
        assert!(began.elapsed() < Duration::from_secs(240), "the run never ended:\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = std::fs::read_to_string(env.session_dir(&run_id).join("logs/driver.log")).unwrap_or_default();
    assert!(std::fs::read_to_string(&run_state).unwrap().contains("outcome: verified"), "{log}");
    assert!(fixed.exists(), "{log}");
    let fresh = &model.main_requests()[2];
    assert!(
        !fresh.body.to_string().contains("I have finished the task"),
        "not a fresh session: {}",
        fresh.body
    );
    let said = fresh.last_user_text().unwrap_or_default();
    assert!(
        said.contains("handed over to fresh sessions") && said.contains("FAIL: fixed is missing"),
        "{said}"
    );

    // One ledger: the run's begins with every line the session wrote, then goes on.
    let session = ledger(&env, SESSION);
    let run = ledger(&env, &run_id);
    assert_eq!(reasons(&session).last(), Some(&"handed_over"), "{session:?}");
    assert_eq!(
        &run[..session.len() - 1],
        &session[..session.len() - 1],
        "the run's ledger begins with the session's"
    );
    assert_eq!(&reasons(&run)[session.len() - 1..], ["handed_over", "resumed", "verified"], "{log}");
    assert!(run.iter().all(|line| line["loop_id"] == loop_id.as_str()), "one loop id");
    assert!(reasons(&run).contains(&"verify_failed"), "the session's judged stop is in the run's ledger");

    // The session's next stop is let through, saying where the loop went.
    let after = claude(&env, &model, &cli, &config, "Say hello.", true);
    assert!(after.contains(&format!("handed over to loop-hook run ({run_id})")), "{after}");
    assert_eq!(ledger(&env, SESSION).len(), session.len(), "the session judges nothing more");
}
