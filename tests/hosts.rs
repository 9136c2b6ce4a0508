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
                        .and_then(Value::as_str)
                        .unwrap_or_else(|| panic!("{name}: no prompt in {actual}"));
                    assert!(reason.starts_with(task), "{name}: the task is not re-injected: {reason}");
                    expected = expected.replace("{{REINJECTED}}", &Value::from(reason).to_string());
                    if let Some(message) = json.get("systemMessage") {
                        expected = expected.replace("{{MESSAGE}}", &message.to_string());
                    }
                }
                assert_eq!(actual, expected, "{name} ({})", if with_loop { "loop" } else { "no loop" });
                // A refused event neither uses an iteration nor writes the ledger.
                let judged = expected.contains("reason") || expected.contains("followup_message");
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
    let dirs = ["antigravity", "cursor", "copilot-cli", "gemini-cli", "codex"];
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
    for host in ["cursor", "antigravity", "copilot-cli"] {
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
            "gemini-cli" => repo().join("plugin/gemini-cli/commands").join(format!("{name}.toml")).is_file(),
            host => repo().join("plugin").join(host).join("skills").join(name).join("SKILL.md").is_file(),
        }
    };
    for host in ["claude-code", "gemini-cli", "codex", "cursor", "antigravity", "copilot-cli"] {
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
