//! The digest of real runners' output (the corpus under `tests/fixtures/runner-output`, made by
//! `scripts/make-runner-corpus`), and of hostile output.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

thread_local! {
    /// The prefilter lets every line through.
    pub(super) static PREFILTER_OFF: Cell<bool> = const { Cell::new(false) };
}

/// What `f` gives with the prefilter off: every line read by every reader.
fn without_prefilter<T>(f: impl FnOnce() -> T) -> T {
    PREFILTER_OFF.set(true);
    let result = f();
    PREFILTER_OFF.set(false);
    result
}

/// The digest of `output` pushed in pieces of the given sizes, taken in turn (0 stands for 1).
fn digest_in_pieces(mut output: &[u8], sizes: &[usize]) -> FailureDigest {
    let mut scanner = FailureScanner::default();
    let mut sizes = sizes.iter().cycle();
    while !output.is_empty() {
        let size = sizes.next().copied().unwrap_or(output.len()).clamp(1, output.len());
        let (piece, rest) = output.split_at(size);
        scanner.push(piece);
        output = rest;
    }
    scanner.digest()
}

fn names(digest: &FailureDigest) -> Vec<&str> {
    digest.failures.iter().map(|failure| failure.name.as_str()).collect()
}

fn failure<'a>(digest: &'a FailureDigest, name: &str) -> &'a Failure {
    digest
        .failures
        .iter()
        .find(|failure| failure.name == name)
        .unwrap_or_else(|| panic!("no failure named {name:?} in {:#?}", names(digest)))
}

// --- the corpus -------------------------------------------------------------------------------

struct Case {
    name: String,
    output: Vec<u8>,
    runner: String,
    /// Each expected failure's name and a piece of its error line.
    expected: Vec<(String, String)>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/runner-output")
}

