//! The `PreToolUse` guard: while a loop runs, the agent's tools may not change the loop's oracle
//! (the files verify runs, the `--protect` paths), the loop's own files, for-loop's plugin and
//! binary, or the host's settings; may not run loop-hook's commands that change a loop or stand
//! in for the host; and may not schedule a for-loop command as a later prompt.
//!
//! Shell commands are read as the shell would read them, as far as that is known before they run
//! ([`shell_command`]): quotes removed (`can''cel`), variables and `~` expanded from the hook's
//! environment, `cd` followed, `sh -c`, `eval`, `xargs`, `find -exec` and wrappers like `env` or
//! `timeout` looked through, and a copy of loop-hook under another name known by its content.
//! Interpreter code (`python -c`, `node -e`, a heredoc script) is refused when it names those
//! files and writes, deletes or runs anything. A command that merely runs the check after an
//! honest edit (`sed -i ... calc.sh && ./check.sh`) is not an edit of the check.
//!
//! Honest scope: this is a convenience that refuses the common ways a model games a loop, with a
//! reason it can act on. It is not a boundary: code can build any path at run time, and a process
//! running as the same user can reach any file. The boundaries are the host's sandbox (strict
//! tier) and, in the default tier, tamper evidence that is never silent: the oracle fingerprint,
//! the state and ledger checks, and the origin of every change to a loop ([`crate::provenance::origin`]).
//!
//! A protected oracle file is guarded only while it is intact. Once it has changed anyway, writes
//! are allowed so that the agent can restore it, which the re-injected prompt asks it to do.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::checks::Oracle;
use crate::hook::shell_command::{self, SimpleCommand};
use crate::host::UserCommand;
use crate::host::{Fields, event};
use crate::state::LoopState;
use crate::store::Store;
use crate::support::Environment;

/// Commands that write, move or delete every file they name.
const WRITES_ALL: &[&str] = &[
    "rm", "rmdir", "unlink", "shred", "truncate", "touch", "chmod", "chown", "chgrp", "chattr", "setfacl",
    "mv", "tee", "patch", "mkdir", "mkfifo",
];
/// Commands that write the last file they name (the rest are read).
const WRITES_LAST: &[&str] = &["cp", "install", "ln", "rsync", "ditto", "scp"];
/// Commands that copy what they read, so a copy of the binary starts with one of these.
const COPIES: &[&str] =
    &["cp", "install", "ln", "rsync", "ditto", "dd", "cat", "tee", "tar", "zip", "base64", "mv"];
/// Commands that run the rest of their words as another command.
const WRAPPERS: &[&str] = &[
    "env",
    "exec",
    "nohup",
    "command",
    "builtin",
    "sudo",
    "doas",
    "time",
    "nice",
    "ionice",
    "timeout",
    "stdbuf",
    "setsid",
    "chronic",
    "xargs",
    "flock",
    "unbuffer",
    "watch",
    "strace",
    "ltrace",
    "caffeinate",
    "chrt",
    "taskset",
];
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "fish", "busybox"];
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "node",
    "nodejs",
    "perl",
    "ruby",
    "php",
    "deno",
    "bun",
    "lua",
    "Rscript",
    "osascript",
    "pwsh",
    "tclsh",
    "awk",
    "gawk",
];
/// loop-hook subcommands the agent must not run: they change a loop, or stand in for the host.
/// `strict` writes the host's settings, which are the user's to change.
const LOOP_COMMANDS: &[&str] =
    &["cancel", "start", "resume", "rollback", "prompt-hook", "stop-hook", "stop", "strict"];
/// Code that writes, moves, deletes or runs, in the interpreters above.
const CODE_WRITES: &[&str] = &[
    "write",
    "remove",
    "unlink",
    "rmtree",
    "rename",
    "replace",
    "copy",
    "move",
    "chmod",
    "truncate",
    "rmdir",
    "rmSync",
    "rm(",
    "symlink",
    "system",
    "subprocess",
    "spawn",
    "exec",
    "Popen",
    "FileUtils",
    "'w'",
    "\"w\"",
    "'a'",
    "\"a\"",
    "'wb'",
    "\"wb\"",
    "'x'",
    "`",
];
/// Text that names for-loop's own files in code, whatever the paths are on this machine.
const CODE_NAMES: &[&str] = &[
    "for-loop/sessions",
    "state/for-loop",
    "FOR_LOOP_HOME",
    "FOR_LOOP_BIN",
    "CLAUDE_PLUGIN_ROOT",
    "CLAUDE_PLUGIN_DATA",
    "settings.json",
    "settings.local.json",
    "hooks.json",
    "loop-hook",
];

