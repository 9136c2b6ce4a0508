//! Test counts from verify's output: the final summary lines of the common test runners.
//!
//! The test-count ratchet needs to know how many tests verify ran, passed and skipped. Each
//! runner says so in a summary it prints when it finishes; this module recognises those lines as
//! verify's output streams past, in bounded memory, so a summary in the middle of a gigabyte of
//! output is seen as surely as one at the end.
//!
//! A test can print anything, including a line that looks like a summary. So only a runner's
//! *final* summary counts: runners that print a start line (`running N tests`, pytest's
//! `test session starts`, `Test project`, ...) have their output cut into runs at it, and
//! within a run only the last summary counts (an imitation printed by a test comes before the
//! runner's own). Runs add up: a workspace of crates, several suites in one check. Runners
//! without a start line count their last summary only. Where a runner states what to expect
//! (cargo's `running N tests`, nextest's `Starting N tests`, jest's and vitest's totals), a
//! summary that disagrees is not the runner's.
//!
//! Nothing here guesses: output without a recognised summary has no counts.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use line_marks::LineMarks;

/// Lines longer than this are never summaries and are passed over unread.
const MAX_LINE_BYTES: usize = 1024;
/// Suites (runs of one runner, or test binaries) kept per output; more are counted, not kept.
pub(crate) const MAX_SUITES: usize = 1_000;
/// Tests of one go package, or test points of one TAP stream, kept by name or number.
const MAX_GO_TESTS: usize = 100_000;

/// The test runners whose summaries are recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Runner {
    Cargo,
    Nextest,
    Pytest,
    Unittest,
    Go,
    Gotestsum,
    Jest,
    Vitest,
    Mocha,
    Node,
    Rspec,
    Phpunit,
    Ctest,
    Bats,
    Tap,
    Plain,
}

impl Runner {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Runner::Cargo => "cargo test",
            Runner::Nextest => "nextest",
            Runner::Pytest => "pytest",
            Runner::Unittest => "unittest",
            Runner::Go => "go test",
            Runner::Gotestsum => "gotestsum",
            Runner::Jest => "jest",
            Runner::Vitest => "vitest",
            Runner::Mocha => "mocha",
            Runner::Node => "node --test",
            Runner::Rspec => "rspec",
            Runner::Phpunit => "phpunit",
            Runner::Ctest => "ctest",
            Runner::Bats => "bats",
            Runner::Tap => "TAP",
            Runner::Plain => "plain summary",
        }
    }
}

impl fmt::Display for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many tests of one suite passed, failed and were skipped (skipped, ignored, pending, todo,
/// expected failures: every test that was there but did not count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
}

impl Counts {
    /// Tests that ran: passed or failed.
    pub(crate) fn ran(self) -> u64 {
        self.passed + self.failed
    }

    fn add(self, other: Counts) -> Counts {
        Counts {
            passed: self.passed + other.passed,
            failed: self.failed + other.failed,
            skipped: self.skipped + other.skipped,
        }
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ran ({} passed, {} failed), {} skipped",
            self.ran(),
            self.passed,
            self.failed,
            self.skipped
        )
    }
}

/// One suite's counts: a run of one runner, or one of cargo's test binaries, one go package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Suite {
    pub runner: Runner,
    /// Unique within the output and stable from run to run, e.g. `pytest`, `pytest #2`,
    /// `cargo test: calc (tests/calc.rs)`, `go test: example.com/calc`.
    pub name: String,
    pub counts: Counts,
}

/// Everything the summaries in one output say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// In the order they ended.
    pub suites: Vec<Suite>,
    /// Why a runner that was seen gave no counts, when one did not.
    pub note: Option<&'static str>,
}

impl Tally {
    /// All suites together.
    pub(crate) fn total(&self) -> Counts {
        self.suites.iter().fold(Counts::default(), |sum, suite| sum.add(suite.counts))
    }

    /// The runners seen, in order, each once.
    pub(crate) fn runners(&self) -> Vec<Runner> {
        let mut runners: Vec<Runner> = Vec::new();
        for suite in &self.suites {
            if !runners.contains(&suite.runner) {
                runners.push(suite.runner);
            }
        }
        runners
    }
}

/// The tally of a whole output at once.
#[cfg(test)]
pub(crate) fn tally(output: &str) -> Tally {
    let mut scanner = Scanner::default();
    scanner.push(output.as_bytes());
    scanner.tally()
}

/// Reads output as it streams past, line by line, keeping only what the summaries need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Scanner {
    /// The line not yet ended, up to [`MAX_LINE_BYTES`].
    pending: Vec<u8>,
    /// The pending line is longer than any summary.
    too_long: bool,
    parsers: Parsers,
}

