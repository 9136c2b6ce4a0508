//! Whether a loop still holds its session: active, parked or ended.

use serde::{Deserialize, Serialize};

/// Whether the loop still holds the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// Every stop of the owning session is judged.
    Active,
    /// Stopped by a breaker or budget (`outcome` says which) and kept for `resume`.
    Parked,
    /// Over: `outcome` says why. Stops are allowed without a word.
    Ended,
}
