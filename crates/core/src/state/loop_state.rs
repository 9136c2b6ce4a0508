//! The loop's state: settings and progress as YAML frontmatter, the task as the Markdown body.
//!
//! One parser reads and writes this file (peers froze their counters when a writer and a reader
//! disagreed). The body is the task exactly as the user gave it.

use std::path::PathBuf;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::checks::Oracle;
use crate::checks::Streaks;
use crate::checks::TestRatchet;
use crate::host::Host;
use crate::host::UsageCursor;
use crate::state::ReasonCode;
use crate::state::Receipt;
use crate::state::Status;
use crate::support::{Frontmatter, FrontmatterError};

/// The schema this build writes. A file with a larger number comes from a newer for-loop.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Why a state file could not be read.
#[derive(Debug, Error)]
pub(crate) enum StateError {
    #[error("the state file is not valid: {0}")]
    Frontmatter(#[from] FrontmatterError),
    #[error("the state file's settings are not valid YAML for this schema: {0}")]
    Yaml(String),
    #[error(
        "the state file has schema {found}, but this loop-hook understands schema {SCHEMA_VERSION} \
         at most: update loop-hook (`cargo install --locked --path <for-loop checkout>`)"
    )]
    NewerSchema { found: u32 },
    #[error("the loop's state cannot be written as YAML: {0}")]
    Render(String),
}

/// The settings a loop was started with. They never change during the loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// Shell command whose exit status 0 means done. `None`: no verify command.
    pub verify: Option<String>,
    /// Text that must appear as `<promise>TEXT</promise>` in the final message.
    pub completion_promise: Option<String>,
    /// Turns the agent gets in all: the first plus `max_iterations - 1` re-injections.
    pub max_iterations: u32,
    /// Seconds verify may run before its whole process group is killed.
    pub verify_timeout_secs: u64,
    /// Identical failures, or stops without a change, in a row before the loop is parked.
    #[serde(default = "default_max_same_failures")]
    pub max_same_failures: u32,
    /// Same-failure counts at which the re-injection gets firmer.
    #[serde(default = "default_escalation")]
    pub escalation: Vec<u32>,
    /// Wall-clock budget in seconds; the loop is parked when it is spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time_secs: Option<u64>,
    /// Snapshot the working tree to `refs/for-loop/<loop id>/<n>` after each iteration.
    #[serde(default)]
    pub checkpoint: bool,
    /// Token budget: the loop is parked once the session's model usage since the loop started
    /// passes it ([`crate::host::usage::TokenCounts::counted`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Shell command run when the loop ends or parks ([`crate::commands::notify`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<String>,
    /// Metric mode: keep what improves a number, discard what does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<crate::metric::MetricSettings>,
    /// The task may change the tests: no test-count ratchet, and the test suite is not protected
    /// unless `--protect` names it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_test_edits: bool,
    /// A reviewer that may veto a passing check (`--review`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<crate::checks::ReviewSettings>,
    /// The stories the loop works through one at a time (`--plan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::checks::PlanSettings>,
    /// The files the model may change (`--scope`): a pass with a change outside does not count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    /// What a usage limit in the session does to the loop (`--on-limit`).
    #[serde(default, skip_serializing_if = "OnLimit::is_wait")]
    pub on_limit: OnLimit,
    /// How long stops are let through unjudged while the session's background work runs
    /// (`--background-wait`); `None`: the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_wait_secs: Option<u64>,
    /// The re-injection's budget in tokens (`--feedback-tokens`); `None`: the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_tokens: Option<u32>,
}

/// What a loop does when the host says the account is limited until a time (`--on-limit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OnLimit {
    /// Parked until the reset; the user's next prompt after it goes on.
    #[default]
    Wait,
    /// Handed over to `loop-hook run`, which waits out the window itself and goes on.
    Handoff,
}

impl OnLimit {
    /// The value as `--on-limit` takes it.
    pub(crate) fn parse(word: &str) -> Option<OnLimit> {
        match word {
            "wait" => Some(OnLimit::Wait),
            "handoff" => Some(OnLimit::Handoff),
            _ => None,
        }
    }

