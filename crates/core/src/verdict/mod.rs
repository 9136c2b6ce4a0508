//! The verdict at a turn end: the pure decision, the facts it decides on, and the words it says.
//! Nothing here touches files, locks or processes.

pub(crate) mod abort;
pub(crate) mod background;
pub(crate) mod block_cap;
pub(crate) mod decision;
pub(crate) mod facts;
pub(crate) mod message;
pub(crate) mod promise;
pub(crate) use self::background::Call;
pub(crate) use self::decision::Ask;
pub(crate) use self::decision::Decision;
pub(crate) use self::decision::Gate;
pub(crate) use self::facts::FinalReply;
pub(crate) use self::facts::LoopFiles;
pub(crate) use self::facts::StopFacts;
pub(crate) use self::message::reinjection::DEFAULT_FEEDBACK_TOKENS;
pub(crate) use self::message::reinjection::MAX_FEEDBACK_TOKENS;
pub(crate) use self::message::reinjection::MIN_FEEDBACK_TOKENS;
