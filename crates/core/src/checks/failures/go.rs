//! `go test` (and the build and vet errors it reports under `# package`).

use super::lines::Line;
use super::{Sink, Slot};

const BODY_LINES: u32 = 400;

/// `--- FAIL: TestAdd (0.00s)` (indented under its parent for a subtest), then the test's
/// messages indented under it (`calc_test.go:10: Add(2, 3) = 6, want 5`); a panic's `panic:`
/// line after it; a timeout's `panic: test timed out after 1s` with the tests then running
/// listed under `running tests:`; and a package that did not build, `# example.com/calc` with
/// `./calc.go:5:9: undefined: foo` under it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct GoTest {
    current: Option<Slot>,
    indent: usize,
    timed_out: Option<String>,
    in_build: bool,
    left: u32,
}

impl GoTest {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let trimmed = line.trimmed;
        if let Some(rest) = trimmed.strip_prefix("--- FAIL: ") {
            let name = rest.rsplit_once(" (").map_or(rest, |(name, _)| name);
            let slot = sink.fail("go test", name);
            self.stop();
            self.current = sink.wants_details(slot).then_some(slot);
            self.indent = line.indent();
            self.left = BODY_LINES;
            return;
        }
        if let Some(message) = line.text.strip_prefix("panic: ") {
            if message.starts_with("test timed out") {
                self.stop();
                self.timed_out = Some(message.to_string());
                self.left = BODY_LINES;
            } else if let Some(slot) = self.current {
                sink.detail(slot, line.text);
                self.current = None;
            }
            return;
        }
        if line
            .text
            .strip_prefix("# ")
            .is_some_and(|package| !package.contains(' ') || package.ends_with(']'))
        {
            self.stop();
            self.in_build = true;
            self.left = BODY_LINES;
            return;
        }
        if !self.capturing() {
            return;
        }
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            self.stop();
            return;
        }
        if let Some(message) = self.timed_out.clone() {
            self.after_timeout(line, &message, sink);
            return;
        }
        if self.in_build {
            self.build_line(line, sink);
            return;
        }
        let Some(slot) = self.current else { return };
        if !trimmed.is_empty() && line.indent() <= self.indent {
            self.stop();
            return;
        }
        if let Some((place, message)) = diagnostic(trimmed) {
            sink.locate(slot, place);
            sink.detail(slot, message);
        } else {
            sink.detail(slot, trimmed);
        }
    }

    /// A line after `panic: test timed out`: the tests still running, each failed by the timeout.
    fn after_timeout(&mut self, line: &Line<'_>, message: &str, sink: &mut Sink) {
        // Since Go 1.20, `running tests:` and each test as `\tTestSlow (1s)`; before, only the
        // goroutines, the test's own frame among them (`example.com/calc.TestSlow(…)`).
        let name = match line.trimmed.rsplit_once(" (") {
            Some((name, time)) if time.ends_with(')') && line.indent() > 0 && !name.contains(' ') => {
                Some(name)
            }
            _ => test_frame(line.text),
        };
        if let Some(name) = name {
            let slot = sink.fail("go test", name);
            sink.detail(slot, message);
        } else if line.text.starts_with("FAIL") {
            self.stop();
        }
    }

    /// A line under a package's `# example.com/pkg` build header: a compiler diagnostic, or the
    /// header's end.
    fn build_line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        match diagnostic(line.text) {
            Some((place, message)) => {
                let file = place.split(':').next().unwrap_or(place);
                let slot = sink.fail("go build", &format!("error {file}"));
                sink.detail(slot, message);
                sink.locate(slot, place);
            }
            None => self.stop(),
        }
    }

    fn stop(&mut self) {
        self.current = None;
        self.timed_out = None;
        self.in_build = false;
    }

    pub(super) fn capturing(&self) -> bool {
        self.current.is_some() || self.timed_out.is_some() || self.in_build
    }
}

/// `(file.go:10[:5], message)` of `file.go:10:5: message`.
fn diagnostic(text: &str) -> Option<(&str, &str)> {
    let (place, message) = text.split_once(": ")?;
    let file = place.split(':').next()?;
    let numbers = place[file.len()..].split(':').skip(1);
    let numbered = numbers.clone().count() > 0
        && numbers.clone().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let go =
        std::path::Path::new(file).extension().is_some_and(|extension| extension.eq_ignore_ascii_case("go"));
    (go && numbered).then_some((place, message))
}

/// `TestSlow` of a goroutine's frame `example.com/calc.TestSlow(0xc000098ea0?)`.
fn test_frame(text: &str) -> Option<&str> {
    let (function, _) = text.split_once('(')?;
    let name = function.rsplit('.').next()?;
    let valid = name.starts_with("Test")
        && !function.contains(' ')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid.then_some(name)
}
