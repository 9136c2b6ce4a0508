//! Claude Code: the plugin's install record, `enabledPlugins`, `disableAllHooks` and the `env`
//! of every settings file, read as Claude Code layers them (user, project, local; managed last).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::super::facts::{ClaudeFacts, EnvOverride};
use super::{binary, read_json};
use crate::support::environment::Environment;

/// Claude Code's managed settings on Linux, which override every other layer.
const MANAGED: &str = "/etc/claude-code/managed-settings.json";

pub(super) fn config_dir(env: &Environment) -> Option<PathBuf> {
    env.var("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".claude")))
}

pub(super) fn facts(env: &Environment, config_dir: PathBuf, project: &Path) -> ClaudeFacts {
    let installed_file = read_json(&config_dir.join("plugins/installed_plugins.json"));
    let mut installed = Vec::new();
    let mut install_path = None;
    if let Some(plugins) = installed_file.as_ref().and_then(|v| v.get("plugins")).and_then(Value::as_object) {
        for (id, installs) in plugins.iter().filter(|(id, _)| id.starts_with("for-loop@")) {
            installed.push(id.clone());
            let path = installs.as_array().into_iter().flatten().find_map(|i| i.get("installPath")?.as_str());
            install_path = install_path.or_else(|| path.map(PathBuf::from));
        }
    }
    // Lowest precedence first: a later file has the last word.
    let files = [
        (config_dir.join("settings.json"), false),
        (project.join(".claude/settings.json"), true),
        (project.join(".claude/settings.local.json"), true),
        (PathBuf::from(MANAGED), false),
    ];
    let mut facts = ClaudeFacts {
        installed,
        launch: install_path.filter(|p| p.is_dir()).map(|root| binary::launch(env, &root)),
        ..ClaudeFacts::default()
    };
    for (file, in_project) in files {
        let Some(settings) = read_json(&file) else { continue };
        let enabled = settings.get("enabledPlugins").and_then(Value::as_object);
        if let Some(on) = enabled.and_then(|enabled| facts.installed.iter().find_map(|id| enabled.get(id))) {
            facts.enabled = Some((file.clone(), on.as_bool().unwrap_or(false)));
        }
        if settings.get("disableAllHooks") == Some(&Value::Bool(true)) {
            facts.hooks_disabled_by.push(file.clone());
        }
        for name in ["FOR_LOOP_BIN", "FOR_LOOP_HOME"] {
            if let Some(value) = settings.get("env").and_then(|e| e.get(name)).and_then(Value::as_str) {
                facts.env_overrides.push(EnvOverride {
                    file: file.clone(),
                    in_project,
                    name: name.to_string(),
                    value: value.to_string(),
                    is_file: Path::new(value).is_file(),
                });
            }
        }
    }
    facts.config_dir = config_dir;
    facts
}
