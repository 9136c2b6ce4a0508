//! Each flag's value checked and turned into what the loop keeps. A number or a duration is held
//! to the limits of its row in the flag table, so a limit is written once.

use super::RequestError;
use super::flag_spec::{Flag, Value, short_duration};
use crate::checks::Protect;
use crate::support::text::duration::parse_seconds;

pub(super) fn bad_value(flag: Flag, value: &str, why: String) -> RequestError {
    RequestError::BadValue { flag, value: value.into(), why }
}

pub(super) fn command(flag: Flag, value: &str) -> Result<String, RequestError> {
    if value.trim().is_empty() {
        return Err(RequestError::MissingValue { flag });
    }
    Ok(value.to_string())
}

pub(super) fn promise(value: &str) -> Result<String, RequestError> {
    let normal = crate::verdict::promise::normalize(value);
    if normal.is_empty() {
        return Err(RequestError::MissingValue { flag: Flag::CompletionPromise });
    }
    if normal.contains("<promise>") || normal.contains("</promise>") {
        let why = "give only the phrase; for-loop adds the <promise> tags".into();
        return Err(bad_value(Flag::CompletionPromise, value, why));
    }
    Ok(normal)
}

/// A whole number from 1 to the most the flag's row allows.
pub(super) fn count(flag: Flag, value: &str) -> Result<u32, RequestError> {
    let Value::Count { most } = flag.spec().value else {
        unreachable!("{flag} is not counted: its row in the flag table says so")
    };
    let bad = |why: String| bad_value(flag, value, why);
    match value.parse::<u64>() {
        Ok(0) => Err(bad("it must be at least 1 (there is no unlimited mode)".into())),
        Ok(n) => {
            u32::try_from(n).ok().filter(|n| *n <= most).ok_or_else(|| bad(format!("the most is {most}")))
        }
        Err(_) => Err(bad(format!("give a whole number from 1 to {most}"))),
    }
}

/// A duration in seconds, from 1 to the most the flag's row allows.
pub(super) fn seconds(flag: Flag, value: &str) -> Result<u64, RequestError> {
    let Value::Duration { most } = flag.spec().value else {
        unreachable!("{flag} is not a duration: its row in the flag table says so")
    };
    let bad = |why: String| bad_value(flag, value, why);
    match parse_seconds(value) {
        Err(why) => Err(bad(why)),
        Ok(0) => Err(bad("it must be at least 1 second".into())),
        Ok(secs) if secs > most => Err(bad(format!("the most is {most} seconds ({})", short_duration(most)))),
        Ok(secs) => Ok(secs),
    }
}

/// A whole number of tokens within the bounds of the flag's row.
pub(super) fn budget(flag: Flag, value: &str) -> Result<u32, RequestError> {
    let Value::Budget { least, most } = flag.spec().value else {
        unreachable!("{flag} is not a budget: its row in the flag table says so")
    };
    let bad = |why: String| bad_value(flag, value, why);
    let digits = value.trim();
    // More digits than a u64 holds is still a number, only too large.
    let parsed = digits.parse::<u64>().or_else(|e| {
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) { Ok(u64::MAX) } else { Err(e) }
    });
    match parsed {
        Ok(n) if n < u64::from(least) => Err(bad(format!(
            "it must be at least {least}: less leaves no room for the failures and the output"
        ))),
        Ok(n) => u32::try_from(n).ok().filter(|n| *n <= most).ok_or_else(|| {
            bad(format!("the most is {most}: the hosts cut a hook's prompt at 10,000 characters"))
        }),
        Err(_) => Err(bad(format!("give a whole number of tokens from {least} to {most}"))),
    }
}

pub(super) fn tokens(flag: Flag, value: &str) -> Result<u64, RequestError> {
    crate::host::usage::parse_tokens(value).map_err(|why| bad_value(flag, value, why))
}

pub(super) fn rising(flag: Flag, value: &str) -> Result<Vec<u32>, RequestError> {
    let bad = || bad_value(flag, value, "give three rising counts of repeated failures, e.g. 2,4,6".into());
    let counts: Vec<u32> =
        value.split(',').map(|n| n.trim().parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
    if counts.len() != 3 || counts[0] == 0 || counts.windows(2).any(|w| w[0] >= w[1]) {
        return Err(bad());
    }
    Ok(counts)
}

pub(super) fn protect(value: &str) -> Result<String, RequestError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(RequestError::MissingValue { flag: Flag::Protect });
    }
    Protect::check(trimmed).map_err(|why| bad_value(Flag::Protect, value, why))?;
    Ok(trimmed.to_string())
}

/// The `--scope` globs, each checked as a story's are ([`crate::checks::scope::check_glob`]).
pub(super) fn scope(globs: &[String]) -> Result<Vec<String>, RequestError> {
    let most = crate::checks::MAX_GLOBS;
    if globs.len() > most {
        return Err(bad_value(Flag::Scope, &globs[most], format!("the most is {most} --scope globs")));
    }
    globs
        .iter()
        .map(|glob| {
            let trimmed = glob.trim();
            if trimmed.is_empty() {
                return Err(RequestError::MissingValue { flag: Flag::Scope });
            }
            crate::checks::scope::check_glob(trimmed).map_err(|why| bad_value(Flag::Scope, glob, why))?;
            Ok(trimmed.to_string())
        })
        .collect()
}
