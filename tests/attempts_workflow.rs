//! The best-of-K workflow example, `docs/ci/for-loop-attempts.yml`: valid against the GitHub
//! workflow schema, and run as a runner runs it. Each job's `run` steps are run in order with
//! bash (`-eo pipefail`, as `shell: bash` does), with the step's `env` evaluated, on a shallow
//! clone of a bare repository standing in for the GitHub repository; a step after a failed one
//! runs only when its `if` says so. Stand-ins take the place of the agent CLI, of `gh` (which
//! records the pull request it is asked for) and of the installers; `loop-hook` is the binary
//! under test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::release_workflow::assert_valid_github_workflow;
use crate::run_driver::fake_claude;
use crate::run_fleet::Remote;
use crate::util::{TestEnv, git, repo};

const WORKFLOW: &str = "docs/ci/for-loop-attempts.yml";
const DONE: &str = "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'";
const TOKEN: &str = "token-of-the-job";

#[test]
fn the_attempts_workflow_is_a_valid_github_workflow() {
    assert_valid_github_workflow(WORKFLOW);
}

/// The workflow as JSON, read by the YAML parser of the schema validator's own Python.
fn workflow() -> Value {
    workflow_at(WORKFLOW)
}

/// The workflow at `path` as JSON.
pub(crate) fn workflow_at(path: &str) -> Value {
    let python = repo().join("tests/tools/.venv/bin/python");
    assert!(python.exists(), "{} is missing: scripts/test installs it", python.display());
    let out = Command::new(python)
        .args([
            "-c",
            "import json, sys\nfrom ruamel.yaml import YAML\nprint(json.dumps(YAML(typ='safe').load(open(sys.argv[1]))))",
        ])
        .arg(repo().join(path))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One runner: a machine with the stand-ins on its PATH, and what a job's steps get.
pub(crate) struct Runner {
    pub(crate) machine: TestEnv,
    pub(crate) temp: PathBuf,
    path: String,
}

impl Runner {
    fn new(machine: TestEnv) -> Runner {
        Runner::with_agent(
            machine,
            &format!(
                "env > \"$HOME/agent-env\"\ncase \"$FOR_LOOP_RUN\" in *-2) echo fixed > fixed ;; esac\n{DONE}"
            ),
        )
    }

    /// A runner whose agent CLI is a stand-in running `body`.
    pub(crate) fn with_agent(machine: TestEnv, body: &str) -> Runner {
        let bin = fake_claude(&machine, body);
        for (name, body) in
            [("npm", "exit 0"), ("cargo", "exit 0"), ("gh", "printf '%s\\n' \"$@\" > \"$HOME/gh.args\"")]
        {
            let path = bin.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_loop-hook"), bin.join("loop-hook")).unwrap();
        let temp = machine.home.join("runner-temp");
        std::fs::create_dir_all(&temp).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        Runner { machine, temp, path }
    }

    /// Runs the `run` steps of `job` in order; each step's name and whether it passed, and what
    /// the job wrote to `$GITHUB_OUTPUT`.
    pub(crate) fn run_job(
        &self,
        workflow: &Value,
        job: &str,
        values: &BTreeMap<&str, String>,
    ) -> (Vec<(String, bool)>, String) {
        let output = self.temp.join(format!("{job}.output"));
        let mut ran = Vec::new();
        let mut failed = false;
        for step in workflow["jobs"][job]["steps"].as_array().unwrap() {
            let Some(script) = step["run"].as_str() else { continue };
            assert!(!script.contains("${{"), "an expression inside a run script is an injection: {script}");
            let condition = step["if"].as_str().unwrap_or("success()");
            assert!(["success()", "${{ !cancelled() }}"].contains(&condition), "unknown if: {condition}");
            if failed && condition == "success()" {
                continue;
            }
            let mut command = Command::new("bash");
            command.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script]);
            command.current_dir(&self.machine.project).env_clear();
            for scope in [&workflow["env"], &step["env"]] {
                for (name, value) in scope.as_object().into_iter().flatten() {
                    command.env(name, evaluate(value.as_str().unwrap(), values));
                }
            }
            let out = command
                .env("PATH", &self.path)
                .env("HOME", &self.machine.home)
                .env("RUNNER_TEMP", &self.temp)
                .env("GITHUB_OUTPUT", &output)
                .env("GITHUB_STEP_SUMMARY", self.temp.join("summary.md"))
                .output()
                .unwrap();
            let name = step["name"].as_str().unwrap_or(script).to_string();
            let said =
                format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            eprintln!("[{job}] {name}: {}\n{said}", out.status);
            failed |= !out.status.success();
            ran.push((name, out.status.success()));
        }
        (ran, std::fs::read_to_string(output).unwrap_or_default())
    }
}

