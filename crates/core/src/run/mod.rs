//! `loop-hook run`: the fresh-context loop. Each iteration runs an agent CLI headless in a new
//! session; then verify runs and the same gather → decide → commit path as the Stop hook judges
//! the iteration ([`crate::hook::stop_hook::judge`]), so the oracle, stall breaker, budgets, ledger and
//! receipt are the in-session loop's own.
//!
//! The loop is kept in the store under a session id of its own, `run-…`, which no agent session
//! has: the sessions the driver starts are new sessions, so their Stop hooks find no loop and
//! never judge the driver's stops, and no model can reach an in-session loop through the driver.

mod agent;
mod attempts;
mod driver;
mod limits;
mod status;

use std::ffi::OsString;
use std::time::Duration;

use crate::commands::resume::ResumeOptions;
use crate::support::environment::Environment;
use crate::support::outcome::{Code, Outcome};

pub(crate) use agent::Agent;

pub(crate) const USAGE: &str = "\
Usage: loop-hook run TASK --verify CMD [--agent claude|gemini|codex] [--max-iterations N]
                     [--max-time D] [--agent-arg ARG ...] [--backoff D] [--json] [loop flags]
       loop-hook run TASK --verify CMD --attempts K [--parallel] [...]
       loop-hook run --resume [LOOP] [--more N] [--more-time D] [--more-tokens N]
       loop-hook run --apply [RUN]

  Runs the agent CLI headless in this directory, one fresh session per iteration, until verify
  passes (or the cap, the time budget or the stall breaker ends or parks the loop).

  --agent NAME      claude, gemini or codex (default: the first installed, in that order)
  --agent-arg ARG   passed to the agent CLI, once per argument; a permission flag among them
                    replaces the default permissions (claude: --permission-mode acceptEdits;
                    gemini: --approval-mode auto_edit; codex: --sandbox workspace-write)
  --backoff D       first wait after a rate or usage limit that gives no reset time (default 30s,
                    doubling to at most 30m)
  --json            one JSON event per line on stdout (on a terminal without it, a live status
                    line on stderr: iteration, time, last verify, streaks, waits for a limit)
  --resume [LOOP]   continue the newest (or the named) parked or capped run loop
  --more N, --more-time D, --more-tokens N
                    with --resume: that many more iterations, time or tokens (at a spent cap or
                    budget the default is 10 iterations, or half the budget again)
  --attempts K      best-of-K (in a git repository): K independent loops on the task, one after
                    another, each in a git work tree of its own under the loop store, started
                    from this working tree as it is; the first verified one wins and ends the
                    run. Your working tree is not changed; every attempt is kept as a ref,
                    refs/for-loop/attempts/RUN/N, and the work trees are removed
  --parallel        with --attempts: run the attempts at once; the first verified one stops the
                    others (their agents are killed, their loops parked)
  --apply [RUN]     apply the winning attempt's changes of the newest (or the named) best-of-K
                    run to this working tree; refused, changing nothing, when local changes are
                    in the way. Nothing is staged or committed
  loop flags        --protect, --max-same-failures, --max-time, --escalate, --checkpoint,
                    --verify-timeout, --completion-promise, as in /for-loop";

/// What `loop-hook run` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunOptions {
    /// The loop text as `/for-loop` reads it: task words, then our flags.
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
    pub help: bool,
}

impl RunOptions {
    /// Parses the words after `run`. Our own options are taken out; everything else is the
    /// loop's text, quoted so `/for-loop`'s parser reads each word back as it was.
    pub(crate) fn parse(args: Vec<OsString>) -> Result<RunOptions, String> {
        let mut options = RunOptions::default();
        let mut words = Vec::new();
        let mut more = Vec::new();
        let mut args =
            args.into_iter().map(|a| a.into_string().map_err(|a| format!("{a:?} is not UTF-8 text")));
        let value = |args: &mut dyn Iterator<Item = Result<String, String>>, name: &str| {
            args.next().unwrap_or_else(|| Err(format!("{name} needs a value")))
        };
        while let Some(arg) = args.next() {
            let arg = arg?;
            match arg.as_str() {
                "--agent" => {
                    let name = value(&mut args, "--agent")?;
                    options.agent = Some(
                        Agent::from_name(&name)
                            .ok_or_else(|| format!("unknown agent `{name}`: use claude, gemini or codex"))?,
                    );
                }
                "--agent-arg" => options.agent_args.push(value(&mut args, "--agent-arg")?),
                "--json" => options.json = true,
                "--help" | "-h" => options.help = true,
                "--backoff" => {
                    let text = value(&mut args, "--backoff")?;
                    let secs = crate::support::duration::parse_seconds(&text)
                        .map_err(|e| format!("--backoff {text}: {e}"))?;
                    options.backoff = Some(Duration::from_secs(secs));
                }
                "--resume" => options.resume = Some(String::new()),
                flag @ ("--more" | "--more-time" | "--more-tokens") => {
                    more.push(format!("{flag} {}", value(&mut args, flag)?));
                }
                word if options.resume.as_deref() == Some("") && !word.starts_with('-') => {
                    options.resume = Some(word.to_string());
                }
                "--apply" => options.apply = Some(String::new()),
                word if options.apply.as_deref() == Some("") && !word.starts_with('-') => {
                    options.apply = Some(word.to_string());
                }
                "--parallel" => options.parallel = true,
                "--attempts" => {
                    let text = value(&mut args, "--attempts")?;
                    let k = text
                        .parse::<u32>()
                        .ok()
                        .filter(|k| (1..=attempts::MAX_ATTEMPTS).contains(k))
                        .ok_or_else(|| {
                            format!("--attempts {text}: give a number from 1 to {}", attempts::MAX_ATTEMPTS)
                        })?;
                    options.attempts = Some(k);
                }
                word if word.starts_with("--") => words.push(word.to_string()),
                word => {
                    // A flag's value is quoted; a task word is kept as typed.
                    let after_flag = words.last().is_some_and(|w: &String| w.starts_with("--"))
                        && !matches!(
                            words.last().map(String::as_str),
                            Some("--checkpoint" | "--require-strict")
                        );
                    words.push(if after_flag {
                        shell_words::quote(word).into_owned()
                    } else {
                        word.to_string()
                    });
                }
            }
        }
        options.loop_text = words.join(" ");
        options.more = ResumeOptions::parse(&more.join(" "))?;
        Ok(options)
    }
}

