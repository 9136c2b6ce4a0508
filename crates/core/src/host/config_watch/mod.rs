//! What decides whether for-loop runs at all on a host, as a snapshot to compare: the keys of
//! the host's settings that can switch its hooks off or point them elsewhere, for-loop's hook
//! list, launcher and manifest where the host installed them, a folder of hook files, and the
//! identity of the binary answering. Each host's adapter names what it reads ([`Watched`]); this
//! module is the one that looks at them and tells two looks apart.
//!
//! The model's tools run as the user and can change any of these: with `disableAllHooks` or an
//! emptied `hooks.json`, no hook of for-loop's runs again and the loop is silently over. The
//! snapshot is compared at every hook that runs while a loop runs (a tool call, a stop, a
//! prompt), so the user hears of such a change at the first one after it
//! ([`crate::hook::guard_host_config`]).

pub(crate) mod launcher_env;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::support::Environment;
use crate::support::digest::sha256_hex;

/// One entry per thing watched: what it is and where (`settings:/p/.claude/settings.local.json`),
/// and its state in short (a digest, `absent`, `unreadable`).
pub(crate) type Snapshot = BTreeMap<String, String>;

/// How much of a watched file is read: settings and hook files are a few kilobytes.
const FILE_BYTES: u64 = 4 << 20;
/// How many files of a watched folder are looked at.
const FOLDER_FILES: usize = 256;

/// One thing a host reads that decides whether for-loop runs there, and how much of it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Watched {
    pub(crate) kind: Kind,
    pub(crate) path: PathBuf,
}

/// What part of a watched file counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A JSON settings file, of which only these top-level keys count, and in `env` the
    /// variables for-loop and its launcher read: other settings (permissions, a model) are none
    /// of for-loop's business.
    Settings(&'static [&'static str]),
    /// A TOML config, of which only the tables whose names start with one of `tables`, and the
    /// top-level `keys`, count.
    Toml { tables: &'static [&'static str], keys: &'static [&'static str] },
    /// for-loop's hook list, or a host's file of hooks: all of it.
    Hooks,
    /// for-loop's launcher script: all of it.
    Launcher,
    /// A plugin's or extension's manifest, or the host's record of which extensions are on.
    Manifest,
    /// A folder of hook files: the name and content of every file in it.
    Folder,
    /// A folder of JSON settings files (Claude Code's `managed-settings.d/`): each file's name,
    /// and of its content only these top-level keys and the `env` variables, as in [`Kind::Settings`].
    SettingsFolder(&'static [&'static str]),
    /// The host's record of the plugins it installed: only the entries of `object` whose names
    /// start with `prefix` (`for-loop@`), as the plugin that loads is for-loop's alone.
    PluginRecord { object: &'static str, prefix: &'static str },
}

impl Watched {
    pub(crate) fn new(kind: Kind, path: impl Into<PathBuf>) -> Watched {
        Watched { kind, path: path.into() }
    }

    /// The snapshot's key: the kind's label and the path.
    fn key(&self) -> String {
        let label = match self.kind {
            Kind::Settings(_) | Kind::Toml { .. } | Kind::SettingsFolder(_) => "settings",
            Kind::Hooks => "hooks",
            Kind::Launcher => "launcher",
            Kind::Manifest | Kind::PluginRecord { .. } => "manifest",
            Kind::Folder => "folder",
        };
        format!("{label}:{}", self.path.display())
    }

    fn state(&self) -> String {
        match self.kind {
            Kind::Settings(keys) => settings_state(&self.path, keys),
            Kind::Toml { tables, keys } => toml_state(&self.path, tables, keys),
            Kind::Hooks | Kind::Launcher | Kind::Manifest => file_state(&self.path),
            Kind::Folder => folder_state(&self.path),
            Kind::SettingsFolder(keys) => settings_folder_state(&self.path, keys),
            Kind::PluginRecord { object, prefix } => plugin_record_state(&self.path, object, prefix),
        }
    }
}

