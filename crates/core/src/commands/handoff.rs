//! `/for-loop:handoff` and `loop-hook run --resume LOOP`: a loop running in a session moves to
//! `loop-hook run`, one fresh agent session per iteration.
//!
//! The loop keeps its id, task, settings (budgets, story, reviewer), iteration, streaks and
//! ledger: the run's copy begins with the session's ledger, so the ledger and the report read as
//! one loop. The session's copy ends `handed_over`, naming the run, so its session's stops are let
//! through with a line saying where the loop went, and no stop can judge it in two places. Both
//! copies change under their locks, through the store's transactions: the run's is written first,
//! so a handoff cut short leaves the session's loop running, never no loop at all.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::commands::session::Target;
use crate::host::Agent;
use crate::host::{AGENT_SHELL_VARS, Origin};
use crate::provenance::{Mutation, origin};
use crate::state::{Handoff, LedgerDecision, LedgerEntry, LoopState, ReasonCode, Status};
use crate::store::Custody;
use crate::store::LoopFile;
use crate::store::{Found, Judgment};
use crate::store::{LoopPaths, Store};
use crate::store::{Notes, Transaction};
use crate::support::Environment;
use crate::support::Outcome;

/// A session whose transcript was written this recently is taken to be at work on its loop.
const LIVE_SECS: i64 = 60;
/// The first wait after a limit that gives no reset time, as `loop-hook run` starts with.
pub(crate) const DEFAULT_BACKOFF_SECS: u64 = 30;

/// Why a loop cannot be handed over. Each message says what to do instead; nothing changed.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum HandoffError {
    #[error("no loop in this session to hand over; start one with /for-loop or loop-hook run")]
    NoLoop,
    #[error("the loop has already ended ({outcome}); there is nothing to hand over")]
    Ended { outcome: String },
    #[error(
        "the loop is parked ({outcome}): resume it first ({resume}), or continue it where it is; a \
         parked loop is not handed over"
    )]
    Parked { outcome: String, resume: &'static str },
    #[error(
        "the loop was already handed over to loop-hook run ({to}): follow it with `loop-hook status \
         --session {to}`, continue it with `loop-hook run --resume {to}`"
    )]
    AlreadyHandedOver { to: String },
    #[error(
        "the loop is running in session {session} right now ({what}): hand it over from there with \
         /for-loop:handoff, or end that session and try again {when}"
    )]
    Live { session: String, what: String, when: String },
    #[error("no agent CLI is installed to run the loop: install {install}, then hand the loop over again")]
    NoAgent { install: String },
    #[error("{why}, so its settings cannot be trusted; start a new loop")]
    Untrusted { why: String },
    #[error("could not hand the loop over, nothing changed: {0}")]
    Store(String),
}

/// The driver's settings kept beside a run loop (`run.json`), so `loop-hook run --resume` runs
/// the same agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    pub agent: String,
    pub agent_args: Vec<String>,
    pub backoff_secs: u64,
}

impl RunRecord {
    /// The largest record read: an agent's name and its arguments.
    const LIMIT: u64 = 1 << 20;

    /// The run's settings kept in the loop's directory `dir`, or why they cannot be used.
    pub(crate) fn read(dir: &Path) -> Result<RunRecord, String> {
        let bytes = LoopFile::RunRecord
            .read_record(dir, RunRecord::LIMIT)
            .map_err(|why| format!("cannot read the run's settings: {why}"))?
            .ok_or_else(|| {
                format!(
                    "cannot read the run's settings: {} is missing",
                    LoopFile::RunRecord.path(dir).display()
                )
            })?;
        serde_json::from_slice(&bytes).map_err(|e| format!("bad run settings: {e}"))
    }

    /// Keeps the settings in the loop `held` holds, under its lock.
    pub(crate) fn write(&self, held: &Transaction<'_>) -> std::io::Result<()> {
        held.write_record(LoopFile::RunRecord, serde_json::to_string(self).unwrap_or_default().as_bytes())
    }
}

/// What a handoff asks for.
#[derive(Debug, Clone, Default)]
pub(crate) struct HandoffRequest {
    /// The CLI to run (`--agent`); `None`: the host's own when installed, else the first installed.
    pub agent: Option<Agent>,
    pub agent_args: Vec<String>,
    pub backoff_secs: Option<u64>,
    /// The session that asks, when it is a session (the prompt hook's): a loop is never live to
    /// its own session's handoff.
    pub from_session: Option<String>,
}

