//! Every host's hook configuration is generated here, from one description of how a hook finds
//! `loop-hook`: the launcher `scripts/loop-hook` of the Claude Code plugin, which is the
//! repository's root (one file, copied byte for byte into each host package that has a directory
//! of its own), called the same way from every config. The Claude Code package in
//! `plugin/claude-code`, which the marketplace installs, is the root plugin's files copied.
//!
//! `packaging_is_generated_from_one_source` fails when a file differs from what this module
//! renders. After changing a hook, regenerate the files with
//!
//! ```sh
//! FOR_LOOP_WRITE_PACKAGING=1 cargo nextest run -E 'test(packaging_is_generated)'
//! ```
//!
//! and review the diff. The other tests run the generated commands the way each host runs them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::util::{TestEnv, copy_dir, path_without_loop_hook, repo, run_command};

/// The launcher, relative to a package root.
const LAUNCHER: &str = "scripts/loop-hook";

/// The Claude Code package, in the repository: the only directory its marketplace entry installs
/// (a copy of the root plugin's files, so that an install copies no build tree or test client).
pub(crate) const CLAUDE_PLUGIN: &str = "plugin/claude-code";

/// The Claude Code plugin's files, which its package copies byte for byte.
const CLAUDE_PLUGIN_FILES: [&str; 5] =
    [".claude-plugin/plugin.json", ".claude-plugin/icon.png", "commands", "hooks", "skills"];

/// The launcher every package copies: the Claude Code plugin's, at the repository's root.
fn launcher_source() -> PathBuf {
    repo().join(LAUNCHER)
}

/// Host packages that carry their own copy of the launcher (their hooks know their root).
const LAUNCHER_COPIES: [&str; 6] =
    ["claude-code", "codex", "gemini-cli", "antigravity", "cursor", "qwen-code"];

/// The Claude Code Stop hook's timeout: past the longest verify (1 h) plus the hook's own work.
const STOP_TIMEOUT_SECS: u64 = 3660;

/// The prompt hook's timeout: it starts, cancels or reports a loop, never runs verify.
const PROMPT_TIMEOUT_SECS: u64 = 60;

/// A hook command for a shell that reads POSIX syntax (Claude Code's `sh -c`, Git Bash on
/// Windows; Gemini CLI's bash): source the launcher at `launcher` with `args` in that shell (one
/// shell start and one exec per hook, as the no-loop path must cost about a process start), or,
/// when the package has lost it, do `otherwise` (the host's plain "let it stop"). The shell reads
/// the launcher, so its executable bit does not matter; `[ -f ]` first, because a missing file
/// ends `sh` with exit 2, and exit 2 blocks the stop on Claude Code.
fn posix_command(launcher: &str, args: &str, otherwise: &str) -> String {
    format!(
        "for_loop_launcher=\"{launcher}\"; [ -f \"$for_loop_launcher\" ] && {{ set -- {args}; . \"$for_loop_launcher\"; }}; {otherwise}"
    )
}

/// Claude Code's hook command: bash (Git Bash on Windows) reads the first two lines, sourcing
/// the POSIX launcher as [`posix_command`] does and exiting; PowerShell, which Claude Code runs a
/// hook through on Windows without Git Bash, reads `echo '#'` with the bash lines inside a block
/// comment, then the last line, which runs the PowerShell launcher beside the POSIX one
/// (`loop-hook.ps1`, read as a script block so that no execution policy stops it). The exec form
/// (`args`) would need one `.exe` path valid on every platform, which a source install lacks.
fn claude_command(args: &str) -> String {
    claude_command_after("", args)
}

/// [`claude_command`] whose bash lines begin with `posix_first` (PowerShell never reads them).
fn claude_command_after(posix_first: &str, args: &str) -> String {
    let posix = posix_command(&format!("${{CLAUDE_PLUGIN_ROOT}}/{LAUNCHER}"), args, "exit 0");
    let posix = format!("{posix_first}{posix}");
    let words = args.split(' ').map(|word| format!("'{word}'")).collect::<Vec<_>>().join(", ");
    format!(
        "echo `# <#` >/dev/null\n{posix}\n#> > $null\n\
         $launcher = Join-Path $env:CLAUDE_PLUGIN_ROOT '{POWERSHELL_LAUNCHER}'; $hookArgs = @({words}); \
         if (Test-Path -LiteralPath $launcher) {{ . ([scriptblock]::Create([IO.File]::ReadAllText($launcher))) }}; exit 0"
    )
}

/// The PowerShell launcher, relative to the Claude Code package's root.
const POWERSHELL_LAUNCHER: &str = "scripts/loop-hook.ps1";

/// The same for hosts that run hooks through the user's login shell, which may be fish (Codex
/// runs `$SHELL -lc`) or an unknown one (Cursor): everything shell-specific is inside a
/// single-quoted `sh -c` program, which every shell passes through unchanged.
fn any_shell_command(launcher: &str, args: &str, otherwise: &str) -> String {
    format!(
        "sh -c 'for_loop_launcher=$1; shift; [ -f \"$for_loop_launcher\" ] && . \"$for_loop_launcher\"; {otherwise}' sh \"{launcher}\" {args}"
    )
}

/// For a hook file that lives alone (Copilot CLI's, or Cursor's copied to `~/.cursor/`): no
/// package directory, so no launcher. The binary is taken from the places a user installs it:
/// `$FOR_LOOP_BIN`, `cargo install`'s directory, then PATH without relative or project entries.
fn standalone_lookup(args: &str, otherwise: &str) -> String {
    format!(
        "for b in \"$FOR_LOOP_BIN\" \"${{CARGO_HOME:-$HOME/.cargo}}/bin/loop-hook\" \"$(command -v loop-hook)\"; do \
         case \"$b\" in /*) case \"$b\" in \"$PWD\"/*) ;; *) [ -f \"$b\" ] && [ -x \"$b\" ] && exec \"$b\" {args};; esac;; esac; \
         done; {otherwise}"
    )
}

/// The Gemini CLI session map: `SessionStart` records the session id for the CLI process (hooks
/// get the id, `!{…}` commands do not, and both are children of the CLI), and drops the records
/// of CLI processes that are gone, so a reused process id never finds an old session;
/// `SessionEnd` removes the process's own record.
const GEMINI_SESSIONS: &str =
    "d=\"${FOR_LOOP_HOME:-${XDG_STATE_HOME:-$HOME/.local/state}/for-loop}/gemini-sessions\"";

