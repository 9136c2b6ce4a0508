//! Bad input and broken surroundings. Each must allow the stop (exit 0, never a block), and when
//! a loop is affected, say in one line what happened and what to do.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::util::{SESSION, TestEnv, run_command, sha256, stop_event};

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

/// The loop's own files, as the model can reach them with any tool: each change must either be
/// undone with the loop going on (HELD) or end in words to the user (REPORTED), never silently.
mod tampering {
    use super::*;

    /// The last good copy of the test session's state, beside the store.
    fn copy(env: &TestEnv) -> std::path::PathBuf {
        env.home.join(format!(".local/state/for-loop-armed/sessions/{SESSION}.md"))
    }

    fn aside_files(env: &TestEnv) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(env.session_dir(SESSION))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".aside-"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_corrupt_state_is_restored_and_the_loop_goes_on() {
        let env = TestEnv::new();
        env.start("t --verify false");
        let garbage = "---\niteration: [[[\n---\nthe task";
        fs::write(env.state_path(), garbage).unwrap();
        let run = env.stop("done");
        assert_eq!(run.code, 0);
        assert!(run.blocked(), "{}", run.stdout);
        let message = run.system_message();
        assert!(message.contains("the loop's state file was made unreadable"), "{message}");
        assert!(message.contains("restored it from its last good copy"), "{message}");
        assert!(
            run.reason().contains("for-loop noticed: the loop's state file was made unreadable"),
            "{}",
            run.reason()
        );
        let aside = aside_files(&env);
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert_eq!(fs::read_to_string(env.session_dir(SESSION).join(&aside[0])).unwrap(), garbage);
        assert_eq!(env.ledger_reasons(SESSION), ["state_tampered", "verify_failed"]);
    }

    #[test]
    fn a_state_edited_to_end_the_loop_is_restored() {
        let env = TestEnv::new();
        env.start("t --verify false");
        assert!(env.stop("1").blocked());
        let text = fs::read_to_string(env.state_path()).unwrap();
        let forged =
            text.replace("status: active", "status: ended").replace("verify: \"false\"", "verify: \"true\"");
        assert_ne!(forged, text);
        fs::write(env.state_path(), &forged).unwrap();
        let run = env.stop_as(SESSION, "2", true);
        assert!(run.blocked(), "{}", run.stdout);
        let message = run.system_message();
        assert!(message.contains("status active → ended"), "{message}");
        assert!(message.contains("verify `false` → `true`"), "{message}");
        assert!(message.contains("\nfor-loop 3/30 · verify failed (exit 1, "), "{message}");
        assert_eq!(env.ledger_reasons(SESSION), ["verify_failed", "state_tampered", "verify_failed"]);
    }

    #[test]
    fn a_deleted_state_session_or_store_is_restored() {
        for what in ["state", "session", "store"] {
            let env = TestEnv::new();
            env.start("t --verify false");
            assert!(env.stop("1").blocked());
            match what {
                "state" => fs::remove_file(env.state_path()).unwrap(),
                "session" => fs::remove_dir_all(env.session_dir(SESSION)).unwrap(),
                _ => fs::remove_dir_all(env.store()).unwrap(),
            }
            let run = env.stop("2");
            assert!(run.blocked(), "{what}: {}", run.stdout);
            assert!(
                run.system_message().contains("the loop's state file was deleted"),
                "{what}: {}",
                run.stdout
            );
            assert!(run.reason().contains("iteration 3 of 30"), "{what}: {}", run.reason());
            assert_eq!(
                env.ledger_reasons(SESSION).last().map(String::as_str),
                Some("verify_failed"),
                "{what}"
            );
        }
    }

