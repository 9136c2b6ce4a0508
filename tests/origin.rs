//! Who sent a hook event, told from a real process tree: a stand-in host (a shell named as
//! Copilot CLI's process is, `MainThread`, running a script whose path names `copilot`) starts
//! the prompt and Stop hooks as Copilot CLI does, as its direct children in its own session, and
//! a stand-in tool shell of its own (a session of its own, as every host measured gives its
//! agent) runs them the ways an agent would: plainly, `exec`ed, and from a job left behind. A
//! stand-in Claude Code (python named `claude`) hands its hook the event on a socket it made, as
//! Claude Code does, against a tool shell `exec`ed into the hook with a socket of its own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::util::{SESSION, TestEnv};

/// How the stand-in host starts the hook.
enum Via {
    /// As its hook runner does: a direct child in its own session.
    Hook,
    /// Under a tool shell in a session of its own.
    ToolShell,
    /// The tool shell itself, `exec`ed into the hook.
    ExecedToolShell,
    /// A background job of the tool shell, run after the shell is gone.
    LeftBehind,
}

struct Host {
    env: TestEnv,
    /// `MainThread`, a link to `/bin/sh`.
    shell: PathBuf,
}

impl Host {
    fn new() -> Host {
        let env = TestEnv::new();
        let bin = env.home.join("copilot-bin");
        std::fs::create_dir_all(&bin).unwrap();
        let shell = bin.join("MainThread");
        std::os::unix::fs::symlink("/bin/sh", &shell).unwrap();
        let started = env.run(&["start", "--session", SESSION, "--host", "copilot-cli"], "t --verify false");
        assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
        Host { env, shell }
    }

    /// Runs `loop-hook ARGS` with `event` on its stdin, started `via`, and waits for it to finish.
    fn send(&self, via: &Via, args: &str, event: &serde_json::Value) -> String {
        let dir = self.env.home.join("copilot");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("event.json"), event.to_string()).unwrap();
        let out = dir.join("out.txt");
        let _ = std::fs::remove_file(&out);
        let hook = format!(
            "'{}' {args} < '{}' > '{}.part'; mv '{}.part' '{}'",
            env!("CARGO_BIN_EXE_loop-hook"),
            dir.join("event.json").display(),
            out.display(),
            out.display(),
            out.display()
        );
        let exec_hook = format!(
            "exec '{}' {args} < '{}' > '{}'",
            env!("CARGO_BIN_EXE_loop-hook"),
            dir.join("event.json").display(),
            out.display()
        );
        let line = match via {
            Via::Hook => format!("{hook}; true"),
            Via::ToolShell => format!("setsid sh -c \"{}\"; true", hook.replace('"', "\\\"")),
            Via::ExecedToolShell => format!("setsid sh -c \"{exec_hook}\"; true"),
            Via::LeftBehind => {
                format!("setsid sh -c \"(sleep 0.3; {}) >/dev/null 2>&1 &\"; true", hook.replace('"', "\\\""))
            }
        };
        // The script's path names the host, as Copilot CLI's command line does.
        let script = dir.join("copilot-host.sh");
        std::fs::write(&script, format!("{line}\n")).unwrap();
        let status = self.host_command(&script).status().unwrap();
        assert!(status.success());
        wait_for(&out);
        std::fs::read_to_string(&out).unwrap()
    }

    fn host_command(&self, script: &Path) -> Command {
        let mut cmd = Command::new(&self.shell);
        cmd.arg(script)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.env.home)
            .current_dir(&self.env.project);
        cmd
    }

    fn cancel(&self, via: &Via) -> String {
        let event = json!({"sessionId": SESSION, "prompt": "/cancel-loop", "cwd": self.env.project});
        self.send(via, "prompt-hook --host copilot-cli", &event)
    }

    fn last_line(&self) -> (String, String) {
        let ledger = self.env.ledger_of_raw(SESSION);
        let last = ledger.last().unwrap();
        (last["reason"].as_str().unwrap().to_string(), last["origin"].as_str().unwrap_or("-").to_string())
    }

    fn active(&self) -> bool {
        std::fs::read_to_string(self.env.session_dir(SESSION).join("state.md"))
            .unwrap()
            .contains("status: active")
    }
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + crate::util::PATIENCE;
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_cancel_the_agent_sends_through_the_prompt_hook_is_refused_however_it_is_started() {
    for via in [Via::ToolShell, Via::ExecedToolShell, Via::LeftBehind] {
        let host = Host::new();
        let answer = host.cancel(&via);
        assert!(answer.contains("was not run"), "{answer}");
        assert!(host.active(), "{answer}");
        assert_eq!(host.last_line(), ("agent_command_refused".into(), "agent".into()));
        // The user hears of it at their next prompt, from the host's own hook.
        let next = host.send(
            &Via::Hook,
            "prompt-hook --host copilot-cli",
            &json!({"sessionId": SESSION, "prompt": "hello", "cwd": host.env.project}),
        );
        assert!(
            next.contains("the agent sent `/cancel-loop` through for-loop's prompt hook itself"),
            "{next}"
        );
    }
}

