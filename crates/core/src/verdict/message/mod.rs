//! The words for-loop says: the prompt re-injected into the agent at a verify loop's stop (in
//! the shape of [`Reinjection`]), the one-line status the user sees at each stop, and the
//! summary when a loop ends.

pub(crate) mod compacted;
pub(crate) mod failed_turn;
pub(crate) mod failures;
pub(crate) mod metric;
pub(crate) mod plan;
pub(crate) mod reinjection;
pub(crate) mod review;
pub(crate) mod scope;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;

use crate::checks::VerifyOutcome;
use crate::checks::{ChangeKind, OracleChange};
use crate::host::usage::human_tokens;
use crate::state::Incident;
use crate::state::LoopState;
use crate::state::REINJECTION_MARK;
use crate::state::ReasonCode;
use crate::support::text::duration::human;
use crate::verdict::facts::{LoopFiles, StopFacts};
use crate::verdict::message::reinjection::{Finding, Reinjection};

/// The prompt that keeps the agent working. `state` is the loop after this stop; `before` the
/// failing names of the judged stop before it; `sections` are paragraphs about the tests behind
/// the check, shown before verify's output.
pub(crate) fn reinjection(
    state: &LoopState,
    before: Option<&crate::state::FailingNames>,
    code: ReasonCode,
    facts: &StopFacts<'_>,
    sections: &[String],
) -> String {
    let finding = finding(state, code, facts);
    let show_output =
        matches!(code, ReasonCode::VerifyFailed | ReasonCode::VerifyTimedOut | ReasonCode::OracleChanged);
    let mut notices = loop_notices(facts);
    notices.extend(sections.iter().cloned());
    Reinjection {
        task: &state.task,
        files: facts.files,
        headline: iteration_line(state),
        notices,
        failed: finding.said,
        output: facts.verify.filter(|o| show_output && !o.passed()),
        change: facts.verify.and_then(|o| failures::change(before, &o.output.failures())),
        budget: reinjection::budget_chars(state.meta.settings.feedback_tokens),
        rules: closing_advice(state, finding.advice),
    }
    .to_string()
}

/// The re-injection's headline: the iteration and the criterion.
fn iteration_line(state: &LoopState) -> String {
    let meta = &state.meta;
    format!(
        "\n\n---\n{REINJECTION_MARK} {} of {}. The loop goes on until {}.\n{}",
        meta.iteration,
        meta.settings.max_iterations,
        criterion(state),
        plan::story_line(state).unwrap_or_default()
    )
}

/// What went wrong around the loop, then any change to the check: the re-injection's first
/// notices.
fn loop_notices(facts: &StopFacts<'_>) -> Vec<String> {
    let mut notices = Vec::new();
    // What went wrong around the loop comes first: the agent may have caused it.
    if !facts.incidents.is_empty() {
        let mut told = String::from("\n");
        for incident in facts.incidents {
            told.push_str(&format!("for-loop noticed: {}.\n", incident.what));
        }
        if facts.incidents.iter().any(|i| !i.code.let_through_unjudged()) {
            told.push_str(
                "The loop's files are for-loop's: changing, deleting or locking them does not end the loop, \
                 and only the user can end it early.\n",
            );
        }
        notices.push(told);
    }
    // The changed check comes next: it is why this stop is blocked whatever verify said.
    if !facts.oracle_changes.is_empty() {
        notices.push(oracle_notice(facts.oracle_changes, facts.files));
    }
    notices
}

