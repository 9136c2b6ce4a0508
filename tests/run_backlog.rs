//! A backlog run (`loop-hook run --backlog FILE --parallel N`) with a stand-in agent CLI that
//! knows its task from the loop the driver names in `FOR_LOOP_RUN` (`backlog-RUN-N`): tasks at
//! once in their own work trees, the merge queue's conflicts and broken checks sent back, a task
//! that never passes, `--max-merge-tries`, `--apply`, resume after Ctrl-C and after a killed
//! driver, the JSON events, and every bad input refused in one line.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::run_driver::{driver, fake_claude, wait_for};
use crate::util::{PATIENCE, TestEnv, git, run_command};

const DONE: &str = "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'";

/// A git project with `a.txt` (three lines), the checks the tasks name (`checks/one.sh`: a.txt
/// says ONE, `checks/two.sh`: TWO, `checks/whole.sh`: ONE and no broken.txt) and the backlog
/// `BACKLOG.md`, committed.
fn project(backlog: &str) -> TestEnv {
    let env = TestEnv::new();
    git(&env.project, &["init", "-q"]);
    env.write("a.txt", "one\ntwo\nthree\n");
    env.write("checks/one.sh", "grep -q ONE a.txt || { echo 'FAIL: a.txt does not say ONE'; exit 1; }\n");
    env.write("checks/two.sh", "grep -q TWO a.txt || { echo 'FAIL: a.txt does not say TWO'; exit 1; }\n");
    env.write(
        "checks/whole.sh",
        "sh checks/one.sh && test ! -f broken.txt || { echo 'FAIL: broken.txt'; exit 1; }\n",
    );
    env.write("BACKLOG.md", backlog);
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "init"]);
    std::fs::create_dir_all(marks(&env)).unwrap();
    env
}

/// Where the stand-in agents leave marks and the tests leave them word (writable in the sandbox).
fn marks(env: &TestEnv) -> PathBuf {
    env.home.join("marks")
}

/// A stand-in agent: `tasks` is the shell for each task number, `$N` being it.
fn agent(env: &TestEnv, tasks: &str) -> PathBuf {
    let body = format!(
        "N=${{FOR_LOOP_RUN##*-}}\nM={}\nPROMPT=\"$2\"\ncase \"$N\" in\n{tasks}\nesac\n{DONE}",
        marks(env).display()
    );
    fake_claude(env, &body)
}

/// The JSON events a run printed, one per line.
fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
}

fn named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

/// The last event of a run: what landed, what did not.
fn finished(events: &[Value]) -> &Value {
    named(events, "backlog_finished").pop().expect("no backlog_finished event")
}

/// Every commit the integration ref has been on: its first-parent line, one landed merge each.
fn integration_commits(env: &TestEnv, run: &str) -> Vec<String> {
    let name = format!("refs/for-loop/backlog/{run}/integration");
    git(&env.project, &["log", "--first-parent", "--format=%H", &name]).lines().map(str::to_string).collect()
}

