//! The words after `loop-hook run`, read as a shell hands them over: `--name value` or
//! `--name=value`, `--` before task text that starts with a dash, and the rest is the task.
//!
//! Every word that looks like an option is one: an option neither `run` nor `/for-loop` knows is
//! refused, naming the nearest known one. It never becomes part of the task, where a mistyped
//! `--max-iteration 3` would silently leave the loop at its default cap.

use std::ffi::OsString;
use std::time::Duration;

use super::sandbox::SandboxAsked;
use crate::commands::request::Flag;
use crate::commands::resume::ResumeOptions;
use crate::host::agent::Agent;
use crate::support::nearest::nearest;

/// What `loop-hook run` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunOptions {
    /// The positional words: what the agent is asked to do.
    pub task: String,
    /// The loop text as `/for-loop` reads it: the task, quoted whole, then the loop's flags.
    pub loop_text: String,
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
}

/// What an option of `run` itself takes after its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    Value,
    /// Any word, dashes and all: the agent CLI's own options are passed this way.
    AnyValue,
    /// A name, when the next word is not an option (`--resume [LOOP]`).
    OptionalName,
}

const OWN: [(&str, Takes); 19] = [
    ("--agent", Takes::Value),
    ("--agent-arg", Takes::AnyValue),
    ("--json", Takes::Nothing),
    ("--help", Takes::Nothing),
    ("-h", Takes::Nothing),
    ("--backoff", Takes::Value),
    ("--resume", Takes::OptionalName),
    ("--apply", Takes::OptionalName),
    ("--more", Takes::Value),
    ("--more-time", Takes::Value),
    ("--more-tokens", Takes::Value),
    ("--attempts", Takes::Value),
    ("--parallel", Takes::Nothing),
    ("--attempt", Takes::Value),
    ("--run-id", Takes::Value),
    ("--remote", Takes::Value),
    ("--pick", Takes::Value),
    ("--no-sandbox", Takes::Nothing),
    // The loop flag, read here: for a run it asks for the run's own sandbox.
    ("--require-strict", Takes::Nothing),
];

/// One option as typed: its name and, for `--name=value`, the value.
struct Typed<'a> {
    word: &'a str,
    name: &'a str,
    inline: Option<&'a str>,
}

impl<'a> Typed<'a> {
    /// The option `word` is, or `None` for task text. A word is an option when it starts with
    /// a dash and its name (up to `=`) is one word; `-` alone, `-5` and `- item` are text.
    fn read(word: &'a str) -> Option<Typed<'a>> {
        let rest = word.strip_prefix('-')?;
        if rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let (name, inline) = match word.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value)),
            _ => (word, None),
        };
        (!name.contains(char::is_whitespace)).then_some(Typed { word, name, inline })
    }
}

/// The options `run` reads and the loop flags it passes on, by name.
fn known_names() -> impl Iterator<Item = &'static str> {
    OWN.iter().map(|(name, _)| *name).chain(Flag::ALL.iter().map(|flag| flag.name()))
}

fn is_known(word: &str) -> bool {
    Typed::read(word).is_some_and(|typed| known_names().any(|name| name == typed.name))
}

/// `text` in double quotes, with `"` and `\` escaped: `/for-loop`'s parser reads it back as
/// exactly `text`, flags and quotes inside it included.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn unknown(typed: &Typed<'_>) -> String {
    match nearest(typed.name, known_names().filter(|name| name.starts_with("--"))) {
        Some(name) => format!(
            "`{}` is not an option of loop-hook run: did you mean {name}? (`loop-hook run --help` lists them)",
            typed.word
        ),
        None => format!(
            "`{}` is not an option of loop-hook run (`loop-hook run --help` lists them). For the agent \
             CLI, pass it with --agent-arg={}; if it is part of the task, quote the task or put it after `--`",
            typed.word, typed.word
        ),
    }
}

/// The words still to read, and how to take an option's value from them.
struct Words<'a> {
    rest: std::iter::Peekable<std::slice::Iter<'a, String>>,
}