fn gemini_session_start() -> String {
    format!(
        "{GEMINI_SESSIONS}; mkdir -p \"$d\" && for f in \"$d\"/*; do [ -f \"$f\" ] && ! kill -0 \"${{f##*/}}\" 2>/dev/null && rm -f \"$f\"; done; \
         printf '%s' \"$GEMINI_SESSION_ID\" > \"$d/$PPID\"; cat >/dev/null; echo '{{}}'"
    )
}

fn gemini_session_end() -> String {
    format!("{GEMINI_SESSIONS}; rm -f \"$d/$PPID\"; cat >/dev/null; echo '{{}}'")
}

/// What a Gemini CLI `!{…}` command runs: the extension's `scripts/command` (commands get no
/// `${extensionPath}`), given the CLI's process id, which keys the session id its `SessionStart`
/// hook recorded. One short line, because Gemini CLI shows the model the command it ran.
fn gemini_shell(subcommand: &str, args: &str) -> String {
    format!(
        "sh \"${{GEMINI_CLI_HOME:-$HOME}}/.gemini/extensions/for-loop/{GEMINI_COMMAND}\" $PPID {subcommand}{args}"
    )
}

const GEMINI_COMMAND: &str = "scripts/command";

/// `scripts/command CLI_PID SUBCOMMAND [TEXT…]`: runs `loop-hook SUBCOMMAND --host gemini-cli`
/// through the launcher beside it, in the session the CLI process recorded, with the text (the
/// user's arguments) on stdin for start and resume.
fn gemini_command_script() -> String {
    format!(
        "#!/bin/sh\n\
         # Runs a for-loop command for the extension's custom commands: their `!{{…}}` line only names\n\
         # this script, because Gemini CLI shows the model the whole command it ran.\n\
         #   sh scripts/command CLI_PID start|resume|cancel|status [TEXT...]\n\
         # Generated by tests/packaging.rs.\n\
         cli=${{1:-}} subcommand=${{2:-}}\n\
         if [ $# -ge 2 ]; then shift 2; else set --; fi\n\
         {GEMINI_SESSIONS}\n\
         f=\"${{0%/*}}/loop-hook\"\n\
         [ -f \"$f\" ] || {{ echo \"for-loop: $f is missing: reinstall the extension.\"; exit 0; }}\n\
         FOR_LOOP_SESSION_ID=$(cat \"$d/$cli\" 2>/dev/null)\n\
         export FOR_LOOP_SESSION_ID\n\
         case $subcommand in\n\
         \x20   start | resume) printf '%s\\n' \"$@\" | sh \"$f\" \"$subcommand\" --host gemini-cli --exit-zero ;;\n\
         \x20   *) sh \"$f\" \"$subcommand\" --host gemini-cli --exit-zero </dev/null ;;\n\
         esac\n"
    )
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap() + "\n"
}

