//! `loop-hook run --backlog` with the real agent CLIs driven by the scripted model: four tasks,
//! each in a work tree of its own, merged one at a time by the queue and its judge.
//!
//! Every iteration the model runs one command, the stand-in for the agent's work, which reads
//! the task from its work tree's name (`.../tasks/N`) and counts its own tries; the queue, not
//! the model, decides what lands.

use std::path::Path;

use mock_model::{Agent, MockModel, Script};
use serde_json::Value;
use tempfile::TempDir;

use super::run_command;
use crate::e2e::run_text;
use crate::util::{TestEnv, client_bin, git};

/// Alpha and Beta edit the same line; Gamma breaks Alpha's check on its first try; Delta never
/// passes.
const BACKLOG: &str = "# Four tasks

- [ ] Alpha
  verify: sh checks/alpha.sh
- [ ] Beta
  verify: sh checks/beta.sh
- [ ] Gamma
  verify: sh checks/gamma.sh
- [ ] Delta
  verify: sh checks/delta.sh
";

/// Each task's check, a script the loops keep as the oracle: what it reads is the task's to change.
const CHECKS: [(&str, &str); 4] = [
    ("alpha", "grep -qx 'alpha: on' shared.txt && grep -qx ok lib.txt"),
    ("beta", "grep -qx 'beta: on' shared.txt"),
    ("gamma", "test -f gamma.txt"),
    ("delta", "test -f delta.txt"),
];

/// The work of one iteration, by task. Beta, sent back with the conflict, keeps both lines;
/// Gamma, sent back with Alpha's failing check, puts `lib.txt` back.
const WORK: &str = "n=$(basename \"$PWD\"); count=\"$TRIES/$n\"
try=$(( $(cat \"$count\" 2>/dev/null || echo 0) + 1 )); echo \"$try\" > \"$count\"
case \"$n\" in
  1) echo 'alpha: on' > shared.txt ;;
  2) if grep -q 'alpha: on' shared.txt; then printf 'alpha: on\\nbeta: on\\n' > shared.txt; else echo 'beta: on' > shared.txt; fi ;;
  3) touch gamma.txt; if [ \"$try\" = 1 ]; then echo broken > lib.txt; else echo ok > lib.txt; fi ;;
esac
echo \"task $n, try $try\"
";

/// A git project holding the backlog and the files its checks read, with the agent's work as a
/// script in the home (read-only to the agent) counting tries in `tries` (under /tmp, writable).
fn project(env: &TestEnv, tries: &Path) -> String {
    env.write("BACKLOG.md", BACKLOG);
    env.write("shared.txt", "x\n");
    env.write("lib.txt", "ok\n");
    for (name, check) in CHECKS {
        env.write(&format!("checks/{name}.sh"), &format!("{check}\n"));
    }
    git(&env.project, &["init", "-q", "-b", "main"]);
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "init"]);
    let work = env.home.join("work.sh");
    std::fs::write(&work, format!("TRIES={}\n{WORK}", tries.display())).unwrap();
    format!("sh {}", work.display())
}

/// As many iterations of "run the work, then say done" as the run can use.
fn script(work: &str) -> Script {
    (0..24).fold(Script::new(), |script, _| script.bash(work).text("Done."))
}

/// The run's JSON events.
fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
}

