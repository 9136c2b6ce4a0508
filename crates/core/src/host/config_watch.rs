//! What decides whether for-loop runs at all on Claude Code, as a snapshot to compare: the keys
//! of the host's settings files that can switch its hooks off or point them elsewhere
//! (`disableAllHooks`, `hooks`, `env` for for-loop's own variables, `enabledPlugins`, `sandbox`),
//! the plugin's `hooks.json` and launcher, and the identity of the binary answering.
//!
//! The model's tools run as the user and can change any of these: with `disableAllHooks` or an
//! emptied `hooks.json`, no hook of for-loop's runs again and the loop is silently over. The
//! guard compares this snapshot at every tool call while a loop runs, so the user hears of such a
//! change at once, while a hook still runs ([`crate::hook::guard_host_config`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::support::digest::sha256_hex;
use crate::support::environment::Environment;

/// One entry per thing watched: what it is and where (`settings:/p/.claude/settings.local.json`),
/// and its state in short (a digest, `absent`, `unreadable`).
pub(crate) type Snapshot = BTreeMap<String, String>;

/// The settings keys that decide whether and how for-loop's hooks run.
const KEYS: &[&str] =
    &["disableAllHooks", "hooks", "enabledPlugins", "sandbox", "disableSkillShellExecution"];

/// The snapshot now, for a loop in `project`.
pub(crate) fn snapshot(env: &Environment, project: &Path) -> Snapshot {
    let mut snapshot = Snapshot::new();
    for path in settings_files(env, project) {
        snapshot.insert(format!("settings:{}", path.display()), settings_state(&path));
    }
    if let Some(root) = env.var("CLAUDE_PLUGIN_ROOT").map(PathBuf::from) {
        for (kind, file) in [("hooks", "hooks/hooks.json"), ("launcher", "scripts/loop-hook")] {
            let path = root.join(file);
            snapshot.insert(format!("{kind}:{}", path.display()), file_state(&path));
        }
    }
    let binaries = std::env::current_exe().ok().into_iter().chain(env.var("FOR_LOOP_BIN").map(PathBuf::from));
    for path in binaries {
        snapshot.insert(format!("binary:{}", path.display()), identity(&path));
    }
    snapshot
}

/// What differs between two snapshots, in words, one line each. Only what both looked at is
/// compared: a loop started from a terminal knows no plugin directory, and a file that is gone
/// is still looked at (`absent`).
pub(crate) fn changes(before: &Snapshot, now: &Snapshot) -> Vec<String> {
    before
        .keys()
        .filter(|key| now.get(*key).is_some_and(|state| before.get(*key) != Some(state)))
        .map(|key| {
            let (kind, path) = key.split_once(':').unwrap_or(("", key));
            let what = match kind {
                "settings" => {
                    format!("`disableAllHooks`, `hooks`, `env`, `enabledPlugins` or `sandbox` in {path}")
                }
                "hooks" => format!("for-loop's hook list {path}"),
                "launcher" => format!("for-loop's launcher {path}"),
                _ => format!("the loop-hook binary {path}"),
            };
            let state = |s: Option<&String>| match s.map(String::as_str) {
                None | Some("absent") => "absent",
                Some("unreadable") => "unreadable",
                Some(_) => "present",
            };
            format!("{what} ({} before, {} now)", state(before.get(key)), state(now.get(key)))
                .replace("(present before, present now)", "(changed)")
        })
        .collect()
}

