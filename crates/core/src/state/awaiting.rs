//! A loop command the prompt hook carried out, kept in the loop's state until the host's
//! transcript shows the user really sent it ([`crate::provenance::confirmation`]).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::host::CommandKind;

/// A command the prompt hook carried out, waiting for the transcript to show the user sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Awaiting {
    /// The name as it arrived, e.g. `/for-loop:cancel-loop`.
    pub(crate) command: String,
    pub(crate) kind: Kind,
    /// When the prompt hook ran.
    pub(crate) at: Timestamp,
}

/// The loop commands that change a loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Start,
    Cancel,
    Resume,
    Rollback,
}

impl Kind {
    pub(crate) fn of(kind: CommandKind) -> Option<Kind> {
        match kind {
            CommandKind::Start => Some(Kind::Start),
            CommandKind::Cancel => Some(Kind::Cancel),
            CommandKind::Resume => Some(Kind::Resume),
            CommandKind::Rollback => Some(Kind::Rollback),
            CommandKind::Status | CommandKind::Strict => None,
            // A handoff ends nothing: the loop goes on under `loop-hook run`, judged as before.
            // The prompt hook's checks that the agent did not send it (a pending tool call, the
            // text in a tool call's input) are made before it is carried out.
            CommandKind::Handoff => None,
        }
    }

    pub(crate) fn matches(self, kind: CommandKind) -> bool {
        Kind::of(kind) == Some(self)
    }

    /// The command a user runs from a terminal outside the agent instead.
    pub(crate) fn terminal_command(self, session_id: &str) -> String {
        let verb = match self {
            Kind::Start => "start",
            Kind::Cancel => "cancel",
            Kind::Resume => "resume",
            Kind::Rollback => "rollback",
        };
        format!("loop-hook {verb} --session {session_id}")
    }
}
