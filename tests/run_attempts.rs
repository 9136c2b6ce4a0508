//! Best-of-K (`loop-hook run --attempts K`) with a stand-in agent CLI that knows which attempt
//! it is from the loop the driver names in `FOR_LOOP_RUN` (`attempt-RUN-N`): the attempts' own
//! work trees, the winner, `--apply`, the refs kept, and the sweep of a crashed run's work tree.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::run_driver::{alive, driver, fake_claude, wait_for};
use crate::util::{TestEnv, git, run_command};

const DONE: &str = "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'";

/// A git project whose check passes once `fixed` holds `fixed`, with an uncommitted change of
/// the user's (which the attempts start from, and `--apply` leaves alone).
fn project() -> TestEnv {
    let env = TestEnv::new();
    git(&env.project, &["init", "-q"]);
    env.write(
        "check.sh",
        "grep -qx fixed fixed 2>/dev/null || { echo 'FAIL: fixed is not fixed'; exit 1; }\n",
    );
    env.write("notes.txt", "committed\n");
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "init"]);
    env.write("notes.txt", "the user's own edit\n");
    env
}

/// HEAD, the index, the branches and the stash: what attempts and `--apply` must not touch.
fn users_git(dir: &Path) -> String {
    ["rev-parse HEAD", "ls-files -s", "for-each-ref refs/heads", "stash list", "status --porcelain"]
        .iter()
        .map(|args| git(dir, &args.split(' ').collect::<Vec<_>>()))
        .collect()
}

/// The loop session ids of the store, sorted.
fn sessions(env: &TestEnv) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(env.store().join("sessions"))
        .map(|dir| dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    ids.sort();
    ids
}

/// Nothing of the attempts' work trees is left: not in the store, not in git's records.
fn assert_no_work_trees(env: &TestEnv) {
    let left: Vec<_> = std::fs::read_dir(env.store().join("worktrees"))
        .map(|dir| dir.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "work trees left in the store: {left:?}");
    let listed = git(&env.project, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    let records = env.project.join(".git/worktrees");
    assert!(
        !records.exists() || std::fs::read_dir(&records).unwrap().next().is_none(),
        "git still records one"
    );
}

/// Two attempts one after another: the first never fixes it and ends at its cap, the second
/// verifies. The user's tree is untouched until `--apply`, which brings the winner's change and
/// nothing else; both attempts are kept as refs and named.
#[test]
fn attempts_run_one_after_another_and_apply_brings_the_winner() {
    let env = project();
    let before = users_git(&env.project);
    let bin =
        fake_claude(&env, &format!("case \"$FOR_LOOP_RUN\" in *-2) echo fixed > fixed ;; esac\n{DONE}"));
    let run = run_command(
        driver(
            &env,
            &bin,
            &["make fixed say fixed", "--verify", "sh check.sh", "--max-iterations", "2", "--attempts", "2"],
        ),
        b"",
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("attempt 2 of 2 verified first"), "{}", run.stdout);
    assert!(run.stdout.contains("loop-hook run --apply"), "{}", run.stdout);
    assert!(run.stderr.contains("attempt 1: iteration 2/2"), "{}", run.stderr);
    assert_eq!(users_git(&env.project), before, "the attempts changed the user's repository");
    assert!(!env.project.join("fixed").exists());
    assert_no_work_trees(&env);

    let refs = git(&env.project, &["for-each-ref", "--format=%(refname)", "refs/for-loop/attempts"]);
    let refs: Vec<&str> = refs.lines().collect();
    assert_eq!(refs.len(), 3, "{refs:?}");
    for kept in &refs {
        assert!(run.stdout.contains(kept) || kept.ends_with("/base"), "{kept} not named: {}", run.stdout);
    }
    let winner = refs.iter().find(|r| r.ends_with("/2")).unwrap();
    assert_eq!(git(&env.project, &["show", &format!("{winner}:fixed")]), "fixed\n");
    // The attempts started from the user's working tree, uncommitted edit included.
    assert_eq!(git(&env.project, &["show", &format!("{winner}:notes.txt")]), "the user's own edit\n");

    let ids = sessions(&env);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.iter().all(|id| id.starts_with("attempt-")), "{ids:?}");
    assert_eq!(env.ledger_reasons(&ids[0]).last().map(String::as_str), Some("cap_reached"));
    assert_eq!(env.ledger_reasons(&ids[1]), ["verified"]);

    let index = git(&env.project, &["ls-files", "-s"]);
    let applied = env.run(&["run", "--apply"], b"");
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    assert!(applied.stdout.contains("applied attempt 2"), "{}", applied.stdout);
    assert_eq!(std::fs::read_to_string(env.project.join("fixed")).unwrap(), "fixed\n");
    assert_eq!(std::fs::read_to_string(env.project.join("notes.txt")).unwrap(), "the user's own edit\n");
    assert_eq!(git(&env.project, &["ls-files", "-s"]), index, "--apply staged something");
    let again = env.run(&["run", "--apply"], b"");
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(again.stdout.contains("already in the working tree"), "{}", again.stdout);

    // A local file in the way: refused, with what to do, and nothing changed.
    env.write("fixed", "mine\n");
    let refused = env.run(&["run", "--apply"], b"");
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(refused.stdout.contains("conflict with local changes"), "{}", refused.stdout);
    assert!(refused.stdout.contains("nothing was changed"), "{}", refused.stdout);
    assert_eq!(std::fs::read_to_string(env.project.join("fixed")).unwrap(), "mine\n");
}

