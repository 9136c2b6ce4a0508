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

use crate::commands::resume::ResumeOptions;
use crate::support::environment::Environment;
use crate::support::outcome::{Code, Outcome};

pub(crate) use backlog::add_to_status as add_backlogs_to_status;
pub(crate) use options::RunOptions;

/// `loop-hook run --help`: `run`'s own options, then the loop flags from `/for-loop`'s table.
pub(crate) fn usage() -> String {
    format!(
        "{OWN_USAGE}\n\n  Loop flags, as in /for-loop:\n{}",
        crate::commands::request::flag_spec::flag_lines()
    )
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
  passes (or the cap, the time budget or the stall breaker ends or parks the loop).

  --agent NAME      claude, gemini or codex (default: the first installed, in that order)
  --agent-arg ARG   passed to the agent CLI, once per argument; a permission flag among them
                    replaces the default permissions (claude: --permission-mode acceptEdits;
                    gemini: --approval-mode auto_edit; codex: --sandbox workspace-write)
  --backoff D       first wait after a rate or usage limit that gives no reset time (default 30s,
                    doubling to at most 30m)
  --json            one JSON event per line on stdout (on a terminal without it, a live status
                    line on stderr: iteration, time, last verify, streaks, waits for a limit)
  --resume [LOOP]   continue the newest (or the named) parked or capped run loop; LOOP may also
                    name a loop running in a session (its session id or loop id, as `loop-hook
                    status --all` lists them), which is handed over to the run: the same ledger,
                    iteration, budgets, story and reviewer, the session's stops let through
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
  --no-sandbox      run the agent outside its sandbox, on purpose. By default each agent run is
                    sandboxed with bubblewrap where the machine allows it: the project (or the
                    attempt's work tree) writable, the loop store, for-loop, the host's settings
                    and git's hooks and config read-only, nothing it starts outliving its run.
                    Where bubblewrap cannot start, the run says so first and goes on without
  --require-strict  refuse to start when the agent cannot be sandboxed
  --apply [RUN]     apply the winning attempt's changes of the newest (or the named) best-of-K
                    run (or what landed of a backlog run) to this working tree; refused, changing nothing, when local changes are
                    in the way; taken back when verify then fails here. Nothing is staged or
                    committed
  --attempt N       with --attempts K and --run-id ID: run only attempt N of a best-of-K run
                    spread over machines (one CI job each), from a clean checkout, then push its
                    end state (a commit on HEAD, with the attempt's claim in its message) to
                    refs/for-loop/attempts/ID/N on the remote
  --backlog FILE    a backlog (in a git repository): the stories of FILE, a plan as --plan reads
                    it, worked as independent tasks, each a loop of its own in a git work tree of
                    its own started from this working tree as it is, with its story's check (or
                    --verify) as its verify. A task whose check passes joins a merge queue, which
                    merges it onto refs/for-loop/backlog/RUN/integration and lands it only when
                    its check, the check of every task landed before it and --verify pass on the
                    merged tree; a conflict or a broken check sends it back to its agent with
                    what failed. Your working tree is not changed: `--apply RUN` brings what
                    landed, `--resume RUN` goes on after Ctrl-C or a crash. Each task's end state
                    is kept as refs/for-loop/backlog/RUN/tasks/N
  --parallel N      with --backlog: at most N agents at once (default 1)
  --max-merge-tries K
                    with --backlog: merges a task may fail (a conflict, a broken check) before it
                    parks as merge_failed (default 3)
  --run-id ID       the run's id, the same on every machine (letters, digits, '-', '_', '.')
  --remote REMOTE   the git remote attempts are pushed to and picked from (default origin)
  --pick ID         fetch run ID's attempts from the remote, check each out fresh, re-run
                    --verify on it (what an attempt claims is not trusted), and name the first
                    that verifies here, by number; a missing attempt is reported. Run it on the
                    commit the attempts started from
  --task N          with --backlog FILE and --run-id ID: work only task N of a backlog spread
                    over machines (one CI job each), from a clean checkout, then push its end
                    state (a commit on HEAD, with the task's claim in its message) to
                    refs/for-loop/backlog/ID/tasks/N on the remote
  --merge           with --backlog FILE and --run-id ID: fetch the run's pushed tasks and merge
                    them one at a time onto HEAD, each landing only when its check, every landed
                    task's check and --verify pass on the merged tree (no claim is trusted);
                    the result is kept and pushed as refs/for-loop/backlog/ID/integration
  --list            with --backlog FILE: name its tasks and their checks (a CI job matrix),
                    refusing a backlog a run would refuse

  Every option takes its value as `--name value` or `--name=value` (`--agent-arg=--model=x`).
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
    options.loop_flags.has(crate::commands::request::Flag::Plan)
}

#[cfg(test)]
mod tests {
    use super::*;

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