/// Every generated file: its path in the repository and its full content.
fn generated() -> Vec<(&'static str, String)> {
    let claude = claude_command;
    let claude_hooks = json!({
        "description": "for-loop: at every turn end, run the loop's verify command and keep the agent working until it passes; carry out the user's own /for-loop, /cancel-loop, /loop-status, resume and rollback from the prompt they submit (outside the model's sandbox); while a loop runs, refuse edits to its verify check; record a turn that ends on an API error (StopFailure) without counting it, and tell the user; after a compaction, give the agent its loop back (SessionStart compact); while a loop runs, tell at once a change of the settings that decide whether its hooks run, and keep it out of the session (ConfigChange). Every command runs scripts/loop-hook, which finds the loop-hook binary (see that file for where it looks and why).",
        "hooks": {
            "Stop": [{"hooks": [{
                "type": "command",
                "command": claude("stop-hook"),
                "timeout": STOP_TIMEOUT_SECS,
                "statusMessage": "for-loop",
            }]}],
            "PreToolUse": [{
                "matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash|ScheduleWakeup|CronCreate|Skill|SendMessage|RemoteTrigger",
                "hooks": [{"type": "command", "command": claude("guard"), "timeout": 30}],
            }],
            "UserPromptSubmit": [{"hooks": [{
                "type": "command",
                "command": claude("prompt-hook"),
                "timeout": PROMPT_TIMEOUT_SECS,
                "statusMessage": "for-loop",
            }]}],
            // Claude Code's `-p` exits on the error this reports, sending its hooks SIGTERM: the
            // signal is ignored from the POSIX shell's start, and the binary inherits that (it
            // also ignores it itself, which is all there is under PowerShell).
            "StopFailure": [{"hooks": [{
                "type": "command",
                "command": claude_command_after("trap '' TERM HUP; ", "stop-hook"),
                "timeout": 60,
            }]}],
            "SessionStart": [{
                "matcher": "compact",
                "hooks": [{"type": "command", "command": claude("session-start"), "timeout": 30}],
            }],
            // A settings file changed while the session runs: the guard's command line answers it.
            "ConfigChange": [{
                "matcher": "user_settings|project_settings|local_settings|policy_settings",
                "hooks": [{"type": "command", "command": claude("guard"), "timeout": 30}],
            }],
        },
    });
    let codex = |args: &str| any_shell_command(&format!("${{PLUGIN_ROOT}}/{LAUNCHER}"), args, "exit 0");
    let codex_hooks = json!({"hooks": {
        "UserPromptSubmit": [{"hooks": [{
            "type": "command",
            "command": codex("prompt-hook --host codex"),
            "timeout": PROMPT_TIMEOUT_SECS,
            "statusMessage": "for-loop",
        }]}],
        "Stop": [{"hooks": [{
            "type": "command",
            "command": codex("stop-hook --host codex"),
            "timeout": STOP_TIMEOUT_SECS,
            "statusMessage": "for-loop: running verify",
        }]}],
    }});
    let gemini_hook = |name: &str, description: &str, command: String, timeout_ms: u64| {
        json!({"hooks": [{
            "type": "command",
            "name": name,
            "description": description,
            "command": command,
            "timeout": timeout_ms,
        }]})
    };
    let gemini_hooks = json!({
        "description": "for-loop: AfterAgent judges each turn end with the loop's verify command. SessionStart records this session's id for /for-loop (Gemini CLI gives hooks the session id but not commands) and SessionEnd removes it.",
        "hooks": {
            "SessionStart": [gemini_hook(
                "for-loop-session",
                "Records the session id so /for-loop can start a loop in this session.",
                gemini_session_start(),
                10_000,
            )],
            "SessionEnd": [gemini_hook(
                "for-loop-session-end",
                "Removes this session's record.",
                gemini_session_end(),
                10_000,
            )],
            "AfterAgent": [gemini_hook(
                "for-loop",
                "Runs the loop's verify command and keeps the agent working until it passes.",
                posix_command(
                    "${extensionPath}${/}scripts${/}loop-hook",
                    "stop-hook --host gemini-cli",
                    "cat >/dev/null; echo '{\"decision\":\"allow\"}'",
                ),
                STOP_TIMEOUT_SECS * 1000,
            )],
        },
    });
    let cursor_hooks = json!({"version": 1, "hooks": {"stop": [{
        "command": format!(
            "if [ -n \"$CURSOR_PLUGIN_ROOT\" ]; then {}; else {}; fi",
            any_shell_command(&format!("$CURSOR_PLUGIN_ROOT/{LAUNCHER}"), "stop-hook --host cursor", "echo {}"),
            standalone_lookup("stop-hook --host cursor", "cat >/dev/null; echo '{}'"),
        ),
        "timeout": STOP_TIMEOUT_SECS,
        "loop_limit": null,
    }]}});
    let copilot_hooks = json!({"version": 1, "hooks": {
        "agentStop": [{
            "type": "command",
            "bash": standalone_lookup("stop-hook --host copilot-cli", "cat >/dev/null; echo '{}'"),
            "timeoutSec": STOP_TIMEOUT_SECS,
        }],
        // Carries out the user's /for-loop, /cancel-loop, /loop-status and /resume-loop before
        // the model sees them.
        "userPromptSubmitted": [{
            "type": "command",
            "bash": standalone_lookup("prompt-hook --host copilot-cli", "cat >/dev/null; echo '{}'"),
            "timeoutSec": PROMPT_TIMEOUT_SECS,
        }],
    }});
    let antigravity_stop = format!(
        "#!/bin/sh\n\
         # Antigravity's Stop hook. Antigravity runs hook commands from the folder holding hooks.json,\n\
         # and some versions take only a program path with no arguments, so this script adds them.\n\
         # Generated by tests/packaging.rs.\n\
         for_loop_launcher=\"${{0%/*}}/../{LAUNCHER}\"\n\
         [ -f \"$for_loop_launcher\" ] && {{ set -- stop-hook --host antigravity; . \"$for_loop_launcher\"; }}\n\
         cat >/dev/null\n\
         echo '{{\"decision\":\"stop\"}}'\n"
    );
    let gemini_command = |description: &str, shell: String, text: &str| {
        format!("description = {}\nprompt = \"\"\"\n!{{{shell}}}\n\n{text}\"\"\"\n", json!(description))
    };
    let mut files = vec![
        ("hooks/hooks.json", pretty(&claude_hooks)),
        ("plugin/codex/hooks/hooks.json", pretty(&codex_hooks)),
        ("plugin/gemini-cli/hooks/hooks.json", pretty(&gemini_hooks)),
        ("plugin/cursor/hooks/hooks.json", pretty(&cursor_hooks)),
        ("plugin/copilot-cli/for-loop.json", pretty(&copilot_hooks)),
        ("plugin/antigravity/hooks/stop-hook", antigravity_stop),
        ("plugin/gemini-cli/scripts/command", gemini_command_script()),
        (
            "plugin/gemini-cli/commands/for-loop.toml",
            gemini_command(
                "Start a verified loop: the agent keeps working on TASK until the verify command passes. Usage: /for-loop TASK [--verify CMD] [--completion-promise TEXT] [--max-iterations N] [--verify-timeout SECS]",
                gemini_shell("start", " {{args}}"),
                "If the output above says the loop was not started, or that loop-hook is not installed, tell the user
exactly what it says, in one or two lines, and do nothing else.

Otherwise a verified loop is now running in this session, and the output above is its task.
Work on that task now. You cannot end the loop by saying you are done: each time you stop, for-loop
runs the verify command; if it fails you get the task back with its output, if it passes the loop
ends. Run the verify command yourself before you stop. Never edit, weaken, skip or delete the
verify command, the tests it runs, or the loop's files: fix the code under test instead, and put
new tests in new test files. If the task cannot be done as asked, say why and end your turn with
<loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. If a
completion promise is set, write <promise>TEXT</promise> only when it is completely true.
",
            ),
        ),
        (
            "plugin/gemini-cli/commands/cancel-loop.toml",
            gemini_command(
                "Cancel the for-loop running in this session. Its next stop is allowed.",
                gemini_shell("cancel", ""),
                "The user cancelled the loop; the output above is the result. Tell the user that result in one
line. Do not continue the loop's task.
",
            ),
        ),
        (
            "plugin/gemini-cli/commands/resume-loop.toml",
            gemini_command(
                "Resume this session's parked, capped or cancelled for-loop. Add --more N for more iterations or --more-time 30m for more time.",
                gemini_shell("resume", " {{args}}"),
                "If the output above says the loop was not resumed, tell the user what it says in one line and stop.
Otherwise the loop is running again: work on its task, shown above, as before.
",
            ),
        ),
        (
            "plugin/gemini-cli/commands/doctor.toml",
            gemini_command(
                "Check whether a for-loop would hold here: the binary and its version, the extension, the folder's trust, the store, stale or parked loops; one line per check with the command that fixes it.",
                gemini_shell("doctor", ""),
                "Show the user the output above exactly as it is, in a code block. Add nothing else.
",
            ),
        ),
        (
            "plugin/gemini-cli/commands/loop-status.toml",
            gemini_command(
                "Show the for-loop in this session: iteration, last verify result, elapsed time, files and recent stops.",
                gemini_shell("status", ""),
                "Show the user the status above exactly as it is, in a code block. Add nothing else.
",
            ),
        ),
    ];
    files.extend(qwen_files());
    let launcher = std::fs::read_to_string(launcher_source()).unwrap();
    for host in LAUNCHER_COPIES {
        let path: &'static str = Box::leak(format!("plugin/{host}/{LAUNCHER}").into_boxed_str());
        files.push((path, launcher.clone()));
    }
    let powershell = std::fs::read_to_string(repo().join(POWERSHELL_LAUNCHER)).unwrap();
    let path: &'static str = Box::leak(format!("{CLAUDE_PLUGIN}/{POWERSHELL_LAUNCHER}").into_boxed_str());
    files.push((path, powershell));
    files
}

