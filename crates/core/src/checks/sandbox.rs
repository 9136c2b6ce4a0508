//! The two tiers a loop runs in, and the sandbox strict mode runs verify in.
//!
//! - **strict**: the host's own sandbox is the boundary. On Claude Code, with `sandbox.enabled`,
//!   `allowUnsandboxedCommands: false` and `failIfUnavailable: true`, the model's Bash runs in
//!   bubblewrap where the loop store, the plugin, the binary, the host's settings and the user's
//!   home are read-only, and in its own PID namespace. Every loop change is made by the prompt
//!   hook, outside that sandbox ([`crate::hook::prompt_hook`]), and verify runs in a sandbox of its own
//!   ([`verify_sandbox`]): bubblewrap again, the project and `/tmp` writable, the store, the
//!   plugin, the binary, the host's settings, git's hooks and config, the oracle files and the
//!   rest of the machine read-only, and a PID namespace from which the code under test cannot see
//!   or signal the hook.
//! - **default**: no sandbox. Tampering is detected and reported, not prevented.
//!
//! [`Bwrap`] builds bubblewrap's command line for verify here and for the agent runs of
//! `loop-hook run`, which sandboxes them whatever the host's settings ([`RUN_SANDBOX_VAR`]).
//!
//! The tier is read from the host's settings every time it is needed (start, status, each stop),
//! so it is never a claim the model could have written. Only an existing sandbox is used, never a
//! home-made one: on systems without bubblewrap strict mode says so and `--require-strict`
//! refuses to start.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::host::Host;
use crate::support::Environment;

/// Which tier a loop runs in, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tier {
    pub(crate) strict: bool,
    pub(crate) why: String,
}

impl Tier {
    /// One line for the start message and `status`.
    pub(crate) fn line(&self) -> String {
        if self.strict {
            format!("strict: {}", self.why)
        } else {
            format!("default: {} — tampering is detected and reported, not prevented", self.why)
        }
    }
}

/// How the reason of a `loop-hook run` loop's tier begins: its own sandbox's, given to `start`.
const RUN_TIER: &str = "loop-hook run";

impl Tier {
    /// The tier of a `loop-hook run` loop: strict when its agent is `sandboxed` (verify then
    /// is too), whatever the host's settings, which its agent never runs under.
    pub(crate) fn of_run(sandboxed: bool, why: &str) -> Tier {
        Tier { strict: sandboxed, why: format!("{RUN_TIER}{why}") }
    }
}

/// The tier line `status` shows for a loop of `host` in `project` that started in `recorded`:
/// a `loop-hook run` loop's as its start recorded it; any other's as the host's settings give it
/// now, since they are what sandbox its verify at each stop.
pub(crate) fn shown(
    env: &Environment,
    host: Host,
    project: &Path,
    store: &Path,
    recorded: Option<&str>,
) -> String {
    let of_run = |line: &&str| line.split_once(": ").is_some_and(|(_, why)| why.starts_with(RUN_TIER));
    match recorded.filter(of_run) {
        Some(line) => line.to_string(),
        None => tier(env, host, project, store).line(),
    }
}

/// The tier a loop of `host` in `project` runs in, with the store at `store`.
pub(crate) fn tier(env: &Environment, host: Host, project: &Path, store: &Path) -> Tier {
    let default = |why: &str| Tier { strict: false, why: why.to_string() };
    if !host.offers_strict_tier() {
        return default(&format!(
            "strict mode uses Claude Code's sandbox; {} has none for-loop can use",
            host.name()
        ));
    }
    if let Err(why) = sandbox_settings(env, project, store) {
        return default(&why);
    }
    match sandbox_unavailable() {
        Some(why) => default(&format!("Claude Code's sandbox is on, but verify cannot be sandboxed: {why}")),
        None => Tier { strict: true, why: "Claude Code sandbox on, verify sandboxed (bubblewrap)".into() },
    }
}

/// Whether Claude Code's settings confine the agent's shell for strict mode: `Err` says what is
/// missing. Reads files only, so the guard can ask at every tool call.
pub(crate) fn sandbox_settings(env: &Environment, project: &Path, store: &Path) -> Result<(), String> {
    let default = |why: &str| Err(why.to_string());
    let settings = ClaudeSettings::read(env, project);
    if settings.sandbox("enabled") != Some(&Value::Bool(true)) {
        return default("no sandbox (Claude Code's sandbox.enabled is not true)");
    }
    if settings.sandbox("allowUnsandboxedCommands") != Some(&Value::Bool(false)) {
        return default(
            "Claude Code's sandbox is on, but sandbox.allowUnsandboxedCommands is not false, so the agent \
             may run commands outside it",
        );
    }
    if settings.sandbox("failIfUnavailable") != Some(&Value::Bool(true)) {
        return default(
            "Claude Code's sandbox is on, but sandbox.failIfUnavailable is not true, so the session runs \
             unsandboxed when the sandbox cannot start",
        );
    }
    if let Some(path) = settings.allow_write().into_iter().find(|p| overlaps(p, store)) {
        return default(&format!(
            "Claude Code's sandbox lets the agent write {}, which holds the loop store",
            path.display()
        ));
    }
    Ok(())
}

