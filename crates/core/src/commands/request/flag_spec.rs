//! Every option of every command, one row each: the name, the value it takes and its limits, the
//! default, the groups it belongs to, the help line and, where the docs say more, their meaning.
//!
//! It is a table rather than a match per property so that an option is added in one place: the
//! loop flags ([`Group::LOOP`]) are read through it by both front ends (`/for-loop`'s text in
//! [`super::text`], `loop-hook run`'s words in [`super::args`]), `run`'s own options, the options
//! of resume, rollback, report and strict and those of every `loop-hook` command line are looked
//! up in it by their command's group, the checks take their limits from it, the usage texts print
//! it ([`flag_lines`], [`option_entries`], [`run_entries`]), and so do the options tables of
//! `docs/usage.md` (`reference.rs`, a test). The other pages' flag tables are tested against
//! what it prints.

use std::fmt;
use std::fmt::Write as _;

use super::{
    DEFAULT_MAX_ITERATIONS, DEFAULT_VERIFY_TIMEOUT_SECS, MAX_MAX_ITERATIONS, MAX_METRIC_RUNS, MAX_RUN_SECS,
    MAX_STREAK, MAX_VERIFY_TIMEOUT_SECS,
};
use crate::checks::DEFAULT_MAX_VETOES;
use crate::checks::{DEFAULT_ESCALATION, DEFAULT_MAX_SAME_FAILURES};
use crate::metric::keep;
use crate::verdict::{DEFAULT_FEEDBACK_TOKENS, MAX_FEEDBACK_TOKENS, MIN_FEEDBACK_TOKENS};

/// One of the loop flags, named by its row in [`FLAGS`] (the order of the variants is the
/// order of the rows, which a test holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flag {
    Verify,
    CompletionPromise,
    MaxIterations,
    VerifyTimeout,
    Protect,
    MaxSameFailures,
    MaxTime,
    MaxTokens,
    Escalate,
    Checkpoint,
    Notify,
    AllowTestEdits,
    Plan,
    StoryIterations,
    NoTick,
    Scope,
    Review,
    MaxVetoes,
    RequireStrict,
    Metric,
    Target,
    Direction,
    Guard,
    MetricRuns,
    MinGain,
    RefineAfter,
    PivotAfter,
    ParkAfterPivots,
    OnLimit,
    BackgroundWait,
    FeedbackTokens,
    // The options of one command each, after the loop flags.
    Agent,
    AgentArg,
    Backoff,
    Json,
    Help,
    Resume,
    More,
    MoreTime,
    MoreTokens,
    Attempts,
    Parallel,
    NoSandbox,
    Apply,
    Attempt,
    Backlog,
    MaxMergeTries,
    RunId,
    Remote,
    Pick,
    Task,
    Merge,
    List,
    Session,
    Cwd,
    Host,
    JsonOutput,
    All,
    Yes,
    Open,
    Out,
    OptionsOnStdin,
    Project,
    ProjectApply,
    User,
    ExitZero,
}

/// The commands an option belongs to, as a set: a loop flag is read by `/for-loop` and by
/// `loop-hook run`, `--more` by `/for-loop:resume` and by `loop-hook run --resume`, `--session`
/// by every command line that acts on a session's loop.
///
/// The text typed after a slash command (`/for-loop:resume --more 5`) and the command line of
/// the `loop-hook` command it runs (`loop-hook resume --session ID`) are groups of their own:
/// the one is the user's words, the other the host's hook script's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group(u32);

impl Group {
    /// The loop settings: `/for-loop`'s text and `loop-hook run`'s words.
    pub(crate) const LOOP: Group = Group(1);
    /// `loop-hook run`'s own options.
    pub(crate) const RUN: Group = Group(1 << 1);
    /// The room a resumed loop is given (`/for-loop:resume`, `loop-hook run --resume`).
    pub(crate) const RESUME: Group = Group(1 << 2);
    /// The text typed after `/for-loop:rollback`.
    pub(crate) const ROLLBACK: Group = Group(1 << 3);
    /// The text typed after `/for-loop:report`.
    pub(crate) const REPORT: Group = Group(1 << 4);
    /// The text typed after `/for-loop:strict`.
    pub(crate) const STRICT: Group = Group(1 << 5);
    // The command lines of `loop-hook`'s commands, one group each.
    pub(crate) const START_LINE: Group = Group(1 << 6);
    pub(crate) const STOP_HOOK_LINE: Group = Group(1 << 7);
    pub(crate) const PROMPT_HOOK_LINE: Group = Group(1 << 8);
    pub(crate) const SESSION_START_LINE: Group = Group(1 << 9);
    pub(crate) const GUARD_LINE: Group = Group(1 << 10);
    pub(crate) const SHOWN_LINE: Group = Group(1 << 11);
    pub(crate) const CANCEL_LINE: Group = Group(1 << 12);
    pub(crate) const HANDOFF_LINE: Group = Group(1 << 13);
    pub(crate) const RESUME_LINE: Group = Group(1 << 14);
    pub(crate) const ROLLBACK_LINE: Group = Group(1 << 15);
    pub(crate) const STATUS_LINE: Group = Group(1 << 16);
    pub(crate) const REPORT_LINE: Group = Group(1 << 17);
    pub(crate) const DOCTOR_LINE: Group = Group(1 << 18);
    pub(crate) const STRICT_LINE: Group = Group(1 << 19);
    pub(crate) const HELP_LINE: Group = Group(1 << 20);
    /// The loop flags of metric mode, which `docs/metric.md` explains.
    pub(crate) const METRIC: Group = Group(1 << 21);

