//! The fresh-context loop itself: start (or resume) the loop, then per iteration run the agent,
//! read how it ended, and hand the iteration to the Stop hook's own judge.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use jiff::{Timestamp, Zoned};
use serde_json::{Value, json};

use super::RunOptions;
use super::limits::{self, AgentEnd};
use super::sandbox::{AgentBox, GitDirs, RunTier};
use super::status::StatusLine;
use crate::commands::ResumeOptions;
use crate::commands::{HandoffRequest, RunRecord, handoff};
use crate::commands::{StartOptions, start};
use crate::hook::stop_hook;
use crate::host::Agent;
use crate::host::StopEvent;
use crate::provenance::{Mutation, origin};
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::state::{LoopState, Status};
use crate::store::Custody;
use crate::store::LoopFile;
use crate::store::{DriverMark, NotTaken};
use crate::store::{LoopPaths, Store};
use crate::store::{Notes, Transaction};
use crate::support::Environment;
use crate::support::Outcome;
use crate::verdict::message::plan;

/// Agent runs that fail in a row before the loop is parked.
const MAX_AGENT_FAILURES: u32 = 3;
/// The first wait after a limit that gives no reset time.
const DEFAULT_BACKOFF: Duration = Duration::from_secs(30);
/// Limits waited out in a row before the loop is parked: never retry forever.
const MAX_LIMIT_WAITS: u32 = 20;
/// The variable the driver sets for the agents it starts, naming its loop.
pub(crate) const RUN_VAR: &str = "FOR_LOOP_RUN";

/// Ctrl-C presses seen since the driver started.
static INTERRUPTS: AtomicU32 = AtomicU32::new(0);

pub(crate) struct Driver {
    env: Environment,
    paths: LoopPaths,
    session_id: String,
    agent: Agent,
    program: PathBuf,
    agent_args: Vec<String>,
    backoff: Duration,
    json: bool,
    started: Instant,
    status: StatusLine,
    /// Set when the driver runs one of several attempts (`--attempts`).
    attempt: Option<Attempt>,
    /// Whether each agent run is sandboxed.
    tier: RunTier,
    store_root: PathBuf,
}

/// One attempt of a best-of-K run: its number, and the flag that says another attempt won.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub(crate) n: u32,
    pub(crate) cancel: Arc<AtomicBool>,
    /// A limit any loop of the run hit: every loop waits for it (the tasks of a backlog share one).
    pub(crate) limit: SharedLimit,
    /// What the run calls it on its lines: `attempt` or `task`.
    pub(crate) kind: &'static str,
}

/// The end of a rate or usage limit one agent of a run hit, shared by the run's loops: the agent
/// CLI's account is the same for all, so none starts another run into the same limit.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedLimit(Arc<Mutex<Option<Instant>>>);

impl SharedLimit {
    /// Holds every loop of the run until `until`, unless one is held longer already.
    fn hold_until(&self, until: Instant) {
        let mut at = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if at.is_none_or(|at| at < until) {
            *at = Some(until);
        }
    }

    /// How long the run is still held.
    fn remaining(&self) -> Option<Duration> {
        let at = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        at.map(|at| at.saturating_duration_since(Instant::now())).filter(|wait| !wait.is_zero())
    }
}

impl Driver {
    pub(crate) fn run(env: &Environment, options: &RunOptions) -> Outcome {
        let mut driver = match Driver::prepare(env, options, None) {
            Ok(driver) => driver,
            Err(outcome) => return outcome,
        };
        catch_interrupts();
        driver.drive()
    }

    /// Runs one attempt of a best-of-K run as a new loop named `session_id`, in `env`'s
    /// directory (the attempt's own work tree).
    pub(crate) fn run_attempt(
        env: &Environment,
        options: &RunOptions,
        session_id: String,
        attempt: Attempt,
    ) -> Outcome {
        let mut driver = match Driver::prepare(env, options, Some(session_id)) {
            Ok(driver) => driver,
            Err(outcome) => return outcome,
        };
        driver.attempt = Some(attempt);
        catch_interrupts();
        driver.drive()
    }

    /// Drives again one task of a backlog run, the loop `options.resume` names (active again, or
    /// parked by Ctrl-C), as an attempt: in its own work tree, sandboxed as attempts are.
    pub(crate) fn resume_attempt(env: &Environment, options: &RunOptions, attempt: Attempt) -> Outcome {
        let mut driver = match Driver::prepare(env, options, None) {
            Ok(driver) => driver,
            Err(outcome) => return outcome,
        };
        driver.attempt = Some(attempt);
        catch_interrupts();
        driver.drive()
    }

