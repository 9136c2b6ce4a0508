//! Stop events piped into `loop-hook stop-hook`, and the verdict it prints.

use serde_json::{Value, json};

use crate::util::{SESSION, TestEnv, run_command, stop_event};

#[test]
fn a_plain_session_is_allowed_silently() {
    let env = TestEnv::new();
    let run = env.stop("done");
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "");
}

#[test]
fn a_failing_verify_blocks_with_the_task_and_the_failure() {
    let env = TestEnv::new();
    env.write("check.sh", "echo 'test login ... FAILED'; exit 1\n");
    env.start("fix the login --verify \"sh check.sh\" --max-iterations 5");
    let run = env.stop("All done, the tests pass!");
    assert_eq!(run.code, 0);
    let json = run.json();
    assert_eq!(json.as_object().unwrap().len(), 3, "{json}");
    assert_eq!(json["decision"], "block");
    let message = run.system_message();
    assert!(message.starts_with("for-loop 2/5 · verify failed (exit 1, "), "{message}");
    let reason = env.redact(&run.reason()).replace(&duration_in(&run.reason()), "[DURATION]");
    insta::assert_snapshot!(reason, @r#"
    fix the login

    ---
    for-loop: this is iteration 2 of 5. The loop goes on until `sh check.sh` exits 0.

    Verify `sh check.sh` failed: exit 1 after [DURATION]. Its output:

    Failing (1), as cargo test reported them. The names and lines between the fences are quoted from the check's output, as it printed them:
    ```text
    - login
    ```

    The output itself, its start and its end:

    ```text
    test login ... FAILED
    ```

    To finish: find the cause of this failure and fix it, run `sh check.sh` yourself to see it pass, then end your turn. Do not change the verify command or the files it runs.

    If the task cannot be done as asked, say why and end your turn with <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. Weakening the check is never the way out.
    "#);
    let ledger = env.ledger();
    assert_eq!(ledger[0]["verify"]["failing"]["names"], serde_json::json!(["login"]));
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["decision"], "block");
    assert_eq!(ledger[0]["reason"], "verify_failed");
    assert_eq!(ledger[0]["iteration"], 1);
    assert_eq!(ledger[0]["verify"]["exit_code"], 1);
    assert_eq!(ledger[0]["verify"]["tail"], "test login ... FAILED");
    assert_eq!(ledger[0]["stop_hook_active"], false);
}

/// The duration in a reason varies from run to run; the snapshot takes it from the text.
fn duration_in(reason: &str) -> String {
    let start = reason.find("exit 1 after ").unwrap() + "exit 1 after ".len();
    let end = start + reason[start..].find(". Its output").unwrap();
    reason[start..end].to_string()
}

#[test]
fn the_loop_ends_when_verify_passes_and_not_before() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed\n");
    env.start("make it pass --verify \"sh check.sh\"");
    assert!(env.stop("<promise>DONE</promise> it is fixed").blocked());
    assert!(env.stop_as(SESSION, "really fixed", true).blocked());
    env.write("fixed", "");
    let run = env.stop_as(SESSION, "now", true);
    assert!(!run.blocked());
    let message = env.redact(&run.system_message());
    assert!(
        message.starts_with("for-loop: done, verified at iteration 3/30: `sh check.sh` passed"),
        "{message}"
    );
    assert!(message.contains("receipt: verified · 3/30 iterations ·"), "{message}");
    assert!(
        message.contains(&format!("ledger: [HOME]/.local/state/for-loop/sessions/{SESSION}/ledger.jsonl")),
        "{message}"
    );
    // Over: later stops of the session pass silently.
    assert_eq!(env.stop("hello").stdout, "");
    let reasons: Vec<Value> = env.ledger().iter().map(|e| e["reason"].clone()).collect();
    assert_eq!(reasons, [json!("verify_failed"), json!("verify_failed"), json!("verified")]);
    assert_eq!(env.ledger()[1]["stop_hook_active"], true);
}

