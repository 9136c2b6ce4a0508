//! Codex with `plugin/codex` installed from the `plugin/` marketplace.

use std::path::Path;
use std::time::Instant;

use mock_model::{Agent, MockModel, Script};

use super::{only_session, run_text};
use crate::util::{TestEnv, client_bin, repo};

/// Codex with `plugin/codex` installed from the `plugin/` marketplace, under its own
/// `workspace-write` sandbox, where the agent's shell cannot write the loop store. The user's
/// `$for-loop` prompt starts the loop through the plugin's `UserPromptSubmit` hook, which runs
/// outside that sandbox: the typed text reaches loop-hook unchanged, as JSON, so a line that a
/// heredoc would end at is just text. The model tries to cancel the loop and delete the store from
/// its shell (both fail), claims done, is held with the task as the continuation prompt, fixes
/// it, and verify passes.
#[test]
fn codex_holds_the_loop_until_verify_passes() {
    let codex = client_bin("codex", "FOR_LOOP_CODEX");
    // Codex's sandbox will not set itself up under /tmp, and lets commands write /tmp: the Codex
    // home and the loop store live under the build's own temporary directory instead.
    let env = TestEnv::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let task =
        "create the file named fixed; \"quotes\" $(stay) `as typed`\nFOR_LOOP_TASK_TEXT_END\nstill the task";
    let attack = format!(
        "\"$FOR_LOOP_BIN\" cancel; python3 -c 'import shutil; shutil.rmtree(\"{}\")'",
        env.store().display()
    );
    let model = MockModel::start(
        Script::new().bash(attack).text("I have finished the task.").bash("touch fixed").text("Fixed it."),
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
        "--sandbox",
        "workspace-write",
    ]);
    cmd.arg(format!("$for-loop {task} --verify \"sh check.sh\" --max-iterations 5"));
    let (stdout, stderr) = run_text(cmd, "codex", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    let requests = model.main_requests();
    assert_eq!(requests.len(), 4, "{dump}");
    let offered = requests[0].body.to_string();
    assert!(offered.contains("Start a verified loop in this session"), "the plugin's skill is not offered");
    let attacked = requests[1].body.to_string();
    assert!(attacked.contains("only from the user's own prompt"), "the agent's cancel ran: {dump}");
    assert!(attacked.contains("Read-only file system"), "the store was writable in the sandbox: {dump}");
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
    // The refusal could not be written from inside the sandbox: the store is read-only there.
    assert_eq!(env.ledger_reasons(&session), ["verify_failed", "verified"], "{dump}");
    assert!(env.project.join("fixed").exists());
    assert_eq!(model.exhausted_requests(), 0);
    eprintln!("codex loop took {:?}", started.elapsed());
}
