//! `loop-hook guard`: `PreToolUse` events piped into the binary, and its deny JSON.

use serde_json::{Value, json};

use crate::util::{SESSION, TestEnv};

fn pre_tool_use(env: &TestEnv, session: &str, tool: &str, input: &Value) -> String {
    let event = json!({
        "session_id": session,
        "transcript_path": env.project.join("t.jsonl"),
        "cwd": env.project,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "toolu_1",
    });
    let run = env.run(&["guard"], event.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

fn denied(stdout: &str) -> Option<String> {
    let json: Value = serde_json::from_str(stdout).ok()?;
    assert_eq!(json["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert_eq!(json["hookSpecificOutput"]["permissionDecision"], "deny");
    json["hookSpecificOutput"]["permissionDecisionReason"].as_str().map(str::to_string)
}

#[test]
fn without_a_loop_every_tool_call_passes_silently() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1");
    assert_eq!(pre_tool_use(&env, SESSION, "Bash", &json!({"command": "rm check.sh"})), "");
    assert_eq!(env.run(&["guard"], "not json").stdout, "");
    assert_eq!(env.run(&["guard"], "").stdout, "");
}

#[test]
fn edits_of_the_verify_script_and_protected_paths_are_denied_while_the_loop_runs() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1\n");
    std::fs::create_dir_all(env.project.join("tests")).unwrap();
    env.write("tests/a.test", "a");
    env.start("t --verify \"sh check.sh\" --protect tests");
    let check = env.project.join("check.sh").display().to_string();
    let reason =
        denied(&pre_tool_use(&env, SESSION, "Write", &json!({"file_path": check, "content": "exit 0"})))
            .unwrap();
    assert!(reason.contains("`check.sh` is part of this loop's verify check"), "{reason}");
    assert!(
        denied(&pre_tool_use(
            &env,
            SESSION,
            "Edit",
            &json!({"file_path": "tests/a.test", "old_string": "a", "new_string": "b"})
        ))
        .is_some()
    );
    assert!(
        denied(&pre_tool_use(&env, SESSION, "Bash", &json!({"command": "echo 'exit 0' > check.sh"})))
            .is_some()
    );
    assert!(denied(&pre_tool_use(&env, SESSION, "Bash", &json!({"command": "loop-hook cancel"}))).is_some());
    assert_eq!(pre_tool_use(&env, SESSION, "Write", &json!({"file_path": "src.sh", "content": "x"})), "");
    assert_eq!(pre_tool_use(&env, SESSION, "Bash", &json!({"command": "sh check.sh"})), "");
    assert_eq!(pre_tool_use(&env, SESSION, "Read", &json!({"file_path": check})), "");
    assert_eq!(
        pre_tool_use(&env, "another-session", "Bash", &json!({"command": "rm check.sh"})),
        "",
        "other sessions are not guarded"
    );
    env.run(&["cancel", "--session", SESSION], "");
    assert_eq!(
        pre_tool_use(&env, SESSION, "Bash", &json!({"command": "rm check.sh"})),
        "",
        "an ended loop guards nothing"
    );
}

/// Qwen Code's tools, as its `PreToolUse` names them: the same objections as Claude Code's.
#[test]
fn qwen_codes_file_and_shell_tools_are_guarded_too() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1\n");
    let started = env.run(
        &["start", "--session", SESSION, "--host", "qwen-code"],
        "t --verify \"sh check.sh\" --max-iterations 3",
    );
    assert_eq!(started.code, 0, "{}", started.stdout);
    let write = json!({"file_path": env.project.join("check.sh"), "content": "exit 0"});
    assert!(denied(&pre_tool_use(&env, SESSION, "write_file", &write)).unwrap().contains("check.sh"));
    let edit = json!({"file_path": "check.sh", "old_string": "exit 1", "new_string": "exit 0"});
    assert!(denied(&pre_tool_use(&env, SESSION, "edit", &edit)).is_some());
    let shell = json!({"command": "echo 'exit 0' > check.sh", "description": "d"});
    assert!(denied(&pre_tool_use(&env, SESSION, "run_shell_command", &shell)).is_some());
    let honest = json!({"command": "sh check.sh", "description": "d"});
    assert_eq!(pre_tool_use(&env, SESSION, "run_shell_command", &honest), "");
    assert_eq!(
        pre_tool_use(&env, SESSION, "write_file", &json!({"file_path": "src.sh", "content": "x"})),
        ""
    );
}

/// The guard as the host runs it: the binary with the hook's environment, resolving `$HOME`,
/// quoted words and scheduled prompts, and letting an honest edit-then-check through.
#[test]
fn the_guard_reads_commands_as_the_shell_would() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1\n");
    env.write("calc.sh", "echo $(($1 - $2))\n");
    env.start("t --verify \"sh check.sh\"");
    let deny = |tool: &str, input: Value| denied(&pre_tool_use(&env, SESSION, tool, &input));
    for command in [
        "rm -rf $HOME/.local/state/for-loop",
        "loop-hook can''cel",
        "\"$HOME/.cargo/bin/loop-hook\" \"ca\"ncel",
        "python3 -c \"import shutil; shutil.rmtree('$HOME/.local/state/for-loop/sessions')\"",
        "find ~ -name state.md -delete",
        "echo '{\"disableAllHooks\": true}' > .claude/settings.local.json",
    ] {
        assert!(deny("Bash", json!({"command": command})).is_some(), "{command}");
    }
    let settings = env.project.join(".claude/settings.local.json").display().to_string();
    let reason = deny(
        "Write",
        json!({"file_path": settings, "content": "{\"env\":{\"FOR_LOOP_BIN\":\"/bin/true\"}}"}),
    );
    assert!(reason.unwrap().contains("settings"));
    let scheduled =
        deny("ScheduleWakeup", json!({"delaySeconds": 60, "reason": "r", "prompt": "/for-loop:cancel-loop"}));
    assert!(scheduled.unwrap().contains("submitted as if the user typed it"));
    assert_eq!(
        pre_tool_use(&env, SESSION, "ScheduleWakeup", &json!({"delaySeconds": 60, "prompt": "check CI"})),
        ""
    );
    assert_eq!(
        pre_tool_use(&env, SESSION, "Bash", &json!({"command": "sed -i 's/-/+/' calc.sh && ./check.sh"})),
        ""
    );
}