/// Claude Code's settings files for `project`: the user's, the project's, its local one and the
/// managed one; for the hooks' own project directory too when it differs.
fn settings_files(env: &Environment, project: &Path) -> Vec<PathBuf> {
    let config = env
        .var("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".claude")));
    let mut files: Vec<PathBuf> = config.map(|c| c.join("settings.json")).into_iter().collect();
    let mut projects = vec![project.to_path_buf()];
    projects.extend(env.var("CLAUDE_PROJECT_DIR").map(PathBuf::from).filter(|p| p != project));
    for project in projects {
        files.push(project.join(".claude/settings.json"));
        files.push(project.join(".claude/settings.local.json"));
    }
    files.push(PathBuf::from("/etc/claude-code/managed-settings.json"));
    files
}

/// The watched keys of one settings file, as a digest: other changes of the file (permissions,
/// a model) are none of for-loop's business, and a missing file sets none of them.
fn settings_state(path: &Path) -> String {
    let Ok(bytes) = crate::support::read::bounded_read::read(path, 4 << 20) else {
        return if path.exists() { "unreadable".into() } else { watched_digest(&Map::new()) };
    };
    let Ok(Value::Object(settings)) = serde_json::from_slice::<Value>(&bytes) else {
        // Claude Code ignores a file it cannot parse; one made unparseable is still a change.
        return format!("unparsed:{}", sha256_hex(&bytes));
    };
    let mut watched: Map<String, Value> =
        KEYS.iter().filter_map(|key| Some(((*key).to_string(), settings.get(*key)?.clone()))).collect();
    if let Some(Value::Object(vars)) = settings.get("env") {
        let ours: Map<String, Value> = vars
            .iter()
            .filter(|(name, _)| name.starts_with("FOR_LOOP_") || *name == "PATH")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !ours.is_empty() {
            watched.insert("env".into(), Value::Object(ours));
        }
    }
    watched_digest(&watched)
}

fn watched_digest(watched: &Map<String, Value>) -> String {
    sha256_hex(Value::Object(watched.clone()).to_string().as_bytes())
}

/// A file's content, as a digest.
fn file_state(path: &Path) -> String {
    match crate::support::read::bounded_read::read(path, 4 << 20) {
        Ok(bytes) => sha256_hex(&bytes),
        Err(_) if !path.exists() => "absent".into(),
        Err(_) => "unreadable".into(),
    }
}

/// A binary's identity without reading it (it is large, and this runs at every tool call): its
/// size, modification and change times and inode. A replaced or rewritten file changes its
/// change time, which `touch` cannot set back.
fn identity(path: &Path) -> String {
    let Ok(meta) = std::fs::metadata(path) else { return "absent".into() };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        format!(
            "{} {}.{} {}.{} {}",
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
            meta.ino()
        )
    }
    #[cfg(not(unix))]
    {
        format!("{} {:?}", meta.len(), meta.modified().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(home: &Path, plugin: &Path) -> Environment {
        Environment::new(
            [
                ("HOME".to_string(), home.display().to_string()),
                ("CLAUDE_PLUGIN_ROOT".to_string(), plugin.display().to_string()),
            ],
            home.to_path_buf(),
            jiff::Timestamp::UNIX_EPOCH,
        )
    }

    #[test]
    fn each_switch_of_the_hooks_is_a_change_and_other_settings_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let (home, project, plugin) =
            (dir.path().join("home"), dir.path().join("p"), dir.path().join("plugin"));
        for d in [home.join(".claude"), project.join(".claude"), plugin.join("hooks"), plugin.join("scripts")]
        {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(plugin.join("hooks/hooks.json"), r#"{"hooks":{"Stop":[]}}"#).unwrap();
        std::fs::write(plugin.join("scripts/loop-hook"), "#!/bin/sh\n").unwrap();
        let env = env(&home, &plugin);
        let local = project.join(".claude/settings.local.json");
        let start = snapshot(&env, &project);
        assert!(changes(&start, &snapshot(&env, &project)).is_empty(), "nothing changed");

        std::fs::write(&local, r#"{"permissions":{"allow":["Bash"]},"env":{"OTHER":"1"}}"#).unwrap();
        assert!(changes(&start, &snapshot(&env, &project)).is_empty(), "an unrelated setting");
        let changed = |text: &str| {
            std::fs::write(&local, text).unwrap();
            changes(&start, &snapshot(&env, &project))
        };
        for text in [
            r#"{"disableAllHooks":true}"#,
            r#"{"env":{"FOR_LOOP_BIN":"/tmp/x"}}"#,
            r#"{"env":{"FOR_LOOP_HOME":"/tmp/x"}}"#,
            r#"{"hooks":{"Stop":[]}}"#,
            r#"{"enabledPlugins":{"for-loop@m":false}}"#,
            "not json",
        ] {
            let found = changed(text);
            assert_eq!(found.len(), 1, "{text}: {found:?}");
            assert!(found[0].contains(&local.display().to_string()), "{found:?}");
        }
        std::fs::remove_file(&local).unwrap();
        std::fs::write(plugin.join("hooks/hooks.json"), "{}").unwrap();
        let found = changes(&start, &snapshot(&env, &project));
        assert_eq!(
            found,
            [format!("for-loop's hook list {} (changed)", plugin.join("hooks/hooks.json").display())]
        );
        std::fs::remove_file(plugin.join("scripts/loop-hook")).unwrap();
        let found = changes(&start, &snapshot(&env, &project));
        assert!(
            found.iter().any(|c| c.contains("launcher") && c.contains("(present before, absent now)")),
            "{found:?}"
        );
    }

    #[test]
    fn a_replaced_binary_is_a_change_even_with_its_time_set_back() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("loop-hook");
        std::fs::write(&bin, "one").unwrap();
        let before = identity(&bin);
        let modified = std::fs::metadata(&bin).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.path().join("new"), "two").unwrap();
        std::fs::rename(dir.path().join("new"), &bin).unwrap();
        std::fs::File::options().write(true).open(&bin).unwrap().set_modified(modified).unwrap();
        assert_ne!(identity(&bin), before);
        assert_eq!(identity(&dir.path().join("missing")), "absent");
    }
}
