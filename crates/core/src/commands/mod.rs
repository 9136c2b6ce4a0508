//! The commands a user runs on a loop: start (and the `/for-loop` text it parses), cancel,
//! resume, rollback and status, and finding the session they act on.

pub(crate) mod cancel;
pub(crate) mod doctor;
pub(crate) mod handoff;
pub(crate) mod notify;
pub(crate) mod request;
pub(crate) mod resume;
pub(crate) mod rollback;
pub(crate) mod session;
pub(crate) mod start;
pub(crate) mod status;
pub(crate) mod strict;