    fn prepare(env: &Environment, options: &RunOptions, fresh_id: Option<String>) -> Result<Driver, Outcome> {
        let store = Store::locate(env).map_err(refuse)?;
        let tier = RunTier::choose(options.sandbox).map_err(refuse)?;
        let path = env.var("PATH");
        let (session_id, record) = match &options.resume {
            Some(wanted) => resume_run(env, &store, options, wanted, &tier)?,
            None => start_run(env, &store, options, fresh_id, &tier)?,
        };
        let paths = store.paths(&session_id);
        // A resumed loop runs where it was started, wherever `--resume` was typed.
        let env = match (&options.resume, paths.load()) {
            (Some(_), Ok(Some(state))) if state.meta.cwd.is_dir() => env.with_cwd(state.meta.cwd),
            _ => env.clone(),
        };
        let env = &env;
        let agent = Agent::from_name(&record.agent)
            .ok_or_else(|| refuse(format!("unknown agent {}", record.agent)))?;
        let program = agent.locate(path).ok_or_else(|| {
            refuse(format!("`{}` is not on PATH: install it, or pick another with --agent", agent.program()))
        })?;
        Ok(Driver {
            env: env.clone(),
            paths,
            session_id,
            agent,
            program,
            agent_args: record.agent_args,
            backoff: Duration::from_secs(record.backoff_secs.max(1)),
            json: options.json,
            started: Instant::now(),
            // Attempts run at once would redraw one line over each other: plain lines then.
            status: StatusLine::new(agent.program(), !options.json && !options.parallel),
            attempt: None,
            tier,
            store_root: store.root().to_path_buf(),
        })
    }

    fn drive(&mut self) -> Outcome {
        let loop_id = self.paths.load().ok().flatten().map(|state| state.meta.loop_id).unwrap_or_default();
        let ids = [self.session_id.as_str(), loop_id.as_str()];
        let _driving = match DriverMark::take(&self.paths, &ids) {
            Ok((mark, replaced)) => {
                // Recorded before anything else of this driver's: the line a handoff waits for.
                if let (Some(why), Ok(Some(state))) = (replaced, self.paths.load()) {
                    let detail = format!("{why}; this driver (process {}) took the loop", std::process::id());
                    self.record(&state, LedgerDecision::Note, ReasonCode::DriverMarkReplaced, Some(&detail));
                }
                mark
            }
            Err(NotTaken::Held(pid)) => {
                return refuse(format!(
                    "loop-hook run (process {pid}) is already running this loop ({}); a loop is judged in \
                     one place at a time. `loop-hook status --session {}` follows it.",
                    self.session_id, self.session_id
                ));
            }
            Err(NotTaken::Lock(e)) => {
                return refuse(format!("could not take the loop {} to drive it: {e}", self.session_id));
            }
        };
        let progress = LoopFile::Progress.path(&self.paths.dir);
        let _ = LoopFile::Progress
            .begin(&self.paths.dir, b"# Progress\n\nNotes each iteration leaves for the next one.\n");
        self.announce_tier();
        let mut failures = 0;
        let mut limit_waits = 0;
        loop {
            let state = match self.paths.load() {
                Ok(Some(state)) => state,
                Ok(None) => return Outcome::refused("for-loop: run: the loop's state is gone"),
                Err(e) => return Outcome::refused(format!("for-loop: run: {e}")),
            };
            if !state.is_active() {
                return self.finish(&state);
            }
            if self.stops_asked() > 0 {
                return self.park_interrupted(&state);
            }
            if self.wait_for_shared_limit(&state) {
                return self.park_interrupted(&state);
            }
            let (code, output) = match self.run_iteration(&state, &progress, limit_waits) {
                Ok(ran) => ran,
                Err(outcome) => return outcome,
            };
            if self.stops_asked() > 0 {
                return self.park_interrupted(&state);
            }
            match limits::classify(self.agent, code, &output, &Zoned::now()) {
                AgentEnd::Limited { what, wait } => {
                    limit_waits += 1;
                    if let Some(parked) = self.wait_out_limit(&state, &what, wait, limit_waits) {
                        return parked;
                    }
                    continue;
                }
                AgentEnd::Failed { what } => {
                    failures += 1;
                    if let Some(parked) = self.agent_failed(&state, &what, failures) {
                        return parked;
                    }
                }
                AgentEnd::Finished => failures = 0,
            }
            limit_waits = 0;
            self.judge(&state, &output);
        }
    }

