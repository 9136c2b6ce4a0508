//! The install from source, as README gives it, from a clone that has been built and tested in:
//! the real Claude Code CLI adds the clone as a marketplace and installs the plugin, which must
//! copy the plugin's own files (not `target/` or the test clients) and run the `loop-hook` that
//! `cargo install` put in place.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mock_model::{Agent, MockModel, Script};

use super::run_text;
use crate::util::{TestEnv, client_bin, repo};

/// The most an install from a clone may copy.
const MAX_COPIED_BYTES: u64 = 20 * 1024 * 1024;

/// Stand-ins for what a build and a test run leave in a clone, each past the limit on its own,
/// so a copy of either fails the size check as well as the path check.
const LEFT_BEHIND: [&str; 2] =
    ["target/release/deps/stand-in.rlib", "tests/clients/node_modules/stand-in/cli.js"];

/// A clone of this repository (its tracked files) under `to`, with a built `target/` and
/// installed test clients: a `target/release/loop-hook` that says it is the clone's build, and
/// large stand-ins for the rest (sparse, so the test writes little).
fn built_clone(to: &Path) -> PathBuf {
    let listed = Command::new("git").arg("-C").arg(repo()).args(["ls-files", "-z"]).output().unwrap();
    assert!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).unwrap();
        let from = repo().join(name);
        if from.is_file() {
            std::fs::create_dir_all(to.join(name).parent().unwrap()).unwrap();
            std::fs::copy(&from, to.join(name)).unwrap();
        }
    }
    plant(&to.join("target/release/loop-hook"), "CLONE");
    for name in LEFT_BEHIND {
        let file = to.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::File::create(&file).unwrap().set_len(MAX_COPIED_BYTES + 1).unwrap();
    }
    to.to_path_buf()
}

/// An executable script at `path` that prints `what` and how the launcher found it.
fn plant(path: &Path, what: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\necho \"{what} $FOR_LOOP_BIN_SOURCE $*\"\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every file under `dir`: its path relative to `dir` and its length.
fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
            } else {
                let len = entry.metadata().unwrap().len();
                out.push((entry.path().strip_prefix(dir).unwrap().to_path_buf(), len));
            }
        }
    }
    out
}

#[test]
fn an_install_from_a_built_clone_copies_only_the_plugin_and_runs_cargo_installs_binary() {
    let env = TestEnv::new();
    let clone = built_clone(&env.home.join("src/for-loop"));
    // What `cargo install --locked --path .` leaves behind.
    plant(&env.home.join(".cargo/bin/loop-hook"), "CARGO");
    let config = env.home.join(".claude");
    std::fs::create_dir_all(&config).unwrap();
    let model = MockModel::start(Script::new().text("unused")).unwrap();
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    let run = |args: &[&str]| {
        let mut cmd = model.agent_command(&claude, Agent::ClaudeCode { config_dir: &config }, &env.home, &[]);
        cmd.args(args).current_dir(&clone).stdin(Stdio::null());
        let (stdout, stderr) = run_text(cmd, "claude plugin", b"");
        assert!(!stderr.contains("rror") && !stdout.contains('✘'), "claude {args:?}: {stdout}\n{stderr}");
        stdout
    };
    assert!(run(&["plugin", "validate", "--strict", "."]).contains("Validation passed"));
    run(&["plugin", "marketplace", "add", clone.to_str().unwrap()]);
    run(&["plugin", "install", "for-loop@for-loop"]);

    let cache = config.join("plugins/cache");
    let copied = files(&cache);
    let total: u64 = copied.iter().map(|(_, len)| len).sum();
    let mut listing: Vec<String> = copied.iter().map(|(path, _)| path.display().to_string()).collect();
    listing.sort();
    assert!(total <= MAX_COPIED_BYTES, "the install copied {total} bytes: {listing:#?}");
    assert!(
        copied.iter().all(|(path, _)| {
            path.components()
                .all(|part| !matches!(part.as_os_str().to_str(), Some("target" | "node_modules")))
        }),
        "the install copied the clone's build or test clients: {listing:#?}"
    );
    let installed = cache.join("for-loop/for-loop").join(env!("CARGO_PKG_VERSION"));
    for file in
        ["hooks/hooks.json", "scripts/loop-hook", ".claude-plugin/plugin.json", "skills/for-loop/SKILL.md"]
    {
        assert!(installed.join(file).is_file(), "the installed plugin lacks {file}: {listing:#?}");
    }

    // The installed launcher, run as the plugin's commands run it: cargo install's binary, not
    // the clone's build it was installed from.
    let output = Command::new("sh")
        .arg(installed.join("scripts/loop-hook"))
        .arg("--version")
        .env_clear()
        .env("HOME", &env.home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(&env.project)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "CARGO cargo --version\n");
}
