//! Many sessions' stops at once, several for the same session, and hooks killed with SIGKILL at
//! random moments (in verify, mid-commit, holding the lock). Afterwards every loop must be whole:
//! its state parses, its ledger and state agree, no iteration was lost or counted twice, and no
//! temporary file survives the next stop. Bounded to well under a minute.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::util::{TestEnv, sha256, stop_event};

const SESSIONS: usize = 5;
const STORM: Duration = Duration::from_secs(15);
const PARALLEL: usize = 6;
/// Any one hook must be done by then, killed or not.
const HOOK_LIMIT: Duration = Duration::from_secs(30);

/// A small xorshift generator: no dependency, and its seed is printed so a failure can be replayed
/// (`FOR_LOOP_STRESS_SEED`).
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

struct Hook {
    child: Child,
    started: Instant,
    kill_at: Option<Instant>,
}

#[test]
fn concurrent_stops_and_killed_hooks_leave_every_loop_whole() {
    let seed = std::env::var("FOR_LOOP_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos().into());
    eprintln!("stress seed: {seed}");
    let mut rng = Rng(seed | 1);
    let env = TestEnv::new();
    let sessions: Vec<String> = (0..SESSIONS).map(|i| format!("stress-{i}")).collect();
    for session in &sessions {
        let run = env.run(
            &["start", "--session", session],
            "stress --verify \"sleep 0.02; exit 1\" --max-iterations 10000 --max-same-failures 1000",
        );
        assert_eq!(run.code, 0, "{}", run.stdout);
    }

    let (mut launched, mut killed) = (0, 0);
    let mut running: Vec<Hook> = Vec::new();
    let storm = Instant::now();
    while storm.elapsed() < STORM || !running.is_empty() {
        let now = Instant::now();
        running.retain_mut(|hook| {
            if hook.kill_at.is_some_and(|at| now >= at) {
                let _ = hook.child.kill();
                killed += 1;
                hook.kill_at = None;
            }
            assert!(hook.started.elapsed() < HOOK_LIMIT, "a hook ran past {HOOK_LIMIT:?} (seed {seed})");
            !matches!(hook.child.try_wait(), Ok(Some(_)))
        });
        while storm.elapsed() < STORM && running.len() < PARALLEL {
            let session = &sessions[usize::try_from(rng.next(SESSIONS as u64)).unwrap()];
            let event = stop_event(session, &env.project, "done", rng.next(2) == 0).to_string();
            let mut child = env
                .command(&["stop-hook"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let _ = child.stdin.take().unwrap().write_all(event.as_bytes());
            // A third of the hooks die at a random moment of their run.
            let kill_at = (rng.next(3) == 0).then(|| Instant::now() + Duration::from_millis(rng.next(90)));
            running.push(Hook { child, started: Instant::now(), kill_at });
            launched += 1;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    eprintln!("stress: {launched} hooks, {killed} killed (seed {seed})");
    assert!(launched > 50 && killed > 5, "the storm was too small to mean anything: {launched} / {killed}");

    for session in &sessions {
        // The next stop finishes or undoes what a killed hook left, and judges.
        let run = env.stop_as(session, "done", true);
        assert!(run.blocked(), "{session}: {} (seed {seed})", run.stdout);
        assert_whole(&env, session, seed);
    }
}

/// Every invariant of one session's loop after the storm.
fn assert_whole(env: &TestEnv, session: &str, seed: u64) {
    let dir = env.session_dir(session);
    let state = fs::read(dir.join("state.md")).unwrap();
    let status = env.run(&["status", "--session", session, "--json"], "");
    let json: Value = serde_json::from_str(&status.stdout).unwrap();
    assert!(json.get("error").is_none(), "{session}: the state does not parse: {json} (seed {seed})");
    let iteration = json["loop"]["meta"]["iteration"].as_u64().unwrap();

    let text = fs::read_to_string(dir.join("ledger.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{session}: a torn ledger line ({e}): {l}"))
        })
        .collect();
    // Each judged block moved the loop on by exactly one turn, in order: none lost, none twice.
    let blocks: Vec<u64> =
        lines.iter().filter(|l| l["decision"] == "block").map(|l| l["iteration"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=blocks.len() as u64).collect();
    assert_eq!(blocks, expected, "{session}: blocked iterations (seed {seed})");
    assert_eq!(iteration, blocks.len() as u64 + 1, "{session}: the state's iteration (seed {seed})");

    // The ledger vouches for the state, and the last good copy is the state.
    let last = lines.iter().rev().find_map(|l| l["state_digest"].as_str()).unwrap();
    assert_eq!(last, sha256(&state), "{session}: the ledger's last digest (seed {seed})");
    let copy = env.home.join(format!(".local/state/for-loop-armed/sessions/{session}.md"));
    assert_eq!(fs::read(&copy).unwrap(), state, "{session}: the last good copy (seed {seed})");

    for (place, prefixes) in [
        (
            dir.as_path(),
            vec![".state.md.", ".journal.json.", ".judging.json.", "journal.json", "judging.json"],
        ),
        (copy.parent().unwrap(), vec![&*format!(".{session}.md.")]),
    ] {
        let litter = litter(place, &prefixes);
        assert!(litter.is_empty(), "{session}: left behind: {litter:?} (seed {seed})");
    }
}

fn litter(dir: &Path, prefixes: &[&str]) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| prefixes.iter().any(|p| name.starts_with(p)))
        .collect()
}
