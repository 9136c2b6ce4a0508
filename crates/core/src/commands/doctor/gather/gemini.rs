//! Gemini CLI: the extension, its enablement for this folder and the folder's trust, read as
//! Gemini CLI 0.61 reads them (`extension-enablement.json`, `trustedFolders.json`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::super::facts::{FolderTrust, GeminiFacts};
use super::{binary, read_json};
use crate::support::environment::Environment;

/// `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub(super) fn home(env: &Environment) -> Option<PathBuf> {
    env.var("GEMINI_CLI_HOME").or_else(|| env.var("HOME")).map(|home| Path::new(home).join(".gemini"))
}

pub(super) fn facts(env: &Environment, home: PathBuf, project: &Path) -> GeminiFacts {
    let extension =
        Some(home.join("extensions/for-loop")).filter(|dir| dir.join("gemini-extension.json").is_file());
    let trusted_folders_file = env
        .var("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .map_or_else(|| home.join("trustedFolders.json"), PathBuf::from);
    GeminiFacts {
        launch: extension.as_ref().map(|dir| binary::launch(env, dir)),
        enabled: extension
            .as_ref()
            .map(|_| enabled(&home.join("extensions/extension-enablement.json"), project)),
        trust: trust(env, &home, &trusted_folders_file, project),
        extension,
        trusted_folders_file,
        home,
    }
}

/// Whether the extension is enabled in `project`: the last override rule that matches wins
/// (`/dir/*` enables in and below it, `!/dir/*` disables).
pub(super) fn enabled(file: &Path, project: &Path) -> bool {
    let here = format!("{}/", project.display().to_string().trim_end_matches('/'));
    let rules = read_json(file);
    let rules = rules.as_ref().and_then(|v| v.get("for-loop")?.get("overrides")?.as_array().cloned());
    let mut on = true;
    for rule in rules.unwrap_or_default().iter().filter_map(Value::as_str) {
        let (disable, rule) = rule.strip_prefix('!').map_or((false, rule), |r| (true, r));
        let matches = match rule.strip_suffix('*') {
            Some(base) => here.starts_with(&format!("{}/", base.trim_end_matches('/'))),
            None => here == rule,
        };
        if matches {
            on = !disable;
        }
    }
    on
}

fn trust(env: &Environment, home: &Path, file: &Path, project: &Path) -> FolderTrust {
    match env.var("GEMINI_CLI_TRUST_WORKSPACE") {
        Some("true") => return FolderTrust::Trusted("GEMINI_CLI_TRUST_WORKSPACE=true".into()),
        Some("false") => return FolderTrust::NotTrusted,
        _ => {}
    }
    let settings = read_json(&home.join("settings.json"));
    let trust_on = settings
        .as_ref()
        .and_then(|s| s.get("security")?.get("folderTrust")?.get("enabled")?.as_bool())
        .unwrap_or(true);
    if !trust_on {
        return FolderTrust::Trusted("folder trust is off in settings.json".into());
    }
    let project = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
    let rules = read_json(file);
    let mut best: Option<(usize, &str)> = None;
    for (rule, level) in rules.as_ref().and_then(Value::as_object).into_iter().flatten() {
        let Some(level) = level.as_str() else { continue };
        let path = Path::new(rule);
        let effective = if level == "TRUST_PARENT" { path.parent().unwrap_or(path) } else { path };
        let effective = std::fs::canonicalize(effective).unwrap_or_else(|_| effective.to_path_buf());
        if project.starts_with(&effective) && best.is_none_or(|(len, _)| rule.len() > len) {
            best = Some((rule.len(), level));
        }
    }
    match best {
        Some((_, "TRUST_FOLDER" | "TRUST_PARENT")) => FolderTrust::Trusted(format!("{}", file.display())),
        Some((_, "DO_NOT_TRUST")) => FolderTrust::Distrusted(file.to_path_buf()),
        _ => FolderTrust::NotTrusted,
    }
}
