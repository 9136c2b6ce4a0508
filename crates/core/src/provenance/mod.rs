//! Who asked for a change to a loop, and whether it was really them: origins of command lines,
//! confirmation of the user's commands by the host's transcript, and claims of loops started
//! without a session id.

pub(crate) mod ancestry;
pub(crate) mod claim;
pub(crate) mod confirmation;
pub(crate) mod host_process;
pub(crate) mod origin;
pub(crate) mod sender;
pub(crate) use self::ancestry::Provenance;
pub(crate) use self::confirmation::Settlement;
pub(crate) use self::host_process::HostProcess;
pub(crate) use self::origin::Mutation;
pub(crate) use self::origin::Notice;
pub(crate) use self::sender::AgentPrompt;