    // serde's `skip_serializing_if` hands the field over by reference.
    #[allow(clippy::trivially_copy_pass_by_ref)]
    fn is_wait(&self) -> bool {
        *self == OnLimit::Wait
    }
}

/// Where a loop handed over from its session to `loop-hook run` went, kept on both copies: the
/// session's (ended `handed_over`) and the run's, which goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Handoff {
    /// The session the loop ran in.
    pub from: String,
    /// The run loop's session id (`run-…`), as `loop-hook run --resume` and `loop-hook status`
    /// take it.
    pub to: String,
    pub at: Timestamp,
    /// The iteration the loop was at when it moved.
    pub iteration: u32,
}

fn default_max_same_failures() -> u32 {
    crate::checks::DEFAULT_MAX_SAME_FAILURES
}

fn default_escalation() -> Vec<u32> {
    crate::checks::DEFAULT_ESCALATION.to_vec()
}

/// The last verify run, kept for status and the end-of-loop summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LastVerify {
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub timed_out: bool,
}

/// Everything above the task in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Meta {
    pub schema: u32,
    pub loop_id: String,
    /// The session that started the loop; only its stops are judged. Empty: nobody's.
    pub session_id: String,
    /// The agent host the loop runs in.
    pub host: Host,
    /// Where the loop was started; verify runs here.
    pub cwd: PathBuf,
    pub settings: Settings,
    /// The turn in progress, from 1 to `max_iterations`.
    pub iteration: u32,
    pub status: Status,
    /// Why the loop ended, once it has.
    pub outcome: Option<ReasonCode>,
    pub started_at: Timestamp,
    pub updated_at: Timestamp,
    /// Time spent in verify over the whole loop.
    pub verify_total_ms: u64,
    pub last_verify: Option<LastVerify>,
    /// The oracle as it was at start.
    #[serde(default)]
    pub oracle: Oracle,
    /// The test-count ratchet's records.
    #[serde(default, skip_serializing_if = "TestRatchet::is_unset")]
    pub tests: TestRatchet,
    #[serde(default)]
    pub streaks: Streaks,
    /// The failing names of the last judged stop's check, to say what the next one fixed.
    /// `None` before the first, or when no runner's report was recognised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<crate::state::FailingNames>,
    /// The working tree's fingerprint at start, to list the files the loop changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_tree: Option<String>,
    /// Whether the last judged stop was blocked: if the next stop says the host is not
    /// continuing because of it, the host overrode the block.
    #[serde(default)]
    pub last_blocked: bool,
    /// How often the host overrode a block (Claude Code's block cap).
    #[serde(default)]
    pub harness_overrides: u32,
    /// The end-of-loop receipt, once the loop has ended or parked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
    /// How far the transcript was read for model usage, and the usage since the loop started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageCursor>,
    /// A metric loop's baseline, best and attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<crate::metric::MetricProgress>,
    /// The host's transcript of the session, as the host named it in the user's own prompt that
    /// started the loop. A Stop event names its transcript too, but a forged one can point
    /// anywhere: this is where the hook looks for a tool call still pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<PathBuf>,
    /// The tier the loop started in, as its start message said it (the host's sandbox settings
    /// can change later; this is what held when the loop was set up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// A change the prompt hook made that the host's transcript has not yet shown the user to
    /// have asked for ([`crate::provenance::confirmation`]). Kept in the state so that removing it is a
    /// change of the state, which custody finds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting: Option<crate::state::Awaiting>,
    /// A digest of the agent's final reply at the last judged stop, as the loop's transcript
    /// showed it: a stop that finds no newer reply there is not the end of a new turn, so it
    /// cannot pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reply: Option<String>,
    /// What decides whether for-loop's hooks run at all (the host's settings keys, the plugin's
    /// hook list and launcher, the binary's identity), as the guard last saw it while the loop ran
    /// ([`crate::host::config_watch`]); a change is told to the user at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_config: Option<crate::host::Snapshot>,
    /// How far a plan loop is through its stories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::checks::PlanProgress>,
    /// Stops the agent forged from its shell during this loop (recorded, never judged), counted
    /// as each is recorded. `None` for a loop started before the count was kept: its ledger has
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forged_stops: Option<u32>,
    /// The last turn, when the host ended it on an error rather than a stop; cleared by the next
    /// judged stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_turn: Option<crate::state::FailedTurn>,
    /// Where the loop went, or came from, when it was handed over to `loop-hook run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
    /// Stops let through while background work ran, and blocks in a row without a tool call.
    #[serde(default, skip_serializing_if = "crate::state::Rhythm::is_unset")]
    pub rhythm: crate::state::Rhythm,
}

