//! The watch on what decides whether for-loop runs at all: at each tool call, stop and prompt
//! while a loop runs, the host's settings keys, for-loop's hook files and launcher and the
//! binary's identity are compared with how they were ([`crate::host::config_watch`]), and a
//! change is told to the user at once, in words, and recorded (`host_config_changed`, origin
//! agent). Once the hooks are switched off nothing of for-loop's runs to say so, so the time to
//! say it is the first hook that runs after the change, while the host still runs them (it loaded
//! them when the session started).
//!
//! At a stop the change is one of the stop's incidents: told to the user and the agent, recorded
//! by the stop's own commit, and a pass at that stop does not count (`hooks_changed`). A change a
//! tool call or a prompt told is told again at the next judged stop, whose pass it takes away
//! too: the loop never ends as verified at a stop that has not said so.

use crate::host::Host;
use crate::host::config_watch;
use crate::host::origin::Origin;
use crate::state::Incident;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::LoopPaths;
use crate::store::custody::Custody;
use crate::store::transaction::Transaction;
use crate::support::environment::Environment;

/// What to tell the user about a change since the last look, if any. The loop's start took the
/// snapshot; each change is told once, and becomes the snapshot later looks compare with. A loop
/// started before snapshots were taken is not watched.
pub(crate) fn notice(env: &Environment, paths: &LoopPaths, seen: &LoopState) -> Option<String> {
    let before = seen.meta.host_config.as_ref()?;
    let now = seen.meta.host.config_snapshot_since(env, &seen.meta.cwd, before);
    if config_watch::changes(before, &now).is_empty() {
        return None;
    }
    let Ok((transaction, Custody::Loop { state, incidents })) = Transaction::open(paths, env.now) else {
        return None;
    };
    let changes = config_watch::changes(state.meta.host_config.as_ref()?, &now);
    if !state.is_active() || changes.is_empty() {
        return None;
    }
    // What custody repaired on the way is recorded here, as a judged stop would.
    let mut lines: Vec<LedgerEntry> = incidents
        .iter()
        .filter(|incident| !incident.recorded)
        .map(|incident| LedgerEntry {
            time: incident.at,
            detail: Some(incident.what.clone()),
            ..LedgerEntry::new(&state, env.now, LedgerDecision::Note, incident.code)
        })
        .collect();
    lines.push(LedgerEntry {
        origin: Some(Origin::Agent),
        detail: Some(changes.join("; ")),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Note, ReasonCode::HostConfigChanged)
    });
    let mut next = state.clone();
    next.meta.host_config = Some(now);
    // Told even when it cannot be recorded: the user hearing it is what matters now.
    let recorded = transaction.commit(&next, &lines).is_ok();
    Some(words(&changes, state.meta.host, recorded))
}

/// At a judged stop of `state`'s loop: the change since the last look, as an incident for the
/// stop to tell and record, and the snapshot the loop keeps from now on; `None` when nothing
/// changed or the loop is not watched. Nothing is written here: the stop's one commit records it.
pub(crate) fn at_stop(env: &Environment, state: &LoopState) -> Option<(Incident, config_watch::Snapshot)> {
    let before = state.meta.host_config.as_ref()?;
    let now = state.meta.host.config_snapshot_since(env, &state.meta.cwd, before);
    let changes = config_watch::changes(before, &now);
    if changes.is_empty() {
        return None;
    }
    let what = format!(
        "something that decides whether for-loop's hooks run at all changed while the loop ran: {}. \
         With the hooks switched off or pointed elsewhere, for-loop can neither hold the agent nor \
         judge its stops from the next session on; put it back, or {} if you meant to end the loop",
        changes.join("; "),
        state.meta.host.commands().cancel
    );
    Some((Incident::new(ReasonCode::HostConfigChanged, env.now, what), now))
}

/// Takes the snapshot again after the user's own change of the settings (`/for-loop:strict`), so
/// that the guard does not report it as the agent's. Recorded as a change with origin user.
pub(crate) fn user_changed(env: &Environment, paths: &LoopPaths, why: &str) {
    let Ok((transaction, Custody::Loop { state, incidents })) = Transaction::open(paths, env.now) else {
        return;
    };
    let Some(before) = state.meta.host_config.as_ref().filter(|_| state.is_active() && incidents.is_empty())
    else {
        return;
    };
    let now = state.meta.host.config_snapshot_since(env, &state.meta.cwd, before);
    let changes = config_watch::changes(before, &now);
    if changes.is_empty() {
        return;
    }
    let entry = LedgerEntry {
        origin: Some(Origin::User),
        detail: Some(format!("{why}: {}", changes.join("; "))),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Note, ReasonCode::HostConfigChanged)
    };
    let mut next = state.clone();
    next.meta.host_config = Some(now);
    let _ = transaction.commit(&next, &[entry]);
}

/// The user's words for `changes`.
fn words(changes: &[String], host: Host, recorded: bool) -> String {
    let list = changes.join("\n  - ");
    format!(
        "for-loop: while your loop runs, something that decides whether for-loop's hooks run at all \
         has changed:\n  - {list}\nIf you did not change it, the agent did. With the hooks switched off or \
         pointed elsewhere, for-loop can neither hold the agent to the check nor judge its stops, and \
         may say nothing more. Put it back, or run {} if you meant to end the loop.{}",
        host.commands().cancel,
        if recorded { " Recorded in the loop's ledger as host_config_changed." } else { "" }
    )
}
