//! Everything a stop brought, gathered by the hook before [`crate::verdict::decision::decide`]
//! turns it into a verdict.

use jiff::Timestamp;

use crate::checks::OracleChange;
use crate::checks::SkipMarker;
use crate::checks::VerifyOutcome;
use crate::host::UsageCursor;
use crate::metric::MetricFacts;
use crate::state::Incident;

/// Everything the stop brought, gathered before deciding.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopFacts<'a> {
    pub(crate) last_message: Option<&'a str>,
    /// The verify run; `None` when the loop has no verify command, or it could not run.
    pub(crate) verify: Option<&'a VerifyOutcome>,
    /// Why verify could not run at all (the loop's directory is gone, no shell): the check did
    /// not pass.
    pub(crate) verify_not_run: Option<&'a str>,
    pub(crate) now: Timestamp,
    /// Where the loop's files are, in the words the messages show.
    pub(crate) files: &'a LoopFiles,
    /// Oracle files that differ from the start.
    pub(crate) oracle_changes: &'a [OracleChange],
    /// The working tree's fingerprint now, when known.
    pub(crate) tree: Option<&'a str>,
    /// Files changed since the loop started, when known. Only a stop that ends or parks the loop
    /// shows them, so the hook gathers them only then ([`code`] says beforehand).
    pub(crate) files_changed: Option<&'a [String]>,
    /// Tool calls in the turn that just ended, when known.
    pub(crate) tool_uses: Option<u32>,
    /// The host's "continuing because a stop hook blocked" flag, where the host has one that
    /// means exactly that.
    pub(crate) stop_hook_active: Option<bool>,
    /// Why the checkpoint of this iteration could not be taken, when it could not.
    pub(crate) checkpoint_error: Option<&'a str>,
    /// The transcript read up to this stop for model usage; `None` when it could not be read
    /// (the loop's last reading stands).
    pub(crate) usage: Option<&'a UsageCursor>,
    /// What went wrong around the loop since the last judged stop (the state changed behind its
    /// back, a stop let through unjudged): told to the user and the agent, and recorded.
    pub(crate) incidents: &'a [Incident],
    /// A metric loop's attempt: its measurement, guard run and change summary.
    pub(crate) metric: Option<&'a MetricFacts>,
    /// Stops the agent forged from its shell during this loop (recorded, never judged), for the
    /// receipt of a loop that ends or parks here.
    pub(crate) forged_stops: u32,
    /// Skip markers added to the project since the loop started, where they were looked for
    /// (after a passing verify, and when the loop ends or parks).
    pub(crate) skip_markers: &'a [SkipMarker],
    /// The agent's final reply at this stop, as the loop's transcript shows it.
    pub(crate) reply: FinalReply<'a>,
    /// The stop was judged only because the forged-stop detector gave way (it had set enough
    /// stops in a row apart): it may be forged, so it may block but never pass.
    pub(crate) detector_gave_way: bool,
    /// The reviewer's verdict, when the loop has one and this stop's check passed
    /// ([`crate::verdict::decision::awaits_review`]).
    pub(crate) review: Option<&'a crate::checks::ReviewOutcome>,
    /// A plan loop's checks run again at the stop where its last story passed.
    pub(crate) plan: Option<&'a crate::checks::PlanSweep>,
    /// The change since the start against the loop's scope, where it was read
    /// ([`crate::verdict::decision::awaits_scope`]).
    pub(crate) scope: Option<&'a crate::checks::ScopeCheck>,
}

/// Where the loop's files are, as the messages name them: text to show, never a path the verdict
/// could open. The hook that gathers the facts writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LoopFiles {
    /// The loop's state file, where a task too long to repeat is read in full.
    pub(crate) state: String,
    /// The loop's ledger, named when the loop ends or parks.
    pub(crate) ledger: String,
    /// The folder of the check's original files, to restore a changed one from.
    pub(crate) originals: String,
}

/// The agent's final reply, as the transcript the loop trusts shows it at a stop: a real turn
/// end always comes with a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FinalReply<'a> {
    /// The host keeps no transcript the hook can read: one turn cannot be told from another.
    #[default]
    Unknown,
    /// The transcript's last word is not a final reply (a prompt, a tool call or its result):
    /// no turn has ended.
    Missing,
    /// A digest of the final reply.
    Seen(&'a str),
}
