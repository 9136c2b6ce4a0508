//! The verdict at a turn end: a pure function of the loop and what the stop brought.
//!
//! A stop is handled in three steps: the hook gathers the facts (the event, the verify run, the
//! oracle and the working tree), [`decide`] turns them into the complete verdict (the prompt, the
//! words the user sees, the receipt, the loop's next state and the ledger lines), and the hook
//! commits that verdict as it is. Nothing is rendered or changed after `decide`, so what its tests
//! check is exactly what users see, and every branch is tested here without processes or files.

use crate::checks::ReviewOutcome;
use crate::checks::SkipMarker;
use crate::checks::Streaks;
use crate::checks::VerifyOutcome;
use crate::checks::{News, TestJudgement};
use crate::host::HookResponse;
use crate::host::Usage;
use crate::metric::Lesson;
use crate::metric::Number;
use crate::metric::{Judgement, Measured, MetricProgress, MetricRecord, Rung, keep};
use crate::state::ReasonCode;
use crate::state::Receipt;
use crate::state::{LastVerify, LoopState, Status};
use crate::state::{LedgerDecision, LedgerEntry, VerifyRecord};
use crate::verdict::abort;
use crate::verdict::block_cap;
use crate::verdict::facts::{FinalReply, StopFacts};
use crate::verdict::message;
use crate::verdict::message::metric::{self, Step};
use crate::verdict::message::review;
use crate::verdict::message::scope;
use crate::verdict::promise;

/// Whether a loop judges a stop at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// The owner's stop of an active loop: run verify and decide.
    Judge,
    /// The loop is over: allow, write nothing.
    Ended,
    /// Another session's stop (or a loop with no owner): allow, leave the loop as it is.
    Foreign,
}

pub(crate) fn gate(state: &LoopState, session_id: &str) -> Gate {
    if state.meta.status != Status::Active {
        // Parked loops wait for `resume`; they judge nothing meanwhile.
        Gate::Ended
    } else if !state.is_owned_by(session_id) {
        Gate::Foreign
    } else {
        Gate::Judge
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Let the agent stop.
    Allow,
    /// Keep the agent working, with this prompt.
    Block { reason: String },
}

/// The complete outcome of a judged stop: what the hook prints, and what it records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) verdict: Verdict,
    pub(crate) code: ReasonCode,
    /// For the user: one status line at a block, the receipt when the loop ends or parks.
    pub(crate) system_message: String,
    /// The loop after this stop.
    pub(crate) next: LoopState,
    /// Set when the loop ends or parks (and kept in `next` too).
    pub(crate) receipt: Option<Receipt>,
    /// The ledger lines this stop adds, in order.
    pub(crate) ledger: Vec<LedgerEntry>,
    /// Metric mode: the checkpoint the working tree goes back to (a discarded change).
    pub(crate) rollback_to: Option<u32>,
    /// Metric mode: the line this attempt adds to the project's lessons.
    pub(crate) lesson: Option<Lesson>,
}

impl Decision {
    /// What the hook answers the host.
    pub(crate) fn response(&self) -> HookResponse {
        match &self.verdict {
            Verdict::Block { reason } => HookResponse::block(reason.clone(), self.system_message.clone()),
            Verdict::Allow => HookResponse::allow_with(self.system_message.clone()),
        }
    }
}

/// What the loop is after a stop with this reason: over, parked, or still running (the stop is
/// then blocked).
pub(crate) fn status_after(code: ReasonCode) -> Status {
    match code {
        ReasonCode::Verified | ReasonCode::Promise | ReasonCode::CapReached | ReasonCode::TargetMet => {
            Status::Ended
        }
        ReasonCode::TimeBudget
        | ReasonCode::TokenBudget
        | ReasonCode::SameFailures
        | ReasonCode::NoProgress
        | ReasonCode::MetricPlateau
        | ReasonCode::ReviewVetoed
        | ReasonCode::StoryStalled
        | ReasonCode::BlockCap
        | ReasonCode::Aborted => Status::Parked,
        _ => Status::Active,
    }
}

/// Why this stop ends, parks or continues the loop: the first step of [`decide`], for a caller
/// that gathers some facts only when the loop ends. `facts.files_changed` does not affect it.
pub(crate) fn code(state: &LoopState, facts: &StopFacts<'_>) -> ReasonCode {
    let step = metric_step(state, facts);
    classify(state, facts, &streaks_after(state, facts), step.as_ref(), judge_tests(state, facts).as_ref()).0
}

/// A metric loop's attempt, judged.
struct MetricStep {
    judgement: Judgement,
    /// The progress after this attempt.
    after: MetricProgress,
    rung: Rung,
    /// The guard and verify passed (or are not set).
    correct: bool,
}

fn metric_step(state: &LoopState, facts: &StopFacts<'_>) -> Option<MetricStep> {
    let (settings, progress, attempt) =
        (state.meta.settings.metric.as_ref()?, state.meta.metric.as_ref()?, facts.metric?);
    let correct = facts.verify.is_none_or(VerifyOutcome::passed)
        && attempt.guard.as_ref().is_none_or(VerifyOutcome::passed);
    let judgement = keep::judge(
        settings,
        progress.best.0,
        progress.noise.0,
        &attempt.measured,
        correct,
        (facts.oracle_changes.is_empty(), scope::breach(state, facts.scope)),
    );
    let (after, rung) =
        progress.after(settings, state.meta.iteration, &attempt.measured, &judgement, &attempt.summary);
    Some(MetricStep { judgement, after, rung, correct })
}

/// Why a metric loop's stop ends, parks or continues it.
fn classify_metric(
    state: &LoopState,
    facts: &StopFacts<'_>,
    streaks: &Streaks,
    step: &MetricStep,
    (out_of_time, over_tokens): (bool, bool),
) -> ReasonCode {
    let settings = &state.meta.settings;
    let oracle_intact = facts.oracle_changes.is_empty();
    let measured = facts.metric.is_some_and(|m| matches!(m.measured, Measured::Value { .. }));
    let target_met = settings.metric.as_ref().is_some_and(|s| step.after.target_met(s));
    let in_scope = scope::breach(state, facts.scope).is_none();
    if target_met && step.correct && oracle_intact && in_scope && measured {
        ReasonCode::TargetMet
    } else if state.meta.iteration >= settings.max_iterations {
        ReasonCode::CapReached
    } else if out_of_time {
        ReasonCode::TimeBudget
    } else if over_tokens {
        ReasonCode::TokenBudget
    } else if step.rung == Rung::Park {
        ReasonCode::MetricPlateau
    } else if streaks.no_change >= settings.max_same_failures {
        ReasonCode::NoProgress
    } else if !oracle_intact {
        ReasonCode::OracleChanged
    } else if !in_scope {
        ReasonCode::OutOfScope
    } else if step.judgement == Judgement::Kept {
        ReasonCode::MetricKept
    } else {
        ReasonCode::MetricDiscarded
    }
}

/// What the test-count ratchet makes of this stop's verify run; `None` without one, or when
/// it was stopped before it could print a summary.
fn judge_tests(state: &LoopState, facts: &StopFacts<'_>) -> Option<TestJudgement> {
    facts
        .verify
        .filter(|outcome| !outcome.timed_out)
        .map(|outcome| state.meta.tests.judge(&outcome.output.tests(), outcome.passed()))
}

fn streaks_after(state: &LoopState, facts: &StopFacts<'_>) -> Streaks {
    let mut streaks = state.meta.streaks.after(facts.verify, facts.tree, facts.tool_uses);
    match facts.review {
        Some(review) if review.approved => streaks.vetoes = 0,
        Some(_) => streaks.vetoes += 1,
        // A reviewer that should have run and did not has not approved.
        None if awaits_review(state, facts) => streaks.vetoes += 1,
        None => {}
    }
    streaks
}

/// Whether this stop's check passed in a loop with a reviewer, so that the reviewer must run
/// before the stop is judged: only then can it approve or veto, and it never sees a failure.
pub(crate) fn awaits_review(state: &LoopState, facts: &StopFacts<'_>) -> bool {
    let settings = &state.meta.settings;
    settings.review.is_some()
        && settings.metric.is_none()
        && facts.verify.is_some()
        // A pass at a stop that may not be a turn's end does not count, whatever a reviewer says.
        && doubt(state, facts).is_none()
        && facts.last_message.and_then(abort::reason).is_none()
        && check_passes(state, facts, judge_tests(state, facts).as_ref()).0
        && scope::breach(state, facts.scope).is_none()
}

/// Whether this stop's change must be read against the loop's scope before it is judged: in a
/// loop with a scope (its own or a story's), at every metric attempt and wherever the check
/// passed. Facts without the scope's reading are asked.
pub(crate) fn awaits_scope(state: &LoopState, facts: &StopFacts<'_>) -> bool {
    scope::is_scoped(state)
        && (state.meta.settings.metric.is_some()
            || check_passes(state, facts, judge_tests(state, facts).as_ref()).0)
}

/// Whether the check passed at this stop (verify, the promise, an intact oracle and the test
/// ratchet, the reviewer aside), and whether the promise was kept (when one is required).
fn check_passes(
    state: &LoopState,
    facts: &StopFacts<'_>,
    tests: Option<&TestJudgement>,
) -> (bool, Option<bool>) {
    let settings = &state.meta.settings;
    let check = state.current_check();
    let verify_passed = match (check, facts.verify) {
        (None, _) => None,
        (Some(_), outcome) => Some(outcome.is_some_and(VerifyOutcome::passed)),
    };
    // At a stop that may not be a turn's end, the message it carries is not the agent's final
    // reply: it neither keeps a promise nor aborts, and a pass does not count.
    let doubtful = doubt(state, facts).is_some();
    let last_message = facts.last_message.filter(|_| !doubtful);
    let promise_kept = settings
        .completion_promise
        .as_deref()
        .filter(|_| !doubtful)
        .map(|p| last_message.is_some_and(|m| promise::is_kept(m, p)));
    let criteria_met = match (verify_passed, promise_kept) {
        (None, None) => doubtful && settings.completion_promise.is_some(),
        (Some(v), None) => v,
        (None, Some(p)) => p,
        (Some(v), Some(p)) => v && p,
    };
    let tests_intact = tests.is_none_or(|judgement| judgement.shortfall.is_none());
    (criteria_met && facts.oracle_changes.is_empty() && tests_intact, promise_kept)
}

