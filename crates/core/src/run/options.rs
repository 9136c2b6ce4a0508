//! The words after `loop-hook run`, read as a shell hands them over: `--name value` or
//! `--name=value`, `--` before task text that starts with a dash, and the rest is the task.
//!
//! `run`'s own options are rows of the option table ([`Group::RUN`]) read here; the loop flags
//! are handed to `/for-loop`'s reader of the same table ([`LoopFlags::read`]), which checks them
//! into the same [`LoopRequest`] the text gives. Every word that looks like an option is one: an
//! option neither `run` nor the table knows is refused, naming the nearest known one. It never
//! becomes part of the task, where a mistyped `--max-iteration 3` would silently leave the loop
//! at its default cap.

use std::ffi::OsString;
use std::time::Duration;

use lexopt::prelude::*;

use super::sandbox::SandboxAsked;
use crate::commands::ResumeOptions;
use crate::commands::{Flag, Group, MAX_MERGE_TRIES, Value as kind};
use crate::commands::{LoopFlags, LoopRequest, RequestError};
use crate::host::Agent;
use crate::support::text::nearest::nearest;

/// What `loop-hook run` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunOptions {
    /// The positional words: what the agent is asked to do.
    pub task: String,
    /// The loop flags as typed, checked when the loop is asked for ([`RunOptions::loop_request`]).
    pub loop_flags: LoopFlags,
    pub agent: Option<Agent>,
    pub agent_args: Vec<String>,
    pub json: bool,
    pub backoff: Option<Duration>,
    /// `Some("")`: resume the newest run loop; `Some(id)`: that one.
    pub resume: Option<String>,
    /// With `--resume`: the room to add, as `/for-loop:resume` takes it.
    pub more: ResumeOptions,
    /// Best-of-K: how many independent attempts.
    pub attempts: Option<u32>,
    pub parallel: bool,
    /// `Some("")`: apply the newest best-of-K winner; `Some(id)`: that run's.
    pub apply: Option<String>,
    /// Best-of-K across machines: run only this attempt of the K, named by `run_id`, and push its
    /// end state to `remote` ([`super::fleet`]).
    pub attempt: Option<u32>,
    pub run_id: Option<String>,
    pub remote: Option<String>,
    /// Re-check the pushed attempts of this run and pick the winner ([`super::pick`]).
    pub pick: Option<String>,
    /// `--no-sandbox` or `--require-strict`: what was asked of the agent's sandbox.
    pub sandbox: SandboxAsked,
    pub help: bool,
    /// `--backlog FILE`: the plan whose stories are the backlog's independent tasks.
    pub backlog: Option<String>,
    /// `--parallel N` with `--backlog`: at most this many agents at once.
    pub parallel_count: Option<u32>,
    /// `--max-merge-tries K` with `--backlog`: merges a task may fail before it parks.
    pub max_merge_tries: Option<u32>,
    /// Set by a backlog run for one task's loop, never on the command line: the task's check,
    /// which is the loop's verify in place of the run's.
    pub task_check: Option<String>,
    /// The words as given, kept so that a backlog run resumed later starts its tasks not
    /// started yet with the same options.
    pub words: Words,
    /// A backlog across machines: `--task N`, `--merge` or `--list`.
    pub fleet: Option<Fleet>,
}

/// What a backlog across machines is asked: `--task N` works task N alone and pushes it,
/// `--merge` judges and merges the pushed tasks, `--list` names the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fleet {
    Task(u32),
    Merge,
    List,
}

/// The words of a command line, as text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Words(pub Vec<String>);

/// How an option of `run` itself takes its value, from the kind its row in the table gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    Value,
    /// Any word, dashes and all: the agent CLI's own options are passed this way.
    AnyValue,
    /// A name, when the next word is not an option (`--resume [LOOP]`).
    OptionalName,
    /// A number, when the next word is digits (`--parallel [N]`).
    OptionalCount,
}

impl Takes {
    fn of(flag: Flag) -> Takes {
        match flag.spec().value {
            kind::Switch => Takes::Nothing,
            kind::AnyWord => Takes::AnyValue,
            kind::OptionalName(_) => Takes::OptionalName,
            kind::OptionalCount { .. } => Takes::OptionalCount,
            _ => Takes::Value,
        }
    }
}

