//! The scope of a loop (`--scope`, a story's `scope:`) as the verdict reads it, and its words: the
//! re-injection when a pass changed files outside it, and the line at a blocked stop.

use crate::checks::{Scope, ScopeCheck};
use crate::state::LoopState;
use crate::verdict::message::reinjection::Finding;

/// The current story's scope globs; empty outside a plan or for a story without one.
pub(crate) fn story_globs(state: &LoopState) -> &[String] {
    let (Some(plan), Some(progress)) = (&state.meta.settings.plan, &state.meta.plan) else { return &[] };
    plan.stories.get(progress.current).map_or(&[], |story| story.scope.as_slice())
}

/// The scope in force at this stop: the loop's, narrowed by the current story's.
pub(crate) fn scope_of(state: &LoopState) -> Option<Scope> {
    Scope::new(&state.meta.settings.scope, story_globs(state))
}

/// Whether the loop has a scope anywhere: its own, or one of its stories'. A plan loop then
/// records where each story starts, for a later story's scope.
pub(crate) fn is_scoped(state: &LoopState) -> bool {
    let stories = state.meta.settings.plan.as_ref().map_or(&[][..], |plan| plan.stories.as_slice());
    !state.meta.settings.scope.is_empty() || stories.iter().any(|story| !story.scope.is_empty())
}

/// What this stop's change did to the scope in force, in a few words, when it did not hold:
/// the files outside it, or why the change could not be read. `None`: it held, or there is none.
pub(crate) fn breach(state: &LoopState, check: Option<&ScopeCheck>) -> Option<String> {
    scope_of(state)?;
    match check {
        Some(check) if check.holds() => None,
        Some(check) => Some(match &check.unknown {
            Some(why) => format!("the files changed since the start could not be read ({why})"),
            None => format!("changed outside the scope: {}", check.named()),
        }),
        None => Some("the files changed since the start were not read".into()),
    }
}

/// The globs in force, for the model: `src/**, Cargo.toml`, and the story's beside the loop's.
fn globs_in_words(state: &LoopState) -> String {
    let (own, story) = (&state.meta.settings.scope, story_globs(state));
    match (own.is_empty(), story.is_empty()) {
        (false, true) => own.join(", "),
        (true, false) => story.join(", "),
        _ => format!("{} (the loop's), and within it {} (this story's)", own.join(", "), story.join(", ")),
    }
}

/// The re-injection's verdict and advice at a pass that changed files outside the scope.
/// `state` is the loop before this stop (its story is the one judged).
pub(crate) fn outside(state: &LoopState, check: Option<&ScopeCheck>) -> Finding {
    let what = breach(state, check).unwrap_or_default();
    let verdict = format!(
        "\nThe check passed, but that does not count: the task may change only the files of its \
         scope, {}, and this change {what}.\n",
        globs_in_words(state)
    );
    let advice = if check.is_some_and(|c| c.unknown.is_some()) {
        "To finish: make sure git can read the working tree (`git status` works), then stop again."
    } else {
        "To finish: put those files back as they were at the start (`git checkout -- FILE`, or delete \
         a file you added), keeping your change inside the scope. If the task cannot be done without \
         them, say so and ask the user to widen --scope; do not work around it."
    };
    Finding::new(verdict, advice)
}

/// The scope's line in the start message and status: the globs and what a change outside does.
pub(crate) fn start_line(globs: &[String]) -> String {
    format!(
        "Scope:       {}  (a pass that changed a file outside it, new files included, does not count)\n",
        globs.join(", ")
    )
}

