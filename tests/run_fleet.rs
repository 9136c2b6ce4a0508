//! Best of K across machines, simulated: a bare repository as the remote, one clone per machine
//! with a loop store of its own, one `loop-hook run --attempt N` process each with a stand-in
//! agent, and `loop-hook run --pick` in a fresh clone re-checking what was pushed.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;

use crate::run_driver::{driver, fake_claude, wait_for};
use crate::util::{TestEnv, git, run_command};

const DONE: &str = "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'";
const REFS: &str = "refs/for-loop/attempts";

/// The stand-in agent of every machine, by attempt (`FOR_LOOP_RUN` is `attempt-RUN-N`):
/// 1 hides its fix from git (verify passes in its tree, so it claims verified; the commit it
/// pushes lacks the fix), 2 hangs until killed, 3 changes nothing, 4 and 5 fix it.
const AGENT: &str = "case \"$FOR_LOOP_RUN\" in
  *-1) echo fixed > fixed; exclude=$(git rev-parse --git-path info/exclude)
       mkdir -p \"$(dirname \"$exclude\")\"; echo fixed >> \"$exclude\" ;;
  *-2) echo $$ > \"$HOME/agent.pid\"; exec sleep 300 ;;
  *-4) echo fixed > fixed ;;
  *-5) echo fixed > fixed; echo five > five ;;
esac";

/// The remote: a bare repository holding one commit whose check passes once `fixed` says so.
pub(crate) struct Remote {
    _dir: TempDir,
    pub(crate) origin: std::path::PathBuf,
    pub(crate) head: String,
}

impl Remote {
    pub(crate) fn new() -> Remote {
        let dir = TempDir::new().unwrap();
        git(dir.path(), &["init", "-q", "--bare", "-b", "main", "origin.git"]);
        let origin = dir.path().join("origin.git");
        let seed = TestEnv::new();
        git(&seed.project, &["init", "-q", "-b", "main"]);
        seed.write(
            "check.sh",
            "grep -qx fixed fixed 2>/dev/null || { echo 'FAIL: fixed is not fixed'; exit 1; }\n",
        );
        seed.write("notes.txt", "committed\n");
        git(&seed.project, &["add", "."]);
        git(&seed.project, &["commit", "-qm", "init"]);
        let remote =
            Remote { head: git(&seed.project, &["rev-parse", "HEAD"]).trim().to_string(), _dir: dir, origin };
        git(&seed.project, &["push", "-q", remote.url(), "main"]);
        remote
    }

    fn url(&self) -> &str {
        self.origin.to_str().unwrap()
    }

    /// The refs the remote has under `pattern`, as `name oid` lines.
    pub(crate) fn refs(&self, pattern: &str) -> String {
        git(&self.origin, &["for-each-ref", "--format=%(refname) %(objectname)", pattern])
    }

    /// A machine: a clone of the remote (as `origin`) with a loop store of its own.
    fn machine(&self) -> TestEnv {
        let env = TestEnv::new();
        git(&env.project, &["clone", "-q", self.url(), "."]);
        env
    }

    /// A machine whose checkout is shallow, as `actions/checkout` leaves it.
    pub(crate) fn runner(&self) -> TestEnv {
        let env = TestEnv::new();
        git(&env.project, &["clone", "-q", "--depth", "1", &format!("file://{}", self.url()), "."]);
        env
    }
}

/// Starts attempt `n` of `k` of run `id` on `machine`.
fn start_attempt(machine: &TestEnv, id: &str, n: u32, k: u32) -> Child {
    let bin = fake_claude(machine, &format!("{AGENT}\n{DONE}"));
    let (n, k) = (n.to_string(), k.to_string());
    let mut args =
        vec!["make fixed say fixed", "--verify", "sh check.sh", "--max-iterations", "1", "--attempts", &k];
    // The liar's job runs without the agent's sandbox, which would keep it out of git's
    // info/exclude: the pick must not trust a job, whatever ran in it.
    if n == "1" {
        args.push("--no-sandbox");
    }
    driver(machine, &bin, &args)
        .args(["--attempt", &n, "--run-id", id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), said)
}

/// HEAD, the branches, the index and the files of a checkout: what neither side may change.
fn checkout_state(dir: &Path) -> String {
    ["rev-parse HEAD", "for-each-ref refs/heads", "ls-files -s", "status --porcelain"]
        .iter()
        .map(|args| git(dir, &args.split(' ').collect::<Vec<_>>()))
        .collect()
}

