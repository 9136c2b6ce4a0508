//! `loop-hook run` with a stand-in agent CLI (a shell script named `claude` first on PATH): the
//! driver's own behaviour, with no model involved. The real CLIs are driven in `e2e::run`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::TestEnv;

/// A `claude` on PATH that runs `body` (sh), in a directory of its own under the test's home.
pub(crate) fn fake_claude(env: &TestEnv, body: &str) -> std::path::PathBuf {
    let bin = env.home.join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join("claude");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

pub(crate) fn driver(env: &TestEnv, bin: &Path, args: &[&str]) -> Command {
    let mut cmd = env.command(&["run"]);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    cmd.args(args).env("PATH", path);
    cmd
}

/// Waits for `path` to appear, as long as a test may last ([`crate::util::PATIENCE`]).
pub(crate) fn wait_for(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < crate::util::PATIENCE, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{}", pid.trim())).exists()
        && !std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default().contains(") Z ")
}

/// The session id of the one run in the store.
fn only_run(env: &TestEnv) -> String {
    let session = std::fs::read_dir(env.store().join("sessions")).unwrap().next().unwrap().unwrap();
    session.file_name().to_string_lossy().into_owned()
}

/// `run --resume` with an agent that fixes the project (creates `fixed`); it must succeed.
fn resume_with_the_fix(env: &TestEnv) {
    let bin =
        fake_claude(env, "touch fixed; echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'");
    let mut resume = driver(env, &bin, &["--resume"]);
    resume.stdin(Stdio::null());
    let run = crate::util::run_command(resume, b"");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

/// Ctrl-C during an agent run ends it, kills what it left running, and parks the loop;
/// `run --resume` continues the same loop at the same iteration and it ends verified.
#[test]
fn ctrl_c_parks_the_run_and_resume_continues_it() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let pids = env.home.join("pids");
    let bin = fake_claude(
        &env,
        &format!("sleep 300 & echo $! > {p}.child; echo $$ > {p}; wait", p = pids.display()),
    );
    // Outside the sandbox: the pids the agent writes are the machine's, not a namespace's.
    let args = ["create fixed", "--verify", "sh check.sh", "--max-iterations", "3", "--no-sandbox"];
    let mut child = driver(&env, &bin, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&env.home.join("pids.child"));
    wait_for(&pids);
    let grandchild = std::fs::read_to_string(env.home.join("pids.child")).unwrap();
    assert!(alive(&grandchild));
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < crate::util::PATIENCE, "the driver did not stop after Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("parked") && stdout.contains("loop-hook run --resume"), "{stdout}");
    assert!(!alive(&grandchild), "the agent's background process outlived the driver");
    let session = only_run(&env);
    assert_eq!(env.ledger_reasons(&session), ["interrupted"]);

    resume_with_the_fix(&env);
    assert_eq!(env.ledger_reasons(&session), ["interrupted", "resumed", "verified"]);
    let last = env.ledger_of(&session).pop().unwrap();
    assert_eq!(last["iteration"], 1, "the interrupted iteration was counted");
}

/// An agent that fails three times in a row parks the loop; each failure is in the ledger.
#[test]
fn three_agent_failures_in_a_row_park_the_run() {
    let env = TestEnv::new();
    let bin = fake_claude(&env, "echo 'no credentials' >&2; exit 3");
    let run = crate::util::run_command(
        driver(&env, &bin, &["t", "--verify", "false", "--max-iterations", "9"]),
        b"",
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("parked at iteration 3"), "{}", run.stdout);
    let session = std::fs::read_dir(env.store().join("sessions")).unwrap().next().unwrap().unwrap();
    let reasons = env.ledger_reasons(&session.file_name().to_string_lossy());
    assert_eq!(
        reasons,
        ["agent_failed", "verify_failed", "agent_failed", "verify_failed", "agent_failed", "agent_failed"]
    );
}

/// `--json` prints one event per line, ending with the receipt.
#[test]
fn json_events_one_per_line() {
    let env = TestEnv::new();
    let bin = fake_claude(&env, "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'");
    let run = crate::util::run_command(driver(&env, &bin, &["t", "--verify", "true", "--json"]), b"");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let events: Vec<serde_json::Value> =
        run.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["sandbox", "iteration", "end"]);
    assert_eq!(events[2]["outcome"], "verified");
    assert!(events[2]["receipt"].is_object());
}

