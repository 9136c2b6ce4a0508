//! The agent hosts `loop-hook` serves, and each one's turn-end contract: how its event reads and
//! what its hook must print. The loop logic never sees a host; it works on [`StopEvent`] and
//! [`HookResponse`].
//!
//! The host is named on the hook's command line in each host's hook config (`stop-hook --host
//! NAME`), because payloads are too alike to tell apart reliably.

use serde_json::{Map, Value};

use crate::event::{EventError, StopEvent};
use crate::hook_response::HookResponse;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Host {
    #[default]
    ClaudeCode,
}

impl Host {
    pub const ALL: &'static [Host] = &[Host::ClaudeCode];

    pub fn name(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
        }
    }

    pub fn from_name(name: &str) -> Option<Host> {
        Host::ALL.iter().copied().find(|host| host.name() == name)
    }

    /// The names `--host` accepts, for error messages.
    pub fn names() -> String {
        Host::ALL.iter().map(|h| h.name()).collect::<Vec<_>>().join(", ")
    }

    /// Reads this host's turn-end event. [`EventError::Foreign`] means the payload belongs to
    /// another host or another event: the hook then does nothing at all.
    pub fn parse_stop(self, object: &Map<String, Value>) -> Result<StopEvent, EventError> {
        match self {
            Host::ClaudeCode => StopEvent::from_claude(object),
        }
    }

    /// What the hook prints for `response`, exactly as this host expects it.
    pub fn render(self, response: &HookResponse) -> String {
        match self {
            Host::ClaudeCode => response.to_claude_json(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for host in Host::ALL {
            assert_eq!(Host::from_name(host.name()), Some(*host));
        }
        assert_eq!(Host::from_name("vim"), None);
    }
}
