//! The loop's brief after the host compacted the conversation: the summary keeps what the model
//! thought mattered, and the start of the loop at best, so the agent is given the loop back as it
//! stands now (the task, the check, the iteration, the story, the last failure, the rules).

use crate::state::{LedgerDecision, LedgerEntry, LoopState};
use crate::support::text::fence_for;

/// A task longer than this is referenced, not repeated: the brief goes into the context the
/// compaction just freed.
const TASK_CHARS: usize = 6_000;

/// The brief. `last` is the loop's latest ledger lines, oldest first; `state_file` is where the
/// task is read in full.
pub(crate) fn brief(state: &LoopState, last: &[LedgerEntry], state_file: &str) -> String {
    let meta = &state.meta;
    let task = state.task.trim_end();
    let task = if task.chars().count() <= TASK_CHARS {
        let fence = fence_for(task);
        format!("{fence}text\n{task}\n{fence}")
    } else {
        format!(
            "(the task is {} characters long: read it in full, below the settings, in {state_file})",
            task.chars().count()
        )
    };
    let check = state.current_check().map_or_else(
        || "This loop has no verify command.".to_string(),
        |check| format!("The check is `{check}`: the loop ends only when it exits 0 at the end of a turn."),
    );
    format!(
        "for-loop: this conversation was just compacted, and the for-loop loop in it is still running. \
         The task, as the user gave it:\n\n{task}\n\nThis is iteration {} of {}; the loop goes on until {}. \
         {check}\n{}{}\nWork on the task, run the check yourself to see it pass, then end your turn. Do not change \
         the verify command or the files it runs. {}",
        meta.iteration,
        meta.settings.max_iterations,
        super::criterion(state),
        super::plan::story_line(state).unwrap_or_default(),
        last_failure(state, last),
        super::way_out(state)
    )
}

/// The loop's last blocked stop, in one line.
fn last_failure(state: &LoopState, last: &[LedgerEntry]) -> String {
    let blocked = last
        .iter()
        .rev()
        .find(|entry| entry.loop_id == state.meta.loop_id && entry.decision == LedgerDecision::Block);
    let Some(entry) = blocked else { return "No stop of this loop has been judged yet.".into() };
    let how = entry.verify.as_ref().map_or(String::new(), |v| match (v.timed_out, v.exit_code) {
        (true, _) => " (it timed out)".into(),
        (false, Some(code)) => format!(" (exit {code})"),
        (false, None) => " (killed by a signal)".into(),
    });
    let said = entry
        .verify
        .as_ref()
        .and_then(|v| v.tail.lines().rev().find(|line| !line.trim().is_empty()))
        .map(|line| format!(": {}", line.trim().chars().take(200).collect::<String>()))
        .unwrap_or_default();
    let mine: Vec<LedgerEntry> = last.iter().filter(|e| e.loop_id == state.meta.loop_id).cloned().collect();
    let failing = crate::state::describe_failing_in(&mine)
        .map(|failing| format!(" Its output named {failing}."))
        .unwrap_or_default();
    format!(
        "The last judged stop, at iteration {}, was {}{how}{said}.{failing}",
        entry.iteration, entry.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ReasonCode, VerifyRecord, sample};

    fn blocked(state: &LoopState, iteration: u32, tail: &str) -> LedgerEntry {
        LedgerEntry {
            iteration,
            verify: Some(VerifyRecord {
                exit_code: Some(1),
                signal: None,
                timed_out: false,
                duration_ms: 10,
                output_bytes: 3,
                output_digest: String::new(),
                tail: tail.into(),
                output_ended_by: None,
                failing: None,
            }),
            ..LedgerEntry::new(
                state,
                jiff::Timestamp::UNIX_EPOCH,
                LedgerDecision::Block,
                ReasonCode::VerifyFailed,
            )
        }
    }

    #[test]
    fn the_brief_holds_the_task_the_check_the_iteration_the_last_failure_and_the_rules() {
        let mut state = sample();
        state.meta.iteration = 3;
        let lines = [blocked(&state, 1, "old"), blocked(&state, 2, "test login FAILED\nassert 1 == 2\n\n")];
        let brief = brief(&state, &lines, "state.md");
        assert!(brief.contains("```text\nfix the login\n```"), "{brief}");
        assert!(brief.contains("This is iteration 3 of"), "{brief}");
        assert!(brief.contains(&format!("The check is `{}`", state.current_check().unwrap())), "{brief}");
        assert!(
            brief
                .contains("The last judged stop, at iteration 2, was verify_failed (exit 1): assert 1 == 2."),
            "{brief}"
        );
        assert!(brief.contains("Do not change the verify command"), "{brief}");
        assert!(brief.contains("<loop-abort>"), "{brief}");
        assert!(!brief.contains(crate::state::REINJECTION_MARK), "the brief is no block of a stop");
    }

    #[test]
    fn without_a_judged_stop_or_with_a_long_task() {
        let mut state = sample();
        let brief_now = brief(&state, &[], "state.md");
        assert!(brief_now.contains("No stop of this loop has been judged yet."), "{brief_now}");
        let mut other = blocked(&state, 1, "x");
        other.loop_id = "another loop".into();
        assert!(brief(&state, &[other], "state.md").contains("No stop of this loop has been judged yet."));
        state.task = "t".repeat(TASK_CHARS + 1);
        let long = brief(&state, &[], "/s/state.md");
        assert!(long.contains(&format!("the task is {} characters long", TASK_CHARS + 1)), "{long}");
        assert!(!long.contains(&state.task));
    }

    #[test]
    fn the_brief_names_the_failures_and_what_the_last_stop_fixed() {
        let mut state = sample();
        state.meta.iteration = 3;
        let named = |entry: LedgerEntry, names: &[&str]| {
            let mut entry = entry;
            if let Some(verify) = entry.verify.as_mut() {
                verify.failing = Some(crate::state::FailingNames {
                    runner: Some("pytest".into()),
                    names: names.iter().map(ToString::to_string).collect(),
                    more: 0,
                });
            }
            entry
        };
        let lines =
            [named(blocked(&state, 1, "x"), &["a", "b"]), named(blocked(&state, 2, "y"), &["b", "c"])];
        let brief = brief(&state, &lines, "state.md");
        assert!(brief.contains("Its output named 2 failing: b, c; 1 of 2 fixed (a); new: c."), "{brief}");
        let old = [blocked(&state, 2, "y")];
        assert!(
            !brief_of(&state, &old).contains("Its output named"),
            "a ledger without names reads as before"
        );
    }

    fn brief_of(state: &LoopState, lines: &[LedgerEntry]) -> String {
        brief(state, lines, "state.md")
    }
}
