//! Real agents' rhythms (issue 41), as Stop events piped into the binary: stops made while the
//! session's background work runs, the host's cap of blocks in a row without a tool call, and
//! the recorded payloads of Qwen Code, whose event lists its background agents.

use serde_json::{Value, json};

use crate::util::{SESSION, TestEnv, run_command, stop_event};

/// A Stop event of the test session with `tasks` as its `background_tasks`.
fn stop_with(env: &TestEnv, last: &str, active: bool, tasks: Value) -> crate::util::Run {
    let mut event = stop_event(SESSION, &env.project, last, active);
    event["background_tasks"] = tasks;
    env.run(&["stop-hook"], event.to_string())
}

fn build(id: &str) -> Value {
    json!([{"id": id, "type": "local_bash", "status": "running", "description": "cargo build --release", "command": "cargo build --release"}])
}

fn state(env: &TestEnv) -> String {
    std::fs::read_to_string(env.state_path()).unwrap()
}

#[test]
fn a_stop_while_background_work_runs_waits_and_the_stop_after_it_is_judged() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f built\n");
    env.start("build it --verify \"sh check.sh\" --max-iterations 3");
    for n in 0..4 {
        let run = stop_with(&env, "the build runs in the background; I will wait for it", n > 0, build("b1"));
        assert!(!run.blocked(), "a stop with work in flight was blocked: {}", run.stdout);
        assert!(
            run.system_message().starts_with(
                "for-loop: waiting for 1 background task before judging (cargo build --release)"
            ),
            "{}",
            run.system_message()
        );
        assert!(run.system_message().contains("Iteration 1 of 3 is not used"), "{}", run.system_message());
    }
    assert!(state(&env).contains("iteration: 1\n"), "{}", state(&env));
    let reasons: Vec<Value> = env.ledger().iter().map(|e| e["reason"].clone()).collect();
    assert_eq!(reasons, vec![json!("background_wait"); 4], "no verify ran, no iteration was used");
    let status = env.run(&["status", "--session", SESSION], "");
    assert!(status.stdout.contains("waited on background work: 4 stop(s)"), "{}", status.stdout);
    assert!(status.stdout.contains("waiting now for 1 task(s)"), "{}", status.stdout);
    let report = env.run(&["report", "--session", SESSION, "--out", "report.html"], "");
    assert_eq!(report.code, 0, "{}{}", report.stdout, report.stderr);
    let page = std::fs::read_to_string(env.project.join("report.html")).unwrap();
    assert!(page.contains("waited on background work"), "the report shows no wait");
    assert!(
        page.contains("waiting for 1 background task before judging: cargo build --release"),
        "no task named"
    );
    // The work landed: the next stop is judged, and passes at iteration 1.
    env.write("built", "");
    let run = stop_with(&env, "built", false, json!([]));
    assert!(
        run.system_message().starts_with("for-loop: done, verified at iteration 1/3"),
        "{}",
        run.system_message()
    );
}

#[test]
fn a_task_that_never_ends_holds_the_loop_no_longer_than_its_bound_and_is_told() {
    let env = TestEnv::new();
    env.start("build it --verify false --background-wait 1s");
    let forever = json!([{"id": "b9", "type": "local_bash", "status": "running", "command": "sleep 99999"}]);
    assert!(!stop_with(&env, "waiting", false, forever.clone()).blocked());
    // Time passing only makes the bound surer: a slow machine waits longer, never less.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let judged = stop_with(&env, "still waiting", false, forever.clone());
    assert!(judged.blocked(), "the wait outlived its bound: {}", judged.stdout);
    let told = judged.system_message();
    assert!(told.contains("was judged with background work still in flight (sleep 99999)"), "{told}");
    assert!(judged.reason().contains("sleep 99999"), "the agent is told too: {}", judged.reason());
    // The same work again: judged at once, not waited on.
    let again = stop_with(&env, "still", true, forever);
    assert!(again.blocked());
    let reasons: Vec<Value> = env.ledger().iter().map(|e| e["reason"].clone()).collect();
    assert_eq!(
        reasons,
        [
            json!("background_wait"),
            json!("background_wait_over"),
            json!("verify_failed"),
            json!("verify_failed")
        ]
    );
    assert!(state(&env).contains("waits_cut: 1"), "{}", state(&env));
}

#[test]
fn finished_or_missing_background_work_changes_nothing() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let done = json!([{"id": "a1", "status": "completed", "agent_type": "general"}]);
    assert!(stop_with(&env, "1", false, done).blocked());
    assert!(stop_with(&env, "2", true, json!("not a list")).blocked());
    let mut without = stop_event(SESSION, &env.project, "3", true);
    without.as_object_mut().unwrap().remove("background_tasks");
    assert!(env.run(&["stop-hook"], without.to_string()).blocked());
    assert_eq!(env.ledger().len(), 3);
}

/// The transcript of a session whose agent only talks: a new reply, with no tool call, after
/// each block.
fn talking_transcript(env: &TestEnv) {
    env.write("transcript.jsonl", "");
}

