//! A turn the host ended on an error instead of a stop: the conversation outgrew its context
//! window, the account hit a rate or usage limit, or another API error. No Stop hook runs for
//! such a turn, so it is never judged and uses no iteration; the loop keeps this record until its
//! next judged stop, for the user's next prompt, `status` and the report.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::state::ReasonCode;

/// Why and when the loop's last turn ended on an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailedTurn {
    /// `context_exhausted`, `agent_limited` or `agent_error`.
    pub(crate) kind: ReasonCode,
    pub(crate) at: Timestamp,
    /// When the limit lifts, when the host said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resets_at: Option<Timestamp>,
    /// The host's own words for the error, on one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
}

impl FailedTurn {
    /// Whether the limit this turn met has lifted by `now`: a limit with no reset time given is
    /// taken to have lifted, since only trying again tells.
    pub(crate) fn has_reset(&self, now: Timestamp) -> bool {
        self.resets_at.is_none_or(|at| at <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn a_limit_lifts_at_its_reset_or_at_once_without_one() {
        let limited = FailedTurn {
            kind: ReasonCode::AgentLimited,
            at: at(100),
            resets_at: Some(at(200)),
            detail: None,
        };
        assert!(!limited.has_reset(at(199)));
        assert!(limited.has_reset(at(200)));
        assert!(FailedTurn { resets_at: None, ..limited }.has_reset(at(100)));
    }

    #[test]
    fn it_round_trips_and_refuses_unknown_fields() {
        let turn = FailedTurn {
            kind: ReasonCode::ContextExhausted,
            at: at(100),
            resets_at: None,
            detail: Some("prompt is too long".into()),
        };
        let text = serde_json::to_string(&turn).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"context_exhausted","at":"1970-01-01T00:01:40Z","detail":"prompt is too long"}"#
        );
        assert_eq!(serde_json::from_str::<FailedTurn>(&text).unwrap(), turn);
        assert!(
            serde_json::from_str::<FailedTurn>(r#"{"kind":"agent_error","at":"1970-01-01T00:01:40Z","x":1}"#)
                .is_err()
        );
    }
}