/// What this stop's check said, for the status, and what to do about it (each empty when a
/// notice says it all).
fn finding(state: &LoopState, code: ReasonCode, facts: &StopFacts<'_>) -> Finding {
    let settings = &state.meta.settings;
    let verify = state.current_check().unwrap_or_default();
    match (code, facts.verify) {
        (ReasonCode::VerifyTimedOut, Some(_)) => timed_out(verify, settings.verify_timeout_secs),
        (ReasonCode::VerifyFailed | ReasonCode::OracleChanged, Some(outcome)) if !outcome.passed() => {
            failed(verify, outcome)
        }
        (ReasonCode::VerifyNotRun, _) => {
            not_run(verify, facts.verify_not_run.unwrap_or("it could not be started"), &state.meta.cwd)
        }
        (ReasonCode::PromiseMissing, _) => Finding::said(promise_missing(state)),
        (ReasonCode::ReviewBlocked, _) => crate::verdict::message::review::veto(state, facts.review),
        (ReasonCode::OutOfScope, _) => crate::verdict::message::scope::outside(state, facts.scope),
        // The story's paragraph is one of the sections.
        (ReasonCode::StoryVerified | ReasonCode::StoryBroken, _) => {
            Finding::new("", crate::verdict::message::plan::advice())
        }
        // The shortfall is one of the sections.
        (ReasonCode::TestsDropped, _) => Finding::default(),
        (ReasonCode::HooksChanged, _) => Finding::said(
            "\nThe check passed, but that does not count at this stop: something that decides whether \
             for-loop's hooks run at all changed (named above). Put it back as it was; the next stop \
             is judged as usual.\n",
        ),
        (ReasonCode::OracleChanged, _) => {
            let said = if settings.verify.is_some() {
                "\nVerify passed, but that does not count while the check itself is changed.\n"
            } else {
                ""
            };
            Finding::said(said)
        }
        _ => Finding::said(format!(
            "\nThis loop has no verify command and no promise, so it runs all {} iterations. \
             Review your work against the task and keep improving it.\n",
            settings.max_iterations
        )),
    }
}

fn timed_out(verify: &str, timeout_secs: u64) -> Finding {
    Finding::new(
        format!(
            "\nVerify `{verify}` did not finish within {timeout_secs} s and was stopped. \
             The output it had printed:\n"
        ),
        format!(
            "To finish: find why `{verify}` hangs or is slow (a test waiting for input, a server that \
             never exits, an endless loop) and fix it, then run it yourself to see it pass."
        ),
    )
}

fn failed(verify: &str, outcome: &VerifyOutcome) -> Finding {
    Finding::new(
        format!(
            "\nVerify `{verify}` failed: {} after {}. Its output:\n",
            outcome.describe(),
            human(outcome.duration)
        ),
        format!(
            "To finish: find the cause of this failure and fix it, run `{verify}` yourself to see it \
             pass, then end your turn. Do not change the verify command or the files it runs."
        ),
    )
}

fn not_run(verify: &str, why: &str, cwd: &Path) -> Finding {
    Finding::new(
        format!("\nVerify `{verify}` could not run: {why}. A check that does not run does not pass.\n"),
        format!(
            "To finish: make it possible for `{verify}` to run again in {} (if the directory was moved or \
             deleted, put it back), run it yourself to see it pass, then end your turn.",
            cwd.display()
        ),
    )
}

fn promise_missing(state: &LoopState) -> String {
    let settings = &state.meta.settings;
    let promise = settings.completion_promise.as_deref().unwrap_or_default();
    let mut said = String::from(if settings.verify.is_some() { "\nVerify passed. " } else { "\n" });
    said.push_str(&format!(
        "Your last message did not contain <promise>{promise}</promise>. When the task is \
         truly complete, end your turn with that exact line; write it only if it is true.\n"
    ));
    said
}

/// The re-injection's last paragraphs: the streaks' advice, this stop's advice, and the way out.
fn closing_advice(state: &LoopState, advice: String) -> String {
    let meta = &state.meta;
    let streak_advice = meta.streaks.advice(&meta.settings.escalation);
    let mut advice = if streak_advice.is_empty() { advice } else { format!("{streak_advice}\n{advice}") };
    if !advice.is_empty() {
        advice.insert(0, '\n');
    }
    advice.push_str(if advice.ends_with('\n') || advice.is_empty() { "\n" } else { "\n\n" });
    advice.push_str(way_out(state));
    advice
}

/// The honest way out of a task that cannot be done, where the host lets the hook read the
/// agent's final message, and the reminder that weakening the check is none.
fn way_out(state: &LoopState) -> &'static str {
    if state.meta.host.sends_last_message() {
        "If the task cannot be done as asked, say why and end your turn with \
         <loop-abort>REASON</loop-abort>: the loop is parked for the user, never counted as done. \
         Weakening the check is never the way out."
    } else {
        "If the task cannot be done as asked, say why plainly and end your turn: the user decides. \
         Weakening the check is never the way out."
    }
}

