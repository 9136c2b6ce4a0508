//! `loop-hook status`: what this session's loop is doing, for people and (`--json`) programs.

use serde_json::{Value, json};

use crate::commands::session::Target;
use crate::host::usage::human_tokens;
use crate::state::LedgerEntry;
use crate::state::{LastVerify, LoopState, Status};
use crate::store::{LoopPaths, Store, StoreError};
use crate::support::Environment;
use crate::support::Outcome;
use crate::support::text::duration::human_ms;
use crate::verdict::message::{criterion, elapsed};

const RECENT: usize = 5;

#[derive(Debug, Clone, Default)]
pub(crate) struct StatusOptions {
    pub(crate) target: Target,
    pub(crate) json: bool,
    pub(crate) all: bool,
}

pub(crate) fn run(env: &Environment, options: &StatusOptions) -> Outcome {
    let store = match Store::locate(env) {
        Ok(store) => store,
        Err(e) => return Outcome::refused(format!("for-loop: {e}")),
    };
    if options.all {
        return all(&store, options.json);
    }
    let (paths, session_id) = match options.target.session_id(env) {
        Some(id) => match by_loop_id(&store, id) {
            Some((paths, state)) => (paths, state.meta.session_id),
            None => (store.paths(id), id.to_string()),
        },
        None => match options.target.here(&store, env) {
            Ok((paths, state)) => (paths, state.meta.session_id),
            Err(refusal) => return refusal,
        },
    };
    // What the loop really is: a state changed behind for-loop's back shows as its last good copy.
    let loaded = crate::store::custody::trusted_state(&paths);
    if options.json {
        let value = match &loaded {
            Ok(state) => json!({
                "session_id": session_id,
                "store": store.root(),
                "loop": state.as_ref().map(|s| loop_json(s, &paths)),
            }),
            Err(e) => {
                json!({ "session_id": session_id, "store": store.root(), "loop": null, "error": e.to_string() })
            }
        };
        return Outcome::ok(serde_json::to_string_pretty(&value).unwrap_or_default());
    }
    match loaded {
        Ok(Some(state)) => Outcome::ok(human(&state, &paths, env)),
        Ok(None) => Outcome::ok(format!(
            "for-loop: no loop in this session. Loops are kept in {}.",
            store.root().display()
        )),
        Err(e @ (StoreError::Invalid { .. } | StoreError::Read { .. })) => Outcome::ok(format!(
            "for-loop: this session's loop state is unreadable: {e}\nStops are allowed while it is; \
             /cancel-loop moves it aside."
        )),
        Err(e) => Outcome::refused(format!("for-loop: {e}")),
    }
}

/// The loop whose loop id is `id`, when `id` names no session: `status --all` prints both ids,
/// and either names the loop. A claimed loop comes before the waiting copy a claim cut short
/// may leave.
pub(crate) fn by_loop_id(store: &Store, id: &str) -> Option<(LoopPaths, LoopState)> {
    if id.is_empty() || store.paths(id).state.exists() {
        return None;
    }
    store.all().into_iter().chain(store.pending_all()).flatten().find_map(|paths| match paths.load() {
        Ok(Some(state)) if state.meta.loop_id == id => Some((paths, state)),
        _ => None,
    })
}

fn human(state: &LoopState, paths: &LoopPaths, env: &Environment) -> String {
    let meta = &state.meta;
    let mut out = format!("for-loop: loop {} is {}\n", meta.loop_id, headline(state));
    out.push_str(&format!("  task:       {}\n", task_line(&state.task)));
    out.push_str(&format!("  verify:     {}\n", state.current_check().unwrap_or("none")));
    out.push_str(&format!("  last run:   {}\n", last_run(meta.last_verify.as_ref())));
    out.push_str(&format!("  done when:  {}\n", criterion(state)));
    out.push_str(&spending(state, env));
    out.push_str(&format!("  directory:  {}\n", meta.cwd.display()));
    if let Some(line) = crate::commands::handoff::status_line(state) {
        out.push_str(&format!("  handoff:    {line}\n"));
    }
    out.push_str(&watch_lines(state, env));
    if let Ok(store) = Store::locate(env) {
        let tier =
            crate::checks::sandbox::shown(env, meta.host, &meta.cwd, store.root(), meta.tier.as_deref());
        out.push_str(&format!("  tier:       {tier}\n"));
    }
    out.push_str(&format!(
        "  state:      {}\n  ledger:     {}\n",
        paths.state.display(),
        paths.ledger.display()
    ));
    out.push_str(&checks(state, paths, env));
    out.push_str(&scope_lines(state, paths));
    out.push_str(&recent_stops(paths));
    if let Some(receipt) = &meta.receipt {
        out.push_str(&receipt.render("  last receipt:", meta.host).replace("\n  ", "\n    "));
    }
    out.trim_end().to_string()
}