/// The name of the option `word` is (`--verify` for `--verify=x`), or `None` for task text. A
/// word is an option when it starts with a dash and its name (up to `=`) is one word; `-` alone,
/// `-5` and `- item` are text.
fn option_name(word: &str) -> Option<&str> {
    let rest = word.strip_prefix('-')?;
    if rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let name = match word.split_once('=') {
        Some((name, _)) if name.starts_with("--") => name,
        _ => word,
    };
    (!name.contains(char::is_whitespace)).then_some(name)
}

/// The options `run` reads and the loop flags it passes on, by name.
fn known_names() -> impl Iterator<Item = &'static str> {
    Flag::all_in(Group::RUN.and(Group::LOOP))
        .flat_map(|flag| std::iter::once(flag.name()).chain(flag.spec().short))
}

fn is_known(word: &str) -> bool {
    option_name(word).is_some_and(|name| known_names().any(|known| known == name))
}

fn unknown(word: &str) -> String {
    let name = option_name(word).unwrap_or(word);
    match nearest(name, known_names().filter(|name| name.starts_with("--"))) {
        Some(name) => format!(
            "`{word}` is not an option of loop-hook run: did you mean {name}? (`loop-hook run --help` lists them)"
        ),
        None => format!(
            "`{word}` is not an option of loop-hook run (`loop-hook run --help` lists them). For the agent \
             CLI, pass it with --agent-arg={word}; if it is part of the task, quote the task or put it after `--`"
        ),
    }
}

/// A word as text: the task, the agent's arguments and names are kept as text.
fn text(word: OsString) -> Result<String, String> {
    word.into_string().map_err(|word| format!("{word:?} is not UTF-8 text"))
}

/// The word lexopt just read an option from, whole: `word` (`--name`, `-x`) and what is left of it.
fn whole_word(word: &str, parser: &mut lexopt::Parser) -> Result<String, String> {
    Ok(match parser.optional_value().map(text).transpose()? {
        Some(rest) if word.starts_with("--") => format!("{word}={rest}"),
        Some(rest) => format!("{word}{rest}"),
        None => word.to_string(),
    })
}

/// The value of the option `name` that `parser` just returned: its `=value`, else the next word
/// unless that is an option (`--agent --json` forgot the agent), or any word for `--agent-arg`.
fn value(parser: &mut lexopt::Parser, name: &str, takes: Takes) -> Result<String, String> {
    let next = match parser.optional_value() {
        Some(value) => Some(value),
        None => parser.try_raw_args().and_then(|mut rest| {
            rest.next_if(|word| takes == Takes::AnyValue || !word.to_str().is_some_and(is_known))
        }),
    };
    text(next.ok_or_else(|| format!("{name} needs a value, e.g. {name}=VALUE or {name} VALUE"))?)
}

/// The name after `--resume` or `--apply`, when the next word is not an option.
fn optional_name(parser: &mut lexopt::Parser) -> Result<String, String> {
    let next = match parser.optional_value() {
        Some(value) => Some(value),
        None => parser.try_raw_args().and_then(|mut rest| {
            rest.next_if(|word| word.to_str().is_some_and(|w| option_name(w).is_none()))
        }),
    };
    next.map(text).transpose().map(Option::unwrap_or_default)
}

/// The number after `--parallel`, when it is given with `=` or the next word is digits.
fn optional_count(parser: &mut lexopt::Parser) -> Result<Option<String>, String> {
    let next = match parser.optional_value() {
        Some(value) => Some(value),
        None => parser.try_raw_args().and_then(|mut rest| {
            rest.next_if(|word| {
                word.to_str().is_some_and(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()))
            })
        }),
    };
    next.map(text).transpose()
}

