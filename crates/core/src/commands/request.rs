//! Parsing the text a user typed after `/for-loop` into a loop request.
//!
//! The text is never shell-split: the task is the raw text with our flags cut out, byte for byte,
//! so apostrophes, `$(...)`, backticks and newlines in a task are just text. Only our own flag
//! values are unquoted. A word that looks like one of our flags but isn't one is refused, because
//! a misspelt `--max-iteration 3` that silently became task text would leave a loop with the
//! default cap and a task that mentions a flag.

use std::fmt;
use std::ops::Range;

use thiserror::Error;

use crate::checks::plan::PlanBoxes;
use crate::checks::protect::Protect;
use crate::checks::review::ReviewSettings;
use crate::metric::keep::{self, MetricSettings};
use crate::metric::{Direction, Target};
use crate::support::duration::parse_seconds;
use crate::support::nearest::levenshtein;

pub(crate) const DEFAULT_MAX_ITERATIONS: u32 = 30;
pub(crate) const MAX_MAX_ITERATIONS: u32 = 10_000;
pub(crate) const DEFAULT_VERIFY_TIMEOUT_SECS: u64 = 300;
/// The Stop hook's own timeout in `hooks/hooks.json` is above this, so verify is always killed
/// by us, with a clear reason, before the host gives up on the hook and lets the loop end.
pub(crate) const MAX_VERIFY_TIMEOUT_SECS: u64 = 3_600;
/// A task larger than this belongs in a file that the task refers to.
pub(crate) const MAX_TASK_BYTES: usize = 1 << 20;

/// One of the flags `/for-loop` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flag {
    Verify,
    CompletionPromise,
    MaxIterations,
    VerifyTimeout,
    Protect,
    MaxSameFailures,
    MaxTime,
    Escalate,
    Checkpoint,
    RequireStrict,
    MaxTokens,
    Notify,
    Metric,
    Target,
    Guard,
    MetricRuns,
    MinGain,
    Direction,
    RefineAfter,
    PivotAfter,
    ParkAfterPivots,
    AllowTestEdits,
    Review,
    MaxVetoes,
    Plan,
    StoryIterations,
    Scope,
    NoTick,
}

impl Flag {
    pub(crate) const ALL: [Flag; 28] = [
        Flag::Verify,
        Flag::CompletionPromise,
        Flag::MaxIterations,
        Flag::VerifyTimeout,
        Flag::Protect,
        Flag::MaxSameFailures,
        Flag::MaxTime,
        Flag::Escalate,
        Flag::Checkpoint,
        Flag::RequireStrict,
        Flag::MaxTokens,
        Flag::Notify,
        Flag::Metric,
        Flag::Target,
        Flag::Guard,
        Flag::MetricRuns,
        Flag::MinGain,
        Flag::Direction,
        Flag::RefineAfter,
        Flag::PivotAfter,
        Flag::ParkAfterPivots,
        Flag::AllowTestEdits,
        Flag::Review,
        Flag::MaxVetoes,
        Flag::Plan,
        Flag::StoryIterations,
        Flag::Scope,
        Flag::NoTick,
    ];

    /// The flag's place in [`Flag::ALL`].
    fn index(self) -> usize {
        Flag::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }

    /// Flags that may be given more than once, each adding a value.
    fn repeatable(self) -> bool {
        matches!(self, Flag::Protect | Flag::Scope)
    }