/// Two tasks edit the same line of a.txt and a third never passes, three agents at once: all
/// three start together, the second to reach the queue is sent back with the conflict and lands
/// once its agent resolves it, the third parks at its cap and the other two land.
#[test]
fn three_tasks_start_at_once_a_conflict_is_sent_back_and_lands_and_a_task_that_never_passes_parks() {
    let env = project(
        "- [ ] Say ONE\n  verify: sh checks/one.sh\n- [ ] Say TWO\n  verify: sh checks/two.sh\n\
         - [ ] Never\n  verify: test -f never.txt\n",
    );
    // Each agent waits for the other two to start: on the event, for a quarter of the test's
    // patience (a busy machine starts three agents slowly, never wrongly), so that a task that
    // never starts fails the test with the run's words instead of holding it.
    let tenths = PATIENCE.as_secs() * 10 / 4;
    let bin = agent(
        &env,
        &format!(
            "*) touch \"$M/started-$N\"; i=0; while [ $i -lt {tenths} ] && ! {{ [ -e \"$M/started-1\" ] && [ -e \"$M/started-2\" ] && [ -e \"$M/started-3\" ]; }}; do sleep 0.1; i=$((i+1)); done; [ $i -lt {tenths} ] || touch \"$M/alone-$N\" ;;\n\
         esac\ncase \"$N\" in\n\
         1|2) if grep -q '<<<<<<<' a.txt; then printf 'one\\nONE\\nTWO\\nthree\\n' > a.txt; echo \"$PROMPT\" > \"$M/sent-back-$N\"; \
         elif [ \"$N\" = 1 ]; then sed -i 's/^two$/ONE/' a.txt; else sed -i 's/^two$/TWO/' a.txt; fi ;;\n\
         3) : ;;"
        ),
    );
    let run = run_command(
        driver(
            &env,
            &bin,
            &["--backlog", "BACKLOG.md", "--parallel", "3", "--max-iterations", "2", "--json"],
        ),
        b"",
    );
    let all = events(&run.stdout);
    assert_eq!(run.code, 1, "a task did not land, so the run fails\n{}{}", run.stdout, run.stderr);
    for n in 1..=3 {
        assert!(
            !marks(&env).join(format!("alone-{n}")).exists(),
            "task {n} never ran beside the others\n{}{}",
            run.stdout,
            run.stderr
        );
    }
    let started = named(&all, "backlog_started");
    assert_eq!(started[0]["parallel"], 3);
    let titles: Vec<&str> =
        started[0]["tasks"].as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Say ONE", "Say TWO", "Never"]);
    let id = started[0]["run"].as_str().unwrap().to_string();

    let end = finished(&all);
    let mut landed: Vec<u64> =
        end["landed"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    landed.sort_unstable();
    assert_eq!(landed, [1, 2], "{}", run.stdout);
    assert_eq!(end["not_landed"][0]["task"], 3);
    assert_eq!(end["not_landed"][0]["reason"], "cap_reached");

    let sent = named(&all, "sent_back");
    assert_eq!(sent.len(), 1, "{}", run.stdout);
    assert_eq!((&sent[0]["why"], &sent[0]["try"]), (&Value::from("conflict"), &Value::from(1)));
    let second = sent[0]["task"].as_u64().unwrap();
    let prompt = std::fs::read_to_string(marks(&env).join(format!("sent-back-{second}"))).unwrap();
    assert!(prompt.contains("conflicts with tasks landed meanwhile, in a.txt"), "{prompt}");
    assert!(prompt.contains("CONFLICT"), "git's words reach the agent: {prompt}");
    assert_eq!(named(&all, "queued").len(), 3, "two first passes and one after the conflict");
    let never: Vec<(u64, &str)> = named(&all, "task_iteration")
        .iter()
        .filter(|e| e["task"] == 3)
        .map(|e| (e["iteration"].as_u64().unwrap(), e["check"].as_str().unwrap()))
        .collect();
    assert_eq!(never, [(1, "failed"), (2, "failed")], "each judged iteration is said once");
    let orders: Vec<&Value> = named(&all, "landed").iter().map(|e| &e["order"]).collect();
    assert_eq!(orders, [&Value::from(1), &Value::from(2)]);

    let head = format!("refs/for-loop/backlog/{id}/integration");
    assert_eq!(git(&env.project, &["show", &format!("{head}:a.txt")]), "one\nONE\nTWO\nthree\n");
    assert_eq!(
        std::fs::read_to_string(env.project.join("a.txt")).unwrap(),
        "one\ntwo\nthree\n",
        "applied unasked"
    );
    assert!(git(&env.project, &["for-each-ref", "refs/for-loop/backlog"]).contains(&format!("{id}/tasks/3")));

    let applied = env.run(&["run", "--apply", &id], b"");
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    assert!(
        applied.stdout.contains("`sh checks/one.sh`") && applied.stdout.contains("`sh checks/two.sh`"),
        "{}",
        applied.stdout
    );
    assert!(applied.stdout.contains("task 3 (Never) did not land (cap_reached)"), "{}", applied.stdout);
    assert_eq!(std::fs::read_to_string(env.project.join("a.txt")).unwrap(), "one\nONE\nTWO\nthree\n");
    assert_eq!(git(&env.project, &["status", "--porcelain"]), " M a.txt\n", "nothing staged");
}

/// A task whose change breaks an earlier task's check on the merged tree is sent back with the
/// failing output and the numbers of the broken checks; the integration ref never holds the
/// broken merge, and the task lands once its agent mends it.
#[test]
fn a_task_breaking_an_earlier_tasks_check_is_sent_back_and_never_merged_broken() {
    let env = project(
        "- [ ] Say ONE\n  verify: sh checks/whole.sh\n\
         - [ ] Add three\n  verify: test -f three.txt\n",
    );
    let bin = agent(
        &env,
        "1) sed -i 's/^two$/ONE/' a.txt ;;\n\
         2) touch three.txt; if grep -q ONE a.txt; then rm -f broken.txt; echo \"$PROMPT\" > \"$M/told\"; else touch broken.txt; fi ;;",
    );
    let run =
        run_command(driver(&env, &bin, &["--backlog", "BACKLOG.md", "--max-iterations", "3", "--json"]), b"");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let all = events(&run.stdout);
    let sent = named(&all, "sent_back");
    assert_eq!(sent.len(), 1, "{}", run.stdout);
    assert_eq!(sent[0]["task"], 2);
    assert_eq!(sent[0]["why"], "check_failed");
    assert_eq!(sent[0]["failing"], serde_json::json!([1]));
    let said: Vec<(u64, &str)> = named(&all, "task_iteration")
        .iter()
        .filter(|e| e["task"] == 2)
        .map(|e| (e["iteration"].as_u64().unwrap(), e["check"].as_str().unwrap()))
        .collect();
    assert_eq!(said, [(1, "passed"), (2, "passed")], "the iteration after the send-back is said too");
    let told = std::fs::read_to_string(marks(&env).join("told")).unwrap();
    assert!(told.contains("task 1's check failed on the merged tree"), "{told}");
    assert_eq!(finished(&all)["landed"], serde_json::json!([1, 2]));
    let id = named(&all, "backlog_started")[0]["run"].as_str().unwrap().to_string();
    for commit in integration_commits(&env, &id) {
        let files = git(&env.project, &["ls-tree", "--name-only", &commit]);
        assert!(!files.contains("broken.txt"), "the integration ref held a broken merge: {commit}");
    }

    // The integration ref moved by hand: --apply refuses it, and --resume puts it back.
    let integration = format!("refs/for-loop/backlog/{id}/integration");
    let landed = git(&env.project, &["rev-parse", &integration]);
    git(&env.project, &["update-ref", &integration, "HEAD"]);
    let refused = env.run(&["run", "--apply", &id], b"");
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(refused.stdout.contains("moved outside the queue, so nothing is applied"), "{}", refused.stdout);
    let resumed = run_command(driver(&env, &bin, &["--resume", &id, "--json"]), b"");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(named(&events(&resumed.stdout), "integration_restored").len(), 1, "{}", resumed.stdout);
    assert_eq!(git(&env.project, &["rev-parse", &integration]), landed);

    // The checks run in a clean copy of the integration head, not in the user's tree: a file of
    // the user's own that a check would trip on does not stop the apply, and nothing a check
    // leaves behind lands in the user's tree.
    env.write("broken.txt", "");
    let applied = env.run(&["run", "--apply", &id], b"");
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    assert!(applied.stdout.contains("pass in a clean copy of"), "{}", applied.stdout);
    assert!(env.project.join("three.txt").is_file());
    assert_eq!(
        git(&env.project, &["status", "--porcelain", "--ignored"]),
        " M a.txt\n?? broken.txt\n?? three.txt\n",
        "the tree holds the change and the user's own file, nothing else"
    );
}

/// A task whose test file ends the runner at 0 when it is loaded (as a test module calling
/// `os._exit(0)` at import does) passes its own check, which runs no tests, but not the merge
/// queue's `--verify`, which runs them: on the merged tree the runner prints no summary where the
/// integration ran one test, so the merge does not count and the task is sent back with why; it
/// lands once its agent takes the file out.
#[test]
fn a_test_file_that_exits_at_import_does_not_land_and_the_task_is_told_why() {
    let env = project("- [ ] Say ONE\n  verify: sh checks/one.sh\n");
    env.write(
        "run_tests.sh",
        "echo '============================= test session starts =============================='\n\
         n=0; for t in tests/test_*.sh; do . \"./$t\"; n=$((n+1)); done\n\
         grep -q ONE a.txt || { echo \"=== 1 failed, $((n-1)) passed in 0.01s ===\"; exit 1; }\n\
         echo \"============================== $n passed in 0.01s ==============================\"\n",
    );
    env.write("tests/test_a.sh", "true\n");
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "tests"]);
    let bin = agent(
        &env,
        "1) sed -i 's/^two$/ONE/' a.txt; if printf '%s' \"$PROMPT\" | grep -q 'does not count'; then \
         rm -f tests/test_zz.sh; echo \"$PROMPT\" > \"$M/told\"; else echo 'exit 0' > tests/test_zz.sh; fi ;;",
    );
    let args = ["--backlog", "BACKLOG.md", "--verify", "sh run_tests.sh", "--max-iterations", "3", "--json"];
    let run = run_command(driver(&env, &bin, &args), b"");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let all = events(&run.stdout);
    let sent = named(&all, "sent_back");
    assert_eq!(sent.len(), 1, "{}", run.stdout);
    assert_eq!(
        (&sent[0]["why"], &sent[0]["failing"]),
        (&"check_failed".into(), &serde_json::json!(["verify"]))
    );
    let told = std::fs::read_to_string(marks(&env).join("told")).unwrap();
    assert!(told.contains("no summary this time, 1 ran before"), "{told}");
    assert_eq!(finished(&all)["landed"], serde_json::json!([1]));
    let id = named(&all, "backlog_started")[0]["run"].as_str().unwrap().to_string();
    for commit in integration_commits(&env, &id) {
        let files = git(&env.project, &["ls-tree", "-r", "--name-only", &commit]);
        assert!(!files.contains("test_zz"), "the integration ref held the hiding test: {commit}");
    }
}

