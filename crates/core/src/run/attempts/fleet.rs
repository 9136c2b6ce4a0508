//! Best of K across machines. Each machine (a CI job) runs one attempt of the K,
//! `loop-hook run TASK --verify CMD --attempts K --attempt N --run-id ID`, as best-of-K runs it
//! on one machine (its own work tree, its end state kept as `refs/for-loop/attempts/ID/N`), then
//! pushes that end state to the same ref on a remote. `loop-hook run --pick ID`
//! ([`crate::run::attempts::pick`]) re-checks every pushed attempt and picks the winner.
//!
//! The commit pushed is the attempt's files on top of the commit the machine started from, never
//! a branch. Its message carries the attempt's claim (verified or not, iterations, time): only a
//! claim, which the pick shows beside what it finds and never trusts.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::commands::ResumeOptions;
use crate::run::RunOptions;
use crate::run::attempts::{self, REFS};
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::store::Store;
use crate::support::Environment;
use crate::support::{Code, Outcome};
use crate::worktree::WorkTree;

/// The remote attempts are pushed to and picked from when `--remote` is not given.
pub(in crate::run) const DEFAULT_REMOTE: &str = "origin";
/// The line of an attempt's commit message that holds its claim, as JSON.
const CLAIM_LINE: &str = "for-loop-claim: ";
/// A run id becomes part of refs, loop ids and directory names.
const MAX_RUN_ID: usize = 100;
/// Changed files named when a machine's checkout is not the commit it would start from.
const NAMED_FILES: usize = 5;

/// What an attempt says of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Claim {
    pub(super) attempt: u32,
    pub(super) attempts: u32,
    pub(super) outcome: String,
    pub(super) verified: bool,
    pub(super) iterations: u32,
    pub(super) seconds: u64,
}

/// How a fleet's loop ended, as both fleets' claims tell it (the best of K's attempts, a
/// backlog's tasks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::run) struct Ended {
    /// The loop's outcome (`verified`), its status when it has none, or `not started`.
    pub(in crate::run) outcome: String,
    /// Whether it ended done: verified, or its promise kept.
    pub(in crate::run) passed: bool,
    pub(in crate::run) iterations: u32,
    pub(in crate::run) seconds: u64,
}

impl Ended {
    /// The loop as it ended (`None`: it never started).
    pub(in crate::run) fn of(state: Option<&LoopState>) -> Ended {
        let outcome = state.map_or_else(
            || "not started".to_string(),
            |s| {
                s.meta
                    .outcome
                    .map_or_else(|| format!("{:?}", s.meta.status).to_lowercase(), |r| r.as_str().into())
            },
        );
        let elapsed = state.map_or(0, |s| s.meta.updated_at.duration_since(s.meta.started_at).as_secs());
        Ended {
            outcome,
            passed: state
                .and_then(|s| s.meta.outcome)
                .is_some_and(|r| matches!(r, ReasonCode::Verified | ReasonCode::Promise)),
            iterations: state.map_or(0, |s| s.meta.iteration),
            seconds: u64::try_from(elapsed).unwrap_or(0),
        }
    }
}

impl Claim {
    /// Attempt `n` of `k` as its loop ended (`None`: it never started).
    fn of(n: u32, k: u32, state: Option<&LoopState>) -> Claim {
        let Ended { outcome, passed, iterations, seconds } = Ended::of(state);
        Claim { attempt: n, attempts: k, outcome, verified: passed, iterations, seconds }
    }

    /// The message of the commit pushed: a summary line, then the claim as one JSON line.
    fn message(&self, id: &str) -> String {
        let claim = serde_json::to_string(self).unwrap_or_default();
        format!(
            "for-loop: attempt {} of {} (run {id}), {}\n\n{CLAIM_LINE}{claim}\n",
            self.attempt,
            self.attempts,
            self.describe()
        )
    }

