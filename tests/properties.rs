//! Arbitrary bytes as the event on stdin, the state file and the transcript, for every host:
//! `stop-hook` never panics, never blocks without an active valid loop, always exits 0 with empty
//! or host-shaped output, and finishes in bounded time and memory.

use std::fs;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::util::{Run, TestEnv, run_command};

const HOSTS: [&str; 7] =
    ["claude-code", "antigravity", "gemini-cli", "codex", "cursor", "copilot-cli", "opencode"];
const SESSION: &str = "prop-session";
/// Per run. Far above a real stop's cost, far below a hang.
const TIME_LIMIT: Duration = Duration::from_secs(10);
/// Address space the hook may use, in KiB (`ulimit -v`): a read of an endless device or a huge
/// allocation fails instead of growing.
const MEMORY_LIMIT_KIB: u64 = 1 << 20;

/// An event of `host`'s shape for the test session, with `fields` merged in: what the adapter
/// reads, so arbitrary values reach past the first check.
fn event_of(host: &str, transcript: &str, message: &str, flag: bool) -> Value {
    match host {
        "antigravity" => {
            json!({"conversationId": SESSION, "workspacePaths": ["/p"], "transcriptPath": transcript,
            "executionNum": 1, "terminationReason": "model_stop", "fullyIdle": true})
        }
        "gemini-cli" => {
            json!({"session_id": SESSION, "hook_event_name": "AfterAgent", "prompt_response": message,
            "stop_hook_active": flag, "transcript_path": transcript})
        }
        "cursor" => json!({"conversation_id": SESSION, "hook_event_name": "stop", "status": "completed",
            "loop_count": u32::from(flag), "transcript_path": transcript}),
        "copilot-cli" => {
            json!({"sessionId": SESSION, "stopReason": "end_turn", "transcriptPath": transcript})
        }
        "codex" => json!({"session_id": SESSION, "turn_id": "t", "hook_event_name": "Stop",
            "last_assistant_message": message, "stop_hook_active": flag}),
        "opencode" => json!({"opencode_hook": "event", "directory": transcript,
            "session": {"id": SESSION, "title": message, "parentID": if flag { Value::Null } else { json!(message) }},
            "event": {"type": "session.idle", "properties": {"sessionID": SESSION}}}),
        _ => json!({"session_id": SESSION, "hook_event_name": "Stop", "transcript_path": transcript,
            "last_assistant_message": message, "stop_hook_active": flag}),
    }
}

/// Whether `stdout` is one of the answers `host` reads, and whether it blocks.
fn shape(host: &str, stdout: &str) -> Result<bool, String> {
    let out = stdout.trim_end();
    if out.is_empty() {
        return if matches!(host, "claude-code" | "codex") { Ok(false) } else { Err("empty".into()) };
    }
    if out.contains('\n') {
        return Err("more than one line".into());
    }
    let value: Value = serde_json::from_str(out).map_err(|e| format!("not JSON: {e}"))?;
    let object = value.as_object().ok_or("not an object")?;
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    let decision = object.get("decision").and_then(Value::as_str);
    let ok = match host {
        "claude-code" => keys.iter().all(|k| ["decision", "reason", "systemMessage"].contains(k)),
        "codex" => keys == ["decision", "reason"] || keys == ["systemMessage"],
        "gemini-cli" => matches!(decision, Some("allow" | "block")),
        "antigravity" => matches!(decision, Some("stop" | "continue")),
        "cursor" => keys.is_empty() || keys == ["followup_message"],
        "opencode" => keys.iter().all(|k| ["prompt", "message"].contains(k)),
        _ => keys.is_empty() || keys.iter().all(|k| ["decision", "reason"].contains(k)),
    };
    if !ok {
        return Err(format!("not {host}'s shape"));
    }
    Ok(decision == Some("block")
        || decision == Some("continue")
        || object.contains_key("followup_message")
        || object.contains_key("prompt"))
}

/// Runs `stop-hook --host HOST` under the time and memory limits.
fn stop(env: &TestEnv, host: &str, stdin: &[u8]) -> (Run, Duration) {
    let bin = env!("CARGO_BIN_EXE_loop-hook");
    let mut shell = std::process::Command::new("sh");
    shell
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_LIMIT_KIB}; exec \"$0\" stop-hook --host {host}"))
        .arg(bin)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .current_dir(&env.project);
    let started = Instant::now();
    let run = run_command(shell, stdin);
    (run, started.elapsed())
}

fn check(host: &str, run: &Run, took: Duration, may_block: bool) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        run.code,
        0,
        "{}: exit {} (stdout {:?}, stderr {:?})",
        host,
        run.code,
        run.stdout,
        run.stderr
    );
    prop_assert!(took < TIME_LIMIT, "{host}: took {took:?}");
    prop_assert!(!run.stderr.contains("panicked"), "{host}: {}", run.stderr);
    prop_assert!(!run.stdout.contains("internal error"), "{host}: {}", run.stdout);
    let blocks = shape(host, &run.stdout)
        .map_err(|why| TestCaseError::fail(format!("{host}: {why}: {:?}", run.stdout)))?;
    prop_assert!(may_block || !blocks, "{host} blocked without an active valid loop: {}", run.stdout);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Raw bytes on stdin, beside a state file of raw bytes and no loop: nothing can block.
    #[test]
    fn arbitrary_stdin_and_state_never_block_or_fail(
        stdin in proptest::collection::vec(any::<u8>(), 0..2048),
        state in proptest::collection::vec(any::<u8>(), 0..4096),
        host in 0..HOSTS.len(),
    ) {
        let env = TestEnv::new();
        let dir = env.session_dir(SESSION);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("state.md"), &state).unwrap();
        let (run, took) = stop(&env, HOSTS[host], &stdin);
        check(HOSTS[host], &run, took, false)?;
    }

    /// A well-formed event of each host with an arbitrary transcript, message and state: never
    /// a failure, and never a block unless the state is an active loop's.
    #[test]
    fn arbitrary_transcript_message_and_state_in_each_hosts_event(
        transcript in proptest::collection::vec(any::<u8>(), 0..8192),
        state in proptest::collection::vec(any::<u8>(), 0..4096),
        message in any::<String>(),
        flag in any::<bool>(),
        host in 0..HOSTS.len(),
    ) {
        let env = TestEnv::new();
        let dir = env.session_dir(SESSION);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("state.md"), &state).unwrap();
        let path = env.project.join("transcript.jsonl");
        fs::write(&path, &transcript).unwrap();
        let event = event_of(HOSTS[host], &path.display().to_string(), &message, flag);
        let (run, took) = stop(&env, HOSTS[host], event.to_string().as_bytes());
        check(HOSTS[host], &run, took, false)?;
    }

    /// The same with a real active loop: blocks are allowed then, failures still are not.
    #[test]
    fn arbitrary_transcript_and_message_with_an_active_loop(
        transcript in proptest::collection::vec(any::<u8>(), 0..8192),
        message in any::<String>(),
        flag in any::<bool>(),
        host in 0..HOSTS.len(),
    ) {
        let env = TestEnv::new();
        let started = env.run(&["start", "--session", SESSION, "--host", HOSTS[host]], "t --verify false");
        prop_assert_eq!(started.code, 0, "{}", started.stdout);
        let path = env.project.join("transcript.jsonl");
        fs::write(&path, &transcript).unwrap();
        let event = event_of(HOSTS[host], &path.display().to_string(), &message, flag);
        let (run, took) = stop(&env, HOSTS[host], event.to_string().as_bytes());
        check(HOSTS[host], &run, took, true)?;
    }
}
