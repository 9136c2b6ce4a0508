//! Qwen Code: the extension, its enablement for this folder, the settings that turn hooks off,
//! and the cap of blocked stops in a row, read as Qwen Code 0.24 reads them.

use std::path::{Path, PathBuf};

use super::super::facts::QwenFacts;
use super::{binary, read_json};
use crate::support::environment::Environment;

/// `$QWEN_HOME`, else `~/.qwen`.
pub(super) fn home(env: &Environment) -> Option<PathBuf> {
    env.var("QWEN_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".qwen")))
}

pub(super) fn facts(env: &Environment, home: PathBuf, project: &Path) -> QwenFacts {
    let extension =
        Some(home.join("extensions/for-loop")).filter(|dir| dir.join("qwen-extension.json").is_file());
    let hooks_disabled_by = [home.join("settings.json"), project.join(".qwen/settings.json")]
        .into_iter()
        .filter(|file| read_json(file).and_then(|s| s.get("disableAllHooks")?.as_bool()).unwrap_or(false))
        .collect();
    QwenFacts {
        launch: extension.as_ref().map(|dir| binary::launch(env, dir)),
        // The same enablement file and rules as Gemini CLI's, which Qwen Code forked.
        enabled: extension
            .as_ref()
            .map(|_| super::gemini::enabled(&home.join("extensions/extension-enablement.json"), project)),
        hooks_disabled_by,
        block_cap: crate::host::qwen_block_cap(env, project),
        extension,
        home,
    }
}