/// A loop handed over: where it is now.
#[derive(Debug, Clone)]
pub(crate) struct Handed {
    /// The run loop's session id, which `loop-hook run --resume` and `loop-hook status` take.
    pub run_id: String,
    pub paths: LoopPaths,
    pub agent: Agent,
    pub iteration: u32,
    pub max_iterations: u32,
    pub cwd: PathBuf,
}

/// The run loop a handed-over loop becomes: one per loop, so a handoff cut short and tried again
/// finds the copy it began.
pub(crate) fn run_id_of(loop_id: &str) -> String {
    format!("run-{loop_id}")
}

/// Hands the loop in `from` over to `loop-hook run`: writes the run's copy (ledger first, then
/// state, under its lock), then ends the session's copy `handed_over`, under its own lock. The one
/// function both `/for-loop:handoff` and `loop-hook run --resume LOOP` use; the driver is not
/// started here ([`start_driver`]).
pub(crate) fn hand_over(
    env: &Environment,
    store: &Store,
    from: &LoopPaths,
    request: &HandoffRequest,
) -> Result<Handed, HandoffError> {
    let (held, custody) = Transaction::open(from, env.now).map_err(|e| HandoffError::Store(e.to_string()))?;
    let state = match custody {
        Custody::Loop { state, .. } => state,
        Custody::Untrusted { why, .. } => return Err(HandoffError::Untrusted { why }),
        Custody::None => return Err(HandoffError::NoLoop),
    };
    refused(&state, request.from_session.as_deref())?;
    live(env, from, &state, request.from_session.as_deref())?;
    let agent = choose_agent(env, &state, request.agent)?;
    let run_id = run_id_of(&state.meta.loop_id);
    let handoff = Handoff {
        from: state.meta.session_id.clone(),
        to: run_id.clone(),
        at: env.now,
        iteration: state.meta.iteration,
    };
    let paths = store.paths(&run_id);
    let record = RunRecord {
        agent: agent.program().into(),
        agent_args: request.agent_args.clone(),
        backoff_secs: request.backoff_secs.unwrap_or(DEFAULT_BACKOFF_SECS),
    };
    let run = run_copy(&state, &handoff, agent, env.now);
    {
        let target = Transaction::lock(&paths).map_err(|e| HandoffError::Store(e.to_string()))?;
        record.write(&target).map_err(|e| HandoffError::Store(e.to_string()))?;
        target.copy_ledger_from(&held).map_err(|e| HandoffError::Store(e.to_string()))?;
        let line = LedgerEntry {
            detail: Some(format!("handed over from session {} to loop-hook run ({run_id})", handoff.from)),
            ..LedgerEntry::new(&run, env.now, LedgerDecision::Note, ReasonCode::HandedOver)
        };
        target.commit(&run, &[line]).map_err(|e| HandoffError::Store(e.to_string()))?;
    }
    let (ended, line) = session_copy(&state, &handoff, env.now);
    held.commit(&ended, &[line]).map_err(|e| HandoffError::Store(e.to_string()))?;
    Ok(Handed {
        run_id,
        paths,
        agent,
        iteration: run.meta.iteration,
        max_iterations: run.meta.settings.max_iterations,
        cwd: run.meta.cwd.clone(),
    })
}

/// Why `state` cannot be handed over by `asking` (a session, or a terminal), if it cannot. A loop
/// parked by a usage limit can: `loop-hook run` waits the window out itself.
fn refused(state: &LoopState, asking: Option<&str>) -> Result<(), HandoffError> {
    let outcome = || state.meta.outcome.map_or("parked".to_string(), |o| o.to_string());
    match (state.meta.status, state.meta.outcome, &state.meta.handoff) {
        (Status::Ended, Some(ReasonCode::HandedOver), Some(handoff)) => {
            Err(HandoffError::AlreadyHandedOver { to: handoff.to.clone() })
        }
        (Status::Ended, _, _) => Err(HandoffError::Ended { outcome: outcome() }),
        (Status::Parked, Some(ReasonCode::AgentLimited), _) => Ok(()),
        (Status::Parked, _, _) => {
            Err(HandoffError::Parked { outcome: outcome(), resume: state.meta.host.commands().resume })
        }
        // A run loop is already where a handoff would take it.
        (Status::Active, _, _) if state.meta.session_id.starts_with("run-") => {
            Err(HandoffError::AlreadyHandedOver { to: state.meta.session_id.clone() })
        }
        (Status::Active, _, _) if state.meta.session_id.is_empty() && asking.is_none() => {
            Err(HandoffError::NoLoop)
        }
        (Status::Active, _, _) => Ok(()),
    }
}

