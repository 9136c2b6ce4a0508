//! The compilers users run as a check, one error to a line: gcc and clang (`calc.c:5:12: error:
//! 'y' undeclared`), javac (`Calc.java:5: error: cannot find symbol`, and through Maven
//! `[ERROR] src/Calc.java:[5,16] cannot find symbol`), tsc (`src/calc.ts(3,5): error TS2322: …`
//! and its pretty form `src/calc.ts:3:5 - error TS2322: …`). Each is named by its kind and file
//! (`error calc.c`, `error TS2322 src/calc.ts`), so that the name stays while the line moves.
//! (rustc and go build are read with their runners.)

use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::Sink;
use super::lines::Line;

/// Made once: a searcher made for every line would cost more than the search.
static ERROR: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"error"));

/// Reads one line: none of these compilers' errors spans more than its line.
pub(super) fn line(line: &Line<'_>, sink: &mut Sink) {
    // Every form below holds the word: one search spares the others on the lines without it.
    if ERROR.find(line.text.as_bytes()).is_none() {
        return;
    }
    {
        let text = line.trimmed;
        if let Some((place, message)) =
            text.split_once(": error: ").or_else(|| text.split_once(": fatal error: "))
        {
            let Some(file) = numbered_place(place) else { return };
            let java = std::path::Path::new(file)
                .extension()
                .is_some_and(|extension| extension.eq_ignore_ascii_case("java"));
            let runner = if java { "javac" } else { "gcc/clang" };
            let slot = sink.fail(runner, &format!("error {file}"));
            sink.detail(slot, &format!("error: {message}"));
            sink.locate(slot, place);
            return;
        }
        if let Some(rest) = text.strip_prefix("[ERROR] ")
            && let Some((file, rest)) = rest.split_once(".java:[")
            && let Some((numbers, message)) = rest.split_once("] ")
        {
            let file = format!("{file}.java");
            let slot = sink.fail("javac", &format!("error {file}"));
            sink.detail(slot, &format!("error: {message}"));
            sink.locate(slot, &format!("{file}:{}", numbers.replace(',', ":")));
            return;
        }
        if let Some((place, code, message)) = tsc(text) {
            let file = place.split(':').next().unwrap_or(&place);
            let slot = sink.fail("tsc", &format!("error {code} {file}"));
            sink.detail(slot, &format!("error {code}: {message}"));
            sink.locate(slot, &place);
        }
    }
}

/// The file of `file:12` or `file:12:5`, when the numbers are there.
fn numbered_place(place: &str) -> Option<&str> {
    let mut parts = place.split(':');
    let file = parts.next()?;
    let numbers: Vec<&str> = parts.collect();
    let numbered = !numbers.is_empty()
        && numbers.len() <= 2
        && numbers.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    (numbered && !file.is_empty() && !file.contains(' ')).then_some(file)
}

/// `(file:line:col, TS2322, message)` of either of tsc's forms.
fn tsc(text: &str) -> Option<(String, &str, &str)> {
    let (place, rest) = if let Some((place, rest)) = text.split_once("): error TS") {
        let (file, numbers) = place.rsplit_once('(')?;
        (format!("{file}:{}", numbers.replace(',', ":")), rest)
    } else {
        let (place, rest) = text.split_once(" - error TS")?;
        numbered_place(place)?;
        (place.to_string(), rest)
    };
    let (number, message) = rest.split_once(": ")?;
    let code_len = 2 + number.len();
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let at = text.find(&format!("TS{number}: "))?;
    Some((place, &text[at..at + code_len], message))
}
