//! The backlog runs of the store in `loop-hook status --all`: each run, where each task is, and
//! the landing order. Each task's own loop is listed among the loops as well.

use serde_json::{Value, json};

use super::record::{BacklogRun, Stage};
use crate::store::Store;

/// Adds the store's backlog runs to what `status --all` said: a section of text, or a
/// `backlogs` list in its JSON.
pub(crate) fn add_to(store: &Store, stdout: &mut String, as_json: bool) {
    let runs = BacklogRun::all(store);
    if runs.is_empty() {
        return;
    }
    if as_json {
        if let Ok(mut value) = serde_json::from_str::<Value>(stdout) {
            value["backlogs"] = Value::Array(runs.iter().map(|run| run_json(store, run)).collect());
            *stdout = serde_json::to_string_pretty(&value).unwrap_or_default();
        }
        return;
    }
    stdout.push_str("\nfor-loop: backlog runs");
    for run in &runs {
        let landed: Vec<String> = run.landed().iter().map(|(n, _)| n.to_string()).collect();
        stdout.push_str(&format!(
            "\n  {}  {}  {} of {} landed{}  at most {} at once  {}",
            run.id,
            run.file,
            landed.len(),
            run.tasks.len(),
            if landed.is_empty() { String::new() } else { format!(" (in order: {})", landed.join(", ")) },
            run.parallel,
            run.repo.display()
        ));
        for task in &run.tasks {
            let iteration = iteration(store, &task.loop_id);
            stdout.push_str(&format!(
                "\n    task {}  {:<28} {}  merge tries {}  {}",
                task.task.n,
                stage_words(&task.stage),
                iteration.map_or_else(|| "not started".to_string(), |i| format!("iteration {i}")),
                task.merge_tries,
                task.task.title
            ));
        }
    }
}

fn run_json(store: &Store, run: &BacklogRun) -> Value {
    let tasks: Vec<Value> = run
        .tasks
        .iter()
        .map(|t| {
            json!({"task": t.task.n, "title": t.task.title, "check": t.task.check, "loop": t.loop_id,
                "stage": t.stage, "merge_tries": t.merge_tries, "iteration": iteration(store, &t.loop_id),
                "millis": t.millis})
        })
        .collect();
    let landed: Vec<u32> = run.landed().iter().map(|(n, _)| *n).collect();
    json!({"run": run.id, "file": run.file, "repo": run.repo, "base": run.base,
        "integration": run.integration_ref(), "parallel": run.parallel, "landed": landed, "tasks": tasks})
}

/// Where a task is, in a few words.
pub(crate) fn stage_words(stage: &Stage) -> String {
    match stage {
        Stage::Waiting => "waiting".into(),
        Stage::Working => "working".into(),
        Stage::Queued { .. } => "queued to merge".into(),
        Stage::SentBack { why } => format!("sent back ({why})"),
        Stage::Landed { order } => format!("landed #{order}"),
        Stage::Parked { reason, .. } => format!("parked ({reason})"),
    }
}

/// The iteration a task's loop is on, when it was started.
fn iteration(store: &Store, loop_id: &str) -> Option<u32> {
    store.paths(loop_id).load().ok().flatten().map(|state| state.meta.iteration)
}