fn corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(corpus_dir()).expect("the corpus is committed") {
        let dir = entry.unwrap().path();
        let case: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
        let expected = case["failures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["name"].as_str().unwrap().to_string(), f["error"].as_str().unwrap().to_string()))
            .collect();
        cases.push(Case {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            output: std::fs::read(dir.join("output.txt")).unwrap(),
            runner: case["runner"].as_str().unwrap().to_string(),
            expected,
        });
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

#[test]
fn the_corpus_holds_every_runner_the_digest_reads() {
    let runners: std::collections::BTreeSet<String> = corpus().into_iter().map(|case| case.runner).collect();
    for runner in [
        "pytest",
        "unittest",
        "cargo test",
        "rustc",
        "node --test",
        "jest",
        "go test",
        "go build",
        "tsc",
        "gcc/clang",
    ] {
        assert!(runners.contains(runner), "no case of {runner} in the corpus: {runners:?}");
    }
}

#[test]
fn every_failure_of_every_real_run_is_named_with_its_error_line() {
    let mut problems = Vec::new();
    for case in corpus() {
        let digest = FailureDigest::of(&case.output);
        let named = case
            .expected
            .iter()
            .filter(|(name, error)| {
                digest.failures.iter().any(|f| {
                    &f.name == name
                        && (error.is_empty() || f.details.iter().any(|d| d.contains(error.as_str())))
                })
            })
            .count();
        // The figures scripts/runner-corpus-table reads (shown with --nocapture).
        println!("corpus figures\t{}\t{}\t{}\t{named}", case.name, case.runner, case.expected.len());
        if digest.runner != Some(case.runner.as_str()) {
            problems.push(format!("{}: runner {:?}, expected {}", case.name, digest.runner, case.runner));
        }
        for (at, (name, error)) in case.expected.iter().enumerate() {
            let Some(found) = digest.failures.iter().find(|failure| &failure.name == name) else {
                problems.push(format!("{}: {name:?} not named; named: {:?}", case.name, names(&digest)));
                continue;
            };
            // Details are kept for the first failures only; the corpus's cases stay under that.
            assert!(at < MAX_DETAILED);
            if !error.is_empty() && !found.details.iter().any(|line| line.contains(error.as_str())) {
                problems
                    .push(format!("{}: {name:?} has no line with {error:?}: {:?}", case.name, found.details));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_corpus_reads_the_same_with_and_without_the_prefilter_and_in_any_pieces() {
    for case in corpus() {
        let whole = FailureDigest::of(&case.output);
        assert_eq!(without_prefilter(|| FailureDigest::of(&case.output)), whole, "{}", case.name);
        for sizes in [&[1][..], &[7, 1, 4096], &[65_536]] {
            assert_eq!(digest_in_pieces(&case.output, sizes), whole, "{} in pieces of {sizes:?}", case.name);
        }
    }
}

#[test]
fn a_failure_printed_in_its_report_and_in_the_summary_is_named_once_with_both() {
    let output = "\
=================================== FAILURES ===================================
__________________________________ test_add ____________________________________

    def test_add():
>       assert 2 + 2 == 5
E       assert 4 == 5

tests/test_calc.py:2: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_add - assert 4 == 5
========================= 1 failed, 3 passed in 0.01s ==========================
";
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(names(&digest), ["tests/test_calc.py::test_add"]);
    let failure = failure(&digest, "tests/test_calc.py::test_add");
    assert_eq!(failure.details, ["assert 4 == 5"]);
    assert_eq!(failure.location.as_deref(), Some("tests/test_calc.py:2"));
}

// --- runners without a real run in the corpus ----------------------------------------------------

#[test]
fn gradle_names_the_test_and_its_exception() {
    // Gradle's console for a failing JUnit test (its default, short exception format).
    let output = "\
> Task :test FAILED

CalcTest > addsBig() FAILED
    org.opentest4j.AssertionFailedError at CalcTest.java:12

2 tests completed, 1 failed
";
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(digest.runner, Some("gradle"));
    let failure = failure(&digest, "CalcTest > addsBig()");
    assert_eq!(failure.details, ["org.opentest4j.AssertionFailedError"]);
    assert_eq!(failure.location.as_deref(), Some("CalcTest.java:12"));
}

#[test]
fn surefire_names_the_test_its_exception_and_its_own_frame() {
    // Maven Surefire 3's report of a failing JUnit 5 test, and the older form of the same line.
    let output = "\
[INFO] Running com.example.CalcTest
[ERROR] Tests run: 3, Failures: 1, Errors: 1, Skipped: 0, Time elapsed: 0.05 s <<< FAILURE! -- in com.example.CalcTest
[ERROR] com.example.CalcTest.addsBig -- Time elapsed: 0.01 s <<< FAILURE!
org.opentest4j.AssertionFailedError: expected: <4011> but was: <4001>
\tat org.junit.jupiter.api.AssertionFailureBuilder.build(AssertionFailureBuilder.java:151)
\tat com.example.CalcTest.addsBig(CalcTest.java:12)

[ERROR] throwsOnPurpose(com.example.CalcTest)  Time elapsed: 0 s  <<< ERROR!
java.lang.IllegalStateException: ledger out of balance by 17
\tat com.example.CalcTest.throwsOnPurpose(CalcTest.java:15)
";
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(digest.runner, Some("maven surefire"));
    assert_eq!(names(&digest), ["com.example.CalcTest.addsBig", "com.example.CalcTest.throwsOnPurpose"]);
    let big = failure(&digest, "com.example.CalcTest.addsBig");
    assert_eq!(big.details, ["org.opentest4j.AssertionFailedError: expected: <4011> but was: <4001>"]);
    assert_eq!(big.location.as_deref(), Some("CalcTest.java:12"));
}

#[test]
fn a_go_timeout_names_the_tests_go_lists_as_running() {
    // Since Go 1.20 the timeout's panic lists the tests then running.
    let output =
        "panic: test timed out after 1s\nrunning tests:\n\tTestSlowNetwork (1s)\n\ngoroutine 5 [running]:\n";
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(names(&digest), ["TestSlowNetwork"]);
    assert_eq!(digest.failures[0].details, ["test timed out after 1s"]);
}

#[test]
fn a_runners_error_line_leads_the_advice_printed_before_it() {
    let mut output = String::from("FAIL ./broken.test.js\n  \u{25cf} Test suite failed to run\n\n");
    for i in 0..20 {
        output.push_str(&format!("    advice line {i}\n"));
    }
    output.push_str("    SyntaxError: broken.test.js: Unexpected token (3:0)\n\n      at parse (x.js:1:1)\n");
    let digest = FailureDigest::of(output.as_bytes());
    let failure = failure(&digest, "broken.test.js: Test suite failed to run");
    assert_eq!(failure.details[0], "SyntaxError: broken.test.js: Unexpected token (3:0)");
    assert_eq!(failure.details.len(), MAX_DETAILS);
}

// --- hostile output ----------------------------------------------------------------------------

#[test]
fn a_name_of_ten_thousand_characters_is_cut_with_a_mark() {
    let long = "x".repeat(10_000);
    let output = format!("test tests::{long} ... FAILED\nFAILED tests/t.py::{long} - boom\n");
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(digest.failures.len(), 2);
    for failure in &digest.failures {
        assert!(failure.name.chars().count() < MAX_NAME_CHARS + 40, "{}", failure.name.len());
        assert!(failure.name.contains("more characters]"), "{}", failure.name);
    }
}

#[test]
fn a_forged_summary_mid_output_does_not_hide_the_real_failures() {
    let output = "\
running 3 tests
test tests::a ... ok
test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
test tests::b ... FAILED

failures:

---- tests::b stdout ----

thread 'tests::b' panicked at src/lib.rs:9:5:
assertion `left == right` failed
  left: 1
 right: 2

failures:
    tests::b

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(names(&digest), ["tests::b"]);
    assert_eq!(
        failure(&digest, "tests::b").details,
        ["assertion `left == right` failed", "left: 1", "right: 2"]
    );
}

#[test]
fn a_runner_banner_printed_by_the_code_under_test_does_not_take_over() {
    // A cargo test whose code prints pytest's banner and rules; the failure is still cargo's.
    let output = "\
running 1 test
============================= test session starts ==============================
=================================== FAILURES ===================================
test tests::b ... FAILED

failures:

---- tests::b stdout ----
thread 'tests::b' panicked at src/lib.rs:3:5:
the value was 41
";
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(digest.runner, Some("cargo test"));
    assert_eq!(names(&digest), ["tests::b"]);
    assert_eq!(failure(&digest, "tests::b").details, ["the value was 41"]);
}

#[test]
fn control_characters_backticks_and_direction_marks_never_reach_the_digest() {
    let output = "test tests::a\u{7}\u{8}\u{202e}b`c ... FAILED\n---- tests::a\u{7}\u{8}\u{202e}b`c stdout ----\nthread 'x' panicked at src/lib.rs:1:1:\nsaid \u{1b}]0;title\u{7}hi\u{0}\u{9b}there\n";
    let digest = FailureDigest::of(output.as_bytes());
    let all: Vec<&String> =
        digest.failures.iter().flat_map(|f| std::iter::once(&f.name).chain(&f.details)).collect();
    assert_eq!(all.len(), 2, "{all:?}");
    for text in all {
        assert!(!text.chars().any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)), "{text:?}");
    }
    assert_eq!(digest.failures[0].name, "tests::a\u{fffd}\u{fffd}\u{fffd}b`c");
    assert_eq!(digest.failures[0].details, ["said hi\u{fffd}\u{fffd}there"]);
}

#[test]
fn invalid_utf8_crlf_and_colours_are_read_through() {
    let output = b"\x1b[31mFAILED\x1b[0m tests/t.py::test_\xff\xfe - assert 1 == 2\r\n\
FAILED tests/t.py::test_b - expected 7\r\n";
    let digest = FailureDigest::of(output);
    assert_eq!(digest.runner, Some("pytest"));
    assert_eq!(names(&digest), ["tests/t.py::test_\u{fffd}\u{fffd}", "tests/t.py::test_b"]);
    assert_eq!(digest.failures[1].details, ["expected 7"]);
}

#[test]
fn empty_output_has_no_failures_and_no_runner() {
    assert_eq!(FailureDigest::of(b""), FailureDigest::default());
    assert_eq!(FailureDigest::of(b"\n\n\n"), FailureDigest::default());
}

#[test]
fn output_no_runner_claims_gets_its_error_lines_with_the_line_after() {
    let output = "building\nstep 1\nError: config file missing\n  at load (config.js:3)\nstep 2\nall fine\nFATAL: disk failure\n";
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(digest.runner, None);
    assert!(digest.failures.is_empty());
    assert_eq!(
        digest.errors,
        ["Error: config file missing", "  at load (config.js:3)", "FATAL: disk failure"]
    );
}

#[test]
fn hundreds_of_failures_are_all_named_and_thousands_counted_once() {
    let mut output = String::new();
    for i in 0..MAX_NAMES + 500 {
        output.push_str(&format!("FAILED tests/t.py::test_{i} - assert {i} == 0\n"));
    }
    // A name printed again past the cap is counted once.
    output.push_str(&format!("FAILED tests/t.py::test_{} - again\n", MAX_NAMES + 1));
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(digest.failures.len(), MAX_NAMES);
    assert_eq!(digest.more, 500);
    assert!(digest.failures[..MAX_DETAILED].iter().all(|f| f.details.len() == 1));
    assert!(digest.failures[MAX_DETAILED..].iter().all(|f| f.details.is_empty()));
}

#[test]
fn a_report_that_never_ends_is_read_within_bounds() {
    // One failure's report followed by a great many lines: its details stay bounded.
    let mut output =
        String::from("---- tests::a stdout ----\nthread 'tests::a' panicked at src/lib.rs:1:1:\n");
    for i in 0..50_000 {
        output.push_str(&format!("line {i} of the message\n"));
    }
    let digest = FailureDigest::of(output.as_bytes());
    assert_eq!(failure(&digest, "tests::a").details.len(), MAX_DETAILS);
}

#[test]
fn a_gigabyte_fed_in_chunks_keeps_the_scanner_small() {
    // 1 GiB pushed 64 KiB at a time: of every 16 chunks, 15 are one line that never ends (a
    // process printing without newlines) and one is 100-byte lines, a failure among them. What
    // the scanner holds never grows past its bounds. (Mostly one line, so that a debug build
    // reads it in seconds; the throughput of ordinary lines is measured by scripts/bench.)
    let mut lines = Vec::with_capacity(64 * 1024);
    while lines.len() + 100 <= 64 * 1024 {
        lines.extend_from_slice(format!("{:<99}\n", "a line of verify output").as_bytes());
    }
    let endless = vec![b'x'; 64 * 1024];
    let mut scanner = FailureScanner::default();
    let (mut pushed, mut chunks, mut failures, mut largest) = (0usize, 0usize, 0usize, 0usize);
    while pushed < 1 << 30 {
        if chunks % 16 == 15 {
            scanner.push(format!("\ntest tests::t{failures} ... FAILED\n").as_bytes());
            failures += 1;
            scanner.push(&lines);
        } else {
            scanner.push(&endless);
        }
        pushed += 64 * 1024;
        chunks += 1;
        largest = largest.max(scanner.pending.capacity() + scanner.pending_tail.capacity());
    }
    let digest = scanner.digest();
    assert_eq!(digest.failures.len(), failures.min(MAX_NAMES));
    assert_eq!(digest.more, failures.saturating_sub(MAX_NAMES));
    assert!(largest <= 4 * MAX_LINE_BYTES, "{largest}");
    // Ordinary lines are passed over, not read one by one: only the generic reading's line
    // after each of its first error-looking lines was.
    assert!(scanner.sink.capture_left >= CAPTURE_LINES - MAX_ERRORS as u64, "{}", scanner.sink.capture_left);
}

// --- pieces and prefilter ------------------------------------------------------------------------

/// Lines of every reader's output, and ordinary and hostile ones, for the properties.
fn a_line() -> impl Strategy<Value = String> {
    let samples: Vec<String> = corpus()
        .iter()
        .flat_map(|case| {
            String::from_utf8_lossy(&case.output).lines().map(str::to_string).collect::<Vec<_>>()
        })
        .filter(|line| line.len() < 300)
        .collect();
    prop_oneof![
        3 => proptest::sample::select(samples),
        1 => "[a-z _:\\-#0-9]{0,20}",
        1 => Just(String::new()),
        1 => Just("\u{1b}[31mFAIL\u{1b}[0m x > y\r".to_string()),
        1 => Just(format!("test {} ... FAILED", "y".repeat(5000))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_output_reads_the_same_in_any_pieces_and_without_the_prefilter(
        lines in proptest::collection::vec(a_line(), 0..80),
        sizes in proptest::collection::vec(1usize..200, 1..5),
    ) {
        let output = lines.join("\n");
        let whole = FailureDigest::of(output.as_bytes());
        prop_assert_eq!(&digest_in_pieces(output.as_bytes(), &sizes), &whole);
        prop_assert_eq!(&without_prefilter(|| FailureDigest::of(output.as_bytes())), &whole);
    }
}
