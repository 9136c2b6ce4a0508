//! The hosts whose hooks are plain files: Copilot CLI's and Cursor's hook JSON, and
//! Antigravity's plugin folder.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::super::facts::{AntigravityFacts, CopilotFacts, CursorFacts, HookFile};
use super::{binary, read_json};
use crate::support::environment::Environment;

fn home_dir(env: &Environment, var: &str, default: &str) -> Option<PathBuf> {
    env.var(var).map(PathBuf::from).or_else(|| env.var("HOME").map(|home| Path::new(home).join(default)))
}

/// `$COPILOT_HOME`, else `~/.copilot`.
pub(super) fn copilot_home(env: &Environment) -> Option<PathBuf> {
    home_dir(env, "COPILOT_HOME", ".copilot")
}

/// `~/.cursor`.
pub(super) fn cursor_home(env: &Environment) -> Option<PathBuf> {
    env.var("HOME").map(|home| Path::new(home).join(".cursor"))
}

/// Whether a hook command runs for-loop's Stop hook for `host`.
fn runs_us(command: &str, host: &str) -> bool {
    command.contains("stop-hook --host ") && command.contains(host) && command.contains("loop-hook")
}

/// The first `*.json` in `dir` whose `agentStop` hook runs for-loop.
fn copilot_hook(dir: &Path) -> Option<HookFile> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).collect();
    files.sort();
    files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "json")).find_map(|path| {
        let hooks = read_json(&path)?;
        let ours = hooks.get("hooks")?.get("agentStop")?.as_array()?.iter().any(|hook| {
            ["bash", "command"]
                .iter()
                .any(|key| hook.get(key).and_then(Value::as_str).is_some_and(|c| runs_us(c, "copilot-cli")))
        });
        ours.then_some(HookFile { path, limit: None })
    })
}

pub(super) fn copilot(env: &Environment, home: PathBuf, project: &Path) -> CopilotFacts {
    CopilotFacts {
        user_hook: copilot_hook(&home.join("hooks")),
        repo_hook: copilot_hook(&project.join(".github/hooks")),
        allow_all: env.var("COPILOT_ALLOW_ALL") == Some("true"),
        home,
    }
}

/// for-loop's `stop` hook in a Cursor `hooks.json`, with its `loop_limit` when that is a cap.
fn cursor_hook(path: PathBuf) -> Option<HookFile> {
    let hooks = read_json(&path)?;
    let ours = hooks
        .get("hooks")?
        .get("stop")?
        .as_array()?
        .iter()
        .find(|hook| hook.get("command").and_then(Value::as_str).is_some_and(|c| runs_us(c, "cursor")))?;
    // Cursor caps follow-ups at 5 when `loop_limit` is missing; `null` lifts the cap.
    let limit = match ours.get("loop_limit") {
        Some(Value::Null) => None,
        Some(other) => Some(other.to_string()),
        None => Some("5 (Cursor's default, when loop_limit is missing)".into()),
    };
    Some(HookFile { path, limit })
}

pub(super) fn cursor(home: PathBuf, project: &Path) -> CursorFacts {
    CursorFacts {
        user_hook: cursor_hook(home.join("hooks.json")),
        project_hook: cursor_hook(project.join(".cursor/hooks.json")),
        home,
    }
}

/// `~/.gemini/config/plugins/for-loop`, else the project's `.agents/plugins/for-loop`.
pub(super) fn antigravity(env: &Environment, gemini_home: Option<&Path>, project: &Path) -> AntigravityFacts {
    let dirs = [
        gemini_home.map(|h| h.join("config/plugins/for-loop")),
        Some(project.join(".agents/plugins/for-loop")),
    ];
    let Some(dir) = dirs.into_iter().flatten().find(|d| d.join("plugin.json").is_file()) else {
        return AntigravityFacts::default();
    };
    let hooks = dir.join("hooks.json");
    let problem = match std::fs::read(&hooks) {
        Err(e) => Some(format!("{} cannot be read: {e}", hooks.display())),
        Ok(bytes) if bytes.starts_with(&[0xef, 0xbb, 0xbf]) => {
            Some(format!("{} starts with a byte order mark", hooks.display()))
        }
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Err(e) => Some(format!("{} is not valid JSON ({e})", hooks.display())),
            Ok(value) => stop_hook_problem(&value, &dir),
        },
    };
    let launch = dir.join("scripts/loop-hook").is_file().then(|| binary::launch(env, &dir));
    AntigravityFacts { plugin_dir: Some(dir), hooks_problem: problem, launch }
}

/// Why for-loop's `Stop` entry would not run: a timeout that is not an integer, or a script that
/// is missing or not executable.
fn stop_hook_problem(hooks: &Value, dir: &Path) -> Option<String> {
    let stop = hooks.get("for-loop")?.get("Stop")?.as_array()?.first()?;
    if stop.get("timeout").is_some_and(|t| !t.is_u64()) {
        return Some("the Stop hook's timeout is not a whole number of seconds".into());
    }
    let command = stop.get("command").and_then(Value::as_str)?;
    let script = dir.join(command);
    (!binary::is_executable(&script)).then(|| format!("{} is missing or not executable", script.display()))
}
