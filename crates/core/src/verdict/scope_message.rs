//! The scope of a loop (`--scope`, a story's `scope:`) as the verdict reads it, and its words: the
//! re-injection when a pass changed files outside it, and the line at a blocked stop.

use crate::checks::scope::{Scope, ScopeCheck};
use crate::store::state::LoopState;

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
pub(crate) fn outside(state: &LoopState, check: Option<&ScopeCheck>) -> (String, String) {
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
    (verdict, advice.to_string())
}

/// The scope's line in the start message and status: the globs and what a change outside does.
pub(crate) fn start_line(globs: &[String]) -> String {
    format!(
        "Scope:       {}  (a pass that changed a file outside it, new files included, does not count)\n",
        globs.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::state::tests::sample;

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
        let (verdict, advice) = outside(&state, Some(&found));
        assert!(verdict.contains("scope, src/**, and this change changed outside"), "{verdict}");
        assert!(advice.contains("widen --scope"), "{advice}");
    }
}