impl Scanner {
    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        if !self.pending.is_empty() || self.too_long {
            let Some(end) = memchr::memchr(b'\n', chunk) else {
                self.extend_pending(chunk);
                return;
            };
            self.extend_pending(&chunk[..end]);
            if !self.too_long {
                self.parsers.line(&clean(&self.pending));
            }
            self.pending.clear();
            self.too_long = false;
            chunk = &chunk[end + 1..];
        }
        let whole = memchr::memrchr(b'\n', chunk).map_or(0, |end| end + 1);
        self.lines(&chunk[..whole]);
        self.extend_pending(&chunk[whole..]);
    }

    /// Whole lines, each ending in a newline, read where they lie (no copy). Of a run of
    /// ordinary lines only the last is read: it does what each of them does
    /// ([`line_marks`]).
    fn lines(&mut self, text: &[u8]) {
        let mut marks = LineMarks::of(text);
        let mut ordinary: Option<&[u8]> = None;
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', text) {
            let line = &text[start..end];
            let marked = marks.before(end);
            start = end + 1;
            if line.len() > MAX_LINE_BYTES {
                continue;
            }
            if !may_be(marked || line_marks::may_begin_a_summary(line)) {
                ordinary = Some(line);
                continue;
            }
            if let Some(last) = ordinary.take() {
                self.parsers.line(&clean(last));
            }
            self.parsers.line(&clean(line));
        }
        if let Some(last) = ordinary {
            self.parsers.line(&clean(last));
        }
    }

    fn extend_pending(&mut self, piece: &[u8]) {
        if self.too_long || self.pending.len() + piece.len() > MAX_LINE_BYTES {
            self.too_long = true;
            self.pending.clear();
        } else {
            self.pending.extend_from_slice(piece);
        }
    }

    /// The counts of everything pushed so far, as if the output ended here.
    pub(crate) fn tally(&self) -> Tally {
        let mut parsers = self.parsers.clone();
        if !self.too_long && !self.pending.is_empty() {
            parsers.line(&clean(&self.pending));
        }
        parsers.finish()
    }
}

/// A line as a terminal would show it: colour codes removed, and only what follows the last
/// carriage return (progress lines redraw themselves that way).
fn clean(line: &[u8]) -> Cow<'_, str> {
    // Most lines have neither: one search of the bytes spares the searches of the text below.
    // Checking UTF-8 whole (with its ASCII fast path) is several times quicker than the lossy
    // decoder's chunking, which only lines that are not UTF-8 need.
    if memchr::memchr2(b'\r', 0x1b, line).is_none() {
        return match std::str::from_utf8(line) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(line),
        };
    }
    let text = String::from_utf8_lossy(line);
    let text = match text {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim_end_matches('\r')),
        Cow::Owned(s) => Cow::Owned(s.trim_end_matches('\r').to_string()),
    };
    let text = match text.rfind('\r') {
        Some(at) => Cow::Owned(text[at + 1..].to_string()),
        None => text,
    };
    if !text.contains('\u{1b}') {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // CSI: ESC [ parameters, then one final byte from @ to ~.
        if chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    Cow::Owned(out)
}

/// The summaries of one runner, cut into runs at the runner's start line: within a run the last
/// summary counts, and runs add up. Summaries before the first start line count only if the
/// output has no start line at all (a runner that prints none, or pytest's `-q`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Runs {
    before_start: Option<Counts>,
    started: bool,
    current: Option<Counts>,
    done: Vec<Counts>,
}

impl Runs {
    fn start(&mut self) {
        if let Some(counts) = self.current.take()
            && self.done.len() < MAX_SUITES
        {
            self.done.push(counts);
        }
        self.started = true;
    }

    fn summary(&mut self, counts: Counts) {
        if self.started {
            self.current = Some(counts);
        } else {
            self.before_start = Some(counts);
        }
    }

    fn all(&self) -> Vec<Counts> {
        if !self.started {
            return self.before_start.into_iter().collect();
        }
        self.done.iter().copied().chain(self.current).collect()
    }
}

/// Every runner's parser, fed the same lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Parsers {
    cargo: Cargo,
    nextest: Nextest,
    pytest: Runs,
    unittest: Unittest,
    go: Go,
    gotestsum: Option<Counts>,
    jest: Jest,
    vitest: Vitest,
    mocha: Mocha,
    node: Node,
    rspec: Rspec,
    phpunit: Runs,
    ctest: Ctest,
    bats: Option<Counts>,
    tap: Tap,
    plain: Option<Counts>,
}

impl Parsers {
    fn line(&mut self, line: &str) {
        self.cargo.line(line);
        self.nextest.line(line);
        if is_pytest_start(line) {
            self.pytest.start();
        } else if let Some(counts) = pytest_summary(line) {
            self.pytest.summary(counts);
        }
        self.unittest.line(line);
        self.go.line(line);
        if let Some(counts) = gotestsum_summary(line) {
            self.gotestsum = Some(counts);
        }
        self.jest.line(line);
        self.vitest.line(line);
        self.mocha.line(line);
        if self.node.line(line) {
            // node --test's TAP reporter prints its own TAP stream before this summary.
            self.tap.discard_open();
        }
        self.rspec.line(line);
        if line.starts_with("PHPUnit ") && line.contains(" by Sebastian Bergmann") {
            self.phpunit.start();
        } else if let Some(counts) = phpunit_summary(line) {
            self.phpunit.summary(counts);
        }
        self.ctest.line(line);
        if let Some(counts) = bats_summary(line) {
            self.bats = Some(counts);
        }
        self.tap.line(line);
        if let Some(counts) = plain_summary(line) {
            self.plain = Some(counts);
        }
    }

