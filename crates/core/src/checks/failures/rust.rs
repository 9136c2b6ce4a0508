//! cargo test, cargo nextest, and rustc's diagnostics (cargo build, cargo test's build).

use super::lines::Line;
use super::{Sink, Slot};

/// Lines of one failure's report read at most.
const BODY_LINES: u32 = 1_000;

/// A panic's report: `thread 'name' panicked at src/lib.rs:12:5:` and the message after it
/// (`assertion `left == right` failed`, `  left: 4`, ` right: 5`), or the older one-line form
/// `thread 'name' panicked at 'message', src/lib.rs:12:5`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Panic {
    in_message: bool,
}

impl Panic {
    /// Reads a line of a failure's report; whether it was the panic's.
    pub(super) fn line(&mut self, line: &Line<'_>, slot: Slot, sink: &mut Sink) -> bool {
        let text = line.trimmed;
        if text.starts_with("thread '")
            && let Some((_, after)) = text.split_once(" panicked at ")
        {
            if let Some(place) = after.strip_suffix(':') {
                sink.locate(slot, place);
                self.in_message = true;
            } else if let Some((message, place)) = after.rsplit_once(", ") {
                sink.detail(slot, message.trim_matches('\''));
                sink.locate(slot, place);
            }
            return true;
        }
        if !self.in_message {
            return false;
        }
        if text.starts_with("note: ") || text.starts_with("stack backtrace:") {
            self.in_message = false;
        } else {
            sink.detail(slot, text);
        }
        true
    }
}

/// The report of the failure being read, its panic among it, for at most [`BODY_LINES`] lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Report {
    current: Option<Slot>,
    panic: Panic,
    left: u32,
}

impl Report {
    /// A failure's report begins: `runner` names `name` failed.
    fn begin(&mut self, runner: &'static str, name: &str, sink: &mut Sink) {
        let slot = sink.fail(runner, name);
        *self = Report {
            current: sink.wants_details(slot).then_some(slot),
            left: BODY_LINES,
            ..Report::default()
        };
    }

    /// The failure a line of its report belongs to; `None` once the report has ended (at
    /// `ends`, or after its last line read).
    fn next(&mut self, ends: bool) -> Option<Slot> {
        let slot = self.current?;
        self.left = self.left.saturating_sub(1);
        if self.left == 0 || ends {
            self.current = None;
            return None;
        }
        Some(slot)
    }

    fn capturing(&self) -> bool {
        self.current.is_some()
    }
}

/// cargo test: `---- tests::adds stdout ----` heads a failure's report, `test tests::adds ...
/// FAILED` names one as it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct CargoTest {
    report: Report,
}

impl CargoTest {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let text = line.text;
        if let Some(name) = text.strip_prefix("test ").and_then(|rest| rest.strip_suffix(" ... FAILED")) {
            sink.fail("cargo test", name.trim_end_matches(" - should panic"));
            return;
        }
        if let Some(name) = text.strip_prefix("---- ").and_then(|rest| rest.strip_suffix(" stdout ----")) {
            self.report.begin("cargo test", name, sink);
            return;
        }
        if !self.report.capturing() {
            return;
        }
        let Some(slot) = self.report.next(text == "failures:" || text.starts_with("test result: ")) else {
            return;
        };
        if let Some(place) = text.strip_prefix("note: test did not panic as expected at ") {
            sink.detail(slot, "test did not panic as expected");
            sink.locate(slot, place);
            return;
        }
        self.report.panic.line(line, slot, sink);
    }

    pub(super) fn capturing(&self) -> bool {
        self.report.capturing()
    }
}

/// cargo nextest: `FAIL [   0.013s] (2/5) calc tests::adds` (the binary, then the test), then
/// the test's output, its panic among it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Nextest {
    report: Report,
}

impl Nextest {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        if let Some(name) = nextest_failure(line.trimmed) {
            self.report.begin("nextest", name, sink);
            return;
        }
        if !self.report.capturing() {
            return;
        }
        let text = line.trimmed;
        let next_status =
            ["PASS [", "SKIP [", "Summary [", "────", "Cancelling"].iter().any(|s| text.starts_with(s));
        if let Some(slot) = self.report.next(next_status) {
            self.report.panic.line(line, slot, sink);
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.report.capturing()
    }
}

/// The test of `FAIL [   0.013s] (2/5) calc tests::adds`.
fn nextest_failure(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("FAIL [")?;
    let (time, rest) = rest.split_once(']')?;
    if !time.trim().ends_with('s') {
        return None;
    }
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix('(').and_then(|r| r.split_once(')')) {
        Some((counter, after)) if counter.contains('/') => after,
        _ => rest,
    };
    let name = rest.trim();
    (!name.is_empty()).then_some(name)
}

/// rustc: `error[E0308]: mismatched types`, its place ` --> src/lib.rs:3:5` a line or two later,
/// and the labels of its snippet (the text after the `^^^` under the code). Named by code and file
/// (`error[E0308] src/lib.rs`), so that the name stays while the line moves; an error without a
/// place is named only when it has a code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Rustc {
    pending: Option<Diagnostic>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Diagnostic {
    head: String,
    has_code: bool,
    place: Option<String>,
    labels: Vec<String>,
    left: u32,
}

const DIAGNOSTIC_LINES: u32 = 60;
const LABELS: usize = 4;

impl Rustc {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let text = line.text;
        if text.starts_with("error[E") || text.starts_with("error: ") || text.starts_with("warning") {
            self.finish(sink);
            let is_error = text.starts_with("error")
                && ![
                    "error: could not compile",
                    "error: aborting due to",
                    "error: test failed",
                    "error: test run failed",
                ]
                .iter()
                .any(|end| text.starts_with(end));
            if is_error {
                self.pending = Some(Diagnostic {
                    head: text.to_string(),
                    has_code: text.starts_with("error[E"),
                    left: DIAGNOSTIC_LINES,
                    ..Diagnostic::default()
                });
            }
            return;
        }
        let Some(diagnostic) = &mut self.pending else { return };
        diagnostic.left = diagnostic.left.saturating_sub(1);
        if diagnostic.left == 0 || text.is_empty() {
            self.finish(sink);
            return;
        }
        let trimmed = line.trimmed;
        if let Some(place) = trimmed.strip_prefix("--> ") {
            diagnostic.place.get_or_insert_with(|| place.to_string());
        } else if let Some((_, label)) = trimmed.split_once('|')
            && let label = label.trim_start()
            && (label.starts_with('^') || label.starts_with('-'))
            && let label = label.trim_start_matches(['^', '-', ' '])
            && !label.is_empty()
            && diagnostic.labels.len() < LABELS
        {
            diagnostic.labels.push(label.to_string());
        } else if let Some(note) = trimmed.strip_prefix("= ")
            && diagnostic.labels.len() < LABELS
        {
            diagnostic.labels.push(note.to_string());
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.pending.is_some()
    }

    /// Reports the diagnostic read so far.
    pub(super) fn finish(&mut self, sink: &mut Sink) {
        let Some(diagnostic) = self.pending.take() else { return };
        let code = diagnostic.head.split_once(':').map_or("error", |(code, _)| code);
        let slot = match &diagnostic.place {
            Some(place) => {
                let file = place.split(':').next().unwrap_or(place);
                sink.fail("rustc", &format!("{code} {file}"))
            }
            None if diagnostic.has_code => sink.fail("rustc", code),
            None => return,
        };
        sink.detail(slot, &diagnostic.head);
        for label in &diagnostic.labels {
            sink.detail(slot, label);
        }
        if let Some(place) = &diagnostic.place {
            sink.locate(slot, place);
        }
    }
}
