//! How an agent run ended, read from the CLI's exit status and structured output: finished, held
//! by a rate or usage limit (not an iteration: wait and run it again), or failed.

use std::time::Duration;

use serde_json::Value;

use super::agent::Agent;

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

/// Classifies a run of `agent` that exited with `code` (`None`: killed by a signal).
pub(crate) fn classify(agent: Agent, code: Option<i32>, output: &str) -> AgentEnd {
    let events: Vec<Value> = output.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let error = events.iter().rev().find_map(|event| error_of(agent, event));
    if let Some(text) = error.as_ref().filter(|text| is_limit(text)) {
        return AgentEnd::Limited { what: one_line(text), wait: reset_in(text) };
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
            Some(event["error"].to_string())
        }
        Agent::Gemini if event["type"] == "error" => Some(event.to_string()),
        Agent::Codex if event["type"] == "turn.failed" => Some(event["error"].to_string()),
        Agent::Codex if event["type"] == "error" => Some(event["message"].to_string()),
        _ => None,
    }
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
        assert!(matches!(classify(Agent::Claude, Some(1), out), AgentEnd::Limited { wait: None, .. }));
        let ok = r#"{"type":"result","is_error":false,"result":"done"}"#;
        assert_eq!(classify(Agent::Claude, Some(0), ok), AgentEnd::Finished);
        let other = r#"{"type":"result","is_error":true,"result":"API Error: 400 invalid"}"#;
        assert!(matches!(classify(Agent::Claude, Some(1), other), AgentEnd::Failed { .. }));
    }

    #[test]
    fn codex_usage_limit_and_gemini_quota() {
        let codex = r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again in 7 seconds."}}"#;
        assert_eq!(
            classify(Agent::Codex, Some(1), codex),
            AgentEnd::Limited {
                what: r#"{"message":"You've hit your usage limit. Try again in 7 seconds."}"#.into(),
                wait: Some(Duration::from_secs(7))
            }
        );
        let gemini = r#"{"type":"result","status":"error","error":{"type":"Error","message":"RESOURCE_EXHAUSTED retryDelay\":\"3s"}}"#;
        assert!(matches!(classify(Agent::Gemini, Some(1), gemini), AgentEnd::Limited { .. }));
    }

    #[test]
    fn exits_without_an_error_event() {
        assert!(matches!(classify(Agent::Codex, Some(2), ""), AgentEnd::Failed { .. }));
        assert!(matches!(classify(Agent::Codex, None, ""), AgentEnd::Failed { .. }));
    }

    #[test]
    fn backoff_doubles_and_is_bounded() {
        let base = Duration::from_secs(10);
        assert_eq!(backoff(base, 0), base);
        assert_eq!(backoff(base, 2), Duration::from_secs(40));
        assert_eq!(backoff(base, 40), Duration::from_secs(1800));
    }
}
