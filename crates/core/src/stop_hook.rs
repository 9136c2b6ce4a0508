//! The turn-end hook: read the event, find the session's loop, gather the facts, decide, commit.
//!
//! Fail closed on the model, open on ourselves: whatever goes wrong on for-loop's side (bad
//! input, unreadable state, a full disk, a stuck lock) allows the stop with one line saying what
//! happened and what to do. Only a judged, recorded verdict ever blocks.

use std::fs;
use std::io::Read;
use std::thread;
use std::time::Duration;

use crate::claim;
use crate::custody::{self, Custody};
use crate::decision::{self, Gate, StopFacts};
use crate::environment::Environment;
use crate::event::{self, EventError, StopEvent};
use crate::hook_response::HookResponse;
use crate::host::Host;
use crate::incident::Incident;
use crate::journal::Journal;
use crate::judgment::{Found, Judgment};
use crate::keep::{Measured, MetricFacts};
use crate::ledger::{LedgerDecision, LedgerEntry};
use crate::lock::StateLock;
use crate::measure;
use crate::oracle::{ChangeKind, OracleChange};
use crate::oracle_watch::{OracleWatch, Touched};
use crate::reason_code::ReasonCode;
use crate::receipt::Receipt;
use crate::skip_marker;
use crate::state::{LoopState, Status};
use crate::store::{LoopPaths, Store};
use crate::transcript::{self, Turn};
use crate::usage::UsageCursor;
use crate::verify::{VerifyOutcome, VerifySpec};
use crate::worktree::{self, WorkTree};

/// The longest the hook waits for a loop's lock before giving up on this stop.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(3);
/// Hosts may write the transcript's last lines after the hook starts; one retry after this.
const TRANSCRIPT_RETRY: Duration = Duration::from_millis(1_500);

/// Handles one turn-end event of `host`.
pub(crate) fn run(env: &Environment, host: Host, stdin: impl Read) -> HookResponse {
    let event = event::read_bounded(stdin)
        .and_then(|bytes| event::parse_object(&bytes))
        .and_then(|object| host.parse_stop(&object));
    match event {
        // A forged stop is answered without the user's notices: its reader is the agent.
        Ok(event) => {
            // A loop command the user never sent (the agent ran the prompt hook itself) is undone
            // first, so this stop is judged against the loop as the user left it.
            let mut unconfirmed = crate::confirmation::settle(env, &event.session_id);
            let judged = || crate::origin::with_notices(env, &event.session_id, judge(env, host, &event));
            let forged = forged_stop(env, &event);
            let judging = forged.is_none();
            let mut response = forged.unwrap_or_else(&judged);
            // A command carried out after the settle above and before the judgment read the loop
            // (a forged cancel timed to land there) let this stop through: settled now, and a
            // loop it ended is judged again.
            if judging
                && response.block.is_none()
                && let Some(told) = crate::confirmation::settle(env, &event.session_id)
            {
                unconfirmed = Some(match unconfirmed {
                    Some(first) => format!("{first}\n{told}"),
                    None => told,
                });
                response = judged();
            }
            let response = crate::confirmation::tell(response, unconfirmed);
            if host == Host::CopilotCli
                && let Some(reason) = &response.block
            {
                crate::host::copilot_remember_block(env, &event.session_id, reason);
            }
            response
        }
        Err(EventError::Foreign(why)) => {
            eprintln!("for-loop: {why}; nothing to do");
            HookResponse::allow()
        }
        Err(error) => unreadable_event(env, &error),
    }
}

