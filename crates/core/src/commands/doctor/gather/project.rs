//! The store, the tier a loop here would get, and this project's loops that wait for someone.

use std::path::Path;

use super::super::facts::{LoopFact, LoopKind, StoreFacts, TierFacts};
use crate::checks::sandbox;
use crate::state::Status;
use crate::store::Store;
use crate::support::Environment;

/// An active loop with no stop judged for this long has most likely lost its session.
const STALE_HOURS: u64 = 24;
/// A loop still unclaimed after this long was most likely never seen by its conversation.
const UNCLAIMED_HOURS: u64 = 1;

pub(super) fn store(store: Option<&Store>) -> StoreFacts {
    let Some(store) = store else { return StoreFacts { root: None, writable: Err("no store".into()) } };
    let root = store.root().to_path_buf();
    // The armed copies of active loops live beside the store: a hook writes both.
    let dirs = std::iter::once(root.clone()).chain(store.armed_root());
    let writable = dirs
        .map(|dir| {
            std::fs::create_dir_all(&dir)
                .and_then(|()| tempfile::Builder::new().prefix(".doctor.").tempfile_in(&dir).map(drop))
                .map_err(|e| format!("{}: {e}", dir.display()))
        })
        .collect::<Result<Vec<()>, String>>()
        .map(drop);
    StoreFacts { root: Some(root), writable }
}

pub(super) fn tier(env: &Environment, project: &Path, store: Option<&Store>) -> TierFacts {
    let store_root = store.map_or_else(|| project.to_path_buf(), |s| s.root().to_path_buf());
    TierFacts {
        sandbox_settings: sandbox::sandbox_settings(env, project, &store_root),
        bubblewrap: sandbox::sandbox_unavailable(),
        socat: crate::host::install::on_path(env, "socat").is_some(),
        linux: cfg!(target_os = "linux"),
    }
}

/// This project's parked loops, active loops no stop has reached for a day, and loops never
/// claimed by their conversation.
pub(super) fn loops(env: &Environment, project: &Path, store: Option<&Store>) -> Vec<LoopFact> {
    let Some(store) = store else { return Vec::new() };
    let project = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
    let in_project =
        |cwd: &Path| std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf()).starts_with(&project);
    let claimed = store.all().unwrap_or_default().into_iter().map(|paths| (paths, false));
    let pending = store.pending_all().unwrap_or_default().into_iter().map(|paths| (paths, true));
    let mut out = Vec::new();
    for (paths, pending) in claimed.chain(pending) {
        let Ok(Some(state)) = paths.load() else { continue };
        let meta = &state.meta;
        if !in_project(&meta.cwd) {
            continue;
        }
        let idle_hours =
            u64::try_from(env.now.duration_since(meta.updated_at).as_secs()).unwrap_or(0) / 3_600;
        let kind = match meta.status {
            Status::Active if pending && idle_hours >= UNCLAIMED_HOURS => LoopKind::Unclaimed,
            Status::Active if !pending && idle_hours >= STALE_HOURS => LoopKind::Stale,
            Status::Parked if !pending => LoopKind::Parked,
            _ => continue,
        };
        let session_id = if pending { meta.loop_id.clone() } else { meta.session_id.clone() };
        out.push(LoopFact { session_id, host: meta.host, kind, idle_hours });
    }
    out
}
