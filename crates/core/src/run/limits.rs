//! How an agent run ended, read from the CLI's exit status and structured output: finished, held
//! by a rate or usage limit (not an iteration: wait and run it again), or failed.
//!
//! What each CLI says when it gives up on a limit (each retries short ones itself):
//! - Claude Code: a `result` event with `is_error` and `api_error_status` 429 or 529.
//! - Gemini CLI: a `result` event with `status: "error"` and a quota message (a daily quota, or a
//!   rate limit it retried until it gave up), and a non-zero exit status.
//! - Codex: `turn.failed` with `You've hit your usage limit. Try again at 6:29 PM.` (the reset in
//!   local time, to the minute, with a date before it when not today), or `exceeded retry limit,
//!   last status: 429 Too Many Requests` for a rate limit.

use std::time::Duration;

use jiff::Zoned;
use jiff::civil::{Date, DateTime, Time};
use serde_json::Value;

use crate::host::Agent;

/// The end of one agent run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentEnd {
    Finished,
    /// A rate limit, an overload or a usage window; `wait` when the CLI said when it resets.
    Limited {
        what: String,
        wait: Option<Duration>,
    },
    Failed {
        what: String,
    },
}

/// Classifies a run of `agent` that exited with `code` (`None`: killed by a signal), at `now`
/// (a reset given as a local time is read in `now`'s time zone).
pub(crate) fn classify(agent: Agent, code: Option<i32>, output: &str, now: &Zoned) -> AgentEnd {
    let events: Vec<Value> = output.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let error = events.iter().rev().find_map(|event| error_of(agent, event));
    if let Some(text) = error.as_ref().filter(|text| is_limit(text)) {
        let wait = reset_in(text).or_else(|| reset_at(text, now));
        return AgentEnd::Limited { what: one_line(text), wait };
    }
    match (code, error) {
        (Some(0), None) => AgentEnd::Finished,
        (_, Some(text)) => AgentEnd::Failed { what: one_line(&text) },
        (Some(code), None) => AgentEnd::Failed { what: format!("{} exited with {code}", agent.program()) },
        (None, None) => AgentEnd::Failed { what: format!("{} was killed by a signal", agent.program()) },
    }
}

/// The error an event reports, as text that names its kind and status.
fn error_of(agent: Agent, event: &Value) -> Option<String> {
    match agent {
        Agent::Claude if event["type"] == "result" && event["is_error"] == true => Some(format!(
            "{} {} {}",
            event["api_error_status"],
            event["api_error_type"].as_str().unwrap_or_default(),
            event["result"].as_str().unwrap_or("error")
        )),
        Agent::Gemini if event["type"] == "result" && event["status"] == "error" => {
            Some(message_of(&event["error"]))
        }
        Agent::Gemini if event["type"] == "error" => Some(message_of(event)),
        Agent::Codex if event["type"] == "turn.failed" => Some(message_of(&event["error"])),
        Agent::Codex if event["type"] == "error" => Some(message_of(event)),
        _ => None,
    }
}

/// An error's `message` text, or the whole error when it has none.
fn message_of(error: &Value) -> String {
    error["message"].as_str().map_or_else(|| error.to_string(), str::to_owned)
}

