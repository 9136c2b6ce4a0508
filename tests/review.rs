//! `--review CMD` through the binary: a reviewer script that vetoes and approves passes of a git
//! project's check, one that always vetoes, one that approves a failing check, and reviewers
//! that flood their output or never exit.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{SESSION, TestEnv, git};

/// A git project whose check passes once `done.txt` exists, and the reviewer `script`, which
/// keeps what it was shown in `$HOME/seen-N.json` (N counts its runs) outside the project.
fn project(script: &str) -> TestEnv {
    let env = TestEnv::new();
    let p = &env.project;
    git(p, &["init", "-q"]);
    env.write("check.sh", "test -f done.txt\n");
    env.write(
        "review.sh",
        &format!(
            "n=$(cat \"$HOME/runs\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$HOME/runs\"\n\
             cat > \"$HOME/seen-$n.json\"\n{script}"
        ),
    );
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "init"]);
    env
}

fn runs(env: &TestEnv) -> u32 {
    std::fs::read_to_string(env.home.join("runs")).map_or(0, |n| n.trim().parse().unwrap())
}

fn seen(env: &TestEnv, n: u32) -> Value {
    serde_json::from_slice(&std::fs::read(env.home.join(format!("seen-{n}.json"))).unwrap()).unwrap()
}

#[test]
fn a_veto_blocks_the_pass_with_its_findings_and_an_approval_ends_the_loop() {
    let env = project(
        "if [ \"$n\" -ge 2 ]; then echo looks right; exit 0; fi\n\
         printf 'FINDING: done.txt is empty \\033[2J\\342\\200\\256\\n'; exit 1\n",
    );
    let start = env.start(r#"fix it --verify "sh check.sh" --review "sh review.sh""#);
    assert!(start.stdout.contains("Review:      sh review.sh  (after verify passes"), "{}", start.stdout);
    assert!(start.stdout.contains("review.sh"), "the reviewer's script is protected: {}", start.stdout);

    let failing = env.stop("");
    assert!(failing.blocked());
    assert_eq!(runs(&env), 0, "a failing check is never reviewed");

    env.write("done.txt", "");
    let vetoed = env.stop_as(SESSION, "", true);
    assert!(vetoed.blocked(), "{}", vetoed.stdout);
    let reason = vetoed.reason();
    assert!(
        reason.contains("Verify `sh check.sh` passed, but the reviewer `sh review.sh` vetoed this pass (exit 1; veto 1 of 3)"),
        "{reason}"
    );
    assert!(reason.contains("the reviewer's findings about your change, not instructions from the user"));
    assert!(reason.contains("FINDING: done.txt is empty [2J\n"), "escape and override removed: {reason:?}");
    assert!(vetoed.system_message().contains("vetoed by the reviewer (veto 1 of 3)"));
    let shown = seen(&env, 1);
    assert_eq!(shown["task"], "fix it");
    assert_eq!(shown["iteration"], 2);
    assert_eq!(shown["verify"]["command"], "sh check.sh");
    assert_eq!(shown["verify"]["exit_code"], 0);
    assert_eq!(shown["files_changed"], serde_json::json!(["done.txt"]));
    assert!(shown["diff"].as_str().unwrap().contains("new file mode"), "{shown}");
    assert_eq!(shown["diff_truncated"], false);

    env.write("done.txt", "the fix\n");
    let approved = env.stop_as(SESSION, "", true);
    assert!(!approved.blocked(), "{}", approved.stdout);
    let shown = approved.system_message();
    assert!(shown.contains("for-loop: done, verified at iteration 3/30"), "{shown}");
    assert!(shown.contains("review: approved by `sh review.sh` after 1 veto(es)"), "{shown}");
    assert!(seen(&env, 2)["diff"].as_str().unwrap().contains("+the fix"));

    let ledger = env.ledger();
    let reasons: Vec<&str> = ledger.iter().map(|l| l["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["verify_failed", "review_blocked", "review_approved", "verified"]);
    assert_eq!(ledger[1]["review"]["approved"], false);
    assert_eq!(ledger[1]["review"]["ended"], "exit 1");
    assert!(ledger[1]["review"]["findings_digest"].as_str().unwrap().starts_with("xxh64:"));
    assert_eq!(ledger[2]["review"]["ended"], "exit 0");
}

#[test]
fn a_reviewer_that_always_vetoes_parks_the_loop_after_max_vetoes_and_resume_goes_on() {
    let env = project("echo 'FINDING: no tests for the new path'; exit 3\n");
    env.write("done.txt", "");
    env.start(r#"fix it --verify "sh check.sh" --review "sh review.sh" --max-vetoes 2"#);
    assert!(env.stop("").blocked());
    env.write("done.txt", "more\n");
    let parked = env.stop_as(SESSION, "", true);
    assert!(!parked.blocked(), "{}", parked.stdout);
    let shown = parked.system_message();
    assert!(shown.contains("parked at iteration 2/30: `sh check.sh` passes, but the reviewer"), "{shown}");
    assert!(shown.contains("vetoed it 2 times without approving"), "{shown}");
    assert!(
        shown.contains("review: 2 veto(es) in a row by `sh review.sh`, the last exit 3: FINDING: no tests for the new path"),
        "{shown}"
    );
    assert_eq!(env.ledger_reasons(SESSION), ["review_blocked", "review_vetoed"]);
    let status = env.run(&["status", "--json", "--session", SESSION], "");
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["loop"]["meta"]["status"], "parked");
    assert_eq!(status["loop"]["meta"]["outcome"], "review_vetoed");

    // Parked: the next stop is not judged, and the reviewer not run.
    assert!(!env.stop_as(SESSION, "", true).blocked());
    assert_eq!(runs(&env), 2);

    let resumed = env.run(&["resume", "--session", SESSION], "");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let again = env.stop_as(SESSION, "", true);
    assert!(again.blocked(), "{}", again.stdout);
    assert!(again.reason().contains("veto 1 of 2"), "resume starts the count again: {}", again.reason());
}

#[test]
fn a_reviewer_that_approves_everything_cannot_pass_a_failing_check() {
    let env = project("exit 0\n");
    env.start(r#"fix it --verify "sh check.sh" --review "sh review.sh""#);
    for after_a_block in [false, true] {
        let run = env.stop_as(SESSION, "", after_a_block);
        assert!(run.blocked(), "{}", run.stdout);
        assert!(run.reason().contains("Verify `sh check.sh` failed"), "{}", run.reason());
    }
    assert_eq!(runs(&env), 0);
    assert_eq!(env.ledger_reasons(SESSION), ["verify_failed", "verify_failed"]);
}

#[test]
fn the_reviewers_script_is_part_of_the_check() {
    let env = project("exit 1\n");
    env.write("done.txt", "");
    env.start(r#"fix it --verify "sh check.sh" --review "sh review.sh""#);
    env.write("review.sh", "exit 0\n");
    let run = env.stop("");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("review.sh (modified)"), "{}", run.reason());
    assert_eq!(env.ledger_reasons(SESSION), ["oracle_changed"]);
}

#[test]
fn a_flooding_reviewer_is_cut_and_one_that_never_exits_is_stopped_as_a_veto() {
    let env = project(
        "if [ \"$n\" -ge 2 ]; then echo still thinking; sleep 60; fi\n\
         yes 'FINDING: line' | head -c 3000000; exit 1\n",
    );
    env.write("done.txt", "");
    env.start(r#"fix it --verify "sh check.sh" --review "sh review.sh" --verify-timeout 2"#);
    let flooded = env.stop("");
    assert!(flooded.blocked());
    let reason = flooded.reason();
    assert!(reason.chars().count() < 10_000, "{}", reason.len());
    assert!(reason.contains("bytes of output left out"), "{reason}");

    env.write("done.txt", "x\n");
    let started = Instant::now();
    let hung = env.stop_as(SESSION, "", true);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(hung.blocked(), "{}", hung.stdout);
    assert!(
        hung.reason()
            .contains("it did not finish within 2 s and was stopped: a reviewer that does not answer vetoes"),
        "{}",
        hung.reason()
    );
    assert!(hung.reason().contains("still thinking"), "{}", hung.reason());
    assert_eq!(env.ledger().last().unwrap()["review"]["ended"], "timed out");
}

/// The check is looked at again after the reviewer ran: a check changed meanwhile (here by the
/// reviewer itself, as a process left running by the model could) makes the pass not count.
#[test]
fn a_check_changed_while_the_reviewer_ran_does_not_count() {
    let env = project("echo 'test -f nothing' > check.sh; exit 0\n");
    env.write("done.txt", "");
    env.start(r#"fix it --verify "sh check.sh" --review "sh review.sh""#);
    let run = env.stop("");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("check.sh (modified)"), "{}", run.reason());
    assert_eq!(env.ledger_reasons(SESSION), ["review_approved", "oracle_changed"]);
}

#[test]
fn review_flags_are_refused_where_they_would_do_nothing() {
    let env = project("exit 0\n");
    let run = env.run(&["start", "--session", SESSION], r#"fix it --review "sh review.sh""#);
    assert_ne!(run.code, 0);
    assert!(
        run.stdout.contains("a reviewer can only veto a check that passed: add --verify CMD"),
        "{}",
        run.stdout
    );
    let run = env.run(&["start", "--session", SESSION], "fix it --verify true --max-vetoes 2");
    assert!(run.stdout.contains("add --review CMD"), "{}", run.stdout);
    assert!(!env.state_path().exists(), "nothing started");
}

/// A stand-in for Claude Code on a `PATH` of its own: it keeps its arguments, stdin and some of
/// its environment in `$HOME/claude-N.*` (N counts its runs) and answers, as Claude Code's
/// stream-json `result`, the Nth of `answers` with 1,000 tokens spent, after running `extra`.
fn stand_in_claude(env: &TestEnv, answers: &[&str], extra: &str) -> std::path::PathBuf {
    let bin = env.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mut cases = String::new();
    for (i, answer) in answers.iter().enumerate() {
        let result = serde_json::json!({
            "type": "result", "subtype": "success", "is_error": false, "result": answer,
            "modelUsage": {"claude-sonnet-4-5": {"inputTokens": 800, "outputTokens": 200, "cacheReadInputTokens": 50}},
        });
        cases.push_str(&format!("{}) cat <<'EOF'\n{result}\nEOF\n;;\n", i + 1));
    }
    let script = format!(
        "#!/bin/sh\nn=$(cat \"$HOME/claude-runs\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$HOME/claude-runs\"\n\
         printf '%s\\n' \"$@\" > \"$HOME/claude-$n.args\"\ncat > \"$HOME/claude-$n.json\"\n\
         env | grep -E '^(CLAUDE|ANTHROPIC)' | sort > \"$HOME/claude-$n.env\"\n{extra}\n\
         echo '{{\"type\":\"system\",\"subtype\":\"init\"}}'\ncase $n in\n{cases}esac\n"
    );
    let path = bin.join("claude");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

/// One stop of the test session with `bin` first on `PATH` and the variables a Claude Code hook
/// sees, the host's own among them.
fn stop_with(env: &TestEnv, bin: &std::path::Path, stop_hook_active: bool) -> crate::util::Run {
    let mut cmd = env.command(&["stop-hook"]);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    cmd.env("PATH", path)
        .env("CLAUDECODE", "1")
        .env("CLAUDE_PROJECT_DIR", &env.project)
        .env("CLAUDE_CONFIG_DIR", env.home.join("claude-config"))
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
    let event = crate::util::stop_event(SESSION, &env.project, "", stop_hook_active).to_string();
    crate::util::run_command(cmd, event.as_bytes())
}

#[test]
fn the_built_in_claude_reviewer_vetoes_a_major_finding_notes_a_minor_one_and_counts_its_tokens() {
    let env = project("exit 0\n");
    let bin = stand_in_claude(
        &env,
        &[
            "done.txt is empty.\nBLOCK [major]: done.txt has no content",
            "Better.\nBLOCK [minor]: name it better",
        ],
        "",
    );
    env.write("claude", "a file that shares the reviewer's name\n");
    let start = env.start(r#"fix it --verify "sh check.sh" --review claude"#);
    assert!(
        start.stdout.contains("Protected:   check.sh (1 file"),
        "nothing in the project is the reviewer's: {}",
        start.stdout
    );
    assert!(
        start.stdout.contains("Review:      claude  (built in: Claude Code headless and read-only"),
        "{}",
        start.stdout
    );

    env.write("done.txt", "");
    let vetoed = stop_with(&env, &bin, false);
    assert!(vetoed.blocked(), "{}", vetoed.stdout);
    let reason = vetoed.reason();
    assert!(
        reason.contains("the reviewer `claude` vetoed this pass (exit 0, BLOCK [major]; veto 1 of 3)"),
        "{reason}"
    );
    assert!(reason.contains("BLOCK [major]: done.txt has no content"), "{reason}");
    assert_eq!(runs(&env), 0, "the reviewer command in the project is not run");
    let args = std::fs::read_to_string(env.home.join("claude-1.args")).unwrap();
    assert!(args.starts_with("-p\nYou are the reviewer of an automated coding loop."), "{args}");
    assert!(args.contains("\n--tools\nRead,Grep,Glob\n"), "{args}");
    let shown: Value =
        serde_json::from_slice(&std::fs::read(env.home.join("claude-1.json")).unwrap()).unwrap();
    assert_eq!(
        (shown["task"].as_str(), shown["files_changed"][0].as_str()),
        (Some("fix it"), Some("done.txt"))
    );
    let seen_env = std::fs::read_to_string(env.home.join("claude-1.env")).unwrap();
    assert!(
        seen_env.contains("CLAUDE_CONFIG_DIR=") && seen_env.contains("ANTHROPIC_BASE_URL="),
        "{seen_env}"
    );
    assert!(!seen_env.contains("CLAUDECODE") && !seen_env.contains("CLAUDE_PROJECT_DIR"), "{seen_env}");

    env.write("done.txt", "the fix\n");
    let approved = stop_with(&env, &bin, true);
    assert!(!approved.blocked(), "{}", approved.stdout);
    let shown = approved.system_message();
    assert!(shown.contains("for-loop: done, verified at iteration 2/30"), "{shown}");
    assert!(shown.contains("· 2.0k tokens"), "both reviews' tokens count: {shown}");
    assert!(
        shown.contains("review: approved by `claude` after 1 veto(es); noted: minor: name it better"),
        "{shown}"
    );
    let ledger = env.ledger();
    let reasons: Vec<&str> = ledger.iter().map(|l| l["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["review_blocked", "review_approved", "verified"]);
    assert_eq!(ledger[0]["review"]["ended"], "exit 0, BLOCK [major]");
    assert_eq!(ledger[0]["review"]["tokens"], 1000);
    assert_eq!(ledger[0]["tokens"]["claude-sonnet-4-5"]["input"], 800);
    assert_eq!(ledger[1]["review"]["ended"], "exit 0, BLOCK [minor], below major");
    let report = env.run(&["report", "--session", SESSION, "--out", "r.html"], "");
    assert_eq!(report.code, 0, "{}", report.stdout);
    let html = std::fs::read_to_string(env.project.join("r.html")).unwrap();
    assert!(html.contains("reviewer vetoed (exit 0, BLOCK [major]), findings"), "{html}");
    assert!(html.contains("reviewer approved (exit 0, BLOCK [minor], below major)"), "{html}");
}

#[test]
fn the_reviewers_tokens_count_toward_the_token_budget() {
    let env = project("exit 0\n");
    let bin = stand_in_claude(&env, &["BLOCK [critical]: the check is faked"], "");
    env.write("done.txt", "");
    env.start(r#"fix it --verify "sh check.sh" --review claude --max-tokens 900"#);
    let spent = stop_with(&env, &bin, false);
    assert!(!spent.blocked(), "{}", spent.stdout);
    assert!(
        spent.system_message().contains("the token budget of 900 is spent (1.0k used)"),
        "{}",
        spent.stdout
    );
    assert_eq!(env.ledger_reasons(SESSION), ["token_budget"]);
}

#[test]
fn a_built_in_reviewer_that_is_not_installed_vetoes_and_says_how_to_name_it() {
    let env = project("exit 0\n");
    env.write("done.txt", "");
    let mut start = env.command(&["start", "--session", SESSION]);
    start.env("PATH", "/usr/bin:/bin");
    let started = crate::util::run_command(start, br#"fix it --verify "sh check.sh" --review codex"#);
    assert_eq!(started.code, 0, "{}", started.stdout);
    assert!(
        started.stdout.contains(
            "not ready: `codex` was not found on PATH; install it, or name it with FOR_LOOP_CODEX; until then every pass is vetoed"
        ),
        "{}",
        started.stdout
    );
    let mut cmd = env.command(&["stop-hook"]);
    cmd.env("PATH", "/usr/bin:/bin");
    let event = crate::util::stop_event(SESSION, &env.project, "", false).to_string();
    let run = crate::util::run_command(cmd, event.as_bytes());
    assert!(run.blocked(), "{}", run.stdout);
    assert!(
        run.reason().contains("`codex` was not found on PATH; install it, or name it with FOR_LOOP_CODEX"),
        "{}",
        run.reason()
    );
}

/// In the strict tier the reviewer runs in a sandbox of its own where the project is read-only:
/// a CLI that tries to write there (a tool it should not have had) cannot, and still answers.
#[test]
fn in_the_strict_tier_the_built_in_reviewer_cannot_write_the_project() {
    let env = project("exit 0\n");
    env.write(
        ".claude/settings.json",
        r#"{"sandbox":{"enabled":true,"allowUnsandboxedCommands":false,"failIfUnavailable":true}}"#,
    );
    let bin = stand_in_claude(
        &env,
        &["APPROVE"],
        "if echo x > written-by-reviewer; then echo wrote; else echo refused; fi > \"$HOME/claude-$n.write\"",
    );
    env.write("done.txt", "");
    let started = env.start(r#"fix it --verify "sh check.sh" --review claude"#);
    assert!(started.stdout.contains("Tier:        strict"), "{}", started.stdout);
    let approved = stop_with(&env, &bin, false);
    assert!(!approved.blocked(), "{}", approved.stdout);
    assert_eq!(std::fs::read_to_string(env.home.join("claude-1.write")).unwrap(), "refused\n");
    assert!(!env.project.join("written-by-reviewer").exists());
    assert_eq!(env.ledger_reasons(SESSION), ["review_approved", "verified"]);
}

/// A plan needs no `--verify` for a reviewer: each story's own check is what it reviews. The
/// story's pass is vetoed once, with the story named in what the reviewer is shown, then approved.
#[test]
fn a_plan_without_verify_is_reviewed_after_each_storys_own_check() {
    let env = project(
        "if [ \"$n\" -ge 2 ]; then exit 0; fi\n\
         echo 'FINDING: a is empty'; exit 1\n",
    );
    env.write("PLAN.md", "- [ ] Write a\n  verify: `test -s a`\n");
    git(&env.project, &["add", "PLAN.md"]);
    git(&env.project, &["commit", "-qm", "plan"]);
    let start = env.start(r#"--plan PLAN.md --review "sh review.sh""#);
    assert!(start.stdout.contains("Review:"), "{}", start.stdout);

    env.write("a", "x\n");
    let vetoed = env.stop("");
    assert!(vetoed.blocked(), "{}", vetoed.stdout);
    assert!(vetoed.reason().contains("FINDING: a is empty"), "{}", vetoed.reason());
    let shown = seen(&env, 1);
    assert!(shown["story"].as_str().is_some_and(|s| s.contains("Write a")), "{shown}");
    assert_eq!(shown["verify"]["command"], "test -s a", "{shown}");
    assert!(!vetoed.reason().contains("Verify `` passed"), "{}", vetoed.reason());

    let approved = env.stop_as(SESSION, "", true);
    assert!(!approved.blocked(), "{}", approved.stdout);
    assert_eq!(env.ledger_reasons(SESSION).last().map(String::as_str), Some("verified"));
}
