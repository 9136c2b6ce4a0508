//! A stop made while the session's own background work is in flight: let through unjudged, the
//! wait recorded, or judged with the wait ended ([`crate::verdict::background`] decides).

use crate::host::HookResponse;
use crate::state::{Incident, Rhythm};
use crate::store::Change;
use crate::verdict::{Call, background};

use super::Round;
use super::context::StopContext;
use super::open::{Opened, reopen};

impl StopContext<'_> {
    /// This stop's wait on background work: `Err` with the stop's answer when it waits, else the
    /// loop's rhythm for the verdict and what to tell when a wait was cut short. A stop with
    /// something else to tell (the state restored, a stop let through unjudged) is judged: those
    /// are told and recorded by a verdict.
    pub(super) fn background(&self, opened: &mut Opened<'_>) -> Result<(Rhythm, Option<Incident>), Round> {
        let tasks = self.event.background.as_deref().filter(|_| opened.incidents.is_empty());
        match background::decide(&opened.state, tasks, self.event.stop_hook_active, self.now()) {
            Call::Judge { rhythm, incident } => Ok((rhythm, incident)),
            Call::Wait { mut next, ledger, said } => {
                let mut found = Vec::new();
                let transaction =
                    reopen(self, &mut opened.state, &mut found).map_err(|u| self.unjudged(u))?;
                // A command the prompt hook marked meanwhile still awaits its confirmation.
                next.meta.awaiting.clone_from(&opened.state.meta.awaiting);
                // The command this stop settled is recorded by its commit, as a verdict's is.
                let lines: Vec<_> = self
                    .recorded(opened.settled.take())
                    .into_iter()
                    .chain(found.iter().map(|i| i.note(&opened.state, self.now())))
                    .chain(ledger)
                    .collect();
                let told = crate::verdict::message::incident_lines(&found);
                let change = Change { next: *next, lines, told: found };
                self.finish(&transaction, &opened.state, &change).map_err(Round::Judged)?;
                Err(Round::Judged(HookResponse::allow_with(format!("{told}{said}"))))
            }
        }
    }
}