/// Handles one Claude Code `PreToolUse` event; returns what to print (empty: no objection).
pub(crate) fn run(env: &Environment, stdin: impl Read) -> String {
    let Ok(bytes) = event::read_bounded(stdin) else { return String::new() };
    let Ok(object) = event::parse_object(&bytes) else { return String::new() };
    // opencode's plugin passes its `tool.execute.before`, read as the same event; it reads a
    // denial as `deny` and a line for the user as `message`.
    let opencode = crate::host::opencode_tool_call(&object);
    let from_opencode = opencode.is_some();
    let object = opencode.unwrap_or(object);
    // Claude Code's `ConfigChange` comes through the guard's command line too (issue 32).
    if object.get("hook_event_name").and_then(Value::as_str) == Some(crate::hook::config_change::EVENT) {
        return crate::hook::config_change::run(env, &object);
    }
    let Some((store, paths, state)) = running_loop(env, &Fields(&object)) else { return String::new() };
    // The user hears of hooks being switched off at the first tool call after it.
    let told = crate::hook::guard_host_config::notice(env, &paths, &state);
    let mut answer = Map::new();
    let objection = objection(env, &object, &store, &state);
    if from_opencode {
        let pairs = objection.map(|r| ("deny", Value::String(r))).into_iter();
        return crate::host::object_line(pairs.chain(told.map(|t| ("message", Value::String(t)))));
    }
    if let Some(reason) = objection {
        answer.insert(
            "hookSpecificOutput".into(),
            json!({
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }),
        );
    }
    if let Some(told) = told {
        answer.insert("systemMessage".into(), Value::String(told));
    }
    if answer.is_empty() { String::new() } else { Value::Object(answer).to_string() }
}

/// The session's running loop, as last committed. A state made unreadable, edited or deleted does
/// not switch the guard off: it guards the loop from the state's last good copy.
fn running_loop(
    env: &Environment,
    fields: &Fields<'_>,
) -> Option<(Store, crate::store::LoopPaths, LoopState)> {
    if fields.string("hook_event_name").ok()?.as_deref() != Some("PreToolUse") {
        return None;
    }
    let session_id = fields.required_string("session_id").ok()?;
    let store = Store::locate(env).ok()?;
    let paths = store.paths(&session_id);
    let armed = paths.armed.as_ref().is_some_and(|armed| armed.exists());
    if !paths.state.exists() && !armed {
        return None;
    }
    let state = crate::store::custody::trusted_state(&paths).ok()??;
    (state.is_active() && state.is_owned_by(&session_id)).then_some((store, paths, state))
}

/// Why the tool call must not run, if it must not. Any doubt on our side lets it run.
fn objection(
    env: &Environment,
    object: &Map<String, Value>,
    store: &Store,
    state: &LoopState,
) -> Option<String> {
    let fields = Fields(object);
    let cwd = fields.string("cwd").ok()?.map_or_else(|| state.meta.cwd.clone(), PathBuf::from);
    let tool = fields.string("tool_name").ok()??;
    let input = object.get("tool_input")?.as_object()?;
    let protected = Protected::of(env, store.root(), &cwd);
    let guard = Guard { state, cwd: &cwd, env, protected: &protected };
    if state.meta.host.offers_strict_tier()
        && crate::checks::sandbox::sandbox_settings(env, &state.meta.cwd, store.root()).is_ok()
        && let Some(reason) = strict_objection(state, &cwd, &tool, input)
    {
        return Some(reason);
    }
    match tool.as_str() {
        "Write" | "Edit" | "MultiEdit" => guard.file(input.get("file_path")?.as_str()?),
        "NotebookEdit" => guard.file(input.get("notebook_path")?.as_str()?),
        "Bash" => guard.shell(input.get("command")?.as_str()?, 0),
        // Qwen Code's file and shell tools (0.24.4), which take the same inputs.
        "write_file" | "edit" => guard.file(input.get("file_path")?.as_str()?),
        "run_shell_command" => guard.shell(input.get("command")?.as_str()?, 0),
        "Read" | "Grep" | "Glob" | "LS" => None,
        // A prompt the agent schedules (ScheduleWakeup, CronCreate, a /loop) or sends is
        // submitted later as if typed: none may be a for-loop command.
        _ => names_a_user_command(&Value::Object(input.clone())).then(scheduled_command_reason),
    }
}

/// What the strict tier also refuses while a loop runs: file tools writing outside the project
/// (they are governed by permissions, not by the sandbox: a `.pth` file in site-packages or a
/// program on PATH would run outside it), shell commands asking to leave the sandbox, and
/// background commands, which keep running across the stop and could swap files while verify
/// runs.
fn strict_objection(state: &LoopState, cwd: &Path, tool: &str, input: &Map<String, Value>) -> Option<String> {
    let project = normalize(&state.meta.cwd);
    let path_field = match tool {
        "Write" | "Edit" | "MultiEdit" => "file_path",
        "NotebookEdit" => "notebook_path",
        "Bash" => {
            if input.get("dangerouslyDisableSandbox") == Some(&Value::Bool(true)) {
                return Some(
                    "for-loop (strict mode): commands may not leave the sandbox while the loop runs. \
                     Run it inside the sandbox; if it cannot work there, say so and let the user decide."
                        .into(),
                );
            }
            if input.get("run_in_background") == Some(&Value::Bool(true)) {
                return Some(
                    "for-loop (strict mode): background commands are not allowed while the loop runs: \
                     they keep running across the stop and could change files while verify runs. Run \
                     it in the foreground, with a timeout if it is long."
                        .into(),
                );
            }
            return None;
        }
        _ => return None,
    };
    let target = normalize(&cwd.join(input.get(path_field)?.as_str()?));
    (!target.starts_with(&project)).then(|| {
        format!(
            "for-loop (strict mode): {} is outside the project ({}); while the loop runs, files are \
             written only inside it. Keep your changes in the project.",
            target.display(),
            project.display()
        )
    })
}

