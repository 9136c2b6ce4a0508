//! Text shown to people and models that came from somewhere else (an agent's message, a
//! reviewer's output): what must not reach a terminal or a prompt as it is.

pub(crate) mod duration;
pub(crate) mod nearest;
pub(crate) mod relative_path;
pub(crate) mod version;

/// Characters that change how the rest of a line looks, or are not seen at all: control
/// characters (escape sequences start with one), bidirectional overrides and isolates,
/// zero-width characters.
pub(crate) fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// A code fence longer than any run of backticks inside `text`, so nothing in it closes the
/// fence.
pub(crate) fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// `text` cut to at most `max` characters, its last one `…` when anything was cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_text_ends_in_an_ellipsis_within_its_bound() {
        assert_eq!(cut("short", 5), "short");
        assert_eq!(cut("longer", 5), "long…");
        assert_eq!(cut("日本語テキスト", 3), "日本…");
        assert_eq!(cut("", 0), "");
    }

    #[test]
    fn fences_outlast_backticks_in_the_output() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ```` b"), "`````");
    }

    #[test]
    fn escapes_direction_overrides_and_zero_width_characters_are_hidden() {
        for c in ['\u{1b}', '\u{7}', '\0', '\n', '\u{202E}', '\u{200B}', '\u{2066}', '\u{FEFF}'] {
            assert!(is_hidden(c), "{c:?}");
        }
        for c in ['a', ' ', 'é', '→', '日'] {
            assert!(!is_hidden(c), "{c:?}");
        }
    }
}