/// Whether the plan's last story passed at this stop, so that every story's check must run
/// again before the stop is judged.
pub(crate) fn awaits_sweep(state: &LoopState, facts: &StopFacts<'_>) -> bool {
    state.meta.plan.as_ref().is_some_and(|p| p.next_pending().is_none())
        && facts.verify.is_some()
        && doubt(state, facts).is_none()
        && check_passes(state, facts, judge_tests(state, facts).as_ref()).0
        && scope::breach(state, facts.scope).is_none()
}

/// Something a stop must find out before it can be judged, because the verdict depends on it
/// and finding it out costs work (a command, an agent, a read of git's trees).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// The change since the start, read against the loop's scope.
    Scope,
    /// Every story's check and `--verify` again, the plan's last story having passed.
    Sweep,
    /// The reviewer's verdict on a pass.
    Review,
    /// The files changed since the start, which a loop that ends or parks shows.
    ChangedFiles,
    /// Skip markers added since the start, shown after a pass and where the loop ends or parks.
    SkipMarkers,
}

impl Ask {
    /// The order a stop asks in: each answer can change the next question (a change outside the
    /// scope takes away the pass the sweep and the reviewer wait for; a veto ends no loop), so
    /// each is asked on the facts as they stand after the ones before it, and each at most once.
    pub(crate) const ORDER: [Ask; 5] =
        [Ask::Scope, Ask::Sweep, Ask::Review, Ask::ChangedFiles, Ask::SkipMarkers];
}

/// What a stop with these facts must still find out before [`decide`] can judge it: the one
/// place the hook learns what to run besides verify. An answer already in `facts` is not asked
/// again.
pub(crate) fn asks(state: &LoopState, facts: &StopFacts<'_>) -> Vec<Ask> {
    let ends = matches!(status_after(code(state, facts)), Status::Ended | Status::Parked);
    let passed = facts.verify.is_some_and(VerifyOutcome::passed);
    let wanted = [
        (Ask::Scope, facts.scope.is_none() && awaits_scope(state, facts)),
        (Ask::Sweep, facts.plan.is_none() && awaits_sweep(state, facts)),
        (Ask::Review, facts.review.is_none() && awaits_review(state, facts)),
        (Ask::ChangedFiles, facts.files_changed.is_none() && ends),
        (Ask::SkipMarkers, facts.skip_markers.is_empty() && (ends || passed)),
    ];
    wanted.into_iter().filter_map(|(ask, wanted)| wanted.then_some(ask)).collect()
}

/// A plan loop's step when the current story's check passed: the next story, or a done story
/// that broke. `None` when the plan is complete (or the loop has none).
fn plan_step(state: &LoopState, facts: &StopFacts<'_>) -> Option<ReasonCode> {
    let progress = state.meta.plan.as_ref()?;
    if progress.next_pending().is_some() {
        return Some(ReasonCode::StoryVerified);
    }
    // No sweep at all is not a complete plan.
    facts.plan.is_none_or(|sweep| sweep.broken.is_some()).then_some(ReasonCode::StoryBroken)
}

/// Whether the current story has used its `--story-iterations` with this stop.
fn story_spent(state: &LoopState) -> bool {
    let (Some(plan), Some(progress)) = (&state.meta.settings.plan, &state.meta.plan) else { return false };
    plan.story_iterations.is_some_and(|most| progress.current_stops + 1 >= most)
}

/// A veto's code: the loop goes on, or parks once the reviewer has vetoed `--max-vetoes` times.
fn veto_code(state: &LoopState, streaks: &Streaks) -> ReasonCode {
    let max = state.meta.settings.review.as_ref().map_or(0, |r| r.max_vetoes);
    if streaks.vetoes >= max { ReasonCode::ReviewVetoed } else { ReasonCode::ReviewBlocked }
}

/// Whether the loop's time budget and its token budget are spent, each.
fn budgets_spent(state: &LoopState, facts: &StopFacts<'_>) -> (bool, bool) {
    let settings = &state.meta.settings;
    let elapsed_secs = facts.now.duration_since(state.meta.started_at).as_secs();
    let tokens_used = facts.usage.or(state.meta.usage.as_ref()).map_or(0, |u| u.used.total().counted());
    let out_of_time = settings
        .max_time_secs
        .is_some_and(|budget| elapsed_secs >= i64::try_from(budget).unwrap_or(i64::MAX));
    let over_tokens = settings.max_tokens.is_some_and(|budget| tokens_used > budget);
    (out_of_time, over_tokens)
}

/// The reason code, and whether the promise was kept (when one is required).
fn classify(
    state: &LoopState,
    facts: &StopFacts<'_>,
    streaks: &Streaks,
    metric: Option<&MetricStep>,
    tests: Option<&TestJudgement>,
) -> (ReasonCode, Option<bool>) {
    let settings = &state.meta.settings;
    // At a stop that may not be a turn's end, the message it carries is not the agent's final
    // reply: it neither keeps a promise nor aborts, and a pass does not count.
    let doubtful = doubt(state, facts).is_some();
    let last_message = facts.last_message.filter(|_| !doubtful);
    let (checked, promise_kept) = check_passes(state, facts, tests);
    // A change outside the scope takes the pass away, before any reviewer is asked.
    let outside = checked && scope::breach(state, facts.scope).is_some();
    // So does a change of what decides whether for-loop's hooks run at all (issue 32).
    // A doubtful stop's pass counts for nothing anyway, and is told so.
    let unhooked = checked && !outside && !doubtful && hooks_changed(facts);
    let passes = checked && !outside && !unhooked;
    // A reviewer can only take a pass away: it is asked only when the check passed.
    let vetoed = passes && settings.review.is_some() && !facts.review.is_some_and(|r| r.approved);
    let oracle_intact = facts.oracle_changes.is_empty();
    let tests_intact = tests.is_none_or(|judgement| judgement.shortfall.is_none());
    let (out_of_time, over_tokens) = budgets_spent(state, facts);
    // An honest abort comes first: the agent says the task cannot be done as asked, so nothing
    // else at this stop, a pass or a better number included, speaks for the work.
    if last_message.and_then(abort::reason).is_some() {
        return (ReasonCode::Aborted, promise_kept);
    }
    if let Some(step) = metric {
        let code = match classify_metric(state, facts, streaks, step, (out_of_time, over_tokens)) {
            ReasonCode::TargetMet if doubtful => ReasonCode::PassNotCounted,
            ReasonCode::TargetMet if hooks_changed(facts) => ReasonCode::HooksChanged,
            code => code,
        };
        return (code, promise_kept);
    }
    let step = if passes && !doubtful { plan_step(state, facts) } else { None };
    let code = if passes && doubtful {
        ReasonCode::PassNotCounted
    } else if passes && !vetoed && step.is_none() {
        if facts.verify.is_some() { ReasonCode::Verified } else { ReasonCode::Promise }
    } else if state.meta.iteration >= settings.max_iterations {
        ReasonCode::CapReached
    } else if out_of_time {
        ReasonCode::TimeBudget
    } else if over_tokens {
        ReasonCode::TokenBudget
    } else if outside {
        ReasonCode::OutOfScope
    } else if unhooked {
        ReasonCode::HooksChanged
    } else if vetoed {
        veto_code(state, streaks)
    } else if let Some(step) = step {
        step
    } else if story_spent(state) {
        ReasonCode::StoryStalled
    } else if streaks.same_failure >= settings.max_same_failures {
        ReasonCode::SameFailures
    } else if streaks.no_change >= settings.max_same_failures {
        ReasonCode::NoProgress
    } else if state.current_check().is_some() && facts.verify.is_none() {
        ReasonCode::VerifyNotRun
    } else if !oracle_intact {
        ReasonCode::OracleChanged
    } else if let Some(outcome) = facts.verify.filter(|o| !o.passed()) {
        if outcome.timed_out { ReasonCode::VerifyTimedOut } else { ReasonCode::VerifyFailed }
    } else if !tests_intact {
        ReasonCode::TestsDropped
    } else if promise_kept == Some(false) {
        ReasonCode::PromiseMissing
    } else {
        ReasonCode::NoCriterion
    };
    (code, promise_kept)
}

/// Whether something that decides whether for-loop's hooks run at all changed since the last
/// judged stop (found at this stop, or told at a tool call or prompt since): a pass at such a
/// stop does not count, so that the change is never met by a loop that ends as verified.
fn hooks_changed(facts: &StopFacts<'_>) -> bool {
    facts.incidents.iter().any(|incident| incident.code == ReasonCode::HostConfigChanged)
}

/// Whether `reply` is a final reply the loop has not judged yet. A host without a transcript the
/// hook reads cannot tell, and is believed.
pub(crate) fn reply_is_new(state: &LoopState, reply: FinalReply<'_>) -> bool {
    match reply {
        FinalReply::Unknown => true,
        FinalReply::Missing => false,
        FinalReply::Seen(digest) => state.meta.last_reply.as_deref() != Some(digest),
    }
}