    /// Runs the agent once on this iteration's prompt; returns its exit code and output. The
    /// `limit_waits`th retry after a limit gets its own log.
    fn run_iteration(
        &self,
        state: &LoopState,
        progress: &Path,
        limit_waits: u32,
    ) -> Result<(Option<i32>, String), Outcome> {
        let iteration = state.meta.iteration;
        let prompt = self.prompt(state, progress);
        // A run held by a limit keeps its log: the retry writes its own.
        let retry = if limit_waits == 0 { String::new() } else { format!("-retry-{limit_waits}") };
        let log =
            crate::store::record::log_path(&self.paths.dir, &format!("iteration-{iteration}{retry}.jsonl"));
        self.event(
            json!({"event": "iteration", "iteration": iteration,
            "max_iterations": state.meta.settings.max_iterations, "log": log}),
            &format!(
                "iteration {iteration}/{}: {} running, log {}",
                state.meta.settings.max_iterations,
                self.agent.program(),
                log.display()
            ),
        );
        self.run_agent(&prompt, &log).map_err(|e| {
            Outcome::refused(format!("for-loop: run: could not start {}: {e}", self.program.display()))
        })
    }

    /// Waits out the `limit_waits`th limit in a row the agent hit, not counted as an iteration.
    /// `Some`: the loop is parked instead (too many in a row, or interrupted while waiting).
    fn wait_out_limit(
        &self,
        state: &LoopState,
        what: &str,
        wait: Option<Duration>,
        limit_waits: u32,
    ) -> Option<Outcome> {
        let iteration = state.meta.iteration;
        let wait = wait.unwrap_or_else(|| limits::backoff(self.backoff, limit_waits - 1));
        if let Some(attempt) = &self.attempt {
            attempt.limit.hold_until(Instant::now() + wait);
        }
        self.record(state, LedgerDecision::Allow, ReasonCode::AgentLimited, Some(what));
        if limit_waits > MAX_LIMIT_WAITS {
            return Some(self.park(state, ReasonCode::AgentLimited, what));
        }
        self.event(
            json!({"event": "limit", "iteration": iteration, "wait_secs": wait.as_secs(), "what": what}),
            &format!(
                "iteration {iteration}: {} hit a limit ({what}); waiting {} s, not counted",
                self.agent.program(),
                wait.as_secs()
            ),
        );
        if self.sleep(wait) {
            return Some(self.park_interrupted(state));
        }
        None
    }

    /// Waits out a limit another loop of the run hit, before this one runs its agent into it;
    /// `true` when interrupted while waiting.
    fn wait_for_shared_limit(&self, state: &LoopState) -> bool {
        let Some(wait) = self.attempt.as_ref().and_then(|a| a.limit.remaining()) else { return false };
        let what = "another agent of this run hit a limit";
        self.event(
            json!({"event": "limit", "iteration": state.meta.iteration, "wait_secs": wait.as_secs(), "what": what}),
            &format!("iteration {}: {what}; waiting {} s for it too", state.meta.iteration, wait.as_secs()),
        );
        self.sleep(wait)
    }

    /// Records the `failures`th failed agent run in a row. `Some`: the loop is parked, too many
    /// failed.
    fn agent_failed(&self, state: &LoopState, what: &str, failures: u32) -> Option<Outcome> {
        let iteration = state.meta.iteration;
        self.record(state, LedgerDecision::Allow, ReasonCode::AgentFailed, Some(what));
        self.event(
            json!({"event": "agent_failed", "iteration": iteration, "what": what, "in_a_row": failures}),
            &format!("iteration {iteration}: {} failed ({what}), {failures} in a row", self.agent.program()),
        );
        if failures >= MAX_AGENT_FAILURES {
            return Some(self.park(state, ReasonCode::AgentFailed, what));
        }
        None
    }