#[test]
fn max_iterations_three_gives_exactly_three_turns() {
    let env = TestEnv::new();
    env.start("never passes --verify false --max-iterations 3");
    assert!(env.stop("1").blocked());
    assert!(env.stop("2").blocked());
    let last = env.stop("3");
    assert!(!last.blocked());
    assert!(
        last.system_message()
            .contains("stopped at the cap, 3/3 iterations used and `false` still fails (exit 1)"),
        "{}",
        last.system_message()
    );
    assert_eq!(env.stop("next prompt").stdout, "", "the next prompt was blocked");
    assert_eq!(env.ledger().last().unwrap()["reason"], "cap_reached");
}

#[test]
fn another_sessions_stop_is_never_blocked() {
    let env = TestEnv::new();
    env.start("mine --verify false");
    let run = env.stop_as("a-different-session", "done", false);
    assert_eq!(run.stdout, "");
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(state.contains("iteration: 1\n"), "{state}");
}

/// Taking the loop away from its session by editing the owner (to nobody, or to another
/// session) does not free it: the state is restored, and the other session is still never
/// blocked. A loop that never had an owner (one waiting to be claimed) blocks nobody: see hosts.
#[test]
fn an_owner_changed_behind_the_loops_back_is_restored() {
    let env = TestEnv::new();
    env.start("x --verify false");
    let path = env.state_path();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace(&format!("session_id: {SESSION}"), "session_id: ''")).unwrap();
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.system_message().contains(&format!("owner `{SESSION}` → ``")), "{}", run.stdout);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace(&format!("session_id: {SESSION}"), "session_id: intruder")).unwrap();
    assert_eq!(env.stop_as("intruder", "done", false).stdout, "");
    let run = env.stop_as(SESSION, "done", true);
    assert!(run.blocked() && run.system_message().contains("owner `"), "{}", run.stdout);
}

#[test]
fn promise_only_loop_needs_the_tag() {
    let env = TestEnv::new();
    env.start("write the docs --completion-promise \"DOCS DONE\"");
    let run = env.stop("DOCS DONE");
    assert!(run.blocked());
    assert!(run.reason().contains("did not contain <promise>DOCS DONE</promise>"), "{}", run.reason());
    let run = env.stop("finished.\n<promise>DOCS  DONE</promise>");
    assert!(!run.blocked());
    assert!(run.system_message().contains("promise kept at iteration 2/30"), "{}", run.system_message());
}

#[test]
fn promise_is_read_from_the_transcript_end_when_the_event_lacks_it() {
    let env = TestEnv::new();
    env.start("t --completion-promise DONE");
    let transcript = env.project.join("transcript.jsonl");
    let mut lines = String::new();
    for i in 0..2_000 {
        lines.push_str(&json!({"type": "assistant", "message": {"content": [{"type": "text", "text": format!("old {i}")}]}}).to_string());
        lines.push('\n');
    }
    lines.push_str(&json!({"type": "user", "message": {"content": "go"}}).to_string());
    lines.push('\n');
    lines.push_str(&json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "<promise>DONE</promise>"}]}}).to_string());
    lines.push('\n');
    std::fs::write(&transcript, lines).unwrap();
    let mut event = crate::util::stop_event(SESSION, &env.project, "", false);
    event.as_object_mut().unwrap().remove("last_assistant_message");
    let run = env.run(&["stop-hook"], event.to_string());
    assert!(!run.blocked(), "{}", run.stdout);
    assert!(run.system_message().contains("promise kept"), "{}", run.stdout);
}

#[test]
fn verify_runs_in_the_loops_directory_with_stdin_closed() {
    let env = TestEnv::new();
    env.write("check.sh", "read line && exit 1; test -f here\n");
    env.write("here", "");
    env.start("t --verify \"sh check.sh\"");
    let mut event = crate::util::stop_event(SESSION, std::path::Path::new("/"), "", false);
    event["cwd"] = json!("/");
    let mut cmd = env.command(&["stop-hook"]);
    cmd.current_dir("/");
    let run = crate::util::run_command(cmd, event.to_string().as_bytes());
    assert!(!run.blocked(), "{}", run.stdout);
}

