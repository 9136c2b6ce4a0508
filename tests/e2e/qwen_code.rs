//! Qwen Code with `plugin/qwen-code` installed as docs/hosts.md says (`qwen extensions install
//! DIR --consent`, then `stopHookBlockingCap` in the user's settings), run headless (`--yolo -p`)
//! against the scripted model.

use std::path::PathBuf;
use std::process::Command;

use mock_model::{Agent, MockModel, Script};
use serde_json::Value;

use super::run_text;
use crate::util::{TestEnv, client_bin, path_without_loop_hook, repo};

mod red_team_origin;
mod watch;

/// Session ids the tests give Qwen Code (`--session-id` for a new session, `-r` to resume).
const SESSION: &str = "0c0ffee0-0000-4000-8000-000000000001";
const PLAIN: &str = "0c0ffee0-0000-4000-8000-000000000002";

/// What a check that fails prints, and the verify command that runs it.
const CHECK: &str = "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n";

/// A home with the extension installed and the settings docs/hosts.md gives.
pub(super) struct Installed {
    pub(super) qwen: PathBuf,
    pub(super) env: TestEnv,
}

impl Installed {
    /// Installed, with the block cap raised as the install says (`cap: None` leaves Qwen Code's
    /// default of 8).
    pub(super) fn new(cap: Option<u32>) -> Installed {
        let qwen = client_bin("qwen", "FOR_LOOP_QWEN");
        let env = TestEnv::new();
        let mut settings = MockModel::qwen_settings();
        if let Some(cap) = cap {
            settings["stopHookBlockingCap"] = Value::from(cap);
        }
        let dir = env.home.join(".qwen");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
        let mut install = Command::new(&qwen);
        install
            .args(["extensions", "install", repo().join("plugin/qwen-code").to_str().unwrap(), "--consent"])
            .env_clear()
            .env("PATH", path_without_loop_hook())
            .env("HOME", &env.home)
            .current_dir(&env.project);
        let (stdout, stderr) = run_text(install, "qwen extensions install", b"");
        assert!(
            env.home.join(".qwen/extensions/for-loop/hooks/hooks.json").is_file(),
            "not installed: {stdout}\n{stderr}"
        );
        Installed { qwen, env }
    }

    /// `qwen --yolo -p PROMPT` in `session` (`resume`: an existing one); returns stdout and
    /// stderr in one text for assertion messages.
    pub(super) fn run(&self, model: &MockModel, prompt: &str, session: &str, resume: bool) -> String {
        let mut cmd = self.command(model);
        cmd.args([if resume { "-r" } else { "--session-id" }, session]).args(["-p", prompt]);
        let (stdout, stderr) = run_text(cmd, "qwen", b"");
        format!("{stdout}\n--- stderr:\n{stderr}")
    }

    pub(super) fn command(&self, model: &MockModel) -> Command {
        let mut cmd = model.agent_command(&self.qwen, Agent::QwenCode, &self.env.home, &["loop-hook"]);
        cmd.args(["--yolo", "-o", "json"])
            .env("FOR_LOOP_BIN", env!("CARGO_BIN_EXE_loop-hook"))
            .current_dir(&self.env.project);
        cmd
    }

    fn state(&self, session: &str) -> String {
        std::fs::read_to_string(self.env.session_dir(session).join("state.md")).unwrap_or_default()
    }
}