    /// Hands the iteration to the Stop hook's judge, keeps its block reason as the next prompt,
    /// and reports the verify result of a loop that goes on.
    fn judge(&self, state: &LoopState, output: &str) {
        let iteration = state.meta.iteration;
        let event = StopEvent {
            session_id: self.session_id.clone(),
            stop_hook_active: None,
            last_assistant_message: self.agent.final_message(output),
            transcript: None,
            background: None,
        };
        let mut env = self.env.with_now(Timestamp::now());
        if self.tier.is_sandboxed() {
            env = env.with_var(crate::checks::RUN_SANDBOX_VAR, "1");
        }
        let response = stop_hook::judge(&env, self.agent.host(), &event);
        if let Some(reason) = &response.block {
            let _ = LoopFile::NextPrompt.write(&self.paths.dir, reason.as_bytes());
        }
        let after = self.paths.load().ok().flatten();
        if let Some(after) = after.filter(LoopState::is_active) {
            let last = after.meta.last_verify.as_ref().map(|v| v.exit_code);
            let failing =
                after.meta.failing.as_ref().filter(|now| now.count() > 0 || state.meta.failing.is_some());
            let failing = failing.map(|now| crate::state::describe_failing(state.meta.failing.as_ref(), now));
            self.event(
                json!({"event": "verify", "iteration": iteration, "exit_code": last,
                "same_failure": after.meta.streaks.same_failure, "no_change": after.meta.streaks.no_change,
                "failing": after.meta.failing.as_ref().map(|f| &f.names)}),
                &format!(
                    "iteration {iteration}: verify exit {} · same failure ×{} · {:.0?} elapsed{}",
                    last.flatten().map_or("?".into(), |c| c.to_string()),
                    after.meta.streaks.same_failure,
                    self.started.elapsed(),
                    failing.map(|f| format!(" · {f}")).unwrap_or_default()
                ),
            );
        }
    }

    /// The prompt of a fresh session: the task (or, after the first iteration, the judge's
    /// re-injection with the last verify result and escalation notes) and the progress file.
    fn prompt(&self, state: &LoopState, progress: &Path) -> String {
        let body = LoopFile::NextPrompt
            .read(&self.paths.dir, 4 << 20)
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .filter(|_| state.meta.iteration > 1)
            .unwrap_or_else(|| {
                // A plan loop's first session is given the story to work on, not the whole plan.
                let story = state.meta.plan.as_ref().map(|p| plan::story_brief(state, p.current));
                format!(
                    "{}\n{}\n---\nfor-loop: this is iteration {} of {}. The loop ends when `{}` passes.{}",
                    state.task.trim_end(),
                    story.unwrap_or_default(),
                    state.meta.iteration,
                    state.meta.settings.max_iterations,
                    state.current_check().unwrap_or("the check"),
                    self.handed_over_note(state)
                )
            });
        format!(
            "{body}\n\nThis is a fresh session: earlier iterations' notes are in {}. Read it first, \
             and before you finish add what you did, what you learned and what is left.",
            progress.display()
        )
    }

    /// For the first fresh session of a loop handed over from a session: where it came from, and
    /// how the check last failed there (the tail of its output, from the ledger), which the
    /// session's own re-injection said and no file of the run holds yet.
    fn handed_over_note(&self, state: &LoopState) -> String {
        let Some(handoff) = state.meta.handoff.as_ref().filter(|h| h.to == state.meta.session_id) else {
            return String::new();
        };
        let entries = LedgerEntry::read_last(&self.paths.ledger, 50).unwrap_or_default();
        let failing = crate::state::describe_failing_in(&entries);
        let last = entries
            .into_iter()
            .rev()
            .find_map(|entry| entry.verify)
            .filter(|verify| verify.exit_code != Some(0));
        let mut note = format!(
            "\n\nThe loop was handed over to fresh sessions from an earlier session, at iteration {}.",
            handoff.iteration
        );
        if let Some(verify) = last {
            let tail: String = {
                let chars: Vec<char> = verify.tail.chars().collect();
                chars[chars.len().saturating_sub(2_000)..].iter().collect()
            };
            note.push_str(&format!(
                " The check last failed there ({}); its output ended:\n\n```\n{}\n```",
                match (verify.timed_out, verify.exit_code) {
                    (true, _) => "timed out".to_string(),
                    (false, Some(code)) => format!("exit {code}"),
                    (false, None) => "killed".to_string(),
                },
                tail.trim_end()
            ));
            if let Some(failing) = failing {
                note.push_str(&format!("\nIts output named {failing}."));
            }
        }
        note
    }