    /// The claim in a commit's message, if it holds one. The message is the job's to write: the
    /// outcome is cut to plain words before anything shows it.
    pub(super) fn read(message: &str) -> Option<Claim> {
        let line = message.lines().rev().find_map(|line| line.strip_prefix(CLAIM_LINE))?;
        let mut claim: Claim = serde_json::from_str(line.trim()).ok()?;
        claim.outcome = claim
            .outcome
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '-' | ':'))
            .take(60)
            .collect();
        Some(claim)
    }

    /// `claims verified after 2 iterations in 40 s`.
    pub(super) fn describe(&self) -> String {
        let what =
            if self.verified { "verified".to_string() } else { format!("not verified ({})", self.outcome) };
        let plural = if self.iterations == 1 { "" } else { "s" };
        format!("claims {what} after {} iteration{plural} in {} s", self.iterations, self.seconds)
    }
}

/// The options of a run spread over machines that make no sense, or make no sense together.
pub(in crate::run) fn misuse(options: &RunOptions) -> Option<String> {
    let elsewhere = options.resume.is_some() || options.apply.is_some() || options.parallel;
    if let Some(id) = &options.pick {
        let extra = !options.task.trim().is_empty() || options.attempt.is_some() || options.run_id.is_some();
        let agent = options.agent.is_some() || !options.agent_args.is_empty() || options.backoff.is_some();
        if extra || agent || elsewhere || options.more != ResumeOptions::default() {
            return Some(
                "--pick re-checks the pushed attempts of a run and runs no agent: `loop-hook run \
                 --pick ID --verify CMD [--attempts K] [--remote REMOTE]`, with no task and none of \
                 --attempt, --run-id, --agent, --agent-arg, --backoff, --parallel, --resume, --more, --apply"
                    .into(),
            );
        }
        return run_id_problem(id).or_else(|| remote_problem(options));
    }
    if let Some(n) = options.attempt {
        let (Some(k), Some(id)) = (options.attempts, &options.run_id) else {
            return Some(
                "--attempt N runs one attempt of a run spread over machines: it needs --attempts K \
                 and --run-id ID, the same on every machine (in GitHub Actions, the workflow run's id)"
                    .into(),
            );
        };
        if n > k {
            return Some(format!(
                "--attempt {n} is more than --attempts {k}: number the attempts from 1 to {k}"
            ));
        }
        if elsewhere {
            return Some("--attempt N runs one attempt: leave out --parallel, --resume and --apply".into());
        }
        return run_id_problem(id).or_else(|| remote_problem(options));
    }
    if options.run_id.is_some() || options.remote.is_some() {
        return Some("--run-id and --remote go with --attempt N (and --remote with --pick ID)".into());
    }
    None
}

/// Why `id` cannot be a run id, if it cannot: the same rule for every run spread over machines.
pub(in crate::run) fn run_id_problem(id: &str) -> Option<String> {
    let fits = id.len() <= MAX_RUN_ID && crate::worktree::check_loop_id(id).is_ok();
    (!fits).then(|| {
        format!(
            "run id {:?} cannot name a git ref: use at most {MAX_RUN_ID} letters, digits, '-', '_' \
             and inner '.' (in GitHub Actions, the workflow run's id)",
            id.chars().take(MAX_RUN_ID + 20).collect::<String>()
        )
    })
}

/// Why `--remote` cannot be handed to git, if it cannot: git would read a leading dash as an
/// option of its own.
pub(in crate::run) fn remote_problem(options: &RunOptions) -> Option<String> {
    let remote = options.remote.as_deref()?;
    let bad = remote.is_empty() || remote.starts_with('-') || remote.chars().any(char::is_control);
    bad.then(|| {
        format!("--remote {remote:?}: give the name or URL of a git remote, such as {DEFAULT_REMOTE}")
    })
}