/// Runs the four-task backlog with `agent` and asserts what the issue asks: Beta is sent back
/// once with the conflict and lands; Gamma is sent back for breaking Alpha's check and lands,
/// never merged broken; Delta parks at its cap and the others land; `run --apply` leaves a tree
/// where every landed task's check passes, nothing staged or committed.
fn assert_backlog_lands_what_passes(env: &TestEnv, agent: Agent<'_>, cli: &Path, extra: &[&str]) {
    let tries = TempDir::new().unwrap();
    let work = project(env, tries.path());
    let model = MockModel::start(script(&work)).unwrap();
    if let Agent::Codex { codex_home } = agent {
        std::fs::create_dir_all(codex_home).unwrap();
        std::fs::write(codex_home.join("config.toml"), model.codex_config()).unwrap();
    }
    let head = git(&env.project, &["rev-parse", "HEAD"]);
    let mut args = vec!["--backlog", "BACKLOG.md", "--parallel", "1", "--max-iterations", "2", "--json"];
    args.extend(extra);
    let cmd = run_command(env, &model, agent, cli, &args);
    let (stdout, stderr) = run_text(cmd, "loop-hook run --backlog", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    let events = events(&stdout);
    let of = |name: &str| events.iter().filter(|e| e["event"] == name).cloned().collect::<Vec<_>>();
    let sandboxes = of("sandbox");
    assert!(!sandboxes.is_empty(), "{dump}");
    assert!(sandboxes.iter().all(|e| e["sandboxed"] == true), "bubblewrap must be installed: {dump}");

    let sent_back = of("sent_back");
    let beta: Vec<&Value> = sent_back.iter().filter(|e| e["task"] == 2).collect();
    assert_eq!(beta.len(), 1, "Beta is not sent back once: {dump}");
    assert_eq!(beta[0]["why"], "conflict", "{dump}");
    let gamma: Vec<&Value> = sent_back.iter().filter(|e| e["task"] == 3).collect();
    assert_eq!(gamma.len(), 1, "Gamma is not sent back once: {dump}");
    assert_eq!(gamma[0]["why"], "check_failed", "{dump}");
    assert_eq!(gamma[0]["failing"], serde_json::json!([1]), "{dump}");
    assert!(sent_back.iter().all(|e| e["task"] == 2 || e["task"] == 3), "{dump}");

    let finished = of("backlog_finished").pop().unwrap_or_else(|| panic!("no backlog_finished: {dump}"));
    let mut landed: Vec<u64> =
        finished["landed"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    assert_eq!(landed[0], 1, "Alpha did not land first: {dump}");
    landed.sort_unstable();
    assert_eq!(landed, [1, 2, 3], "{dump}");
    let not_landed = finished["not_landed"].as_array().unwrap();
    assert_eq!(not_landed.len(), 1, "{dump}");
    assert_eq!(not_landed[0]["task"], 4, "{dump}");
    assert_eq!(of("parked").iter().filter(|e| e["task"] == 4).count(), 1, "{dump}");
    // Every try the model ran is one the count saw: two each for Beta, Gamma and Delta.
    for (n, count) in [(1, "1"), (2, "2"), (3, "2"), (4, "2")] {
        let tried = std::fs::read_to_string(tries.path().join(n.to_string())).unwrap_or_default();
        assert_eq!(tried.trim(), count, "task {n}'s tries: {dump}");
    }

    // Never merged broken: at every commit of the integration branch, Alpha's check holds.
    let run = finished["run"].as_str().unwrap();
    let integration = format!("refs/for-loop/backlog/{run}/integration");
    for commit in git(&env.project, &["rev-list", "--first-parent", &integration]).lines() {
        let lib = git(&env.project, &["show", &format!("{commit}:lib.txt")]);
        assert_eq!(lib, "ok\n", "commit {commit} of the integration has a broken lib.txt: {dump}");
    }
    // The user's branch and files are untouched until --apply.
    assert_eq!(git(&env.project, &["rev-parse", "HEAD"]), head);
    assert_eq!(std::fs::read_to_string(env.project.join("shared.txt")).unwrap(), "x\n");

    let applied = env.run(&["run", "--apply", run], b"");
    let said = format!("{}{}", applied.stdout, applied.stderr);
    assert_eq!(applied.code, 0, "{said}");
    assert!(said.contains("task 4"), "the task that did not land is not named: {said}");
    assert_eq!(std::fs::read_to_string(env.project.join("shared.txt")).unwrap(), "alpha: on\nbeta: on\n");
    for check in [
        "grep -qx 'alpha: on' shared.txt && grep -qx ok lib.txt",
        "grep -qx 'beta: on' shared.txt",
        "test -f gamma.txt",
    ] {
        let passed =
            std::process::Command::new("sh").args(["-c", check]).current_dir(&env.project).status().unwrap();
        assert!(passed.success(), "`{check}` fails in the applied tree: {said}");
    }
    assert!(!env.project.join("delta.txt").exists());
    assert_eq!(git(&env.project, &["rev-parse", "HEAD"]), head, "--apply committed");
    assert_eq!(git(&env.project, &["diff", "--cached", "--name-only"]), "", "--apply staged");
}

/// Claude Code as every task's agent.
#[test]
fn backlog_with_claude_code_lands_what_passes_merged_and_parks_the_rest() {
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    // Outside /tmp, which the run's sandbox leaves writable: the home is read-only, as yours is.
    let env = TestEnv::outside_tmp();
    let config = env.home.join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let extra = ["--agent-arg", "--allowedTools", "--agent-arg", "Bash"];
    assert_backlog_lands_what_passes(&env, Agent::ClaudeCode { config_dir: &config }, &claude, &extra);
}

/// Codex as every task's agent, under its default `workspace-write` sandbox.
#[test]
fn backlog_with_codex_lands_what_passes_merged_and_parks_the_rest() {
    let codex = client_bin("codex", "FOR_LOOP_CODEX");
    // Codex's sandbox will not set itself up under /tmp: see e2e::codex.
    let env = TestEnv::outside_tmp();
    let codex_home = env.home.join("codex-home");
    assert_backlog_lands_what_passes(
        &env,
        Agent::Codex { codex_home: &codex_home },
        &codex,
        &["--agent", "codex"],
    );
}
