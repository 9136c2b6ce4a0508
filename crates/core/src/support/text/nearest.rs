//! The option a mistyped one was probably meant to be, so a refusal can name it.
//!
//! The edit distance is `strsim`'s: the string-distance crate clap's suggestions use, small,
//! without dependencies, and counting in characters as the names are typed.

/// The candidate `given` is closest to: the same name once dashes, case and underscores are
/// set aside (`-verify`, `--Max_Iterations`), else one a typo away (one edit for a short name,
/// two from six letters on), or one that `given` starts (`--max-iter`) or starts with
/// (`--output` for `--out`). `None` when nothing is close: a suggestion that is far off misleads
/// more than none.
pub(crate) fn nearest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let typed = normal(given);
    if typed.len() < 2 {
        return None;
    }
    // Two edits turn `model` into `more`: short names allow one.
    let most = if typed.chars().count() >= 6 { 2 } else { 1 };
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let name = normal(candidate);
        if name == typed {
            return Some(candidate);
        }
        let distance = levenshtein(&typed, &name);
        let prefix =
            typed.len() >= 3 && name.starts_with(&typed) || name.len() >= 3 && typed.starts_with(&name);
        if (distance <= most || prefix) && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// The name without its leading dashes (an autocorrected `—` too), lower case, `_` as `-`.
fn normal(name: &str) -> String {
    name.trim_start_matches(['-', '\u{2013}', '\u{2014}']).to_lowercase().replace('_', "-")
}

/// The number of single-character edits (insertions, deletions, substitutions) that turn `a`
/// into `b`, counted in characters.
pub(crate) fn levenshtein(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 5] = ["--max-iterations", "--max-time", "--verify", "--json", "--session"];

    #[test]
    fn typos_prefixes_and_other_spellings_find_the_option() {
        for (given, expected) in [
            ("--max-iteration", "--max-iterations"),
            ("--max-iter", "--max-iterations"),
            ("--max-tim", "--max-time"),
            ("--verfy", "--verify"),
            ("-verify", "--verify"),
            ("\u{2014}verify", "--verify"),
            ("--MAX_ITERATIONS", "--max-iterations"),
            ("--jsn", "--json"),
            ("--sesion", "--session"),
            ("--verfiy", "--verify"),
            ("--verify-command", "--verify"),
        ] {
            assert_eq!(nearest(given, NAMES), Some(expected), "{given}");
        }
    }

    #[test]
    fn the_edit_distance_counts_characters_not_bytes() {
        assert_eq!(levenshtein("verify", "verify"), 0);
        assert_eq!(levenshtein("verfy", "verify"), 1);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("\u{2014}x", "-x"), 1);
        assert_eq!(levenshtein("", "abc"), 3);
    }

    #[test]
    fn nothing_close_suggests_nothing() {
        for given in ["--frobnicate", "--model", "-x", "--", "--output-format"] {
            assert_eq!(nearest(given, NAMES), None, "{given}");
        }
    }
}
