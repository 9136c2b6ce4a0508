//! `--notify CMD`: run when a loop ends or parks, with the receipt on stdin and a summary in
//! `$FOR_LOOP_SUMMARY`; a command that hangs, fails or floods its output cannot hold the hook,
//! reach the host, or change the verdict.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{SESSION, TestEnv, run_within, stop_event};

fn payload(env: &TestEnv) -> Value {
    serde_json::from_slice(&std::fs::read(env.project.join("payload.json")).unwrap()).unwrap()
}

/// Whether process `pid` has ended (a zombie nobody reaped yet counts as ended).
fn gone(pid: &str) -> bool {
    let alive = Command::new("kill").args(["-0", pid]).status().is_ok_and(|s| s.success());
    let zombie = std::fs::read_to_string(Path::new("/proc").join(pid).join("stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')));
    !alive || zombie
}

#[test]
fn an_ended_loop_runs_the_notify_command_with_the_receipt_and_the_summary() {
    let env = TestEnv::new();
    let started = env.start(
        "fix the login --verify true --notify 'echo NOISE; cat > payload.json; printf %s \"$FOR_LOOP_SUMMARY\" > summary.txt'",
    );
    assert!(started.stdout.contains("Notify:      echo NOISE;"), "{}", started.stdout);
    let stop = env.stop("done");
    assert!(!stop.blocked());
    assert!(
        !stop.stdout.contains("NOISE") && !stop.stderr.contains("NOISE"),
        "{}{}",
        stop.stdout,
        stop.stderr
    );
    let payload = payload(&env);
    assert_eq!(payload["receipt"]["outcome"], "verified");
    assert_eq!(payload["receipt"]["status"], "ended");
    assert_eq!(payload["task"], "fix the login");
    let summary = std::fs::read_to_string(env.project.join("summary.txt")).unwrap();
    assert!(summary.contains(": verified after 1/30 iterations ("), "{summary}");
    assert!(summary.ends_with("): fix the login"), "{summary}");
    assert_eq!(payload["summary"], summary.as_str());
    assert_eq!(env.ledger_reasons(SESSION), ["verified"], "a notification that worked adds no line");
}

#[test]
fn a_cancelled_loop_notifies_and_a_blocked_stop_does_not() {
    let env = TestEnv::new();
    env.start("t --verify false --notify 'echo NOISE; cat > payload.json'");
    assert!(env.stop("1").blocked());
    assert!(!env.project.join("payload.json").exists(), "the loop goes on: no notification");
    let cancelled = env.run(&["cancel", "--session", SESSION], "");
    assert_eq!(cancelled.code, 0, "{}", cancelled.stdout);
    assert!(!cancelled.stdout.contains("NOISE"), "{}", cancelled.stdout);
    assert_eq!(payload(&env)["receipt"]["outcome"], "cancelled");
}

#[test]
fn a_hanging_notify_command_is_killed_with_its_group_and_the_stop_returns() {
    let env = TestEnv::new();
    env.start("t --verify true --notify 'sleep 600 & echo $! > bg.pid; sleep 600'");
    let started = Instant::now();
    let out = run_within(
        env.command(&["stop-hook"]),
        "a stop with a hanging notify command",
        stop_event(SESSION, &env.project, "done", false).to_string().as_bytes(),
        Duration::from_secs(30),
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(16), "the stop took {took:?}");
    assert!(out.status.success());
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_ne!(answer["decision"], "block", "{answer}");
    let pid = std::fs::read_to_string(env.project.join("bg.pid")).unwrap();
    assert!(gone(pid.trim()), "the notify command's background child outlived it");
    let ledger = env.ledger();
    assert_eq!(env.ledger_reasons(SESSION), ["verified", "notify_failed"]);
    let note = &ledger[1];
    assert_eq!(note["decision"], "note");
    assert!(note["detail"].as_str().unwrap_or_default().contains("process group was killed"), "{note}");
    assert!(std::fs::read_to_string(env.state_path()).unwrap().contains("status: ended"));
}

#[test]
fn a_failing_notify_command_that_floods_its_output_is_a_bounded_ledger_note() {
    let env = TestEnv::new();
    env.start("t --verify true --notify 'head -c 20000000 /dev/zero | tr \"\\0\" x; echo; echo webhook said 404; exit 22'");
    let stop = env.stop("done");
    assert!(!stop.blocked());
    assert!(stop.stdout.len() < 4_000, "{} bytes reached the host", stop.stdout.len());
    let ledger = env.ledger();
    assert_eq!(env.ledger_reasons(SESSION), ["verified", "notify_failed"]);
    let detail = ledger[1]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("exit 22") && detail.contains("webhook said 404"), "{detail}");
    assert!(detail.len() < 1_000, "{} bytes", detail.len());
}

#[test]
fn an_empty_notify_command_is_refused_at_start() {
    let env = TestEnv::new();
    let run = env.run(&["start", "--session", SESSION], "t --notify ''");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("--notify needs a value"), "{}", run.stdout);
}