/// What the agent may not write: for-loop's files, its binary, and the host's settings.
struct Protected {
    /// Each protected path, with what it is (for the reason given to the model).
    paths: Vec<(PathBuf, &'static str)>,
}

impl Protected {
    fn of(env: &Environment, store_root: &Path, cwd: &Path) -> Protected {
        let mut paths = vec![(store_root.to_path_buf(), STORE)];
        let var = |name: &str| env.var(name).map(PathBuf::from);
        for (name, what) in
            [("CLAUDE_PLUGIN_ROOT", PLUGIN), ("CLAUDE_PLUGIN_DATA", PLUGIN), ("FOR_LOOP_BIN", BINARY)]
        {
            paths.extend(var(name).map(|p| (p, what)));
        }
        paths.extend(std::env::current_exe().ok().map(|p| (p, BINARY)));
        let cargo = var("CARGO_HOME").or_else(|| var("HOME").map(|h| h.join(".cargo")));
        paths.extend(cargo.map(|c| (c.join("bin/loop-hook"), BINARY)));
        let mut projects = vec![cwd.to_path_buf()];
        projects.extend(var("CLAUDE_PROJECT_DIR"));
        for project in projects {
            for file in ["settings.json", "settings.local.json"] {
                paths.push((project.join(".claude").join(file), SETTINGS));
            }
        }
        let config = var("CLAUDE_CONFIG_DIR").or_else(|| var("HOME").map(|h| h.join(".claude")));
        paths.extend(config.map(|c| (c.join("settings.json"), SETTINGS)));
        // opencode loads for-loop's plugin from its config folder, and a setting there can
        // name other plugins or switch tools off.
        let xdg = var("XDG_CONFIG_HOME").filter(|dir| dir.is_absolute());
        if let Some(opencode) =
            xdg.or_else(|| var("HOME").map(|h| h.join(".config"))).map(|c| c.join("opencode"))
        {
            for plugin in ["plugins/for-loop.js", "plugin/for-loop.js"] {
                paths.push((opencode.join(plugin), PLUGIN));
            }
            for config in ["opencode.json", "opencode.jsonc", "config.json"] {
                paths.push((opencode.join(config), SETTINGS));
            }
        }
        Protected { paths }
    }

    /// What `path` would touch if written: a protected path it is, is inside, or (when `deep`,
    /// as for `rm -r`) contains.
    fn touched(&self, path: &Path, deep: bool) -> Option<&'static str> {
        let path = normalize(path);
        if is_host_settings(&path) {
            return Some(SETTINGS);
        }
        self.paths.iter().find_map(|(protected, what)| {
            let protected = normalize(protected);
            // Below a path, only what exists can be deleted with it.
            let below = deep && protected.starts_with(&path) && protected.exists();
            (path.starts_with(&protected) || below).then_some(*what)
        })
    }
}

const STORE: &str = "the loop's own files";
const PLUGIN: &str = "for-loop's plugin files";
const BINARY: &str = "for-loop's binary";
const SETTINGS: &str = "the host's settings, which decide which hooks run";

/// `.claude/settings.json` and `.claude/settings.local.json` wherever they are.
fn is_host_settings(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str());
    let parent = path.parent().and_then(Path::file_name).and_then(|n| n.to_str());
    matches!(name, Some("settings.json" | "settings.local.json")) && parent == Some(".claude")
}

/// `path` without `.` and `..` components, and with symbolic links resolved where it exists.
fn normalize(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    // The parent may exist even if the file does not (yet).
    match (out.parent().and_then(|p| p.canonicalize().ok()), out.file_name()) {
        (Some(parent), Some(name)) => parent.join(name),
        _ => out,
    }
}

#[derive(Clone, Copy)]
struct Guard<'a> {
    state: &'a LoopState,
    cwd: &'a Path,
    env: &'a Environment,
    protected: &'a Protected,
}