/// What changed, since the last hook looked, of what decides whether for-loop runs at all: a
/// change that stops the host loading for-loop (a broken plugin manifest) leaves no hook to tell
/// it, so the next for-loop process the user runs does. Nothing is recorded here: the next stop
/// that runs records it and does not count its pass.
fn watch_lines(state: &LoopState, env: &Environment) -> String {
    let changes = watch_changes(state, env);
    if changes.is_empty() {
        return String::new();
    }
    format!(
        "  WARNING:    since the last hook, something that decides whether for-loop's hooks run at all \
         changed; the host may run none of them, and nothing judges this loop:\n{}\n              \
         Put it back, or {} if you meant to end the loop.\n",
        changes.iter().map(|c| format!("              - {c}")).collect::<Vec<_>>().join("\n"),
        state.meta.host.commands().cancel
    )
}

/// The changes [`watch_lines`] tells, for an active loop the watch looks after.
pub(crate) fn watch_changes(state: &LoopState, env: &Environment) -> Vec<String> {
    let Some(before) = state.meta.host_config.as_ref().filter(|_| state.is_active()) else {
        return Vec::new();
    };
    let now = state.meta.host.config_snapshot_since(env, &state.meta.cwd, before);
    crate::host::config_watch::changes(before, &now)
}

/// Where the loop is: active, ended or parked, and at which iteration.
fn headline(state: &LoopState) -> String {
    let meta = &state.meta;
    let max = meta.settings.max_iterations;
    match (meta.status, meta.outcome) {
        (Status::Active, _) => format!("active, iteration {} of {max}", meta.iteration),
        (Status::Ended, Some(outcome)) => {
            format!("ended ({outcome}) at iteration {} of {max}", meta.iteration)
        }
        (Status::Ended, None) => format!("ended at iteration {} of {max}", meta.iteration),
        (Status::Parked, outcome) => format!(
            "parked ({}) at iteration {} of {max}; {} continues it",
            outcome.map_or("unknown".into(), |o| o.to_string()),
            meta.iteration,
            meta.host.commands().resume
        ),
    }
}

/// The task's first non-blank line, cut to 70 characters, with `…` when there is more.
fn task_line(task: &str) -> String {
    let first_line = task.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
    if first_line.chars().count() > 70 || task.trim().lines().count() > 1 {
        format!("{}…", first_line.chars().take(70).collect::<String>())
    } else {
        first_line.to_string()
    }
}

fn last_run(last: Option<&LastVerify>) -> String {
    match last {
        Some(v) if v.timed_out => format!("timed out after {}", human_ms(v.duration_ms)),
        Some(v) => format!(
            "{} in {}",
            v.exit_code.map_or("no exit code".to_string(), |c| format!("exit {c}")),
            human_ms(v.duration_ms)
        ),
        None => "not run yet".into(),
    }
}