/// Runs attempt `n` of `k`, then pushes its end state and claim to the remote.
pub(crate) fn attempt(env: &Environment, options: &RunOptions, k: u32, n: u32) -> Outcome {
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --attempt {n}: {what}"));
    let Some(id) = options.run_id.as_deref() else {
        return refuse("--run-id is missing".into());
    };
    let user = WorkTree::open(&env.cwd);
    let remote = options.remote.as_deref().unwrap_or(DEFAULT_REMOTE);
    let base = match clean_head(env, &user) {
        Ok(base) => base,
        Err(what) => return refuse(what),
    };
    // Found out before the agent's time is spent, not after.
    if let Err(e) = user.remote_refs(remote, &format!("{REFS}/{id}/{n}")) {
        return refuse(format!("cannot reach the remote {remote:?}: {e}"));
    }
    let ran = attempts::run(env, options, k);
    let pushed = push_end_state(env, &user, &base, id, (n, k), remote);
    let mut stdout = ran.stdout;
    let code = if pushed.is_ok() { ran.code } else { Code::Refused };
    if options.json {
        let event = match &pushed {
            Ok((commit, claim)) => json!({"event": "pushed", "run": id, "attempt": n, "remote": remote,
                "ref": format!("{REFS}/{id}/{n}"), "commit": commit, "claim": claim}),
            Err(what) => {
                json!({"event": "not_pushed", "run": id, "attempt": n, "remote": remote, "what": what})
            }
        };
        stdout.push_str(&format!("\n{event}"));
    } else {
        stdout.push_str(&match &pushed {
            Ok((commit, claim)) => format!(
                "\n  pushed to {remote} as {REFS}/{id}/{n} (commit {commit}), which {}; \
                 `loop-hook run --pick {id}` re-checks it",
                claim.describe()
            ),
            Err(what) => format!("\n  for-loop: attempt {n} was not pushed: {what}"),
        });
    }
    Outcome { code, stdout }
}

/// The commit HEAD names, when the working tree is just that commit: every machine of a run
/// starts from the same commit, which the pick checks each attempt against.
pub(in crate::run) fn clean_head(env: &Environment, user: &WorkTree) -> Result<String, String> {
    if !user.is_git() {
        return Err(format!(
            "{} is not in a git repository; an attempt starts from a commit every machine of the run has",
            env.cwd.display()
        ));
    }
    let head = user
        .head_commit()
        .map_err(|_| "the repository has no commit to start from: commit first".to_string())?;
    let tree = user.tree_id().map_err(|e| e.to_string())?;
    let changed = user.changed_files(&head, &tree).map_err(|e| e.to_string())?;
    if changed.is_empty() {
        return Ok(head);
    }
    let more = changed.len().saturating_sub(NAMED_FILES);
    let mut named = changed.into_iter().take(NAMED_FILES).collect::<Vec<_>>().join(", ");
    if more > 0 {
        named.push_str(&format!(" and {more} more"));
    }
    Err(format!(
        "the working tree differs from HEAD ({named}); every machine must start from the same \
         commit: commit or stash these changes, or ignore generated files in .gitignore"
    ))
}

