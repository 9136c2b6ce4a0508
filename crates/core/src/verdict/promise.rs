//! Recognising the completion promise in the agent's final message.
//!
//! Only `<promise>TEXT</promise>` counts, with the inner text trimmed and its whitespace collapsed
//! before an exact comparison. A bare `TEXT` never counts: models write the phrase while saying
//! they are *not* done yet.

/// Trims and collapses runs of whitespace to single spaces.
pub(crate) fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// True when some `<promise>…</promise>` in `message` holds exactly `promise`.
pub(crate) fn is_kept(message: &str, promise: &str) -> bool {
    let wanted = normalize(promise);
    let mut rest = message;
    while let Some(open) = rest.find("<promise>") {
        let inner_start = open + "<promise>".len();
        let Some(close) = rest[inner_start..].find("</promise>") else {
            return false;
        };
        if normalize(&rest[inner_start..inner_start + close]) == wanted {
            return true;
        }
        rest = &rest[inner_start + close + "</promise>".len()..];
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_with_the_exact_text_counts() {
        assert!(is_kept("done.\n<promise>ALL GREEN</promise>", "ALL GREEN"));
        assert!(is_kept("<promise>\n  ALL\n GREEN \n</promise>", "ALL GREEN"));
        assert!(is_kept("<promise>no</promise> then <promise>ALL GREEN</promise>", "ALL GREEN"));
    }

    #[test]
    fn bare_text_other_text_and_broken_tags_do_not_count() {
        assert!(!is_kept("ALL GREEN", "ALL GREEN"));
        assert!(!is_kept("<promise>all green</promise>", "ALL GREEN"));
        assert!(!is_kept("<promise>ALL GREEN, almost</promise>", "ALL GREEN"));
        assert!(!is_kept("<promise>ALL GREEN", "ALL GREEN"));
        assert!(!is_kept("ALL GREEN</promise>", "ALL GREEN"));
        assert!(!is_kept("", "ALL GREEN"));
    }
}