/// Why no sandbox for verify can be had here, or `None` when bubblewrap works.
pub(crate) fn sandbox_unavailable() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some(format!(
            "for-loop sandboxes verify with bubblewrap, which needs Linux; this is {}",
            std::env::consts::OS
        ));
    }
    let probe = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--die-with-parent", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "bubblewrap (bwrap) cannot create a sandbox here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(_) => Some("bubblewrap (bwrap) is not installed (e.g. apt-get install bubblewrap)".into()),
    }
}

/// A bubblewrap command line, built mount by mount: `/` read-only with a private `/dev` and
/// `/proc`, then each mount in order, a later one covering what an earlier one shows below it.
#[derive(Debug, Clone)]
pub(crate) struct Bwrap {
    args: Vec<OsString>,
    as_pid_1: bool,
}

impl Bwrap {
    pub(crate) fn new() -> Bwrap {
        let args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
            .into_iter()
            .map(OsString::from)
            .collect();
        Bwrap { args, as_pid_1: false }
    }

    /// The command runs as its namespace's first process instead of under bubblewrap's own
    /// init: when it exits the kernel kills everything else in the namespace before its parent
    /// learns of the exit, so nothing it left behind runs on while its caller goes on.
    pub(crate) fn as_pid_1(&mut self) -> &mut Bwrap {
        self.as_pid_1 = true;
        self
    }

    /// `dest` shows `source`, writable.
    pub(crate) fn bind_to(&mut self, source: &Path, dest: &Path) -> &mut Bwrap {
        self.args.extend([OsString::from("--bind"), source.into(), dest.into()]);
        self
    }

    /// `path` writable.
    pub(crate) fn bind(&mut self, path: &Path) -> &mut Bwrap {
        self.bind_to(path, path)
    }

    /// `path` read-only, when it exists: a path that does not exist cannot be bound, and there
    /// is nothing there to protect yet.
    pub(crate) fn read_only(&mut self, path: &Path) -> &mut Bwrap {
        if path.exists() {
            self.args.extend([OsString::from("--ro-bind"), path.into(), path.into()]);
        }
        self
    }

    /// The arguments up to `--`, the command to follow: a PID namespace of its own that dies
    /// with its parent, a new session (no terminal to push input into), started in `cwd`.
    pub(crate) fn finish(mut self, cwd: &Path) -> Vec<OsString> {
        self.args.extend(
            ["--unshare-pid", "--die-with-parent", "--new-session", "--chdir"]
                .into_iter()
                .map(OsString::from),
        );
        self.args.push(cwd.into());
        self.args.push("--".into());
        self.args
    }
}

/// The argument list that runs verify in its sandbox: `bwrap ... --` before `/bin/sh -c CMD`.
/// `cwd` is where verify runs (writable, with `/tmp`); `read_only` are paths kept read-only even
/// inside those (the store, the plugin, the binary, the host's settings, the oracle files).
pub(crate) fn verify_sandbox(cwd: &Path, read_only: &[PathBuf]) -> Vec<OsString> {
    let mut bwrap = Bwrap::new();
    if Path::new("/tmp").is_dir() {
        bwrap.bind(Path::new("/tmp"));
    }
    bwrap.bind(cwd);
    let (inside, outside): (Vec<&PathBuf>, Vec<&PathBuf>) =
        read_only.iter().partition(|p| p.starts_with(cwd));
    for path in &outside {
        bwrap.read_only(path);
    }
    if outside.iter().any(|path| cwd.starts_with(path)) {
        // An attempt's work tree lies in the store: writable again inside the read-only store.
        bwrap.bind(cwd);
    }
    let git = cwd.join(".git");
    let extra = [cwd.join(".claude"), git.join("hooks"), git.join("config")];
    for path in inside.into_iter().chain(&extra) {
        bwrap.read_only(path);
    }
    bwrap.finish(cwd)
}

/// The argument list that runs the built-in reviewer in the strict tier: like verify's sandbox,
/// but the project stays read-only (a reviewer only reads), and only `/tmp` and `writable` (the
/// agent CLI's own settings and sessions, which it writes as it runs) can be written outside it.
pub(crate) fn review_sandbox(cwd: &Path, writable: &[PathBuf]) -> Vec<OsString> {
    let mut bwrap = Bwrap::new();
    if Path::new("/tmp").is_dir() {
        bwrap.bind(Path::new("/tmp"));
    }
    for path in writable.iter().filter(|path| path.exists()) {
        bwrap.bind(path);
    }
    // Last, so that it covers a writable mount above the project (a project under `/tmp`).
    bwrap.read_only(cwd);
    bwrap.finish(cwd)
}

