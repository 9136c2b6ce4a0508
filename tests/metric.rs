//! Metric mode end to end through the binary: a generated git project whose metric prints a
//! value read from a file, and scripted stops that improve it, worsen it and break the guard.

use std::path::Path;

use crate::util::{SESSION, TestEnv, git};

/// What the user's git state is: HEAD, the index, the stash, the branches.
fn users_git(dir: &Path) -> (String, String, String, String) {
    (
        git(dir, &["rev-parse", "HEAD"]),
        git(dir, &["ls-files", "-s"]),
        git(dir, &["stash", "list"]),
        git(dir, &["for-each-ref", "refs/heads"]),
    )
}

fn project() -> TestEnv {
    let env = TestEnv::new();
    let p = &env.project;
    git(p, &["init", "-q"]);
    env.write("bench.sh", "cat value.txt\n");
    env.write("guard.sh", "test ! -f broken\n");
    env.write("value.txt", "130\n");
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "init"]);
    env.write("staged.txt", "in the index only\n");
    git(p, &["add", "staged.txt"]);
    env.write("stashed.txt", "x\n");
    git(p, &["stash", "push", "-q", "-u", "--", "stashed.txt"]);
    env
}

fn read(env: &TestEnv, name: &str) -> Option<String> {
    std::fs::read_to_string(env.project.join(name)).ok()
}

