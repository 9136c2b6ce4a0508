//! What `loop-hook doctor` found on this machine and in this project, as plain data: the
//! gatherers fill it in, and [`super::lines`] judges it without touching anything.

use std::path::PathBuf;

use crate::host::Host;
use crate::host::{BinaryFacts, Installation};

/// Everything the checks look at.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// The project doctor was run in (its git top level when it is in git).
    pub project: PathBuf,
    /// The host `--host` named: its checks count even when it looks not installed.
    pub asked: Option<Host>,
    /// The hosts on this machine: their program on `PATH` or their configuration directory.
    pub hosts_found: Vec<Host>,
    pub binary: BinaryFacts,
    pub store: StoreFacts,
    /// Each host checked, in [`Host::ALL`]'s order: its installation as its adapter judges it.
    pub hosts: Vec<(Host, Installation)>,
    pub tier: TierFacts,
    pub loops: Vec<LoopFact>,
    /// How a judged command's descendants are kept from writing after its exit here.
    pub containment: Option<crate::checks::Containment>,
}

/// Where the loop store is and whether a hook can write there.
#[derive(Debug, Clone)]
pub(crate) struct StoreFacts {
    pub root: Option<PathBuf>,
    /// `Err`: why a file could not be created there.
    pub writable: Result<(), String>,
}

impl Default for StoreFacts {
    fn default() -> StoreFacts {
        StoreFacts { root: None, writable: Ok(()) }
    }
}

/// Which tier a Claude Code loop here gets, and what the strict tier lacks.
#[derive(Debug, Clone)]
pub(crate) struct TierFacts {
    /// Claude Code's settings ask for the sandbox strict mode needs; `Err` says what is missing.
    pub sandbox_settings: Result<(), String>,
    /// Why verify cannot be sandboxed here (`None`: bubblewrap works).
    pub bubblewrap: Option<String>,
    /// `socat` is on PATH (Claude Code's sandbox needs it on Linux for its network proxy).
    pub socat: bool,
    pub linux: bool,
}

impl Default for TierFacts {
    /// A machine with every tool, whose Claude Code settings ask for no sandbox.
    fn default() -> TierFacts {
        TierFacts { sandbox_settings: Err("no sandbox".into()), bubblewrap: None, socat: true, linux: true }
    }
}

/// A loop of this project that waits for someone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopFact {
    pub session_id: String,
    pub host: Host,
    pub kind: LoopKind,
    /// Hours since its state last changed.
    pub idle_hours: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoopKind {
    /// Active, but no stop judged for a long time: its session is probably gone.
    Stale,
    /// Parked by a breaker, a budget or Ctrl-C, kept for `resume`.
    Parked,
    /// Started on a host without session ids and never claimed by a conversation.
    Unclaimed,
}