/// `${{ NAME }}` in `text` replaced by its value; an expression the test does not know fails it.
pub(crate) fn evaluate(text: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let end = rest[start..].find("}}").map(|e| start + e).expect("an unclosed expression");
        let name = rest[start + 3..end].trim();
        out.push_str(&rest[..start]);
        out.push_str(values.get(name).unwrap_or_else(|| panic!("unknown expression {name}")));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

fn values(attempts: &str, attempt: u32) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("inputs.task", "make fixed say fixed".to_string()),
        ("inputs.verify", "sh check.sh".to_string()),
        ("inputs.attempts", attempts.to_string()),
        ("matrix.attempt", attempt.to_string()),
        ("github.run_id", "4242".to_string()),
        ("github.token", TOKEN.to_string()),
        ("github.ref_name", "main".to_string()),
        ("secrets.ANTHROPIC_API_KEY", "key".to_string()),
        ("vars.FOR_LOOP_GIT", "https://example.invalid/for-loop.git".to_string()),
    ])
}

fn passed(steps: &[(String, bool)]) -> Vec<&str> {
    steps.iter().filter(|(_, ok)| *ok).map(|(name, _)| name.as_str()).collect()
}

/// The plan makes the matrix; attempt 1 fails honestly, attempt 2 verifies, attempt 3's runner
/// is lost. Both finished attempts are pushed as refs (never a branch, the token never in the
/// agent's environment or the checkout's configuration); the pick re-checks them, reports 3
/// missing, and the pull request is opened from a branch at attempt 2's commit.
#[test]
fn the_attempts_workflow_runs_attempts_picks_the_winner_and_opens_a_pull_request() {
    let jq = Command::new("jq").arg("--version").output();
    assert!(jq.is_ok_and(|out| out.status.success()), "jq is missing: scripts/install-test-deps installs it");
    let workflow = workflow();
    let remote = Remote::new();
    let plan = Runner::new(remote.runner());
    let (steps, output) = plan.run_job(&workflow, "plan", &values("3", 0));
    assert!(steps.iter().all(|(_, ok)| *ok), "{steps:?}");
    assert_eq!(output.trim(), "attempts=[1,2,3]");
    let matrix: Vec<u32> = serde_json::from_str(output.trim().strip_prefix("attempts=").unwrap()).unwrap();
    for bad in ["0", "17", "x", "1; touch pwned", ""] {
        let (steps, _) = plan.run_job(&workflow, "plan", &values(bad, 0));
        assert!(!steps[0].1, "attempts {bad:?} was planned");
        assert!(!plan.machine.project.join("pwned").exists());
    }

    for &n in matrix.iter().filter(|n| **n != 3) {
        let runner = Runner::new(remote.runner());
        let (steps, _) = runner.run_job(&workflow, "attempt", &values("3", n));
        let pushed = steps.iter().any(|(name, ok)| name.starts_with("Push the attempt") && *ok);
        assert!(pushed, "attempt {n}: {steps:?}");
        let looped = steps.iter().find(|(name, _)| name.starts_with("Attempt ")).unwrap();
        assert_eq!(looped.1, n == 2, "attempt {n}'s loop: {steps:?}");
        let agent_env = std::fs::read_to_string(runner.machine.home.join("agent-env")).unwrap();
        assert!(!agent_env.contains(TOKEN), "the agent saw the job's token");
        let config = std::fs::read_to_string(runner.machine.project.join(".git/config")).unwrap();
        assert!(!config.contains("extraheader"), "the token was left in the checkout: {config}");
    }
    let refs = remote.refs("refs/for-loop");
    assert_eq!(refs.lines().count(), 2, "{refs}");
    assert_eq!(remote.refs("refs/heads"), format!("refs/heads/main {}\n", remote.head));

    // The pick runs after failed attempt jobs (GitHub skips a job whose needs failed, unless its
    // `if` says otherwise), but not without a plan.
    let when = workflow["jobs"]["pick"]["if"].as_str().unwrap();
    assert!(when.contains("!cancelled()") && when.contains("needs.plan.result == 'success'"), "{when}");
    let pick = Runner::new(remote.runner());
    let (steps, _) = pick.run_job(&workflow, "pick", &values("3", 0));
    assert!(steps.iter().all(|(_, ok)| *ok), "{steps:?}");
    assert!(passed(&steps).contains(&"Open a pull request with the winner"), "{steps:?}");
    let winner = git(&remote.origin, &["rev-parse", "refs/for-loop/attempts/4242/2"]);
    assert_eq!(git(&remote.origin, &["rev-parse", "refs/heads/for-loop/4242"]), winner);
    let gh = std::fs::read_to_string(pick.machine.home.join("gh.args")).unwrap();
    let args: Vec<&str> = gh.lines().collect();
    assert_eq!(
        args[..8],
        [
            "pr",
            "create",
            "--base",
            "main",
            "--head",
            "for-loop/4242",
            "--title",
            "for-loop: make fixed say fixed"
        ]
    );
    assert!(gh.contains("Attempt 2 of 3 (run 4242)"), "{gh}");
    let summary = std::fs::read_to_string(pick.temp.join("summary.md")).unwrap();
    for row in ["| 1 | not_verified |", "| 2 | verified |", "| 3 | missing |"] {
        assert!(summary.contains(row), "no {row} in the summary:\n{summary}");
    }
    assert_no_token_in(&pick.machine.project);
}

fn assert_no_token_in(project: &Path) {
    let config = std::fs::read_to_string(project.join(".git/config")).unwrap();
    assert!(!config.contains(TOKEN) && !config.contains("extraheader"), "{config}");
}