/// Set (in-process, by `loop-hook run`) when the run's agent is sandboxed: verify then runs in
/// a sandbox of its own too, whatever the host's settings, so the code the agent wrote cannot
/// reach the loop or the driver while it is judged. Setting it can only add a sandbox.
pub(crate) const RUN_SANDBOX_VAR: &str = "FOR_LOOP_RUN_SANDBOX";

/// The sandbox verify runs in for a loop of `host` in `cwd` whose check stands on `oracle_files`:
/// bubblewrap's arguments in the strict tier, nothing in the default tier.
pub(crate) fn sandbox_for_verify<'a>(
    env: &Environment,
    store: &Path,
    host: Host,
    cwd: &Path,
    oracle_files: impl IntoIterator<Item = &'a String>,
) -> Vec<OsString> {
    if env.var(RUN_SANDBOX_VAR).is_none() && !tier(env, host, cwd, store).strict {
        return Vec::new();
    }
    let mut read_only = read_only_paths(env, store);
    read_only.extend(oracle_files.into_iter().map(|file| cwd.join(file)));
    verify_sandbox(cwd, &read_only)
}

/// What for-loop must keep read-only for a loop's verify: its store and for-loop's own files.
pub(crate) fn read_only_paths(env: &Environment, store: &Path) -> Vec<PathBuf> {
    let mut paths = vec![store.to_path_buf()];
    for name in ["CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA", "FOR_LOOP_BIN", "CLAUDE_CONFIG_DIR"] {
        paths.extend(env.var(name).map(PathBuf::from));
    }
    paths.extend(std::env::current_exe().ok());
    paths
}

/// Claude Code's settings, merged in its order of precedence: user, project, local, managed.
struct ClaudeSettings {
    layers: Vec<Value>,
}