#[test]
fn a_hanging_verify_is_killed_and_reported_as_timed_out() {
    let env = TestEnv::new();
    env.write("hang.sh", "sleep 60 & sleep 60\n");
    env.start("t --verify \"sh hang.sh\" --verify-timeout 1");
    let started = std::time::Instant::now();
    let run = env.stop("done");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(run.blocked());
    assert_eq!(run.system_message(), "for-loop 2/30 · verify timed out after 1 s");
    let entry = env.ledger().pop().unwrap();
    assert_eq!(entry["reason"], "verify_timed_out");
    assert_eq!(entry["verify"]["timed_out"], true);
}

#[test]
fn huge_verify_output_keeps_the_reason_under_the_cap() {
    let env = TestEnv::new();
    env.start("t --verify \"yes 'a line of output' | head -c 50000000; echo THE END; exit 1\"");
    let run = env.stop("done");
    let reason = run.reason();
    assert!(reason.chars().count() < 10_000, "{}", reason.chars().count());
    assert!(reason.contains("THE END"));
    assert!(reason.contains("bytes of output left out"));
    assert_eq!(env.ledger()[0]["verify"]["output_bytes"], 50_000_008);
}

#[test]
fn the_ledger_and_state_live_outside_the_project() {
    let env = TestEnv::new();
    env.start("t --verify false");
    std::fs::remove_dir_all(&env.project).unwrap();
    std::fs::create_dir_all(&env.project).unwrap();
    assert!(env.stop("deleted everything, done").blocked());
}

/// A check doctored before verify that puts itself back while verify runs is the same after
/// verify as at the start; the fingerprint taken before verify still sees it.
#[test]
fn a_check_that_restores_itself_while_verify_runs_does_not_count() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1\n");
    env.write("saved", "exit 1\n");
    env.start("t --verify \"sh check.sh\"");
    env.write("check.sh", "cp saved check.sh; exit 0\n");
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("check.sh (changed while verify ran)"), "{}", run.reason());
    assert_eq!(std::fs::read_to_string(env.project.join("check.sh")).unwrap(), "exit 1\n");
    assert_eq!(env.ledger().last().unwrap()["reason"], "oracle_changed");
}

/// A check that swaps itself out and back within one verify run is the same before and after; on
/// Linux the watch on its directory sees the swap.
#[test]
#[cfg(target_os = "linux")]
fn a_check_swapped_and_put_back_during_verify_does_not_count() {
    let env = TestEnv::new();
    env.write(
        "check.sh",
        "cp check.sh .orig; printf 'exit 0\\n' > check.sh; cp .orig check.sh; rm .orig; exit 0\n",
    );
    env.start("t --verify \"sh check.sh\"");
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("check.sh (changed while verify ran)"), "{}", run.reason());
}

/// A Stop event sent while the agent's tool call is still pending (the transcript's last word is
/// the call, without its result) came from that tool call: the agent running `loop-hook
/// stop-hook` itself to use up its iterations. It is recorded as forged and changes nothing; two
/// in a row at most, then the next is judged as usual (a real stop is never trapped); the user
/// hears of each at the next judged stop and in the receipt.
#[test]
fn a_stop_forged_from_a_tool_call_is_recorded_and_uses_no_iteration() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1\n");
    env.start("fix it --verify \"sh check.sh\" --max-iterations 2");
    let transcript = env.project.join("transcript.jsonl");
    let call = json!({"type": "assistant", "timestamp": "2026-11-22T03:00:00Z", "message": {"content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "loop-hook stop-hook < forged.json"}}]}});
    std::fs::write(&transcript, format!("{call}\n")).unwrap();
    let mut event = crate::util::stop_event(SESSION, &env.project, "done", false);
    event["transcript_path"] = json!(transcript);
    let stop = || env.run(&["stop-hook"], event.to_string());

    for _ in 0..2 {
        let forged = stop();
        assert!(forged.blocked(), "{}", forged.stdout);
        assert!(forged.reason().contains("this stop was not judged"), "{}", forged.reason());
        assert!(forged.json().get("systemMessage").is_none(), "nothing for the user reaches the forger");
        assert!(
            std::fs::read_to_string(env.state_path()).unwrap().contains("iteration: 1\n"),
            "no iteration used"
        );
    }
    let ledger = env.ledger();
    assert_eq!(ledger.len(), 2);
    for line in &ledger {
        assert_eq!(
            (&line["reason"], &line["origin"], &line["decision"]),
            (&json!("forged_stop"), &json!("agent"), &json!("note"))
        );
    }
    // Counted in the state as each is recorded, so the receipt needs no read of the ledger.
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(state.contains("forged_stops: 2\n"), "{state}");
    // The third in a row is judged as usual: a real stop is never held back for long.
    let judged = stop();
    assert!(judged.blocked());
    assert!(judged.reason().contains("iteration 2 of 2"), "{}", judged.reason());
    assert!(
        judged
            .system_message()
            .contains("the agent ran the Stop hook itself from a tool call at iteration 1"),
        "{}",
        judged.system_message()
    );
    // A real stop: the call got its result and the turn ended on a reply without a tool call.
    // The cap ends the loop, and the receipt counts the forged stops.
    let result = json!({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}});
    let reply = json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "done"}]}});
    std::fs::write(&transcript, format!("{call}\n{result}\n{reply}\n")).unwrap();
    let end = stop();
    assert!(!end.blocked());
    let message = end.system_message();
    assert!(message.contains("forged stops: 2: the agent ran the Stop hook itself"), "{message}");
    assert_eq!(env.ledger().last().unwrap()["receipt"]["forged_stops"], 2);
}

