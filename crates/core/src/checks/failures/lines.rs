//! A line of output as the readers see it, and which lines they may need to see at all.
//!
//! A reader between failures acts only on a line that holds `fail`, `error`, `panic` or `not ok`
//! (in any case), a byte that begins `✖`, `✗`, `●` or `❯` (0xE2), a colour code or a carriage
//! return (which change what the line reads as), or whose first character after blanks is `_`,
//! `-`, `#`, `[` or a digit. The words are searched for in a whole stretch of output at once, and
//! only the first bytes are looked at line by line; every other line is passed over unread, which
//! is what keeps a gigabyte of ordinary output as cheap as the search for newlines.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem::Finder;

/// A cleaned line, with what every reader asks of it.
pub(super) struct Line<'a> {
    /// The whole line, cleaned.
    pub(super) text: &'a str,
    /// Without leading blanks (spaces and tabs).
    pub(super) trimmed: &'a str,
}

impl<'a> Line<'a> {
    pub(super) fn new(text: &'a str) -> Line<'a> {
        Line { text, trimmed: trim_blanks(text) }
    }

    /// Whether the line holds one of `words` (lowercase ASCII) in any case.
    pub(super) fn has_any(&self, words: &[&str]) -> bool {
        let lower = self.text.to_ascii_lowercase();
        words.iter().any(|word| lower.contains(word))
    }

    /// How many blanks the line begins with.
    pub(super) fn indent(&self) -> usize {
        self.text.len() - self.trimmed.len()
    }
}

/// `text` without leading spaces and tabs (only those: the prefilter looks at raw bytes).
pub(super) fn trim_blanks(text: &str) -> &str {
    text.trim_start_matches([' ', '\t'])
}

/// A line as a terminal would show it, made safe to quote: invalid UTF-8 replaced, colour and
/// other escape sequences removed, only what follows the last carriage return (progress lines
/// redraw themselves that way), and every other control or direction-changing character
/// replaced with `�`, so that nothing kept can move the cursor, hide text or end a fence.
pub(super) fn clean(raw: &[u8]) -> Cow<'_, str> {
    // Most lines are printable ASCII: nothing to do. One pass over the bytes spares the decoding;
    // without an early exit, so that it is made many bytes at a time.
    let printable =
        raw.iter().fold(true, |all, byte| all & (byte.wrapping_sub(b' ') < 0x5f || *byte == b'\t'));
    if printable {
        return Cow::Borrowed(std::str::from_utf8(raw).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(raw);
    let text: Cow<'_, str> = match text.trim_end_matches('\r').rfind('\r') {
        Some(at) => Cow::Owned(text.trim_end_matches('\r')[at + 1..].to_string()),
        None => Cow::Borrowed(text.trim_end_matches('\r')),
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                // CSI: ESC [ parameters, then one final byte from @ to ~.
                Some('[') => {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC (a hyperlink, a title): ESC ] ... ended by BEL or ESC \.
                Some(']') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            chars.next_if_eq(&'\\');
                            break;
                        }
                    }
                }
                _ => {
                    chars.next();
                }
            },
            '\t' => out.push('\t'),
            c if unsafe_char(c) => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Control characters, and the characters that change the direction or visibility of text.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `text` cut to `max` characters, with a mark saying how many more there were.
pub(super) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            format!("{}… [{rest} more characters]", &text[..at])
        }
    }
}

/// Whether a line whose first bytes are `line` may matter to a reader whatever else it holds.
pub(super) fn may_matter(line: &[u8]) -> bool {
    let first = line.iter().find(|byte| !matches!(byte, b' ' | b'\t'));
    first.is_some_and(|byte| matches!(byte, b'_' | b'-' | b'#' | b'[' | b'0'..=b'9'))
}

/// Whether a line gets past the prefilter. In tests, [`tests::PREFILTER_OFF`] lets every line
/// through, so that what the readers give with it can be compared with what they give without.
pub(super) fn read_anyway(marked: bool) -> bool {
    #[cfg(test)]
    if super::tests::PREFILTER_OFF.get() {
        return true;
    }
    marked
}

/// Whether each line is given only to the readers that can take it ([`super::Readers`]). Off
/// with the prefilter in tests, so that every reader is asked of every line there.
pub(super) fn dispatched() -> bool {
    #[cfg(test)]
    if super::tests::PREFILTER_OFF.get() {
        return false;
    }
    true
}

/// The words searched for in any case, lowercase.
const WORDS: [&[u8]; 4] = [b"fail", b"error", b"panic", b"not ok"];
static FINDERS: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| WORDS.iter().map(Finder::new).collect());

/// The places in a stretch of output where a marked word or byte is, in order.
#[derive(Debug)]
pub(super) struct Marks {
    at: Vec<usize>,
    next: usize,
}

impl Marks {
    pub(super) fn of(text: &[u8]) -> Marks {
        let mut at: Vec<usize> = memchr::memchr3_iter(b'\r', 0x1b, 0xe2, text).collect();
        ignoring_case(text, &mut at);
        at.sort_unstable();
        Marks { at, next: 0 }
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

/// Adds where the words are in `text`, in any ASCII case. Setting the bit that tells a lowercase
/// ASCII letter from its capital sends both to the lowercase letter and no other byte to a
/// letter, so a word is in the copy where it is in the text in some case (a space may stand for
/// a NUL: a line marked for nothing is only read for nothing). The copy is made a block at a
/// time; blocks overlap by the longest word less a byte, so a word across two is found.
fn ignoring_case(text: &[u8], at: &mut Vec<usize>) {
    const BLOCK: usize = 8 * 1024;
    const OVERLAP: usize = 5;
    let mut folded = [0u8; BLOCK];
    let mut start = 0;
    while start < text.len() {
        let piece = &text[start..text.len().min(start + BLOCK)];
        for (to, from) in folded.iter_mut().zip(piece) {
            *to = from | 0x20;
        }
        for finder in FINDERS.iter() {
            at.extend(finder.find_iter(&folded[..piece.len()]).map(|found| start + found));
        }
        if start + BLOCK >= text.len() {
            break;
        }
        start += BLOCK - OVERLAP;
    }
}
