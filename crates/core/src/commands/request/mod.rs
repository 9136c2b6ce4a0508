//! A loop as the user asked for it, read from `/for-loop`'s text or `loop-hook run`'s words.
//!
//! Both front ends read their flags through one table of flag specs ([`flag_spec`]): the text
//! front end ([`text`]) finds them in the raw text, never shell-split, and takes the rest as the
//! task; the argv front end ([`args`]) reads them from a command line. Either hands over the
//! flags as typed ([`LoopFlags`]), and one assembly here checks them into a [`LoopRequest`].
//! The table lives with the request it fills, not with the command lines, because its rows are
//! the request's fields and their limits; the rest of the crate only reads it (the usage texts
//! print it through [`flag_spec::flag_lines`], `loop-hook run` asks it which words are loop flags).

mod args;
mod check;
pub(crate) mod flag_spec;
#[cfg(test)]
mod reference;
mod text;
pub(crate) mod words;

use thiserror::Error;

use crate::checks::plan::PlanBoxes;
use crate::checks::review::ReviewSettings;
use crate::metric::keep::{self, MetricSettings};
use crate::metric::{Direction, Target};
use crate::state::OnLimit;
use check::bad_value;
pub(crate) use flag_spec::Flag;

pub(crate) const DEFAULT_MAX_ITERATIONS: u32 = 30;
pub(crate) const MAX_MAX_ITERATIONS: u32 = 10_000;
pub(crate) const DEFAULT_VERIFY_TIMEOUT_SECS: u64 = 300;
/// The Stop hook's own timeout in `hooks/hooks.json` is above this, so verify is always killed
/// by us, with a clear reason, before the host gives up on the hook and lets the loop end.
pub(crate) const MAX_VERIFY_TIMEOUT_SECS: u64 = 3_600;
/// The longest `--max-time`: a week.
pub(crate) const MAX_RUN_SECS: u64 = 7 * 24 * 3_600;
/// The most a streak may be set to before the loop acts (failures, vetoes, discards, pivots).
pub(crate) const MAX_STREAK: u32 = 1_000;
/// The most runs one metric measurement may take.
pub(crate) const MAX_METRIC_RUNS: u32 = 100;
/// A task larger than this belongs in a file that the task refers to.
pub(crate) const MAX_TASK_BYTES: usize = 1 << 20;

/// A loop as the user asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopRequest {
    pub task: String,
    pub verify: Option<String>,
    pub completion_promise: Option<String>,
    pub max_iterations: u32,
    pub verify_timeout_secs: u64,
    /// Paths and globs that belong to the oracle besides the files verify runs.
    pub protect: Vec<String>,
    pub max_same_failures: u32,
    pub max_time_secs: Option<u64>,
    pub escalation: Vec<u32>,
    pub checkpoint: bool,
    /// Refuse to start unless the loop runs in the strict tier ([`crate::checks::sandbox`]).
    pub require_strict: bool,
    /// Token budget (input + output + cache writes) for the session since the loop started.
    pub max_tokens: Option<u64>,
    /// Command run when the loop ends or parks.
    pub notify: Option<String>,
    /// Metric mode ([`crate::metric::keep`]), when `--metric` is given.
    pub metric: Option<MetricSettings>,
    /// The task may change the tests: no test-count ratchet, no default protection of the suite.
    pub allow_test_edits: bool,
    /// A reviewer that may veto a passing check (`--review`, `--max-vetoes`).
    pub review: Option<ReviewSettings>,
    /// The plan file whose stories the loop works through (`--plan`), as typed.
    pub plan: Option<String>,
    /// Stops one story may take before the loop is parked (`--story-iterations`).
    pub story_iterations: Option<u32>,
    /// The files the model may change (`--scope`, repeatable); empty: any.
    pub scope: Vec<String>,
    /// Whether for-loop ticks the plan's boxes as stories pass, or leaves them (`--no-tick`).
    pub boxes: PlanBoxes,
    /// What a usage limit in the session does to the loop (`--on-limit`).
    pub on_limit: OnLimit,
    /// How long stops wait unjudged on the session's background work (`--background-wait`).
    pub background_wait_secs: Option<u64>,
    /// The re-injection's budget in tokens (`--feedback-tokens`); `None`: the default.
    pub feedback_tokens: Option<u32>,
}

/// Why the text or the words do not give a loop. Each message says what to type instead.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum RequestError {
    #[error("the text asks for help")]
    HelpWanted,
    #[error(
        "no task given: write what the agent should do, e.g. \
         /for-loop \"make the tests pass\" --verify \"cargo test\""
    )]
    EmptyTask,
    #[error(
        "the task is {0} bytes; the limit is 1 MiB: put it in a file and give a task that names the file"
    )]
    TaskTooLong(usize),
    #[error("`{given}` is not a for-loop flag: did you mean {nearest}?")]
    UnknownFlag { given: String, nearest: Flag },
    #[error("{flag} needs a value: {hint}", hint = flag.spec().hint())]
    MissingValue { flag: Flag },
    #[error("{flag} `{value}` is not valid: {why}")]
    BadValue { flag: Flag, value: String, why: String },
    #[error("the value of {flag} opens a quote that is never closed: close it, e.g. {flag} \"cargo test\"")]
    UnclosedQuote { flag: Flag },
    #[error("{flag} is given twice: keep one")]
    Duplicate { flag: Flag },
    #[error("{flag} belongs to a plan: add --plan FILE, or drop {flag}")]
    WithoutPlan { flag: Flag },
}

