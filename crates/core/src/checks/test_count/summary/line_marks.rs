//! Which lines of a stretch of output could be read as more than an ordinary line, found for the
//! whole stretch at once.
//!
//! A gigabyte of output is ten million lines, and each went through every runner's parser. Yet
//! every line a parser does anything with either begins with one of a few bytes or holds one of a
//! few pieces of text anywhere in it. Every other line, an ordinary one, does the same to every
//! parser as any other: it ends what a summary's previous line began (jest's `Test Suites:` line
//! must be followed by its `Tests:` line, mocha's and node's summaries end at the first line that
//! is not theirs, and so on) and nothing more. So a run of ordinary lines does what its last line
//! does, and only that line is read; the pieces of text are searched for in the whole stretch,
//! and only the lines' first bytes are looked at one line at a time.

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// Whether `line` may be read as more than an ordinary line, whatever else it holds (its first
/// byte, and of a line beginning with `t` its first words). Every summary, start line and line a
/// summary reads next begins with one of these bytes:
///
/// - a digit: counts first (mocha, bats, ctest, `pytest -q`), TAP's plan `1..N`;
/// - `=` `-` `#`: pytest's rules, go's `=== RUN` and `--- PASS:`, unittest's rule, node's TAP
///   summary (`# tests 5`);
/// - `r` `t` `o` `n`: cargo's `running N tests` and `test result:`, TAP's `ok` and `not ok`, go's
///   `ok`, pytest's `no tests ran`. Of a line beginning with `t`, only `test result:` is read:
///   pytest's `-v` names every test on a line of its own beginning `tests/`, a million lines in
///   a gigabyte of its output, and none of them is more than an ordinary line;
/// - `D` `F` `N` `O` `P` `R` `S` `T`: gotestsum's `DONE`, go's `FAIL`, rspec's `Finished in`,
///   unittest's `Ran`, `OK`, `FAILED (` and `NO TESTS RAN`, phpunit's `PHPUnit`, `OK (` and
///   `Tests:`, vitest's `RUN`, `Test Files` and `Tests`, nextest's `Starting` and `Summary`,
///   jest's `Test Suites:` and `Tests:`, ctest's `Test project` and its list of tests that did
///   not run, `TAP version`;
/// - white space, control characters and anything not ASCII: lines read after their leading
///   white space (cargo's `Running`, nextest's and vitest's indented lines, ctest's list), node's
///   `ℹ`, white space outside ASCII;
/// - nothing: unittest's empty line after `Ran N tests in …`.
pub(super) fn may_begin_a_summary(line: &[u8]) -> bool {
    match line.first() {
        None => true,
        Some(b't') => line.starts_with(b"test result:"),
        Some(byte) => BEGINS_A_SUMMARY[usize::from(*byte)],
    }
}

const BEGINS_A_SUMMARY: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < table.len() {
        table[byte] = byte <= b' ' as usize || byte >= 0x7f;
        byte += 1;
    }
    let firsts = b"0123456789=-#rtonDFNOPRST";
    let mut i = 0;
    while i < firsts.len() {
        table[firsts[i] as usize] = true;
        i += 1;
    }
    table
};

/// The text that makes a line more than an ordinary one wherever it is in the line: the plain
/// summary holds `failed` (in any case), and a line with a carriage return or a colour code is
/// read from its last carriage return and without the codes, so its first byte is not the one it
/// is read with. (Pytest's summary holds ` in ` anywhere, but begins with a rule, a count, white
/// space or `no tests ran`.)
const ANY_CASE: &[u8] = b"failed";
static ANY_CASE_FINDER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(ANY_CASE));

/// The places in a stretch of output where that text is, in order.
#[derive(Debug)]
pub(super) struct LineMarks {
    at: Vec<usize>,
    next: usize,
}

impl LineMarks {
    pub(super) fn of(text: &[u8]) -> LineMarks {
        let mut at: Vec<usize> = memchr::memchr2_iter(b'\r', 0x1b, text).collect();
        ignoring_case(text, &ANY_CASE_FINDER, &mut at);
        at.sort_unstable();
        LineMarks { at, next: 0 }
    }

    /// Whether a mark lies before `end`, using up the marks that do. Asked with the ends of the
    /// stretch's lines in order, it says whether the line that ends there holds a mark.
    pub(super) fn before(&mut self, end: usize) -> bool {
        let first = self.next;
        while self.at.get(self.next).is_some_and(|at| *at < end) {
            self.next += 1;
        }
        self.next > first
    }
}