    fn finish(self) -> Tally {
        let mut found: Vec<(Runner, String, Counts)> = Vec::new();
        let numbered = |runner: Runner, runs: Vec<Counts>, found: &mut Vec<(Runner, String, Counts)>| {
            for (i, counts) in runs.into_iter().enumerate() {
                let name = if i == 0 { runner.name().to_string() } else { format!("{} #{}", runner, i + 1) };
                found.push((runner, name, counts));
            }
        };
        for (name, counts) in self.cargo.all() {
            found.push((Runner::Cargo, format!("cargo test: {name}"), counts));
        }
        numbered(Runner::Nextest, self.nextest.runs.all(), &mut found);
        numbered(Runner::Pytest, self.pytest.all(), &mut found);
        numbered(Runner::Unittest, self.unittest.last.into_iter().collect(), &mut found);
        if let Some(counts) = self.gotestsum {
            // gotestsum counts the go test run it wraps.
            numbered(Runner::Gotestsum, vec![counts], &mut found);
        } else {
            for (package, counts) in &self.go.done {
                found.push((Runner::Go, format!("go test: {package}"), *counts));
            }
        }
        numbered(Runner::Jest, self.jest.last.into_iter().collect(), &mut found);
        numbered(Runner::Vitest, self.vitest.runs.all(), &mut found);
        numbered(Runner::Mocha, self.mocha.last().into_iter().collect(), &mut found);
        numbered(Runner::Node, self.node.last().into_iter().collect(), &mut found);
        numbered(Runner::Rspec, self.rspec.last.into_iter().collect(), &mut found);
        numbered(Runner::Phpunit, self.phpunit.all(), &mut found);
        numbered(Runner::Ctest, self.ctest.runs().all(), &mut found);
        numbered(Runner::Bats, self.bats.into_iter().collect(), &mut found);
        numbered(Runner::Tap, self.tap.all(), &mut found);
        // A plain "N passed, N failed" line is only a summary when no runner printed one.
        if found.is_empty() {
            numbered(Runner::Plain, self.plain.into_iter().collect(), &mut found);
        }
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let suites = found
            .into_iter()
            .take(MAX_SUITES)
            .map(|(runner, name, counts)| {
                let n = seen.entry(name.clone()).or_insert(0);
                *n += 1;
                let name = if *n == 1 { name } else { format!("{name} #{n}") };
                Suite { runner, name, counts }
            })
            .collect::<Vec<_>>();
        let note = (suites.is_empty() && self.go.quiet_packages > 0).then_some(
            "go test prints how many tests ran only with -v: add -v to the go test command for the \
             test-count ratchet",
        );
        Tally { suites, note }
    }
}

/// Whether a line gets past a parser's prefilter. Every line of the output goes through every
/// parser, so each parser first makes one cheap test that is false only for a line that cannot be
/// one of its own, and passes the others over before its searches of the line. In tests,
/// `prefilter_reference::without_prefilters` lets every line through, so what the parsers give
/// with the prefilters can be compared with what they give without them.
fn may_be(passes: bool) -> bool {
    #[cfg(test)]
    if prefilter_reference::OFF.get() {
        return true;
    }
    passes
}

/// Whether the line's first character that is not white space is an ASCII digit: every summary
/// that begins with its count (`3 passing (…)`, `3 tests, 1 failure`, `80% tests passed, …`).
fn starts_with_digit(line: &str) -> bool {
    line.trim_start().as_bytes().first().is_some_and(u8::is_ascii_digit)
}

/// `N word` items: `3 passed`, `1 failed`. Every item must have that shape.
fn items(text: &str, separator: char) -> Option<Vec<(u64, &str)>> {
    text.split(separator)
        .map(|item| {
            let item = item.trim();
            let (number, word) = item.split_once(' ')?;
            Some((self::number(number)?, word.trim()))
        })
        .collect()
}

/// More tests than any real suite runs: a count above it is not a summary. It keeps every sum of
/// counts far from overflowing, so a made-up huge count cannot wrap a shortfall back to zero.
const MOST_TESTS: u64 = 100_000_000;

/// A whole number, with nothing else, up to [`MOST_TESTS`].
fn number(text: &str) -> Option<u64> {
    let text = text.trim();
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
        .filter(|n| *n <= MOST_TESTS)
}

/// `0.01s`, `1.5 s`, `12ms`: a duration, as runners print them.
fn is_duration(text: &str) -> bool {
    let text = text.trim();
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic()).trim_end();
    let unit = &text[digits.len()..].trim();
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && matches!(*unit, "s" | "ms" | "m" | "sec" | "secs" | "seconds" | "µs" | "us" | "ns")
}

// --- cargo test (libtest) ---------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Cargo {
    /// The test binary cargo announced last (`Running tests/calc.rs (…/calc-…)`, `Doc-tests calc`).
    announced: Option<String>,
    open: Option<CargoRun>,
    done: Vec<(Option<String>, Counts)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CargoRun {
    binary: Option<String>,
    /// `running N tests`
    expected: u64,
    summary: Option<Counts>,
}

impl Cargo {
    fn line(&mut self, line: &str) {
        if let Some(binary) = cargo_binary(line) {
            self.announced = Some(binary);
        } else if let Some(expected) = line
            .strip_prefix("running ")
            .and_then(|rest| rest.strip_suffix(" tests").or_else(|| rest.strip_suffix(" test")))
            .and_then(number)
        {
            self.close();
            self.open = Some(CargoRun { binary: self.announced.take(), expected, summary: None });
        } else if let Some(counts) = line.strip_prefix("test result: ").and_then(libtest_result)
            && let Some(run) = &mut self.open
        {
            // A test printing a summary of its own cannot match the count announced for its binary.
            let (counts, measured) = counts;
            if counts.passed + counts.failed + counts.skipped + measured == run.expected {
                run.summary = Some(Counts { passed: counts.passed + measured, ..counts });
            }
        }
    }