impl RunOptions {
    /// Parses the words after `run`. `run`'s own options are taken out, the loop flags are read
    /// through `/for-loop`'s flag table, and every other word is the task.
    pub(crate) fn parse(args: Vec<OsString>) -> Result<RunOptions, String> {
        let words = Words(args.iter().map(|word| word.to_string_lossy().into_owned()).collect());
        let mut parser = lexopt::Parser::from_args(args);
        let mut options = RunOptions { words, ..RunOptions::default() };
        let mut task: Vec<String> = Vec::new();
        while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
            // The word as typed, for the names and for dashed words that are task text.
            let word = match arg {
                Value(word) => {
                    task.push(text(word)?);
                    continue;
                }
                Long(name) => format!("--{name}"),
                Short(letter) => format!("-{letter}"),
            };
            let Some(name) = option_name(&word) else {
                // `-5`, `- item` or `--a b`: task text, which lexopt took for an option.
                task.push(whole_word(&word, &mut parser)?);
                continue;
            };
            if let Some(flag) = Flag::named_in(Group::RUN, name) {
                options.take(flag, name, &mut parser)?;
            } else if !options.loop_flags.read(name, &mut parser, is_known).map_err(|e| e.to_string())? {
                return Err(unknown(&whole_word(&word, &mut parser)?));
            }
        }
        options.task = task.join(" ");
        Ok(options)
    }

    /// The loop the run starts: its task and loop flags, checked as `/for-loop` checks them.
    /// `--task N`, `--merge` or `--list`, each asking for something else: one of them.
    fn fleet_mode(&mut self, asked: Fleet) -> Result<(), String> {
        if self.fleet.is_some_and(|given| given != asked) {
            return Err("--task N, --merge and --list each ask for something else: give one".into());
        }
        self.fleet = Some(asked);
        Ok(())
    }

    pub(crate) fn loop_request(&self) -> Result<LoopRequest, RequestError> {
        let mut request = LoopRequest::from_args(&self.task, &self.loop_flags)?;
        if let Some(check) = &self.task_check {
            request.verify = Some(check.clone());
        }
        Ok(request)
    }

    /// Records one of `run`'s own options.
    fn take(&mut self, flag: Flag, name: &str, parser: &mut lexopt::Parser) -> Result<(), String> {
        let takes = Takes::of(flag);
        if takes == Takes::Nothing && parser.optional_value().is_some() {
            // A switch given a value (`--json=yes`) is refused rather than read as on or off.
            return Err(format!("{name} takes no value: write just {name}"));
        }
        match flag {
            Flag::Agent => {
                let agent = value(parser, name, takes)?;
                self.agent = Some(
                    Agent::from_name(&agent)
                        .ok_or_else(|| format!("unknown agent `{agent}`: use claude, gemini or codex"))?,
                );
            }
            Flag::AgentArg => self.agent_args.push(value(parser, name, takes)?),
            Flag::Json => self.json = true,
            Flag::Help => self.help = true,
            Flag::Backoff => {
                let text = value(parser, name, takes)?;
                let secs = crate::support::text::duration::parse_seconds(&text)
                    .map_err(|e| format!("--backoff {text}: {e}"))?;
                self.backoff = Some(Duration::from_secs(secs));
            }
            Flag::Resume => self.resume = Some(optional_name(parser)?),
            Flag::Apply => self.apply = Some(optional_name(parser)?),
            // Passed on as a typed value, never turned back into text for a second parser.
            Flag::More | Flag::MoreTime | Flag::MoreTokens => {
                self.more.take(flag, &value(parser, name, takes)?)?;
            }
            Flag::Parallel => {
                self.parallel = true;
                if let Some(text) = optional_count(parser)? {
                    let most = super::attempts::MAX_ATTEMPTS;
                    self.parallel_count = Some(attempt_count(&text).ok_or_else(|| {
                        format!("--parallel {text}: give how many agents may work at once, from 1 to {most}")
                    })?);
                }
            }
            Flag::NoSandbox | Flag::RequireStrict => {
                let asked = if flag == Flag::NoSandbox { SandboxAsked::Off } else { SandboxAsked::Required };
                if self.sandbox != SandboxAsked::Default && self.sandbox != asked {
                    return Err("--no-sandbox and --require-strict contradict each other: give one".into());
                }
                self.sandbox = asked;
            }
            Flag::Backlog
            | Flag::MaxMergeTries
            | Flag::Task
            | Flag::Merge
            | Flag::List
            | Flag::Attempts
            | Flag::Attempt
            | Flag::RunId
            | Flag::Remote
            | Flag::Pick => self.take_fleet(flag, name, takes, parser)?,
            other => {
                return Err(format!("`{other}` is known but not read by loop-hook run: please report it"));
            }
        }
        Ok(())
    }

    /// Records one of the options of several agents' runs: best of K and a backlog.
    fn take_fleet(
        &mut self,
        flag: Flag,
        name: &str,
        takes: Takes,
        parser: &mut lexopt::Parser,
    ) -> Result<(), String> {
        match flag {
            Flag::Backlog => self.backlog = Some(value(parser, name, takes)?),
            Flag::MaxMergeTries => {
                let text = value(parser, name, takes)?;
                let tries = text.parse::<u32>().ok().filter(|k| (1..=MAX_MERGE_TRIES).contains(k));
                self.max_merge_tries = Some(tries.ok_or_else(|| {
                    format!("--max-merge-tries {text}: give a number from 1 to {MAX_MERGE_TRIES}")
                })?);
            }
            Flag::Task => {
                let text = value(parser, name, takes)?;
                let n = text.parse::<u32>().ok().filter(|n| *n >= 1);
                let n =
                    n.ok_or_else(|| format!("--task {text}: give the task's number in the backlog, from 1"))?;
                self.fleet_mode(Fleet::Task(n))?;
            }
            Flag::Merge => self.fleet_mode(Fleet::Merge)?,
            Flag::List => self.fleet_mode(Fleet::List)?,
            Flag::Attempts => {
                let text = value(parser, name, takes)?;
                let most = super::attempts::MAX_ATTEMPTS;
                self.attempts = Some(
                    attempt_count(&text)
                        .ok_or_else(|| format!("--attempts {text}: give a number from 1 to {most}"))?,
                );
            }
            Flag::Attempt => {
                let text = value(parser, name, takes)?;
                self.attempt = Some(attempt_count(&text).ok_or_else(|| {
                    format!("--attempt {text}: give the attempt's number, from 1 to --attempts K")
                })?);
            }
            Flag::RunId => self.run_id = Some(value(parser, name, takes)?),
            Flag::Remote => self.remote = Some(value(parser, name, takes)?),
            Flag::Pick => self.pick = Some(value(parser, name, takes)?),
            other => {
                return Err(format!("`{other}` is known but not read by loop-hook run: please report it"));
            }
        }
        Ok(())
    }
}