/// Why this stop may not be the end of a turn, so that a pass at it cannot count: it was judged
/// only because the forged-stop detector gave way, or the agent wrote no new final reply since
/// the last judged stop (a stop sent by a background job while the model works, or again after
/// the turn that was already judged).
fn doubt(state: &LoopState, facts: &StopFacts<'_>) -> Option<&'static str> {
    if facts.detector_gave_way {
        Some(
            "it arrived while a tool call of the agent was still running, so it may have been sent by \
             that tool call rather than by the end of a turn (the third such stop in a row is judged, \
             so that no real stop is held back)",
        )
    } else if !reply_is_new(state, facts.reply) {
        Some(match facts.reply {
            FinalReply::Missing => {
                "the session's transcript shows no final reply of the agent, so no turn had ended"
            }
            _ => "the agent wrote no new reply since the last judged stop, so no new turn had ended",
        })
    } else {
        None
    }
}

/// Judges the owner's stop of an active loop.
// The facts are a `Copy` bundle of borrows, a little over the lint's size: by value, the hook's
// `StopFacts { x, ..facts }` updates stay plain.
#[allow(clippy::large_types_passed_by_value)]
pub(crate) fn decide(state: &LoopState, facts: StopFacts<'_>) -> Decision {
    let streaks = streaks_after(state, &facts);
    let step = metric_step(state, &facts);
    let tests = judge_tests(state, &facts);
    let (code, promise_kept) = classify(state, &facts, &streaks, step.as_ref(), tests.as_ref());
    let blocks = status_after(code) == Status::Active && code != ReasonCode::PassNotCounted;
    let code = block_cap::kept(state, &facts, code, blocks);
    let harness_override = state.meta.last_blocked && facts.stop_hook_active == Some(false);

    let mut next = state.clone();
    record_stop(&mut next, &facts, streaks, tests.as_ref(), step.as_ref());
    if harness_override {
        next.meta.harness_overrides += 1;
    }
    advance_plan(&mut next, code, &facts);

    let status = status_after(code);
    let warnings = message::incident_lines(facts.incidents);
    let (verdict, system_message, receipt) = if code == ReasonCode::PassNotCounted {
        // The agent may stop; the loop stays as it is, and no iteration is used. A real stop
        // taken for a doubtful one hands the turn to the user, who goes on or cancels.
        next.meta.last_blocked = false;
        let why = doubt(state, &facts).unwrap_or_default();
        (Verdict::Allow, format!("{warnings}{}", message::pass_not_counted(&next, why)), None)
    } else if status == Status::Active {
        next.meta.iteration += 1;
        next.meta.last_blocked = true;
        next.meta.rhythm.quiet_blocks = block_cap::quiet_after(state, &facts);
        let (mut reason, line) = match words(state, step.as_ref(), &facts) {
            Some(words) => (
                metric::reinjection(&next, &words, facts.files, facts.oracle_changes),
                metric::status_line(&next, &words),
            ),
            None => block_words(state, &next, code, &facts, tests.as_ref()),
        };
        reason.push_str(&block_cap::warning(state, &facts).unwrap_or_default());
        (Verdict::Block { reason }, format!("{warnings}{line}"), None)
    } else {
        next.meta.status = status;
        next.meta.outcome = Some(code);
        next.meta.last_blocked = false;
        let receipt = closing_receipt(state, &next, code, &facts);
        let shown = format!("{warnings}{}", closing_words(state, &next, code, &facts, &receipt));
        (Verdict::Allow, shown, Some(receipt))
    };
    next.meta.receipt.clone_from(&receipt);

    let mut ledger = notes(state, &facts, harness_override);
    let recorded = match verdict {
        Verdict::Block { .. } => LedgerDecision::Block,
        Verdict::Allow => LedgerDecision::Allow,
    };
    ledger.push(LedgerEntry {
        stop_hook_active: facts.stop_hook_active,
        verify: facts.verify.map(VerifyRecord::of),
        promise_kept,
        detail: detail(&facts, tests.as_ref()),
        tests: tests.as_ref().and_then(|j| j.counts),
        skip_markers: facts.skip_markers.iter().map(ToString::to_string).collect(),
        oracle_changed: facts.oracle_changes.iter().map(|c| c.path.clone()).collect(),
        receipt: receipt.clone(),
        tokens: iteration_tokens(state, &facts),
        metric: metric_record(state, step.as_ref(), &facts),
        review: facts.review.map(ReviewOutcome::record),
        out_of_scope: facts.scope.map(|check| check.outside.clone()).unwrap_or_default(),
        ..LedgerEntry::new(state, facts.now, recorded, code)
    });
    let rollback_to =
        step.as_ref().filter(|s| s.judgement != Judgement::Kept).map(|s| s.after.best_checkpoint);
    let lesson = lesson(state, step.as_ref(), &facts);
    Decision { verdict, code, system_message, next, receipt, ledger, rollback_to, lesson }
}

/// What the loop keeps of this stop whatever the verdict: the time, verify's run, the streaks,
/// the usage, the test ratchet and the metric's progress.
fn record_stop(
    next: &mut LoopState,
    facts: &StopFacts<'_>,
    streaks: Streaks,
    tests: Option<&TestJudgement>,
    step: Option<&MetricStep>,
) {
    next.meta.updated_at = facts.now;
    // A turn that ended on an error before this one is behind the loop now.
    next.meta.failed_turn = None;
    if let FinalReply::Seen(digest) = facts.reply {
        next.meta.last_reply = Some(digest.to_string());
    }
    if let Some(outcome) = facts.verify {
        let ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
        next.meta.verify_total_ms += ms;
        next.meta.last_verify =
            Some(LastVerify { exit_code: outcome.exit_code, duration_ms: ms, timed_out: outcome.timed_out });
        next.meta.failing = crate::state::failing_of(outcome);
    }
    next.meta.streaks = streaks;
    if let Some(usage) = facts.usage {
        next.meta.usage = Some(usage.clone());
    }
    if let Some(judgement) = tests {
        next.meta.tests = judgement.next.clone();
    }
    if let Some(step) = step {
        next.meta.metric = Some(step.after.clone());
    }
}

/// A plan loop's progress after this stop: the stop counted to its story, and the story done,
/// or a broken one current again. A new story's check has its own tests: the ratchet starts over.
fn advance_plan(next: &mut LoopState, code: ReasonCode, facts: &StopFacts<'_>) {
    let Some(progress) = next.meta.plan.as_mut() else { return };
    if let Some(story) = progress.stories.get_mut(progress.current) {
        story.iterations += 1;
    }
    progress.current_stops += 1;
    let before = progress.current;
    match code {
        ReasonCode::StoryVerified | ReasonCode::Verified => progress.story_passed(),
        ReasonCode::StoryBroken => {
            progress.story_passed();
            match facts.plan.and_then(|s| s.broken.as_ref()) {
                Some((Some(index), _)) => progress.reopen(*index),
                _ => progress.reopen(before),
            }
        }
        _ => {}
    }
    if progress.current != before {
        progress.current_stops = 0;
        // The next story's scope judges the change from here.
        progress.story_tree = facts.scope.and_then(|check| check.now.clone());
        next.meta.tests = crate::checks::TestRatchet::new(next.meta.settings.allow_test_edits);
    }
}

/// What this iteration used: the growth of the loop's usage since the last stop.
fn iteration_tokens(state: &LoopState, facts: &StopFacts<'_>) -> Option<Usage> {
    let now = facts.usage?;
    let before = state.meta.usage.as_ref().map(|u| u.used.clone()).unwrap_or_default();
    Some(Usage(
        now.used
            .0
            .iter()
            .map(|(model, counts)| {
                (model.clone(), counts.growth_since(&before.0.get(model).copied().unwrap_or_default()))
            })
            .filter(|(_, counts)| !counts.is_zero())
            .collect(),
    ))
}

/// The prompt and the user's status line at a blocked stop of a loop without a metric. `next`
/// is the loop after this stop.
fn block_words(
    state: &LoopState,
    next: &LoopState,
    code: ReasonCode,
    facts: &StopFacts<'_>,
    tests: Option<&TestJudgement>,
) -> (String, String) {
    let mut sections = Vec::new();
    match code {
        ReasonCode::StoryVerified => sections.push(crate::verdict::message::plan::story_done(state, next)),
        ReasonCode::StoryBroken => {
            sections.push(crate::verdict::message::plan::story_broken(next, facts.plan));
        }
        _ => {}
    }
    if let Some(shortfall) = tests.and_then(|j| j.shortfall.as_ref()) {
        sections.push(shortfall.explain(settings_verify(state)));
    }
    if !facts.skip_markers.is_empty() {
        sections.push(skip_notice(facts.skip_markers));
    }
    let news = tests.and_then(|j| j.news.as_ref());
    if let Some(news) = news.and_then(News::for_the_model) {
        sections.push(format!("\n{news}\n"));
    }
    let reason = message::reinjection(next, state.meta.failing.as_ref(), code, facts, &sections);
    let mut line = message::status_line(next, code, facts.verify, facts.verify_not_run);
    if let Some(news) = news {
        line.push_str(&format!("\n  {}", news.text()));
    }
    if let Some(now) = next.meta.failing.as_ref().filter(|_| facts.verify.is_some_and(|v| !v.passed())) {
        line.push_str(&format!("\n  {}", crate::state::describe_failing(state.meta.failing.as_ref(), now)));
    }
    (reason, line)
}

/// The receipt of a loop that ends or parks at this stop. `next` is the loop after it.
fn closing_receipt(state: &LoopState, next: &LoopState, code: ReasonCode, facts: &StopFacts<'_>) -> Receipt {
    let mut receipt = next.receipt(code, facts.now, facts.files_changed.map(<[String]>::to_vec));
    receipt.review = review::receipt_line(state, next, code, facts.review);
    receipt.plan = crate::verdict::message::plan::receipt_line(next);
    receipt.forged_stops = facts.forged_stops;
    receipt.skip_markers = facts.skip_markers.iter().map(ToString::to_string).collect();
    if code == ReasonCode::Aborted {
        receipt.abort_reason = facts.last_message.and_then(abort::reason);
    }
    if code != ReasonCode::Verified && code != ReasonCode::Promise {
        receipt.oracle_changed = facts.oracle_changes.iter().map(message::change_in_words).collect();
    }
    receipt
}

/// What the user sees when the loop ends or parks: the headline, the receipt and the ledger.
fn closing_words(
    state: &LoopState,
    next: &LoopState,
    code: ReasonCode,
    facts: &StopFacts<'_>,
    receipt: &Receipt,
) -> String {
    let headline = metric::headline(next, code)
        .or_else(|| block_cap::headline(next, code))
        .unwrap_or_else(|| message::headline(next, code, facts.verify, !receipt.oracle_changed.is_empty()));
    format!("{}\n  ledger: {}", receipt.render(&headline, state.meta.host), facts.files.ledger)
}

/// The ledger's notes ahead of the verdict: incidents not yet recorded, and the host ending a
/// turn that was blocked.
fn notes(state: &LoopState, facts: &StopFacts<'_>, harness_override: bool) -> Vec<LedgerEntry> {
    let mut notes: Vec<LedgerEntry> = facts
        .incidents
        .iter()
        .filter(|incident| !incident.recorded)
        .map(|incident| LedgerEntry {
            time: incident.at,
            detail: Some(incident.what.clone()),
            // A stop cannot tell who changed the host's configuration; the user's own change
            // (`/for-loop:strict`) takes the snapshot again itself, so what is left is the agent's.
            origin: (incident.code == ReasonCode::HostConfigChanged).then_some(crate::host::Origin::Agent),
            ..LedgerEntry::new(state, facts.now, LedgerDecision::Note, incident.code)
        })
        .collect();
    if let Some(review) = facts.review.filter(|r| r.approved) {
        notes.push(LedgerEntry {
            review: Some(review.record()),
            ..LedgerEntry::new(state, facts.now, LedgerDecision::Note, ReasonCode::ReviewApproved)
        });
    }
    if harness_override {
        notes.push(LedgerEntry {
            stop_hook_active: facts.stop_hook_active,
            detail: Some("the host ended the turn although the last stop was blocked".into()),
            ..LedgerEntry::new(state, facts.now, LedgerDecision::Note, ReasonCode::HarnessOverride)
        });
    }
    notes
}

fn words<'a>(state: &'a LoopState, step: Option<&'a MetricStep>, facts: &StopFacts<'a>) -> Option<Step<'a>> {
    let step = step?;
    Some(Step {
        before: state.meta.metric.as_ref()?,
        facts: facts.metric?,
        judgement: &step.judgement,
        rung: step.rung,
        verify: facts.verify,
    })
}

