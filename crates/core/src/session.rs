//! Finding the session a command acts on, and its loop's files, for the commands a user runs
//! (`cancel`, `resume`, `rollback`, `status`).
//!
//! Where the host tells commands no session id (Cursor, Antigravity, Copilot CLI), a command acts
//! on the one loop started in its working directory that is not over, claimed or not. With two
//! or more there, it names them and asks for `--session`.

use std::path::Path;

use crate::environment::Environment;
use crate::host::Host;
use crate::lock::StateLock;
use crate::outcome::Outcome;
use crate::state::{LoopState, Status};
use crate::stop_hook::LOCK_WAIT;
use crate::store::{LoopPaths, Store};

/// Which loop a user's command acts on: `--session`, else the session the host exports, else
/// the one loop started in the working directory (by `--host`'s agent, when given).
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub session_id: Option<String>,
    pub host: Option<Host>,
}

impl Target {
    pub fn session(session_id: &str) -> Target {
        Target { session_id: Some(session_id.to_string()), host: None }
    }

    /// The session: `--session`, else the one the host exports.
    pub fn session_id<'a>(&'a self, env: &'a Environment) -> Option<&'a str> {
        session_id(env, self.session_id.as_deref())
    }

    /// The loop's files, if there is a loop.
    pub fn loop_paths(&self, env: &Environment) -> Result<Option<LoopPaths>, Outcome> {
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
    pub fn here(&self, store: &Store, env: &Environment) -> Result<(LoopPaths, LoopState), Outcome> {
        let everywhere = store.all().into_iter().chain(store.pending_all()).flatten();
        let mut found: Vec<(LoopPaths, LoopState)> = everywhere
            .filter_map(|paths| match paths.load() {
                Ok(Some(state))
                    if state.meta.status != Status::Ended
                        && self.host.is_none_or(|host| state.meta.host == host.name())
                        && same_dir(&state.meta.cwd, &env.cwd) =>
                {
                    Some((paths, state))
                }
                _ => None,
            })
            .collect();
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
pub fn session_id<'a>(env: &'a Environment, given: Option<&'a str>) -> Option<&'a str> {
    given.filter(|s| !s.is_empty()).or(env.session_id())
}

/// Whether two paths name the same directory, symbolic links resolved where they can be.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// The session's loop files, locked; `verb` names the command in errors ("cancel").
pub fn locked(paths: &LoopPaths, verb: &str) -> Result<StateLock, Outcome> {
    StateLock::acquire(&paths.lock, LOCK_WAIT)
        .map_err(|e| Outcome::refused(format!("for-loop: could not {verb}: {e}")))
}
