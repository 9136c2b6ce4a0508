//! How a loop's agent works between judged stops, as far as the host's own rules care: the stops
//! let through while its background work ran, and the blocks in a row in which it called no
//! tool, which the host caps on its own (Claude Code's `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The most tasks a wait remembers: enough for any real session, bounded whatever the host sends.
pub(crate) const MAX_TASKS_SEEN: usize = 32;

/// What the loop keeps of the agent's rhythm.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rhythm {
    /// Blocks in a row in which the agent called no tool, as the host counts them toward its
    /// cap: the last judged stop's block included.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quiet_blocks: u32,
    /// The host's cap of those, as the hook read it at the last judged stop; `None`: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_cap: Option<u32>,
    /// The wait on background work in progress, since the last judged stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
    /// Stops let through unjudged while background work ran, over the whole loop.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waited_stops: u32,
    /// Seconds spent in waits that have ended, over the whole loop.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub waited_secs: u64,
    /// Waits the bound cut short: stops judged although background work was still in flight.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waits_cut: u32,
    /// The ids of background work a wait ran out on: never waited on again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overdue: Vec<String>,
}

/// One wait: stops let through in a row, each with background work in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Wait {
    /// The first stop let through.
    pub since: Timestamp,
    /// Stops let through so far.
    pub stops: u32,
    /// The work seen in flight, by the host's id, with when each was first seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<SeenTask>,
}

/// A piece of background work, and when a stop first saw it in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SeenTask {
    pub id: String,
    pub since: Timestamp,
}

impl Rhythm {
    /// Whether nothing is kept: a loop that never waited nor was blocked writes no `rhythm`.
    pub(crate) fn is_unset(&self) -> bool {
        *self == Rhythm::default()
    }

    /// Seconds waited over the whole loop, the wait in progress included.
    pub(crate) fn total_waited_secs(&self, now: Timestamp) -> u64 {
        let current = self
            .wait
            .as_ref()
            .map_or(0, |w| u64::try_from(now.duration_since(w.since).as_secs()).unwrap_or(0));
        self.waited_secs.saturating_add(current)
    }

    /// This rhythm once the wait in progress (if any) has ended at `now`.
    pub(crate) fn wait_ended(&self, now: Timestamp) -> Rhythm {
        Rhythm { waited_secs: self.total_waited_secs(now), wait: None, ..self.clone() }
    }
}

// serde's `skip_serializing_if` hands the field over by reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn an_ended_wait_adds_its_time_to_the_total() {
        let rhythm = Rhythm {
            wait: Some(Wait { since: at(100), stops: 2, tasks: vec![] }),
            waited_secs: 30,
            ..Rhythm::default()
        };
        assert_eq!(rhythm.total_waited_secs(at(160)), 90);
        let ended = rhythm.wait_ended(at(160));
        assert_eq!((ended.wait, ended.waited_secs), (None, 90));
        assert!(Rhythm::default().is_unset());
    }

    #[test]
    fn it_round_trips_and_refuses_unknown_fields() {
        let rhythm = Rhythm {
            quiet_blocks: 3,
            block_cap: Some(8),
            wait: Some(Wait {
                since: at(100),
                stops: 1,
                tasks: vec![SeenTask { id: "b1".into(), since: at(100) }],
            }),
            ..Rhythm::default()
        };
        let text = serde_json::to_string(&rhythm).unwrap();
        assert_eq!(serde_json::from_str::<Rhythm>(&text).unwrap(), rhythm);
        assert!(serde_json::from_str::<Rhythm>(r#"{"quiet_blocks":1,"x":1}"#).is_err());
        assert_eq!(serde_json::to_string(&Rhythm::default()).unwrap(), "{}");
    }
}
