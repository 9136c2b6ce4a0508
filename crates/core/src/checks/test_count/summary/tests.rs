//! Every runner's summary, read from real output: generated with the runner where it installs
//! here (cargo, nextest, pytest, unittest, node, jest, vitest, mocha, bats; paths replaced by
//! `/project`), and written in the runner's documented shape where it does not (go, gotestsum,
//! rspec, phpunit, ctest). Several fixtures carry a test that prints an imitation of its
//! runner's summary in the middle of the log; it must never count.

use super::*;

fn counts(passed: u64, failed: u64, skipped: u64) -> Counts {
    Counts { passed, failed, skipped }
}

/// The suites of `output` as `(name, counts)`.
fn suites(output: &str) -> Vec<(String, Counts)> {
    tally(output).suites.into_iter().map(|s| (s.name, s.counts)).collect()
}

fn only(output: &str) -> Counts {
    let found = suites(output);
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].1
}

fn named(name: &str, counts: Counts) -> (String, Counts) {
    (name.to_string(), counts)
}

#[test]
fn cargo_counts_each_test_binary_of_a_workspace_and_adds_them_up() {
    let output = include_str!("output/cargo-workspace-no-fail-fast.txt");
    assert_eq!(
        suites(output),
        [
            named("cargo test: a (unittests src/lib.rs)", counts(1, 1, 1)),
            named("cargo test: it (tests/it.rs)", counts(1, 0, 0)),
            named("cargo test: b (unittests src/lib.rs)", counts(2, 0, 0)),
            named("cargo test: doc-tests a", counts(1, 0, 0)),
            named("cargo test: doc-tests b", counts(0, 0, 0)),
        ]
    );
    assert_eq!(tally(output).total(), counts(5, 1, 1));
    assert_eq!(tally(output).runners(), [Runner::Cargo]);
}

#[test]
fn cargo_ignores_a_summary_printed_by_a_failing_test() {
    // The failing test printed `test result: ok. 99 passed; …` in its captured stdout.
    let output = include_str!("output/cargo-workspace-stops-at-a-failure.txt");
    assert!(output.contains("test result: ok. 99 passed"));
    assert_eq!(suites(output), [named("cargo test: a (unittests src/lib.rs)", counts(1, 1, 1))]);
}

#[test]
fn cargo_takes_only_a_summary_that_matches_the_announced_count() {
    let output = "running 2 tests\ntest a ... ok\ntest b ... ok\n\ntest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\
        test result: ok. 50 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
    assert_eq!(only(output), counts(2, 0, 0));
    // Without a `running` line there is no binary to count.
    assert!(
        suites("test result: ok. 9 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n").is_empty()
    );
    // Benchmarks run in test mode count as passed.
    let output =
        "running 2 tests\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 1 measured; 0 filtered out\n";
    assert_eq!(only(output), counts(2, 0, 0));
}

#[test]
fn cargo_names_binaries_without_their_build_hash_and_numbers_unnamed_ones() {
    assert_eq!(
        cargo_binary("     Running tests/calc.rs (target/debug/deps/calc-0123456789abcdef)").as_deref(),
        Some("calc (tests/calc.rs)")
    );
    assert_eq!(
        cargo_binary("     Running unittests src/main.rs (target\\debug\\deps\\app-0123456789abcdef.exe)")
            .as_deref(),
        Some("app (unittests src/main.rs)")
    );
    assert_eq!(cargo_binary("   Doc-tests calc").as_deref(), Some("doc-tests calc"));
    assert_eq!(cargo_binary("Running tests/calc.rs (x)"), None, "cargo indents its own lines");
    let one =
        "running 1 test\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
    let names: Vec<String> = suites(&one.repeat(2)).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["cargo test: test binary #1", "cargo test: test binary #2"]);
}

#[test]
fn nextest_reads_its_summary_and_not_the_libtest_output_it_shows() {
    assert_eq!(only(include_str!("output/nextest-failing.txt")), counts(4, 1, 1));
    assert_eq!(only(include_str!("output/nextest-passing.txt")), counts(4, 0, 2));
    assert_eq!(tally(include_str!("output/nextest-passing.txt")).runners(), [Runner::Nextest]);
}

#[test]
fn nextest_counts_what_ran_when_a_failure_cancelled_the_rest() {
    let output = "    Starting 5 tests across 2 binaries\n        FAIL [   0.01s] a t1\n────────────\n     \
        Summary [   0.02s] 2/5 tests run: 1 passed, 1 failed, 0 skipped\nwarning: 3/5 tests were not run due to test failure\n";
    assert_eq!(only(output), counts(1, 1, 0));
    let flaky = "    Starting 3 tests across 1 binary\n     Summary [   0.02s] 3 tests run: 3 passed (1 flaky), 1 skipped\n";
    assert_eq!(only(flaky), counts(3, 0, 1));
    let mismatch =
        "    Starting 3 tests across 1 binary\n     Summary [   0.02s] 30 tests run: 30 passed, 0 skipped\n";
    assert!(suites(mismatch).is_empty());
}