fn metric_record(
    state: &LoopState,
    step: Option<&MetricStep>,
    facts: &StopFacts<'_>,
) -> Option<MetricRecord> {
    let (settings, step) = (state.meta.settings.metric.as_ref()?, step?);
    let Measured::Value { value, .. } = facts.metric?.measured else { return None };
    Some(MetricRecord::of(settings, &step.after, value, step.judgement == Judgement::Kept))
}

fn lesson(state: &LoopState, step: Option<&MetricStep>, facts: &StopFacts<'_>) -> Option<Lesson> {
    let (before, step, attempt) = (state.meta.metric.as_ref()?, step?, facts.metric?);
    let value = match attempt.measured {
        Measured::Value { value, .. } => Some(value),
        Measured::Failed(_) => None,
    };
    Some(Lesson {
        time: facts.now,
        loop_id: state.meta.loop_id.clone(),
        iteration: state.meta.iteration,
        value: value.map(Number),
        delta: value.map(|v| Number(v - before.best.0)),
        kept: step.judgement == Judgement::Kept,
        summary: attempt.summary.clone(),
    })
}

/// The paragraph of the re-injection that names the skip markers added since the start.
fn skip_notice(markers: &[SkipMarker]) -> String {
    let mut out =
        String::from("\nSkip markers added since the loop started (a skipped test proves nothing):\n");
    for marker in markers.iter().take(10) {
        out.push_str(&format!("  - {marker}\n"));
    }
    if markers.len() > 10 {
        out.push_str(&format!("  - and {} more\n", markers.len() - 10));
    }
    out.push_str("Remove them, and make those tests pass instead.\n");
    out
}

fn settings_verify(state: &LoopState) -> &str {
    state.meta.settings.verify.as_deref().unwrap_or_default()
}