    fn close(&mut self) {
        if let Some(CargoRun { binary, summary: Some(counts), .. }) = self.open.take()
            && self.done.len() < MAX_SUITES
        {
            self.done.push((binary, counts));
        }
    }

    fn all(mut self) -> Vec<(String, Counts)> {
        self.close();
        let mut unnamed = 0;
        self.done
            .into_iter()
            .map(|(binary, counts)| {
                let name = binary.unwrap_or_else(|| {
                    unnamed += 1;
                    format!("test binary #{unnamed}")
                });
                (name, counts)
            })
            .collect()
    }
}

/// `     Running tests/calc.rs (target/debug/deps/calc-0123456789abcdef)` → `calc (tests/calc.rs)`;
/// `   Doc-tests calc` → `doc-tests calc`.
fn cargo_binary(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if trimmed.len() == line.len() {
        return None;
    }
    if let Some(name) = trimmed.strip_prefix("Doc-tests ") {
        return Some(format!("doc-tests {}", name.trim()));
    }
    let rest = trimmed.strip_prefix("Running ")?;
    let (target, path) = rest.strip_suffix(')')?.rsplit_once(" (")?;
    let file = path.rsplit(['/', '\\']).next()?.trim_end_matches(".exe");
    // Cargo names the binary `<name>-<16 hex digits>`; the digits change with every build.
    let name = match file.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name,
        _ => file,
    };
    Some(format!("{name} ({})", target.trim()))
}

/// `ok. 3 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.00s` → the
/// counts (ignored as skipped) and the measured benchmarks.
fn libtest_result(text: &str) -> Option<(Counts, u64)> {
    let rest = text.strip_prefix("ok. ").or_else(|| text.strip_prefix("FAILED. "))?;
    let mut counts = Counts::default();
    let mut measured = 0;
    let mut seen = 0;
    for item in rest.split("; ") {
        let (n, word) = item.split_once(' ')?;
        let Some(n) = number(n) else { continue };
        match word {
            "passed" => counts.passed = n,
            "failed" => counts.failed = n,
            "ignored" => counts.skipped = n,
            "measured" => measured = n,
            _ => continue,
        }
        seen += 1;
    }
    (seen == 4).then_some((counts, measured))
}

// --- cargo nextest ----------------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Nextest {
    /// `Starting N tests across M binaries`
    expected: Option<u64>,
    runs: Runs,
}

impl Nextest {
    fn line(&mut self, line: &str) {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("Starting ") {
            if let Some((n, _)) = rest.split_once(" test").filter(|(_, tail)| tail.contains(" across "))
                && let Some(n) = number(n)
            {
                self.runs.start();
                self.expected = Some(n);
            }
        } else if let Some(rest) = trimmed.strip_prefix("Summary [")
            && let Some(expected) = self.expected
            && let Some((_, rest)) = rest.split_once("] ")
            && let Some(counts) = nextest_summary(rest, expected)
        {
            self.runs.summary(counts);
        }
    }
}

/// `5 tests run: 4 passed, 1 failed, 1 skipped` or, when a failure cancelled the rest,
/// `3/5 tests run: 2 passed, 1 failed, 1 skipped`.
fn nextest_summary(text: &str, expected: u64) -> Option<Counts> {
    let (run, rest) = text.split_once(" run: ")?;
    let run = run.strip_suffix(" tests").or_else(|| run.strip_suffix(" test"))?;
    let (ran, planned) = match run.split_once('/') {
        Some((ran, planned)) => (number(ran)?, number(planned)?),
        None => (number(run)?, number(run)?),
    };
    if planned != expected || ran > planned {
        return None;
    }
    let mut passed = None;
    let mut skipped = 0;
    for item in rest.split(", ") {
        // `4 passed (1 flaky)`: the note in parentheses is part of the passed count.
        let item = item.split(" (").next().unwrap_or(item);
        let Some((n, word)) = item.split_once(' ') else { continue };
        let Some(n) = number(n) else { continue };
        match word {
            "passed" => passed = Some(n),
            "skipped" => skipped = n,
            _ => {}
        }
    }
    let passed = passed?;
    // Whatever ran and did not pass failed: failed, timed out, or could not start.
    Some(Counts { passed, failed: ran.checked_sub(passed)?, skipped })
}

// --- pytest -------------------------------------------------------------------------------------

fn is_pytest_start(line: &str) -> bool {
    line.starts_with('=') && line.trim_matches(|c| c == '=' || c == ' ') == "test session starts"
}