    /// Flags that take no value.
    pub(crate) fn is_switch(self) -> bool {
        matches!(self, Flag::Checkpoint | Flag::RequireStrict | Flag::AllowTestEdits | Flag::NoTick)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Flag::Verify => "--verify",
            Flag::CompletionPromise => "--completion-promise",
            Flag::MaxIterations => "--max-iterations",
            Flag::VerifyTimeout => "--verify-timeout",
            Flag::Protect => "--protect",
            Flag::MaxSameFailures => "--max-same-failures",
            Flag::MaxTime => "--max-time",
            Flag::Escalate => "--escalate",
            Flag::Checkpoint => "--checkpoint",
            Flag::RequireStrict => "--require-strict",
            Flag::MaxTokens => "--max-tokens",
            Flag::Notify => "--notify",
            Flag::Metric => "--metric",
            Flag::Target => "--target",
            Flag::Guard => "--guard",
            Flag::MetricRuns => "--metric-runs",
            Flag::MinGain => "--min-gain",
            Flag::Direction => "--direction",
            Flag::RefineAfter => "--refine-after",
            Flag::PivotAfter => "--pivot-after",
            Flag::ParkAfterPivots => "--park-after-pivots",
            Flag::AllowTestEdits => "--allow-test-edits",
            Flag::Review => "--review",
            Flag::MaxVetoes => "--max-vetoes",
            Flag::Plan => "--plan",
            Flag::StoryIterations => "--story-iterations",
            Flag::Scope => "--scope",
            Flag::NoTick => "--no-tick",
        }
    }

    fn value_hint(self) -> &'static str {
        match self {
            Flag::Verify => "a command, e.g. --verify \"cargo test\"",
            Flag::CompletionPromise => "a phrase, e.g. --completion-promise \"ALL DONE\"",
            Flag::MaxIterations => "a whole number from 1 to 10000, e.g. --max-iterations 30",
            Flag::VerifyTimeout => "seconds from 1 to 3600, e.g. --verify-timeout 300 (or 5m)",
            Flag::Protect => "a path or glob, e.g. --protect \"tests/**\"",
            Flag::MaxSameFailures => "a whole number from 1 to 1000, e.g. --max-same-failures 8",
            Flag::MaxTime => "a duration, e.g. --max-time 45m or --max-time 2h",
            Flag::Escalate => "rising counts, e.g. --escalate 2,4,6",
            Flag::Checkpoint | Flag::RequireStrict | Flag::AllowTestEdits | Flag::NoTick => {
                "nothing: it is a switch"
            }
            Flag::MaxTokens => "a token count, e.g. --max-tokens 2000000 (or 2M, 500k)",
            Flag::Notify => "a command, e.g. --notify 'notify-send \"$FOR_LOOP_SUMMARY\"'",
            Flag::Metric => "a command that prints a number, e.g. --metric \"sh bench.sh\"",
            Flag::Target => "a comparison, e.g. --target \"<= 120\" or --target \">= 0.93\"",
            Flag::Guard => "a command that must pass for a change to be kept, e.g. --guard \"cargo test\"",
            Flag::MetricRuns => "a whole number from 1 to 100, e.g. --metric-runs 5",
            Flag::MinGain => "a number or a percentage, e.g. --min-gain 2 or --min-gain 1%",
            Flag::Direction => "min (lower is better) or max (higher is better)",
            Flag::RefineAfter => "a whole number from 1 to 1000, e.g. --refine-after 3",
            Flag::PivotAfter => "a whole number from 1 to 1000, e.g. --pivot-after 5",
            Flag::ParkAfterPivots => "a whole number from 1 to 1000, e.g. --park-after-pivots 3",
            Flag::Review => "a command exiting 0 to approve (\"sh review.sh\"), or claude, codex or gemini",
            Flag::MaxVetoes => "a whole number from 1 to 1000, e.g. --max-vetoes 3",
            Flag::Plan => "a Markdown checklist or a prd.json, e.g. --plan PLAN.md",
            Flag::StoryIterations => "a whole number from 1 to 10000, e.g. --story-iterations 8",
            Flag::Scope => "a path or glob the model may change, e.g. --scope \"src/**\"",
        }
    }
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// Refuse to start unless the loop runs in the strict tier ([`crate::checks::strict`]).
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
}

/// Why the text does not start a loop. Each message says what to type instead.
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
    #[error("{flag} needs a value: {hint}", hint = flag.value_hint())]
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

