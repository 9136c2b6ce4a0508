//! Handing a loop that runs in a session over to `loop-hook run`: `loop-hook run --resume LOOP`
//! and `/for-loop:handoff` through the prompt hook, with a stand-in agent CLI. One ledger across
//! both, the session's stops let through with a line, and each bad input refused with one line
//! and nothing changed.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::run_driver::{driver, fake_claude};
use crate::util::{SESSION, TestEnv};

/// The agent that does the task: it creates `fixed`.
const FIXES: &str = "touch fixed; echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'";

/// A loop in the test session whose first stop failed: it is at iteration 2.
fn session_loop_at_iteration_two(env: &TestEnv) -> String {
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    env.start("create the file fixed --verify \"sh check.sh\" --max-iterations 5");
    assert!(env.stop("not yet").blocked());
    state_field(env, SESSION, "loop_id")
}

/// A top-level field of `session`'s state file, as text.
fn state_field(env: &TestEnv, session: &str, field: &str) -> String {
    let text = std::fs::read_to_string(env.session_dir(session).join("state.md")).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}: ")))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .trim_matches('"')
        .to_string()
}

fn loop_ids(lines: &[Value]) -> Vec<String> {
    lines.iter().map(|line| line["loop_id"].as_str().unwrap().to_string()).collect()
}

