//! Finding the session a command acts on, and its loop's files, for the commands a user runs
//! (`cancel`, `resume`, `rollback`, `status`).
//!
//! Where the host tells commands no session id (Cursor, Antigravity), a command acts
//! on the one loop started in its working directory that is not over, claimed or not. With two
//! or more there, it names them and asks for `--session`.

use std::path::Path;

use crate::host::Host;
use crate::state::{LoopState, Status};
use crate::store::Transaction;
use crate::store::{LoopPaths, Store};
use crate::support::Environment;
use crate::support::Outcome;

/// Which loop a user's command acts on: `--session`, else the session the host exports, else
/// the one loop started in the working directory (by `--host`'s agent, when given).
#[derive(Debug, Clone, Default)]
pub(crate) struct Target {
    pub session_id: Option<String>,
    pub host: Option<Host>,
}

impl Target {
    /// The session: `--session`, else the one the host exports.
    pub(crate) fn session_id<'a>(&'a self, env: &'a Environment) -> Option<&'a str> {
        session_id(env, self.session_id.as_deref())
    }

    /// The loop's files, if there is a loop.
    pub(crate) fn loop_paths(&self, env: &Environment) -> Result<Option<LoopPaths>, Outcome> {
        let store = Store::locate(env).map_err(|e| Outcome::refused(format!("for-loop: {e}")))?;
        match self.session_id(env) {
            Some(session_id) => {
                let paths = store.paths(session_id);
                Ok(paths.state.exists().then_some(paths))
            }
            None => self.here(&store, env).map(|(paths, _)| Some(paths)),
        }
    }

    /// The one loop that was started in the working directory, by this target's host if it has
    /// one, and is not over; claimed or waiting to be.
    pub(crate) fn here(&self, store: &Store, env: &Environment) -> Result<(LoopPaths, LoopState), Outcome> {
        let everywhere = store.all().into_iter().chain(store.pending_all()).flatten();
        let mut found: Vec<(LoopPaths, LoopState)> = everywhere
            .filter_map(|paths| match paths.load() {
                Ok(Some(state))
                    if state.meta.status != Status::Ended
                        && self.host.is_none_or(|host| state.meta.host == host)
                        && same_dir(&state.meta.cwd, &env.cwd) =>
                {
                    Some((paths, state))
                }
                _ => None,
            })
            .collect();
        // A claim cut short can leave the waiting copy of a loop beside the claimed one (the
        // next stop removes it): the claimed one, listed first, is the loop.
        let mut seen = Vec::new();
        found.retain(|(_, state)| {
            let first = !seen.contains(&state.meta.loop_id);
            seen.push(state.meta.loop_id.clone());
            first
        });
        let cwd = env.cwd.display();
        match found.len() {
            0 => Err(Outcome::refused(format!(
                "for-loop: no session id, and no loop that is not over was started in {cwd}. Pass \
                 --session ID (the host's session or conversation id), or see `loop-hook status --all`."
            ))),
            1 => Ok(found.remove(0)),
            _ => {
                let ids: Vec<String> = found
                    .iter()
                    .map(|(_, state)| match state.meta.session_id.as_str() {
                        "" => format!("a loop not yet claimed ({})", state.meta.loop_id),
                        id => id.to_string(),
                    })
                    .collect();
                Err(Outcome::refused(format!(
                    "for-loop: no session id, and {} loops were started in {cwd}: pass --session ID, one of: {}",
                    found.len(),
                    ids.join(", ")
                )))
            }
        }
    }
}

/// The session: `given`, else the one the host exports.
pub(crate) fn session_id<'a>(env: &'a Environment, given: Option<&'a str>) -> Option<&'a str> {
    given.filter(|s| !s.is_empty()).or(env.session_id())
}

/// Whether two paths name the same directory, symbolic links resolved where they can be.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// The session's loop, held for a change; `verb` names the command in errors ("cancel").
pub(crate) fn locked<'p>(paths: &'p LoopPaths, verb: &str) -> Result<Transaction<'p>, Outcome> {
    Transaction::lock(paths).map_err(|e| Outcome::refused(format!("for-loop: could not {verb}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;

    fn env_in(cwd: &Path) -> Environment {
        Environment::new(std::iter::empty(), cwd.to_path_buf(), "2026-11-22T03:00:00Z".parse().unwrap())
    }

    #[test]
    fn here_finds_the_one_loop_started_in_this_directory_by_this_host() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("store"));
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let env = env_in(&project);
        let any = Target::default();
        assert!(any.here(&store, &env).is_err(), "no loop at all");

        let mut claimed = sample();
        claimed.meta.cwd = project.clone();
        claimed.meta.host = Host::Cursor;
        claimed.meta.session_id = "conv-1".into();
        store.paths("conv-1").save(&claimed).unwrap();
        // The waiting copy an interrupted claim left behind is the same loop, not a second one.
        let mut copy = claimed.clone();
        copy.meta.session_id.clear();
        store.pending_paths("interrupted").save(&copy).unwrap();
        let (paths, state) = any.here(&store, &env).unwrap();
        assert_eq!((paths.dir, state.meta.session_id), (store.paths("conv-1").dir, "conv-1".to_string()));

        let claude = Target { session_id: None, host: Some(Host::ClaudeCode) };
        assert!(claude.here(&store, &env).is_err(), "another host's loop");
        assert!(any.here(&store, &env_in(dir.path())).is_err(), "another directory");

        let mut other = sample();
        other.meta.cwd = project.clone();
        other.meta.loop_id = "another-loop".into();
        other.meta.session_id = "conv-2".into();
        store.paths("conv-2").save(&other).unwrap();
        let refusal = any.here(&store, &env).unwrap_err();
        assert!(
            refusal.stdout.contains("2 loops") && refusal.stdout.contains("conv-2"),
            "{}",
            refusal.stdout
        );
    }
}
