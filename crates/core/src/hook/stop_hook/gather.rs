//! Gathering a stop's facts: the turn, the verify run, the oracle before, during and after it,
//! the working tree, a metric loop's measurement, and what changed since the start. Everything
//! here runs with the loop's lock released (verify is slow) and changes nothing in the loop.

use std::ffi::OsString;
use std::path::Path;
use std::thread;
use std::time::Duration;

use crate::checks::PlanSweep;
use crate::checks::ReviewOutcome;
use crate::checks::ScopeCheck;
use crate::checks::VerifyOutcome;
use crate::checks::{ChangeKind, OracleChange};
use crate::checks::{OracleWatch, Touched};
use crate::checks::{SkipMarker, oracle};
use crate::host::StopEvent;
use crate::host::UsageCursor;
use crate::host::{Turn, transcript};
use crate::metric::measure;
use crate::metric::{Measured, MetricFacts};
use crate::state::Incident;
use crate::state::LoopState;
use crate::verdict::{Ask, decision};
use crate::verdict::{LoopFiles, StopFacts};
use crate::worktree::{self, WorkTree};

use super::context::StopContext;
use super::forged::Seen;

/// Hosts may write the transcript's last lines after the hook starts; one retry after this.
const TRANSCRIPT_RETRY: Duration = Duration::from_millis(1_500);

/// Every fact of one stop the verdict reads, owned: the turn and the forged-stop checks' reading
/// of it, the verify run, the oracle and the working tree, what opening the loop found to tell,
/// and the answers to what [`decision::asks`]. [`Gathered::facts`] is the one view of them the
/// questions and the verdict both read.
pub(super) struct Gathered {
    last_message: Option<String>,
    tool_uses: Option<usize>,
    /// The final reply and whether the forged-stop detector gave way.
    seen: Seen,
    stop_hook_active: Option<bool>,
    now: jiff::Timestamp,
    verify: Option<VerifyOutcome>,
    verify_not_run: Option<String>,
    oracle_changes: Vec<OracleChange>,
    worktree: WorkTree,
    tree: Option<String>,
    checkpoint_error: Option<String>,
    usage: Option<UsageCursor>,
    metric: Option<MetricFacts>,
    /// What went wrong around the loop since its last judged stop, found opening it (and
    /// opening it again after verify).
    pub(super) incidents: Vec<Incident>,
    /// Stops the agent forged during this loop, for the receipt of one that ends or parks here.
    forged_stops: u32,
    /// Files changed since the loop started: looked at only when this stop ends or parks it.
    files_changed: Option<Vec<String>>,
    /// Skip markers added since the start: looked at after a passing verify and at the end.
    skip_markers: Vec<SkipMarker>,
    /// A plan's checks run again, at the stop where its last story passed.
    plan: Option<PlanSweep>,
    /// The reviewer's verdict, after a passing check.
    review: Option<ReviewOutcome>,
    /// The commit this stop's checkpoint was saved in, when one was taken.
    checkpoint_commit: Option<String>,
    /// The change since the start against the loop's scope, where the verdict needs it.
    scope: Option<ScopeCheck>,
    /// The loop's files, in the words the verdict shows them.
    files: LoopFiles,
}

impl Gathered {
    /// Runs verify (inside `sandbox`, a command prefix, when the loop is strict), a metric loop's
    /// measurement and its guard, and looks at the oracle and the working tree around them.
    fn run_verify(
        state: &LoopState,
        event: &StopEvent,
        sandbox: &[OsString],
        seen: &Seen,
        now: jiff::Timestamp,
    ) -> Gathered {
        let (last_message, tool_uses) = current_turn(state, event);
        // The check is fingerprinted before verify (and a metric loop's measurement) and after
        // it, and watched in between: a check that differs at any point does not count.
        let (oracle, cwd) = (&state.meta.oracle, &state.meta.cwd);
        let watch = OracleWatch::start(cwd, oracle);
        // One look at the tree before verify and one after, each shared by all that asks then.
        let worktree = WorkTree::open(&state.meta.cwd);
        let first_look = worktree.look();
        let before = changes_of_check(state, first_look.as_ref());
        let (verify, verify_not_run) = super::plan::run_current_check(state, sandbox);
        let after = worktree.look_again(first_look.as_ref());
        // A walk cut at its bound proves nothing unchanged: no fingerprint rather than a false one.
        let tree =
            worktree.fingerprint_in(after.as_ref()).ok().filter(|tree| !worktree::is_approximate(tree));
        let settings = &state.meta.settings;
        let checkpoint = (settings.checkpoint || settings.metric.is_some())
            .then(|| worktree.checkpoint(&state.meta.loop_id, state.meta.iteration));
        let checkpoint_error = checkpoint.as_ref().and_then(|c| c.as_ref().err()).map(ToString::to_string);
        let checkpoint_commit = checkpoint.as_ref().and_then(|c| c.as_ref().ok()).cloned();
        let metric = run_metric(state, &worktree, checkpoint.as_ref(), checkpoint_error.as_deref(), sandbox);
        // Watched until the metric and its guard have run too: they are part of the check.
        let touched = watch.finish();
        // The metric and its guard ran after the look: the oracle is looked at again after them.
        let after = if metric.is_some() { worktree.look_again(after.as_ref()) } else { after };
        let oracle_changes = oracle_changes(before, changes_of_check(state, after.as_ref()), &touched);
        Gathered {
            last_message,
            tool_uses,
            seen: seen.clone(),
            stop_hook_active: event.stop_hook_active,
            now,
            verify,
            verify_not_run,
            oracle_changes,
            worktree,
            tree,
            checkpoint_error,
            usage: usage_now(state, event),
            metric,
            incidents: Vec::new(),
            forged_stops: 0,
            files_changed: None,
            skip_markers: Vec::new(),
            plan: None,
            review: None,
            checkpoint_commit,
            scope: None,
            files: LoopFiles::default(),
        }
    }