    #[test]
    fn with_the_state_edited_and_its_copy_deleted_the_loop_ends_as_tampered_and_says_so() {
        let env = TestEnv::new();
        env.start("t --verify false");
        assert!(env.stop("1").blocked());
        let text = fs::read_to_string(env.state_path()).unwrap();
        fs::write(env.state_path(), text.replace("verify: \"false\"", "verify: \"true\"")).unwrap();
        fs::remove_file(copy(&env)).unwrap();
        let run = env.stop("2");
        assert!(!run.blocked(), "{}", run.stdout);
        let message = run.system_message();
        assert!(message.contains("its last good copy is gone"), "{message}");
        assert!(message.contains("ended as tampered, not verified"), "{message}");
        assert!(message.contains("receipt: state_tampered"), "{message}");
        assert_eq!(env.ledger_reasons(SESSION).last().map(String::as_str), Some("state_tampered"));
        assert_eq!(env.stop("3").stdout, "", "the ended loop blocks nothing more");
    }

    #[test]
    fn a_state_from_a_newer_for_loop_is_refused_with_advice() {
        let env = TestEnv::new();
        env.start("t --verify false");
        fs::remove_file(copy(&env)).unwrap();
        let text = fs::read_to_string(env.state_path()).unwrap().replace("schema: 1", "schema: 99");
        fs::write(env.state_path(), text).unwrap();
        let run = env.stop("done");
        assert!(!run.blocked());
        assert!(run.system_message().contains("update loop-hook"), "{}", run.stdout);
    }

    /// A lock held by a process that is not for-loop's (the agent's `flock ... sleep`) must not
    /// let the stop through: the lock is taken over, the stop judged, and the holder named.
    #[test]
    fn a_lock_held_by_another_process_is_taken_over_and_reported() {
        let env = TestEnv::new();
        env.start("t --verify false");
        let lock =
            fs::OpenOptions::new().write(true).open(env.session_dir(SESSION).join("state.md.lock")).unwrap();
        lock.lock().unwrap();
        let started = Instant::now();
        let run = env.stop("done");
        let waited = started.elapsed();
        assert!(run.blocked(), "{}", run.stdout);
        let message = run.system_message();
        assert!(message.contains("held the loop's lock"), "{message}");
        assert!(message.contains("took the lock over"), "{message}");
        #[cfg(target_os = "linux")]
        assert!(message.contains(&format!("process {}", std::process::id())), "{message}");
        assert!(waited >= Duration::from_secs(3) && waited < Duration::from_secs(10), "{waited:?}");
        assert_eq!(env.ledger_reasons(SESSION), ["lock_held", "verify_failed"]);
        // The squatter still holds its lock on the old file; the loop no longer waits for it.
        let started = Instant::now();
        assert!(env.stop("again").blocked());
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(lock);
    }

