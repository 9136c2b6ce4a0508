//! What decides whether for-loop runs at all, watched at every hook on every host (issue 32):
//! while a loop runs, the agent changes the host's configuration so that for-loop would not run
//! at the next start, and the next stop (or prompt) of that host tells it, records it as the
//! agent's, and does not count a pass at that stop.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::hosts::{fixtures, payload};
use crate::util::{Run, TestEnv, stop_event};

const SESSION: &str = "fixture-session-0001";

/// A host, one of its recorded turn ends, and the change the agent makes: the file (under the
/// home or the project), what it holds when the loop starts (`None`: absent) and after.
struct Attack {
    host: &'static str,
    fixture: Option<&'static str>,
    file: Place,
    before: Option<&'static str>,
    after: Option<&'static str>,
}

enum Place {
    Home(&'static str),
    Project(&'static str),
}

const ATTACKS: &[Attack] = &[
    Attack {
        host: "claude-code",
        fixture: None,
        file: Place::Project(".claude/settings.local.json"),
        before: None,
        after: Some(r#"{"disableAllHooks": true}"#),
    },
    Attack {
        host: "gemini-cli",
        fixture: Some("gemini-cli/0.61.0-after-agent.json"),
        file: Place::Home(".gemini/settings.json"),
        before: Some(r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}}"#),
        after: Some(
            r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}, "hooksConfig": {"enabled": false}}"#,
        ),
    },
    Attack {
        host: "qwen-code",
        fixture: Some("qwen-code/0.24.4-stop.json"),
        file: Place::Home(".qwen/extensions/for-loop/hooks/hooks.json"),
        before: Some(r#"{"hooks": {"Stop": []}}"#),
        after: Some(r#"{"hooks": {}}"#),
    },
    Attack {
        host: "codex",
        fixture: Some("codex/0.169.0-stop.json"),
        file: Place::Home(".codex/config.toml"),
        before: Some("model = \"o3\"\n"),
        after: Some("model = \"o3\"\n\n[features]\nhooks = false\n"),
    },
    Attack {
        host: "copilot-cli",
        fixture: Some("copilot-cli/1.0.102-agent-stop.json"),
        file: Place::Home(".copilot/hooks/for-loop.json"),
        before: Some(r#"{"version": 1, "hooks": {"agentStop": []}}"#),
        after: None,
    },
    Attack {
        host: "cursor",
        fixture: Some("cursor/3.17.19-stop-completed.json"),
        file: Place::Home(".cursor/hooks.json"),
        before: Some(r#"{"version": 1, "hooks": {"stop": []}}"#),
        after: Some("{}"),
    },
    Attack {
        host: "opencode",
        fixture: Some("opencode/1.18.33-session-idle.json"),
        file: Place::Home(".config/opencode/plugins/for-loop.js"),
        before: Some("export const ForLoop = async () => ({})\n"),
        after: None,
    },
    Attack {
        host: "antigravity",
        fixture: Some("antigravity/2.0-docs-stop.json"),
        file: Place::Project(".agents/hooks.json"),
        before: Some(r#"{"hooks": {"for-loop": {"Stop": []}}}"#),
        after: Some("{}"),
    },
];

impl Attack {
    fn path(&self, env: &TestEnv) -> PathBuf {
        match self.file {
            Place::Home(rest) => env.home.join(rest),
            Place::Project(rest) => env.project.join(rest),
        }
    }

    /// Puts the file as it was at the start, or as the agent leaves it.
    fn set(&self, env: &TestEnv, text: Option<&str>) {
        let path = self.path(env);
        match text {
            Some(text) => {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, text).unwrap();
            }
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// This host's turn end, as it sends it.
    fn stop(&self, env: &TestEnv) -> Run {
        let stdin = match self.fixture {
            Some(fixture) => payload(env, SESSION, &fixtures().join(fixture)),
            None => stop_event(SESSION, &env.project, "Done.", false).to_string().into_bytes(),
        };
        env.run(&["stop-hook", "--host", self.host], stdin)
    }
}

/// The words a stop's answer gives the agent (the re-injected prompt) and the user.
fn said(run: &Run) -> (String, String) {
    let json: Value = serde_json::from_str(run.stdout.trim()).unwrap_or_else(|_| json!({}));
    let text = |keys: &[&str]| {
        keys.iter().find_map(|key| json.get(*key).and_then(Value::as_str)).unwrap_or_default().to_string()
    };
    (text(&["reason", "followup_message", "prompt"]), text(&["systemMessage", "message"]))
}

fn start(env: &TestEnv, host: &str) {
    env.write("check.sh", "exit 0\n");
    let started = env
        .run(&["start", "--session", SESSION, "--host", host], "t --verify 'sh check.sh' --max-iterations 5");
    assert_eq!(started.code, 0, "{host}: {}{}", started.stdout, started.stderr);
}

/// On every host: the check passes, but the agent changed what decides whether for-loop runs
/// at the next start. That stop is blocked with the change named (to the agent, and to the user
/// where the host shows a hook's message), recorded as the agent's, and the pass does not count;
/// the stop after it is judged as usual.
#[test]
fn each_hosts_config_changed_by_the_agent_is_told_at_the_next_stop_and_its_pass_does_not_count() {
    for attack in ATTACKS {
        let env = TestEnv::new();
        attack.set(&env, attack.before);
        start(&env, attack.host);
        attack.set(&env, attack.after);
        let run = attack.stop(&env);
        assert_eq!(run.code, 0, "{}: {}", attack.host, run.stderr);
        let (reason, message) = said(&run);
        let shown = attack.path(&env);
        let named = if attack.host == "copilot-cli" { shown.parent().unwrap() } else { shown.as_path() };
        assert!(
            reason.contains("something that decides whether for-loop's hooks run at all changed"),
            "{}: {}",
            attack.host,
            run.stdout
        );
        assert!(reason.contains(&named.display().to_string()), "{}: {reason}", attack.host);
        if !message.is_empty() {
            assert!(message.contains(&named.display().to_string()), "{}: {message}", attack.host);
        }
        let ledger = env.ledger_of(SESSION);
        let lines: Vec<(&str, &str, &str)> = ledger
            .iter()
            .map(|l| {
                (
                    l["reason"].as_str().unwrap(),
                    l["decision"].as_str().unwrap(),
                    l["origin"].as_str().unwrap_or("-"),
                )
            })
            .collect();
        assert_eq!(
            lines,
            [("host_config_changed", "note", "agent"), ("hooks_changed", "block", "-")],
            "{}",
            attack.host
        );
        // Told once: the next stop is judged on the configuration as it now is.
        let next = attack.stop(&env);
        assert_eq!(
            env.ledger_reasons(SESSION).last().map(String::as_str),
            Some("verified"),
            "{}: {}",
            attack.host,
            next.stdout
        );
    }
}

/// The same change, without it: the pass counts at once (the test above fails for this reason
/// alone, not for something of the host's).
#[test]
fn without_a_change_each_hosts_passing_stop_ends_the_loop_verified() {
    for attack in ATTACKS {
        let env = TestEnv::new();
        attack.set(&env, attack.before);
        start(&env, attack.host);
        attack.stop(&env);
        assert_eq!(env.ledger_reasons(SESSION), ["verified"], "{}", attack.host);
    }
}

/// A prompt event of `host` typed by the user, as each host sends it.
fn prompt_event(host: &str, project: &Path) -> Vec<u8> {
    let event = match host {
        "copilot-cli" => json!({"sessionId": SESSION, "cwd": project, "prompt": "go on", "timestamp": 1}),
        "qwen-code" => json!({"session_id": SESSION, "cwd": project, "hook_event_name": "UserPromptSubmit",
            "prompt": "go on", "submitted_prompt": "go on"}),
        "codex" => json!({"session_id": SESSION, "turn_id": "t-1", "cwd": project,
            "hook_event_name": "UserPromptSubmit", "prompt": "go on"}),
        _ => json!({"session_id": SESSION, "cwd": project, "hook_event_name": "UserPromptSubmit",
            "prompt": "go on"}),
    };
    event.to_string().into_bytes()
}

/// On every host with a prompt hook: the change is told at the user's next prompt, in the words
/// the host shows (Qwen Code's through the agent, Copilot CLI's in place of the prompt), and
/// recorded; the next stop tells it again and does not count its pass.
#[test]
fn each_hosts_config_changed_by_the_agent_is_told_at_the_next_prompt() {
    for host in ["claude-code", "codex", "copilot-cli", "qwen-code"] {
        let attack = ATTACKS.iter().find(|a| a.host == host).unwrap();
        let env = TestEnv::new();
        attack.set(&env, attack.before);
        start(&env, host);
        attack.set(&env, attack.after);
        let run = env.run(&["prompt-hook", "--host", host], prompt_event(host, &env.project));
        let shown = attack.path(&env);
        let named = if host == "copilot-cli" { shown.parent().unwrap() } else { shown.as_path() };
        assert!(
            run.stdout.contains("something that decides whether for-loop's hooks run at all"),
            "{host}: {}",
            run.stdout
        );
        assert!(
            run.stdout.contains(&serde_json::to_string(&named).unwrap().trim_matches('"').to_string()),
            "{host}: {}",
            run.stdout
        );
        let again = env.run(&["prompt-hook", "--host", host], prompt_event(host, &env.project));
        assert!(!again.stdout.contains("something that decides"), "{host}: told once: {}", again.stdout);
        let stop = attack.stop(&env);
        let (reason, _) = said(&stop);
        assert!(
            reason.contains("something that decides whether for-loop's hooks run at all"),
            "{host}: {}",
            stop.stdout
        );
        assert_eq!(env.ledger_reasons(SESSION), ["host_config_changed", "hooks_changed"], "{host}");
    }
}

/// Claude Code's `ConfigChange`, sent while a loop runs for a settings change that switches the
/// hooks off: told at once, recorded, and kept out of the session; an unrelated change, or one
/// in a session without a loop, gets nothing.
#[test]
fn claude_codes_config_change_tells_a_change_at_once_and_keeps_it_out_of_the_session() {
    let env = TestEnv::new();
    start(&env, "claude-code");
    let change = |source: &str| {
        json!({"session_id": SESSION, "cwd": env.project, "hook_event_name": "ConfigChange", "source": source,
            "file_path": env.project.join(".claude/settings.local.json")})
        .to_string()
    };
    env.write(".claude/settings.local.json", r#"{"permissions": {"allow": ["Bash(ls)"]}}"#);
    assert_eq!(env.run(&["guard"], change("local_settings")).stdout, "", "a change of nothing of for-loop's");
    env.write(".claude/settings.local.json", r#"{"disableAllHooks": true}"#);
    let run = env.run(&["guard"], change("local_settings"));
    let json: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{}", run.stdout));
    assert_eq!(json["decision"], "block", "{json}");
    assert!(
        json["systemMessage"].as_str().unwrap().contains(".claude/settings.local.json (changed)"),
        "{json}"
    );
    assert_eq!(env.run(&["guard"], change("local_settings")).stdout, "", "told once");
    let other =
        json!({"session_id": "another", "hook_event_name": "ConfigChange", "source": "local_settings"});
    assert_eq!(env.run(&["guard"], other.to_string()).stdout, "");
    assert_eq!(env.ledger_reasons(SESSION), ["host_config_changed"]);
    // The stop after it does not count its pass.
    let stop = env.run(&["stop-hook"], stop_event(SESSION, &env.project, "Done.", false).to_string());
    assert!(stop.blocked(), "{}", stop.stdout);
    assert_eq!(env.ledger_reasons(SESSION), ["host_config_changed", "hooks_changed"]);
}
