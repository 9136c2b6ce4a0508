//! The re-injected prompt: the one shape every kind of stop fills in (verify, metric, plan,
//! review, scope), and the budget it keeps.
//!
//! The prompt is written as a plain task, not as a system notice (hosts warn that text framed as
//! out-of-band commands can trip the model's prompt-injection defences), and it stays under the
//! hosts' 10,000-character cap by trimming the check's output, never the task.

use std::fmt;

use crate::checks::VerifyOutcome;
use crate::state::Change;
use crate::support::text::fence_for;
use crate::verdict::facts::LoopFiles;
use crate::verdict::message::failures;

/// The whole re-injected prompt stays below this many characters, whatever the budget asked.
pub(crate) const REASON_BUDGET: usize = 9_500;
/// The token estimate the budget is counted in: characters per token, on the low side for
/// test output (names, paths and numbers tokenize densely), so the estimate errs high.
pub(crate) const CHARS_PER_TOKEN: usize = 3;
/// The re-injection's budget in tokens when `--feedback-tokens` is not given.
pub(crate) const DEFAULT_FEEDBACK_TOKENS: u32 = 3_000;
/// The least `--feedback-tokens` takes: room for the task's reference, the verdict, a few
/// failures and a little output.
pub(crate) const MIN_FEEDBACK_TOKENS: u32 = 500;
/// The most `--feedback-tokens` takes: the hosts' cap on a hook's reason, in tokens.
#[allow(clippy::cast_possible_truncation)]
pub(crate) const MAX_FEEDBACK_TOKENS: u32 = (REASON_BUDGET / CHARS_PER_TOKEN) as u32;

/// The re-injection's budget in characters for a budget of `tokens` (`None`: the default),
/// never above [`REASON_BUDGET`].
pub(crate) fn budget_chars(tokens: Option<u32>) -> usize {
    let tokens = tokens.unwrap_or(DEFAULT_FEEDBACK_TOKENS).max(MIN_FEEDBACK_TOKENS) as usize;
    tokens.saturating_mul(CHARS_PER_TOKEN).min(REASON_BUDGET)
}

/// The check's output always gets at least this much room; a task that leaves less is referenced.
const MIN_OUTPUT_ROOM: usize = 1_500;
/// Room kept back for the fence around the output.
const FENCE_ROOM: usize = 40;

/// The prompt that keeps the agent working, in its parts, in the order the model reads them.
#[derive(Debug)]
pub(crate) struct Reinjection<'a> {
    /// The task as the user gave it: repeated when it fits beside the rest, else referenced.
    pub(crate) task: &'a str,
    /// Where a task too long to repeat can be read.
    pub(crate) files: &'a LoopFiles,
    /// The iteration and what ends the loop, below a rule under the task.
    pub(crate) headline: String,
    /// What the agent hears before this stop's verdict, each a paragraph: what went wrong around
    /// the loop, a changed check, a story done or broken, the tests behind the check.
    pub(crate) notices: Vec<String>,
    /// What this stop's check said; empty when a notice says it all.
    pub(crate) failed: String,
    /// The failed check's run, whose failures and output follow, cut to the room the rest
    /// leaves.
    pub(crate) output: Option<&'a VerifyOutcome>,
    /// What changed in the failing names since the last judged stop, when both were read.
    pub(crate) change: Option<Change>,
    /// The whole prompt's budget in characters ([`budget_chars`]).
    pub(crate) budget: usize,
    /// What to do now and the way out: the last paragraphs.
    pub(crate) rules: String,
}

/// What one kind of stop says in the prompt: what its check said, and what to do about it. The
/// verify, review and scope words each fill one in; the loop's own words add the streaks'
/// advice and the way out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Finding {
    /// What the check said, for the status under the notices; empty when a notice says it all.
    pub(crate) said: String,
    /// What to do about it, ahead of the way out; empty when the way out is all there is.
    pub(crate) advice: String,
}

impl Finding {
    pub(crate) fn new(said: impl Into<String>, advice: impl Into<String>) -> Finding {
        Finding { said: said.into(), advice: advice.into() }
    }

    /// A finding with nothing to add to the way out.
    pub(crate) fn said(said: impl Into<String>) -> Finding {
        Finding { said: said.into(), advice: String::new() }
    }
}

impl Reinjection<'_> {
    /// The task as the user gave it, or where to read it when repeating it would leave the
    /// check's output less than its minimum room beside the `rest` of the prompt.
    fn task_or_reference(&self, rest: usize) -> String {
        let task_room = self.budget.min(REASON_BUDGET).saturating_sub(rest + MIN_OUTPUT_ROOM);
        let task_chars = self.task.chars().count();
        if task_chars <= task_room {
            self.task.trim_end().to_string()
        } else {
            format!(
                "Your task is {task_chars} characters long, too long to repeat here. Read it in full, \
                 below the settings, in {}.",
                self.files.state
            )
        }
    }
}

impl fmt::Display for Reinjection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut status = self.headline.clone();
        for notice in &self.notices {
            status.push_str(notice);
        }
        status.push_str(&self.failed);
        let (status_chars, rules_chars) = (status.chars().count(), self.rules.chars().count());
        let task = self.task_or_reference(status_chars + rules_chars);
        f.write_str(&task)?;
        f.write_str(&status)?;
        if let Some(outcome) = self.output {
            let used = task.chars().count() + status_chars + rules_chars + FENCE_ROOM;
            let room = self.budget.min(REASON_BUDGET).saturating_sub(used);
            f.write_str(&output_block(outcome, self.change.as_ref(), room))?;
        }
        f.write_str(&self.rules)
    }
}