    /// A user's `loop-hook cancel` slowed at a write (as on a loaded machine) while a stop comes
    /// in. The stop once took the lock over after 3 s and blocked the agent, and the cancel
    /// failed: the user's command was lost. A for-loop command at work is waited for instead.
    /// (The slowed write is a switch of debug builds, which is what cargo's tests run.)
    #[cfg(all(target_os = "linux", debug_assertions))]
    #[test]
    fn a_cancel_slowed_at_a_write_is_waited_for_never_taken_over() {
        use std::process::Stdio;
        let env = TestEnv::new();
        env.start("t --verify false");
        let mut cancel = env.command(&["cancel", "--session", SESSION]);
        cancel.env("FOR_LOOP_TEST_SLOW_COMMIT_MS", "4000").stdin(Stdio::null()).stdout(Stdio::piped());
        let cancel = cancel.spawn().unwrap();
        // The cancel holds the lock once the lock file's record names it.
        let record = format!("{} ", cancel.id());
        let lock = env.session_dir(SESSION).join("state.md.lock");
        while !fs::read_to_string(&lock).is_ok_and(|text| text.starts_with(&record)) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let started = Instant::now();
        let stop = env.stop("done");
        let cancelled = cancel.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&cancelled.stdout);
        assert!(cancelled.status.success(), "{said}");
        assert!(said.contains("cancelled"), "{said}");
        assert!(!stop.blocked(), "{}", stop.stdout);
        assert!(!stop.stdout.contains("took the lock over"), "{}", stop.stdout);
        // It waited past the wait for anyone else, for as long as the cancel held the lock.
        assert!(started.elapsed() > Duration::from_secs(3), "{:?}", started.elapsed());
        let reasons = env.ledger_reasons(SESSION);
        assert_eq!(reasons.last().map(String::as_str), Some("cancelled"), "{reasons:?}");
        assert!(!reasons.iter().any(|r| r == "lock_held" || r == "verify_failed"), "{reasons:?}");
    }

    /// The issue's defect: with the ledger turned into a directory the stop was allowed and the
    /// state had already moved on. Now the directory is moved aside and the stop judged.
    #[test]
    fn a_directory_on_the_ledger_path_is_moved_aside_and_the_stop_judged() {
        let env = TestEnv::new();
        env.start("t --verify false");
        fs::remove_file(env.ledger_path()).unwrap();
        fs::create_dir_all(env.ledger_path().join("x")).unwrap();
        let run = env.stop("done");
        assert!(run.blocked(), "{}", run.stdout);
        assert!(
            run.system_message().contains("the loop's ledger had been replaced by a directory"),
            "{}",
            run.stdout
        );
        assert!(fs::read_to_string(env.state_path()).unwrap().contains("iteration: 2\n"));
        assert_eq!(env.ledger_reasons(SESSION), ["ledger_tampered", "verify_failed"]);
        assert_eq!(aside_files(&env).len(), 1);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_ledger_linked_to_a_full_device_is_moved_aside_and_the_stop_judged() {
        let env = TestEnv::new();
        env.start("t --verify false");
        fs::remove_file(env.ledger_path()).unwrap();
        std::os::unix::fs::symlink("/dev/full", env.ledger_path()).unwrap();
        let run = env.stop("done");
        assert!(run.blocked(), "{}", run.stdout);
        assert!(run.system_message().contains("replaced by a symbolic link"), "{}", run.stdout);
        assert_eq!(env.ledger_reasons(SESSION), ["ledger_tampered", "verify_failed"]);
    }

    /// Temporary files a killed writer leaves (`.state.md.*`) are swept by the next stop.
    #[test]
    fn temporaries_left_by_killed_writers_are_swept_by_the_next_stop() {
        let env = TestEnv::new();
        env.start("t --verify false");
        let litter = env.session_dir(SESSION).join(".state.md.Xk2b9Q");
        fs::write(&litter, "half a state").unwrap();
        let armed_litter = copy(&env).with_file_name(format!(".{SESSION}.md.a1B2c3"));
        fs::write(&armed_litter, "half a copy").unwrap();
        assert!(env.stop("done").blocked());
        assert!(!litter.exists() && !armed_litter.exists());
    }

    /// Every line a commit writes names the digest of the state it left; the last one names the
    /// state on disk, and the copy is that state.
    #[test]
    fn the_ledger_and_the_state_vouch_for_each_other() {
        let env = TestEnv::new();
        env.start("t --verify false --max-iterations 3");
        for _ in 0..2 {
            let text = fs::read(env.state_path()).unwrap();
            assert_eq!(fs::read(copy(&env)).unwrap(), text);
            let last = env.ledger_all().pop().unwrap();
            assert_eq!(last["state_digest"].as_str().unwrap(), sha256(&text));
            env.stop("x");
        }
        assert!(!env.stop("x").blocked(), "the cap");
        let last = env.ledger_all().pop().unwrap();
        assert_eq!(last["reason"], "cap_reached");
        assert_eq!(last["state_digest"].as_str().unwrap(), sha256(&fs::read(env.state_path()).unwrap()));
        assert!(!copy(&env).exists(), "an ended loop keeps no copy");
    }
}

