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
use crate::host::Origin;
use crate::host::config_watch;
use crate::state::Incident;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::Custody;
use crate::store::LoopPaths;
use crate::store::Transaction;
use crate::support::Environment;

/// The host's settings and for-loop's files as they are now, when they changed since `seen`'s
/// look (the loop as the prompt hook read it, without its lock); `None` when nothing changed or
/// the loop is not watched. The loop's start took the first look; each change is told once, and
/// becomes the look later ones compare with.
pub(crate) fn changed_since(env: &Environment, seen: &LoopState) -> Option<config_watch::Snapshot> {
    let before = seen.meta.host_config.as_ref()?;
    let now = seen.meta.host.config_snapshot_since(env, &seen.meta.cwd, before);
    (!config_watch::changes(before, &now).is_empty()).then_some(now)
}

/// A change the prompt hook found, recorded in `state` (the loop as it holds it) for its one
/// commit, and told to the user whether or not that commit is made.
pub(crate) struct Noticed {
    pub(crate) lines: Vec<LedgerEntry>,
    changes: Vec<String>,
    host: Host,
}

impl Noticed {
    /// The user's words; told even when the change could not be recorded: the user hearing it is
    /// what matters now.
    pub(crate) fn told(&self, recorded: bool) -> String {
        words(&self.changes, self.host, recorded)
    }
}

/// What to tell the user about a change since the last look, if any, recorded in a transaction
/// of its own: the one commit of a hook that changes nothing else (a tool call's guard, a change
/// of the host's settings). The prompt hook records it in its own commit ([`notice_in`]).
pub(crate) fn notice(env: &Environment, paths: &LoopPaths, seen: &LoopState) -> Option<String> {
    let now = changed_since(env, seen)?;
    let Ok((transaction, Custody::Loop { mut state, incidents })) = Transaction::open(paths, env.now) else {
        return None;
    };
    let noticed = notice_in(env, &mut state, &incidents, now)?;
    // Told even when it cannot be recorded: the user hearing it is what matters now.
    let recorded = transaction.commit(&state, &noticed.lines).is_ok();
    Some(noticed.told(recorded))
}

/// The change since the loop's last look, `now` (from [`changed_since`]), in `state` as the
/// prompt hook holds it, where custody found `incidents`: the snapshot taken into `state`, and
/// the lines that record it; `None` when the held loop is not running or shows no change.
pub(crate) fn notice_in(
    env: &Environment,
    state: &mut LoopState,
    incidents: &[Incident],
    now: config_watch::Snapshot,
) -> Option<Noticed> {
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
            ..LedgerEntry::new(state, env.now, LedgerDecision::Note, incident.code)
        })
        .collect();
    lines.push(LedgerEntry {
        origin: Some(Origin::Agent),
        detail: Some(changes.join("; ")),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Note, ReasonCode::HostConfigChanged)
    });
    state.meta.host_config = Some(now);
    Some(Noticed { lines, changes, host: state.meta.host })
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
///
/// A commit of its own, after the prompt hook's: it follows the command, which changes the
/// settings and commits in a transaction of its own (`commands/`), and it must look at the
/// settings as the command left them; folded into the hook's one commit, made before the
/// command runs, it would record the settings before the change.
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
