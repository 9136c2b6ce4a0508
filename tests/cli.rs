//! `loop-hook start`, `cancel`, `status`, `resume`, `rollback`, `--help` and `--version`, run as
//! the slash commands run them.

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
        ("\"   \" --verify true", "no task given"),
        ("\u{3000}\t", "no task given"),
        (
            "t --protect 'tests/{unit,e2e/**'",
            "is not a glob this engine can honour (unclosed alternate group",
        ),
        ("t --protect 'tests**'", "`**` must be a whole path component"),
        ("t --protect '!tests/**'", "an exclusion"),
        ("fix it --verify \"cargo test", "opens a quote that is never closed"),
    ] {
        let run = env.run(&["start", "--session", SESSION], text);
        assert_eq!(run.code, 1, "{text}: {}", run.stdout);
        assert!(run.stdout.contains(expected), "{text}: {}", run.stdout);
        assert!(run.stdout.contains("Usage: /for-loop TASK"), "{}", run.stdout);
        assert!(!env.state_path().exists(), "{text} left a state behind");
    }
}

/// A directory whose name is not UTF-8 cannot be kept in the state as text: start refuses and
/// says why, rather than report a loop whose state every stop then finds unreadable.
#[cfg(unix)]
#[test]
fn start_in_a_directory_whose_name_is_not_utf8_refuses_and_writes_nothing() {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    let odd = env.project.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&odd).unwrap();
    let mut inside = env.command(&["start", "--session", SESSION]);
    inside.current_dir(&odd);
    let mut with_flag = env.command(&["start", "--session", SESSION, "--cwd"]);
    with_flag.arg(&odd);
    for run in
        [crate::util::run_command(inside, b"t --verify true"), crate::util::run_command(with_flag, b"t")]
    {
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("has a name that is not UTF-8 text"), "{}", run.stdout);
        assert!(!run.stdout.contains("loop started"), "{}", run.stdout);
        assert!(!env.state_path().exists(), "a state was written: {:?}", std::fs::read(env.state_path()));
    }
}

/// Regression: `tests/{unit,e2e}/**` was accepted and protected nothing. A brace set is a glob
/// like any other now: its files are fingerprinted, and one added under it is a changed oracle.
#[test]
fn a_brace_set_in_protect_protects_its_files() {
    let env = TestEnv::new();
    for file in ["tests/unit/a.sh", "tests/e2e/b.sh", "tests/other/c.sh"] {
        std::fs::create_dir_all(env.project.join(file).parent().unwrap()).unwrap();
        env.write(file, "true\n");
    }
    // Test edits allowed: only the patterns protect, not the test suite's own defaults.
    let run =
        env.start("t --verify true --protect 'tests/{unit,e2e}/**' --protect docs/** --allow-test-edits");
    assert!(run.stdout.contains("Protected:   tests/e2e/b.sh, tests/unit/a.sh (2 files"), "{}", run.stdout);
    assert!(run.stdout.contains("--protect docs/** matches no file yet"), "{}", run.stdout);
    env.write("tests/unit/new.sh", "true\n");
    let stop = env.stop("done");
    assert!(stop.blocked(), "{}", stop.stdout);
    assert!(stop.reason().contains("tests/unit/new.sh (added)"), "{}", stop.reason());
}

#[test]
fn start_help_explains_the_flags() {
    let env = TestEnv::new();
    let run = env.run(&["start", "--session", SESSION], "--help");
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("--max-iterations N"), "{}", run.stdout);
    assert!(run.stdout.contains("re-injections. [default: 30]"), "{}", run.stdout);
    assert!(run.stdout.contains("--scope GLOB"), "every flag is listed: {}", run.stdout);
}