#[test]
fn the_users_cancel_through_the_hosts_hook_runner_is_carried_out() {
    let host = Host::new();
    let answer = host.cancel(&Via::Hook);
    assert!(answer.contains("cancelled"), "{answer}");
    assert!(!host.active());
    assert_eq!(host.last_line(), ("cancelled".into(), "user".into()));
}

#[test]
fn a_stop_the_agent_sends_is_recorded_as_forged_and_not_judged() {
    let host = Host::new();
    let stop = json!({"sessionId": SESSION, "stopReason": "end_turn", "cwd": host.env.project});
    let forged = host.send(&Via::ToolShell, "stop-hook --host copilot-cli", &stop);
    assert!(forged.contains("this stop was not judged"), "{forged}");
    let ledger = host.env.ledger_of_raw(SESSION);
    let last = ledger.last().unwrap();
    assert_eq!((last["reason"].as_str(), last["origin"].as_str()), (Some("forged_stop"), Some("agent")));
    assert!(last["detail"].as_str().unwrap().contains("process tree"), "{last}");
    let real = host.send(&Via::Hook, "stop-hook --host copilot-cli", &stop);
    assert!(!real.contains("this stop was not judged"), "{real}");
    assert_eq!(host.env.ledger_reasons(SESSION).last().map(String::as_str), Some("verify_failed"));
}

/// A stand-in Claude Code: a link named `claude` to the python interpreter, starting the hook
/// as Claude Code does (a session of its own, its event on a socket `claude` made), or starting
/// a tool shell that `exec`s itself into the hook with the event on a socket of its own.
mod socket {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use serde_json::{Value, json};

    use crate::util::{SESSION, TestEnv};

    const HOST: &str = r"
import os, socket, subprocess, sys
mode, event, out, binary, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
if mode == 'hook':
    ours, theirs = socket.socketpair()
    hook = subprocess.Popen([binary] + args, stdin=theirs, stdout=open(out, 'w'), start_new_session=True)
    theirs.close()
    ours.sendall(open(event, 'rb').read())
    ours.shutdown(socket.SHUT_WR)
    hook.wait()
else:
    shell = '''
import os, socket, sys
binary, event, out, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ours, theirs = socket.socketpair()
if os.fork() == 0:
    theirs.close()
    ours.sendall(open(event, 'rb').read())
    os._exit(0)
ours.close()
os.dup2(theirs.fileno(), 0)
os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
os.execv(binary, [binary] + args)
'''
    subprocess.run([sys.executable, '-c', shell, binary, event, out] + args, start_new_session=True)
";

    pub(super) struct Claude {
        pub(super) env: TestEnv,
        host: PathBuf,
    }

