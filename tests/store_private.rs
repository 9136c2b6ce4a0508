//! The store is its user's alone (issue 42, item 5): every folder 0700 and every file 0600 from
//! creation on, whatever the umask, and a store an older for-loop left open to others (folders
//! 0755, files 0644) tightened at its next write, told once: one line to the user at the stop,
//! one ledger note.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{Run, SESSION, TestEnv, run_command, stop_event};

/// `loop-hook ARGS` run with the umask `mask`, in the test's environment.
fn run_with_umask(env: &TestEnv, mask: u32, args: &[&str], stdin: &[u8]) -> Run {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!("umask {mask:03o} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_loop-hook"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .current_dir(&env.project);
    run_command(cmd, stdin)
}

/// Every folder and file under `root`, with its mode; links left out.
fn modes(root: &Path) -> Vec<(PathBuf, u32)> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                folders.push(entry.path());
            }
            if !meta.file_type().is_symlink() {
                found.push((entry.path(), meta.permissions().mode() & 0o777));
            }
        }
    }
    found
}

fn armed(env: &TestEnv) -> PathBuf {
    env.store().with_file_name("for-loop-armed")
}

/// A loop started, stopped once (a failing check, then a passing one), its prompt hook run and
/// its archive made by a second start, all under `mask`: every folder of the store and of its
/// copies is 0700 and every file 0600.
fn assert_private_under(mask: u32) {
    let env = TestEnv::new();
    env.write("check.sh", "test -f done\n");
    let text = b"t --verify 'sh check.sh' --max-iterations 5";
    let started = run_with_umask(&env, mask, &["start", "--session", SESSION], text);
    assert_eq!(started.code, 0, "{}", started.stderr);
    let stop = stop_event(SESSION, &env.project, "Done.", false).to_string();
    let blocked = run_with_umask(&env, mask, &["stop-hook"], stop.as_bytes());
    assert!(blocked.blocked(), "{}", blocked.stdout);
    let prompt = serde_json::json!({"session_id": SESSION, "cwd": env.project, "hook_event_name": "UserPromptSubmit", "prompt": "go on"});
    run_with_umask(&env, mask, &["prompt-hook"], prompt.to_string().as_bytes());
    env.write("done", "");
    let stop = stop_event(SESSION, &env.project, "Done, again.", false).to_string();
    let passed = run_with_umask(&env, mask, &["stop-hook"], stop.as_bytes());
    assert!(!passed.blocked(), "{}", passed.stdout);
    let again = run_with_umask(&env, mask, &["start", "--session", SESSION], text);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(env.session_dir(SESSION).join("archive").is_dir(), "the first loop was archived");
    for root in [env.store(), armed(&env)] {
        assert_eq!(
            std::fs::metadata(&root).unwrap().permissions().mode() & 0o777,
            0o700,
            "{}",
            root.display()
        );
        let loose: Vec<_> = modes(&root)
            .into_iter()
            .filter(|(path, mode)| *mode != if path.is_dir() { 0o700 } else { 0o600 })
            .collect();
        assert!(loose.is_empty(), "umask {mask:03o}: {loose:?}");
    }
}

#[test]
fn a_loops_folders_and_files_are_private_under_umask_022() {
    assert_private_under(0o022);
}

#[test]
fn a_loops_folders_and_files_are_private_under_umask_000() {
    assert_private_under(0o000);
}

/// A store as an older for-loop left it, readable by everyone: the next stop makes it private,
/// says so once to the user, records it once; the stop after says nothing of it.
#[test]
fn an_open_store_is_tightened_at_the_next_write_and_told_once() {
    let env = TestEnv::new();
    env.write("check.sh", "exit 1\n");
    env.start("t --verify 'sh check.sh' --max-iterations 5");
    let mut opened = 0;
    for root in [env.store(), armed(&env)] {
        let mut all = modes(&root);
        all.push((root.clone(), 0));
        for (path, _) in all {
            let mode = if path.is_dir() { 0o755 } else { 0o644 };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            opened += 1;
        }
    }
    let first = env.stop("Done.");
    assert!(first.blocked(), "{}", first.stdout);
    assert!(first.system_message().contains("readable by other users"), "{}", first.stdout);
    assert!(first.system_message().contains(&format!("{opened} made private")), "{}", first.stdout);
    for root in [env.store(), armed(&env)] {
        let loose: Vec<_> = modes(&root)
            .into_iter()
            .filter(|(path, mode)| *mode != if path.is_dir() { 0o700 } else { 0o600 })
            .collect();
        assert!(loose.is_empty(), "{loose:?}");
    }
    let second = env.stop("Done.");
    assert!(!second.system_message().contains("readable by other users"), "{}", second.stdout);
    let reasons = env.ledger_reasons(SESSION);
    assert_eq!(reasons.iter().filter(|r| *r == "store_tightened").count(), 1, "{reasons:?}");
}