/// A stop of the test session under Claude Code's `cap`. An agent that only talks says
/// something new each turn; its transcript grows by the block's feedback and that reply.
fn capped_stop(env: &TestEnv, cap: &str, active: bool) -> crate::util::Run {
    let path = env.project.join("transcript.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    let n = text.lines().count();
    let said = format!("I think it is done ({n}).");
    if !text.contains("tool_use") {
        let user =
            json!({"type": "user", "message": {"role": "user", "content": "Stop hook feedback:\ngo on"}});
        let reply = json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": said}]}});
        text.push_str(&format!("{user}\n{reply}\n"));
        std::fs::write(&path, text).unwrap();
    }
    let mut cmd = env.command(&["stop-hook"]);
    cmd.env("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", cap);
    run_command(cmd, stop_event(SESSION, &env.project, &said, active).to_string().as_bytes())
}

#[test]
fn an_agent_that_only_talks_is_parked_at_the_hosts_cap_named_and_resumable() {
    let env = TestEnv::new();
    env.start("t --verify false --max-same-failures 20");
    talking_transcript(&env);
    assert!(capped_stop(&env, "3", false).blocked());
    assert!(capped_stop(&env, "3", true).blocked());
    let last = capped_stop(&env, "3", true);
    assert!(last.reason().contains("this is the last"), "the agent is warned: {}", last.reason());
    let parked = capped_stop(&env, "3", true);
    assert!(!parked.blocked(), "the block the host would throw away was sent");
    let told = parked.system_message();
    assert!(told.contains("parked at iteration 4/30"), "{told}");
    assert!(told.contains("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"), "{told}");
    assert!(told.contains("/for-loop:resume"), "{told}");
    assert!(state(&env).contains("status: parked"), "{}", state(&env));
    assert_eq!(env.ledger().last().unwrap()["reason"], "block_cap");
    let resumed = env.run(&["resume", "--session", SESSION], "");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert!(state(&env).contains("status: active"));
}

#[test]
fn a_cap_turned_off_or_tool_calls_never_park() {
    let env = TestEnv::new();
    env.start("t --verify false --max-same-failures 20");
    talking_transcript(&env);
    for n in 0..10 {
        assert!(capped_stop(&env, "0", n > 0).blocked(), "stop {n}");
    }
    let tools = TestEnv::new();
    tools.start("t --verify false --max-same-failures 20");
    let call = json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}});
    let result = json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}});
    let said = json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}]}});
    for n in 0..10 {
        let reply = json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": format!("step {n}")}]}});
        let feedback =
            json!({"type": "user", "message": {"role": "user", "content": "Stop hook feedback:\ngo on"}});
        let before = std::fs::read_to_string(tools.project.join("transcript.jsonl")).unwrap_or_default();
        tools.write("transcript.jsonl", &format!("{before}{feedback}\n{call}\n{result}\n{said}\n{reply}\n"));
        assert!(capped_stop(&tools, "2", n > 0).blocked(), "stop {n} of an agent at work");
    }
}

#[test]
fn qwen_codes_running_background_agent_is_waited_on() {
    let env = TestEnv::new();
    let session = "qwen-bg-0001";
    let started = env
        .run(&["start", "--session", session, "--host", "qwen-code"], "t --verify false --max-iterations 8");
    assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
    let fixture =
        std::fs::read_to_string(crate::util::repo().join("tests/fixtures/hosts/qwen-code/0.24.4-stop.json"))
            .unwrap();
    let mut event: Value = serde_json::from_str(
        &fixture.replace("{{SESSION}}", session).replace("{{PROJECT}}", &env.project.display().to_string()),
    )
    .unwrap();
    // The shape Qwen Code 0.24.4 builds (`getBackgroundTaskSnapshot`): its background agents.
    event["background_tasks"] = json!([
        {"id": "agent-1", "status": "completed", "agent_type": "general", "started_at": "2026-12-05T10:00:00.000Z", "description": "read the docs"},
        {"id": "agent-2", "status": "running", "agent_type": "general", "started_at": "2026-12-05T10:01:00.000Z", "description": "run the test suite"}
    ]);
    event["stop_hook_active"] = json!(false);
    let run = env.run(&["stop-hook", "--host", "qwen-code"], event.to_string());
    assert!(!run.blocked(), "{}", run.stdout);
    assert!(
        run.system_message()
            .starts_with("for-loop: waiting for 1 background task before judging (run the test suite)"),
        "{}",
        run.stdout
    );
    event["background_tasks"][1]["status"] = json!("completed");
    assert!(env.run(&["stop-hook", "--host", "qwen-code"], event.to_string()).blocked());
}

/// In `-p` the host exits once it ends a turn, blocked or not: a blocked stop whose host process
/// has exited is no silent `active` in `loop-hook status`.
#[test]
fn a_blocked_stop_whose_host_has_exited_is_told_by_status() {
    let env = TestEnv::new();
    env.start("t --verify false");
    assert!(env.stop("not yet").blocked());
    let quiet = env.run(&["status", "--session", SESSION], "");
    assert!(!quiet.stdout.contains("has exited"), "{}", quiet.stdout);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    // What the Stop hook records of the host that sent the stop, for a host now gone.
    let record = json!({"pid": pid, "started": 1, "at": jiff::Timestamp::now().as_second()});
    std::fs::write(env.session_dir(SESSION).join("host-process.json"), record.to_string()).unwrap();
    let told = env.run(&["status", "--session", SESSION], "");
    assert!(
        told.stdout.contains("the last stop was blocked, but the host process that sent it has exited"),
        "{}",
        told.stdout
    );
}

/// A cancel the agent forged through the prompt hook is undone by the next stop even when that
/// stop only waits on background work: the wait's commit records the undoing, as a verdict's does.
#[test]
fn a_forged_cancel_is_undone_at_a_stop_that_waits() {
    let env = TestEnv::new();
    env.forge_a_cancel("Building.");
    let run = stop_with(&env, "Building.", false, build("b1"));
    assert!(!run.blocked(), "{}", run.stdout);
    assert!(state(&env).contains("status: active"), "the forged cancel was not undone: {}", state(&env));
    let raw = env.ledger_of_raw(SESSION);
    let reasons: Vec<&str> = raw.iter().filter_map(|l| l["reason"].as_str()).collect();
    assert!(reasons.ends_with(&["command_unconfirmed", "background_wait"]), "{reasons:?}");
}