/// A number of attempts (or an attempt's number), from 1 to the most a run may have.
fn attempt_count(text: &str) -> Option<u32> {
    text.parse::<u32>().ok().filter(|k| (1..=super::attempts::MAX_ATTEMPTS).contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::request::{Flag, MAX_MAX_ITERATIONS, MAX_TASK_BYTES};

    fn parse(args: &[&str]) -> Result<RunOptions, String> {
        RunOptions::parse(args.iter().map(OsString::from).collect())
    }

    fn request(args: &[&str]) -> LoopRequest {
        parse(args).unwrap().loop_request().unwrap()
    }

    /// Why the loop of a command line that parses is refused.
    fn refused(args: &[&str]) -> RequestError {
        parse(args).unwrap().loop_request().expect_err("refused")
    }

    #[test]
    fn own_options_come_out_and_the_rest_is_loop_text() {
        let options = parse(&[
            "fix the",
            "tests",
            "--verify",
            "cargo test --lib",
            "--agent",
            "codex",
            "--agent-arg",
            "-m",
            "--json",
        ])
        .unwrap();
        assert_eq!(options.task, "fix the tests");
        let loop_request = options.loop_request().unwrap();
        assert_eq!(
            (loop_request.task.as_str(), loop_request.verify.as_deref()),
            ("fix the tests", Some("cargo test --lib"))
        );
        assert_eq!(options.agent, Some(Agent::Codex));
        assert_eq!(options.agent_args, ["-m"]);
        assert!(options.json);
        assert_eq!(parse(&["--resume"]).unwrap().resume.as_deref(), Some(""));
        assert_eq!(parse(&["--resume", "run-x"]).unwrap().resume.as_deref(), Some("run-x"));
        assert!(parse(&["t", "--agent", "vim"]).is_err());
        assert!(parse(&["t", "--agent-arg"]).is_err());
        assert_eq!(parse(&["t", "--backoff", "2s"]).unwrap().backoff, Some(Duration::from_secs(2)));
        let best = parse(&["t", "--attempts", "3", "--parallel"]).unwrap();
        assert_eq!((best.attempts, best.parallel, best.task.as_str()), (Some(3), true, "t"));
        for bad in ["0", "-1", "x", "", "1000"] {
            assert!(parse(&["t", "--attempts", bad]).is_err(), "--attempts {bad:?}");
        }
        let strict = parse(&["t", "--require-strict"]).unwrap();
        assert_eq!((strict.sandbox, strict.loop_flags.is_empty()), (SandboxAsked::Required, true));
        assert_eq!(parse(&["t", "--no-sandbox"]).unwrap().sandbox, SandboxAsked::Off);
        assert!(parse(&["t", "--no-sandbox", "--require-strict"]).unwrap_err().contains("contradict"));
        assert_eq!(parse(&["--apply"]).unwrap().apply.as_deref(), Some(""));
        assert_eq!(parse(&["--apply", "20260101-x"]).unwrap().apply.as_deref(), Some("20260101-x"));
        let more = parse(&["--resume", "run-1", "--more", "5", "--more-time", "1h"]).unwrap();
        assert_eq!(
            (more.resume.as_deref(), more.more.iterations, more.more.time_secs),
            (Some("run-1"), Some(5), Some(3_600))
        );
        assert!(parse(&["--resume", "--more", "0"]).is_err());
        assert!(parse(&["--resume", "--more-time"]).is_err());
    }

    #[test]
    fn every_option_takes_its_value_after_an_equals_sign_too() {
        let spaced = parse(&[
            "t",
            "--agent",
            "gemini",
            "--agent-arg",
            "--model=x",
            "--backoff",
            "5s",
            "--attempts",
            "2",
            "--verify",
            "make check",
            "--max-iterations",
            "4",
        ])
        .unwrap();
        let joined = parse(&[
            "t",
            "--agent=gemini",
            "--agent-arg=--model=x",
            "--backoff=5s",
            "--attempts=2",
            "--verify=make check",
            "--max-iterations=4",
        ])
        .unwrap();
        // The same meaning from other words: equal but for the words kept as typed.
        assert_ne!(spaced.words, joined.words);
        let meaning = |options: &RunOptions| RunOptions { words: Words::default(), ..options.clone() };
        assert_eq!(meaning(&spaced), meaning(&joined));
        assert_eq!(joined.agent_args, ["--model=x"]);
        assert_eq!(joined.task, "t");
        let loop_request = request(&["t", "--verify=make check", "--max-iterations=4"]);
        assert_eq!(
            (loop_request.task.as_str(), loop_request.verify.as_deref(), loop_request.max_iterations),
            ("t", Some("make check"), 4)
        );
        assert_eq!(parse(&["--resume=run-2"]).unwrap().resume.as_deref(), Some("run-2"));
        assert_eq!(parse(&["--apply=r"]).unwrap().apply.as_deref(), Some("r"));
        assert_eq!(parse(&["--resume", "--more=3"]).unwrap().more.iterations, Some(3));
    }

    #[test]
    fn an_agent_option_never_becomes_task_text() {
        for args in [&["fix it", "--agent-arg=--model=x"][..], &["fix it", "--agent-arg", "--model=x"]] {
            let options = parse(args).unwrap();
            assert_eq!(options.task, "fix it", "{args:?}");
            assert_eq!(options.agent_args, ["--model=x"], "{args:?}");
            assert!(options.loop_flags.is_empty(), "{args:?}: {:?}", options.loop_flags);
        }
        let many = parse(&["t", "--agent-arg", "--json", "--agent-arg=-p"]).unwrap();
        assert_eq!(
            (many.agent_args.as_slice(), many.json),
            (&["--json".to_string(), "-p".into()][..], false)
        );
    }

    #[test]
    fn an_unknown_option_is_refused_with_the_nearest_known_one() {
        for (args, nearest) in [
            (&["fix it", "--max-iteration", "3"][..], "--max-iterations"),
            (&["fix it", "--max-iteration=3"], "--max-iterations"),
            (&["fix it", "--verfy", "true"], "--verify"),
            (&["fix it", "--agent-args", "-m"], "--agent-arg"),
            (&["fix it", "--atempts", "2"], "--attempts"),
            (&["fix it", "-json"], "--json"),
            (&["--resum"], "--resume"),
        ] {
            let error = parse(args).unwrap_err();
            assert!(error.contains(&format!("did you mean {nearest}?")), "{args:?}: {error}");
        }
        for args in [&["fix it", "--model", "x"][..], &["--frobnicate", "t"], &["t", "-x"]] {
            let error = parse(args).unwrap_err();
            assert!(error.contains("is not an option of loop-hook run"), "{args:?}: {error}");
            assert!(error.contains("--agent-arg="), "{args:?}: {error}");
        }
    }

    #[test]
    fn the_task_is_the_positional_text_byte_for_byte() {
        let hostile = r#"explain what --verify does; say "hi" to C:\temp, it's fine $(x)"#;
        let loop_request = request(&[hostile, "--verify", "true"]);
        assert_eq!(loop_request.task, hostile);
        assert_eq!(loop_request.verify.as_deref(), Some("true"));
        let spread = request(&["--verify", "true", "fix", "the", "login"]);
        assert_eq!(spread.task, "fix the login");
        let after_dashes = parse(&["--verify", "true", "--", "--max-iteration", "-x"]).unwrap();
        assert_eq!(after_dashes.task, "--max-iteration -x");
        assert_eq!(request(&["--verify", "true", "--", "--max-iteration"]).task, "--max-iteration");
        assert_eq!(parse(&["- item", "-", "-5"]).unwrap().task, "- item - -5");
    }

    #[test]
    fn loop_flag_values_keep_their_quotes_and_switches_take_none() {
        let loop_request = request(&["t", "--verify", r#"grep -q 'it''s' "f g""#, "--protect", "a b/**"]);
        assert_eq!(loop_request.verify.as_deref(), Some(r#"grep -q 'it''s' "f g""#));
        assert_eq!(loop_request.protect, ["a b/**"]);
        let scoped = request(&["t", "--scope", "src/**", "--scope=a b.rs"]);
        assert_eq!(scoped.scope, ["src/**", "a b.rs"], "unattended runs take the scope too");
        assert!(request(&["t", "--checkpoint"]).checkpoint);
        for args in [&["t", "--checkpoint=yes"][..], &["t", "--json=1"], &["t", "--no-sandbox=2"]] {
            let error = parse(args).unwrap_err();
            assert!(error.contains("takes no value"), "{args:?}: {error}");
        }
        let error = parse(&["t", "--verify", "--max-iterations", "3"]).unwrap_err();
        assert!(error.contains("--verify needs a value"), "{error}");
        assert!(parse(&["t", "--verify"]).unwrap_err().contains("--verify needs a value"));
        assert!(parse(&["t", "--verify="]).is_ok(), "an empty command is /for-loop's to refuse");
    }

    #[test]
    fn a_loop_flag_takes_its_value_after_an_equals_sign_or_as_the_next_word() {
        let spaced =
            request(&["t", "--max-iterations", "4", "--verify", "make check", "--protect", "a b/**"]);
        let joined = request(&["t", "--max-iterations=4", "--verify=make check", "--protect=a b/**"]);
        assert_eq!(spaced, joined);
        assert_eq!((joined.max_iterations, joined.verify.as_deref()), (4, Some("make check")));
        assert_eq!(joined.protect, ["a b/**"]);
        // A value is one word as the shell handed it over: nothing in it is unquoted again.
        let quoted = request(&["t", "--verify", r#""cargo test""#, "--verify-timeout=5m"]);
        assert_eq!((quoted.verify.as_deref(), quoted.verify_timeout_secs), (Some(r#""cargo test""#), 300));
        let equals = request(&["t", "--verify", "a=b", "--completion-promise=x = y"]);
        assert_eq!(
            (equals.verify.as_deref(), equals.completion_promise.as_deref()),
            (Some("a=b"), Some("x = y"))
        );
        // A value that starts with a dash but is no option is a value.
        assert_eq!(request(&["t", "--verify", "-x"]).verify.as_deref(), Some("-x"));
    }

    #[test]
    fn a_loop_flag_without_its_value_is_refused_saying_what_it_needs() {
        for args in
            [&["t", "--verify"][..], &["t", "--max-iterations", "--json"], &["t", "--scope", "--verify", "x"]]
        {
            let error = parse(args).unwrap_err();
            assert!(error.contains("needs a value: "), "{args:?}: {error}");
        }
        let error = parse(&["t", "--max-iterations"]).unwrap_err();
        assert!(error.contains(&format!("a whole number from 1 to {MAX_MAX_ITERATIONS}")), "{error}");
        assert_eq!(refused(&["t", "--verify="]), RequestError::MissingValue { flag: Flag::Verify });
        assert_eq!(refused(&["t", "--verify", ""]), RequestError::MissingValue { flag: Flag::Verify });
        assert_eq!(refused(&["t", "--scope", "  "]), RequestError::MissingValue { flag: Flag::Scope });
        let error = parse(&["t", "--checkpoint=yes"]).unwrap_err();
        assert!(error.contains("write just --checkpoint"), "{error}");
        assert!(parse(&["t", "--verify", "a", "--verify=b"]).unwrap_err().contains("given twice"));
        assert_eq!(request(&["t", "--scope", "a", "--scope=b"]).scope, ["a", "b"]);
    }

    #[test]
    fn wrong_types_and_values_past_the_limits_are_refused_by_the_flag_table() {
        let most = MAX_MAX_ITERATIONS.to_string();
        assert_eq!(request(&["t", "--max-iterations", &most]).max_iterations, MAX_MAX_ITERATIONS);
        for (args, flag, why) in [
            (&["t", "--max-iterations", "abc"][..], Flag::MaxIterations, "give a whole number"),
            (&["t", "--max-iterations=0"], Flag::MaxIterations, "no unlimited mode"),
            (&["t", "--max-iterations", "10001"], Flag::MaxIterations, "the most is 10000"),
            (&["t", "--max-iterations", "99999999999999999999"], Flag::MaxIterations, "from 1 to 10000"),
            (&["t", "--max-same-failures", "1001"], Flag::MaxSameFailures, "the most is 1000"),
            (&["t", "--verify-timeout", "2h"], Flag::VerifyTimeout, "(1h)"),
            (&["t", "--max-time", "soon"], Flag::MaxTime, "give whole seconds"),
            (&["t", "--max-tokens", "2G"], Flag::MaxTokens, ""),
            (&["t", "--escalate", "4,2,6"], Flag::Escalate, "rising"),
            (&["t", "--protect", "../x"], Flag::Protect, "inside the project"),
        ] {
            match refused(args) {
                RequestError::BadValue { flag: got, why: said, .. } => {
                    assert_eq!(got, flag, "{args:?}");
                    assert!(said.contains(why), "{args:?}: {said}");
                }
                other => panic!("{args:?}: {other}"),
            }
        }
        assert!(refused(&["t", "--target", "<= 5"]).to_string().contains("add --metric CMD"));
    }

    #[test]
    fn an_unknown_loop_flag_is_refused_with_the_nearest_one() {
        for (args, nearest) in [
            (&["t", "--verfy", "true"][..], "--verify"),
            (&["t", "--protec=x"], "--protect"),
            (&["t", "--scopes", "src"], "--scope"),
            (&["t", "--max-token", "5"], "--max-tokens"),
            (&["t", "--story-iteration", "2"], "--story-iterations"),
            (&["t", "--No-Tick"], "--no-tick"),
        ] {
            let error = parse(args).unwrap_err();
            assert!(error.contains(&format!("did you mean {nearest}?")), "{args:?}: {error}");
        }
        assert!(parse(&["t", "--protec=x"]).unwrap_err().starts_with("`--protec=x` is not an option"));
    }

    #[test]
    fn flag_like_words_after_two_dashes_are_the_task() {
        let after =
            request(&["--verify", "true", "--", "explain", "--max-iterations", "3", "--verify=x", "-h"]);
        assert_eq!(after.task, "explain --max-iterations 3 --verify=x -h");
        assert_eq!((after.max_iterations, after.verify.as_deref()), (30, Some("true")));
        let options = parse(&["--verify", "true", "--", "--", "--help"]).unwrap();
        assert_eq!((options.task.as_str(), options.help), ("-- --help", false));
        assert_eq!(request(&["a --verify b", "--verify", "c"]).task, "a --verify b");
    }

    #[test]
    fn empty_and_huge_tasks_and_values() {
        assert_eq!(refused(&[]), RequestError::EmptyTask);
        assert_eq!(refused(&["", "  ", "--verify", "true"]), RequestError::EmptyTask);
        assert_eq!(refused(&["\u{200b}"]), RequestError::EmptyTask);
        let plan = request(&["--plan", "PLAN.md"]);
        assert_eq!(plan.task, "Work through the stories of the plan PLAN.md, one at a time, in order.");
        let huge = "x".repeat(MAX_TASK_BYTES + 1);
        assert_eq!(refused(&[&huge]), RequestError::TaskTooLong(MAX_TASK_BYTES + 1));
        let task = "x".repeat(MAX_TASK_BYTES);
        assert_eq!(request(&[&task]).task.len(), MAX_TASK_BYTES);
        let command = format!("echo {}", "y".repeat(1 << 20));
        assert_eq!(request(&["t", "--verify", &command]).verify.as_deref(), Some(command.as_str()));
        let glob = "a".repeat(2_000);
        assert!(refused(&["t", "--scope", &glob]).to_string().contains("the most is 1024"));
    }

    #[test]
    fn the_words_and_the_text_ask_for_the_same_loop() {
        let words = request(&[
            "fix the login",
            "--verify",
            "cargo test -p core",
            "--max-iterations=5",
            "--protect",
            "tests/**",
            "--checkpoint",
            "--escalate",
            "1,3,5",
            "--max-time",
            "45m",
        ]);
        let text = LoopRequest::parse(
            r#"fix the login --verify "cargo test -p core" --max-iterations=5 --protect "tests/**" --checkpoint --escalate 1,3,5 --max-time 45m"#,
        )
        .unwrap();
        assert_eq!(words, text);
    }

    #[cfg(unix)]
    #[test]
    fn a_value_that_is_not_utf8_is_refused() {
        use std::os::unix::ffi::OsStringExt;
        let args = vec![OsString::from("t"), OsString::from("--verify"), OsString::from_vec(vec![0xff])];
        assert!(RunOptions::parse(args).unwrap_err().contains("not UTF-8"));
        let task = vec![OsString::from_vec(vec![b'a', 0xff])];
        assert!(RunOptions::parse(task).unwrap_err().contains("not UTF-8"));
    }

    #[test]
    fn a_backlog_takes_its_file_how_many_at_once_and_its_merge_tries() {
        let options =
            parse(&["--backlog", "TODO.md", "--parallel", "3", "--max-merge-tries=2", "--verify", "make"])
                .unwrap();
        assert_eq!(options.backlog.as_deref(), Some("TODO.md"));
        assert_eq!(
            (options.parallel, options.parallel_count, options.max_merge_tries),
            (true, Some(3), Some(2))
        );
        assert_eq!(options.task, "", "a count after --parallel is not task text");
        assert_eq!(parse(&["--backlog=B.md", "--parallel=4"]).unwrap().parallel_count, Some(4));
        let bare = parse(&["t", "--attempts", "2", "--parallel", "fix"]).unwrap();
        assert_eq!((bare.parallel_count, bare.task.as_str()), (None, "t fix"));
        for bad in [&["--backlog", "B.md", "--parallel", "0"][..], &["--backlog", "B.md", "--parallel=x"]] {
            let error = parse(bad).unwrap_err();
            assert!(error.contains("give how many agents may work at once"), "{bad:?}: {error}");
        }
        for bad in ["0", "x", "21"] {
            let error = parse(&["--backlog", "B.md", "--max-merge-tries", bad]).unwrap_err();
            assert!(error.contains("--max-merge-tries"), "{bad}: {error}");
        }
        assert!(parse(&["--backlog"]).unwrap_err().contains("--backlog needs a value"));
    }
}
