//! A backlog run as kept in the store (`backlog/RUN/run.json`), written after every step so a
//! driver killed at any point can be resumed, and read by `--apply`, `--resume` and the report.
//! Beside it: each task's work tree (`tasks/N`) and the queue's (`queue`).

use std::fs;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::tasks::Task;
use crate::store::Store;

/// Where a task is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "stage")]
pub(crate) enum Stage {
    /// Not started yet.
    Waiting,
    /// Its agent works on it (or did, when a killed driver left it so).
    Working,
    /// Its check passed; its end state `commit` waits for the queue.
    Queued {
        commit: String,
    },
    /// Sent back by the queue: its agent goes on from the integration head with `why`.
    SentBack {
        why: String,
    },
    Landed {
        order: u32,
    },
    /// Stopped short of landing: `reason` a code, `what` in words. `--resume` continues it.
    Parked {
        reason: String,
        what: String,
    },
}

/// One task of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TaskRun {
    #[serde(flatten)]
    pub(crate) task: Task,
    #[serde(rename = "loop")]
    pub(crate) loop_id: String,
    pub(crate) stage: Stage,
    /// Merges tried and failed.
    #[serde(default)]
    pub(crate) merge_tries: u32,
    /// Whether its loop was started (a task started before is resumed, never started again).
    #[serde(default)]
    pub(crate) started: bool,
    /// Milliseconds its agent and checks took, over every time it was driven.
    #[serde(default)]
    pub(crate) millis: u64,
}

/// The run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BacklogRun {
    pub(crate) id: String,
    /// The user's repository, and where in it the run was started.
    pub(crate) repo: PathBuf,
    pub(crate) prefix: PathBuf,
    /// The commit every task starts from: a snapshot of the user's working tree.
    pub(crate) base: String,
    /// The backlog file as named, where it is, and its digest when read.
    pub(crate) file: String,
    pub(crate) path: PathBuf,
    pub(crate) digest: Option<String>,
    pub(crate) verify: Option<String>,
    pub(crate) parallel: u32,
    pub(crate) max_merge_tries: u32,
    /// The command line, for tasks a resumed run starts.
    pub(crate) words: Vec<String>,
    pub(crate) tasks: Vec<TaskRun>,
    /// The commit the queue last moved the integration ref to; `None` while nothing landed.
    /// A ref found elsewhere was moved outside the queue.
    #[serde(default)]
    pub(crate) head: Option<String>,
    /// What each check command ran on the integration head (its test-count ratchet), which
    /// every later merge and `run --apply` are held to.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) tests: std::collections::BTreeMap<String, crate::checks::TestRatchet>,
    pub(crate) started_at: Timestamp,
    pub(crate) updated_at: Timestamp,
}

impl BacklogRun {
    pub(crate) fn dir(store: &Store, id: &str) -> PathBuf {
        runs_dir(store).join(id)
    }

    pub(crate) fn task_tree(store: &Store, id: &str, n: u32) -> PathBuf {
        BacklogRun::dir(store, id).join("tasks").join(n.to_string())
    }

    pub(crate) fn queue_tree(store: &Store, id: &str) -> PathBuf {
        BacklogRun::dir(store, id).join("queue")
    }

    pub(crate) fn integration_ref(&self) -> String {
        integration_ref(&self.id)
    }

    /// Where the integration ref must be: the queue's last landing, else the base.
    pub(crate) fn expected_head(&self) -> &str {
        self.head.as_deref().unwrap_or(&self.base)
    }

    pub(crate) fn task_ref(&self, n: u32) -> String {
        format!("{REFS}/{}/tasks/{n}", self.id)
    }

    /// The landed tasks in landing order, with their checks.
    pub(crate) fn landed(&self) -> Vec<(u32, String)> {
        let mut landed: Vec<(u32, u32, String)> = self
            .tasks
            .iter()
            .filter_map(|t| match t.stage {
                Stage::Landed { order } => Some((order, t.task.n, t.task.check.clone())),
                _ => None,
            })
            .collect();
        landed.sort();
        landed.into_iter().map(|(_, n, check)| (n, check)).collect()
    }

    /// Whether every task is landed or parked: nothing left for this driver to do.
    pub(crate) fn settled(&self) -> bool {
        self.tasks.iter().all(|t| matches!(t.stage, Stage::Landed { .. } | Stage::Parked { .. }))
    }

    /// Writes the run; a failure is said, never fatal (the run goes on, less resumable).
    pub(crate) fn save(&mut self, store: &Store) -> Result<(), String> {
        self.updated_at = Timestamp::now();
        let dir = BacklogRun::dir(store, &self.id);
        fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let text = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        crate::store::write_atomic(&dir.join("run.json"), &text, true)
            .map_err(|e| format!("cannot save the backlog run {}: {e}", self.id))
    }

    pub(crate) fn load(store: &Store, id: &str) -> Option<BacklogRun> {
        let text = fs::read(BacklogRun::dir(store, id).join("run.json")).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Every backlog run of the store, oldest first.
    pub(crate) fn all(store: &Store) -> Vec<BacklogRun> {
        let mut runs: Vec<BacklogRun> = fs::read_dir(runs_dir(store))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| BacklogRun::load(store, &e.file_name().to_string_lossy()))
            .collect();
        runs.sort_by(|a, b| a.id.cmp(&b.id));
        runs
    }

    /// The newest run, or the one named `wanted` (its id, or one of its tasks' loop ids).
    pub(crate) fn find(store: &Store, wanted: &str) -> Option<BacklogRun> {
        BacklogRun::all(store).into_iter().rfind(|run| {
            wanted.is_empty() || run.id == wanted || run.tasks.iter().any(|t| t.loop_id == wanted)
        })
    }
}

/// Where a backlog run's refs live in the user's repository.
pub(crate) const REFS: &str = "refs/for-loop/backlog";

pub(crate) fn integration_ref(id: &str) -> String {
    format!("{REFS}/{id}/integration")
}

fn runs_dir(store: &Store) -> PathBuf {
    store.root().join("backlog")
}

/// Whether `dir` is a work tree of ours still: its `.git` file is there.
pub(crate) fn tree_exists(dir: &Path) -> bool {
    dir.join(".git").is_file()
}