/// The loop flags as a front end found them: each flag given and its value as typed, in order,
/// not yet checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LoopFlags {
    /// A switch's value is empty.
    given: Vec<(Flag, String)>,
}

impl LoopFlags {
    /// A flag given once already is refused a second time, unless it adds a value each time.
    fn refuse_twice(&self, flag: Flag) -> Result<(), RequestError> {
        if self.has(flag) && !flag.spec().repeatable {
            return Err(RequestError::Duplicate { flag });
        }
        Ok(())
    }

    fn add(&mut self, flag: Flag, value: String) -> Result<(), RequestError> {
        self.refuse_twice(flag)?;
        self.given.push((flag, value));
        Ok(())
    }

    pub(crate) fn has(&self, flag: Flag) -> bool {
        self.given.iter().any(|(given, _)| *given == flag)
    }

    /// Whether no loop flag was given.
    pub(crate) fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// The value of a flag given once.
    fn take(&mut self, flag: Flag) -> Option<String> {
        let at = self.given.iter().position(|(given, _)| *given == flag)?;
        Some(self.given.remove(at).1)
    }

    /// Every value of a repeatable flag, in order.
    fn take_all(&mut self, flag: Flag) -> Vec<String> {
        std::iter::from_fn(|| self.take(flag)).collect()
    }

    fn count(&mut self, flag: Flag) -> Result<Option<u32>, RequestError> {
        self.take(flag).map(|v| check::count(flag, &v)).transpose()
    }

    fn seconds(&mut self, flag: Flag) -> Result<Option<u64>, RequestError> {
        self.take(flag).map(|v| check::seconds(flag, &v)).transpose()
    }

    fn command(&mut self, flag: Flag) -> Result<Option<String>, RequestError> {
        self.take(flag).map(|v| check::command(flag, &v)).transpose()
    }

    fn switch(&mut self, flag: Flag) -> bool {
        self.take(flag).is_some()
    }
}

impl LoopRequest {
    /// Parses the raw argument text of `/for-loop`.
    pub(crate) fn parse(raw: &str) -> Result<LoopRequest, RequestError> {
        if matches!(raw.trim(), "--help" | "-h" | "help") {
            return Err(RequestError::HelpWanted);
        }
        let (flags, cuts) = text::scan(raw)?;
        LoopRequest::checked(flags, text::task(raw, &cuts))
    }

    /// The loop a command line asks for: `task` is its positional words as the shell handed them
    /// over, kept byte for byte; `flags` its loop flags ([`LoopFlags::read`]).
    pub(crate) fn from_args(task: &str, flags: &LoopFlags) -> Result<LoopRequest, RequestError> {
        let task = if text::is_blank(task) {
            Err(RequestError::EmptyTask)
        } else if task.len() > MAX_TASK_BYTES {
            Err(RequestError::TaskTooLong(task.len()))
        } else {
            Ok(task.to_string())
        };
        LoopRequest::checked(flags.clone(), task)
    }

    /// The checks `flags` ask for, for a command that runs no agent and so has no task
    /// (`loop-hook run --pick` re-runs verify): the request's task is empty.
    pub(crate) fn checks_only(flags: &LoopFlags) -> Result<LoopRequest, RequestError> {
        LoopRequest::checked(flags.clone(), Ok(String::new()))
    }

