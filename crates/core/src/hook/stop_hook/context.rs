//! One stop's context: the event, its host, and the loop store located once, which every stage
//! of the stop reads from instead of locating it again.

use std::cell::RefCell;
use std::fs;

use crate::host::Host;
use crate::host::StopEvent;
use crate::provenance::Settlement;
use crate::state::{LedgerEntry, LoopState};
use crate::store::CommitError;
use crate::store::Known;
use crate::store::{LoopPaths, Store};
use crate::support::Environment;

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
    /// The command the loop awaited confirmation of when the stop began, looked up once: each
    /// reading of the loop applies it, and the stop's one commit records it.
    pub(super) settlement: Option<Settlement>,
    /// What settling that command told the user, once a commit took it.
    told: RefCell<Option<String>>,
    /// Those words while the commit that records them has not run yet.
    pending: RefCell<Option<String>>,
}

/// A command's settlement, applied to the loop as read: its ledger line and its words, for the
/// commit that records it.
pub(super) struct Settled {
    pub(super) line: LedgerEntry,
    pub(super) told: Option<String>,
}

impl<'e> StopContext<'e> {
    /// The context of `event`; `None` when no loop store can be located, where no loop can be.
    pub(super) fn locate(env: &'e Environment, host: Host, event: &'e StopEvent) -> Option<StopContext<'e>> {
        let store = Store::locate(env).ok()?;
        let paths = store.paths(&event.session_id);
        Some(StopContext {
            env,
            host,
            event,
            store,
            paths,
            known: Known::default(),
            settlement: None,
            told: RefCell::new(None),
            pending: RefCell::new(None),
        })
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

    /// `state` as it is once the awaited command is settled, with the settlement's line and
    /// words; `state` as it is, and `None`, when it awaits no longer that command.
    pub(super) fn settled(&self, state: LoopState) -> (LoopState, Option<Settled>) {
        match self.settlement.as_ref().and_then(|s| s.apply(&state, self.now())) {
            Some((next, line, told)) => (next, Some(Settled { line, told })),
            None => (state, None),
        }
    }

    /// The settlement's line, for the commit that records it; its words go with the stop's
    /// answer once that commit has run ([`StopContext::committed`]).
    pub(super) fn recorded(&self, settled: Option<Settled>) -> Vec<LedgerEntry> {
        let Some(Settled { line, told }) = settled else { return Vec::new() };
        if told.is_some() {
            *self.pending.borrow_mut() = told;
        }
        vec![line]
    }

    /// The settlement's words after the commit that was to record it: as they are, or saying that
    /// it could not be recorded (the loop is then as it was, the command still awaiting).
    pub(super) fn committed(&self, failed: Option<&CommitError>) {
        let Some(words) = self.pending.borrow_mut().take() else { return };
        *self.told.borrow_mut() = Some(match failed {
            None => words,
            Some(e) => Settlement::not_recorded(Some(words), &e.to_string()),
        });
    }

    /// What settling the awaited command told, when a commit recorded it.
    pub(super) fn settled_words(&self) -> Option<String> {
        self.told.borrow().clone()
    }
}
