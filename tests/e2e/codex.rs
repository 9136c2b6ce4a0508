//! Codex with `plugin/codex` installed from the `plugin/` marketplace.

use std::time::Instant;

use mock_model::{Agent, MockModel, Script};

use super::{only_session, run_text};
use crate::util::{TestEnv, client_bin, repo};

/// Codex with `plugin/codex` installed from the `plugin/` marketplace, and the start command its
/// skill tells the agent to run:
/// the session id comes from `CODEX_THREAD_ID`, the task through a quoted heredoc. The model
/// claims done, is held with the task as the continuation prompt, fixes it, verify passes.
#[test]
fn codex_holds_the_loop_until_verify_passes() {
    let codex = client_bin("codex", "FOR_LOOP_CODEX");
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let task = "create the file named fixed; \"quotes\" $(stay) `as typed`";
    let start = format!(
        "\"${{FOR_LOOP_BIN:-loop-hook}}\" start --host codex --exit-zero <<'FOR_LOOP_TASK_TEXT_END'\n\
         {task} --verify \"sh check.sh\" --max-iterations 5\nFOR_LOOP_TASK_TEXT_END"
    );
    let model = MockModel::start(
        Script::new().bash(start).text("I have finished the task.").bash("touch fixed").text("Fixed it."),
    )
    .unwrap();
    let codex_home = env.home.join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(codex_home.join("config.toml"), model.codex_config()).unwrap();
    // Installed the way users install it: plugin/ is a Codex marketplace holding plugin/codex.
    let codex_command = || {
        let mut cmd =
            model.agent_command(&codex, Agent::Codex { codex_home: &codex_home }, &env.home, &["loop-hook"]);
        cmd.env("FOR_LOOP_BIN", env!("CARGO_BIN_EXE_loop-hook")).current_dir(&env.project);
        cmd
    };
    let marketplace = repo().join("plugin");
    for args in [
        vec!["plugin", "marketplace", "add", marketplace.to_str().unwrap()],
        vec!["plugin", "add", "for-loop@for-loop"],
    ] {
        let mut cmd = codex_command();
        cmd.args(&args);
        let (stdout, stderr) = run_text(cmd, "codex plugin", b"");
        assert!(stdout.contains("Added"), "codex {args:?}: {stdout}\n{stderr}");
    }
    let started = Instant::now();
    let mut cmd = codex_command();
    cmd.args([
        "exec",
        "--json",
        "--skip-git-repo-check",
        // Hooks run only once their definition is trusted in /hooks; a test has no one to ask.
        "--dangerously-bypass-hook-trust",
        "--dangerously-bypass-approvals-and-sandbox",
        "start the loop",
    ]);
    let (stdout, stderr) = run_text(cmd, "codex", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    let requests = model.main_requests();
    assert_eq!(requests.len(), 4, "{dump}");
    let offered = requests[0].body.to_string();
    assert!(offered.contains("Start a verified loop in this session"), "the plugin's skill is not offered");
    let started_text = requests[1].last_user_text().unwrap_or_default();
    assert!(started_text.contains("loop started, iteration 1 of 5"), "{started_text}\n{dump}");
    let fed = requests[2].last_user_text().unwrap_or_default();
    assert!(fed.contains(&format!("{task}\n")), "the task was not re-injected verbatim: {fed}\n{dump}");
    assert!(fed.contains("FAIL: fixed is missing"), "{fed}");
    // Codex names the hook that continued the turn: the installed plugin's.
    assert!(fed.contains("plugins/cache/for-loop/for-loop/"), "not the plugin's hook: {fed}");
    let session = only_session(&env);
    assert!(
        stdout.contains(&format!("\"thread_id\":\"{session}\"")),
        "the loop is not this thread's: {dump}"
    );
    assert_eq!(env.ledger_reasons(&session), ["verify_failed", "verified"], "{dump}");
    assert!(env.project.join("fixed").exists());
    assert_eq!(model.exhausted_requests(), 0);
    eprintln!("codex loop took {:?}", started.elapsed());
}
