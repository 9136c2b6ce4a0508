//! GitHub Copilot CLI, offline in its own-provider mode against `mock-model` (Chat Completions),
//! with for-loop installed exactly as docs/hosts.md says: the hook file copied into
//! `~/.copilot/hooks/`, the skills added with `copilot skill add`, the binary in `~/.cargo/bin`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use mock_model::{Agent, MockModel, Script};

use super::run_text;
use crate::util::{TestEnv, client_bin, path_without_loop_hook, repo};

mod red_team_origin;
mod watch;

/// Session ids of the form the CLI accepts for `--session-id` (a UUID).
const SESSION: &str = "5e55a1f0-0000-4000-8000-00000000c0de";

/// What the prompt hook tells the user when the CLI ended a turn the loop had blocked.
const OVERRIDDEN: &str = "Copilot CLI ended the agent's last turn although for-loop had blocked it";

/// A project whose check passes once `fixed` exists, and a home with Copilot CLI and for-loop
/// installed as the docs say, loop-hook where `cargo install` puts it (not on PATH).
struct Installed {
    env: TestEnv,
    copilot: PathBuf,
}

impl Installed {
    fn new() -> Installed {
        let copilot = client_bin("copilot", "FOR_LOOP_COPILOT");
        let env = TestEnv::new();
        env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
        // Copilot CLI runs hooks in the project's root, the nearest directory up with a `.git`,
        // and the hook refuses a binary inside it. A project of its own, as most are: otherwise
        // a `.git` another program left in the temporary directory makes that the root, and the
        // home (with the binary) lies inside it.
        let init = Command::new("git").args(["init", "-q"]).current_dir(&env.project).status().unwrap();
        assert!(init.success(), "git init failed");
        let cargo_bin = env.home.join(".cargo/bin");
        std::fs::create_dir_all(&cargo_bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_loop-hook"), cargo_bin.join("loop-hook")).unwrap();
        let path = std::env::join_paths(
            std::iter::once(copilot.parent().unwrap().to_path_buf())
                .chain(std::env::split_paths(&path_without_loop_hook())),
        )
        .unwrap();
        for line in super::documented_install("Copilot CLI") {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &line])
                .env_clear()
                .env("PATH", &path)
                .env("HOME", &env.home)
                .env("COPILOT_OFFLINE", "true")
                .current_dir(&env.project);
            let output = crate::util::run_bounded(cmd, &line, b"");
            assert!(
                output.status.success(),
                "`{line}` failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Installed { env, copilot }
    }

    /// `copilot -p PROMPT` as the user runs it, with all tools allowed, in session `session`
    /// (`--session-id` for a new one, `--resume` for one that exists). Returns stdout, then
    /// stderr after a separator.
    fn run(&self, model: &MockModel, prompt: &str, session: &str, resume: bool) -> String {
        self.run_with(model, prompt, session, resume, &[])
    }

    fn run_with(
        &self,
        model: &MockModel,
        prompt: &str,
        session: &str,
        resume: bool,
        extra: &[&str],
    ) -> String {
        let mut cmd = model.agent_command(&self.copilot, Agent::CopilotCli, &self.env.home, &["loop-hook"]);
        cmd.args(["-p", prompt, "--allow-all-tools", "--no-auto-update"])
            .args(extra)
            .arg(if resume { format!("--resume={session}") } else { format!("--session-id={session}") })
            .current_dir(&self.env.project);
        let (stdout, stderr) = run_text(cmd, "copilot", b"");
        format!("{stdout}\n--- stderr:\n{stderr}")
    }

    /// Like [`Installed::run`], with the CLI's line wrapping undone: every run of blanks is one
    /// space, so that a sentence can be looked for whole.
    fn run_flat(&self, model: &MockModel, prompt: &str, session: &str, resume: bool) -> String {
        self.run(model, prompt, session, resume).split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn state(&self, session: &str) -> String {
        std::fs::read_to_string(self.env.session_dir(session).join("state.md")).unwrap_or_default()
    }
}

/// The documented install, followed line by line, leaves the hook file in `~/.copilot/hooks/`
/// and the four skills registered with the CLI.
#[test]
fn copilot_cli_install_follows_the_docs() {
    let installed = Installed::new();
    let hooks = installed.env.home.join(".copilot/hooks/for-loop.json");
    assert_eq!(
        std::fs::read(&hooks).unwrap(),
        std::fs::read(repo().join("plugin/copilot-cli/for-loop.json")).unwrap()
    );
    let mut list = Command::new(&installed.copilot);
    list.args(["skill", "list"])
        .env_clear()
        .env("PATH", path_without_loop_hook())
        .env("HOME", &installed.env.home)
        .env("COPILOT_OFFLINE", "true");
    let (listed, stderr) = run_text(list, "copilot skill list", b"");
    for skill in ["for-loop", "cancel-loop", "loop-status", "resume-loop"] {
        assert!(listed.contains(skill), "{skill} is not listed: {listed}\n{stderr}");
    }
}

/// The user's `/for-loop` is carried out by the prompt hook before the model sees it, and the
/// model is shown the loop beside the prompt. The model tries to cancel the loop from its shell
/// (refused; the run allows every path, so the CLI itself lets the command run), claims done without doing anything, is held with the task and the failing output
/// as its next prompt, fixes it, and the loop ends verified, owned by this session.
#[test]
fn copilot_cli_holds_a_lying_model_until_verify_passes() {
    let installed = Installed::new();
    let env = &installed.env;
    let task = "create the file named fixed; \"quotes\" $(stay) `as typed`";
    let model = MockModel::start(
        Script::new()
            .bash("\"$HOME/.cargo/bin/loop-hook\" cancel")
            .text("I have finished the task.")
            .bash("touch fixed")
            .text("Fixed it."),
    )
    .unwrap();
    let started = Instant::now();
    let dump = installed.run_with(
        &model,
        &format!("/for-loop {task} --verify \"sh check.sh\" --max-iterations 5"),
        SESSION,
        false,
        &["--allow-all-paths"],
    );
    let requests = model.main_requests();
    assert_eq!(requests.len(), 4, "{dump}");
    let first = requests[0].last_user_text().unwrap_or_default();
    assert!(
        first.contains("for-loop: loop started, iteration 1 of 5."),
        "the model was not shown the loop: {first}"
    );
    assert!(first.contains(&format!("Task:\n{task}\n")), "{first}");
    let refused = requests[1].last_user_text().unwrap_or_default();
    assert!(refused.contains("only from the user's own prompt"), "the agent's cancel ran: {refused}");
    let fed = requests[2].last_user_text().unwrap_or_default();
    assert!(fed.contains(&format!("{task}\n")), "the task was not re-injected verbatim: {fed}\n{dump}");
    assert!(fed.contains("FAIL: fixed is missing"), "{fed}");
    assert_eq!(env.ledger_reasons(SESSION), ["agent_command_refused", "verify_failed", "verified"], "{dump}");
    assert!(installed.state(SESSION).contains("outcome: verified"));
    assert!(env.project.join("fixed").exists());
    assert!(!env.project.join("stay").exists());
    assert_eq!(model.exhausted_requests(), 0);
    eprintln!("copilot loop took {:?}", started.elapsed());
}

/// A model that never fixes anything is held until the loop's own cap, and then let go.
#[test]
fn copilot_cli_stops_holding_at_the_iteration_cap() {
    let installed = Installed::new();
    let model = MockModel::start(Script::new().text("Done.").text("Done, really.").text("unused")).unwrap();
    let dump = installed.run(
        &model,
        "/for-loop create the file named fixed --verify \"sh check.sh\" --max-iterations 2",
        SESSION,
        false,
    );
    assert_eq!(model.main_requests().len(), 2, "{dump}");
    assert_eq!(installed.env.ledger_reasons(SESSION), ["verify_failed", "cap_reached"], "{dump}");
    assert!(installed.state(SESSION).contains("outcome: cap_reached"), "{}", installed.state(SESSION));
}

/// Without a loop nothing is held: one answer, one stop, let through, nothing written.
#[test]
fn copilot_cli_plain_session_is_not_held() {
    let installed = Installed::new();
    let model = MockModel::start(Script::new().text("plain answer").text("unused")).unwrap();
    let dump = installed.run(&model, "just answer", SESSION, false);
    assert_eq!(model.main_requests().len(), 1, "a plain session was held: {dump}");
    assert!(dump.contains("plain answer"), "{dump}");
    assert!(!installed.env.session_dir(SESSION).exists(), "{dump}");
}

/// `/loop-status` and `/cancel-loop` are answered by the prompt hook itself: the model gets no
/// turn for them. After the cancel the session's stops are let through.
#[test]
fn copilot_cli_cancel_and_status_are_carried_out_before_the_model() {
    let installed = Installed::new();
    let model =
        MockModel::start(Script::new().text("plain answer").text("after the cancel").text("unused")).unwrap();
    installed.run(&model, "just answer", SESSION, false);
    let started = installed
        .env
        .run(&["start", "--session", SESSION, "--host", "copilot-cli"], "endless --verify false");
    assert_eq!(started.code, 0, "{}", started.stdout);

    let status = installed.run_flat(&model, "/loop-status", SESSION, true);
    assert!(status.contains("is active, iteration"), "{status}");
    let cancel = installed.run_flat(&model, "/cancel-loop", SESSION, true);
    assert!(cancel.contains("cancelled by the user"), "{cancel}");
    assert_eq!(model.main_requests().len(), 1, "the model got a turn for a command: {cancel}");
    assert!(installed.state(SESSION).contains("outcome: cancelled"));
    let ledger = installed.env.ledger_of(SESSION);
    let last = ledger.last().unwrap();
    assert_eq!((last["reason"].as_str(), last["origin"].as_str()), (Some("cancelled"), Some("user")));

    let next = installed.run(&model, "hello", SESSION, true);
    assert_eq!(model.main_requests().len(), 2, "{next}");
    assert_eq!(installed.env.ledger_reasons(SESSION).last().map(String::as_str), Some("cancelled"), "{next}");
}

/// Copilot CLI honours 8 blocks in a row and ends the turn at the 9th stop whatever the hook
/// says. The loop is not lost: it stays on, the user's next prompt is answered with what
/// happened (and not sent), the override is recorded and counted in `/loop-status`, and the
/// prompt after that goes on with the loop, held again.
#[test]
fn copilot_cli_block_cap_keeps_the_loop_and_tells_the_user() {
    let installed = Installed::new();
    let script: Script = (0..18).map(|i| mock_model::Step::Text(format!("still working {i}"))).collect();
    let model = MockModel::start(script).unwrap();
    let dump = installed.run(
        &model,
        "/for-loop endless --verify false --max-iterations 30 --max-same-failures 30",
        SESSION,
        false,
    );
    // The first stop and 8 continuations: 9 stops, the 9th block ignored by the CLI.
    assert_eq!(model.main_requests().len(), 9, "{dump}");
    assert_eq!(installed.env.ledger_reasons(SESSION), vec!["verify_failed"; 9], "{dump}");
    assert!(installed.state(SESSION).contains("status: active"));

    let told = installed.run_flat(&model, "go on", SESSION, true);
    assert!(told.contains(OVERRIDDEN), "the user was not told: {told}");
    assert!(told.contains("still on, at iteration 10 of 30"), "{told}");
    assert_eq!(model.main_requests().len(), 9, "the prompt went to the model: {told}");
    assert_eq!(installed.env.ledger_reasons(SESSION).last().map(String::as_str), Some("harness_override"));

    let status = installed.run_flat(&model, "/loop-status", SESSION, true);
    assert!(status.contains("the host ended 1 turn(s) despite a block"), "{status}");

    // Held again, up to the CLI's cap once more.
    let again = installed.run_flat(&model, "go on", SESSION, true);
    assert!(!again.contains(OVERRIDDEN), "told twice: {again}");
    assert_eq!(model.main_requests().len(), 18, "the loop did not go on: {again}");
    assert_eq!(model.exhausted_requests(), 0);
    let reasons = installed.env.ledger_reasons(SESSION);
    assert_eq!(reasons.iter().filter(|r| *r == "harness_override").count(), 1, "{reasons:?}");
    assert!(installed.state(SESSION).contains("status: active"));
}