pub(crate) fn run(env: &Environment, options: &RunOptions) -> Outcome {
    if options.help {
        return Outcome::ok(USAGE);
    }
    if let Some(wrong) = misuse(options) {
        return Outcome { code: Code::Usage, stdout: format!("loop-hook run: {wrong}\n\n{USAGE}") };
    }
    if let Some(wanted) = &options.apply {
        return attempts::apply(env, wanted);
    }
    if let Some(k) = options.attempts {
        return attempts::run(env, options, k);
    }
    attempts::sweep_orphans(env);
    driver::Driver::run(env, options)
}

/// Options that make no sense together, or a missing task.
fn misuse(options: &RunOptions) -> Option<&'static str> {
    let task = !options.loop_text.trim().is_empty();
    let more = options.more != ResumeOptions::default();
    if options.apply.is_some() && (task || options.resume.is_some() || options.attempts.is_some()) {
        Some("--apply takes only the run to apply: `loop-hook run --apply [RUN]`")
    } else if options.resume.is_some() && options.attempts.is_some() {
        Some("--attempts starts a new best-of-K run; it cannot be resumed (apply its winner with --apply)")
    } else if more && options.resume.is_none() {
        Some("--more, --more-time and --more-tokens go with --resume")
    } else if options.parallel && options.attempts.is_none() {
        Some("--parallel needs --attempts K")
    } else if options.resume.is_none() && options.apply.is_none() && !task {
        Some("no task")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<RunOptions, String> {
        RunOptions::parse(args.iter().map(OsString::from).collect())
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
        assert_eq!(options.loop_text, "fix the tests --verify 'cargo test --lib'");
        assert_eq!(options.agent, Some(Agent::Codex));
        assert_eq!(options.agent_args, ["-m"]);
        assert!(options.json);
        assert_eq!(parse(&["--resume"]).unwrap().resume.as_deref(), Some(""));
        assert_eq!(parse(&["--resume", "run-x"]).unwrap().resume.as_deref(), Some("run-x"));
        assert!(parse(&["t", "--agent", "vim"]).is_err());
        assert!(parse(&["t", "--agent-arg"]).is_err());
        assert_eq!(parse(&["t", "--backoff", "2s"]).unwrap().backoff, Some(Duration::from_secs(2)));
        let best = parse(&["t", "--attempts", "3", "--parallel"]).unwrap();
        assert_eq!((best.attempts, best.parallel, best.loop_text.as_str()), (Some(3), true, "t"));
        for bad in ["0", "-1", "x", "", "1000"] {
            assert!(parse(&["t", "--attempts", bad]).is_err(), "--attempts {bad:?}");
        }
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
    fn options_that_do_not_go_together_are_usage_errors() {
        let misused = |args: &[&str]| misuse(&parse(args).unwrap());
        assert_eq!(misused(&["t", "--verify", "true"]), None);
        assert_eq!(misused(&["t", "--attempts", "2", "--parallel"]), None);
        assert_eq!(misused(&["--resume", "--more", "3"]), None);
        assert_eq!(misused(&["--apply"]), None);
        for wrong in [
            &["t", "--apply"][..],
            &["--apply", "--attempts", "2"],
            &["--resume", "--attempts", "2"],
            &["t", "--more", "3"],
            &["t", "--parallel"],
            &[],
        ] {
            assert!(misused(wrong).is_some(), "{wrong:?}");
        }
    }
}