/// `--max-merge-tries 1`: a task that conflicts once parks `merge_failed`, its branch kept; the
/// plain summary names it and what to do next.
#[test]
fn max_merge_tries_parks_a_task_that_keeps_failing_to_merge() {
    let env =
        project("- [ ] Say ONE\n  verify: sh checks/one.sh\n- [ ] Say TWO\n  verify: sh checks/two.sh\n");
    let bin = agent(
        &env,
        "1) sed -i 's/^two$/ONE/' a.txt ;;\n\
         2) if grep -q '<<<<<<<' a.txt; then [ -e \"$M/resolve\" ] && printf 'one\\nONE\\nTWO\\nthree\\n' > a.txt; \
         else sed -i 's/^two$/TWO/' a.txt; fi ;;",
    );
    let run = run_command(driver(&env, &bin, &["--backlog", "BACKLOG.md", "--max-merge-tries", "1"]), b"");
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("1 of 2 tasks landed"), "{}", run.stdout);
    assert!(run.stdout.contains("task 2 did not land (merge_failed)"), "{}", run.stdout);
    assert!(run.stdout.contains("loop-hook run --resume"), "{}", run.stdout);
    assert!(run.stderr.contains("task 2 parked (merge_failed)"), "{}", run.stderr);
    let loops = std::fs::read_dir(env.store().join("sessions")).unwrap().count();
    assert_eq!(loops, 2);
    let id = run.stdout.split("backlog run ").nth(1).unwrap().split(':').next().unwrap().to_string();
    assert_eq!(
        env.ledger_reasons(&format!("backlog-{id}-2")).last().map(String::as_str),
        Some("merge_failed")
    );
    assert!(git(&env.project, &["for-each-ref", "refs/for-loop/backlog"]).contains(&format!("{id}/tasks/2")));

    // `status --all` lists the run, where each task is, and the landing order.
    let status = env.run(&["status", "--all"], b"");
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    assert!(
        status.stdout.contains(&format!("{id}  BACKLOG.md  1 of 2 landed (in order: 1)")),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("task 2  parked (merge_failed)"), "{}", status.stdout);
    assert!(
        status.stdout.contains(&format!("backlog-{id}-2")),
        "the task's loop is listed: {}",
        status.stdout
    );
    let listed: Value = serde_json::from_str(&env.run(&["status", "--all", "--json"], b"").stdout).unwrap();
    assert_eq!(listed["backlogs"][0]["landed"], serde_json::json!([1]));
    assert_eq!(listed["backlogs"][0]["tasks"][1]["stage"]["reason"], "merge_failed");
    assert_eq!(listed["backlogs"][0]["tasks"][1]["merge_tries"], 1);

    // The report on a task's loop shows the whole backlog: each task and the landing order.
    let out = env.home.join("report.html");
    let report =
        env.run(&["report", "--session", &format!("backlog-{id}-2"), "--out", out.to_str().unwrap()], b"");
    assert_eq!(report.code, 0, "{}{}", report.stdout, report.stderr);
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("<section id=\"backlog\">"), "no backlog section");
    assert!(page.contains("1 of 2 tasks landed, in this order: task 1"), "{page}");
    assert!(page.contains("<td>parked (merge_failed)</td>"), "{page}");
    assert!(page.contains("<tr class=\"this\"><td class=\"num\">2</td><td>Say TWO</td>"), "{page}");

    // Resumed, the parked task goes on from the conflict in its work tree, told why, and lands.
    std::fs::write(marks(&env).join("resolve"), "").unwrap();
    let resumed = run_command(driver(&env, &bin, &["--resume", &id]), b"");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert!(
        resumed.stdout.contains("2 of 2 tasks landed")
            && resumed.stdout.contains("(in this order: task 1, task 2)"),
        "{}",
        resumed.stdout
    );
    let integration = format!("refs/for-loop/backlog/{id}/integration");
    assert_eq!(git(&env.project, &["show", &format!("{integration}:a.txt")]), "one\nONE\nTWO\nthree\n");
}

