//! The failures a check's output reports, by name: what the re-injection leads with, so that the
//! agent's next turn is a targeted fix rather than a blind retry.
//!
//! Read from the whole output as it streams past, in bounded memory, whatever its size. The
//! runners' readers see the same cleaned lines ([`lines`]); a reader that is between failures
//! acts only on a line that holds one of a few words or bytes, or begins with one of a few
//! characters ([`lines::Marks`]), so a gigabyte of ordinary lines is searched a block at a time
//! and never read line by line; and such a line goes only to the readers whose headings can
//! begin as it does. A reader inside a failure's report reads every line, within a budget.
//! Each name is kept once: a failure printed in its report and again in the summary is one
//! entry, with what both said.
//!
//! The output is the user's code's and may say anything: what is kept is cut to a bounded size,
//! without control characters, and is the output's words, never ours (the caller labels it).

mod compilers;
mod go;
mod js;
mod jvm;
mod lines;
mod python;
mod ruby;
mod rust;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use lines::{Line, clean, cut};

/// A failing test or diagnostic, as the output names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The test's full name (`tests/test_calc.py::test_add[2-3]`, `calc::tests::adds`) or the
    /// diagnostic's code and file (`error[E0308] src/lib.rs`).
    pub(crate) name: String,
    /// Where it failed (`src/lib.rs:12:5`), when the output says.
    pub(crate) location: Option<String>,
    /// The lines that say what went wrong (the assertion with expected and actual, the panic
    /// message, the compiler's error), most telling first.
    pub(crate) details: Vec<String>,
}

/// What a check's output reports as failing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FailureDigest {
    /// The runner or compiler whose report was read (`pytest`, `cargo test`, `rustc`), or `None`
    /// when no known format was found and [`FailureDigest::errors`] holds the generic reading.
    pub(crate) runner: Option<&'static str>,
    /// The failures, in the order the output reported them; each name once.
    pub(crate) failures: Vec<Failure>,
    /// How many more failures were reported than the digest kept names of.
    pub(crate) more: usize,
    /// With no runner: error-looking lines with a little context, in order.
    pub(crate) errors: Vec<String>,
}

impl FailureDigest {
    /// The digest of a whole output at once.
    #[cfg(test)]
    pub(crate) fn of(output: &[u8]) -> FailureDigest {
        let mut scanner = FailureScanner::default();
        scanner.push(output);
        scanner.digest()
    }
}

/// Longest line read whole. Of a longer one, the first [`LONG_LINE_HEAD`] and the last
/// [`LONG_LINE_TAIL`] bytes are read, with `…` between: a runner's line keeps its beginning and
/// its end (`test <name> ... FAILED`) whatever the length of the name between.
pub(crate) const MAX_LINE_BYTES: usize = 4096;
const LONG_LINE_HEAD: usize = 3072;
const LONG_LINE_TAIL: usize = 1024;
/// Most failures named; more are counted in [`FailureDigest::more`].
pub(crate) const MAX_NAMES: usize = 1_000;
/// Failures whose details are kept (the first ones reported).
pub(crate) const MAX_DETAILED: usize = 100;
/// Lines of details kept per failure.
pub(crate) const MAX_DETAILS: usize = 8;
/// Longest name kept, in characters; a longer one is cut with a visible mark.
pub(crate) const MAX_NAME_CHARS: usize = 200;
/// Longest detail or error line kept, in characters.
pub(crate) const MAX_DETAIL_CHARS: usize = 300;
/// Most error-looking lines kept by the generic reading.
pub(crate) const MAX_ERRORS: usize = 40;
/// Lines read one by one inside failures' reports, over the whole output; past it, only the
/// marked lines are read (a report without end cannot make a gigabyte slow to read).
const CAPTURE_LINES: u64 = 200_000;
/// Names beyond [`MAX_NAMES`] remembered (by hash) so that each is counted once.
const MAX_COUNTED: usize = 100_000;

/// Reads an output chunk by chunk and keeps what [`FailureDigest`] needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FailureScanner {
    /// The line not yet ended, up to [`MAX_LINE_BYTES`].
    pending: Vec<u8>,
    /// The pending line's length.
    pending_len: usize,
    /// Its last [`LONG_LINE_TAIL`] bytes, once it is longer than [`MAX_LINE_BYTES`].
    pending_tail: Vec<u8>,
    readers: Readers,
    /// A reader is inside a report and reads the next line, whatever it holds.
    capturing: bool,
    sink: Sink,
}