/// Refuses a loop that another session is judging or working on right now: its hook is judging a
/// stop, or its transcript was written in the last [`LIVE_SECS`] by a session not known to have
/// ended since ([`ended`]).
fn live(
    env: &Environment,
    paths: &LoopPaths,
    state: &LoopState,
    asking: Option<&str>,
) -> Result<(), HandoffError> {
    let owner = state.meta.session_id.as_str();
    if asking == Some(owner) || state.meta.status != Status::Active {
        return Ok(());
    }
    let live =
        |what: String, when: String| Err(HandoffError::Live { session: owner.to_string(), what, when });
    if let Found::Running(other) = Judgment::found(paths, env.now) {
        return live(
            format!("its Stop hook, process {}, is judging a stop", other.pid),
            "in a minute".into(),
        );
    }
    let written = state
        .meta
        .transcript
        .as_deref()
        .and_then(|t| fs::metadata(t).ok())
        .and_then(|m| m.modified().ok())
        .and_then(|at| Timestamp::try_from(at).ok());
    if let Some(at) = written {
        let secs = env.now.duration_since(at).as_secs();
        if (0..LIVE_SECS).contains(&secs)
            && !ended(state, crate::provenance::host_process::recorded(&paths.dir), at)
        {
            return live(
                format!("its transcript was written {secs} s ago"),
                format!("in {} s", LIVE_SECS - secs),
            );
        }
    }
    Ok(())
}

/// Slack between a session's last event and its transcript's last write: the host writes the
/// event's outcome (a block's feedback, an error) around the hook, a moment after it ran.
const LAST_WRITE_SLACK_SECS: i64 = 10;

/// Whether the session is known to have ended since it last wrote its transcript, written at
/// `written`: its last turn ended on an error the host reported (a failed turn's record), or
/// the host process that sent its last event has exited. A session that wrote its transcript
/// after either (resumed, or compacted and prompted again) may be at work.
fn ended(state: &LoopState, host: Option<crate::provenance::HostProcess>, written: Timestamp) -> bool {
    let slack = jiff::SignedDuration::from_secs(LAST_WRITE_SLACK_SECS);
    let failed = state.meta.failed_turn.as_ref().is_some_and(|turn| written <= turn.at + slack);
    let exited = host.is_some_and(|host| {
        host.has_exited() == Some(true) && written.as_second() <= host.at + LAST_WRITE_SLACK_SECS
    });
    failed || exited
}

/// The CLI the run uses: the one asked for, else the host's own, else the first installed.
fn choose_agent(env: &Environment, state: &LoopState, asked: Option<Agent>) -> Result<Agent, HandoffError> {
    let path = env.var("PATH");
    let own = Agent::ALL.into_iter().find(|agent| agent.host() == state.meta.host);
    let wanted = asked.or(own);
    if let Some(agent) = wanted.filter(|agent| agent.locate(path).is_some()) {
        return Ok(agent);
    }
    if asked.is_none()
        && let Some(agent) = Agent::ALL.into_iter().find(|agent| agent.locate(path).is_some())
    {
        return Ok(agent);
    }
    let install = match wanted {
        Some(agent) => format!("{} (`{}` on PATH)", agent.title(), agent.program()),
        None => "Claude Code (`claude`), Gemini CLI (`gemini`) or Codex (`codex`)".to_string(),
    };
    Err(HandoffError::NoAgent { install })
}