/// `loop-hook run --help` lists the loop flags exactly as `/for-loop --help` does: both print
/// the one table.
#[test]
fn run_help_lists_the_loop_flags_as_for_loop_help_does() {
    let env = TestEnv::new();
    let flags = |text: &str| -> Vec<String> {
        text.lines().filter(|line| line.starts_with("  --")).map(str::to_string).collect()
    };
    let for_loop = flags(&env.run(&["start", "--session", SESSION], "--help").stdout);
    let run = env.run(&["run", "--help"], "").stdout;
    let (_, loop_flags) =
        run.split_once("Loop flags, as in /for-loop:").expect("run --help lists the loop flags");
    assert!(for_loop.len() > 20, "{for_loop:?}");
    assert_eq!(flags(loop_flags), for_loop);
}

#[test]
fn start_without_a_session_id_refuses() {
    let env = TestEnv::new();
    let run = env.run(&["start"], "fix it");
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("no session id"), "{}", run.stdout);
}

#[test]
fn start_takes_the_session_from_the_environment() {
    let env = TestEnv::new();
    let mut cmd = env.command(&["start"]);
    cmd.env("FOR_LOOP_SESSION_ID", SESSION);
    let run = crate::util::run_command(cmd, b"fix it");
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(env.state_path().exists());
}

