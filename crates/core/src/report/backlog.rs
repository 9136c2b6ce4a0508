//! The backlog section of a report on one task of a backlog run: every task of the run, its
//! iterations, time, tokens and merge tries, and the order in which they landed. The run's
//! record, `backlog/RUN/run.json` in the store, is written by `loop-hook run --backlog`; the
//! report reads the part of it it shows, as it reads a best-of-K run's ([`super::attempt`]).

use std::fmt::Write as _;

use serde::Deserialize;

use super::escape;
use crate::host::usage::human_tokens;
use crate::store::Store;
use crate::support::read::bounded_read;
use crate::support::text::duration::human_ms;

/// The part of a backlog run's record the report reads.
#[derive(Deserialize)]
struct RunRecord {
    id: String,
    file: String,
    tasks: Vec<TaskRecord>,
}

#[derive(Deserialize)]
struct TaskRecord {
    n: u32,
    title: String,
    #[serde(rename = "loop")]
    loop_id: String,
    stage: StageRecord,
    #[serde(default)]
    merge_tries: u32,
    #[serde(default)]
    millis: u64,
}

#[derive(Deserialize)]
struct StageRecord {
    stage: String,
    order: Option<u32>,
    reason: Option<String>,
    why: Option<String>,
}

impl StageRecord {
    fn words(&self) -> String {
        match (self.stage.as_str(), &self.order, &self.reason, &self.why) {
            ("landed", Some(order), _, _) => format!("landed #{order}"),
            ("parked", _, Some(reason), _) => format!("parked ({reason})"),
            ("sent_back", _, _, Some(why)) => format!("sent back ({why})"),
            ("queued", ..) => "queued to merge".into(),
            (other, ..) => other.replace('_', " "),
        }
    }
}

/// One task of the run, as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BacklogTaskRow {
    n: u32,
    title: String,
    loop_id: String,
    stage: String,
    iteration: Option<u32>,
    millis: u64,
    tokens: Option<u64>,
    merge_tries: u32,
    order: Option<u32>,
}

/// The run a task loop belongs to, as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BacklogSection {
    pub(crate) run: String,
    pub(crate) file: String,
    /// The loop the report is about.
    pub(crate) this: String,
    pub(crate) tasks: Vec<BacklogTaskRow>,
}

impl BacklogSection {
    /// The section for loop `session_id`, when it is a task of a backlog run.
    pub(crate) fn of(store: &Store, session_id: &str) -> Option<BacklogSection> {
        let (run, _) = session_id.strip_prefix("backlog-")?.rsplit_once('-')?;
        if run.is_empty() || run.contains(['/', '\\', '.']) {
            return None;
        }
        let path = store.root().join("backlog").join(run).join("run.json");
        let record: RunRecord = serde_json::from_slice(&bounded_read::read(&path, 4 << 20).ok()?).ok()?;
        if !record.tasks.iter().any(|t| t.loop_id == session_id) {
            return None;
        }
        let tasks = record
            .tasks
            .iter()
            .map(|t| {
                let state = store.paths(&t.loop_id).load().ok().flatten();
                BacklogTaskRow {
                    n: t.n,
                    title: t.title.clone(),
                    loop_id: t.loop_id.clone(),
                    stage: t.stage.words(),
                    iteration: state.as_ref().map(|s| s.meta.iteration),
                    millis: t.millis,
                    tokens: state.and_then(|s| s.meta.usage.map(|u| u.used.total().counted())),
                    merge_tries: t.merge_tries,
                    order: t.stage.order.filter(|_| t.stage.stage == "landed"),
                }
            })
            .collect();
        Some(BacklogSection { run: record.id, file: record.file, this: session_id.to_string(), tasks })
    }

    pub(crate) fn render(&self, page: &mut String) {
        let mut order: Vec<&BacklogTaskRow> = self.tasks.iter().filter(|t| t.order.is_some()).collect();
        order.sort_by_key(|t| t.order);
        let landed: Vec<String> = order.iter().map(|t| format!("task {}", t.n)).collect();
        let _ = write!(
            page,
            "<section id=\"backlog\">\n<h2>Backlog</h2>\n<p>This loop is one task of the backlog run \
             <span class=\"mono\">{run}</span> ({file}): {landed} of {all} tasks landed{order}.</p>\n\
             <div class=\"table-wrap\"><table id=\"backlog-tasks\">\n<thead><tr><th class=\"num narrow\">Task</th>\
             <th>Title</th><th>Where</th><th class=\"num\">Iterations</th><th class=\"num\">Time</th>\
             <th class=\"num\">Tokens</th><th class=\"num\">Merge tries</th><th class=\"num\">Landed</th></tr></thead>\n<tbody>\n",
            run = escape::text(&self.run),
            file = escape::text(&self.file),
            landed = landed.len(),
            all = self.tasks.len(),
            order = if landed.is_empty() {
                String::new()
            } else {
                format!(", in this order: {}", landed.join(", "))
            },
        );
        for task in &self.tasks {
            let _ = writeln!(
                page,
                "<tr{this}><td class=\"num\">{n}</td><td>{title}</td><td>{stage}</td><td class=\"num\">{iterations}</td>\
                 <td class=\"num\">{time}</td><td class=\"num\">{tokens}</td><td class=\"num\">{tries}</td><td class=\"num\">{order}</td></tr>",
                this = if task.loop_id == self.this { " class=\"this\"" } else { "" },
                n = task.n,
                title = escape::text(&task.title),
                stage = escape::text(&task.stage),
                iterations = task.iteration.map_or_else(|| "-".to_string(), |i| i.to_string()),
                time = human_ms(task.millis),
                tokens = task.tokens.map_or_else(|| "-".to_string(), human_tokens),
                tries = task.merge_tries,
                order = task.order.map_or_else(|| "-".to_string(), |o| format!("#{o}")),
            );
        }
        page.push_str("</tbody>\n</table></div>\n</section>\n");
    }
}
