//! jest, vitest, mocha and `node --test` (its spec and TAP reporters).

use super::lines::Line;
use super::{Sink, Slot};

/// Lines of one failure's report read at most.
const BODY_LINES: u32 = 400;

/// `file:line:col` of a stack frame `at fn (file:line:col)` or `at file:line:col`, unless it is
/// a frame of node's or of a dependency.
fn frame_place(trimmed: &str) -> Option<&str> {
    let frame = trimmed.strip_prefix("at ")?;
    let place = match frame.rsplit_once('(') {
        Some((_, inside)) => inside.trim_end_matches(')'),
        None => frame,
    };
    (!place.starts_with("node:") && !place.contains("node_modules") && place.contains(':')).then_some(place)
}

/// Whether a line is a frame of a stack trace or a line of a code frame (`> 12 |`, `  3|`).
fn is_frame_or_code(trimmed: &str) -> bool {
    if trimmed.starts_with("at ") {
        return true;
    }
    let code = trimmed.trim_start_matches('>').trim_start();
    let digits = code.bytes().take_while(u8::is_ascii_digit).count();
    code.starts_with('|') || (digits > 0 && code[digits..].trim_start().starts_with('|'))
}

/// jest: `● Suite › nested › test` heads a failure's report: the assertion (`Expected: 5`,
/// `Received: 4`), a code frame and the stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Jest {
    file: Option<String>,
    current: Option<Slot>,
    /// The message is over once a code frame or a stack frame began.
    past_message: bool,
    left: u32,
}

impl Jest {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let trimmed = line.trimmed;
        if let Some(file) = trimmed.strip_prefix("FAIL ")
            && !file.contains(" > ")
        {
            self.file = Some(file.trim().trim_start_matches("./").to_string());
            self.current = None;
            return;
        }
        if let Some(title) = trimmed.strip_prefix("● ") {
            self.current = None;
            let title = title.trim();
            if title == "Console" {
                return;
            }
            let name = match (&self.file, title) {
                (Some(file), "Test suite failed to run") => format!("{file}: {title}"),
                _ => title.to_string(),
            };
            let slot = sink.fail("jest", &name);
            self.current = sink.wants_details(slot).then_some(slot);
            self.past_message = false;
            self.left = BODY_LINES;
            return;
        }
        let Some(slot) = self.current else { return };
        self.left = self.left.saturating_sub(1);
        if self.left == 0
            || trimmed.starts_with("Test Suites:")
            || trimmed.starts_with("Summary of all failing tests")
            || trimmed.starts_with("PASS ")
        {
            self.current = None;
            return;
        }
        if let Some(place) = frame_place(trimmed) {
            sink.locate(slot, place);
            self.past_message = true;
        } else if is_frame_or_code(trimmed) {
            self.past_message = true;
        } else if is_error_line(trimmed) {
            sink.lead(slot, trimmed);
        } else if !self.past_message {
            sink.detail(slot, trimmed);
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.current.is_some()
    }
}

/// Whether a line of a report is the error itself (`SyntaxError: …`, `TypeError: …`,
/// `Cannot find module …`) rather than advice or context around it.
fn is_error_line(trimmed: &str) -> bool {
    let word = trimmed.split([':', ' ']).next().unwrap_or_default();
    (word.ends_with("Error") && trimmed[word.len()..].starts_with(':'))
        || trimmed.starts_with("Cannot find module ")
}

/// vitest: ` FAIL  calc.test.js > suite > test` heads a failure's report, which ends at the
/// place ` ❯ calc.test.js:3:82`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Vitest {
    current: Option<Slot>,
    left: u32,
}

impl Vitest {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let trimmed = line.trimmed;
        if let Some(name) = trimmed.strip_prefix("FAIL ")
            && name.contains(" > ")
        {
            let slot = sink.fail("vitest", name.trim());
            self.current = sink.wants_details(slot).then_some(slot);
            self.left = BODY_LINES;
            return;
        }
        let Some(slot) = self.current else { return };
        self.left = self.left.saturating_sub(1);
        if self.left == 0 || trimmed.starts_with("⎯") || trimmed.starts_with("Test Files") {
            self.current = None;
            return;
        }
        if let Some(place) = trimmed.strip_prefix("❯ ") {
            sink.locate(slot, place);
            self.current = None;
        } else if !is_frame_or_code(trimmed) {
            sink.detail(slot, trimmed);
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.current.is_some()
    }
}

/// mocha: after `N failing`, each failure is `  1) suite` with the rest of its title on the
/// lines after, down to the one ending in `:`, then the error and its stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Mocha {
    in_failures: bool,
    title: Option<String>,
    current: Option<Slot>,
    past_message: bool,
    left: u32,
}

