//! `--notify CMD`: the user's command, run when a loop ends or parks, so they hear of it.
//!
//! It runs after the verdict is committed and the lock released, never inside the decision: a
//! notification that hangs, fails or floods its output changes nothing about the loop. It gets
//! the receipt as JSON on stdin and a one-line summary in `$FOR_LOOP_SUMMARY`, runs in its own
//! process group under a short deadline after which the whole group is killed, and its output is
//! kept in bounded memory, never passed to the host. A failure is written to the ledger as a
//! note (kept for the next judged stop when the ledger is busy), and otherwise ignored.
//!
//! The command is one of the loop's settings, given by the user at start and kept in the state
//! file with the verify command, so it is exactly as protected as verify is.

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

use crate::checks::{CommandInput, VerifyOutcome, VerifySpec};
use crate::host::Host;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::Receipt;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::LoopPaths;
use crate::support::text::duration::{human, human_ms};

/// How long the command may run before its process group is killed. A desktop notification
/// or one HTTP request takes well under this; the stop waits at most this plus the kill grace.
pub(crate) const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);
/// The task's first characters in the JSON; the whole task is in the state file.
const TASK_CHARS: usize = 2_000;
/// The task's first characters in the summary line.
const SUMMARY_TASK_CHARS: usize = 80;

/// What the command reads on stdin.
#[derive(Debug, Serialize)]
struct Payload<'a> {
    summary: &'a str,
    loop_id: &'a str,
    session_id: &'a str,
    host: Host,
    cwd: &'a Path,
    task: String,
    verify: Option<&'a str>,
    state: &'a Path,
    ledger: &'a Path,
    receipt: &'a Receipt,
}

/// How a notification went wrong.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NotifyFailure(pub String);

/// Runs the loop's notify command, if it has one, for `receipt`, and records a failure in the
/// ledger. Call it after the state and ledger are written, without the loop's lock.
pub(crate) fn after_end(paths: &LoopPaths, state: &LoopState, receipt: &Receipt, now: Timestamp) {
    let Some(command) = state.meta.settings.notify.as_deref() else { return };
    if let Err(NotifyFailure(why)) = run(command, paths, state, receipt, NOTIFY_TIMEOUT) {
        let entry = LedgerEntry {
            detail: Some(why),
            ..LedgerEntry::new(state, now, LedgerDecision::Note, ReasonCode::NotifyFailed)
        };
        // Best effort: a full disk must not turn a failed notification into a fault.
        let _ = crate::store::note_best_effort(paths, &entry);
    }
}

/// Runs `command` with the payload of `receipt` under `timeout`.
pub(crate) fn run(
    command: &str,
    paths: &LoopPaths,
    state: &LoopState,
    receipt: &Receipt,
    timeout: Duration,
) -> Result<(), NotifyFailure> {
    let summary = summary(state, receipt);
    let meta = &state.meta;
    let payload = Payload {
        summary: &summary,
        loop_id: &meta.loop_id,
        session_id: &meta.session_id,
        host: meta.host,
        cwd: &meta.cwd,
        task: state.task.chars().take(TASK_CHARS).collect(),
        verify: meta.settings.verify.as_deref(),
        state: &paths.state,
        ledger: &paths.ledger,
        receipt,
    };
    let stdin = serde_json::to_vec(&payload).map_err(|e| NotifyFailure(format!("notify: {e}")))?;
    // Outside verify's sandbox: a notification needs the network and the desktop, and it runs
    // once the loop is over, from a setting the sandboxed agent cannot write.
    let spec =
        VerifySpec { command: command.to_string(), cwd: meta.cwd.clone(), timeout, sandbox: Vec::new() };
    let input = CommandInput {
        stdin,
        env: vec![("FOR_LOOP_SUMMARY", summary.clone()), ("FOR_LOOP_OUTCOME", receipt.outcome.to_string())],
    };
    match spec.run_unjudged(&input) {
        Ok(outcome) if outcome.passed() => Ok(()),
        Ok(outcome) => Err(NotifyFailure(failed(command, &outcome, timeout))),
        Err(e) => Err(NotifyFailure(format!("notify `{command}` could not run: {e}"))),
    }
}

fn failed(command: &str, outcome: &VerifyOutcome, timeout: Duration) -> String {
    let how = if outcome.timed_out {
        format!("ran past {} and its process group was killed", human(timeout))
    } else {
        outcome.describe()
    };
    let tail = outcome.output.last_lines(5, 400);
    let output = if tail.is_empty() { String::new() } else { format!("; last output: {tail}") };
    format!("notify `{command}` failed: {how}{output}")
}

/// One line: where, what happened, after how long, and the task's start.
/// `myproject: verified after 4/30 iterations (12m 03s): fix the login`.
pub(crate) fn summary(state: &LoopState, receipt: &Receipt) -> String {
    let meta = &state.meta;
    let place = meta
        .cwd
        .file_name()
        .map_or_else(|| meta.cwd.display().to_string(), |n| n.to_string_lossy().into_owned());
    let mut line = format!(
        "{place}: {} after {}/{} iterations ({})",
        receipt.outcome,
        receipt.iterations,
        receipt.max_iterations,
        human_ms(receipt.elapsed_ms)
    );
    let first = state.task.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    let task = one_line(first, SUMMARY_TASK_CHARS);
    if !task.is_empty() {
        line.push_str(": ");
        line.push_str(&task);
    }
    one_line(&line, 400)
}