impl Guard<'_> {
    fn file(&self, path: &str) -> Option<String> {
        let path = self.cwd.join(path);
        if let Some(what) = self.protected.touched(&path, false) {
            return Some(protected_reason(what));
        }
        self.intact_oracle_file(&path, false).map(|shown| oracle_reason(&shown))
    }

    /// Why the shell command `line` must not run. `depth` bounds `sh -c` inside `sh -c`.
    fn shell(&self, line: &str, depth: usize) -> Option<String> {
        let lookup = |name: &str| self.env.var(name).map(str::to_string);
        let commands = shell_command::parse(line, &lookup, self.env.var("HOME"));
        if commands.iter().any(|c| c.words.first().is_some_and(|w| INTERPRETERS.contains(&base(w))))
            && let Some(reason) = self.code(line)
        {
            return Some(reason);
        }
        // `cd DIR && rm -rf x` removes DIR/x: later commands run where `cd` went.
        let mut cwd = self.cwd.to_path_buf();
        for command in &commands {
            let here = Guard { cwd: &cwd, ..*self };
            if let Some(reason) = here.simple(command, depth) {
                return Some(reason);
            }
            if let [cd, dir, ..] = command.words.as_slice()
                && cd == "cd"
            {
                cwd = cwd.join(dir);
            }
        }
        None
    }

    fn simple(&self, command: &SimpleCommand, depth: usize) -> Option<String> {
        for target in &command.writes {
            if let Some(reason) = self.written(target, false) {
                return Some(reason);
            }
        }
        let words = unwrap(&command.words);
        let program = base(words.first()?);
        let args = &words[1..];
        if SHELLS.contains(&program) || program == "eval" {
            if let Some(at) = args.iter().position(|a| a == "-c") {
                return (depth < 4)
                    .then(|| args.get(at + 1).and_then(|inner| self.shell(inner, depth + 1)))?;
            }
            if program == "eval" {
                return (depth < 4).then(|| self.shell(&args.join(" "), depth + 1))?;
            }
            // `sh FILE ARGS`: the file is the program.
            return self.runs_loop_hook(args).then(loop_command_reason);
        }
        if self.runs_loop_hook(&words) || sends_an_opencode_command(program, args) {
            return Some(loop_command_reason());
        }
        if COPIES.contains(&program) && args.iter().any(|a| self.is_loop_hook(a)) {
            return Some(protected_reason(BINARY));
        }
        if program == "find" {
            return self.find(args, depth);
        }
        let operands: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        let written: Vec<&String> = if WRITES_ALL.contains(&program) {
            operands
        } else if WRITES_LAST.contains(&program) {
            let target = args.iter().position(|a| a == "-t").and_then(|at| args.get(at + 1));
            target.or_else(|| operands.last().copied()).into_iter().collect()
        } else if program == "dd" {
            return args
                .iter()
                .filter_map(|a| a.strip_prefix("of="))
                .find_map(|target| self.written(target, false));
        } else if (matches!(program, "sed" | "perl" | "ruby")
            && args.iter().any(|a| a.starts_with("-i") || a.starts_with("-pi")))
            || (program == "git"
                && args.first().is_some_and(|a| {
                    matches!(a.as_str(), "checkout" | "restore" | "rm" | "mv" | "stash" | "reset" | "clean")
                }))
        {
            // The first operand is the script (sed, perl) or the subcommand (git).
            operands.into_iter().skip(1).collect()
        } else {
            Vec::new()
        };
        let deep = matches!(program, "rm" | "rmdir" | "mv" | "chmod" | "chown" | "chgrp" | "shred" | "git");
        written.into_iter().find_map(|target| self.written(target, deep))
    }

    /// `find START... -delete` or `-exec CMD` : the start directories are changed, and the
    /// command it runs is checked like any other.
    fn find(&self, args: &[String], depth: usize) -> Option<String> {
        let starts: Vec<&String> =
            args.iter().take_while(|a| !a.starts_with('-') && *a != "(" && *a != "!").collect();
        let deletes = args.iter().any(|a| a == "-delete");
        let mut reason = None;
        for (at, arg) in args.iter().enumerate() {
            if matches!(arg.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                let inner: Vec<String> =
                    args[at + 1..].iter().take_while(|a| *a != ";" && *a != "+").cloned().collect();
                let runs = SimpleCommand { words: inner.clone(), writes: Vec::new() };
                reason = reason.or_else(|| self.simple(&runs, depth + 1));
                let program = inner.first().map_or("", |w| base(w));
                if WRITES_ALL.contains(&program) || WRITES_LAST.contains(&program) || program == "sed" {
                    reason = reason.or_else(|| starts.iter().find_map(|s| self.protected_below(s)));
                }
            }
        }
        if deletes {
            reason = reason.or_else(|| starts.iter().find_map(|s| self.protected_below(s)));
        }
        reason
    }

    /// Why a `find` that deletes below `start` is refused: when for-loop's files are there. Its
    /// tests are not evaluated, so `find . -name '*.pyc' -delete` is not taken for a delete of
    /// the check; if the check goes anyway, the fingerprint sees it at the next stop.
    fn protected_below(&self, start: &str) -> Option<String> {
        self.protected.touched(&self.cwd.join(start), true).map(protected_reason)
    }

    /// Why writing `target` is refused, if it is. `deep`: the command also changes what is
    /// below `target` (a recursive delete).
    fn written(&self, target: &str, deep: bool) -> Option<String> {
        let path = self.cwd.join(target);
        if let Some(what) = self.protected.touched(&path, deep) {
            return Some(protected_reason(what));
        }
        self.intact_oracle_file(&path, deep).map(|shown| oracle_reason(&shown))
    }

    /// Whether `words` run loop-hook (by name, or a file that is loop-hook) with a command that
    /// changes a loop.
    fn runs_loop_hook(&self, words: &[String]) -> bool {
        let Some(program) = words.first() else { return false };
        words[1..].iter().any(|w| LOOP_COMMANDS.contains(&w.as_str())) && self.is_loop_hook(program)
    }

    /// Whether `word` names loop-hook: by its name, or as a file whose content is loop-hook's (a
    /// copy under another name).
    fn is_loop_hook(&self, word: &str) -> bool {
        if word.contains("loop-hook") || word.contains("FOR_LOOP_BIN") {
            return true;
        }
        let path = self.cwd.join(word);
        if self.protected.touched(&path, false) == Some(BINARY) {
            return true;
        }
        // Only an executable file can be run as a program: others are not read at all.
        let executable = std::fs::metadata(&path).is_ok_and(|m| m.is_file() && is_executable(&m));
        let script = words_of_a_shell(&path);
        if !executable && !script {
            return false;
        }
        file_contains(&path, &[b"loop-hook: the engine of for-loop", b"Finds the loop-hook binary"])
    }

    /// Interpreter code (`python -c`, `node -e`, a heredoc script) that names for-loop's files,
    /// binary or the host's settings and writes, deletes or runs something.
    fn code(&self, line: &str) -> Option<String> {
        let line = &without_saved_originals(line);
        let names_protected = CODE_NAMES.iter().any(|name| line.contains(name))
            || self.protected.paths.iter().any(|(p, _)| line.contains(p.to_string_lossy().as_ref()));
        (names_protected && CODE_WRITES.iter().any(|w| line.contains(w))).then(|| {
            "for-loop: this code names for-loop's own files, its binary or the host's settings, and \
             writes, deletes or runs something: those are not yours to change or run while the loop \
             runs. Keep working on the task; the user ends the loop with /cancel-loop."
                .to_string()
        })
    }

    /// The oracle file `path` names, relative to the loop's directory, if it is intact (or
    /// would be newly added under a protected path). `deep`: also when `path` is a directory
    /// holding one.
    fn intact_oracle_file(&self, path: &Path, deep: bool) -> Option<String> {
        let oracle: &Oracle = &self.state.meta.oracle;
        let loop_dir = &self.state.meta.cwd;
        // One file's digest each, not a walk of every protected path at every tool call.
        let intact = |relative: &str| !oracle.is_changed(loop_dir, relative);
        if oracle.covers(loop_dir, path) {
            let relative = crate::support::text::relative_path::relative_to(loop_dir, path)?;
            return intact(&relative).then_some(relative);
        }
        if !deep {
            return None;
        }
        oracle
            .files
            .keys()
            .find(|file| {
                crate::support::text::relative_path::relative_to(path, &loop_dir.join(file)).is_some()
                    && intact(file)
            })
            .cloned()
    }
}

