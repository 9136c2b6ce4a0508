//! The names a judged stop's check reported failing, as the loop keeps them (in its state and
//! in each ledger line), and what changed between two stops: fixed, still failing, new.
//!
//! Bounded: a check that reports ten thousand failures, or a name of ten thousand characters,
//! keeps at most [`MAX_NAMES`] names of at most [`MAX_NAME_CHARS`] characters. Everything that
//! shows them ([`Change`]) reads the same lists, so the agent, `loop-hook status`, the report and
//! the run's prompts say the same.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::checks::FailureDigest;
use crate::support::text::{cut, is_hidden};

/// The most names kept of one stop: each ledger line keeps them, so a long loop of a check with
/// hundreds of failures keeps at most some 16 KB of names a line.
pub(crate) const MAX_NAMES: usize = 100;
/// The longest name kept; a longer one is cut and ends in `…`.
pub(crate) const MAX_NAME_CHARS: usize = 160;

/// The failing names of one stop's check, as its runner named them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailingNames {
    /// The runner whose report was read (`pytest`, `cargo test`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) runner: Option<String>,
    /// The names, in the order the output gave them, each once.
    #[serde(default)]
    pub(crate) names: Vec<String>,
    /// How many more failures there were than names kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) more: u64,
}

// serde's `skip_serializing_if` hands the field over by reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl FailingNames {
    /// What the loop keeps of `digest`: `None` when no runner was recognised (there are no
    /// names to compare, only error lines).
    pub(crate) fn of(digest: &FailureDigest) -> Option<FailingNames> {
        let runner = digest.runner?;
        let mut names: Vec<String> = Vec::new();
        let mut more = digest.more as u64;
        for failure in &digest.failures {
            let name = shown_name(&failure.name);
            if names.len() >= MAX_NAMES {
                more += 1;
            } else if !names.contains(&name) {
                names.push(name);
            }
        }
        Some(FailingNames { runner: Some(runner.to_string()), names, more })
    }

    /// The names of a check that passed: none.
    pub(crate) fn none() -> FailingNames {
        FailingNames::default()
    }

    /// How many failures in all.
    pub(crate) fn count(&self) -> u64 {
        self.names.len() as u64 + self.more
    }
}

/// A failure's name as the loop keeps and shows it: hidden characters (escapes, direction
/// overrides) made visible as `?`, cut to [`MAX_NAME_CHARS`].
pub(crate) fn shown_name(name: &str) -> String {
    let visible: String = name.trim().chars().map(|c| if is_hidden(c) { '?' } else { c }).collect();
    cut(&visible, MAX_NAME_CHARS)
}

/// What changed between the failing names of one stop and the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// Failing before, not now.
    pub(crate) fixed: Vec<String>,
    /// Failing before and now.
    pub(crate) still: Vec<String>,
    /// Failing now, not before.
    pub(crate) new: Vec<String>,
    /// Failing before, in all (names kept or not).
    pub(crate) before: u64,
}

impl Change {
    /// From `before` to `now`. Names cut short (more than [`MAX_NAMES`]) are neither fixed nor
    /// new: only kept names are compared.
    pub(crate) fn between(before: &FailingNames, now: &FailingNames) -> Change {
        let (mut fixed, mut still) = (Vec::new(), Vec::new());
        for name in &before.names {
            if now.names.contains(name) {
                still.push(name.clone());
            } else if now.more == 0 {
                fixed.push(name.clone());
            }
        }
        let new = if before.more == 0 {
            now.names.iter().filter(|n| !before.names.contains(n)).cloned().collect()
        } else {
            Vec::new()
        };
        Change { fixed, still, new, before: before.count() }
    }

    /// Whether there is anything to say: the stop before had failures, or this one has new ones.
    pub(crate) fn is_empty(&self) -> bool {
        self.before == 0 && self.new.is_empty()
    }

    /// `2 of 5 fixed, 1 new`: the counts alone, for text that must carry no name from the output.
    pub(crate) fn counts(&self) -> String {
        let mut said = format!("{} of {} fixed", self.fixed.len(), self.before);
        if !self.new.is_empty() {
            said.push_str(&format!(", {} new", self.new.len()));
        }
        said
    }
}

/// `2 of 5 fixed (a, b); still failing: c, d, e; new: test_x`, at most a few names a list.
impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} fixed", self.fixed.len(), self.before)?;
        if !self.fixed.is_empty() {
            write!(f, " ({})", few(&self.fixed))?;
        }
        if !self.still.is_empty() {
            write!(f, "; still failing: {}", few(&self.still))?;
        }
        if !self.new.is_empty() {
            write!(f, "; new: {}", few(&self.new))?;
        }
        Ok(())
    }
}

/// The failing names of a stop, and what changed since the stop `before` it, in one line:
/// `3 failing: c, d, test_x; 2 of 4 fixed (a, b); new: test_x`, or `none failing; 5 of 5 fixed
/// (...)`. The line `loop-hook status`, the report, the run's prompts, the brief after a compaction
/// and a backlog task sent back all show.
pub(crate) fn describe(before: Option<&FailingNames>, now: &FailingNames) -> String {
    let failing = match now.count() {
        0 => "none failing".to_string(),
        n => format!("{n} failing: {}", few(&now.names)),
    };
    match before.filter(|b| b.count() > 0) {
        None => failing,
        Some(before) => {
            let change = Change::between(before, now);
            let mut said = format!("{failing}; {} of {} fixed", change.fixed.len(), change.before);
            if !change.fixed.is_empty() {
                said.push_str(&format!(" ({})", few(&change.fixed)));
            }
            if !change.new.is_empty() {
                said.push_str(&format!("; new: {}", few(&change.new)));
            }
            said
        }
    }
}