impl FailureScanner {
    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        if self.pending_len > 0 {
            let Some(end) = memchr::memchr(b'\n', chunk) else {
                self.extend_pending(chunk);
                return;
            };
            self.extend_pending(&chunk[..end]);
            self.end_pending();
            chunk = &chunk[end + 1..];
        }
        let whole = memchr::memrchr(b'\n', chunk).map_or(0, |end| end + 1);
        self.lines(&chunk[..whole]);
        self.extend_pending(&chunk[whole..]);
    }

    /// What the output read so far reports (a last line without its newline included).
    pub(crate) fn digest(&self) -> FailureDigest {
        let mut scanner = self.clone();
        if scanner.pending_len > 0 {
            scanner.end_pending();
        }
        scanner.readers.finish(&mut scanner.sink);
        scanner.sink.into_digest()
    }

    /// Whole lines, each ending in a newline, read where they lie.
    fn lines(&mut self, text: &[u8]) {
        let mut marks = lines::Marks::of(text);
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', text) {
            let line = &text[start..end];
            let marked = marks.before(end);
            start = end + 1;
            self.line(line, marked || lines::may_matter(line));
        }
    }

    fn line(&mut self, raw: &[u8], marked: bool) {
        if self.capturing {
            self.sink.capture_left -= 1;
            if self.sink.capture_left == 0 {
                // Past the budget, every reader goes back to waiting for a marked line; so it
                // does whether or not the prefilter is on.
                self.readers = Readers::default();
            }
        } else if !lines::read_anyway(marked) {
            return;
        }
        let long;
        let raw = if raw.len() > MAX_LINE_BYTES {
            long = shortened(&raw[..LONG_LINE_HEAD], &raw[raw.len() - LONG_LINE_TAIL..]);
            &long[..]
        } else {
            raw
        };
        let text = clean(raw);
        let line = Line::new(&text);
        self.readers.line(&line, &mut self.sink);
        self.capturing = self.readers.capturing() && self.sink.capture_left > 0;
    }

    fn extend_pending(&mut self, piece: &[u8]) {
        self.pending_len += piece.len();
        let room = MAX_LINE_BYTES.saturating_sub(self.pending.len());
        self.pending.extend_from_slice(&piece[..piece.len().min(room)]);
        if self.pending_len > MAX_LINE_BYTES {
            if self.pending_tail.is_empty() {
                // The line's last bytes so far, from what was kept of it and this piece.
                let kept = self.pending.len().min(self.pending_len - piece.len());
                let before = &self.pending[kept.saturating_sub(LONG_LINE_TAIL)..kept];
                self.pending_tail.extend_from_slice(before);
            }
            self.pending_tail.extend_from_slice(&piece[piece.len().saturating_sub(LONG_LINE_TAIL)..]);
            let over = self.pending_tail.len().saturating_sub(LONG_LINE_TAIL);
            self.pending_tail.drain(..over);
        }
    }

    /// Reads the pending line, now ended.
    fn end_pending(&mut self) {
        let line = if self.pending_len > MAX_LINE_BYTES {
            shortened(&self.pending[..LONG_LINE_HEAD], &self.pending_tail)
        } else {
            std::mem::take(&mut self.pending)
        };
        self.line(&line, true);
        self.pending.clear();
        self.pending_tail.clear();
        self.pending_len = 0;
    }
}

/// A long line's beginning and end, with `…` between.
fn shortened(head: &[u8], tail: &[u8]) -> Vec<u8> {
    [head, "…".as_bytes(), tail].concat()
}

/// Where the readers put what they find: the failures, each name once, within the bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sink {
    runner: Option<&'static str>,
    failures: Vec<Failure>,
    index: HashMap<String, usize>,
    counted: HashSet<u64>,
    /// Per failure, how many of its details were added with [`Sink::lead`].
    leads: HashMap<usize, u8>,
    more: usize,
    errors: Vec<String>,
    capture_left: u64,
}

impl Default for Sink {
    fn default() -> Sink {
        Sink {
            runner: None,
            failures: Vec::new(),
            index: HashMap::new(),
            counted: HashSet::new(),
            leads: HashMap::new(),
            more: 0,
            errors: Vec::new(),
            capture_left: CAPTURE_LINES,
        }
    }
}

/// A failure a reader reported: its place in the digest, when its name was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot(Option<usize>);

impl Slot {
    pub(super) const NONE: Slot = Slot(None);
}

