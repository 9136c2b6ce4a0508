//! The receipt a loop leaves when it ends or parks: what happened, what it cost, what changed,
//! and how to go on. It is shown at that stop, kept in the state for `status`, and written to the
//! ledger.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::checks::Counts;
use crate::host::Host;
use crate::host::usage::human_tokens;
use crate::metric::Number;
use crate::state::ReasonCode;
use crate::state::Status;
use crate::support::text::duration::human_ms;

/// How many changed files a receipt names before it only counts them.
const NAMED_FILES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Receipt {
    pub(crate) outcome: ReasonCode,
    /// `ended` or `parked`.
    pub(crate) status: Status,
    pub(crate) iterations: u32,
    pub(crate) max_iterations: u32,
    pub(crate) elapsed_ms: u64,
    pub(crate) verify_ms: u64,
    pub(crate) same_failure_streak: u32,
    pub(crate) no_change_streak: u32,
    pub(crate) harness_overrides: u32,
    /// Files whose content changed since the loop started; `None` when unknown (not a git
    /// repository, or git failed).
    pub(crate) files_changed: Option<Vec<String>>,
    /// The check's files that were still changed when the loop ended or parked without passing
    /// (`check.sh (modified)`): a loop that ran out of turns or time with a doctored check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) oracle_changed: Vec<String>,
    pub(crate) at: Timestamp,
    /// Tokens counted toward a token budget since the loop started, where the host's transcript
    /// records usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tokens: Option<u64>,
    /// A metric loop's baseline → best, keeps, discards and best checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<MetricSummary>,
    /// Stops the agent forged by running the Stop hook from a tool call: recorded, not judged.
    #[serde(default, skip_serializing_if = "crate::support::is_zero")]
    pub(crate) forged_stops: u32,
    /// What the test runners' summaries said at the last verify run, all suites together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tests: Option<Counts>,
    /// The most tests that ran at any verify run of the loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) most_tests_ran: Option<u64>,
    /// Skip markers added since the loop started, as `path: marker`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) skip_markers: Vec<String>,
    /// Why the agent gave up, in its words, when it ended its turn with `<loop-abort>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) abort_reason: Option<String>,
    /// What the reviewer (`--review`) said over the loop: its vetoes, or its last findings when
    /// its vetoes parked the loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) review: Option<String>,
    /// A plan loop's stories: done or not, and the stops each took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plan: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
/// What a metric loop's receipt says about its number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetricSummary {
    pub baseline: Number,
    pub best: Number,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub keeps: u32,
    pub discards: u32,
    /// The ref of the best state (the baseline's when nothing was kept).
    pub best_checkpoint: String,
}

impl Receipt {
    /// The receipt's lines, under a headline, with `host`'s words for going on.
    pub(crate) fn render(&self, headline: &str, host: Host) -> String {
        let mut out = format!("{headline}\n  receipt: {}", self.costs());
        out.push_str(&self.course());
        out.push_str(&self.changes());
        out.push_str(&self.how_to_go_on(host));
        out
    }

    /// `ended · 3/30 iterations · 2m elapsed · 40 s in verify`, and the tokens where known.
    fn costs(&self) -> String {
        let mut out = format!(
            "{} · {}/{} iterations · {} elapsed · {} in verify",
            self.outcome,
            self.iterations,
            self.max_iterations,
            human_ms(self.elapsed_ms),
            human_ms(self.verify_ms)
        );
        if let Some(tokens) = self.tokens {
            out.push_str(&format!(" · {} tokens", human_tokens(tokens)));
        }
        out
    }

