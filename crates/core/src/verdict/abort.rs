//! The honest way out: the model ends its turn with `<loop-abort>REASON</loop-abort>` when the
//! task cannot be done as asked, and the loop is parked for the user with that reason.
//!
//! A model held by a check it cannot pass looks for another way to end the loop, and weakening
//! the check is the nearest one. Giving it an explicit, honest exit cuts that sharply (arXiv
//! 2510.20270, a benchmark of impossible coding tasks). An abort never counts as done: the loop is parked, never verified,
//! and the user reads the reason and decides (`resume`, or cancel).
//!
//! Only the agent's final message is read, as the host hands it to the hook: the task, the
//! re-injected prompt and the user's words are never searched.

use crate::support::text::is_hidden;

/// The reason is cut to this many characters.
const MAX_REASON_CHARS: usize = 600;
const OPEN: &str = "<loop-abort>";
const CLOSE: &str = "</loop-abort>";

/// The reason of the last closed `<loop-abort>…</loop-abort>` in `message`, whitespace collapsed and
/// control and direction-changing characters taken out (the reason is shown in the user's
/// terminal, where an escape sequence or a right-to-left override could disguise it); an empty one
/// reads `no reason given`. `None` when the message holds no closed tag.
pub(crate) fn reason(message: &str) -> Option<String> {
    let mut last = None;
    let mut rest = message;
    while let Some(open) = rest.find(OPEN) {
        let inner = &rest[open + OPEN.len()..];
        let Some(close) = inner.find(CLOSE) else { break };
        last = Some(&inner[..close]);
        rest = &inner[close + CLOSE.len()..];
    }
    let shown: String = last?.chars().map(|c| if is_hidden(c) { ' ' } else { c }).collect();
    let inner = crate::verdict::promise::normalize(&shown);
    if inner.is_empty() {
        return Some("no reason given".into());
    }
    if inner.chars().count() <= MAX_REASON_CHARS {
        return Some(inner);
    }
    let mut cut: String = inner.chars().take(MAX_REASON_CHARS).collect();
    cut.push('…');
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_closed_tag_gives_the_reason() {
        assert_eq!(
            reason("I tried.\n<loop-abort>The API key in .env is revoked;\n  I cannot reach the service.</loop-abort>")
                .as_deref(),
            Some("The API key in .env is revoked; I cannot reach the service.")
        );
        assert_eq!(
            reason("<loop-abort>a</loop-abort> then <loop-abort>b</loop-abort>").as_deref(),
            Some("b")
        );
        assert_eq!(reason("<loop-abort>a</loop-abort> then <loop-abort>unclosed").as_deref(), Some("a"));
        assert_eq!(reason("<loop-abort>  </loop-abort>").as_deref(), Some("no reason given"));
    }

    #[test]
    fn no_tag_an_unclosed_tag_or_a_bare_word_is_no_abort() {
        for message in ["", "done", "loop-abort", "<loop-abort>unclosed", "</loop-abort>", "<loop-abort/>"] {
            assert_eq!(reason(message), None, "{message:?}");
        }
    }

    #[test]
    fn escapes_and_invisible_characters_are_taken_out_of_the_reason() {
        let hostile =
            "<loop-abort>\u{1b}[2J\u{1b}]0;title\u{7}cannot\u{0}do\u{202E}this\u{200B}\r\nnow</loop-abort>";
        let shown = reason(hostile).unwrap();
        assert_eq!(shown, "[2J ]0;title cannot do this now");
        assert!(!shown.chars().any(is_hidden), "{shown:?}");
        assert_eq!(
            reason("<loop-abort>\u{1b}\u{7}\u{202E}</loop-abort>").as_deref(),
            Some("no reason given")
        );
    }

    #[test]
    fn a_long_reason_is_cut() {
        let long = format!("<loop-abort>{}</loop-abort>", "why ".repeat(500));
        let cut = reason(&long).unwrap();
        assert_eq!(cut.chars().count(), MAX_REASON_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
