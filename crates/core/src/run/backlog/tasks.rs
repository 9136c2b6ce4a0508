//! A backlog's tasks: the stories of a plan file (`--plan`'s formats), each an independent task
//! with the check that says it is done. Read once at start; the run goes on with the tasks as
//! read, and a file changed meanwhile is noticed by its digest and said, never re-read.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::checks::{Story, plan};
use crate::support::digest::sha256_hex;

/// One task of a backlog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Task {
    /// 1, 2, ... in the file's order: the task's branch is `tasks/N`.
    pub(crate) n: u32,
    pub(crate) title: String,
    /// The lines under the title, given to the agent with it.
    #[serde(default)]
    pub(crate) details: String,
    /// The command that says the task is done: its own `verify:`, else the run's `--verify`.
    pub(crate) check: String,
}

impl Task {
    /// What the task's agent is asked, first time round.
    pub(crate) fn brief(&self, file: &str) -> String {
        let details =
            if self.details.trim().is_empty() { String::new() } else { format!("\n\n{}", self.details) };
        format!(
            "{}{details}\n\nThis is task {} of the backlog {file}. Other tasks are worked at the same time in \
             work trees of their own and merged after yours: change only what this task needs.",
            self.title, self.n
        )
    }
}

/// Reads the backlog `path`: every story a task, in order. `verify` stands in for a story
/// without a check of its own. Refused, in one line that says what to change: no tasks, a task
/// without any check, two tasks with the same title.
pub(crate) fn read(path: &Path, verify: Option<&str>) -> Result<Vec<Task>, String> {
    let stories = plan::read(path, verify).map_err(|e| e.to_string())?;
    let mut tasks: Vec<Task> = Vec::new();
    for (i, story) in stories.into_iter().enumerate() {
        let Story { title, details, verify: own, .. } = story;
        let title = title.trim().to_string();
        if let Some(same) = tasks.iter().find(|t| t.title.eq_ignore_ascii_case(&title)) {
            return Err(format!(
                "the backlog {} has two tasks titled `{title}` (tasks {} and {}): give each task a title of its own",
                path.display(),
                same.n,
                i + 1
            ));
        }
        let Some(check) = own.or_else(|| verify.map(str::to_string)).filter(|c| !c.trim().is_empty()) else {
            return Err(format!(
                "task {} (`{title}`) of the backlog {} has no check: add an indented `verify: CMD` line under \
                 it, or give the run --verify CMD",
                i + 1,
                path.display()
            ));
        };
        let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
        tasks.push(Task { n, title, details, check });
    }
    Ok(tasks)
}

/// The digest of the backlog file's bytes, to notice it changing while the run goes; `None`
/// when it cannot be read (gone, unreadable), which is a change too.
pub(crate) fn digest(path: &Path) -> Option<String> {
    crate::support::read::bounded_read::read(path, plan::MAX_PLAN_BYTES).ok().map(|bytes| sha256_hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backlog(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("BACKLOG.md");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn every_story_is_a_task_with_its_own_check_or_the_runs_verify() {
        let (_dir, path) = backlog("- [ ] Add a\n  verify: test -f a\n- [ ] Add b\n  the b file\n");
        let tasks = read(&path, Some("make check")).unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!((tasks[0].n, tasks[0].title.as_str(), tasks[0].check.as_str()), (1, "Add a", "test -f a"));
        assert_eq!((tasks[1].n, tasks[1].check.as_str()), (2, "make check"));
        assert!(tasks[1].brief("BACKLOG.md").contains("the b file"), "{}", tasks[1].brief("B"));
        assert!(tasks[1].brief("BACKLOG.md").contains("task 2 of the backlog BACKLOG.md"));
    }

    #[test]
    fn no_tasks_a_task_without_a_check_and_duplicate_titles_are_refused() {
        let (_dir, empty) = backlog("# nothing to do\n");
        assert!(read(&empty, Some("true")).unwrap_err().contains("has no stories"), "no tasks");
        let (_dir, unchecked) = backlog("- [ ] Add a\n  verify: true\n- [ ] Add b\n");
        let error = read(&unchecked, None).unwrap_err();
        assert!(error.contains("story 2. Add b has no check"), "{error}");
        let (_dir, twice) = backlog("- [ ] Add a\n  verify: true\n- [ ] add A\n  verify: true\n");
        let error = read(&twice, None).unwrap_err();
        assert!(error.contains("two tasks titled `add A` (tasks 1 and 2)"), "{error}");
        let (_dir, missing) = (tempfile::tempdir().unwrap(), std::path::PathBuf::from("/nonexistent/B.md"));
        assert!(read(&missing, Some("true")).unwrap_err().contains("cannot be read"));
    }

    #[test]
    fn the_digest_changes_with_the_file_and_is_none_when_it_is_gone() {
        let (_dir, path) = backlog("- [ ] Add a\n  verify: true\n");
        let first = digest(&path).unwrap();
        assert_eq!(digest(&path).as_ref(), Some(&first));
        std::fs::write(&path, "- [ ] Add a\n  verify: false\n").unwrap();
        assert_ne!(digest(&path).unwrap(), first);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(digest(&path), None);
    }
}