/// `==== 3 failed, 2 passed, 2 skipped, 1 xfailed in 0.03s ====`, also without the rules
/// (`-q`), and `no tests ran in 0.01s`.
fn pytest_summary(line: &str) -> Option<Counts> {
    // The body ends with ` in <duration>`.
    if !may_be(line.contains(" in ")) {
        return None;
    }
    let decorated = line.starts_with('=');
    let body = line.trim_matches(|c| c == '=' || c == ' ');
    if decorated != line.ends_with('=') {
        return None;
    }
    // `in 65.12s (0:01:05)`
    let body = match body.rsplit_once(" (") {
        Some((before, clock)) if clock.ends_with(')') && clock.contains(':') => before,
        _ => body,
    };
    let (outcomes, time) = body.rsplit_once(" in ")?;
    if !is_duration(time) {
        return None;
    }
    if outcomes == "no tests ran" {
        return Some(Counts::default());
    }
    let mut counts = Counts::default();
    for (n, word) in items(outcomes, ',')? {
        match word {
            "passed" | "xpassed" => counts.passed += n,
            "failed" | "error" | "errors" => counts.failed += n,
            // An expected failure is a test that did not count: `xfail` is a skip marker.
            "skipped" | "xfailed" => counts.skipped += n,
            "deselected" | "warning" | "warnings" | "rerun" | "reruns" => {}
            _ => return None,
        }
    }
    Some(counts)
}

// --- unittest -----------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Unittest {
    /// The line before was unittest's rule of dashes.
    after_rule: bool,
    /// `Ran N tests in …` was just seen: the blank line and the verdict come next.
    ran: Option<(u64, bool)>,
    last: Option<Counts>,
}

impl Unittest {
    fn line(&mut self, line: &str) {
        let ran = self.ran.take();
        let after_rule =
            std::mem::replace(&mut self.after_rule, line.len() >= 20 && line.bytes().all(|b| b == b'-'));
        if after_rule
            && let Some(rest) = line.strip_prefix("Ran ")
            && let Some((n, time)) = rest.split_once(" tests in ").or_else(|| rest.split_once(" test in "))
            && is_duration(time)
            && let Some(n) = number(n)
        {
            self.ran = Some((n, false));
            return;
        }
        match ran {
            Some((n, false)) if line.is_empty() => self.ran = Some((n, true)),
            Some((n, true)) => {
                if let Some(counts) = unittest_verdict(line, n) {
                    self.last = Some(counts);
                }
            }
            _ => {}
        }
    }
}

/// `OK`, `OK (skipped=1)`, `FAILED (failures=1, errors=1, skipped=2)`, `NO TESTS RAN`.
fn unittest_verdict(line: &str, ran: u64) -> Option<Counts> {
    if line == "NO TESTS RAN" {
        return Some(Counts::default());
    }
    let details = if line == "OK" {
        ""
    } else {
        let rest = line.strip_prefix("OK (").or_else(|| line.strip_prefix("FAILED ("))?;
        rest.strip_suffix(')')?
    };
    let mut failed = 0;
    let mut skipped = 0;
    for item in details.split(", ").filter(|i| !i.is_empty()) {
        let (key, n) = item.split_once('=')?;
        let n = number(n)?;
        match key {
            "failures" | "errors" | "unexpected successes" => failed += n,
            "skipped" | "expected failures" => skipped += n,
            _ => return None,
        }
    }
    let passed = ran.checked_sub(failed + skipped)?;
    Some(Counts { passed, failed, skipped })
}

// --- go test -v, gotestsum ---------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Go {
    /// The tests of the package being printed that `=== RUN` announced: go test ran with -v, so
    /// every test reports, and a result line for a test that never started is not a result.
    started: BTreeSet<String>,
    /// The outcome of each test (and subtest) of the package being printed, by name.
    results: BTreeMap<String, GoOutcome>,
    done: Vec<(String, Counts)>,
    /// Packages that passed without -v: there is no count to read.
    quiet_packages: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoOutcome {
    Pass,
    Fail,
    Skip,
}

impl Go {
    fn line(&mut self, line: &str) {
        if let Some(name) = line.strip_prefix("=== RUN ") {
            if self.started.len() < MAX_GO_TESTS {
                self.started.insert(name.trim().to_string());
            }
            return;
        }
        let trimmed = line.trim_start();
        for (prefix, outcome) in [
            ("--- PASS: ", GoOutcome::Pass),
            ("--- FAIL: ", GoOutcome::Fail),
            ("--- SKIP: ", GoOutcome::Skip),
        ] {
            if let Some(rest) = trimmed.strip_prefix(prefix) {
                let name = rest.split(" (").next().unwrap_or(rest).trim();
                // A second report under the same name is not a second test.
                if self.started.contains(name) {
                    self.results.entry(name.to_string()).or_insert(outcome);
                }
                return;
            }
        }
        let Some(rest) = line.strip_prefix("ok  \t").or_else(|| line.strip_prefix("FAIL\t")) else { return };
        // The package's last line: its tests end here.
        let results = std::mem::take(&mut self.results);
        let verbose = !std::mem::take(&mut self.started).is_empty();
        let package = rest.split('\t').next().unwrap_or_default().trim();
        // `FAIL\texample.com/calc [build failed]` ran nothing.
        if !package.is_empty() && !package.contains(' ') {
            if verbose {
                let count = |wanted| results.values().filter(|o| **o == wanted).count() as u64;
                let counts = Counts {
                    passed: count(GoOutcome::Pass),
                    failed: count(GoOutcome::Fail),
                    skipped: count(GoOutcome::Skip),
                };
                if self.done.len() < MAX_SUITES {
                    self.done.push((package.to_string(), counts));
                }
            } else if line.starts_with("ok") {
                self.quiet_packages += 1;
            }
        }
    }
}