/// Three forged stops from one tool call, with the fix put in for the third only: the third is
/// judged (the detector gives way, so a real stop is never held back), but its pass does not
/// count. The loop is not verified, uses no iteration, and the user hears of it at the next real
/// stop, which judges the code as it then is.
#[test]
fn three_forged_stops_with_the_fix_in_for_the_third_never_verify() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed\n");
    env.start("fix it --verify \"sh check.sh\" --max-iterations 5");
    let transcript = env.project.join("transcript.jsonl");
    let call = json!({"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "python3 -c ..."}}]}});
    std::fs::write(&transcript, format!("{call}\n")).unwrap();
    let mut event = crate::util::stop_event(SESSION, &env.project, "done", false);
    event["transcript_path"] = json!(transcript);
    let stop = || env.run(&["stop-hook"], event.to_string());
    for _ in 0..2 {
        assert!(stop().reason().contains("this stop was not judged"));
    }
    env.write("fixed", "");
    let third = stop();
    assert!(!third.blocked(), "{}", third.stdout);
    assert!(third.system_message().contains("this pass does not count"), "{}", third.system_message());
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(state.contains("status: active") && state.contains("iteration: 1\n"), "{state}");
    assert!(!state.contains("verified"), "{state}");
    assert_eq!(env.ledger_reasons(SESSION), ["forged_stop", "forged_stop", "pass_not_counted"]);

    // The fix is taken out again and the turn really ends: judged as usual, and the user told.
    std::fs::remove_file(env.project.join("fixed")).unwrap();
    let result = json!({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}});
    let reply = json!({"type": "assistant", "uuid": "r1", "message": {"content": [{"type": "text", "text": "done"}]}});
    std::fs::write(&transcript, format!("{call}\n{result}\n{reply}\n")).unwrap();
    let real = stop();
    assert!(real.blocked(), "{}", real.stdout);
    assert!(real.system_message().contains("may have been sent by the agent"), "{}", real.system_message());
    assert!(real.system_message().contains("verify failed"), "{}", real.system_message());
}