#[test]
fn pytest_reads_its_final_line_and_not_one_a_test_printed() {
    let output = include_str!("output/pytest-failing.txt");
    // test_print printed `===== 99 passed in 0.01s =====` (shown in its captured stdout).
    assert!(output.contains("99 passed"));
    // xfail is counted as skipped: it keeps a failing test from failing.
    assert_eq!(only(output), counts(2, 3, 3));
    assert_eq!(tally(output).runners(), [Runner::Pytest]);
}

#[test]
fn pytest_quiet_coloured_and_deselected_summaries() {
    assert_eq!(only(include_str!("output/pytest-q-exitfirst.txt")), counts(1, 1, 0));
    assert_eq!(only(include_str!("output/pytest-colour-deselected.txt")), counts(2, 0, 0));
    assert_eq!(
        only("============================ no tests ran in 0.01s =============================\n"),
        counts(0, 0, 0)
    );
    assert_eq!(only("8 deselected in 0.01s\n"), counts(0, 0, 0));
    assert_eq!(
        only("= 1 failed, 1 passed, 1 error, 2 warnings, 1 xpassed in 65.12s (0:01:05) =\n"),
        counts(2, 2, 0)
    );
    for not_pytest in
        ["3 passed in the second round", "== 3 passed ==", "=== 3 passed, 2 frobbed in 0.1s ==="]
    {
        assert!(suites(not_pytest).is_empty(), "{not_pytest}");
    }
}

#[test]
fn pytest_sessions_add_up_and_a_summary_before_the_first_session_does_not_count() {
    let session = |n: u32| {
        format!(
            "============================= test session starts ==============================\ncollected {n} items\n\n\
             ============================== {n} passed in 0.01s ===============================\n"
        )
    };
    let output = format!("4 passed in 0.01s\n{}{}", session(3), session(2));
    assert_eq!(suites(&output), [named("pytest", counts(3, 0, 0)), named("pytest #2", counts(2, 0, 0))]);
}

#[test]
fn unittest_reads_the_ran_line_and_the_verdict_under_it() {
    assert_eq!(only(include_str!("output/unittest-failing.txt")), counts(1, 1, 1));
    let rule = "-".repeat(70);
    let ok = format!("{rule}\nRan 4 tests in 0.002s\n\nOK (skipped=1, expected failures=1)\n");
    assert_eq!(only(&ok), counts(2, 0, 2));
    let failed = format!("{rule}\nRan 5 tests in 0.002s\n\nFAILED (failures=1, errors=1)\n");
    assert_eq!(only(&failed), counts(3, 2, 0));
    assert_eq!(only(&format!("{rule}\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n")), counts(0, 0, 0));
    // The rule, the blank line and the verdict are all part of the shape.
    assert!(suites("Ran 4 tests in 0.002s\n\nOK\n").is_empty());
    assert!(suites(&format!("{rule}\nRan 4 tests in 0.002s\nOK\n")).is_empty());
    assert!(suites(&format!("{rule}\nRan 4 tests in 0.002s\n\nOK (frobbed=1)\n")).is_empty());
}

#[test]
fn unittest_counts_only_its_last_summary() {
    let rule = "-".repeat(70);
    let output = format!("{rule}\nRan 40 tests in 0.1s\n\nOK\n{rule}\nRan 4 tests in 0.002s\n\nOK\n");
    assert_eq!(only(&output), counts(4, 0, 0));
}

#[test]
fn go_counts_the_tests_each_package_ran_with_verbose_output() {
    // TestPrints printed `--- PASS: TestFake1` and a second `--- PASS: TestAdd`.
    let output = include_str!("output/go-verbose-failing.txt");
    assert_eq!(
        suites(output),
        [
            named("go test: example.com/calc", counts(5, 1, 1)),
            named("go test: example.com/calc/parse", counts(1, 0, 0))
        ]
    );
    assert_eq!(tally(output).note, None);
}

#[test]
fn go_without_verbose_output_has_no_counts_and_says_why() {
    let tally = tally(include_str!("output/go-quiet-passing.txt"));
    assert!(tally.suites.is_empty());
    assert!(tally.note.is_some_and(|n| n.contains("-v")), "{tally:?}");
}

#[test]
fn gotestsum_counts_the_run_it_wraps() {
    assert_eq!(suites(include_str!("output/gotestsum-failing.txt")), [named("gotestsum", counts(4, 1, 1))]);
    assert_eq!(only("DONE 3 tests in 0.2s\n"), counts(3, 0, 0));
}