impl ClaudeSettings {
    fn read(env: &Environment, project: &Path) -> ClaudeSettings {
        let config = env
            .var("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".claude")));
        let project = env.var("CLAUDE_PROJECT_DIR").map_or_else(|| project.to_path_buf(), PathBuf::from);
        let files = [
            config.map(|c| c.join("settings.json")),
            Some(project.join(".claude/settings.json")),
            Some(project.join(".claude/settings.local.json")),
            Some(PathBuf::from("/etc/claude-code/managed-settings.json")),
        ];
        let layers = files
            .into_iter()
            .flatten()
            .filter_map(|path| crate::support::read::bounded_read::read(&path, 1 << 20).ok())
            .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
            .collect();
        ClaudeSettings { layers }
    }

    /// `sandbox.KEY` from the layer with the highest precedence that sets it.
    fn sandbox(&self, key: &str) -> Option<&Value> {
        self.layers.iter().rev().find_map(|layer| layer.get("sandbox")?.get(key))
    }

    /// Every `sandbox.filesystem.allowWrite` entry of every layer (they add up).
    fn allow_write(&self) -> Vec<PathBuf> {
        self.layers
            .iter()
            .filter_map(|layer| layer.get("sandbox")?.get("filesystem")?.get("allowWrite")?.as_array())
            .flatten()
            .filter_map(Value::as_str)
            .map(PathBuf::from)
            .collect()
    }
}

/// Whether writing below `allowed` can reach `store`, or the other way round.
fn overlaps(allowed: &Path, store: &Path) -> bool {
    let text = allowed.to_string_lossy();
    if text.starts_with('~') || text.contains('*') || text.starts_with("//") {
        // Patterns and home-relative entries: compare by the store's own name to stay careful.
        return text.contains("for-loop") || text.trim_end_matches('/').ends_with("state") || text == "~";
    }
    store.starts_with(allowed) || allowed.starts_with(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(home: &Path) -> Environment {
        Environment::new(
            [("HOME".to_string(), home.display().to_string())],
            home.to_path_buf(),
            "2026-11-22T03:00:00Z".parse().unwrap(),
        )
    }

    fn write_settings(project: &Path, json: &str) {
        std::fs::create_dir_all(project.join(".claude")).unwrap();
        std::fs::write(project.join(".claude/settings.json"), json).unwrap();
    }

    #[test]
    fn each_missing_setting_keeps_the_default_tier_and_says_which() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_with(dir.path());
        let project = dir.path().join("p");
        let store = dir.path().join(".local/state/for-loop");
        let tier_of = || tier(&env, Host::ClaudeCode, &project, &store);
        assert!(tier_of().why.contains("sandbox.enabled is not true"));
        write_settings(&project, r#"{"sandbox":{"enabled":true}}"#);
        assert!(tier_of().why.contains("allowUnsandboxedCommands is not false"));
        write_settings(&project, r#"{"sandbox":{"enabled":true,"allowUnsandboxedCommands":false}}"#);
        assert!(tier_of().why.contains("failIfUnavailable is not true"));
        let open_store = format!(
            r#"{{"sandbox":{{"enabled":true,"allowUnsandboxedCommands":false,"failIfUnavailable":true,
                "filesystem":{{"allowWrite":["{}"]}}}}}}"#,
            dir.path().join(".local").display()
        );
        write_settings(&project, &open_store);
        assert!(tier_of().why.contains("holds the loop store"), "{}", tier_of().why);
        let line = tier_of().line();
        assert!(line.starts_with("default: ") && line.ends_with("detected and reported, not prevented"));
        assert!(!tier(&env, Host::Codex, &project, &store).strict);
    }

    #[test]
    fn a_local_setting_overrides_the_projects() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_with(dir.path());
        let project = dir.path().join("p");
        write_settings(
            &project,
            r#"{"sandbox":{"enabled":true,"allowUnsandboxedCommands":false,"failIfUnavailable":true}}"#,
        );
        std::fs::write(project.join(".claude/settings.local.json"), r#"{"sandbox":{"enabled":false}}"#)
            .unwrap();
        let tier = tier(&env, Host::ClaudeCode, &project, &dir.path().join("store"));
        assert!(!tier.strict && tier.why.contains("sandbox.enabled is not true"), "{tier:?}");
    }

    #[test]
    fn status_shows_a_runs_recorded_tier_and_the_hosts_live_one_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_with(dir.path());
        let (project, store) = (dir.path().join("p"), dir.path().join("store"));
        let shown = |recorded: Option<&str>| shown(&env, Host::ClaudeCode, &project, &store, recorded);
        let run = Tier::of_run(true, "'s sandbox").line();
        assert_eq!(shown(Some(&run)), "strict: loop-hook run's sandbox");
        let live = tier(&env, Host::ClaudeCode, &project, &store).line();
        assert!(live.starts_with("default: no sandbox"), "{live}");
        for recorded in [None, Some("strict: Claude Code sandbox on"), Some(""), Some("loop-hook run")] {
            assert_eq!(shown(recorded), live, "{recorded:?}");
        }
    }

    #[test]
    fn verify_runs_with_the_project_writable_and_the_rest_read_only() {
        let args = verify_sandbox(Path::new("/p"), &[PathBuf::from("/nonexistent-store")]);
        let text: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let joined = text.join(" ");
        assert!(joined.starts_with("bwrap --ro-bind / / --dev /dev --proc /proc"), "{joined}");
        assert!(joined.contains("--bind /p /p"), "{joined}");
        assert!(joined.contains("--unshare-pid --die-with-parent --new-session --chdir /p --"), "{joined}");
        assert!(!joined.contains("nonexistent-store"), "a missing path is not bound: {joined}");
    }

    #[test]
    fn a_work_tree_inside_the_store_stays_writable_and_its_oracle_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let tree = store.join("worktrees/r-1");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("check.sh"), "").unwrap();
        let joined = verify_sandbox(&tree, &[store.clone(), tree.join("check.sh")])
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let (s, t) = (store.display().to_string(), tree.display().to_string());
        let store_ro = joined.find(&format!("--ro-bind {s} {s}")).unwrap();
        let tree_rw = joined.rfind(&format!("--bind {t} {t}")).unwrap();
        let oracle_ro = joined.find(&format!("--ro-bind {t}/check.sh")).unwrap();
        assert!(store_ro < tree_rw && tree_rw < oracle_ro, "{joined}");
    }

    #[test]
    fn the_reviewers_sandbox_leaves_the_project_read_only_and_its_own_files_writable() {
        let dir = tempfile::tempdir().unwrap();
        let (project, config) = (dir.path().join("project"), dir.path().join(".claude"));
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&config).unwrap();
        let args: Vec<String> =
            review_sandbox(&project, &[config.clone(), dir.path().join("absent"), dir.path().to_path_buf()])
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
        let mounts: Vec<(&str, &str)> = args
            .windows(2)
            .filter(|w| w[0] == "--bind" || w[0] == "--ro-bind")
            .map(|w| (w[0].as_str(), w[1].as_str()))
            .collect();
        let config = config.display().to_string();
        assert!(mounts.contains(&("--bind", config.as_str())), "{args:?}");
        let over_project: Vec<&str> =
            mounts.iter().filter(|(_, path)| project.starts_with(path)).map(|(how, _)| *how).collect();
        assert_eq!(over_project.last(), Some(&"--ro-bind"), "the project is read-only at last: {args:?}");
        assert!(!args.iter().any(|a| a.ends_with("absent")), "{args:?}");
        assert_eq!(args.last().map(String::as_str), Some("--"));
    }
}