/// `text` on one line of at most `max` characters: control characters (newlines, escapes
/// that would repaint a terminal) become spaces.
fn one_line(text: &str, max: usize) -> String {
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    crate::support::text::cut(clean.trim(), max)
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::state::Status;
    use crate::state::sample;
    use crate::store::Store;

    struct World {
        dir: tempfile::TempDir,
        paths: LoopPaths,
        state: LoopState,
        receipt: Receipt,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().join("store")).paths("sess-1");
        std::fs::create_dir_all(&paths.dir).unwrap();
        let mut state = sample();
        state.meta.cwd = dir.path().join("myproject");
        std::fs::create_dir(&state.meta.cwd).unwrap();
        state.meta.iteration = 4;
        state.meta.status = Status::Ended;
        let at = state.meta.started_at + jiff::SignedDuration::from_secs(723);
        let receipt = state.receipt(ReasonCode::Verified, at, Some(vec!["src/a.rs".into()]));
        World { dir, paths, state, receipt }
    }

    fn notify(world: &World, command: &str, timeout: Duration) -> Result<(), NotifyFailure> {
        run(command, &world.paths, &world.state, &world.receipt, timeout)
    }

    #[test]
    fn the_command_reads_the_receipt_as_json_and_the_summary_from_its_environment() {
        let world = world();
        let command = "cat > payload.json; printf '%s' \"$FOR_LOOP_SUMMARY\" > summary; printf '%s' \"$FOR_LOOP_OUTCOME\" > outcome";
        notify(&world, command, Duration::from_secs(10)).unwrap();
        let cwd = &world.state.meta.cwd;
        let payload: serde_json::Value =
            serde_json::from_slice(&std::fs::read(cwd.join("payload.json")).unwrap()).unwrap();
        assert_eq!(payload["receipt"]["outcome"], "verified");
        assert_eq!(payload["receipt"]["iterations"], 4);
        assert_eq!(payload["receipt"]["files_changed"][0], "src/a.rs");
        assert_eq!(payload["loop_id"], world.state.meta.loop_id.as_str());
        assert_eq!(payload["task"], "fix the login\n");
        let summary = std::fs::read_to_string(cwd.join("summary")).unwrap();
        assert_eq!(summary, "myproject: verified after 4/30 iterations (12m 03s): fix the login");
        assert_eq!(payload["summary"], summary.as_str());
        assert_eq!(std::fs::read_to_string(cwd.join("outcome")).unwrap(), "verified");
    }

    #[test]
    fn a_failing_command_is_a_failure_with_its_exit_code_and_last_output() {
        let world = world();
        let NotifyFailure(why) =
            notify(&world, "echo 'no route to host' >&2; exit 7", Duration::from_secs(10))
                .expect_err("exit 7 is a failure");
        assert!(why.contains("exit 7"), "{why}");
        assert!(why.contains("no route to host"), "{why}");
    }

    #[test]
    fn a_hanging_command_is_killed_with_its_whole_process_group() {
        let world = world();
        let command = "sleep 60 & echo $! > background.pid; sleep 60";
        let started = Instant::now();
        let NotifyFailure(why) =
            notify(&world, command, Duration::from_millis(300)).expect_err("a hang is a failure");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(why.contains("process group was killed"), "{why}");
        let pid: i32 = std::fs::read_to_string(world.state.meta.cwd.join("background.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Reaped by init once its group is killed; allow it a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        while nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err(),
            "the command's background child outlived the deadline"
        );
    }

    #[test]
    fn a_flood_of_output_is_kept_bounded() {
        let world = world();
        notify(&world, "head -c 50000000 /dev/zero | tr '\\0' x", Duration::from_secs(20)).unwrap();
        let NotifyFailure(why) =
            notify(&world, "head -c 50000000 /dev/zero | tr '\\0' x; exit 1", Duration::from_secs(20))
                .expect_err("exit 1");
        assert!(why.len() < 1_000, "{} bytes", why.len());
    }

    #[test]
    fn a_command_that_cannot_start_is_a_failure() {
        let mut world = world();
        world.state.meta.cwd = world.dir.path().join("gone");
        let NotifyFailure(why) = notify(&world, "true", Duration::from_secs(1)).expect_err("no directory");
        assert!(why.contains("could not run"), "{why}");
    }

    #[test]
    fn a_failure_is_a_ledger_note_and_success_leaves_no_line() {
        let mut world = world();
        world.state.meta.settings.notify = Some("true".into());
        after_end(&world.paths, &world.state, &world.receipt, world.receipt.at);
        assert!(!world.paths.ledger.exists());
        world.state.meta.settings.notify = Some("exit 3".into());
        after_end(&world.paths, &world.state, &world.receipt, world.receipt.at);
        let lines = LedgerEntry::read_last(&world.paths.ledger, 10).unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0].decision, lines[0].reason), (LedgerDecision::Note, ReasonCode::NotifyFailed));
        assert!(lines[0].detail.as_deref().unwrap_or_default().contains("exit 3"), "{:?}", lines[0].detail);
    }

    #[test]
    fn the_summary_is_one_line_whatever_the_task() {
        let mut world = world();
        world.state.task = "\n\n  \u{1b}[2Jrm -rf <b>\"x\"</b>\r\nsecond line".into();
        let line = summary(&world.state, &world.receipt);
        assert_eq!(line, "myproject: verified after 4/30 iterations (12m 03s): [2Jrm -rf <b>\"x\"</b>");
        world.state.task = "word ".repeat(100);
        let line = summary(&world.state, &world.receipt);
        assert!(line.ends_with('…') && line.chars().count() < 150, "{line}");
    }
}