#[test]
fn jest_reads_the_tests_line_under_test_suites() {
    // A test printed `Tests:       99 passed, 99 total`.
    let output = include_str!("output/jest-failing.txt");
    assert!(output.contains("99 passed"));
    assert_eq!(only(output), counts(2, 1, 2));
    assert!(
        suites("Test Suites: 1 passed, 1 total\nTests:       3 passed, 4 total\n").is_empty(),
        "totals disagree"
    );
}

#[test]
fn vitest_reads_the_tests_line_under_test_files() {
    let output = include_str!("output/vitest-failing.txt");
    assert!(output.contains("99 passed"));
    assert_eq!(only(output), counts(2, 1, 2));
    assert_eq!(tally(output).runners(), [Runner::Vitest]);
}

#[test]
fn mocha_reads_passing_pending_and_failing() {
    // A test printed `  99 passing (1ms)` before mocha's own summary.
    let output = include_str!("output/mocha-failing.txt");
    assert!(output.contains("99 passing"));
    assert_eq!(only(output), counts(2, 1, 1));
    assert_eq!(only("\n  12 passing (40ms)\n\n"), counts(12, 0, 0));
}

#[test]
fn node_reads_its_summary_with_either_reporter_and_not_its_tap_stream() {
    // With the spec reporter a test's `console.log('# tests 99\n# pass 99')` shows unescaped.
    let spec = include_str!("output/node-spec.txt");
    assert!(spec.contains("# tests 99"));
    assert_eq!(suites(spec), [named("node --test", counts(2, 1, 2))]);
    let tap = include_str!("output/node-tap.txt");
    assert_eq!(suites(tap), [named("node --test", counts(2, 1, 2))]);
}

#[test]
fn rspec_reads_the_examples_line_under_finished_in() {
    assert_eq!(only(include_str!("output/rspec-failing.txt")), counts(2, 1, 1));
    assert_eq!(
        only("Finished in 0.1 seconds (files took 0.2 seconds to load)\n1 example, 0 failures\n"),
        counts(1, 0, 0)
    );
    assert_eq!(
        only(
            "Finished in 0.1 seconds (files took 0.2 seconds to load)\n0 examples, 0 failures, 1 error occurred outside of examples\n"
        ),
        counts(0, 0, 0)
    );
    assert!(suites("4 examples, 0 failures\n").is_empty());
}

#[test]
fn phpunit_reads_ok_and_the_tests_line() {
    assert_eq!(only(include_str!("output/phpunit-failing.txt")), counts(2, 1, 1));
    assert_eq!(only(include_str!("output/phpunit-passing.txt")), counts(4, 0, 0));
    assert_eq!(only("OK (1 test, 1 assertion)\n"), counts(1, 0, 0));
    assert!(suites("Tests: 4, Frobs: 3.\n").is_empty());
}

#[test]
fn ctest_reads_its_summary_and_the_tests_that_did_not_run() {
    assert_eq!(only(include_str!("output/ctest-failing.txt")), counts(2, 1, 1));
    assert_eq!(only("Test project /b\n100% tests passed, 0 tests failed out of 7\n"), counts(7, 0, 0));
}

#[test]
fn bats_reads_its_summary_and_its_tap_stream() {
    // A failing test echoed `ok 9 fake`: bats shows it as a `# ` comment, and 9 is past the plan.
    assert_eq!(suites(include_str!("output/bats-tap.txt")), [named("TAP", counts(1, 1, 1))]);
    assert_eq!(suites(include_str!("output/bats-pretty.txt")), [named("bats", counts(1, 1, 1))]);
}

#[test]
fn tap_streams_count_each_planned_test_point_once() {
    let output =
        "1..3\nok 1 a\nok 1 a again\nnot ok 2 b # TODO later\nok 3 c # SKIP no db\nok 4 past the plan\n";
    assert_eq!(only(output), counts(1, 0, 2));
    let two = "1..2\nok 1 a\nok 2 b\n1..1\nnot ok 1 c\n";
    assert_eq!(suites(two), [named("TAP", counts(2, 0, 0)), named("TAP #2", counts(0, 1, 0))]);
    assert!(suites("ok 1 a\nok 2 b\n").is_empty(), "no plan, no stream");
    let indented = "TAP version 13\n    ok 1 - nested\nok 1 - top\n1..1\n";
    assert_eq!(only(indented), counts(1, 0, 0));
}