    /// How the loop went: its streaks, its metric, the host's overrides, the agent's reason to
    /// give up, and the tests.
    fn course(&self) -> String {
        let mut out = String::new();
        if self.same_failure_streak > 1 || self.no_change_streak > 0 {
            out.push_str(&format!(
                "\n  streaks: same failure ×{} · unchanged tree ×{}",
                self.same_failure_streak, self.no_change_streak
            ));
        }
        if let Some(m) = &self.metric {
            let unit = m.name.as_deref().map(|n| format!(" {n}")).unwrap_or_default();
            out.push_str(&format!(
                "\n  metric: {} → {}{unit} (baseline → best) · {} kept · {} discarded · best checkpoint {}",
                m.baseline, m.best, m.keeps, m.discards, m.best_checkpoint
            ));
        }
        if self.harness_overrides > 0 {
            out.push_str(&format!("\n  the host overrode {} block(s)", self.harness_overrides));
        }
        if let Some(reason) = &self.abort_reason {
            out.push_str(&format!("\n  the agent's reason: {reason}"));
        }
        if let Some(plan) = &self.plan {
            out.push_str(&format!("\n  stories: {plan}"));
        }
        if let Some(review) = &self.review {
            out.push_str(&format!("\n  review: {review}"));
        }
        if let Some(tests) = self.tests {
            out.push_str(&format!("\n  tests: {tests}"));
            if let Some(most) = self.most_tests_ran.filter(|most| *most > tests.ran()) {
                out.push_str(&format!(" · {most} ran at most"));
            }
        }
        out
    }

    /// What changed: skip markers, files, forged stops, and the check itself.
    fn changes(&self) -> String {
        let mut out = String::new();
        if !self.skip_markers.is_empty() {
            out.push_str(&format!("\n  skip markers added: {}", first_few(&self.skip_markers)));
        }
        match &self.files_changed {
            Some(files) if files.is_empty() => out.push_str("\n  changed: no files"),
            Some(files) => out.push_str(&format!(
                "\n  changed: {} file{}: {}",
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                first_few(files)
            )),
            None => {}
        }
        if self.forged_stops > 0 {
            out.push_str(&format!(
                "\n  forged stops: {}: the agent ran the Stop hook itself from a tool call; none was judged \
                 or used an iteration (ledger: forged_stop)",
                self.forged_stops
            ));
        }
        if !self.oracle_changed.is_empty() {
            out.push_str(&format!(
                "\n  check modified: {}: changed during the loop and never restored, so the check that ran \
                 was not the one you gave",
                self.oracle_changed.join(", ")
            ));
        }
        out
    }

    /// How to go on with a loop that can go on, in `host`'s words; empty for one that is done.
    fn how_to_go_on(&self, host: Host) -> String {
        if self.outcome == ReasonCode::TokenBudget {
            format!(
                "\n  go on: {} (add --more-tokens 500k for a larger token budget)",
                host.commands().resume
            )
        } else if self.status == Status::Parked
            || matches!(self.outcome, ReasonCode::CapReached | ReasonCode::Cancelled)
        {
            format!(
                "\n  go on: {} (add --more N for more iterations, --more-time 30m for more time)",
                host.commands().resume
            )
        } else {
            String::new()
        }
    }
}

/// The first [`NAMED_FILES`] names, and how many more there are.
fn first_few(names: &[String]) -> String {
    let named: Vec<&str> = names.iter().take(NAMED_FILES).map(String::as_str).collect();
    let more = names.len().saturating_sub(NAMED_FILES);
    format!("{}{}", named.join(", "), if more > 0 { format!(", and {more} more") } else { String::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;

    #[test]
    fn renders_costs_streaks_files_and_how_to_go_on() {
        let mut state = sample();
        state.meta.iteration = 8;
        state.meta.status = Status::Parked;
        state.meta.verify_total_ms = 12_300;
        state.meta.streaks.same_failure = 8;
        let files = (0..10).map(|i| format!("src/f{i}.rs")).collect();
        let now: Timestamp = "2026-11-22T03:12:03Z".parse().unwrap();
        let text = state
            .receipt(ReasonCode::SameFailures, now, Some(files))
            .render("for-loop: parked.", Host::ClaudeCode);
        assert!(
            text.contains("receipt: same_failures · 8/30 iterations · 12m 03s elapsed · 12.3 s in verify"),
            "{text}"
        );
        assert!(text.contains("same failure ×8"), "{text}");
        assert!(text.contains("changed: 10 files: src/f0.rs, "), "{text}");
        assert!(text.contains("and 2 more"), "{text}");
        assert!(text.contains("/for-loop:resume"), "{text}");
    }

    #[test]
    fn a_verified_loop_has_no_resume_line() {
        let mut state = sample();
        state.meta.status = Status::Ended;
        let text = state
            .receipt(ReasonCode::Verified, state.meta.started_at, Some(vec![]))
            .render("done", Host::ClaudeCode);
        assert!(text.contains("changed: no files"), "{text}");
        assert!(!text.contains("resume"), "{text}");
    }
}