/// [`describe`] for the last judged stops of a ledger (oldest first): the last one whose check
/// was read by a runner, and the one before it. `None` when no stop recorded names (a ledger
/// of an earlier version, a check no runner's report was recognised in), or neither failed.
pub(crate) fn describe_ledger(entries: &[crate::state::LedgerEntry]) -> Option<String> {
    let mut recorded = entries
        .iter()
        .filter(|e| e.reason.is_verdict())
        .filter_map(|e| e.verify.as_ref().and_then(|v| v.failing.as_ref()))
        .rev();
    let now = recorded.next()?;
    let before = recorded.next();
    // A pass after passes has nothing to tell.
    (now.count() > 0 || before.is_some_and(|b| b.count() > 0)).then(|| describe(before, now))
}

/// Names shown in one line of a status: the first few, then how many more.
const FEW: usize = 5;

fn few(names: &[String]) -> String {
    let shown: Vec<String> = names.iter().take(FEW).map(|n| cut(n, 60)).collect();
    let mut out = shown.join(", ");
    if names.len() > FEW {
        out.push_str(&format!(" and {} more", names.len() - FEW));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::failures::Failure;

    fn names(list: &[&str]) -> FailingNames {
        FailingNames {
            runner: Some("pytest".into()),
            names: list.iter().map(ToString::to_string).collect(),
            more: 0,
        }
    }

    #[test]
    fn fixed_still_failing_and_new_are_told_apart() {
        let change = Change::between(&names(&["a", "b", "c", "d", "e"]), &names(&["c", "d", "e", "test_x"]));
        assert_eq!(change.to_string(), "2 of 5 fixed (a, b); still failing: c, d, e; new: test_x");
        assert_eq!(change.counts(), "2 of 5 fixed, 1 new");
        let all_fixed = Change::between(&names(&["a"]), &FailingNames::none());
        assert_eq!(all_fixed.to_string(), "1 of 1 fixed (a)");
        assert!(Change::between(&FailingNames::none(), &FailingNames::none()).is_empty());
    }

    #[test]
    fn names_are_kept_bounded_and_visible() {
        let long = "n".repeat(10_000);
        let mut digest = FailureDigest { runner: Some("pytest"), ..FailureDigest::default() };
        digest.failures.push(Failure { name: format!("evil\u{1b}[2J{long}"), ..Failure::default() });
        for i in 0..(MAX_NAMES + 50) {
            digest.failures.push(Failure { name: format!("t{i}"), ..Failure::default() });
        }
        digest.more = 7;
        let kept = FailingNames::of(&digest).unwrap();
        assert_eq!(kept.names.len(), MAX_NAMES);
        assert_eq!(kept.count(), MAX_NAMES as u64 + 51 + 7);
        assert!(kept.names[0].starts_with("evil?[2Jnnn") && kept.names[0].chars().count() == MAX_NAME_CHARS);
        assert!(FailingNames::of(&FailureDigest::default()).is_none(), "no runner, no names");
    }

    #[test]
    fn names_beyond_the_kept_ones_are_neither_fixed_nor_new() {
        let mut before = names(&["a", "b"]);
        before.more = 3;
        let change = Change::between(&before, &names(&["b", "z"]));
        assert_eq!((change.fixed.len(), change.still.len(), change.new.len()), (1, 1, 0));
        let mut now = names(&["b"]);
        now.more = 9;
        let change = Change::between(&names(&["a", "b"]), &now);
        assert!(change.fixed.is_empty(), "a may be among the names not kept");
    }

    #[test]
    fn a_state_without_names_reads_and_round_trips() {
        let kept: FailingNames = serde_json::from_str("{}").unwrap();
        assert_eq!(kept, FailingNames::none());
        let full = names(&["a"]);
        assert_eq!(
            serde_json::from_str::<FailingNames>(&serde_json::to_string(&full).unwrap()).unwrap(),
            full
        );
    }

    #[test]
    fn a_stop_is_described_with_what_it_fixed() {
        assert_eq!(describe(None, &names(&["a", "b"])), "2 failing: a, b");
        assert_eq!(describe(Some(&FailingNames::none()), &names(&["a"])), "1 failing: a");
        assert_eq!(
            describe(Some(&names(&["a", "b", "c"])), &names(&["c", "x"])),
            "2 failing: c, x; 2 of 3 fixed (a, b); new: x"
        );
        assert_eq!(describe(Some(&names(&["a"])), &FailingNames::none()), "none failing; 1 of 1 fixed (a)");
    }

    #[test]
    fn a_ledger_is_described_by_its_last_two_stops_with_names() {
        use crate::state::{LedgerDecision, LedgerEntry, ReasonCode, VerifyRecord, sample};
        let state = sample();
        let stop = |failing: Option<FailingNames>| LedgerEntry {
            verify: Some(VerifyRecord {
                exit_code: Some(1),
                signal: None,
                timed_out: false,
                duration_ms: 1,
                output_bytes: 1,
                output_digest: String::new(),
                tail: String::new(),
                output_ended_by: None,
                failing,
            }),
            ..LedgerEntry::new(
                &state,
                jiff::Timestamp::UNIX_EPOCH,
                LedgerDecision::Block,
                ReasonCode::VerifyFailed,
            )
        };
        let ledger = [stop(Some(names(&["a", "b"]))), stop(None), stop(Some(names(&["b"])))];
        assert_eq!(describe_ledger(&ledger).as_deref(), Some("1 failing: b; 1 of 2 fixed (a)"));
        assert_eq!(describe_ledger(&[stop(None)]), None, "a ledger of an earlier version");
        let passes = [stop(Some(FailingNames::none())), stop(Some(FailingNames::none()))];
        assert_eq!(describe_ledger(&passes), None, "passes after passes");
    }
}
