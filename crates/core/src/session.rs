//! Finding the session a command acts on, and its loop's files, for the commands a user runs
//! (`cancel`, `resume`, `rollback`, `status`).

use crate::environment::Environment;
use crate::lock::StateLock;
use crate::outcome::Outcome;
use crate::stop_hook::LOCK_WAIT;
use crate::store::{LoopPaths, Store};

/// The session: `--session`, else the one the host exports.
pub fn session_id<'a>(env: &'a Environment, given: Option<&'a str>) -> Result<&'a str, Outcome> {
    given.filter(|s| !s.is_empty()).or(env.session_id()).ok_or_else(|| {
        Outcome::refused("for-loop: no session id: pass --session ID (the host's session id).")
    })
}

/// The session's loop files, if it has a loop.
pub fn loop_paths(env: &Environment, given: Option<&str>) -> Result<Option<LoopPaths>, Outcome> {
    let session_id = session_id(env, given)?;
    let store = Store::locate(env).map_err(|e| Outcome::refused(format!("for-loop: {e}")))?;
    let paths = store.paths(session_id);
    Ok(paths.state.exists().then_some(paths))
}

/// The session's loop files, locked; `verb` names the command in errors ("cancel").
pub fn locked(paths: &LoopPaths, verb: &str) -> Result<StateLock, Outcome> {
    StateLock::acquire(&paths.lock, LOCK_WAIT)
        .map_err(|e| Outcome::refused(format!("for-loop: could not {verb}: {e}")))
}
