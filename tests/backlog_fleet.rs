//! A backlog across machines, simulated: a bare repository as the remote, one clone per machine
//! with a loop store of its own, one `loop-hook run --backlog FILE --task N` process each with a
//! stand-in agent, and `loop-hook run --backlog FILE --merge` in a fresh clone judging what was
//! pushed on the merged tree. Then `docs/ci/for-loop-backlog.yml`, valid against the GitHub
//! workflow schema and run job by job as a runner runs it, against the same kind of remote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;

use crate::attempts_workflow::{Runner, workflow_at};
use crate::release_workflow::assert_valid_github_workflow;
use crate::run_driver::{driver, fake_claude, wait_for};
use crate::util::{TestEnv, git, run_command};

const WORKFLOW: &str = "docs/ci/for-loop-backlog.yml";
const REFS: &str = "refs/for-loop/backlog";
const DONE: &str = "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'";
const TOKEN: &str = "token-of-the-job";

/// Seven tasks. Alpha and Eta land; Beta edits Alpha's line (a conflict); Gamma breaks Alpha's
/// check; Delta's machine lies (its commit lacks its file, its claim says passed); Epsilon
/// rewrites its own check; Zeta's machine is killed mid-task and pushes nothing.
const BACKLOG: &str = "# Backlog

- [ ] Alpha
  verify: sh checks/alpha.sh
- [ ] Beta
  verify: sh checks/beta.sh
- [ ] Gamma
  verify: sh checks/gamma.sh
- [ ] Delta
  verify: sh checks/delta.sh
- [ ] Epsilon
  verify: sh checks/epsilon.sh
- [ ] Zeta
  verify: sh checks/zeta.sh
- [ ] Eta
  verify: sh checks/eta.sh
";

/// Each task's check, a script the loops' and the merge's oracle keep: what it reads is the
/// task's to change, the script is not.
const CHECKS: [(&str, &str); 7] = [
    ("alpha", "grep -qx 'alpha: on' shared.txt && grep -qx ok lib.txt"),
    ("beta", "grep -qx 'beta: on' shared.txt"),
    ("gamma", "test -f gamma.txt"),
    ("delta", "grep -qx delta delta.txt"),
    ("epsilon", "grep -qx epsilon epsilon.txt"),
    ("zeta", "test -f zeta.txt"),
    ("eta", "test -f eta.txt"),
];

/// The stand-in agent of every machine, by the task its prompt names.
const AGENT: &str = "case \"$2\" in
  Alpha*) echo 'alpha: on' > shared.txt ;;
  Beta*) echo 'beta: on' > shared.txt ;;
  Gamma*) touch gamma.txt; echo broken > lib.txt ;;
  Delta*) echo delta > delta.txt ;;
  Epsilon*) echo 'exit 0' > checks/epsilon.sh ;;
  Eta*) touch eta.txt ;;
  Zeta*) touch \"$HOME/agent.started\"; exec sleep 60 ;;
esac";

/// The remote: a bare repository holding one commit with the backlog and the files its checks read.
struct Remote {
    _dir: TempDir,
    origin: PathBuf,
    head: String,
}

impl Remote {
    fn new() -> Remote {
        let dir = TempDir::new().unwrap();
        git(dir.path(), &["init", "-q", "--bare", "-b", "main", "origin.git"]);
        let origin = dir.path().join("origin.git");
        let seed = TestEnv::new();
        git(&seed.project, &["init", "-q", "-b", "main"]);
        seed.write("BACKLOG.md", BACKLOG);
        seed.write("shared.txt", "x\n");
        seed.write("lib.txt", "ok\n");
        for (name, check) in CHECKS {
            seed.write(&format!("checks/{name}.sh"), &format!("{check}\n"));
        }
        git(&seed.project, &["add", "."]);
        git(&seed.project, &["commit", "-qm", "init"]);
        let head = git(&seed.project, &["rev-parse", "HEAD"]).trim().to_string();
        git(&seed.project, &["push", "-q", origin.to_str().unwrap(), "main"]);
        Remote { _dir: dir, origin, head }
    }

    fn url(&self) -> &str {
        self.origin.to_str().unwrap()
    }

    fn refs(&self, pattern: &str) -> String {
        git(&self.origin, &["for-each-ref", "--format=%(refname) %(objectname)", pattern])
    }

