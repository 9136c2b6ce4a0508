//! Stable codes for why a stop was allowed or blocked. They are written to the ledger and the
//! state file, so renaming one is a breaking change.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ReasonCode {
    // The loop ends (the stop is allowed).
    /// Verify exited 0 (and the promise, when one was set, was given at the same stop).
    Verified,
    /// The promise was given and no verify command was set.
    Promise,
    /// The last of `max_iterations` turns ended without completion.
    CapReached,
    /// The user cancelled the loop.
    Cancelled,
    /// Metric mode: a kept state meets the target (guard passing, oracle intact).
    TargetMet,

    // The loop goes on (the stop is blocked).
    /// Verify ran and failed.
    VerifyFailed,
    /// Verify ran past its timeout and was killed.
    VerifyTimedOut,
    /// Verify passed (or there is none) but the promise was not given.
    PromiseMissing,
    /// Neither verify nor a promise was set: the loop runs to its cap.
    NoCriterion,
    /// A file the verify command runs, or a protected path, differs from the start: a passing
    /// verify does not count until it is restored.
    OracleChanged,
    /// Verify could not be run (the loop's directory is gone, the shell would not start): the
    /// check did not pass, so the stop is blocked and the turn counts.
    VerifyNotRun,
    /// Metric mode: the change improved the number and is kept.
    MetricKept,
    /// Metric mode: the change was not kept and was rolled back.
    MetricDiscarded,
    /// Verify passed, but ran fewer tests than it once did, or skipped more: the test-count
    /// ratchet does not count the pass.
    TestsDropped,
    /// The check passed, but the reviewer (`--review`) vetoed it: the stop is blocked with its
    /// findings.
    ReviewBlocked,
    /// A plan's current story passed its check: it is done, and the stop is blocked with the next.
    StoryVerified,
    /// Every story was done, but a check run again at the end failed: its story is current again.
    StoryBroken,
    /// The check passed, but the change reached files outside the loop's scope (`--scope`, a
    /// story's `scope:`): the pass does not count (a metric attempt is rolled back).
    OutOfScope,

    // The stop is allowed and the loop stays active.
    /// The check passed at a stop that cannot be told from one the agent forged (judged only
    /// because the forged-stop detector gave way, or with no new final reply since the last
    /// judged stop): the pass does not count, the agent may stop, and the loop goes on.
    PassNotCounted,

    // The loop is parked (the stop is allowed, the loop kept for `resume`).
    /// The same failure `max_same_failures` times in a row.
    SameFailures,
    /// `max_same_failures` stops in a row without any change in the working tree.
    NoProgress,
    /// The `--max-time` budget is spent.
    TimeBudget,
    /// The agent ended its turn with `<loop-abort>REASON</loop-abort>`: in its words, the task
    /// cannot be done as asked. Never a pass: the user reads the reason and decides.
    Aborted,
    /// The `--max-tokens` budget is spent.
    TokenBudget,
    /// The agent only talked for as many blocked stops in a row as the host honours (Claude
    /// Code's `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`): the next block would be thrown away, so the
    /// loop is parked instead, and told.
    BlockCap,
    /// Metric mode: the pivot ladder's last rung, pivots without a keep.
    MetricPlateau,
    /// The reviewer vetoed `--max-vetoes` passes without approving one.
    ReviewVetoed,
    /// One story of a plan used `--story-iterations` stops without its check passing.
    StoryStalled,

    // Events recorded in the ledger.
    /// The loop was started (the ledger's first line, vouching for the first state).
    Started,
    /// A loop waiting for its conversation was claimed by it.
    Claimed,
    /// The host ended a turn although the hook blocked it (Claude Code's block cap).
    HarnessOverride,
    /// The user resumed a parked or finished loop.
    Resumed,
    /// A loop command (cancel, start, resume, rollback) ran in the agent's shell on a host whose
    /// prompt hook carries out the user's own commands: refused, and the user told.
    AgentCommandRefused,
    /// The working tree was restored to a checkpoint.
    RolledBack,
    /// The `--notify` command failed, timed out or could not start; the loop is unaffected.
    NotifyFailed,
    /// The state file was changed, replaced or made unreadable outside for-loop. It was restored
    /// from its last good copy; with no trusted copy left, the loop ended as tampered.
    StateTampered,
    /// The state file vanished while the loop was active; it was restored from its last good copy.
    StateDeleted,
    /// Something other than the ledger file stood at the ledger's path (a directory, a link); it
    /// was moved aside and a new ledger begun.
    LedgerTampered,
    /// A process that is not a for-loop command at work on the loop (another program, one that has
    /// ended) held the loop's lock past the wait; the lock was taken over and the stop judged.
    LockHeld,
    /// A hook was killed while it judged a stop (its marker was found with its process gone), so
    /// the host let that stop through unjudged.
    HookInterrupted,
    /// `loop-hook run`: an agent run ended on a rate or usage limit; not an iteration.
    AgentLimited,
    /// `loop-hook run`: an agent run failed; three in a row park the loop.
    AgentFailed,
    /// `loop-hook run`: parked by Ctrl-C; `loop-hook run --resume` continues it.
    Interrupted,
    /// A Stop event arrived while the agent's tool call was still pending: the agent ran the Stop
    /// hook itself. Not judged, no iteration used; told at the next judged stop and in the receipt.
    ForgedStop,
    /// A stop made while the session's own background work was in flight (the host's
    /// `background_tasks`): let through unjudged, no iteration used; the stop after the work
    /// ends is judged.
    BackgroundWait,
    /// A stop judged although background work was still in flight: the wait on it reached its
    /// bound (`--background-wait`). Told to the user and the agent.
    BackgroundWaitOver,
    /// At the user's prompt, the turn before it had ended with no Stop judgment of the running
    /// loop: the hook did not run (hooks turned off, the binary replaced, a crash).
    StopNotJudged,
    /// The prompt hook carried out a loop command; the host's transcript is to confirm that the
    /// user sent it.
    CommandPending,
    /// The host's transcript showed the user's own prompt for the command the prompt hook
    /// carried out.
    CommandConfirmed,
    /// No prompt of the user's for the command the prompt hook carried out reached the host's
    /// transcript: a program sent it (the agent ran the prompt hook itself). Undone where it can be.
    CommandUnconfirmed,
    /// While a loop ran, something that decides whether for-loop's hooks run at all changed:
    /// `disableAllHooks`, `hooks` or for-loop's variables in the host's settings, the plugin's hook
    /// list or launcher, the binary. Told to the user at once.
    HostConfigChanged,
    /// The reviewer approved a passing check (the stop's verdict follows on its own line).
    ReviewApproved,
    /// The exit status reported for verify, run detached from the hook, could not be trusted: a
    /// status line without the run's secret or from another process, a second one, or none. Never
    /// a pass; told to the user and the agent.
    VerifyStatusUntrusted,

    // The stop is allowed and the loop is left as it is.
    /// The stop came from a session that does not own the loop.
    ForeignSession,
    /// A fault of for-loop's own (unreadable state, failed write, ...).
    InternalError,
    /// The stop's verdict could not be written (a full disk): nothing changed, and the stop was
    /// allowed.
    RecordFailed,

    // A turn the host ended on an error (no Stop, no iteration used); `AgentLimited` above is the
    // third kind, a rate or usage limit.
    /// The conversation outgrew the model's context window (`prompt is too long`) and the host
    /// could not compact it.
    ContextExhausted,
    /// The host ended the turn on another API error (a server error, billing, authentication, an
    /// error kind for-loop does not know).
    AgentError,
    // A loop moved from its session to `loop-hook run`.
    /// The user handed the in-session loop over to `loop-hook run` (`/for-loop:handoff`, `loop-hook
    /// run --resume LOOP`): the session's copy ends with this outcome, and the run's copy goes on
    /// with the same loop id, ledger and iteration.
    HandedOver,
    // A task of a backlog run (`loop-hook run --backlog`).
    /// The task's check passed in its work tree, but its change failed to land on the run's
    /// integration branch `--max-merge-tries` times (a conflict, or a check broken on the merged
    /// tree): the task is parked, its work tree and branch kept.
    MergeFailed,
    // The host's configuration watched at every hook.
    /// The check passed, but something that decides whether for-loop's hooks run at all (a
    /// setting, a hook file, the launcher, the binary) changed since the last judged stop: the
    /// pass does not count, and the stop is blocked with the change named.
    HooksChanged,
    // The store and the run driver keeping their own files.
    /// A store made when it was readable by other users (folders 0755, files 0644) was made its
    /// user's alone at its next write.
    StoreTightened,
    /// A `driver.pid` naming no running `loop-hook run` of this loop (a dead process, another
    /// program, a pid reused since, or no pid at all) was replaced by the driver taking the loop.
    DriverMarkReplaced,
}

