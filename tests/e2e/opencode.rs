//! opencode, offline against `mock-model` (Chat Completions through its OpenAI-compatible
//! provider), with for-loop installed exactly as docs/hosts.md says: the plugin and the command
//! files copied into `~/.config/opencode/`, the binary in `~/.cargo/bin`.
//!
//! `opencode run` exits at its session's first idle, before a plugin's next prompt is answered,
//! so each test runs `opencode serve` and sends the user's prompt or command to it with
//! `opencode run --attach`: `run` returns after the first turn and the loop goes on inside the
//! server, which the test waits on and stops by its pid.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mock_model::{MockModel, Script};

use super::run_text;
use crate::util::{TestEnv, client_bin, path_without_loop_hook, repo};

mod red_team_origin;
mod watch;

/// How long a loop inside the server may take to settle.
const SETTLE_LIMIT: Duration = crate::util::PATIENCE;

/// A project whose check passes once `fixed` exists, and a home with opencode and for-loop
/// installed as the docs say, loop-hook where `cargo install` puts it (not on PATH).
struct Installed {
    env: TestEnv,
    opencode: PathBuf,
}

/// `opencode serve` for one test, stopped by its pid when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Installed {
    fn new() -> Installed {
        let opencode = client_bin("opencode", "FOR_LOOP_OPENCODE");
        let env = TestEnv::new();
        env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
        let init = Command::new("git").args(["init", "-q"]).current_dir(&env.project).status().unwrap();
        assert!(init.success(), "git init failed");
        let cargo_bin = env.home.join(".cargo/bin");
        std::fs::create_dir_all(&cargo_bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_loop-hook"), cargo_bin.join("loop-hook")).unwrap();
        for line in super::documented_install("opencode") {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &line])
                .env_clear()
                .env("PATH", path_without_loop_hook())
                .env("HOME", &env.home)
                .current_dir(&env.project);
            let output = crate::util::run_bounded(cmd, &line, b"");
            assert!(
                output.status.success(),
                "`{line}` failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Installed { env, opencode }
    }

    /// The environment opencode runs in: nothing of the test runner's (`FOR_LOOP_BIN` included),
    /// no update checks, no model list fetched.
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.opencode);
        cmd.env_clear()
            .env("PATH", path_without_loop_hook())
            .env("HOME", &self.env.home)
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .current_dir(&self.env.project);
        cmd
    }

    /// Points opencode at `model` and starts its server on a free port of the loopback.
    fn serve(&self, model: &MockModel) -> Server {
        let config = serde_json::json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "mock/mock-gpt",
            "small_model": "mock/mock-gpt",
            "autoupdate": false,
            "share": "disabled",
            "provider": {"mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": format!("{}/v1", model.base_url()), "apiKey": "offline-mock-key"},
                "models": {"mock-gpt": {"name": "Mock GPT", "tool_call": true}},
            }},
            "permission": {"bash": "allow", "edit": "allow"},
        });
        let dir = self.env.home.join(".config/opencode");
        std::fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port();
        let mut cmd = self.command();
        cmd.args(["serve", "--port", &port.to_string(), "--hostname", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().expect("could not start opencode serve");
        let server = Server { child, url: format!("http://127.0.0.1:{port}") };
        let started = Instant::now();
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(started.elapsed() < crate::util::PATIENCE, "opencode serve did not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// The user's `/for-loop` in a new session, as `opencode run --command` sends it: the task
    /// "create the file named fixed", checked by `sh check.sh`, at most `max` iterations.
    fn start_loop(&self, server: &Server, max: u32) -> (String, String) {
        let cap = format!("--max-iterations={max}");
        let words = ["create", "the", "file", "named", "fixed", "--verify", "sh check.sh", &cap];
        let args: Vec<&str> = ["--command", "for-loop", "--"].into_iter().chain(words).collect();
        self.run(server, None, &args)
    }

    /// `opencode run --attach` with `args` (a message, or `--command NAME -- ARGS`), in `session`
    /// when given; returns the session's id and the run's output.
    fn run(&self, server: &Server, session: Option<&str>, args: &[&str]) -> (String, String) {
        let mut cmd = self.command();
        cmd.args(["run", "--attach", &server.url, "--dir", self.env.project.to_str().unwrap()])
            .args(["--format", "json"]);
        if let Some(session) = session {
            cmd.args(["--session", session]);
        }
        cmd.args(args);
        let (stdout, stderr) = run_text(cmd, "opencode run", b"");
        let id = stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find_map(|event| event["sessionID"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("opencode run named no session:\n{stdout}\n{stderr}"));
        (id, format!("{stdout}\n--- stderr:\n{stderr}"))
    }

    fn state(&self, session: &str) -> String {
        std::fs::read_to_string(self.env.session_dir(session).join("state.md")).unwrap_or_default()
    }
}

/// Waits for the idle of a turn `run` has returned from to be handled: `run` leaves at the
/// idle, and the plugin passes it on to loop-hook just after. A loop started from a terminal
/// before that would see this idle as its own.
fn idle_handled() {
    std::thread::sleep(Duration::from_secs(3));
}

/// Waits until `done` holds, then a little longer, so that a prompt the plugin is about to
/// send would have reached the model.
fn settle(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < SETTLE_LIMIT, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
}

/// Whether a loop's state shows it ended.
fn ended(state: &str) -> bool {
    state.lines().any(|line| line.starts_with("outcome: ") && line != "outcome: null")
}

/// The documented install, followed line by line, leaves the plugin and the four command files
/// in opencode's config folder, byte for byte.
#[test]
fn opencode_install_follows_the_docs() {
    let installed = Installed::new();
    let config = installed.env.home.join(".config/opencode");
    let shipped = repo().join("plugin/opencode");
    for file in [
        "plugins/for-loop.js",
        "commands/for-loop.md",
        "commands/cancel-loop.md",
        "commands/loop-status.md",
        "commands/resume-loop.md",
    ] {
        assert_eq!(
            std::fs::read(config.join(file)).unwrap_or_default(),
            std::fs::read(shipped.join(file)).unwrap(),
            "{file}"
        );
    }
}

/// The user's `/for-loop` is carried out by the plugin before the model sees it: the command's
/// text is replaced with the loop the hook started. The model tries to cancel the loop from its
/// shell, plainly (the guard denies the tool call) and past the guard (loop-hook refuses it: the
/// shell carries opencode's variables), claims done without doing anything, is held with the task
/// and the failing output as its next prompt, fixes it, and the loop ends verified.
#[test]
fn opencode_holds_a_lying_model_until_verify_passes() {
    let installed = Installed::new();
    let env = &installed.env;
    // `loop-hook cancel` through a variable the guard cannot read before the shell runs it.
    let hidden = "c=$(printf '%s' 'JEhPTUUvLmNhcmdvL2Jpbi9sb29wLWhvb2sgY2FuY2Vs' | base64 -d); eval \"$c\"";
    let model = MockModel::start(
        Script::new()
            .bash("\"$HOME/.cargo/bin/loop-hook\" cancel")
            .bash(hidden)
            .text("I have finished the task.")
            .bash("touch fixed")
            .text("Fixed it."),
    )
    .unwrap();
    let server = installed.serve(&model);
    let started = Instant::now();
    let (session, dump) = installed.start_loop(&server, 5);
    settle("the loop to end", || ended(&installed.state(&session)));
    let requests = model.main_requests();
    assert_eq!(requests.len(), 5, "{dump}");
    let first = requests[0].last_user_text().unwrap_or_default();
    assert!(
        first.contains("for-loop: loop started, iteration 1 of 5."),
        "the model was not shown the loop: {first}"
    );
    assert!(first.contains("Task:\ncreate the file named fixed\n"), "{first}");
    let denied = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(denied.contains("only the user can cancel"), "the guard let the plain cancel run: {denied}");
    let refused = serde_json::to_string(requests[2].messages()).unwrap();
    assert!(refused.contains("only from the user's own prompt"), "the hidden cancel ran: {refused}");
    let fed = requests[3].last_user_text().unwrap_or_default();
    assert!(fed.contains("create the file named fixed\n"), "the task was not re-injected: {fed}\n{dump}");
    assert!(fed.contains("FAIL: fixed is missing"), "{fed}");
    assert_eq!(
        env.ledger_reasons(&session),
        ["agent_command_refused", "verify_failed", "verified"],
        "{dump}"
    );
    assert!(installed.state(&session).contains("outcome: verified"));
    assert!(env.project.join("fixed").exists());
    assert_eq!(model.exhausted_requests(), 0);
    eprintln!("opencode loop took {:?}", started.elapsed());
}

/// A model that never fixes anything is held until the loop's own cap, exactly, and then let go.
#[test]
fn opencode_stops_holding_at_the_iteration_cap() {
    let installed = Installed::new();
    let model = MockModel::start(Script::new().text("Done.").text("Done, really.").text("unused")).unwrap();
    let server = installed.serve(&model);
    let (session, dump) = installed.start_loop(&server, 2);
    settle("the loop to end", || ended(&installed.state(&session)));
    assert_eq!(model.main_requests().len(), 2, "{dump}");
    assert_eq!(installed.env.ledger_reasons(&session), ["verify_failed", "cap_reached"], "{dump}");
    assert!(installed.state(&session).contains("outcome: cap_reached"), "{}", installed.state(&session));
}

/// `/cancel-loop` and `/loop-status` are carried out by the plugin from the user's command: the
/// model is only asked to pass the answer on, and after the cancel the session's idles are let be.
#[test]
fn opencode_cancel_and_status_come_from_the_user() {
    let installed = Installed::new();
    let script = Script::new().text("plain answer").text("passed on the cancel").text("passed on the status");
    let model = MockModel::start(script.text("unused")).unwrap();
    let server = installed.serve(&model);
    let (session, _) = installed.run(&server, None, &["just", "answer"]);
    idle_handled();
    let started =
        installed.env.run(&["start", "--session", &session, "--host", "opencode"], "endless --verify false");
    assert_eq!(started.code, 0, "{}", started.stdout);

    let (_, dump) = installed.run(&server, Some(&session), &["--command", "cancel-loop"]);
    settle("the cancel's turn", || model.main_requests().len() >= 2);
    let relayed = model.main_requests()[1].last_user_text().unwrap_or_default();
    assert!(relayed.contains("cancelled by the user"), "{relayed}\n{dump}");
    assert!(relayed.contains("Reply to the user with the text below"), "{relayed}");
    assert!(installed.state(&session).contains("outcome: cancelled"));
    let ledger = installed.env.ledger_of(&session);
    let last = ledger.last().unwrap();
    assert_eq!((last["reason"].as_str(), last["origin"].as_str()), (Some("cancelled"), Some("user")));

    let (_, dump) = installed.run(&server, Some(&session), &["--command", "loop-status"]);
    settle("the status's turn", || model.main_requests().len() >= 3);
    let status = model.main_requests()[2].last_user_text().unwrap_or_default();
    assert!(status.contains("cancelled"), "{status}\n{dump}");
    assert_eq!(model.main_requests().len(), 3, "a cancelled loop held the session: {dump}");
    assert_eq!(installed.env.ledger_reasons(&session).last().map(String::as_str), Some("cancelled"));
}

/// A session with no loop, beside one whose loop is live, goes idle once and is left alone:
/// nothing is written for it, and the loop's own ledger is untouched.
#[test]
fn opencode_plain_session_is_untouched_beside_a_live_loop() {
    let installed = Installed::new();
    let model =
        MockModel::start(Script::new().text("first session").text("plain answer").text("unused")).unwrap();
    let server = installed.serve(&model);
    let (looping, _) = installed.run(&server, None, &["hello"]);
    idle_handled();
    let started =
        installed.env.run(&["start", "--session", &looping, "--host", "opencode"], "endless --verify false");
    assert_eq!(started.code, 0, "{}", started.stdout);
    let (plain, dump) = installed.run(&server, None, &["just", "answer"]);
    assert_ne!(plain, looping);
    settle("the plain session's turn", || model.main_requests().len() >= 2);
    assert_eq!(model.main_requests().len(), 2, "a plain session was held: {dump}");
    assert!(dump.contains("plain answer"), "{dump}");
    assert!(!installed.env.session_dir(&plain).exists(), "{dump}");
    assert!(
        installed.env.ledger_reasons(&looping).is_empty(),
        "{:?}",
        installed.env.ledger_reasons(&looping)
    );
    assert!(!ended(&installed.state(&looping)));
}

/// The model API answers a blocked loop's turn `prompt is too long`. opencode does not end the
/// turn on it: it reports `session.error`, compacts the conversation and goes on by itself, so
/// there is no error end to record, and the `session.idle` that follows ends a turn that went
/// on. That turn is judged once, as iteration 2: the error used no iteration and lost no block.
#[test]
fn opencode_compacts_a_prompt_too_long_mid_loop_and_the_loop_ends_verified() {
    let installed = Installed::new();
    let model = MockModel::start(
        Script::new().text("I think it is done.").prompt_too_long().bash("touch fixed").text("Fixed it."),
    )
    .unwrap();
    let server = installed.serve(&model);
    let (session, dump) = installed.start_loop(&server, 5);
    settle("the loop to end", || ended(&installed.state(&session)));
    assert_eq!(model.main_requests().len(), 4, "{dump}");
    assert_eq!(installed.env.ledger_reasons(&session), ["verify_failed", "verified"], "{dump}");
    let state = installed.state(&session);
    assert!(state.contains("outcome: verified") && state.contains("iteration: 2\n"), "{state}");
    assert_eq!(model.exhausted_requests(), 0);
}
