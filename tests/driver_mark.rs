//! A driver mark is proven, not trusted (issue 42, item 2): a `driver.pid` the agent wrote
//! naming a live `sleep`, a dead pid, a pid with another start time, or text that is no mark,
//! used to keep every driver out while `/for-loop:handoff` said the loop ran in the background.
//! Now the driver a handoff starts proves the mark stale, replaces it, records why
//! (`driver_mark_replaced`), and takes the loop; the handoff says "running" only once it has.
//! A mark that a real `loop-hook run` holds still keeps a second driver out, and the handoff
//! then says what happened instead of "running".

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::run_driver::fake_claude;
use crate::util::{SESSION, TestEnv};

/// The agent that does the task: it creates `fixed`.
const FIXES: &str = "touch fixed; echo '{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}'";

/// A loop in the test session at iteration two, and the run loop a handoff makes of it.
fn session_loop(env: &TestEnv) -> String {
    env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
    env.start("create the file fixed --verify \"sh check.sh\" --max-iterations 5");
    assert!(env.stop("not yet").blocked());
    let text = std::fs::read_to_string(env.state_path()).unwrap();
    let loop_id =
        text.lines().find_map(|l| l.strip_prefix("loop_id: ")).unwrap().trim_matches('"').to_string();
    format!("run-{loop_id}")
}

fn ledger(env: &TestEnv, session: &str) -> Vec<Value> {
    std::fs::read_to_string(env.session_dir(session).join("ledger.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// `/for-loop:handoff` from a terminal, with the stand-in agent CLI on PATH.
fn handoff(env: &TestEnv, bin: &Path) -> crate::util::Run {
    let mut cmd = env.command(&["handoff", "--session", SESSION]);
    cmd.env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()));
    crate::util::run_command(cmd, b"")
}

fn wait_for_reason(env: &TestEnv, session: &str, reason: &str) {
    let began = Instant::now();
    while !ledger(env, session).iter().any(|l| l["reason"] == reason) {
        assert!(began.elapsed() < Duration::from_secs(120), "no {reason}: {:#?}", ledger(env, session));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The start time of `pid`, field 22 of `/proc/PID/stat`.
fn start_of(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().parse().unwrap()
}

struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(Command::new("sleep").arg("300").stdin(Stdio::null()).spawn().unwrap())
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A pid no process has: a child reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// For each mark the agent can plant before the handoff: the handoff says the loop runs, the
/// driver replaces the mark naming why, and the loop ends verified under the run.
#[test]
fn a_stale_or_foreign_driver_mark_is_replaced_recorded_and_the_handoff_runs() {
    let sleeper = Sleeper::start();
    let live = sleeper.0.id();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "a live foreign process",
            format!("{live} {}\n", start_of(live)),
            "which is not loop-hook run of this loop (it is `sleep 300`)",
        ),
        ("a live foreign pid, old form", format!("{live}\n"), "which is not loop-hook run of this loop"),
        ("a dead pid", format!("{} 1\n", dead_pid()), "which is gone"),
        ("a reused pid", format!("{live} {}\n", start_of(live) + 1), "that pid is now another process"),
        ("garbage", "not a pid at all\n".to_string(), "holds no process id and start time"),
    ];
    for (what, mark, why) in cases {
        let env = TestEnv::new();
        let run_id = session_loop(&env);
        let dir = env.session_dir(&run_id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("driver.pid"), &mark).unwrap();
        let bin = fake_claude(&env, FIXES);
        let handed = handoff(&env, &bin);
        assert_eq!(handed.code, 0, "{what}: {}", handed.stdout);
        assert!(handed.stdout.contains("It is running now in the background"), "{what}: {}", handed.stdout);
        wait_for_reason(&env, &run_id, "verified");
        let lines = ledger(&env, &run_id);
        let replaced: Vec<&Value> = lines.iter().filter(|l| l["reason"] == "driver_mark_replaced").collect();
        assert_eq!(replaced.len(), 1, "{what}: {lines:#?}");
        let detail = replaced[0]["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(why) && detail.contains("took the loop"), "{what}: {detail}");
        // The driver removes its mark when it ends, just after its last ledger line.
        let began = Instant::now();
        while dir.join("driver.pid").exists() {
            assert!(began.elapsed() < Duration::from_secs(60), "{what}: the mark outlived its driver");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A mark a real `loop-hook run` holds (here a driver of another loop, started as `loop-hook run
/// TASK`, which names no loop to tell it by): the driver the handoff starts refuses, and the
/// handoff says so, naming the process, instead of "running now".
#[test]
fn a_mark_held_by_a_running_driver_keeps_the_new_one_out_and_the_handoff_says_so() {
    let env = TestEnv::new();
    let run_id = session_loop(&env);
    let started = env.home.join("other-agent-started");
    // `exec`: the agent is the `sleep` itself, which the kill of the driver's group below ends.
    let bin = fake_claude(&env, &format!("touch {}; exec sleep 300", started.display()));
    let other_dir = env.home.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let mut other = env.command(&["run", "other task", "--verify", "false", "--no-sandbox"]);
    other
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
        .current_dir(&other_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut other, 0);
    let mut other = other.spawn().unwrap();
    crate::run_driver::wait_for(&started);
    let dir = env.session_dir(&run_id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("driver.pid"), format!("{} {}\n", other.id(), start_of(other.id()))).unwrap();
    let handed = handoff(&env, &bin);
    let _ = Command::new("kill").arg("--").arg(format!("-{}", other.id())).status();
    let _ = other.wait();
    assert!(!handed.stdout.contains("running now"), "{}", handed.stdout);
    assert!(
        handed.stdout.contains(&format!("(process {}) is already running this loop", other.id())),
        "{}",
        handed.stdout
    );
}