    /// A machine: a clone of the remote (as `origin`) with a loop store of its own.
    fn machine(&self) -> TestEnv {
        let env = TestEnv::new();
        git(&env.project, &["clone", "-q", self.url(), "."]);
        env
    }

    /// A machine whose checkout is shallow, as `actions/checkout` leaves it.
    fn runner(&self) -> TestEnv {
        let env = TestEnv::new();
        git(&env.project, &["clone", "-q", "--depth", "1", &format!("file://{}", self.url()), "."]);
        env
    }
}

fn backlog(machine: &TestEnv, args: &[&str]) -> crate::util::Run {
    let mut all = vec!["run", "--backlog", "BACKLOG.md"];
    all.extend(args);
    machine.run(&all, b"")
}

/// `loop-hook run --backlog BACKLOG.md --task N --run-id ID` on `machine` with the stand-in agent.
fn task_command(machine: &TestEnv, id: &str, n: u32) -> Command {
    let bin = fake_claude(machine, &format!("{AGENT}\n{DONE}"));
    let n = n.to_string();
    let args = ["--backlog", "BACKLOG.md", "--task", &n, "--run-id", id, "--max-iterations", "1"];
    let mut cmd = driver(machine, &bin, &args);
    cmd.stdin(Stdio::null());
    cmd
}

/// Runs task `n` of run `id` on `machine`; its exit code and output.
fn task(machine: &TestEnv, id: &str, n: u32) -> (i32, String) {
    let run = run_command(task_command(machine, id, n), b"");
    (run.code, format!("{}{}", run.stdout, run.stderr))
}

/// HEAD, the branches, the index and the files of a checkout: what neither side may change.
fn checkout_state(dir: &Path) -> String {
    ["rev-parse HEAD", "for-each-ref refs/heads", "ls-files -s", "status --porcelain"]
        .iter()
        .map(|args| git(dir, &args.split(' ').collect::<Vec<_>>()))
        .collect()
}