/// A missing loop directory (moved or deleted by the agent, or by the user) keeps the loop
/// judging: verify cannot run, so it cannot pass, and the turn counts toward the cap.
#[test]
fn a_deleted_loop_directory_keeps_the_loop_judging_and_says_why() {
    let env = TestEnv::new();
    let dir = env.project.join("sub");
    fs::create_dir_all(&dir).unwrap();
    let run = env.run(&["start", "--session", SESSION, "--cwd", dir.to_str().unwrap()], "t --verify true");
    assert_eq!(run.code, 0);
    fs::remove_dir_all(&dir).unwrap();
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.system_message().contains("verify could not run"), "{}", run.stdout);
    assert!(run.reason().contains("no longer exists"), "{}", run.reason());
    assert!(run.reason().contains("put it back"), "{}", run.reason());
    assert_eq!(env.ledger().last().unwrap()["reason"], "verify_not_run");
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

/// A prompt hook that exits 2 blocks the user's prompt and erases it (Claude Code): an older
/// binary under a newer plugin's prompt or session-start line lets the prompt go on, and says why
/// on stderr.
#[test]
fn prompt_and_session_start_arguments_this_binary_does_not_know_let_the_prompt_go_on() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let prompt = serde_json::json!({
        "session_id": SESSION, "hook_event_name": "UserPromptSubmit", "prompt": "/cancel-loop",
        "cwd": env.project,
    })
    .to_string();
    for args in [
        &["prompt-hook", "--host", "a-newer-host"][..],
        &["prompt-hook", "--frobnicate"],
        &["session-start", "--host"],
        &["session-start", "--new-flag", "x"],
    ] {
        let run = env.run(args, &prompt);
        assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{args:?}");
        assert!(run.stderr.contains("nothing is added, and the prompt goes on"), "{args:?}: {}", run.stderr);
    }
    assert!(env.stop("done").blocked(), "no command was carried out: the loop still holds");
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
    // The write runs in a shell of its own: the command's own shell can be the first process of
    // its PID namespace, which a signal from the kernel it has no handler for does not end.
    env.start(
        "t --verify 'ulimit -f 0; exec 2>/dev/null; sh -c \"echo x > out.txt; echo survived\"; exit $?'",
    );
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("killed by signal 25"), "{}", run.reason());
    assert!(run.reason().contains("Its output:\n(no output)"), "the shell went on: {}", run.reason());
}

/// The next judged stop, blocked (verify fails), telling the user of the stop a hook of another
/// version let through unjudged.
fn told_let_through(env: &TestEnv) -> crate::util::Run {
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    let message = run.system_message();
    assert!(
        message.contains("a stop was let through unjudged: the hook ran `loop-hook stop-hook`"),
        "{message}"
    );
    run
}

/// An allowed stop is never silent: one let through unjudged is told again at the next judged
/// stop, whether the ledger recorded it or, with the ledger unwritable, an empty file named after
/// it did.
#[test]
fn stops_let_through_unjudged_are_told_again_at_the_next_judged_stop() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let event = crate::util::stop_event(SESSION, &env.project, "done", false).to_string();
    assert!(!env.run(&["stop-hook", "--host", "a-newer-host"], &event).blocked());
    fs::write(env.session_dir(SESSION).join("incident.1795449000.record_failed"), "").unwrap();
    let run = told_let_through(&env);
    let message = run.system_message();
    assert!(message.contains("could not even be written to the ledger (record_failed"), "{message}");
    assert!(run.reason().contains("for-loop noticed: a stop was let through unjudged"), "{}", run.reason());
    assert!(!env.session_dir(SESSION).join("incident.1795449000.record_failed").exists());
    assert_eq!(env.ledger_reasons(SESSION), ["internal_error", "record_failed", "verify_failed"]);
    // Told once: the stop after that has nothing more to say.
    let next = env.stop_as(SESSION, "again", true);
    assert!(!next.system_message().contains("let through"), "{}", next.stdout);
}

/// A check script that kills the hook judging it, once. The hook is not among its ancestors
/// (verify runs detached from it), so it is found as the `loop-hook` that holds the other end of
/// the check's own output pipe.
#[cfg(target_os = "linux")]
pub(crate) const KILLS_ITS_HOOK_ONCE: &str = "test -f killed || { touch killed; sleep 5; }\n";

