//! Gathering the facts: each host's files, read as that host reads them, and the machine's.
//! Nothing here judges; [`super::lines`] does.

mod binary;
mod claude;
mod codex;
mod gemini;
mod opencode;
mod others;
mod project;
mod qwen;

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::facts::Facts;
use crate::host::Host;
use crate::store::Store;
use crate::support::environment::Environment;
use crate::worktree::WorkTree;

/// The most of a settings or hook file read.
const JSON_BYTES: u64 = 4 << 20;

/// A JSON file's value, or `None` when it is missing or not JSON (a host ignores it then too).
pub(super) fn read_json(path: &Path) -> Option<Value> {
    let bytes = crate::support::read::bounded_read::read(path, JSON_BYTES).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Everything the checks need about this machine and the project in `env.cwd`. A host's facts
/// are gathered when `asked` names it, or when the host looks installed here (its program on
/// `PATH` or its configuration directory present).
pub(crate) fn gather(env: &Environment, asked: Option<Host>) -> Facts {
    let tree = WorkTree::open(&env.cwd);
    let project = if tree.is_git() { tree.root().to_path_buf() } else { env.cwd.clone() };
    let store = Store::locate(env).ok();
    let found = |program: &str, dir: Option<&PathBuf>| {
        binary::on_path(env, program).is_some() || dir.is_some_and(|d| d.is_dir())
    };
    let present = |host: Host, dir: Option<&PathBuf>| asked == Some(host) || found(host.program(), dir);
    let claude_dir = claude::config_dir(env);
    let gemini_home = gemini::home(env);
    let codex_home = codex::home(env);
    let copilot_home = others::copilot_home(env);
    let cursor_home = others::cursor_home(env);
    let antigravity_dir = gemini_home.as_ref().map(|h| h.join("config"));
    let gemini_dir = gemini_home.as_ref().map(|h| h.join("extensions"));
    let opencode_dir = opencode::config_dir(env);
    let qwen_home = qwen::home(env);
    let hosts_found = [
        (Host::ClaudeCode, claude_dir.as_ref()),
        (Host::GeminiCli, gemini_dir.as_ref()),
        (Host::Codex, codex_home.as_ref()),
        (Host::CopilotCli, copilot_home.as_ref()),
        (Host::Cursor, cursor_home.as_ref()),
        (Host::Antigravity, antigravity_dir.as_ref()),
        (Host::Opencode, opencode_dir.as_ref()),
        (Host::QwenCode, qwen_home.as_ref()),
    ]
    .into_iter()
    .filter(|(host, dir)| found(host.program(), *dir))
    .map(|(host, _)| host)
    .collect();
    // A project's own Claude Code settings are read even where Claude Code is not installed
    // yet: a `disableAllHooks` there would keep the loop from holding once it is.
    let claude_project = project.join(".claude").is_dir();
    Facts {
        hosts_found,
        binary: binary::facts(env),
        store: project::store(store.as_ref()),
        claude: claude_dir
            .clone()
            .filter(|dir| claude_project || present(Host::ClaudeCode, Some(dir)))
            .map(|dir| claude::facts(env, dir, &project)),
        gemini: gemini_home
            .clone()
            .filter(|_| present(Host::GeminiCli, gemini_dir.as_ref()))
            .map(|home| gemini::facts(env, home, &project)),
        codex: codex_home
            .clone()
            .filter(|home| present(Host::Codex, Some(home)))
            .map(|home| codex::facts(env, home)),
        copilot: copilot_home
            .filter(|home| present(Host::CopilotCli, Some(home)) || project.join(".github/hooks").is_dir())
            .map(|home| others::copilot(env, home, &project)),
        cursor: cursor_home
            .filter(|home| present(Host::Cursor, Some(home)) || project.join(".cursor/hooks.json").is_file())
            .map(|home| others::cursor(home, &project)),
        antigravity: present(Host::Antigravity, antigravity_dir.as_ref())
            .then(|| others::antigravity(env, gemini_home.as_deref(), &project)),
        qwen: qwen_home
            .clone()
            .filter(|home| present(Host::QwenCode, Some(home)))
            .map(|home| qwen::facts(env, home, &project)),
        tier: project::tier(env, &project, store.as_ref()),
        opencode: opencode_dir
            .filter(|dir| present(Host::Opencode, Some(dir)) || project.join(".opencode").is_dir())
            .map(|dir| opencode::facts(dir, &project)),
        loops: project::loops(env, &project, store.as_ref()),
        asked,
        containment: Some(crate::checks::verify::Containment::probed()),
        project,
    }
}
