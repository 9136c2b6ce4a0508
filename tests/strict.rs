//! The strict tier without a host: Claude Code's sandbox settings in the project, and verify run
//! by the binary in its own sandbox, where code under test can neither write the loop's files nor
//! see the hook's processes.

use crate::util::{SESSION, TestEnv};

const STRICT: &str =
    r#"{"sandbox":{"enabled":true,"allowUnsandboxedCommands":false,"failIfUnavailable":true}}"#;

fn strict_project(env: &TestEnv) {
    std::fs::create_dir_all(env.project.join(".claude")).unwrap();
    env.write(".claude/settings.json", STRICT);
}

#[test]
fn the_start_message_and_status_say_which_tier_and_why() {
    let env = TestEnv::new();
    let started = env.start("t --verify false");
    assert!(
        started.stdout.contains("Tier:        default: no sandbox (Claude Code's sandbox.enabled is not true) — tampering is detected and reported, not prevented"),
        "{}",
        started.stdout
    );
    strict_project(&env);
    let status = env.run(&["status", "--session", SESSION], "");
    assert!(
        status.stdout.contains("tier:       strict: Claude Code sandbox on, verify sandboxed (bubblewrap)"),
        "{}",
        status.stdout
    );
}

#[test]
fn require_strict_refuses_to_start_outside_the_strict_tier() {
    let env = TestEnv::new();
    let refused = env.run(&["start", "--session", SESSION], "t --verify false --require-strict");
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(refused.stdout.contains("strict mode is required (--require-strict)"), "{}", refused.stdout);
    assert!(!env.state_path().exists());
    let mut by_default = env.command(&["start", "--session", SESSION]);
    by_default.env("FOR_LOOP_REQUIRE_STRICT", "1");
    let refused = crate::util::run_command(by_default, b"t --verify false");
    assert!(refused.stdout.contains("(FOR_LOOP_REQUIRE_STRICT)"), "{}", refused.stdout);
    strict_project(&env);
    env.start("t --verify false --require-strict");
}

/// Code that verify runs tries to mark the loop done, delete the store, rewrite the check, and
/// kill the hook. In the strict tier every attempt fails, the check (which passes only if one
/// worked) fails, and the loop goes on. In the default tier the same check gets through, and the
/// tampering is left for the state and ledger checks to find.
#[test]
fn code_that_verify_runs_cannot_touch_the_loop_in_the_strict_tier() {
    let env = TestEnv::new();
    strict_project(&env);
    start_a_tampering_check(&env);
    let stop = env.stop("done");
    assert!(stop.blocked(), "{}", stop.stdout);
    assert!(stop.reason().contains("FAIL: nothing was tampered with"), "{}", stop.reason());
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(state.contains("status: active"), "{state}");
    assert!(std::fs::read_to_string(env.project.join("check.sh")).unwrap().contains("FAIL"));

    // The same check in the default tier: nothing stops it from writing the loop's state.
    let open = TestEnv::new();
    start_a_tampering_check(&open);
    open.stop("done");
    let state = std::fs::read_to_string(open.state_path()).unwrap_or_default();
    assert!(!state.contains("status: active"), "the default tier's verify could not write: {state}");
}

fn start_a_tampering_check(env: &TestEnv) {
    let store = env.store();
    env.write(
        "check.sh",
        &format!(
            "sed -i 's/status: active/status: ended/' {state} 2>/dev/null && exit 0\n\
             rm -rf {store} 2>/dev/null; test -d {store} || exit 0\n\
             echo 'exit 0' > check.sh 2>/dev/null && exit 0\n\
             ps -e | grep -q loop-hook && exit 0\n\
             echo 'FAIL: nothing was tampered with'; exit 1\n",
            state = env.state_path().display(),
            store = store.display()
        ),
    );
    env.start("make it pass --verify \"sh check.sh\"");
}

/// A verify that hangs in the sandbox is killed at its timeout with everything it started: the
/// sandbox's PID namespace dies with it.
#[test]
fn a_sandboxed_verify_that_hangs_is_killed_with_its_children() {
    let env = TestEnv::new();
    strict_project(&env);
    env.write("hang.sh", "sleep 3127 & sleep 3127\n");
    env.start("t --verify \"sh hang.sh\" --verify-timeout 1");
    let started = std::time::Instant::now();
    let stop = env.stop("done");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
    assert!(stop.reason().contains("did not finish within 1 s"), "{}", stop.stdout);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let left = std::process::Command::new("pgrep").args(["-f", "sleep 3127"]).output().unwrap();
    assert!(
        left.stdout.is_empty(),
        "verify's children outlived it: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// On a machine where the strict tier could run (bubblewrap works, socat is installed), a loop
/// in the default tier says so at its start. `/for-loop:strict`, carried out by the prompt hook,
/// shows the settings and writes nothing; with `--project` it writes them, and the next loop
/// starts in the strict tier.
#[test]
fn the_strict_tier_in_one_step() {
    let env = TestEnv::new();
    for tool in ["bwrap", "socat"] {
        let found =
            std::process::Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().unwrap();
        assert!(found.status.success(), "{tool} is missing: run scripts/install-test-deps");
    }
    let started = env.start("t --verify false");
    assert!(
        started.stdout.contains("the strict tier could run on this machine and is not on: /for-loop:strict"),
        "{}",
        started.stdout
    );
    env.run(&["cancel", "--session", SESSION], "");
    let prompt = |text: &str| {
        let event = serde_json::json!({"session_id": SESSION, "transcript_path": env.project.join("t.jsonl"),
            "cwd": env.project, "hook_event_name": "UserPromptSubmit", "prompt": text});
        env.run(&["prompt-hook"], event.to_string()).stdout
    };
    // Written while a loop runs: the guard does not take the user's change for the agent's.
    env.start("t --verify false");
    let shown = prompt("/for-loop:strict");
    assert!(shown.contains(r#"\"failIfUnavailable\":true"#) && shown.contains("To undo"), "{shown}");
    assert!(!env.project.join(".claude/settings.json").exists(), "shown only");
    let written = prompt("/for-loop:strict --project");
    assert!(written.contains("for-loop: strict tier written to"), "{written}");
    let tool = serde_json::json!({"session_id": SESSION, "cwd": env.project, "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": "ls"}});
    assert_eq!(env.run(&["guard"], tool.to_string()).stdout, "", "no notice of the user's own change");
    let changed = env.ledger_of_raw(SESSION);
    let change = changed.iter().find(|l| l["reason"] == "host_config_changed").expect("recorded");
    assert_eq!(change["origin"], "user");
    env.run(&["cancel", "--session", SESSION], "");
    let again = env.start("t --verify false");
    assert!(again.stdout.contains("Tier:        strict"), "{}", again.stdout);
    assert!(!again.stdout.contains("could run on this machine"), "{}", again.stdout);
}
