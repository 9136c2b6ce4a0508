//! The verdict at a turn end: the pure decision, the facts it decides on, and the words it says.
//! Nothing here touches files, locks or processes.

pub(crate) mod abort;
pub(crate) mod background;
pub(crate) mod block_cap;
pub(crate) mod decision;
pub(crate) mod facts;
pub(crate) mod message;
pub(crate) mod promise;