    /// Runs the agent in its own process group (in its sandbox, when it has one), its output
    /// streamed to `log`. The first Ctrl-C ends the run (SIGINT to the group; in the sandbox that
    /// ends bubblewrap and with it everything inside), the second kills it; whatever the run
    /// left in its group is killed when it ends, so no process of it outlives the iteration.
    fn run_agent(&self, prompt: &str, log: &Path) -> std::io::Result<(Option<i32>, String)> {
        let file = crate::store::record::open_log(log, false)?;
        let agent = self.agent.command(&self.program, prompt, &self.agent_args);
        // The CLI's private settings live as long as this run, and go with it.
        let private = tempfile::Builder::new().prefix("for-loop-agent-").tempdir()?;
        let mut cmd = if self.tier.is_sandboxed() { self.sandboxed(&agent, private.path())? } else { agent };
        cmd.current_dir(&self.env.cwd)
            .env(RUN_VAR, &self.session_id)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn()?;
        let status = wait_interruptibly(&mut child, || self.stops_asked());
        kill_group(&child, true);
        let output = fs::read_to_string(log).unwrap_or_default();
        Ok((status.and_then(|s| s.code()), output))
    }

    /// `agent` inside bubblewrap: see [`AgentBox`] for what it may write.
    fn sandboxed(
        &self,
        agent: &std::process::Command,
        private: &Path,
    ) -> std::io::Result<std::process::Command> {
        let work = crate::worktree::WorkTree::open(&self.env.cwd).root().to_path_buf();
        let git = GitDirs::of(&work);
        let users_repo = match (&self.attempt, &git) {
            (Some(_), Some(git)) => git.common.parent().map(Path::to_path_buf),
            _ => None,
        };
        let read_only = crate::checks::sandbox::read_only_paths(&self.env, &self.store_root);
        let sandbox = AgentBox {
            cwd: self.env.cwd.clone(),
            work,
            git,
            users_repo,
            read_only,
            notes: LoopFile::Progress.path(&self.paths.dir),
            config: super::sandbox::private_copies(&self.agent.config_paths(&self.env), private)?,
        };
        let args = sandbox.args();
        let mut cmd = std::process::Command::new(&args[0]);
        cmd.args(&args[1..]).arg(agent.get_program()).args(agent.get_args());
        Ok(cmd)
    }

    /// Says, first, whether the agent runs sandboxed.
    fn announce_tier(&self) {
        let line = self.tier.line();
        self.event(json!({"event": "sandbox", "sandboxed": self.tier.is_sandboxed(), "tier": line}), &line);
    }

    /// Ctrl-C presses seen; another attempt's win counts as two, which kills this one's agent.
    fn stops_asked(&self) -> u32 {
        let won = self.attempt.as_ref().is_some_and(|a| a.cancel.load(Ordering::SeqCst));
        if won { 2 } else { INTERRUPTS.load(Ordering::SeqCst) }
    }

