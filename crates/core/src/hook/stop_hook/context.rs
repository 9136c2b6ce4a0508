//! One stop's context: the event, its host, and the loop store located once, which every stage
//! of the stop reads from instead of locating it again.

use std::fs;

use crate::host::Host;
use crate::host::event::StopEvent;
use crate::store::custody::Known;
use crate::store::{LoopPaths, Store};
use crate::support::environment::Environment;

/// What a stop knows before it reads its loop.
pub(super) struct StopContext<'e> {
    pub(super) env: &'e Environment,
    pub(super) host: Host,
    pub(super) event: &'e StopEvent,
    pub(super) store: Store,
    /// The files of the event's session's loop.
    pub(super) paths: LoopPaths,
    /// The loop's state as this stop has read it: every later reading parses only what changed.
    pub(super) known: Known,
}

impl<'e> StopContext<'e> {
    /// The context of `event`; `None` when no loop store can be located, where no loop can be.
    pub(super) fn locate(env: &'e Environment, host: Host, event: &'e StopEvent) -> Option<StopContext<'e>> {
        let store = Store::locate(env).ok()?;
        let paths = store.paths(&event.session_id);
        Some(StopContext { env, host, event, store, paths, known: Known::default() })
    }

    /// Whether the session has a loop's files: its state, or its last good copy (a loop whose
    /// state was deleted, which is judged and restored, never let through quietly).
    pub(super) fn has_loop_files(&self) -> bool {
        let armed = self.paths.armed.as_ref().is_some_and(|armed| fs::symlink_metadata(armed).is_ok());
        armed || self.paths.state.exists()
    }

    pub(super) fn now(&self) -> jiff::Timestamp {
        self.env.now
    }
}