/// Claude Code and Codex carry out the user's commands in their prompt hook; the same commands
/// from inside the agent's shell (where the host's variables are set) can only be the agent's.
#[test]
fn loop_commands_from_the_agents_shell_are_refused_where_the_user_has_a_prompt_hook() {
    let env = TestEnv::new();
    let in_agent = |args: &[&str], var: &str, stdin: &str| {
        let mut cmd = env.command(args);
        cmd.env(var, SESSION);
        crate::util::run_command(cmd, stdin.as_bytes())
    };
    for (args, var) in [
        (&["start"][..], "CLAUDE_CODE_SESSION_ID"),
        (&["start", "--session", SESSION, "--host", "codex"], "CODEX_THREAD_ID"),
    ] {
        let run = in_agent(args, var, "take over --verify true");
        assert_eq!(run.code, 1, "{args:?}: {}", run.stdout);
        assert!(run.stdout.contains("only from the user's own prompt"), "{}", run.stdout);
        assert!(!env.state_path().exists());
    }
    env.start("t --verify false");
    for (args, stdin) in
        [(&["cancel", "--session", SESSION][..], ""), (&["rollback", "--session", SESSION], "1 --yes")]
    {
        let run = in_agent(args, "CLAUDECODE", stdin);
        assert!(run.stdout.contains("refused"), "{args:?}: {}", run.stdout);
    }
    assert!(std::fs::read_to_string(env.state_path()).unwrap().contains("status: active"));
    let ledger = env.ledger();
    assert_eq!(ledger.len(), 2, "{ledger:?}");
    for line in &ledger {
        assert_eq!(
            (line["reason"].as_str(), line["origin"].as_str()),
            (Some("agent_command_refused"), Some("agent"))
        );
    }
    // The user hears of it at the next stop, once, and the loop goes on.
    let stop = env.stop("done");
    assert!(stop.blocked(), "{}", stop.stdout);
    assert!(
        stop.system_message().starts_with(
            "for-loop: the agent tried to cancel this loop (refused; the loop goes on) at iteration 1."
        ),
        "{}",
        stop.stdout
    );
    assert!(
        stop.system_message().contains("the agent tried to roll back this loop (refused"),
        "{}",
        stop.stdout
    );
    assert!(!env.stop("done").system_message().contains("tried to"));
    // From a plain terminal it is carried out, recorded as such, and reported.
    let cancel = env.run(&["cancel", "--session", SESSION], "");
    assert!(cancel.stdout.contains("cancelled from a terminal outside the session"), "{}", cancel.stdout);
    assert_eq!(env.ledger().last().unwrap()["origin"], "terminal");
    let next = env.stop("done");
    assert!(next.system_message().contains("a command from a terminal outside the session cancelled this loop at iteration 3. If that was not you, it was the agent"), "{}", next.stdout);
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
    assert_eq!(json["loop"]["recent"][0]["reason"], "started");
    assert_eq!(json["loop"]["recent"][1]["reason"], "verify_failed");

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

#[test]
fn each_command_prints_its_own_help() {
    let env = TestEnv::new();
    for command in
        ["start", "stop-hook", "prompt-hook", "guard", "shown", "cancel", "resume", "rollback", "status"]
            .into_iter()
            .chain(["report", "doctor", "strict", "help"])
    {
        let run = env.run(&[command, "--help"], "");
        assert_eq!(run.code, 0, "{command}: {}", run.stdout);
        assert!(
            run.stdout.starts_with(&format!("Usage:\n  loop-hook {command}")),
            "{command}: {}",
            run.stdout
        );
        assert!(!run.stdout.contains("Exit codes:"), "{command}: the global help: {}", run.stdout);
    }
    let report = env.run(&["report", "--session", SESSION, "--help"], "").stdout;
    assert!(report.contains("--out FILE") && !report.contains("loop-hook status"), "{report}");
    assert_eq!(env.run(&["help", "report"], "").stdout, env.run(&["report", "-h"], "").stdout);
}

#[test]
fn a_misspelt_command_or_host_gets_the_nearest_name() {
    let env = TestEnv::new();
    for (args, expected) in [
        (&["reprot", "--session", SESSION][..], "unknown command `reprot`: did you mean report?"),
        (&["doctor", "--host", "claud"], "unknown host `claud`: did you mean claude-code?"),
        (&["status", "--host", "copilot-cl"], "unknown host `copilot-cl`: did you mean copilot-cli?"),
    ] {
        let run = env.run(args, "");
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        assert!(run.stdout.contains(expected), "{args:?}: {}", run.stdout);
    }
}

/// A command line's option read through the option table: a bad one is refused with exit 2 and
/// one line that says what to write, then the pointer to the usage; nothing is done.
#[test]
fn a_bad_option_on_a_command_line_is_refused_in_one_line() {
    let env = TestEnv::new();
    for (args, expected) in [
        (&["status", "--json=yes"][..], "loop-hook: --json takes no value: write just --json"),
        (
            &["strict", "--user", "--project"],
            "loop-hook: --project and --user each write elsewhere: give one",
        ),
        (&["report", "--session", SESSION, "--opn"], "did you mean --open?"),
        (&["cancel", "--session"], "missing argument for option '--session'"),
        (&["doctor", "--all"], "invalid option '--all'"),
    ] {
        let run = env.run(args, "");
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{args:?}: {}", run.stdout);
        assert!(lines[0].contains(expected), "{args:?}: {}", run.stdout);
        assert_eq!(lines[1], "Run `loop-hook --help` for usage.", "{args:?}");
    }
    for dir in [&env.home, &env.project] {
        assert!(!dir.join(".claude/settings.json").exists(), "a refused strict writes nothing");
    }
}

#[test]
fn resume_continues_a_parked_loop_with_fresh_streaks() {
    let env = TestEnv::new();
    env.start("t --verify false --max-same-failures 2");
    env.stop("a");
    let parked = env.stop("b");
    assert!(parked.system_message().contains("parked at iteration 2/30"), "{}", parked.stdout);
    assert!(!env.stop("c").blocked(), "a parked loop judges nothing");
    let run = env.run(&["resume", "--session", SESSION], "--more 5");
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.contains("resumed after same_failures, now at iteration 3 of 35"), "{}", run.stdout);
    assert!(run.stdout.contains("Task:\nt\n"), "{}", run.stdout);
    let next = env.stop("d");
    assert!(next.blocked(), "{}", next.stdout);
    // Resumed from a terminal rather than the user's prompt: said once, before the stop's line.
    let message = next.system_message();
    let (notice, line) = message.split_once('\n').unwrap();
    assert!(notice.contains("from a terminal outside the session resumed this loop"), "{message}");
    assert!(line.starts_with("for-loop 4/35 · verify failed (exit 1, "), "{}", next.stdout);
    let again = env.run(&["resume", "--session", SESSION], "");
    assert!(again.stdout.contains("already running"), "{}", again.stdout);
}