/// Replaces attempt `n`'s kept end state by one commit on `base` with its claim, and pushes it
/// (forced: a job run again replaces its own attempt). The commit and claim pushed.
fn push_end_state(
    env: &Environment,
    user: &WorkTree,
    base: &str,
    id: &str,
    (n, k): (u32, u32),
    remote: &str,
) -> Result<(String, Claim), String> {
    let name = format!("{REFS}/{id}/{n}");
    let tree = user
        .resolve(&format!("{name}^{{tree}}"))
        .map_err(|_| format!("attempt {n} kept no end state ({name}), so there is nothing to push"))?;
    let store = Store::locate(env).map_err(|e| e.to_string())?;
    let state = store.paths(&format!("attempt-{id}-{n}")).load().ok().flatten();
    let claim = Claim::of(n, k, state.as_ref());
    let commit = user.commit_tree(&tree, Some(base), &claim.message(id)).map_err(|e| e.to_string())?;
    user.update_ref(&name, &commit).map_err(|e| e.to_string())?;
    user.push_ref(remote, &commit, &name).map_err(|e| {
        format!("{e}\n  it is kept here as {name}: push it with `git push {remote} +{name}:{name}`")
    })?;
    Ok((commit, claim))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> RunOptions {
        RunOptions::parse(args.iter().map(std::ffi::OsString::from).collect()).unwrap()
    }

    /// Both fleets' claims read how a loop ended here, once.
    #[test]
    fn a_loop_ends_as_its_outcome_else_its_status_else_not_started() {
        let never = Ended::of(None);
        assert_eq!(
            (never.outcome.as_str(), never.passed, never.iterations, never.seconds),
            ("not started", false, 0, 0)
        );
        let mut state = crate::state::sample();
        state.meta.iteration = 4;
        state.meta.updated_at = state.meta.started_at + jiff::SignedDuration::from_secs(90);
        let running = Ended::of(Some(&state));
        assert_eq!((running.passed, running.iterations, running.seconds), (false, 4, 90));
        assert_eq!(running.outcome, format!("{:?}", state.meta.status).to_lowercase());
        for (code, passed) in
            [(ReasonCode::Verified, true), (ReasonCode::Promise, true), (ReasonCode::CapReached, false)]
        {
            state.meta.outcome = Some(code);
            let ended = Ended::of(Some(&state));
            assert_eq!((ended.outcome.as_str(), ended.passed), (code.as_str(), passed));
        }
    }

    #[test]
    fn a_claim_reads_back_from_its_message_and_hostile_text_is_cut() {
        let claim = Claim {
            attempt: 2,
            attempts: 3,
            outcome: "verified".into(),
            verified: true,
            iterations: 1,
            seconds: 7,
        };
        let message = claim.message("r-1");
        assert!(message.starts_with("for-loop: attempt 2 of 3 (run r-1), claims verified after 1 iteration"));
        assert_eq!(Claim::read(&message), Some(claim));
        let hostile = format!(
            "{CLAIM_LINE}{}",
            json!({"attempt": 1, "attempts": 1, "outcome": "x\u{1b}[2J\n",
            "verified": false, "iterations": 2, "seconds": 0})
        );
        assert_eq!(Claim::read(&hostile).unwrap().outcome, "x2J");
        for bad in ["", "no claim here", &format!("{CLAIM_LINE}{{"), &format!("{CLAIM_LINE}[1]")] {
            assert_eq!(Claim::read(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn options_of_a_run_over_machines_that_do_not_fit_are_refused() {
        let wrong = |args: &[&str]| misuse(&parse(args));
        assert_eq!(wrong(&["t", "--attempts", "3", "--attempt", "2", "--run-id", "42"]), None);
        assert_eq!(wrong(&["--pick", "42", "--verify", "true", "--remote", "up"]), None);
        for (args, said) in [
            (&["t", "--attempts", "3", "--attempt", "4", "--run-id", "42"][..], "more than --attempts 3"),
            (&["t", "--attempt", "1", "--run-id", "42"], "needs --attempts K"),
            (&["t", "--attempts", "2", "--attempt", "1"], "needs --attempts K and --run-id"),
            (&["t", "--attempts", "2", "--attempt", "1", "--run-id", "a/b"], "cannot name a git ref"),
            (&["t", "--attempts", "2", "--attempt", "1", "--run-id", "..x"], "cannot name a git ref"),
            (&["t", "--attempts", "2", "--attempt", "1", "--run-id", "1", "--parallel"], "leave out"),
            (&["t", "--attempts", "2", "--attempt", "1", "--run-id", "1", "--remote", "-u"], "--remote"),
            (&["t", "--run-id", "1"], "go with --attempt"),
            (&["t", "--remote", "origin"], "go with --attempt"),
            (&["t", "--pick", "1"], "with no task"),
            (&["--pick", "1", "--attempt", "1"], "with no task"),
            (&["--pick", "1", "--apply"], "with no task"),
            (&["--pick", "1", "--agent", "codex"], "runs no agent"),
            (&["--pick", "1", "--more", "2"], "with no task"),
            (&["--pick", "x y"], "cannot name a git ref"),
        ] {
            let found = wrong(args).unwrap_or_default();
            assert!(found.contains(said), "{args:?}: {found:?}");
        }
        let huge = "9".repeat(10_000);
        assert!(wrong(&["--pick", &huge]).unwrap().len() < 400, "a huge id is echoed whole");
        assert!(RunOptions::parse(vec!["t".into(), "--attempt".into(), "0".into()]).is_err());
    }
}
