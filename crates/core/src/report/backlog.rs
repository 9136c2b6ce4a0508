//! The backlog section of a report on one task of a backlog run: every task of the run, its
//! iterations, time, tokens and merge tries, and the order in which they landed.

use std::fmt::Write as _;

use super::escape;
use crate::host::usage::human_tokens;
use crate::run::BacklogTaskRow;
use crate::store::Store;
use crate::support::text::duration::human_ms;

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
        let (run, file, tasks) = crate::run::backlog_rows(store, session_id)?;
        Some(BacklogSection { run, file, this: session_id.to_string(), tasks })
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
