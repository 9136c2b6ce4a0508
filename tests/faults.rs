//! Bad input and broken surroundings. Each must allow the stop (exit 0, never a block), and when
//! a loop is affected, say in one line what happened and what to do.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::util::{SESSION, TestEnv, run_command, stop_event};

fn stop_raw(env: &TestEnv, stdin: &[u8], session_env: bool) -> crate::util::Run {
    let mut cmd = env.command(&["stop-hook"]);
    if session_env {
        cmd.env("CLAUDE_CODE_SESSION_ID", SESSION);
    }
    run_command(cmd, stdin)
}

#[test]
fn unreadable_events_allow_the_stop_and_name_the_problem_when_a_loop_is_on() {
    let env = TestEnv::new();
    env.start("t --verify false");
    for (stdin, expected) in [
        (&b""[..], "the event on stdin was empty"),
        (b"not json at all", "is not JSON"),
        (b"[1,2,3]", "JSON but not an object"),
        (br#"{"session_id": 42}"#, "`session_id` should be a string"),
        (br#"{"hook_event_name":"Stop"}"#, "has no `session_id`"),
        (br#"{"session_id":"x","stop_hook_active":"yes"}"#, "`stop_hook_active` should be true or false"),
        (b"\xff\xfe\x00garbage", "is not JSON"),
    ] {
        let run = stop_raw(&env, stdin, true);
        assert_eq!(run.code, 0, "{stdin:?}");
        assert!(!run.blocked(), "{stdin:?}");
        assert!(run.system_message().contains(expected), "{stdin:?}: {}", run.stdout);
    }
}

#[test]
fn unreadable_events_in_a_plain_session_are_silent() {
    let env = TestEnv::new();
    for stdin in [&b""[..], b"nonsense", b"{}"] {
        let run = stop_raw(&env, stdin, true);
        assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{stdin:?}");
    }
}

#[test]
fn a_hundred_megabytes_of_stdin_is_refused_quickly_without_blocking() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let huge = vec![b' '; 100 << 20];
    let started = Instant::now();
    let run = stop_raw(&env, &huge, true);
    assert_eq!(run.code, 0);
    assert!(!run.blocked());
    assert!(run.system_message().contains("over 32 MiB"), "{}", run.stdout);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_missing_transcript_without_a_last_message_counts_as_no_promise() {
    let env = TestEnv::new();
    env.start("t --completion-promise DONE --max-iterations 2");
    let mut event = crate::util::stop_event(SESSION, &env.project, "", false);
    event["transcript_path"] = serde_json::json!("/no/such/transcript.jsonl");
    event.as_object_mut().unwrap().remove("last_assistant_message");
    let run = env.run(&["stop-hook"], event.to_string());
    assert!(run.blocked());
    assert!(run.reason().contains("did not contain <promise>DONE</promise>"));
}

#[test]
fn a_corrupt_state_allows_the_stop_and_is_kept() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let garbage = "---\niteration: [[[\n---\nthe task";
    fs::write(env.state_path(), garbage).unwrap();
    let run = env.stop("done");
    assert_eq!(run.code, 0);
    assert!(!run.blocked());
    let message = env.redact(&run.system_message());
    assert!(
        message.contains(&format!("[HOME]/.local/state/for-loop/sessions/{SESSION}/state.md")),
        "{message}"
    );
    assert!(message.contains("kept for inspection"), "{message}");
    assert_eq!(fs::read_to_string(env.state_path()).unwrap(), garbage);
}

#[test]
fn a_state_from_a_newer_for_loop_is_refused_with_advice() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let text = fs::read_to_string(env.state_path()).unwrap().replace("schema: 1", "schema: 99");
    fs::write(env.state_path(), text).unwrap();
    let run = env.stop("done");
    assert!(!run.blocked());
    assert!(run.system_message().contains("update loop-hook"), "{}", run.stdout);
}

#[test]
fn a_lock_held_by_a_stuck_process_is_waited_for_a_bounded_time() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let lock =
        fs::OpenOptions::new().write(true).open(env.session_dir(SESSION).join("state.md.lock")).unwrap();
    lock.lock().unwrap();
    let started = Instant::now();
    let run = env.stop("done");
    let waited = started.elapsed();
    assert!(!run.blocked());
    assert!(run.system_message().contains("held the loop's lock"), "{}", run.stdout);
    assert!(waited >= Duration::from_secs(3) && waited < Duration::from_secs(8), "{waited:?}");
    drop(lock);
    assert!(env.stop("done").blocked(), "the loop did not resume once the lock was free");
}

