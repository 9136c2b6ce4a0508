//! What a backlog run says while it goes: with `--json` one event per line on stdout (the
//! names are a contract: `backlog_started`, `task_iteration`, `queued`, `landed`, `sent_back`,
//! `parked`, `backlog_finished`), else one line per change of a task on stderr.

use std::io::Write as _;
use std::time::Instant;

use serde_json::{Value, json};

/// Where the run's events go.
pub(crate) struct Events {
    json: bool,
    started: Instant,
}

impl Events {
    pub(crate) fn new(json: bool) -> Events {
        Events { json, started: Instant::now() }
    }

    /// One event: `event` as a JSON line with `--json`, else `line` on stderr.
    pub(crate) fn say(&self, mut event: Value, line: &str) {
        if self.json {
            event["elapsed_ms"] =
                json!(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX));
            crate::run::driver::emit(&format!("{event}\n"));
        } else if !line.is_empty() {
            let _ = writeln!(std::io::stderr().lock(), "for-loop: {line}");
        }
    }
}
