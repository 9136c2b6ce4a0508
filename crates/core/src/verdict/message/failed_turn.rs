//! The words about a turn the host ended on an error: what happened and what to do, for the
//! user at once, again at their next prompt, and in `status`.

use jiff::Timestamp;

use crate::state::{FailedTurn, LoopState, ReasonCode};
use crate::support::text::duration::human;

/// What the user reads when the loop's turn ended on `failed` (the loop as recorded after it).
pub(crate) fn told(state: &LoopState, failed: &FailedTurn, now: Timestamp) -> String {
    let meta = &state.meta;
    let at = format!("iteration {} of {}", meta.iteration, meta.settings.max_iterations);
    let said = failed.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
    let handoff = meta
        .host
        .handoff_command()
        .map(|command| format!("; or hand the loop to fresh sessions with {command}"))
        .unwrap_or_default();
    let cancel = meta.host.commands().cancel;
    match failed.kind {
        ReasonCode::ContextExhausted => format!(
            "for-loop: the loop's turn at {at} ended because the conversation outgrew the model's context \
             window{said}, and the host could not compact it. No iteration was used; the loop is still on. \
             To go on: run /compact, then send a prompt (\"go on\") and the loop picks up at {at}{handoff}; \
             {cancel} ends it."
        ),
        ReasonCode::AgentLimited => format!(
            "for-loop: the loop's turn at {at} ended on a usage limit{said}; {}. The loop is parked \
             (agent_limited) and no iteration was used. {}{handoff}; {cancel} ends it.",
            until(failed, now),
            "Once the limit lifts, your next prompt continues it where it was"
        ),
        _ => format!(
            "for-loop: the loop's turn at {at} ended on an API error{said}. No iteration was used; the \
             loop is still on. Send a prompt (\"go on\") to continue at {at}{handoff}; {cancel} ends it."
        ),
    }
}

/// What the user reads when the loop's turn ended on `failed` and only the transcript said so (the
/// host's report never reached for-loop). A usage limit read there parks nothing: the transcript
/// is the agent's to write, and a parked loop lets the agent stop.
pub(crate) fn told_from_transcript(state: &LoopState, failed: &FailedTurn, now: Timestamp) -> String {
    if failed.kind != ReasonCode::AgentLimited {
        return told(state, failed, now);
    }
    let meta = &state.meta;
    let said = failed.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
    format!(
        "for-loop: the loop's turn at iteration {} of {} ended on a usage limit{said}; {}. The host's report \
         of it never reached for-loop, so the loop was not parked: it is still on, no iteration was used, \
         and it goes on with your prompt; {} ends it.",
        meta.iteration,
        meta.settings.max_iterations,
        until(failed, now),
        meta.host.commands().cancel
    )
}

/// When the limit lifts, as a clause: `the account is limited until 15:00 UTC (in 2 h)`.
pub(crate) fn until(failed: &FailedTurn, now: Timestamp) -> String {
    match failed.resets_at {
        Some(at) => {
            let wait = now.duration_until(at).unsigned_abs();
            let when = at.strftime("%Y-%m-%d %H:%M UTC");
            if at > now {
                format!("the account is limited until {when} (in {})", human(wait))
            } else {
                format!("the limit was to lift at {when}")
            }
        }
        None => "the host did not say when the limit lifts".into(),
    }
}

/// The status line: `ended on context_exhausted at 14:02:11 UTC (prompt is too long)`.
pub(crate) fn status_line(failed: &FailedTurn, now: Timestamp) -> String {
    let said = failed.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
    let limit = if failed.kind == ReasonCode::AgentLimited {
        format!("; {}", until(failed, now))
    } else {
        String::new()
    };
    format!(
        "ended on {} at {}{said}{limit}; no iteration used",
        failed.kind,
        failed.at.strftime("%H:%M:%S UTC")
    )
}

/// What the user reads at a prompt that finds the loop parked on a limit: it goes on, or it
/// waits for the reset.
pub(crate) fn after_limit(state: &LoopState, failed: &FailedTurn, now: Timestamp, lifted: bool) -> String {
    let at = format!("iteration {} of {}", state.meta.iteration, state.meta.settings.max_iterations);
    if lifted {
        format!("for-loop: the usage limit has lifted; the loop goes on at {at}.")
    } else {
        format!(
            "for-loop: the loop is parked on a usage limit: {}. A prompt before then meets the same limit; \
             the first one after it continues the loop at {at}.",
            until(failed, now)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn failed(kind: ReasonCode, resets_at: Option<Timestamp>) -> FailedTurn {
        FailedTurn { kind, at: at(1_000), resets_at, detail: Some("what the host said".into()) }
    }

    #[test]
    fn each_kind_says_what_happened_and_what_to_do() {
        let state = sample();
        let exhausted = told(&state, &failed(ReasonCode::ContextExhausted, None), at(1_000));
        assert!(exhausted.contains("outgrew the model's context window (what the host said)"), "{exhausted}");
        assert!(exhausted.contains("run /compact, then send a prompt"), "{exhausted}");
        assert!(exhausted.contains("/for-loop:handoff"), "{exhausted}");
        assert!(exhausted.contains("No iteration was used"), "{exhausted}");
        let limited = told(&state, &failed(ReasonCode::AgentLimited, Some(at(1_000 + 7_200))), at(1_000));
        assert!(limited.contains("limited until 1970-01-01 02:16 UTC (in 2h 00m)"), "{limited}");
        assert!(limited.contains("parked (agent_limited)"), "{limited}");
        let unknown = told(&state, &failed(ReasonCode::AgentLimited, None), at(1_000));
        assert!(unknown.contains("did not say when the limit lifts"), "{unknown}");
        let error = told(&state, &failed(ReasonCode::AgentError, None), at(1_000));
        assert!(error.contains("ended on an API error (what the host said)"), "{error}");
    }

    #[test]
    fn a_host_without_a_handoff_command_is_not_offered_one() {
        let mut state = sample();
        state.meta.host = crate::host::Host::Cursor;
        let exhausted = told(&state, &failed(ReasonCode::ContextExhausted, None), at(1_000));
        assert!(!exhausted.contains("handoff"), "{exhausted}");
    }

    #[test]
    fn status_and_the_prompt_after_a_limit() {
        let limited = failed(ReasonCode::AgentLimited, Some(at(4_600)));
        assert_eq!(
            status_line(&limited, at(1_000)),
            "ended on agent_limited at 00:16:40 UTC (what the host said); the account is limited until \
             1970-01-01 01:16 UTC (in 1h 00m); no iteration used"
        );
        let state = sample();
        assert!(
            after_limit(&state, &limited, at(5_000), true)
                .contains("has lifted; the loop goes on at iteration 1")
        );
        assert!(
            after_limit(&state, &limited, at(1_000), false)
                .contains("A prompt before then meets the same limit")
        );
    }
}
