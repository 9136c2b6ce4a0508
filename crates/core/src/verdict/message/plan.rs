//! The words of a plan loop (`--plan`): the story to work on, the one just done, a done story
//! that broke, and the plan's line in the receipt.

use crate::checks::{PlanSweep, Story};
use crate::state::LoopState;
use crate::support::text::fence_for;

/// A broken story's output is shown up to this many characters.
const BROKEN_OUTPUT_CHARS: usize = 3_000;

/// Story `index`: its title, details and check, for the start message and the re-injection.
pub(crate) fn story_brief(state: &LoopState, index: usize) -> String {
    let Some(plan) = &state.meta.settings.plan else { return String::new() };
    let Some(story) = plan.stories.get(index) else { return String::new() };
    let mut out = format!("\nNow: story {} of {}: {}\n", index + 1, plan.stories.len(), story.label());
    for line in story.details.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    let check = plan.check(index, state.meta.settings.verify.as_deref()).unwrap_or_default();
    out.push_str(&format!("Its check: `{check}` (the story is done when it exits 0)\n"));
    if !story.scope.is_empty() {
        out.push_str(&format!(
            "Its scope: {} (change only these files; a pass that changed others does not count)\n",
            story.scope.join(", ")
        ));
    }
    out
}

/// The story the loop is on, its title and its check, in one line: every re-injection names it,
/// so an agent that lost its context to compaction knows which story it is on.
/// `None` for a loop without a plan.
pub(crate) fn story_line(state: &LoopState) -> Option<String> {
    let (plan, progress) = (state.meta.settings.plan.as_ref()?, state.meta.plan.as_ref()?);
    let story = plan.stories.get(progress.current)?;
    let check = plan.check(progress.current, state.meta.settings.verify.as_deref()).unwrap_or_default();
    Some(format!(
        "You are on story {} of {}: {}. Its check: `{check}`.\n",
        progress.current + 1,
        plan.stories.len(),
        story.label()
    ))
}

/// `Done: 2 of 3 (1. Add the form, 2. Reject empty names).`
pub(crate) fn done_line(state: &LoopState) -> String {
    let (Some(plan), Some(progress)) = (&state.meta.settings.plan, &state.meta.plan) else {
        return String::new();
    };
    let done: Vec<String> =
        plan.stories.iter().zip(&progress.stories).filter(|(_, p)| p.done).map(|(s, _)| s.label()).collect();
    let named = if done.is_empty() { String::new() } else { format!(" ({})", done.join(", ")) };
    format!("Done: {} of {}{named}.\n", done.len(), plan.stories.len())
}

/// The re-injection's paragraph when the story `before` worked on passed: it is done, and the
/// next one follows. `next` is the loop after this stop.
pub(crate) fn story_done(before: &LoopState, next: &LoopState) -> String {
    let index = before.meta.plan.as_ref().map_or(0, |p| p.current);
    let label = before.meta.settings.plan.as_ref().and_then(|p| p.stories.get(index)).map(Story::label);
    let check = before.current_check().unwrap_or_default();
    let current = next.meta.plan.as_ref().map_or(0, |p| p.current);
    format!(
        "\nStory {} is done: its check `{check}` passed.\n{}{}",
        label.unwrap_or_default(),
        done_line(next),
        story_brief(next, current)
    )
}

/// The re-injection's paragraph when a check run again at the end failed. `next` is the loop
/// after this stop, with the broken story current again.
pub(crate) fn story_broken(next: &LoopState, sweep: Option<&PlanSweep>) -> String {
    let Some((index, outcome)) = sweep.and_then(|s| s.broken.as_ref()) else {
        return "\nThe plan's checks could not all be run again at the end, so the plan is not done yet.\n"
            .into();
    };
    let what = match index {
        Some(i) => format!(
            "the check of story {} failed again ({}), so it is not done any more",
            next.meta
                .settings
                .plan
                .as_ref()
                .and_then(|p| p.stories.get(*i))
                .map(Story::label)
                .unwrap_or_default(),
            outcome.describe()
        ),
        None => format!(
            "the loop's own check `{}` failed ({})",
            next.meta.settings.verify.as_deref().unwrap_or_default(),
            outcome.describe()
        ),
    };
    let failures = crate::verdict::message::failures::block(
        &outcome.output.failures(),
        None,
        BROKEN_OUTPUT_CHARS * 3 / 4,
    );
    // The failures and the output share the room the output alone had.
    let excerpt =
        outcome.output.excerpt(BROKEN_OUTPUT_CHARS.saturating_sub(failures.chars().count()).max(500));
    let fence = fence_for(&excerpt);
    let current = next.meta.plan.as_ref().map_or(0, |p| p.current);
    format!(
        "\nEvery story's check ran again at the end, and {what}.\n{failures}Its output:\n\n{fence}text\n{}\n{fence}\n{}{}",
        excerpt.trim_end(),
        done_line(next),
        story_brief(next, current)
    )
}