/// A `claude` that claims done at its first run and fixes the check at its second, each run
/// taking a little over a second (so a live status line has time to redraw).
fn claude_fixing_at_the_second_run(env: &TestEnv) -> std::path::PathBuf {
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let runs = env.home.join("runs");
    fake_claude(
        env,
        &format!(
            "n=$(cat {runs} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {runs}\n\
             [ $n -ge 2 ] && touch fixed\nsleep 1.2\n\
             echo '{{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}}'",
            runs = runs.display()
        ),
    )
}

/// With stderr not a terminal (a pipe, a log file, CI), the run prints plain lines: no status
/// line, no carriage returns or escape sequences on either stream.
#[test]
fn no_status_line_when_stderr_is_not_a_terminal() {
    let env = TestEnv::new();
    let bin = claude_fixing_at_the_second_run(&env);
    let run = crate::util::run_command(
        driver(&env, &bin, &["create fixed", "--verify", "sh check.sh", "--max-iterations", "3"]),
        b"",
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("for-loop: iteration 2/3: claude running"), "{}", run.stderr);
    for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(!text.contains(['\r', '\x1b']), "control characters on {name}: {text:?}");
    }
}

/// On a terminal the status line is drawn in place (cleared, then written, with no newline),
/// shows the iteration, the agent running and the last verify, and is cleared before every other
/// line and before the receipt.
#[test]
fn status_line_on_a_terminal_is_redrawn_in_place_and_cleared_before_other_output() {
    const CLEAR: &str = "\r\x1b[2K";
    let env = TestEnv::new();
    let bin = claude_fixing_at_the_second_run(&env);
    let quote = |word: &str| format!("'{}'", word.replace('\'', r"'\''"));
    let args = ["run", "create fixed", "--verify", "sh check.sh", "--max-iterations", "3"];
    let line: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_loop-hook")).chain(args).map(quote).collect();
    // util-linux `script` gives the command a terminal and copies what it writes to stdout.
    let mut cmd = Command::new("script");
    cmd.args(["-qefc", &line.join(" "), "/dev/null"])
        .env_clear()
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
        .env("HOME", &env.home)
        .current_dir(&env.project);
    let output = crate::util::run_bounded(cmd, "loop-hook run on a terminal", b"");
    let screen = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{screen:?}");
    assert!(screen.contains(&format!("{CLEAR}for-loop: iteration 1/3 · ")), "{screen:?}");
    assert!(screen.contains("claude running · no verify yet"), "{screen:?}");
    assert!(screen.contains("iteration 2/3 · ") && screen.contains("last verify exit 1"), "{screen:?}");
    // Every other line starts on a cleared line, never after the status line's text.
    for printed in ["for-loop: iteration 2/3: claude running", "for-loop: iteration 1: verify exit 1"] {
        let at = screen.find(printed).unwrap_or_else(|| panic!("no {printed:?} in {screen:?}"));
        assert!(screen[..at].ends_with(CLEAR), "{printed:?} was not printed on a cleared line: {screen:?}");
    }
    let receipt = screen.find("verified").unwrap_or_else(|| panic!("no receipt: {screen:?}"));
    let last_status = screen.rfind("· claude running").unwrap();
    assert!(last_status < receipt, "{screen:?}");
    assert!(
        screen[last_status..receipt].contains(CLEAR),
        "the line was not cleared before the receipt: {screen:?}"
    );
}

/// A run that reaches its cap says how to go on with `run --resume`, not with the host's
/// in-session command, and that command continues it.
#[test]
fn a_capped_run_says_how_to_resume_it() {
    let env = TestEnv::new();
    let bin = fake_claude(&env, "echo working");
    let run = crate::util::run_command(
        driver(&env, &bin, &["t", "--verify", "false", "--max-iterations", "1"]),
        b"",
    );
    assert_ne!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("go on: loop-hook run --resume run-"), "{said}");
    assert!(!said.contains("/for-loop:resume"), "{said}");
}

