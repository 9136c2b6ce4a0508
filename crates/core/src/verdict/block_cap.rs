//! The host's own cap of blocked stops in a row in which the agent called no tool (Claude Code's
//! `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`, 8 unless set): past it the host ends the turn whatever the
//! hook answers and tells nobody, so a loop that blocked once more would record a block that
//! never happened. The loop counts those blocks itself and, where the next one would be thrown
//! away, parks instead, saying why; the block before that warns the agent.
//!
//! The hook puts the cap it read into `state.meta.rhythm.block_cap` before the verdict; the
//! count is `state.meta.rhythm.quiet_blocks`.

use crate::state::{LoopState, ReasonCode};
use crate::verdict::facts::StopFacts;

/// Which block in the host's row a block at this stop would be: the first after a stop that was
/// not blocked, that the host did not continue from a block, or whose turn called a tool (which
/// starts the host's count again); else one more than the last. Only a turn the transcript
/// shows without a tool call counts: one that cannot be read parks nothing on a guess (a block
/// the host threw away is then recorded at the next stop, as any override is).
pub(crate) fn quiet_after(state: &LoopState, facts: &StopFacts<'_>) -> u32 {
    let new_row =
        !state.meta.last_blocked || facts.stop_hook_active == Some(false) || facts.tool_uses != Some(0);
    if new_row { 1 } else { state.meta.rhythm.quiet_blocks.saturating_add(1) }
}

/// `code`, unless it `blocks` a stop the host would not let be blocked: then the loop parks.
pub(crate) fn kept(state: &LoopState, facts: &StopFacts<'_>, code: ReasonCode, blocks: bool) -> ReasonCode {
    match state.meta.rhythm.block_cap {
        Some(cap) if blocks && quiet_after(state, facts) > cap => ReasonCode::BlockCap,
        _ => code,
    }
}

/// What the agent is told at the last block the host will honour.
pub(crate) fn warning(state: &LoopState, facts: &StopFacts<'_>) -> Option<String> {
    let cap = state.meta.rhythm.block_cap?;
    (quiet_after(state, facts) == cap).then(|| {
        format!(
            "\n\nNote: you have ended {cap} turns in a row without calling a tool, and the host ends a \
             turn by itself after {cap} such blocked stops: this is the last. Use your tools in this \
             turn (run the check, read and edit the files); ending it with words alone parks the loop."
        )
    })
}

/// The headline of a loop parked at the cap.
pub(crate) fn headline(next: &LoopState, code: ReasonCode) -> Option<String> {
    if code != ReasonCode::BlockCap {
        return None;
    }
    let meta = &next.meta;
    let cap = meta.rhythm.block_cap.unwrap_or_default();
    let setting = meta.host.quiet_block_cap_setting().map(|var| format!(" ({var})")).unwrap_or_default();
    Some(format!(
        "for-loop: parked at iteration {}/{}: the agent ended {cap} turns in a row without calling a \
         tool, and the host honours at most {cap} such blocks in a row{setting}, so the next would \
         have been thrown away. The loop is kept: {} goes on (ask the agent to use its tools: run \
         the check, edit the files){}.",
        meta.iteration,
        meta.settings.max_iterations,
        meta.host.commands().resume,
        if setting.is_empty() { String::new() } else { ", or raise the cap".to_string() },
    ))
}

