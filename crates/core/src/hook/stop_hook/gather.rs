//! Gathering a stop's facts: the turn, the verify run, the oracle before, during and after it,
//! the working tree, a metric loop's measurement, and what changed since the start. Everything
//! here runs with the loop's lock released (verify is slow) and changes nothing in the loop.

use std::ffi::OsString;
use std::thread;
use std::time::Duration;

use crate::checks::oracle_change::{ChangeKind, OracleChange};
use crate::checks::oracle_watch::{OracleWatch, Touched};
use crate::checks::skip_marker::{self, SkipMarker};
use crate::checks::verify::VerifyOutcome;
use crate::host::event::StopEvent;
use crate::host::transcript::{self, Turn};
use crate::host::usage::UsageCursor;
use crate::metric::keep::{Measured, MetricFacts};
use crate::metric::measure;
use crate::store::LoopPaths;
use crate::store::incident::Incident;
use crate::store::state::{LoopState, Status};
use crate::support::environment::Environment;
use crate::verdict::decision;
use crate::verdict::facts::{LoopFiles, StopFacts};
use crate::worktree::{self, WorkTree};

/// Hosts may write the transcript's last lines after the hook starts; one retry after this.
const TRANSCRIPT_RETRY: Duration = Duration::from_millis(1_500);

/// The facts of one stop that take work to learn: the turn, the verify run, the oracle and the
/// working tree.
pub(super) struct Gathered {
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
    /// Files changed since the loop started: looked at only when this stop ends or parks it.
    files_changed: Option<Vec<String>>,
    /// Skip markers added since the start: looked at after a passing verify and at the end.
    skip_markers: Vec<SkipMarker>,
    /// A plan's checks run again and the reviewer's verdict, after a passing check.
    after_verify: super::after_verify::AfterVerify,
    /// The commit this stop's checkpoint was saved in, when one was taken.
    checkpoint_commit: Option<String>,
    /// The change since the start against the loop's scope, where the verdict needs it.
    scope: Option<crate::checks::scope::ScopeCheck>,
    /// The loop's files, in the words the verdict shows them.
    files: LoopFiles,
}

