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
pub(crate) use self::doctor::DoctorOptions;
pub(crate) use self::handoff::HandoffRequest;
pub(crate) use self::handoff::RunRecord;
pub(crate) use self::request::Flag;
pub(crate) use self::request::LoopFlags;
pub(crate) use self::request::LoopRequest;
pub(crate) use self::request::RequestError;
pub(crate) use self::request::flag_spec::Group;
pub(crate) use self::request::flag_spec::MAX_ATTEMPTS;
pub(crate) use self::request::flag_spec::MAX_MERGE_TRIES;
pub(crate) use self::request::flag_spec::Value;
pub(crate) use self::request::words::Given;
pub(crate) use self::request::words::OptionError;
pub(crate) use self::resume::ResumeOptions;
pub(crate) use self::session::Target;
pub(crate) use self::start::StartOptions;
pub(crate) use self::status::StatusOptions;
pub(crate) use self::strict::Scope;