    /// Sleeps `wait`, in steps so Ctrl-C is seen; `true` when interrupted.
    fn sleep(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if self.stops_asked() > 0 {
                return true;
            }
            thread::sleep(Duration::from_millis(100).min(until - Instant::now()));
        }
        false
    }

    fn record(&self, state: &LoopState, decision: LedgerDecision, reason: ReasonCode, detail: Option<&str>) {
        let entry = LedgerEntry {
            detail: detail.map(str::to_string),
            ..LedgerEntry::new(state, Timestamp::now(), decision, reason)
        };
        let _ = crate::store::note_best_effort(&self.paths, &entry);
    }

    fn park_interrupted(&self, state: &LoopState) -> Outcome {
        let won = self.attempt.as_ref().is_some_and(|a| a.cancel.load(Ordering::SeqCst));
        let what = if won { "another attempt verified first" } else { "interrupted (Ctrl-C)" };
        let mut outcome = self.park(state, ReasonCode::Interrupted, what);
        outcome.code = crate::support::Code::Refused;
        outcome
    }

    /// Parks the loop outside a stop: it keeps its iteration, and `--resume` continues it.
    fn park(&self, state: &LoopState, reason: ReasonCode, what: &str) -> Outcome {
        let saved = park_loop(&self.paths, reason, what);
        self.event(
            json!({"event": "parked", "reason": reason.as_str(), "what": what, "loop": self.session_id}),
            &format!("loop parked: {what}"),
        );
        let note = saved.err().map(|e| format!(" (could not save the state: {e})")).unwrap_or_default();
        Outcome {
            code: crate::support::Code::Refused,
            stdout: format!(
                "for-loop: run parked at iteration {}: {what}{note}.\n  resume: loop-hook run --resume {}\n  ledger: {}",
                state.meta.iteration,
                self.session_id,
                self.paths.ledger.display()
            ),
        }
    }

    /// The loop ended or parked at a judged stop: its receipt.
    fn finish(&self, state: &LoopState) -> Outcome {
        let outcome = state.meta.outcome.map_or("parked", ReasonCode::as_str);
        let receipt = state
            .meta
            .receipt
            .as_ref()
            .map(|r| r.render(&format!("for-loop: run {outcome}"), self.agent.host()))
            // The receipt names the host's in-session resume; a run goes on with its own.
            .map(|text| {
                text.replace(
                    self.agent.host().commands().resume,
                    &format!("loop-hook run --resume {}", self.session_id),
                )
            });
        self.event(
            json!({"event": "end", "outcome": outcome, "iteration": state.meta.iteration,
            "status": format!("{:?}", state.meta.status).to_lowercase(), "ledger": self.paths.ledger,
            "receipt": state.meta.receipt, "sandboxed": self.tier.is_sandboxed()}),
            "",
        );
        let text = format!(
            "{}\n  ledger: {}\n  {}",
            receipt.unwrap_or_else(|| format!("for-loop: run {outcome}")),
            self.paths.ledger.display(),
            self.tier.line()
        );
        let code = if state.meta.outcome == Some(ReasonCode::Verified)
            || state.meta.outcome == Some(ReasonCode::Promise)
        {
            crate::support::Code::Success
        } else {
            crate::support::Code::Refused
        };
        Outcome { code, stdout: if self.json { String::new() } else { text } }
    }

    /// One event: a JSON line on stdout with `--json`, else a status line on stderr.
    fn event(&self, mut event: Value, line: &str) {
        if self.json {
            event["loop"] = json!(self.session_id);
            if let Some(attempt) = &self.attempt {
                event["attempt"] = json!(attempt.n);
            }
            event["elapsed_ms"] =
                json!(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX));
            emit(&format!("{event}\n"));
        } else {
            if !line.is_empty() {
                match &self.attempt {
                    Some(attempt) => {
                        self.status.println(&format!("for-loop: {} {}: {line}", attempt.kind, attempt.n));
                    }
                    None => self.status.println(&format!("for-loop: {line}")),
                }
            }
            self.status.observe(&event);
        }
    }
}