impl Sink {
    /// Reports a failure by name; the same name again gives the same slot.
    pub(super) fn fail(&mut self, runner: &'static str, name: &str) -> Slot {
        let name = name.trim();
        if name.is_empty() {
            return Slot::NONE;
        }
        // A name seen before (a runner's summary repeats its report's) is found without a copy.
        if name.len() <= MAX_NAME_CHARS
            && let Some(&at) = self.index.get(name)
        {
            return Slot(Some(at));
        }
        let name = cut(name, MAX_NAME_CHARS);
        if let Some(&at) = self.index.get(&name) {
            return Slot(Some(at));
        }
        if self.failures.len() >= MAX_NAMES {
            let hash = twox_hash::XxHash64::oneshot(0, name.as_bytes());
            if self.counted.len() < MAX_COUNTED {
                if self.counted.insert(hash) {
                    self.more += 1;
                }
            } else if !self.counted.contains(&hash) {
                self.more += 1;
            }
            return Slot::NONE;
        }
        self.runner.get_or_insert(runner);
        self.index.insert(name.clone(), self.failures.len());
        self.failures.push(Failure { name, location: None, details: Vec::new() });
        Slot(Some(self.failures.len() - 1))
    }

    /// Whether the details of the failure in `slot` are kept (a reader reads its report only then).
    pub(super) fn wants_details(&self, slot: Slot) -> bool {
        slot.0.is_some_and(|at| at < MAX_DETAILED && self.failures[at].details.len() < MAX_DETAILS)
    }

    /// Adds a line that says what went wrong, once.
    pub(super) fn detail(&mut self, slot: Slot, line: &str) {
        let line = line.trim();
        if line.is_empty() || !self.wants_details(slot) {
            return;
        }
        let Some(at) = slot.0 else { return };
        let details = &mut self.failures[at].details;
        if line.len() <= MAX_DETAIL_CHARS && details.iter().any(|kept| kept == line) {
            return;
        }
        let line = cut(line, MAX_DETAIL_CHARS);
        if !details.contains(&line) {
            details.push(line);
        }
    }

    /// Adds a line that says what went wrong before the other details (after those added this
    /// way before it), pushing out the last one when they are full: a runner's error line that
    /// comes after its advice (jest's `SyntaxError: …` under a page of how to configure Babel).
    pub(super) fn lead(&mut self, slot: Slot, line: &str) {
        let Some(at) = slot.0.filter(|at| *at < MAX_DETAILED) else { return };
        let line = cut(line.trim(), MAX_DETAIL_CHARS);
        let failure = &mut self.failures[at];
        if line.is_empty() || failure.details.contains(&line) {
            return;
        }
        let leads = self.leads.entry(at).or_default();
        if usize::from(*leads) >= MAX_DETAILS {
            return;
        }
        failure.details.insert(usize::from(*leads), line);
        failure.details.truncate(MAX_DETAILS);
        *leads += 1;
    }

    /// Says where the failure in `slot` failed, unless a place was said before.
    pub(super) fn locate(&mut self, slot: Slot, location: &str) {
        let location = location.trim();
        if let Some(at) = slot.0
            && !location.is_empty()
            && self.failures[at].location.is_none()
        {
            self.failures[at].location = Some(cut(location, MAX_NAME_CHARS));
        }
    }

    /// Says where the failure in `slot` failed, replacing a place said before (a traceback's
    /// frames, the last of which is where it failed).
    pub(super) fn relocate(&mut self, slot: Slot, location: &str) {
        if let Some(at) = slot.0 {
            self.failures[at].location = None;
        }
        self.locate(slot, location);
    }

    /// An error-looking line for the generic reading.
    pub(super) fn error_line(&mut self, line: &str) {
        let line = line.trim_end();
        if line.trim().is_empty() || self.errors.len() >= MAX_ERRORS {
            return;
        }
        let line = cut(line, MAX_DETAIL_CHARS);
        if self.errors.last() != Some(&line) {
            self.errors.push(line);
        }
    }

    fn into_digest(self) -> FailureDigest {
        let known = !self.failures.is_empty() || self.more > 0;
        FailureDigest {
            runner: if known { self.runner } else { None },
            failures: self.failures,
            more: self.more,
            errors: if known { Vec::new() } else { self.errors },
        }
    }
}

/// Every runner's reader, fed the same lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Readers {
    pytest: python::Pytest,
    unittest: python::Unittest,
    cargo: rust::CargoTest,
    nextest: rust::Nextest,
    rustc: rust::Rustc,
    jest: js::Jest,
    vitest: js::Vitest,
    mocha: js::Mocha,
    node: js::NodeTest,
    go: go::GoTest,
    jvm: jvm::Jvm,
    rspec: ruby::Rspec,
    generic: Generic,
}