/// A background job sends Stop events while no tool call is pending, after the last judged stop
/// and before the agent's next reply: there is no new final reply in the transcript, so no turn
/// has ended. Such stops use no iteration, and with the fix in place the one judged does not
/// pass. The agent's next real reply ends a turn, and is judged as usual.
#[test]
fn stops_with_no_new_reply_since_the_last_judged_one_neither_count_nor_pass() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed\n");
    env.start("fix it --verify \"sh check.sh\" --max-iterations 5");
    let transcript = env.project.join("transcript.jsonl");
    let reply = |id: &str| json!({"type": "assistant", "uuid": id, "message": {"content": [{"type": "text", "text": "done"}]}});
    std::fs::write(&transcript, format!("{}\n", reply("r1"))).unwrap();
    let mut event = crate::util::stop_event(SESSION, &env.project, "done", false);
    event["transcript_path"] = json!(transcript);
    let first = env.run(&["stop-hook"], event.to_string());
    assert!(first.reason().contains("iteration 2 of 5"), "the real stop is judged");
    // Every later stop is the host continuing after that block.
    event["stop_hook_active"] = json!(true);
    let stop = || env.run(&["stop-hook"], event.to_string());
    // The hook's feedback is in and the model is working: a job fires twice, then with the fix.
    let feedback = json!({"type": "user", "isMeta": true, "message": {"content": "Stop hook feedback:\nx"}});
    std::fs::write(&transcript, format!("{}\n{feedback}\n", reply("r1"))).unwrap();
    for _ in 0..2 {
        assert!(stop().reason().contains("this stop was not judged"));
    }
    env.write("fixed", "");
    assert!(stop().system_message().contains("this pass does not count"));
    // The same reply again (no feedback in between) is no new turn either.
    std::fs::write(&transcript, format!("{}\n", reply("r1"))).unwrap();
    assert!(stop().reason().contains("this stop was not judged"));
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(state.contains("status: active") && state.contains("iteration: 2\n"), "{state}");
    // The agent's new reply ends a turn: judged, and now it passes.
    std::fs::write(&transcript, format!("{}\n{feedback}\n{}\n", reply("r1"), reply("r2"))).unwrap();
    let real = stop();
    assert!(real.system_message().contains("done, verified at iteration 2/5"), "{}", real.system_message());
    assert_eq!(
        env.ledger_reasons(SESSION),
        ["verify_failed", "forged_stop", "forged_stop", "pass_not_counted", "forged_stop", "verified"]
    );
}

#[test]
fn the_first_ledger_line_names_who_started_the_loop() {
    let env = TestEnv::new();
    env.start("fix it --verify false");
    let first = &env.ledger_all()[0];
    assert_eq!((&first["reason"], &first["origin"]), (&json!("started"), &json!("terminal")));
}

/// Code that passes only when it can tell it is being judged (a host's or for-loop's variable
/// set) must fail as it does in the user's own shell: verify runs without them.
#[test]
fn verify_cannot_tell_it_is_judged_from_the_hooks_variables() {
    let env = TestEnv::new();
    env.write(
        "check.sh",
        "test -n \"$CLAUDE_PLUGIN_ROOT$CLAUDECODE$FOR_LOOP_BIN_SOURCE$GEMINI_CLI$CODEX_THREAD_ID\"\n",
    );
    env.start("fix it --verify \"sh check.sh\" --max-iterations 5");
    let judged = |keep: Option<&str>| {
        let mut cmd = env.command(&["stop-hook"]);
        cmd.env("CLAUDE_PLUGIN_ROOT", "/plugin")
            .env("CLAUDECODE", "1")
            .env("FOR_LOOP_BIN_SOURCE", "cargo")
            .env("GEMINI_CLI", "1")
            .env("CODEX_THREAD_ID", "t");
        if let Some(keep) = keep {
            cmd.env("FOR_LOOP_KEEP_ENV", keep);
        }
        run_command(cmd, stop_event(SESSION, &env.project, "done", false).to_string().as_bytes())
    };
    let run = judged(None);
    assert!(run.blocked(), "a check that passes only under the hook passed: {}", run.stdout);
    // A check that needs one of them on purpose keeps it by name.
    let run = judged(Some("CLAUDECODE"));
    assert!(!run.blocked(), "the kept variable did not reach verify: {}", run.stdout);
}

/// Code that passes only when it finds its judge among its parent processes, by name,
/// executable or command line, fails in the loop as it fails in the user's shell: verify runs
/// detached from the hook, under a shell whose parent is init.
#[cfg(target_os = "linux")]
#[test]
fn verify_cannot_find_the_hook_among_its_ancestors() {
    let (env, run) = judged_walking_up(
        "{ cat /proc/$p/comm; readlink /proc/$p/exe; tr '\\0' ' ' < /proc/$p/cmdline; } 2>/dev/null \
         | grep -q loop-hook && exit 0\necho \"ancestor $p: $(cat /proc/$p/comm)\"",
        1,
    );
    assert!(run.blocked(), "a check that passes only under the hook passed: {}", run.stdout);
    assert!(run.reason().contains("ancestor "), "the walk did not run: {}", run.reason());
    assert_eq!(env.ledger_reasons(SESSION), ["verify_failed"]);
}