/// What the check's output reports failing ([`failures::block`]), then the output itself, its
/// start and end, all within `room` characters: the failures take up to three quarters, the
/// output the rest and whatever the failures leave.
fn output_block(outcome: &VerifyOutcome, change: Option<&Change>, room: usize) -> String {
    let digest = outcome.output.failures();
    // Error lines read by no runner's parser say nothing an output shown whole does not.
    let whole = outcome.output.total_bytes() <= room as u64;
    let failures = if digest.runner.is_none() && whole {
        String::new()
    } else {
        failures::block(&digest, change, room * 3 / 4)
    };
    let room = room.saturating_sub(failures.chars().count() + OUTPUT_INTRO.len());
    let excerpt = outcome.output.excerpt(room);
    if excerpt.trim().is_empty() {
        return format!("{failures}(no output)\n");
    }
    let fence = fence_for(&excerpt);
    let intro = if failures.is_empty() { "" } else { OUTPUT_INTRO };
    format!("{failures}{intro}\n{fence}text\n{}\n{fence}\n", excerpt.trim_end())
}

/// Said between the failures and the output they were read from.
const OUTPUT_INTRO: &str = "\nThe output itself, its start and its end:\n";

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::checks::verify::Captured;

    fn failed(output: &str) -> VerifyOutcome {
        let mut captured = Captured::default();
        captured.push(output.as_bytes());
        VerifyOutcome {
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            untrusted: None,
            duration: Duration::ZERO,
            output: captured,
        }
    }

    fn files() -> LoopFiles {
        LoopFiles { state: "the loop's state.md".into(), ..LoopFiles::default() }
    }

    fn prompt<'a>(task: &'a str, files: &'a LoopFiles, output: Option<&'a VerifyOutcome>) -> Reinjection<'a> {
        Reinjection {
            task,
            files,
            headline: "\n\n---\nheadline\n".into(),
            notices: vec!["\nnotice one\n".into(), "\nnotice two\n".into()],
            failed: "\nit failed. Its output:\n".into(),
            output,
            change: None,
            budget: REASON_BUDGET,
            rules: "\nthe rules".into(),
        }
    }

    #[test]
    fn the_parts_come_in_order_with_the_output_fenced() {
        let (files, run) = (files(), failed("boom\n```\n"));
        let shown = prompt("the task\n", &files, Some(&run)).to_string();
        assert_eq!(
            shown,
            "the task\n\n---\nheadline\n\nnotice one\n\nnotice two\n\nit failed. Its output:\n\n\
             ````text\nboom\n```\n````\n\nthe rules"
        );
        let quiet = failed("  \n");
        let shown = prompt("the task", &files, Some(&quiet)).to_string();
        assert!(shown.contains("Its output:\n(no output)\n\nthe rules"), "{shown}");
    }

    #[test]
    fn a_long_task_is_referenced_and_a_long_output_is_cut_to_the_budget() {
        let files = files();
        let task = "t".repeat(REASON_BUDGET);
        let run = failed(&"x".repeat(4 * REASON_BUDGET));
        let shown = prompt(&task, &files, Some(&run)).to_string();
        assert!(
            shown.starts_with(&format!(
                "Your task is {REASON_BUDGET} characters long, too long to repeat here. Read it in full, \
                 below the settings, in the loop's state.md."
            )),
            "{shown}"
        );
        assert!(shown.chars().count() <= REASON_BUDGET, "{}", shown.chars().count());
        let short = "s".repeat(REASON_BUDGET - 2 * MIN_OUTPUT_ROOM);
        let shown = prompt(&short, &files, Some(&run)).to_string();
        assert!(shown.starts_with(&short), "a task that leaves the output its room is repeated");
        assert!(shown.chars().count() <= REASON_BUDGET, "{}", shown.chars().count());
    }

    #[test]
    fn the_budget_holds_the_whole_prompt_whatever_the_output() {
        let files = files();
        let huge = failed(&"error: something broke here\n".repeat(50_000));
        for tokens in [MIN_FEEDBACK_TOKENS, 1_000, DEFAULT_FEEDBACK_TOKENS, MAX_FEEDBACK_TOKENS] {
            let budget = budget_chars(Some(tokens));
            let shown = Reinjection { budget, ..prompt("the task", &files, Some(&huge)) }.to_string();
            assert!(shown.chars().count() <= budget, "{tokens}: {} > {budget}", shown.chars().count());
            assert!(shown.contains("No test runner's report was recognised"), "{tokens}: {shown}");
            assert!(shown.contains("bytes of output left out"), "{tokens}");
        }
        assert_eq!(budget_chars(None), 9_000, "about 3,000 tokens by default");
        assert_eq!(budget_chars(Some(u32::MAX)), REASON_BUDGET, "never above the hosts' cap");
        assert_eq!(budget_chars(Some(0)), MIN_FEEDBACK_TOKENS as usize * CHARS_PER_TOKEN);
    }

    #[test]
    fn an_empty_output_says_so_and_a_small_one_is_shown_whole_without_a_digest() {
        let files = files();
        let empty = failed("");
        let shown = prompt("the task", &files, Some(&empty)).to_string();
        assert!(shown.contains("Its output:\n(no output)\n"), "{shown}");
        let small = failed("error: boom\n");
        let shown = prompt("the task", &files, Some(&small)).to_string();
        assert!(!shown.contains("No test runner's report"), "{shown}");
        assert!(shown.contains("```text\nerror: boom\n```"), "{shown}");
    }
}