impl LoopRequest {
    /// Parses the raw argument text of `/for-loop`.
    pub(crate) fn parse(raw: &str) -> Result<LoopRequest, RequestError> {
        if matches!(raw.trim(), "--help" | "-h" | "help") {
            return Err(RequestError::HelpWanted);
        }
        let mut typed = TypedFlags::scan(raw)?;
        // The first mistake reported is metric mode's, then the task's, then each value's in turn.
        let metric = MetricFlags::take(&mut typed).settings()?;
        let review = review_settings(&mut typed, metric.is_some())?;
        let plan = plan_file(&mut typed, metric.is_some())?;
        let story_iterations = typed.take(Flag::StoryIterations);
        let story_iterations = match (story_iterations, &plan) {
            (Some(value), None) => {
                return Err(bad_value(
                    Flag::StoryIterations,
                    &value,
                    "it belongs to a plan: add --plan FILE".into(),
                ));
            }
            (value, _) => {
                value.map(|v| check_count(Flag::StoryIterations, &v, MAX_MAX_ITERATIONS)).transpose()?
            }
        };
        let boxes = match (typed.take(Flag::NoTick), &plan) {
            (Some(_), None) => return Err(RequestError::WithoutPlan { flag: Flag::NoTick }),
            (Some(_), Some(_)) => PlanBoxes::Left,
            (None, _) => PlanBoxes::Ticked,
        };
        let task = match (task_text(raw, &typed.cuts), &plan) {
            // The plan is the task.
            (Err(RequestError::EmptyTask), Some(file)) => {
                format!("Work through the stories of the plan {file}, one at a time, in order.")
            }
            (task, _) => task?,
        };
        Ok(LoopRequest {
            task,
            verify: typed.take(Flag::Verify).map(|v| check_command(Flag::Verify, &v)).transpose()?,
            completion_promise: typed.take(Flag::CompletionPromise).map(|p| check_promise(&p)).transpose()?,
            max_iterations: typed
                .take(Flag::MaxIterations)
                .map(|v| check_max_iterations(&v))
                .transpose()?
                .unwrap_or(DEFAULT_MAX_ITERATIONS),
            verify_timeout_secs: typed
                .take(Flag::VerifyTimeout)
                .map(|v| check_verify_timeout(&v))
                .transpose()?
                .unwrap_or(DEFAULT_VERIFY_TIMEOUT_SECS),
            protect: typed.protect.iter().map(|p| check_protect(p)).collect::<Result<_, _>>()?,
            max_same_failures: typed
                .take(Flag::MaxSameFailures)
                .map(|v| check_count(Flag::MaxSameFailures, &v, 1_000))
                .transpose()?
                .unwrap_or(crate::checks::stall::DEFAULT_MAX_SAME_FAILURES),
            max_time_secs: typed.take(Flag::MaxTime).map(|v| check_max_time(&v)).transpose()?,
            escalation: typed
                .take(Flag::Escalate)
                .map(|v| check_escalation(&v))
                .transpose()?
                .unwrap_or(crate::checks::stall::DEFAULT_ESCALATION.to_vec()),
            checkpoint: typed.take(Flag::Checkpoint).is_some(),
            require_strict: typed.take(Flag::RequireStrict).is_some(),
            max_tokens: typed.take(Flag::MaxTokens).map(|v| check_max_tokens(&v)).transpose()?,
            notify: typed.take(Flag::Notify).map(|v| check_command(Flag::Notify, &v)).transpose()?,
            metric,
            allow_test_edits: typed.take(Flag::AllowTestEdits).is_some(),
            review,
            plan,
            story_iterations,
            scope: check_scope(&typed.scope)?,
            boxes,
        })
    }
}

/// The reviewer asked for, checked against the flags it needs: a check to review, and no
/// metric mode (where a kept change is judged by its number).
fn review_settings(typed: &mut TypedFlags, metric: bool) -> Result<Option<ReviewSettings>, RequestError> {
    let max_vetoes = typed.take(Flag::MaxVetoes);
    let Some(command) = typed.take(Flag::Review) else {
        return match max_vetoes {
            Some(value) => {
                Err(bad_value(Flag::MaxVetoes, &value, "it belongs to a reviewer: add --review CMD".into()))
            }
            None => Ok(None),
        };
    };
    let command = check_command(Flag::Review, &command)?;
    // A plan's stories carry checks of their own (a story without one is refused at start).
    if typed.values[Flag::Verify.index()].is_none() && typed.values[Flag::Plan.index()].is_none() {
        let why = "a reviewer can only veto a check that passed: add --verify CMD (or --plan FILE)";
        return Err(bad_value(Flag::Review, &command, why.into()));
    }
    if metric {
        let why =
            "metric mode keeps a change by its number, not a reviewer's word: drop --review or --metric";
        return Err(bad_value(Flag::Review, &command, why.into()));
    }
    let max_vetoes = max_vetoes
        .map(|v| check_count(Flag::MaxVetoes, &v, 1_000))
        .transpose()?
        .unwrap_or(crate::checks::review::DEFAULT_MAX_VETOES);
    Ok(Some(ReviewSettings { command, max_vetoes }))
}