/// Qwen Code's extension: its hooks are Claude Code's events and shape, and it substitutes
/// `${CLAUDE_PLUGIN_ROOT}` (alone among variables) with the installed copy's root. The user's
/// commands are carried out by the prompt hook, which reads what the user typed
/// (`submitted_prompt`); the command files only tell the model what to do with the answer, and
/// run nothing, because a `!{…}` line runs before the prompt hook does.
fn qwen_files() -> Vec<(&'static str, String)> {
    let qwen = |args: &str| posix_command(&format!("${{CLAUDE_PLUGIN_ROOT}}/{LAUNCHER}"), args, "exit 0");
    let hooks = json!({
        "description": "for-loop: at every turn end, run the loop's verify command and keep the agent working until it passes; carry out the user's own /for-loop, /cancel-loop, /loop-status and /resume-loop from the prompt they typed, before the model sees it; while a loop runs, refuse edits to its verify check; record a turn that ends on an API error (StopFailure) without counting it, and tell the user at their next prompt.",
        "hooks": {
            "Stop": [{"hooks": [{
                "type": "command",
                "name": "for-loop",
                "command": qwen("stop-hook --host qwen-code"),
                // Seconds below 1000 and milliseconds from 1000 up (0.24.4 keeps the old
                // meaning): 3660 would be read as 3.66 s and kill verify.
                "timeout": STOP_TIMEOUT_SECS * 1000,
            }]}],
            "UserPromptSubmit": [{"hooks": [{
                "type": "command",
                "name": "for-loop-prompt",
                "command": qwen("prompt-hook --host qwen-code"),
                "timeout": PROMPT_TIMEOUT_SECS,
            }]}],
            // Fire-and-forget (the CLI neither waits for it nor shows its output), and sent only
            // by the interactive UI and ACP sessions.
            "StopFailure": [{"hooks": [{
                "type": "command",
                "name": "for-loop-failure",
                "command": qwen("stop-hook --host qwen-code"),
                "timeout": 60,
            }]}],
            // Qwen Code's file and shell tools: the loop's check may not be changed.
            "PreToolUse": [{
                "matcher": "write_file|edit|run_shell_command",
                "hooks": [{"type": "command", "name": "for-loop-guard", "command": qwen("guard"), "timeout": 30}],
            }],
        },
    });
    let manifest = json!({
        "name": "for-loop",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "A verified agent loop: the agent keeps working until your verify command passes.",
    });
    let command = |description: &str, text: &str| {
        format!("description = {}\nprompt = \"\"\"\n{text}\"\"\"\n", json!(description))
    };
    let hooks_off =
        "If no text from for-loop was added to this prompt, for-loop's hooks did not run in this session
(hooks turned off with disableAllHooks, the extension disabled, or loop-hook missing): tell the user
exactly that, suggest `qwen extensions list` and `loop-hook doctor --host qwen-code` in a terminal,
and do nothing else.
";
    let work =
        "Otherwise a verified loop is now running in this session, and the text for-loop added is its task.
Work on that task now. You cannot end the loop by saying you are done: each time you stop, for-loop
runs the verify command; if it fails you get the task back with its output, if it passes the loop
ends. Run the verify command yourself before you stop. Never edit, weaken, skip or delete the
verify command, the tests it runs, or the loop's files: fix the code under test instead, and put
new tests in new test files. If the task cannot be done as asked, say why and end your turn with
<loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. If a
completion promise is set, write <promise>TEXT</promise> only when it is completely true.
";
    let answered = |what: &str| {
        format!(
            "for-loop's prompt hook carries out {what} itself and answers the user directly, so this text is seen
only when that hook did not run: for-loop's hooks are off in this session, and no loop was changed.
Tell the user that in one line, suggest `loop-hook doctor --host qwen-code` in a terminal, and do
not work on any loop's task.
"
        )
    };
    vec![
        ("plugin/qwen-code/qwen-extension.json", pretty(&manifest)),
        ("plugin/qwen-code/hooks/hooks.json", pretty(&hooks)),
        (
            "plugin/qwen-code/commands/for-loop.toml",
            command(
                "Start a verified loop: the agent keeps working on TASK until the verify command passes. Usage: /for-loop TASK [--verify CMD] [--completion-promise TEXT] [--max-iterations N] [--verify-timeout SECS]",
                &format!("for-loop's prompt hook has started a loop from this command before you read it.\n\n{hooks_off}\n{work}"),
            ),
        ),
        (
            "plugin/qwen-code/commands/resume-loop.toml",
            command(
                "Resume this session's parked, capped or cancelled for-loop. Add --more N for more iterations or --more-time 30m for more time.",
                &format!(
                    "for-loop's prompt hook has resumed this session's loop before you read it.\n\n{hooks_off}\n{}",
                    work.replacen("now running in this session", "running again in this session", 1)
                ),
            ),
        ),
        (
            "plugin/qwen-code/commands/cancel-loop.toml",
            command("Cancel the for-loop running in this session. Its next stop is allowed.", &answered("/cancel-loop")),
        ),
        (
            "plugin/qwen-code/commands/loop-status.toml",
            command(
                "Show the for-loop in this session: iteration, last verify result, elapsed time, files and recent stops.",
                &answered("/loop-status"),
            ),
        ),
        (
            "plugin/qwen-code/commands/doctor.toml",
            command(
                "Check whether a for-loop would hold here: the binary and its version, the extension, its hooks, Qwen Code's cap of blocked stops, the store; one line per check with the command that fixes it.",
                "!{sh \"${QWEN_HOME:-$HOME/.qwen}/extensions/for-loop/scripts/loop-hook\" doctor --host qwen-code --exit-zero}

Show the user the output above exactly as it is, in a code block. Add nothing else.
",
            ),
        ),
    ]
}

#[test]
fn packaging_is_generated_from_one_source() {
    let write = std::env::var_os("FOR_LOOP_WRITE_PACKAGING").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (path, content) in generated() {
        let file = repo().join(path);
        if std::fs::read_to_string(&file).ok().as_deref() == Some(content.as_str()) {
            continue;
        }
        if write {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, &content).unwrap();
        } else {
            stale.push(path);
        }
    }
    assert!(
        stale.is_empty(),
        "these files differ from what tests/packaging.rs renders: {stale:?}. \
         Regenerate them with FOR_LOOP_WRITE_PACKAGING=1 and review the diff."
    );
}

/// Every file of the Claude Code plugin under `path` (a file or a folder), relative to the root.
fn plugin_files(path: &str) -> Vec<String> {
    let full = repo().join(path);
    if full.is_file() {
        return vec![path.to_string()];
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&full).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        files.extend(plugin_files(&format!("{path}/{name}")));
    }
    files.sort();
    files
}

