//! Text from the ledger and the state made safe to put in an HTML page.
//!
//! Task text and verify output are hostile input: a model can write anything into them. Every
//! such string goes through [`text`] before it reaches the page, in element content and in
//! quoted attribute values alike (the page never puts data inside `<style>`, a tag name, an
//! unquoted attribute or a URL). Control characters, which HTML forbids and terminals misuse,
//! are shown in caret notation (`^[` for ESC) so they stay visible and inert.

/// `s` escaped for element content and for double- or single-quoted attribute values.
pub(crate) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            // Carriage returns would let output overwrite itself in a terminal; on the page they
            // are only noise, so a CRLF line end is a plain line end.
            '\r' => {}
            // C0 controls in caret notation (^@ ^A ... ^_), DEL as ^?.
            '\0'..='\x1f' => {
                out.push('^');
                out.push(char::from(c as u8 + 0x40));
            }
            '\x7f' => out.push_str("^?"),
            // C1 controls and noncharacters have no business on a page.
            '\u{80}'..='\u{9f}' | '\u{fdd0}'..='\u{fdef}' => out.push('\u{fffd}'),
            c if (c as u32) & 0xfffe == 0xfffe => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// At most `max` characters of `s`, cut at a character boundary, with `…` when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_inert() {
        assert_eq!(
            text(r#"<script>alert("x")</script> & 'y' </style> ]]> <!--"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39; &lt;/style&gt; ]]&gt; &lt;!--"
        );
    }

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(text("a\0b\x1b[31mc\x7f\r\n\td"), "a^@b^[[31mc^?\n\td");
        assert_eq!(text("\u{85}\u{fffe}\u{10ffff}\u{fdd0}"), "\u{fffd}\u{fffd}\u{fffd}\u{fffd}");
        assert_eq!(text("üñí😀"), "üñí😀");
    }

    #[test]
    fn truncates_on_characters() {
        assert_eq!(truncate("ééé", 2), "éé…");
        assert_eq!(truncate("ab", 2), "ab");
    }
}
