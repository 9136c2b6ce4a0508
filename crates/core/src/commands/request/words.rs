//! A command's words read through the option table: the one reader of the options typed after
//! `/for-loop:resume`, `/for-loop:rollback`, `/for-loop:report` and `/for-loop:strict`.
//!
//! The words come split (by whitespace, or by a shell's rules for a report's file name); each
//! that starts with a dash is an option of the command's [`Group`] or refused naming the nearest
//! one, and its value is its `=value` or the next word, unless that word is one of the command's
//! options (`--out --open` forgot the file). A mistyped option is never read as a value or a
//! number: the command would act on something the user did not ask for.

use std::fmt;

use super::flag_spec::{Flag, Group, Value};
use crate::support::text::nearest::nearest;

/// One word of a command's text, or one option and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Given {
    /// An option of the command; a switch's value is empty.
    Option(Flag, String),
    /// A word that is no option (a checkpoint's number).
    Word(String),
}

/// Why a command's words do not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OptionError {
    /// No option of the command is spelt so; `nearest` is the one it probably meant.
    Unknown {
        given: String,
        nearest: Option<&'static str>,
    },
    MissingValue {
        flag: Flag,
    },
    /// A switch given a value (`--yes=no`), refused rather than read as on or off.
    TakesNoValue {
        flag: Flag,
    },
}

impl OptionError {
    /// The refusal, for a command whose options are called `what` (`a resume option`) and are
    /// listed by `usage`.
    pub(crate) fn describe(&self, what: &str, usage: &str) -> String {
        match self {
            OptionError::Unknown { given, nearest: Some(nearest) } => {
                format!("`{given}` is not {what}: did you mean {nearest}? {usage}")
            }
            OptionError::Unknown { given, nearest: None } => format!("`{given}` is not {what}: {usage}"),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionError::Unknown { given, nearest: Some(nearest) } => {
                write!(f, "`{given}` is not an option: did you mean {nearest}?")
            }
            OptionError::Unknown { given, nearest: None } => write!(f, "`{given}` is not an option"),
            OptionError::MissingValue { flag } => write!(f, "{flag} needs {}", flag.spec().hint()),
            OptionError::TakesNoValue { flag } => write!(f, "{flag} takes no value: write just {flag}"),
        }
    }
}

/// Whether `word` is written as an option: a dash, then a letter (`-5` and `-` are words).
fn is_option_word(word: &str) -> bool {
    word.strip_prefix('-').is_some_and(|rest| rest.starts_with(|c: char| c == '-' || c.is_alphabetic()))
}

/// Reads `words` as the options of `group` and the words between them.
pub(crate) fn read(group: Group, words: impl IntoIterator<Item = String>) -> Result<Vec<Given>, OptionError> {
    let mut words = words.into_iter().peekable();
    let mut given = Vec::new();
    while let Some(word) = words.next() {
        if !is_option_word(&word) {
            given.push(Given::Word(word));
            continue;
        }
        let (name, inline) = match word.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_string())),
            _ => (word.as_str(), None),
        };
        let Some(flag) = Flag::named_in(group, name) else {
            let names = Flag::all_in(group).map(Flag::name);
            return Err(OptionError::Unknown { given: name.to_string(), nearest: nearest(name, names) });
        };
        let value = match (flag.spec().value, inline) {
            (Value::Switch, Some(_)) => return Err(OptionError::TakesNoValue { flag }),
            (Value::Switch, None) => String::new(),
            (_, Some(value)) => value,
            (_, None) => words
                .next_if(|next| !(is_option_word(next) && Flag::named_in(group, option_name(next)).is_some()))
                .ok_or(OptionError::MissingValue { flag })?,
        };
        given.push(Given::Option(flag, value));
    }
    Ok(given)
}

/// `--out` of `--out=x`.
fn option_name(word: &str) -> &str {
    word.split_once('=').map_or(word, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Result<Vec<Given>, OptionError> {
        read(Group::REPORT.and(Group::ROLLBACK), text.split_whitespace().map(str::to_string))
    }

    #[test]
    fn options_values_and_words_come_out_typed() {
        assert_eq!(words("").unwrap(), []);
        assert_eq!(
            words("3 --yes --out a.html -y --out=b c").unwrap(),
            [
                Given::Word("3".into()),
                Given::Option(Flag::Yes, String::new()),
                Given::Option(Flag::Out, "a.html".into()),
                Given::Option(Flag::Yes, String::new()),
                Given::Option(Flag::Out, "b".into()),
                Given::Word("c".into()),
            ]
        );
        assert_eq!(words("-5 -").unwrap(), [Given::Word("-5".into()), Given::Word("-".into())]);
        assert_eq!(words("--out -x.html").unwrap(), [Given::Option(Flag::Out, "-x.html".into())]);
    }

    #[test]
    fn an_unknown_option_names_the_nearest_one_of_its_command() {
        assert_eq!(words("--ye"), Err(OptionError::Unknown { given: "--ye".into(), nearest: Some("--yes") }));
        assert_eq!(
            words("--Open"),
            Err(OptionError::Unknown { given: "--Open".into(), nearest: Some("--open") })
        );
        assert_eq!(words("--pdf=x"), Err(OptionError::Unknown { given: "--pdf".into(), nearest: None }));
        // `--more` is an option of resume, not of these commands.
        let more = words("--more 3").unwrap_err();
        assert!(matches!(more, OptionError::Unknown { nearest: None, .. }), "{more:?}");
        assert_eq!(
            words("--ye").unwrap_err().describe("a rollback option", "give N."),
            "`--ye` is not a rollback option: did you mean --yes? give N."
        );
    }

    #[test]
    fn a_missing_value_or_a_value_for_a_switch_is_refused_saying_what_to_write() {
        for text in ["--out", "--out --open", "--out=--x --out"] {
            assert_eq!(words(text), Err(OptionError::MissingValue { flag: Flag::Out }), "{text}");
        }
        assert_eq!(
            OptionError::MissingValue { flag: Flag::Out }.to_string(),
            "--out needs a file name, e.g. --out loop.html"
        );
        assert_eq!(words("--yes=no"), Err(OptionError::TakesNoValue { flag: Flag::Yes }));
        assert_eq!(
            OptionError::TakesNoValue { flag: Flag::Open }.to_string(),
            "--open takes no value: write just --open"
        );
    }

    #[test]
    fn hostile_and_huge_words_are_words_or_refused_never_options_of_another_command() {
        let huge = format!("--{}", "x".repeat(100_000));
        assert!(matches!(words(&huge), Err(OptionError::Unknown { .. })));
        assert_eq!(
            words("$(rm -rf /)").unwrap_err(),
            OptionError::Unknown { given: "-rf".into(), nearest: None }
        );
        assert_eq!(words("\u{200b}").unwrap(), [Given::Word("\u{200b}".into())]);
    }
}