#[test]
#[cfg(target_os = "linux")]
fn a_full_disk_allows_the_stop_with_advice() {
    let env = TestEnv::new();
    env.start("t --verify false");
    std::os::unix::fs::symlink("/dev/full", env.ledger_path()).unwrap();
    let run = env.stop("done");
    assert_eq!(run.code, 0);
    assert!(!run.blocked());
    assert!(run.system_message().contains("could not write the ledger"), "{}", run.stdout);
    assert!(run.system_message().contains("Free some disk space"), "{}", run.stdout);
}

#[test]
fn a_deleted_loop_directory_allows_the_stop_with_advice() {
    let env = TestEnv::new();
    let dir = env.project.join("sub");
    fs::create_dir_all(&dir).unwrap();
    let run = env.run(&["start", "--session", SESSION, "--cwd", dir.to_str().unwrap()], "t --verify true");
    assert_eq!(run.code, 0);
    fs::remove_dir_all(&dir).unwrap();
    let run = env.stop("done");
    assert!(!run.blocked());
    assert!(run.system_message().contains("no longer exists"), "{}", run.stdout);
    assert_eq!(env.ledger().last().unwrap()["reason"], "internal_error");
}

#[test]
fn hostile_session_ids_stay_inside_the_store() {
    let env = TestEnv::new();
    let run = env.run(&["start", "--session", "../../escape"], "t --verify false");
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(!env.home.join(".local/escape").exists());
    assert!(env.stop_as("../../escape", "x", false).blocked());
}