/// What the ledger line notes besides the verdict: why verify could not run, a failed
/// checkpoint, and why a pass did not count for the test-count ratchet.
fn detail(facts: &StopFacts<'_>, tests: Option<&TestJudgement>) -> Option<String> {
    let mut notes: Vec<String> = Vec::new();
    if let Some(why) = facts.verify_not_run {
        notes.push(format!("verify could not run: {why}"));
    }
    if let Some(e) = facts.checkpoint_error {
        notes.push(format!("checkpoint failed: {e}"));
    }
    if let Some(reason) = facts.last_message.and_then(abort::reason) {
        notes.push(format!("the agent aborted: {reason}"));
    }
    if let Some(shortfall) = tests.and_then(|j| j.shortfall.as_ref()) {
        notes.push(format!("{}: {}", shortfall.summary(), shortfall.suites.join("; ")));
    }
    if let Some(scope) = facts.scope.filter(|check| !check.holds()) {
        notes.push(match &scope.unknown {
            Some(why) => format!("the scope could not be checked: {why}"),
            None => format!("{} file(s) changed outside the scope", scope.outside_total),
        });
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use jiff::Timestamp;

    use super::*;
    use crate::checks::oracle::OracleChange;
    use crate::checks::test_count::tally;
    use crate::checks::test_count::{RatchetStatus, TestRatchet};
    use crate::checks::verify::Captured;
    use crate::host::usage::UsageCursor;
    use crate::state::Incident;
    use crate::state::sample;
    use crate::verdict::facts::LoopFiles;
    use std::time::Duration;

    fn outcome(exit_code: Option<i32>, timed_out: bool, output: &str) -> VerifyOutcome {
        let mut captured = Captured::default();
        captured.push(output.as_bytes());
        VerifyOutcome {
            exit_code,
            signal: None,
            timed_out,
            untrusted: None,
            duration: Duration::from_millis(4_200),
            output: captured,
        }
    }

    static FILES: LazyLock<LoopFiles> = LazyLock::new(|| LoopFiles {
        state: "/state/sessions/sess-1/state.md".into(),
        ledger: "/state/sessions/sess-1/ledger.jsonl".into(),
        originals: "/state/sessions/sess-1/oracle".into(),
    });

    fn facts<'a>(verify: Option<&'a VerifyOutcome>, last_message: Option<&'a str>) -> StopFacts<'a> {
        StopFacts {
            last_message,
            verify,
            now: "2026-11-22T03:12:03Z".parse().unwrap(),
            files: &FILES,
            oracle_changes: &[],
            tree: None,
            files_changed: None,
            tool_uses: None,
            stop_hook_active: None,
            checkpoint_error: None,
            usage: None,
            verify_not_run: None,
            incidents: &[],
            metric: None,
            forged_stops: 0,
            skip_markers: &[],
            reply: FinalReply::Unknown,
            detector_gave_way: false,
            review: None,
            plan: None,
            scope: None,
        }
    }

    fn reviewed() -> LoopState {
        let mut state = with(Some("cargo test"), None, 1, 30);
        state.meta.settings.review =
            Some(crate::checks::review::ReviewSettings { command: "sh review.sh".into(), max_vetoes: 3 });
        state
    }

    fn approval() -> ReviewOutcome {
        ReviewOutcome {
            approved: true,
            ended: "exit 0".into(),
            timed_out: false,
            findings: String::new(),
            digest: "0123456789abcdef".into(),
            duration: Duration::from_secs(1),
            note: None,
            usage: Usage::default(),
        }
    }

    #[test]
    fn a_failing_check_asks_for_nothing_until_the_loop_ends() {
        let failed = outcome(Some(1), false, "FAILED\n");
        assert_eq!(asks(&reviewed(), &facts(Some(&failed), None)), []);
        let last = with(Some("cargo test"), None, 30, 30);
        assert_eq!(asks(&last, &facts(Some(&failed), None)), [Ask::ChangedFiles, Ask::SkipMarkers]);
    }

    /// The reviewer's answer decides whether the loop ends, so what an ending shows is asked
    /// only once the reviewer has answered.
    #[test]
    fn a_pass_asks_for_the_reviewer_first_and_for_what_an_ending_shows_after_it() {
        let (state, passed) = (reviewed(), outcome(Some(0), false, "ok\n"));
        assert_eq!(asks(&state, &facts(Some(&passed), None)), [Ask::Review, Ask::SkipMarkers]);
        let approved = approval();
        let answered = StopFacts { review: Some(&approved), ..facts(Some(&passed), None) };
        assert_eq!(asks(&state, &answered), [Ask::ChangedFiles, Ask::SkipMarkers]);
        let files = vec!["src/lib.rs".to_string()];
        let shown = StopFacts { files_changed: Some(&files), ..answered };
        assert_eq!(asks(&state, &shown), [Ask::SkipMarkers]);
    }

    /// The questions read the same facts as the verdict: a stop that may not be a turn's end
    /// cannot pass, so no reviewer is run for it.
    #[test]
    fn a_stop_that_may_be_forged_never_runs_the_reviewer() {
        let (state, passed) = (reviewed(), outcome(Some(0), false, "ok\n"));
        let doubted = StopFacts { detector_gave_way: true, ..facts(Some(&passed), None) };
        assert!(!asks(&state, &doubted).contains(&Ask::Review));
        let mut seen = state.clone();
        seen.meta.last_reply = Some("d1".into());
        let no_new_reply = StopFacts { reply: FinalReply::Seen("d1"), ..facts(Some(&passed), None) };
        assert!(!asks(&seen, &no_new_reply).contains(&Ask::Review));
        assert_eq!(decide(&state, doubted).next.meta.status, Status::Active);
    }

    fn with(verify: Option<&str>, promise: Option<&str>, iteration: u32, max: u32) -> LoopState {
        let mut state = sample();
        state.meta.settings.verify = verify.map(str::to_string);
        state.meta.settings.completion_promise = promise.map(str::to_string);
        state.meta.iteration = iteration;
        state.meta.settings.max_iterations = max;
        // Verify has run before, without a test summary: the ratchet has nothing to say.
        state.meta.tests.status = RatchetStatus::Waiting;
        state
    }

    /// A loop whose verify ran pytest before, with `ran` tests and none skipped.
    fn counting(ran: u64) -> LoopState {
        let mut state = with(Some("pytest"), None, 3, 30);
        state.meta.tests = TestRatchet::new(false).judge(&tally(&pytest(0, ran, 0)), false).next;
        state
    }

    fn pytest(passed: u64, failed: u64, skipped: u64) -> String {
        format!(
            "============================= test session starts ==============================\n\
             ======== {passed} passed, {failed} failed, {skipped} skipped in 0.10s ========\n"
        )
    }

    fn overrode(decision: &Decision) -> bool {
        decision.ledger.iter().any(|entry| entry.reason == ReasonCode::HarnessOverride)
    }

    fn reason(decision: &Decision) -> &str {
        match &decision.verdict {
            Verdict::Block { reason } => reason,
            Verdict::Allow => panic!("expected a block, got {decision:?}"),
        }
    }

    /// What the user and the model are shown, and what is recorded, exactly as the hook prints
    /// and writes it.
    fn shown(decision: &Decision) -> String {
        let mut out = format!("systemMessage:\n{}\n", decision.system_message);
        if let Verdict::Block { reason } = &decision.verdict {
            out.push_str(&format!("reason:\n{reason}\n"));
        }
        for entry in &decision.ledger {
            out.push_str(&format!("ledger: {} {}\n", entry.decision, entry.reason));
        }
        out
    }

    #[test]
    fn snapshot_block() {
        let state = with(Some("cargo test"), None, 2, 30);
        let failed = outcome(Some(1), false, "test login ... FAILED\n");
        insta::assert_snapshot!(shown(&decide(&state, facts(Some(&failed), None))), @r"
        systemMessage:
        for-loop 3/30 · verify failed (exit 1, 4.2 s)
          1 failing: login
        reason:
        fix the login

        ---
        for-loop: this is iteration 3 of 30. The loop goes on until `cargo test` exits 0.

        Verify `cargo test` failed: exit 1 after 4.2 s. Its output:

        Failing (1), as cargo test reported them. The names and lines between the fences are quoted from the check's output, as it printed them:
        ```text
        - login
        ```

        The output itself, its start and its end:

        ```text
        test login ... FAILED
        ```

        To finish: find the cause of this failure and fix it, run `cargo test` yourself to see it pass, then end your turn. Do not change the verify command or the files it runs.

        If the task cannot be done as asked, say why and end your turn with <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. Weakening the check is never the way out.
        ledger: block verify_failed
        ");
    }

    #[test]
    fn snapshot_verified() {
        let state = with(Some("cargo test"), None, 4, 30);
        let passed = outcome(Some(0), false, "ok\n");
        let files = ["src/login.rs".to_string(), "src/session.rs".to_string()];
        let facts = StopFacts { files_changed: Some(&files), ..facts(Some(&passed), None) };
        insta::assert_snapshot!(shown(&decide(&state, facts)), @r"
        systemMessage:
        for-loop: done, verified at iteration 4/30: `cargo test` passed (4.2 s).
          receipt: verified · 4/30 iterations · 12m 03s elapsed · 4.2 s in verify
          changed: 2 files: src/login.rs, src/session.rs
          ledger: /state/sessions/sess-1/ledger.jsonl
        ledger: allow verified
        ");
    }

    #[test]
    fn snapshot_cap() {
        let state = with(Some("cargo test"), None, 30, 30);
        let failed = outcome(Some(101), false, "error[E0425]: cannot find value `x`\n");
        let facts = StopFacts { files_changed: Some(&[]), ..facts(Some(&failed), None) };
        insta::assert_snapshot!(shown(&decide(&state, facts)), @r"
        systemMessage:
        for-loop: stopped at the cap, 30/30 iterations used and `cargo test` still fails (exit 101).
          receipt: cap_reached · 30/30 iterations · 12m 03s elapsed · 4.2 s in verify
          changed: no files
          go on: /for-loop:resume (add --more N for more iterations, --more-time 30m for more time)
          ledger: /state/sessions/sess-1/ledger.jsonl
        ledger: allow cap_reached
        ");
    }

    /// Out of turns with the check still doctored: the user must not read "stopped at the cap" as
    /// "nearly done".
    #[test]
    fn snapshot_cap_with_a_modified_check() {
        let state = with(Some("sh check.sh"), None, 30, 30);
        let passed = outcome(Some(0), false, "");
        let changes =
            [OracleChange { path: "check.sh".into(), kind: crate::checks::oracle::ChangeKind::Modified }];
        let facts = StopFacts { oracle_changes: &changes, ..facts(Some(&passed), None) };
        let decision = decide(&state, facts);
        assert_eq!(decision.receipt.as_ref().unwrap().oracle_changed, ["check.sh (modified)"]);
        insta::assert_snapshot!(shown(&decision), @r"
        systemMessage:
        for-loop: stopped at the cap, 30/30 iterations used and `sh check.sh` passes only because its check was modified.
          receipt: cap_reached · 30/30 iterations · 12m 03s elapsed · 4.2 s in verify
          check modified: check.sh (modified): changed during the loop and never restored, so the check that ran was not the one you gave
          go on: /for-loop:resume (add --more N for more iterations, --more-time 30m for more time)
          ledger: /state/sessions/sess-1/ledger.jsonl
        ledger: allow cap_reached
        ");
    }

    #[test]
    fn snapshot_incidents_are_told_to_both_and_recorded_once() {
        let state = with(Some("cargo test"), None, 2, 30);
        let failed = outcome(Some(1), false, "FAILED\n");
        let at: Timestamp = "2026-11-22T03:10:00Z".parse().unwrap();
        let incidents = [
            Incident::new(
                ReasonCode::StateDeleted,
                at,
                "the loop's state file was deleted; for-loop restored it from its last good copy, and the loop goes on",
            ),
            Incident {
                recorded: true,
                ..Incident::new(
                    ReasonCode::RecordFailed,
                    at,
                    "a stop was let through unjudged: the disk was full",
                )
            },
        ];
        let facts = StopFacts { incidents: &incidents, ..facts(Some(&failed), None) };
        insta::assert_snapshot!(shown(&decide(&state, facts)), @r"
        systemMessage:
        for-loop: the loop's state file was deleted; for-loop restored it from its last good copy, and the loop goes on.
        for-loop: a stop was let through unjudged: the disk was full.
        for-loop 3/30 · verify failed (exit 1, 4.2 s)
        reason:
        fix the login

        ---
        for-loop: this is iteration 3 of 30. The loop goes on until `cargo test` exits 0.

        for-loop noticed: the loop's state file was deleted; for-loop restored it from its last good copy, and the loop goes on.
        for-loop noticed: a stop was let through unjudged: the disk was full.
        The loop's files are for-loop's: changing, deleting or locking them does not end the loop, and only the user can end it early.

        Verify `cargo test` failed: exit 1 after 4.2 s. Its output:

        ```text
        FAILED
        ```

        To finish: find the cause of this failure and fix it, run `cargo test` yourself to see it pass, then end your turn. Do not change the verify command or the files it runs.

        If the task cannot be done as asked, say why and end your turn with <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. Weakening the check is never the way out.
        ledger: note state_deleted
        ledger: block verify_failed
        ");
    }

    /// Issue 32: a pass at a stop after a change of what decides whether for-loop's hooks run
    /// does not count: the stop is blocked with the change named, and the note recorded as the
    /// agent's. A failing check is judged as usual, the change told beside it.
    #[test]
    fn a_pass_after_the_hosts_configuration_changed_does_not_count() {
        let state = with(Some("cargo test"), None, 2, 30);
        let passed = outcome(Some(0), false, "ok\n");
        let at: Timestamp = "2026-11-22T03:10:00Z".parse().unwrap();
        let changed = [Incident::new(
            ReasonCode::HostConfigChanged,
            at,
            "for-loop's hook list /p/hooks.json (changed)",
        )];
        let decision = decide(&state, StopFacts { incidents: &changed, ..facts(Some(&passed), None) });
        assert_eq!(decision.code, ReasonCode::HooksChanged);
        assert!(matches!(&decision.verdict, Verdict::Block { reason } if reason.contains("/p/hooks.json")));
        assert!(decision.system_message.contains("/p/hooks.json"), "{}", decision.system_message);
        assert_eq!(decision.ledger[0].origin, Some(crate::host::origin::Origin::Agent));
        assert_eq!(decision.next.meta.status, Status::Active);
        // Told at a tool call before: told again, and the pass still does not count.
        let told = [Incident { recorded: true, ..changed[0].clone() }];
        let decision = decide(&state, StopFacts { incidents: &told, ..facts(Some(&passed), None) });
        assert_eq!((decision.code, decision.ledger.len()), (ReasonCode::HooksChanged, 1));
        let failed = outcome(Some(1), false, "FAILED\n");
        let decision = decide(&state, StopFacts { incidents: &changed, ..facts(Some(&failed), None) });
        assert_eq!(decision.code, ReasonCode::VerifyFailed);
        // Another incident takes no pass away.
        let other = [Incident::new(ReasonCode::StateDeleted, at, "the state was deleted")];
        let decision = decide(&state, StopFacts { incidents: &other, ..facts(Some(&passed), None) });
        assert_eq!(decision.code, ReasonCode::Verified);
        assert_eq!(decision.ledger[0].origin, None);
    }

    #[test]
    fn snapshot_verify_not_run() {
        let state = with(Some("cargo test"), None, 2, 30);
        let facts = StopFacts {
            verify_not_run: Some("the loop's directory /project no longer exists"),
            ..facts(None, None)
        };
        insta::assert_snapshot!(shown(&decide(&state, facts)), @r"
        systemMessage:
        for-loop 3/30 · verify could not run (the loop's directory /project no longer exists)
        reason:
        fix the login

        ---
        for-loop: this is iteration 3 of 30. The loop goes on until `cargo test` exits 0.

        Verify `cargo test` could not run: the loop's directory /project no longer exists. A check that does not run does not pass.

        To finish: make it possible for `cargo test` to run again in /project (if the directory was moved or deleted, put it back), run it yourself to see it pass, then end your turn.

        If the task cannot be done as asked, say why and end your turn with <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. Weakening the check is never the way out.
        ledger: block verify_not_run
        ");
    }

    #[test]
    fn snapshot_park() {
        let mut state = with(Some("cargo test"), None, 7, 30);
        state.meta.settings.max_same_failures = 3;
        let failed = outcome(Some(1), false, "FAILED\n");
        state.meta.streaks =
            state.meta.streaks.after(Some(&failed), None, None).after(Some(&failed), None, None);
        let files = ["src/login.rs".to_string()];
        let facts = StopFacts { files_changed: Some(&files), ..facts(Some(&failed), None) };
        insta::assert_snapshot!(shown(&decide(&state, facts)), @r"
        systemMessage:
        for-loop: parked at iteration 7/30: the same failure 3 times in a row and `cargo test` still fails (exit 1). The loop is kept.
          receipt: same_failures · 7/30 iterations · 12m 03s elapsed · 4.2 s in verify
          streaks: same failure ×3 · unchanged tree ×0
          changed: 1 file: src/login.rs
          go on: /for-loop:resume (add --more N for more iterations, --more-time 30m for more time)
          ledger: /state/sessions/sess-1/ledger.jsonl
        ledger: allow same_failures
        ");
    }

    #[test]
    fn snapshot_override() {
        let mut state = with(Some("cargo test"), None, 9, 30);
        state.meta.last_blocked = true;
        let failed = outcome(Some(1), false, "FAILED\n");
        let facts = StopFacts { stop_hook_active: Some(false), ..facts(Some(&failed), None) };
        insta::assert_snapshot!(shown(&decide(&state, facts)), @r"
        systemMessage:
        for-loop 10/30 · verify failed (exit 1, 4.2 s)
        reason:
        fix the login

        ---
        for-loop: this is iteration 10 of 30. The loop goes on until `cargo test` exits 0.

        Verify `cargo test` failed: exit 1 after 4.2 s. Its output:

        ```text
        FAILED
        ```

        To finish: find the cause of this failure and fix it, run `cargo test` yourself to see it pass, then end your turn. Do not change the verify command or the files it runs.

        If the task cannot be done as asked, say why and end your turn with <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. Weakening the check is never the way out.
        ledger: note harness_override
        ledger: block verify_failed
        ");
    }

    #[test]
    fn snapshot_oracle_changed() {
        let state = with(Some("sh check.sh"), None, 3, 30);
        let passed = outcome(Some(0), false, "");
        let changes = [
            OracleChange { path: "check.sh".into(), kind: crate::checks::oracle::ChangeKind::Modified },
            OracleChange { path: "tests/login.rs".into(), kind: crate::checks::oracle::ChangeKind::Deleted },
        ];
        let facts = StopFacts { oracle_changes: &changes, ..facts(Some(&passed), None) };
        insta::assert_snapshot!(shown(&decide(&state, facts)), @r"
        systemMessage:
        for-loop 4/30 · the verify files were changed; passes do not count
        reason:
        fix the login

        ---
        for-loop: this is iteration 4 of 30. The loop goes on until `sh check.sh` exits 0.

        The verify command's own files changed since the loop started, so a passing verify does not count:
          - check.sh (modified)
          - tests/login.rs (deleted)
        Restore them exactly as they were (`git checkout -- <path>`, or copy the originals saved in /state/sessions/sess-1/oracle; delete the added ones). Fix the code under test instead of the check.

        Verify passed, but that does not count while the check itself is changed.

        If the task cannot be done as asked, say why and end your turn with <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. Weakening the check is never the way out.
        ledger: block oracle_changed
        ");
    }

    #[test]
    fn snapshot_tests_dropped() {
        let state = counting(12);
        let passed = outcome(Some(0), false, &pytest(10, 0, 1));
        insta::assert_snapshot!(shown(&decide(&state, facts(Some(&passed), None))), @r"
        systemMessage:
        for-loop 4/30 · verify passed, but with fewer tests run or more skipped; passes do not count
        reason:
        fix the login

        ---
        for-loop: this is iteration 4 of 30. The loop goes on until `pytest` exits 0.

        Verify passed, but 2 tests fewer ran than before, so the pass does not count:
          - pytest: 10 ran, 12 before
        Put the tests back: restore every test you deleted, renamed or emptied, and remove the skip, xfail, ignore and only markers you added. Then run `pytest` and see every test run and pass.

        If the task cannot be done as asked, say why and end your turn with <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. Weakening the check is never the way out.
        ledger: block tests_dropped
        ");
    }

    #[test]
    fn snapshot_first_count() {
        let mut state = with(Some("pytest"), None, 1, 30);
        state.meta.tests = TestRatchet::new(false);
        let failed = outcome(Some(1), false, &pytest(10, 2, 1));
        insta::assert_snapshot!(shown(&decide(&state, facts(Some(&failed), None))), @r"
        systemMessage:
        for-loop 2/30 · verify failed (exit 1, 4.2 s)
          Tests counted (pytest): 12 ran (10 passed, 2 failed), 1 skipped. From now on a pass that runs fewer tests, or skips more, does not count.
        reason:
        fix the login

        ---
        for-loop: this is iteration 2 of 30. The loop goes on until `pytest` exits 0.

        Tests counted (pytest): 12 ran (10 passed, 2 failed), 1 skipped. From now on a pass that runs fewer tests, or skips more, does not count.

        Verify `pytest` failed: exit 1 after 4.2 s. Its output:

        ```text
        ============================= test session starts ==============================
        ======== 10 passed, 2 failed, 1 skipped in 0.10s ========
        ```

        To finish: find the cause of this failure and fix it, run `pytest` yourself to see it pass, then end your turn. Do not change the verify command or the files it runs.

        If the task cannot be done as asked, say why and end your turn with <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. Weakening the check is never the way out.
        ledger: block verify_failed
        ");
    }

    #[test]
    fn the_first_run_without_a_summary_is_told_to_the_user_only() {
        let mut state = with(Some("sh check.sh"), None, 1, 30);
        state.meta.tests = TestRatchet::new(false);
        let failed = outcome(Some(1), false, "FAIL: calc is wrong\n");
        let decision = decide(&state, facts(Some(&failed), None));
        assert!(decision.system_message.contains("test-count ratchet is off"), "{}", decision.system_message);
        assert!(!reason(&decision).contains("ratchet"), "{}", reason(&decision));
        assert_eq!(decision.next.meta.tests.status, RatchetStatus::Waiting);
        // Said once.
        let again = decide(&decision.next, facts(Some(&failed), None));
        assert!(!again.system_message.contains("ratchet"), "{}", again.system_message);
    }

    #[test]
    fn a_pass_with_all_its_tests_is_verified_and_the_receipt_counts_them() {
        let state = counting(12);
        let passed = outcome(Some(0), false, &pytest(13, 0, 0));
        let decision = decide(&state, facts(Some(&passed), None));
        assert_eq!(decision.code, ReasonCode::Verified);
        assert!(
            decision.system_message.contains("tests: 13 ran (13 passed, 0 failed), 0 skipped"),
            "{}",
            decision.system_message
        );
        assert_eq!(
            decision.ledger[0].tests,
            Some(crate::checks::test_count::Counts { passed: 13, failed: 0, skipped: 0 })
        );
    }

    #[test]
    fn a_held_pass_is_recorded_with_what_went_missing() {
        // `pytest && ruff check`: all 12 tests passed before, and the linter failed.
        let mut state = with(Some("pytest && ruff check"), None, 3, 30);
        state.meta.tests = TestRatchet::new(false).judge(&tally(&pytest(12, 0, 0)), false).next;
        let passed = outcome(Some(0), false, &pytest(12, 0, 2));
        let decision = decide(&state, facts(Some(&passed), None));
        assert_eq!(decision.code, ReasonCode::TestsDropped);
        assert_eq!(decision.next.meta.status, Status::Active);
        assert_eq!(
            decision.ledger[0].detail.as_deref(),
            Some("2 more tests skipped than before: pytest: 2 skipped, 0 before")
        );
    }

    #[test]
    fn a_held_pass_still_ends_at_the_cap() {
        let mut state = counting(12);
        state.meta.iteration = 30;
        let passed = outcome(Some(0), false, &pytest(3, 0, 0));
        let decision = decide(&state, StopFacts { files_changed: Some(&[]), ..facts(Some(&passed), None) });
        assert_eq!(decision.code, ReasonCode::CapReached);
        assert!(decision.system_message.contains("tests: 3 ran"), "{}", decision.system_message);
    }

    #[test]
    fn snapshot_abort() {
        let state = with(Some("cargo test"), None, 5, 30);
        let failed = outcome(Some(1), false, "FAILED\n");
        let message = "The spec asks for both.\n<loop-abort>The tests require add(2, 3) == 6, which contradicts the task.</loop-abort>";
        let facts = StopFacts { files_changed: Some(&[]), ..facts(Some(&failed), Some(message)) };
        insta::assert_snapshot!(shown(&decide(&state, facts)), @r"
        systemMessage:
        for-loop: parked at iteration 5/30: the agent says the task cannot be done as asked and `cargo test` still fails (exit 1). The loop is kept; read its reason below.
          receipt: aborted · 5/30 iterations · 12m 03s elapsed · 4.2 s in verify
          the agent's reason: The tests require add(2, 3) == 6, which contradicts the task.
          changed: no files
          go on: /for-loop:resume (add --more N for more iterations, --more-time 30m for more time)
          ledger: /state/sessions/sess-1/ledger.jsonl
        ledger: allow aborted
        ");
    }

    #[test]
    fn an_abort_parks_the_loop_even_when_verify_passes() {
        let state = with(Some("cargo test"), None, 2, 30);
        let passed = outcome(Some(0), false, "ok\n");
        let decision =
            decide(&state, facts(Some(&passed), Some("<loop-abort>I only stubbed it out</loop-abort>")));
        assert_eq!(decision.code, ReasonCode::Aborted);
        assert_eq!(decision.verdict, Verdict::Allow);
        assert_eq!(decision.next.meta.status, Status::Parked);
        assert_eq!(decision.receipt.and_then(|r| r.abort_reason).as_deref(), Some("I only stubbed it out"));
        assert_eq!(decision.ledger[0].detail.as_deref(), Some("the agent aborted: I only stubbed it out"));
    }

    /// A stop judged only because the forged-stop detector gave way may have come from the
    /// agent's own tool call, with the fix put in for the moment: its pass never ends the loop.
    /// The agent may stop, the loop stays on, no iteration is used, and the user is told.
    #[test]
    fn a_stop_judged_because_the_detector_gave_way_never_verifies() {
        let state = with(Some("sh check.sh"), None, 2, 30);
        let passed = outcome(Some(0), false, "ok\n");
        let decision =
            decide(&state, StopFacts { detector_gave_way: true, ..facts(Some(&passed), Some("done")) });
        assert_eq!(decision.code, ReasonCode::PassNotCounted);
        assert_eq!(decision.verdict, Verdict::Allow);
        assert_eq!(decision.next.meta.status, Status::Active);
        assert_eq!(decision.next.meta.outcome, None);
        assert_eq!(decision.next.meta.iteration, 2, "no iteration used");
        assert!(!decision.next.meta.last_blocked);
        assert_eq!(decision.receipt, None);
        assert!(
            decision.system_message.starts_with(
                "for-loop 2/30 · the check passed, but this pass does not count: it arrived while a tool call"
            ),
            "{}",
            decision.system_message
        );
        assert!(decision.system_message.contains("The loop is still on"), "{}", decision.system_message);
        assert!(decision.system_message.contains("/cancel-loop"), "{}", decision.system_message);
        let last = decision.ledger.last().unwrap();
        assert_eq!((last.reason, last.decision), (ReasonCode::PassNotCounted, LedgerDecision::Allow));
        // A failing check blocks as usual: the detector giving way never frees the agent.
        let failed = outcome(Some(1), false, "FAILED\n");
        let blocked = decide(&state, StopFacts { detector_gave_way: true, ..facts(Some(&failed), None) });
        assert_eq!(blocked.code, ReasonCode::VerifyFailed);
        assert_eq!(blocked.next.meta.iteration, 3);
    }

    /// What such a stop carries as the agent's message is not a final reply: it neither keeps a
    /// promise, aborts, nor, in metric mode, meets the target.
    #[test]
    fn a_doubtful_stop_neither_keeps_a_promise_nor_aborts() {
        let doubtful = |f: StopFacts<'static>| StopFacts { detector_gave_way: true, ..f };
        let promise_only = with(None, Some("DONE"), 2, 30);
        let kept = decide(&promise_only, doubtful(facts(None, Some("<promise>DONE</promise>"))));
        assert_eq!(kept.code, ReasonCode::PassNotCounted);
        assert_eq!(kept.next.meta.status, Status::Active);
        let both = with(Some("true"), Some("DONE"), 2, 30);
        let passed = outcome(Some(0), false, "");
        let decision =
            decide(&both, StopFacts { detector_gave_way: true, ..facts(Some(&passed), Some("no tag")) });
        assert_eq!(decision.code, ReasonCode::PassNotCounted);
        let abort = doubtful(facts(None, Some("<loop-abort>cannot</loop-abort>")));
        let aborted = decide(&with(Some("false"), None, 2, 30), StopFacts { verify: Some(&FAILED), ..abort });
        assert_eq!(aborted.code, ReasonCode::VerifyFailed);
        assert_eq!(aborted.next.meta.status, Status::Active);
    }

    static FAILED: std::sync::LazyLock<VerifyOutcome> =
        std::sync::LazyLock::new(|| outcome(Some(1), false, ""));

    /// A stop with no new final reply of the agent since the last judged stop (a background job
    /// that sends one while the model works, or sends the same turn's again) is not the end of a
    /// turn: a pass there does not count. A new reply is remembered for the next stop.
    #[test]
    fn a_stop_with_no_new_final_reply_is_not_judged_as_a_pass() {
        let mut state = with(Some("sh check.sh"), None, 2, 30);
        state.meta.last_reply = Some("d1".into());
        let passed = outcome(Some(0), false, "");
        let at = |reply| decide(&state, StopFacts { reply, ..facts(Some(&passed), Some("done")) });
        let same = at(FinalReply::Seen("d1"));
        assert_eq!(same.code, ReasonCode::PassNotCounted);
        assert!(same.system_message.contains("the agent wrote no new reply since the last judged stop"));
        let none = at(FinalReply::Missing);
        assert_eq!(none.code, ReasonCode::PassNotCounted);
        assert!(none.system_message.contains("shows no final reply"), "{}", none.system_message);
        let new = at(FinalReply::Seen("d2"));
        assert_eq!(new.code, ReasonCode::Verified);
        assert_eq!(new.next.meta.last_reply.as_deref(), Some("d2"));
        // A host whose transcript the hook cannot read cannot tell turns apart, and is believed.
        assert_eq!(at(FinalReply::Unknown).code, ReasonCode::Verified);
        // A failing stop with the same reply is judged as usual, and remembers it.
        let failed = outcome(Some(1), false, "");
        let blocked =
            decide(&state, StopFacts { reply: FinalReply::Seen("d1"), ..facts(Some(&failed), None) });
        assert_eq!(blocked.code, ReasonCode::VerifyFailed);
        assert_eq!(blocked.next.meta.last_reply.as_deref(), Some("d1"));
        assert!(!reply_is_new(&blocked.next, FinalReply::Seen("d1")));
    }

    #[test]
    fn only_the_final_message_can_abort() {
        let mut state = with(Some("false"), None, 2, 30);
        state.task = "fix it; if impossible, reply <loop-abort>why</loop-abort>".into();
        let failed = outcome(Some(1), false, "");
        let decision = decide(&state, facts(Some(&failed), Some("Working on it.")));
        assert_eq!(decision.code, ReasonCode::VerifyFailed);
        let decision = decide(&state, facts(Some(&failed), None));
        assert_eq!(decision.code, ReasonCode::VerifyFailed);
        assert!(reason(&decision).contains("<loop-abort>REASON</loop-abort>"), "{}", reason(&decision));
    }

    #[test]
    fn hosts_that_hide_the_final_message_are_not_offered_the_abort_tag() {
        let mut state = with(Some("false"), None, 2, 30);
        state.meta.host = crate::host::Host::Cursor;
        let failed = outcome(Some(1), false, "");
        let reason_text = reason(&decide(&state, facts(Some(&failed), None))).to_string();
        assert!(!reason_text.contains("<loop-abort>"), "{reason_text}");
        assert!(reason_text.contains("Weakening the check is never the way out."), "{reason_text}");
    }

    #[test]
    fn skip_markers_are_named_in_the_reinjection_and_the_receipt() {
        let markers = [
            SkipMarker { path: "tests/test_calc.py".into(), marker: "@pytest.mark.skip".into(), added: 1 },
            SkipMarker { path: "src/lib.rs".into(), marker: "#[ignore]".into(), added: 2 },
        ];
        let state = with(Some("pytest"), Some("DONE"), 2, 30);
        let passed = outcome(Some(0), false, "");
        let held = decide(&state, StopFacts { skip_markers: &markers, ..facts(Some(&passed), Some("done")) });
        let text = reason(&held);
        assert!(text.contains("Skip markers added since the loop started"), "{text}");
        assert!(
            text.contains("  - tests/test_calc.py: @pytest.mark.skip\n  - src/lib.rs: #[ignore] ×2\n"),
            "{text}"
        );
        assert_eq!(
            held.ledger[0].skip_markers,
            ["tests/test_calc.py: @pytest.mark.skip", "src/lib.rs: #[ignore] ×2"]
        );
        let ended = decide(
            &state,
            StopFacts { skip_markers: &markers, ..facts(Some(&passed), Some("<promise>DONE</promise>")) },
        );
        assert_eq!(ended.code, ReasonCode::Verified, "markers are reported, not a verdict");
        assert!(
            ended.system_message.contains(
                "skip markers added: tests/test_calc.py: @pytest.mark.skip, src/lib.rs: #[ignore] ×2"
            ),
            "{}",
            ended.system_message
        );
    }

    #[test]
    fn gate_judges_only_the_owners_active_loop() {
        let mut state = sample();
        assert_eq!(gate(&state, "sess-1"), Gate::Judge);
        assert_eq!(gate(&state, "other"), Gate::Foreign);
        state.meta.session_id.clear();
        assert_eq!(gate(&state, ""), Gate::Foreign);
        state.meta.status = Status::Ended;
        assert_eq!(gate(&state, "sess-1"), Gate::Ended);
    }

    #[test]
    fn failing_verify_blocks_with_the_task_and_the_failure() {
        let state = with(Some("cargo test"), None, 2, 30);
        let failed = outcome(Some(1), false, "test login ... FAILED\n");
        let decision = decide(&state, facts(Some(&failed), Some("all done!")));
        assert_eq!(decision.code, ReasonCode::VerifyFailed);
        assert_eq!(decision.next.meta.iteration, 3);
        assert_eq!(decision.next.meta.status, Status::Active);
        assert_eq!(
            decision.system_message,
            "for-loop 3/30 · verify failed (exit 1, 4.2 s)\n  1 failing: login"
        );
        let reason = reason(&decision);
        assert!(reason.starts_with("fix the login\n"), "{reason}");
        assert!(reason.contains("iteration 3 of 30"), "{reason}");
        assert!(reason.contains("test login ... FAILED"), "{reason}");
        assert!(reason.contains("exit 1"), "{reason}");
        assert_eq!(decision.next.meta.verify_total_ms, 4_200);
    }

    #[test]
    fn passing_verify_ends_the_loop_whatever_the_model_said() {
        let state = with(Some("cargo test"), None, 4, 30);
        let passed = outcome(Some(0), false, "ok\n");
        let decision = decide(&state, facts(Some(&passed), None));
        assert_eq!(decision.verdict, Verdict::Allow);
        assert_eq!(decision.code, ReasonCode::Verified);
        assert_eq!(decision.next.meta.status, Status::Ended);
        assert_eq!(decision.next.meta.outcome, Some(ReasonCode::Verified));
        assert!(
            decision.system_message.contains("verified at iteration 4/30"),
            "{}",
            decision.system_message
        );
        assert!(decision.system_message.contains("12m 03s"), "{}", decision.system_message);
    }

    #[test]
    fn a_claimed_promise_does_not_end_a_loop_whose_verify_fails() {
        let state = with(Some("cargo test"), Some("DONE"), 1, 30);
        let failed = outcome(Some(1), false, "");
        let decision = decide(&state, facts(Some(&failed), Some("<promise>DONE</promise>")));
        assert_eq!(decision.code, ReasonCode::VerifyFailed);
        assert_eq!(decision.ledger[0].promise_kept, Some(true));
    }

    #[test]
    fn with_both_criteria_both_must_hold() {
        let state = with(Some("cargo test"), Some("DONE"), 1, 30);
        let passed = outcome(Some(0), false, "");
        let decision = decide(&state, facts(Some(&passed), Some("finished")));
        assert_eq!(decision.code, ReasonCode::PromiseMissing);
        assert!(reason(&decision).contains("<promise>DONE</promise>"));
        assert_eq!(decision.system_message, "for-loop 2/30 · verify passed, promise not given");
        let decision = decide(&state, facts(Some(&passed), Some("<promise>DONE</promise>")));
        assert_eq!(decision.code, ReasonCode::Verified);
    }

    #[test]
    fn promise_only_loops_end_on_the_tag_not_on_the_bare_word() {
        let state = with(None, Some("DONE"), 1, 30);
        let decision = decide(&state, facts(None, Some("DONE")));
        assert_eq!(decision.code, ReasonCode::PromiseMissing);
        assert_eq!(decision.system_message, "for-loop 2/30 · promise not given");
        let decision = decide(&state, facts(None, None));
        assert_eq!(decision.code, ReasonCode::PromiseMissing);
        let decision = decide(&state, facts(None, Some("<promise> DONE </promise>")));
        assert_eq!(decision.code, ReasonCode::Promise);
        assert_eq!(decision.verdict, Verdict::Allow);
    }

    #[test]
    fn without_criteria_the_loop_runs_to_its_cap() {
        let state = with(None, None, 1, 2);
        let decision = decide(&state, facts(None, Some("<promise>DONE</promise>")));
        assert_eq!(decision.code, ReasonCode::NoCriterion);
        let decision = decide(&decision.next, facts(None, None));
        assert_eq!(decision.code, ReasonCode::CapReached);
        assert_eq!(decision.verdict, Verdict::Allow);
    }

    #[test]
    fn max_iterations_means_that_many_turns() {
        let failed = outcome(Some(1), false, "");
        let mut state = with(Some("false"), None, 1, 3);
        let mut blocks = 0;
        loop {
            let decision = decide(&state, facts(Some(&failed), None));
            match decision.verdict {
                Verdict::Block { .. } => blocks += 1,
                Verdict::Allow => {
                    assert_eq!(decision.code, ReasonCode::CapReached);
                    assert!(decision.system_message.contains("3/3"), "{}", decision.system_message);
                    break;
                }
            }
            state = decision.next;
        }
        assert_eq!(blocks, 2, "3 turns = the first + 2 re-injections");
    }

    #[test]
    fn verify_passing_on_the_last_turn_is_verified_not_capped() {
        let state = with(Some("true"), None, 3, 3);
        let passed = outcome(Some(0), false, "");
        assert_eq!(decide(&state, facts(Some(&passed), None)).code, ReasonCode::Verified);
    }

    #[test]
    fn max_iterations_of_one_never_blocks() {
        let state = with(Some("false"), None, 1, 1);
        let failed = outcome(Some(1), false, "");
        assert_eq!(decide(&state, facts(Some(&failed), None)).verdict, Verdict::Allow);
    }

    #[test]
    fn a_timeout_is_its_own_reason() {
        let state = with(Some("sleep 999"), None, 1, 30);
        let timed_out = outcome(None, true, "partial");
        let decision = decide(&state, facts(Some(&timed_out), None));
        assert_eq!(decision.code, ReasonCode::VerifyTimedOut);
        assert!(reason(&decision).contains("did not finish within 300 s"), "{}", reason(&decision));
        assert_eq!(decision.system_message, "for-loop 2/30 · verify timed out after 300 s");
    }

    #[test]
    fn the_reason_stays_under_10000_characters_and_keeps_the_task() {
        let mut state = with(Some("cargo test"), None, 1, 30);
        state.task = "ü".repeat(5_000);
        let mut huge = Captured::default();
        for i in 0..100_000 {
            huge.push(format!("line {i} `` ``` ````\n").as_bytes());
        }
        let failed = VerifyOutcome {
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            untrusted: None,
            duration: Duration::from_secs(1),
            output: huge,
        };
        let decision = decide(&state, facts(Some(&failed), None));
        let reason = reason(&decision);
        assert!(reason.chars().count() < 10_000, "{}", reason.chars().count());
        assert!(reason.starts_with(&state.task));
        assert!(reason.contains("line 99999"));
    }

    #[test]
    fn a_task_too_long_to_reinject_is_referenced_by_its_file() {
        let mut state = with(Some("cargo test"), None, 1, 30);
        state.task = "x".repeat(20_000);
        let failed = outcome(Some(1), false, "boom");
        let decision = decide(&state, facts(Some(&failed), None));
        let reason = reason(&decision);
        assert!(reason.chars().count() < 10_000);
        assert!(reason.contains("/state/sessions/sess-1/state.md"), "{reason}");
        assert!(reason.contains("boom"));
    }

    #[test]
    fn a_pass_does_not_count_while_the_oracle_is_changed() {
        let state = with(Some("sh check.sh"), None, 1, 30);
        let passed = outcome(Some(0), false, "");
        let changes =
            [OracleChange { path: "check.sh".into(), kind: crate::checks::oracle::ChangeKind::Modified }];
        let decision = decide(&state, StopFacts { oracle_changes: &changes, ..facts(Some(&passed), None) });
        assert_eq!(decision.code, ReasonCode::OracleChanged);
        let reason = reason(&decision);
        assert!(reason.contains("check.sh (modified)"), "{reason}");
        assert!(reason.contains("Verify passed, but that does not count"), "{reason}");
        assert_eq!(
            decision.system_message,
            "for-loop 2/30 · the verify files were changed; passes do not count"
        );
        // Restored: the next pass counts.
        let decision = decide(&decision.next, facts(Some(&passed), None));
        assert_eq!(decision.code, ReasonCode::Verified);
    }

    #[test]
    fn a_changed_oracle_with_a_failing_verify_shows_both() {
        let state = with(Some("sh check.sh"), None, 1, 30);
        let failed = outcome(Some(1), false, "boom");
        let changes =
            [OracleChange { path: "tests/a.rs".into(), kind: crate::checks::oracle::ChangeKind::Deleted }];
        let decision = decide(&state, StopFacts { oracle_changes: &changes, ..facts(Some(&failed), None) });
        assert_eq!(decision.code, ReasonCode::OracleChanged);
        assert!(reason(&decision).contains("boom"));
        assert!(reason(&decision).contains("tests/a.rs (deleted)"));
    }

    #[test]
    fn identical_failures_park_the_loop_with_a_receipt() {
        let mut state = with(Some("false"), None, 1, 30);
        state.meta.settings.max_same_failures = 3;
        let failed = outcome(Some(1), false, "FAILED at 12:00:01");
        let again = outcome(Some(1), false, "FAILED at 12:07:44");
        let d1 = decide(&state, facts(Some(&failed), None));
        let d2 = decide(&d1.next, facts(Some(&again), None));
        assert!(reason(&d2).contains("Note: the same failure as last time (2 in a row)"), "{}", reason(&d2));
        let d3 = decide(&d2.next, facts(Some(&failed), None));
        assert_eq!(d3.code, ReasonCode::SameFailures);
        assert_eq!(d3.verdict, Verdict::Allow);
        assert_eq!(d3.next.meta.status, Status::Parked);
        assert!(d3.system_message.contains("parked at iteration 3/30: the same failure 3 times in a row"));
        assert!(d3.system_message.contains("/for-loop:resume"), "{}", d3.system_message);
        assert_eq!(d3.receipt.as_ref().map(|r| r.outcome), Some(ReasonCode::SameFailures));
        assert_eq!(d3.next.meta.receipt, d3.receipt);
    }

    #[test]
    fn an_unchanged_working_tree_parks_the_loop() {
        let mut state = with(Some("false"), None, 1, 30);
        state.meta.settings.max_same_failures = 2;
        let mut decision =
            decide(&state, StopFacts { tree: Some("t"), ..facts(Some(&outcome(Some(1), false, "a")), None) });
        for output in ["b", "c"] {
            decision = decide(
                &decision.next,
                StopFacts { tree: Some("t"), ..facts(Some(&outcome(Some(1), false, output)), None) },
            );
        }
        assert_eq!(decision.code, ReasonCode::NoProgress);
        assert_eq!(decision.next.meta.status, Status::Parked);
    }

    #[test]
    fn a_spent_token_budget_parks_the_loop_and_each_stop_records_its_tokens() {
        use crate::host::usage::TokenCounts;
        let mut state = with(Some("false"), None, 1, 30);
        state.meta.settings.max_tokens = Some(1_000);
        let failed = outcome(Some(1), false, "");
        let used = |input: u64| {
            let mut used = Usage::default();
            used.add("m", TokenCounts { input, cache_read: 50_000, ..TokenCounts::default() });
            UsageCursor { used, ..UsageCursor::default() }
        };
        let (first, second) = (used(600), used(1_001));
        let d1 = decide(&state, StopFacts { usage: Some(&first), ..facts(Some(&failed), None) });
        assert_eq!(d1.code, ReasonCode::VerifyFailed, "cache reads do not count");
        assert_eq!(d1.ledger[0].tokens.as_ref().map(|t| t.total().input), Some(600));
        assert_eq!(d1.next.meta.usage.as_ref(), Some(&first));
        // No reading at this stop: the last one stands, and nothing is recorded as used.
        let unread = decide(&d1.next, facts(Some(&failed), None));
        assert_eq!((unread.code, unread.ledger[0].tokens.clone()), (ReasonCode::VerifyFailed, None));
        assert_eq!(unread.next.meta.usage.as_ref(), Some(&first));

        let d2 = decide(&d1.next, StopFacts { usage: Some(&second), ..facts(Some(&failed), None) });
        assert_eq!(d2.code, ReasonCode::TokenBudget);
        assert_eq!(d2.next.meta.status, Status::Parked);
        assert_eq!(d2.ledger[0].tokens.as_ref().map(|t| t.total().input), Some(401));
        assert_eq!(d2.receipt.as_ref().and_then(|r| r.tokens), Some(1_001));
        assert!(
            d2.system_message.contains("the token budget of 1.0k is spent (1.0k used)"),
            "{}",
            d2.system_message
        );
        assert!(d2.system_message.contains("--more-tokens"), "{}", d2.system_message);
        // A pass at the same stop is a pass.
        let passed = outcome(Some(0), false, "");
        let done = decide(&d1.next, StopFacts { usage: Some(&second), ..facts(Some(&passed), None) });
        assert_eq!(done.code, ReasonCode::Verified);
    }

    #[test]
    fn a_spent_time_budget_parks_the_loop() {
        let mut state = with(Some("false"), None, 1, 30);
        state.meta.settings.max_time_secs = Some(600);
        let failed = outcome(Some(1), false, "");
        // The facts' clock is 12m 03s after the start.
        let decision = decide(&state, facts(Some(&failed), None));
        assert_eq!(decision.code, ReasonCode::TimeBudget);
        assert!(
            decision.system_message.contains("the time budget of 10m 00s is spent"),
            "{}",
            decision.system_message
        );
        state.meta.settings.max_time_secs = Some(3_600);
        assert_eq!(decide(&state, facts(Some(&failed), None)).code, ReasonCode::VerifyFailed);
    }

    #[test]
    fn a_stop_that_ignored_our_block_is_a_harness_override() {
        let state = with(Some("false"), None, 1, 30);
        let failed = outcome(Some(1), false, "");
        let blocked =
            decide(&state, StopFacts { stop_hook_active: Some(false), ..facts(Some(&failed), None) });
        assert!(!overrode(&blocked), "the first stop follows no block");
        let honoured =
            decide(&blocked.next, StopFacts { stop_hook_active: Some(true), ..facts(Some(&failed), None) });
        assert!(!overrode(&honoured));
        let overridden =
            decide(&honoured.next, StopFacts { stop_hook_active: Some(false), ..facts(Some(&failed), None) });
        assert!(overrode(&overridden));
        assert_eq!(overridden.next.meta.harness_overrides, 1);
        let unknown =
            decide(&honoured.next, StopFacts { stop_hook_active: None, ..facts(Some(&failed), None) });
        assert!(!overrode(&unknown), "hosts without the flag never report an override");
    }

    #[test]
    fn toolless_turns_are_named_in_the_reinjection() {
        let state = with(Some("false"), None, 1, 30);
        let failed = outcome(Some(1), false, "x");
        let mut decision = decide(&state, StopFacts { tool_uses: Some(0), ..facts(Some(&failed), None) });
        for _ in 0..2 {
            decision = decide(&decision.next, StopFacts { tool_uses: Some(0), ..facts(Some(&failed), None) });
        }
        assert!(reason(&decision).contains("Your last 3 turns used no tools"), "{}", reason(&decision));
    }
}