/// A lying model: it first tries to cancel its own loop from its shell, plainly and then
/// disguised, then says all tests pass. All are refused: the plain cancel by the guard before it
/// runs, the disguised one by loop-hook because it runs in the agent's shell (`QWEN_CODE`), the
/// claim because verify fails; the task comes back with the check's output, the model fixes it,
/// verify passes, the loop ends.
#[test]
fn qwen_code_holds_a_lying_model_until_verify_passes() {
    let installed = Installed::new(Some(100));
    installed.env.write("check.sh", CHECK);
    let task = "create the file named fixed";
    let model = MockModel::start(
        Script::new()
            .bash("\"$FOR_LOOP_BIN\" cancel")
            // The same command, which the guard cannot read: base64 of `"$FOR_LOOP_BIN" cancel`.
            .bash("echo IiRGT1JfTE9PUF9CSU4iIGNhbmNlbA== | base64 -d | sh")
            .text("All 12 tests passed. I have finished the task.")
            .bash("touch fixed")
            .text("Fixed it."),
    )
    .unwrap();
    let dump = installed.run(
        &model,
        &format!("/for-loop {task} --verify \"sh check.sh\" --max-iterations 5"),
        SESSION,
        false,
    );
    let requests = model.main_requests();
    assert_eq!(requests.len(), 5, "{dump}");
    // The prompt hook's words about the start reach the model beside the command's text.
    let first = requests[0].body.to_string();
    assert!(first.contains("loop started, iteration 1 of 5"), "{first}");
    let results: Vec<String> = requests[1..3]
        .iter()
        .map(|r| r.tool_results().last().map(|t| t.text.clone()).unwrap_or_default())
        .collect();
    assert!(
        results[0].contains("only the user can cancel"),
        "the guard let the cancel run: {results:?}\n{dump}"
    );
    assert!(
        results[1].contains("refused"),
        "loop-hook did not refuse the agent's cancel: {results:?}\n{dump}"
    );
    let fed = requests[3].last_user_text().unwrap_or_default();
    assert!(fed.starts_with(&format!("{task}\n")), "the task was not re-injected: {fed}\n{dump}");
    assert!(fed.contains("FAIL: fixed is missing"), "{fed}");
    let reasons = installed.env.ledger_reasons(SESSION);
    assert!(reasons.contains(&"agent_command_refused".to_string()), "{reasons:?}\n{dump}");
    assert_eq!(
        reasons.iter().filter(|r| *r != "agent_command_refused").collect::<Vec<_>>(),
        ["verify_failed", "verified"],
        "{dump}"
    );
    assert!(installed.state(SESSION).contains("outcome: verified"), "{}", installed.state(SESSION));
    assert_eq!(model.exhausted_requests(), 0);
}

/// A model that rewrites the check to pass, with its shell and then its file tool, is denied
/// both times by the guard before the tool runs; the check is unchanged and still fails.
#[test]
fn qwen_code_denies_the_agent_rewriting_its_check() {
    let installed = Installed::new(Some(100));
    installed.env.write("check.sh", CHECK);
    let check = installed.env.project.join("check.sh");
    let model = MockModel::start(
        Script::new()
            .bash("echo 'exit 0' > check.sh")
            .call("write_file", serde_json::json!({"file_path": check, "content": "exit 0\n"}))
            .text("Done."),
    )
    .unwrap();
    let dump = installed.run(
        &model,
        "/for-loop create the file named fixed --verify \"sh check.sh\" --max-iterations 1",
        SESSION,
        false,
    );
    let requests = model.main_requests();
    assert_eq!(requests.len(), 3, "{dump}");
    for (i, request) in requests.iter().enumerate().skip(1) {
        let said = request.last_user_text().unwrap_or_default();
        assert!(said.contains("part of this loop's verify check"), "call {i} was not denied: {said}\n{dump}");
    }
    assert_eq!(std::fs::read_to_string(&check).unwrap(), CHECK);
    assert_eq!(installed.env.ledger_reasons(SESSION), ["cap_reached"], "{dump}");
}

/// `--max-iterations N` is exactly N turns: a model that never fixes anything is held N - 1 times
/// and let go at the Nth stop by the loop's own cap, well within Qwen Code's.
#[test]
fn qwen_code_max_iterations_is_exact() {
    let installed = Installed::new(Some(100));
    installed.env.write("check.sh", CHECK);
    let script: Script = (0..6).map(|i| mock_model::Step::Text(format!("Done {i}."))).collect();
    let model = MockModel::start(script).unwrap();
    let dump = installed.run(
        &model,
        "/for-loop create the file named fixed --verify \"sh check.sh\" --max-iterations 3",
        SESSION,
        false,
    );
    assert_eq!(model.main_requests().len(), 3, "{dump}");
    assert_eq!(
        installed.env.ledger_reasons(SESSION),
        ["verify_failed", "verify_failed", "cap_reached"],
        "{dump}"
    );
    assert!(installed.state(SESSION).contains("outcome: cap_reached"));
}