/// The snapshot now of what a host reads (`watched`, from its adapter), with the binary answering.
pub(crate) fn snapshot(env: &Environment, watched: &[Watched]) -> Snapshot {
    let mut snapshot: Snapshot = watched.iter().map(|w| (w.key(), w.state())).collect();
    let binaries = std::env::current_exe()
        .ok()
        .into_iter()
        .chain(env.var("FOR_LOOP_BIN").map(PathBuf::from))
        .chain(cargo_binary(env));
    for path in binaries {
        snapshot.insert(format!("binary:{}", path.display()), identity(&path));
    }
    snapshot
}

/// The snapshot now, with everything `before` looked at that `watched` does not name looked at
/// again by its path: a process started outside the host (`loop-hook status`, `doctor`) knows
/// no plugin directory, yet the plugin's files recorded at the last hook are still where they
/// were, and one of them broken (a manifest the host can no longer parse) is the change that
/// stops every hook of for-loop's from running to tell it.
pub(crate) fn snapshot_since(env: &Environment, watched: &[Watched], before: &Snapshot) -> Snapshot {
    let mut now = snapshot(env, watched);
    for key in before.keys() {
        if now.contains_key(key) {
            continue;
        }
        let Some((label, path)) = key.split_once(':') else { continue };
        let path = Path::new(path);
        let state = match label {
            "hooks" | "launcher" => file_state(path),
            // A plugin record's entries are not told apart from a manifest's by the key alone.
            "manifest" if !path.ends_with("installed_plugins.json") => file_state(path),
            "folder" => folder_state(path),
            "binary" => identity(path),
            _ => continue,
        };
        now.insert(key.clone(), state);
    }
    now
}

/// Where `cargo install` puts `loop-hook`, which the launcher runs before a shipped binary:
/// `${CARGO_HOME:-$HOME/.cargo}/bin/loop-hook`. One planted there while a loop runs answers every
/// hook after it.
fn cargo_binary(env: &Environment) -> Option<PathBuf> {
    let home = env.var("CARGO_HOME").map(PathBuf::from).or_else(|| home(env, ".cargo"))?;
    let name = if cfg!(windows) { "loop-hook.exe" } else { "loop-hook" };
    Some(home.join("bin").join(name))
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
                "settings" => format!("the settings that switch hooks off or point them elsewhere in {path}"),
                "hooks" => format!("for-loop's hook list {path}"),
                "launcher" => format!("for-loop's launcher {path}"),
                "manifest" => format!("for-loop's manifest or the host's list of extensions {path}"),
                "folder" => format!("the hook files in {path}"),
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

/// The system settings a Gemini CLI family host reads, and the system defaults beside them:
/// where `settings_var` and `defaults_var` point, else the host's place on this platform (`mac`,
/// `windows`, `unix`), the defaults named `system-defaults.json` beside the settings.
pub(crate) fn system_settings(
    env: &Environment,
    (settings_var, defaults_var): (&str, &str),
    [mac, windows, unix]: [&str; 3],
) -> [PathBuf; 2] {
    let system = env.var(settings_var).map_or_else(
        || {
            PathBuf::from(if cfg!(target_os = "macos") {
                mac
            } else if cfg!(windows) {
                windows
            } else {
                unix
            })
        },
        PathBuf::from,
    );
    let defaults =
        env.var(defaults_var).map_or_else(|| system.with_file_name("system-defaults.json"), PathBuf::from);
    [system, defaults]
}

/// A path under the user's home, or `None` without one.
pub(crate) fn home(env: &Environment, rest: &str) -> Option<PathBuf> {
    env.var("HOME").map(|home| Path::new(home).join(rest))
}

/// The watched keys of one settings file, as a digest; a missing file sets none of them.
fn settings_state(path: &Path, keys: &[&str]) -> String {
    let Ok(bytes) = crate::support::read::bounded_read::read(path, FILE_BYTES) else {
        return if path.exists() { "unreadable".into() } else { watched_digest(&Map::new()) };
    };
    let Ok(Value::Object(settings)) = serde_json::from_slice::<Value>(&bytes) else {
        // A host ignores a file it cannot parse; one made unparseable is still a change.
        return format!("unparsed:{}", sha256_hex(&bytes));
    };
    let mut watched: Map<String, Value> =
        keys.iter().filter_map(|key| Some(((*key).to_string(), settings.get(*key)?.clone()))).collect();
    if let Some(Value::Object(vars)) = settings.get("env") {
        let ours: Map<String, Value> = vars
            .iter()
            .filter(|(name, _)| launcher_env::decides(name))
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

/// The watched tables and keys of a TOML config, as a digest of their lines (blank lines and
/// comments left out); a missing file has none. Read line by line, which is all of TOML this
/// needs: a table header starts with `[`; a key may be dotted or quoted (`features.hooks`,
/// `"features".hooks`), and a value may go on over several lines until its brackets close.
fn toml_state(path: &Path, tables: &[&str], keys: &[&str]) -> String {
    let Ok(bytes) = crate::support::read::bounded_read::read(path, FILE_BYTES) else {
        return if path.exists() { "unreadable".into() } else { sha256_hex(b"") };
    };
    let text = String::from_utf8_lossy(&bytes);
    let bare =
        |text: &str| -> String { text.chars().filter(|c| !matches!(c, '"' | '\'' | ' ' | '\t')).collect() };
    let watched_name = |name: &str| {
        let first = name.split('.').next().unwrap_or_default();
        keys.contains(&first) || tables.iter().any(|table| name.starts_with(table))
    };
    let mut watched = String::new();
    // Inside a watched table (`Some(true)`), another one, or before any (`None`).
    let mut in_table: Option<bool> = None;
    // A top-level value still open over several lines, and whether it is watched.
    let (mut depth, mut open_watched) = (0i64, false);
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let keep = if depth > 0 {
            open_watched
        } else if let Some(header) = line.strip_prefix('[') {
            let watched_table = watched_name(bare(header).trim_start_matches('['));
            in_table = Some(watched_table);
            watched_table
        } else if let Some(in_table) = in_table {
            in_table
        } else {
            open_watched = line.split_once('=').is_some_and(|(key, _)| watched_name(&bare(key)));
            open_watched
        };
        if in_table.is_none() {
            depth = (depth + brackets(line)).max(0);
        }
        if keep {
            watched.push_str(line);
            watched.push('\n');
        }
    }
    sha256_hex(watched.as_bytes())
}

/// How many more brackets `line` opens than it closes, outside quoted strings.
fn brackets(line: &str) -> i64 {
    let (mut depth, mut quote) = (0, None);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            (None, '#') => break,
            _ => {}
        }
    }
    depth
}