/// The plan file asked for; not in metric mode, where a change is kept by its number.
fn plan_file(typed: &mut TypedFlags, metric: bool) -> Result<Option<String>, RequestError> {
    let Some(file) = typed.take(Flag::Plan) else { return Ok(None) };
    let file = check_command(Flag::Plan, &file)?;
    if metric {
        let why =
            "a plan's stories are done when their checks pass, not by a number: drop --plan or --metric";
        return Err(bad_value(Flag::Plan, &file, why.into()));
    }
    Ok(Some(file))
}

/// Our flags as typed: their values, unchecked, and where they are in the text.
struct TypedFlags {
    /// The value of each flag given, in the order of [`Flag::ALL`]; a switch's is empty.
    values: [Option<String>; Flag::ALL.len()],
    /// Every `--protect` value, in order.
    protect: Vec<String>,
    /// Every `--scope` value, in order.
    scope: Vec<String>,
    /// The flags with their values, to cut out of the task.
    cuts: Vec<Range<usize>>,
}

impl TypedFlags {
    /// Finds our flags in `raw` and reads their values; refuses a near miss, a flag given twice,
    /// a missing value and a switch given one.
    fn scan(raw: &str) -> Result<TypedFlags, RequestError> {
        let mut typed = TypedFlags {
            values: Default::default(),
            protect: Vec::new(),
            scope: Vec::new(),
            cuts: Vec::new(),
        };
        let mut scanner = Scanner { text: raw, pos: 0 };
        while let Some(word) = scanner.next_word() {
            let Some(flag_word) = FlagWord::classify(&raw[word.clone()])? else {
                continue;
            };
            let flag = flag_word.flag;
            let slot = &mut typed.values[flag.index()];
            if slot.is_some() && !flag.repeatable() {
                return Err(RequestError::Duplicate { flag });
            }
            let (value, end) = scanner.flag_value(&flag_word, word.clone())?;
            match flag {
                Flag::Protect => typed.protect.push(value.clone()),
                Flag::Scope => typed.scope.push(value.clone()),
                _ => {}
            }
            *slot = Some(value);
            typed.cuts.push(word.start..end);
            scanner.pos = end;
        }
        Ok(typed)
    }

    fn take(&mut self, flag: Flag) -> Option<String> {
        self.values[flag.index()].take()
    }
}

