//! Noticing a loop that is stuck: the same failure over and over, or turns that change nothing.
//!
//! A failure's fingerprint is its exit code plus its output with the noise that differs between
//! identical runs taken out: numbers (timestamps, durations, PIDs, line numbers, counters), long
//! hex ids and temporary paths. Two runs that fail the same way then have the same fingerprint.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::checks::verify::VerifyOutcome;
use crate::support::digest::hex;

/// Escalation thresholds: a note at the first, "three hypotheses" at the second, "go back to
/// the requirement" at the third.
pub(crate) const DEFAULT_ESCALATION: [u32; 3] = [2, 4, 6];
pub(crate) const DEFAULT_MAX_SAME_FAILURES: u32 = 8;
/// Turns in a row without tool use after which the re-injection warns about the host's cap.
const TOOLLESS_WARNING: u32 = 3;

/// Counters carried from stop to stop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Streaks {
    /// Consecutive failing stops with the same failure fingerprint.
    #[serde(default)]
    pub same_failure: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    /// Consecutive stops at which the working tree was the same as at the stop before.
    #[serde(default)]
    pub no_change: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tree: Option<String>,
    /// Consecutive turns that used no tool, when the host's transcript tells.
    #[serde(default)]
    pub toolless: u32,
    /// The reviewer's vetoes since the loop started or was resumed, without an approval.
    #[serde(default, skip_serializing_if = "crate::support::is_zero")]
    pub vetoes: u32,
}

impl Streaks {
    /// The counters after a stop. `tree` is the working tree's fingerprint (`None`: unknown), and
    /// `tool_uses` the number of tool calls in the turn (`None`: unknown).
    pub(crate) fn after(
        &self,
        verify: Option<&VerifyOutcome>,
        tree: Option<&str>,
        tool_uses: Option<u32>,
    ) -> Streaks {
        let mut next = self.clone();
        if let Some(outcome) = verify.filter(|o| !o.passed()) {
            let fingerprint = failure_fingerprint(outcome);
            next.same_failure = if self.last_failure.as_deref() == Some(fingerprint.as_str()) {
                self.same_failure + 1
            } else {
                1
            };
            next.last_failure = Some(fingerprint);
        } else {
            next.same_failure = 0;
            next.last_failure = None;
        }
        if let Some(tree) = tree {
            next.no_change = if self.last_tree.as_deref() == Some(tree) { self.no_change + 1 } else { 0 };
            next.last_tree = Some(tree.to_string());
        }
        if let Some(uses) = tool_uses {
            next.toolless = if uses == 0 { self.toolless + 1 } else { 0 };
        }
        next
    }

    /// Words for the re-injection, driven by the streaks; empty when there is nothing to say.
    pub(crate) fn advice(&self, escalation: &[u32]) -> String {
        let at = |i: usize| escalation.get(i).copied().unwrap_or(u32::MAX);
        let mut notes = Vec::new();
        let n = self.same_failure;
        if n >= at(2) {
            notes.push(format!(
                "This is the same failure {n} times in a row: your approach is not working. Go back to \
                 the requirement, re-read the failing check and the code it exercises from scratch, and \
                 take a different approach."
            ));
        } else if n >= at(1) {
            notes.push(format!(
                "This is the same failure {n} times in a row. Before changing anything, list three \
                 different hypotheses for its cause, and test the most likely one first."
            ));
        } else if n >= at(0) {
            notes.push(format!("Note: the same failure as last time ({n} in a row)."));
        }
        if self.no_change >= 2 {
            notes.push(format!(
                "The working tree has not changed for {} turns: make a change that addresses the failure.",
                self.no_change
            ));
        }
        if self.toolless >= TOOLLESS_WARNING {
            notes.push(format!(
                "Your last {} turns used no tools. Run the verify command and make changes with your \
                 tools: the host ends a loop of several blocked turns without tool use.",
                self.toolless
            ));
        }
        notes.join("\n")
    }
}

/// `exit code` + normalised output, hashed.
pub(crate) fn failure_fingerprint(outcome: &VerifyOutcome) -> String {
    let mut hasher = Sha256::new();
    hasher.update(outcome.describe().as_bytes());
    hasher.update([0]);
    hasher.update(normalize(&outcome.output.excerpt(usize::MAX)).as_bytes());
    hex(&hasher.finalize()[..8])
}