    /// Checks the flags as typed, together and each in turn, with the task a front end found.
    fn checked(
        mut flags: LoopFlags,
        task: Result<String, RequestError>,
    ) -> Result<LoopRequest, RequestError> {
        // The first mistake reported is metric mode's, then the task's, then each value's in turn.
        let metric = MetricFlags::take(&mut flags).settings()?;
        let review = review_settings(&mut flags, metric.is_some())?;
        let plan = plan_file(&mut flags, metric.is_some())?;
        let story_iterations = match (flags.take(Flag::StoryIterations), &plan) {
            (Some(value), None) => {
                let why = "it belongs to a plan: add --plan FILE".into();
                return Err(bad_value(Flag::StoryIterations, &value, why));
            }
            (value, _) => value.map(|v| check::count(Flag::StoryIterations, &v)).transpose()?,
        };
        let boxes = match (flags.switch(Flag::NoTick), &plan) {
            (true, None) => return Err(RequestError::WithoutPlan { flag: Flag::NoTick }),
            (true, Some(_)) => PlanBoxes::Left,
            (false, _) => PlanBoxes::Ticked,
        };
        let task = match (task, &plan) {
            // The plan is the task.
            (Err(RequestError::EmptyTask), Some(file)) => {
                format!("Work through the stories of the plan {file}, one at a time, in order.")
            }
            (task, _) => task?,
        };
        Ok(LoopRequest {
            task,
            verify: flags.command(Flag::Verify)?,
            completion_promise: flags
                .take(Flag::CompletionPromise)
                .map(|p| check::promise(&p))
                .transpose()?,
            max_iterations: flags.count(Flag::MaxIterations)?.unwrap_or(DEFAULT_MAX_ITERATIONS),
            verify_timeout_secs: flags.seconds(Flag::VerifyTimeout)?.unwrap_or(DEFAULT_VERIFY_TIMEOUT_SECS),
            protect: flags
                .take_all(Flag::Protect)
                .iter()
                .map(|p| check::protect(p))
                .collect::<Result<_, _>>()?,
            max_same_failures: flags
                .count(Flag::MaxSameFailures)?
                .unwrap_or(crate::checks::stall::DEFAULT_MAX_SAME_FAILURES),
            max_time_secs: flags.seconds(Flag::MaxTime)?,
            escalation: flags
                .take(Flag::Escalate)
                .map(|v| check::rising(Flag::Escalate, &v))
                .transpose()?
                .unwrap_or(crate::checks::stall::DEFAULT_ESCALATION.to_vec()),
            checkpoint: flags.switch(Flag::Checkpoint),
            require_strict: flags.switch(Flag::RequireStrict),
            max_tokens: flags
                .take(Flag::MaxTokens)
                .map(|v| check::tokens(Flag::MaxTokens, &v))
                .transpose()?,
            notify: flags.command(Flag::Notify)?,
            metric,
            allow_test_edits: flags.switch(Flag::AllowTestEdits),
            review,
            plan,
            story_iterations,
            scope: check::scope(&flags.take_all(Flag::Scope))?,
            boxes,
            on_limit: on_limit(&mut flags)?,
            background_wait_secs: flags.seconds(Flag::BackgroundWait)?,
            feedback_tokens: flags
                .take(Flag::FeedbackTokens)
                .map(|v| check::budget(Flag::FeedbackTokens, &v))
                .transpose()?,
        })
    }
}

/// `--on-limit wait|handoff`; `wait` when not given.
fn on_limit(flags: &mut LoopFlags) -> Result<OnLimit, RequestError> {
    match flags.take(Flag::OnLimit) {
        None => Ok(OnLimit::Wait),
        Some(value) => OnLimit::parse(value.trim()).ok_or_else(|| {
            bad_value(Flag::OnLimit, &value, "give wait or handoff, e.g. --on-limit handoff".into())
        }),
    }
}

/// The reviewer asked for, checked against the flags it needs: a check to review, and no
/// metric mode (where a kept change is judged by its number).
fn review_settings(flags: &mut LoopFlags, metric: bool) -> Result<Option<ReviewSettings>, RequestError> {
    let max_vetoes = flags.take(Flag::MaxVetoes);
    let Some(command) = flags.take(Flag::Review) else {
        return match max_vetoes {
            Some(value) => {
                Err(bad_value(Flag::MaxVetoes, &value, "it belongs to a reviewer: add --review CMD".into()))
            }
            None => Ok(None),
        };
    };
    let command = check::command(Flag::Review, &command)?;
    // A plan's stories carry checks of their own (a story without one is refused at start).
    if !flags.has(Flag::Verify) && !flags.has(Flag::Plan) {
        let why = "a reviewer can only veto a check that passed: add --verify CMD (or --plan FILE)";
        return Err(bad_value(Flag::Review, &command, why.into()));
    }
    if metric {
        let why =
            "metric mode keeps a change by its number, not a reviewer's word: drop --review or --metric";
        return Err(bad_value(Flag::Review, &command, why.into()));
    }
    let max_vetoes = max_vetoes
        .map(|v| check::count(Flag::MaxVetoes, &v))
        .transpose()?
        .unwrap_or(crate::checks::review::DEFAULT_MAX_VETOES);
    Ok(Some(ReviewSettings { command, max_vetoes }))
}

/// The plan file asked for; not in metric mode, where a change is kept by its number.
fn plan_file(flags: &mut LoopFlags, metric: bool) -> Result<Option<String>, RequestError> {
    let Some(file) = flags.take(Flag::Plan) else { return Ok(None) };
    let file = check::command(Flag::Plan, &file)?;
    if metric {
        let why =
            "a plan's stories are done when their checks pass, not by a number: drop --plan or --metric";
        return Err(bad_value(Flag::Plan, &file, why.into()));
    }
    Ok(Some(file))
}

/// The metric flags as typed, before they are checked together.
struct MetricFlags {
    command: Option<String>,
    target: Option<String>,
    guard: Option<String>,
    runs: Option<String>,
    min_gain: Option<String>,
    direction: Option<String>,
    refine_after: Option<String>,
    pivot_after: Option<String>,
    park_after_pivots: Option<String>,
}