/// The whole ledger of `session`, its start included.
fn whole_ledger(env: &TestEnv, session: &str) -> Vec<Value> {
    std::fs::read_to_string(env.session_dir(session).join("ledger.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn a_session_loop_resumed_by_run_ends_verified_with_one_ledger() {
    let env = TestEnv::new();
    let loop_id = session_loop_at_iteration_two(&env);
    let prompt = env.home.join("prompt.txt");
    let bin = fake_claude(&env, &format!("printf '%s' \"$*\" > {}; {FIXES}", prompt.display()));
    let mut resume = driver(&env, &bin, &["--resume", SESSION, "--no-sandbox"]);
    resume.stdin(Stdio::null());
    let run = crate::util::run_command(resume, b"");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);

    let run_id = format!("run-{loop_id}");
    // The fresh session hears where the loop came from and how its check last failed.
    let said = std::fs::read_to_string(&prompt).unwrap();
    assert!(said.contains("this is iteration 2 of 5"), "{said}");
    assert!(said.contains("handed over to fresh sessions from an earlier session, at iteration 2"), "{said}");
    assert!(
        said.contains("The check last failed there (exit 1)") && said.contains("FAIL: fixed is missing"),
        "{said}"
    );
    let session = whole_ledger(&env, SESSION);
    let reasons = |lines: &[Value]| -> Vec<String> {
        lines.iter().map(|l| l["reason"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(reasons(&session), ["started", "verify_failed", "handed_over"]);
    let ran = whole_ledger(&env, &run_id);
    assert_eq!(
        reasons(&ran),
        ["started", "verify_failed", "handed_over", "resumed", "verified"],
        "one ledger"
    );
    assert!(loop_ids(&ran).iter().all(|id| *id == loop_id), "one loop id across the handoff");
    assert_eq!(ran.last().unwrap()["iteration"], 2, "the iteration count goes on");
    assert_eq!(state_field(&env, SESSION, "status"), "ended");
    assert_eq!(state_field(&env, SESSION, "outcome"), "handed_over");

    // The session's stops are let through, saying where the loop went.
    let stop = env.stop("still here");
    assert!(!stop.blocked(), "{}", stop.stdout);
    assert!(
        stop.system_message().contains(&format!("handed over to loop-hook run ({run_id})")),
        "{}",
        stop.stdout
    );
    // It is not resumed in the session, nor handed over twice.
    let resumed = env.run(&["resume", "--session", SESSION], "");
    assert_eq!(resumed.code, 1, "{}", resumed.stdout);
    assert!(resumed.stdout.contains("handed over to loop-hook run"), "{}", resumed.stdout);
    let status = env.run(&["status", "--session", &run_id], "");
    assert!(status.stdout.contains("verified"), "{}", status.stdout);
    assert!(
        status.stdout.contains(&format!("handoff:    taken over from session {SESSION} at iteration 2")),
        "{}",
        status.stdout
    );
    let status = env.run(&["status", "--session", SESSION], "");
    assert!(
        status
            .stdout
            .contains(&format!("handoff:    handed over to loop-hook run ({run_id}) at iteration 2")),
        "{}",
        status.stdout
    );
    // The report of the run reads as one loop: the session's stop is on it.
    let report = env.run(&["report", "--session", &run_id, "--out", "report.html"], "");
    assert_eq!(report.code, 0, "{}", report.stdout);
    let page = std::fs::read_to_string(env.project.join("report.html")).unwrap();
    assert_eq!(page.matches("<tr data-reason=\"verify_failed\"").count(), 1, "the session's failed stop");
    assert_eq!(page.matches("<tr data-reason=\"verified\"").count(), 1, "the run's verified stop");
}

#[test]
fn a_handoff_typed_for_a_loop_without_its_transcript_is_refused_with_the_terminal_command() {
    let env = TestEnv::new();
    session_loop_at_iteration_two(&env);
    let bin = fake_claude(&env, FIXES);
    let prompt = json!({
        "session_id": SESSION,
        "prompt": "/for-loop:handoff",
        "cwd": env.project,
        "hook_event_name": "UserPromptSubmit",
    });
    let mut cmd = env.command(&["prompt-hook"]);
    cmd.env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()));
    let answer = crate::util::run_command(cmd, prompt.to_string().as_bytes());
    assert_eq!(answer.code, 0, "{}", answer.stderr);
    let answer: Value = serde_json::from_str(&answer.stdout).unwrap();
    let told = answer["reason"].as_str().unwrap_or_default();
    assert!(
        told.contains("was not run") && told.contains(&format!("loop-hook handoff --session {SESSION}")),
        "{answer}"
    );
    assert_eq!(state_field(&env, SESSION, "status"), "active", "nothing changed");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!env.project.join("fixed").exists(), "no run was started");
    assert_eq!(std::fs::read_dir(env.store().join("sessions")).unwrap().count(), 1, "no run loop");
}

/// Runs `loop-hook run --resume SESSION` with `claude` on PATH and returns its output; nothing
/// may have run.
fn refused_resume(env: &TestEnv, extra: &[(&str, &str)]) -> String {
    let bin = fake_claude(env, "touch ran");
    let mut resume = driver(env, &bin, &["--resume", SESSION, "--no-sandbox"]);
    for (name, value) in extra {
        resume.env(name, value);
    }
    let run = crate::util::run_command(resume, b"");
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(!env.project.join("ran").exists(), "an agent ran: {}", run.stdout);
    assert_eq!(run.stdout.trim().lines().count(), 1, "one line: {}", run.stdout);
    run.stdout
}

#[test]
fn an_ended_or_parked_loop_is_not_handed_over() {
    let env = TestEnv::new();
    session_loop_at_iteration_two(&env);
    env.run(&["cancel", "--session", SESSION], "");
    let said = refused_resume(&env, &[]);
    assert!(said.contains("already ended (cancelled)"), "{said}");
    assert_eq!(state_field(&env, SESSION, "outcome"), "cancelled");

    let parked = TestEnv::new();
    parked.write("check.sh", "exit 1\n");
    parked.start("never passes --verify \"sh check.sh\" --max-same-failures 1");
    parked.stop("no");
    assert_eq!(state_field(&parked, SESSION, "status"), "parked");
    let said = refused_resume(&parked, &[]);
    assert!(
        said.contains("the loop is parked (same_failures)") && said.contains("/for-loop:resume"),
        "{said}"
    );
}

#[test]
fn a_handoff_from_the_agents_shell_is_refused_and_the_loop_goes_on() {
    let env = TestEnv::new();
    session_loop_at_iteration_two(&env);
    let said = refused_resume(&env, &[("CLAUDECODE", "1")]);
    assert!(said.contains("refused") && said.contains("/for-loop:handoff"), "{said}");
    assert_eq!(state_field(&env, SESSION, "status"), "active");
    assert!(env.stop("not yet").blocked(), "the session still judges its loop");
}

#[test]
fn without_an_agent_cli_the_handoff_says_which_to_install() {
    let env = TestEnv::new();
    session_loop_at_iteration_two(&env);
    let empty = env.home.join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let run = crate::util::run_command(
        {
            let mut cmd = env.command(&["run", "--resume", SESSION, "--no-sandbox"]);
            cmd.env("PATH", &empty);
            cmd
        },
        b"",
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("install Claude Code (`claude` on PATH)"), "{}", run.stdout);
    assert_eq!(state_field(&env, SESSION, "status"), "active", "nothing changed");
    assert!(
        !env.session_dir(&format!("run-{}", state_field(&env, SESSION, "loop_id"))).join("state.md").exists()
    );
}

#[test]
fn on_limit_is_stored_in_the_state_and_a_bad_value_refused() {
    let env = TestEnv::new();
    env.start("t --verify true --on-limit handoff");
    assert_eq!(state_field(&env, SESSION, "status"), "active");
    let text = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(text.contains("on_limit: handoff"), "{text}");
    let other = TestEnv::new();
    other.start("t --verify true");
    assert!(
        !std::fs::read_to_string(other.state_path()).unwrap().contains("on_limit"),
        "wait is the default"
    );
    let bad = TestEnv::new();
    let run = bad.run(&["start", "--session", SESSION], "t --verify true --on-limit later");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("--on-limit `later` is not valid: give wait or handoff"), "{}", run.stdout);
}