/// Seven machines, one task each (Zeta's killed mid-task), then the merge on an eighth. What each
/// machine claims is only shown: Alpha and Eta land, in that order; Beta conflicts with Alpha;
/// Gamma breaks Alpha's check on the merged tree; Delta's forged commit claims passed and fails
/// here; Epsilon rewrote its check; Zeta, killed, is missing. Nobody's branch or files change, and the
/// integration is pushed as a ref, never a branch.
#[test]
fn tasks_on_machines_are_pushed_and_the_merge_judges_them_on_the_merged_tree() {
    let remote = Remote::new();
    for n in [1, 2, 3, 5, 7] {
        let machine = remote.machine();
        let before = checkout_state(&machine.project);
        let (code, said) = task(&machine, "r-5", n);
        let passed = n != 5;
        assert_eq!(code, i32::from(!passed), "task {n}: {said}");
        assert!(said.contains(&format!("pushed to origin as {REFS}/r-5/tasks/{n}")), "task {n}: {said}");
        assert_eq!(checkout_state(&machine.project), before, "task {n} changed its checkout");
    }
    // Zeta's machine is killed while its agent works (the agent's sandbox goes with its driver).
    let killed = remote.machine();
    let mut zeta =
        task_command(&killed, "r-5", 6).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    wait_for(&killed.home.join("agent.started"));
    zeta.kill().unwrap();
    zeta.wait().unwrap();
    // Delta's machine pushes a commit of its own making: without delta.txt, claiming it passed.
    let forger = remote.machine();
    forger.write("other.txt", "not the task\n");
    let claim = "for-loop-claim: {\"task\":4,\"outcome\":\"verified\",\"passed\":true,\"iterations\":1,\"seconds\":1}";
    git(&forger.project, &["add", "other.txt"]);
    git(&forger.project, &["commit", "-qm", &format!("for-loop: backlog task 4\n\n{claim}")]);
    git(&forger.project, &["push", "-q", "origin", &format!("HEAD:{REFS}/r-5/tasks/4")]);

    let pushed = remote.refs(REFS);
    let names: Vec<&str> = pushed.lines().map(|l| l.split(' ').next().unwrap()).collect();
    let expected: Vec<String> = [1, 2, 3, 4, 5, 7].iter().map(|n| format!("{REFS}/r-5/tasks/{n}")).collect();
    assert_eq!(names, expected, "{pushed}");
    assert_eq!(
        remote.refs("refs/heads"),
        format!("refs/heads/main {}\n", remote.head),
        "a branch was pushed"
    );
    for n in [1, 2, 3, 5, 7] {
        let parent = git(&remote.origin, &["rev-parse", &format!("{REFS}/r-5/tasks/{n}^")]);
        assert_eq!(parent.trim(), remote.head, "task {n} is not on the commit it started from");
        let message = git(&remote.origin, &["log", "-1", "--format=%B", &format!("{REFS}/r-5/tasks/{n}")]);
        assert!(message.contains("for-loop-claim: "), "task {n} pushed no claim: {message}");
    }

    let merger = remote.machine();
    let before = checkout_state(&merger.project);
    let run = backlog(&merger, &["--merge", "--run-id", "r-5", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let merged: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(merged["event"], "merged", "{merged:#}");
    assert_eq!(merged["landed"], serde_json::json!([1, 7]), "{merged:#}");
    let details: Vec<&str> =
        merged["tasks"].as_array().unwrap().iter().map(|t| t["detail"].as_str().unwrap()).collect();
    for (i, said) in [
        "landed",
        "not landed: conflict in shared.txt",
        "not landed: task 1's check failed on the merged tree",
        "not landed: task 4's check failed on the merged tree",
        "refused: it changed the checks' own files: checks/epsilon.sh",
        "missing: nothing was pushed",
        "landed",
    ]
    .iter()
    .enumerate()
    {
        assert!(details[i].starts_with(said), "task {}: {:?} is not {said:?}", i + 1, details[i]);
    }
    assert_eq!(merged["tasks"][3]["claim"]["passed"], true, "{merged:#}");
    assert_eq!(merged["tasks"][6]["order"], 2, "{merged:#}");

    let integration = format!("{REFS}/r-5/integration");
    let head = git(&remote.origin, &["rev-parse", &integration]);
    assert_eq!(merged["commit"].as_str(), Some(head.trim()), "{merged:#}");
    let files = git(&remote.origin, &["ls-tree", "-r", "--name-only", &integration]);
    for file in ["eta.txt", "shared.txt"] {
        assert!(files.lines().any(|f| f == file), "{file} is not in the integration: {files}");
    }
    for file in ["gamma.txt", "delta.txt", "other.txt"] {
        assert!(!files.lines().any(|f| f == file), "{file} landed: {files}");
    }
    assert_eq!(git(&remote.origin, &["show", &format!("{integration}:shared.txt")]), "alpha: on\n");
    assert_eq!(
        git(&remote.origin, &["show", &format!("{integration}:checks/epsilon.sh")]),
        "grep -qx epsilon epsilon.txt\n"
    );
    assert_eq!(
        remote.refs("refs/heads"),
        format!("refs/heads/main {}\n", remote.head),
        "a branch was pushed"
    );
    assert_eq!(checkout_state(&merger.project), before, "the merge changed its checkout");
    let trees = git(&merger.project, &["worktree", "list", "--porcelain"]);
    assert_eq!(trees.matches("worktree ").count(), 1, "the merge left a work tree: {trees}");

    // The same merge again, in words: the same result, said plainly.
    let text = backlog(&merger, &["--merge", "--run-id", "r-5"]);
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    for said in ["task 6. Zeta: missing", "landed, in order: 1, 7", "it claims its check passed"] {
        assert!(text.stdout.contains(said), "no `{said}` in:\n{}", text.stdout);
    }
    let tree = |name: &str| git(&remote.origin, &["rev-parse", &format!("{name}^{{tree}}")]);
    assert_eq!(tree(&integration), tree(head.trim()), "the same merge gave other files");

    // On another commit than the one the tasks started from, nothing is merged.
    merger.write("later.txt", "a commit after the tasks started\n");
    git(&merger.project, &["add", "later.txt"]);
    git(&merger.project, &["commit", "-qm", "later"]);
    let elsewhere = backlog(&merger, &["--merge", "--run-id", "r-5", "--json"]);
    assert_eq!(elsewhere.code, 1, "{}{}", elsewhere.stdout, elsewhere.stderr);
    let merged: Value = serde_json::from_str(elsewhere.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(merged["landed"], serde_json::json!([]), "{merged:#}");
    let pushed_rows = merged["tasks"].as_array().unwrap().iter().filter(|t| t["commit"].is_string());
    for row in pushed_rows {
        let detail = row["detail"].as_str().unwrap();
        assert!(detail.contains("does not start from this checkout's commit"), "{merged:#}");
    }
}

/// Bad input to either side: refused in one line with what to do, nothing pushed or merged.
#[test]
fn bad_input_to_a_backlog_over_machines_is_refused_with_what_to_do() {
    let remote = Remote::new();
    let machine = remote.machine();
    for (args, code, said) in [
        (&["--task", "9", "--run-id", "r1"][..], 1, "the backlog has tasks 1 to 7"),
        (&["--task", "0", "--run-id", "r1"], 2, "--task 0"),
        (&["--task", "1"], 2, "give --run-id ID"),
        (&["--merge"], 2, "give --run-id ID"),
        (&["--task", "1", "--merge", "--run-id", "r1"], 2, "give one"),
        (&["--task", "1", "--run-id", "a/b"], 2, "cannot name a git ref"),
        (&["--merge", "--run-id", "r1", "--agent", "codex"], 2, "runs no agent"),
        (&["--merge", "--run-id", "r1", "--remote", "-u"], 2, "--remote"),
        (&["--run-id", "r1"], 2, "go with --task N or --merge"),
        (&["--list", "--run-id", "r1"], 2, "runs nothing"),
        (&["--task", "1", "--run-id", "r1", "--parallel", "2"], 2, "leave out"),
    ] {
        let run = backlog(&machine, args);
        let out = format!("{}{}", run.stdout, run.stderr);
        assert_eq!(run.code, code, "{args:?}: {out}");
        assert!(out.contains(said), "{args:?}: {out}");
        assert!(out.lines().next().is_some_and(|l| l.len() < 400), "{args:?}: {out}");
    }
    assert_eq!(remote.refs(REFS), "", "something was pushed");

    // A checkout that is not its commit, and a remote that is not there: refused before any agent runs.
    machine.write("dirty.txt", "mine\n");
    let (code, said) = task(&machine, "r2", 1);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("differs from HEAD (dirty.txt)"), "{said}");
    std::fs::remove_file(machine.project.join("dirty.txt")).unwrap();
    let gone = backlog(&machine, &["--task", "1", "--run-id", "r2", "--remote", "nowhere"]);
    assert_eq!(gone.code, 1, "{}{}", gone.stdout, gone.stderr);
    assert!(gone.stdout.contains("cannot reach the remote \"nowhere\""), "{}", gone.stdout);
    let nothing = backlog(&machine, &["--merge", "--run-id", "r3"]);
    assert_eq!(nothing.code, 1, "{}{}", nothing.stdout, nothing.stderr);
    assert!(nothing.stdout.contains("no task landed"), "{}", nothing.stdout);
    assert_eq!(remote.refs(REFS), format!("{REFS}/r3/integration {}\n", remote.head));

    // Backlogs a run refuses are refused by --list, before any machine starts.
    for (text, said) in [
        ("# nothing to do\n", "has no stories"),
        ("- [ ] Same\n  verify: true\n- [ ] same\n  verify: true\n", "two tasks titled"),
        ("- [ ] Unchecked\n", "has no check"),
    ] {
        machine.write("BACKLOG.md", text);
        let run = backlog(&machine, &["--list", "--json"]);
        assert_eq!(run.code, 1, "{text:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(said), "{text:?}: {}", run.stdout);
    }
    machine.write("BACKLOG.md", "- [ ] Unchecked\n- [ ] Checked\n  verify: test -f c\n");
    let listed = backlog(&machine, &["--list", "--json", "--verify", "make check"]);
    assert_eq!(listed.code, 0, "{}{}", listed.stdout, listed.stderr);
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(listed["tasks"][0]["check"], "make check", "{listed:#}");
    assert_eq!(listed["tasks"][1]["check"], "test -f c", "{listed:#}");
}

#[test]
fn the_backlog_workflow_is_a_valid_github_workflow() {
    assert_valid_github_workflow(WORKFLOW);
}

fn values(task: u32) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("inputs.backlog", "BACKLOG.md".to_string()),
        ("inputs.verify", "true".to_string()),
        ("matrix.task", task.to_string()),
        ("github.run_id", "4242".to_string()),
        ("github.token", TOKEN.to_string()),
        ("github.ref_name", "main".to_string()),
        ("secrets.ANTHROPIC_API_KEY", "key".to_string()),
        ("vars.FOR_LOOP_GIT", "https://example.invalid/for-loop.git".to_string()),
    ])
}