/// A plan worked in attempts: an attempt's copy of the plan keeps its boxes, so the winner's
/// change holds no change of the check and `--apply` brings it; the user's plan is left as it was.
#[test]
fn a_plan_worked_in_attempts_is_applied_and_the_users_plan_keeps_its_boxes() {
    let env = project();
    let plan = "- [ ] Fix it\n  verify: sh check.sh\n";
    env.write("PLAN.md", plan);
    git(&env.project, &["add", "PLAN.md"]);
    git(&env.project, &["commit", "-qm", "plan"]);
    let bin = fake_claude(&env, &format!("echo fixed > fixed\n{DONE}"));
    let run = run_command(
        driver(&env, &bin, &["--plan", "PLAN.md", "--max-iterations", "2", "--attempts", "2"]),
        b"",
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("verified first"), "{}", run.stdout);
    let applied = env.run(&["run", "--apply"], b"");
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    assert!(applied.stdout.contains("applied attempt"), "{}", applied.stdout);
    assert_eq!(std::fs::read_to_string(env.project.join("fixed")).unwrap(), "fixed\n");
    assert_eq!(std::fs::read_to_string(env.project.join("PLAN.md")).unwrap(), plan);
}

/// Two attempts at once: the second verifies while the first's agent still runs; the first's
/// agent (and what it started) is killed, its loop parked saying why, and the events say which
/// attempt each is about.
#[test]
fn parallel_attempts_stop_the_others_when_one_verifies() {
    let env = project();
    let child = env.home.join("attempt-1.child");
    let bin = fake_claude(
        &env,
        &format!(
            "case \"$FOR_LOOP_RUN\" in\n\
               *-1) sleep 3000 & echo $! > {c}; wait ;;\n\
               *-2) while [ ! -s {c} ]; do sleep 0.1; done; echo fixed > fixed ;;\n\
             esac\n{DONE}",
            c = child.display()
        ),
    );
    let started = Instant::now();
    let run = run_command(
        driver(
            &env,
            &bin,
            // Outside the sandbox: the pid the agent writes is the machine's, not a namespace's.
            &[
                "make fixed say fixed",
                "--verify",
                "sh check.sh",
                "--attempts",
                "2",
                "--parallel",
                "--json",
                "--no-sandbox",
            ],
        ),
        b"",
    );
    // Far less than the loser sleeps: it was stopped, not waited for.
    assert!(started.elapsed() < crate::util::PATIENCE, "the losing attempt was not stopped");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let events: Vec<Value> = run.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let summary = events.last().unwrap();
    assert_eq!(summary["event"], "attempts", "{}", run.stdout);
    assert_eq!(summary["winner"], 2, "{}", run.stdout);
    for attempt in [1, 2] {
        assert!(
            events.iter().any(|e| e["event"] == "iteration" && e["attempt"] == attempt),
            "no iteration event of attempt {attempt}: {}",
            run.stdout
        );
    }
    let pid = std::fs::read_to_string(&child).unwrap();
    assert!(!alive(&pid), "the losing attempt's agent outlived the run");
    let ids = sessions(&env);
    let loser = ids.iter().find(|id| id.ends_with("-1")).unwrap();
    let last = env.ledger_of(loser).pop().unwrap();
    assert_eq!(last["reason"], "interrupted", "{last}");
    assert!(last["detail"].as_str().unwrap().contains("another attempt verified first"), "{last}");
    assert_no_work_trees(&env);
}

