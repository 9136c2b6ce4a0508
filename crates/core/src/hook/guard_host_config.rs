//! The guard's watch on what decides whether for-loop runs at all: at each tool call while a loop
//! runs, the host's settings keys, the plugin's hook list and launcher and the binary's identity
//! are compared with how they were ([`crate::host::config_watch`]), and a change is told to the
//! user at once, in words, and recorded (`host_config_changed`, origin agent). Once the hooks are
//! switched off nothing of for-loop's runs to say so, so the time to say it is the tool call right
//! after the change, while the guard still runs.

use crate::host::Host;
use crate::host::config_watch;
use crate::host::origin::Origin;
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
pub(super) fn notice(env: &Environment, paths: &LoopPaths, seen: &LoopState) -> Option<String> {
    let before = seen.meta.host_config.as_ref()?;
    let now = config_watch::snapshot(env, &seen.meta.cwd);
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
    let now = config_watch::snapshot(env, &state.meta.cwd);
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