/// The hook was started with arguments this binary does not understand: most likely a newer
/// plugin's hook line (a host added after this build) run by an older `loop-hook`. The stop is
/// allowed in the shape of the host named on the line, else the host whose payload this looks
/// like; a session with a running loop is told why its stop was not judged.
pub(crate) fn misinvoked(
    env: &Environment,
    named: Option<Host>,
    problem: &str,
    stdin: impl Read,
) -> (Host, HookResponse) {
    let object = event::read_bounded(stdin).and_then(|bytes| event::parse_object(&bytes)).ok();
    let host = named.or_else(|| object.as_ref().map(Host::guess)).unwrap_or_default();
    eprintln!("for-loop: stop-hook: {problem}; the stop is allowed");
    let Some(event) = object.and_then(|object| host.parse_stop(&object).ok()) else {
        return (host, HookResponse::allow());
    };
    let Ok(store) = Store::locate(env) else { return (host, HookResponse::allow()) };
    let paths = store.paths(&event.session_id);
    let state = match paths.load() {
        Ok(Some(state)) if decision::gate(&state, &event.session_id) == Gate::Judge => state,
        _ => return (host, HookResponse::allow()),
    };
    let what = format!(
        "the hook ran `loop-hook stop-hook` with arguments this loop-hook does not understand \
         ({problem}), so this stop was not judged and is allowed. The plugin is newer than the \
         binary: update loop-hook (`cargo install --locked --path <for-loop checkout>`)"
    );
    (host, fault(&paths, Some(&state), &event, env, &what))
}

/// Forged stops taken in a row, with no judged stop between, after which the next is judged
/// anyway. A real stop finds no tool call pending: the host writes a call before running it and
/// ends a turn only on a reply without one. Were the transcript ever to lag behind, a real stop
/// taken for forged is blocked (the agent works on; nothing is released and no turn is used), and
/// at most this many in a row: the one after is judged as usual, so no one is ever trapped. The
/// cost is that an agent forging stops on purpose spends one iteration per this many plus one,
/// each forgery recorded and shown to the user and in the receipt.
const FORGED_STREAK: u32 = 2;

/// A Stop event that arrived while the agent's tool call was still pending came from that tool
/// call: the agent ran `loop-hook stop-hook` itself, most likely to use up the loop's iterations.
/// It is recorded (origin agent), nothing else changes, and the forging process is told only that
/// it was not judged. `None` when the stop is not forged, or there is no running loop of this
/// session to protect: the usual judgment then runs.
fn forged_stop(env: &Environment, event: &StopEvent) -> Option<HookResponse> {
    let paths = Store::locate(env).ok()?.paths(&event.session_id);
    let armed = paths.armed.as_ref().is_some_and(|armed| fs::symlink_metadata(armed).is_ok());
    if !paths.state.exists() && !armed {
        return None;
    }
    // Any trouble with the loop's files is the usual judgment's to report: until the stop is
    // known to be forged, nothing is read in a way that repairs (and so hides) it.
    let trusted = crate::custody::trusted_state(&paths).ok()??;
    // The transcript the user's own start named, where there is one: a forged event may name
    // another (an empty file, /dev/null).
    let transcript =
        trusted.meta.transcript.as_deref().filter(|t| t.is_file()).or(event.claude_transcript())?;
    if decision::gate(&trusted, &event.session_id) != Gate::Judge
        || !transcript::tool_call_still_pending(transcript)
    {
        return None;
    }
    let _lock = StateLock::acquire(&paths.lock, LOCK_WAIT).ok()?;
    if LedgerEntry::forged_streak(&paths.ledger, &trusted.meta.loop_id) >= FORGED_STREAK {
        return None;
    }
    let Ok(Custody::Loop { state, incidents }) = Custody::check(&paths, env.now) else { return None };
    for incident in &incidents {
        record(&paths, &state, event, env, incident.code, Some(&incident.what));
    }
    let entry = LedgerEntry {
        stop_hook_active: event.stop_hook_active,
        origin: Some(crate::origin::Origin::Agent),
        detail: Some(format!(
            "the agent ran the Stop hook itself from a tool call at iteration {} ({}): that forged stop \
             was not judged and used no iteration",
            state.meta.iteration,
            env.now.strftime("%H:%M:%S UTC")
        )),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Note, ReasonCode::ForgedStop)
    };
    if entry.append_to(&paths.ledger).is_err() {
        Incident::record_fallback(&paths.dir, ReasonCode::ForgedStop, env.now);
    }
    Some(HookResponse {
        block: Some(
            "for-loop: this stop was not judged: it arrived while a tool call was still running, so \
             it came from that tool call, not from the end of a turn. It is recorded and the user \
             will be told. Keep working on the task."
                .into(),
        ),
        system_message: None,
    })
}