/// A driver killed outright leaves its attempt's work tree behind; the next run sweeps it, with
/// git's record of it and the attempt's loop, which is parked saying so.
#[test]
fn a_crashed_runs_work_tree_is_swept_by_the_next_run() {
    let env = project();
    let pid_file = env.home.join("agent.pid");
    let bin = fake_claude(&env, &format!("echo $$ > {}; exec sleep 300", pid_file.display()));
    let mut crashed =
        driver(&env, &bin, &["t", "--verify", "sh check.sh", "--attempts", "1", "--no-sandbox"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    wait_for(&pid_file);
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    let agent = std::fs::read_to_string(&pid_file).unwrap();
    Command::new("kill").args(["-KILL", agent.trim()]).status().unwrap();
    let trees: Vec<_> = std::fs::read_dir(env.store().join("worktrees"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(trees.len(), 1, "the crash left no work tree to sweep: {trees:?}");
    assert!(git(&env.project, &["worktree", "list"]).contains(trees[0].to_str().unwrap()));

    let next = env.run(&["run", "--apply"], b"");
    assert_eq!(next.code, 1, "{}{}", next.stdout, next.stderr);
    assert!(!trees[0].exists(), "the orphan work tree is still there");
    assert_no_work_trees(&env);
    let orphan = sessions(&env).pop().unwrap();
    let last = env.ledger_of(&orphan).pop().unwrap();
    assert_eq!(last["reason"], "interrupted", "{last}");
    assert!(last["detail"].as_str().unwrap().contains("swept"), "{last}");
}

/// Outside a git repository there is nowhere to put the attempts' work trees: refused, saying
/// so, and no loop is started.
#[test]
fn attempts_outside_git_are_refused() {
    let env = TestEnv::new();
    let bin = fake_claude(&env, DONE);
    let run = run_command(driver(&env, &bin, &["t", "--verify", "true", "--attempts", "2"]), b"");
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("not in a git repository"), "{}", run.stdout);
    assert!(run.stdout.contains("drop --attempts"), "{}", run.stdout);
    assert!(sessions(&env).is_empty());
}

/// A run that ended at its cap continues with `run --resume --more N`, on the same loop.
#[test]
fn a_capped_run_resumes_with_more_iterations() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let bin = fake_claude(&env, DONE);
    let run = run_command(
        driver(&env, &bin, &["create fixed", "--verify", "sh check.sh", "--max-iterations", "1"]),
        b"",
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let session = sessions(&env).pop().unwrap();
    assert_eq!(env.ledger_reasons(&session), ["cap_reached"]);

    let refused = run_command(driver(&env, &bin, &["--resume", "--more", "0"]), b"");
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);

    let bin = fake_claude(&env, &format!("touch fixed\n{DONE}"));
    let resumed = run_command(driver(&env, &bin, &["--resume", "--more", "2", "--more-time", "10m"]), b"");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(env.ledger_reasons(&session), ["cap_reached", "resumed", "verified"]);
    let last = env.ledger_of(&session).pop().unwrap();
    assert_eq!(last["iteration"], 2);
    let state = std::fs::read_to_string(env.session_dir(&session).join("state.md")).unwrap();
    assert!(state.contains("max_iterations: 3"), "{state}");
    assert!(state.contains("max_time_secs: 6"), "{state}");
}

/// A best-of-K attempt's work tree is removed when its run ends, but its report still knows it
/// was in git: each iteration's files come from its checkpoints, refs of the user's repository,
/// and the page says where its work tree went instead of "not in a git repository".
#[test]
fn an_attempts_report_reads_its_changes_after_its_work_tree_is_removed() {
    let env = project();
    let bin = fake_claude(&env, &format!("echo fixed > fixed\n{DONE}"));
    let run = run_command(
        driver(
            &env,
            &bin,
            &["make fixed say fixed", "--verify", "sh check.sh", "--checkpoint", "--attempts", "1"],
        ),
        b"",
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_no_work_trees(&env);
    let ids = sessions(&env);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let out = env.home.join("attempt.html");
    let report = env.run(&["report", "--session", &ids[0], "--out", out.to_str().unwrap()], b"");
    assert_eq!(report.code, 0, "{}{}", report.stdout, report.stderr);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(!html.contains("not in a git repository"), "{html}");
    assert!(html.contains("work tree was removed when its run ended"), "{html}");
    assert!(html.contains("<table id=\"files-per-iteration\">"), "{html}");
    assert!(html.contains("<li>fixed</li>"), "{html}");
}

/// An agent that finds the user's repository from its work tree's `.git` file and rewrites the
/// user's check and git hooks, then fixes its own tree.
fn attempt_reaching_into_the_users_repository(env: &TestEnv) -> std::path::PathBuf {
    fake_claude(
        env,
        &format!(
            "gitdir=$(sed -n 's/^gitdir: //p' .git); repo=${{gitdir%/.git/worktrees/*}}\n\
             echo 'exit 0' > \"$repo/check.sh\"\n\
             echo 'echo planted' > \"$repo/.git/hooks/pre-commit\"\n\
             echo fixed > fixed\n{DONE}"
        ),
    )
}

/// In the sandbox an attempt cannot write the user's repository: the check and git's hooks
/// stay as they were, and the run has nothing to report about them.
#[test]
fn in_the_sandbox_an_attempt_cannot_write_the_users_repository() {
    let env = project();
    let bin = attempt_reaching_into_the_users_repository(&env);
    let run = run_command(
        driver(&env, &bin, &["make fixed say fixed", "--verify", "sh check.sh", "--attempts", "1"]),
        b"",
    );
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.starts_with("for-loop: attempt 1: sandbox: bubblewrap"),
        "bubblewrap must be installed: {said}"
    );
    assert_eq!(run.code, 0, "{said}");
    assert!(run.stdout.contains("attempt 1 of 1 verified first"), "{said}");
    assert!(!env.project.join(".git/hooks/pre-commit").exists(), "the attempt planted a hook: {said}");
    let check = std::fs::read_to_string(env.project.join("check.sh")).unwrap();
    assert!(check.contains("FAIL: fixed is not fixed"), "the attempt rewrote the check: {check}");
    assert!(!said.contains("your repository changed"), "{said}");
    assert_no_work_trees(&env);
}

/// Without the sandbox (`--no-sandbox`) the same attempt gets through, and the end of the run
/// says so: the user's check and the planted hook are each named, and the run fails.
#[test]
fn without_the_sandbox_an_attempt_that_wrote_the_users_repository_is_reported() {
    let env = project();
    let bin = attempt_reaching_into_the_users_repository(&env);
    let args = ["make fixed say fixed", "--verify", "sh check.sh", "--attempts", "1", "--no-sandbox"];
    let run = run_command(driver(&env, &bin, &args), b"");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, 1, "{said}");
    assert!(run.stdout.contains("your repository changed while the attempts ran"), "{said}");
    assert!(run.stdout.contains(".git/hooks/pre-commit added"), "{said}");
    assert!(run.stdout.contains("check.sh changed in the working tree"), "{said}");
    let mut json = args.to_vec();
    json.push("--json");
    let env = project();
    let bin = attempt_reaching_into_the_users_repository(&env);
    let run = run_command(driver(&env, &bin, &json), b"");
    let events: Vec<Value> = run.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let changed = events.iter().find(|e| e["event"] == "users_repo_changed").expect(&run.stdout);
    assert_eq!(changed["changes"][0], ".git/hooks/pre-commit added", "{}", run.stdout);
}

/// An attempt whose code passes only where `.git` is a file (a linked work tree) wins in its
/// work tree; `run --apply` runs the check again in the user's tree, where it fails, says so,
/// and takes the change back: the user's tree is as it was.
#[test]
fn apply_takes_back_a_change_that_fails_the_check_in_the_users_tree() {
    let env = TestEnv::new();
    git(&env.project, &["init", "-q"]);
    env.write("check.sh", "sh ./code.sh || { echo 'FAIL: code.sh fails'; exit 1; }\n");
    env.write("code.sh", "exit 1\n");
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "init"]);
    let bin = fake_claude(&env, &format!("echo 'test -f .git' > code.sh\n{DONE}"));
    let run = run_command(
        driver(&env, &bin, &["make the check pass", "--verify", "sh check.sh", "--attempts", "1"]),
        b"",
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let before = users_git(&env.project);
    let applied = env.run(&["run", "--apply"], b"");
    assert_eq!(applied.code, 1, "{}{}", applied.stdout, applied.stderr);
    assert!(
        applied
            .stdout
            .contains("verified in its own work tree, but `sh check.sh` fails in your working tree (exit 1)"),
        "{}",
        applied.stdout
    );
    assert!(applied.stdout.contains("FAIL: code.sh fails"), "{}", applied.stdout);
    assert!(applied.stdout.contains("The change was taken back"), "{}", applied.stdout);
    assert_eq!(std::fs::read_to_string(env.project.join("code.sh")).unwrap(), "exit 1\n");
    assert_eq!(users_git(&env.project), before, "the user's tree is not as it was");
}