/// A judged stop whose check runs `step` at its own shell and each of its parent processes
/// (`$p`), walking up to init (or to the first process of its PID namespace), and exits `end` if
/// none ended it.
#[cfg(target_os = "linux")]
fn judged_walking_up(step: &str, end: i32) -> (TestEnv, crate::util::Run) {
    let env = TestEnv::new();
    let check = format!(
        "p=$$\nwhile :; do\n{step}\n[ \"$p\" -gt 1 ] || break\np=$(awk '/^PPid/ {{print $2}}' /proc/$p/status)\ndone\nexit {end}\n"
    );
    env.write("check.sh", &check);
    env.start("fix it --verify \"sh check.sh\"");
    let run = env.stop("done");
    (env, run)
}

/// The shell that runs verify reports its exit status to the hook: killed before it can, its
/// check does not pass, and the user and the agent are told why.
#[cfg(target_os = "linux")]
#[test]
fn a_check_that_kills_the_shell_reporting_its_status_does_not_pass_and_is_told() {
    let (env, run) = judged_walking_up(
        "ls -l /proc/$p/fd 2>/dev/null | grep -q socket: && { touch found; kill -9 \"$p\"; exit 0; }",
        0,
    );
    if !env.project.join("found").exists() {
        // In a PID namespace of its own the check cannot see the process that reports its status:
        // nothing to kill, and its own exit is what is judged.
        assert_eq!(env.ledger_reasons(SESSION), ["verified"], "{}", run.stdout);
        return;
    }
    assert!(run.blocked(), "{}", run.stdout);
    let told = "ended without reporting an exit status";
    assert!(run.system_message().contains(told), "{}", run.stdout);
    assert!(run.reason().contains(told), "{}", run.reason());
    assert_eq!(env.ledger_reasons(SESSION), ["verify_status_untrusted", "verify_failed"]);
}

/// Output that counts ends when the command ends: a pass that ran fewer tests than before stays
/// held even though a process the check left behind (in a session of its own, out of verify's
/// process group) prints the full test count after verify exited.
#[test]
fn a_test_summary_printed_after_verify_exited_does_not_count() {
    let env = TestEnv::new();
    env.write(
        "check.sh",
        // It waits until the process is out of its group, which its exit would otherwise kill.
        "cat counts.txt\nif [ -f late.txt ]; then m=$(mktemp -u)\n\
         setsid sh -c \"touch $m; sleep 0.6; cat late.txt\" &\n\
         while [ ! -e $m ]; do sleep 0.02; done; rm -f $m; fi\ntest -f fixed\n",
    );
    env.write("counts.txt", "3 passed, 1 failed\n");
    env.start("fix it --verify 'sh check.sh'");
    assert!(env.stop("").blocked(), "the first run fails and counts 4 tests");
    // The failing test is gone and the code "fixed"; the leftover process claims all 4 passed.
    env.write("counts.txt", "3 passed, 0 failed\n");
    env.write("late.txt", "4 passed, 0 failed\n");
    env.write("fixed", "\n");
    let run = env.stop("");
    assert!(run.blocked(), "a late summary must not make the pass count: {}", run.stdout);
    let reasons = env.ledger_reasons(SESSION);
    assert!(!reasons.iter().any(|r| r == "verified"), "{reasons:?}");
}

/// The ledger says how verify's output was ended: on Linux by the kernel's kill of its PID
/// namespace, or by its supervisor as a subreaper; elsewhere after a grace.
#[test]
fn the_ledger_says_how_verifys_output_was_ended() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    let ended = env.ledger().last().unwrap()["verify"]["output_ended_by"].clone();
    let ways: &[&str] = if cfg!(target_os = "linux") { &["pid-namespace", "subreaper"] } else { &["grace"] };
    assert!(ended.as_str().is_some_and(|way| ways.contains(&way)), "{ended}");
}