/// `loop-hook status`'s line on the host's cap, once the agent has ended turns without a tool
/// call in a row.
pub(crate) fn status_line(state: &LoopState) -> Option<String> {
    let rhythm = &state.meta.rhythm;
    let cap = rhythm.block_cap?;
    (state.meta.last_blocked && rhythm.quiet_blocks > 1).then(|| {
        format!(
            "the agent ended the last {} blocked turns without a tool call; the host honours {cap} in a row",
            rhythm.quiet_blocks
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::checks::verify::VerifyOutcome;
    use crate::state::{LoopState, ReasonCode, Status, sample};
    use crate::verdict::decision::{Verdict, decide};
    use crate::verdict::facts::StopFacts;
    use crate::verdict::message::review::tests::facts;

    fn capped(cap: Option<u32>) -> LoopState {
        let mut state = sample();
        state.meta.settings.max_same_failures = 50;
        state.meta.rhythm.block_cap = cap;
        state
    }

    /// Stops of an agent that only talks, each judged on the state the last one left, with the
    /// cap as the hook reads it at every stop; the codes, in order.
    fn talk(mut state: LoopState, stops: usize, tools: u32) -> (Vec<ReasonCode>, LoopState) {
        let failed = VerifyOutcome::exited(1, "");
        let cap = state.meta.rhythm.block_cap;
        let mut codes = Vec::new();
        for n in 0..stops {
            let facts =
                StopFacts { tool_uses: Some(tools), stop_hook_active: Some(n > 0), ..facts(&failed, None) };
            let decision = decide(&state, facts);
            codes.push(decision.code);
            state = decision.next;
            state.meta.rhythm.block_cap = cap;
            if state.meta.status != Status::Active {
                break;
            }
        }
        (codes, state)
    }

    #[test]
    fn an_agent_that_only_talks_is_parked_where_the_host_would_throw_the_block_away() {
        let (codes, parked) = talk(capped(Some(8)), 20, 0);
        assert_eq!(codes.len(), 9, "{codes:?}");
        assert!(codes[..8].iter().all(|c| *c == ReasonCode::VerifyFailed), "{codes:?}");
        assert_eq!(codes[8], ReasonCode::BlockCap);
        assert_eq!((parked.meta.status, parked.meta.iteration), (Status::Parked, 9));
        let receipt = parked.meta.receipt.as_ref().unwrap();
        assert_eq!(receipt.outcome, ReasonCode::BlockCap);
    }

    #[test]
    fn the_parked_loop_names_the_cap_and_the_last_block_warns_the_agent() {
        let failed = VerifyOutcome::exited(1, "");
        let (_, before) = talk(capped(Some(3)), 2, 0);
        let last = decide(
            &before,
            StopFacts { tool_uses: Some(0), stop_hook_active: Some(true), ..facts(&failed, None) },
        );
        let Verdict::Block { reason } = &last.verdict else { panic!("{last:?}") };
        assert!(reason.contains("after 3 such blocked stops: this is the last"), "{reason}");
        let mut state = last.next;
        state.meta.rhythm.block_cap = Some(3);
        let parked = decide(
            &state,
            StopFacts { tool_uses: Some(0), stop_hook_active: Some(true), ..facts(&failed, None) },
        );
        assert_eq!(parked.verdict, Verdict::Allow);
        let said = &parked.system_message;
        assert!(said.contains("without calling a tool"), "{said}");
        assert!(said.contains("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"), "{said}");
        assert!(said.contains("/for-loop:resume"), "{said}");
    }

    #[test]
    fn an_agent_that_uses_tools_or_a_cap_turned_off_is_never_parked() {
        let (codes, state) = talk(capped(Some(2)), 12, 1);
        assert!(codes.iter().all(|c| *c == ReasonCode::VerifyFailed), "{codes:?}");
        assert_eq!(state.meta.rhythm.quiet_blocks, 1);
        let failed = VerifyOutcome::exited(1, "");
        let mut unknown = capped(Some(2));
        for n in 0..6 {
            let facts = StopFacts { tool_uses: None, stop_hook_active: Some(n > 0), ..facts(&failed, None) };
            unknown = decide(&unknown, facts).next;
        }
        assert_eq!(unknown.meta.status, Status::Active, "an unreadable turn parks nothing on a guess");
        let (codes, _) = talk(capped(None), 12, 0);
        assert!(codes.iter().all(|c| *c == ReasonCode::VerifyFailed), "{codes:?}");
    }

    #[test]
    fn a_turn_the_host_did_not_continue_from_a_block_starts_the_row_again() {
        let (_, mut state) = talk(capped(Some(3)), 3, 0);
        assert_eq!(state.meta.rhythm.quiet_blocks, 3);
        state.meta.rhythm.block_cap = Some(3);
        let failed = VerifyOutcome::exited(1, "");
        let after = decide(
            &state,
            StopFacts { tool_uses: Some(0), stop_hook_active: Some(false), ..facts(&failed, None) },
        );
        assert_eq!(after.code, ReasonCode::VerifyFailed);
        assert_eq!(after.next.meta.rhythm.quiet_blocks, 1);
        assert_eq!(after.next.meta.harness_overrides, 1, "the host ended the blocked turn: recorded");
    }
}