    /// The command lines that name the loop they act on by its session (`--session`).
    pub(crate) const ON_A_SESSION: Group = Group::START_LINE
        .and(Group::CANCEL_LINE)
        .and(Group::HANDOFF_LINE)
        .and(Group::RESUME_LINE)
        .and(Group::ROLLBACK_LINE)
        .and(Group::STATUS_LINE)
        .and(Group::REPORT_LINE)
        .and(Group::SHOWN_LINE);
    /// The command lines that read or act for one host (`--host`).
    pub(crate) const FOR_A_HOST: Group = Group::START_LINE
        .and(Group::STOP_HOOK_LINE)
        .and(Group::PROMPT_HOOK_LINE)
        .and(Group::SESSION_START_LINE)
        .and(Group::CANCEL_LINE)
        .and(Group::HANDOFF_LINE)
        .and(Group::RESUME_LINE)
        .and(Group::ROLLBACK_LINE)
        .and(Group::STATUS_LINE)
        .and(Group::REPORT_LINE)
        .and(Group::DOCTOR_LINE);
    /// The command lines a slash command runs, whose refusals a host may abort on (`--exit-zero`).
    pub(crate) const SLASH_COMMANDS: Group =
        Group::ON_A_SESSION.and(Group::DOCTOR_LINE).and(Group::STRICT_LINE);
    /// Every command line of `loop-hook` but `run`, which reads its own words.
    pub(crate) const LINES: Group =
        Group::FOR_A_HOST.and(Group::SLASH_COMMANDS).and(Group::GUARD_LINE).and(Group::HELP_LINE);

    /// Each group and the command whose options it is, as its user types it; `--exit-zero` and
    /// the like are named by the commands of their shared group.
    pub(crate) const COMMANDS: [(Group, &'static str); 21] = [
        (Group::LOOP, "/for-loop"),
        (Group::RESUME, "/for-loop:resume"),
        (Group::ROLLBACK, "/for-loop:rollback"),
        (Group::REPORT, "/for-loop:report"),
        (Group::STRICT, "/for-loop:strict"),
        (Group::RUN, "loop-hook run"),
        (Group::START_LINE, "loop-hook start"),
        (Group::STOP_HOOK_LINE, "loop-hook stop-hook"),
        (Group::PROMPT_HOOK_LINE, "loop-hook prompt-hook"),
        (Group::SESSION_START_LINE, "loop-hook session-start"),
        (Group::GUARD_LINE, "loop-hook guard"),
        (Group::SHOWN_LINE, "loop-hook shown"),
        (Group::CANCEL_LINE, "loop-hook cancel"),
        (Group::HANDOFF_LINE, "loop-hook handoff"),
        (Group::RESUME_LINE, "loop-hook resume"),
        (Group::ROLLBACK_LINE, "loop-hook rollback"),
        (Group::STATUS_LINE, "loop-hook status"),
        (Group::REPORT_LINE, "loop-hook report"),
        (Group::DOCTOR_LINE, "loop-hook doctor"),
        (Group::STRICT_LINE, "loop-hook strict"),
        (Group::HELP_LINE, "loop-hook help"),
    ];

    pub(crate) const fn and(self, other: Group) -> Group {
        Group(self.0 | other.0)
    }

    pub(crate) const fn has(self, other: Group) -> bool {
        self.0 & other.0 != 0
    }
}

impl Flag {
    /// The flag's row of the table.
    pub(crate) fn spec(self) -> &'static FlagSpec {
        &FLAGS[self as usize]
    }