#[test]
fn a_plain_line_counts_only_when_no_runner_printed_a_summary() {
    assert_eq!(
        suites("checking...\nResults: 5 passed, 1 failed, 2 skipped\n"),
        [named("plain summary", counts(5, 1, 2))]
    );
    assert_eq!(only("3 passed, 0 failed\n4 passed; 0 failed\n"), counts(4, 0, 0));
    let with_runner = format!("7 passed, 0 failed\n{}", include_str!("output/phpunit-passing.txt"));
    assert_eq!(tally(&with_runner).runners(), [Runner::Phpunit]);
    assert!(suites("5 passed\n").is_empty(), "both counts are part of the shape");
    assert!(suites("test result: ok. 9 passed; 0 failed; 0 ignored; 0 measured\n").is_empty());
}

/// The cheap test before a plain line is read never passes over a summary, in any case.
#[test]
fn the_plain_lines_prefilter_keeps_every_case_of_both_words() {
    assert_eq!(only("RESULTS: 2 PASSED, 1 FAILED\n"), counts(2, 1, 0));
    assert_eq!(only("2 Passed: 0 Failed.\n"), counts(2, 0, 0));
    assert!(has_word_ignoring_case("x PaSsEd y", b"passed"));
    assert!(!has_word_ignoring_case("pass ed", b"passed"));
    assert!(!has_word_ignoring_case("", b"passed"));
}

#[test]
fn several_runners_in_one_check_add_up() {
    let output = format!(
        "{}{}{}",
        include_str!("output/cargo-workspace-no-fail-fast.txt"),
        include_str!("output/pytest-failing.txt"),
        include_str!("output/node-tap.txt")
    );
    let tally = tally(&output);
    assert_eq!(tally.runners(), [Runner::Cargo, Runner::Pytest, Runner::Node]);
    assert_eq!(tally.total(), counts(5 + 2 + 2, 1 + 3 + 1, 1 + 3 + 2));
}

#[test]
fn output_without_a_summary_has_no_counts() {
    for output in
        ["", "all good\n", "PASS\n", "ok\n", "Compiling calc\nerror[E0425]: cannot find value `x`\n"]
    {
        let tally = tally(output);
        assert!(tally.suites.is_empty(), "{output:?}: {tally:?}");
        assert_eq!(tally.note, None);
    }
}

#[test]
fn lines_split_across_chunks_crlf_and_progress_redraws_read_as_lines() {
    let output = "============================= test session starts ==============================\r\n\
                  collected 2 items\r\n\r\n======= 2 passed in 0.01s =======\r\n";
    let mut scanner = Scanner::default();
    for byte in output.as_bytes() {
        scanner.push(&[*byte]);
    }
    assert_eq!(scanner.tally().suites[0].counts, counts(2, 0, 0));
    // Without a final newline, the last line still counts.
    assert_eq!(
        only("running 1 test\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out"),
        counts(1, 0, 0)
    );
    assert_eq!(only("[##########] 100%\r3 passed in 0.2s\n"), counts(3, 0, 0));
}

#[test]
fn huge_lines_and_floods_of_imitations_stay_bounded() {
    let mut scanner = Scanner::default();
    scanner.push("x".repeat(10 * MAX_LINE_BYTES).as_bytes());
    scanner.push(b" 99 passed in 0.1s\n");
    assert!(scanner.tally().suites.is_empty(), "the tail of an overlong line is not a line");
    let mut scanner = Scanner::default();
    let block =
        "running 1 test\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
    for _ in 0..(MAX_SUITES + 50) {
        scanner.push(block.as_bytes());
    }
    assert_eq!(scanner.tally().suites.len(), MAX_SUITES);
    let mut scanner = Scanner::default();
    scanner.push(b"TAP version 13\n1..5\n");
    for _ in 0..200_000 {
        scanner.push(b"ok 1 same\n");
    }
    assert_eq!(scanner.tally().total(), counts(1, 0, 0));
}

#[test]
fn the_scanner_never_panics_on_any_bytes() {
    use proptest::prelude::*;
    proptest!(|(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..32))| {
        let mut scanner = Scanner::default();
        for chunk in &chunks {
            scanner.push(chunk);
        }
        let _ = scanner.tally();
    });
}

/// A made-up count too large for any suite is not a summary: summed with real counts it could
/// wrap around and hide tests that disappeared.
#[test]
fn counts_beyond_any_real_suite_are_not_summaries() {
    let session = "============================= test session starts ==============================\n";
    let huge = format!("{session}========== 18446744073709551613 passed in 0.10s ==========\n");
    assert!(suites(&huge).is_empty(), "{:?}", suites(&huge));
    let real = format!("{session}========== 3 passed in 0.10s ==========\n");
    assert_eq!(only(&real), counts(3, 0, 0));
    let cargo = "running 2 tests\ntest result: ok. 99999999999 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
    assert!(suites(cargo).is_empty(), "{:?}", suites(cargo));
}