/// A loop: its settings and progress, and the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopState {
    pub meta: Meta,
    pub task: String,
}

/// Only the schema number, read when the settings do not read, so a newer file gets a clear refusal
/// rather than an "unknown field" error.
#[derive(Deserialize)]
struct SchemaProbe {
    schema: Option<u32>,
}

impl LoopState {
    /// The loop's receipt, after its last stop.
    pub(crate) fn receipt(
        &self,
        outcome: ReasonCode,
        now: Timestamp,
        files_changed: Option<Vec<String>>,
    ) -> Receipt {
        let meta = &self.meta;
        let elapsed = now.duration_since(meta.started_at);
        Receipt {
            outcome,
            status: meta.status,
            iterations: meta.iteration,
            max_iterations: meta.settings.max_iterations,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(0),
            verify_ms: meta.verify_total_ms,
            same_failure_streak: meta.streaks.same_failure,
            no_change_streak: meta.streaks.no_change,
            harness_overrides: meta.harness_overrides,
            files_changed,
            oracle_changed: Vec::new(),
            at: now,
            tokens: meta.usage.as_ref().map(|u| u.used.total().counted()),
            metric: meta.metric.as_ref().map(|m| crate::state::MetricSummary {
                baseline: m.baseline,
                best: m.best,
                name: m.name.clone(),
                keeps: m.keeps,
                discards: m.discards,
                best_checkpoint: crate::worktree::checkpoint_ref(&meta.loop_id, m.best_checkpoint),
            }),
            forged_stops: 0,
            tests: meta.tests.last,
            most_tests_ran: meta.tests.most_ran(),
            skip_markers: Vec::new(),
            abort_reason: None,
            review: None,
            plan: None,
        }
    }

    /// The command that judges this loop's stops now: the current story's check in a plan loop
    /// (its own, else `--verify`), otherwise `--verify`; `None` for a loop judged by its promise
    /// alone.
    pub(crate) fn current_check(&self) -> Option<&str> {
        let verify = self.meta.settings.verify.as_deref();
        match (&self.meta.settings.plan, &self.meta.plan) {
            (Some(plan), Some(progress)) => plan.check(progress.current, verify),
            _ => verify,
        }
    }

    /// Parses a state file.
    pub(crate) fn parse(text: &str) -> Result<Self, StateError> {
        let parts = Frontmatter::split(text)?;
        let newer = |found| (found > SCHEMA_VERSION).then_some(StateError::NewerSchema { found });
        match serde_saphyr::from_str::<Meta>(parts.yaml) {
            Ok(meta) => match newer(meta.schema) {
                Some(refused) => Err(refused),
                None => Ok(LoopState { meta, task: parts.body.to_string() }),
            },
            // A newer schema may not read as this one: say so rather than why it does not read.
            Err(e) => match serde_saphyr::from_str(parts.yaml) {
                Ok(SchemaProbe { schema: Some(found) }) => {
                    Err(newer(found).unwrap_or(StateError::Yaml(e.to_string())))
                }
                _ => Err(StateError::Yaml(e.to_string())),
            },
        }
    }

