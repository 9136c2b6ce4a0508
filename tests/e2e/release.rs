//! The release as a user without Rust gets it: `scripts/release --local` writes the marketplace
//! repository for this machine, the real Claude Code CLI adds it and installs the plugin with a
//! fresh configuration and a PATH without cargo, rustc or loop-hook, and a loop runs on the
//! binary the release ships.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use mock_model::{Agent, MockModel, Script};
use serde_json::Value;

use super::run_text;
use crate::util::{TestEnv, client_bin, copy_dir, repo};

const SESSION: &str = "cccccccc-0000-4000-8000-00000000000c";

/// Programs a machine without Rust does not have; their directories are left off PATH.
const NO_RUST: [&str; 3] = ["cargo", "rustc", "loop-hook"];

/// `scripts/release --local` once per test run, into a directory that outlives the tests that
/// copy it.
fn released() -> &'static Path {
    static RELEASE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, dir) = RELEASE.get_or_init(|| {
        let root = tempfile::Builder::new().prefix("for-loop-release-").tempdir().unwrap();
        let dir = root.path().join("marketplace");
        let output = Command::new(repo().join("scripts/release")).arg("--local").arg(&dir).output().unwrap();
        assert!(
            output.status.success(),
            "scripts/release --local failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (root, dir)
    });
    dir
}

/// A user's machine: a home with a fresh Claude Code configuration and a copy of the release.
struct Machine {
    claude: PathBuf,
    env: TestEnv,
    config: PathBuf,
    marketplace: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        let env = TestEnv::new();
        let config = env.home.join(".claude");
        std::fs::create_dir_all(&config).unwrap();
        let marketplace = env.home.join("for-loop-marketplace");
        copy_dir(released(), &marketplace);
        Machine { claude: client_bin("claude", "FOR_LOOP_CLAUDE"), env, config, marketplace }
    }

    fn claude(&self, model: &MockModel, args: &[&str]) -> Command {
        let agent = Agent::ClaudeCode { config_dir: &self.config };
        let mut cmd = model.agent_command(&self.claude, agent, &self.env.home, &NO_RUST);
        cmd.args(args).current_dir(&self.env.project).stdin(Stdio::null());
        cmd
    }

    /// `claude plugin marketplace add` and `claude plugin install`, as the README says.
    fn install(&self, model: &MockModel) {
        let marketplace = self.marketplace.to_str().unwrap();
        for args in
            [&["plugin", "marketplace", "add", marketplace][..], &["plugin", "install", "for-loop@for-loop"]]
        {
            let (stdout, stderr) = run_text(self.claude(model, args), "claude plugin", b"");
            assert!(!stderr.contains("rror"), "claude {args:?}: {stdout}\n{stderr}");
        }
    }

    /// `claude -p PROMPT` in the test session, as stream-json events.
    fn run(&self, model: &MockModel, prompt: &str, extra: &[&str]) -> Vec<Value> {
        let mut args =
            vec!["-p", prompt, "--output-format", "stream-json", "--verbose", "--include-hook-events"];
        if !extra.contains(&"--resume") {
            args.extend(["--session-id", SESSION]);
        }
        args.extend(extra);
        let (stdout, _) = run_text(self.claude(model, &args), "claude -p", b"");
        stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

fn dump(events: &[Value]) -> String {
    events.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_release_installs_from_its_marketplace_and_holds_a_loop_without_rust() {
    let machine = Machine::new();
    let model = MockModel::start(Script::new().text("Done.").bash("touch fixed").text("Fixed.")).unwrap();
    // This machine really has no Rust for the CLI and its hooks.
    let mut which = machine.claude(&model, &[]);
    which.env_remove("ANTHROPIC_API_KEY");
    let path = which.get_envs().find(|(k, _)| *k == "PATH").and_then(|(_, v)| v).unwrap().to_owned();
    for program in NO_RUST {
        assert!(
            std::env::split_paths(&path).all(|dir| !dir.join(program).exists()),
            "{program} is on the test's PATH"
        );
    }
    machine.install(&model);
    let shipped = format!("bin/{}/loop-hook", crate::packaging::platform());
    let installed = machine.config.join("plugins/cache/for-loop/for-loop");
    assert!(
        std::fs::read_dir(&installed).unwrap().any(|v| v.unwrap().path().join(&shipped).is_file()),
        "the installed plugin has no {shipped}"
    );

    machine.env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let events = machine.run(
        &model,
        "/for-loop create the file named fixed --verify \"sh check.sh\"",
        &["--allowedTools", "Bash(touch fixed)"],
    );
    let init = events.iter().find(|e| e["type"] == "system" && e["subtype"] == "init").unwrap();
    assert!(init["plugins"].as_array().unwrap().iter().any(|p| p["name"] == "for-loop"), "{init}");
    let first = model.main_requests()[0].last_user_text().unwrap_or_default();
    assert!(first.contains("loop started"), "{first}\n{}", dump(&events));
    assert_eq!(machine.env.ledger_reasons(SESSION), ["verify_failed", "verified"], "{}", dump(&events));

    // The prompt hook answers /loop-status to the user directly; the model gets no turn.
    let status = MockModel::start(Script::new().text("unused")).unwrap();
    let events = machine.run(&status, "/loop-status", &["--resume", SESSION]);
    let shown: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "system" && e["subtype"] == "informational")
        .filter_map(|e| e["content"].as_str())
        .collect();
    let shown = shown.join("\n");
    assert!(status.main_requests().is_empty(), "the model got a turn for /loop-status: {}", dump(&events));
    assert!(
        shown.contains(&format!("loop-hook {} at ", env!("CARGO_PKG_VERSION")))
            && shown.contains("(shipped with the plugin, SHA-256 verified)"),
        "{shown}"
    );
}

#[test]
fn a_release_with_a_corrupted_binary_is_refused_in_one_line_and_traps_no_one() {
    let machine = Machine::new();
    let binary = machine
        .marketplace
        .join(format!("plugin/claude-code/bin/{}/loop-hook", crate::packaging::platform()));
    let mut bytes = std::fs::read(&binary).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&binary, bytes).unwrap();
    let model = MockModel::start(Script::new().text("relayed").text("plain answer")).unwrap();
    machine.install(&model);

    let events = machine.run(&model, "/for-loop make it pass --verify false", &[]);
    let said = model.main_requests()[0].last_user_text().unwrap_or_default();
    assert!(
        said.contains("does not match its SHA-256 checksum, so it was not run. Reinstall the plugin"),
        "{said}\n{}",
        dump(&events)
    );
    assert!(!machine.env.session_dir(SESSION).join("state.md").exists(), "a loop started anyway");
    // The stop went through: one model request, and the Stop hook exited 0.
    assert_eq!(model.main_requests().len(), 1, "{}", dump(&events));
    let stops: Vec<&Value> =
        events.iter().filter(|e| e["subtype"] == "hook_response" && e["hook_event"] == "Stop").collect();
    assert!(!stops.is_empty() && stops.iter().all(|e| e["exit_code"] == 0), "{}", dump(&events));

    let events = machine.run(&model, "just answer", &["--resume", SESSION]);
    assert_eq!(model.main_requests().len(), 2, "a plain prompt was held: {}", dump(&events));
}