/// `run --apply` reads which files the winner changed from its ref, and refuses a winner whose
/// change includes the check's own files (here an attempt ref rewritten after the run to change
/// `check.sh` too): nothing is applied, and the user's tree is as it was.
#[test]
fn apply_refuses_a_winner_that_changes_the_checks_own_files() {
    let env = TestEnv::new();
    git(&env.project, &["init", "-q"]);
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "init"]);
    let bin = fake_claude(&env, &format!("touch fixed\n{DONE}"));
    let run =
        run_command(driver(&env, &bin, &["create fixed", "--verify", "sh check.sh", "--attempts", "1"]), b"");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let refs = git(&env.project, &["for-each-ref", "--format=%(refname)", "refs/for-loop/attempts"]);
    let winner = refs.lines().next().expect("the attempt's ref").to_string();
    // The attempt's commit, with check.sh changed on top of it, under the same ref.
    let tree = git(&env.project, &["rev-parse", &format!("{winner}^{{tree}}")]).trim().to_string();
    let blob = {
        let mut cmd = std::process::Command::new("git");
        cmd.args(["hash-object", "-w", "--stdin"]).current_dir(&env.project);
        crate::util::run_command(cmd, b"exit 0\n").stdout.trim().to_string()
    };
    let listing = git(&env.project, &["ls-tree", &tree])
        .replace(&git(&env.project, &["rev-parse", &format!("{tree}:check.sh")]).trim().to_string(), &blob);
    let forged_tree = {
        let mut cmd = std::process::Command::new("git");
        cmd.args(["mktree"]).current_dir(&env.project);
        crate::util::run_command(cmd, listing.as_bytes()).stdout.trim().to_string()
    };
    let forged =
        git(&env.project, &["commit-tree", &forged_tree, "-p", &winner, "-m", "forged"]).trim().to_string();
    git(&env.project, &["update-ref", &winner, &forged]);
    let before = users_git(&env.project);

    let applied = env.run(&["run", "--apply"], b"");
    assert_eq!(applied.code, 1, "{}{}", applied.stdout, applied.stderr);
    assert!(
        applied.stdout.contains("changes include the check's own files (check.sh)"),
        "{}",
        applied.stdout
    );
    assert!(!env.project.join("fixed").exists(), "nothing is applied");
    assert_eq!(users_git(&env.project), before, "the user's tree is not as it was");
}