/// An agent whose final message is `<loop-abort>REASON</loop-abort>` parks the run with its
/// reason shown; the task text offering the tag does not count, and `--resume` continues.
#[test]
fn an_agent_that_aborts_parks_the_run_with_its_reason() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let bin = fake_claude(
        &env,
        "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"I cannot. <loop-abort>The fix needs the staging password.</loop-abort>\"}'",
    );
    let run = crate::util::run_command(
        driver(&env, &bin, &["make fixed, or say <loop-abort>why</loop-abort>", "--verify", "sh check.sh"]),
        b"",
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("for-loop: run aborted"), "{}", run.stdout);
    assert!(run.stdout.contains("the agent's reason: The fix needs the staging password."), "{}", run.stdout);
    let session = only_run(&env);
    assert_eq!(env.ledger_reasons(&session), ["aborted"]);

    resume_with_the_fix(&env);
    assert_eq!(env.ledger_reasons(&session), ["aborted", "resumed", "verified"]);
}

/// Options as a shell hands them over: `--name=value` works like `--name value` for run's own
/// options and the loop's flags, and `--agent-arg=--model=x` reaches the agent CLI as one
/// argument instead of joining the task.
#[test]
fn options_with_an_equals_sign_reach_the_agent_and_the_loop() {
    let env = TestEnv::new();
    let args_file = env.home.join("agent-args");
    let bin = fake_claude(
        &env,
        &format!(
            "printf '%s\\n' \"$@\" > {}\necho '{{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}}'",
            args_file.display()
        ),
    );
    let run = crate::util::run_command(
        driver(
            &env,
            &bin,
            &["fix it", "--agent-arg=--model=x", "--verify=test -d .", "--max-iterations=7", "--json"],
        ),
        b"",
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let agent_args = std::fs::read_to_string(&args_file).unwrap();
    assert!(agent_args.lines().any(|line| line == "--model=x"), "{agent_args}");
    let session = only_run(&env);
    let state = std::fs::read_to_string(env.session_dir(&session).join("state.md")).unwrap();
    assert!(state.ends_with("---\nfix it"), "the task is the positional text alone: {state}");
    assert!(state.contains("max_iterations: 7"), "{state}");
    assert!(state.contains("test -d ."), "{state}");
}

/// A mistyped option is refused before anything starts, naming the option it was meant to be;
/// it never becomes part of the task. One nothing resembles says how to pass it on instead.
#[test]
fn an_unknown_option_is_refused_with_the_nearest_one_and_nothing_runs() {
    let env = TestEnv::new();
    let ran = env.home.join("agent-ran");
    let bin = fake_claude(&env, &format!("touch {}", ran.display()));
    for (args, expected) in [
        (
            &["fix it", "--verify", "true", "--max-iteration", "3"][..],
            "`--max-iteration` is not an option of loop-hook run: did you mean --max-iterations?",
        ),
        (&["fix it", "--verify=true", "--agent-args=-m"], "did you mean --agent-arg?"),
        (&["fix it", "--verify", "true", "--model", "x"], "pass it with --agent-arg=--model"),
    ] {
        let run = crate::util::run_command(driver(&env, &bin, args), b"");
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(expected), "{args:?}: {}", run.stdout);
        assert!(!ran.exists(), "{args:?} started the agent");
        assert!(!env.store().join("sessions").exists(), "{args:?} started a loop");
    }
}

/// A loop flag's value is checked by `/for-loop`'s own rules before anything starts: a value
/// out of its limits or of the wrong kind refuses the run, saying why in `run`'s words.
#[test]
fn a_bad_loop_flag_value_is_refused_before_the_agent_runs() {
    let env = TestEnv::new();
    let ran = env.home.join("agent-ran");
    let bin = fake_claude(&env, &format!("touch {}", ran.display()));
    for (args, expected) in [
        (&["fix it", "--verify", "true", "--max-iterations", "0"][..], "--max-iterations `0` is not valid"),
        (&["fix it", "--verify=true", "--verify-timeout=2h"], "the most is 3600 seconds (1h)"),
        (&["fix it", "--verify", ""], "--verify needs a value: a command"),
        (&["\u{200b}", "--verify", "true"], "no task given"),
    ] {
        let run = crate::util::run_command(driver(&env, &bin, args), b"");
        assert_eq!(run.code, 1, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(expected), "{args:?}: {}", run.stdout);
        assert!(run.stdout.contains("Usage: loop-hook run TASK"), "{args:?}: {}", run.stdout);
        assert!(!ran.exists(), "{args:?} started the agent");
        assert!(!env.store().join("sessions").exists(), "{args:?} started a loop");
    }
}