/// Kills the `loop-hook` that runs in `project` once its check has run [`KILLS_ITS_HOOK_ONCE`]
/// (a daemon the agent left, out of the check's namespace, which the check itself cannot reach):
/// started before the stop, it gives up after a minute.
#[cfg(target_os = "linux")]
pub(crate) fn hook_killer(project: &std::path::Path) -> std::process::Child {
    let script = "for _ in $(seq 600); do [ -f \"$1/killed\" ] && break; sleep 0.1; done\n\
                  for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = loop-hook ] && \
                  [ \"$(readlink $p/cwd)\" = \"$1\" ] && kill -9 \"${p#/proc/}\"; done\n";
    let project = std::fs::canonicalize(project).unwrap();
    std::process::Command::new("sh").arg("-c").arg(script).arg("sh").arg(project).spawn().unwrap()
}

/// A hook killed in the middle of a judgment (here by a daemon, while verify runs) prints nothing, so
/// the host lets that stop through; the next stop must not be silent about it. It records
/// `hook_interrupted`, keeps the loop on and tells the user and the model; `status` tells too.
#[test]
#[cfg(target_os = "linux")]
fn a_hook_killed_from_verify_is_recorded_and_told_at_the_next_stop() {
    let env = TestEnv::new();
    env.write("check.sh", &format!("{KILLS_ITS_HOOK_ONCE}exit 1\n"));
    env.start("t --verify \"sh check.sh\"");
    let mut killer = hook_killer(&env.project);
    let killed = env.stop("done");
    killer.wait().unwrap();
    assert_eq!((killed.code, killed.stdout.as_str()), (-1, ""), "the hook was not killed: {}", killed.stderr);
    assert!(env.session_dir(SESSION).join("judging.json").is_file());
    let status = env.run(&["status", "--session", SESSION], "");
    assert!(status.stdout.contains("judging iteration 1"), "{}", status.stdout);
    // The user's next prompt hears it first.
    let prompt = serde_json::json!({"session_id": SESSION, "hook_event_name": "UserPromptSubmit",
        "prompt": "go on", "cwd": env.project});
    let told = env.run(&["prompt-hook"], prompt.to_string());
    assert!(told.stdout.contains("was killed before it answered"), "{}", told.stdout);
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.system_message().contains("was killed before it answered"), "{}", run.stdout);
    assert!(run.reason().contains("for-loop noticed: the hook judging iteration 1"), "{}", run.reason());
    assert_eq!(env.ledger_reasons(SESSION), ["hook_interrupted", "verify_failed"]);
    assert!(!env.session_dir(SESSION).join("judging.json").exists());
}

/// The guard reads the loop as last committed: deleting the state, or making it unreadable, does
/// not switch it off.
#[test]
fn the_guard_guards_a_loop_whose_state_was_deleted_or_garbled() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1\n");
    env.start("t --verify \"sh check.sh\"");
    let write_check = serde_json::json!({
        "session_id": SESSION, "cwd": env.project, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_input": {"file_path": env.project.join("check.sh"), "content": "exit 0\n"},
    })
    .to_string();
    for damage in ["deleted", "garbled"] {
        match damage {
            "deleted" => fs::remove_file(env.state_path()).unwrap(),
            _ => fs::write(env.state_path(), "not a state").unwrap(),
        }
        let run = env.run(&["guard"], &write_check);
        assert!(run.stdout.contains("\"permissionDecision\":\"deny\""), "{damage}: {}", run.stdout);
        assert!(run.stdout.contains("check.sh"), "{damage}: {}", run.stdout);
    }
}