/// The metric's progress, and the time and tokens spent.
fn spending(state: &LoopState, env: &Environment) -> String {
    let meta = &state.meta;
    let mut out = String::new();
    if let Some(m) = &meta.metric {
        let unit = m.name.as_deref().map(|n| format!(" {n}")).unwrap_or_default();
        out.push_str(&format!(
            "  metric:     {} → {}{unit} (baseline → best) · {} kept · {} discarded\n",
            m.baseline, m.best, m.keeps, m.discards
        ));
    }
    if let Some(stories) = crate::verdict::message::plan::receipt_line(state) {
        out.push_str(&format!("  stories:    {stories}\n"));
    }
    if meta.settings.review.is_some() {
        out.push_str(&format!(
            "  reviewer:   {} veto(es) since the start or last resume\n",
            meta.streaks.vetoes
        ));
    }
    out.push_str(&format!(
        "  elapsed:    {} ({} in verify)\n",
        elapsed(state, env.now),
        human_ms(meta.verify_total_ms)
    ));
    if meta.usage.is_some() || meta.settings.max_tokens.is_some() {
        let used = meta.usage.as_ref().map_or(0, |u| u.used.total().counted());
        out.push_str(&format!(
            "  tokens:     {} counted{}\n",
            human_tokens(used),
            meta.settings
                .max_tokens
                .map_or(String::new(), |max| format!(" of a {} budget", human_tokens(max)))
        ));
    }
    out
}

/// What guards the loop: the oracle's files, the test count, the streaks, and anything that
/// went wrong (an interrupted judgment, the host overriding blocks).
fn checks(state: &LoopState, paths: &LoopPaths, env: &Environment) -> String {
    let meta = &state.meta;
    let mut out = String::new();
    if !meta.oracle.files.is_empty() {
        let changed = meta.oracle.changes(&meta.cwd);
        out.push_str(&format!(
            "  oracle:     {} file(s) fingerprinted, {}\n",
            meta.oracle.files.len(),
            if changed.is_empty() { "all intact".to_string() } else { format!("{} changed", changed.len()) }
        ));
    }
    if let Some(tests) = meta.tests.status_line() {
        out.push_str(&format!("  tests:      {tests}\n"));
    }
    let recent = LedgerEntry::read_last(&paths.ledger, RECENT).unwrap_or_default();
    if let Some(failing) = crate::state::describe_failing_in(&recent) {
        out.push_str(&format!("  failing:    {failing}\n"));
    }
    if meta.streaks.same_failure > 1 || meta.streaks.no_change > 0 {
        out.push_str(&format!(
            "  streaks:    same failure ×{} · unchanged tree ×{}\n",
            meta.streaks.same_failure, meta.streaks.no_change
        ));
    }
    if let Some(what) = crate::store::Judgment::interrupted(paths, env.now) {
        out.push_str(&format!("  warning:    {what}\n"));
    }
    if let Some(failed) = &meta.failed_turn {
        out.push_str(&format!(
            "  last turn:  {}\n",
            crate::verdict::message::failed_turn::status_line(failed, env.now)
        ));
    }
    if meta.harness_overrides > 0 {
        out.push_str(&format!(
            "  overrides:  the host ended {} turn(s) despite a block (its block cap); the loop goes on at the next prompt\n",
            meta.harness_overrides
        ));
    }
    // A blocked stop whose host has exited since: the host ended the turn in spite of the block
    // (its cap, another hook), or was ended; the next stop of a resumed session records it.
    let exited =
        crate::provenance::host_process::recorded(&paths.dir).and_then(|h| h.has_exited()) == Some(true);
    if meta.last_blocked && state.is_active() && exited {
        out.push_str(
            "  warning:    the last stop was blocked, but the host process that sent it has exited: the \
             turn ended anyway. Resume the session, or hand the loop over (loop-hook run --resume)\n",
        );
    }
    let rhythm = [
        crate::verdict::background::status_line(state, env.now),
        crate::verdict::block_cap::status_line(state),
    ];
    for line in rhythm.into_iter().flatten() {
        out.push_str(&format!("  rhythm:     {line}\n"));
    }
    out
}

/// The loop's scope, and what its last judged stop found outside it.
fn scope_lines(state: &LoopState, paths: &LoopPaths) -> String {
    let recent = LedgerEntry::read_last(&paths.ledger, RECENT).unwrap_or_default();
    let last = recent.iter().rev().find(|entry| entry.reason.is_verdict());
    crate::verdict::message::scope::status_lines(state, last.map_or(&[], |entry| &entry.out_of_scope))
}

