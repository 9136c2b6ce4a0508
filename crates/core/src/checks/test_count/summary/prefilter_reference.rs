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
    let interleaved =
        (0..FIXTURES.len(), prop::collection::vec((any::<prop::sample::Index>(), ordinary()), 1..8))
            .prop_map(|(i, inserts)| {
                let mut lines: Vec<String> = FIXTURES[i].lines().map(|line| format!("{line}\n")).collect();
                for (at, line) in inserts {
                    lines.insert(at.index(lines.len() + 1), line);
                }
                lines.concat()
            });
    prop_oneof![
        fixture,
        lines,
        made_up,
        interleaved,
        prop::collection::vec(ordinary(), 1..20).prop_map(|l| l.concat())
    ]
}

/// A line most of which are ordinary, passed over by the chunk's prefilter, among runs of which
/// only the last is read: ordinary first letters, and after them what makes a line more than
/// ordinary anyway (a plain summary, a carriage return, a colour code), empty lines, lines longer
/// than any summary.
fn ordinary() -> impl Strategy<Value = String> {
    let long = "x".repeat(MAX_LINE_BYTES + 10);
    prop_oneof![
        4 => proptest::string::string_regex(
            "(a line|error:|All:|x|~|\\[|Expected|w)( |[0-9]|passed|FAILED|FaIlEd|failing|,|\\x1b\\[0m|\\r| in |\\xff)*\\n"
        )
        .expect("a valid pattern"),
        1 => Just("\n".to_string()),
        1 => Just(format!("{long}\n")),
        1 => Just(format!("All: 3 passed, 1 failed {long}\n")),
    ]
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

/// Whether the chunk's prefilter passes over `line` (a line of its own, without its newline).
fn passed_over(line: &str) -> bool {
    let text = format!("{line}\n");
    line.len() <= MAX_LINE_BYTES
        && !LineMarks::of(text.as_bytes()).before(line.len())
        && !line_marks::may_begin_a_summary(line.as_bytes())
}

/// What the chunk's prefilter rests on: every line it passes over does to the parsers, in every
/// state the runners' output leaves them in, what an ordinary line does, and doing that twice is
/// doing it once. Tried with every line of the fixtures, those that begin with a digit also with
/// every other digit, each also after a carriage return, and with a few lines they do not have.
#[test]
fn every_line_passed_over_does_what_an_ordinary_line_does() {
    let mut candidates: Vec<String> =
        FIXTURES.iter().flat_map(|fixture| fixture.split('\n')).map(String::from).collect();
    let other_digits: Vec<String> = candidates
        .iter()
        .filter(|line| line.starts_with(|c: char| c.is_ascii_digit()))
        .flat_map(|line| ('0'..='9').map(move |digit| format!("{digit}{}", &line[1..])))
        .collect();
    candidates.extend(other_digits);
    candidates.extend(candidates.clone().into_iter().map(|line| format!("x\r{line}")));
    // Lines the fixtures do not have: summaries hidden by a colour code or the case of a word,
    // and start and summary lines unindented or without the word `failed`.
    let more = [
        "All: 3 passed, 1 FAILED",
        "All: 3 passed, 1 fai\x1b[0mled",
        "x\x1b[0m\r3 passing (1ms)",
        "NO TESTS RAN",
        "0 passing (1ms)",
        "Starting 3 tests across 1 binary",
        "test result: ok. 1 passed; 1 passed; 0 ignored; 0 measured",
    ];
    candidates.extend(more.map(String::from));
    candidates.sort();
    candidates.dedup();
    let passed: Vec<&String> = candidates.iter().filter(|line| passed_over(line)).collect();
    assert!(
        passed.len() > 10 && passed.len() < candidates.len() / 2,
        "{} of {}",
        passed.len(),
        candidates.len()
    );
    for fixture in FIXTURES {
        let mut parsers = Parsers::default();
        for line in fixture.split('\n') {
            parsers.line(&clean(line.as_bytes()));
            let mut ordinary = parsers.clone();
            ordinary.line("a line of output");
            let mut twice = ordinary.clone();
            twice.line("a line of output");
            assert_eq!(twice, ordinary, "after {line:?}");
            for other in &passed {
                let mut then = parsers.clone();
                then.line(&clean(other.as_bytes()));
                assert_eq!(then, ordinary, "{other:?} after {line:?}");
            }
        }
    }
}

#[test]
fn the_prefilters_pass_over_a_line_no_summary_can_be() {
    let line = "a line of verify output that is no runner's summary";
    assert!(!may_be(line.contains(" in ")) && !may_be(starts_with_digit(line)));
    assert!(without_prefilters(|| may_be(false)), "the reference lets every line through");
    assert!(starts_with_digit(" \t 3 passing (2ms)") && !starts_with_digit("passing 3"));
}