impl Gathered {
    /// Runs verify (inside `sandbox`, a command prefix, when the loop is strict) and looks at
    /// the oracle and the working tree.
    fn at(state: &LoopState, event: &StopEvent, sandbox: &[OsString]) -> Gathered {
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
        let metric = match (&settings.metric, &state.meta.metric) {
            (Some(metric), Some(progress)) => {
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
        // The metric and its guard ran after the look: the oracle is looked at again after them.
        let after = if metric.is_some() { worktree.look_again(after.as_ref()) } else { after };
        let oracle_changes = oracle_changes(before, changes_of_check(state, after.as_ref()), &touched);
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
            files_changed: None,
            skip_markers: Vec::new(),
            after_verify: super::after_verify::AfterVerify::default(),
            checkpoint_commit,
            scope: None,
            files: LoopFiles::default(),
        }
    }

    /// Gathers everything the verdict on `state`'s stop depends on: verify in the loop's tier,
    /// then what changed since the start where the verdict shows it.
    pub(super) fn stop(
        env: &Environment,
        store_root: &std::path::Path,
        paths: &LoopPaths,
        state: &LoopState,
        event: &StopEvent,
    ) -> Gathered {
        let sandbox = crate::checks::strict::sandbox_for_verify(
            env,
            store_root,
            state.meta.host,
            &state.meta.cwd,
            state.meta.oracle.files.keys(),
        );
        let mut gathered = Gathered::at(state, event, &sandbox);
        gathered.files = LoopFiles {
            state: paths.state.display().to_string(),
            ledger: paths.ledger.display().to_string(),
            originals: paths.dir.join("oracle").display().to_string(),
        };
        // Before the reviewer: a pass outside the scope does not count, so it is never reviewed.
        let facts = gathered.facts(event, env, &[]);
        let checkpoint = gathered.checkpoint_commit.as_deref();
        // The store (and its armed marker) may sit inside the work tree: its files are ours.
        let store: Vec<&std::path::Path> =
            [Some(store_root), paths.armed.as_deref()].into_iter().flatten().collect();
        let scope = super::scope::at_stop(state, &facts, &gathered.worktree, checkpoint, &store);
        gathered.scope = scope;
        gathered.after_verify = super::after_verify::AfterVerify::run(
            env,
            state,
            gathered.facts(event, env, &[]),
            &gathered.worktree,
            &sandbox,
        );
        gathered.usage =
            super::review::counted(state, gathered.usage.take(), gathered.after_verify.review.as_ref());
        let late = gathered.after_verify.late_oracle_changes(state, &gathered.oracle_changes);
        gathered.oracle_changes.extend(late);
        gathered.changes_since_start(state, paths, event, env);
        gathered
    }

    /// What changed since the start is looked at only where it is shown: the files when the loop
    /// ends or parks, the skip markers then and after a passing verify.
    fn changes_since_start(
        &mut self,
        state: &LoopState,
        paths: &LoopPaths,
        event: &StopEvent,
        env: &Environment,
    ) {
        let facts = self.facts(event, env, &[]);
        let ends =
            matches!(decision::status_after(decision::code(state, &facts)), Status::Ended | Status::Parked);
        let passed = self.verify.as_ref().is_some_and(VerifyOutcome::passed);
        if !(ends || passed) {
            return;
        }
        // The tree the scope was read from is the tree now: it is not written twice.
        let read = self.scope.as_ref().and_then(|check| check.now.clone());
        let trees =
            state.meta.baseline_tree.as_deref().and_then(|baseline| {
                read.or_else(|| self.worktree.tree_id().ok()).map(|now| (baseline, now))
            });
        if ends {
            self.files_changed =
                trees.as_ref().and_then(|(baseline, now)| self.worktree.changed_files(baseline, now).ok());
        }
        self.skip_markers = skip_marker::since_start(
            &self.worktree,
            trees.as_ref().map(|(baseline, now)| (*baseline, now.as_str())),
            &state.meta.cwd,
            &state.meta.oracle.files,
            &paths.dir.join("oracle"),
        );
    }

    /// The facts `decide` reads, with `incidents` and the forged stops of this loop.
    pub(super) fn facts<'a>(
        &'a self,
        event: &StopEvent,
        env: &Environment,
        incidents: &'a [Incident],
    ) -> StopFacts<'a> {
        StopFacts {
            last_message: self.last_message.as_deref(),
            verify: self.verify.as_ref(),
            verify_not_run: self.verify_not_run.as_deref(),
            now: env.now,
            files: &self.files,
            oracle_changes: &self.oracle_changes,
            tree: self.tree.as_deref(),
            files_changed: self.files_changed.as_deref(),
            tool_uses: self.tool_uses.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            stop_hook_active: event.stop_hook_active,
            checkpoint_error: self.checkpoint_error.as_deref(),
            usage: self.usage.as_ref(),
            incidents,
            metric: self.metric.as_ref(),
            forged_stops: 0,
            skip_markers: &self.skip_markers,
            reply: crate::verdict::facts::FinalReply::Unknown,
            detector_gave_way: false,
            review: self.after_verify.review.as_ref(),
            plan: self.after_verify.plan.as_ref(),
            scope: self.scope.as_ref(),
        }
    }
}

impl Gathered {
    /// Verify's exit status, reported by the supervisor it ran under, could not be trusted: an
    /// incident told to the user and the agent and recorded, besides the failed check it is.
    pub(super) fn untrusted_status(&self, now: jiff::Timestamp) -> Option<Incident> {
        let why = self.verify.as_ref()?.untrusted.as_ref()?;
        Some(Incident::new(
            crate::store::reason_code::ReasonCode::VerifyStatusUntrusted,
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