    pub(crate) fn name(self) -> &'static str {
        self.spec().name
    }

    /// The loop flag spelt exactly `name` (`--verify`), if there is one.
    pub(crate) fn named(name: &str) -> Option<Flag> {
        Flag::named_in(Group::LOOP, name)
    }

    /// The option of `group` spelt exactly `name`, long (`--yes`) or short (`-y`).
    pub(crate) fn named_in(group: Group, name: &str) -> Option<Flag> {
        Flag::all_in(group).find(|flag| flag.spec().name == name || flag.spec().short == Some(name))
    }

    /// Every loop flag, in the table's order.
    pub(crate) fn all() -> impl Iterator<Item = Flag> {
        Flag::all_in(Group::LOOP)
    }

    /// Every option of `group`, in the table's order.
    pub(crate) fn all_in(group: Group) -> impl Iterator<Item = Flag> {
        FLAGS.iter().filter(move |spec| spec.groups.has(group)).map(|spec| spec.flag)
    }

    /// Flags that take no value.
    pub(crate) fn is_switch(self) -> bool {
        matches!(self.spec().value, Value::Switch)
    }
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a flag takes after its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    /// Nothing: the flag is given or not.
    Switch,
    /// A whole number from 1 to `most`.
    Count { most: u32 },
    /// A duration (`300`, `90s`, `5m`, `2h`) from one second to `most` seconds.
    Duration { most: u64 },
    /// A token count, with `k` or `M` for thousands or millions.
    Tokens,
    /// A whole number of tokens from `least` to `most`.
    Budget { least: u32, most: u32 },
    /// Three rising counts, comma-separated.
    Rising,
    /// A shell command, kept as written.
    Command,
    /// Text the flag's own check reads (a phrase, a glob, a comparison, a file); says what.
    Text(&'static str),
    /// A duration (`300`, `90s`, `5m`, `2h`) with no limit of its own.
    AnyDuration,
    /// Any word, dashes and all: the agent CLI's own options are passed this way.
    AnyWord,
    /// A name, when the next word is not an option (`--resume [LOOP]`); says what.
    OptionalName(&'static str),
    /// A count from 1 to `most`, when the next word is digits (`--parallel [N]`).
    OptionalCount { most: u32 },
    /// The name of an agent host the host layer knows ([`Host::ALL`]).
    Host,
}

impl Value {
    /// What the value is, in words, limits included.
    fn describe(self) -> String {
        match self {
            Value::Switch => "nothing: it is a switch".into(),
            Value::Count { most } => format!("a whole number from 1 to {most}"),
            Value::Duration { most } => format!("a duration from 1s to {}", short_duration(most)),
            Value::Tokens => "a token count (k and M multiply)".into(),
            Value::Budget { least, most } => format!("a number of tokens from {least} to {most}"),
            Value::Rising => "three rising counts".into(),
            Value::Command => "a command".into(),
            Value::Text(what) | Value::OptionalName(what) => what.into(),
            Value::AnyDuration => "a duration (300, 90s, 5m, 2h)".into(),
            Value::AnyWord => "any word, passed on as it is".into(),
            Value::OptionalCount { most } => format!("nothing, or a whole number from 1 to {most}"),
            Value::Host => format!("an agent host: {}", host_list()),
        }
    }
}

/// `3600` as `1h`, `300` as `5m`, `90` as `90s`.
pub(crate) fn short_duration(secs: u64) -> String {
    match secs {
        s if s >= 3_600 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// What a flag is when it is not given, as the help and the docs show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Default {
    /// Not set: `none` in the docs.
    Unset,
    /// A switch not given: `off` in the docs.
    Off,
    Number(u64),
    Numbers(&'static [u32]),
    /// One of the words the flag takes.
    Word(&'static str),
}

impl Default {
    /// The default as the help shows it after `default:`; `None` when it is unset or off.
    pub(crate) fn shown(self) -> Option<String> {
        match self {
            Default::Unset | Default::Off => None,
            Default::Number(n) => Some(n.to_string()),
            Default::Numbers(ns) => Some(ns.iter().map(u32::to_string).collect::<Vec<_>>().join(",")),
            Default::Word(word) => Some(word.to_string()),
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlagSpec {
    pub(crate) flag: Flag,
    /// `--verify`.
    pub(crate) name: &'static str,
    /// The one-letter spelling, if any (`-h`).
    pub(crate) short: Option<&'static str>,
    /// The commands that take it; a loop flag unless the row says otherwise.
    pub(crate) groups: Group,
    /// What the value is called in the usage (`CMD`, `N`); empty for a switch.
    pub(crate) placeholder: &'static str,
    pub(crate) value: Value,
    /// A value as a user would write it, for the hint when none is given.
    pub(crate) example: &'static str,
    /// Each time the flag is given adds a value (`--protect`, `--scope`).
    pub(crate) repeatable: bool,
    pub(crate) default: Default,
    /// One sentence; each docs table that lists the flag begins its meaning with it (the
    /// final period may give way to more of the sentence there).
    pub(crate) help: &'static str,
    /// Its meaning in the docs' tables, in Markdown, when the docs say more than the help line;
    /// it begins with the help line. Only the docs' generator reads it, which is a test
    /// (`reference.rs`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) docs: &'static str,
}

impl FlagSpec {
    const fn takes(flag: Flag, name: &'static str, placeholder: &'static str, value: Value) -> FlagSpec {
        FlagSpec {
            flag,
            name,
            short: None,
            groups: Group::LOOP,
            placeholder,
            value,
            example: "",
            repeatable: false,
            default: Default::Unset,
            help: "",
            docs: "",
        }
    }

    const fn switch(flag: Flag, name: &'static str) -> FlagSpec {
        FlagSpec { default: Default::Off, ..FlagSpec::takes(flag, name, "", Value::Switch) }
    }

    const fn e_g(self, example: &'static str) -> FlagSpec {
        FlagSpec { example, ..self }
    }

    const fn or(self, default: Default) -> FlagSpec {
        FlagSpec { default, ..self }
    }

    /// The option of these commands rather than a loop flag.
    const fn of(self, groups: Group) -> FlagSpec {
        FlagSpec { groups, ..self }
    }

    const fn short(self, short: &'static str) -> FlagSpec {
        FlagSpec { short: Some(short), ..self }
    }

    const fn repeatable(self) -> FlagSpec {
        FlagSpec { repeatable: true, ..self }
    }

    const fn help(self, help: &'static str) -> FlagSpec {
        FlagSpec { help, ..self }
    }

    const fn docs(self, docs: &'static str) -> FlagSpec {
        FlagSpec { docs, ..self }
    }

    /// `--verify CMD`, or `--checkpoint` for a switch.
    pub(crate) fn usage(&self) -> String {
        if self.placeholder.is_empty() {
            self.name.to_string()
        } else {
            format!("{} {}", self.name, self.placeholder)
        }
    }

    /// What the flag needs after it, for a refusal that says what to type.
    pub(crate) fn hint(&self) -> String {
        let what = self.value.describe();
        if self.example.is_empty() { what } else { format!("{what}, e.g. {} {}", self.name, self.example) }
    }
}

/// Every option: the loop flags first, then each command's own. Limits and defaults come from the
/// constants the checks use.
pub(crate) const FLAGS: [FlagSpec; 66] = [
    FlagSpec::takes(Flag::Verify, "--verify", "CMD", Value::Command)
        .e_g("\"cargo test\"")
        .help("Shell command that decides done.")
        .docs(
            "Shell command that decides done. It runs at every stop, in the directory where the \
             loop started, with stdin closed, detached from the hook and without the hosts' and \
             for-loop's variables (`CLAUDE*`, `GEMINI_*`, `CODEX_*`, `FOR_LOOP_*`, ...), as your \
             own shell would run it; `FOR_LOOP_KEEP_ENV=NAME,NAME` in the hook's environment \
             keeps the ones it needs \
             ([integrity.md](integrity.md#a-check-that-cannot-tell-it-is-judged)).",
        ),
    FlagSpec::takes(Flag::CompletionPromise, "--completion-promise", "TEXT", Value::Text("a phrase"))
        .e_g("\"ALL DONE\"")
        .help("The final message must also contain <promise>TEXT</promise>.")
        .docs(
            "The final message must also contain `<promise>TEXT</promise>`. Only on hosts whose \
             hooks receive the final message: Claude Code, Gemini CLI and Codex.",
        ),
    FlagSpec::takes(Flag::MaxIterations, "--max-iterations", "N", Value::Count { most: MAX_MAX_ITERATIONS })
        .e_g("30")
        .or(Default::Number(DEFAULT_MAX_ITERATIONS as u64))
        .help("The agent gets at most N turns: the first, plus N−1 re-injections.")
        .docs(
            "The agent gets at most N turns: the first, plus N−1 re-injections. N ≥ 1; there is \
             no unlimited mode.",
        ),
    FlagSpec::takes(
        Flag::VerifyTimeout,
        "--verify-timeout",
        "SECS",
        Value::Duration { most: MAX_VERIFY_TIMEOUT_SECS },
    )
    .e_g("300 (or 5m)")
    .or(Default::Number(DEFAULT_VERIFY_TIMEOUT_SECS))
    .help("After this long, verify's whole process group is killed and the turn counts as failed (\"timed out\").")
    .docs(
        "After this long, verify's whole process group is killed and the turn counts as failed \
         (\"timed out\"). Accepts `90s`, `5m`, `1h`; at most 1 h.",
    ),
    FlagSpec::takes(Flag::Protect, "--protect", "PATH_OR_GLOB", Value::Text("a path or glob"))
        .e_g("\"tests/**\"")
        .repeatable()
        .help("More files that belong to the check.")
        .docs(
            "More files that belong to the check: `tests/**`, `tests/{unit,e2e}/**`, \
             `**/test_*.py`, a directory. Repeatable. A pattern for-loop cannot honour is \
             refused.",
        ),
    FlagSpec::takes(Flag::MaxSameFailures, "--max-same-failures", "K", Value::Count { most: MAX_STREAK })
        .e_g("8")
        .or(Default::Number(DEFAULT_MAX_SAME_FAILURES as u64))
        .help("Parks the loop after K identical failures in a row, or after K stops in a row with no change in the working tree."),
    FlagSpec::takes(Flag::MaxTime, "--max-time", "DURATION", Value::Duration { most: MAX_RUN_SECS })
        .e_g("45m")
        .help("A wall-clock budget (45m, 2h).")
        .docs(
            "A wall-clock budget (`45m`, `2h`). When it is spent the loop is parked, not deleted.",
        ),
    FlagSpec::takes(Flag::MaxTokens, "--max-tokens", "N", Value::Tokens)
        .e_g("2000000 (or 2M, 500k)")
        .help("A token budget (2000000, 500k, 2M) for the session's model usage since the loop started.")
        .docs(
            "A token budget (`2000000`, `500k`, `2M`) for the session's model usage since the \
             loop started. When it is passed the loop is parked. Claude Code only: it is read \
             from the transcript.",
        ),
    FlagSpec::takes(Flag::Escalate, "--escalate", "A,B,C", Value::Rising)
        .e_g("2,4,6")
        .or(Default::Numbers(&DEFAULT_ESCALATION))
        .help("At how many identical failures in a row the re-injection adds a note (A), asks for three hypotheses (B), and says to go back to the requirement (C)."),
    FlagSpec::switch(Flag::Checkpoint, "--checkpoint")
        .help("After each iteration, snapshots the working tree to refs/for-loop/<loop id>/<n> (git only).")
        .docs(
            "After each iteration, snapshots the working tree to `refs/for-loop/<loop id>/<n>` \
             (git only).",
        ),
    FlagSpec::takes(Flag::Notify, "--notify", "CMD", Value::Command)
        .e_g("'notify-send \"$FOR_LOOP_SUMMARY\"'")
        .help("Shell command run when the loop ends or parks (including /cancel-loop).")
        .docs(
            "Shell command run when the loop ends or parks (including `/cancel-loop`), with the \
             receipt as JSON on stdin and a one-line summary in `$FOR_LOOP_SUMMARY`. See \
             [Notifications](#notifications).",
        ),
    FlagSpec::switch(Flag::AllowTestEdits, "--allow-test-edits").help("The task itself changes or removes tests.")
    .docs(
        "The task itself changes or removes tests: the test suite is not protected by default, \
         and the test-count ratchet is off \
         ([integrity.md](integrity.md#what-the-model-cannot-do)).",
    ),
    FlagSpec::takes(Flag::Plan, "--plan", "FILE", Value::Text("a Markdown checklist or a prd.json"))
        .e_g("PLAN.md")
        .help("Works through the stories of a Markdown checklist or a prd.json, one at a time.")
        .docs(
            "Works through the stories of a Markdown checklist or a `prd.json`, one at a time \
             ([Plans](#plans)). The task text is optional.",
        ),
    FlagSpec::takes(
        Flag::StoryIterations,
        "--story-iterations",
        "K",
        Value::Count { most: MAX_MAX_ITERATIONS },
    )
    .e_g("8")
    .help("With --plan: parks the loop when one story has taken K stops without its check passing.")
    .docs(
        "With `--plan`: parks the loop when one story has taken K stops without its check \
         passing.",
    ),
    FlagSpec::switch(Flag::NoTick, "--no-tick").help(
        "With --plan: leaves the plan's boxes as you wrote them instead of ticking each story as it passes.",
    )
    .docs(
        "With `--plan`: leaves the plan's boxes as you wrote them instead of ticking each story \
         as it passes.",
    ),
    FlagSpec::takes(Flag::Scope, "--scope", "GLOB", Value::Text("a path or glob the model may change"))
        .e_g("\"src/**\"")
        .repeatable()
        .help("The files the model may change.")
        .docs(
            "The files the model may change: `src/**`, `Cargo.toml`, a directory. Repeatable. A \
             pass that changed any other file does not count ([Scope](#scope)). Git only.",
        ),
    FlagSpec::takes(
        Flag::Review,
        "--review",
        "CMD",
        Value::Text("a command exiting 0 to approve, or claude, codex or gemini"),
    )
    .e_g("\"sh review.sh\"")
    .help("A reviewer run after a passing check, with the change as JSON on its stdin: exit 0 approves, anything else vetoes.")
    .docs(
        "A reviewer run after a passing check, with the change as JSON on its stdin: exit 0 \
         approves, anything else vetoes. Exactly `claude`, `codex` or `gemini` is the [built-in \
         reviewer](#a-reviewer).",
    ),
    FlagSpec::takes(Flag::MaxVetoes, "--max-vetoes", "N", Value::Count { most: MAX_STREAK })
        .e_g("3")
        .or(Default::Number(DEFAULT_MAX_VETOES as u64))
        .help("Vetoes in a row without an approval after which the loop is parked."),
    // For a run it asks for the run's own sandbox as well.
    FlagSpec::switch(Flag::RequireStrict, "--require-strict")
        .of(Group::LOOP.and(Group::RUN))
        .help("Refuses to start a loop outside the strict tier.")
        .docs(
            "Refuses to start a loop outside the strict tier \
             ([integrity.md](integrity.md#strict-mode-on-claude-code)). \
             `FOR_LOOP_REQUIRE_STRICT=1` in the hook's environment does the same.",
        ),
    FlagSpec::takes(Flag::Metric, "--metric", "CMD", Value::Text("a command that prints a number"))
        .of(Group::LOOP.and(Group::METRIC))
        .e_g("\"sh bench.sh\"")
        .help("The command whose output gives the number."),
    FlagSpec::takes(Flag::Target, "--target", "COMPARISON", Value::Text("a comparison"))
        .of(Group::LOOP.and(Group::METRIC))
        .e_g("\"<= 120\"")
        .help("When the loop is done (<= 120); sets the direction."),
    FlagSpec::takes(
        Flag::Direction,
        "--direction",
        "min|max",
        Value::Text("min (lower is better) or max (higher is better)"),
    )
        .of(Group::LOOP.and(Group::METRIC))
    .e_g("min")
    .help("Which way is better, when there is no target."),
    FlagSpec::takes(
        Flag::Guard,
        "--guard",
        "CMD",
        Value::Text("a command that must pass for a change to be kept"),
    )
        .of(Group::LOOP.and(Group::METRIC))
    .e_g("\"cargo test\"")
    .help("A command that must pass, with verify, for a change to be kept."),
    FlagSpec::takes(Flag::MetricRuns, "--metric-runs", "N", Value::Count { most: MAX_METRIC_RUNS })
        .of(Group::LOOP.and(Group::METRIC))
        .e_g("5")
        .or(Default::Number(keep::DEFAULT_METRIC_RUNS as u64))
        .help("Runs per measurement; the median counts."),
    FlagSpec::takes(Flag::MinGain, "--min-gain", "X", Value::Text("a number or a percentage"))
        .of(Group::LOOP.and(Group::METRIC))
        .e_g("1%")
        .or(Default::Number(0))
        .help("How much a change must beat the best by: a number, or a percentage such as 1%."),
    FlagSpec::takes(Flag::RefineAfter, "--refine-after", "N", Value::Count { most: MAX_STREAK })
        .of(Group::LOOP.and(Group::METRIC))
        .e_g("3")
        .or(Default::Number(keep::DEFAULT_REFINE_AFTER as u64))
        .help("Discards in a row before a \"refine\" note."),
    FlagSpec::takes(Flag::PivotAfter, "--pivot-after", "N", Value::Count { most: MAX_STREAK })
        .of(Group::LOOP.and(Group::METRIC))
        .e_g("5")
        .or(Default::Number(keep::DEFAULT_PIVOT_AFTER as u64))
        .help("Discards in a row before a \"pivot\" note."),
    FlagSpec::takes(Flag::ParkAfterPivots, "--park-after-pivots", "N", Value::Count { most: MAX_STREAK })
        .of(Group::LOOP.and(Group::METRIC))
        .e_g("3")
        .or(Default::Number(keep::DEFAULT_PARK_AFTER_PIVOTS as u64))
        .help("Pivots without a keep before the loop is parked."),
    FlagSpec::takes(
        Flag::OnLimit,
        "--on-limit",
        "wait|handoff",
        Value::Text("wait (parked until the reset) or handoff (handed over to loop-hook run)"),
    )
    .e_g("handoff")
    .or(Default::Word("wait"))
    .help("What a usage limit in the session does: wait parks the loop until the reset, handoff hands it over to loop-hook run, which waits out the window itself.")
    .docs(
        "What a usage limit in the session does: wait parks the loop until the reset, handoff \
         hands it over to loop-hook run, which waits out the window itself ([Handing a loop \
         over](run.md#handing-a-loop-over)).",
    ),
    FlagSpec::takes(
        Flag::BackgroundWait,
        "--background-wait",
        "DURATION",
        Value::Duration { most: MAX_RUN_SECS },
    )
    .e_g("1h")
    .or(Default::Word("30m"))
    .help("How long stops are let through unjudged while the agent's own background work runs (a build it started in the background); after that the stop is judged anyway.")
    .docs(
        "How long stops are let through unjudged while the agent's own background work runs (a \
         build it started in the background); after that the stop is judged anyway. Claude Code \
         and Qwen Code, whose Stop events list that work ([Background \
         work](#background-work-and-the-hosts-cap)).",
    ),
    FlagSpec::takes(
        Flag::FeedbackTokens,
        "--feedback-tokens",
        "N",
        Value::Budget { least: MIN_FEEDBACK_TOKENS, most: MAX_FEEDBACK_TOKENS },
    )
    .e_g("2000")
    .or(Default::Number(DEFAULT_FEEDBACK_TOKENS as u64))
    .help("The budget of each re-injection, in tokens at 3 characters a token: the failures the check reported, then its output, cut to fit.")
    .docs(
        "The budget of each re-injection, in tokens at 3 characters a token: the failures the \
         check reported, then its output, cut to fit. From 500 to 3166: the hosts cut a hook's \
         prompt at 10,000 characters, and the re-injection stays under 9,500 ([What the agent \
         sees](#what-the-agent-sees)).",
    ),
    // `loop-hook run`'s own options, in the order its usage lists them.
    FlagSpec::takes(Flag::Agent, "--agent", "NAME", Value::Text("an agent CLI"))
        .of(Group::RUN)
        .e_g("claude")
        .help("The agent CLI to run: claude, gemini or codex (default: the first installed, in that order)."),
    FlagSpec::takes(Flag::AgentArg, "--agent-arg", "ARG", Value::AnyWord)
        .of(Group::RUN)
        .e_g("--model=x")
        .repeatable()
        .help(
            "Passed to the agent CLI, once per argument; a permission flag among them replaces the \
             default permissions (claude: --permission-mode acceptEdits; gemini: --approval-mode \
             auto_edit; codex: --sandbox workspace-write).",
        ),
    FlagSpec::takes(Flag::Backoff, "--backoff", "D", Value::AnyDuration)
        .of(Group::RUN)
        .e_g("30s")
        .help(
            "First wait after a rate or usage limit that gives no reset time (default 30s, doubling \
             to at most 30m).",
        ),
    FlagSpec::switch(Flag::Json, "--json").of(Group::RUN).help(
        "One JSON event per line on stdout (on a terminal without it, a live status line on stderr: \
         iteration, time, last verify, streaks, waits for a limit).",
    ),
    FlagSpec::switch(Flag::Help, "--help").of(Group::RUN.and(Group::LINES)).short("-h").help("Prints the usage."),
    FlagSpec::takes(Flag::Resume, "--resume", "[LOOP]", Value::OptionalName("a run loop's name"))
        .of(Group::RUN)
        .e_g("20260101-x")
        .help(
            "Continues the newest (or the named) parked or capped run loop; LOOP may also name a loop \
             running in a session (its session id or loop id, as `loop-hook status --all` lists \
             them), which is handed over to the run: the same ledger, iteration, budgets, story and \
             reviewer, the session's stops let through.",
        ),
    // The room a resumed loop is given: `/for-loop:resume`, and `loop-hook run --resume`.
    FlagSpec::takes(Flag::More, "--more", "N", Value::Count { most: MAX_MAX_ITERATIONS })
        .of(Group::RUN.and(Group::RESUME))
        .e_g("10")
        .help("Iterations added to a loop resumed at its cap (default at a spent cap: 10)."),
    FlagSpec::takes(Flag::MoreTime, "--more-time", "D", Value::AnyDuration)
        .of(Group::RUN.and(Group::RESUME))
        .e_g("30m")
        .help("Time added to a loop resumed at its time budget (default at a spent budget: half the budget again)."),
    FlagSpec::takes(Flag::MoreTokens, "--more-tokens", "N", Value::Tokens)
        .of(Group::RUN.and(Group::RESUME))
        .e_g("500k")
        .help("Tokens added to a loop resumed at its token budget (default at a spent budget: half the budget again)."),
    FlagSpec::takes(Flag::Attempts, "--attempts", "K", Value::Count { most: MAX_ATTEMPTS })
        .of(Group::RUN)
        .e_g("3")
        .help(
            "Best-of-K (in a git repository): K independent loops on the task, one after another, \
             each in a git work tree of its own under the loop store, started from this working tree \
             as it is; the first verified one wins and ends the run. Your working tree is not \
             changed; every attempt is kept as a ref, refs/for-loop/attempts/RUN/N, and the work \
             trees are removed.",
        ),
    FlagSpec::takes(Flag::Parallel, "--parallel", "[N]", Value::OptionalCount { most: MAX_ATTEMPTS })
        .of(Group::RUN)
        .e_g("3")
        .help(
            "With --attempts: runs the attempts at once; the first verified one stops the others \
             (their agents are killed, their loops parked). With --backlog: at most N agents at once \
             (default 1).",
        ),
    FlagSpec::switch(Flag::NoSandbox, "--no-sandbox").of(Group::RUN).help(
        "Runs the agent outside its sandbox, on purpose. By default each agent run is sandboxed with \
         bubblewrap where the machine allows it: the project (or the attempt's work tree) writable, \
         the loop store, for-loop, the host's settings and git's hooks and config read-only, nothing \
         it starts outliving its run. Where bubblewrap cannot start, the run says so first and goes \
         on without.",
    ),
    FlagSpec::takes(Flag::Apply, "--apply", "[RUN]", Value::OptionalName("a best-of-K run's name"))
        .of(Group::RUN)
        .e_g("20260101-x")
        .help(
            "Applies the winning attempt's changes of the newest (or the named) best-of-K run (or \
             what landed of a backlog run) to this working tree; refused, changing nothing, when \
             local changes are in the way; taken back when verify then fails here. Nothing is staged \
             or committed.",
        ),
    FlagSpec::takes(Flag::Attempt, "--attempt", "N", Value::Count { most: MAX_ATTEMPTS })
        .of(Group::RUN)
        .e_g("2")
        .help(
            "With --attempts K and --run-id ID: runs only attempt N of a best-of-K run spread over \
             machines (one CI job each), from a clean checkout, then pushes its end state (a commit \
             on HEAD, with the attempt's claim in its message) to refs/for-loop/attempts/ID/N on the \
             remote.",
        ),
    FlagSpec::takes(Flag::Backlog, "--backlog", "FILE", Value::Text("a plan whose stories are the tasks"))
        .of(Group::RUN)
        .e_g("TODO.md")
        .help(
            "A backlog (in a git repository): the stories of FILE, a plan as --plan reads it, worked \
             as independent tasks, each a loop of its own in a git work tree of its own started from \
             this working tree as it is, with its story's check (or --verify) as its verify. A task \
             whose check passes joins a merge queue, which merges it onto \
             refs/for-loop/backlog/RUN/integration and lands it only when its check, the check of \
             every task landed before it and --verify pass on the merged tree; a conflict or a broken \
             check sends it back to its agent with what failed. Your working tree is not changed: \
             `--apply RUN` brings what landed, `--resume RUN` goes on after Ctrl-C or a crash. Each \
             task's end state is kept as refs/for-loop/backlog/RUN/tasks/N.",
        ),
    FlagSpec::takes(Flag::MaxMergeTries, "--max-merge-tries", "K", Value::Count { most: MAX_MERGE_TRIES })
        .of(Group::RUN)
        .e_g("2")
        .help(
            "With --backlog: merges a task may fail (a conflict, a broken check) before it parks as \
             merge_failed (default 3).",
        ),
    FlagSpec::takes(Flag::RunId, "--run-id", "ID", Value::Text("a run's id"))
        .of(Group::RUN)
        .e_g("r1")
        .help(
            "The run the attempts or tasks across machines belong to: its id, the same on every \
             machine (letters, digits, '-', '_', '.').",
        ),
    FlagSpec::takes(Flag::Remote, "--remote", "REMOTE", Value::Text("a git remote"))
        .of(Group::RUN)
        .e_g("origin")
        .help("The git remote attempts are pushed to and picked from (default origin)."),
    FlagSpec::takes(Flag::Pick, "--pick", "ID", Value::Text("a run's id"))
        .of(Group::RUN)
        .e_g("r1")
        .help(
            "Fetches run ID's attempts from the remote, checks each out fresh, re-runs --verify on it \
             (what an attempt claims is not trusted), and names the first that verifies here, by \
             number; a missing attempt is reported. Run it on the commit the attempts started from.",
        ),
    FlagSpec::takes(Flag::Task, "--task", "N", Value::Count { most: u32::MAX })
        .of(Group::RUN)
        .e_g("1")
        .help(
            "With --backlog FILE and --run-id ID: works only task N of a backlog spread over machines \
             (one CI job each), from a clean checkout, then pushes its end state (a commit on HEAD, \
             with the task's claim in its message) to refs/for-loop/backlog/ID/tasks/N on the remote.",
        ),
    FlagSpec::switch(Flag::Merge, "--merge").of(Group::RUN).help(
        "With --backlog FILE and --run-id ID: fetches the run's pushed tasks and merges them one at a \
         time onto HEAD, each landing only when its check, every landed task's check and --verify \
         pass on the merged tree (no claim is trusted); the result is kept and pushed as \
         refs/for-loop/backlog/ID/integration.",
    ),
    FlagSpec::switch(Flag::List, "--list").of(Group::RUN).help(
        "With --backlog FILE: names its tasks and their checks (a CI job matrix), refusing a backlog a \
         run would refuse.",
    ),
    // The command lines of `loop-hook`'s other commands.
    FlagSpec::takes(Flag::Session, "--session", "ID", Value::Text("a session id"))
        .of(Group::ON_A_SESSION)
        .e_g("abc123")
        .help(
            "The host's session id (status and report also take the loop id `status --all` prints; \
             default: $CLAUDE_CODE_SESSION_ID, $FOR_LOOP_SESSION_ID, $GEMINI_SESSION_ID, \
             $CODEX_THREAD_ID or $COPILOT_AGENT_SESSION_ID). Without one, start on antigravity or \
             cursor leaves the loop to be claimed by the conversation whose transcript holds its \
             token, and the other commands act on the loop started in this directory (by --host's \
             agent, when given).",
        ),
    FlagSpec::takes(Flag::Cwd, "--cwd", "DIR", Value::Text("a directory"))
        .of(Group::START_LINE)
        .e_g(".")
        .help("Where verify runs (default: the current directory)."),
    FlagSpec::takes(Flag::Host, "--host", "NAME", Value::Host)
        .of(Group::FOR_A_HOST)
        .e_g("claude-code")
        .help("The agent host"),
    FlagSpec::switch(Flag::JsonOutput, "--json")
        .of(Group::STATUS_LINE.and(Group::DOCTOR_LINE))
        .help("Machine-readable output: the status, or doctor's checks, as one JSON object."),
    FlagSpec::switch(Flag::All, "--all").of(Group::STATUS_LINE).help("Lists every loop, not only this session's."),
    // `/for-loop:rollback`'s text.
    FlagSpec::switch(Flag::Yes, "--yes").of(Group::ROLLBACK).short("-y").help("Restores the checkpoint."),
    // `/for-loop:report`'s text, and `loop-hook report`.
    FlagSpec::switch(Flag::Open, "--open")
        .of(Group::REPORT.and(Group::REPORT_LINE))
        .help("Opens the report in a browser."),
    FlagSpec::takes(Flag::Out, "--out", "FILE", Value::Text("a file name"))
        .of(Group::REPORT.and(Group::REPORT_LINE))
        .e_g("loop.html")
        .help("Where the report is written (default: report.html next to the loop's state)."),
    FlagSpec::switch(Flag::OptionsOnStdin, "--options-on-stdin")
        .of(Group::REPORT_LINE)
        .help("Reads --out and --open from stdin, as typed after /for-loop:report."),
    // `/for-loop:strict`'s text, and `loop-hook strict`.
    FlagSpec::switch(Flag::Project, "--project")
        .of(Group::STRICT.and(Group::STRICT_LINE))
        .help("Writes the settings into this project's .claude/settings.json."),
    FlagSpec::switch(Flag::ProjectApply, "--apply").of(Group::STRICT).help("The same as --project."),
    FlagSpec::switch(Flag::User, "--user")
        .of(Group::STRICT.and(Group::STRICT_LINE))
        .help("Writes the settings into the user's settings."),
    FlagSpec::switch(Flag::ExitZero, "--exit-zero")
        .of(Group::SLASH_COMMANDS)
        .help("Exits 0 even when refused (for slash commands whose host aborts on failure)."),
];

/// Best-of-K: the most attempts a run may have (`--attempts`, `--attempt`, `--parallel`).
pub(crate) const MAX_ATTEMPTS: u32 = 16;

/// More merge tries than this is a loop of its own, not a queue.
pub(crate) const MAX_MERGE_TRIES: u32 = 20;

/// The hosts `--host` takes, as a help line lists them: `claude-code (default), ... or qwen-code`.
fn host_list() -> String {
    use crate::host::Host;
    let names: Vec<String> =
        Host::ALL
            .iter()
            .map(|&host| {
                if host == Host::default() {
                    format!("{} (default)", host.name())
                } else {
                    host.name().into()
                }
            })
            .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl FlagSpec {
    /// The help line as the usage shows it: a host's takes the list of hosts the host layer
    /// knows, so that a host added there is listed here too.
    pub(crate) fn help_line(&self) -> String {
        match self.value {
            Value::Host => format!("{}: {}.", self.help, host_list()),
            _ => self.help.to_string(),
        }
    }
}

/// Where an option's help begins in a command's `Options:` section.
const HELP_COLUMN: usize = 16;
/// Where it begins in `loop-hook run --help`, whose options have longer names.
const RUN_HELP_COLUMN: usize = 20;
/// The widest a line of the help may be.
const HELP_WIDTH: usize = 100;

/// The `Options:` entries of the command lines in `group`, in the table's order, their help at
/// column 16. `--help` is left out: the usage shows it.
pub(crate) fn option_entries(group: Group) -> String {
    entries(Flag::all_in(group).filter(|flag| *flag != Flag::Help), HELP_COLUMN)
}

/// `loop-hook run`'s own options, as its usage lists them before the loop flags (which
/// [`flag_lines`] lists after them, `--require-strict` among them).
pub(crate) fn run_entries() -> String {
    let own =
        Flag::all_in(Group::RUN).filter(|flag| *flag != Flag::Help && !flag.spec().groups.has(Group::LOOP));
    entries(own, RUN_HELP_COLUMN)
}

/// One entry per flag: the option and its value's name, then its help line wrapped under 100
/// columns and continued at `column`, begun on the next line when the name leaves no room.
fn entries(flags: impl Iterator<Item = Flag>, column: usize) -> String {
    let mut out = String::new();
    for spec in flags.map(Flag::spec) {
        let mut line = format!("  {}", spec.usage());
        if line.len() + 2 > column {
            out.push_str(&line);
            out.push('\n');
            line = String::new();
        }
        line = format!("{line:column$}");
        let mut width = column;
        let mut first = true;
        for word in spec.help_line().split(' ') {
            if !first && width + 1 + word.chars().count() > HELP_WIDTH {
                out.push_str(line.trim_end());
                out.push('\n');
                line = format!("{:column$}{word}", "");
                width = column + word.chars().count();
            } else {
                if !first {
                    line.push(' ');
                    width += 1;
                }
                line.push_str(word);
                width += word.chars().count();
            }
            first = false;
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.pop();
    out
}

/// The flags as a usage text lists them, one a line: `  --verify CMD  help [default: X]`.
/// The docs test reads these lines from the binary's help, so their shape is kept plain.
pub(crate) fn flag_lines() -> String {
    let loop_flags = || Flag::all().map(Flag::spec);
    let width = loop_flags().map(|spec| spec.usage().chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for spec in loop_flags() {
        let _ = write!(out, "  {:width$}  {}", spec.usage(), spec.help);
        if let Some(default) = spec.default.shown() {
            let _ = write!(out, " [default: {default}]");
        }
        if spec.repeatable {
            out.push_str(" [repeatable]");
        }
        out.push('\n');
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flag_names_its_own_row() {
        for (row, spec) in FLAGS.iter().enumerate() {
            assert_eq!(spec.flag as usize, row, "{} is out of order", spec.name);
            for group in
                [Group::LOOP, Group::RUN, Group::RESUME, Group::ROLLBACK, Group::REPORT, Group::STRICT]
            {
                if spec.groups.has(group) {
                    assert_eq!(Flag::named_in(group, spec.name), Some(spec.flag), "{}", spec.name);
                }
            }
        }
        assert_eq!(Flag::named("--agent"), None, "a run option is no loop flag");
        assert_eq!(Flag::named_in(Group::RUN, "--apply"), Some(Flag::Apply));
        assert_eq!(Flag::named_in(Group::STRICT, "--apply"), Some(Flag::ProjectApply));
        assert_eq!(Flag::named_in(Group::ROLLBACK, "-y"), Some(Flag::Yes));
    }

    #[test]
    fn every_row_is_complete_and_plain() {
        for spec in &FLAGS {
            assert!(spec.name.starts_with("--") && !spec.help.is_empty(), "{spec:?}");
            assert!(!spec.help.contains(" ["), "{}: ` [` begins the help's notes", spec.name);
            assert_eq!(spec.flag.is_switch(), spec.placeholder.is_empty(), "{}", spec.name);
            assert_eq!(spec.flag.is_switch(), spec.example.is_empty(), "{}", spec.name);
            assert_eq!(spec.flag.is_switch(), spec.default == Default::Off, "{}", spec.name);
        }
    }

    #[test]
    fn limits_and_defaults_come_from_the_constants() {
        let max = Flag::MaxIterations.spec();
        assert_eq!(max.value, Value::Count { most: MAX_MAX_ITERATIONS });
        assert_eq!(
            max.hint(),
            format!("a whole number from 1 to {MAX_MAX_ITERATIONS}, e.g. --max-iterations 30")
        );
        assert_eq!(
            Flag::VerifyTimeout.spec().hint(),
            "a duration from 1s to 1h, e.g. --verify-timeout 300 (or 5m)"
        );
        assert_eq!(Flag::Escalate.spec().default.shown().as_deref(), Some("2,4,6"));
        assert_eq!(Flag::Checkpoint.spec().hint(), "nothing: it is a switch");
        let lines = flag_lines();
        assert!(lines.contains(&format!("re-injections. [default: {DEFAULT_MAX_ITERATIONS}]")), "{lines}");
        assert_eq!(lines.lines().count(), Flag::all().count());
        assert!(!lines.contains("--agent"), "the loop flags' lines list no command's own option");
    }

    #[test]
    fn durations_are_shown_in_their_largest_whole_unit() {
        assert_eq!(short_duration(3_600), "1h");
        assert_eq!(short_duration(7 * 24 * 3_600), "168h");
        assert_eq!(short_duration(300), "5m");
        assert_eq!(short_duration(90), "90s");
    }
}