/// The run's copy of `state`: the same loop, under the run's session id, active, with nothing
/// of the session's own (its transcript, the reply it last judged, a command it awaits).
fn run_copy(state: &LoopState, handoff: &Handoff, agent: Agent, now: Timestamp) -> LoopState {
    let mut run = state.clone();
    let meta = &mut run.meta;
    meta.session_id.clone_from(&handoff.to);
    meta.host = agent.host();
    meta.status = Status::Active;
    meta.outcome = None;
    meta.receipt = None;
    meta.updated_at = now;
    meta.last_blocked = false;
    meta.transcript = None;
    meta.last_reply = None;
    meta.awaiting = None;
    meta.host_config = None;
    // The driver records the tier its sandbox gives the run.
    meta.tier = None;
    meta.handoff = Some(handoff.clone());
    run
}

/// The session's copy of `state`, ended `handed_over` and naming the run, and its ledger line.
fn session_copy(state: &LoopState, handoff: &Handoff, now: Timestamp) -> (LoopState, LedgerEntry) {
    let mut ended = state.clone();
    ended.meta.status = Status::Ended;
    ended.meta.outcome = Some(ReasonCode::HandedOver);
    ended.meta.updated_at = now;
    ended.meta.last_blocked = false;
    ended.meta.awaiting = None;
    ended.meta.handoff = Some(handoff.clone());
    let receipt = ended.receipt(ReasonCode::HandedOver, now, None);
    ended.meta.receipt = Some(receipt.clone());
    let line = LedgerEntry {
        detail: Some(format!("handed over to loop-hook run ({})", handoff.to)),
        receipt: Some(receipt),
        ..LedgerEntry::new(state, now, LedgerDecision::Note, ReasonCode::HandedOver)
    };
    (ended, line)
}

/// The line a handed-over loop's session gets at each of its stops.
pub(crate) fn stop_line(handoff: &Handoff) -> String {
    format!(
        "for-loop: this session's loop was handed over to loop-hook run ({}) at iteration {}; it goes \
         on there, one fresh session per iteration, and this stop is allowed. Follow it with \
         `loop-hook status --session {}`.",
        handoff.to, handoff.iteration, handoff.to
    )
}

/// What `loop-hook status` says of a loop that was handed over: where it went, or came from.
pub(crate) fn status_line(state: &LoopState) -> Option<String> {
    let handoff = state.meta.handoff.as_ref()?;
    Some(if state.meta.session_id == handoff.to {
        format!("taken over from session {} at iteration {}", handoff.from, handoff.iteration)
    } else {
        format!(
            "handed over to loop-hook run ({to}) at iteration {}; `loop-hook status --session {to}` follows it",
            handoff.iteration,
            to = handoff.to
        )
    })
}

/// Hands the loop in `paths` over and starts its run in the background: what `/for-loop:handoff`
/// does, and what a limit of a loop with `--on-limit handoff` is to do. `from_session`: the
/// session asking, when the loop's own (its user's prompt). The log of the run, or why it could
/// not be started, comes with the handed loop.
pub(crate) fn hand_over_in_background(
    env: &Environment,
    paths: &LoopPaths,
    from_session: Option<&str>,
) -> Result<(Handed, std::io::Result<PathBuf>), HandoffError> {
    let store = Store::locate(env).map_err(|e| HandoffError::Store(e.to_string()))?;
    let request =
        HandoffRequest { from_session: from_session.map(str::to_string), ..HandoffRequest::default() };
    let handed = hand_over(env, &store, paths, &request)?;
    let log = start_driver(env, &handed);
    Ok((handed, log))
}