/// Words after `--` are the task, however much they look like loop flags; the flags before it
/// still set the loop.
#[test]
fn flag_like_words_after_two_dashes_are_the_task() {
    let env = TestEnv::new();
    let bin = fake_claude(&env, "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'");
    let run = crate::util::run_command(
        driver(
            &env,
            &bin,
            &["--verify", "true", "--max-iterations=3", "--", "explain", "--max-iterations", "9"],
        ),
        b"",
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let session = only_run(&env);
    let state = std::fs::read_to_string(env.session_dir(&session).join("state.md")).unwrap();
    assert!(state.ends_with("---\nexplain --max-iterations 9"), "{state}");
    assert!(state.contains("max_iterations: 3"), "{state}");
}

/// The first line of a run that sandboxes its agent.
const SANDBOXED: &str = "for-loop: sandbox: bubblewrap";

/// In the sandbox (bubblewrap must be installed: `scripts/install-test-deps`), an agent that
/// rewrites the run's state to ended and verified, appends to its ledger, plants a git hook and
/// an fsmonitor in git's config, and kills the driver
/// (its parent, outside the sandbox) does none of it: the store is read-only, and the driver is
/// not in its PID namespace, where it cannot even be seen. The loop
/// goes on and ends at its cap, never verified; only the progress notes were writable.
#[test]
fn in_the_sandbox_the_agent_can_neither_edit_the_runs_state_nor_kill_the_driver() {
    let env = TestEnv::new();
    crate::util::git(&env.project, &["init", "-q"]);
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let config = std::fs::read_to_string(env.project.join(".git/config")).unwrap();
    let sessions = env.store().join("sessions");
    let bin = fake_claude(
        &env,
        &format!(
            "for dir in {s}/*; do\n\
               sed -i 's/^status: active/status: ended/; s/^iteration: .*/outcome: verified/' \"$dir/state.md\" \
                 && echo state-edited >> attack.log\n\
               echo '{{}}' >> \"$dir/ledger.jsonl\" && echo ledger-edited >> attack.log\n\
               echo note >> \"$dir/progress.md\" && echo notes-written >> attack.log\n\
             done\n\
             echo 'echo planted' > .git/hooks/pre-commit && echo hook-planted >> attack.log\n\
             git config core.fsmonitor ./planted && echo config-written >> attack.log\n\
             grep -l -- '--max-iteration[s]' /proc/[0-9]*/cmdline >/dev/null 2>&1 && echo driver-seen >> attack.log\n\
             [ \"$PPID\" -gt 1 ] && kill -KILL $PPID && echo driver-killed >> attack.log\n\
             echo '{{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}}'",
            s = sessions.display()
        ),
    );
    let run = crate::util::run_command(
        driver(&env, &bin, &["create fixed", "--verify", "sh check.sh", "--max-iterations", "2"]),
        b"",
    );
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(run.stderr.starts_with(SANDBOXED), "bubblewrap must be installed for this test: {said}");
    assert_eq!(run.code, 1, "{said}");
    assert!(run.stdout.contains("for-loop: run cap_reached"), "{said}");
    let attacks = std::fs::read_to_string(env.project.join("attack.log")).unwrap_or_default();
    assert_eq!(attacks, "notes-written\nnotes-written\n", "{said}");
    let session = only_run(&env);
    assert_eq!(env.ledger_reasons(&session), ["verify_failed", "cap_reached"], "{said}");
    assert!(!env.project.join(".git/hooks/pre-commit").exists());
    assert_eq!(std::fs::read_to_string(env.project.join(".git/config")).unwrap(), config);
}

/// A daemon the agent leaves behind (double-forked into a session of its own, out of the
/// agent's process group) that puts the fix in once the agent has exited, while the driver
/// judges, and takes it out again a moment later: in the sandbox it dies with the agent's run.
/// Whatever it managed to write as the run ended stays, so the tree verify judged is the tree
/// the run leaves: verified only if the fix is still there, and nothing of the daemon runs on.
#[test]
fn a_daemon_the_agent_leaves_dies_with_its_run() {
    let env = TestEnv::new();
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    let marker = format!("daemon-of-{}", env.project.display());
    let bin = fake_claude(
        &env,
        &format!(
            "agent=$$\n\
             setsid sh -c 'while kill -0 '$agent' 2>/dev/null; do sleep 0.02; done\n\
               echo fixed > fixed; sleep 1; rm -f fixed; sleep 30 # {marker}' >/dev/null 2>&1 < /dev/null &\n\
             echo '{{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}}'"
        ),
    );
    let run = crate::util::run_command(
        driver(&env, &bin, &["create fixed", "--verify", "sh check.sh", "--max-iterations", "1"]),
        b"",
    );
    let said = format!("{}{}", run.stdout, run.stderr);
    // Long enough for a daemon that survived to take the fix out again.
    std::thread::sleep(Duration::from_millis(1_500));
    let left = Command::new("pgrep").args(["-f", &marker]).output().unwrap();
    for pid in String::from_utf8_lossy(&left.stdout).lines() {
        Command::new("kill").args(["-KILL", pid]).status().unwrap();
    }
    assert!(run.stderr.starts_with(SANDBOXED), "bubblewrap must be installed for this test: {said}");
    assert!(left.stdout.is_empty(), "the agent's daemon outlived its run: {said}");
    let verified = run.stdout.contains("for-loop: run verified");
    assert_eq!(
        verified,
        env.project.join("fixed").exists(),
        "verify judged a tree the run did not leave: {said}"
    );
}

/// Where bubblewrap cannot start (here: not on PATH), the run says so in its first line and
/// goes on unsandboxed; `--require-strict` refuses instead and starts nothing; `--no-sandbox`
/// says the sandbox is off on purpose.
#[test]
fn without_bubblewrap_the_run_says_so_first_and_require_strict_refuses() {
    let env = TestEnv::new();
    let bin = fake_claude(&env, "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'");
    let only_agent = |args: &[&str]| {
        let mut cmd = driver(&env, &bin, args);
        cmd.env("PATH", &bin);
        crate::util::run_command(cmd, b"")
    };
    let refused = only_agent(&["t", "--verify", "true", "--require-strict"]);
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stdout.contains("--require-strict: the agent cannot be sandboxed here"),
        "{}",
        refused.stdout
    );
    assert!(refused.stdout.contains("bwrap) is not installed"), "{}", refused.stdout);
    assert!(!env.store().join("sessions").exists(), "a loop was started");
    let run = only_agent(&["t", "--verify", "true"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let first = run.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("for-loop: sandbox: none — bubblewrap (bwrap) is not installed"),
        "{}",
        run.stderr
    );
    assert!(first.contains("running in the default tier"), "{first}");
    assert!(run.stdout.contains("sandbox: none"), "the receipt does not say it: {}", run.stdout);
    let off = crate::util::run_command(driver(&env, &bin, &["t", "--verify", "true", "--no-sandbox"]), b"");
    assert!(off.stderr.starts_with("for-loop: sandbox: off (--no-sandbox)"), "{}", off.stderr);
}

/// In a sandboxed run verify is sandboxed too: code the agent wrote, run by the user's check,
/// can no more edit the run's state or ledger while it is judged than the agent could.
#[test]
fn in_a_sandboxed_run_the_code_under_test_cannot_reach_the_loop_during_verify() {
    let env = TestEnv::new();
    env.write("check.sh", "sh ./code.sh\n");
    let sessions = env.store().join("sessions");
    let code = format!(
        "for dir in {s}/*; do\n\
           sed -i 's/^status: active/status: ended/' \"$dir/state.md\" && echo state-edited >> attack.log\n\
           echo '{{}}' >> \"$dir/ledger.jsonl\" && echo ledger-edited >> attack.log\n\
         done\n\
         echo judged >> attack.log; exit 1\n",
        s = sessions.display()
    );
    env.write("code.sh", &code);
    let bin = fake_claude(&env, "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'");
    let run = crate::util::run_command(
        driver(&env, &bin, &["make the check pass", "--verify", "sh check.sh", "--max-iterations", "1"]),
        b"",
    );
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(run.stderr.starts_with(SANDBOXED), "bubblewrap must be installed for this test: {said}");
    let attacks = std::fs::read_to_string(env.project.join("attack.log")).unwrap_or_default();
    assert_eq!(attacks, "judged\n", "{said}");
    assert_eq!(env.ledger_reasons(&only_run(&env)), ["cap_reached"], "{said}");
}

/// In the sandbox, Ctrl-C ends the agent's run with everything it started (a background job
/// and a double-forked daemon alike) and parks the loop.
#[test]
fn in_the_sandbox_ctrl_c_ends_the_agent_with_all_it_started() {
    let env = TestEnv::new();
    let marker = format!("left-by-{}", env.project.display());
    let bin = fake_claude(
        &env,
        &format!(
            "sh -c 'sleep 300 # {marker}' &\n\
             setsid sh -c 'sleep 300 # {marker}' >/dev/null 2>&1 < /dev/null &\n\
             touch started; wait"
        ),
    );
    let mut child = driver(&env, &bin, &["t", "--verify", "false", "--max-iterations", "3"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&env.project.join("started"));
    let running = |marker: &str| Command::new("pgrep").args(["-f", marker]).output().unwrap().stdout;
    assert_eq!(String::from_utf8_lossy(&running(&marker)).lines().count(), 2, "both were not started");
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < crate::util::PATIENCE, "the driver did not stop after Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let left = running(&marker);
    for pid in String::from_utf8_lossy(&left).lines() {
        Command::new("kill").args(["-KILL", pid]).status().unwrap();
    }
    assert!(said.contains(SANDBOXED), "bubblewrap must be installed for this test: {said}");
    assert!(left.is_empty(), "the agent's processes outlived Ctrl-C: {said}");
    assert!(said.contains("parked") && said.contains("loop-hook run --resume"), "{said}");
    assert_eq!(env.ledger_reasons(&only_run(&env)), ["interrupted"], "{said}");
}

/// `status` (human and `--json`) and the report show the tier of the run's own sandbox, which
/// its start recorded in the loop: strict when the agent is sandboxed, and why; never the
/// host's sandbox settings, which a run's agent does not run under.
#[test]
fn status_and_the_report_show_the_runs_own_tier() {
    let env = TestEnv::new();
    let bin =
        fake_claude(&env, "touch fixed; echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'");
    let run = crate::util::run_command(driver(&env, &bin, &["t", "--verify", "test -f fixed"]), b"");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(run.stderr.starts_with(SANDBOXED), "bubblewrap must be installed for this test: {said}");
    assert_eq!(run.code, 0, "{said}");
    let session = only_run(&env);
    let strict = "strict: loop-hook run's sandbox (bubblewrap)";
    let status = env.run(&["status", "--session", &session], "");
    assert!(status.stdout.contains(&format!("tier:       {strict}")), "{}", status.stdout);
    let json = env.run(&["status", "--session", &session, "--json"], "");
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(json["loop"]["meta"]["tier"].as_str().unwrap_or_default().starts_with(strict), "{json}");
    let report = env.run(&["report", "--session", &session, "--out", "report.html"], "");
    assert_eq!(report.code, 0, "{}{}", report.stdout, report.stderr);
    let html = std::fs::read_to_string(env.project.join("report.html")).unwrap();
    assert!(html.contains(&format!("<dt>Tier</dt><dd>{}", strict.replace('\'', "&#39;"))), "{html}");
    assert_eq!(env.ledger_reasons(&session), ["verified"], "the loop's custody held: {said}");
}

/// `FOR_LOOP_REQUIRE_STRICT=1` holds a run to its own sandbox, not to the host's settings: a
/// sandboxed run starts, one that cannot be sandboxed (no bubblewrap on PATH) or runs with
/// `--no-sandbox` is refused and starts nothing, and its status says the default tier.
#[test]
fn require_strict_in_the_environment_is_met_by_the_runs_sandbox() {
    let env = TestEnv::new();
    let bin =
        fake_claude(&env, "touch fixed; echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'");
    let required = |args: &[&str], path: Option<&Path>| {
        let mut cmd = driver(&env, &bin, args);
        cmd.env("FOR_LOOP_REQUIRE_STRICT", "1");
        if let Some(path) = path {
            cmd.env("PATH", path);
        }
        crate::util::run_command(cmd, b"")
    };
    for (args, path) in [
        (&["t", "--verify", "test -f fixed"][..], Some(bin.as_path())),
        (&["t", "--verify", "test -f fixed", "--no-sandbox"], None),
    ] {
        let refused = required(args, path);
        let said = format!("{}{}", refused.stdout, refused.stderr);
        assert_eq!(refused.code, 1, "{said}");
        assert!(refused.stdout.contains("strict mode is required (FOR_LOOP_REQUIRE_STRICT)"), "{said}");
        assert!(refused.stdout.contains("default: loop-hook run"), "{said}");
        assert!(!env.store().join("sessions").exists(), "a loop was started: {said}");
    }
    let run = required(&["t", "--verify", "test -f fixed"], None);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(run.stderr.starts_with(SANDBOXED), "bubblewrap must be installed for this test: {said}");
    assert_eq!(run.code, 0, "{said}");
    assert!(run.stdout.contains("for-loop: run verified"), "{said}");
}

/// A run resumed in another sandbox than it started in is kept in the tier of the run that
/// goes on: `--no-sandbox` to the cap, then resumed sandboxed, says strict. A resume that is
/// not sandboxed is refused under `FOR_LOOP_REQUIRE_STRICT=1`, as a start would be.
#[test]
fn a_resumed_run_is_kept_in_the_tier_of_the_run_that_goes_on() {
    let env = TestEnv::new();
    let bin = fake_claude(&env, "echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'");
    let args = ["t", "--verify", "test -f fixed", "--max-iterations", "1", "--no-sandbox"];
    let capped = crate::util::run_command(driver(&env, &bin, &args), b"");
    assert_eq!(capped.code, 1, "{}{}", capped.stdout, capped.stderr);
    let session = only_run(&env);
    let tier = || env.run(&["status", "--session", &session], "").stdout;
    assert!(tier().contains("tier:       default: loop-hook run --no-sandbox"), "{}", tier());
    let mut required = driver(&env, &bin, &["--resume", "--no-sandbox"]);
    required.env("FOR_LOOP_REQUIRE_STRICT", "1");
    let refused = crate::util::run_command(required, b"");
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(refused.stdout.contains("not resumed: strict mode is required"), "{}", refused.stdout);
    assert_eq!(env.ledger_reasons(&session), ["cap_reached"], "a refused resume changed the loop");
    resume_with_the_fix(&env);
    assert!(tier().contains("tier:       strict: loop-hook run's sandbox (bubblewrap)"), "{}", tier());
}

/// `run --plan`: each fresh session is given the story to work on, and the loop ends verified
/// when every story's check passes.
#[test]
fn a_plan_run_gives_each_fresh_session_its_story() {
    let env = TestEnv::new();
    env.write("PLAN.md", "- [ ] First story\n  verify: test -f 1\n- [ ] Second story\n  verify: test -f 2\n");
    let runs = env.home.join("runs");
    let bin = fake_claude(
        &env,
        &format!(
            "n=$(cat {runs} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {runs}\n\
             printf '%s\\n' \"$@\" > {runs}-$n.prompt; touch $n\n\
             echo '{{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}}'",
            runs = runs.display()
        ),
    );
    let run = crate::util::run_command(driver(&env, &bin, &["--plan", "PLAN.md", "--json"]), b"");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let prompt = |n: u32| std::fs::read_to_string(env.home.join(format!("runs-{n}.prompt"))).unwrap();
    assert!(prompt(1).contains("Now: story 1 of 2: 1. First story"), "{}", prompt(1));
    assert!(prompt(1).contains("The loop ends when `test -f 1` passes."), "{}", prompt(1));
    assert!(prompt(2).contains("Now: story 2 of 2: 2. Second story"), "{}", prompt(2));
    assert!(!env.home.join("runs-3.prompt").exists(), "two sessions, one per story");
    let session = only_run(&env);
    assert_eq!(env.ledger_reasons(&session), ["story_verified", "verified"]);
}