fn is_limit(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "429",
        "529",
        "rate_limit",
        "rate limit",
        "overloaded",
        "usage limit",
        "usage_limit",
        "resource_exhausted",
        "quota",
        "hit your limit",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The reset time in `retry after 7s`, `"resets_in_seconds":7`, `try again in 7 seconds`.
fn reset_in(text: &str) -> Option<Duration> {
    let lower = text.to_lowercase();
    for marker in ["resets_in_seconds\":", "retry after ", "retrydelay\":\"", "try again in "] {
        if let Some(at) = lower.find(marker) {
            let digits: String =
                lower[at + marker.len()..].trim_start().chars().take_while(char::is_ascii_digit).collect();
            if let Ok(secs) = digits.parse::<u64>() {
                return Some(Duration::from_secs(secs));
            }
        }
    }
    None
}

/// The wait until the local time in `Try again at 6:29 PM.` or `Try again at Nov 24th, 2026 6:29
/// PM.` (Codex), from `now`. The time is to the minute, so the wait ends when that minute begins;
/// a time already reached gives no wait, and the caller backs off until the limit lifts.
fn reset_at(text: &str, now: &Zoned) -> Option<Duration> {
    const MARKER: &str = "try again at ";
    let at = text.to_lowercase().find(MARKER)? + MARKER.len();
    let rest = text.get(at..)?.split(['.', '\n']).next()?.trim();
    let words: Vec<&str> = rest.rsplitn(3, ' ').collect();
    let (date, clock, meridiem) = match words[..] {
        [meridiem, clock] => (now.date(), clock, meridiem),
        [meridiem, clock, day] => (parse_day(day)?, clock, meridiem),
        _ => return None,
    };
    let reset =
        DateTime::from_parts(date, parse_clock(clock, meridiem)?).to_zoned(now.time_zone().clone()).ok()?;
    let wait = now.duration_until(&reset);
    (wait > jiff::SignedDuration::ZERO).then(|| wait.unsigned_abs())
}

/// `Nov 24th, 2026`.
fn parse_day(text: &str) -> Option<Date> {
    let cleaned =
        ["st,", "nd,", "rd,", "th,"].iter().fold(text.to_string(), |t, suffix| t.replace(suffix, ","));
    jiff::fmt::strtime::parse("%b %d, %Y", cleaned.trim()).ok()?.to_date().ok()
}

/// `6:29` and `PM`.
fn parse_clock(clock: &str, meridiem: &str) -> Option<Time> {
    let (hour, minute) = clock.split_once(':')?;
    let (hour, minute): (i8, i8) = (hour.parse().ok()?, minute.parse().ok()?);
    if !(1..=12).contains(&hour) {
        return None;
    }
    let hour = match meridiem.to_ascii_uppercase().as_str() {
        "AM" => hour % 12,
        "PM" => hour % 12 + 12,
        _ => return None,
    };
    Time::new(hour, minute, 0, 0).ok()
}

fn one_line(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(300).collect()
}

/// The wait before the `attempt`-th retry (0-based) when the CLI gave no reset time: doubling
/// from `base`, at most 30 minutes.
pub(crate) fn backoff(base: Duration, attempt: u32) -> Duration {
    base.saturating_mul(1 << attempt.min(16)).min(Duration::from_secs(30 * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_rate_limit_is_a_limit() {
        let out = r#"{"type":"result","is_error":true,"api_error_status":429,"api_error_type":"rate_limit_error","result":"API Error: Request rejected (429)"}"#;
        let now = now();
        assert!(matches!(classify(Agent::Claude, Some(1), out, &now), AgentEnd::Limited { wait: None, .. }));
        let ok = r#"{"type":"result","is_error":false,"result":"done"}"#;
        assert_eq!(classify(Agent::Claude, Some(0), ok, &now), AgentEnd::Finished);
        let other = r#"{"type":"result","is_error":true,"result":"API Error: 400 invalid"}"#;
        assert!(matches!(classify(Agent::Claude, Some(1), other, &now), AgentEnd::Failed { .. }));
    }

    /// 2026-11-23 18:29:16 in a zone 2 hours east of UTC.
    fn now() -> Zoned {
        let zone = jiff::tz::TimeZone::fixed(jiff::tz::offset(2));
        DateTime::constant(2026, 11, 23, 18, 29, 16, 0).to_zoned(zone).unwrap()
    }

    fn codex_failed(message: &str) -> String {
        serde_json::json!({"type": "turn.failed", "error": {"message": message}}).to_string()
    }

    fn wait_of(agent: Agent, output: &str) -> Option<Duration> {
        match classify(agent, Some(1), output, &now()) {
            AgentEnd::Limited { wait, .. } => wait,
            other => panic!("not a limit: {other:?}"),
        }
    }

    #[test]
    fn codex_usage_limit_waits_until_the_local_reset_time() {
        let later = codex_failed("You\u{2019}ve hit your usage limit. Try again at 9:05 PM.");
        assert_eq!(
            classify(Agent::Codex, Some(1), &later, &now()),
            AgentEnd::Limited {
                what: "You\u{2019}ve hit your usage limit. Try again at 9:05 PM.".into(),
                wait: Some(Duration::from_secs(2 * 3600 + 35 * 60 + 44))
            }
        );
        let tomorrow = codex_failed("You've hit your usage limit. Try again at Nov 24th, 2026 12:10 AM.");
        assert_eq!(wait_of(Agent::Codex, &tomorrow), Some(Duration::from_secs(5 * 3600 + 40 * 60 + 44)));
        // That minute has begun: no wait to give, the driver backs off instead.
        assert_eq!(wait_of(Agent::Codex, &codex_failed("usage limit. Try again at 6:29 PM.")), None);
        assert_eq!(
            wait_of(Agent::Codex, &codex_failed("You've hit your usage limit. Try again later.")),
            None
        );
        let rate = codex_failed("exceeded retry limit, last status: 429 Too Many Requests");
        assert_eq!(wait_of(Agent::Codex, &rate), None);
        for garbled in
            ["Try again at 25:61 PM.", "Try again at 6:29.", "Try again at Smarch 3rd, 2026 1:00 AM."]
        {
            assert_eq!(
                wait_of(Agent::Codex, &codex_failed(&format!("usage limit. {garbled}"))),
                None,
                "{garbled}"
            );
        }
    }

    #[test]
    fn gemini_daily_quota_is_a_limit() {
        let out = concat!(
            r#"{"type":"init","session_id":"s"}"#,
            "\n",
            r#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: You have exhausted your daily quota on this model.]\nPlease wait and try again later."}}"#
        );
        assert_eq!(wait_of(Agent::Gemini, out), None);
    }

    #[test]
    fn codex_usage_limit_and_gemini_quota() {
        let codex = r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again in 7 seconds."}}"#;
        assert_eq!(
            classify(Agent::Codex, Some(1), codex, &now()),
            AgentEnd::Limited {
                what: "You've hit your usage limit. Try again in 7 seconds.".into(),
                wait: Some(Duration::from_secs(7))
            }
        );
        let gemini = r#"{"type":"result","status":"error","error":{"type":"Error","message":"RESOURCE_EXHAUSTED retryDelay\":\"3s"}}"#;
        assert!(matches!(classify(Agent::Gemini, Some(1), gemini, &now()), AgentEnd::Limited { .. }));
    }

    #[test]
    fn exits_without_an_error_event() {
        assert!(matches!(classify(Agent::Codex, Some(2), "", &now()), AgentEnd::Failed { .. }));
        assert!(matches!(classify(Agent::Codex, None, "", &now()), AgentEnd::Failed { .. }));
    }

    #[test]
    fn backoff_doubles_and_is_bounded() {
        let base = Duration::from_secs(10);
        assert_eq!(backoff(base, 0), base);
        assert_eq!(backoff(base, 2), Duration::from_secs(40));
        assert_eq!(backoff(base, 40), Duration::from_secs(1800));
    }
}