/// The words after wrappers (`env X=1`, `nohup`, `timeout 5`, `sudo -u x`): the command that
/// really runs.
fn unwrap(words: &[String]) -> Vec<String> {
    let mut at = 0;
    while let Some(word) = words.get(at) {
        if !WRAPPERS.contains(&base(word)) {
            break;
        }
        at += 1;
        // The wrapper's own options and arguments: `-x`, `NAME=value`, a duration.
        while words.get(at).is_some_and(|w| {
            w.starts_with('-') || w.contains('=') || w.chars().next().is_some_and(|c| c.is_ascii_digit())
        }) {
            at += 1;
        }
    }
    words[at.min(words.len())..].to_vec()
}

#[cfg(unix)]
fn is_executable(metadata: &std::fs::Metadata) -> bool {
    std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_: &std::fs::Metadata) -> bool {
    true
}

/// Whether the file at `path` holds any of `needles`, read in chunks (binaries are large).
fn file_contains(path: &Path, needles: &[&[u8]]) -> bool {
    use std::io::Read as _;
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    let longest = needles.iter().map(|n| n.len()).max().unwrap_or(0);
    let mut window: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    // A cap keeps a huge file from stalling a tool call: no loop-hook is near this size.
    for _ in 0..512 {
        let Ok(n) = file.read(&mut chunk) else { return false };
        if n == 0 {
            return false;
        }
        window.extend_from_slice(&chunk[..n]);
        if needles.iter().any(|needle| window.windows(needle.len()).any(|w| w == *needle)) {
            return true;
        }
        let keep = window.len().saturating_sub(longest);
        window.drain(..keep);
    }
    false
}

/// `line` with every path into a loop's saved originals (`.../sessions/<id>/oracle/...`) blanked
/// out: reading one back is how a changed check is restored, and the fingerprint, not the copy,
/// decides whether the check is intact.
fn without_saved_originals(line: &str) -> String {
    let bounds = |c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '(' | ')' | ',' | ';' | '`');
    let mut out = line.to_string();
    let mut from = 0;
    while let Some(found) = out[from..].find("/oracle/") {
        let at = from + found;
        let start = out[..at].rfind(bounds).map_or(0, |i| i + 1);
        let end = out[at..].find(bounds).map_or(out.len(), |i| at + i);
        if out[start..end].contains("sessions/") || out[start..end].contains("FOR_LOOP_HOME") {
            out.replace_range(start..end, "");
            from = start;
        } else {
            from = at + "/oracle/".len();
        }
    }
    out
}

/// Whether `path` is a small text file (a script `sh FILE` would run).
fn words_of_a_shell(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() < 1 << 20)
}