/// `DONE 12 tests, 1 skipped, 2 failures in 0.532s`
fn gotestsum_summary(line: &str) -> Option<Counts> {
    let rest = line.strip_prefix("DONE ")?;
    let (items_text, time) = rest.rsplit_once(" in ")?;
    if !is_duration(time) {
        return None;
    }
    let mut tests = None;
    let mut failed = 0;
    let mut skipped = 0;
    for (n, word) in items(items_text, ',')? {
        match word {
            "tests" | "test" => tests = Some(n),
            "failures" | "failure" => failed = n,
            "skipped" => skipped = n,
            "runs" | "run" | "errors" | "error" => {}
            _ => return None,
        }
    }
    let tests = tests?;
    Some(Counts { passed: tests.checked_sub(failed + skipped)?, failed, skipped })
}

// --- jest, vitest -------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Jest {
    after_suites: bool,
    last: Option<Counts>,
}

impl Jest {
    /// `Tests:       1 failed, 1 skipped, 1 todo, 2 passed, 5 total`, right after `Test Suites:`.
    fn line(&mut self, line: &str) {
        let after_suites = std::mem::replace(&mut self.after_suites, line.starts_with("Test Suites: "));
        if !after_suites {
            return;
        }
        let Some(rest) = line.strip_prefix("Tests:") else { return };
        let Some(items) = items(rest, ',') else { return };
        let mut counts = Counts::default();
        let mut total = None;
        for (n, word) in items {
            match word {
                "passed" => counts.passed += n,
                "failed" => counts.failed += n,
                "skipped" | "todo" | "pending" => counts.skipped += n,
                "total" => total = Some(n),
                _ => return,
            }
        }
        if total == Some(counts.ran() + counts.skipped) {
            self.last = Some(counts);
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Vitest {
    after_files: bool,
    runs: Runs,
}

impl Vitest {
    /// ` RUN  v4.1.12 /project` starts a run; `      Tests  1 failed | 2 passed | 1 skipped (4)`,
    /// right after ` Test Files  …`, is its summary.
    fn line(&mut self, line: &str) {
        let trimmed = line.trim();
        let after_files = std::mem::replace(&mut self.after_files, trimmed.starts_with("Test Files "));
        if let Some(version) = trimmed.strip_prefix("RUN ")
            && version.trim_start().starts_with('v')
        {
            self.runs.start();
            return;
        }
        if !after_files {
            return;
        }
        let Some(rest) = trimmed.strip_prefix("Tests ") else { return };
        let Some((outcomes, total)) = rest.trim().rsplit_once(" (") else { return };
        let Some(total) = total.strip_suffix(')').and_then(number) else { return };
        let Some(items) = items(outcomes, '|') else { return };
        let mut counts = Counts::default();
        for (n, word) in items {
            match word {
                "passed" => counts.passed += n,
                "failed" => counts.failed += n,
                "skipped" | "todo" | "expected fail" => counts.skipped += n,
                _ => return,
            }
        }
        if total == counts.ran() + counts.skipped {
            self.runs.summary(counts);
        }
    }
}

// --- mocha --------------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Mocha {
    /// The summary being read: `N passing (…)`, then `N pending`, `N failing` on the next lines.
    open: Option<Counts>,
    last: Option<Counts>,
}

impl Mocha {
    fn line(&mut self, line: &str) {
        // Outside a summary only its first line, `N passing (…)`, matters.
        if self.open.is_none() && !may_be(starts_with_digit(line)) {
            return;
        }
        let trimmed = line.trim();
        if let Some((n, rest)) = trimmed.split_once(" passing (")
            && rest.ends_with(')')
            && let Some(n) = number(n)
        {
            self.close();
            self.open = Some(Counts { passed: n, ..Counts::default() });
            return;
        }
        if let Some(open) = &mut self.open {
            match trimmed.split_once(' ').map(|(n, word)| (number(n), word)) {
                Some((Some(n), "pending")) => open.skipped = n,
                Some((Some(n), "failing")) => open.failed = n,
                _ => self.close(),
            }
        }
    }

    fn close(&mut self) {
        if let Some(counts) = self.open.take() {
            self.last = Some(counts);
        }
    }

    fn last(mut self) -> Option<Counts> {
        self.close();
        self.last
    }
}

// --- node --test ---------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Node {
    /// The summary being read, key by key: `ℹ tests 5`, `ℹ pass 4`, … (`# ` with the TAP reporter).
    open: Option<BTreeMap<String, u64>>,
    last: Option<Counts>,
}

impl Node {
    /// True when this line starts a summary.
    fn line(&mut self, line: &str) -> bool {
        let entry = line
            .strip_prefix("ℹ ")
            .or_else(|| line.strip_prefix("# "))
            .and_then(|rest| rest.split_once(' '))
            .filter(|(key, _)| {
                matches!(
                    *key,
                    "tests" | "suites" | "pass" | "fail" | "cancelled" | "skipped" | "todo" | "duration_ms"
                )
            });
        match entry {
            Some(("tests", n)) => {
                self.close();
                let Some(n) = number(n) else { return false };
                self.open = Some(BTreeMap::from([("tests".to_string(), n)]));
                true
            }
            Some((key, value)) => {
                if let Some(open) = &mut self.open
                    && key != "duration_ms"
                {
                    match number(value) {
                        Some(n) => {
                            open.insert(key.to_string(), n);
                        }
                        None => self.open = None,
                    }
                }
                false
            }
            None => {
                self.close();
                false
            }
        }
    }

