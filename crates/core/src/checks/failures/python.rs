//! pytest and unittest.

use super::lines::Line;
use super::{MAX_DETAILED, MAX_DETAILS, Sink, Slot};

/// Lines of one failure's report read at most.
const BODY_LINES: u32 = 2_000;

/// pytest: the reports under `= FAILURES =` / `= ERRORS =` (headed `___ test_add[2-3] ___`, with
/// `E   assert 4 == 5` lines and `path:12: AssertionError`), and the short summary's `FAILED
/// tests/test_calc.py::test_add[2-3] - assert 4 == 5`, which names the test in full. A report is
/// held under its short name until the summary names its test; reports the summary never names
/// (`-rN`, a run cut short) are named by their header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Pytest {
    in_reports: bool,
    bodies: Vec<Body>,
    current: Option<usize>,
    left: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Body {
    short: String,
    location: Option<String>,
    details: Vec<String>,
    claimed: bool,
}

impl Pytest {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let text = line.text;
        if let Some(rule) = rule_title(text) {
            self.current = None;
            if rule == "FAILURES" || rule == "ERRORS" {
                self.in_reports = true;
            }
            return;
        }
        if let Some((kind, rest)) = text.split_once(' ')
            && (kind == "FAILED" || kind == "ERROR")
            && is_test_id(rest.split(" - ").next().unwrap_or(rest))
        {
            self.summary(rest, sink);
            return;
        }
        if !self.in_reports {
            return;
        }
        if let Some(title) = header_title(text) {
            let short = strip_all(
                strip_all(strip_all(title, "ERROR at setup of "), "ERROR at teardown of "),
                "ERROR collecting ",
            );
            self.current = None;
            // Compared before it is copied: a report seen before (the same run again) costs nothing.
            if self.bodies.len() < MAX_DETAILED && !self.bodies.iter().any(|body| body.short == short) {
                self.bodies.push(Body { short: short.to_string(), ..Body::default() });
                self.current = Some(self.bodies.len() - 1);
                self.left = BODY_LINES;
            }
            return;
        }
        let Some(at) = self.current else { return };
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            self.current = None;
        }
        let body = &mut self.bodies[at];
        if let Some(error) = text.strip_prefix("E ") {
            if body.details.len() < MAX_DETAILS && !error.trim().is_empty() {
                body.details.push(error.trim().to_string());
            }
        } else if let Some(location) = source_location(text) {
            body.location = Some(location.to_string());
        }
    }

    fn summary(&mut self, rest: &str, sink: &mut Sink) {
        let (id, message) = match rest.split_once(" - ") {
            Some((id, message)) => (id, Some(message)),
            None => (rest, None),
        };
        let slot = sink.fail("pytest", id);
        if self.bodies.iter().any(|body| !body.claimed) {
            let short = id.split_once("::").map_or(id, |(_, test)| test).replace("::", ".");
            if let Some(body) = self.bodies.iter_mut().find(|body| !body.claimed && body.short == short) {
                body.claimed = true;
                give(sink, slot, body);
            }
        }
        if let Some(message) = message {
            sink.detail(slot, message);
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.current.is_some()
    }

    /// Reports the summary never named, by their header.
    pub(super) fn finish(&mut self, sink: &mut Sink) {
        for body in self.bodies.iter_mut().filter(|body| !body.claimed) {
            body.claimed = true;
            let slot = sink.fail("pytest", &body.short);
            give(sink, slot, body);
        }
    }
}

fn give(sink: &mut Sink, slot: Slot, body: &Body) {
    for detail in &body.details {
        sink.detail(slot, detail);
    }
    if let Some(location) = &body.location {
        sink.locate(slot, location);
    }
}

/// `text` without every `prefix` it begins with, as `trim_start_matches` gives it, without
/// making a searcher for the pattern on every header.
fn strip_all<'a>(mut text: &'a str, prefix: &str) -> &'a str {
    while let Some(rest) = text.strip_prefix(prefix) {
        text = rest;
    }
    text
}

/// Whether a summary line names a test (`tests/test_calc.py::test_add[2-3]`) or a test file
/// that could not be collected (`tests/test_calc.py`).
fn is_test_id(id: &str) -> bool {
    let python = std::path::Path::new(id).extension().is_some_and(|extension| extension == "py");
    id.contains("::") || (python && !id.contains(' '))
}

/// `title` of a rule `==== title ====` (pytest's sections).
fn rule_title(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("==")?.trim_start_matches('=').trim_end_matches('=');
    (inner.len() + 4 <= text.len()).then(|| inner.trim())
}

/// `title` of a header `____ title ____` (one report).
fn header_title(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("___")?.trim_start_matches('_');
    let inner = inner.strip_suffix("___")?.trim_end_matches('_');
    let title = inner.strip_prefix(' ')?.strip_suffix(' ')?;
    (!title.is_empty()).then_some(title)
}

/// `path:12` of `path:12: AssertionError` (a frame's place, and the exception's at the end).
fn source_location(text: &str) -> Option<&str> {
    let (place, _) = text.split_once(": ")?;
    let (path, number) = place.rsplit_once(':')?;
    (!path.is_empty()
        && !path.contains(' ')
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit()))
    .then_some(place)
}

/// unittest: `FAIL: test_add (test_calc.TestCalc.test_add)` (or `ERROR:`), a traceback, and the
/// exception's lines at its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Unittest {
    current: Option<Slot>,
    in_traceback: bool,
    left: u32,
}

impl Unittest {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let text = line.text;
        if let Some(name) =
            text.strip_prefix("FAIL: ").or_else(|| text.strip_prefix("ERROR: ")).and_then(test_id)
        {
            let slot = sink.fail("unittest", &name);
            self.current = sink.wants_details(slot).then_some(slot);
            self.in_traceback = false;
            self.left = BODY_LINES;
            return;
        }
        let Some(slot) = self.current else { return };
        self.left = self.left.saturating_sub(1);
        if self.left == 0 || (self.in_traceback && (text.starts_with("=====") || text.starts_with("-----"))) {
            self.current = None;
            return;
        }
        if text.starts_with("Traceback (most recent call last)") {
            self.in_traceback = true;
        } else if let Some(frame) = line.trimmed.strip_prefix("File \"") {
            if let Some((path, rest)) = frame.split_once("\", line ") {
                let number: String = rest.chars().take_while(char::is_ascii_digit).collect();
                // The last frame is where it failed: each frame replaces the one before.
                sink.relocate(slot, &format!("{path}:{number}"));
            }
        } else if self.in_traceback
            && line.indent() == 0
            && !text.is_empty()
            && !text.starts_with("During handling")
            && !text.starts_with("The above exception")
        {
            sink.detail(slot, text);
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.current.is_some()
    }
}

/// `test_calc.TestCalc.test_add` of `test_add (test_calc.TestCalc.test_add)`, with what follows
/// (a subtest's parameters: `test_add (…) (i=2)`).
fn test_id(rest: &str) -> Option<String> {
    let (method, rest) = rest.split_once(" (")?;
    let (inner, after) = rest.split_once(')')?;
    if method.contains(' ') || inner.is_empty() {
        return None;
    }
    let id =
        if inner.ends_with(&format!(".{method}")) { inner.to_string() } else { format!("{inner}.{method}") };
    let after = after.trim();
    Some(if after.is_empty() { id } else { format!("{id} {after}") })
}