/// Judges a normalised stop event of `host` against the session's loop.
pub(crate) fn judge(env: &Environment, host: Host, event: &StopEvent) -> HookResponse {
    let Ok(store) = Store::locate(env) else {
        return HookResponse::allow();
    };
    let paths = store.paths(&event.session_id);
    // The path every plain session takes: two failed stats (the state, its last good copy) and,
    // on hosts whose commands cannot name their session, one failed read_dir for loops waiting
    // to be claimed.
    let armed = paths.armed.as_ref().is_some_and(|armed| fs::symlink_metadata(armed).is_ok());
    if !paths.state.exists() && !armed && !claim::attach(&store, host, event, env.now) {
        return no_loop(event);
    }

    // The loop as last committed, restored if something changed it behind for-loop's back.
    let lock = match StateLock::acquire(&paths.lock, LOCK_WAIT) {
        Ok(lock) => lock,
        Err(e) => return fault(&paths, None, event, env, &format!("{e}. This stop is allowed.")),
    };
    let (mut state, mut incidents) = {
        let mut incidents = taken_over(&lock, env);
        match Custody::check(&paths, env.now) {
            Ok(Custody::None) => return no_loop(event),
            Ok(Custody::Untrusted { state, why }) => {
                return match decision::gate(&state, &event.session_id) {
                    Gate::Judge => end_untrusted(&paths, &state, &why, event, env),
                    _ => HookResponse::allow(),
                };
            }
            Ok(Custody::Loop { state, incidents: found }) => {
                incidents.extend(found);
                (state, incidents)
            }
            Err(e) => {
                return fault(
                    &paths,
                    None,
                    event,
                    env,
                    &format!(
                        "{e}. There is no last good copy to restore it from (the loop is older than \
                         those copies), so this stop is allowed; the file is kept for inspection. \
                         {} moves it aside and ends the loop.",
                        host.commands().cancel
                    ),
                );
            }
        }
    };
    match decision::gate(&state, &event.session_id) {
        // A new loop this conversation started, on a host whose commands cannot name it, may
        // be waiting to replace the ended one.
        Gate::Ended => {
            drop(lock);
            if claim::attach(&store, host, event, env.now) {
                return judge(env, host, event);
            }
            return HookResponse::allow();
        }
        Gate::Foreign => {
            for incident in &incidents {
                record(&paths, &state, event, env, incident.code, Some(&incident.what));
            }
            record(&paths, &state, event, env, ReasonCode::ForeignSession, None);
            return HookResponse::allow();
        }
        Gate::Judge => {}
    }
    // Stops let through unjudged since the last verdict are told again.
    incidents.extend(
        LedgerEntry::since_last_verdict(&paths.ledger, &state.meta.loop_id).iter().map(Incident::from_ledger),
    );
    incidents.extend(Incident::fallbacks(&paths.dir));
    // A judgment of this loop that never finished (its hook was killed), or one still running in
    // another hook process (the hook installed twice: that one answers).
    match Judgment::found(&paths, env.now) {
        Found::Running(other) => {
            let what = format!(
                "another for-loop hook (process {}) is judging this stop right now, so this one lets it \
                 through and that one answers; if the hook is installed twice, remove one",
                other.pid
            );
            return fault(&paths, Some(&state), event, env, &what);
        }
        Found::Interrupted(judgment) => {
            if judgment.loop_id == state.meta.loop_id {
                incidents.push(judgment.incident(env.now));
            }
            Judgment::clear(&paths);
        }
        Found::None => {}
    }
    let judging = Judgment::begin(&paths, &state, env.now);
    drop(lock);

    // 1. Gather: everything the verdict depends on, with the lock released (verify is slow).
    let sandbox = crate::strict::sandbox_for_verify(env, &store, &state);
    let gathered = Gathered::at(&state, event, &sandbox);
    let facts = gathered.facts(&paths, event, env, &[]);
    let ends =
        matches!(decision::status_after(decision::code(&state, &facts)), Status::Ended | Status::Parked);
    let passed = gathered.verify.as_ref().is_some_and(VerifyOutcome::passed);
    // What changed since the start is looked at only where it is shown: the files when the loop
    // ends or parks, the skip markers then and after a passing verify.
    let trees = match &state.meta.baseline_tree {
        Some(baseline) if ends || passed => {
            gathered.worktree.tree_id().ok().map(|now| (baseline.as_str(), now))
        }
        _ => None,
    };
    let files_changed = trees
        .as_ref()
        .filter(|_| ends)
        .and_then(|(baseline, now)| gathered.worktree.changed_files(baseline, now).ok());
    let skip_markers = if ends || passed {
        skip_marker::since_start(
            &gathered.worktree,
            trees.as_ref().map(|(baseline, now)| (*baseline, now.as_str())),
            &state.meta.cwd,
            &state.meta.oracle.files,
            &paths.dir.join("oracle"),
        )
    } else {
        Vec::new()
    };

    let lock = match StateLock::acquire(&paths.lock, LOCK_WAIT) {
        Ok(lock) => lock,
        Err(e) => {
            return fault(&paths, Some(&state), event, env, &format!("{e}. This stop is allowed."));
        }
    };
    incidents.extend(taken_over(&lock, env));
    // The state may have been changed while verify ran: by the user (a cancel, a new loop), or
    // behind for-loop's back (restored again here).
    match Custody::check(&paths, env.now) {
        Ok(Custody::Loop { state: now, incidents: found })
            if now.meta.loop_id == state.meta.loop_id
                && now.meta.iteration == state.meta.iteration
                && now.is_active() =>
        {
            incidents.extend(found);
            // A command the prompt hook marked meanwhile still awaits its confirmation: the
            // verdict, made from the state read before verify, must not drop the mark.
            state.meta.awaiting = now.meta.awaiting;
        }
        Ok(Custody::Untrusted { state, why }) => return end_untrusted(&paths, &state, &why, event, env),
        _ => return HookResponse::allow(),
    }

    // 2. Decide: pure, and final.
    let forged_stops = match decision::status_after(decision::code(&state, &facts)) {
        Status::Active => 0,
        _ => LedgerEntry::forged_stops(&paths.ledger, &state.meta.loop_id),
    };
    let facts = StopFacts {
        files_changed: files_changed.as_deref(),
        incidents: &incidents,
        forged_stops,
        skip_markers: &skip_markers,
        ..facts
    };
    let decision = decision::decide(&state, facts);

    // 3. Commit the verdict as decided, or change nothing.
    if let Err(e) = Journal::commit(&paths, &decision.next, &decision.ledger) {
        let what = format!(
            "could not record this stop ({e}), so nothing changed. This stop is allowed; the loop goes \
             on at the next stop. Free some disk space (or raise the file-size limit)"
        );
        record_fault(&paths, &state, event, env, ReasonCode::RecordFailed, &what);
        return HookResponse::allow_with(format!("for-loop: {what}."));
    }
    incidents.iter().for_each(Incident::forget_fallback);
    // The judgment is over: a later stop must not take a slow notification for one in progress.
    drop(judging);
    if let Some(lesson) = &decision.lesson {
        // Best effort: lessons help the next loop; losing one must not end this one.
        let _ = lesson.append_to(&crate::lessons::path(store.root(), &state.meta.cwd));
    }
    if let Some(n) = decision.rollback_to
        && let Err(e) = gathered.worktree.rollback(&state.meta.loop_id, n)
    {
        return fault(
            &paths,
            Some(&decision.next),
            event,
            env,
            &format!(
                "the discarded change could not be rolled back to checkpoint {n} ({e}). This stop is \
                 allowed; /for-loop:rollback {n} restores it by hand."
            ),
        );
    }
    // 4. Effects of the committed verdict, outside the lock: they change nothing in the loop.
    drop(lock);
    if let Some(receipt) = &decision.receipt {
        crate::notify::after_end(&paths, &decision.next, receipt, env.now);
    }
    decision.response()
}