    fn close(&mut self) {
        let Some(keys) = self.open.take() else { return };
        let get = |key: &str| keys.get(key).copied();
        let (Some(tests), Some(pass), Some(fail)) = (get("tests"), get("pass"), get("fail")) else { return };
        let counts = Counts {
            passed: pass,
            failed: fail + get("cancelled").unwrap_or(0),
            skipped: get("skipped").unwrap_or(0) + get("todo").unwrap_or(0),
        };
        if counts.ran() + counts.skipped == tests {
            self.last = Some(counts);
        }
    }

    fn last(mut self) -> Option<Counts> {
        self.close();
        self.last
    }
}

// --- rspec, phpunit, ctest, bats ---------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Rspec {
    after_finished: bool,
    last: Option<Counts>,
}

impl Rspec {
    /// `4 examples, 1 failure, 1 pending`, right after `Finished in 0.01 seconds (…)`.
    fn line(&mut self, line: &str) {
        let after_finished = std::mem::replace(&mut self.after_finished, line.starts_with("Finished in "));
        if !after_finished {
            return;
        }
        let Some((examples, rest)) = line.split_once(", ") else { return };
        let Some(examples) = examples.strip_suffix(" examples").or_else(|| examples.strip_suffix(" example"))
        else {
            return;
        };
        let Some(examples) = number(examples) else { return };
        let mut failed = None;
        let mut skipped = 0;
        for item in rest.split(", ") {
            let Some((n, word)) = item.split_once(' ') else { return };
            let Some(n) = number(n) else { return };
            match word {
                "failure" | "failures" => failed = Some(n),
                "pending" => skipped = n,
                w if w.starts_with("error") && w.ends_with("outside of examples") => {}
                _ => return,
            }
        }
        let Some(failed) = failed else { return };
        if let Some(passed) = examples.checked_sub(failed + skipped) {
            self.last = Some(Counts { passed, failed, skipped });
        }
    }
}