    /// Gathers everything the verdict on `state`'s stop depends on: verify in the loop's tier,
    /// then, in [`Ask::ORDER`], each thing [`decision::asks`] says is still unknown, asked on
    /// the same facts the verdict will read. `incidents` are what opening the loop found.
    pub(super) fn stop(
        stop: &StopContext<'_>,
        state: &LoopState,
        seen: &Seen,
        incidents: Vec<Incident>,
    ) -> Gathered {
        let (env, paths) = (stop.env, &stop.paths);
        let sandbox = crate::checks::sandbox::sandbox_for_verify(
            env,
            stop.store.root(),
            state.meta.host,
            &state.meta.cwd,
            state.meta.oracle.files.keys(),
        );
        let mut gathered = Gathered::run_verify(state, stop.event, &sandbox, seen, env.now);
        gathered.files = LoopFiles {
            state: paths.state.display().to_string(),
            ledger: paths.ledger.display().to_string(),
            originals: crate::store::record::oracle_originals(&paths.dir).display().to_string(),
        };
        gathered.incidents = incidents;
        gathered.incidents.extend(gathered.untrusted_status(env.now));
        gathered.forged_stops = state.meta.forged_stops.unwrap_or_else(|| {
            // A loop started before the count was kept in its state: its ledger has them.
            crate::state::LedgerEntry::forged_stops(&paths.ledger, &state.meta.loop_id)
        });
        for ask in Ask::ORDER {
            if decision::asks(state, &gathered.facts()).contains(&ask) {
                gathered.answer(ask, stop, state, &sandbox);
            }
        }
        gathered
    }

    /// Finds out what `ask` asks, into these facts.
    fn answer(&mut self, ask: Ask, stop: &StopContext<'_>, state: &LoopState, sandbox: &[OsString]) {
        match ask {
            Ask::Scope => {
                // The store (and its armed marker) may sit inside the work tree: its files are ours.
                let store: Vec<&Path> =
                    [Some(stop.store.root()), stop.paths.armed.as_deref()].into_iter().flatten().collect();
                let checkpoint = self.checkpoint_commit.as_deref();
                self.scope = super::scope::read_scope(state, &self.worktree, checkpoint, &store);
            }
            Ask::Sweep => {
                self.plan = super::plan::run_sweep(state, sandbox);
                self.look_at_the_check_again(state);
            }
            Ask::Review => {
                let Some(verified) = self.verify.as_ref() else { return };
                let now = self.scope.as_ref().and_then(|check| check.now.as_deref());
                self.review =
                    super::review::run_reviewer(stop.env, state, verified, now, &self.worktree, sandbox);
                self.usage = super::review::counted(state, self.usage.take(), self.review.as_ref());
                self.look_at_the_check_again(state);
            }
            Ask::ChangedFiles => {
                self.files_changed = self
                    .trees_since_start(state)
                    .and_then(|(baseline, now)| self.worktree.changed_files(&baseline, &now).ok());
            }
            Ask::SkipMarkers => {
                let trees = self.trees_since_start(state);
                self.skip_markers = oracle::skip_markers_since_start(
                    &self.worktree,
                    trees.as_ref().map(|(baseline, now)| (baseline.as_str(), now.as_str())),
                    &state.meta.cwd,
                    &state.meta.oracle.files,
                    &crate::store::record::oracle_originals(&stop.paths.dir),
                );
            }
        }
    }