#[test]
fn a_loop_is_driven_by_one_run_at_a_time() {
    let env = TestEnv::new();
    let loop_id = session_loop_at_iteration_two(&env);
    let started = env.home.join("agent-started");
    let bin = fake_claude(&env, &format!("touch {}; sleep 60", started.display()));
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    // From the user's terminal: the run starts in the background.
    let mut handoff = env.command(&["handoff", "--session", SESSION]);
    handoff.env("PATH", &path);
    let handed = crate::util::run_command(handoff, b"");
    assert_eq!(handed.code, 0, "{}", handed.stdout);
    assert!(handed.stdout.contains("running now in the background"), "{}", handed.stdout);
    let run_id = format!("run-{loop_id}");
    crate::run_driver::wait_for(&started);
    // The mark is `PID START`: the driver's pid and its start time.
    let mark = std::fs::read_to_string(env.session_dir(&run_id).join("driver.pid")).unwrap();
    let pid = mark.split_whitespace().next().unwrap().to_string();

    let mut second = driver(&env, &bin, &["--resume", &run_id, "--no-sandbox"]);
    second.env("PATH", &path);
    let refused = crate::util::run_command(second, b"");
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stdout.contains(&format!("(process {}) is already running this loop", pid.trim())),
        "{}",
        refused.stdout
    );

    // Ctrl-C to the first parks the loop; it is not judged twice meanwhile.
    std::process::Command::new("kill").args(["-INT", pid.trim()]).status().unwrap();
    let began = Instant::now();
    while crate::run_driver::alive(&pid) {
        assert!(began.elapsed() < crate::util::PATIENCE, "the run did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(state_field(&env, &run_id, "status"), "parked");
    let judged = whole_ledger(&env, &run_id).iter().filter(|l| l["reason"] == "verify_failed").count();
    assert_eq!(judged, 1, "only the session's stop was judged");
}

/// `--on-limit handoff`: the usage limit the host reports hands the loop to `loop-hook run` in the
/// background at once; the fresh sessions go on from the same iteration and end verified, and the
/// session's copy says where the loop went.
#[test]
fn a_usage_limit_with_on_limit_handoff_goes_on_under_run_and_ends_verified() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    env.start("create the file fixed --verify \"sh check.sh\" --max-iterations 5 --on-limit handoff");
    assert!(env.stop("not yet").blocked());
    let loop_id = state_field(&env, SESSION, "loop_id");
    let bin = fake_claude(&env, FIXES);
    let limited = json!({"session_id": SESSION, "hook_event_name": "StopFailure", "error": "rate_limit",
        "last_assistant_message": "Claude AI usage limit reached"});
    let mut hook = env.command(&["stop-hook"]);
    hook.env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()));
    let told = crate::util::run_command(hook, limited.to_string().as_bytes());
    assert_eq!(told.code, 0, "{}", told.stderr);
    let run_id = format!("run-{loop_id}");
    assert!(told.stdout.contains("--on-limit handoff") && told.stdout.contains(&run_id), "{}", told.stdout);
    assert_eq!(state_field(&env, SESSION, "outcome"), "handed_over");
    let began = Instant::now();
    while !whole_ledger(&env, &run_id).iter().any(|l| l["reason"] == "verified") {
        assert!(began.elapsed() < crate::util::PATIENCE, "{:#?}", whole_ledger(&env, &run_id));
        std::thread::sleep(Duration::from_millis(100));
    }
    let ran = whole_ledger(&env, &run_id);
    assert!(loop_ids(&ran).iter().all(|id| *id == loop_id), "one loop id across the handoff");
    assert!(ran.iter().any(|l| l["reason"] == "agent_limited"), "the limit is on the one ledger");
    // A later stop of the session is let through, saying where the loop went.
    let later = env.stop("anything");
    assert!(!later.blocked() && later.stdout.contains(&run_id), "{}", later.stdout);
}

