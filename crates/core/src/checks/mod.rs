//! What a stop checks besides verify's exit code, and verify itself: the oracle fingerprint and its
//! watch, the test suite behind the check, test summaries and the ratchet, skip markers, stalls,
//! the tier verify runs in, the supervisor that runs it detached from the hook, and the reviewer
//! that may veto a pass. Nothing here reads or writes a loop's store.

pub(crate) mod capture;
pub(crate) mod oracle;
pub(crate) mod oracle_change;
pub(crate) mod oracle_watch;
pub(crate) mod plan;
pub(crate) mod protect;
pub(crate) mod review;
pub(crate) mod skip_marker;
pub(crate) mod stall;
pub(crate) mod strict;
pub(crate) mod supervisor;
pub(crate) mod test_ratchet;
pub(crate) mod test_suite;
pub(crate) mod test_summary;
pub(crate) mod verify;