/// One line for the user at a blocked stop, e.g. `for-loop 3/30 · verify failed (exit 1, 4.2 s)`.
pub(crate) fn status_line(
    state: &LoopState,
    code: ReasonCode,
    verify: Option<&VerifyOutcome>,
    not_run: Option<&str>,
) -> String {
    let head = format!("for-loop {}/{}", state.meta.iteration, state.meta.settings.max_iterations);
    let what = match (code, verify) {
        (ReasonCode::VerifyFailed, Some(o)) => {
            format!("verify failed ({}, {})", o.describe(), human(o.duration))
        }
        (ReasonCode::VerifyTimedOut, _) => {
            format!("verify timed out after {} s", state.meta.settings.verify_timeout_secs)
        }
        (ReasonCode::OracleChanged, _) => "the verify files were changed; passes do not count".to_string(),
        (ReasonCode::VerifyNotRun, _) => format!("verify could not run ({})", not_run.unwrap_or("unknown")),
        (ReasonCode::TestsDropped, _) => {
            "verify passed, but with fewer tests run or more skipped; passes do not count".to_string()
        }
        (ReasonCode::PromiseMissing, Some(_)) => "verify passed, promise not given".to_string(),
        (ReasonCode::PromiseMissing, None) => "promise not given".to_string(),
        (ReasonCode::ReviewBlocked, _) => crate::verdict::message::review::status(state),
        (ReasonCode::OutOfScope, _) => {
            "the check passed, but files outside the scope changed; passes do not count".into()
        }
        (ReasonCode::StoryVerified, _) => "story done; next story".to_string(),
        (ReasonCode::StoryBroken, _) => "a done story's check failed at the end".to_string(),
        (ReasonCode::HooksChanged, _) => {
            "the check passed, but for-loop's hook settings changed (named above); this pass does not count"
                .into()
        }
        _ => "no verify command, running to the cap".to_string(),
    };
    format!("{head} · {what}")
}

/// What the user sees when the check passed at a stop that may not be a turn's end (`why`): the
/// pass does not count, the agent may stop, and the loop stays on. `state` is the loop after it.
pub(crate) fn pass_not_counted(state: &LoopState, why: &str) -> String {
    format!(
        "for-loop {}/{} · the check passed, but this pass does not count: {why}. The loop is still on \
         and was not ended: send a message to go on (the next stop is judged as usual), or {} to end it.",
        state.meta.iteration,
        state.meta.settings.max_iterations,
        state.meta.host.commands().cancel
    )
}

/// The first line of the receipt when a loop ends or parks. `state` is the loop after this stop;
/// `check_modified`: the check's files were still changed then.
pub(crate) fn headline(
    state: &LoopState,
    code: ReasonCode,
    verify: Option<&VerifyOutcome>,
    check_modified: bool,
) -> String {
    let meta = &state.meta;
    let at = format!("{}/{}", meta.iteration, meta.settings.max_iterations);
    let verify_cmd = meta.settings.verify.as_deref().unwrap_or_default();
    let still_fails = match (verify, check_modified) {
        (Some(o), false) if !o.passed() => format!(" and `{verify_cmd}` still fails ({})", o.describe()),
        (Some(o), true) if !o.passed() => {
            format!(" and `{verify_cmd}` still fails ({}) even with its check modified", o.describe())
        }
        (Some(_), true) => format!(" and `{verify_cmd}` passes only because its check was modified"),
        (None, true) => " with the verify check modified".to_string(),
        _ => String::new(),
    };
    match code {
        ReasonCode::Verified => match verify {
            Some(_) if meta.settings.plan.is_some() => crate::verdict::message::plan::verified(state, &at),
            Some(o) => format!(
                "for-loop: done, verified at iteration {at}: `{verify_cmd}` passed ({}).",
                human(o.duration)
            ),
            None => format!("for-loop: done, verified at iteration {at}."),
        },
        ReasonCode::Promise => format!("for-loop: done, promise kept at iteration {at}."),
        ReasonCode::CapReached => format!("for-loop: stopped at the cap, {at} iterations used{still_fails}."),
        ReasonCode::Cancelled => format!("for-loop: cancelled at iteration {at}."),
        ReasonCode::SameFailures => format!(
            "for-loop: parked at iteration {at}: the same failure {} times in a row{still_fails}. The loop is kept.",
            meta.streaks.same_failure
        ),
        ReasonCode::NoProgress => format!(
            "for-loop: parked at iteration {at}: the working tree did not change for {} stops. The loop is kept.",
            meta.streaks.no_change
        ),
        ReasonCode::TokenBudget => format!(
            "for-loop: parked at iteration {at}: the token budget of {} is spent ({} used){still_fails}. The loop is kept.",
            human_tokens(meta.settings.max_tokens.unwrap_or_default()),
            human_tokens(meta.usage.as_ref().map_or(0, |u| u.used.total().counted()))
        ),
        ReasonCode::TimeBudget => format!(
            "for-loop: parked at iteration {at}: the time budget of {} is spent{still_fails}. The loop is kept.",
            human(Duration::from_secs(meta.settings.max_time_secs.unwrap_or_default()))
        ),
        ReasonCode::Aborted => format!(
            "for-loop: parked at iteration {at}: the agent says the task cannot be done as asked{still_fails}. \
             The loop is kept; read its reason below."
        ),
        ReasonCode::ReviewVetoed => crate::verdict::message::review::headline(state, &at),
        ReasonCode::StoryStalled => crate::verdict::message::plan::stalled(state, &at),
        other => format!("for-loop: ended ({other}) at iteration {at}."),
    }
}

