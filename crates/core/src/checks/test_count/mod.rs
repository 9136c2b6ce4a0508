//! Counting the tests behind a check: the summary lines test runners print ([`summary`]), and the
//! ratchet that holds a loop to as many passing tests as it had ([`ratchet`]).

mod ratchet;
mod summary;

pub(crate) use ratchet::{News, RatchetStatus, TestJudgement, TestRatchet};
#[cfg(test)]
pub(crate) use summary::tally;
pub(crate) use summary::{Counts, MAX_SUITES, Scanner, Tally};