/// The marketplace installs `plugin/claude-code`, never the checkout around it: the package holds
/// the root plugin's files as they are, and nothing else of them.
#[test]
fn the_claude_code_package_is_the_root_plugin_copied() {
    let write = std::env::var_os("FOR_LOOP_WRITE_PACKAGING").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    let wanted: Vec<String> = CLAUDE_PLUGIN_FILES.iter().flat_map(|path| plugin_files(path)).collect();
    assert!(wanted.len() >= 10, "found only {wanted:?}");
    for file in &wanted {
        let (from, to) = (repo().join(file), repo().join(CLAUDE_PLUGIN).join(file));
        if std::fs::read(&to).ok() == Some(std::fs::read(&from).unwrap()) {
            continue;
        }
        if write {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&from, &to).unwrap();
        } else {
            stale.push(file.clone());
        }
    }
    for path in CLAUDE_PLUGIN_FILES {
        let package = repo().join(CLAUDE_PLUGIN).join(path);
        if !package.exists() {
            continue;
        }
        let extra: Vec<String> = plugin_files(&format!("{CLAUDE_PLUGIN}/{path}"))
            .into_iter()
            .filter(|f| !wanted.contains(&f.trim_start_matches(&format!("{CLAUDE_PLUGIN}/")).to_string()))
            .collect();
        stale.extend(extra);
    }
    assert!(
        stale.is_empty(),
        "{CLAUDE_PLUGIN} differs from the root plugin: {stale:?}. Copy them with \
         FOR_LOOP_WRITE_PACKAGING=1 (and remove what the root no longer has)."
    );
}

// ---------------------------------------------------------------------------------------------
// The launcher, run as the hooks run it: `sh scripts/loop-hook ARGS`.

/// This machine's platform as the launcher and `scripts/release` name it.
pub(crate) fn platform() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// A plugin tree in a temporary directory: the launcher, and optionally a release's `bin/`.
struct Tree {
    env: TestEnv,
    /// The package's root: the directory holding `scripts/loop-hook`.
    root: PathBuf,
    data: PathBuf,
    /// Directories put on PATH for the launcher, before the system's.
    path_dirs: Vec<PathBuf>,
    vars: Vec<(&'static str, String)>,
}

impl Tree {
    /// A package alone, as a host's install copies it: the launcher in `root_name` (which may
    /// hold odd characters), no `bin/SHA256SUMS`, no source tree around it.
    fn installed(root_name: &str) -> Tree {
        let env = TestEnv::new();
        let root = env.home.join(root_name);
        std::fs::create_dir_all(root.join("scripts")).unwrap();
        std::fs::copy(launcher_source(), root.join(LAUNCHER)).unwrap();
        let data = env.home.join("plugin-data");
        std::fs::create_dir_all(&data).unwrap();
        Tree { env, root, data, path_dirs: Vec::new(), vars: Vec::new() }
    }

    /// A checkout named `name`: a source tree (its `Cargo.toml`) with the package at
    /// `plugin/claude-code/`.
    fn checkout(name: &str) -> Tree {
        let tree = Tree::installed(&format!("{name}/{CLAUDE_PLUGIN}"));
        std::fs::write(tree.source().join("Cargo.toml"), "[workspace]\n").unwrap();
        tree
    }

    /// The source tree two levels above the package (a checkout's root, when it is one).
    fn source(&self) -> PathBuf {
        self.root.parent().and_then(Path::parent).unwrap().to_path_buf()
    }

    /// A release: the launcher, a stand-in binary (a script printing `SHIPPED`) under
    /// `bin/<platform>/`, and its checksum.
    fn release() -> Tree {
        let tree = Tree::installed("for-loop");
        Tree::plant(&tree.shipped(), "SHIPPED");
        tree.write_sums();
        tree
    }

    /// A release shipping the real `loop-hook`.
    fn release_of_loop_hook() -> Tree {
        let tree = Tree::release();
        std::fs::copy(env!("CARGO_BIN_EXE_loop-hook"), tree.shipped()).unwrap();
        tree.write_sums();
        tree
    }

    fn shipped(&self) -> PathBuf {
        self.root.join("bin").join(platform()).join("loop-hook")
    }

    fn write_sums(&self) {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(std::fs::read(self.shipped()).unwrap());
        let hex: String = digest.iter().fold(String::new(), |hex, b| hex + &format!("{b:02x}"));
        std::fs::write(self.root.join("bin/SHA256SUMS"), format!("{hex}  {}/loop-hook\n", platform()))
            .unwrap();
    }

    /// An executable script at `path` that prints `what` and the variables the launcher sets.
    fn plant(path: &Path, what: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            path,
            format!("#!/bin/sh\ncat >/dev/null\necho \"{what} $FOR_LOOP_BIN_SOURCE $FOR_LOOP_PLUGIN_VERSION $*\"\n"),
        )
        .unwrap();
        set_mode(path, 0o755);
    }

