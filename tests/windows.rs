//! Windows: the hooks fed Claude Code's events as a Windows machine sends them (drive letters and
//! backslashes, CRLF, a project on another drive than the user's profile), judged with verify
//! commands as Windows users write them for `cmd.exe`, which runs them there.
//!
//! These run under Wine (`scripts/test-windows`, where the temporary folder, and so every
//! project, is on drive D:) and natively in the windows workflow. Three need Git Bash or
//! PowerShell, which Wine lacks; they are ignored there and run by the workflow with
//! `--include-ignored`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::util::{Run, repo, run_command};

const SESSION: &str = "aaaaaaaa-2222-3333-4444-555555555555";

/// A user's profile and a project in a folder with a space in its name, the environment of a
/// hook started by Claude Code through PowerShell: no HOME, the profile in USERPROFILE and
/// LOCALAPPDATA.
struct Machine {
    _root: TempDir,
    _projects: TempDir,
    profile: PathBuf,
    project: PathBuf,
    /// Whether HOME is set, as Git Bash sets it for the programs it starts.
    git_bash: std::cell::Cell<bool>,
}

impl Machine {
    /// The profile in the temporary folder; the project on `FOR_LOOP_TEST_DRIVE` when it is set
    /// (another drive: D: under Wine, the runner's work drive in the workflow).
    fn new() -> Machine {
        let root = tempfile::Builder::new().prefix("for-loop win ").tempdir().unwrap();
        let projects = match std::env::var_os("FOR_LOOP_TEST_DRIVE") {
            Some(drive) => tempfile::Builder::new().prefix("for-loop win ").tempdir_in(drive).unwrap(),
            None => tempfile::Builder::new().prefix("for-loop win ").tempdir().unwrap(),
        };
        let profile = root.path().join("Users").join("Dev User");
        let project = projects.path().join("work").join("my app");
        std::fs::create_dir_all(profile.join("AppData").join("Local")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        Machine { _root: root, _projects: projects, profile, project, git_bash: std::cell::Cell::new(false) }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_loop-hook"));
        cmd.args(args).env_clear().current_dir(&self.project);
        for name in ["PATH", "SystemRoot", "SYSTEMROOT", "windir", "ComSpec", "PATHEXT", "TEMP", "TMP"] {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd.env("USERPROFILE", &self.profile)
            .env("LOCALAPPDATA", self.profile.join("AppData").join("Local"))
            .env("CLAUDE_PROJECT_DIR", &self.project);
        if self.git_bash.get() {
            cmd.env("HOME", &self.profile);
        }
        cmd
    }

    fn run(&self, args: &[&str], stdin: impl AsRef<[u8]>) -> Run {
        run_command(self.command(args), stdin.as_ref())
    }

    fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.project.join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    /// The session's transcript, under the profile's `.claude`.
    fn transcript(&self) -> PathBuf {
        self.profile.join(".claude").join("projects").join("t.jsonl")
    }

    /// `/for-loop TEXT` as the prompt hook receives it when the user submits it, then recorded
    /// in the transcript (with CRLF) as the host does once the hook let it through.
    fn start(&self, text: &str) -> Run {
        let prompt = format!("/for-loop {text}");
        let event = json!({
            "session_id": SESSION,
            "transcript_path": self.transcript(),
            "cwd": self.project,
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        });
        let run = self.run(&["prompt-hook"], crlf(&event));
        let record = json!({"type": "user", "timestamp": jiff::Timestamp::now().to_string(),
            "message": {"role": "user", "content": prompt}});
        std::fs::create_dir_all(self.transcript().parent().unwrap()).unwrap();
        std::fs::write(self.transcript(), format!("{record}\r\n")).unwrap();
        run
    }

    /// A Stop event with `cwd` written as `cwd`, after the agent's reply that ends the turn.
    fn stop_in(&self, cwd: &str) -> Run {
        // A new final reply each turn: a stop that finds none is taken for forged.
        let turn = std::fs::read_to_string(self.transcript()).unwrap().lines().count();
        let reply = json!({"type": "assistant", "uuid": format!("reply-{turn}"),
            "message": {"content": [{"type": "text", "text": format!("Done with turn {turn}.")}]}});
        let mut transcript = std::fs::OpenOptions::new().append(true).open(self.transcript()).unwrap();
        std::io::Write::write_all(&mut transcript, format!("{reply}\r\n").as_bytes()).unwrap();
        let event = json!({
            "session_id": SESSION,
            "transcript_path": self.transcript(),
            "cwd": cwd,
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": false,
            "last_assistant_message": "Done.",
        });
        self.run(&["stop-hook"], crlf(&event))
    }

    fn stop(&self) -> Run {
        self.stop_in(&self.project.display().to_string())
    }

    fn store(&self) -> PathBuf {
        self.profile.join("AppData").join("Local").join("for-loop")
    }
}

/// The event as pretty JSON with CRLF line endings, as a Windows pipe may hand it over.
fn crlf(event: &Value) -> String {
    serde_json::to_string_pretty(event).unwrap().replace('\n', "\r\n") + "\r\n"
}

fn answer(run: &Run) -> Value {
    assert_eq!(run.code, 0, "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    run.json()
}

fn blocked(run: &Run) -> bool {
    answer(run)["decision"] == "block"
}

#[test]
fn the_project_is_on_another_drive_than_the_profile_when_one_is_named() {
    let machine = Machine::new();
    let drive = |path: &Path| path.display().to_string().chars().next().unwrap().to_ascii_uppercase();
    let project = machine.project.display().to_string();
    assert!(project.as_bytes().get(1) == Some(&b':') && project.contains('\\'), "{project}");
    if std::env::var_os("FOR_LOOP_TEST_DRIVE").is_some() {
        assert_ne!(drive(&machine.project), drive(&machine.profile), "{project}");
    }
}

#[test]
fn a_cmd_verify_blocks_until_it_passes_in_a_project_with_a_space_on_a_drive() {
    let machine = Machine::new();
    let started = machine
        .start("make it pass --verify \"if exist fixed (exit /b 0) else (echo not fixed yet& exit /b 1)\"");
    assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
    assert!(machine.store().join("sessions").join(SESSION).join("state.md").is_file(), "{}", started.stdout);

    let first = machine.stop();
    assert!(blocked(&first), "{}", first.stdout);
    assert!(answer(&first)["reason"].as_str().unwrap().contains("not fixed yet"), "{}", first.stdout);

    machine.write("fixed", "");
    let second = machine.stop();
    assert!(!blocked(&second), "the passing check must end the loop: {}", second.stdout);
}

#[test]
fn a_batch_file_check_runs_by_its_quoted_path() {
    let machine = Machine::new();
    machine.write(
        "check.bat",
        "@echo off\r\nif exist \"%~dp0done.txt\" exit /b 0\r\necho done.txt is missing\r\nexit /b 1\r\n",
    );
    let check = machine.project.join("check.bat");
    let started = machine.start(&format!("finish --verify \"\\\"{}\\\"\"", check.display()));
    assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
    let first = machine.stop();
    assert!(blocked(&first), "{}", first.stdout);
    assert!(answer(&first)["reason"].as_str().unwrap().contains("done.txt is missing"), "{}", first.stdout);
    machine.write("done.txt", "");
    assert!(!blocked(&machine.stop()));
}

#[test]
fn a_loop_started_through_git_bash_is_judged_through_powershell_and_back() {
    let machine = Machine::new();
    machine.git_bash.set(true);
    machine.start("x --verify \"if exist fixed (exit /b 0) else (exit /b 1)\"");
    machine.git_bash.set(false);
    assert!(blocked(&machine.stop()), "a hook without HOME must find the loop started with it");
    machine.git_bash.set(true);
    assert!(blocked(&machine.stop()));
    assert!(machine.store().join("sessions").join(SESSION).join("state.md").is_file());
}

#[test]
fn a_state_saved_again_with_crlf_does_not_end_or_confuse_the_loop() {
    let machine = Machine::new();
    machine.start("x --verify \"exit /b 1\"");
    let state = machine.store().join("sessions").join(SESSION).join("state.md");
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(!text.contains('\r'), "the state is written with LF");
    // What an editor on Windows does to a file it saves.
    std::fs::write(&state, text.replace('\n', "\r\n")).unwrap();
    let run = machine.stop();
    assert!(blocked(&run), "the loop goes on and its failing check blocks: {}", run.stdout);
    assert!(blocked(&machine.stop()));
}

#[test]
fn the_stop_event_cwd_matches_in_any_spelling_windows_gives_it() {
    let machine = Machine::new();
    machine.start("x --verify \"exit /b 1\"");
    let project = machine.project.display().to_string();
    for cwd in [project.clone(), project.replace('\\', "/"), project.to_lowercase(), format!("{project}\\")] {
        assert!(blocked(&machine.stop_in(&cwd)), "cwd {cwd:?}: the loop must still be judged");
    }
}

#[test]
fn a_plan_saved_with_crlf_is_walked_story_by_story() {
    let machine = Machine::new();
    machine.write(
        "PLAN.md",
        "# Two stories\r\n\r\n- [ ] Write one\r\n  verify: `if exist one (exit /b 0) else (exit /b 1)`\r\n- [ ] Write two\r\n  verify: `if exist two (exit /b 0) else (exit /b 1)`\r\n",
    );
    let started = machine.start("--plan PLAN.md");
    assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
    let first = machine.stop();
    assert!(blocked(&first), "{}", first.stdout);
    assert!(answer(&first)["reason"].as_str().unwrap().contains("Verify `if exist one"), "{}", first.stdout);
    machine.write("one", "");
    let after_one = machine.stop();
    assert!(blocked(&after_one), "{}", after_one.stdout);
    assert!(
        answer(&after_one)["reason"].as_str().unwrap().contains("Now: story 2 of 2"),
        "{}",
        after_one.stdout
    );
    machine.write("two", "");
    assert!(!blocked(&machine.stop()));
    let plan = std::fs::read_to_string(machine.project.join("PLAN.md")).unwrap();
    assert!(plan.contains("- [x] Write one\r\n") && plan.contains("- [x] Write two\r\n"), "{plan:?}");
}

#[test]
fn the_guard_refuses_an_edit_of_the_check_in_any_spelling_of_its_path() {
    let machine = Machine::new();
    let check = machine.write("check.bat", "@exit /b 1\r\n");
    machine.start("x --verify check.bat");
    let spelt = check.display().to_string();
    for path in [spelt.clone(), spelt.replace('\\', "/"), spelt.to_uppercase()] {
        let event = json!({
            "session_id": SESSION,
            "cwd": machine.project,
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": path, "old_string": "1", "new_string": "0"},
        });
        let run = machine.run(&["guard"], crlf(&event));
        assert_eq!(
            answer(&run)["hookSpecificOutput"]["permissionDecision"],
            "deny",
            "{path}: {}",
            run.stdout
        );
    }
}

/// The hook command of `hooks/hooks.json` for `event`, as Claude Code hands it to a shell.
fn hook_command(event: &str) -> String {
    let hooks: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("hooks").join("hooks.json")).unwrap())
            .unwrap();
    hooks["hooks"][event][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .replace("${CLAUDE_PLUGIN_ROOT}", &plugin_root())
}

fn plugin_root() -> String {
    repo().join("plugin").join("claude-code").display().to_string()
}

/// The Stop hook run through `shell`, with this build as the binary: a loop whose check fails
/// must block.
fn stop_hook_through(shell: &Path, args: &[&str], root: &str) {
    let machine = Machine::new();
    machine.start("x --verify \"exit /b 1\"");
    let mut cmd = machine.command(&[]);
    cmd.env_remove("PATH")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("FOR_LOOP_BIN", env!("CARGO_BIN_EXE_loop-hook"))
        .env("CLAUDE_PLUGIN_ROOT", root);
    let mut shell_cmd = Command::new(shell);
    shell_cmd.args(args).arg(hook_command("Stop").replace(&plugin_root(), root));
    for (name, value) in cmd.get_envs() {
        match value {
            Some(value) => shell_cmd.env(name, value),
            None => shell_cmd.env_remove(name),
        };
    }
    shell_cmd.current_dir(&machine.project);
    let event = json!({"session_id": SESSION, "transcript_path": machine.transcript(), "cwd": machine.project, "hook_event_name": "Stop",
        "stop_hook_active": false, "last_assistant_message": "Done."});
    let run = run_command(shell_cmd, event.to_string().as_bytes());
    assert!(blocked(&run), "{}: {}{}", shell.display(), run.stdout, run.stderr);
}

#[test]
#[ignore = "needs Windows PowerShell, which Wine lacks: the windows workflow runs it"]
fn a_powershell_verify_blocks_until_it_passes() {
    let machine = Machine::new();
    let check =
        "powershell -NoProfile -Command \\\"if (Test-Path fixed) { exit 0 } else { 'not fixed'; exit 1 }\\\"";
    let started = machine.start(&format!("make it pass --verify \"{check}\""));
    assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
    let first = machine.stop();
    assert!(answer(&first)["reason"].as_str().unwrap().contains("not fixed"), "{}", first.stdout);
    machine.write("fixed", "");
    assert!(!blocked(&machine.stop()));
}

#[test]
#[ignore = "needs Git Bash, which Wine lacks: the windows workflow runs it"]
fn the_stop_hook_runs_through_git_bash() {
    let bash = Path::new(r"C:\Program Files\Git\bin\bash.exe");
    assert!(bash.is_file(), "Git for Windows is not installed at {}", bash.display());
    // Claude Code hands Git Bash the plugin's root with forward slashes.
    stop_hook_through(bash, &["-c"], &plugin_root().replace('\\', "/"));
}

#[test]
#[ignore = "needs Windows PowerShell, which Wine lacks: the windows workflow runs it"]
fn the_stop_hook_runs_through_powershell_without_git_bash() {
    let system = std::env::var("SystemRoot").unwrap_or_else(|_| r"C:\Windows".into());
    let powershell = Path::new(&system).join(r"System32\WindowsPowerShell\v1.0\powershell.exe");
    let args = ["-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-Command"];
    stop_hook_through(&powershell, &args, &plugin_root());
}