/// `OK (5 tests, 10 assertions)`, or `Tests: 5, Assertions: 8, Failures: 1, Skipped: 1.`
fn phpunit_summary(line: &str) -> Option<Counts> {
    if let Some(rest) = line.strip_prefix("OK (").and_then(|r| r.strip_suffix(')')) {
        let (tests, assertions) = rest.split_once(", ")?;
        let tests = tests.strip_suffix(" tests").or_else(|| tests.strip_suffix(" test"))?;
        assertions
            .strip_suffix(" assertions")
            .or_else(|| assertions.strip_suffix(" assertion"))
            .and_then(number)?;
        return Some(Counts { passed: number(tests)?, ..Counts::default() });
    }
    let rest = line.strip_prefix("Tests: ")?.strip_suffix('.')?;
    let (tests, rest) = rest.split_once(", ")?;
    let tests = number(tests)?;
    let mut assertions = false;
    let mut failed = 0;
    let mut skipped = 0;
    for item in rest.split(", ") {
        let (key, n) = item.split_once(": ")?;
        let n = number(n)?;
        match key {
            "Assertions" => assertions = true,
            "Failures" | "Errors" => failed += n,
            "Skipped" | "Incomplete" => skipped += n,
            "Warnings" | "Risky" | "Deprecations" | "PHPUnit Deprecations" | "Notices" => {}
            _ => return None,
        }
    }
    if !assertions {
        return None;
    }
    Some(Counts { passed: tests.checked_sub(failed + skipped)?, failed, skipped })
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Ctest {
    runs: Runs,
    /// Reading the `The following tests did not run:` list after the summary.
    listing_not_run: bool,
}

impl Ctest {
    fn line(&mut self, line: &str) {
        if line.starts_with("Test project ") {
            self.runs.start();
            self.listing_not_run = false;
        } else if let Some(counts) = ctest_summary(line) {
            self.runs.summary(counts);
            self.listing_not_run = false;
        } else if line == "The following tests did not run:" {
            self.listing_not_run = self.runs.current.is_some() || self.runs.before_start.is_some();
        } else if self.listing_not_run {
            // `	  3 - skipme (Skipped)`: not run, so neither passed nor failed.
            let listed = line.starts_with(char::is_whitespace)
                && line.trim().split_once(" - ").is_some_and(|(n, _)| number(n).is_some())
                && line.ends_with(')');
            let current =
                if self.runs.started { &mut self.runs.current } else { &mut self.runs.before_start };
            match current {
                Some(counts) if listed && counts.passed > 0 => {
                    counts.passed -= 1;
                    counts.skipped += 1;
                }
                _ => self.listing_not_run = false,
            }
        }
    }

    fn runs(&self) -> &Runs {
        &self.runs
    }
}

/// `80% tests passed, 1 tests failed out of 5`
fn ctest_summary(line: &str) -> Option<Counts> {
    if !may_be(starts_with_digit(line)) {
        return None;
    }
    let (percent, rest) = line.split_once("% tests passed, ")?;
    number(percent)?;
    let (failed, total) = rest.split_once(" failed out of ")?;
    let failed = number(failed.strip_suffix(" tests").or_else(|| failed.strip_suffix(" test"))?)?;
    let total = number(total)?;
    Some(Counts { passed: total.checked_sub(failed)?, failed, skipped: 0 })
}

/// bats' own summary: `3 tests, 1 failure, 1 skipped`.
fn bats_summary(line: &str) -> Option<Counts> {
    if !may_be(starts_with_digit(line)) {
        return None;
    }
    let mut parts = line.split(", ");
    let tests = parts.next()?;
    let tests = number(tests.strip_suffix(" tests").or_else(|| tests.strip_suffix(" test"))?)?;
    let failures = parts.next()?;
    let failed = number(failures.strip_suffix(" failures").or_else(|| failures.strip_suffix(" failure"))?)?;
    let mut skipped = 0;
    for part in parts {
        let (n, word) = part.split_once(' ')?;
        let n = number(n)?;
        match word {
            "skipped" => skipped += n,
            "not run" => {}
            _ => return None,
        }
    }
    Some(Counts { passed: tests.checked_sub(failed + skipped)?, failed, skipped })
}

// --- TAP (bats --formatter tap, prove, tape, …) -----------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Tap {
    open: Option<TapStream>,
    done: Vec<Counts>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TapStream {
    /// `1..N`
    plan: Option<u64>,
    /// Each test point by number; the first report of a number counts.
    points: BTreeMap<u64, GoOutcome>,
    next: u64,
}

impl Tap {
    fn line(&mut self, line: &str) {
        if line.starts_with("TAP version ") {
            self.close();
            self.open = Some(TapStream::default());
            return;
        }
        if let Some(plan) =
            line.strip_prefix("1..").map(|p| p.split(" #").next().unwrap_or(p)).and_then(number)
        {
            if self.open.as_ref().is_some_and(|s| s.plan.is_some()) {
                self.close();
            }
            self.open.get_or_insert_with(TapStream::default).plan = Some(plan);
            return;
        }
        let (ok, rest) = if let Some(rest) = line.strip_prefix("ok") {
            (true, rest)
        } else if let Some(rest) = line.strip_prefix("not ok") {
            (false, rest)
        } else {
            return;
        };
        if !(rest.is_empty() || rest.starts_with(' ')) {
            return;
        }
        let Some(stream) = &mut self.open else { return };
        let rest = rest.trim_start();
        let number_text = rest.split(' ').next().unwrap_or_default();
        let id = number(number_text).unwrap_or(stream.next + 1);
        stream.next = id;
        let directive = rest.rsplit_once(" # ").map(|(_, d)| d.to_ascii_lowercase()).unwrap_or_default();
        let outcome = if directive.starts_with("skip") || directive.starts_with("todo") {
            GoOutcome::Skip
        } else if ok {
            GoOutcome::Pass
        } else {
            GoOutcome::Fail
        };
        if stream.points.len() < MAX_GO_TESTS {
            stream.points.entry(id).or_insert(outcome);
        }
    }

    fn discard_open(&mut self) {
        self.open = None;
    }

    fn close(&mut self) {
        let Some(stream) = self.open.take() else { return };
        // Without a plan the stream is not one; test points past the plan are not its tests.
        let Some(plan) = stream.plan else { return };
        let within = stream.points.range(1..=plan).map(|(_, o)| *o);
        let mut counts = Counts::default();
        for outcome in within {
            match outcome {
                GoOutcome::Pass => counts.passed += 1,
                GoOutcome::Fail => counts.failed += 1,
                GoOutcome::Skip => counts.skipped += 1,
            }
        }
        if self.done.len() < MAX_SUITES {
            self.done.push(counts);
        }
    }

    fn all(mut self) -> Vec<Counts> {
        self.close();
        self.done
    }
}

/// The last resort, when no runner printed a summary: a line such as `5 passed, 1 failed` or
/// `Results: 5 passed, 0 failed, 2 skipped`.
fn plain_summary(line: &str) -> Option<Counts> {
    // libtest's result line without a `running N tests` before it is not a summary at all.
    if line.len() > 200 || line.starts_with("test result: ") {
        return None;
    }
    // Every line of the output comes here: a line without both words is passed over before the
    // lowercased copy and the list of words are made (the words need both, in any case).
    if !has_word_ignoring_case(line, b"passed") || !has_word_ignoring_case(line, b"failed") {
        return None;
    }
    let lower = line.to_ascii_lowercase();
    let words: Vec<&str> =
        lower.split(|c: char| c.is_whitespace() || c == ',' || c == ';').filter(|w| !w.is_empty()).collect();
    let mut passed = None;
    let mut failed = None;
    let mut skipped = 0;
    for pair in words.windows(2) {
        let Some(n) = number(pair[0]) else { continue };
        match pair[1].trim_end_matches(['.', ':']) {
            "passed" => passed = Some(n),
            "failed" => failed = Some(n),
            "skipped" => skipped = n,
            _ => {}
        }
    }
    Some(Counts { passed: passed?, failed: failed?, skipped })
}

/// Whether `line` holds `word` (lowercase ASCII) in any ASCII case, as a substring: a cheap test
/// that never says no where the word is there. Only where the word's first letter is.
fn has_word_ignoring_case(line: &str, word: &[u8]) -> bool {
    let Some(&first) = word.first() else { return true };
    let line = line.as_bytes();
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), line)
        .any(|at| line.get(at..at + word.len()).is_some_and(|w| w.eq_ignore_ascii_case(word)))
}

mod line_marks;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod prefilter_reference;
