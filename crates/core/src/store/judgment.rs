//! A judgment in progress, marked on disk so that a hook killed in the middle of one is noticed.
//!
//! A hook that is killed (by a process the verify command started, a git filter, a background job
//! of the agent, or the host's timeout) prints nothing, and every host then lets the stop through:
//! Claude Code ignores `onFailure: "block"` on Stop hooks. Before it runs verify, the hook writes
//! `judging.json` (its pid, the iteration, when it began); the commit that ends the judgment
//! removes it. A marker found later whose process is gone, or that is older than any judgment can
//! take, is a judgment that never finished: the next stop records `hook_interrupted`, keeps the
//! loop on, and tells the user and the agent. The prompt hook can ask [`Judgment::interrupted`] to
//! tell the user at their next prompt too.

use std::fs;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::state::Incident;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::store::{self, LoopPaths};

/// Beyond verify's own timeout: its kill grace, draining its output, the tree fingerprint.
const MARGIN: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Judgment {
    pub(crate) pid: u32,
    pub(crate) loop_id: String,
    pub(crate) iteration: u32,
    pub(crate) started_at: Timestamp,
    /// The longest this judgment can take while its process lives.
    pub(crate) deadline: Timestamp,
}

/// What a marker found on disk means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    None,
    /// Another hook process is judging this session's stop right now (the hook installed twice):
    /// it answers, this one stays out.
    Running(Judgment),
    /// A judgment that never finished.
    Interrupted(Judgment),
}

/// Removes the marker when dropped, unless the process is killed first.
#[derive(Debug)]
pub(crate) struct Marked<'a> {
    paths: &'a LoopPaths,
}

impl Drop for Marked<'_> {
    fn drop(&mut self) {
        if Judgment::read(self.paths).is_some_and(|j| j.pid == std::process::id()) {
            let _ = fs::remove_file(marker(self.paths));
        }
    }
}

fn marker(paths: &LoopPaths) -> std::path::PathBuf {
    paths.dir.join("judging.json")
}

impl Judgment {
    /// Marks a judgment of `state` beginning now. The marker stays until the returned guard is
    /// dropped: after the commit, or on any early return. A marker that cannot be written
    /// (a full disk) is not a reason to let the stop through.
    pub(crate) fn begin<'a>(paths: &'a LoopPaths, state: &LoopState, now: Timestamp) -> Marked<'a> {
        let took = Duration::from_secs(state.meta.settings.verify_timeout_secs) + MARGIN;
        let judgment = Judgment {
            pid: std::process::id(),
            loop_id: state.meta.loop_id.clone(),
            iteration: state.meta.iteration,
            started_at: now,
            deadline: now + SignedDuration::try_from(took).unwrap_or(SignedDuration::MAX),
        };
        if let Ok(bytes) = serde_json::to_vec(&judgment) {
            let _ = store::write_atomic(&marker(paths), &bytes, false);
        }
        Marked { paths }
    }

    fn read(paths: &LoopPaths) -> Option<Judgment> {
        let bytes = store::read_regular(&marker(paths), 64 << 10).ok()??;
        serde_json::from_slice(&bytes).ok()
    }

    /// The marker in the loop's directory, and what it means now.
    pub(crate) fn found(paths: &LoopPaths, now: Timestamp) -> Found {
        match Judgment::read(paths) {
            None if marker(paths).exists() => {
                // Unreadable: a judgment cut short while writing it, or a forgery; either way
                // nobody is judging.
                let _ = fs::remove_file(marker(paths));
                Found::None
            }
            None => Found::None,
            Some(j) if j.pid != std::process::id() && now < j.deadline && platform::is_loop_hook(j.pid) => {
                Found::Running(j)
            }
            Some(j) => Found::Interrupted(j),
        }
    }

    /// Removes the marker of a judgment that never finished, once it is being told.
    pub(crate) fn clear(paths: &LoopPaths) {
        let _ = fs::remove_file(marker(paths));
    }

    /// Words for the user, for a prompt hook that tells them at their next prompt: `None` when
    /// no judgment was cut short. Changes nothing; the next stop records it.
    pub(crate) fn interrupted(paths: &LoopPaths, now: Timestamp) -> Option<String> {
        match Judgment::found(paths, now) {
            Found::Interrupted(j) => Some(j.incident(now).what),
            _ => None,
        }
    }

    /// The incident of this judgment never having finished.
    pub(crate) fn incident(&self, now: Timestamp) -> Incident {
        Incident::new(
            ReasonCode::HookInterrupted,
            now,
            format!(
                "the hook judging iteration {} (started {}) was killed before it answered, so the \
                 host let that stop through unjudged; the loop goes on",
                self.iteration,
                self.started_at.strftime("%H:%M:%S UTC")
            ),
        )
    }
}

#[cfg(unix)]
mod platform {
    /// Whether `pid` is a live `loop-hook` process. On Linux the process's name is checked, so
    /// a reused pid does not pass for a hook; elsewhere, that the process exists.
    pub(super) fn is_loop_hook(pid: u32) -> bool {
        let Ok(raw) = i32::try_from(pid) else { return false };
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None).is_err() {
            return false;
        }
        match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(name) => name.trim() == "loop-hook",
            Err(_) => !cfg!(target_os = "linux"),
        }
    }
}

#[cfg(not(unix))]
mod platform {
    pub(super) fn is_loop_hook(_pid: u32) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;
    use crate::store::Store;

    fn now() -> Timestamp {
        "2026-11-22T03:10:00Z".parse().unwrap()
    }

    #[test]
    fn a_finished_judgment_leaves_no_marker() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().join("for-loop")).paths("s");
        fs::create_dir_all(&paths.dir).unwrap();
        {
            let _marked = Judgment::begin(&paths, &sample(), now());
            assert!(marker(&paths).is_file());
            // This process's own marker is not someone else's judgment.
            assert!(matches!(Judgment::found(&paths, now()), Found::Interrupted(_)));
        }
        assert!(!marker(&paths).exists());
        assert_eq!(Judgment::found(&paths, now()), Found::None);
    }

    #[test]
    fn a_marker_whose_process_is_gone_or_too_old_is_an_interrupted_judgment() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().join("for-loop")).paths("s");
        fs::create_dir_all(&paths.dir).unwrap();
        let gone = Judgment {
            pid: u32::MAX - 1,
            loop_id: "l".into(),
            iteration: 3,
            started_at: now(),
            deadline: now() + SignedDuration::from_secs(360),
        };
        fs::write(marker(&paths), serde_json::to_vec(&gone).unwrap()).unwrap();
        let Found::Interrupted(found) = Judgment::found(&paths, now()) else { panic!() };
        let words = Judgment::interrupted(&paths, now()).unwrap();
        assert!(words.contains("judging iteration 3 (started 03:10:00 UTC) was killed"), "{words}");
        assert_eq!(found.incident(now()).code, ReasonCode::HookInterrupted);
        assert!(marker(&paths).exists(), "asking changes nothing");
        Judgment::clear(&paths);
        assert_eq!(Judgment::found(&paths, now()), Found::None);

        fs::write(marker(&paths), "{garbage").unwrap();
        assert_eq!(Judgment::found(&paths, now()), Found::None);
        assert!(!marker(&paths).exists());
    }
}
