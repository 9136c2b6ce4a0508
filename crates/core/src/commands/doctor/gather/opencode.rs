//! opencode: the plugin file and the command files, in the user's config folder or the project's
//! `.opencode/`, where opencode loads them from.

use std::path::{Path, PathBuf};

use super::super::facts::OpencodeFacts;
use crate::support::environment::Environment;

/// The command files for-loop ships, by name.
pub(in crate::commands::doctor) const COMMANDS: &[&str] =
    &["for-loop", "cancel-loop", "loop-status", "resume-loop"];

/// `$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`.
pub(super) fn config_dir(env: &Environment) -> Option<PathBuf> {
    env.var("XDG_CONFIG_HOME")
        .filter(|dir| Path::new(dir).is_absolute())
        .map(|dir| Path::new(dir).join("opencode"))
        .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".config/opencode")))
}

/// Whether a plugin file is for-loop's: it passes the session's idle to loop-hook's Stop hook.
fn is_ours(path: &Path) -> bool {
    crate::support::read::bounded_read::read(path, 1 << 20)
        .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(r#""stop-hook", "--host", "opencode""#))
}

/// The first plugin file of for-loop's in `dir`'s `plugins/` or `plugin/`.
fn plugin_in(dir: &Path) -> Option<PathBuf> {
    ["plugins", "plugin"].iter().find_map(|sub| {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(dir.join(sub)).ok()?.flatten().map(|entry| entry.path()).collect();
        files.sort();
        files
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "js" || e == "ts"))
            .find(|f| is_ours(f))
    })
}

/// The command files missing from both `dir`'s and the project's `commands/` (or `command/`).
fn missing_commands(dirs: &[PathBuf]) -> Vec<&'static str> {
    COMMANDS
        .iter()
        .copied()
        .filter(|name| {
            !dirs.iter().any(|dir| {
                ["commands", "command"].iter().any(|sub| dir.join(sub).join(format!("{name}.md")).is_file())
            })
        })
        .collect()
}

pub(super) fn facts(config: PathBuf, project: &Path) -> OpencodeFacts {
    let dirs = [config.clone(), project.join(".opencode")];
    OpencodeFacts {
        plugin: dirs.iter().find_map(|dir| plugin_in(dir)),
        missing_commands: missing_commands(&dirs),
        config,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_plugin_and_the_commands_in_either_folder() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        let project = dir.path().join("project");
        let empty = facts(config.clone(), &project);
        assert_eq!((empty.plugin, empty.missing_commands.len()), (None, 4));
        std::fs::create_dir_all(config.join("plugins")).unwrap();
        std::fs::write(config.join("plugins/other.js"), "export const X = 1").unwrap();
        std::fs::create_dir_all(project.join(".opencode/plugin")).unwrap();
        let ours = project.join(".opencode/plugin/for-loop.js");
        std::fs::write(&ours, r#"run(["stop-hook", "--host", "opencode"])"#).unwrap();
        std::fs::create_dir_all(config.join("commands")).unwrap();
        for name in ["for-loop", "cancel-loop", "loop-status"] {
            std::fs::write(config.join("commands").join(format!("{name}.md")), "x").unwrap();
        }
        let found = facts(config, &project);
        assert_eq!(found.plugin, Some(ours));
        assert_eq!(found.missing_commands, ["resume-loop"]);
    }
}
