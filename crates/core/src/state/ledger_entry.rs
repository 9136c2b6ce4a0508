//! One line of a loop's ledger: what a stop (or a start, a cancel, a note) decided and why, with
//! what the user and anyone asking later need to see of it. The file these lines go to, and who
//! may append to it, are the store's ([`crate::store`]).
//!
//! New fields are optional, so ledgers written by earlier versions still read.

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::checks::Counts;
use crate::checks::VerifyOutcome;
use crate::host::Origin;
use crate::host::Usage;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::Receipt;

/// What a ledger line records. Written as the lowercase word, so ledgers of every version read
/// alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LedgerDecision {
    /// The loop was started.
    Start,
    /// The stop was blocked: the agent goes on.
    Block,
    /// The stop was allowed.
    Allow,
    /// The loop was cancelled, outside a stop.
    Cancel,
    /// The loop was resumed, outside a stop.
    Resume,
    /// The working tree was rolled back to a checkpoint, outside a stop.
    Rollback,
    /// A command on the loop was refused (run in the agent's shell).
    Refused,
    /// Something seen at a stop that is not its verdict (a block the host overrode).
    Note,
}

impl LedgerDecision {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LedgerDecision::Start => "start",
            LedgerDecision::Block => "block",
            LedgerDecision::Allow => "allow",
            LedgerDecision::Cancel => "cancel",
            LedgerDecision::Resume => "resume",
            LedgerDecision::Rollback => "rollback",
            LedgerDecision::Refused => "refused",
            LedgerDecision::Note => "note",
        }
    }
}

impl fmt::Display for LedgerDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LedgerEntry {
    pub(crate) time: Timestamp,
    pub(crate) loop_id: String,
    /// The turn that just ended.
    pub(crate) iteration: u32,
    pub(crate) max_iterations: u32,
    pub(crate) decision: LedgerDecision,
    pub(crate) reason: ReasonCode,
    pub(crate) stop_hook_active: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) verify: Option<VerifyRecord>,
    /// Whether the promise was found, when one is required.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) promise_kept: Option<bool>,
    /// What went wrong, for `internal_error`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) detail: Option<String>,
    /// Oracle files that differed from the start at this stop.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub(crate) oracle_changed: Vec<String>,
    /// The loop's receipt, when it ended or parked at this stop.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) receipt: Option<Receipt>,
    /// Who asked for this change, for lines that record one (cancel, resume, rollback, a
    /// refused command).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) origin: Option<Origin>,
    /// The model usage of the iteration that ended at this stop, per model, where the host's
    /// transcript records it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) tokens: Option<Usage>,
    /// `sha256:<hex>` of the state file the commit that wrote this line left behind.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) state_digest: Option<String>,
    /// A metric loop's measurement at this stop ([`crate::metric::keep::MetricRecord`]).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) metric: Option<crate::metric::MetricRecord>,
    /// What the test runners' summaries in verify's output said, all suites together.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) tests: Option<Counts>,
    /// Skip markers added since the loop started, where this stop looked for them.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub(crate) skip_markers: Vec<String>,
    /// The reviewer's verdict on this stop's passing check, when it ran.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) review: Option<crate::checks::ReviewRecord>,
    /// Files changed outside the loop's scope (`--scope`) at this stop, where it was read; at
    /// most [`crate::checks::scope::MAX_NAMED`] (the detail gives the count beyond).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub(crate) out_of_scope: Vec<String>,
}

/// What the ledger keeps of a verify run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VerifyRecord {
    pub(crate) exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) signal: Option<i32>,
    pub(crate) timed_out: bool,
    pub(crate) duration_ms: u64,
    pub(crate) output_bytes: u64,
    pub(crate) output_digest: String,
    pub(crate) tail: String,
    /// How the command's descendants were kept from writing after its exit (`pid-namespace`,
    /// `subreaper`, `grace`): what its output can be trusted to end with.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) output_ended_by: Option<String>,
    /// The failures the output named (bounded), when a runner's report was recognised; ledgers
    /// of earlier versions have none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) failing: Option<crate::state::FailingNames>,
}

impl VerifyRecord {
    pub(crate) fn of(outcome: &VerifyOutcome) -> VerifyRecord {
        VerifyRecord {
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            output_bytes: outcome.output.total_bytes(),
            output_digest: outcome.output.digest_hex(),
            tail: outcome.output.last_lines(5, 400),
            output_ended_by: Some(outcome.output.containment().name().to_string()),
            failing: failing_of(outcome),
        }
    }
}

/// The names `outcome` reports failing: none when it passed, `None` when no runner's report was
/// recognised.
pub(crate) fn failing_of(outcome: &VerifyOutcome) -> Option<crate::state::FailingNames> {
    if outcome.passed() {
        return Some(crate::state::FailingNames::none());
    }
    crate::state::FailingNames::of(&outcome.output.failures())
}

impl LedgerEntry {
    /// An entry for `state` at the turn it is in, with nothing else recorded yet.
    pub(crate) fn new(
        state: &LoopState,
        time: Timestamp,
        decision: LedgerDecision,
        reason: ReasonCode,
    ) -> LedgerEntry {
        LedgerEntry {
            time,
            loop_id: state.meta.loop_id.clone(),
            iteration: state.meta.iteration,
            max_iterations: state.meta.settings.max_iterations,
            decision,
            reason,
            stop_hook_active: None,
            verify: None,
            promise_kept: None,
            detail: None,
            oracle_changed: Vec::new(),
            receipt: None,
            origin: None,
            tokens: None,
            state_digest: None,
            metric: None,
            tests: None,
            skip_markers: Vec::new(),
            review: None,
            out_of_scope: Vec::new(),
        }
    }
}