/// A session without a loop. On a continuation (a stop hook blocked the last stop) whose
/// transcript shows the block was for-loop's, the loop's files were deleted under it: the user is
/// told, since nothing is left to restore.
fn no_loop(event: &StopEvent) -> HookResponse {
    if event.stop_hook_active == Some(true)
        && let Some(transcript) = event.claude_transcript()
        && let Some(words) = custody::tell_deleted_store(transcript)
    {
        return HookResponse::allow_with(words);
    }
    HookResponse::allow()
}

/// The incident of a lock that had to be taken over, if it had.
fn taken_over(lock: &StateLock, env: &Environment) -> Vec<Incident> {
    lock.taken_over().map(|what| Incident::new(ReasonCode::LockHeld, env.now, what)).into_iter().collect()
}

/// Ends a loop whose state no trusted copy vouches for: its settings may be the agent's, so
/// neither judging by them nor going on is safe. The user is told, and the receipt says tampered.
fn end_untrusted(
    paths: &LoopPaths,
    state: &LoopState,
    why: &str,
    event: &StopEvent,
    env: &Environment,
) -> HookResponse {
    let mut next = state.clone();
    next.meta.status = Status::Ended;
    next.meta.outcome = Some(ReasonCode::StateTampered);
    next.meta.updated_at = env.now;
    next.meta.last_blocked = false;
    let receipt = Receipt::of(&next, ReasonCode::StateTampered, env.now, None);
    next.meta.receipt = Some(receipt.clone());
    let entry = LedgerEntry {
        stop_hook_active: event.stop_hook_active,
        detail: Some(why.to_string()),
        receipt: Some(receipt.clone()),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Allow, ReasonCode::StateTampered)
    };
    let recorded = match Journal::commit(paths, &next, &[entry]) {
        Ok(()) => format!("ledger: {}", paths.ledger.display()),
        Err(e) => format!("this could not be recorded: {e}"),
    };
    let headline = format!(
        "for-loop: {why}. for-loop cannot tell what the loop's settings really were, so the loop is \
         over: ended as tampered, not verified. If it was not you, it was the agent; start the loop \
         again with the for-loop command."
    );
    HookResponse::allow_with(format!("{}\n  {recorded}", receipt.render(&headline, state.meta.host)))
}

