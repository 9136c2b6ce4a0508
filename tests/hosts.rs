//! Every host but Claude Code: recorded payloads per documented host version, foreign and
//! malformed payloads for every adapter, and the hook commands of the packaging under `plugin/`.
//! The real Gemini CLI and Codex runs are in `e2e`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{Run, TestEnv, repo};

/// Each adapter's "let it stop" answer: what a refused, malformed or loop-less event gets.
pub(crate) const PLAIN_ALLOW: &[(&str, &str)] = &[
    ("claude-code", ""),
    ("antigravity", r#"{"decision":"stop"}"#),
    ("gemini-cli", r#"{"decision":"allow"}"#),
    ("codex", ""),
    ("cursor", "{}"),
    ("copilot-cli", "{}"),
    ("opencode", "{}"),
    ("qwen-code", ""),
];

pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts")
}

/// A fixture payload with its placeholders filled in.
pub(crate) fn payload(env: &TestEnv, session: &str, path: &Path) -> Vec<u8> {
    let text = std::fs::read(path).unwrap();
    let project = serde_json::to_string(&env.project).unwrap();
    String::from_utf8(text)
        .unwrap()
        .replace("\"{{PROJECT}}\"", &project)
        .replace("{{SESSION}}", session)
        .into_bytes()
}

/// `stop-hook --host HOST` with `stdin`.
fn stop(env: &TestEnv, host: &str, stdin: &[u8]) -> Run {
    env.run(&["stop-hook", "--host", host], stdin)
}

#[test]
fn recorded_payloads_give_the_exact_output_of_each_host() {
    let mut checked = 0;
    for host_dir in std::fs::read_dir(fixtures()).unwrap() {
        let host_dir = host_dir.unwrap().path();
        if !host_dir.is_dir() {
            continue;
        }
        let host = host_dir.file_name().unwrap().to_str().unwrap().to_string();
        for file in std::fs::read_dir(&host_dir).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            for with_loop in [false, true] {
                let env = TestEnv::new();
                let session = "fixture-session-0001";
                let task = "make the fixture pass";
                if with_loop {
                    let started = env.run(
                        &["start", "--session", session, "--host", &host],
                        format!("{task} --verify false --max-iterations 5"),
                    );
                    assert_eq!(started.code, 0, "{}", started.stdout);
                }
                let run = stop(&env, &host, &payload(&env, session, &path));
                let name = path.display().to_string();
                assert_eq!(run.code, 0, "{name}: {}", run.stderr);
                let expected_path = format!("{name}.{}.out", if with_loop { "loop" } else { "none" });
                let expected = std::fs::read_to_string(&expected_path)
                    .unwrap_or_else(|e| panic!("{expected_path}: {e}"));
                let actual = run.stdout.trim_end();
                let mut expected = expected.trim_end().to_string();
                if expected.contains("{{REINJECTED}}") {
                    let json: Value = serde_json::from_str(actual)
                        .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {actual}"));
                    let reason = json
                        .get("reason")
                        .or_else(|| json.get("followup_message"))
                        .or_else(|| json.get("prompt"))
                        .and_then(Value::as_str)
                        .unwrap_or_else(|| panic!("{name}: no prompt in {actual}"));
                    assert!(reason.starts_with(task), "{name}: the task is not re-injected: {reason}");
                    expected = expected.replace("{{REINJECTED}}", &Value::from(reason).to_string());
                    if let Some(message) = json.get("systemMessage").or_else(|| json.get("message")) {
                        expected = expected.replace("{{MESSAGE}}", &message.to_string());
                    }
                }
                assert_eq!(actual, expected, "{name} ({})", if with_loop { "loop" } else { "no loop" });
                // A refused event neither uses an iteration nor writes the ledger.
                let judged =
                    ["reason", "followup_message", "prompt"].iter().any(|key| expected.contains(key));
                let stops = env.ledger_reasons(session);
                // A turn the host ended on an error is recorded as such, never judged.
                let failed_turn = host == "cursor" && name.ends_with("-error.json");
                if with_loop && failed_turn {
                    assert_eq!(stops, ["agent_error"], "{name}");
                    checked += 1;
                    continue;
                }
                assert_eq!(stops.len(), usize::from(with_loop && judged), "{name}: {stops:?}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 28, "only {checked} fixture runs: are the fixtures missing?");
}

#[test]
fn malformed_payloads_allow_with_each_hosts_plain_answer() {
    let env = TestEnv::new();
    for (host, allow) in PLAIN_ALLOW {
        for bad in ["", "   \n", "not json", "[1,2]", "{}", "{\"session_id\":7}", "\u{feff}", "null"] {
            let run = stop(&env, host, bad.as_bytes());
            assert_eq!(run.code, 0, "{host} {bad:?}: {}", run.stderr);
            assert_eq!(run.stdout.trim_end(), *allow, "{host} {bad:?}");
        }
    }
}

/// Cursor also runs Claude Code's hooks, Copilot CLI too, VS Code reads Copilot's: a loop in the
/// session must not be judged by a hook meant for another host.
#[test]
fn a_hook_for_one_host_never_judges_another_hosts_payload() {
    let dirs = ["antigravity", "cursor", "copilot-cli", "gemini-cli", "codex", "opencode", "qwen-code"];
    for (host, allow) in PLAIN_ALLOW {
        for dir in dirs {
            if *host == dir || (*host == "claude-code" && dir == "codex") {
                // Codex's Stop is Claude Code's shape; the Claude hook never runs under Codex.
                continue;
            }
            for file in std::fs::read_dir(fixtures().join(dir)).unwrap() {
                let path = file.unwrap().path();
                if path.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                let env = TestEnv::new();
                let session = "fixture-session-0001";
                let started = env.run(&["start", "--session", session], "task --verify false");
                assert_eq!(started.code, 0, "{}", started.stdout);
                let run = stop(&env, host, &payload(&env, session, &path));
                assert_eq!(run.code, 0);
                assert_eq!(run.stdout.trim_end(), *allow, "{host} given {}", path.display());
                assert!(env.ledger_reasons(session).is_empty(), "{host} judged {}", path.display());
            }
        }
    }
}

/// Hosts that tell commands no session id: a loop started without one waits, blocks nobody,
/// and is claimed at the first stop whose transcript holds its token, which nothing but `start`
/// ever prints. Cancel and status find it by the directory it was started in. A second loop in
/// the same conversation, once the first has ended, is claimed the same way.
#[test]
fn a_loop_started_without_a_session_is_claimed_by_the_conversation_that_started_it() {
    let hosts = [
        ("cursor", "cursor/3.17.19-stop-completed.json", "transcript_path", "followup_message"),
        ("antigravity", "antigravity/2.0-docs-stop.json", "transcriptPath", "reason"),
    ];
    for (host, fixture, transcript_field, prompt_field) in hosts {
        let env = TestEnv::new();
        let start = |task: &str| {
            let started = env.run(&["start", "--host", host], format!("{task} --verify 'sh check.sh'"));
            assert_eq!(started.code, 0, "{host}: {}{}", started.stdout, started.stderr);
            let token = started
                .stdout
                .split_whitespace()
                .find(|word| word.starts_with("for-loop-claim-"))
                .unwrap_or_else(|| panic!("{host}: no claim token in {}", started.stdout))
                .to_string();
            (
                token.clone(),
                format!("{{\"tool_output\":\"for-loop: loop started\\nClaim: {token} (...)\"}}\n"),
            )
        };
        let stop_of = |session: &str, transcript: &str| {
            let path = env.project.join(format!("{session}.transcript"));
            std::fs::write(&path, transcript).unwrap();
            let mut event: Value =
                serde_json::from_slice(&payload(&env, session, &fixtures().join(fixture))).unwrap();
            event[transcript_field] = Value::from(path.to_str().unwrap());
            stop(&env, host, event.to_string().as_bytes())
        };
        let held = |run: &Run| -> String {
            let json: Value =
                serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{host}: {e}: {}", run.stdout));
            json[prompt_field]
                .as_str()
                .unwrap_or_else(|| panic!("{host}: not held: {}", run.stdout))
                .to_string()
        };
        let plain = PLAIN_ALLOW.iter().find(|(name, _)| *name == host).unwrap().1;
        env.write("check.sh", "echo 'FAIL: not yet'; exit 1\n");
        let task = "make check.sh pass, \"quoted\" $(not run)";
        let (token, started_output) = start(task);

        // Nothing a user or another conversation can print gives the token away.
        for args in [&["status", "--host", host][..], &["status", "--json"], &["status", "--all"]] {
            let shown = env.run(args, "");
            assert!(
                shown.code == 0 && shown.stdout.contains("active"),
                "{host} {args:?}: {}{}",
                shown.stdout,
                shown.stderr
            );
            assert!(
                !shown.stdout.contains(&token[15..]),
                "{host} {args:?} leaks the token: {}",
                shown.stdout
            );
        }
        // Another conversation in the same project: its transcript lacks the token.
        let other = stop_of("other-conversation", "{\"text\":\"hello\"}\n");
        assert_eq!(other.stdout.trim_end(), plain, "{host}: another conversation was held");
        assert!(!env.session_dir("other-conversation").join("state.md").exists());

        // The conversation that ran the start command: the token is in its transcript.
        let prompt = held(&stop_of("starting-conversation", &started_output));
        assert!(prompt.starts_with(task) && prompt.contains("FAIL: not yet"), "{host}: {prompt}");
        assert_eq!(env.ledger_reasons("starting-conversation"), ["verify_failed"], "{host}");
        assert!(env.run(&["status", "--all"], "").stdout.contains("starting-conversation"), "{host}");

        // No session id: status and cancel find the loop started in this directory by this host.
        let status = env.run(&["status", "--host", host], "");
        assert!(
            status.stdout.contains("active, iteration 2 of 30"),
            "{host}: {}{}",
            status.stdout,
            status.stderr
        );
        let cancelled = env.run(&["cancel", "--host", host], "");
        assert_eq!(cancelled.code, 0, "{host}: {}{}", cancelled.stdout, cancelled.stderr);
        let after = stop_of("starting-conversation", &started_output);
        assert_eq!(after.stdout.trim_end(), plain, "{host}: held after cancel");

        // A second loop in the same conversation replaces the ended one at the next stop.
        let second = "the second task";
        let (_, second_output) = start(second);
        let prompt = held(&stop_of("starting-conversation", &format!("{started_output}{second_output}")));
        assert!(prompt.starts_with(second), "{host}: {prompt}");
        let archive = env.session_dir("starting-conversation").join("archive");
        assert_eq!(
            std::fs::read_dir(&archive).map_or(0, std::iter::Iterator::count),
            1,
            "{host}: first loop not archived"
        );
    }
}

#[test]
fn hosts_without_the_last_message_refuse_a_completion_promise() {
    let env = TestEnv::new();
    for host in ["cursor", "antigravity", "copilot-cli", "opencode"] {
        let run = env.run(&["start", "--host", host, "--session", "s"], "task --completion-promise DONE");
        assert_eq!(run.code, 1, "{host}: {}", run.stdout);
        assert!(
            run.stdout.contains("--completion-promise needs the agent's last message"),
            "{host}: {}",
            run.stdout
        );
        assert!(run.stdout.contains("Use --verify CMD"), "{host}: {}", run.stdout);
    }
    let run = env.run(&["start", "--host", "codex", "--session", "s"], "task --completion-promise DONE");
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn packaging_files_are_exactly_valid() {
    let plugin = repo().join("plugin");
    let json = |path: &str| -> Value {
        let text = std::fs::read_to_string(plugin.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(!text.starts_with('\u{feff}'), "{path} has a byte order mark");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    // Antigravity drops a whole hooks.json on any error, a float timeout included.
    let agy = json("antigravity/hooks.json");
    let handler = &agy["for-loop"]["Stop"][0];
    assert!(handler["timeout"].is_u64(), "{handler}");
    assert_eq!(agy["for-loop"]["enabled"], true);
    let manifest = json("antigravity/plugin.json");
    let keys: Vec<&String> = manifest.as_object().unwrap().keys().collect();
    assert!(
        keys.iter().all(|k| ["name", "description", "disabled", "logo"].contains(&k.as_str())),
        "{keys:?}"
    );
    // Gemini counts milliseconds.
    let gemini = json("gemini-cli/hooks/hooks.json");
    let after = &gemini["hooks"]["AfterAgent"][0]["hooks"][0];
    assert!(after["timeout"].as_u64().unwrap() >= 600_000, "{after}");
    assert!(after["command"].as_str().unwrap().contains("stop-hook --host gemini-cli"));
    assert_eq!(json("gemini-cli/gemini-extension.json")["name"], "for-loop");
    let codex = json("codex/hooks/hooks.json");
    let stop = &codex["hooks"]["Stop"][0]["hooks"][0];
    assert!(stop["timeout"].is_u64() && stop["command"].as_str().unwrap().contains("--host codex"));
    assert_eq!(json("codex/.codex-plugin/plugin.json")["name"], "for-loop");
    let cursor = json("cursor/hooks/hooks.json");
    assert_eq!(cursor["version"], 1);
    assert!(cursor["hooks"]["stop"][0]["loop_limit"].is_null());
    assert_eq!(json("cursor/.cursor-plugin/plugin.json")["hooks"], "./hooks/hooks.json");
    let copilot = json("copilot-cli/for-loop.json");
    assert!(copilot["hooks"]["agentStop"][0]["timeoutSec"].is_u64());
    let prompt = &copilot["hooks"]["userPromptSubmitted"][0];
    assert!(
        prompt["timeoutSec"].is_u64()
            && prompt["bash"].as_str().unwrap().contains("prompt-hook --host copilot-cli")
    );
    // Qwen Code reads a hook timeout of 1000 or more as milliseconds, less as seconds.
    let qwen = json("qwen-code/hooks/hooks.json");
    let stop = &qwen["hooks"]["Stop"][0]["hooks"][0];
    assert!(stop["timeout"].as_u64().unwrap() >= 600_000, "{stop}");
    assert!(stop["command"].as_str().unwrap().contains("stop-hook --host qwen-code"));
    let prompt = &qwen["hooks"]["UserPromptSubmit"][0]["hooks"][0];
    assert!((1..1000).contains(&prompt["timeout"].as_u64().unwrap()), "{prompt}");
    assert!(prompt["command"].as_str().unwrap().contains("prompt-hook --host qwen-code"));
    assert_eq!(json("qwen-code/qwen-extension.json")["name"], "for-loop");
    let guard = &qwen["hooks"]["PreToolUse"][0];
    assert_eq!(guard["matcher"], "write_file|edit|run_shell_command", "Qwen Code's tool names");
    assert!(guard["hooks"][0]["command"].as_str().unwrap().contains("set -- guard;"));
    for name in ["for-loop", "cancel-loop", "loop-status", "resume-loop"] {
        let text = std::fs::read_to_string(plugin.join(format!("qwen-code/commands/{name}.toml"))).unwrap();
        // A `!{…}` line would run before the prompt hook, on the previous state of the loop.
        assert!(!text.contains("!{"), "qwen-code/commands/{name}.toml runs a shell command");
    }
    // Antigravity runs its hook as a program: it must be executable.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(plugin.join("antigravity/hooks/stop-hook")).unwrap().permissions(),
    );
    assert!(mode & 0o111 != 0, "antigravity/hooks/stop-hook is not executable");
}

/// A loop waits to be claimed, and the stopping conversation's transcript is a FIFO: the claim
/// search reads nothing from it (it used to wait for a writer for ever) and the stop is the
/// host's plain allow.
#[cfg(unix)]
#[test]
fn a_transcript_that_is_a_fifo_does_not_hang_the_claim_search() {
    let env = TestEnv::new();
    let started = env.run(&["start", "--host", "cursor"], "t --verify false");
    assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
    let fifo = env.project.join("conversation.transcript");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let fixture = fixtures().join("cursor/3.17.19-stop-completed.json");
    let mut event: Value = serde_json::from_slice(&payload(&env, "conversation", &fixture)).unwrap();
    event["transcript_path"] = Value::from(fifo.to_str().unwrap());
    let run = env.run_quickly(&["stop-hook", "--host", "cursor"], event.to_string());
    assert_eq!((run.code, run.stdout.trim_end()), (0, "{}"), "{}", run.stderr);
}

/// Each host's user is told how to resume, cancel and see a loop in that host's own words, and
/// each command named is one the packaging for that host provides (Gemini CLI and Codex have no
/// `/for-loop:resume`).
#[test]
fn each_host_is_told_commands_its_packaging_has() {
    let provided = |host: &str, command: &str| -> bool {
        let name = command.trim_start_matches(['/', '$']);
        match host {
            "claude-code" => match name {
                "for-loop:resume" => repo().join("plugin/claude-code/commands/resume.md").is_file(),
                other => repo().join("plugin/claude-code/skills").join(other).join("SKILL.md").is_file(),
            },
            "gemini-cli" | "qwen-code" => {
                repo().join("plugin").join(host).join("commands").join(format!("{name}.toml")).is_file()
            }
            "opencode" => repo().join("plugin/opencode/commands").join(format!("{name}.md")).is_file(),
            host => repo().join("plugin").join(host).join("skills").join(name).join("SKILL.md").is_file(),
        }
    };
    for host in [
        "claude-code",
        "gemini-cli",
        "codex",
        "cursor",
        "antigravity",
        "copilot-cli",
        "opencode",
        "qwen-code",
    ] {
        let env = TestEnv::new();
        let started =
            env.run(&["start", "--session", "s", "--host", host], "t --verify false --max-iterations 1");
        assert_eq!(started.code, 0, "{}", started.stdout);
        env.run(&["cancel", "--session", "s"], "");
        let status = env.run(&["status", "--session", "s"], "").stdout;
        let go_on =
            status.lines().find(|l| l.contains("go on:")).unwrap_or_else(|| panic!("{host}: {status}"));
        assert_eq!(go_on.contains("/for-loop:resume"), host == "claude-code", "{host}: {go_on}");
        let command = go_on
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
            .find(|w| w.starts_with('/') || w.starts_with('$'))
            .unwrap_or_else(|| panic!("{host}: no command in {go_on}"));
        assert!(provided(host, command), "{host}: `{command}` is not in its packaging");
    }
    for host in ["cursor", "antigravity"] {
        let skill =
            std::fs::read_to_string(repo().join("plugin").join(host).join("skills/resume-loop/SKILL.md"))
                .unwrap();
        assert!(
            skill.contains(&format!("resume --host {host} --exit-zero <<'FOR_LOOP_ARGS_END'")),
            "{skill}"
        );
    }
    // On Codex the prompt hook carries out `$resume-loop` itself; the skill only shows the result.
    let codex = std::fs::read_to_string(repo().join("plugin/codex/skills/resume-loop/SKILL.md")).unwrap();
    assert!(codex.contains("shown resume-loop --exit-zero"), "{codex}");
    // Gemini's command names only the extension's script, which runs the subcommand it is given.
    let gemini = std::fs::read_to_string(repo().join("plugin/gemini-cli/commands/resume-loop.toml")).unwrap();
    assert!(gemini.contains("/scripts/command\" $PPID resume {{args}}"), "{gemini}");
    let script = std::fs::read_to_string(repo().join("plugin/gemini-cli/scripts/command")).unwrap();
    assert!(script.contains("sh \"$f\" \"$subcommand\" --host gemini-cli --exit-zero"), "{script}");
}

/// opencode's plugin payloads with a field of the wrong type, or missing, or for another plugin
/// hook, let the session be idle: `{}`, nothing judged, nothing written.
#[test]
fn malformed_opencode_payloads_leave_the_session_idle() {
    let env = TestEnv::new();
    let started = env.run(&["start", "--session", "ses_1", "--host", "opencode"], "endless --verify false");
    assert_eq!(started.code, 0, "{}", started.stdout);
    for bad in [
        r#"{"opencode_hook":"event"}"#,
        r#"{"opencode_hook":"event","event":null}"#,
        r#"{"opencode_hook":"event","event":"session.idle"}"#,
        r#"{"opencode_hook":"event","event":{"type":"session.idle"}}"#,
        r#"{"opencode_hook":"event","event":{"type":"session.idle","properties":{"sessionID":7}}}"#,
        r#"{"opencode_hook":"event","event":{"type":"session.idle","properties":{"sessionID":""}}}"#,
        r#"{"opencode_hook":"event","event":{"type":7,"properties":{"sessionID":"ses_1"}}}"#,
        r#"{"opencode_hook":["event"],"event":{"type":"session.idle","properties":{"sessionID":"ses_1"}}}"#,
        r#"{"opencode_hook":"event","session":"ses_1","event":{"type":"session.idle","properties":{"sessionID":"ses_1"}}}"#,
        r#"{"opencode_hook":"event","directory":7,"event":{"type":"session.idle","properties":{"sessionID":"ses_1"}}}"#,
        r#"{"opencode_hook":"tool.execute.before","input":{"tool":"bash","sessionID":"ses_1"}}"#,
        r#"{"event":{"type":"session.idle","properties":{"sessionID":"ses_1"}}}"#,
        r#"{"type":"session.idle","properties":{"sessionID":"ses_1"}}"#,
    ] {
        let run = stop(&env, "opencode", bad.as_bytes());
        assert_eq!((run.code, run.stdout.trim_end()), (0, "{}"), "{bad}: {}", run.stderr);
    }
    assert!(env.ledger_reasons("ses_1").is_empty(), "{:?}", env.ledger_reasons("ses_1"));
    // The command and tool-call hooks take the same bad input without a word.
    for (command, bad) in [
        (
            "prompt-hook",
            r#"{"opencode_hook":"command.execute.before","input":{"command":7,"sessionID":"ses_1"}}"#,
        ),
        ("prompt-hook", r#"{"opencode_hook":"command.execute.before","input":"cancel-loop"}"#),
        ("prompt-hook", "not json"),
        (
            "guard",
            r#"{"opencode_hook":"tool.execute.before","input":{"tool":"bash","sessionID":"ses_1"},"output":{"args":7}}"#,
        ),
        (
            "guard",
            r#"{"opencode_hook":"tool.execute.before","input":{"tool":["bash"],"sessionID":"ses_1"},"output":{"args":{}}}"#,
        ),
    ] {
        let args: &[&str] = if command == "guard" { &["guard"] } else { &[command, "--host", "opencode"] };
        let run = env.run(args, bad);
        assert_eq!(run.code, 0, "{command} {bad}: {}", run.stderr);
        assert!(["", "{}"].contains(&run.stdout.trim_end()), "{command} {bad}: {}", run.stdout);
    }
    let state = std::fs::read_to_string(env.session_dir("ses_1").join("state.md")).unwrap();
    assert!(state.contains("status: active"), "{state}");
}

/// A subagent's session has its own id and a parent: the idle of one is never judged, even with
/// the parent's loop on. Fed to the hook as the plugin passes it.
#[test]
fn opencode_subagent_idle_is_not_judged() {
    let env = TestEnv::new();
    let started =
        env.run(&["start", "--session", "ses_parent", "--host", "opencode"], "endless --verify false");
    assert_eq!(started.code, 0, "{}", started.stdout);
    let idle = |session: &str, parent: Option<&str>| {
        serde_json::json!({
            "opencode_hook": "event",
            "directory": env.project,
            "session": {"id": session, "parentID": parent},
            "event": {"type": "session.idle", "properties": {"sessionID": session}},
        })
        .to_string()
    };
    let child = env.run(&["stop-hook", "--host", "opencode"], idle("ses_parent", Some("ses_grandparent")));
    assert_eq!(child.stdout.trim(), "{}");
    assert!(env.ledger_reasons("ses_parent").is_empty());
    let own = env.run(&["stop-hook", "--host", "opencode"], idle("ses_parent", None));
    assert!(own.json()["prompt"].as_str().unwrap_or_default().contains("endless"), "{}", own.stdout);
}

/// opencode's plugin, run by node with a stand-in for opencode's client and for loop-hook: each
/// of the three plugin hooks passes what it got to its subcommand and does what the answer says,
/// and a loop-hook inside the session's project is never run.
#[test]
fn opencode_plugin_passes_each_hook_on_and_does_what_loop_hook_answers() {
    let env = TestEnv::new();
    let bin = env.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("loop-hook");
    let log = env.home.join("calls.log");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\ncat >> '{log}'\necho >> '{log}'\ncase \"$1\" in\n  stop-hook) echo '{{\"prompt\":\"keep going\",\"message\":\"1/3\"}}' ;;\n  prompt-hook) echo '{{\"prompt\":\"loop started\"}}' ;;\n  guard) echo '{{\"deny\":\"not the check\"}}' ;;\nesac\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // The same stand-in inside the project: never run, though it comes first.
    let inside = env.project.join("loop-hook");
    std::fs::copy(&fake, &inside).unwrap();
    let plugin = repo().join("plugin/opencode/plugins/for-loop.js");
    let script = format!(
        r#"
import {{ ForLoop }} from {plugin};
const calls = [];
const client = {{
  app: {{ log: async (x) => calls.push(["log", x.body.message]) }},
  tui: {{ showToast: async (x) => calls.push(["toast", x.body.message]) }},
  session: {{
    get: async ({{ path }}) => ({{ data: {{ id: path.id, directory: {project} }} }}),
    promptAsync: async (x) => calls.push(["prompt", x.path.id, x.body.parts[0].text]),
  }},
}};
for (const [binary, label] of [[{inside}, "inside"], [{fake}, "outside"]]) {{
  const hooks = await ForLoop({{ client, directory: {project} }}, {{ binary }});
  await hooks.event({{ event: {{ type: "session.status", properties: {{ sessionID: "ses_1" }} }} }});
  await hooks.event({{ event: {{ type: "session.idle", properties: {{ sessionID: "ses_1" }} }} }});
  // The idle is handled in the background: wait for what it does.
  const seen = () => calls.some((c) => label === "inside" ? String(c[1]).includes("not found") : c[0] === "prompt");
  for (let i = 0; i < 100 && !seen(); i++) await new Promise((r) => setTimeout(r, 100));
  const output = {{ parts: [{{ type: "text", text: "the command file" }}] }};
  await hooks["command.execute.before"]({{ command: "for-loop", sessionID: "ses_1", arguments: "fix it --verify true" }}, output);
  calls.push(["parts", label, output.parts.map((p) => p.text).join("|")]);
  try {{
    await hooks["tool.execute.before"]({{ tool: "bash", sessionID: "ses_1", callID: "c" }}, {{ args: {{ command: "rm check.sh" }} }});
    calls.push(["tool ran", label]);
  }} catch (e) {{ calls.push(["tool denied", label, e.message]); }}
}}
console.log(JSON.stringify(calls));
"#,
        plugin = serde_json::to_string(&format!("file://{}", plugin.display())).unwrap(),
        project = serde_json::to_string(&env.project).unwrap(),
        inside = serde_json::to_string(&inside).unwrap(),
        fake = serde_json::to_string(&fake).unwrap(),
    );
    let output = Command::new("node")
        .args(["--input-type=module", "-e", &script])
        .env_clear()
        .env("PATH", crate::util::path_without_loop_hook())
        .env("HOME", &env.home)
        .output()
        .expect("node runs opencode's plugin in this test: install Node.js");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let calls: Value = serde_json::from_str(stdout.trim()).unwrap();
    let calls: Vec<String> = calls.as_array().unwrap().iter().map(Value::to_string).collect();
    let toast = calls.iter().position(|c| c.contains("loop-hook was not found")).unwrap();
    assert!(toast < 2, "inside the project, the binary is not run: {calls:#?}");
    for expected in [
        r#"["parts","inside","the command file"]"#,
        r#"["tool ran","inside"]"#,
        r#"["toast","1/3"]"#,
        r#"["prompt","ses_1","keep going"]"#,
        r#"["parts","outside","loop started"]"#,
        r#"["tool denied","outside","not the check"]"#,
    ] {
        assert!(calls.iter().any(|c| c == expected), "{expected} not in {calls:#?}");
    }
    let log = std::fs::read_to_string(&log).unwrap();
    let runs: Vec<&str> = log.lines().filter(|l| !l.starts_with('{') && !l.is_empty()).collect();
    assert_eq!(runs, ["stop-hook --host opencode", "prompt-hook --host opencode", "guard"], "{log}");
    let payloads: Vec<Value> =
        log.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(payloads[0]["opencode_hook"], "event");
    assert_eq!(payloads[0]["event"]["type"], "session.idle");
    assert_eq!(payloads[0]["session"]["id"], "ses_1");
    assert_eq!(payloads[0]["directory"], serde_json::json!(env.project));
    assert_eq!(payloads[1]["input"]["arguments"], "fix it --verify true");
    assert_eq!(payloads[2]["output"]["args"]["command"], "rm check.sh");
}

/// Qwen Code gives the agent's shell `QWEN_CODE=1` and its hooks never: a Stop hook run with it
/// is the agent's own `loop-hook stop-hook`, recorded and not judged, whatever the payload says;
/// the same payload from the host's hook is judged.
#[test]
fn a_qwen_code_stop_from_the_agents_shell_is_not_judged() {
    let env = TestEnv::new();
    let session = "qwen-session-0001";
    let started = env.run(
        &["start", "--session", session, "--host", "qwen-code"],
        "task --verify false --max-iterations 5",
    );
    assert_eq!(started.code, 0, "{}", started.stdout);
    let event = payload(&env, session, &fixtures().join("qwen-code/0.24.4-stop-no-usage.json"));
    let mut forged = env.command(&["stop-hook", "--host", "qwen-code"]);
    forged.env("QWEN_CODE", "1");
    let run = crate::util::run_command(forged, &event);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.reason().contains("this stop was not judged"), "{}", run.stdout);
    assert_eq!(env.ledger_reasons(session), ["forged_stop"]);
    let real = stop(&env, "qwen-code", &event);
    assert!(real.blocked() && real.reason().starts_with("task"), "{}", real.stdout);
    assert_eq!(env.ledger_reasons(session), ["forged_stop", "verify_failed"]);
    // A stop from the agent's shell in a session with no loop is nobody's business.
    let mut no_loop = env.command(&["stop-hook", "--host", "qwen-code"]);
    no_loop.env("QWEN_CODE", "1");
    let other = payload(&env, "qwen-session-0002", &fixtures().join("qwen-code/0.24.4-stop.json"));
    assert_eq!(crate::util::run_command(no_loop, &other).stdout, "");
}