    fn launcher(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("/bin/sh");
        let mut path = std::env::split_paths(&path_without_loop_hook()).collect::<Vec<_>>();
        path.splice(0..0, self.path_dirs.iter().cloned());
        cmd.arg(self.root.join(LAUNCHER))
            .args(args)
            .env_clear()
            .env("HOME", &self.env.home)
            .env("PATH", std::env::join_paths(path).unwrap())
            .env("CLAUDE_PLUGIN_DATA", &self.data)
            .env("CLAUDE_CODE_SESSION_ID", crate::util::SESSION)
            .envs(self.vars.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(&self.env.project);
        cmd
    }

    fn run(&self, args: &[&str], stdin: &str) -> crate::util::Run {
        run_command(self.launcher(args), stdin.as_bytes())
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Appends to a file and moves its modification time past any stamp written before.
fn tamper(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes.extend_from_slice(b"tampered");
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_release_runs_its_shipped_binary_only_while_the_checksum_matches() {
    let tree = Tree::release_of_loop_hook();
    let status = tree.run(&["status"], "");
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    assert!(status.stdout.contains("(shipped with the plugin, SHA-256 verified)"), "{}", status.stdout);
    assert_eq!(status.stderr, "", "a first run, with nothing remembered yet, is silent");
    assert!(status.stdout.contains(&tree.shipped().display().to_string()), "{}", status.stdout);
    // Verified once, remembered: the next run needs no `uname` and no checksum tool at all.
    let remembered = std::fs::read_to_string(tree.data.join("for-loop-launcher")).unwrap();
    assert_eq!(remembered, format!("{}/scripts/..\n{}\n", tree.root.display(), platform()));
    let mut bare = tree.launcher(&["--version"]);
    bare.env("PATH", "");
    let run = run_command(bare, b"");
    assert_eq!(run.stdout.trim(), format!("loop-hook {}", env!("CARGO_PKG_VERSION")), "{}", run.stderr);

    // A host that gives hooks no data directory: the record goes next to the binaries.
    let mut no_data = tree.launcher(&["--version"]);
    no_data.env_remove("CLAUDE_PLUGIN_DATA");
    assert_eq!(run_command(no_data, b"").code, 0);
    let record = std::fs::read_to_string(tree.root.join("bin/.verified")).unwrap();
    assert_eq!(record, remembered);
    let mut bare = tree.launcher(&["--version"]);
    bare.env_remove("CLAUDE_PLUGIN_DATA").env("PATH", "");
    let run = run_command(bare, b"");
    assert_eq!(run.stdout.trim(), format!("loop-hook {}", env!("CARGO_PKG_VERSION")), "{}", run.stderr);

    // A memory that names anything but a known platform is not followed.
    std::fs::write(
        tree.data.join("for-loop-launcher"),
        format!("{}/scripts/..\n../../tmp\n", tree.root.display()),
    )
    .unwrap();
    assert!(tree.run(&["status"], "").stdout.contains("SHA-256 verified"));

    // Changed after it was verified: checked again, refused in one line, nothing trapped.
    tree.env.start("task --verify false");
    tamper(&tree.shipped());
    let refused = tree.run(&["status"], "");
    assert_eq!(refused.code, 0);
    assert_eq!(
        refused.stdout,
        format!(
            "for-loop: the shipped loop-hook binary for {} does not match its SHA-256 checksum, so it was not run. \
             Reinstall the plugin (claude plugin uninstall for-loop@for-loop, then claude plugin install for-loop@for-loop).\n",
            platform()
        )
    );
    let stop = tree.run(&["stop-hook"], "{}");
    assert_eq!(stop.code, 0);
    let message = stop.system_message();
    assert!(
        message.contains("does not match its SHA-256") && message.contains("This stop is allowed"),
        "{message}"
    );
    assert!(!stop.blocked());
    let guard = tree.run(&["guard"], "{}");
    assert_eq!((guard.code, guard.stdout.as_str()), (0, ""));
    // opencode's plugin runs the binary itself, never through the launcher.
    for (host, allow) in
        crate::hosts::PLAIN_ALLOW.iter().filter(|(h, _)| !matches!(*h, "claude-code" | "opencode"))
    {
        let run = tree.run(&["stop-hook", "--host", host], "{}");
        assert_eq!((run.code, run.stdout.trim_end()), (0, *allow), "{host}");
    }
}

#[test]
fn a_release_never_runs_a_binary_planted_in_its_tree_on_path_or_by_a_relative_override() {
    let mut tree = Tree::release();
    Tree::plant(&tree.root.join("target/release/loop-hook"), "PLANTED");
    Tree::plant(&tree.root.join("target/debug/loop-hook"), "PLANTED");
    let on_path = tree.env.home.join("on-path");
    Tree::plant(&on_path.join("loop-hook"), "PLANTED");
    tree.path_dirs.push(on_path);
    Tree::plant(&tree.env.project.join("planted/loop-hook"), "PLANTED");
    tree.vars.push(("FOR_LOOP_BIN", "planted/loop-hook".into()));
    // Run as a file, the launcher takes its root from its own path, never from the variable a
    // hook command sets when it sources it.
    let elsewhere = Tree::release();
    Tree::plant(&elsewhere.shipped(), "PLANTED");
    elsewhere.write_sums();
    tree.vars.push(("for_loop_launcher", elsewhere.root.join(LAUNCHER).display().to_string()));
    let run = tree.run(&["status"], "");
    assert_eq!(run.stdout, format!("SHIPPED shipped {} status\n", env!("CARGO_PKG_VERSION")));
    // With the shipped binary refused, nothing else stands in for it.
    tamper(&tree.shipped());
    let run = tree.run(&["status"], "");
    assert!(run.stdout.starts_with("for-loop: the shipped loop-hook binary"), "{}", run.stdout);
    assert!(!run.stdout.contains("PLANTED"));
}

#[test]
fn cargo_install_and_a_checkout_build_win_and_get_the_plugin_version() {
    let version = env!("CARGO_PKG_VERSION");
    let mut tree = Tree::release();
    let cargo_home = tree.env.home.join("cargo");
    Tree::plant(&cargo_home.join("bin/loop-hook"), "CARGO");
    tree.vars.push(("CARGO_HOME", cargo_home.display().to_string()));
    assert_eq!(tree.run(&["status"], "").stdout, format!("CARGO cargo {version} status\n"));
    tree.vars.push(("FOR_LOOP_BIN", tree.env.home.join("override").display().to_string()));
    Tree::plant(&tree.env.home.join("override"), "OVERRIDE");
    assert_eq!(tree.run(&["status"], "").stdout, format!("OVERRIDE FOR_LOOP_BIN {version} status\n"));

    let checkout = Tree::checkout("for-loop");
    Tree::plant(&checkout.source().join("target/debug/loop-hook"), "DEBUG");
    assert_eq!(checkout.run(&["x"], "").stdout, format!("DEBUG checkout {version} x\n"));
    Tree::plant(&checkout.source().join("target/release/loop-hook"), "RELEASE");
    assert_eq!(checkout.run(&["x"], "").stdout, format!("RELEASE checkout {version} x\n"));
}

/// A plugin installed from a checkout is a copy of its package alone: it runs what `cargo
/// install` put in `~/.cargo/bin`, never a `target/` inside it or beside the copy, and without
/// that binary it says how to install one rather than run a build it happens to sit near.
#[test]
fn an_installed_plugin_runs_cargo_installs_binary_not_a_build_near_it() {
    let version = env!("CARGO_PKG_VERSION");
    let tree = Tree::installed("plugins/cache/for-loop/for-loop/0.1.0");
    Tree::plant(&tree.root.join("target/release/loop-hook"), "COPIED");
    Tree::plant(&tree.source().join("target/release/loop-hook"), "BESIDE");
    let run = tree.run(&["status"], "");
    assert!(run.stdout.starts_with("for-loop: the loop-hook binary is not installed."), "{}", run.stdout);
    Tree::plant(&tree.env.home.join(".cargo/bin/loop-hook"), "CARGO");
    assert_eq!(tree.run(&["status"], "").stdout, format!("CARGO cargo {version} status\n"));
    // The same copy inside a source tree would be a checkout: the marker is what decides.
    std::fs::write(tree.source().join("Cargo.toml"), "[workspace]\n").unwrap();
    assert_eq!(tree.run(&["status"], "").stdout, format!("BESIDE checkout {version} status\n"));
}

#[test]
fn a_checkout_takes_path_last_and_never_from_the_project() {
    let mut tree = Tree::checkout("for-loop");
    let in_project = tree.env.project.join("node_modules/.bin");
    Tree::plant(&in_project.join("loop-hook"), "PROJECT");
    tree.path_dirs.push(in_project);
    let run = tree.run(&["status"], "");
    assert!(run.stdout.starts_with("for-loop: the loop-hook binary is not installed."), "{}", run.stdout);
    let elsewhere = tree.env.home.join("bin");
    Tree::plant(&elsewhere.join("loop-hook"), "ELSEWHERE");
    tree.path_dirs.push(elsewhere);
    assert_eq!(
        tree.run(&["status"], "").stdout,
        format!("ELSEWHERE PATH {} status\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_platform_without_a_binary_is_refused_in_one_line() {
    let tree = Tree::release();
    std::fs::write(tree.root.join("bin/SHA256SUMS"), "00  plan9-mips/loop-hook\n").unwrap();
    let run = tree.run(&["status"], "");
    assert_eq!(run.code, 0);
    assert_eq!(
        run.stdout,
        format!(
            "for-loop: this plugin ships no loop-hook binary for {}. Build one with `cargo install --locked \
             --path <a for-loop checkout>` (needs Rust), then try again.\n",
            platform()
        )
    );
}

#[test]
fn a_verified_binary_that_lost_its_executable_bit_still_runs() {
    let tree = Tree::release();
    set_mode(&tree.shipped(), 0o644);
    let run = tree.run(&["--version"], "");
    assert_eq!(
        run.stdout,
        format!("SHIPPED shipped {} --version\n", env!("CARGO_PKG_VERSION")),
        "{}",
        run.stderr
    );
}

/// No binary anywhere, in a plugin directory whose name holds a quote, a backslash and a space:
/// every command says how to install in one line, every hook lets the stop happen, and the Claude
/// Code Stop hook of a session with a loop says why in valid JSON.
#[test]
fn without_any_binary_hooks_allow_and_commands_say_how_to_install() {
    let tree = Tree::checkout("odd \"name\" \\ dir");
    tree.env.start("task --verify false");
    let run = tree.run(&["start"], "task");
    assert_eq!(run.code, 0);
    assert!(
        run.stdout.starts_with(
            "for-loop: the loop-hook binary is not installed. Install it once with: cargo install"
        )
    );
    assert_eq!(run.stdout.lines().count(), 1);
    let stop = tree.run(&["stop-hook"], "{}");
    assert_eq!(stop.code, 0);
    assert!(stop.system_message().contains("This stop is allowed"), "{}", stop.stdout);
    let mut other_session = tree.launcher(&["stop-hook"]);
    other_session.env("CLAUDE_CODE_SESSION_ID", "another-session");
    assert_eq!(run_command(other_session, b"{}").stdout, "");
    // opencode's plugin runs the binary itself, never through the launcher.
    for (host, allow) in
        crate::hosts::PLAIN_ALLOW.iter().filter(|(h, _)| !matches!(*h, "claude-code" | "opencode"))
    {
        let run = tree.run(&["stop-hook", "--host", host], "{}");
        assert_eq!((run.code, run.stdout.trim_end()), (0, *allow), "{host}");
    }
    for hook in ["guard", "prompt-hook"] {
        let run = tree.run(&[hook], "{}");
        assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{hook}");
    }
}

// ---------------------------------------------------------------------------------------------
// The generated hook commands, run the way each host runs them.

/// Each host's hook command, with the host's own substitutions, run by the host's shell from
/// `package` (a copy of the host's package directory): `(host, program, args, payload fixture)`.
fn host_hook(host: &str, package: &Path) -> (Command, &'static str) {
    let config = |path: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(package.join(path)).unwrap()).unwrap()
    };
    let text = |value: &Value| value.as_str().unwrap().to_string();
    let root = package.to_str().unwrap();
    let shell = |shell: &str, command: String| {
        let mut cmd = Command::new(shell);
        cmd.args(["-c", &command]);
        cmd
    };
    match host {
        "claude-code" => {
            let mut cmd =
                shell("bash", text(&config("hooks/hooks.json")["hooks"]["Stop"][0]["hooks"][0]["command"]));
            cmd.env("CLAUDE_PLUGIN_ROOT", root);
            // Claude Code's Stop has the shape Codex's recorded one has.
            (cmd, "codex/0.169.0-stop.json")
        }
        "codex" => (
            // Codex substitutes ${PLUGIN_ROOT} itself, then runs `$SHELL -lc`.
            shell(
                "bash",
                text(&config("hooks/hooks.json")["hooks"]["Stop"][0]["hooks"][0]["command"])
                    .replace("${PLUGIN_ROOT}", root),
            ),
            "codex/0.169.0-stop.json",
        ),
        "gemini-cli" => (
            shell(
                "bash",
                text(&config("hooks/hooks.json")["hooks"]["AfterAgent"][0]["hooks"][0]["command"])
                    .replace("${extensionPath}", root)
                    .replace("${/}", "/"),
            ),
            "gemini-cli/0.61.0-after-agent.json",
        ),
        "cursor" => {
            let mut cmd = shell("sh", text(&config("hooks/hooks.json")["hooks"]["stop"][0]["command"]));
            cmd.env("CURSOR_PLUGIN_ROOT", root);
            (cmd, "cursor/3.17.19-stop-completed.json")
        }
        "copilot-cli" => (
            shell("bash", text(&config("for-loop.json")["hooks"]["agentStop"][0]["bash"])),
            "copilot-cli/1.0.41-agent-stop.json",
        ),
        "antigravity" => (Command::new(package.join("hooks/stop-hook")), "antigravity/2.0-docs-stop.json"),
        "qwen-code" => {
            // Qwen Code substitutes ${CLAUDE_PLUGIN_ROOT} itself (0.24.4), then runs `bash -c`.
            let command = text(&config("hooks/hooks.json")["hooks"]["Stop"][0]["hooks"][0]["command"]);
            (shell("bash", command.replace("${CLAUDE_PLUGIN_ROOT}", root)), "qwen-code/0.24.4-stop.json")
        }
        other => panic!("{other}"),
    }
}

/// The hook of every host runs the binary for its host from a package that was copied elsewhere
/// (as every host's install does), answers the host's plain allow without any binary, and still
/// exits 0 with that answer when the package has lost its launcher.
#[test]
fn every_hosts_hook_command_runs_the_hook_for_its_host() {
    let hosts = ["claude-code", "codex", "gemini-cli", "cursor", "copilot-cli", "antigravity", "qwen-code"];
    for host in hosts {
        let env = TestEnv::new();
        let package = env.home.join("installed copy");
        let source = repo().join("plugin").join(host);
        std::fs::create_dir_all(&package).unwrap();
        for dir in ["hooks", "scripts", "commands"] {
            if source.join(dir).is_dir() {
                copy_dir(&source.join(dir), &package.join(dir));
            }
        }
        for file in ["for-loop.json"] {
            if source.join(file).is_file() {
                std::fs::copy(source.join(file), package.join(file)).unwrap();
            }
        }
        let session = "fixture-session-0001";
        // Within Qwen Code's default cap of 8 blocks in a row, which a longer loop is refused for.
        env.run(
            &["start", "--session", session, "--host", host],
            "wrapped task --verify false --max-iterations 5",
        );
        let (_, fixture) = host_hook(host, &package);
        let stdin = crate::hosts::payload(&env, session, &crate::hosts::fixtures().join(fixture));
        let run = |bin: Option<&str>| {
            let (mut cmd, _) = host_hook(host, &package);
            cmd.env("HOME", &env.home).env("CLAUDE_CODE_SESSION_ID", session).current_dir(&env.project);
            match bin {
                Some(bin) => cmd.env("PATH", path_without_loop_hook()).env("FOR_LOOP_BIN", bin),
                None => cmd.env("PATH", "/usr/bin:/bin").env_remove("FOR_LOOP_BIN"),
            };
            run_command(cmd, &stdin)
        };
        let held = run(Some(env!("CARGO_BIN_EXE_loop-hook")));
        assert_eq!(held.code, 0, "{host}: {}", held.stderr);
        assert!(held.stdout.contains("wrapped task"), "{host}: {}{}", held.stdout, held.stderr);
        let allow = crate::hosts::PLAIN_ALLOW.iter().find(|(h, _)| *h == host).unwrap().1;
        let without = run(None);
        assert_eq!(without.code, 0, "{host}: {}", without.stderr);
        if host == "claude-code" {
            // A session with a loop hears why its stop was let through.
            assert!(without.system_message().contains("not installed"), "{}", without.stdout);
        } else {
            assert_eq!(without.stdout.trim_end(), allow, "{host} without a binary");
        }
        if !package.join("scripts").exists() {
            continue; // Copilot CLI's hook file stands alone: it has no launcher to lose.
        }
        std::fs::remove_dir_all(package.join("scripts")).unwrap();
        let broken = run(Some(env!("CARGO_BIN_EXE_loop-hook")));
        assert_eq!(
            (broken.code, broken.stdout.trim_end()),
            (0, allow),
            "{host} without its launcher: {}",
            broken.stderr
        );
    }
}

/// Gemini CLI's session map: `SessionStart` records this CLI process's session and drops the
/// records of processes that are gone (a reused process id then finds nothing stale);
/// `SessionEnd` removes the process's own record.
#[test]
fn gemini_session_records_are_swept_and_removed() {
    let env = TestEnv::new();
    let hooks: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("plugin/gemini-cli/hooks/hooks.json")).unwrap(),
    )
    .unwrap();
    let command = |event: &str| hooks["hooks"][event][0]["hooks"][0]["command"].as_str().unwrap().to_string();
    let records = env.store().join("gemini-sessions");
    std::fs::create_dir_all(&records).unwrap();
    // A process that is gone, and a name that is no process at all.
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    std::fs::write(records.join(gone_pid.to_string()), "old-session").unwrap();
    std::fs::write(records.join("junk"), "x").unwrap();
    // A live process's record stays.
    let mut live = Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(records.join(live.id().to_string()), "live-session").unwrap();

    // `bash -c` from a parent shell whose pid plays the CLI's.
    let hook = |event: &str| {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", &format!("bash -c {} </dev/null; echo $$", shell_quote(&command(event)))])
            .env("HOME", &env.home)
            .env("GEMINI_SESSION_ID", "new-session");
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let pid = text.lines().last().unwrap().to_string();
        (text, pid)
    };
    let (out, cli_pid) = hook("SessionStart");
    assert!(out.starts_with("{}"), "{out}");
    let mut names: Vec<String> =
        std::fs::read_dir(&records).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let mut expected = vec![live.id().to_string(), cli_pid.clone()];
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(std::fs::read_to_string(records.join(&cli_pid)).unwrap(), "new-session");
    let _ = live.kill();
    let _ = live.wait();

    let mut end = Command::new("bash");
    end.args([
        "-c",
        &format!(
            "printf s > {dir}/$$; bash -c {} </dev/null; echo $$; ls {dir}",
            shell_quote(&command("SessionEnd")),
            dir = records.display()
        ),
    ])
    .env("HOME", &env.home);
    let listed = String::from_utf8_lossy(&end.output().unwrap().stdout).into_owned();
    let mut lines = listed.lines().skip(1);
    let ended = lines.next().unwrap().to_string();
    assert!(!lines.any(|l| l == ended), "the ending process's record was kept: {listed}");
    assert!(records.join(&cli_pid).exists(), "another process's record was removed");
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

// ---------------------------------------------------------------------------------------------
// Versions.

/// The crate, the Claude Code plugin and its marketplace entry, every host package and the
/// launcher carry one version (the release workflow also checks the tag against it).
#[test]
fn every_manifest_carries_the_crate_version() {
    let version = env!("CARGO_PKG_VERSION");
    let json = |path: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(repo().join(path)).unwrap()).unwrap()
    };
    assert_eq!(json("plugin/claude-code/.claude-plugin/plugin.json")["version"], version);
    assert_eq!(json(".claude-plugin/marketplace.json")["plugins"][0]["version"], version);
    assert_eq!(json("plugin/codex/.codex-plugin/plugin.json")["version"], version);
    assert_eq!(json("plugin/cursor/.cursor-plugin/plugin.json")["version"], version);
    assert_eq!(json("plugin/gemini-cli/gemini-extension.json")["version"], version);
    assert_eq!(json("plugin/qwen-code/qwen-extension.json")["version"], version);
    let launcher = std::fs::read_to_string(launcher_source()).unwrap();
    assert!(
        launcher.contains(&format!("\nplugin_version={version}\n")),
        "scripts/loop-hook's plugin_version"
    );
    let powershell = std::fs::read_to_string(repo().join(POWERSHELL_LAUNCHER)).unwrap();
    assert!(
        powershell.contains(&format!("\n$pluginVersion = '{version}'\n")),
        "scripts/loop-hook.ps1's $pluginVersion"
    );
}