/// The facts of one stop that take work to learn: the turn, the verify run, the oracle and the
/// working tree.
struct Gathered {
    last_message: Option<String>,
    tool_uses: Option<usize>,
    verify: Option<VerifyOutcome>,
    verify_not_run: Option<String>,
    oracle_changes: Vec<OracleChange>,
    worktree: WorkTree,
    tree: Option<String>,
    checkpoint_error: Option<String>,
    usage: Option<UsageCursor>,
    metric: Option<MetricFacts>,
}

impl Gathered {
    /// Runs verify (inside `sandbox`, a command prefix, when the loop is strict) and looks at
    /// the oracle and the working tree.
    fn at(state: &LoopState, event: &StopEvent, sandbox: &[std::ffi::OsString]) -> Gathered {
        let (last_message, tool_uses) = current_turn(state, event);
        // The check is fingerprinted before verify (and a metric loop's measurement) and after
        // it, and watched in between: a check that differs at any point does not count.
        let (oracle, cwd) = (&state.meta.oracle, &state.meta.cwd);
        let watch = OracleWatch::start(cwd, oracle);
        let before = oracle.changes(cwd);
        let (verify, verify_not_run) = match &state.meta.settings.verify {
            None => (None, None),
            Some(command) => {
                let spec = VerifySpec {
                    command: command.clone(),
                    cwd: state.meta.cwd.clone(),
                    timeout: Duration::from_secs(state.meta.settings.verify_timeout_secs),
                    sandbox: sandbox.to_vec(),
                };
                match spec.run() {
                    Ok(outcome) => (Some(outcome), None),
                    Err(e) => (None, Some(e.to_string())),
                }
            }
        };
        let worktree = WorkTree::open(&state.meta.cwd);
        // A walk cut at its bound proves nothing unchanged: no fingerprint rather than a false one.
        let tree = worktree.fingerprint().ok().filter(|tree| !worktree::is_approximate(tree));
        let settings = &state.meta.settings;
        let checkpoint = (settings.checkpoint || settings.metric.is_some())
            .then(|| worktree.checkpoint(&state.meta.loop_id, state.meta.iteration));
        let checkpoint_error = checkpoint.as_ref().and_then(|c| c.as_ref().err()).map(ToString::to_string);
        let metric = match (&settings.metric, &state.meta.metric) {
            (Some(metric), Some(progress)) => {
                let timeout = Duration::from_secs(settings.verify_timeout_secs);
                // A command that cannot run at all measures nothing: never a keep.
                let (guard, guard_not_run) = match measure::guard(metric, cwd, timeout, sandbox) {
                    Ok(guard) => (guard, None),
                    Err(e) => (None, Some(format!("the guard could not run: {e}"))),
                };
                let mut measured = match measure::measure(metric, None, cwd, timeout, sandbox) {
                    Ok(measurement) => measurement.measured,
                    Err(e) => Measured::Failed(format!("it could not run: {e}")),
                };
                if let Some(why) = guard_not_run {
                    measured = Measured::Failed(why);
                }
                let summary = if let Some(Ok(commit)) = checkpoint {
                    worktree
                        .checkpoints(&state.meta.loop_id)
                        .ok()
                        .and_then(|all| all.into_iter().find(|(n, _)| *n == progress.best_checkpoint))
                        .and_then(|(_, best)| worktree.diff_summary(&best, &commit).ok())
                        .unwrap_or_else(|| "change not known".into())
                } else {
                    // Without a checkpoint the change could never be rolled back to later.
                    measured = Measured::Failed(format!(
                        "the checkpoint could not be taken: {}",
                        checkpoint_error.as_deref().unwrap_or("unknown")
                    ));
                    "change not known".into()
                };
                Some(MetricFacts { measured, guard, summary })
            }
            _ => None,
        };
        // Watched until the metric and its guard have run too: they are part of the check.
        let touched = watch.finish();
        let oracle_changes = oracle_changes(before, oracle.changes(cwd), &touched);
        Gathered {
            last_message,
            tool_uses,
            verify,
            verify_not_run,
            oracle_changes,
            worktree,
            tree,
            checkpoint_error,
            usage: usage_now(state, event),
            metric,
        }
    }