    /// The check's files that differ now, after the sweep or the reviewer ran, and are not known
    /// already: a check changed while they ran does not count either.
    fn look_at_the_check_again(&mut self, state: &LoopState) {
        let mut now = state.meta.oracle.changes(&state.meta.cwd);
        now.extend(super::plan::unverified_ticks(state));
        let late: Vec<OracleChange> = now
            .into_iter()
            .filter(|change| !self.oracle_changes.iter().any(|k| k.path == change.path))
            .collect();
        self.oracle_changes.extend(late);
    }

    /// The loop's starting tree and the tree now: the one the scope was read from, when it was
    /// (so the tree is not written twice), else written now. `None` outside git.
    fn trees_since_start(&self, state: &LoopState) -> Option<(String, String)> {
        let baseline = state.meta.baseline_tree.clone()?;
        let read = self.scope.as_ref().and_then(|check| check.now.clone());
        let now = read.or_else(|| self.worktree.tree_id().ok())?;
        Some((baseline, now))
    }

    /// The facts `decide` reads, and every question before it.
    pub(super) fn facts(&self) -> StopFacts<'_> {
        StopFacts {
            last_message: self.last_message.as_deref(),
            verify: self.verify.as_ref(),
            verify_not_run: self.verify_not_run.as_deref(),
            now: self.now,
            files: &self.files,
            oracle_changes: &self.oracle_changes,
            tree: self.tree.as_deref(),
            files_changed: self.files_changed.as_deref(),
            tool_uses: self.tool_uses.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            stop_hook_active: self.stop_hook_active,
            checkpoint_error: self.checkpoint_error.as_deref(),
            usage: self.usage.as_ref(),
            incidents: &self.incidents,
            metric: self.metric.as_ref(),
            forged_stops: self.forged_stops,
            skip_markers: &self.skip_markers,
            reply: self.seen.reply(),
            detector_gave_way: self.seen.gave_way,
            review: self.review.as_ref(),
            plan: self.plan.as_ref(),
            scope: self.scope.as_ref(),
        }
    }
}

/// A metric loop's measurement and its guard, run after verify, with the change since the best
/// attempt; `None` for a loop without a metric.
fn run_metric(
    state: &LoopState,
    worktree: &WorkTree,
    checkpoint: Option<&Result<String, worktree::WorkTreeError>>,
    checkpoint_error: Option<&str>,
    sandbox: &[OsString],
) -> Option<MetricFacts> {
    let settings = &state.meta.settings;
    let (metric, progress) = (settings.metric.as_ref()?, state.meta.metric.as_ref()?);
    let cwd = &state.meta.cwd;
    let timeout = Duration::from_secs(settings.verify_timeout_secs);
    // A command that cannot run at all measures nothing: never a keep.
    let (guard, guard_not_run) = match measure::run_guard(metric, cwd, timeout, sandbox) {
        Ok(guard) => (guard, None),
        Err(e) => (None, Some(format!("the guard could not run: {e}"))),
    };
    let mut measured = match measure::run_metric(metric, None, cwd, timeout, sandbox) {
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
            .and_then(|(_, best)| worktree.diff_summary(&best, commit).ok())
            .unwrap_or_else(|| "change not known".into())
    } else {
        // Without a checkpoint the change could never be rolled back to later.
        measured = Measured::Failed(format!(
            "the checkpoint could not be taken: {}",
            checkpoint_error.unwrap_or("unknown")
        ));
        "change not known".into()
    };
    Some(MetricFacts { measured, guard, summary })
}

impl Gathered {
    /// Verify's exit status, reported by the supervisor it ran under, could not be trusted: an
    /// incident told to the user and the agent and recorded, besides the failed check it is.
    pub(super) fn untrusted_status(&self, now: jiff::Timestamp) -> Option<Incident> {
        let why = self.verify.as_ref()?.untrusted.as_ref()?;
        Some(Incident::new(
            crate::state::ReasonCode::VerifyStatusUntrusted,
            now,
            format!(
                "verify's exit status could not be trusted, so this stop's check did not pass: {}",
                why.words()
            ),
        ))
    }

    /// Puts the working tree back to checkpoint `n` of `loop_id` (a discarded metric attempt).
    pub(super) fn roll_back(&self, loop_id: &str, n: u32) -> Result<(), String> {
        self.worktree.rollback(loop_id, n).map(|_| ()).map_err(|e| e.to_string())
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

/// How the check differs now from the start: its files, as `look` (taken now) sees them, and a
/// plan's boxes ticked that the loop has not verified.
fn changes_of_check(state: &LoopState, look: Option<&worktree::TreeLook>) -> Vec<OracleChange> {
    let mut changes = state.meta.oracle.changes_in(&state.meta.cwd, look);
    changes.extend(super::plan::unverified_ticks(state));
    changes
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
