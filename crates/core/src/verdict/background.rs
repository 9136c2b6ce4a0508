//! Whether a stop waits on the session's own background work instead of being judged: an agent
//! that started a long build in the background and ended its turn is paused, and the host wakes
//! it when the build ends. Judging it now would spend an iteration (and a model turn) on work
//! that has not landed.
//!
//! The wait is bounded, since background work is the agent's to start: one wait lasts at most
//! `--background-wait` from its first stop, whatever new work is started meanwhile; work a wait
//! ran out on is never waited on again; and once the bound has cut [`MAX_CUTS`] waits short, the
//! loop waits no more. A wait cut short is told to the user and to the agent, and counted.

use jiff::Timestamp;

use crate::host::BackgroundTask;
use crate::state::{Incident, LedgerDecision, LedgerEntry, LoopState, ReasonCode};
use crate::state::{MAX_TASKS_SEEN, Rhythm, SeenTask, Wait};
use crate::support::text::duration::human;

/// How long one wait lasts when `--background-wait` is not given.
pub(crate) const DEFAULT_WAIT_SECS: u64 = 30 * 60;
/// Waits the bound may cut short before the loop stops waiting at all.
pub(crate) const MAX_CUTS: u32 = 2;

/// What this stop is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    /// Judged as usual. `rhythm` is the loop's, with any wait ended, for the verdict to carry;
    /// `incident` says why a stop with work in flight was judged anyway.
    Judge { rhythm: Rhythm, incident: Option<Incident> },
    /// Let through unjudged: nothing but the wait changes in `next`.
    Wait { next: Box<LoopState>, ledger: Vec<LedgerEntry>, said: String },
}

/// Decides whether the owner's stop of an active loop waits. `tasks`: the work in flight the
/// host's event lists, `None` where it lists none (then nothing changes). Pure.
pub(crate) fn decide(
    state: &LoopState,
    tasks: Option<&[BackgroundTask]>,
    stop_hook_active: Option<bool>,
    now: Timestamp,
) -> Call {
    let rhythm = &state.meta.rhythm;
    let tasks = tasks.unwrap_or_default();
    if tasks.is_empty() {
        return Call::Judge { rhythm: rhythm.wait_ended(now), incident: None };
    }
    let bound = state.meta.settings.background_wait_secs.unwrap_or(DEFAULT_WAIT_SECS);
    let wait = rhythm.wait.as_ref();
    let since = wait.map_or(now, |w| w.since);
    let seen: Vec<SeenTask> = tasks
        .iter()
        .take(MAX_TASKS_SEEN)
        .map(|task| SeenTask {
            id: task.id.clone(),
            since: wait.and_then(|w| w.tasks.iter().find(|t| t.id == task.id)).map_or(now, |t| t.since),
        })
        .collect();
    let fresh = tasks.iter().any(|task| !rhythm.overdue.contains(&task.id));
    let waited = secs_between(since, now);
    let out_of_waits = rhythm.waits_cut >= MAX_CUTS;
    if fresh && waited < bound && !out_of_waits {
        return waiting(state, tasks, seen, since, stop_hook_active, now);
    }
    let mut next = rhythm.wait_ended(now);
    let newly_cut = fresh || wait.is_some();
    let incident = newly_cut.then(|| {
        next.waits_cut += 1;
        Incident::new(ReasonCode::BackgroundWaitOver, now, cut_words(state, tasks, wait, waited, bound))
    });
    for task in tasks {
        if !next.overdue.contains(&task.id) {
            next.overdue.push(task.id.clone());
        }
    }
    let excess = next.overdue.len().saturating_sub(MAX_TASKS_SEEN);
    next.overdue.drain(..excess);
    Call::Judge { rhythm: next, incident }
}