    fn facts<'a>(
        &'a self,
        paths: &'a LoopPaths,
        event: &StopEvent,
        env: &Environment,
        incidents: &'a [Incident],
    ) -> StopFacts<'a> {
        StopFacts {
            last_message: self.last_message.as_deref(),
            verify: self.verify.as_ref(),
            verify_not_run: self.verify_not_run.as_deref(),
            now: env.now,
            state_path: &paths.state,
            ledger_path: &paths.ledger,
            oracle_changes: &self.oracle_changes,
            tree: self.tree.as_deref(),
            files_changed: None,
            tool_uses: self.tool_uses,
            stop_hook_active: event.stop_hook_active,
            checkpoint_error: self.checkpoint_error.as_deref(),
            usage: self.usage.as_ref(),
            incidents,
            metric: self.metric.as_ref(),
            forged_stops: 0,
            skip_markers: &[],
        }
    }
}

/// The session's model usage since the loop started, read from where the last stop left off;
/// `None` when the host's transcript does not record it or cannot be read now.
fn usage_now(state: &LoopState, event: &StopEvent) -> Option<UsageCursor> {
    if !state.meta.host.transcript_records_usage() {
        return None;
    }
    let path = event.claude_transcript()?;
    UsageCursor::advance(state.meta.usage.as_ref(), path, state.meta.started_at).ok()
}

