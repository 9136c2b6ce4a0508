//! The host process that sent a session's last hook event, kept beside its loop so that a handoff
//! can tell a session that has ended (its host exited) from one that may be at work.
//!
//! Only a process the hook's own ancestry shows to be its host is kept ([`super::ancestry`]): an
//! event the agent sent from its shell records nothing. The record is a hint for the user's
//! handoff, never for judging a stop: a record that cannot be read, or a platform that shows no
//! process tree, leaves the handoff to its wait.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file in the loop's directory.
use crate::store::LoopFile;

/// A process, named so that a later process given the same id is not taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HostProcess {
    pub pid: i32,
    /// Its start, in clock ticks since boot (`/proc/PID/stat`, field 22).
    pub started: u64,
    /// When it sent the event, in seconds since the epoch.
    pub at: i64,
}

/// Records the host that started this hook, when its ancestry shows one, as the sender of the
/// session's last event. Best effort: a failure only leaves the handoff to its wait.
pub(crate) fn record(dir: &Path, host: crate::host::Host, now: jiff::Timestamp) {
    let Some(pid) = super::ancestry::host_of_this_hook(host) else { return };
    let Some(started) = start_of(pid) else { return };
    if dir.is_dir() {
        let process = HostProcess { pid, started, at: now.as_second() };
        let _ = LoopFile::HostProcess.write(dir, &serde_json::to_vec(&process).unwrap_or_default());
    }
}

/// The host process recorded for the loop in `dir`.
pub(crate) fn recorded(dir: &Path) -> Option<HostProcess> {
    let bytes = LoopFile::HostProcess.read(dir, 4096)?;
    serde_json::from_slice(&bytes).ok()
}

impl HostProcess {
    /// Whether the process has exited: `Some(false)` while it (the same process) runs, `None`
    /// where the platform cannot tell.
    pub(crate) fn has_exited(&self) -> Option<bool> {
        if !cfg!(target_os = "linux") {
            return None;
        }
        Some(start_of(self.pid) != Some(self.started))
    }
}

/// When process `pid` started, where `/proc` shows it.
fn start_of(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    // After the name: state (3), ppid (4), ... starttime (22).
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn a_running_process_has_not_exited_and_one_gone_has() {
        let me = std::process::id().cast_signed();
        let started = start_of(me).expect("this process's start");
        assert_eq!(HostProcess { pid: me, started, at: 0 }.has_exited(), Some(false));
        assert_eq!(
            HostProcess { pid: me, started: started + 1, at: 0 }.has_exited(),
            Some(true),
            "an id reused"
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id().cast_signed();
        child.wait().unwrap();
        assert_eq!(HostProcess { pid, started: 1, at: 0 }.has_exited(), Some(true));
    }

    #[test]
    fn a_missing_or_bad_record_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recorded(dir.path()), None);
        std::fs::write(LoopFile::HostProcess.path(dir.path()), "not json").unwrap();
        assert_eq!(recorded(dir.path()), None);
        std::fs::write(LoopFile::HostProcess.path(dir.path()), r#"{"pid":7,"started":9,"at":100}"#).unwrap();
        assert_eq!(recorded(dir.path()), Some(HostProcess { pid: 7, started: 9, at: 100 }));
    }
}