/// How long a handoff waits for the driver it started to take the loop (its mark): it does so
/// first thing, in milliseconds on a quiet machine.
const TAKE_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Starts `loop-hook run --resume` on the handed-over loop, detached from the session: its own
/// process group, no terminal, output to `logs/driver.log` beside the run's state. The host's
/// variables for its agent's shell are left out, so the agent CLI the run starts is a session of
/// its own, not one nested in this one.
///
/// The log once the driver has taken the loop (its proven mark, [`crate::store::driver_mark`]),
/// or ended without an error; otherwise what became of it: a driver that refused (another holds
/// the loop) is not a loop running in the background.
pub(crate) fn start_driver(env: &Environment, handed: &Handed) -> std::io::Result<PathBuf> {
    let program = std::env::current_exe()?;
    let log = crate::store::record::log_path(&handed.paths.dir, "driver.log");
    let file = crate::store::record::open_log(&log, true)?;
    let mut cmd = Command::new(program);
    cmd.args(["run", "--resume", &handed.run_id])
        .current_dir(&handed.cwd)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    for name in AGENT_SHELL_VARS {
        cmd.env_remove(name);
    }
    if let Some(home) = env.var("FOR_LOOP_HOME") {
        cmd.env("FOR_LOOP_HOME", home);
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn()?;
    let began = std::time::Instant::now();
    loop {
        if crate::store::driver_mark::taken_by(&handed.paths, child.id()) {
            return Ok(log);
        }
        match child.try_wait() {
            // Done already: it took the loop and ran it to a stop of its own.
            Ok(Some(status)) if status.success() => return Ok(log),
            Ok(Some(status)) => {
                return Err(std::io::Error::other(format!(
                    "it stopped at once ({status}){}",
                    last_line(&log).map(|line| format!(": {line}")).unwrap_or_default()
                )));
            }
            _ => {}
        }
        if began.elapsed() > TAKE_WAIT {
            return Err(std::io::Error::other(format!(
                "it was started as process {}, but had not taken the loop after {} s; its output goes to {}",
                child.id(),
                TAKE_WAIT.as_secs(),
                log.display()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The last line a driver wrote to its log, for the user to see why it stopped.
fn last_line(log: &Path) -> Option<String> {
    let bytes = crate::support::read::bounded_read::read_tail(log, 4096).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines().rev().map(str::trim).find(|line| !line.is_empty()).map(str::to_string)
}

/// `/for-loop:handoff` (and `loop-hook handoff`): hands the session's loop over and starts the run
/// in the background.
pub(crate) fn run(env: &Environment, target: &Target, origin: Origin) -> Outcome {
    let paths = match target.loop_paths(env) {
        Ok(Some(paths)) => paths,
        Ok(None) => return Outcome::refused(format!("for-loop: not handed over: {}.", HandoffError::NoLoop)),
        Err(refusal) => return refusal,
    };
    if let Some(state) = crate::store::custody::trusted_state(&paths).ok().flatten()
        && let Some(refusal) = origin::gate(env, Notes::Free(&paths), &state, Mutation::Handoff, origin)
    {
        return refusal;
    }
    // The user's own prompt comes from the loop's session; a terminal's `--session` only names it.
    let from_session = target.session_id(env).filter(|_| origin == Origin::User);
    let (handed, started) = match hand_over_in_background(env, &paths, from_session) {
        Ok(handed) => handed,
        Err(e) => return Outcome::refused(format!("for-loop: not handed over: {e}.")),
    };
    if let Some(state) = crate::store::custody::trusted_state(&paths).ok().flatten() {
        origin::after(Notes::Free(&paths), &state, Mutation::Handoff, origin);
    }
    let driver = match started {
        Ok(log) => format!("It is running now in the background; its output goes to {}.", log.display()),
        Err(e) => format!(
            "It could not be started in the background ({e}): run `loop-hook run --resume {}` in a terminal.",
            handed.run_id
        ),
    };
    Outcome::ok(handoff_text(&handed, &driver))
}

/// What the user is told about a loop handed over.
fn handoff_text(handed: &Handed, driver: &str) -> String {
    format!(
        "for-loop: the loop is handed over to loop-hook run ({run}), at iteration {} of {}: one fresh {} \
         session per iteration, in loop-hook run's sandbox where it can start. {driver}\n  follow it: \
         loop-hook status --session {run}\n  ledger: {}\nThis session's stops are let through from \
         now on; the loop is judged only there.",
        handed.iteration,
        handed.max_iterations,
        handed.agent.title(),
        handed.paths.ledger.display(),
        run = handed.run_id,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;

    fn now() -> Timestamp {
        "2026-11-22T03:10:00Z".parse().unwrap()
    }

    /// The run's settings are written under the run loop's lock and read back; what is in their
    /// place and is not them is refused with why, and left as it is.
    #[test]
    fn the_run_record_is_read_back_and_anything_else_is_refused_with_why() {
        let root = tempfile::tempdir().unwrap();
        let paths = Store::at(root.path().join("for-loop")).paths("run-l1");
        let record = RunRecord { agent: "claude".into(), agent_args: vec!["--x".into()], backoff_secs: 9 };
        record.write(&Transaction::lock(&paths).unwrap()).unwrap();
        let read = RunRecord::read(&paths.dir).unwrap();
        assert_eq!(
            (read.agent.as_str(), read.agent_args, read.backoff_secs),
            ("claude", vec!["--x".into()], 9)
        );
        let file = LoopFile::RunRecord.path(&paths.dir);
        let refused =
            |what: &str| RunRecord::read(&paths.dir).err().unwrap_or_else(|| panic!("{what} was read"));
        for (what, text) in [("corrupt", "{\"agent\": "), ("wrong type", "[1, 2]"), ("empty", "")] {
            fs::write(&file, text).unwrap();
            assert!(refused(what).starts_with("bad run settings: "), "{what}: {}", refused(what));
        }
        fs::write(&file, vec![b' '; (1 << 20) + 1]).unwrap();
        assert!(refused("huge").contains("cannot be read"), "{}", refused("huge"));
        fs::remove_file(&file).unwrap();
        assert!(refused("missing").ends_with("run.json is missing"), "{}", refused("missing"));
        fs::create_dir(&file).unwrap();
        assert!(refused("a directory").ends_with("is a directory, not a file"), "{}", refused("a directory"));
        assert!(file.is_dir(), "left as it is");
    }

    fn handoff() -> Handoff {
        Handoff { from: "sess-1".into(), to: "run-x".into(), at: now(), iteration: 3 }
    }

    #[test]
    fn only_an_active_or_usage_limited_loop_is_handed_over() {
        let mut state = sample();
        assert_eq!(refused(&state, None), Ok(()));
        state.meta.status = Status::Parked;
        state.meta.outcome = Some(ReasonCode::AgentLimited);
        assert_eq!(refused(&state, None), Ok(()), "loop-hook run waits the window out itself");
        state.meta.outcome = Some(ReasonCode::NoProgress);
        assert!(matches!(refused(&state, None), Err(HandoffError::Parked { .. })));
        state.meta.status = Status::Ended;
        state.meta.outcome = Some(ReasonCode::Verified);
        assert_eq!(refused(&state, None), Err(HandoffError::Ended { outcome: "verified".into() }));
        state.meta.outcome = Some(ReasonCode::HandedOver);
        state.meta.handoff = Some(handoff());
        assert_eq!(refused(&state, None), Err(HandoffError::AlreadyHandedOver { to: "run-x".into() }));
        let mut run = sample();
        run.meta.session_id = "run-20261122-abc".into();
        assert!(matches!(refused(&run, None), Err(HandoffError::AlreadyHandedOver { .. })));
    }

    #[test]
    fn a_loop_whose_session_is_at_work_is_live_to_anyone_else() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("store"));
        let paths = store.paths("sess-1");
        let transcript = dir.path().join("transcript.jsonl");
        fs::write(&transcript, "{}\n").unwrap();
        let mut state = sample();
        state.meta.transcript = Some(transcript);
        let env = Environment::new(std::iter::empty(), dir.path().to_path_buf(), Timestamp::now());
        assert!(matches!(live(&env, &paths, &state, None), Err(HandoffError::Live { .. })));
        assert_eq!(live(&env, &paths, &state, Some("sess-1")), Ok(()), "its own session hands it over");
        let later = env.with_now(Timestamp::now() + jiff::SignedDuration::from_secs(LIVE_SECS + 1));
        assert_eq!(live(&later, &paths, &state, None), Ok(()), "an idle session is not at work");
        let refused = live(&env, &paths, &state, None).unwrap_err().to_string();
        assert!(refused.contains("try again in 60 s") || refused.contains("try again in 59 s"), "{refused}");
    }

    #[test]
    fn a_session_that_ended_on_an_error_is_not_at_work() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("store"));
        let paths = store.paths("sess-1");
        let transcript = dir.path().join("transcript.jsonl");
        fs::write(&transcript, "{}\n").unwrap();
        let mut state = sample();
        state.meta.transcript = Some(transcript);
        let now = Timestamp::now();
        state.meta.failed_turn = Some(crate::state::FailedTurn {
            kind: ReasonCode::ContextExhausted,
            at: now,
            resets_at: None,
            detail: Some("prompt is too long".into()),
        });
        let env = Environment::new(std::iter::empty(), dir.path().to_path_buf(), now);
        assert_eq!(live(&env, &paths, &state, None), Ok(()), "the failed turn ended the session");
        // A failed turn long before the transcript's last write: the session went on since.
        state.meta.failed_turn.as_mut().unwrap().at = now - jiff::SignedDuration::from_secs(3_600);
        assert!(matches!(live(&env, &paths, &state, None), Err(HandoffError::Live { .. })));
    }

    #[test]
    fn a_session_whose_host_exited_is_not_at_work_unless_it_wrote_since() {
        use crate::provenance::host_process::HostProcess;
        let state = sample();
        let now = Timestamp::now();
        // A process that has exited: this test binary listing its tests, on every platform.
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .arg("--list")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id().cast_signed();
        child.wait().unwrap();
        let gone = HostProcess { pid, started: 1, at: now.as_second() };
        assert_eq!(ended(&state, Some(gone), now), cfg!(target_os = "linux"));
        let later = now + jiff::SignedDuration::from_secs(LAST_WRITE_SLACK_SECS + 5);
        assert!(
            !ended(&state, Some(gone), later),
            "a transcript written after the host exited: another host"
        );
        assert!(!ended(&state, None, now), "nothing known: the wait stays");
    }

    #[test]
    fn the_copies_keep_the_loop_and_drop_the_sessions_own() {
        let mut state = sample();
        state.meta.iteration = 3;
        state.meta.transcript = Some("/t.jsonl".into());
        state.meta.last_reply = Some("sha256:x".into());
        state.meta.last_blocked = true;
        let run = run_copy(&state, &handoff(), Agent::Claude, now());
        assert_eq!((run.meta.session_id.as_str(), run.meta.iteration), ("run-x", 3));
        assert_eq!(
            (run.meta.loop_id.as_str(), &run.meta.settings),
            (state.meta.loop_id.as_str(), &state.meta.settings)
        );
        assert_eq!((run.meta.transcript, run.meta.last_reply, run.meta.last_blocked), (None, None, false));
        let (ended, line) = session_copy(&state, &handoff(), now());
        assert_eq!((ended.meta.status, ended.meta.outcome), (Status::Ended, Some(ReasonCode::HandedOver)));
        assert_eq!(line.reason, ReasonCode::HandedOver);
        assert!(
            stop_line(ended.meta.handoff.as_ref().unwrap()).contains("loop-hook run (run-x) at iteration 3")
        );
    }

    #[test]
    fn a_handoff_tried_again_copies_the_ledger_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("store"));
        let from = store.paths("sess-1");
        let bin = dir.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::write(bin.join("claude"), "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        fs::set_permissions(bin.join("claude"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let env = Environment::new(
            [("PATH".to_string(), bin.display().to_string())],
            dir.path().to_path_buf(),
            now(),
        );
        let state = sample();
        {
            let (held, _) = Transaction::open(&from, now()).unwrap();
            let start = LedgerEntry::new(&state, now(), LedgerDecision::Start, ReasonCode::Started);
            held.commit(&state, &[start]).unwrap();
        }
        let request = HandoffRequest::default();
        let first = hand_over(&env, &store, &from, &request).unwrap();
        // The session's loop running again, as a handoff killed before it ended it leaves it.
        let (held, _) = Transaction::open(&from, now()).unwrap();
        held.commit(&state, &[LedgerEntry::new(&state, now(), LedgerDecision::Resume, ReasonCode::Resumed)])
            .unwrap();
        drop(held);
        let again = hand_over(&env, &store, &from, &request).unwrap();
        assert_eq!(first.run_id, again.run_id);
        // The run's ledger is the session's as it stood, once, and the run's own line.
        let run = fs::read_to_string(&again.paths.ledger).unwrap();
        let session = fs::read_to_string(&from.ledger).unwrap();
        let (run, session): (Vec<&str>, Vec<&str>) = (run.lines().collect(), session.lines().collect());
        assert_eq!((run.len(), &run[..3]), (4, &session[..3]), "{run:#?}");
        assert!(run[3].contains("handed over from session sess-1"), "{}", run[3]);
    }
}
