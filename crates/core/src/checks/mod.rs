//! What a stop checks besides verify's exit code, and verify itself: the oracle fingerprint and its
//! watch, the test suite behind the check, test summaries and the ratchet, skip markers, stalls,
//! the tier verify runs in, the supervisor that runs it detached from the hook, the reviewer that
//! may veto a pass (a command or a built-in agent), the scope a pass's change must stay inside, and
//! a plan with the boxes of its file. Nothing here reads or writes a loop's store.

pub(crate) mod failures;
pub(crate) mod oracle;
pub(crate) mod plan;
pub(crate) mod protect;
pub(crate) mod review;
pub(crate) mod sandbox;
pub(crate) mod scope;
pub(crate) mod stall;
pub(crate) mod test_count;
pub(crate) mod verify;