impl MetricFlags {
    fn take(flags: &mut LoopFlags) -> MetricFlags {
        MetricFlags {
            command: flags.take(Flag::Metric),
            target: flags.take(Flag::Target),
            guard: flags.take(Flag::Guard),
            runs: flags.take(Flag::MetricRuns),
            min_gain: flags.take(Flag::MinGain),
            direction: flags.take(Flag::Direction),
            refine_after: flags.take(Flag::RefineAfter),
            pivot_after: flags.take(Flag::PivotAfter),
            park_after_pivots: flags.take(Flag::ParkAfterPivots),
        }
    }

    fn settings(self) -> Result<Option<MetricSettings>, RequestError> {
        self.refuse_without_metric()?;
        let Some(command) = self.command else {
            return Ok(None);
        };
        if command.trim().is_empty() {
            return Err(RequestError::MissingValue { flag: Flag::Metric });
        }
        let target: Option<Target> = self
            .target
            .as_deref()
            .map(|t| t.parse().map_err(|why| bad_value(Flag::Target, t, why)))
            .transpose()?;
        let direction = better_direction(target, self.direction.as_deref(), &command)?;
        let guard = self
            .guard
            .map(|g| {
                if g.trim().is_empty() {
                    Err(RequestError::MissingValue { flag: Flag::Guard })
                } else {
                    Ok(g)
                }
            })
            .transpose()?;
        let count = |flag: Flag, value: Option<String>, default: u32| {
            value.map(|v| check::count(flag, &v)).transpose().map(|n| n.unwrap_or(default))
        };
        Ok(Some(MetricSettings {
            command,
            target,
            direction,
            guard,
            runs: count(Flag::MetricRuns, self.runs, keep::DEFAULT_METRIC_RUNS)?,
            min_gain: self
                .min_gain
                .as_deref()
                .map(|g| g.parse().map_err(|why| bad_value(Flag::MinGain, g, why)))
                .transpose()?
                .unwrap_or_default(),
            refine_after: count(Flag::RefineAfter, self.refine_after, keep::DEFAULT_REFINE_AFTER)?,
            pivot_after: count(Flag::PivotAfter, self.pivot_after, keep::DEFAULT_PIVOT_AFTER)?,
            park_after_pivots: count(
                Flag::ParkAfterPivots,
                self.park_after_pivots,
                keep::DEFAULT_PARK_AFTER_PIVOTS,
            )?,
        }))
    }

    /// Without `--metric`, the flags of metric mode would do nothing: the first one given is
    /// refused.
    fn refuse_without_metric(&self) -> Result<(), RequestError> {
        if self.command.is_some() {
            return Ok(());
        }
        let given = [
            (Flag::Target, &self.target),
            (Flag::Guard, &self.guard),
            (Flag::MetricRuns, &self.runs),
            (Flag::MinGain, &self.min_gain),
            (Flag::Direction, &self.direction),
            (Flag::RefineAfter, &self.refine_after),
            (Flag::PivotAfter, &self.pivot_after),
            (Flag::ParkAfterPivots, &self.park_after_pivots),
        ];
        match given.into_iter().find(|(_, v)| v.is_some()) {
            Some((flag, Some(value))) => {
                Err(bad_value(flag, value, "it belongs to metric mode: add --metric CMD".into()))
            }
            _ => Ok(()),
        }
    }
}

