//! The `PreToolUse` guard: while a loop runs, the agent's file tools may not change the loop's
//! oracle (the files verify runs, the `--protect` paths) or the loop's own files, and its shell
//! may not plainly target them or run loop-hook's commands that end or reshape a loop.
//!
//! Honest scope: this refuses the common, direct ways a model games a check. It is not a
//! sandbox: a determined process running as the same user can reach any file. The oracle
//! fingerprint (checked at every stop) is the second line: a changed oracle never counts as done.
//!
//! A protected file is guarded only while it is intact. Once it has changed anyway, writes are
//! allowed so that the agent can restore it, which the re-injected prompt asks it to do.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::environment::Environment;
use crate::event::{self, Fields};
use crate::oracle::{ChangeKind, Oracle};
use crate::state::LoopState;
use crate::store::Store;

/// Commands that write, move or delete what they name.
const MUTATING: &[&str] = &[
    "rm", "mv", "cp", "tee", "truncate", "chmod", "chown", "ln", "unlink", "dd", "install", "rsync", "touch",
    "shred", "patch",
];
/// loop-hook subcommands the agent must not run on its own loop.
const LOOP_COMMANDS: &[&str] = &["cancel", "start", "resume", "rollback"];

/// Handles one Claude Code `PreToolUse` event; returns what to print (empty: no objection).
pub(crate) fn run(env: &Environment, stdin: impl Read) -> String {
    let Ok(bytes) = event::read_bounded(stdin) else { return String::new() };
    let Ok(object) = event::parse_object(&bytes) else { return String::new() };
    match objection(env, &object) {
        Some(reason) => json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        })
        .to_string(),
        None => String::new(),
    }
}

/// Why the tool call must not run, if it must not. Any doubt on our side lets it run.
fn objection(env: &Environment, object: &Map<String, Value>) -> Option<String> {
    let fields = Fields(object);
    if fields.string("hook_event_name").ok()?.as_deref() != Some("PreToolUse") {
        return None;
    }
    let session_id = fields.required_string("session_id").ok()?;
    let store = Store::locate(env).ok()?;
    let paths = store.paths(&session_id);
    if !paths.state.exists() {
        return None;
    }
    let state = paths.load().ok()??;
    if !state.is_active() || !state.is_owned_by(&session_id) {
        return None;
    }
    let cwd = fields.string("cwd").ok()?.map_or_else(|| state.meta.cwd.clone(), PathBuf::from);
    let tool = fields.string("tool_name").ok()??;
    let input = object.get("tool_input")?.as_object()?;
    let guard = Guard { state: &state, store_root: store.root(), cwd: &cwd };
    match tool.as_str() {
        "Write" | "Edit" | "MultiEdit" => guard.file(input.get("file_path")?.as_str()?),
        "NotebookEdit" => guard.file(input.get("notebook_path")?.as_str()?),
        "Bash" => guard.shell(input.get("command")?.as_str()?),
        _ => None,
    }
}

struct Guard<'a> {
    state: &'a LoopState,
    store_root: &'a Path,
    cwd: &'a Path,
}

impl Guard<'_> {
    fn file(&self, path: &str) -> Option<String> {
        let path = self.cwd.join(path);
        if self.is_loop_file(&path) {
            return Some(loop_files_reason());
        }
        self.intact_oracle_file(&path).map(|shown| oracle_reason(&shown))
    }

    fn shell(&self, command: &str) -> Option<String> {
        let words = words(command);
        let names_loop_hook = words.iter().any(|w| w.ends_with("loop-hook"));
        if names_loop_hook && words.iter().any(|w| LOOP_COMMANDS.contains(&w.as_str())) {
            return Some(
                "for-loop: only the user can cancel, restart, resume or roll back this loop (with \
                 /cancel-loop and the for-loop commands). Keep working on the task."
                    .into(),
            );
        }
        if !mutates(command, &words) {
            return None;
        }
        // `cp <saved original> <oracle file>` is how the agent restores a changed check: a loop
        // file as a copy's source is read, not written.
        let copy_source = |i: usize| {
            words.first().is_some_and(|w| w.rsplit('/').next() == Some("cp"))
                && i + 1 < words.len()
                && !command.contains('>')
        };
        for (i, word) in words.iter().enumerate() {
            let path = self.cwd.join(word);
            if (self.is_loop_file(&path) || word.contains("for-loop/sessions")) && !copy_source(i) {
                return Some(loop_files_reason());
            }
            if let Some(shown) = self.intact_oracle_file(&path) {
                return Some(oracle_reason(&shown));
            }
        }
        None
    }

    fn is_loop_file(&self, path: &Path) -> bool {
        crate::oracle::relative_to(self.store_root, path).is_some() || path == self.store_root
    }

    /// The oracle file `path` names, relative to the loop's directory, if it is intact (or
    /// would be newly added under a protected path).
    fn intact_oracle_file(&self, path: &Path) -> Option<String> {
        let oracle: &Oracle = &self.state.meta.oracle;
        let loop_dir = &self.state.meta.cwd;
        if !oracle.covers(loop_dir, path) {
            return None;
        }
        let relative = crate::oracle::relative_to(loop_dir, path)?;
        let changed =
            oracle.changes(loop_dir).into_iter().any(|c| c.path == relative && c.kind != ChangeKind::Added);
        (!changed).then_some(relative)
    }
}