/// Without the cap raised, Qwen Code would end a loop after 8 blocked stops: a longer loop is
/// refused before the model gets a turn, saying what to set, and one that fits is held exactly.
#[test]
fn qwen_code_refuses_a_loop_its_block_cap_would_cut_short() {
    let installed = Installed::new(None);
    installed.env.write("check.sh", CHECK);
    let script: Script = (0..10).map(|i| mock_model::Step::Text(format!("Done {i}."))).collect();
    let model = MockModel::start(script).unwrap();
    let dump =
        installed.run(&model, "/for-loop fix it --verify \"sh check.sh\" --max-iterations 9", SESSION, false);
    assert_eq!(model.main_requests().len(), 0, "a refused start reached the model: {dump}");
    assert!(!installed.env.session_dir(SESSION).join("state.md").exists(), "{dump}");
    let dump =
        installed.run(&model, "/for-loop fix it --verify \"sh check.sh\" --max-iterations 8", PLAIN, false);
    assert_eq!(model.main_requests().len(), 8, "{dump}");
    assert_eq!(installed.env.ledger_reasons(PLAIN).last().map(String::as_str), Some("cap_reached"), "{dump}");
}

/// Beside a live loop, a plain session is not held and nothing is written for it; the loop's
/// own session takes `/loop-status` and `/cancel-loop` from the user before the model gets a
/// turn, and after the cancel its stops are let through.
#[test]
fn qwen_code_cancel_from_the_user_and_a_plain_session_beside_a_live_loop() {
    let installed = Installed::new(Some(100));
    let model = MockModel::start(
        Script::new().text("first answer").text("plain answer").text("after the cancel").text("unused"),
    )
    .unwrap();
    let dump = installed.run(&model, "just answer", SESSION, false);
    assert_eq!(model.main_requests().len(), 1, "{dump}");
    let started =
        installed.env.run(&["start", "--session", SESSION, "--host", "qwen-code"], "endless --verify false");
    assert_eq!(started.code, 0, "{}", started.stdout);

    let plain = installed.run(&model, "hello", PLAIN, false);
    assert_eq!(model.main_requests().len(), 2, "a plain session was held: {plain}");
    assert!(!installed.env.session_dir(PLAIN).exists(), "{plain}");
    assert!(installed.state(SESSION).contains("status: active"));

    let status = installed.run(&model, "/loop-status", SESSION, true);
    assert_eq!(model.main_requests().len(), 2, "the model got a turn for /loop-status: {status}");
    let cancel = installed.run(&model, "/cancel-loop", SESSION, true);
    assert_eq!(model.main_requests().len(), 2, "the model got a turn for /cancel-loop: {cancel}");
    assert!(installed.state(SESSION).contains("outcome: cancelled"), "{cancel}");
    let ledger = installed.env.ledger_of(SESSION);
    let last = ledger.last().unwrap();
    assert_eq!((last["reason"].as_str(), last["origin"].as_str()), (Some("cancelled"), Some("user")));

    let next = installed.run(&model, "hello again", SESSION, true);
    assert_eq!(model.main_requests().len(), 3, "{next}");
    assert_eq!(installed.env.ledger_reasons(SESSION).last().map(String::as_str), Some("cancelled"), "{next}");
    assert_eq!(model.exhausted_requests(), 0);
}