/// Which way a metric loop's number is better: the target's way, or `--direction` without a
/// target; one of the two is needed, and they must agree.
fn better_direction(
    target: Option<Target>,
    given: Option<&str>,
    command: &str,
) -> Result<Direction, RequestError> {
    let direction: Option<Direction> =
        given.map(|d| d.parse().map_err(|why| bad_value(Flag::Direction, d, why))).transpose()?;
    match (target, direction) {
        (Some(t), Some(d)) if t.direction() != d => Err(bad_value(
            Flag::Direction,
            given.unwrap_or_default(),
            format!("--target {t} already means {} is better: drop --direction", t.direction().word()),
        )),
        (Some(t), _) => Ok(t.direction()),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(bad_value(
            Flag::Metric,
            command,
            "say which way is better: --target \"<= 120\" (the loop ends when it is met) or \
             --direction min|max (the loop runs to its cap keeping the best)"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use text::quoted_span;

    fn parse(raw: &str) -> LoopRequest {
        LoopRequest::parse(raw).unwrap_or_else(|e| panic!("{raw:?}: {e}"))
    }

    fn err(raw: &str) -> RequestError {
        LoopRequest::parse(raw).expect_err(raw)
    }

    #[test]
    fn defaults_without_flags() {
        let req = parse("fix the tests");
        assert_eq!(req.task, "fix the tests");
        assert_eq!(req.verify, None);
        assert_eq!(req.completion_promise, None);
        assert_eq!(req.max_iterations, 30);
        assert_eq!(req.verify_timeout_secs, 300);
    }

    #[test]
    fn quoted_task_and_flags_anywhere() {
        let req = parse(r#""fix the tests" --verify "cargo test -p core" --max-iterations 5"#);
        assert_eq!(req.task, "fix the tests");
        assert_eq!(req.verify.as_deref(), Some("cargo test -p core"));
        assert_eq!(req.max_iterations, 5);

        let req = parse("--max-iterations 3 fix it --verify 'make check' please");
        assert_eq!(req.task, "fix it please");
        assert_eq!(req.verify.as_deref(), Some("make check"));
    }

    #[test]
    fn equals_form_and_unit_suffixes() {
        let req = parse("t --verify=true --verify-timeout=5m --completion-promise=\"ALL  GREEN\"");
        assert_eq!(req.verify.as_deref(), Some("true"));
        assert_eq!(req.verify_timeout_secs, 300);
        assert_eq!(req.completion_promise.as_deref(), Some("ALL GREEN"));
    }

    #[test]
    fn apostrophes_and_shell_syntax_stay_in_the_task_byte_for_byte() {
        let raw = "fix the user's login; `rm -rf /` $(touch pwned) & \"half quoted\n---\nnext line";
        assert_eq!(parse(raw).task, raw);
        let raw = "fix the user's login --verify \"cargo test\"";
        assert_eq!(parse(raw).task, "fix the user's login");
    }

    #[test]
    fn multi_line_task_with_flags_on_their_own_lines() {
        let req = parse("Step 1: a\r\nStep 2: b\r\n--verify ./check.sh\r\n--max-iterations 4");
        assert_eq!(req.task, "Step 1: a\r\nStep 2: b");
        assert_eq!(req.verify.as_deref(), Some("./check.sh"));
    }

    #[test]
    fn other_dashes_in_prose_are_task_text() {
        for raw in
            ["don't use rm -rf here", "add the --verbose option", "support --max-old-space-size", "a -- b"]
        {
            assert_eq!(parse(raw).task, raw);
        }
    }

    #[test]
    fn flags_inside_a_quoted_task_are_task_text() {
        let req = parse(r#""explain what --verify does" --verify true"#);
        assert_eq!(req.task, "explain what --verify does");
        assert_eq!(req.verify.as_deref(), Some("true"));
    }

    #[test]
    fn whole_task_quotes_are_removed_once_with_shell_escapes() {
        assert_eq!(parse(r#""say \"hi\" to C:\\temp""#).task, r#"say "hi" to C:\temp"#);
        assert_eq!(parse("'fix the user's login'").task, "fix the user's login");
        assert_eq!(parse("\u{201c}smart quotes\u{201d}").task, "smart quotes");
        assert_eq!(parse(r#""a" and "b""#).task, r#""a" and "b""#);
    }

    #[test]
    fn near_misses_name_the_nearest_flag() {
        let cases = [
            ("t --max-iteration 3", Flag::MaxIterations),
            ("t --verfy x", Flag::Verify),
            ("t --completion-promis x", Flag::CompletionPromise),
            ("t --verify-timout 3", Flag::VerifyTimeout),
            ("t --max_iterations 3", Flag::MaxIterations),
            ("t -verify x", Flag::Verify),
            ("t \u{2014}verify x", Flag::Verify),
            ("t --VERIFY x", Flag::Verify),
            ("t --max-iter 3", Flag::MaxIterations),
            ("t --max-tim 3", Flag::MaxTime),
        ];
        for (raw, nearest) in cases {
            match err(raw) {
                RequestError::UnknownFlag { nearest: got, .. } => assert_eq!(got, nearest, "{raw}"),
                other => panic!("{raw}: {other}"),
            }
        }
        let message = err("t --verfy x").to_string();
        assert_eq!(message, "`--verfy` is not a for-loop flag: did you mean --verify?");
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        assert!(matches!(
            err("t --max-iterations abc"),
            RequestError::BadValue { flag: Flag::MaxIterations, .. }
        ));
        assert!(err("t --max-iterations 0").to_string().contains("no unlimited mode"));
        assert!(matches!(err("t --max-iterations -1"), RequestError::BadValue { .. }));
        assert!(matches!(err("t --max-iterations 99999999999999999999"), RequestError::BadValue { .. }));
        assert!(matches!(err("t --verify-timeout 0"), RequestError::BadValue { .. }));
        assert!(matches!(err("t --verify-timeout 2h"), RequestError::BadValue { .. }));
        assert!(matches!(
            err("t --completion-promise '<promise>x</promise>'"),
            RequestError::BadValue { .. }
        ));
    }

    #[test]
    fn missing_values_and_unclosed_quotes() {
        assert_eq!(err("t --verify"), RequestError::MissingValue { flag: Flag::Verify });
        assert_eq!(err("t --verify   "), RequestError::MissingValue { flag: Flag::Verify });
        assert_eq!(err("t --verify= x"), RequestError::MissingValue { flag: Flag::Verify });
        assert_eq!(err("t --verify --max-iterations 3"), RequestError::MissingValue { flag: Flag::Verify });
        assert_eq!(err("t --verify ''"), RequestError::MissingValue { flag: Flag::Verify });
        assert_eq!(
            err("t --completion-promise '  '"),
            RequestError::MissingValue { flag: Flag::CompletionPromise }
        );
        assert_eq!(err("t --verify \"cargo test"), RequestError::UnclosedQuote { flag: Flag::Verify });
    }

    #[test]
    fn duplicates_empty_huge_and_help() {
        assert_eq!(err("t --verify a --verify b"), RequestError::Duplicate { flag: Flag::Verify });
        assert_eq!(err(""), RequestError::EmptyTask);
        assert_eq!(err("  \n\t "), RequestError::EmptyTask);
        assert_eq!(err("--verify true"), RequestError::EmptyTask);
        assert_eq!(err("\"\""), RequestError::EmptyTask);
        for blank in ["\"   \"", "'\t \t'", "\u{3000}", "\u{200b}\u{feff}", "\"\u{a0}\" --verify true"] {
            assert_eq!(err(blank), RequestError::EmptyTask, "{blank:?}");
        }
        assert!(matches!(err(&"x".repeat(MAX_TASK_BYTES + 1)), RequestError::TaskTooLong(_)));
        assert_eq!(err(" --help\n"), RequestError::HelpWanted);
        assert_eq!(parse("add a --help flag").task, "add a --help flag");
    }

    #[test]
    fn a_stray_double_quote_in_the_task_does_not_swallow_flags() {
        let req = parse("fix \"the quote --verify \"cargo test\"");
        assert_eq!(req.task, "fix \"the quote");
        assert_eq!(req.verify.as_deref(), Some("cargo test"));
    }

    /// The README's one-liners arrive in the shell exactly as written inside the quotes.
    #[test]
    fn notify_commands_keep_their_inner_quotes_and_dollars() {
        for command in [
            r#"notify-send "for-loop" "$FOR_LOOP_SUMMARY""#,
            r#"osascript -e "on run argv" -e "display notification (item 1 of argv) with title \"for-loop\"" -e "end run" "$FOR_LOOP_SUMMARY""#,
            r#"curl -fsS -d "$FOR_LOOP_SUMMARY" https://ntfy.sh/my-for-loop-topic"#,
            r#"jq -n --arg t "$FOR_LOOP_SUMMARY" "{text: \$t}" | curl -fsS -H "Content-Type: application/json" -d @- "$SLACK_WEBHOOK_URL""#,
        ] {
            let req = parse(&format!("fix it --verify true --notify '{command}'"));
            assert_eq!(req.notify.as_deref(), Some(command));
            assert_eq!(req.task, "fix it");
        }
        assert_eq!(err("t --notify ''"), RequestError::MissingValue { flag: Flag::Notify });
        assert_eq!(err("t --notify"), RequestError::MissingValue { flag: Flag::Notify });
    }

    #[test]
    fn integrity_and_budget_flags() {
        let req = parse(
            "t --protect \"tests/**\" --protect check.sh --max-same-failures 5 --max-time 45m --escalate 1,3,5 --checkpoint",
        );
        assert_eq!(req.task, "t");
        assert_eq!(req.protect, ["tests/**", "check.sh"]);
        assert_eq!(req.max_same_failures, 5);
        assert_eq!(req.max_time_secs, Some(2_700));
        assert_eq!(req.escalation, [1, 3, 5]);
        assert!(req.checkpoint);
        assert_eq!(LoopRequest::parse("t --max-tokens 2M").unwrap().max_tokens, Some(2_000_000));
        assert_eq!(LoopRequest::parse("t --max-tokens=500k").unwrap().max_tokens, Some(500_000));
        assert_eq!(LoopRequest::parse("t --max-tokens 1234").unwrap().max_tokens, Some(1_234));
        for bad in ["0", "2.5M", "lots", "-1", "2G", "99999999999999M"] {
            assert!(
                matches!(
                    err(&format!("t --max-tokens {bad}")),
                    RequestError::BadValue { flag: Flag::MaxTokens, .. }
                ),
                "{bad}"
            );
        }
        assert!(matches!(err("t --max-token 5"), RequestError::UnknownFlag { nearest: Flag::MaxTokens, .. }));
        let defaults = parse("t");
        assert_eq!(
            (defaults.max_same_failures, defaults.max_time_secs, defaults.checkpoint),
            (8, None, false)
        );
        assert_eq!(defaults.escalation, [2, 4, 6]);
        assert!(matches!(err("t --protect /etc/passwd"), RequestError::BadValue { flag: Flag::Protect, .. }));
        assert!(matches!(err("t --protect ../x"), RequestError::BadValue { flag: Flag::Protect, .. }));
        assert!(matches!(err("t --escalate 4,2,6"), RequestError::BadValue { flag: Flag::Escalate, .. }));
        assert!(matches!(err("t --max-time soon"), RequestError::BadValue { flag: Flag::MaxTime, .. }));
        assert!(matches!(err("t --checkpoint=yes"), RequestError::BadValue { flag: Flag::Checkpoint, .. }));
        assert!(parse("t --allow-test-edits").allow_test_edits);
        assert!(!parse("t").allow_test_edits);
        assert!(
            err("t --allow-test-edits=yes").to_string().contains("write just --allow-test-edits"),
            "{}",
            err("t --allow-test-edits=yes")
        );
        assert!(matches!(
            err("t --allow-tests-edit"),
            RequestError::UnknownFlag { nearest: Flag::AllowTestEdits, .. }
        ));
        assert!(matches!(err("t --max-same-failures 0"), RequestError::BadValue { .. }));
        assert!(matches!(err("t --protec x"), RequestError::UnknownFlag { nearest: Flag::Protect, .. }));
    }

    #[test]
    fn a_reviewer_needs_a_check_to_review_and_counts_its_vetoes() {
        let req = parse(r#"fix it --verify "cargo test" --review "sh review.sh""#);
        assert_eq!(req.review, Some(ReviewSettings { command: "sh review.sh".into(), max_vetoes: 3 }));
        assert_eq!(req.task, "fix it");
        let req = parse(r#"fix it --verify "cargo test" --review "sh review.sh" --max-vetoes 5"#);
        assert_eq!(req.review.map(|r| r.max_vetoes), Some(5));
        // The stories of a plan bring their own checks.
        assert!(parse(r#"--plan PLAN.md --review "sh review.sh""#).review.is_some());
        assert_eq!(parse("fix it --verify true").review, None);
        let needs_verify = err(r#"fix it --review "sh review.sh""#).to_string();
        assert!(needs_verify.contains("add --verify CMD"), "{needs_verify}");
        let alone = err("fix it --verify true --max-vetoes 2").to_string();
        assert!(alone.contains("add --review CMD"), "{alone}");
        let metric = err(r#"speed --metric "sh bench.sh" --direction min --verify true --review "sh r.sh""#)
            .to_string();
        assert!(metric.contains("drop --review or --metric"), "{metric}");
        for bad in ["0", "many", "1001", "-1"] {
            let e = err(&format!("t --verify true --review r --max-vetoes={bad}")).to_string();
            assert!(e.starts_with("--max-vetoes"), "{bad}: {e}");
        }
        assert!(matches!(err("t --verify true --review"), RequestError::MissingValue { flag: Flag::Review }));
        assert_eq!(err("t --verify true --review ''"), RequestError::MissingValue { flag: Flag::Review });
    }

    #[test]
    fn a_plan_takes_a_file_and_makes_the_task_optional() {
        let req = parse("--plan PLAN.md --story-iterations 4");
        assert_eq!((req.plan.as_deref(), req.story_iterations), (Some("PLAN.md"), Some(4)));
        assert_eq!(req.task, "Work through the stories of the plan PLAN.md, one at a time, in order.");
        assert_eq!(parse("ship it --plan prd.json").task, "ship it");
        assert!(err("t --story-iterations 3").to_string().contains("add --plan FILE"));
        assert!(err("--plan P.md --story-iterations 0").to_string().starts_with("--story-iterations"));
        assert_eq!(err("--plan ''"), RequestError::MissingValue { flag: Flag::Plan });
        assert_eq!(parse("--plan PLAN.md --no-tick").boxes, PlanBoxes::Left);
        assert_eq!(parse("--plan PLAN.md").boxes, PlanBoxes::Ticked);
        assert_eq!(
            err("t --no-tick").to_string(),
            "--no-tick belongs to a plan: add --plan FILE, or drop --no-tick"
        );
        assert!(matches!(
            err("--plan P.md --no-tick=yes"),
            RequestError::BadValue { flag: Flag::NoTick, .. }
        ));
        assert!(
            err(r#"--plan P.md --metric "sh b.sh" --direction min"#)
                .to_string()
                .contains("drop --plan or --metric")
        );
        assert_eq!(err(""), RequestError::EmptyTask);
    }

    #[test]
    fn scope_globs_are_repeatable_checked_and_named_when_refused() {
        let req = parse(r#"fix it --verify true --scope "src/**" --scope=Cargo.toml --scope ' docs '"#);
        assert_eq!(req.scope, ["src/**", "Cargo.toml", "docs"]);
        assert_eq!(req.task, "fix it");
        assert!(parse("fix it").scope.is_empty());
        for (bad, why) in [
            ("'../x'", "inside the project"),
            ("/etc", "inside the project"),
            ("'src/[a'", "not a glob"),
            ("'a**b'", "whole path component"),
            ("'!src'", "`!`"),
        ] {
            let refused = err(&format!("t --scope {bad}")).to_string();
            let shown = bad.trim_matches('\'');
            assert!(refused.starts_with(&format!("--scope `{shown}` is not valid: ")), "{refused}");
            assert!(refused.contains(why), "{bad}: {refused}");
        }
        assert_eq!(err("t --scope ''"), RequestError::MissingValue { flag: Flag::Scope });
        assert_eq!(err("t --scope"), RequestError::MissingValue { flag: Flag::Scope });
        let huge = err(&format!("t --scope {}", "a".repeat(2_000))).to_string();
        assert!(huge.contains("the most is 1024"), "{}", &huge[huge.len() - 80..]);
        let many = (0..=crate::checks::scope::MAX_GLOBS).map(|n| format!("--scope d{n}")).collect::<Vec<_>>();
        let many = format!(" {}", many.join(" "));
        assert!(err(&format!("t{many}")).to_string().contains("the most is 100 --scope globs"));
        assert!(err("t --scopes src").to_string().contains("did you mean --scope"));
    }

    #[test]
    fn a_request_for_checks_only_has_no_task_and_still_checks_its_flags() {
        let mut flags = LoopFlags::default();
        flags.add(Flag::Verify, "cargo test".into()).unwrap();
        flags.add(Flag::VerifyTimeout, "5m".into()).unwrap();
        let checks = LoopRequest::checks_only(&flags).unwrap();
        assert_eq!((checks.task.as_str(), checks.verify.as_deref()), ("", Some("cargo test")));
        assert_eq!(checks.verify_timeout_secs, 300);
        assert_eq!(LoopRequest::from_args("", &flags), Err(RequestError::EmptyTask));
        flags.add(Flag::MaxIterations, "0".into()).unwrap();
        assert!(matches!(
            LoopRequest::checks_only(&flags),
            Err(RequestError::BadValue { flag: Flag::MaxIterations, .. })
        ));
        assert_eq!(flags.add(Flag::Verify, "x".into()), Err(RequestError::Duplicate { flag: Flag::Verify }));
    }

    /// Every counted or timed flag takes the most its row allows and refuses one more, naming
    /// that limit: the limit lives in the table alone.
    #[test]
    fn every_number_is_held_to_the_limit_of_its_row() {
        use flag_spec::Value;
        for spec in Flag::all().map(Flag::spec) {
            let (most, unit) = match spec.value {
                Value::Count { most } => (u64::from(most), ""),
                Value::Duration { most } => (most, " seconds"),
                Value::Budget { most, .. } => (u64::from(most), ""),
                _ => continue,
            };
            let metric = matches!(
                spec.flag,
                Flag::MetricRuns | Flag::RefineAfter | Flag::PivotAfter | Flag::ParkAfterPivots
            );
            let base = if metric {
                "t --metric 'sh b.sh' --direction min --verify true"
            } else {
                "t --plan P.md --verify true --review r"
            };
            parse(&format!("{base} {} {most}", spec.name));
            match err(&format!("{base} {}={}", spec.name, most + 1)) {
                RequestError::BadValue { flag, why, .. } => {
                    assert_eq!(flag, spec.flag);
                    assert!(why.starts_with(&format!("the most is {most}{unit}")), "{}: {why}", spec.name);
                }
                other => panic!("{}: {other}", spec.name),
            }
        }
    }

    #[test]
    fn the_feedback_budget_takes_a_number_of_tokens_within_the_hosts_cap() {
        assert_eq!(parse("t --feedback-tokens 2000").feedback_tokens, Some(2_000));
        assert_eq!(parse("t").feedback_tokens, None, "not given: the default");
        let why = |value: &str| match err(&format!("t --feedback-tokens={value}")) {
            RequestError::BadValue { flag: Flag::FeedbackTokens, why, .. } => why,
            other => panic!("{value}: {other}"),
        };
        assert!(why("0").starts_with("it must be at least 500: less leaves no room"), "{}", why("0"));
        assert!(why("-5").starts_with("give a whole number of tokens from 500 to 3166"), "{}", why("-5"));
        assert!(
            why("99999999999999999999").starts_with("the most is 3166"),
            "{}",
            why("99999999999999999999")
        );
        assert!(
            why("5000").starts_with("the most is 3166: the hosts cut a hook's prompt"),
            "{}",
            why("5000")
        );
        assert!(why("lots").starts_with("give a whole number of tokens"), "{}", why("lots"));
        assert_eq!(
            err("t --feedback-tokens").to_string(),
            "--feedback-tokens needs a value: a number of tokens from 500 to 3166, e.g. --feedback-tokens 2000"
        );
    }

    #[test]
    fn a_missing_value_is_told_with_the_limits_of_the_flags_row() {
        let message = err("t --max-iterations").to_string();
        assert_eq!(
            message,
            format!(
                "--max-iterations needs a value: a whole number from 1 to {MAX_MAX_ITERATIONS}, e.g. --max-iterations 30"
            )
        );
        let message = err("t --max-time=").to_string();
        assert!(message.ends_with("a duration from 1s to 168h, e.g. --max-time 45m"), "{message}");
        assert!(
            err("t --max-time 200h").to_string().contains(&format!("the most is {MAX_RUN_SECS} seconds"))
        );
    }

    #[test]
    fn quoted_value_glued_to_text_is_taken_as_written() {
        assert_eq!(parse("t --verify \"a\"b").verify.as_deref(), Some("\"a\"b"));
    }

    proptest! {
        #[test]
        fn parse_never_panics(raw in any::<String>()) {
            let _ = LoopRequest::parse(&raw);
        }

        #[test]
        fn any_task_without_our_flags_comes_back_trimmed(task in "[^-\"'\u{201c}\u{2018}]+[^-]*") {
            let trimmed = task.trim();
            // A task of only invisible characters (a byte-order mark) is refused as empty.
            prop_assume!(!text::is_blank(trimmed));
            prop_assume!(quoted_span(trimmed).is_none_or(|len| len != trimmed.len()));
            let raw = format!("{task} --verify \"cargo test\"");
            prop_assert_eq!(LoopRequest::parse(&raw).unwrap().task, trimmed);
        }
    }
}