/// The task: the text with our flags cut out, unquoted when it is one quoted string.
fn task_text(raw: &str, cuts: &[Range<usize>]) -> Result<String, RequestError> {
    let task = unquote_whole(cut_out(raw, cuts).trim());
    if is_blank(&task) {
        return Err(RequestError::EmptyTask);
    }
    if task.len() > MAX_TASK_BYTES {
        return Err(RequestError::TaskTooLong(task.len()));
    }
    Ok(task)
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
    fn take(typed: &mut TypedFlags) -> MetricFlags {
        MetricFlags {
            command: typed.take(Flag::Metric),
            target: typed.take(Flag::Target),
            guard: typed.take(Flag::Guard),
            runs: typed.take(Flag::MetricRuns),
            min_gain: typed.take(Flag::MinGain),
            direction: typed.take(Flag::Direction),
            refine_after: typed.take(Flag::RefineAfter),
            pivot_after: typed.take(Flag::PivotAfter),
            park_after_pivots: typed.take(Flag::ParkAfterPivots),
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
        let count = |flag: Flag, value: Option<String>, most: u32, default: u32| {
            value.map(|v| check_count(flag, &v, most)).transpose().map(|n| n.unwrap_or(default))
        };
        Ok(Some(MetricSettings {
            command,
            target,
            direction,
            guard,
            runs: count(Flag::MetricRuns, self.runs, 100, keep::DEFAULT_METRIC_RUNS)?,
            min_gain: self
                .min_gain
                .as_deref()
                .map(|g| g.parse().map_err(|why| bad_value(Flag::MinGain, g, why)))
                .transpose()?
                .unwrap_or_default(),
            refine_after: count(Flag::RefineAfter, self.refine_after, 1_000, keep::DEFAULT_REFINE_AFTER)?,
            pivot_after: count(Flag::PivotAfter, self.pivot_after, 1_000, keep::DEFAULT_PIVOT_AFTER)?,
            park_after_pivots: count(
                Flag::ParkAfterPivots,
                self.park_after_pivots,
                1_000,
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

fn bad_value(flag: Flag, value: &str, why: String) -> RequestError {
    RequestError::BadValue { flag, value: value.into(), why }
}

/// A word recognised as one of our flags.
struct FlagWord {
    flag: Flag,
    /// Byte offset of the value inside the word, for `--flag=value`.
    inline_value: Option<usize>,
}

impl FlagWord {
    /// `Ok(None)`: the word is task text. `Err`: it is a flag we do not know, a near miss.
    fn classify(word: &str) -> Result<Option<FlagWord>, RequestError> {
        let (name, inline_value) = match word.find('=') {
            Some(eq) => (&word[..eq], Some(eq + 1)),
            None => (word, None),
        };
        if let Some(flag) = Flag::ALL.iter().find(|f| f.name() == name) {
            return Ok(Some(FlagWord { flag: *flag, inline_value }));
        }
        if let Some(nearest) = near_miss(name) {
            return Err(RequestError::UnknownFlag { given: word.to_string(), nearest });
        }
        Ok(None)
    }
}

/// The flag a word was probably meant to be, if it is close to one of ours.
fn near_miss(word: &str) -> Option<Flag> {
    let bare = word.trim_start_matches(['-', '\u{2013}', '\u{2014}']);
    let dashes = &word[..word.len() - bare.len()];
    if dashes.is_empty() || bare.len() < 3 {
        return None;
    }
    let normal = bare.to_lowercase().replace('_', "-");
    for flag in Flag::ALL {
        let name = &flag.name()[2..];
        // `-verify`, `—verify` (an autocorrected double hyphen), `--Verify`, `--max_iterations`.
        if normal == name {
            return Some(flag);
        }
    }
    if dashes != "--" {
        return None;
    }
    Flag::ALL
        .into_iter()
        .filter_map(|flag| {
            let name = &flag.name()[2..];
            let distance = levenshtein(&normal, name);
            let prefix = normal.len() >= 3 && name.starts_with(&normal);
            (distance <= 2 || prefix).then_some((distance, flag))
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, flag)| flag)
}

/// Walks the raw text word by word. A word that opens a quote whose closing quote ends a word is
/// one word, spaces included, so a quoted task is never searched for flags.
struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl Scanner<'_> {
    fn next_word(&mut self) -> Option<Range<usize>> {
        let rest = &self.text[self.pos..];
        let start = self.pos + (rest.len() - rest.trim_start().len());
        if start >= self.text.len() {
            self.pos = start;
            return None;
        }
        let end = match quoted_span(&self.text[start..]) {
            Some(len) => start + len,
            None => word_end(self.text, start),
        };
        self.pos = end;
        Some(start..end)
    }

    /// Reads the value of the flag in `word`: none for a switch, else its `=value` or the
    /// next word; returns it with the offset where it ends.
    fn flag_value(&self, flag_word: &FlagWord, word: Range<usize>) -> Result<(String, usize), RequestError> {
        let flag = flag_word.flag;
        match (flag.is_switch(), flag_word.inline_value) {
            (true, Some(_)) => Err(RequestError::BadValue {
                flag,
                value: self.text[word].to_string(),
                why: format!("it takes no value: write just {flag}"),
            }),
            (true, None) => Ok((String::new(), word.end)),
            (false, Some(offset)) => self.value_at(word.start + offset, flag, true),
            (false, None) => self.value_at(word.end, flag, false),
        }
    }

    /// Reads a flag's value starting at `at`; returns it unquoted with the offset where it ends.
    fn value_at(&self, at: usize, flag: Flag, inline: bool) -> Result<(String, usize), RequestError> {
        let rest = &self.text[at..];
        let start = if inline { at } else { at + (rest.len() - rest.trim_start().len()) };
        if start >= self.text.len() || (inline && word_end(self.text, start) == start) {
            return Err(RequestError::MissingValue { flag });
        }
        let value_text = &self.text[start..];
        if let Some(open) = value_text.chars().next().filter(|c| closing_quote(*c).is_some()) {
            return match quoted_span(value_text) {
                Some(len) => Ok((unquote(&value_text[..len]), start + len)),
                None if value_text[open.len_utf8()..].contains(closing_quote(open).unwrap_or(open)) => {
                    // Closed, but glued to more text (`"a"b`): take the word as it is.
                    let end = word_end(self.text, start);
                    Ok((self.text[start..end].to_string(), end))
                }
                None => Err(RequestError::UnclosedQuote { flag }),
            };
        }
        let end = word_end(self.text, start);
        let value = &self.text[start..end];
        if !inline && FlagWord::classify(value).ok().flatten().is_some() {
            return Err(RequestError::MissingValue { flag });
        }
        Ok((value.to_string(), end))
    }
}

fn word_end(text: &str, start: usize) -> usize {
    text[start..].find(char::is_whitespace).map_or(text.len(), |i| start + i)
}

fn closing_quote(open: char) -> Option<char> {
    match open {
        '"' => Some('"'),
        '\'' => Some('\''),
        '\u{201c}' => Some('\u{201d}'),
        '\u{2018}' => Some('\u{2019}'),
        _ => None,
    }
}

/// If `text` starts with a quote that is closed by a quote followed by whitespace or the end,
/// the byte length of that quoted span. Inside double quotes a backslash escapes the next char.
///
/// A double quote closes at the first unescaped double quote, as in a shell, so a stray `"` in a
/// task cannot swallow the flags after it. A single quote closes at the first `'` that ends a
/// word, because apostrophes inside words (`user's`) are prose, not closing quotes.
fn quoted_span(text: &str) -> Option<usize> {
    let open = text.chars().next()?;
    let close = closing_quote(open)?;
    let strict = matches!(open, '"' | '\u{201c}');
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        if c == '\\' && open == '"' {
            chars.next();
        } else if c == close {
            let end = i + c.len_utf8();
            if text[end..].chars().next().is_none_or(char::is_whitespace) {
                return Some(end);
            }
            if strict {
                return None;
            }
        }
    }
    None
}

/// Removes the outer quotes of a span found by [`quoted_span`]. In double quotes `\"` and `\\`
/// stand for `"` and `\`, as in a shell; nothing else is touched.
fn unquote(span: &str) -> String {
    let open = span.chars().next().unwrap_or('"');
    let close = closing_quote(open).unwrap_or(open);
    let inner = &span[open.len_utf8()..span.len() - close.len_utf8()];
    if open != '"' {
        return inner.to_string();
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('"' | '\\')) {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// A task written wholly in quotes is the text inside them.
/// Whether `text` shows nothing: only whitespace (a quoted `"   "`, tabs, ideographic spaces)
/// and invisible format characters (zero-width spaces and joiners, byte-order marks).
fn is_blank(text: &str) -> bool {
    text.chars().all(|c| c.is_whitespace() || matches!(c, '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}'))
}

fn unquote_whole(task: &str) -> String {
    match quoted_span(task) {
        Some(len) if len == task.len() => unquote(task),
        _ => task.to_string(),
    }
}

/// The text without the cut ranges, each cut taking the whitespace just before it.
fn cut_out(raw: &str, cuts: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut kept_from = 0;
    for cut in cuts {
        let before = &raw[kept_from..cut.start];
        out.push_str(before.trim_end());
        kept_from = cut.end;
    }
    out.push_str(&raw[kept_from..]);
    out
}

fn check_command(flag: Flag, value: &str) -> Result<String, RequestError> {
    if value.trim().is_empty() {
        return Err(RequestError::MissingValue { flag });
    }
    Ok(value.to_string())
}

fn check_promise(value: &str) -> Result<String, RequestError> {
    let normal = crate::verdict::promise::normalize(value);
    if normal.is_empty() {
        return Err(RequestError::MissingValue { flag: Flag::CompletionPromise });
    }
    if normal.contains("<promise>") || normal.contains("</promise>") {
        return Err(RequestError::BadValue {
            flag: Flag::CompletionPromise,
            value: value.to_string(),
            why: "give only the phrase; for-loop adds the <promise> tags".into(),
        });
    }
    Ok(normal)
}

fn check_max_iterations(value: &str) -> Result<u32, RequestError> {
    let bad = |why: &str| RequestError::BadValue {
        flag: Flag::MaxIterations,
        value: value.to_string(),
        why: why.to_string(),
    };
    let n: u64 = value.parse().map_err(|_| bad("give a whole number from 1 to 10000"))?;
    match n {
        0 => Err(bad("it must be at least 1 (there is no unlimited mode)")),
        n => {
            u32::try_from(n).ok().filter(|n| *n <= MAX_MAX_ITERATIONS).ok_or_else(|| bad("the most is 10000"))
        }
    }
}

fn check_protect(value: &str) -> Result<String, RequestError> {
    let bad =
        |why: &str| RequestError::BadValue { flag: Flag::Protect, value: value.to_string(), why: why.into() };
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(RequestError::MissingValue { flag: Flag::Protect });
    }
    Protect::check(trimmed).map_err(|why| bad(&why))?;
    Ok(trimmed.to_string())
}

/// The `--scope` globs, each checked as a story's are ([`crate::checks::scope::check_glob`]).
fn check_scope(globs: &[String]) -> Result<Vec<String>, RequestError> {
    if globs.len() > crate::checks::scope::MAX_GLOBS {
        let why = format!("the most is {} --scope globs", crate::checks::scope::MAX_GLOBS);
        let value = globs[crate::checks::scope::MAX_GLOBS].clone();
        return Err(RequestError::BadValue { flag: Flag::Scope, value, why });
    }
    globs
        .iter()
        .map(|glob| {
            let trimmed = glob.trim();
            if trimmed.is_empty() {
                return Err(RequestError::MissingValue { flag: Flag::Scope });
            }
            crate::checks::scope::check_glob(trimmed).map_err(|why| RequestError::BadValue {
                flag: Flag::Scope,
                value: glob.clone(),
                why,
            })?;
            Ok(trimmed.to_string())
        })
        .collect()
}

fn check_count(flag: Flag, value: &str, most: u32) -> Result<u32, RequestError> {
    let bad = |why: String| RequestError::BadValue { flag, value: value.to_string(), why };
    match value.parse::<u64>() {
        Ok(0) => Err(bad("it must be at least 1".into())),
        Ok(n) => {
            u32::try_from(n).ok().filter(|n| *n <= most).ok_or_else(|| bad(format!("the most is {most}")))
        }
        Err(_) => Err(bad(format!("give a whole number from 1 to {most}"))),
    }
}

fn check_max_time(value: &str) -> Result<u64, RequestError> {
    let bad = |why: String| RequestError::BadValue { flag: Flag::MaxTime, value: value.to_string(), why };
    match parse_seconds(value) {
        Err(why) => Err(bad(why)),
        Ok(0) => Err(bad("it must be at least 1 second".into())),
        Ok(secs) if secs > 7 * 24 * 3_600 => Err(bad("the most is a week (168h)".into())),
        Ok(secs) => Ok(secs),
    }
}

fn check_max_tokens(value: &str) -> Result<u64, RequestError> {
    crate::host::usage::parse_tokens(value).map_err(|why| RequestError::BadValue {
        flag: Flag::MaxTokens,
        value: value.to_string(),
        why,
    })
}

fn check_escalation(value: &str) -> Result<Vec<u32>, RequestError> {
    let bad = || RequestError::BadValue {
        flag: Flag::Escalate,
        value: value.to_string(),
        why: "give three rising counts of repeated failures, e.g. 2,4,6".into(),
    };
    let counts: Vec<u32> =
        value.split(',').map(|n| n.trim().parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
    if counts.len() != 3 || counts[0] == 0 || counts.windows(2).any(|w| w[0] >= w[1]) {
        return Err(bad());
    }
    Ok(counts)
}

fn check_verify_timeout(value: &str) -> Result<u64, RequestError> {
    let bad =
        |why: String| RequestError::BadValue { flag: Flag::VerifyTimeout, value: value.to_string(), why };
    match parse_seconds(value) {
        Err(why) => Err(bad(why)),
        Ok(0) => Err(bad("it must be at least 1 second".into())),
        Ok(secs) if secs > MAX_VERIFY_TIMEOUT_SECS => {
            Err(bad(format!("the most is {MAX_VERIFY_TIMEOUT_SECS} seconds (1h)")))
        }
        Ok(secs) => Ok(secs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
            prop_assume!(!trimmed.is_empty());
            prop_assume!(quoted_span(trimmed).is_none_or(|len| len != trimmed.len()));
            let raw = format!("{task} --verify \"cargo test\"");
            prop_assert_eq!(LoopRequest::parse(&raw).unwrap().task, trimmed);
        }
    }
}