/// The agent runs the prompt hook itself with a made-up `/cancel-loop` event naming a transcript
/// of its choice. The loop's own transcript is read instead, and since the host never recorded
/// the user sending that cancel, the next Stop puts the loop back on, judges that stop (verify
/// still fails, so it is blocked) and tells the user and the agent.
#[test]
fn a_cancel_forged_through_the_prompt_hook_is_undone_at_the_next_stop() {
    let env = TestEnv::new();
    // The user's own start, recorded by the host; the agent's forged cancel; its reply.
    env.forge_a_cancel("Done.");
    let run = env.stop("Done.");
    assert!(run.blocked(), "the loop is on again and verify still fails: {}", run.stdout);
    let told = run.system_message();
    assert!(
        told.contains("`/cancel-loop`") && told.contains("did not come from the user's prompt"),
        "{told}"
    );
    let raw = env.ledger_of_raw(SESSION);
    let unconfirmed = raw.iter().find(|l| l["reason"] == "command_unconfirmed").expect("recorded");
    assert_eq!(unconfirmed["origin"], "agent");
    assert_eq!(env.ledger_reasons(SESSION).last().map(String::as_str), Some("verify_failed"));
    // One commit for the stop: the undoing and the verdict carry the digest of the same state.
    let verdict = raw.last().unwrap();
    assert_eq!(unconfirmed["state_digest"], verdict["state_digest"], "{raw:#?}");
    assert!(unconfirmed["state_digest"].is_string());
}

