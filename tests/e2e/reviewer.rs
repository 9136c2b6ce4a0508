//! `--review codex` and `--review gemini`: the real Codex and Gemini CLI started by the hook as
//! the built-in reviewer against the scripted model, in a loop driven through the binary. Each
//! blocks the first pass with a major finding and approves the second, and the tokens its CLI
//! reports are counted.

use mock_model::{Agent, MockModel, Script};
use serde_json::Value;

use crate::util::{SESSION, TestEnv, client_bin, git, run_command, stop_event};

/// The two reviews: a major finding, then an approval.
fn script() -> Script {
    Script::new().text("Empty file.\nBLOCK [major]: done.txt is empty").text("Good.\nAPPROVE")
}

/// A git project whose check passes once `done.txt` exists, with a loop reviewed by `agent`.
fn project(env: &TestEnv, agent: &str) {
    git(&env.project, &["init", "-q"]);
    env.write("check.sh", "test -f done.txt\n");
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "init"]);
    env.start(&format!(r#"fix it --verify "sh check.sh" --review {agent}"#));
}

/// Two stops, `done.txt` written before each, run by `stop_hook` (the hook with the CLI's
/// environment); returns the second stop's system message and the ledger.
fn two_stops(env: &TestEnv, stop_hook: impl Fn() -> std::process::Command) -> (String, Vec<Value>) {
    env.write("done.txt", "");
    let event = stop_event(SESSION, &env.project, "", false).to_string();
    let vetoed = run_command(stop_hook(), event.as_bytes());
    assert!(vetoed.blocked(), "{}{}", vetoed.stdout, vetoed.stderr);
    assert!(vetoed.reason().contains("(exit 0, BLOCK [major]; veto 1 of 3)"), "{}", vetoed.reason());
    assert!(vetoed.reason().contains("BLOCK [major]: done.txt is empty"), "{}", vetoed.reason());
    env.write("done.txt", "done\n");
    let event = stop_event(SESSION, &env.project, "", true).to_string();
    let approved = run_command(stop_hook(), event.as_bytes());
    assert!(!approved.blocked(), "{}{}", approved.stdout, approved.stderr);
    (approved.system_message(), env.ledger())
}

fn assert_reviewed(message: &str, ledger: &[Value], model: &MockModel) {
    assert!(message.contains("review: approved by"), "{message}");
    let reasons: Vec<&str> = ledger.iter().map(|l| l["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["review_blocked", "review_approved", "verified"]);
    for line in &ledger[..2] {
        assert!(line["review"]["tokens"].as_u64().is_some_and(|n| n > 0), "{line}");
    }
    assert_eq!(model.exhausted_requests(), 0);
}

#[test]
fn codex_as_the_built_in_reviewer_vetoes_once_then_approves() {
    // Codex's sandbox will not set itself up under /tmp.
    let env = TestEnv::outside_tmp();
    let model = MockModel::start(script()).unwrap();
    let codex = client_bin("codex", "FOR_LOOP_CODEX");
    let codex_home = env.home.join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(codex_home.join("config.toml"), model.codex_config()).unwrap();
    project(&env, "codex");
    let hook = || {
        let agent = Agent::Codex { codex_home: &codex_home };
        let mut cmd =
            model.agent_command(std::path::Path::new(env!("CARGO_BIN_EXE_loop-hook")), agent, &env.home, &[]);
        cmd.arg("stop-hook").env("FOR_LOOP_CODEX", &codex).current_dir(&env.project);
        cmd
    };
    let (message, ledger) = two_stops(&env, hook);
    assert_reviewed(&message, &ledger, &model);
}

#[test]
fn gemini_cli_as_the_built_in_reviewer_vetoes_once_then_approves() {
    let env = TestEnv::new();
    super::gemini_cli::gemini_settings(&env);
    let model = MockModel::start(script()).unwrap();
    let gemini = client_bin("gemini", "FOR_LOOP_GEMINI");
    project(&env, "gemini");
    let hook = || {
        let loop_hook = std::path::Path::new(env!("CARGO_BIN_EXE_loop-hook"));
        let mut cmd = model.agent_command(loop_hook, Agent::GeminiCli, &env.home, &[]);
        // An explicit model: `auto` would first ask a router model.
        cmd.arg("stop-hook")
            .env("FOR_LOOP_GEMINI", &gemini)
            .env("GEMINI_MODEL", "gemini-2.5-flash")
            .current_dir(&env.project);
        cmd
    };
    let (message, ledger) = two_stops(&env, hook);
    assert_reviewed(&message, &ledger, &model);
}