impl ReasonCode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReasonCode::Verified => "verified",
            ReasonCode::Promise => "promise",
            ReasonCode::CapReached => "cap_reached",
            ReasonCode::Cancelled => "cancelled",
            ReasonCode::TargetMet => "target_met",
            ReasonCode::MetricKept => "metric_kept",
            ReasonCode::MetricDiscarded => "metric_discarded",
            ReasonCode::MetricPlateau => "metric_plateau",
            ReasonCode::VerifyFailed => "verify_failed",
            ReasonCode::VerifyTimedOut => "verify_timed_out",
            ReasonCode::PromiseMissing => "promise_missing",
            ReasonCode::NoCriterion => "no_criterion",
            ReasonCode::OracleChanged => "oracle_changed",
            ReasonCode::VerifyNotRun => "verify_not_run",
            ReasonCode::TestsDropped => "tests_dropped",
            ReasonCode::PassNotCounted => "pass_not_counted",
            ReasonCode::ReviewBlocked => "review_blocked",
            ReasonCode::StoryVerified => "story_verified",
            ReasonCode::StoryBroken => "story_broken",
            ReasonCode::OutOfScope => "out_of_scope",
            ReasonCode::ReviewVetoed => "review_vetoed",
            ReasonCode::StoryStalled => "story_stalled",
            ReasonCode::ReviewApproved => "review_approved",
            ReasonCode::SameFailures => "same_failures",
            ReasonCode::NoProgress => "no_progress",
            ReasonCode::TimeBudget => "time_budget",
            ReasonCode::Aborted => "aborted",
            ReasonCode::TokenBudget => "token_budget",
            ReasonCode::Started => "started",
            ReasonCode::Claimed => "claimed",
            ReasonCode::HarnessOverride => "harness_override",
            ReasonCode::Resumed => "resumed",
            ReasonCode::AgentCommandRefused => "agent_command_refused",
            ReasonCode::RolledBack => "rolled_back",
            ReasonCode::NotifyFailed => "notify_failed",
            ReasonCode::StateTampered => "state_tampered",
            ReasonCode::StateDeleted => "state_deleted",
            ReasonCode::LedgerTampered => "ledger_tampered",
            ReasonCode::LockHeld => "lock_held",
            ReasonCode::HookInterrupted => "hook_interrupted",
            ReasonCode::AgentLimited => "agent_limited",
            ReasonCode::AgentFailed => "agent_failed",
            ReasonCode::Interrupted => "interrupted",
            ReasonCode::ForgedStop => "forged_stop",
            ReasonCode::StopNotJudged => "stop_not_judged",
            ReasonCode::BackgroundWait => "background_wait",
            ReasonCode::BackgroundWaitOver => "background_wait_over",
            ReasonCode::BlockCap => "block_cap",
            ReasonCode::CommandPending => "command_pending",
            ReasonCode::CommandConfirmed => "command_confirmed",
            ReasonCode::CommandUnconfirmed => "command_unconfirmed",
            ReasonCode::HostConfigChanged => "host_config_changed",
            ReasonCode::VerifyStatusUntrusted => "verify_status_untrusted",
            ReasonCode::ForeignSession => "foreign_session",
            ReasonCode::InternalError => "internal_error",
            ReasonCode::RecordFailed => "record_failed",
            ReasonCode::ContextExhausted => "context_exhausted",
            ReasonCode::AgentError => "agent_error",
            ReasonCode::HandedOver => "handed_over",
            ReasonCode::MergeFailed => "merge_failed",
            ReasonCode::HooksChanged => "hooks_changed",
            ReasonCode::StoreTightened => "store_tightened",
            ReasonCode::DriverMarkReplaced => "driver_mark_replaced",
        }
    }

    /// Whether a ledger line with this code let a stop through without judging it, which the next
    /// judged stop tells again.
    pub(crate) fn let_through_unjudged(self) -> bool {
        matches!(self, ReasonCode::InternalError | ReasonCode::RecordFailed | ReasonCode::StopNotJudged)
    }

    /// Whether this code is the verdict of a judged stop (or the user's cancel), as opposed to
    /// an event recorded beside one.
    pub(crate) fn is_verdict(self) -> bool {
        !matches!(
            self,
            ReasonCode::Started
                | ReasonCode::Claimed
                | ReasonCode::HarnessOverride
                | ReasonCode::Resumed
                | ReasonCode::AgentCommandRefused
                | ReasonCode::RolledBack
                | ReasonCode::NotifyFailed
                | ReasonCode::StateTampered
                | ReasonCode::StateDeleted
                | ReasonCode::LedgerTampered
                | ReasonCode::LockHeld
                | ReasonCode::HookInterrupted
                | ReasonCode::ForgedStop
                | ReasonCode::StopNotJudged
                | ReasonCode::BackgroundWait
                | ReasonCode::BackgroundWaitOver
                | ReasonCode::CommandPending
                | ReasonCode::CommandConfirmed
                | ReasonCode::CommandUnconfirmed
                | ReasonCode::HostConfigChanged
                | ReasonCode::ReviewApproved
                | ReasonCode::VerifyStatusUntrusted
                | ReasonCode::ForeignSession
                | ReasonCode::InternalError
                | ReasonCode::RecordFailed
                | ReasonCode::ContextExhausted
                | ReasonCode::AgentError
                | ReasonCode::HandedOver
                | ReasonCode::StoreTightened
                | ReasonCode::DriverMarkReplaced
        )
    }

    /// Whether a ledger line with this code records a turn the host ended on an error: the Stop
    /// hook did not run for it, and it used no iteration.
    pub(crate) fn ends_a_failed_turn(self) -> bool {
        matches!(self, ReasonCode::ContextExhausted | ReasonCode::AgentLimited | ReasonCode::AgentError)
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_the_serialized_code() {
        for code in [
            ReasonCode::Verified,
            ReasonCode::Promise,
            ReasonCode::CapReached,
            ReasonCode::Cancelled,
            ReasonCode::TargetMet,
            ReasonCode::MetricKept,
            ReasonCode::MetricDiscarded,
            ReasonCode::MetricPlateau,
            ReasonCode::VerifyFailed,
            ReasonCode::VerifyTimedOut,
            ReasonCode::PromiseMissing,
            ReasonCode::NoCriterion,
            ReasonCode::OracleChanged,
            ReasonCode::VerifyNotRun,
            ReasonCode::TestsDropped,
            ReasonCode::ReviewBlocked,
            ReasonCode::StoryVerified,
            ReasonCode::StoryBroken,
            ReasonCode::OutOfScope,
            ReasonCode::ReviewVetoed,
            ReasonCode::StoryStalled,
            ReasonCode::ReviewApproved,
            ReasonCode::SameFailures,
            ReasonCode::NoProgress,
            ReasonCode::TimeBudget,
            ReasonCode::TokenBudget,
            ReasonCode::Started,
            ReasonCode::Claimed,
            ReasonCode::Aborted,
            ReasonCode::HarnessOverride,
            ReasonCode::Resumed,
            ReasonCode::AgentLimited,
            ReasonCode::AgentFailed,
            ReasonCode::Interrupted,
            ReasonCode::AgentCommandRefused,
            ReasonCode::RolledBack,
            ReasonCode::NotifyFailed,
            ReasonCode::StateTampered,
            ReasonCode::StateDeleted,
            ReasonCode::LedgerTampered,
            ReasonCode::LockHeld,
            ReasonCode::HookInterrupted,
            ReasonCode::ForgedStop,
            ReasonCode::StopNotJudged,
            ReasonCode::BackgroundWait,
            ReasonCode::BackgroundWaitOver,
            ReasonCode::BlockCap,
            ReasonCode::CommandPending,
            ReasonCode::CommandConfirmed,
            ReasonCode::CommandUnconfirmed,
            ReasonCode::HostConfigChanged,
            ReasonCode::PassNotCounted,
            ReasonCode::VerifyStatusUntrusted,
            ReasonCode::ForeignSession,
            ReasonCode::InternalError,
            ReasonCode::RecordFailed,
            ReasonCode::ContextExhausted,
            ReasonCode::AgentError,
            ReasonCode::HandedOver,
            ReasonCode::MergeFailed,
            ReasonCode::HooksChanged,
            ReasonCode::StoreTightened,
            ReasonCode::DriverMarkReplaced,
        ] {
            assert_eq!(serde_json::to_string(&code).unwrap(), format!("\"{code}\""));
        }
    }
}