/// A forged cancel undone by a stop whose commit fails (a file-size limit): the stop says the
/// undoing could not be recorded, never that it was, and the loop stays as the commit left it.
#[cfg(unix)]
#[test]
fn a_cancel_undone_by_a_stop_that_cannot_commit_is_told_as_not_recorded() {
    let env = TestEnv::new();
    env.forge_a_cancel("Done.");
    let mut limited = std::process::Command::new("sh");
    limited
        .args(["-c", "ulimit -f 0 && exec \"$@\"", "sh", env!("CARGO_BIN_EXE_loop-hook"), "stop-hook"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .current_dir(&env.project);
    let event = stop_event(SESSION, &env.project, "Done.", false).to_string();
    let run = run_command(limited, event.as_bytes());
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let told = run.system_message();
    assert!(told.contains("could not record this stop"), "{told}");
    assert!(told.contains("the cancel is undone"), "the settlement is told: {told}");
    assert!(
        told.contains("for-loop could not record this (") && told.contains("nothing has changed yet"),
        "{told}"
    );
    assert!(!told.contains("This is recorded in the ledger"), "{told}");
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(!state.contains("status: active"), "nothing was committed: {state}");
}

/// A stop forged from a tool call while a forged cancel awaits its confirmation: the cancel is
/// undone and the forged stop recorded and counted, in the stop's one commit (both lines carry
/// the digest of one state, the one on disk).
#[test]
fn a_forged_stop_that_settles_a_forged_cancel_commits_once() {
    let env = TestEnv::new();
    let transcript = env.forge_a_cancel("Done.");
    let call = json!({"type": "assistant", "timestamp": jiff::Timestamp::now().to_string(), "message": {"content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "loop-hook stop-hook < forged.json"}}]}});
    let text = fs::read_to_string(&transcript).unwrap();
    fs::write(&transcript, format!("{text}{call}\n")).unwrap();
    let forged = env.stop("Done.");
    assert!(forged.blocked(), "{}", forged.stdout);
    assert!(forged.reason().contains("this stop was not judged"), "{}", forged.reason());
    let raw = env.ledger_of_raw(SESSION);
    let reasons: Vec<&str> = raw.iter().filter_map(|l| l["reason"].as_str()).collect();
    assert_eq!(reasons[reasons.len() - 2..], ["command_unconfirmed", "forged_stop"], "{raw:#?}");
    let (undone, recorded) = (&raw[raw.len() - 2], &raw[raw.len() - 1]);
    assert_eq!(undone["state_digest"], recorded["state_digest"], "one commit: {raw:#?}");
    let state = fs::read_to_string(env.state_path()).unwrap();
    assert_eq!(recorded["state_digest"].as_str(), Some(sha256(state.as_bytes()).as_str()), "{state}");
    assert!(state.contains("status: active") && state.contains("forged_stops: 1\n"), "{state}");
}

/// The prompt hook commits what its stages change once, before any command runs: the forged
/// cancel undone and the user's own `/cancel-loop` marked to await its confirmation go in one
/// commit (both lines carry the digest of one state); the cancel then commits its own change.
#[test]
fn a_prompt_that_undoes_a_forged_cancel_and_marks_the_users_command_commits_once_before_it() {
    let env = TestEnv::new();
    let transcript = env.forge_a_cancel("Done.");
    let typed = json!({"session_id": SESSION, "transcript_path": transcript, "cwd": env.project,
        "prompt_id": "p-2", "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
        "prompt": "/cancel-loop"});
    let cancelled = env.run(&["prompt-hook"], typed.to_string());
    assert_eq!(cancelled.code, 0, "{}{}", cancelled.stdout, cancelled.stderr);
    assert!(cancelled.stdout.contains("did not come from the user's prompt"), "{}", cancelled.stdout);
    let raw = env.ledger_of_raw(SESSION);
    let line =
        |reason: &str| raw.iter().rfind(|l| l["reason"] == reason).unwrap_or_else(|| panic!("{raw:#?}"));
    let (undone, marked) = (line("command_unconfirmed"), line("command_pending"));
    assert!(undone["state_digest"].is_string(), "{raw:#?}");
    assert_eq!(undone["state_digest"], marked["state_digest"], "one commit: {raw:#?}");
    let last = raw.last().unwrap();
    assert_eq!(last["reason"], "cancelled", "{raw:#?}");
    assert_ne!(last["state_digest"], marked["state_digest"], "the cancel's own commit, after: {raw:#?}");
    let state = fs::read_to_string(env.state_path()).unwrap();
    assert!(state.contains("status: ended"), "{state}");
}

/// `rollback` reads its loop under the lock, through custody: a state edited behind the loop's
/// back is restored before the rollback acts on it, and the ledger records both, in that order.
#[test]
fn a_rollback_acts_on_the_loop_as_last_committed_and_records_what_it_found() {
    let env = TestEnv::new();
    crate::util::git(&env.project, &["init", "-q"]);
    env.write("code.txt", "v1\n");
    env.start("t --verify false --checkpoint");
    assert!(env.stop("1").blocked());
    env.write("code.txt", "v2\n");
    let committed = fs::read_to_string(env.state_path()).unwrap();
    assert!(committed.contains("checkpoint: true"), "{committed}");
    fs::write(env.state_path(), committed.replace("checkpoint: true", "checkpoint: false")).unwrap();
    let done = env.run(&["rollback", "--session", SESSION], "1 --yes");
    assert_eq!(done.code, 0, "{}", done.stdout);
    assert!(done.stdout.contains("restored it from its last good copy"), "{}", done.stdout);
    assert!(done.stdout.contains("rolled back to checkpoint 1"), "{}", done.stdout);
    assert_eq!(fs::read_to_string(env.state_path()).unwrap(), committed);
    assert_eq!(fs::read_to_string(env.project.join("code.txt")).unwrap(), "v1\n");
    assert_eq!(env.ledger_reasons(SESSION), ["verify_failed", "state_tampered", "rolled_back"]);
}

/// A stop let through while something else holds the loop's lock is not appended beside the
/// holder's commit, which may yet be undone: it is kept in an incident file, and the next
/// judged stop tells and records it.
#[test]
fn a_note_that_finds_the_lock_busy_is_kept_and_told_at_the_next_judged_stop() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let lock =
        fs::OpenOptions::new().write(true).open(env.session_dir(SESSION).join("state.md.lock")).unwrap();
    lock.lock().unwrap();
    let before = fs::read(env.ledger_path()).unwrap();
    let event = crate::util::stop_event(SESSION, &env.project, "done", false).to_string();
    assert!(!env.run(&["stop-hook", "--host", "a-newer-host"], &event).blocked());
    assert_eq!(fs::read(env.ledger_path()).unwrap(), before, "appended while another held the lock");
    drop(lock);
    let run = told_let_through(&env);
    let message = run.system_message();
    assert!(message.contains("kept beside the ledger: its lock was busy"), "{message}");
    assert_eq!(env.ledger_reasons(SESSION), ["internal_error", "verify_failed"]);
    let left: Vec<_> = fs::read_dir(env.session_dir(SESSION))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("incident."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