    impl Claude {
        pub(super) fn new() -> Claude {
            let env = TestEnv::new();
            let python =
                Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
            let python = String::from_utf8(python.stdout).unwrap();
            let bin = env.home.join("claude-bin");
            std::fs::create_dir_all(&bin).unwrap();
            let host = bin.join("claude");
            std::os::unix::fs::symlink(python.trim(), &host).unwrap();
            let started =
                env.run(&["start", "--session", SESSION, "--host", "claude-code"], "t --verify false");
            assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
            Claude { env, host }
        }

        /// `loop-hook ARGS` with `event`, started by the host (`hook`) or by its tool shell
        /// `exec`ed into it.
        pub(super) fn send(&self, mode: &str, args: &[&str], event: &Value) -> String {
            let dir = self.env.home.join("claude");
            std::fs::create_dir_all(&dir).unwrap();
            let (event_path, out) = (dir.join("event.json"), dir.join("out.txt"));
            std::fs::write(&event_path, event.to_string()).unwrap();
            let status = Command::new(&self.host)
                .args(["-c", HOST, mode, path(&event_path), path(&out), env!("CARGO_BIN_EXE_loop-hook")])
                .args(args)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", &self.env.home)
                .current_dir(&self.env.project)
                .status()
                .unwrap();
            assert!(status.success());
            std::fs::read_to_string(&out).unwrap()
        }

        pub(super) fn stop(&self, mode: &str) -> String {
            let event = json!({"session_id": SESSION, "transcript_path": "/nonexistent", "cwd": self.env.project,
                "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "done"});
            self.send(mode, &["stop-hook"], &event)
        }

        pub(super) fn usage_limit(&self, mode: &str) -> String {
            let event = json!({"session_id": SESSION, "hook_event_name": "StopFailure", "error": "rate_limit",
                "cwd": self.env.project, "last_assistant_message": "Claude AI usage limit reached"});
            self.send(mode, &["stop-hook"], &event)
        }

        pub(super) fn last_line(&self) -> (String, String, String) {
            let ledger = self.env.ledger_of_raw(SESSION);
            let last = ledger.last().unwrap();
            let field = |name: &str| last[name].as_str().unwrap_or("-").to_string();
            (field("reason"), field("origin"), field("detail"))
        }
    }

    fn path(path: &Path) -> &str {
        path.to_str().unwrap()
    }
}

/// On a host that hands its hooks their event on a socket, the tool shell `exec`ed into the hook
/// has the hook's place in the tree but not the host's socket: its stop is forged, the host's is
/// judged.
#[test]
fn a_stop_from_the_tool_shell_execed_into_the_hook_is_forged_and_the_hosts_is_judged() {
    let claude = socket::Claude::new();
    let forged = claude.stop("execed");
    assert!(forged.contains("this stop was not judged"), "{forged}");
    let (reason, origin, detail) = claude.last_line();
    assert_eq!((reason.as_str(), origin.as_str()), ("forged_stop", "agent"));
    assert!(detail.contains("exec'ed into the hook"), "{detail}");
    let judged = claude.stop("hook");
    assert!(!judged.contains("this stop was not judged"), "{judged}");
    assert_eq!(claude.last_line().0, "verify_failed");
}

/// A usage limit reported by the host parks the loop; the same report from the tool shell
/// `exec`ed into the hook is recorded as the agent's and changes nothing.
#[test]
fn a_usage_limit_the_agent_reports_itself_changes_nothing() {
    let claude = socket::Claude::new();
    claude.usage_limit("execed");
    let (reason, origin, detail) = claude.last_line();
    assert_eq!((reason.as_str(), origin.as_str()), ("forged_stop", "agent"), "{detail}");
    assert!(detail.contains("process tree"), "{detail}");
    let state =
        std::fs::read_to_string(claude.env.session_dir(crate::util::SESSION).join("state.md")).unwrap();
    assert!(state.contains("status: active"), "{state}");
    claude.usage_limit("hook");
    assert_eq!(claude.last_line().0, "agent_limited");
}
