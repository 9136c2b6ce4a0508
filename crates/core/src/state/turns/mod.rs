//! What a loop knows of its session's turns besides their verdicts: a turn the host ended on an
//! error ([`FailedTurn`]), and the rhythm of a real agent's turns ([`Rhythm`]): the stops waited
//! out while its background work ran, and the blocks in a row without a tool call that a host
//! caps.

mod failed_turn;
mod rhythm;

pub(crate) use failed_turn::FailedTurn;
pub(crate) use rhythm::{MAX_TASKS_SEEN, Rhythm, SeenTask, Wait};