/// The headline of a plan loop that ends verified. `at` is `iteration/max`.
pub(crate) fn verified(state: &LoopState, at: &str) -> String {
    let file = state.meta.settings.plan.as_ref().map_or("", |p| p.file.as_str());
    format!(
        "for-loop: done, verified at iteration {at}: every story of {file} passed its check at the same stop."
    )
}

/// The headline when one story used its `--story-iterations`. `at` is `iteration/max`.
pub(crate) fn stalled(state: &LoopState, at: &str) -> String {
    let (plan, progress) = (state.meta.settings.plan.as_ref(), state.meta.plan.as_ref());
    let label = plan.zip(progress).and_then(|(p, g)| p.stories.get(g.current)).map(Story::label);
    format!(
        "for-loop: parked at iteration {at}: story {} used {} stops without its check `{}` passing. The loop is kept.",
        label.unwrap_or_default(),
        progress.map_or(0, |p| p.current_stops),
        state.current_check().unwrap_or_default()
    )
}

/// What to do after a story passed or broke.
pub(crate) fn advice() -> String {
    "To go on: work on this story only, run its check yourself to see it pass, then end your turn. \
     The plan is done when every story's check passes at the same stop; do not edit the plan or the checks."
        .into()
}

/// The receipt's line about the plan: each story, done or not, and the judged stops it took.
pub(crate) fn receipt_line(state: &LoopState) -> Option<String> {
    let (plan, progress) = (state.meta.settings.plan.as_ref()?, state.meta.plan.as_ref()?);
    let stories: Vec<String> = plan
        .stories
        .iter()
        .zip(&progress.stories)
        .map(|(s, p)| format!("{} {} ({} stop(s))", if p.done { "✓" } else { "·" }, s.label(), p.iterations))
        .collect();
    Some(format!("{} of {} done: {}", progress.done_count(), plan.stories.len(), stories.join(", ")))
}

/// A plan loop's verdicts, through [`crate::verdict::decision::decide`].
#[cfg(test)]
mod tests {

    use super::*;
    use crate::checks::plan::{PlanProgress, PlanSettings};
    use crate::checks::test_count::RatchetStatus;
    use crate::checks::verify::VerifyOutcome;
    use crate::state::ReasonCode;
    use crate::state::sample;
    use crate::verdict::decision::{Verdict, awaits_sweep, decide};
    use crate::verdict::facts::StopFacts;

    fn planned(stories: usize) -> LoopState {
        let mut state = sample();
        state.meta.settings.verify = None;
        let stories = (1..=stories)
            .map(|i| Story {
                id: i.to_string(),
                title: format!("story {i}"),
                details: String::new(),
                verify: Some(format!("test -f {i}")),
                done: false,
                scope: Vec::new(),
            })
            .collect();
        let plan = PlanSettings { file: "PLAN.md".into(), stories, story_iterations: None, no_tick: false };
        state.meta.plan = Some(PlanProgress::start(&plan));
        state.meta.settings.plan = Some(plan);
        state.meta.tests.status = RatchetStatus::Waiting;
        state
    }

    fn run(exit: i32, output: &str) -> VerifyOutcome {
        VerifyOutcome::exited(exit, output)
    }

    fn facts<'a>(verify: &'a VerifyOutcome, sweep: Option<&'a PlanSweep>) -> StopFacts<'a> {
        StopFacts { plan: sweep, ..crate::verdict::message::review::tests::facts(verify, None) }
    }

    fn reason(verdict: &Verdict) -> &str {
        match verdict {
            Verdict::Block { reason } => reason,
            Verdict::Allow => panic!("expected a block"),
        }
    }

    #[test]
    fn a_passing_story_is_done_and_the_next_one_is_given() {
        let state = planned(3);
        assert_eq!(state.current_check(), Some("test -f 1"));
        let passed = run(0, "");
        assert!(!awaits_sweep(&state, &facts(&passed, None)), "two stories are still pending");
        let decision = decide(&state, facts(&passed, None));
        assert_eq!(decision.code, ReasonCode::StoryVerified);
        let progress = decision.next.meta.plan.as_ref().unwrap();
        assert_eq!(
            (progress.current, progress.stories[0].done, progress.stories[0].iterations),
            (1, true, 1)
        );
        let reason = reason(&decision.verdict);
        assert!(reason.contains("Story 1. story 1 is done: its check `test -f 1` passed."), "{reason}");
        assert!(reason.contains("Now: story 2 of 3: 2. story 2\nIts check: `test -f 2`"), "{reason}");
        assert!(reason.contains("until `test -f 2` exits 0 for the current story"), "{reason}");
        assert_eq!(decision.next.current_check(), Some("test -f 2"));
    }