impl Readers {
    /// Gives the line to the readers that can take it: a reader inside a report, and a reader
    /// between failures whose heading lines can begin as this one does (its first byte, and its
    /// first after blanks). Every other reader would pass over it, so it is not asked: most
    /// lines a failing run prints are read by no more than three of them.
    fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let all = !lines::dispatched();
        let first = line.text.as_bytes().first().copied().unwrap_or(0);
        let lead = line.trimmed.as_bytes().first().copied().unwrap_or(0);
        // `●`, `✖`, `❯` and `⎯` begin with a byte outside ASCII.
        let wide = !lead.is_ascii();
        // pytest: `==== FAILURES ====`, `FAILED id - …`, `ERROR id`, `____ test ____`.
        if all || self.pytest.capturing() || matches!(first, b'=' | b'F' | b'E' | b'_') {
            self.pytest.line(line, sink);
        }
        // `FAIL: test (…)`, `ERROR: test (…)`.
        if all || self.unittest.capturing() || matches!(first, b'F' | b'E') {
            self.unittest.line(line, sink);
        }
        // `test name ... FAILED`, `---- name stdout ----`.
        if all || self.cargo.capturing() || matches!(first, b't' | b'-') {
            self.cargo.line(line, sink);
        }
        // `FAIL [ 0.01s] …`, indented.
        if all || self.nextest.capturing() || lead == b'F' {
            self.nextest.line(line, sink);
        }
        // `error[E…`, `error: …`, `warning…`.
        if all || self.rustc.capturing() || matches!(first, b'e' | b'w') {
            self.rustc.line(line, sink);
        }
        // `FAIL file`, `● title`, indented.
        if all || self.jest.capturing() || lead == b'F' || wide {
            self.jest.line(line, sink);
        }
        // `FAIL file > test`, indented.
        if all || self.vitest.capturing() || lead == b'F' {
            self.vitest.line(line, sink);
        }
        // `N failing`, and under it `N) title`.
        if all || self.mocha.capturing() || lead.is_ascii_digit() {
            self.mocha.line(line, sink);
        }
        // `✖ name`, `not ok N - name`, indented.
        if all || self.node.capturing() || lead == b'n' || wide {
            self.node.line(line, sink);
        }
        // `--- FAIL: name` (indented for a subtest), `panic: …`, `# package`.
        if all || self.go.capturing() || lead == b'-' || matches!(first, b'p' | b'#') {
            self.go.line(line, sink);
        }
        // `[ERROR] test … <<< FAILURE!`, `Class > test() FAILED`.
        if all || self.jvm.capturing() || first == b'[' || line.text.ends_with(" FAILED") {
            self.jvm.line(line, sink);
        }
        // `Failures:`, `Failed examples:`, and under the first `  N) title`.
        if all || self.rspec.capturing() || first == b'F' || lead.is_ascii_digit() {
            self.rspec.line(line, sink);
        }
        compilers::line(line, sink);
        self.generic.line(line, sink);
    }

    /// Whether a reader is inside a report and must see the next line whatever it holds.
    fn capturing(&self) -> bool {
        self.pytest.capturing()
            || self.unittest.capturing()
            || self.cargo.capturing()
            || self.nextest.capturing()
            || self.rustc.capturing()
            || self.jest.capturing()
            || self.vitest.capturing()
            || self.mocha.capturing()
            || self.node.capturing()
            || self.go.capturing()
            || self.jvm.capturing()
            || self.rspec.capturing()
            || self.generic.capturing()
    }

    /// The output ended: what a reader held back is reported.
    fn finish(&mut self, sink: &mut Sink) {
        self.pytest.finish(sink);
        self.rustc.finish(sink);
    }
}

/// The reading of output no runner claims: error-looking lines, each with the line after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Generic {
    next: bool,
}

impl Generic {
    fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        if sink.errors.len() >= MAX_ERRORS {
            self.next = false;
            return;
        }
        // Only words the prefilter marks: a line it passes over must leave every reader as it was.
        let looks = line.has_any(&["error", "fail", "panic"]) || line.text.contains(['✖', '✗']);
        if looks || self.next {
            sink.error_line(line.text);
        }
        self.next = looks;
    }

    fn capturing(&self) -> bool {
        self.next
    }
}