/// The last few stops from the ledger, one line each.
fn recent_stops(paths: &LoopPaths) -> String {
    let recent = LedgerEntry::read_last(&paths.ledger, RECENT).unwrap_or_default();
    if recent.is_empty() {
        return String::new();
    }
    let mut out = String::from("  recent stops:\n");
    for entry in recent {
        let verify = entry.verify.as_ref().map_or(String::new(), |v| {
            if v.timed_out {
                format!(" · timed out after {}", human_ms(v.duration_ms))
            } else {
                format!(
                    " · exit {} in {}",
                    v.exit_code.map_or("-".into(), |c| c.to_string()),
                    human_ms(v.duration_ms)
                )
            }
        });
        out.push_str(&format!(
            "    {}  #{:<3} {:<6} {}{verify}\n",
            entry.time.strftime("%H:%M:%S"),
            entry.iteration,
            entry.decision,
            entry.reason
        ));
    }
    out
}

fn loop_json(state: &LoopState, paths: &LoopPaths) -> Value {
    let recent = LedgerEntry::read_last(&paths.ledger, RECENT).unwrap_or_default();
    json!({
        "meta": state.meta,
        "task": state.task,
        "paths": { "state": paths.state, "ledger": paths.ledger },
        "recent": recent,
        "metric_series": metric_series(state, paths),
    })
}

/// A metric loop's measurements in order, from its ledger: `{iteration, value, kept, best, ...}`
/// per measured stop, the baseline first. `null` for other loops.
fn metric_series(state: &LoopState, paths: &LoopPaths) -> Value {
    if state.meta.settings.metric.is_none() {
        return Value::Null;
    }
    let entries = LedgerEntry::read_last(&paths.ledger, usize::MAX).unwrap_or_default();
    let points: Vec<Value> = entries
        .iter()
        .filter(|e| e.loop_id == state.meta.loop_id)
        .filter_map(|e| {
            let mut point = serde_json::to_value(e.metric.as_ref()?).ok()?;
            point["iteration"] = json!(e.iteration);
            Some(point)
        })
        .collect();
    Value::Array(points)
}

fn all(store: &Store, as_json: bool) -> Outcome {
    let loops = match store.all().and_then(|mut loops| {
        loops.extend(store.pending_all()?);
        Ok(loops)
    }) {
        Ok(loops) => loops,
        Err(e) => {
            return Outcome::refused(format!("for-loop: could not list {}: {e}", store.root().display()));
        }
    };
    let rows: Vec<(LoopPaths, Result<Option<LoopState>, StoreError>)> = loops
        .into_iter()
        .map(|paths| {
            let state = paths.load();
            (paths, state)
        })
        .collect();
    if as_json {
        let list: Vec<Value> = rows
            .iter()
            .map(|(paths, state)| match state {
                Ok(Some(state)) => loop_json(state, paths),
                Ok(None) => json!(null),
                Err(e) => json!({ "paths": { "state": paths.state }, "error": e.to_string() }),
            })
            .collect();
        return Outcome::ok(
            serde_json::to_string_pretty(&json!({ "store": store.root(), "loops": list }))
                .unwrap_or_default(),
        );
    }
    if rows.is_empty() {
        return Outcome::ok(format!("for-loop: no loops in {}.", store.root().display()));
    }
    let mut out = format!("for-loop: loops in {}\n", store.root().display());
    for (_, state) in rows {
        match state {
            Ok(Some(s)) => out.push_str(&format!(
                "  {}  {:<7} {}/{}  session {}  {}\n",
                s.meta.loop_id,
                if s.is_active() { "active" } else { "ended" },
                s.meta.iteration,
                s.meta.settings.max_iterations,
                if s.meta.session_id.is_empty() { "(not yet claimed)" } else { &s.meta.session_id },
                s.meta.cwd.display()
            )),
            Ok(None) => {}
            Err(e) => out.push_str(&format!("  unreadable: {e}\n")),
        }
    }
    Outcome::ok(out.trim_end())
}