/// The file name of a program path.
fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Whether a command hands one of for-loop's commands to opencode, as if the user ran it: a
/// second `opencode run --command cancel-loop` loads the same plugin, and the server's API
/// (`POST /session/ID/command`, with curl) is what the TUI itself uses.
fn sends_an_opencode_command(program: &str, args: &[String]) -> bool {
    const NAMES: &[&str] = &["for-loop", "cancel-loop", "loop-status", "resume-loop"];
    let names = |arg: &str| {
        let bare = arg.trim_start_matches('/');
        NAMES.iter().any(|name| bare == *name || arg.contains(&format!("\"{name}\"")))
    };
    match program {
        "opencode" => args.iter().any(|arg| names(arg)),
        "curl" | "wget" | "http" | "https" | "xh" => {
            args.iter().any(|arg| arg.contains("/command")) && args.iter().any(|arg| names(arg))
        }
        _ => false,
    }
}

/// Whether a tool's input holds a for-loop command, as a prompt to be submitted later.
fn names_a_user_command(value: &Value) -> bool {
    match value {
        Value::String(text) => text.lines().any(|line| UserCommand::is_named_in(line.trim())),
        Value::Array(items) => items.iter().any(names_a_user_command),
        Value::Object(map) => map.values().any(names_a_user_command),
        _ => false,
    }
}

fn oracle_reason(path: &str) -> String {
    format!(
        "for-loop: `{path}` is part of this loop's verify check and is protected while the loop runs. \
         Fix the code under test instead. If the check itself is wrong, say so and let the user \
         decide: only they can change it (/cancel-loop, then a new loop)."
    )
}

fn protected_reason(what: &str) -> String {
    format!(
        "for-loop: this would change {what}. That is not yours to change while the loop runs. Keep \
         working on the task; the user ends the loop with /cancel-loop."
    )
}

fn loop_command_reason() -> String {
    "for-loop: only the user can cancel, restart, resume or roll back this loop (by typing \
     /cancel-loop or the for-loop commands themselves), and only the host runs its hooks. Keep \
     working on the task."
        .into()
}

