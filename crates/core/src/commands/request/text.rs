//! `/for-loop`'s text: the words of the raw text that are our flags, read through the flag
//! table, and the task, which is what is left.
//!
//! The text is never shell-split: the task is the raw text with our flags cut out, byte for byte,
//! so apostrophes, `$(...)`, backticks and newlines in a task are just text. Only our own flag
//! values are unquoted. A word that looks like one of our flags but isn't one is refused, because
//! a misspelt `--max-iteration 3` that silently became task text would leave a loop with the
//! default cap and a task that mentions a flag.

use std::ops::Range;

use super::{Flag, LoopFlags, MAX_TASK_BYTES, RequestError};
use crate::support::text::nearest::levenshtein;

/// Finds our flags in `raw` and reads their values; refuses a near miss, a flag given twice, a
/// missing value and a switch given one. Returns the flags and where they are in the text.
pub(super) fn scan(raw: &str) -> Result<(LoopFlags, Vec<Range<usize>>), RequestError> {
    let mut flags = LoopFlags::default();
    let mut cuts = Vec::new();
    let mut scanner = Scanner { text: raw, pos: 0 };
    while let Some(word) = scanner.next_word() {
        let Some(flag_word) = FlagWord::classify(&raw[word.clone()])? else {
            continue;
        };
        flags.refuse_twice(flag_word.flag)?;
        let (value, end) = scanner.flag_value(&flag_word, word.clone())?;
        flags.add(flag_word.flag, value)?;
        cuts.push(word.start..end);
        scanner.pos = end;
    }
    Ok((flags, cuts))
}

/// The task: the text with our flags cut out, unquoted when it is one quoted string.
pub(super) fn task(raw: &str, cuts: &[Range<usize>]) -> Result<String, RequestError> {
    let task = unquote_whole(cut_out(raw, cuts).trim());
    if is_blank(&task) {
        return Err(RequestError::EmptyTask);
    }
    if task.len() > MAX_TASK_BYTES {
        return Err(RequestError::TaskTooLong(task.len()));
    }
    Ok(task)
}

/// A word recognised as one of our flags.
struct FlagWord {
    flag: Flag,
    /// Byte offset of the value inside the word, for `--flag=value`.
    inline_value: Option<usize>,
}

impl FlagWord {
    /// `Ok(None)`: the word is task text. `Err`: it is a flag we do not know, a near miss.
    fn classify(word: &str) -> Result<Option<FlagWord>, RequestError> {
        let (name, inline_value) = match word.find('=') {
            Some(eq) => (&word[..eq], Some(eq + 1)),
            None => (word, None),
        };
        if let Some(flag) = Flag::named(name) {
            return Ok(Some(FlagWord { flag, inline_value }));
        }
        if let Some(nearest) = near_miss(name) {
            return Err(RequestError::UnknownFlag { given: word.to_string(), nearest });
        }
        Ok(None)
    }
}

/// The flag a word was probably meant to be, if it is close to one of ours.
fn near_miss(word: &str) -> Option<Flag> {
    let bare = word.trim_start_matches(['-', '\u{2013}', '\u{2014}']);
    let dashes = &word[..word.len() - bare.len()];
    if dashes.is_empty() || bare.len() < 3 {
        return None;
    }
    let normal = bare.to_lowercase().replace('_', "-");
    for flag in Flag::all() {
        let name = &flag.name()[2..];
        // `-verify`, `—verify` (an autocorrected double hyphen), `--Verify`, `--max_iterations`.
        if normal == name {
            return Some(flag);
        }
    }
    if dashes != "--" {
        return None;
    }
    Flag::all()
        .filter_map(|flag| {
            let name = &flag.name()[2..];
            let distance = levenshtein(&normal, name);
            let prefix = normal.len() >= 3 && name.starts_with(&normal);
            (distance <= 2 || prefix).then_some((distance, flag))
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, flag)| flag)
}

