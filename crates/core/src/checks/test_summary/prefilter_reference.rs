//! The parsers' prefilters change nothing: with them, every output gives the tally it gives when
//! every line goes through every parser's full reading (the reference).

use std::cell::Cell;

use proptest::prelude::*;

use super::*;

thread_local! {
    /// Every prefilter lets every line through.
    pub(super) static OFF: Cell<bool> = const { Cell::new(false) };
}

/// What `f` gives with every prefilter off.
fn without_prefilters<T>(f: impl FnOnce() -> T) -> T {
    OFF.set(true);
    let result = f();
    OFF.set(false);
    result
}

/// The tally of `output` pushed in pieces of the given sizes, taken in turn (0 stands for 1).
fn tally_in_pieces(mut output: &[u8], sizes: &[usize]) -> Tally {
    let mut scanner = Scanner::default();
    for size in sizes.iter().cycle().take(if sizes.is_empty() { 0 } else { output.len() }) {
        let (piece, rest) = output.split_at((*size).clamp(1, output.len()));
        scanner.push(piece);
        output = rest;
        if output.is_empty() {
            break;
        }
    }
    scanner.push(output);
    scanner.tally()
}

/// Every runner's real output in the fixtures.
const FIXTURES: &[&str] = &[
    include_str!("output/bats-pretty.txt"),
    include_str!("output/bats-tap.txt"),
    include_str!("output/cargo-workspace-no-fail-fast.txt"),
    include_str!("output/cargo-workspace-stops-at-a-failure.txt"),
    include_str!("output/ctest-failing.txt"),
    include_str!("output/go-quiet-passing.txt"),
    include_str!("output/go-verbose-failing.txt"),
    include_str!("output/gotestsum-failing.txt"),
    include_str!("output/jest-failing.txt"),
    include_str!("output/mocha-failing.txt"),
    include_str!("output/nextest-failing.txt"),
    include_str!("output/nextest-passing.txt"),
    include_str!("output/node-spec.txt"),
    include_str!("output/node-tap.txt"),
    include_str!("output/phpunit-failing.txt"),
    include_str!("output/phpunit-passing.txt"),
    include_str!("output/pytest-colour-deselected.txt"),
    include_str!("output/pytest-failing.txt"),
    include_str!("output/pytest-q-exitfirst.txt"),
    include_str!("output/rspec-failing.txt"),
    include_str!("output/unittest-failing.txt"),
    include_str!("output/vitest-failing.txt"),
];

/// The word search as it was before it looked only where the word's first letter is.
fn has_word_ignoring_case_reference(line: &str, word: &[u8]) -> bool {
    line.as_bytes().windows(word.len()).any(|w| w.eq_ignore_ascii_case(word))
}

/// A piece of mixed output: a whole fixture, some lines of one, or a line made up of the
/// characters summaries are made of (digits, the runners' words and punctuation, colour codes,
/// carriage returns, leading white space).
fn segment() -> impl Strategy<Value = String> {
    let fixture = (0..FIXTURES.len()).prop_map(|i| FIXTURES[i].to_string());
    let lines = (0..FIXTURES.len(), any::<prop::sample::Index>(), 1usize..12).prop_map(|(i, start, n)| {
        let lines: Vec<&str> = FIXTURES[i].lines().collect();
        let start = start.index(lines.len().max(1));
        lines.iter().skip(start).take(n).flat_map(|l| [*l, "\n"]).collect()
    });
    let made_up = proptest::string::string_regex(
        "( |\\t|=|-|\\.|,|;|:|%|\\(|\\)|\\||#|[0-9]|1\\.\\.|\\x1b\\[3[12]m|\\r|ok|not ok| in | passing \\(|pending|failing|passed|failed|skipped|tests?|failures?|errors?|% tests passed, | failed out of |examples?|Tests: |Tests:|ℹ |PASSED|Ran |DONE |s|ms|µs)*\\n",
    )
    .expect("a valid pattern");
    prop_oneof![fixture, lines, made_up]
}

proptest! {
    #[test]
    fn prefiltered_parsers_give_the_reference_tally_on_mixed_output(
        segments in prop::collection::vec(segment(), 1..12),
        sizes in prop::collection::vec(0usize..2_000, 0..8),
    ) {
        let output = segments.concat();
        let filtered = tally_in_pieces(output.as_bytes(), &sizes);
        let reference = without_prefilters(|| tally_in_pieces(output.as_bytes(), &sizes));
        prop_assert_eq!(filtered, reference);
    }

    #[test]
    fn the_word_search_agrees_with_a_search_of_every_window(line in "(.|P|p|a|s|e|d|A|S|E|D|\\PC)*") {
        for word in [&b"passed"[..], b"failed", b"p"] {
            prop_assert_eq!(has_word_ignoring_case(&line, word), has_word_ignoring_case_reference(&line, word));
        }
    }
}

#[test]
fn every_fixture_gives_the_reference_tally() {
    for fixture in FIXTURES {
        assert_eq!(tally(fixture), without_prefilters(|| tally(fixture)), "{fixture}");
    }
}

#[test]
fn the_prefilters_pass_over_a_line_no_summary_can_be() {
    let line = "a line of verify output that is no runner's summary";
    assert!(!may_be(line.contains(" in ")) && !may_be(starts_with_digit(line)));
    assert!(without_prefilters(|| may_be(false)), "the reference lets every line through");
    assert!(starts_with_digit(" \t 3 passing (2ms)") && !starts_with_digit("passing 3"));
}