impl<'a> Words<'a> {
    fn value(&mut self, typed: &Typed<'a>, takes: Takes) -> Result<&'a str, String> {
        if let Some(value) = typed.inline {
            return Ok(value);
        }
        // The next option is not this one's value: `--verify --max-iterations 3` forgot the
        // command. The agent's own options are the values of --agent-arg.
        self.rest.next_if(|word| takes == Takes::AnyValue || !is_known(word)).map(String::as_str).ok_or_else(
            || format!("{name} needs a value, e.g. {name}=VALUE or {name} VALUE", name = typed.name),
        )
    }

    /// The name after `--resume` or `--apply`, when the next word is not an option.
    fn optional_name(&mut self, typed: &Typed<'a>) -> Option<&'a str> {
        if let Some(value) = typed.inline {
            return Some(value);
        }
        self.rest.next_if(|word| Typed::read(word).is_none()).map(String::as_str)
    }
}

impl RunOptions {
    /// Parses the words after `run`. `run`'s own options are taken out, the loop flags are
    /// written back in `/for-loop`'s syntax, and every other word is the task.
    pub(crate) fn parse(args: Vec<OsString>) -> Result<RunOptions, String> {
        let args = args
            .into_iter()
            .map(|a| a.into_string().map_err(|a| format!("{a:?} is not UTF-8 text")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut options = RunOptions::default();
        let mut task: Vec<&str> = Vec::new();
        let mut flags: Vec<String> = Vec::new();
        let mut more = Vec::new();
        let mut words = Words { rest: args.iter().peekable() };
        let mut only_text = false;
        while let Some(word) = words.rest.next() {
            if word == "--" && !only_text {
                only_text = true;
                continue;
            }
            let Some(typed) = Typed::read(word).filter(|_| !only_text) else {
                task.push(word);
                continue;
            };
            if let Some((_, takes)) = OWN.iter().find(|(name, _)| *name == typed.name) {
                options.take(&typed, *takes, &mut words, &mut more)?;
            } else if let Some(flag) = Flag::ALL.iter().find(|flag| flag.name() == typed.name) {
                if flag.is_switch() {
                    no_value(&typed)?;
                    flags.push(flag.name().to_string());
                } else {
                    let value = words.value(&typed, Takes::Value)?;
                    flags.push(format!("{} {}", flag.name(), quoted(value)));
                }
            } else {
                return Err(unknown(&typed));
            }
        }
        options.task = task.join(" ");
        let task_text = (!task.is_empty()).then(|| quoted(&options.task));
        options.loop_text = task_text.into_iter().chain(flags).collect::<Vec<_>>().join(" ");
        options.more = ResumeOptions::parse(&more.join(" "))?;
        Ok(options)
    }

    /// Records one of `run`'s own options.
    fn take<'a>(
        &mut self,
        typed: &Typed<'a>,
        takes: Takes,
        words: &mut Words<'a>,
        more: &mut Vec<String>,
    ) -> Result<(), String> {
        if takes == Takes::Nothing {
            no_value(typed)?;
        }
        match typed.name {
            "--agent" => {
                let name = words.value(typed, takes)?;
                self.agent = Some(
                    Agent::from_name(name)
                        .ok_or_else(|| format!("unknown agent `{name}`: use claude, gemini or codex"))?,
                );
            }
            "--agent-arg" => self.agent_args.push(words.value(typed, takes)?.to_string()),
            "--json" => self.json = true,
            "--help" | "-h" => self.help = true,
            "--backoff" => {
                let text = words.value(typed, takes)?;
                let secs = crate::support::duration::parse_seconds(text)
                    .map_err(|e| format!("--backoff {text}: {e}"))?;
                self.backoff = Some(Duration::from_secs(secs));
            }
            "--resume" => self.resume = Some(words.optional_name(typed).unwrap_or_default().to_string()),
            "--apply" => self.apply = Some(words.optional_name(typed).unwrap_or_default().to_string()),
            flag @ ("--more" | "--more-time" | "--more-tokens") => {
                more.push(format!("{flag} {}", words.value(typed, takes)?));
            }
            "--parallel" => self.parallel = true,
            name @ ("--no-sandbox" | "--require-strict") => {
                let asked = if name == "--no-sandbox" { SandboxAsked::Off } else { SandboxAsked::Required };
                if self.sandbox != SandboxAsked::Default && self.sandbox != asked {
                    return Err("--no-sandbox and --require-strict contradict each other: give one".into());
                }
                self.sandbox = asked;
            }
            "--attempts" => {
                let text = words.value(typed, takes)?;
                let most = super::attempts::MAX_ATTEMPTS;
                self.attempts = Some(
                    attempt_count(text)
                        .ok_or_else(|| format!("--attempts {text}: give a number from 1 to {most}"))?,
                );
            }
            "--attempt" => {
                let text = words.value(typed, takes)?;
                self.attempt = Some(attempt_count(text).ok_or_else(|| {
                    format!("--attempt {text}: give the attempt's number, from 1 to --attempts K")
                })?);
            }
            "--run-id" => self.run_id = Some(words.value(typed, takes)?.to_string()),
            "--remote" => self.remote = Some(words.value(typed, takes)?.to_string()),
            "--pick" => self.pick = Some(words.value(typed, takes)?.to_string()),
            other => return Err(format!("`{other}` is known but not read: please report it")),
        }
        Ok(())
    }
}

/// A number of attempts (or an attempt's number), from 1 to the most a run may have.
fn attempt_count(text: &str) -> Option<u32> {
    text.parse::<u32>().ok().filter(|k| (1..=super::attempts::MAX_ATTEMPTS).contains(k))
}

/// A switch given a value (`--json=yes`) is refused rather than read as on or off.
fn no_value(typed: &Typed<'_>) -> Result<(), String> {
    match typed.inline {
        Some(_) => Err(format!("{} takes no value: write just {}", typed.name, typed.name)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::request::LoopRequest;

    fn parse(args: &[&str]) -> Result<RunOptions, String> {
        RunOptions::parse(args.iter().map(OsString::from).collect())
    }

    fn request(args: &[&str]) -> LoopRequest {
        LoopRequest::parse(&parse(args).unwrap().loop_text).unwrap()
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
        assert_eq!(options.loop_text, r#""fix the tests" --verify "cargo test --lib""#);
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
        assert_eq!((strict.sandbox, strict.loop_text.as_str()), (SandboxAsked::Required, "\"t\""));
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
        assert_eq!(spaced, joined);
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
            assert!(!options.loop_text.contains("model"), "{args:?}: {}", options.loop_text);
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
        for args in [&["t", "--checkpoint=yes"][..], &["t", "--json=1"], &["t", "--parallel=2"]] {
            let error = parse(args).unwrap_err();
            assert!(error.contains("takes no value"), "{args:?}: {error}");
        }
        let error = parse(&["t", "--verify", "--max-iterations", "3"]).unwrap_err();
        assert!(error.contains("--verify needs a value"), "{error}");
        assert!(parse(&["t", "--verify"]).unwrap_err().contains("--verify needs a value"));
        assert!(parse(&["t", "--verify="]).is_ok(), "an empty command is /for-loop's to refuse");
    }
}