/// Walks the raw text word by word. A word that opens a quote whose closing quote ends a word is
/// one word, spaces included, so a quoted task is never searched for flags.
struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl Scanner<'_> {
    fn next_word(&mut self) -> Option<Range<usize>> {
        let rest = &self.text[self.pos..];
        let start = self.pos + (rest.len() - rest.trim_start().len());
        if start >= self.text.len() {
            self.pos = start;
            return None;
        }
        let end = match quoted_span(&self.text[start..]) {
            Some(len) => start + len,
            None => word_end(self.text, start),
        };
        self.pos = end;
        Some(start..end)
    }

    /// Reads the value of the flag in `word`: none for a switch, else its `=value` or the
    /// next word; returns it with the offset where it ends.
    fn flag_value(&self, flag_word: &FlagWord, word: Range<usize>) -> Result<(String, usize), RequestError> {
        let flag = flag_word.flag;
        match (flag.is_switch(), flag_word.inline_value) {
            (true, Some(_)) => Err(RequestError::BadValue {
                flag,
                value: self.text[word].to_string(),
                why: format!("it takes no value: write just {flag}"),
            }),
            (true, None) => Ok((String::new(), word.end)),
            (false, Some(offset)) => self.value_at(word.start + offset, flag, true),
            (false, None) => self.value_at(word.end, flag, false),
        }
    }

    /// Reads a flag's value starting at `at`; returns it unquoted with the offset where it ends.
    fn value_at(&self, at: usize, flag: Flag, inline: bool) -> Result<(String, usize), RequestError> {
        let rest = &self.text[at..];
        let start = if inline { at } else { at + (rest.len() - rest.trim_start().len()) };
        if start >= self.text.len() || (inline && word_end(self.text, start) == start) {
            return Err(RequestError::MissingValue { flag });
        }
        let value_text = &self.text[start..];
        if let Some(open) = value_text.chars().next().filter(|c| closing_quote(*c).is_some()) {
            return match quoted_span(value_text) {
                Some(len) => Ok((unquote(&value_text[..len]), start + len)),
                None if value_text[open.len_utf8()..].contains(closing_quote(open).unwrap_or(open)) => {
                    // Closed, but glued to more text (`"a"b`): take the word as it is.
                    let end = word_end(self.text, start);
                    Ok((self.text[start..end].to_string(), end))
                }
                None => Err(RequestError::UnclosedQuote { flag }),
            };
        }
        let end = word_end(self.text, start);
        let value = &self.text[start..end];
        if !inline && FlagWord::classify(value).ok().flatten().is_some() {
            return Err(RequestError::MissingValue { flag });
        }
        Ok((value.to_string(), end))
    }
}

fn word_end(text: &str, start: usize) -> usize {
    text[start..].find(char::is_whitespace).map_or(text.len(), |i| start + i)
}

fn closing_quote(open: char) -> Option<char> {
    match open {
        '"' => Some('"'),
        '\'' => Some('\''),
        '\u{201c}' => Some('\u{201d}'),
        '\u{2018}' => Some('\u{2019}'),
        _ => None,
    }
}

/// If `text` starts with a quote that is closed by a quote followed by whitespace or the end,
/// the byte length of that quoted span. Inside double quotes a backslash escapes the next char.
///
/// A double quote closes at the first unescaped double quote, as in a shell, so a stray `"` in a
/// task cannot swallow the flags after it. A single quote closes at the first `'` that ends a
/// word, because apostrophes inside words (`user's`) are prose, not closing quotes.
pub(super) fn quoted_span(text: &str) -> Option<usize> {
    let open = text.chars().next()?;
    let close = closing_quote(open)?;
    let strict = matches!(open, '"' | '\u{201c}');
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        if c == '\\' && open == '"' {
            chars.next();
        } else if c == close {
            let end = i + c.len_utf8();
            if text[end..].chars().next().is_none_or(char::is_whitespace) {
                return Some(end);
            }
            if strict {
                return None;
            }
        }
    }
    None
}

/// Removes the outer quotes of a span found by [`quoted_span`]. In double quotes `\"` and `\\`
/// stand for `"` and `\`, as in a shell; nothing else is touched.
fn unquote(span: &str) -> String {
    let open = span.chars().next().unwrap_or('"');
    let close = closing_quote(open).unwrap_or(open);
    let inner = &span[open.len_utf8()..span.len() - close.len_utf8()];
    if open != '"' {
        return inner.to_string();
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('"' | '\\')) {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `text` shows nothing: only whitespace (a quoted `"   "`, tabs, ideographic spaces)
/// and invisible format characters (zero-width spaces and joiners, byte-order marks).
pub(super) fn is_blank(text: &str) -> bool {
    text.chars().all(|c| c.is_whitespace() || matches!(c, '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}'))
}

/// A task written wholly in quotes is the text inside them.
fn unquote_whole(task: &str) -> String {
    match quoted_span(task) {
        Some(len) if len == task.len() => unquote(task),
        _ => task.to_string(),
    }
}

/// The text without the cut ranges, each cut taking the whitespace just before it.
fn cut_out(raw: &str, cuts: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut kept_from = 0;
    for cut in cuts {
        let before = &raw[kept_from..cut.start];
        out.push_str(before.trim_end());
        kept_from = cut.end;
    }
    out.push_str(&raw[kept_from..]);
    out
}