/// The strict tier also keeps file tools inside the project, and the shell inside the sandbox and
/// in the foreground, each with a reason the model can act on.
#[test]
fn in_the_strict_tier_file_tools_stay_in_the_project_and_the_shell_in_the_sandbox() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join(".claude")).unwrap();
    env.write(
        ".claude/settings.json",
        r#"{"sandbox":{"enabled":true,"allowUnsandboxedCommands":false,"failIfUnavailable":true}}"#,
    );
    env.start("t --verify true");
    let deny = |tool: &str, input: &Value| denied(&pre_tool_use(&env, SESSION, tool, input));
    let outside = env.home.join(".local/lib/python3/site-packages/x.pth").display().to_string();
    let reason = deny("Write", &json!({"file_path": outside, "content": "import os"})).unwrap();
    assert!(reason.contains("strict mode") && reason.contains("outside the project"), "{reason}");
    let background = deny("Bash", &json!({"command": "sleep 100", "run_in_background": true})).unwrap();
    assert!(background.contains("Run it in the foreground"), "{background}");
    let unsandboxed = deny("Bash", &json!({"command": "ls", "dangerouslyDisableSandbox": true})).unwrap();
    assert!(unsandboxed.contains("may not leave the sandbox"), "{unsandboxed}");
    assert_eq!(pre_tool_use(&env, SESSION, "Write", &json!({"file_path": "src.rs", "content": "x"})), "");
    assert_eq!(pre_tool_use(&env, SESSION, "Bash", &json!({"command": "sleep 1"})), "");

    // The default tier refuses none of these: the sandbox is what they would escape.
    let open = TestEnv::new();
    open.start("t --verify true");
    let bg = json!({"command": "sleep 100", "run_in_background": true});
    assert_eq!(pre_tool_use(&open, SESSION, "Bash", &bg), "");
}

/// While a loop runs, the agent switches for-loop's hooks off through the host's settings (here
/// with a plain file write the guard cannot read as one, as python would do it): the next tool
/// call tells the user at once, in words, and the ledger records it as the agent's. Each change
/// is told once; a setting that has nothing to do with the hooks is no change.
#[test]
fn hooks_switched_off_in_the_settings_are_told_to_the_user_at_the_next_tool_call() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1\n");
    env.start("t --verify \"sh check.sh\"");
    let call = || pre_tool_use(&env, SESSION, "Bash", &json!({"command": "ls"}));
    assert_eq!(call(), "", "nothing changed yet");
    env.write(".claude/settings.local.json", r#"{"permissions": {"allow": ["Bash(ls)"]}}"#);
    assert_eq!(call(), "", "a setting that does not touch the hooks");
    for (settings, names) in [
        (r#"{"disableAllHooks": true}"#, "disableAllHooks"),
        (r#"{"disableAllHooks": true, "env": {"FOR_LOOP_BIN": "/tmp/fake"}}"#, "env"),
    ] {
        env.write(".claude/settings.local.json", settings);
        let out = call();
        let json: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{names}: {out}"));
        let told = json["systemMessage"].as_str().unwrap();
        assert!(
            told.contains("something that decides whether for-loop's hooks run at all has changed"),
            "{told}"
        );
        assert!(told.contains(".claude/settings.local.json (changed)"), "{told}");
        assert!(told.contains("/cancel-loop"), "{told}");
        assert!(json.get("hookSpecificOutput").is_none(), "the call itself is not refused: {out}");
        assert_eq!(call(), "", "told once");
    }
    let lines: Vec<(Value, Value)> = env
        .ledger()
        .iter()
        .filter(|l| l["reason"] == "host_config_changed")
        .map(|l| (l["origin"].clone(), l["decision"].clone()))
        .collect();
    assert_eq!(lines, vec![(json!("agent"), json!("note")); 2]);
    // The loop is judged as before.
    assert!(env.stop("done").blocked());
}
