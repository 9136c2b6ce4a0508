//! What decides which `loop-hook` runs, or whether the host loads for-loop at all, watched as the
//! host's settings are (issue 42, item 1): a settings `env` that points the launcher at another
//! binary, one byte of the plugin's manifest broken, Claude Code's managed settings and their
//! drop-ins. Each is told at the next stop, whose pass does not count; a change after which no
//! hook of for-loop's runs is told by the next for-loop process the user runs (`status`,
//! `doctor`), which compares what the last hook recorded with what is there now.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{Run, SESSION, TestEnv, copy_dir, repo, run_command, stop_event};

/// The environment Claude Code gives its hooks here: the plugin's folder (a copy the agent may
/// write, as an installed plugin's is) and a managed settings folder of the test's own.
struct Hooked {
    env: TestEnv,
    plugin: PathBuf,
    managed: PathBuf,
}

impl Hooked {
    fn new() -> Hooked {
        let env = TestEnv::new();
        let plugin = env.home.join("plugin");
        copy_dir(&repo().join("plugin/claude-code"), &plugin);
        let managed = env.home.join("managed");
        std::fs::create_dir_all(managed.join("managed-settings.d")).unwrap();
        Hooked { env, plugin, managed }
    }

    /// `loop-hook ARGS` as a hook of the plugin runs it.
    fn hook(&self, args: &[&str]) -> Command {
        let mut cmd = self.terminal(args);
        cmd.env("CLAUDE_PLUGIN_ROOT", &self.plugin);
        cmd
    }

    /// `loop-hook ARGS` as the user runs it from a terminal: no plugin folder.
    fn terminal(&self, args: &[&str]) -> Command {
        let mut cmd = self.env.command(args);
        cmd.env("FOR_LOOP_MANAGED_DIR", &self.managed);
        cmd
    }

    fn start(&self) {
        self.env.write("check.sh", "exit 0\n");
        let run = run_command(
            self.hook(&["start", "--session", SESSION]),
            b"t --verify 'sh check.sh' --max-iterations 5",
        );
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    }

    fn stop(&self) -> Run {
        let event = stop_event(SESSION, &self.env.project, "Done.", false).to_string();
        run_command(self.hook(&["stop-hook"]), event.as_bytes())
    }

    /// The stop after the change: blocked, the change named to the agent and the user, recorded
    /// as the agent's; the stop after that is judged as usual.
    fn assert_told_at_the_stop(&self, named: &Path) {
        let run = self.stop();
        assert!(run.blocked(), "{}", run.stdout);
        let named = named.display().to_string();
        assert!(
            run.reason().contains("something that decides whether for-loop's hooks run at all"),
            "{}",
            run.stdout
        );
        assert!(run.reason().contains(&named), "{}", run.stdout);
        assert!(run.system_message().contains(&named), "{}", run.stdout);
        assert_eq!(self.env.ledger_reasons(SESSION), ["host_config_changed", "hooks_changed"]);
        self.stop();
        assert_eq!(self.env.ledger_reasons(SESSION).last().map(String::as_str), Some("verified"));
    }
}