    /// Not only when the story changes: a plain failure names the story too, so an agent whose
    /// context was compacted knows which one it is on.
    #[test]
    fn every_reinjection_names_the_current_story_and_its_check() {
        let state = planned(2);
        let failed = run(1, "no file");
        let decision = decide(&state, facts(&failed, None));
        let reason = reason(&decision.verdict);
        assert!(reason.contains("You are on story 1 of 2: 1. story 1. Its check: `test -f 1`."), "{reason}");
        let passed = run(0, "");
        let next = decide(&state, facts(&passed, None));
        let reason = super::tests::reason(&next.verdict);
        assert!(reason.contains("You are on story 2 of 2: 2. story 2. Its check: `test -f 2`."), "{reason}");
        assert_eq!(story_line(&sample()), None, "a loop without a plan has no story");
    }

    #[test]
    fn a_failing_story_stays_current_and_counts_its_stops() {
        let state = planned(2);
        let failed = run(1, "no file");
        let decision = decide(&state, facts(&failed, None));
        assert_eq!(decision.code, ReasonCode::VerifyFailed);
        assert!(
            reason(&decision.verdict).contains("Verify `test -f 1` failed"),
            "{}",
            reason(&decision.verdict)
        );
        let progress = decision.next.meta.plan.unwrap();
        assert_eq!(
            (progress.current, progress.stories[0].done, progress.stories[0].iterations),
            (0, false, 1)
        );
    }

    fn at_last_story() -> LoopState {
        let mut state = planned(3);
        let progress = state.meta.plan.as_mut().unwrap();
        progress.stories[0].done = true;
        progress.stories[1].done = true;
        progress.current = 2;
        state
    }

    #[test]
    fn the_plan_ends_verified_only_when_every_check_passes_again() {
        let state = at_last_story();
        let passed = run(0, "");
        assert!(awaits_sweep(&state, &facts(&passed, None)));
        let clean = PlanSweep { broken: None };
        let done = decide(&state, facts(&passed, Some(&clean)));
        assert_eq!(done.code, ReasonCode::Verified);
        let receipt = done.receipt.unwrap();
        assert_eq!(
            receipt.plan.as_deref(),
            Some("3 of 3 done: ✓ 1. story 1 (0 stop(s)), ✓ 2. story 2 (0 stop(s)), ✓ 3. story 3 (1 stop(s))")
        );
        let not_run = decide(&state, facts(&passed, None));
        assert_eq!(not_run.code, ReasonCode::StoryBroken, "no sweep is no proof");
    }

    #[test]
    fn a_done_story_broken_meanwhile_becomes_current_again_with_its_output() {
        let state = at_last_story();
        let passed = run(0, "");
        let sweep = PlanSweep { broken: Some((Some(0), run(1, "one is missing"))) };
        let decision = decide(&state, facts(&passed, Some(&sweep)));
        assert_eq!(decision.code, ReasonCode::StoryBroken);
        let progress = decision.next.meta.plan.as_ref().unwrap();
        let done: Vec<bool> = progress.stories.iter().map(|s| s.done).collect();
        assert_eq!((progress.current, done), (0, vec![false, true, true]));
        let reason = reason(&decision.verdict);
        assert!(reason.contains("the check of story 1. story 1 failed again (exit 1)"), "{reason}");
        assert!(reason.contains("```text\none is missing\n```"), "{reason}");
        assert!(reason.contains("Done: 2 of 3 (2. story 2, 3. story 3)."), "{reason}");
    }

    #[test]
    fn a_story_that_uses_its_story_iterations_parks_the_loop_unless_it_passes() {
        let mut state = planned(2);
        state.meta.settings.plan.as_mut().unwrap().story_iterations = Some(2);
        let failed = run(1, "");
        let first = decide(&state, facts(&failed, None));
        assert_eq!(first.code, ReasonCode::VerifyFailed);
        let second = decide(&first.next, facts(&failed, None));
        assert_eq!(second.code, ReasonCode::StoryStalled);
        assert_eq!(second.next.meta.status, crate::state::Status::Parked);
        assert!(
            second
                .system_message
                .contains("story 1. story 1 used 2 stops without its check `test -f 1` passing"),
            "{}",
            second.system_message
        );
        let passed = run(0, "");
        let in_time = decide(&first.next, facts(&passed, None));
        assert_eq!(in_time.code, ReasonCode::StoryVerified);
        assert_eq!(
            in_time.next.meta.plan.as_ref().unwrap().current_stops,
            0,
            "the next story starts its count"
        );
    }

    #[test]
    fn a_story_that_passes_on_the_last_iteration_ends_the_loop_at_its_cap_not_verified() {
        let mut state = planned(2);
        state.meta.iteration = 30;
        let passed = run(0, "");
        let decision = decide(&state, facts(&passed, None));
        assert_eq!(decision.code, ReasonCode::CapReached);
        // Not counted done at the cap: a resumed loop runs the story's check again first.
        assert!(decision.system_message.contains("stories: 0 of 2 done"), "{}", decision.system_message);
    }
}
