//! Codex: the installed plugin, `config.toml`'s plugin and feature switches, and the trust
//! records Codex needs before it runs a plugin's hook.

use std::path::{Path, PathBuf};

use super::super::facts::CodexFacts;
use super::binary;
use crate::host::codex_trust;
use crate::support::environment::Environment;

/// `$CODEX_HOME`, else `~/.codex`.
pub(super) fn home(env: &Environment) -> Option<PathBuf> {
    env.var("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".codex")))
}

pub(super) fn facts(env: &Environment, home: PathBuf) -> CodexFacts {
    let config =
        crate::support::read::bounded_read::read(&home.join("config.toml"), 4 << 20).unwrap_or_default();
    let config = String::from_utf8_lossy(&config);
    let plugin_root = plugin_root(&home);
    let (plugin_disabled, hooks_feature_off) = switches(&config);
    CodexFacts {
        launch: plugin_root.as_ref().map(|root| binary::launch(env, root)),
        plugin_root,
        plugin_disabled,
        hooks_feature_off,
        stop_trusted: codex_trust::hook_trusted(&config, "stop"),
        prompt_trusted: codex_trust::hook_trusted(&config, "user_prompt_submit"),
        home,
    }
}

/// `plugins/cache/MARKETPLACE/for-loop/VERSION`: the newest installed copy of ours.
fn plugin_root(home: &Path) -> Option<PathBuf> {
    let mut roots: Vec<PathBuf> = std::fs::read_dir(home.join("plugins/cache"))
        .ok()?
        .flatten()
        .filter_map(|marketplace| std::fs::read_dir(marketplace.path().join("for-loop")).ok())
        .flat_map(|versions| versions.flatten().map(|v| v.path()))
        .filter(|root| root.join("hooks/hooks.json").is_file())
        .collect();
    roots.sort();
    roots.pop()
}

/// `enabled = false` under our `[plugins."for-loop@…"]` table, and `hooks = false` under
/// `[features]`: the two switches in `config.toml` that turn our hooks off.
fn switches(config: &str) -> (bool, bool) {
    let mut table = String::new();
    let (mut plugin_off, mut hooks_off) = (false, false);
    for line in config.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']').trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let off = value.split('#').next().is_some_and(|v| v.trim() == "false");
        if table.starts_with("plugins.\"for-loop@") && key.trim() == "enabled" {
            plugin_off = off;
        } else if table == "features" && matches!(key.trim(), "hooks" | "codex_hooks") {
            hooks_off = off;
        }
    }
    (plugin_off, hooks_off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switches_that_turn_our_hooks_off_are_read_from_their_tables() {
        assert_eq!(switches("[plugins.\"for-loop@for-loop\"]\nenabled = true\n"), (false, false));
        assert_eq!(switches("[plugins.\"for-loop@x\"]\nenabled = false\n"), (true, false));
        assert_eq!(switches("[features]\nhooks = false # off\n"), (false, true));
        assert_eq!(
            switches("[plugins.\"other@x\"]\nenabled = false\n[other]\nhooks = false\n"),
            (false, false)
        );
    }
}