impl Mocha {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let trimmed = line.trimmed;
        if let Some(count) = trimmed.strip_suffix(" failing")
            && count.bytes().all(|b| b.is_ascii_digit())
            && !count.is_empty()
        {
            self.in_failures = true;
            self.title = None;
            self.current = None;
            return;
        }
        if !self.in_failures {
            return;
        }
        if let Some(first) = numbered(trimmed) {
            self.current = None;
            self.left = BODY_LINES;
            self.title = Some(String::new());
            self.title_part(first, sink);
            return;
        }
        if self.title.is_some() {
            self.left = self.left.saturating_sub(1);
            if self.left == 0 || trimmed.is_empty() {
                self.title = None;
            } else {
                self.title_part(trimmed, sink);
            }
            return;
        }
        let Some(slot) = self.current else { return };
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            self.current = None;
            return;
        }
        if let Some(place) = frame_place(trimmed) {
            sink.locate(slot, place);
            self.past_message = true;
        } else if trimmed.starts_with("at ") {
            self.past_message = true;
        } else if !self.past_message && trimmed != "+ expected - actual" {
            sink.detail(slot, trimmed);
        }
    }

    /// A piece of a title; the last ends in `:`.
    fn title_part(&mut self, part: &str, sink: &mut Sink) {
        let Some(title) = &mut self.title else { return };
        let (part, last) = match part.strip_suffix(':') {
            Some(part) => (part, true),
            None => (part, false),
        };
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(part.trim());
        if title.len() > super::MAX_LINE_BYTES {
            self.title = None;
            return;
        }
        if last {
            let slot = sink.fail("mocha", title);
            self.title = None;
            self.current = sink.wants_details(slot).then_some(slot);
            self.past_message = false;
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.title.is_some() || self.current.is_some()
    }
}

/// The title of `1) title`.
fn numbered(trimmed: &str) -> Option<&str> {
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    let rest = trimmed[digits..].strip_prefix(") ")?;
    (digits > 0).then_some(rest)
}

/// `node --test`: the spec reporter's `✖ name (1.2ms)` with the error indented under it (and
/// `test at file:line:col` before it in the list of failing tests), or the TAP reporter's
/// `not ok 2 - name` with a YAML block (`location:`, `error:`, `expected:`, `actual:`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct NodeTest {
    place: Option<String>,
    /// In the list of failing tests, where a `test at` line comes before each.
    awaiting_place: bool,
    current: Option<Slot>,
    indent: usize,
    report: Report,
    left: u32,
}

/// Where a `node --test` reader is in a failure's report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Report {
    /// The spec reporter's message, before the stack.
    #[default]
    Message,
    /// The spec reporter's stack: nothing more to keep.
    Stack,
    /// The TAP reporter's YAML block.
    Yaml,
    /// Its `error: |-` lines.
    YamlError,
}

impl NodeTest {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let trimmed = line.trimmed;
        if let Some(title) = trimmed.strip_prefix("✖ ") {
            self.current = None;
            if title == "failing tests:" {
                // The list of failing tests: each begins with `test at file:line:col`.
                self.awaiting_place = true;
                self.left = BODY_LINES;
                return;
            }
            if title.ends_with("# TODO") || title.contains("# TODO ") {
                return;
            }
            let name = strip_duration(title);
            let slot = sink.fail("node --test", name);
            self.awaiting_place = false;
            if let Some(place) = self.place.take() {
                sink.locate(slot, &place);
            }
            self.start(slot, line.indent(), false, sink);
            return;
        }
        if let Some(rest) = trimmed.strip_prefix("not ok ") {
            self.current = None;
            let Some((_, title)) = rest.split_once(" - ") else { return };
            if title.contains("# TODO") || title.contains("# SKIP") {
                return;
            }
            let slot = sink.fail("node --test", title.trim());
            self.start(slot, line.indent(), true, sink);
            return;
        }
        if !self.capturing() {
            return;
        }
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            self.current = None;
            self.awaiting_place = false;
            return;
        }
        if let Some(place) = trimmed.strip_prefix("test at ") {
            self.place = Some(place.to_string());
            self.awaiting_place = true;
        }
        let Some(slot) = self.current else { return };
        if matches!(self.report, Report::Yaml | Report::YamlError) {
            self.tap_line(line, slot, sink);
        } else if !trimmed.is_empty() && line.indent() <= self.indent {
            self.current = None;
        } else if let Some(place) = frame_place(trimmed) {
            sink.locate(slot, place);
            self.report = Report::Stack;
        } else if trimmed.starts_with("at ") {
            self.report = Report::Stack;
        } else if self.report == Report::Message {
            sink.detail(slot, trimmed);
        }
    }

    fn start(&mut self, slot: Slot, indent: usize, tap: bool, sink: &Sink) {
        self.current = sink.wants_details(slot).then_some(slot);
        self.indent = indent;
        self.report = if tap { Report::Yaml } else { Report::Message };
        if self.current.is_some() {
            self.left = BODY_LINES;
        }
    }

    fn tap_line(&mut self, line: &Line<'_>, slot: Slot, sink: &mut Sink) {
        let trimmed = line.trimmed;
        if trimmed == "..." {
            self.current = None;
            return;
        }
        if self.report == Report::YamlError {
            if line.indent() > self.indent + 2 || trimmed.is_empty() {
                sink.detail(slot, trimmed);
                return;
            }
            self.report = Report::Yaml;
        }
        let Some((key, value)) =
            trimmed.split_once(": ").or_else(|| trimmed.strip_suffix(':').map(|k| (k, "")))
        else {
            return;
        };
        let value = value.trim();
        match key {
            "location" => sink.locate(slot, value.trim_matches('\'')),
            "error" if value == "|-" || value == "|" || value.is_empty() => self.report = Report::YamlError,
            "error" => sink.detail(slot, value.trim_matches('\'')),
            "expected" | "actual" => sink.detail(slot, trimmed),
            "failureType" if value.contains("Timeout") || value.contains("timeout") => {
                sink.detail(slot, trimmed);
            }
            _ => {}
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.current.is_some() || self.awaiting_place
    }
}

/// `name` of `name (1.23ms)`.
fn strip_duration(title: &str) -> &str {
    match title.rsplit_once(" (") {
        Some((name, time)) if time.ends_with("ms)") || time.ends_with("s)") => name,
        _ => title,
    }
}