/// Attack 1a: `CARGO_HOME` in a settings `env`, pointing at a folder with a do-nothing
/// `loop-hook` the launcher would run before anything else. Before: not watched (only
/// `FOR_LOOP_*` and `PATH` of an `env` were), and the stops were let through unjudged.
#[test]
fn cargo_home_in_a_settings_env_is_told_at_the_next_stop() {
    let world = Hooked::new();
    world.env.write(".claude/settings.local.json", r#"{"env": {"OTHER": "1"}}"#);
    world.start();
    let settings =
        world.env.write(".claude/settings.local.json", r#"{"env": {"OTHER": "1", "CARGO_HOME": "/x"}}"#);
    world.assert_told_at_the_stop(&settings);
}

/// Every variable the launcher reads, not only `CARGO_HOME`: the store's place, the plugin's
/// data folder, `HOME`.
#[test]
fn each_variable_the_launcher_reads_in_a_settings_env_is_a_change() {
    for name in ["HOME", "XDG_STATE_HOME", "CLAUDE_PLUGIN_DATA", "FOR_LOOP_HOME", "PATH"] {
        let world = Hooked::new();
        world.start();
        let settings = world.env.write(".claude/settings.json", &format!(r#"{{"env": {{"{name}": "/x"}}}}"#));
        let run = world.stop();
        assert!(
            run.blocked() && run.reason().contains(&settings.display().to_string()),
            "{name}: {}",
            run.stdout
        );
    }
}

/// Attack 1b: one byte of `.claude-plugin/plugin.json` broken. Before: not watched on Claude
/// Code, and the host loaded none of the plugin from the next start on, silently.
#[test]
fn one_byte_of_the_plugin_manifest_is_told_at_the_next_stop() {
    let world = Hooked::new();
    world.start();
    let manifest = world.plugin.join(".claude-plugin/plugin.json");
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes[0] = b'x';
    std::fs::write(&manifest, bytes).unwrap();
    world.assert_told_at_the_stop(&manifest);
}

/// When no hook runs again (the host no longer loads the plugin), `loop-hook status` and
/// `loop-hook doctor` from a terminal, which know no plugin folder, compare what the last hook
/// recorded with what is there now and name the manifest; nothing is recorded by them, so the
/// next stop that does run still tells it and does not count its pass.
#[test]
fn a_manifest_broken_after_the_last_hook_is_told_by_status_and_doctor_from_a_terminal() {
    let world = Hooked::new();
    world.start();
    let quiet = run_command(world.terminal(&["status", "--session", SESSION]), b"");
    assert!(!quiet.stdout.contains("WARNING"), "{}", quiet.stdout);
    let manifest = world.plugin.join(".claude-plugin/plugin.json");
    std::fs::write(&manifest, "{ broken").unwrap();
    let status = run_command(world.terminal(&["status", "--session", SESSION]), b"");
    assert!(
        status.stdout.contains("something that decides whether for-loop's hooks run at all"),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains(&manifest.display().to_string()), "{}", status.stdout);
    let doctor = run_command(world.terminal(&["doctor", "--host", "claude-code"]), b"");
    assert!(doctor.stdout.contains(&format!("{} (changed)", manifest.display())), "{}", doctor.stdout);
    assert_ne!(doctor.code, 0, "{}", doctor.stdout);
    assert!(world.env.ledger_reasons(SESSION).is_empty());
    world.assert_told_at_the_stop(&manifest);
}

/// Attack 1c: a drop-in of `managed-settings.d/` that switches every hook off. Before: the folder
/// was not watched.
#[test]
fn a_managed_settings_drop_in_with_disable_all_hooks_is_told_at_the_next_stop() {
    let world = Hooked::new();
    let drop_ins = world.managed.join("managed-settings.d");
    std::fs::write(drop_ins.join("10-org.json"), r#"{"model": "x"}"#).unwrap();
    world.start();
    // Settings of no concern to for-loop, in a new drop-in or an old one, are not a change.
    std::fs::write(drop_ins.join("20-other.json"), r#"{"permissions": {"allow": ["Bash"]}}"#).unwrap();
    std::fs::write(drop_ins.join("10-org.json"), r#"{"model": "y"}"#).unwrap();
    let run = world.stop();
    assert!(!run.blocked(), "{}", run.stdout);
    assert_eq!(world.env.ledger_reasons(SESSION), ["verified"]);

    let world = Hooked::new();
    world.start();
    std::fs::write(world.managed.join("managed-settings.d/99-off.json"), r#"{"disableAllHooks": true}"#)
        .unwrap();
    world.assert_told_at_the_stop(&world.managed.join("managed-settings.d"));
}

/// Attack 1c: `allowManagedHooksOnly` in `managed-settings.json`, which ignores the hooks of
/// plugins the user installed. Before: the file was watched but not this key.
#[test]
fn allow_managed_hooks_only_in_managed_settings_is_told_at_the_next_stop() {
    let world = Hooked::new();
    let managed = world.managed.join("managed-settings.json");
    std::fs::write(&managed, r#"{"model": "x"}"#).unwrap();
    world.start();
    std::fs::write(&managed, r#"{"model": "x", "allowManagedHooksOnly": true}"#).unwrap();
    world.assert_told_at_the_stop(&managed);
}

/// A `loop-hook` planted where `cargo install` puts it, which the launcher runs before a shipped
/// binary: every hook after it is the planted one's, so the next process of the real binary
/// tells it.
#[test]
fn a_binary_planted_in_cargo_home_is_told_by_status() {
    let world = Hooked::new();
    world.start();
    let planted = world.env.home.join(".cargo/bin/loop-hook");
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    std::fs::write(&planted, "#!/bin/sh\nexit 0\n").unwrap();
    let status = run_command(world.terminal(&["status", "--session", SESSION]), b"");
    assert!(
        status
            .stdout
            .contains(&format!("the loop-hook binary {} (absent before, present now)", planted.display())),
        "{}",
        status.stdout
    );
}
