//! Splitting a Markdown file into its YAML frontmatter and its body, and joining them again.
//!
//! The body is the user's task, which must survive any number of rewrites byte for byte: CRLF line
//! endings, `---` lines inside the task and a missing final newline all come back unchanged. That
//! is why this is done by hand rather than with a frontmatter crate (they normalise the body).

use thiserror::Error;

/// Why a file could not be split into frontmatter and body.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum FrontmatterError {
    #[error("it does not start with a `---` line, so it has no frontmatter")]
    Missing,
    #[error("its frontmatter opened with `---` on line 1 is never closed by another `---` line")]
    Unclosed,
}

/// A file split into its two parts, both borrowed from the original text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Frontmatter<'a> {
    /// The YAML between the fences, fence lines excluded.
    pub yaml: &'a str,
    /// Everything after the closing fence line, exactly as written.
    pub body: &'a str,
}

impl<'a> Frontmatter<'a> {
    /// Splits `text`. A leading byte-order mark is skipped and fences may end in `\r\n`.
    pub(crate) fn split(text: &'a str) -> Result<Self, FrontmatterError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let after_open = strip_fence_line(text).ok_or(FrontmatterError::Missing)?;
        let mut offset = 0;
        while offset <= after_open.len() {
            let rest = &after_open[offset..];
            if let Some(body) = strip_fence_line(rest) {
                return Ok(Frontmatter { yaml: &after_open[..offset], body });
            }
            match rest.find('\n') {
                Some(newline) => offset += newline + 1,
                None => break,
            }
        }
        Err(FrontmatterError::Unclosed)
    }

    /// Joins YAML and body into one file. `yaml` gets a final newline if it lacks one; the body
    /// is written as given.
    pub(crate) fn join(yaml: &str, body: &str) -> String {
        let mut out = String::with_capacity(yaml.len() + body.len() + 9);
        out.push_str("---\n");
        out.push_str(yaml);
        if !yaml.is_empty() && !yaml.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("---\n");
        out.push_str(body);
        out
    }
}

/// If `text` starts with a line that is exactly `---`, returns what follows that line.
fn strip_fence_line(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---")?;
    if rest.is_empty() {
        return Some(rest);
    }
    rest.strip_prefix("\r\n").or_else(|| rest.strip_prefix('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_yaml_and_body() {
        let parts = Frontmatter::split("---\na: 1\n---\nthe task\n").unwrap();
        assert_eq!(parts, Frontmatter { yaml: "a: 1\n", body: "the task\n" });
    }

    #[test]
    fn body_keeps_crlf_dashes_and_missing_final_newline() {
        let body = "line one\r\n---\r\nline three";
        let text = Frontmatter::join("a: 1", body);
        assert_eq!(Frontmatter::split(&text).unwrap().body, body);
    }

    #[test]
    fn accepts_crlf_fences_and_a_byte_order_mark() {
        let parts = Frontmatter::split("\u{feff}---\r\na: 1\r\n---\r\nbody").unwrap();
        assert_eq!(parts.yaml, "a: 1\r\n");
        assert_eq!(parts.body, "body");
    }

    #[test]
    fn empty_yaml_and_empty_body() {
        let parts = Frontmatter::split("---\n---\n").unwrap();
        assert_eq!(parts, Frontmatter { yaml: "", body: "" });
        let parts = Frontmatter::split("---\n---").unwrap();
        assert_eq!(parts, Frontmatter { yaml: "", body: "" });
    }

    #[test]
    fn a_dash_line_with_trailing_text_is_not_a_fence() {
        assert_eq!(Frontmatter::split("---\na: 1\n----\n--- x\n"), Err(FrontmatterError::Unclosed));
    }

    #[test]
    fn missing_and_unclosed_fences_are_errors() {
        assert_eq!(Frontmatter::split(""), Err(FrontmatterError::Missing));
        assert_eq!(Frontmatter::split("task only"), Err(FrontmatterError::Missing));
        assert_eq!(Frontmatter::split("---x\n---\n"), Err(FrontmatterError::Missing));
        assert_eq!(Frontmatter::split("---\na: 1\n"), Err(FrontmatterError::Unclosed));
    }

    proptest! {
        #[test]
        fn any_body_survives_a_join_and_split(body in any::<String>(), yaml in "[a-z]{1,8}: [a-z0-9]{0,8}") {
            let text = Frontmatter::join(&yaml, &body);
            let parts = Frontmatter::split(&text).unwrap();
            prop_assert_eq!(parts.body, body.as_str());
        }

        #[test]
        fn bodies_built_from_tricky_lines_survive(lines in proptest::collection::vec(
            prop_oneof![Just("---".to_string()), Just("\r".to_string()), Just(String::new()), "[ -~]{0,12}"], 0..12),
            crlf in any::<bool>(), final_newline in any::<bool>()) {
            let sep = if crlf { "\r\n" } else { "\n" };
            let mut body = lines.join(sep);
            if final_newline { body.push_str(sep); }
            let text = Frontmatter::join("schema: 1", &body);
            prop_assert_eq!(Frontmatter::split(&text).unwrap().body, body.as_str());
        }
    }
}