/// Words of a shell command: split on blanks, shell punctuation and redirections (so `>file`
/// names `file`), with quotes removed.
fn words(command: &str) -> Vec<String> {
    command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '`' | '>' | '<'))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// True when the command plainly writes or deletes something it names.
fn mutates(command: &str, words: &[String]) -> bool {
    let program = |w: &String| w.rsplit('/').next().map(str::to_string).unwrap_or_default();
    command.contains('>')
        || words.iter().map(program).any(|p| MUTATING.contains(&p.as_str()))
        || words.windows(2).any(|w| {
            let tool = program(&w[0]);
            let in_place = w[1].starts_with("-i") || w[1].starts_with("-pi");
            (matches!(tool.as_str(), "sed" | "perl" | "ruby") && in_place)
                || (tool == "git"
                    && matches!(
                        w[1].as_str(),
                        "checkout" | "restore" | "rm" | "mv" | "stash" | "reset" | "clean"
                    ))
        })
}

fn oracle_reason(path: &str) -> String {
    format!(
        "for-loop: `{path}` is part of this loop's verify check and is protected while the loop runs. \
         Fix the code under test instead. If the check itself is wrong, say so and let the user \
         decide: only they can change it (/cancel-loop, then a new loop)."
    )
}

fn loop_files_reason() -> String {
    "for-loop: the loop's own files are not yours to change. Keep working on the task; the user \
     ends the loop with /cancel-loop."
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::sample;
    use std::fs;

    struct World {
        _dir: tempfile::TempDir,
        project: PathBuf,
        store: PathBuf,
        state: LoopState,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let store = dir.path().join("store");
        fs::create_dir_all(project.join("tests")).unwrap();
        fs::write(project.join("check.sh"), "exit 1").unwrap();
        fs::write(project.join("tests/a.rs"), "a").unwrap();
        let mut state = sample();
        state.meta.cwd = project.clone();
        state.meta.oracle = Oracle::capture(&project, Some("sh check.sh"), &["tests/**".to_string()]);
        World { _dir: dir, project, store, state }
    }

    impl World {
        fn guard(&self) -> Guard<'_> {
            Guard { state: &self.state, store_root: &self.store, cwd: &self.project }
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
    fn a_changed_oracle_file_may_be_restored() {
        let w = world();
        fs::write(w.project.join("check.sh"), "exit 0").unwrap();
        assert!(w.guard().file("check.sh").is_none());
    }

    #[test]
    fn shell_commands_that_plainly_target_the_oracle_are_refused() {
        let w = world();
        let g = w.guard();
        for command in [
            "echo 'exit 0' > check.sh",
            "printf x >> tests/a.rs",
            "rm -f check.sh",
            "rm -rf tests",
            "sed -i 's/1/0/' check.sh",
            "mv check.sh old.sh",
            "cp /dev/null ./check.sh",
            "git checkout -- tests/a.rs",
            "cd . && rm check.sh",
        ] {
            assert!(g.shell(command).is_some(), "{command}");
        }
        for command in [
            "cat check.sh",
            "sh check.sh",
            "grep -r login tests",
            "cargo test",
            "echo hi > notes.txt",
            "rm -rf target",
        ] {
            assert!(g.shell(command).is_none(), "{command}");
        }
    }

    #[test]
    fn shell_may_not_run_loop_commands_or_touch_loop_files() {
        let w = world();
        let g = w.guard();
        assert!(g.shell("loop-hook cancel --session x").is_some());
        assert!(g.shell("sh /opt/for-loop/scripts/loop-hook cancel").is_some());
        assert!(g.shell("loop-hook status").is_none());
        assert!(g.shell(&format!("rm -rf {}", w.store.display())).is_some());
        assert!(g.shell("rm -rf ~/.local/state/for-loop/sessions").is_some());
        assert!(g.shell(&format!("cat {}/sessions/x/state.md", w.store.display())).is_none());
        assert!(g.shell(&format!("cp x.md {}/sessions/x/state.md", w.store.display())).is_some());
        fs::write(w.project.join("check.sh"), "exit 0").unwrap();
        let restore = format!("cp {}/sessions/x/oracle/check.sh check.sh", w.store.display());
        assert!(g.shell(&restore).is_none(), "restoring a changed check from the saved original");
    }
}
