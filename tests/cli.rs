//! `loop-hook start`, `cancel`, `status`, `--help` and `--version`, run as the slash commands run
//! them.

use crate::util::{SESSION, TestEnv};

#[test]
fn start_prints_the_parsed_loop_and_writes_the_state() {
    let env = TestEnv::new();
    let run = env.start(r#""fix the login" --verify "cargo test -p core" --max-iterations 5"#);
    let out = env.redact(&run.stdout);
    assert!(out.contains("loop started, iteration 1 of 5"), "{out}");
    assert!(out.contains("Task:\nfix the login\n"), "{out}");
    assert!(
        out.contains(
            "Verify:      cargo test -p core  (runs at every stop in [PROJECT], killed after 300 s)"
        ),
        "{out}"
    );
    assert!(
        out.contains(&format!("State:       [HOME]/.local/state/for-loop/sessions/{SESSION}/state.md")),
        "{out}"
    );
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(state.ends_with("---\nfix the login"), "{state}");
    assert!(state.contains("max_iterations: 5"), "{state}");
}

#[test]
fn hostile_task_text_is_stored_byte_for_byte_and_nothing_runs() {
    let env = TestEnv::new();
    let pwned = env.project.join("pwned");
    let task = format!(
        "fix the user's \"login\"; $(touch {p}) `touch {p}` & echo ';'\n---\nüñí 100% <promise>x</promise>\r\nend",
        p = pwned.display()
    );
    env.start(&format!("{task} --verify true"));
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    assert!(state.ends_with(&format!("---\n{task}")), "{state}");
    assert!(!pwned.exists(), "task text was executed");
}

#[test]
fn start_refuses_bad_text_with_the_reason_and_usage() {
    let env = TestEnv::new();
    for (text, expected) in [
        (
            "fix it --max-iteration 3",
            "`--max-iteration` is not a for-loop flag: did you mean --max-iterations?",
        ),
        ("fix it --max-iterations abc", "--max-iterations `abc` is not valid"),
        ("fix it --verify", "--verify needs a value"),
        ("", "no task given"),
        ("fix it --verify \"cargo test", "opens a quote that is never closed"),
    ] {
        let run = env.run(&["start", "--session", SESSION], text);
        assert_eq!(run.code, 1, "{text}: {}", run.stdout);
        assert!(run.stdout.contains(expected), "{text}: {}", run.stdout);
        assert!(run.stdout.contains("Usage: /for-loop TASK"), "{}", run.stdout);
        assert!(!env.state_path().exists(), "{text} left a state behind");
    }
}

#[test]
fn start_help_explains_the_flags() {
    let env = TestEnv::new();
    let run = env.run(&["start", "--session", SESSION], "--help");
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("--max-iterations N"), "{}", run.stdout);
}

#[test]
fn start_without_a_session_id_refuses() {
    let env = TestEnv::new();
    let run = env.run(&["start"], "fix it");
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("no session id"), "{}", run.stdout);
}

#[test]
fn start_takes_the_session_from_the_host_environment() {
    let env = TestEnv::new();
    let mut cmd = env.command(&["start"]);
    cmd.env("CLAUDE_CODE_SESSION_ID", SESSION);
    let run = crate::util::run_command(cmd, b"fix it");
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(env.state_path().exists());
}

#[test]
fn a_second_loop_in_the_same_session_is_refused_until_the_first_ends() {
    let env = TestEnv::new();
    env.start("first --verify false");
    let run = env.run(&["start", "--session", SESSION], "second");
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("already has a loop"), "{}", run.stdout);
    env.run(&["cancel", "--session", SESSION], "");
    env.start("second --verify true");
    let archive = env.session_dir(SESSION).join("archive");
    assert_eq!(std::fs::read_dir(archive).unwrap().count(), 1);
}

#[test]
fn start_warns_when_the_verify_program_does_not_exist() {
    let env = TestEnv::new();
    let run = env.start("t --verify \"carg test\"");
    assert!(run.stdout.contains("`carg` was not found on PATH"), "{}", run.stdout);
    let run = env.run(&["start", "--session", "other"], "t --verify ./check.sh");
    assert!(run.stdout.contains("`./check.sh` does not exist"), "{}", run.stdout);
    let run = env.run(&["start", "--session", "third"], "t --verify \"sh -c true && ls\"");
    assert!(!run.stdout.contains("Warning"), "{}", run.stdout);
}

#[test]
fn start_without_any_criterion_says_it_runs_to_the_cap() {
    let env = TestEnv::new();
    let run = env.start("polish the docs --max-iterations 4");
    assert!(run.stdout.contains("the loop runs all 4 iterations"), "{}", run.stdout);
}

#[test]
fn cancel_ends_this_sessions_loop_only() {
    let env = TestEnv::new();
    env.start("mine --verify false");
    env.run(&["start", "--session", "other-session"], "theirs --verify false");
    let run = env.run(&["cancel", "--session", SESSION], "");
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("cancelled at iteration 1/30"), "{}", run.stdout);
    assert!(!env.stop("done").blocked(), "a cancelled loop still blocked");
    assert!(env.stop_as("other-session", "done", false).blocked(), "the other session's loop was touched");
    let ledger = env.ledger();
    assert_eq!(ledger.last().unwrap()["reason"], "cancelled");
    let again = env.run(&["cancel", "--session", SESSION], "");
    assert!(again.stdout.contains("already ended"), "{}", again.stdout);
}

#[test]
fn cancel_without_a_loop_says_so() {
    let env = TestEnv::new();
    let run = env.run(&["cancel", "--session", SESSION], "");
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("no loop in this session"), "{}", run.stdout);
}

#[test]
fn status_shows_progress_paths_and_recent_stops() {
    let env = TestEnv::new();
    let none = env.run(&["status", "--session", SESSION], "");
    assert!(none.stdout.contains("no loop in this session"), "{}", none.stdout);
    env.start("fix it --verify \"exit 3\" --max-iterations 9");
    env.stop("trying");
    let run = env.run(&["status", "--session", SESSION], "");
    let out = env.redact(&run.stdout);
    assert!(out.contains("is active, iteration 2 of 9"), "{out}");
    assert!(out.contains("last run:   exit 3"), "{out}");
    assert!(
        out.contains(&format!("ledger:     [HOME]/.local/state/for-loop/sessions/{SESSION}/ledger.jsonl")),
        "{out}"
    );
    assert!(out.contains("#1   block  verify_failed · exit 3"), "{out}");

    let json: serde_json::Value =
        serde_json::from_str(&env.run(&["status", "--session", SESSION, "--json"], "").stdout).unwrap();
    assert_eq!(json["loop"]["meta"]["iteration"], 2);
    assert_eq!(json["loop"]["task"], "fix it");
    assert_eq!(json["loop"]["recent"][0]["reason"], "verify_failed");

    let all = env.run(&["status", "--all"], "");
    assert!(all.stdout.contains("active  2/9"), "{}", all.stdout);
}

#[test]
fn help_version_and_usage_errors() {
    let env = TestEnv::new();
    let help = env.run(&["--help"], "");
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Exit codes:"), "{}", help.stdout);
    let version = env.run(&["--version"], "");
    assert_eq!(version.stdout.trim(), format!("loop-hook {}", env!("CARGO_PKG_VERSION")));
    let bad = env.run(&["frobnicate"], "");
    assert_eq!(bad.code, 2);
    assert!(bad.stdout.contains("unknown command `frobnicate`"), "{}", bad.stdout);
}