/// The scope's lines in `/loop-status`: the globs in force, and the files the last judged stop
/// found outside them (`outside`, from its ledger line). Empty in a loop without a scope.
pub(crate) fn status_lines(state: &LoopState, outside: &[String]) -> String {
    if !is_scoped(state) {
        return String::new();
    }
    let globs = if scope_of(state).is_some() { globs_in_words(state) } else { "none for this story".into() };
    let mut out = format!("  scope:      {globs}\n");
    if !outside.is_empty() {
        out.push_str(&format!("  outside:    at the last stop, {}\n", outside.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::checks::plan::{PlanProgress, PlanSettings, Story};
    use crate::checks::test_count::RatchetStatus;
    use crate::checks::verify::Captured;
    use crate::checks::verify::VerifyOutcome;
    use crate::metric::keep::{Measured, MetricFacts, MetricProgress};
    use crate::state::ReasonCode;
    use crate::state::sample;
    use crate::verdict::decision::{Verdict, awaits_review, awaits_scope, decide};
    use crate::verdict::facts::StopFacts;
    use crate::verdict::message::review::tests::facts;

    fn passed() -> VerifyOutcome {
        VerifyOutcome {
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            untrusted: None,
            duration: Duration::from_secs(1),
            output: Captured::default(),
        }
    }

    fn scoped(globs: &[&str]) -> LoopState {
        let mut state = sample();
        state.meta.settings.scope = globs.iter().map(ToString::to_string).collect();
        state.meta.tests.status = RatchetStatus::Waiting;
        state
    }

    fn found(outside: &[&str]) -> ScopeCheck {
        ScopeCheck {
            now: Some("b".repeat(40)),
            outside: outside.iter().map(ToString::to_string).collect(),
            outside_total: outside.len(),
            unknown: None,
        }
    }

    #[test]
    fn status_shows_the_globs_and_what_the_last_stop_found_outside() {
        assert_eq!(status_lines(&sample(), &["x".into()]), "", "no scope, no lines");
        let state = scoped(&["src/**", "Cargo.toml"]);
        assert_eq!(status_lines(&state, &[]), "  scope:      src/**, Cargo.toml\n");
        let shown = status_lines(&state, &["README.md".into(), "a b.rs".into()]);
        assert!(shown.ends_with("  outside:    at the last stop, README.md, a b.rs\n"), "{shown}");
        let plan = planned();
        assert_eq!(status_lines(&plan, &[]), "  scope:      src/**\n", "story 1 has none of its own");
    }

    #[test]
    fn a_pass_that_changed_files_outside_the_scope_does_not_count() {
        let state = scoped(&["src/**"]);
        let (ok, check) = (passed(), found(&["README.md", "build.rs"]));
        assert!(awaits_scope(&state, &facts(&ok, None)), "a passing check reads the scope");
        let decision = decide(&state, StopFacts { scope: Some(&check), ..facts(&ok, None) });
        assert_eq!(decision.code, ReasonCode::OutOfScope);
        let Verdict::Block { reason } = &decision.verdict else { panic!("{decision:?}") };
        assert!(
            reason.contains("scope, src/**, and this change changed outside the scope: README.md, build.rs"),
            "{reason}"
        );
        assert!(reason.contains("ask the user to widen --scope"), "{reason}");
        assert!(
            decision.system_message.contains("files outside the scope changed"),
            "{}",
            decision.system_message
        );
        let line = decision.ledger.last().unwrap();
        assert_eq!(line.out_of_scope, ["README.md", "build.rs"]);
        assert_eq!(line.detail.as_deref(), Some("2 file(s) changed outside the scope"));
        assert_eq!(decision.next.meta.iteration, 2, "the turn counts");
    }

    #[test]
    fn a_pass_inside_the_scope_ends_the_loop_and_a_scope_not_read_does_not_hold() {
        let state = scoped(&["src/**"]);
        let (ok, clean) = (passed(), found(&[]));
        let decision = decide(&state, StopFacts { scope: Some(&clean), ..facts(&ok, None) });
        assert_eq!(decision.code, ReasonCode::Verified);
        assert!(decision.ledger.last().unwrap().out_of_scope.is_empty());
        let unread = decide(&state, facts(&ok, None));
        assert_eq!(unread.code, ReasonCode::OutOfScope, "a scope that was not read is not shown to hold");
        let broken = ScopeCheck::unknown("git failed".into());
        let decision = decide(&state, StopFacts { scope: Some(&broken), ..facts(&ok, None) });
        assert_eq!(decision.code, ReasonCode::OutOfScope);
        let Verdict::Block { reason } = &decision.verdict else { panic!("{decision:?}") };
        assert!(
            reason.contains("could not be read (git failed)") && reason.contains("git status"),
            "{reason}"
        );
        let unscoped = scoped(&[]);
        assert!(!awaits_scope(&unscoped, &facts(&ok, None)));
        assert_eq!(decide(&unscoped, facts(&ok, None)).code, ReasonCode::Verified, "no scope, no reading");
    }

    #[test]
    fn a_failing_check_is_not_read_against_the_scope_and_the_reviewer_never_sees_a_pass_outside() {
        let mut state = scoped(&["src/**"]);
        let failed = VerifyOutcome { exit_code: Some(1), ..passed() };
        assert!(!awaits_scope(&state, &facts(&failed, None)));
        state.meta.settings.review =
            Some(crate::checks::review::ReviewSettings { command: "sh r.sh".into(), max_vetoes: 3 });
        let (ok, outside, clean) = (passed(), found(&["a.txt"]), found(&[]));
        assert!(!awaits_review(&state, &StopFacts { scope: Some(&outside), ..facts(&ok, None) }));
        assert!(awaits_review(&state, &StopFacts { scope: Some(&clean), ..facts(&ok, None) }));
    }

    fn planned() -> LoopState {
        let mut state = scoped(&["src/**"]);
        state.meta.settings.verify = None;
        let story = |i: usize, scope: &[&str]| Story {
            id: i.to_string(),
            title: format!("story {i}"),
            details: String::new(),
            verify: Some("true".into()),
            done: false,
            scope: scope.iter().map(ToString::to_string).collect(),
        };
        let stories = vec![story(1, &[]), story(2, &["src/login/**"])];
        let plan = PlanSettings { file: "PLAN.md".into(), stories, story_iterations: None, no_tick: false };
        state.meta.plan = Some(PlanProgress::start(&plan));
        state.meta.settings.plan = Some(plan);
        state
    }

    #[test]
    fn a_story_starts_its_scope_where_the_last_story_passed_and_narrows_the_loops() {
        let state = planned();
        let ok = passed();
        let first = found(&[]);
        let decision = decide(&state, StopFacts { scope: Some(&first), ..facts(&ok, None) });
        assert_eq!(decision.code, ReasonCode::StoryVerified);
        let next = decision.next;
        assert_eq!(next.meta.plan.as_ref().unwrap().story_tree, first.now, "story 2 starts here");
        assert_eq!(story_globs(&next), ["src/login/**"]);
        let Verdict::Block { reason } = &decision.verdict else { panic!() };
        assert!(reason.contains("Its scope: src/login/**"), "{reason}");
        let outside = found(&["src/other.rs"]);
        let decision = decide(&next, StopFacts { scope: Some(&outside), ..facts(&ok, None) });
        assert_eq!(decision.code, ReasonCode::OutOfScope);
        let Verdict::Block { reason } = &decision.verdict else { panic!() };
        assert!(
            reason.contains("src/** (the loop's), and within it src/login/** (this story's)"),
            "{reason}"
        );
    }

    #[test]
    fn a_metric_attempt_outside_the_scope_is_discarded_and_rolled_back() {
        let mut state = scoped(&["src/**"]);
        state.meta.settings.verify = None;
        state.meta.settings.metric = Some(crate::metric::keep::tests::settings());
        state.meta.metric = Some(MetricProgress::at_baseline(&[131.0], Some("ms".into())));
        let attempt = MetricFacts {
            measured: Measured::Value { value: 100.0, name: Some("ms".into()) },
            guard: None,
            summary: "bench.sh: 1 line".into(),
        };
        let ok = passed();
        let base = StopFacts { verify: None, metric: Some(&attempt), ..facts(&ok, None) };
        assert!(awaits_scope(&state, &base), "every metric attempt is read");
        let outside = found(&["bench.sh"]);
        let decision = decide(&state, StopFacts { scope: Some(&outside), ..base });
        assert_eq!(decision.code, ReasonCode::OutOfScope);
        assert_eq!(decision.rollback_to, Some(0), "back to the best checkpoint");
        let Verdict::Block { reason } = &decision.verdict else { panic!() };
        assert!(reason.contains("discarded: it changed outside the scope: bench.sh"), "{reason}");
        assert_eq!(decision.next.meta.metric.as_ref().unwrap().keeps, 0);
        assert!(!decision.lesson.unwrap().kept);
        let clean = found(&[]);
        let kept = decide(&state, StopFacts { scope: Some(&clean), ..base });
        assert_eq!((kept.code, kept.rollback_to), (ReasonCode::TargetMet, None));
    }

    #[test]
    fn a_breach_names_the_files_or_why_they_are_not_known() {
        let mut state = sample();
        let found =
            ScopeCheck { now: None, outside: vec!["README.md".into()], outside_total: 3, unknown: None };
        assert_eq!(breach(&state, Some(&found)), None, "no scope, no breach");
        state.meta.settings.scope = vec!["src/**".into()];
        assert_eq!(breach(&state, Some(&found)).unwrap(), "changed outside the scope: README.md and 2 more");
        let unknown = ScopeCheck::unknown("git failed".into());
        assert!(breach(&state, Some(&unknown)).unwrap().contains("(git failed)"));
        assert!(breach(&state, None).is_some(), "a scope that was not looked at does not hold");
        assert_eq!(breach(&state, Some(&ScopeCheck::default())), None);
        let Finding { said: verdict, advice } = outside(&state, Some(&found));
        assert!(verdict.contains("scope, src/**, and this change changed outside"), "{verdict}");
        assert!(advice.contains("widen --scope"), "{advice}");
    }
}