#[test]
fn improvements_are_kept_and_worse_or_incorrect_changes_rolled_back_exactly() {
    let env = project();
    let before = users_git(&env.project);
    let start = env.start(r#"make it faster --metric "sh bench.sh" --target "<= 100" --guard "sh guard.sh""#);
    assert!(start.stdout.contains("Baseline:    130"), "{}", start.stdout);

    // 1. Better: kept, with the file it created.
    env.write("value.txt", "120\n");
    env.write("a.txt", "a\n");
    let run = env.stop("");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("kept: 130 → 120 (best so far)"), "{}", run.reason());
    assert_eq!(read(&env, "a.txt").as_deref(), Some("a\n"));

    // 2. Worse: discarded, the edit undone and the new file deleted.
    env.write("value.txt", "125\n");
    env.write("b.txt", "b\n");
    let run = env.stop_as(SESSION, "", true);
    assert!(
        run.reason().contains("discarded: 125 vs best 120 (noise ±0); your change was rolled back"),
        "{}",
        run.reason()
    );
    assert_eq!(read(&env, "value.txt").as_deref(), Some("120\n"));
    assert_eq!(read(&env, "b.txt"), None);
    assert_eq!(read(&env, "a.txt").as_deref(), Some("a\n"));

    // 3. Better but the guard fails: discarded.
    env.write("value.txt", "110\n");
    env.write("broken", "\n");
    let run = env.stop_as(SESSION, "", true);
    assert!(run.reason().contains("but the guard failed"), "{}", run.reason());
    assert!(run.reason().contains("Last attempts:"), "{}", run.reason());
    assert_eq!(read(&env, "value.txt").as_deref(), Some("120\n"));
    assert_eq!(read(&env, "broken"), None);
    let status = env.run(&["status", "--session", SESSION], "").stdout;
    assert!(status.contains("metric:     130 → 120 (baseline → best) · 1 kept · 2 discarded"), "{status}");

    // 4. Meets the target: kept, and the loop ends with baseline → best.
    env.write("value.txt", "95\n");
    let run = env.stop_as(SESSION, "", true);
    assert!(!run.blocked(), "{}", run.stdout);
    let shown = run.system_message();
    assert!(shown.contains("target <= 100 met"), "{shown}");
    assert!(shown.contains("metric: 130 → 95 (baseline → best) · 2 kept · 2 discarded"), "{shown}");
    assert_eq!(read(&env, "value.txt").as_deref(), Some("95\n"));

    let ledger = env.ledger();
    let reasons: Vec<&str> = ledger.iter().map(|l| l["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["metric_kept", "metric_kept", "metric_discarded", "metric_discarded", "target_met"]);
    let series: Vec<(f64, bool, f64)> = ledger
        .iter()
        .map(|l| {
            (
                l["metric"]["value"].as_f64().unwrap(),
                l["metric"]["kept"].as_bool().unwrap(),
                l["metric"]["best"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        series,
        [
            (130.0, true, 130.0),
            (120.0, true, 120.0),
            (125.0, false, 120.0),
            (110.0, false, 120.0),
            (95.0, true, 95.0)
        ]
    );
    assert_eq!(ledger[1]["metric"]["direction"], "min");
    assert_eq!(ledger[1]["metric"]["target"], 100.0);
    assert_eq!(users_git(&env.project), before, "the user's HEAD, index, stash and branches are untouched");

    // `status --json` carries the series a report plots.
    let status = env.run(&["status", "--json", "--session", crate::util::SESSION], "");
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let values: Vec<f64> = status["loop"]["metric_series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [130.0, 120.0, 125.0, 110.0, 95.0]);
    assert_eq!(status["loop"]["meta"]["metric"]["best_checkpoint"], 4);

    // A new metric loop here is shown what this one learnt.
    let start = env.start(r#"again --metric "sh bench.sh" --direction min"#);
    assert!(start.stdout.contains("Lessons from earlier metric loops here"), "{}", start.stdout);
    assert!(start.stdout.contains("discarded 125 (+5)"), "{}", start.stdout);
}

/// A metric loop keeps to `--max-tokens` like any other: once the transcript shows the budget
/// spent, the loop parks instead of measuring on.
#[test]
fn a_metric_loop_parks_when_its_token_budget_is_spent() {
    let env = project();
    let transcript = env.project.join("transcript.jsonl");
    env.start(r#"make it faster --metric "sh bench.sh" --target "<= 100" --max-tokens 1000"#);
    let reply = serde_json::json!({
        "type": "assistant", "uuid": "u-1", "sessionId": SESSION, "timestamp": jiff::Timestamp::now().to_string(),
        "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "faster"}], "stop_reason": null,
            "usage": {"input_tokens": 1_500, "output_tokens": 10,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}},
    });
    std::fs::write(&transcript, format!("{reply}\n")).unwrap();
    env.write("value.txt", "120\n");
    let run = env.stop("");
    assert!(!run.blocked(), "{}", run.stdout);
    assert!(run.system_message().contains("the token budget of 1.0k is spent"), "{}", run.system_message());
    assert_eq!(env.ledger_reasons(SESSION).last().map(String::as_str), Some("token_budget"));
}

#[test]
fn metric_mode_refuses_outside_git_and_without_a_number() {
    let env = TestEnv::new();
    env.write("bench.sh", "echo 5\n");
    let run = env.run(&["start", "--session", "s"], r#"x --metric "sh bench.sh" --target "< 3""#);
    assert_ne!(run.code, 0);
    assert!(
        run.stdout.contains("not in a git repository") || run.stderr.contains("not in a git repository"),
        "{}{}",
        run.stdout,
        run.stderr
    );

    let env = project();
    env.write("bench.sh", "echo none\n");
    git(&env.project, &["add", "bench.sh"]);
    let run = env.run(&["start", "--session", "s"], r#"x --metric "sh bench.sh" --target "< 3""#);
    assert_ne!(run.code, 0);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("the baseline could not be measured") && said.contains("printed no number"),
        "{said}"
    );
}

#[test]
fn a_metric_that_changes_its_own_definition_does_not_count() {
    let env = project();
    env.start(r#"faster --metric "sh bench.sh" --direction min"#);
    env.write("bench.sh", "echo 1\n");
    let run = env.stop("");
    assert!(run.blocked());
    assert!(run.reason().contains("does not count"), "{}", run.reason());
    assert_eq!(read(&env, "bench.sh").as_deref(), Some("cat value.txt\n"), "rolled back with the change");
    assert_eq!(env.ledger().last().unwrap()["metric"]["kept"], false);
}

/// The measurement is watched like verify: code under test that rewrites the metric's script
/// while it runs, and puts it back before it ends, leaves the check intact on disk but the
/// attempt does not count.
#[test]
fn a_metric_script_rewritten_while_it_runs_does_not_count() {
    let env = project();
    env.write("bench.sh", "sh prog.sh\n");
    env.write("prog.sh", "cat value.txt\n");
    git(&env.project, &["add", "bench.sh", "prog.sh"]);
    git(&env.project, &["commit", "-qm", "bench runs prog"]);
    env.start(r#"faster --metric "sh bench.sh" --direction min"#);
    env.write(
        "prog.sh",
        "cp bench.sh bench.keep\nprintf 'echo 1\\n' > bench.sh\ncp bench.keep bench.sh\nrm bench.keep\necho 50\n",
    );
    let run = env.stop("");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("does not count"), "{}", run.reason());
    assert_eq!(read(&env, "bench.sh").as_deref(), Some("sh prog.sh\n"), "the check is intact on disk");
    assert_eq!(env.ledger().last().unwrap()["metric"]["kept"], false);
}

/// Output that counts ends when the command ends: code under test that leaves a process behind
/// (in a session of its own, out of the command's process group) to print a better `METRIC`
/// line after the metric command exited is not measured by that line. Where the process is
/// killed at the exit (a PID namespace, a subreaper) the command's own figure is measured;
/// where output is read for a grace, the measurement fails and the stop says so.
#[test]
fn a_metric_line_printed_after_the_command_exited_is_not_counted() {
    let env = project();
    env.write(
        "bench.sh",
        // It waits until the process is out of its group, which its exit would otherwise kill.
        "cat value.txt\nif [ -f late ]; then m=$(mktemp -u)\n\
         setsid sh -c \"touch $m; sleep 0.6; echo METRIC ms=1\" &\n\
         while [ ! -e $m ]; do sleep 0.02; done; rm -f $m; fi\n",
    );
    git(&env.project, &["add", "bench.sh"]);
    git(&env.project, &["commit", "-qm", "bench may leave a process behind"]);
    env.start(r#"faster --metric "sh bench.sh" --target "<= 100""#);
    env.write("late", "\n");
    let run = env.stop("");
    assert!(run.blocked(), "the late line must not meet the target: {}", run.stdout);
    let reason = run.reason();
    let measured = env.ledger().last().unwrap()["metric"]["value"].as_f64();
    assert!(
        reason.contains("kept its output open after it exited") || measured == Some(130.0),
        "{reason} {measured:?}"
    );
    let reasons = env.ledger_reasons(SESSION);
    assert!(!reasons.iter().any(|r| r == "target_met"), "{reasons:?}");
}