/// A loop started by the user's prompt, with its session's transcript, just written: the session
/// looks at work.
fn prompt_started_loop(env: &TestEnv) -> std::path::PathBuf {
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let transcript = env.project.join("transcript.jsonl");
    let start = "/for-loop create the file fixed --verify \"sh check.sh\" --max-iterations 5";
    let prompt = json!({"session_id": SESSION, "transcript_path": transcript, "cwd": env.project,
        "prompt_id": "p-1", "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
        "prompt": start});
    let started = env.run(&["prompt-hook"], prompt.to_string());
    assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
    let record = json!({"type": "user", "timestamp": jiff::Timestamp::now().to_string(),
        "message": {"role": "user", "content": start}});
    std::fs::write(&transcript, format!("{record}\n")).unwrap();
    transcript
}

#[test]
fn a_session_at_work_is_refused_with_how_long_is_left_and_one_that_ended_on_an_error_is_taken_at_once() {
    let env = TestEnv::new();
    prompt_started_loop(&env);
    let refused = refused_resume(&env, &[]);
    assert!(refused.contains("right now (its transcript was written"), "{refused}");
    assert!(refused.contains("try again in ") && refused.contains(" s"), "{refused}");
    assert!(!refused.contains("in a minute"), "{refused}");
    // The session's turn ends on `prompt is too long`: it is over, not at work.
    let failed = json!({"session_id": SESSION, "hook_event_name": "StopFailure", "error": "invalid_request",
        "error_details": "prompt is too long: 210000 tokens > 200000 maximum", "last_assistant_message": ""});
    let told = env.run(&["stop-hook"], failed.to_string());
    assert_eq!(told.code, 0, "{}", told.stderr);
    assert!(state_field(&env, SESSION, "status") == "active");
    let bin = fake_claude(&env, FIXES);
    let mut resume = driver(&env, &bin, &["--resume", SESSION, "--no-sandbox"]);
    resume.stdin(Stdio::null());
    let run = crate::util::run_command(resume, b"");
    assert_eq!(run.code, 0, "the handoff was refused: {}{}", run.stdout, run.stderr);
    assert_eq!(state_field(&env, SESSION, "outcome"), "handed_over");
}