/// What the user is told about incidents, one line each, ahead of the stop's own words.
pub(crate) fn incident_lines(incidents: &[Incident]) -> String {
    incidents.iter().fold(String::new(), |mut out, incident| {
        let _ = writeln!(out, "for-loop: {}.", incident.what);
        out
    })
}

/// `check.sh (modified)`, with what to do where the kind alone does not say it.
pub(crate) fn change_in_words(change: &OracleChange) -> String {
    let remedy = match change.kind {
        ChangeKind::Unchecked => ": delete the ones you created",
        ChangeKind::Ticked => ": for-loop ticks a story's box itself when its check passes; clear it",
        _ => "",
    };
    format!("{} ({}{remedy})", change.path, change.kind)
}

/// How many changed files of the check the re-injection names one by one.
const CHANGES_NAMED: usize = 20;

/// What the re-injection says about changed oracle files.
fn oracle_notice(changes: &[OracleChange], files: &LoopFiles) -> String {
    let mut out = String::from(
        "\nThe verify command's own files changed since the loop started, so a passing verify does not count:\n",
    );
    for change in changes.iter().take(CHANGES_NAMED) {
        out.push_str(&format!("  - {}\n", change_in_words(change)));
    }
    if changes.len() > CHANGES_NAMED {
        out.push_str(&format!("  - and {} more\n", changes.len() - CHANGES_NAMED));
    }
    if changes.iter().any(|c| c.kind != ChangeKind::ChangedDuringVerify) {
        out.push_str(&format!(
            "Restore them exactly as they were (`git checkout -- <path>`, or copy the originals saved in {}; \
             delete the added ones). Fix the code under test instead of the check.\n",
            files.originals
        ));
    } else {
        out.push_str(
            "They are as they were now, but not while verify ran: nothing may change them during the \
             check, neither the code under test nor a process left running. Fix the code under test \
             instead of the check.\n",
        );
    }
    out
}

/// What completes the loop, in words.
pub(crate) fn criterion(state: &LoopState) -> String {
    let settings = &state.meta.settings;
    let reviewed = settings.review.as_ref().map(|r| format!(" and the reviewer `{}` approves", r.command));
    let checked = match (state.current_check(), settings.completion_promise.as_deref()) {
        (Some(v), None) => format!("`{v}` exits 0"),
        (None, Some(p)) => format!("your final message contains <promise>{p}</promise>"),
        (Some(v), Some(p)) => {
            format!("`{v}` exits 0 and your final message contains <promise>{p}</promise>, at the same stop")
        }
        (None, None) => format!("all {} iterations are used", settings.max_iterations),
    };
    let planned = settings.plan.as_ref().map(|p| {
        format!(
            " for the current story, story by story through {}, until every story's check passes at one stop",
            p.file
        )
    });
    format!("{checked}{}{}", planned.unwrap_or_default(), reviewed.unwrap_or_default())
}

pub(crate) fn elapsed(state: &LoopState, now: Timestamp) -> String {
    let span = now.duration_since(state.meta.started_at);
    human(Duration::try_from(span).unwrap_or_default())
}