/// Writes one whole event line to stdout. `main` holds the stdout lock until the command's own
/// output is written, and `--parallel` attempts emit from threads of their own: the line goes
/// through a duplicate of the descriptor, one writer at a time.
pub(crate) fn emit(line: &str) {
    static TURN: Mutex<()> = Mutex::new(());
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    #[cfg(unix)]
    if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stdout()).try_clone_to_owned() {
        let _ = File::from(fd).write_all(line.as_bytes());
    }
    #[cfg(not(unix))]
    {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

/// Waits for the agent, passing Ctrl-C on: the first asks the group to stop, the second kills it.
fn wait_interruptibly(child: &mut Child, stops_asked: impl Fn() -> u32) -> Option<std::process::ExitStatus> {
    let mut asked = 0;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(_) => return None,
        }
        let seen = stops_asked();
        if seen > asked {
            asked = seen;
            kill_group(child, seen >= 2);
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Signals the agent's process group: SIGINT to end it cleanly, SIGKILL to end what is left.
#[cfg_attr(not(unix), allow(unused_variables))]
fn kill_group(child: &Child, hard: bool) {
    #[cfg(unix)]
    {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = killpg(Pid::from_raw(pid), if hard { Signal::SIGKILL } else { Signal::SIGINT });
        }
    }
}

/// Counts Ctrl-C instead of dying, so the agent's run can be ended and the loop parked.
fn catch_interrupts() {
    #[cfg(unix)]
    {
        use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
        extern "C" fn count(_: nix::libc::c_int) {
            INTERRUPTS.fetch_add(1, Ordering::SeqCst);
        }
        let action = SigAction::new(SigHandler::Handler(count), SaFlags::SA_RESTART, SigSet::empty());
        // SAFETY: the handler only increments an atomic, which is async-signal-safe.
        #[allow(unsafe_code)]
        let _ = unsafe { sigaction(Signal::SIGINT, &action) };
        #[allow(unsafe_code)]
        let _ = unsafe { sigaction(Signal::SIGTERM, &action) };
    }
}

/// The newest run loop in the store (its session id starts `run-`), or the one named `wanted`.
/// A run that cannot go on, and why.
fn refuse(what: impl std::fmt::Display) -> Outcome {
    Outcome::refused(format!("for-loop: run: {what}"))
}

/// The run loop `wanted` names (the newest when empty), active again with `options.more`, and
/// the driver settings it was started with.
fn resume_run(
    env: &Environment,
    store: &Store,
    options: &RunOptions,
    wanted: &str,
    tier: &RunTier,
) -> Result<(String, RunRecord), Outcome> {
    if !tier.is_sandboxed() && env.var("FOR_LOOP_REQUIRE_STRICT").is_some_and(|v| v != "0") {
        return Err(refuse(format!(
            "not resumed: strict mode is required (FOR_LOOP_REQUIRE_STRICT), but the agent would run in {}",
            tier.line()
        )));
    }
    let session_id = match newest_run(store, wanted) {
        Some(session_id) => session_id,
        None => hand_over_session_loop(env, store, options, wanted)?,
    };
    let paths = store.paths(&session_id);
    let record = RunRecord::read(&paths.dir).map_err(refuse)?;
    reactivate(&paths, env, &options.more, &tier.loop_tier().line()).map_err(refuse)?;
    Ok((session_id, record))
}

/// Starts a new loop for the run (named `fresh_id`, or after the time) in the run's `tier`, and
/// keeps the driver's settings beside it for `--resume`.
fn start_run(
    env: &Environment,
    store: &Store,
    options: &RunOptions,
    fresh_id: Option<String>,
    tier: &RunTier,
) -> Result<(String, RunRecord), Outcome> {
    let agent = match options.agent {
        Some(agent) => agent,
        None => Agent::ALL.into_iter().find(|a| a.locate(env.var("PATH")).is_some()).ok_or_else(|| {
            refuse("no agent CLI found on PATH (claude, gemini or codex); install one or pass --agent")
        })?,
    };
    let token = crate::provenance::claim::new_token().map_err(|e| refuse(format!("no random bytes: {e}")))?;
    // The token's random hex after its prefix, behind the time: sortable and unique.
    let random: String = token.chars().rev().take(8).collect();
    let session_id =
        fresh_id.unwrap_or_else(|| format!("run-{}-{random}", env.now.strftime("%Y%m%d-%H%M%S")));
    let started = start::run_request(
        env,
        &StartOptions {
            session_id: Some(session_id.clone()),
            cwd: None,
            host: Some(agent.host()),
            origin: Some(crate::host::Origin::of_command_line(env)),
            transcript: None,
            tier: Some(tier.loop_tier()),
            ..StartOptions::default()
        },
        options.loop_request(),
    );
    if started.code != crate::support::Code::Success {
        return Err(Outcome { stdout: started.stdout.replace("/for-loop", "loop-hook run"), ..started });
    }
    let record = RunRecord {
        agent: agent.program().into(),
        agent_args: options.agent_args.clone(),
        backoff_secs: options.backoff.unwrap_or(DEFAULT_BACKOFF).as_secs(),
    };
    let paths = store.paths(&session_id);
    if let Ok(held) = Transaction::lock(&paths) {
        let _ = record.write(&held);
    }
    Ok((session_id, record))
}

/// `--resume LOOP` naming a loop that runs in a session (by its session id or loop id, as
/// `loop-hook status --all` lists them): the loop is handed over to the run, and the run loop's
/// session id returned. One already handed over is followed to its run.
fn hand_over_session_loop(
    env: &Environment,
    store: &Store,
    options: &RunOptions,
    wanted: &str,
) -> Result<String, Outcome> {
    let no_loop = || {
        refuse(format!(
            "no run loop to resume{}. `loop-hook status --all` lists the loops.",
            if wanted.is_empty() { String::new() } else { format!(" named {wanted}") }
        ))
    };
    if wanted.is_empty() {
        return Err(no_loop());
    }
    let (paths, state) = store
        .all()
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|paths| paths.load().ok().flatten().map(|state| (paths, state)))
        .filter(|(_, state)| state.meta.session_id == wanted || state.meta.loop_id == wanted)
        .max_by_key(|(_, state)| state.meta.updated_at)
        .ok_or_else(no_loop)?;
    if let (Some(handoff), Some(ReasonCode::HandedOver)) = (&state.meta.handoff, state.meta.outcome) {
        return Ok(handoff.to.clone());
    }
    let origin = crate::host::Origin::of_command_line(env);
    if let Some(refusal) = origin::gate(env, Notes::Free(&paths), &state, Mutation::Handoff, origin) {
        return Err(refusal);
    }
    let request = HandoffRequest {
        agent: options.agent,
        agent_args: options.agent_args.clone(),
        backoff_secs: options.backoff.map(|b| b.as_secs()),
        from_session: None,
    };
    let handed = handoff::hand_over(env, store, &paths, &request)
        .map_err(|e| refuse(format!("not handed over: {e}")))?;
    origin::after(Notes::Free(&paths), &state, Mutation::Handoff, origin);
    Ok(handed.run_id)
}