/// The plan lists the seven tasks as the matrix; every task job but Zeta's runs (its runner is
/// lost) and pushes its ref, the token never in the agent's environment or the checkout's
/// configuration; the merge job lands Alpha, Delta (honest here) and Eta and opens one pull
/// request from a branch at the integration commit, naming what did not land.
#[test]
fn the_backlog_workflow_runs_tasks_merges_what_passes_and_opens_one_pull_request() {
    let jq = std::process::Command::new("jq").arg("--version").output();
    assert!(jq.is_ok_and(|out| out.status.success()), "jq is missing: scripts/install-test-deps installs it");
    let workflow = workflow_at(WORKFLOW);
    let remote = Remote::new();
    let agent = format!("env > \"$HOME/agent-env\"\n{AGENT}\n{DONE}");
    let plan = Runner::with_agent(remote.runner(), &agent);
    let (steps, output) = plan.run_job(&workflow, "plan", &values(0));
    assert!(steps.iter().all(|(_, ok)| *ok), "{steps:?}");
    assert_eq!(output.trim(), "tasks=[1,2,3,4,5,6,7]");

    for n in [1, 2, 3, 4, 5, 7] {
        let runner = Runner::with_agent(remote.runner(), &agent);
        let (steps, _) = runner.run_job(&workflow, "task", &values(n));
        let pushed = steps.iter().any(|(name, ok)| name.starts_with("Push the task") && *ok);
        assert!(pushed, "task {n}: {steps:?}");
        let agent_env = std::fs::read_to_string(runner.machine.home.join("agent-env")).unwrap();
        assert!(!agent_env.contains(TOKEN), "the agent saw the job's token");
        let config = std::fs::read_to_string(runner.machine.project.join(".git/config")).unwrap();
        assert!(!config.contains("extraheader") && !config.contains(TOKEN), "{config}");
    }
    assert_eq!(remote.refs(REFS).lines().count(), 6, "{}", remote.refs(REFS));

    let when = workflow["jobs"]["merge"]["if"].as_str().unwrap();
    assert!(when.contains("!cancelled()") && when.contains("needs.plan.result == 'success'"), "{when}");
    let merge = Runner::with_agent(remote.runner(), &agent);
    let (steps, _) = merge.run_job(&workflow, "merge", &values(0));
    assert!(steps.iter().all(|(_, ok)| *ok), "{steps:?}");
    let integration = git(&remote.origin, &["rev-parse", &format!("{REFS}/4242/integration")]);
    assert_eq!(git(&remote.origin, &["rev-parse", "refs/heads/for-loop/backlog-4242"]), integration);
    let gh = std::fs::read_to_string(merge.machine.home.join("gh.args")).unwrap();
    let args: Vec<&str> = gh.lines().collect();
    assert_eq!(
        args[..8],
        [
            "pr",
            "create",
            "--base",
            "main",
            "--head",
            "for-loop/backlog-4242",
            "--title",
            "for-loop: backlog BACKLOG.md, 3 of 7 tasks"
        ]
    );
    for said in [
        "- landed: 1. Alpha",
        "- landed: 4. Delta",
        "- landed: 7. Eta",
        "- not landed: 2. Beta (not landed: conflict in shared.txt)",
        "- not landed: 3. Gamma (not landed: task 1's check failed on the merged tree)",
        "and `true`.",
    ] {
        assert!(gh.contains(said), "no {said:?} in the pull request:\n{gh}");
    }
    let summary = std::fs::read_to_string(merge.temp.join("summary.md")).unwrap();
    for row in ["| 1 | Alpha | true | landed |", "| 6 | Zeta | false | missing"] {
        assert!(summary.contains(row), "no {row} in the summary:\n{summary}");
    }
    let config = std::fs::read_to_string(merge.machine.project.join(".git/config")).unwrap();
    assert!(!config.contains(TOKEN) && !config.contains("extraheader"), "{config}");
}