fn pick(machine: &TestEnv, args: &[&str]) -> crate::util::Run {
    let mut all = vec!["run", "--pick"];
    all.extend(args);
    machine.run(&all, b"")
}

/// Five machines, one attempt each: one lies (it claims verified, but the commit it pushed fails
/// verify), one is killed mid-run and pushes nothing, one fails honestly, two verify. The pick
/// re-runs verify on a fresh checkout of each, refuses the liar, reports the missing one, and
/// picks the first that verifies here by number (4, not 5); nobody's branch or files change.
#[test]
fn attempts_on_five_machines_are_pushed_and_the_pick_re_checks_them() {
    let remote = Remote::new();
    let machines: Vec<TestEnv> = (0..5).map(|_| remote.machine()).collect();
    let before: Vec<String> = machines.iter().map(|m| checkout_state(&m.project)).collect();
    let mut running: Vec<Child> =
        machines.iter().zip(1..).map(|(machine, n)| start_attempt(machine, "run-7", n, 5)).collect();

    let killed_pid = machines[1].home.join("agent.pid");
    wait_for(&killed_pid);
    running[1].kill().unwrap();
    let agent = std::fs::read_to_string(&killed_pid).unwrap();
    Command::new("kill").args(["-KILL", agent.trim()]).status().unwrap();

    let ended: Vec<(i32, String)> = running.into_iter().map(finish).collect();
    for (n, (code, said)) in ended.iter().enumerate().map(|(i, e)| (i + 1, e)) {
        if n == 2 {
            continue;
        }
        let expected = i32::from(n == 3);
        assert_eq!(*code, expected, "attempt {n}: {said}");
        assert!(said.contains(&format!("pushed to origin as {REFS}/run-7/{n}")), "attempt {n}: {said}");
    }
    for (n, machine) in machines.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert_eq!(checkout_state(&machine.project), before[n], "attempt {} changed its checkout", n + 1);
    }

    let pushed = remote.refs(REFS);
    let names: Vec<&str> = pushed.lines().map(|l| l.split(' ').next().unwrap()).collect();
    let expected: Vec<String> = [1, 3, 4, 5].iter().map(|n| format!("{REFS}/run-7/{n}")).collect();
    assert_eq!(names, expected, "{pushed}");
    assert_eq!(
        remote.refs("refs/heads"),
        format!("refs/heads/main {}\n", remote.head),
        "a branch was pushed"
    );
    let origin = &remote.origin;
    for n in [1, 3, 4, 5] {
        let parent = git(origin, &["rev-parse", &format!("{REFS}/run-7/{n}^")]);
        assert_eq!(parent.trim(), remote.head, "attempt {n} is not on the commit it started from");
    }
    let lie = git(origin, &["log", "-1", "--format=%B", &format!("{REFS}/run-7/1")]);
    assert!(lie.contains("\"verified\":true"), "the liar does not claim verified: {lie}");
    assert!(
        git(origin, &["ls-tree", "--name-only", &format!("{REFS}/run-7/1")]).lines().all(|f| f != "fixed")
    );

    let picker = remote.machine();
    let picked_before = checkout_state(&picker.project);
    let run = pick(&picker, &["run-7", "--verify", "sh check.sh", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(summary["winner"]["attempt"], 4, "{summary:#}");
    let winner_oid = git(origin, &["rev-parse", &format!("{REFS}/run-7/4")]);
    assert_eq!(summary["winner"]["commit"].as_str(), Some(winner_oid.trim()), "{summary:#}");
    let verdicts: Vec<&str> =
        summary["attempts"].as_array().unwrap().iter().map(|a| a["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["refused", "missing", "not_verified", "verified", "verified"], "{summary:#}");
    let liar = summary["attempts"][0]["detail"].as_str().unwrap();
    assert!(liar.contains("claims verified, but verify fails here (exit 1)"), "{liar}");
    assert!(summary["attempts"][1]["detail"].as_str().unwrap().contains("nothing was pushed"), "{summary:#}");
    assert_eq!(checkout_state(&picker.project), picked_before, "the pick changed its checkout");
    let trees = git(&picker.project, &["worktree", "list", "--porcelain"]);
    assert_eq!(trees.matches("worktree ").count(), 1, "the pick left a work tree: {trees}");

    let text = pick(&picker, &["run-7", "--verify=sh check.sh"]);
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    for said in ["attempt 2: missing", "attempt 1: refused: it claims verified", "winner: attempt 4"] {
        assert!(text.stdout.contains(said), "no `{said}` in:\n{}", text.stdout);
    }
}

/// Bad input to either side: refused with what to do, nothing pushed or picked wrongly.
#[test]
fn bad_input_to_a_run_over_machines_is_refused_with_what_to_do() {
    let remote = Remote::new();
    let machine = remote.machine();
    let run = finish(start_attempt(&machine, "r1", 4, 4));
    assert_eq!(run.0, 0, "{}", run.1);
    let bin = fake_claude(&machine, DONE);
    for (extra, said) in [
        (
            &["--attempts", "2", "--attempt", "3", "--run-id", "r1"][..],
            "--attempt 3 is more than --attempts 2",
        ),
        (&["--attempts", "2", "--attempt", "0", "--run-id", "r1"], "--attempt 0: give the attempt's number"),
        (&["--attempts", "2", "--attempt", "1", "--run-id", "a/b"], "cannot name a git ref"),
        (&["--attempts", "2", "--attempt", "1"], "--run-id ID"),
    ] {
        let mut args = vec!["t", "--verify", "true"];
        args.extend(extra);
        let refused = run_command(driver(&machine, &bin, &args), b"");
        assert_eq!(refused.code, 2, "{extra:?}: {}{}", refused.stdout, refused.stderr);
        assert!(
            format!("{}{}", refused.stdout, refused.stderr).contains(said),
            "{extra:?}: {}",
            refused.stdout
        );
    }

    // A checkout that is not its commit, and a remote that is not there: refused before any agent runs.
    machine.write("dirty.txt", "mine\n");
    let args = ["t", "--verify", "true", "--attempts", "2", "--attempt", "1", "--run-id", "r2"];
    let dirty = run_command(driver(&machine, &bin, &args), b"");
    assert_eq!(dirty.code, 1, "{}{}", dirty.stdout, dirty.stderr);
    assert!(dirty.stdout.contains("differs from HEAD (dirty.txt)"), "{}", dirty.stdout);
    std::fs::remove_file(machine.project.join("dirty.txt")).unwrap();
    let mut elsewhere = driver(&machine, &bin, &args);
    elsewhere.args(["--remote", "nowhere"]);
    let gone = run_command(elsewhere, b"");
    assert_eq!(gone.code, 1, "{}{}", gone.stdout, gone.stderr);
    assert!(gone.stdout.contains("cannot reach the remote \"nowhere\""), "{}", gone.stdout);
    assert!(!remote.refs(REFS).contains("/r2/"), "{}", remote.refs(REFS));

    // Refs that are not honest attempts: a blob, a commit that rewrote the check and claims
    // verified, one from another start, and a name that is no number.
    let forger = remote.machine();
    let blob = git(&forger.project, &["hash-object", "-w", "notes.txt"]);
    forger.write("check.sh", "exit 0\n");
    let claim = "for-loop-claim: {\"attempt\":2,\"attempts\":4,\"outcome\":\"verified\",\"verified\":true,\"iterations\":1,\"seconds\":1}";
    // A message too long to read for a claim: the claim is not shown, and nothing else changes.
    git(&forger.project, &["commit", "-qam", &format!("forged\n\n{}\n\n{claim}", "x".repeat(70_000))]);
    let forged = git(&forger.project, &["rev-parse", "HEAD"]);
    git(&forger.project, &["checkout", "-q", "-b", "elsewhere", "HEAD~1"]);
    forger.write("notes.txt", "another start\n");
    git(&forger.project, &["commit", "-qam", "another start"]);
    forger.write("fixed", "fixed\n");
    git(&forger.project, &["add", "fixed"]);
    git(&forger.project, &["commit", "-qm", "fixed elsewhere"]);
    for (object, name) in [(blob.trim(), "1"), (forged.trim(), "2"), ("HEAD", "3"), ("HEAD", "x")] {
        git(&forger.project, &["push", "-q", "origin", &format!("{object}:{REFS}/r1/{name}")]);
    }
    let picker = remote.machine();
    let run = pick(&picker, &["r1", "--verify", "sh check.sh", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(summary["winner"]["attempt"], 4, "{summary:#}");
    let verdicts: Vec<&str> =
        summary["attempts"].as_array().unwrap().iter().map(|a| a["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["refused", "refused", "refused", "verified", "ignored"], "{summary:#}");
    assert!(summary["attempts"][1]["claim"].is_null(), "a huge message was read: {summary:#}");
    let details: Vec<&str> =
        summary["attempts"].as_array().unwrap().iter().map(|a| a["detail"].as_str().unwrap()).collect();
    for (i, said) in [
        "is not a commit (it is a blob)",
        "it changed the check: check.sh (modified)",
        "does not start from this checkout's commit",
        "verified here",
        "ignored: not attempt 1 to 4",
    ]
    .iter()
    .enumerate()
    {
        assert!(details[i].contains(said), "row {i}: {:?} lacks {said:?}", details[i]);
    }

    let unknown = pick(&picker, &["r9", "--verify", "sh check.sh"]);
    assert_eq!(unknown.code, 1, "{}{}", unknown.stdout, unknown.stderr);
    assert!(
        unknown.stdout.contains("no attempts of run r9 on the remote \"origin\": did you mean r1?"),
        "{}",
        unknown.stdout
    );
    let no_verify = pick(&picker, &["r1"]);
    assert_eq!(no_verify.code, 1, "{}{}", no_verify.stdout, no_verify.stderr);
    assert!(no_verify.stdout.contains("give --verify CMD"), "{}", no_verify.stdout);
    let bad_id = pick(&picker, &["../r1", "--verify", "true"]);
    assert_eq!(bad_id.code, 2, "{}{}", bad_id.stdout, bad_id.stderr);
    let no_remote = pick(&picker, &["r1", "--verify", "true", "--remote", "nowhere"]);
    assert_eq!(no_remote.code, 1, "{}{}", no_remote.stdout, no_remote.stderr);
    assert!(
        no_remote.stdout.contains("cannot list the attempts on the remote \"nowhere\""),
        "{}",
        no_remote.stdout
    );
}

/// A pushed attempt is code from another machine, and the pick runs it under verify: in
/// verify's sandbox, where bubblewrap works, it can neither rewrite the picker's check nor plant
/// a git hook in the picker's repository (nor write the picker's loop store), and it is judged
/// all the same.
#[test]
fn a_pushed_attempts_code_cannot_rewrite_the_pickers_check_or_plant_a_hook() {
    let remote = Remote::new();
    let forger = remote.machine();
    forger.write("check.sh", "sh ./code.sh\n");
    git(&forger.project, &["commit", "-qam", "the check runs the code"]);
    git(&forger.project, &["push", "-q", "origin", "main"]);
    let picker = remote.machine();
    let store = picker.store();
    forger.write(
        "code.sh",
        &format!(
            "common=$(git rev-parse --path-format=absolute --git-common-dir)\n\
             echo 'exit 0' > \"$common/../check.sh\"\n\
             mkdir -p \"$common/hooks\"; printf '#!/bin/sh\\necho planted\\n' > \"$common/hooks/post-checkout\"\n\
             chmod +x \"$common/hooks/post-checkout\"\n\
             mkdir -p {store}; touch {store}/planted\n\
             exit 0\n",
            store = store.display()
        ),
    );
    git(&forger.project, &["add", "code.sh"]);
    git(&forger.project, &["commit", "-qm", "the attempt"]);
    git(&forger.project, &["push", "-q", "origin", &format!("HEAD:{REFS}/r9/1")]);
    let check = std::fs::read_to_string(picker.project.join("check.sh")).unwrap();
    let run = pick(&picker, &["r9", "--verify", "sh check.sh", "--json"]);
    let said = format!("{}{}", run.stdout, run.stderr);
    let summary: Value = serde_json::from_str(&run.stdout).unwrap_or_default();
    assert_eq!(summary["attempts"][0]["verdict"], "verified", "{said}");
    assert_eq!(std::fs::read_to_string(picker.project.join("check.sh")).unwrap(), check, "{said}");
    assert!(!picker.project.join(".git/hooks/post-checkout").exists(), "a hook was planted: {said}");
    assert!(!store.join("planted").exists(), "the store was written: {said}");
}