/// A folder of settings files, each by name and its watched keys, as a digest.
fn settings_folder_state(path: &Path, keys: &[&str]) -> String {
    let none = watched_digest(&Map::new());
    let Ok(entries) = std::fs::read_dir(path) else {
        return if path.exists() { "unreadable".into() } else { "absent".into() };
    };
    let mut files: Vec<(String, String)> = entries
        .filter_map(Result::ok)
        .take(FOLDER_FILES)
        .map(|entry| (entry.file_name().to_string_lossy().into_owned(), settings_state(&entry.path(), keys)))
        // A file that sets none of the keys counts as much as no file.
        .filter(|(_, state)| *state != none)
        .collect();
    files.sort();
    sha256_hex(format!("{files:?}").as_bytes())
}

/// The entries of `object` in a JSON record whose names start with `prefix`, as a digest; a
/// record the host cannot parse is a change too.
fn plugin_record_state(path: &Path, object: &str, prefix: &str) -> String {
    let Ok(bytes) = crate::support::read::bounded_read::read(path, FILE_BYTES) else {
        // A missing record holds no entry of ours.
        return if path.exists() { "unreadable".into() } else { watched_digest(&Map::new()) };
    };
    let Ok(Value::Object(record)) = serde_json::from_slice::<Value>(&bytes) else {
        return format!("unparsed:{}", sha256_hex(&bytes));
    };
    let ours: Map<String, Value> = match record.get(object) {
        Some(Value::Object(entries)) => entries
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => Map::new(),
    };
    watched_digest(&ours)
}

/// A file's content, as a digest.
fn file_state(path: &Path) -> String {
    match crate::support::read::bounded_read::read(path, FILE_BYTES) {
        Ok(bytes) => sha256_hex(&bytes),
        Err(_) if !path.exists() => "absent".into(),
        Err(_) => "unreadable".into(),
    }
}