    /// Renders the state file. Fails rather than write a state that would not read back (a
    /// directory whose name is not UTF-8 cannot be YAML text).
    pub(crate) fn render(&self) -> Result<String, StateError> {
        let yaml = serde_saphyr::to_string(&self.meta).map_err(|e| StateError::Render(e.to_string()))?;
        Ok(Frontmatter::join(&yaml, &self.task))
    }

    pub(crate) fn is_active(&self) -> bool {
        self.meta.status == Status::Active
    }

    /// True when `session_id` owns this loop. A loop without an owner belongs to nobody.
    pub(crate) fn is_owned_by(&self, session_id: &str) -> bool {
        !self.meta.session_id.is_empty() && self.meta.session_id == session_id
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn sample() -> LoopState {
        let at: Timestamp = "2026-11-22T03:00:00Z".parse().unwrap();
        LoopState {
            meta: Meta {
                schema: SCHEMA_VERSION,
                loop_id: "20261122-030000-abcdef".into(),
                session_id: "sess-1".into(),
                host: Host::ClaudeCode,
                cwd: PathBuf::from("/project"),
                settings: Settings {
                    verify: Some("cargo test".into()),
                    completion_promise: None,
                    max_iterations: 30,
                    verify_timeout_secs: 300,
                    max_same_failures: 8,
                    escalation: vec![2, 4, 6],
                    max_time_secs: None,
                    checkpoint: false,
                    max_tokens: None,
                    notify: None,
                    metric: None,
                    allow_test_edits: false,
                    review: None,
                    plan: None,
                    scope: Vec::new(),
                    on_limit: OnLimit::Wait,
                    background_wait_secs: None,
                    feedback_tokens: None,
                },
                iteration: 1,
                status: Status::Active,
                outcome: None,
                started_at: at,
                updated_at: at,
                verify_total_ms: 0,
                last_verify: None,
                oracle: Oracle::default(),
                tests: TestRatchet::default(),
                streaks: Streaks::default(),
                failing: None,
                baseline_tree: None,
                last_blocked: false,
                harness_overrides: 0,
                receipt: None,
                usage: None,
                metric: None,
                transcript: None,
                awaiting: None,
                plan: None,
                tier: None,
                last_reply: None,
                forged_stops: None,
                failed_turn: None,
                host_config: None,
                handoff: None,
                rhythm: crate::state::Rhythm::default(),
            },
            task: "fix the login\n".into(),
        }
    }

    /// A state file as earlier versions wrote it reads, and is written back byte for byte.
    #[test]
    fn the_file_format_is_stable() {
        let written = "---\nschema: 1\nloop_id: 20261122-030000-abcdef\nsession_id: sess-1\nhost: claude-code\n\
            cwd: /project\nsettings:\n  verify: cargo test\n  completion_promise: null\n  max_iterations: 30\n\
            \x20 verify_timeout_secs: 300\n  max_same_failures: 8\n  escalation:\n  - 2\n  - 4\n  - 6\n\
            \x20 checkpoint: false\niteration: 1\nstatus: active\noutcome: null\n\
            started_at: \"2026-11-22T03:00:00Z\"\nupdated_at: \"2026-11-22T03:00:00Z\"\nverify_total_ms: 0\n\
            last_verify: null\noracle: {}\nstreaks:\n  same_failure: 0\n  no_change: 0\n  toolless: 0\n\
            last_blocked: false\nharness_overrides: 0\n---\nfix the login\n";
        assert_eq!(LoopState::parse(written).unwrap(), sample());
        assert_eq!(sample().render().unwrap(), written);
        let gemini = written.replace("host: claude-code", "host: gemini-cli");
        assert_eq!(LoopState::parse(&gemini).unwrap().meta.host, Host::GeminiCli);
        let unknown = written.replace("host: claude-code", "host: vim");
        assert!(matches!(LoopState::parse(&unknown), Err(StateError::Yaml(_))));
    }

    /// A loop with a scope writes it, and a state file without one (every earlier loop) reads
    /// as a loop without a scope.
    #[test]
    fn the_scope_round_trips_and_an_old_state_has_none() {
        let old = sample().render().unwrap();
        assert!(!old.contains("scope"), "{old}");
        assert!(LoopState::parse(&old).unwrap().meta.settings.scope.is_empty());
        let mut state = sample();
        state.meta.settings.scope = vec!["src/**".into(), "a b/{x,y}.rs".into()];
        let text = state.render().unwrap();
        assert!(text.contains("  scope:\n  - src/**\n"), "{text}");
        assert_eq!(LoopState::parse(&text).unwrap(), state);
        let wrong = text.replace("  scope:\n  - src/**\n  - a b/{x,y}.rs\n", "  scope: 3\n");
        assert!(matches!(LoopState::parse(&wrong), Err(StateError::Yaml(_))), "{wrong}");
    }

    #[test]
    fn round_trips_a_state() {
        let state = sample();
        assert_eq!(LoopState::parse(&state.render().unwrap()).unwrap(), state);
    }

    #[test]
    fn round_trips_hostile_settings() {
        let mut state = sample();
        state.meta.settings.verify = Some("a\n---\nb: 'c' \"d\" # e".into());
        state.meta.settings.completion_promise = Some("ALL: GREEN".into());
        state.meta.session_id = "no".into();
        state.meta.outcome = Some(ReasonCode::Cancelled);
        state.meta.last_verify = Some(LastVerify { exit_code: Some(-1), duration_ms: 5, timed_out: true });
        assert_eq!(LoopState::parse(&state.render().unwrap()).unwrap(), state);
    }

    /// A directory name that is not UTF-8 cannot be YAML text: rendering fails, where it used to
    /// give an empty frontmatter that every later read refused.
    #[cfg(unix)]
    #[test]
    fn a_state_that_cannot_be_written_as_text_is_an_error() {
        use std::os::unix::ffi::OsStrExt;
        let mut state = sample();
        state.meta.cwd = PathBuf::from(std::ffi::OsStr::from_bytes(b"/caf\xe9"));
        assert!(matches!(state.render(), Err(StateError::Render(_))));
    }

    #[test]
    fn refuses_a_newer_schema_with_advice() {
        let text = sample().render().unwrap().replace("schema: 1", "schema: 7");
        let err = LoopState::parse(&text).unwrap_err();
        assert!(matches!(err, StateError::NewerSchema { found: 7 }), "{err}");
        assert!(err.to_string().contains("update loop-hook"));
    }

    #[test]
    fn reports_wrong_types_and_unknown_fields() {
        let text = sample().render().unwrap().replace("iteration: 1", "iteration: three");
        assert!(matches!(LoopState::parse(&text), Err(StateError::Yaml(_))));
        let text = sample().render().unwrap().replace("iteration: 1", "iteration: 1\nactive: false");
        assert!(matches!(LoopState::parse(&text), Err(StateError::Yaml(_))));
        assert!(matches!(LoopState::parse("garbage"), Err(StateError::Frontmatter(_))));
    }

    #[test]
    fn a_loop_without_an_owner_belongs_to_nobody() {
        let mut state = sample();
        assert!(state.is_owned_by("sess-1"));
        assert!(!state.is_owned_by("sess-2"));
        state.meta.session_id.clear();
        assert!(!state.is_owned_by(""));
    }

    proptest! {
        #[test]
        fn any_task_survives_a_write_and_read(task in any::<String>()) {
            let mut state = sample();
            state.task = task;
            prop_assert_eq!(LoopState::parse(&state.render().unwrap()).unwrap(), state);
        }

        #[test]
        fn any_verify_command_survives_a_write_and_read(verify in any::<String>(), promise in any::<String>()) {
            let mut state = sample();
            state.meta.settings.verify = Some(verify);
            state.meta.settings.completion_promise = Some(promise);
            prop_assert_eq!(LoopState::parse(&state.render().unwrap()).unwrap(), state);
        }
    }
}