/// A newer plugin's hook line run by an older binary (an unknown `--host`, a new flag) must not
/// block: Claude Code reads a Stop hook's exit 2 as "keep going", which would trap every session.
#[test]
fn hook_arguments_this_binary_does_not_know_allow_the_stop_with_exit_zero() {
    let env = TestEnv::new();
    let event = crate::util::stop_event(SESSION, &env.project, "done", false).to_string();
    let lines: [&[&str]; 4] = [
        &["stop-hook", "--host", "a-newer-host"],
        &["stop-hook", "--frobnicate"],
        &["stop-hook", "--host"],
        &["stop", "--host", "claude-code", "--new-flag", "x"],
    ];
    for args in lines {
        let run = env.run(args, &event);
        assert_eq!((run.code, run.stdout.as_str()), (0, ""), "a plain session hears nothing: {args:?}");
    }
    env.start("t --verify false");
    for args in lines {
        let run = env.run(args, &event);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stdout);
        assert!(!run.blocked(), "{args:?}");
        let message = run.system_message();
        assert!(message.contains("was not judged and is allowed"), "{args:?}: {message}");
        assert!(message.contains("update loop-hook"), "{args:?}: {message}");
    }
    assert_eq!(env.ledger_reasons(SESSION), ["internal_error"; 4]);
    // The allow is in the shape of the host the line names, else of the payload's host.
    let gemini =
        serde_json::json!({"session_id": "g", "hook_event_name": "AfterAgent", "prompt_response": "x"});
    for args in
        [&["stop-hook", "--host", "gemini-cli", "--new"][..], &["stop-hook", "--host", "a-newer-host"]]
    {
        let run = env.run(args, gemini.to_string());
        assert_eq!((run.code, run.stdout.trim()), (0, r#"{"decision":"allow"}"#), "{args:?}");
    }
}

#[test]
fn guard_arguments_this_binary_does_not_know_let_the_tool_call_run() {
    let env = TestEnv::new();
    env.start("t --verify false");
    for args in [&["guard", "--host", "a-newer-host"][..], &["guard", "--frobnicate"]] {
        let run = env.run(args, r#"{"hook_event_name":"PreToolUse"}"#);
        assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{args:?}");
    }
}

#[cfg(unix)]
fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// A protected file the model replaced with a FIFO (whose `open` blocks) or a link to an endless
/// device is a changed oracle: the stop is judged at once, and `status` and the guard answer.
/// These reads used to hang until the host's hook timeout.
#[cfg(unix)]
#[test]
fn an_oracle_file_replaced_by_a_fifo_or_a_device_is_a_change_not_a_hang() {
    for replacement in ["a FIFO", "/dev/zero", "/dev/urandom"] {
        let env = TestEnv::new();
        env.write("check.sh", "exit 0\n");
        env.start("t --verify true --protect check.sh");
        let check = env.project.join("check.sh");
        fs::remove_file(&check).unwrap();
        match replacement {
            "a FIFO" => mkfifo(&check),
            device => std::os::unix::fs::symlink(device, &check).unwrap(),
        }
        let event = stop_event(SESSION, &env.project, "done", false).to_string();
        let run = env.run_quickly(&["stop-hook"], &event);
        assert!(run.blocked(), "{replacement}: {}", run.stdout);
        assert!(run.reason().contains("check.sh (modified)"), "{replacement}: {}", run.reason());
        assert_eq!(env.ledger_reasons(SESSION).last().map(String::as_str), Some("oracle_changed"));
        let status = env.run_quickly(&["status", "--session", SESSION], "");
        assert_eq!(status.code, 0, "{replacement}: {}{}", status.stdout, status.stderr);
        let tool = json!({
            "session_id": SESSION, "cwd": env.project, "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": "ls"},
        });
        let guard = env.run_quickly(&["guard"], tool.to_string());
        assert_eq!(guard.code, 0, "{replacement}: {}{}", guard.stdout, guard.stderr);
    }
}

/// A transcript path that is a FIFO: the stop reads no turn from it (so a promise loop is not
/// done) instead of waiting for a writer that never comes.
#[cfg(unix)]
#[test]
fn a_transcript_that_is_a_fifo_does_not_hang_the_stop() {
    let env = TestEnv::new();
    env.start("t --completion-promise DONE");
    mkfifo(&env.project.join("transcript.jsonl"));
    let mut event = stop_event(SESSION, &env.project, "", false);
    event.as_object_mut().unwrap().remove("last_assistant_message");
    let run = env.run_quickly(&["stop-hook"], event.to_string());
    assert_eq!(run.code, 0);
    assert!(run.blocked(), "{}", run.stdout);
}

/// Under a file-size limit (`ulimit -f`), a write past it used to kill the hook with SIGXFSZ
/// (signal 25), which the host shows as a crashed hook. Now the write fails with EFBIG and the
/// stop is allowed with the reason, like a full disk; start refuses the same way.
#[cfg(unix)]
#[test]
fn a_file_size_limit_is_reported_like_a_full_disk_not_a_crash() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let limited = |args: &[&str]| {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "ulimit -f 0 && exec \"$@\"", "sh", env!("CARGO_BIN_EXE_loop-hook")])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &env.home)
            .current_dir(&env.project);
        cmd
    };
    let event = stop_event(SESSION, &env.project, "done", false).to_string();
    let run = run_command(limited(&["stop-hook"]), event.as_bytes());
    assert_eq!(run.code, 0, "killed? {}{}", run.stdout, run.stderr);
    assert!(!run.blocked(), "{}", run.stdout);
    assert!(run.system_message().contains("File too large"), "{}", run.stdout);
    assert!(run.system_message().contains("This stop is allowed"), "{}", run.stdout);
    let run = run_command(limited(&["start", "--session", "another-session"]), b"t --verify false");
    assert_eq!(run.code, 1, "killed? {}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("not started") && run.stdout.contains("File too large"), "{}", run.stdout);
}

/// The hook catches SIGXFSZ for itself only: verify gets the signal's default action, as it would
/// from a shell, so a check that hits its own file-size limit ends as it always has.
#[cfg(unix)]
#[test]
fn verify_runs_with_the_default_file_size_signal() {
    let env = TestEnv::new();
    env.start("t --verify 'ulimit -f 0; echo x > out.txt; echo survived'");
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("killed by signal 25"), "{}", run.reason());
    assert!(run.reason().contains("Its output:\n(no output)"), "the shell went on: {}", run.reason());
}