/// Ctrl-C parks every task and leaves their work trees; `run --resume RUN` goes on with them and
/// the queue, and every task lands.
#[test]
fn ctrl_c_parks_every_task_and_resume_lands_them() {
    let env = project("- [ ] Add b\n  verify: test -f b.txt\n- [ ] Add c\n  verify: test -f c.txt\n");
    let bin = agent(
        &env,
        "*) touch \"$M/started-$N\"; i=0; while [ ! -e \"$M/go\" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
         [ -e \"$M/go\" ] && touch \"$(echo b c | cut -d' ' -f$N).txt\" ;;",
    );
    let mut cmd = driver(&env, &bin, &["--backlog", "BACKLOG.md", "--parallel", "2", "--json"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for(&marks(&env).join("started-1"));
    wait_for(&marks(&env).join("started-2"));
    interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let all = events(&stdout);
    let end = finished(&all);
    assert_eq!(end["landed"], serde_json::json!([]), "{stdout}");
    assert_eq!(end["interrupted"], true);
    let id = end["run"].as_str().unwrap().to_string();
    let trees = env.store().join("backlog").join(&id).join("tasks");
    assert!(trees.join("1/.git").is_file() && trees.join("2/.git").is_file(), "the work trees were removed");

    std::fs::write(marks(&env).join("go"), "").unwrap();
    let resumed = run_command(driver(&env, &bin, &["--resume", &id, "--json"]), b"");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let all = events(&resumed.stdout);
    let mut landed: Vec<u64> =
        finished(&all)["landed"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    landed.sort_unstable();
    assert_eq!(landed, [1, 2]);
    assert!(!trees.join("1").exists(), "a landed task's work tree is left");
}

/// A driver killed outright (SIGKILL) leaves the run saved: `run --resume RUN` finds its tasks
/// working, continues their loops and lands them.
#[test]
fn a_killed_driver_is_resumed() {
    let env = project("- [ ] Add b\n  verify: test -f b.txt\n");
    let bin = agent(
        &env,
        "1) touch \"$M/started\"; i=0; while [ ! -e \"$M/go\" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
         [ -e \"$M/go\" ] && touch b.txt ;;",
    );
    let mut cmd = driver(&env, &bin, &["--backlog", "BACKLOG.md", "--json"]);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    wait_for(&marks(&env).join("started"));
    child.kill().unwrap();
    child.wait().unwrap();
    // The orphaned agent ends with nothing done; the resumed run does the task.
    std::fs::write(marks(&env).join("go"), "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _ = std::fs::remove_file(marks(&env).join("started"));
    let id = only_run(&env);
    let resumed = run_command(driver(&env, &bin, &["--resume", "--json"]), b"");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(finished(&events(&resumed.stdout))["landed"], serde_json::json!([1]));
    assert_eq!(finished(&events(&resumed.stdout))["run"], id.as_str());
}

/// The backlog file changed while the run goes: said once, and the run goes on with the tasks as
/// read at start. A task's work tree deleted under it: that task parks, the other lands.
#[test]
fn a_changed_backlog_is_said_and_a_deleted_work_tree_parks_only_its_task() {
    let env = project("- [ ] Add b\n  verify: test -f b.txt\n- [ ] Add c\n  verify: test -f c.txt\n");
    let bin = agent(
        &env,
        "*) touch \"$M/started-$N\"; i=0; while [ ! -e \"$M/go\" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
         touch \"$(echo b c | cut -d' ' -f$N).txt\" ;;",
    );
    let mut cmd = driver(&env, &bin, &["--backlog", "BACKLOG.md", "--parallel", "2", "--json"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for(&marks(&env).join("started-1"));
    wait_for(&marks(&env).join("started-2"));
    env.write("BACKLOG.md", "- [ ] Something else\n  verify: false\n");
    let id = only_run(&env);
    std::fs::remove_dir_all(env.store().join("backlog").join(&id).join("tasks/1")).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    std::fs::write(marks(&env).join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let all = events(&stdout);
    assert_eq!(named(&all, "backlog_changed").len(), 1, "{stdout}");
    let end = finished(&all);
    assert_eq!(end["landed"], serde_json::json!([2]), "{stdout}");
    assert_eq!(end["not_landed"][0]["task"], 1);
    assert_eq!(end["not_landed"][0]["reason"], "worktree_gone");
    assert!(end["not_landed"][0]["what"].as_str().unwrap().contains("was deleted"), "{stdout}");
}

/// One task's agent hits a rate limit that resets in 2 s: the other task's next agent run waits
/// for the same reset instead of running into it.
#[test]
fn a_limit_one_agent_hits_holds_every_task_until_it_resets() {
    let env = project("- [ ] Add b\n  verify: test -f b.txt\n- [ ] Add c\n  verify: test -f c.txt\n");
    let bin = agent(
        &env,
        "1) if [ ! -e \"$M/limited\" ]; then date +%s.%N > \"$M/limited\"; \
         echo '{\"type\":\"result\",\"is_error\":true,\"api_error_status\":429,\"result\":\"rate limited, retry after 2 seconds\"}'; exit 1; fi; \
         touch b.txt ;;\n\
         2) if [ -e \"$M/runs-2\" ]; then touch c.txt; else i=0; \
         while [ ! -e \"$M/limited\" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; fi; \
         date +%s.%N >> \"$M/runs-2\" ;;",
    );
    let run = run_command(driver(&env, &bin, &["--backlog", "BACKLOG.md", "--parallel", "2", "--json"]), b"");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let seconds = |text: &str| text.trim().parse::<f64>().unwrap();
    let limited = seconds(&std::fs::read_to_string(marks(&env).join("limited")).unwrap());
    let runs = std::fs::read_to_string(marks(&env).join("runs-2")).unwrap();
    let second = runs.lines().nth(1).map(seconds).expect("task 2 ran once only");
    assert!(
        second >= limited + 1.5,
        "task 2 ran {:.2} s after task 1's limit, which resets after 2 s",
        second - limited
    );
    let waited = events(&run.stdout).into_iter().any(|e| {
        e["event"] == "limit"
            && e["attempt"] == 2
            && e["what"].as_str().unwrap_or("").contains("another agent")
    });
    assert!(waited, "{}", run.stdout);
}

/// A merge step that fails (git cannot write: a full disk) leaves the integration ref where it
/// was and parks the task with its passing work kept; `--resume` offers the kept commit to the
/// queue again, without running its agent again, and it lands.
#[test]
fn a_merge_that_fails_to_write_moves_nothing_and_resume_lands_the_kept_work() {
    let env = project("- [ ] Add b\n  verify: test -f b.txt\n");
    let bin = agent(&env, "1) echo run >> \"$M/runs\"; touch b.txt ;;");
    let real = String::from_utf8(Command::new("sh").args(["-c", "command -v git"]).output().unwrap().stdout)
        .unwrap();
    let full = marks(&env).join("disk-full");
    std::fs::write(
        bin.join("git"),
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = merge-tree ] && [ -e {full} ]; then \
             echo 'fatal: unable to write new object: No space left on device' >&2; exit 128; fi; done\nexec {real} \"$@\"\n",
            full = full.display(),
            real = real.trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(bin.join("git"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(&full, "").unwrap();
    let run = run_command(driver(&env, &bin, &["--backlog", "BACKLOG.md", "--json"]), b"");
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let all = events(&run.stdout);
    let end = finished(&all);
    assert_eq!(end["not_landed"][0]["reason"], "merge_fault", "{}", run.stdout);
    assert!(
        end["not_landed"][0]["what"].as_str().unwrap().contains("No space left on device"),
        "{}",
        run.stdout
    );
    let id = end["run"].as_str().unwrap().to_string();
    let integration = format!("refs/for-loop/backlog/{id}/integration");
    let base = git(&env.project, &["rev-parse", &format!("refs/for-loop/backlog/{id}/base")]);
    assert_eq!(
        git(&env.project, &["rev-parse", &integration]),
        base,
        "a failed merge moved the integration ref"
    );

    std::fs::remove_file(&full).unwrap();
    let resumed = run_command(driver(&env, &bin, &["--resume", &id, "--json"]), b"");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(finished(&events(&resumed.stdout))["landed"], serde_json::json!([1]));
    assert_eq!(std::fs::read_to_string(marks(&env).join("runs")).unwrap(), "run\n", "the agent ran again");
    assert_eq!(git(&env.project, &["show", &format!("{integration}:b.txt")]), "");
}

/// Each bad input is refused in one line that says what to change, and starts nothing.
#[test]
fn bad_backlogs_and_options_are_refused_in_one_line() {
    let env = project("- [ ] Add b\n  verify: test -f b.txt\n");
    env.write("EMPTY.md", "# nothing yet\n");
    env.write("TWICE.md", "- [ ] Add b\n  verify: true\n- [ ] add B\n  verify: true\n");
    env.write("UNCHECKED.md", "- [ ] Add b\n  verify: true\n- [ ] Add c\n");
    let bin = agent(&env, "*) touch \"$M/ran\" ;;");
    for (args, says) in [
        (&["--backlog", "EMPTY.md"][..], "has no stories"),
        (&["--backlog", "TWICE.md"], "two tasks titled `add B` (tasks 1 and 2)"),
        (&["--backlog", "UNCHECKED.md"], "story 2. Add c has no check"),
        (&["--backlog", "MISSING.md"], "cannot be read"),
        (&["--backlog", "BACKLOG.md", "--parallel", "0"], "give how many agents may work at once"),
        (&["--backlog", "BACKLOG.md", "--attempts", "2"], "leave out --attempts"),
        (&["--backlog", "BACKLOG.md", "fix it"], "leave out the task text"),
        (&["--backlog", "BACKLOG.md", "--parallel"], "--parallel N"),
        (&["t", "--verify", "true", "--max-merge-tries", "2"], "--max-merge-tries goes with --backlog"),
    ] {
        let run = run_command(driver(&env, &bin, args), b"");
        assert_ne!(run.code, 0, "{args:?}");
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(said.lines().next().unwrap().contains(says), "not said on its first line: {args:?}: {said}");
    }
    assert!(!marks(&env).join("ran").exists(), "a refused backlog started an agent");
    assert!(
        !env.store().join("backlog").exists()
            || std::fs::read_dir(env.store().join("backlog")).unwrap().count() == 0
    );
}

/// The one backlog run in the store.
fn only_run(env: &TestEnv) -> String {
    let started = Instant::now();
    loop {
        if let Some(entry) = std::fs::read_dir(env.store().join("backlog")).ok().and_then(|mut d| d.next()) {
            return entry.unwrap().file_name().to_string_lossy().into_owned();
        }
        assert!(started.elapsed() < PATIENCE, "no backlog run appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn interrupt(pid: u32) {
    let ok = Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap().success();
    assert!(ok, "kill -INT {pid}");
}
