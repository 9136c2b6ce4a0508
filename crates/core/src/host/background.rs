//! The session's own background work in flight at a turn end, as the host's event lists it
//! (`background_tasks`: Claude Code since 2.1.145, Qwen Code 0.24). An agent that started a long
//! build in the background and ended its turn is paused, not done: the host wakes it when the
//! work ends.
//!
//! Read leniently: the field is the host's, and a shape this build does not know is no reason to
//! let a stop through unjudged, so it reads as "not sent" and the stop is judged as before.

use serde_json::{Map, Value};

/// The most tasks kept from one event: enough to name them, bounded whatever the host sends.
const MAX_TASKS: usize = 32;
/// The most characters of a task's description kept, on one line.
const MAX_DESCRIPTION: usize = 80;

/// Statuses that mean a task is over. Claude Code lists only work in flight; Qwen Code lists
/// its background agents with their status, finished ones included.
const FINISHED: &[&str] = &[
    "completed",
    "complete",
    "done",
    "finished",
    "failed",
    "error",
    "cancelled",
    "canceled",
    "killed",
    "stopped",
];

/// One piece of background work in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BackgroundTask {
    /// The host's id for it: how the same work is known at the next stop.
    pub id: String,
    /// What it is, in the host's words (its description, else its command), on one line.
    pub what: String,
}

/// The work in flight that `object`'s `background_tasks` lists: `None` when the event has no
/// such field, or one this build cannot read.
pub(crate) fn in_flight(object: &Map<String, Value>) -> Option<Vec<BackgroundTask>> {
    let Value::Array(tasks) = object.get("background_tasks")? else { return None };
    let mut found = Vec::new();
    for task in tasks {
        let Value::Object(task) = task else { return None };
        let status = task.get("status").and_then(Value::as_str).unwrap_or_default();
        if FINISHED.contains(&status.trim().to_ascii_lowercase().as_str()) {
            continue;
        }
        let id = match task.get("id") {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return None,
        };
        let what = ["description", "command", "name", "agent_type"]
            .iter()
            .find_map(|key| task.get(*key).and_then(Value::as_str).filter(|s| !s.trim().is_empty()))
            .map_or_else(|| format!("task {id}"), one_line);
        if found.len() < MAX_TASKS {
            found.push(BackgroundTask { id: one_line(&id), what });
        }
    }
    Some(found)
}

fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut chars = flat.chars();
    let kept: String = chars.by_ref().take(MAX_DESCRIPTION).collect();
    if chars.next().is_some() { format!("{kept}…") } else { kept }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(tasks: &str) -> Option<Vec<BackgroundTask>> {
        let object: Map<String, Value> =
            serde_json::from_str(&format!(r#"{{"session_id":"s","background_tasks":{tasks}}}"#)).unwrap();
        in_flight(&object)
    }

    #[test]
    fn claude_codes_shell_task_is_in_flight() {
        let tasks = read(
            r#"[{"id":"b1","type":"local_bash","status":"running","description":"cargo build --release","command":"cargo build --release"}]"#,
        );
        assert_eq!(
            tasks,
            Some(vec![BackgroundTask { id: "b1".into(), what: "cargo build --release".into() }])
        );
    }

    #[test]
    fn qwen_codes_finished_agents_are_not_in_flight() {
        let tasks = read(
            r#"[{"id":"a1","status":"completed","agent_type":"general"},{"id":"a2","status":"running","agent_type":"general","started_at":"2026-12-05T10:00:00Z"}]"#,
        );
        assert_eq!(tasks, Some(vec![BackgroundTask { id: "a2".into(), what: "general".into() }]));
    }

    #[test]
    fn no_field_an_empty_list_and_a_shape_unknown_read_as_they_should() {
        let object: Map<String, Value> = serde_json::from_str(r#"{"session_id":"s"}"#).unwrap();
        assert_eq!(in_flight(&object), None);
        assert_eq!(read("[]"), Some(vec![]));
        assert_eq!(read("null"), None);
        assert_eq!(read(r#""running""#), None);
        assert_eq!(read("[1, 2]"), None);
        assert_eq!(read(r#"[{"status":"running"}]"#), None, "a task without an id");
    }

    #[test]
    fn a_huge_or_hostile_list_is_bounded_and_flattened() {
        let many: Vec<String> = (0..1000)
            .map(|i| format!(r#"{{"id":{i},"description":"line\nbreak {}"}}"#, "x".repeat(500)))
            .collect();
        let tasks = read(&format!("[{}]", many.join(","))).unwrap();
        assert_eq!(tasks.len(), MAX_TASKS);
        assert!(!tasks[0].what.contains('\n'));
        assert!(tasks[0].what.chars().count() <= MAX_DESCRIPTION + 1);
        assert_eq!(tasks[3].id, "3");
    }
}