/// The stop let through: the wait goes on (or begins), and the host's row of blocks is over.
fn waiting(
    state: &LoopState,
    tasks: &[BackgroundTask],
    seen: Vec<SeenTask>,
    since: Timestamp,
    stop_hook_active: Option<bool>,
    now: Timestamp,
) -> Call {
    let meta = &state.meta;
    let mut next = state.clone();
    let stops = meta.rhythm.wait.as_ref().map_or(0, |w| w.stops) + 1;
    next.meta.rhythm.wait = Some(Wait { since, stops, tasks: seen });
    next.meta.rhythm.waited_stops += 1;
    next.meta.rhythm.quiet_blocks = 0;
    next.meta.last_blocked = false;
    next.meta.updated_at = now;
    let mut ledger = Vec::new();
    // The host ended a blocked turn by itself before this stop: recorded as the verdict records it.
    if meta.last_blocked && stop_hook_active == Some(false) {
        next.meta.harness_overrides += 1;
        ledger.push(LedgerEntry {
            stop_hook_active,
            detail: Some("the host ended the turn although the last stop was blocked".into()),
            ..LedgerEntry::new(state, now, LedgerDecision::Note, ReasonCode::HarnessOverride)
        });
    }
    let bound = meta.settings.background_wait_secs.unwrap_or(DEFAULT_WAIT_SECS);
    let count = match tasks.len() {
        1 => "1 background task".to_string(),
        n => format!("{n} background tasks"),
    };
    let named: Vec<&str> = tasks.iter().take(3).map(|t| t.what.as_str()).collect();
    let more = if tasks.len() > 3 { format!(" and {} more", tasks.len() - 3) } else { String::new() };
    ledger.push(LedgerEntry {
        stop_hook_active,
        detail: Some(format!(
            "waiting for {count} before judging: {}{more} (stop {stops} of this wait, {} of at most {})",
            named.join("; "),
            human_secs(secs_between(since, now)),
            human_secs(bound)
        )),
        ..LedgerEntry::new(state, now, LedgerDecision::Note, ReasonCode::BackgroundWait)
    });
    let said = format!(
        "for-loop: waiting for {count} before judging ({}{more}); the stop after it ends is judged. \
         Iteration {} of {} is not used meanwhile; after {} the stop is judged anyway.",
        named.join("; "),
        meta.iteration,
        meta.settings.max_iterations,
        human_secs(bound)
    );
    Call::Wait { next: Box::new(next), ledger, said }
}

/// Why a stop with work in flight is judged, for the user and the agent.
fn cut_words(
    state: &LoopState,
    tasks: &[BackgroundTask],
    wait: Option<&Wait>,
    waited: u64,
    bound: u64,
) -> String {
    let named: Vec<&str> = tasks.iter().take(3).map(|t| t.what.as_str()).collect();
    let what = format!("background work still in flight ({})", named.join("; "));
    let rhythm = &state.meta.rhythm;
    if rhythm.waits_cut >= MAX_CUTS {
        return format!(
            "this stop was judged with {what}: the loop already waited past --background-wait {} {} \
             times, so it waits on background work no more. Run long work in the foreground, or wait \
             for it before ending the turn",
            human_secs(bound),
            rhythm.waits_cut
        );
    }
    let restarted = wait
        .is_some_and(|w| w.tasks.len() > 1 || w.tasks.iter().any(|t| !tasks.iter().any(|n| n.id == t.id)));
    let dodge = if restarted {
        " New background work kept being started while the loop waited: it does not put judgment off."
    } else {
        ""
    };
    format!(
        "this stop was judged with {what}: the loop waited {} for it, the bound set by \
         --background-wait ({}), and does not wait on that work again.{dodge} The check judges \
         the tree as it is now",
        human_secs(waited),
        human_secs(bound)
    )
    .trim_end_matches('.')
    .to_string()
}

/// `loop-hook status`'s line on the waits: the wait in progress, and those of the whole loop.
pub(crate) fn status_line(state: &LoopState, now: Timestamp) -> Option<String> {
    let rhythm = &state.meta.rhythm;
    if rhythm.waited_stops == 0 && rhythm.waits_cut == 0 {
        return None;
    }
    let bound = state.meta.settings.background_wait_secs.unwrap_or(DEFAULT_WAIT_SECS);
    let mut line = format!(
        "waited on background work: {} stop(s), {} in all",
        rhythm.waited_stops,
        human_secs(rhythm.total_waited_secs(now))
    );
    if let Some(wait) = &rhythm.wait {
        line.push_str(&format!(
            "; waiting now for {} task(s), {} of at most {}",
            wait.tasks.len(),
            human_secs(secs_between(wait.since, now)),
            human_secs(bound)
        ));
    }
    if rhythm.waits_cut > 0 {
        line.push_str(&format!("; {} wait(s) ran out and were judged anyway", rhythm.waits_cut));
    }
    Some(line)
}

fn secs_between(since: Timestamp, now: Timestamp) -> u64 {
    u64::try_from(now.duration_since(since).as_secs()).unwrap_or(0)
}