/// Output with run-to-run noise replaced: digit runs and hex ids by `#`, temporary paths by
/// `<tmp>`.
pub(crate) fn normalize(output: &str) -> String {
    let mut out = String::with_capacity(output.len());
    for word in output.split_inclusive(char::is_whitespace) {
        let (token, space) = word.split_at(word.trim_end().len());
        if token.starts_with("/tmp/") || token.starts_with("/var/folders/") || token.contains("/tmp/") {
            out.push_str("<tmp>");
        } else {
            normalize_token(token, &mut out);
        }
        out.push_str(space);
    }
    out
}

fn normalize_token(token: &str, out: &mut String) {
    let chars: Vec<char> = token.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        while i < chars.len() && chars[i].is_ascii_hexdigit() {
            i += 1;
        }
        let run = &chars[start..i];
        let has_digit = run.iter().any(char::is_ascii_digit);
        let all_digits = run.iter().all(char::is_ascii_digit);
        if !run.is_empty() && has_digit && (all_digits || run.len() >= 7) {
            out.push('#');
        } else {
            out.extend(run);
        }
        if i < chars.len() && !chars[i].is_ascii_hexdigit() {
            out.push(chars[i]);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::verify::Captured;
    use std::time::Duration;

    fn failed(code: i32, output: &str) -> VerifyOutcome {
        let mut captured = Captured::default();
        captured.push(output.as_bytes());
        VerifyOutcome {
            exit_code: Some(code),
            signal: None,
            timed_out: false,
            untrusted: None,
            duration: Duration::from_secs(1),
            output: captured,
        }
    }

    #[test]
    fn normalises_run_to_run_noise() {
        let a = "2026-11-22T03:00:01Z test login failed in 0.42s (pid 4242) at /tmp/x1y2/foo.rs:12 id=deadbeef01\n";
        let b =
            "2026-11-22T04:10:59Z test login failed in 1.07s (pid 977) at /tmp/abc/foo.rs:13 id=cafebabe99\n";
        assert_eq!(normalize(a), normalize(b));
        assert_ne!(normalize("test login failed"), normalize("test logout failed"));
        assert_eq!(normalize("face cafe dead"), "face cafe dead", "short hex-looking words are words");
    }

    #[test]
    fn same_failures_count_up_and_reset() {
        let one = failed(1, "FAILED: login (0.3s)");
        let same = failed(1, "FAILED: login (0.5s)");
        let other = failed(1, "FAILED: logout");
        let s = Streaks::default().after(Some(&one), None, None);
        assert_eq!(s.same_failure, 1);
        let s = s.after(Some(&same), None, None);
        assert_eq!(s.same_failure, 2);
        let s = s.after(Some(&other), None, None);
        assert_eq!(s.same_failure, 1);
        let passed = failed(0, "");
        assert_eq!(s.after(Some(&passed), None, None).same_failure, 0);
        assert_ne!(failure_fingerprint(&failed(1, "x")), failure_fingerprint(&failed(2, "x")));
    }

    #[test]
    fn unchanged_trees_and_toolless_turns_count_up() {
        let s = Streaks::default().after(None, Some("t1"), Some(0));
        assert_eq!((s.no_change, s.toolless), (0, 1));
        let s = s.after(None, Some("t1"), Some(0));
        assert_eq!((s.no_change, s.toolless), (1, 2));
        let s = s.after(None, Some("t2"), Some(3));
        assert_eq!((s.no_change, s.toolless), (0, 0));
        let s = s.after(None, None, None);
        assert_eq!((s.no_change, s.toolless), (0, 0), "unknown leaves the counters alone");
    }

    #[test]
    fn advice_escalates_with_the_evidence() {
        let at = |n| Streaks { same_failure: n, ..Streaks::default() }.advice(&DEFAULT_ESCALATION);
        assert_eq!(at(1), "");
        assert!(at(2).starts_with("Note: the same failure"));
        assert!(at(4).contains("three different hypotheses"));
        assert!(at(6).contains("Go back to the requirement"));
        let toolless = Streaks { toolless: 3, ..Streaks::default() }.advice(&DEFAULT_ESCALATION);
        assert!(toolless.contains("used no tools"));
    }
}
