//! `loop-hook run`: the fresh-context loop. Each iteration runs an agent CLI headless in a new
//! session; then verify runs and the same gather → decide → commit path as the Stop hook judges
//! the iteration ([`crate::hook::stop_hook::judge`]), so the oracle, stall breaker, budgets, ledger and
//! receipt are the in-session loop's own.
//!
//! The loop is kept in the store under a session id of its own, `run-…`, which no agent session
//! has: the sessions the driver starts are new sessions, so their Stop hooks find no loop and
//! never judge the driver's stops, and no model can reach an in-session loop through the driver.

mod attempts;
mod backlog;
mod driver;
mod limits;
mod options;
mod sandbox;
mod status;

use crate::commands::ResumeOptions;
use crate::support::Environment;
use crate::support::{Code, Outcome};

pub(crate) use backlog::add_to_status as add_backlogs_to_status;
pub(crate) use options::RunOptions;

/// `loop-hook run --help`: `run`'s own options, then the loop flags, each printed from its row
/// of the option table.
pub(crate) fn usage() -> String {
    use crate::commands::request::flag_spec::{flag_lines, run_entries};
    format!("{OWN_USAGE}\n\n{}\n\n{NOTES}\n\n  Loop flags, as in /for-loop:\n{}", run_entries(), flag_lines())
}

const OWN_USAGE: &str = "\
Usage: loop-hook run TASK --verify CMD [--agent claude|gemini|codex] [--max-iterations N]
                     [--max-time D] [--agent-arg ARG ...] [--backoff D] [--json] [loop flags]
       loop-hook run TASK --verify CMD --attempts K [--parallel] [...]
       loop-hook run ... [--no-sandbox | --require-strict]
       loop-hook run --resume [LOOP] [--more N] [--more-time D] [--more-tokens N]
       loop-hook run --apply [RUN]
       loop-hook run TASK --verify CMD --attempts K --attempt N --run-id ID [--remote REMOTE]
       loop-hook run --pick ID --verify CMD [--attempts K] [--remote REMOTE] [--json]
       loop-hook run --backlog FILE [--parallel N] [--verify CMD] [--max-merge-tries K] [--json]
                     [loop flags]
       loop-hook run --backlog FILE --task N --run-id ID [--remote REMOTE] [loop flags]
       loop-hook run --backlog FILE --merge --run-id ID [--verify CMD] [--remote REMOTE] [--json]
       loop-hook run --backlog FILE --list [--verify CMD] [--json]

  Runs the agent CLI headless in this directory, one fresh session per iteration, until verify
  passes (or the cap, the time budget or the stall breaker ends or parks the loop).";

const NOTES: &str =
    "  Every option takes its value as `--name value` or `--name=value` (`--agent-arg=--model=x`).
  An option that is neither one of these nor a loop flag is refused, never read as task text:
  task words that start with a dash go after `--`.";

pub(crate) fn run(env: &Environment, options: &RunOptions) -> Outcome {
    if options.help {
        return Outcome::ok(usage());
    }
    if backlog::fleet_asked(options) {
        return backlog::fleet(env, options);
    }
    if let Some(wrong) = backlog::misuse(options) {
        return Outcome { code: Code::Usage, stdout: format!("loop-hook run: {wrong}\n\n{}", usage()) };
    }
    if options.backlog.is_some() {
        return backlog::run(env, options);
    }
    if let Some(wrong) = attempts::misuse(options) {
        return Outcome { code: Code::Usage, stdout: format!("loop-hook run: {wrong}\n\n{}", usage()) };
    }
    if options.pick.is_some() {
        return attempts::pick(env, options);
    }
    if let Some(wrong) = misuse(options) {
        return Outcome { code: Code::Usage, stdout: format!("loop-hook run: {wrong}\n\n{}", usage()) };
    }
    if let Some(outcome) = backlog::resume(env, options) {
        return outcome;
    }
    if let Some(outcome) = options.apply.as_deref().and_then(|wanted| backlog::apply(env, wanted)) {
        return outcome;
    }
    if let Some(wanted) = &options.apply {
        return attempts::apply(env, wanted);
    }
    if let Err(why) = sandbox::RunTier::choose(options.sandbox) {
        return Outcome::refused(format!("for-loop: run: {why}"));
    }
    if let (Some(k), Some(n)) = (options.attempts, options.attempt) {
        return attempts::attempt(env, options, k, n);
    }
    if let Some(k) = options.attempts {
        return attempts::run(env, options, k);
    }
    attempts::sweep_orphans(env);
    driver::Driver::run(env, options)
}