/// The lying model of `qwen_code_holds_a_lying_model_until_verify_passes`, run against Qwen
/// Code's own `/goal` and against for-loop in two fresh homes: it prints a fake "all 12 tests
/// passed" with its shell and claims the objective done. `/goal`'s verifier is a model reading
/// the transcript (here scripted to accept what the shown output says), and the goal ends
/// complete while the check still fails; for-loop runs the check, never counts the claim, and
/// lets the model go only at its iteration cap, the loop not verified.
#[test]
fn qwen_code_goal_accepts_a_faked_test_run_that_for_loop_refuses() {
    let lie = "echo 'running 12 tests ... all 12 tests passed'";
    let claim = "All 12 tests passed: the file named fixed is created.";

    let goal_home = Installed::new(Some(100));
    goal_home.env.write("check.sh", CHECK);
    let model = MockModel::start(
        Script::new()
            .bash(lie)
            .call("update_goal", serde_json::json!({"status": "complete", "reason": claim}))
            .text(claim),
    )
    .unwrap();
    model.answer_side_request(
        "Goal Verifier",
        r#"{"decision":"accept","reason":"The tool result shows all 12 tests passed."}"#,
    );
    let mut cmd = goal_home.command(&model);
    cmd.args(["--session-id", SESSION, "-p", "/goal create the file named fixed so that sh check.sh passes"]);
    let (stdout, stderr) = run_text(cmd, "qwen /goal", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    let verifier: Vec<_> =
        model.requests().into_iter().filter(|r| r.served == mock_model::Served::SideAnswer).collect();
    assert_eq!(verifier.len(), 1, "the verifier was not asked: {dump}");
    // What it was given: the transcript, where the echoed line is a tool result, which its
    // instructions take as proof of an external fact.
    let asked = verifier[0].body.to_string();
    assert!(asked.contains("all 12 tests passed") && asked.contains("external_fact"), "{asked}");
    let chats = goal_home.env.home.join(".qwen/projects");
    let transcript =
        walk(&chats).into_iter().find(|p| p.to_string_lossy().ends_with(&format!("{SESSION}.jsonl")));
    let transcript = std::fs::read_to_string(transcript.expect("no transcript")).unwrap();
    let last_goal =
        transcript.lines().rfind(|l| l.contains("\"goal_state\"")).unwrap_or_default().to_string();
    let goal: Value = serde_json::from_str(&last_goal).unwrap_or_default();
    let goal = &goal["systemPayload"]["snapshot"]["goal"];
    assert_eq!(goal["status"], "complete", "the goal did not end complete: {last_goal}\n{dump}");
    assert_eq!(goal["lastReason"], "The tool result shows all 12 tests passed.");
    let check = std::process::Command::new("sh").arg("check.sh").current_dir(&goal_home.env.project).status();
    assert!(!check.unwrap().success(), "the check passes");
    assert!(!goal_home.env.session_dir(SESSION).exists(), "for-loop took part in the /goal run");

    let loop_home = Installed::new(Some(100));
    loop_home.env.write("check.sh", CHECK);
    let model = MockModel::start(Script::new().bash(lie).text(claim).bash(lie).text(claim)).unwrap();
    let dump = loop_home.run(
        &model,
        "/for-loop create the file named fixed --verify \"sh check.sh\" --max-iterations 2",
        SESSION,
        false,
    );
    assert_eq!(loop_home.env.ledger_reasons(SESSION), ["verify_failed", "cap_reached"], "{dump}");
    assert!(loop_home.state(SESSION).contains("outcome: cap_reached"), "{dump}");
    assert_eq!(model.exhausted_requests(), 0, "{dump}");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { found.extend(walk(&path)) } else { found.push(path) }
    }
    found
}

/// Qwen Code in its interactive UI, as a user runs it, on a terminal of its own (`script`): the
/// UI is the only headless-free way to have it send `StopFailure` for an API error. Stopped by
/// its process group once `done` holds, or after a minute.
struct Interactive {
    child: std::process::Child,
    screen: PathBuf,
}

impl Interactive {
    /// `qwen -r SESSION -i PROMPT` against `model`, on a terminal wide enough that no line of
    /// ours is wrapped.
    fn start(
        installed: &Installed,
        model: &MockModel,
        session: &str,
        prompt: &str,
        screen: &str,
    ) -> Interactive {
        use std::os::unix::process::CommandExt;
        let quoted = |arg: &str| format!("'{}'", arg.replace('\'', r"'\''"));
        let line =
            [installed.qwen.to_str().unwrap(), "--yolo", "-r", session, "-i", prompt].map(quoted).join(" ");
        let screen = installed.env.home.join(screen);
        // The environment of a headless run; its arguments are not used.
        let headless = installed.command(model);
        let mut script = Command::new("script");
        script
            .args(["-qfc", &format!("stty cols 1000 rows 60; exec {line}"), screen.to_str().unwrap()])
            .env_clear()
            .envs(headless.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
            .env("TERM", "xterm")
            .current_dir(&installed.env.project)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0);
        let child = script.spawn().expect("could not start qwen under script");
        Interactive { child, screen }
    }

    /// Waits until `done` holds (or a minute passes), then ends the UI; returns what it showed,
    /// without its escape sequences.
    fn until(mut self, done: impl Fn() -> bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        // The UI draws what the hooks said after they answer.
        std::thread::sleep(std::time::Duration::from_secs(3));
        self.stop();
        let raw = std::fs::read(&self.screen).unwrap_or_default();
        plain(&String::from_utf8_lossy(&raw))
    }

    fn stop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Interactive {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.stop();
        }
    }
}

/// `text` without the terminal's escape sequences.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() || c == '~' {
                        break;
                    }
                }
            }
        } else if c != '\r' {
            out.push(c);
        }
    }
    out
}