#[test]
fn resume_refuses_bad_options_and_finished_loops() {
    let env = TestEnv::new();
    let none = env.run(&["resume", "--session", SESSION], "");
    assert_eq!(none.code, 1);
    assert!(none.stdout.contains("no loop in this session"), "{}", none.stdout);
    env.start("t --verify true");
    env.stop("done");
    let done = env.run(&["resume", "--session", SESSION], "");
    assert!(done.stdout.contains("ended because it was done"), "{}", done.stdout);
    let bad = env.run(&["resume", "--session", SESSION, "--exit-zero"], "--more lots");
    assert_eq!(bad.code, 0, "--exit-zero");
    assert!(bad.stdout.contains("--more `lots` is not valid"), "{}", bad.stdout);
}

#[test]
fn resume_adds_iterations_to_a_loop_that_hit_its_cap() {
    let env = TestEnv::new();
    env.start("t --verify false --max-iterations 1");
    assert!(!env.stop("x").blocked());
    let run = env.run(&["resume", "--session", SESSION], "");
    assert!(run.stdout.contains("resumed after cap_reached, now at iteration 2 of 11"), "{}", run.stdout);
    assert!(env.stop("y").blocked());
}

#[test]
fn checkpoints_are_taken_each_iteration_and_rollback_restores_one_after_confirming() {
    let env = TestEnv::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(&env.project).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    env.write("code.txt", "v1\n");
    env.start("t --verify false --checkpoint");
    assert!(env.stop("1").blocked());
    env.write("code.txt", "v2\n");
    env.write("extra.txt", "new\n");
    assert!(env.stop("2").blocked());
    let status_before = git(&["status", "--porcelain"]);

    let list = env.run(&["rollback", "--session", SESSION], "");
    assert!(list.stdout.contains("refs/for-loop/"), "{}", list.stdout);
    let plan = env.run(&["rollback", "--session", SESSION], "1");
    assert!(plan.stdout.contains("would restore:\n    code.txt"), "{}", plan.stdout);
    assert!(plan.stdout.contains("would delete:\n    extra.txt"), "{}", plan.stdout);
    assert!(plan.stdout.contains("Nothing was changed"), "{}", plan.stdout);
    assert_eq!(std::fs::read_to_string(env.project.join("code.txt")).unwrap(), "v2\n");

    let done = env.run(&["rollback", "--session", SESSION], "1 --yes");
    assert_eq!(done.code, 0, "{}", done.stdout);
    assert_eq!(std::fs::read_to_string(env.project.join("code.txt")).unwrap(), "v1\n");
    assert!(!env.project.join("extra.txt").exists());
    assert_ne!(git(&["status", "--porcelain"]), status_before);
    assert_eq!(git(&["stash", "list"]), "", "the stash is untouched");
    let unknown = env.run(&["rollback", "--session", SESSION], "99");
    assert_eq!(unknown.code, 1);
}

#[test]
fn without_a_session_id_commands_act_on_the_one_loop_started_here() {
    let env = TestEnv::new();
    for session in ["first-session", "second-session"] {
        let run = env.run(&["start", "--session", session], "task --verify false");
        assert_eq!(run.code, 0, "{}", run.stdout);
    }
    let ambiguous = env.run(&["status"], "");
    assert_eq!(ambiguous.code, 1);
    assert!(ambiguous.stdout.contains("2 loops were started in"), "{}", ambiguous.stdout);
    assert!(ambiguous.stdout.contains("first-session") && ambiguous.stdout.contains("second-session"));
    // Nothing was cancelled while it was ambiguous.
    assert_eq!(env.run(&["cancel"], "").code, 1);

    assert_eq!(env.run(&["cancel", "--session", "first-session"], "").code, 0);
    let status = env.run(&["status", "--json"], "");
    let json: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(json["session_id"], "second-session", "{}", status.stdout);
    let cancelled = env.run(&["cancel"], "");
    assert!(cancelled.stdout.contains("The loop is over"), "{}", cancelled.stdout);

    let mut elsewhere = env.command(&["status"]);
    elsewhere.current_dir(&env.home);
    let run = crate::util::run_command(elsewhere, b"");
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("no loop that is not over was started in"), "{}", run.stdout);
}