/// The oracle's changes as verify saw them: those after it, and any file that differed before it
/// or was touched while it ran although it is back as it was.
fn oracle_changes(
    before: Vec<OracleChange>,
    after: Vec<OracleChange>,
    touched: &Touched,
) -> Vec<OracleChange> {
    let mut changes = after;
    let during = before.into_iter().map(|c| c.path).chain(touched.files.iter().cloned());
    for path in during {
        if !changes.iter().any(|c| c.path == path) {
            changes.push(OracleChange { path, kind: ChangeKind::ChangedDuringVerify });
        }
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    changes
}

/// The current turn from the transcript, when the host keeps one in Claude Code's format: its
/// text (unless the event carries the final message) and its tool calls. The text is retried
/// once when a promise needs it, since hosts may write the transcript's last lines after the
/// hook starts.
fn current_turn(state: &LoopState, event: &StopEvent) -> (Option<String>, Option<usize>) {
    let from_event = event.last_assistant_message.clone().filter(|m| !m.is_empty());
    let needs_text = state.meta.settings.completion_promise.is_some() && from_event.is_none();
    let mut read: Option<Turn> = None;
    if let Some(path) = event.claude_transcript() {
        for attempt in 0..2 {
            if attempt > 0 {
                thread::sleep(TRANSCRIPT_RETRY);
            }
            read = transcript::current_turn(path).ok().or(read);
            if !needs_text || read.as_ref().is_some_and(|turn| turn.text.is_some()) {
                break;
            }
        }
    }
    let tool_uses = read.as_ref().map(|turn| turn.tool_uses);
    (from_event.or(read.and_then(|turn| turn.text)), tool_uses)
}

/// The event could not be read. If the session (known from the environment) has an active
/// loop, say so; a plain session hears nothing.
fn unreadable_event(env: &Environment, error: &EventError) -> HookResponse {
    let active = env
        .session_id()
        .and_then(|id| Store::locate(env).ok().map(|store| store.paths(id)))
        .and_then(|paths| paths.load().ok().flatten())
        .is_some_and(|state| state.is_active());
    if !active {
        eprintln!("for-loop: {error}; no loop to judge, stop allowed");
        return HookResponse::allow();
    }
    HookResponse::allow_with(format!(
        "for-loop: {error}, so this stop was not judged and is allowed. The host sent something \
         loop-hook does not understand: update for-loop, or report it with the host's version."
    ))
}

/// One of our own faults: record it when there is a loop, and allow with one line.
fn fault(
    paths: &LoopPaths,
    state: Option<&LoopState>,
    event: &StopEvent,
    env: &Environment,
    what: &str,
) -> HookResponse {
    if let Some(state) = state {
        record_fault(paths, state, event, env, ReasonCode::InternalError, what);
    }
    HookResponse::allow_with(format!("for-loop: {what}"))
}

/// Records a stop let through unjudged, so that the next judged stop tells it again: in the
/// ledger, or, when that cannot be written either, as an empty file named after it.
fn record_fault(
    paths: &LoopPaths,
    state: &LoopState,
    event: &StopEvent,
    env: &Environment,
    code: ReasonCode,
    what: &str,
) {
    if !record(paths, state, event, env, code, Some(what)) {
        Incident::record_fallback(&paths.dir, code, env.now);
    }
}

/// Records a stop that was allowed without a verdict on the loop; whether it could be.
fn record(
    paths: &LoopPaths,
    state: &LoopState,
    event: &StopEvent,
    env: &Environment,
    reason: ReasonCode,
    detail: Option<&str>,
) -> bool {
    let entry = LedgerEntry {
        stop_hook_active: event.stop_hook_active,
        detail: detail.map(str::to_string),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Allow, reason)
    };
    entry.append_to(&paths.ledger).is_ok()
}