/// Adds where the word `finder` looks for (lowercase ASCII letters) is in `text`, in any ASCII
/// case. Setting the bit that tells a lowercase ASCII letter from its capital sends both to the
/// lowercase letter, and no other byte to a letter, so the word is in the copy with that bit set
/// exactly where it is in the text in some case. The copy is made a block at a time; blocks
/// overlap by a word less a byte, so a word across two blocks is found in the second.
fn ignoring_case(text: &[u8], finder: &Finder<'_>, at: &mut Vec<usize>) {
    const BLOCK: usize = 8 * 1024;
    let mut folded = [0u8; BLOCK];
    let mut start = 0;
    while start < text.len() {
        let piece = &text[start..text.len().min(start + BLOCK)];
        for (to, from) in folded.iter_mut().zip(piece) {
            *to = from | 0x20;
        }
        at.extend(finder.find_iter(&folded[..piece.len()]).map(|found| start + found));
        if start + BLOCK >= text.len() {
            break;
        }
        start += BLOCK - (finder.needle().len() - 1);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn marked_lines(text: &str) -> Vec<&str> {
        let mut marks = LineMarks::of(text.as_bytes());
        let mut start = 0;
        let mut marked = Vec::new();
        for end in memchr::memchr_iter(b'\n', text.as_bytes()) {
            if marks.before(end) {
                marked.push(&text[start..end]);
            }
            start = end + 1;
        }
        marked
    }

    #[test]
    fn a_line_is_marked_for_each_piece_of_text_and_once() {
        let text = "plain\n3 FaIlEd\nbar\r50%\ncolour \x1b[31mred\nall failed in a \r\nplain\n";
        assert_eq!(marked_lines(text), ["3 FaIlEd", "bar\r50%", "colour \x1b[31mred", "all failed in a \r"]);
        assert!(marked_lines("faile d\nfailing\ndone in 1s\n").is_empty());
    }

    #[test]
    fn a_word_across_two_blocks_of_the_copy_is_found_once() {
        for cut in 8 * 1024 - 8..8 * 1024 + 2 {
            let mut text = "x".repeat(cut);
            text.push_str("FAILED\n");
            text.push_str(&"y".repeat(20_000));
            text.push_str("\nfailed\n");
            let mut at = Vec::new();
            ignoring_case(text.as_bytes(), &ANY_CASE_FINDER, &mut at);
            assert_eq!(at, [cut, cut + 7 + 20_001], "cut at {cut}");
        }
    }

    #[test]
    fn the_first_bytes_of_every_start_and_summary_line_are_kept() {
        for line in ["3 passing (2ms)", "=== RUN", "--- FAIL:", "# tests 5", "running 1 test", "ok", "not ok"]
        {
            assert!(may_begin_a_summary(line.as_bytes()), "{line}");
        }
        for line in
            ["test result:", "DONE 1", "Finished in", "NO TESTS RAN", "OK", "PHPUnit", "RUN", "Summary"]
        {
            assert!(may_begin_a_summary(line.as_bytes()), "{line}");
        }
        for line in ["Tests: 1", " Running", "\tx", "ℹ tests 5", "\u{a0}x", "\x0bx", ""] {
            assert!(may_begin_a_summary(line.as_bytes()), "{line:?}");
        }
        for line in [
            "a line of output",
            "error: x",
            "Error",
            "warning",
            "[1/3] build",
            "~",
            "|",
            "tests/a.py::t PASSED",
        ] {
            assert!(!may_begin_a_summary(line.as_bytes()), "{line}");
        }
    }

    proptest! {
        #[test]
        fn the_folded_search_finds_every_case_of_the_word_and_nothing_else(
            text in "(f|F|a|A|i|I|l|L|e|E|d|D|\\x06|\\x01|\\x04|@|ä|x|\\n)*",
        ) {
            let mut at = Vec::new();
            ignoring_case(text.as_bytes(), &ANY_CASE_FINDER, &mut at);
            let every_window: Vec<usize> = text
                .as_bytes()
                .windows(ANY_CASE.len())
                .enumerate()
                .filter(|(_, window)| window.eq_ignore_ascii_case(ANY_CASE))
                .map(|(i, _)| i)
                .collect();
            prop_assert_eq!(at, every_window);
        }
    }
}