fn human_secs(secs: u64) -> String {
    human(std::time::Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn task(id: &str) -> BackgroundTask {
        BackgroundTask { id: id.into(), what: format!("build {id}") }
    }

    /// Applies a call as the hook would: the wait's state, or the rhythm a judged stop carries.
    fn after(state: &LoopState, call: &Call) -> LoopState {
        match call {
            Call::Wait { next, .. } => (**next).clone(),
            Call::Judge { rhythm, .. } => {
                let mut next = state.clone();
                next.meta.rhythm = rhythm.clone();
                next
            }
        }
    }

    #[test]
    fn a_stop_with_work_in_flight_waits_and_uses_nothing() {
        let mut state = sample();
        state.meta.iteration = 2;
        state.meta.streaks.same_failure = 2;
        state.meta.last_blocked = true;
        let call = decide(&state, Some(&[task("b1")]), Some(true), at(0));
        let Call::Wait { next, ledger, said } = &call else { panic!("{call:?}") };
        assert_eq!((next.meta.iteration, next.meta.streaks.same_failure), (2, 2));
        assert!(!next.meta.last_blocked, "the stop is let through");
        assert_eq!(next.meta.rhythm.waited_stops, 1);
        assert!(
            said.starts_with("for-loop: waiting for 1 background task before judging (build b1)"),
            "{said}"
        );
        assert!(said.contains("Iteration 2 of 30 is not used"), "{said}");
        assert_eq!(ledger.len(), 1);
        assert_eq!(
            (ledger[0].decision, ledger[0].reason),
            (LedgerDecision::Note, ReasonCode::BackgroundWait)
        );
    }

    #[test]
    fn no_field_or_nothing_in_flight_is_judged_and_ends_a_wait() {
        let state = sample();
        assert_eq!(
            decide(&state, None, None, at(0)),
            Call::Judge { rhythm: Rhythm::default(), incident: None }
        );
        let waiting = after(&state, &decide(&state, Some(&[task("b1")]), None, at(0)));
        let Call::Judge { rhythm, incident } = decide(&waiting, Some(&[]), None, at(90)) else { panic!() };
        assert_eq!(incident, None);
        assert_eq!((rhythm.wait, rhythm.waited_secs, rhythm.waited_stops), (None, 90, 1));
    }

    #[test]
    fn the_same_work_past_the_bound_is_judged_told_and_not_waited_on_again() {
        let mut state = sample();
        state.meta.settings.background_wait_secs = Some(600);
        let forever = [task("sleep")];
        let mut now = 0;
        let mut state_now = after(&state, &decide(&state, Some(&forever), None, at(now)));
        while let Call::Wait { next, .. } = decide(&state_now, Some(&forever), None, at(now)) {
            state_now = *next;
            now += 60;
            assert!(now <= 600, "the wait outlived its bound");
        }
        let call = decide(&state_now, Some(&forever), None, at(now));
        let Call::Judge { rhythm, incident: Some(incident) } = &call else { panic!("{call:?}") };
        assert_eq!(incident.code, ReasonCode::BackgroundWaitOver);
        assert!(incident.what.contains("the loop waited 10m"), "{}", incident.what);
        assert_eq!((rhythm.waits_cut, rhythm.overdue.clone()), (1, vec!["sleep".to_string()]));
        // The next stop with the same work still in flight is judged at once, told no more.
        let judged = after(&state_now, &call);
        let again = decide(&judged, Some(&forever), None, at(now + 5));
        assert!(matches!(again, Call::Judge { incident: None, .. }), "{again:?}");
    }

    #[test]
    fn new_work_started_to_dodge_judgment_is_bounded_in_total_and_named() {
        let mut state = sample();
        state.meta.settings.background_wait_secs = Some(600);
        let mut now = 0;
        let mut n = 0;
        loop {
            n += 1;
            match decide(&state, Some(&[task(&format!("t{n}"))]), None, at(now)) {
                Call::Wait { next, .. } => state = *next,
                Call::Judge { incident, rhythm } => {
                    let what = incident.expect("told").what;
                    assert!(what.contains("New background work kept being started"), "{what}");
                    assert_eq!(rhythm.waits_cut, 1);
                    state.meta.rhythm = rhythm;
                    break;
                }
            }
            now += 120;
            assert!(now <= 600 + 120, "new work put judgment off past the bound");
        }
        // Two cuts, and the loop waits no more, even on work it never saw.
        state.meta.rhythm.waits_cut = MAX_CUTS;
        let call = decide(&state, Some(&[task("fresh")]), None, at(now + 1));
        let Call::Judge { incident: Some(incident), .. } = call else { panic!("{call:?}") };
        assert!(incident.what.contains("waits on background work no more"), "{}", incident.what);
    }

    #[test]
    fn a_block_the_host_overrode_before_a_wait_is_recorded() {
        let mut state = sample();
        state.meta.last_blocked = true;
        let Call::Wait { next, ledger, .. } = decide(&state, Some(&[task("b")]), Some(false), at(0)) else {
            panic!()
        };
        assert_eq!(next.meta.harness_overrides, 1);
        assert_eq!(ledger[0].reason, ReasonCode::HarnessOverride);
    }
}