fn newest_run(store: &Store, wanted: &str) -> Option<String> {
    let mut found: Vec<(Timestamp, String)> = store
        .all()
        .ok()?
        .into_iter()
        .filter_map(|paths| paths.load().ok().flatten())
        // A backlog task's loop is resumed by its run, which names it.
        .filter(|state| {
            state.meta.session_id.starts_with("run-")
                || (state.meta.session_id.starts_with("backlog-") && state.meta.session_id == wanted)
        })
        .filter(|state| wanted.is_empty() || state.meta.session_id == wanted || state.meta.loop_id == wanted)
        .map(|state| (state.meta.updated_at, state.meta.session_id))
        .collect();
    found.sort();
    found.pop().map(|(_, id)| id)
}

/// Makes a parked or capped run loop active again with the room `more` asks for, in the run's
/// `tier` (this driver's sandbox, which may not be the last driver's), recorded in its ledger.
fn reactivate(paths: &LoopPaths, env: &Environment, more: &ResumeOptions, tier: &str) -> Result<(), String> {
    let (transaction, custody) = Transaction::open(paths, env.now).map_err(|e| e.to_string())?;
    let mut state = trusted(custody)?;
    match (state.meta.status, state.meta.outcome) {
        // A loop already active (handed over from its session) takes this driver's tier.
        (Status::Active, _) if *more == ResumeOptions::default() => {
            if state.meta.tier.as_deref() == Some(tier) {
                return Ok(());
            }
            state.meta.tier = Some(tier.to_string());
            state.meta.updated_at = env.now;
            let entry = LedgerEntry {
                detail: Some(format!("taken up by loop-hook run: {tier}")),
                ..LedgerEntry::new(&state, env.now, LedgerDecision::Resume, ReasonCode::Resumed)
            };
            return transaction.commit(&state, &[entry]).map_err(|e| e.to_string());
        }
        (Status::Ended, Some(ReasonCode::Verified | ReasonCode::Promise)) => {
            return Err("the loop ended verified; start a new one".to_string());
        }
        _ => {}
    }
    let was = state.meta.outcome.map_or("parked", ReasonCode::as_str);
    // A judged stop (the cap, a budget, the stall breaker) closed its iteration; a park of the
    // driver's own (Ctrl-C, agent failures, limits) left it unfinished, to be run again.
    if state.meta.outcome.is_some() {
        state.meta.iteration += 1;
    }
    crate::commands::resume::reopen(&mut state.meta, more, env.now);
    state.meta.tier = Some(tier.to_string());
    state.meta.updated_at = env.now;
    let entry = LedgerEntry {
        detail: Some(format!("resumed after {was}")),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Resume, ReasonCode::Resumed)
    };
    transaction.commit(&state, &[entry]).map_err(|e| e.to_string())
}

/// The loop as last committed: a state edited behind the driver's back (by the agent it runs)
/// is restored by custody, and one no trusted copy vouches for is refused, never trusted.
pub(crate) fn trusted(custody: Custody) -> Result<LoopState, String> {
    match custody {
        Custody::Loop { state, .. } => Ok(state),
        Custody::None => Err("the loop's state is gone".to_string()),
        Custody::Untrusted { why, .. } => Err(format!("{why}; the loop cannot be trusted any more")),
    }
}

/// Parks a run loop outside a judged stop, recorded in its ledger with `reason` and `what`.
pub(crate) fn park_loop(paths: &LoopPaths, reason: ReasonCode, what: &str) -> Result<(), String> {
    let now = Timestamp::now();
    let (transaction, custody) = Transaction::open(paths, now).map_err(|e| e.to_string())?;
    let mut next = trusted(custody)?;
    next.meta.status = Status::Parked;
    next.meta.updated_at = now;
    let entry = LedgerEntry {
        detail: Some(what.to_string()),
        ..LedgerEntry::new(&next, next.meta.updated_at, LedgerDecision::Allow, reason)
    };
    transaction.commit(&next, &[entry]).map_err(|e| e.to_string())
}

/// Whether Ctrl-C was pressed since the driver started.
pub(crate) fn interrupted() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 0
}
