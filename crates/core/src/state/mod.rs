//! What a loop is, as data: its state file's settings and progress ([`LoopState`]), the lines of
//! its ledger ([`LedgerEntry`]), why a stop went as it did ([`ReasonCode`]), the receipt of a loop
//! that ends or parks, the incidents told to its user, and a command awaiting confirmation.
//!
//! Nothing here touches a file: where these live and how they change is the store's
//! ([`crate::store`]), which sits above the verdict, so the verdict decides on this data without
//! any way to reach the files it is kept in.

mod awaiting;
mod failing;
mod incident;
mod ledger_entry;
mod loop_state;
mod reason_code;
mod receipt;
mod status;
mod turns;

pub(crate) use awaiting::{Awaiting, Kind as AwaitingKind};
pub(crate) use failing::{
    Change, FailingNames, describe as describe_failing, describe_ledger as describe_failing_in, shown_name,
};
pub(crate) use incident::Incident;
pub(crate) use ledger_entry::{LedgerDecision, LedgerEntry, VerifyRecord, failing_of};
pub(crate) use loop_state::{Handoff, OnLimit};
pub(crate) use loop_state::{LastVerify, LoopState, Meta, SCHEMA_VERSION, Settings, StateError};
pub(crate) use reason_code::ReasonCode;
pub(crate) use receipt::{MetricSummary, Receipt};
pub(crate) use status::Status;
pub(crate) use turns::{FailedTurn, MAX_TASKS_SEEN, Rhythm, SeenTask, Wait};

#[cfg(test)]
pub(crate) use loop_state::tests::sample;

/// The words every re-injection carries before its iteration count. A transcript that holds them
/// shows that for-loop blocked a stop of this session.
pub(crate) const REINJECTION_MARK: &str = "for-loop: this is iteration";