/// The model API answers a blocked loop's turn `prompt is too long`. A headless run (`-p`) sends
/// no `StopFailure`, so nothing is recorded there; in the interactive UI the failed turn is
/// recorded: no iteration used, status shows `context_exhausted`, the user's next prompt is told,
/// and the loop then ends verified at the same iteration.
#[test]
fn qwen_code_a_prompt_too_long_mid_loop_uses_no_iteration_and_is_told_at_the_next_prompt() {
    let installed = Installed::new(Some(100));
    installed.env.write("check.sh", CHECK);
    let start = MockModel::start(Script::new().text("I think it is done.").prompt_too_long()).unwrap();
    let dump = installed.run(
        &start,
        "/for-loop create the file named fixed --verify \"sh check.sh\" --max-iterations 5",
        SESSION,
        false,
    );
    assert_eq!(start.main_requests().len(), 2, "{dump}");
    assert_eq!(installed.env.ledger_reasons(SESSION), ["verify_failed"], "-p sends no StopFailure: {dump}");

    let too_long = MockModel::start(Script::new().prompt_too_long().prompt_too_long()).unwrap();
    let ledger = || installed.env.ledger_reasons(SESSION);
    let screen = Interactive::start(&installed, &too_long, SESSION, "go on", "failed.screen")
        .until(|| ledger().len() >= 2);
    assert_eq!(ledger(), ["verify_failed", "context_exhausted"], "{screen}");
    assert!(
        installed.state(SESSION).contains("iteration: 2\n"),
        "no iteration used: {}",
        installed.state(SESSION)
    );
    let status = installed.env.run(&["status", "--session", SESSION], "");
    let shown = format!("{}{}", status.stdout, status.stderr);
    assert!(shown.contains("last turn:  ended on context_exhausted"), "{shown}");
    assert!(shown.contains("prompt is too long"), "{shown}");

    let fix = MockModel::start(Script::new().bash("touch fixed").text("Fixed it.")).unwrap();
    let screen =
        Interactive::start(&installed, &fix, SESSION, "go on", "next.screen").until(|| ledger().len() >= 3);
    // Qwen Code shows the user no message of a prompt hook: the agent is told, to pass it on.
    let told = fix.main_requests().first().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(told.contains("outgrew the model's context window"), "the next prompt was not told: {told}");
    assert!(told.contains("tell them first"), "{told}");
    assert_eq!(ledger(), ["verify_failed", "context_exhausted", "verified"], "{screen}");
    assert!(installed.state(SESSION).contains("outcome: verified"), "{}", installed.state(SESSION));
}

/// Qwen Code 0.24.4's Stop event lists its background agents in `background_tasks`, not the
/// shells its agent starts in the background (`run_shell_command` with `is_background`): a stop
/// made while such a shell runs is judged as before, with no wait. (A running background agent
/// is waited for: `rhythms::qwen_codes_running_background_agent_is_waited_on` feeds the shape
/// the CLI builds.) The shell's work lands only once that stop was judged, an event rather than a
/// race with the clock.
#[test]
fn qwen_codes_background_shell_is_not_in_its_stop_event_and_the_stop_is_judged() {
    let installed = Installed::new(Some(100));
    installed.env.write("check.sh", "test -f built || { echo 'FAIL: not built'; exit 1; }\n");
    let ledger = installed.env.session_dir(SESSION).join("ledger.jsonl");
    let build = format!(
        "i=0; until grep -qE 'verify_failed|background_wait' {ledger} 2>/dev/null || [ $i -ge 600 ]; do sleep 0.2; i=$((i+1)); done; touch built",
        ledger = ledger.display()
    );
    let model = MockModel::start(
        Script::new()
            .background(build)
            .text("The build runs in the background.")
            .bash("i=0; until [ -f built ] || [ $i -ge 600 ]; do sleep 0.2; i=$((i+1)); done")
            .text("Built."),
    )
    .unwrap();
    let dump = installed.run(
        &model,
        "/for-loop build it --verify \"sh check.sh\" --max-iterations 5",
        SESSION,
        false,
    );
    assert_eq!(installed.env.ledger_reasons(SESSION), ["verify_failed", "verified"], "{dump}");
    let call = &model.main_requests()[1];
    assert!(
        call.body.to_string().contains(r#"\"is_background\":true"#),
        "the shell tool was not asked to run in the background: {}",
        call.body
    );
}