/// Options that make no sense together, or a missing task.
fn misuse(options: &RunOptions) -> Option<&'static str> {
    let task = !options.task.trim().is_empty();
    let more = options.more != ResumeOptions::default();
    if options.apply.is_some() && (task || options.resume.is_some() || options.attempts.is_some()) {
        Some("--apply takes only the run to apply: `loop-hook run --apply [RUN]`")
    } else if options.resume.is_some() && !(options.task.is_empty() && options.loop_flags.is_empty()) {
        Some("--resume continues a loop with its own task and flags: leave them out")
    } else if options.resume.is_some() && options.attempts.is_some() {
        Some("--attempts starts a new best-of-K run; it cannot be resumed (apply its winner with --apply)")
    } else if more && options.resume.is_none() {
        Some("--more, --more-time and --more-tokens go with --resume")
    } else if options.parallel && options.attempts.is_none() {
        Some("--parallel needs --attempts K")
    } else if options.resume.is_none() && options.apply.is_none() && !task && !planned(options) {
        Some("no task")
    } else {
        None
    }
}

/// Whether the loop flags name a plan, which is the task when none is given.
fn planned(options: &RunOptions) -> bool {
    options.loop_flags.has(crate::commands::Flag::Plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run --help`'s own options are its rows of the option table, entry for entry, in the
    /// table's order, each wrapped under 100 columns; the loop flags follow.
    #[test]
    fn run_help_lists_its_own_options_from_the_table() {
        use crate::commands::request::flag_spec::{Flag, Group};
        let help = usage();
        let own = help.split("\n\n").nth(2).unwrap();
        let listed: Vec<&str> = own
            .lines()
            .filter(|line| line.starts_with("  --"))
            .map(|line| line.split_whitespace().next().unwrap())
            .collect();
        let rows: Vec<&str> = Flag::all_in(Group::RUN)
            .filter(|flag| *flag != Flag::Help && !flag.spec().groups.has(Group::LOOP))
            .map(Flag::name)
            .collect();
        assert_eq!(listed, rows, "{own}");
        assert!(own.lines().all(|line| line.chars().count() <= 100), "{own}");
        let entry = format!("\n  --max-merge-tries K\n{:20}With --backlog: merges", "");
        assert!(own.contains(&entry), "{own}");
        assert!(help.contains("\n\n  Every option takes its value"), "{help}");
    }

    fn parse(args: &[&str]) -> Result<RunOptions, String> {
        RunOptions::parse(args.iter().map(std::ffi::OsString::from).collect())
    }

    #[test]
    fn the_help_lists_every_loop_flag_from_the_table() {
        let help = usage();
        for spec in crate::commands::request::Flag::all().map(crate::commands::request::Flag::spec) {
            assert!(help.lines().any(|line| line.trim_start().starts_with(&spec.usage())), "{}", spec.name);
        }
        let text = crate::commands::start::usage();
        for spec in crate::commands::request::Flag::all().map(crate::commands::request::Flag::spec) {
            let line = text.lines().find(|line| line.trim_start().starts_with(&spec.usage()));
            assert!(line.is_some_and(|line| line.contains(spec.help)), "{}", spec.name);
        }
    }

    #[test]
    fn backlog_options_that_do_not_go_together_are_usage_errors() {
        let misused = |args: &[&str]| backlog::misuse(&parse(args).unwrap());
        assert_eq!(misused(&["--backlog", "B.md", "--parallel", "3", "--max-merge-tries", "2"]), None);
        assert_eq!(misused(&["--backlog", "B.md", "--verify", "make test"]), None);
        assert_eq!(misused(&["t", "--attempts", "2", "--parallel"]), None, "best-of-K's --parallel");
        for (wrong, says) in [
            (&["--backlog", "B.md", "--attempts", "2"][..], "leave out --attempts"),
            (&["--backlog", "B.md", "fix it"], "leave out the task text"),
            (&["--backlog", "B.md", "--plan", "P.md"], "leave out --plan"),
            (&["--backlog", "B.md", "--resume"], "--backlog starts a new run"),
            (&["--backlog", "B.md", "--apply"], "--backlog starts a new run"),
            (&["--backlog", "B.md", "--parallel"], "--parallel N"),
            (&["t", "--attempts", "2", "--parallel", "2"], "--parallel N goes with --backlog"),
            (&["t", "--max-merge-tries", "2"], "--max-merge-tries goes with --backlog"),
        ] {
            let said = misused(wrong).unwrap_or_else(|| panic!("{wrong:?} was not refused"));
            assert!(said.contains(says), "{wrong:?}: {said}");
        }
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
            &["--resume", "run-1", "another task"],
            &["--resume", "run-1", "--verify", "true"],
            &["--resume", "--plan", "P.md"],
            &["--resume", "--", "--more"],
            &["t", "--more", "3"],
            &["t", "--parallel"],
            &[],
        ] {
            assert!(misused(wrong).is_some(), "{wrong:?}");
        }
    }
}