fn scheduled_command_reason() -> String {
    "for-loop: a prompt you schedule or send is submitted as if the user typed it, so it may not \
     hold a for-loop command while the loop runs. Keep working on the task; only the user ends the \
     loop."
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;
    use std::fs;

    struct World {
        _dir: tempfile::TempDir,
        home: PathBuf,
        project: PathBuf,
        store: PathBuf,
        plugin: PathBuf,
        state: LoopState,
        env: Environment,
        protected: Protected,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        let store = home.join(".local/state/for-loop");
        let plugin = dir.path().join("plugin");
        fs::create_dir_all(project.join("tests")).unwrap();
        fs::create_dir_all(store.join("sessions/s")).unwrap();
        fs::create_dir_all(plugin.join("hooks")).unwrap();
        fs::write(project.join("check.sh"), "exit 1").unwrap();
        fs::write(project.join("calc.sh"), "echo $(($1 - $2))").unwrap();
        fs::write(project.join("tests/a.rs"), "a").unwrap();
        let mut state = sample();
        state.meta.cwd = project.clone();
        state.meta.oracle = Oracle::capture(&project, Some("sh check.sh"), &["tests/**".to_string()], false);
        let vars = [("HOME", &home), ("CLAUDE_PLUGIN_ROOT", &plugin)]
            .map(|(k, v)| (k.to_string(), v.display().to_string()));
        let env = Environment::new(vars, project.clone(), "2026-11-22T03:00:00Z".parse().unwrap());
        let protected = Protected::of(&env, &store, &project);
        World { _dir: dir, home, project, store, plugin, state, env, protected }
    }

    impl World {
        fn guard(&self) -> Guard<'_> {
            Guard { state: &self.state, cwd: &self.project, env: &self.env, protected: &self.protected }
        }

        fn denied(&self, command: &str) -> bool {
            self.guard().shell(command, 0).is_some()
        }
    }

    #[test]
    fn file_tools_may_not_touch_the_oracle_or_loop_files() {
        let w = world();
        let g = w.guard();
        assert!(g.file("check.sh").unwrap().contains("`check.sh` is part of this loop's verify check"));
        assert!(g.file(&w.project.join("tests/a.rs").display().to_string()).is_some());
        assert!(g.file("tests/new_test.rs").is_some(), "adding under a protected path");
        assert!(
            g.file(&w.store.join("sessions/s/state.md").display().to_string())
                .unwrap()
                .contains("loop's own files")
        );
        assert!(g.file("src/lib.rs").is_none());
    }

    #[test]
    fn file_tools_may_not_touch_the_plugin_the_binary_or_the_hosts_settings() {
        let w = world();
        let g = w.guard();
        let plugin_hooks = w.plugin.join("hooks/hooks.json").display().to_string();
        assert!(g.file(&plugin_hooks).unwrap().contains("plugin files"));
        assert!(g.file(".claude/settings.local.json").unwrap().contains("settings"));
        assert!(g.file(&w.home.join(".claude/settings.json").display().to_string()).is_some());
        assert!(g.file("sub/.claude/settings.json").is_some(), "settings of any project");
        assert!(
            g.file(&w.home.join(".cargo/bin/loop-hook").display().to_string()).unwrap().contains("binary")
        );
        let exe = std::env::current_exe().unwrap().display().to_string();
        assert!(g.file(&exe).unwrap().contains("binary"), "the running binary itself");
        assert!(g.file(".claude/notes.md").is_none());
    }

    #[test]
    fn opencode_commands_sent_from_the_shell_are_refused() {
        let w = world();
        for command in [
            "opencode run --session ses_1 --command cancel-loop",
            "opencode run -s ses_1 --command=x /cancel-loop",
            "opencode run --attach http://127.0.0.1:4096 --command resume-loop -- --more 5",
            r#"curl -X POST http://127.0.0.1:4096/session/ses_1/command -d '{"command":"cancel-loop"}'"#,
            "sh -c 'opencode run --command for-loop -- x'",
        ] {
            assert!(w.denied(command), "{command}");
        }
        for command in [
            "opencode run fix the tests",
            "opencode --version",
            "curl http://127.0.0.1:4096/session",
            "grep -r cancel-loop docs",
        ] {
            assert!(!w.denied(command), "{command}");
        }
        let g = w.guard();
        let plugin = w.home.join(".config/opencode/plugins/for-loop.js").display().to_string();
        assert!(g.file(&plugin).unwrap().contains("plugin files"));
        let config = w.home.join(".config/opencode/opencode.json").display().to_string();
        assert!(g.file(&config).unwrap().contains("settings"));
    }

    #[test]
    fn a_changed_oracle_file_may_be_restored() {
        let w = world();
        fs::write(w.project.join("check.sh"), "exit 0").unwrap();
        assert!(w.guard().file("check.sh").is_none());
    }

    #[test]
    fn shell_commands_that_plainly_target_the_oracle_are_refused() {
        let w = world();
        for command in [
            "echo 'exit 0' > check.sh",
            "printf x >> tests/a.rs",
            "rm -f check.sh",
            "rm -rf tests",
            "rm -rf .",
            "sed -i 's/1/0/' check.sh",
            "mv check.sh old.sh",
            "cp /dev/null ./check.sh",
            "git checkout -- tests/a.rs",
            "cd . && rm check.sh",
            "echo x | tee check.sh",
            "dd if=/dev/zero of=check.sh count=1",
        ] {
            assert!(w.denied(command), "{command}");
        }
        for command in [
            "cat check.sh",
            "sh check.sh",
            "./check.sh",
            "grep -r login tests",
            "cargo test",
            "echo hi > notes.txt",
            "rm -rf target",
            "cp check.sh /tmp/check.copy",
            "find . -name '*.o' -newer check.sh",
            "find . -name '*.pyc' -delete",
            "find . -type d -name __pycache__ -exec rm -rf {} +",
        ] {
            assert!(!w.denied(command), "{command}");
        }
    }

    /// Running the check after an honest edit is not an edit of the check.
    #[test]
    fn an_honest_command_that_runs_the_check_is_not_refused() {
        let w = world();
        for command in [
            "sed -i 's/-/+/' calc.sh && ./check.sh",
            "sed -i 's/-/+/' calc.sh; sh check.sh",
            "perl -pi -e 's/-/+/' calc.sh && bash check.sh > out.txt",
            "python3 -c \"open('calc.sh','w').write('echo $(($1 + $2))')\" && ./check.sh",
            "echo fixed > calc.sh && ./check.sh 2>&1 | tail -3",
        ] {
            assert!(!w.denied(command), "{command}");
        }
    }

    #[test]
    fn loop_commands_are_refused_however_they_are_spelled() {
        let w = world();
        for command in [
            "loop-hook cancel --session x",
            "sh /opt/for-loop/scripts/loop-hook cancel",
            "loop-hook can''cel",
            "loop-hook \"ca\"ncel",
            "loop-hook c\\ancel",
            "L=loop-hook; $L cancel",
            "env -i nohup timeout 5 loop-hook cancel",
            "bash -c 'loop-hook cancel'",
            "sh -c \"sh -c 'loop-hook resume'\"",
            "eval loop-hook rollback 1 --yes",
            "echo $(loop-hook cancel)",
            "echo '{}' | loop-hook prompt-hook",
            "loop-hook stop-hook < forged.json",
            "$FOR_LOOP_BIN start",
            "xargs loop-hook cancel < /dev/null",
            "find . -maxdepth 0 -exec loop-hook cancel \\;",
            "python3 -c \"import subprocess; subprocess.run(['loop-hook', 'cancel'])\"",
            "node -e \"require('child_process').execSync('loop-hook cancel')\"",
            "perl -e 'system(\"loop-hook\", \"cancel\")'",
        ] {
            assert!(w.denied(command), "{command}");
        }
        for command in ["loop-hook status", "loop-hook shown for-loop", "loop-hook --help", "echo cancel"] {
            assert!(!w.denied(command), "{command}");
        }
    }

    #[test]
    fn copies_of_the_binary_are_refused_and_recognised_by_their_content() {
        let w = world();
        let exe = std::env::current_exe().unwrap();
        for command in [
            "cp $(command -v loop-hook) ./x; ./x cancel".to_string(),
            "ln -s ~/.cargo/bin/loop-hook lh".to_string(),
            format!("cat {} > x", exe.display()),
            "python3 -c \"import shutil; shutil.copy(shutil.which('loop-hook'), 'x')\"".to_string(),
        ] {
            assert!(w.denied(&command), "{command}");
        }
        // A copy already made under another name is known by what is in it.
        let copy = w.project.join("helper");
        // The test binary holds the engine, and so its marker, like loop-hook does.
        fs::copy(&exe, &copy).unwrap();
        assert!(w.denied("./helper cancel"));
        assert!(w.denied("./helper --exit-zero start"));
        assert!(!w.denied("./helper status"));
        let script = w.project.join("runner");
        fs::write(&script, "# Finds the loop-hook binary and runs it\nexec loop-hook \"$@\"\n").unwrap();
        assert!(w.denied("sh runner cancel"));
    }

    #[test]
    fn loop_store_plugin_binary_and_settings_are_refused_through_any_path() {
        let w = world();
        let store = w.store.display().to_string();
        let plugin = w.plugin.display().to_string();
        for command in [
            format!("rm -rf {store}"),
            "rm -rf ~/.local/state/for-loop/sessions".to_string(),
            "rm -rf $HOME/.local".to_string(),
            "rm -rf \"${HOME}\"/.local/state".to_string(),
            "S=~/.local/state/for-loop; rm -r $S/sessions/s".to_string(),
            "rm -rf ${XDG_STATE_HOME:-$HOME/.local/state}/for-loop".to_string(),
            format!("cp x.md {store}/sessions/s/state.md"),
            format!("cd {store} && rm -rf sessions"),
            format!("echo '---' > {store}/sessions/s/state.md"),
            "find ~ -name state.md -delete".to_string(),
            "find / -name state.md -exec rm {} +".to_string(),
            format!("chmod 000 {store}/sessions/s/state.md"),
            format!("cp /bin/true {plugin}/target/release/loop-hook"),
            format!("echo '{{}}' > {plugin}/hooks/hooks.json"),
            "echo '{\"disableAllHooks\":true}' > .claude/settings.local.json".to_string(),
            "mkdir -p .claude && printf x >> .claude/settings.json".to_string(),
            "python3 -c \"import shutil, os; shutil.rmtree(os.path.expanduser('~/.local/state/for-loop'))\""
                .to_string(),
            format!("python3 -c \"import os; os.remove('{store}/sessions/s/state.md')\""),
            "node -e \"require('fs').writeFileSync('.claude/settings.local.json', '{}')\"".to_string(),
            "python3 - <<'EOF'\nimport json\nopen('.claude/settings.local.json', 'w').write('{}')\nEOF"
                .to_string(),
            "perl -e 'unlink glob($ENV{FOR_LOOP_HOME}.\"/sessions/*/state.md\")'".to_string(),
        ] {
            assert!(w.denied(&command), "{command}");
        }
        for command in [
            format!("cat {store}/sessions/s/state.md"),
            format!("cp {store}/sessions/s/oracle/check.sh /tmp/x"),
            "python3 -c \"import json; print(json.load(open('.claude/settings.json')))\"".to_string(),
            "ls ~/.local/state".to_string(),
            format!(
                "python3 -c \"open('check.sh', 'w').write(open('{store}/sessions/s/oracle/check.sh').read())\""
            ),
            "node -e \"require('fs').copyFileSync('$FOR_LOOP_HOME/sessions/x/oracle/check.sh', 'check.sh')\""
                .to_string(),
        ] {
            assert!(!w.denied(&command), "{command}");
        }
    }

    #[test]
    fn a_find_that_deletes_is_refused_only_where_for_loop_or_host_files_are() {
        let w = world();
        assert!(!w.denied("find . -name '*.json' -delete"));
        fs::create_dir_all(w.project.join(".claude")).unwrap();
        fs::write(w.project.join(".claude/settings.json"), "{}").unwrap();
        assert!(w.denied("find . -name '*.json' -delete"));
        assert!(w.denied("rm -rf ."));
    }

    #[test]
    fn restoring_a_changed_check_from_the_saved_original_is_allowed() {
        let w = world();
        fs::write(w.project.join("check.sh"), "exit 0").unwrap();
        let restore = format!("cp {}/sessions/x/oracle/check.sh check.sh", w.store.display());
        assert!(!w.denied(&restore));
    }

    #[test]
    fn scheduled_prompts_may_not_hold_a_user_command() {
        let input = |prompt: &str| json!({"delaySeconds": 60, "reason": "r", "prompt": prompt});
        assert!(names_a_user_command(&input("/for-loop:cancel-loop")));
        assert!(names_a_user_command(&input("/cancel-loop")));
        assert!(names_a_user_command(&input("  /for-loop start over --verify true")));
        assert!(names_a_user_command(&json!({"skill": "loop", "args": "5m /cancel-loop"})));
        assert!(names_a_user_command(&input("$cancel-loop")));
        assert!(!names_a_user_command(&input("check the build again")));
        assert!(!names_a_user_command(&input("<<autonomous-loop-dynamic>>")));
    }
}
