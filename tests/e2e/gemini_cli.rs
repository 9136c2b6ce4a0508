//! Gemini CLI with `plugin/gemini-cli` installed as an extension (`gemini extensions install`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use mock_model::{Agent, MockModel, Script};
use serde_json::Value;

use super::{only_session, run_text};
use crate::util::{TestEnv, client_bin, path_without_loop_hook, repo};

mod red_team_origin;
mod watch;

/// A Gemini CLI home with `plugin/gemini-cli` installed the way users install it (the CLI asks to
/// trust the source folder), and API-key auth pointed at the mock.
fn gemini_world() -> (PathBuf, TestEnv) {
    let gemini = client_bin("gemini", "FOR_LOOP_GEMINI");
    let env = TestEnv::new();
    gemini_settings(&env);
    let mut install = Command::new(&gemini);
    install
        .args(["extensions", "install", repo().join("plugin/gemini-cli").to_str().unwrap(), "--consent"])
        .env_clear()
        .env("PATH", path_without_loop_hook())
        .env("HOME", &env.home)
        .current_dir(&env.project);
    let (stdout, stderr) = run_text(install, "gemini extensions install", b"y\n");
    assert!(format!("{stdout}{stderr}").contains("installed successfully"), "{stdout}\n{stderr}");
    (gemini, env)
}

/// Gemini CLI settings in `env`'s home: API-key auth (pointed at the mock by the environment),
/// no update checks.
pub(super) fn gemini_settings(env: &TestEnv) {
    let config = env.home.join(".gemini");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"enableAutoUpdate":false}}"#,
    )
    .unwrap();
}

/// `gemini -p PROMPT` (plus `extra`) against `model`; returns stdout and stderr.
fn run_gemini(
    gemini: &Path,
    env: &TestEnv,
    model: &MockModel,
    prompt: &str,
    extra: &[&str],
) -> (String, String) {
    let mut cmd = model.agent_command(gemini, Agent::GeminiCli, &env.home, &["loop-hook"]);
    cmd.args(["-p", prompt, "--output-format", "stream-json", "--yolo"])
        // An explicit model: `auto` would first ask a router model, a side call we need not script.
        .args(["--model", "gemini-2.5-flash"])
        .args(extra)
        .env("FOR_LOOP_BIN", env!("CARGO_BIN_EXE_loop-hook"))
        .current_dir(&env.project);
    run_text(cmd, "gemini", b"")
}

/// Gemini CLI with `plugin/gemini-cli` installed as an extension (`gemini extensions install`):
/// `/for-loop` starts the loop (the typed text reaches loop-hook unchanged, nothing in it runs),
/// the model claims done and is held with the task re-injected as its next prompt, fixes it,
/// verify passes, the loop ends.
#[test]
fn gemini_cli_holds_the_loop_until_verify_passes() {
    let (gemini, env) = gemini_world();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let pwned = env.project.join("pwned");
    let task = format!(
        "create the file named fixed, don't $(touch {p}) or `touch {p}`; it's 100%",
        p = pwned.display()
    );
    let model = MockModel::start(
        Script::new().text("I have finished the task.").bash("touch fixed").text("Fixed it."),
    )
    .unwrap();
    let started = Instant::now();
    let prompt = format!("/for-loop {task} --verify \"sh check.sh\" --max-iterations 5");
    let (stdout, stderr) = run_gemini(&gemini, &env, &model, &prompt, &[]);
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    let requests = model.main_requests();
    assert_eq!(requests.len(), 3, "{dump}");
    // Gemini CLI shows the model each `!{…}` command it ran: one short line naming the
    // extension's script, not the lookup and session logic inside it.
    let first = requests[0].body.to_string();
    for internal in ["gemini-sessions", "reinstall the extension", "--exit-zero", "XDG_STATE_HOME"] {
        assert!(!first.contains(internal), "the model was shown the lookup script ({internal}): {first}");
    }
    assert!(first.contains("for-loop/scripts/command"), "{first}");
    let fed = requests[1].last_user_text().unwrap_or_default();
    assert!(fed.starts_with(&format!("{task}\n")), "the task was not re-injected verbatim: {fed}\n{dump}");
    assert!(fed.contains("FAIL: fixed is missing"), "{fed}");
    assert!(stdout.contains("Agent execution blocked"), "{dump}");
    let session = only_session(&env);
    assert!(
        stdout.contains(&format!("\"session_id\":\"{session}\"")),
        "the loop is not this session's: {dump}"
    );
    assert_eq!(env.ledger_reasons(&session), ["verify_failed", "verified"], "{dump}");
    assert!(env.project.join("fixed").exists());
    assert!(!pwned.exists(), "text from the task was executed");
    assert_eq!(model.exhausted_requests(), 0);
    eprintln!("gemini loop took {:?}", started.elapsed());
}

/// A plain Gemini session is unaffected; a loop started for it from a terminal is seen by
/// `/cancel-loop` and `/loop-status` in the resumed session, and cancelling lets the stop through.
#[test]
fn gemini_cli_cancel_and_status_act_on_this_session() {
    let (gemini, env) = gemini_world();
    let model =
        MockModel::start(Script::new().text("plain answer").text("cancel seen").text("status seen")).unwrap();
    let (stdout, stderr) = run_gemini(&gemini, &env, &model, "just answer", &[]);
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    assert_eq!(model.main_requests().len(), 1, "a plain session was held: {dump}");
    assert!(!stdout.contains("Agent execution blocked"), "{dump}");
    let init: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|e: &Value| e["type"] == "init")
        .unwrap();
    let session = init["session_id"].as_str().unwrap().to_string();

    let started =
        env.run(&["start", "--session", &session, "--host", "gemini-cli"], "endless --verify false");
    assert_eq!(started.code, 0, "{}", started.stdout);
    let (stdout, stderr) = run_gemini(&gemini, &env, &model, "/cancel-loop", &["--resume", "latest"]);
    let requests = model.main_requests();
    assert_eq!(requests.len(), 2, "the stop after /cancel-loop was held: {stdout}\n{stderr}");
    let said = requests[1].last_user_text().unwrap_or_default();
    assert!(said.contains("cancelled at iteration"), "{said}\n{stdout}\n{stderr}");
    assert_eq!(env.ledger_reasons(&session).last().map(String::as_str), Some("cancelled"));

    let (stdout, stderr) = run_gemini(&gemini, &env, &model, "/loop-status", &["--resume", "latest"]);
    let shown = model.main_requests()[2].last_user_text().unwrap_or_default();
    assert!(shown.contains("cancelled"), "{shown}\n{stdout}\n{stderr}");
    assert_eq!(model.exhausted_requests(), 0);
}