/// A folder's files, by name and content, as a digest.
fn folder_state(path: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(path) else {
        return if path.exists() { "unreadable".into() } else { "absent".into() };
    };
    let mut files: Vec<(String, String)> = entries
        .filter_map(Result::ok)
        .take(FOLDER_FILES)
        .map(|entry| (entry.file_name().to_string_lossy().into_owned(), file_state(&entry.path())))
        .collect();
    files.sort();
    sha256_hex(format!("{files:?}").as_bytes())
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
    use crate::host::Host;

    fn env(dir: &Path) -> Environment {
        let plugin = dir.join("plugin").display().to_string();
        Environment::new(
            [
                ("HOME".to_string(), dir.join("home").display().to_string()),
                ("CLAUDE_PLUGIN_ROOT".to_string(), plugin.clone()),
                ("PLUGIN_ROOT".to_string(), plugin.clone()),
                ("CURSOR_PLUGIN_ROOT".to_string(), plugin),
            ],
            dir.to_path_buf(),
            jiff::Timestamp::UNIX_EPOCH,
        )
    }

    /// A file a host reads (under `home/`, the project `p/` or the plugin's root `plugin/`),
    /// contents that change nothing for-loop depends on, and contents that each do.
    struct Case {
        host: Host,
        file: &'static str,
        unrelated: &'static [&'static str],
        watched: &'static [&'static str],
    }

    const CASES: &[Case] = &[
        Case {
            host: Host::ClaudeCode,
            file: "p/.claude/settings.local.json",
            unrelated: &[r#"{"permissions":{"allow":["Bash"]},"env":{"OTHER":"1"}}"#],
            watched: &[
                r#"{"disableAllHooks":true}"#,
                r#"{"env":{"FOR_LOOP_BIN":"/tmp/x"}}"#,
                r#"{"env":{"FOR_LOOP_HOME":"/tmp/x"}}"#,
                r#"{"env":{"CARGO_HOME":"/tmp/x"}}"#,
                r#"{"env":{"XDG_STATE_HOME":"/tmp/x"}}"#,
                r#"{"allowManagedHooksOnly":true}"#,
                r#"{"strictKnownMarketplaces":[]}"#,
                r#"{"hooks":{"Stop":[]}}"#,
                r#"{"enabledPlugins":{"for-loop@m":false}}"#,
                "not json",
            ],
        },
        Case {
            host: Host::ClaudeCode,
            file: "home/.claude/settings.json",
            unrelated: &[r#"{"model":"x"}"#],
            watched: &[r#"{"disableAllHooks":true}"#],
        },
        Case { host: Host::ClaudeCode, file: "plugin/hooks/hooks.json", unrelated: &[], watched: &["{}"] },
        Case {
            host: Host::ClaudeCode,
            file: "plugin/.claude-plugin/plugin.json",
            unrelated: &[],
            watched: &["{\"name\":\"for-loop\"}", "x{}"],
        },
        Case {
            host: Host::ClaudeCode,
            file: "home/.claude/plugins/installed_plugins.json",
            unrelated: &[r#"{"version":2,"plugins":{"other@m":[{"scope":"user"}]}}"#],
            watched: &[r#"{"version":2,"plugins":{"for-loop@m":[{"scope":"user"}]}}"#, "not json"],
        },
        Case {
            host: Host::ClaudeCode,
            file: "plugin/scripts/loop-hook",
            unrelated: &[],
            watched: &["exit 0"],
        },
        Case {
            host: Host::GeminiCli,
            file: "home/.gemini/settings.json",
            unrelated: &[r#"{"model":{"name":"x"},"security":{"auth":{}}}"#],
            watched: &[
                r#"{"hooksConfig":{"enabled":false}}"#,
                r#"{"hooksConfig":{"disabled":["for-loop"]}}"#,
                r#"{"hooks":{"AfterAgent":[]}}"#,
            ],
        },
        Case {
            host: Host::GeminiCli,
            file: "p/.gemini/settings.json",
            unrelated: &[r#"{"ui":{}}"#],
            watched: &[r#"{"hooks":{}}"#],
        },
        Case {
            host: Host::GeminiCli,
            file: "home/.gemini/extensions/for-loop/hooks/hooks.json",
            unrelated: &[],
            watched: &["{}"],
        },
        Case {
            host: Host::GeminiCli,
            file: "home/.gemini/extensions/extension-enablement.json",
            unrelated: &[],
            watched: &[r#"{"for-loop":{"overrides":["!/*"]}}"#],
        },
        Case {
            host: Host::QwenCode,
            file: "home/.qwen/settings.json",
            unrelated: &[r#"{"model":{"name":"x"},"memory":{}}"#],
            watched: &[r#"{"disableAllHooks":true}"#, r#"{"stopHookBlockingCap":1}"#, r#"{"hooks":{}}"#],
        },
        Case {
            host: Host::QwenCode,
            file: "home/.qwen/extensions/for-loop/hooks/hooks.json",
            unrelated: &[],
            watched: &["{}"],
        },
        Case {
            host: Host::QwenCode,
            file: "home/.qwen/extensions/for-loop/qwen-extension.json",
            unrelated: &[],
            watched: &["{}"],
        },
        Case {
            host: Host::Codex,
            file: "home/.codex/config.toml",
            unrelated: &["model = \"o3\"\n\n[profiles.x]\nmodel = \"y\"\n# notify = 1\n"],
            watched: &[
                "notify = [\"x\"]\n",
                "[features]\nhooks = false\n",
                "[hooks.state.\"for-loop@m:hooks/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:1\"\n",
                "[plugins.\"for-loop@m\"]\nenabled = false\n",
            ],
        },
        Case { host: Host::Codex, file: "home/.codex/hooks.json", unrelated: &[], watched: &["{}"] },
        Case { host: Host::Codex, file: "p/.codex/hooks.json", unrelated: &[], watched: &["{}"] },
        Case { host: Host::Codex, file: "plugin/hooks/hooks.json", unrelated: &[], watched: &["{}"] },
        Case {
            host: Host::CopilotCli,
            file: "home/.copilot/hooks/for-loop.json",
            unrelated: &[],
            watched: &["{}", ""],
        },
        Case {
            host: Host::CopilotCli,
            file: "home/.copilot/hooks/other.json",
            unrelated: &[],
            watched: &["{}"],
        },
        Case { host: Host::CopilotCli, file: "p/.github/hooks/x.json", unrelated: &[], watched: &["{}"] },
        Case {
            host: Host::CopilotCli,
            file: "home/.copilot/config.json",
            unrelated: &[r#"{"model":"x"}"#],
            watched: &[r#"{"disableAllHooks":true}"#],
        },
        Case { host: Host::Cursor, file: "home/.cursor/hooks.json", unrelated: &[], watched: &["{}"] },
        Case { host: Host::Cursor, file: "p/.cursor/hooks.json", unrelated: &[], watched: &["{}"] },
        Case {
            host: Host::Opencode,
            file: "home/.config/opencode/plugins/for-loop.js",
            unrelated: &[],
            watched: &["export default {}"],
        },
        Case {
            host: Host::Opencode,
            file: "home/.config/opencode/opencode.json",
            unrelated: &[r#"{"model":"x","provider":{}}"#],
            watched: &[r#"{"plugin":[]}"#],
        },
        Case {
            host: Host::Opencode,
            file: "p/opencode.json",
            unrelated: &[r#"{"model":"x"}"#],
            watched: &[r#"{"plugin":["file:///tmp/x.js"]}"#],
        },
        Case { host: Host::Antigravity, file: "p/.agents/hooks.json", unrelated: &[], watched: &["{}"] },
        Case {
            host: Host::Antigravity,
            file: "home/.gemini/config/plugins/for-loop/hooks.json",
            unrelated: &[],
            watched: &["{}"],
        },
    ];

    /// For each host, a change to each watched key or file is seen, once, naming the file; a
    /// change of the same file that touches nothing for-loop depends on is not.
    #[test]
    fn each_hosts_watched_keys_and_files_are_seen_and_unrelated_settings_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let project = dir.path().join("p");
        for case in CASES {
            let path = dir.path().join(case.file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let start = case.host.config_snapshot(&env, &project);
            let now = || changes(&start, &case.host.config_snapshot(&env, &project));
            assert!(now().is_empty(), "{}: nothing changed", case.file);
            for text in case.unrelated {
                std::fs::write(&path, text).unwrap();
                assert!(now().is_empty(), "{}: {text} is not for-loop's business", case.file);
            }
            for text in case.watched {
                std::fs::write(&path, text).unwrap();
                let found = now();
                assert_eq!(found.len(), 1, "{} {}: {text}: {found:?}", case.host.name(), case.file);
                let shown = path.display().to_string();
                let named =
                    if case.file.starts_with("home/.copilot/hooks/") || case.file.starts_with("p/.github/") {
                        path.parent().unwrap().display().to_string()
                    } else {
                        shown
                    };
                assert!(found[0].contains(&named), "{found:?}");
            }
            std::fs::remove_file(&path).unwrap();
            assert!(now().is_empty(), "{}: back as it was", case.file);
        }
    }

    #[test]
    fn a_change_is_told_in_words_that_name_the_file_and_what_became_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        // Joined as the watch joins it, so the path reads the same on Windows.
        let hooks = dir.path().join("plugin").join("hooks/hooks.json");
        std::fs::create_dir_all(hooks.parent().unwrap()).unwrap();
        std::fs::write(&hooks, r#"{"hooks":{"Stop":[]}}"#).unwrap();
        let start = Host::ClaudeCode.config_snapshot(&env, &dir.path().join("p"));
        std::fs::write(&hooks, "{}").unwrap();
        let found = changes(&start, &Host::ClaudeCode.config_snapshot(&env, &dir.path().join("p")));
        assert_eq!(found, [format!("for-loop's hook list {} (changed)", hooks.display())]);
        std::fs::remove_file(&hooks).unwrap();
        let found = changes(&start, &Host::ClaudeCode.config_snapshot(&env, &dir.path().join("p")));
        assert_eq!(found, [format!("for-loop's hook list {} (present before, absent now)", hooks.display())]);
    }

    /// A Codex config can set a watched key at the top level with a dotted or quoted key, or
    /// spread its value over lines: each is seen; other tables and keys are not.
    #[test]
    fn toml_keys_are_seen_dotted_quoted_and_over_several_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let state = |text: &str| {
            std::fs::write(&path, text).unwrap();
            toml_state(&path, &["hooks", "features", "plugins"], &["notify"])
        };
        let base = state("model = \"o3\"\n[projects.\"/p\"]\ntrust_level = \"trusted\"\n");
        assert_eq!(state("model = \"o4\"\n[projects.\"/q\"]\ntrust_level = \"untrusted\"\n"), base);
        for changed in [
            "features.hooks = false\nmodel = \"o3\"\n",
            "\"features\".hooks = false\n",
            "notify = [\n  \"a\",\n]\n",
            "[ \"features\" ]\nhooks = false\n",
            "[[hooks.Stop]]\ncommand = \"true\"\n",
        ] {
            assert_ne!(state(changed), base, "{changed}");
        }
        let one = state("notify = [\n  \"a\",\n  \"b=c\",\n]\nmodel = \"x\"\n");
        let other = state("notify = [\n  \"a\",\n  \"b=d\",\n]\nmodel = \"x\"\n");
        assert_ne!(one, other, "the second line of a value is part of it");
        assert_eq!(state("notify = [\"a\"]\nmodel = \"x\"\n"), state("notify = [\"a\"]\nmodel = \"y\"\n"));
    }

    /// A folder that is gone, and a file of it that is removed, are changes too.
    #[test]
    fn a_hook_folder_emptied_or_removed_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("hooks");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("for-loop.json"), "{}").unwrap();
        let before = folder_state(&folder);
        std::fs::remove_file(folder.join("for-loop.json")).unwrap();
        assert_ne!(folder_state(&folder), before);
        std::fs::remove_dir(&folder).unwrap();
        assert_eq!(folder_state(&folder), "absent");
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
