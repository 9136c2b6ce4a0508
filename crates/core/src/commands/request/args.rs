//! The loop flags among a command line's words (`loop-hook run`), read through the flag table as
//! a shell hands them over: `--name value` or `--name=value`, each value one word, taken as it is.
//!
//! Here the shell has already split and unquoted the words, so nothing is unquoted again and the
//! task is the command's positional words, joined by spaces ([`super::LoopRequest::from_args`]).

use std::ffi::{OsStr, OsString};

use super::{Flag, LoopFlags, RequestError};

impl LoopFlags {
    /// Reads the loop flag `name` (`--verify`, as typed) and its value from `parser`, which has
    /// just returned it. `Ok(false)`: `name` is no loop flag, and nothing was read.
    ///
    /// A value is the `=value` or the next word, unless that word is an option (`is_option`):
    /// `--verify --max-iterations 3` forgot the command.
    pub(crate) fn read(
        &mut self,
        name: &str,
        parser: &mut lexopt::Parser,
        is_option: impl Fn(&str) -> bool,
    ) -> Result<bool, RequestError> {
        let Some(flag) = Flag::named(name) else {
            return Ok(false);
        };
        self.refuse_twice(flag)?;
        let attached = parser.optional_value();
        let value = match (flag.is_switch(), attached) {
            (true, Some(value)) => {
                return Err(RequestError::BadValue {
                    flag,
                    value: format!("{name}={}", value.to_string_lossy()),
                    why: format!("it takes no value: write just {flag}"),
                });
            }
            (true, None) => String::new(),
            (false, Some(value)) => text(flag, value)?,
            (false, None) => {
                let next = parser
                    .try_raw_args()
                    .and_then(|mut rest| rest.next_if(|word: &OsStr| !word.to_str().is_some_and(&is_option)));
                text(flag, next.ok_or(RequestError::MissingValue { flag })?)?
            }
        };
        self.add(flag, value)?;
        Ok(true)
    }
}

/// A value as text; a word that is not UTF-8 cannot be a command or a path the loop keeps.
fn text(flag: Flag, value: OsString) -> Result<String, RequestError> {
    value.into_string().map_err(|value| RequestError::BadValue {
        flag,
        value: value.to_string_lossy().into_owned(),
        why: "it is not UTF-8 text".into(),
    })
}
