//! Who asked for a change to a loop (start, cancel, resume, rollback), and what for-loop does
//! about a change that did not come from the user.
//!
//! On hosts with a prompt hook (Claude Code's and Codex's `UserPromptSubmit`), the user's own
//! `/for-loop`, `/cancel-loop`, resume and rollback are carried out by that hook, from the text
//! the user submitted: the model cannot type into the user's prompt, and the hook runs outside
//! the model's sandbox. The same commands run as `loop-hook cancel` from a shell have no such
//! proof. Nothing distinguishes a user's own terminal from the agent's shell unforgeably: the
//! agent's shell carries the host's variables (`CLAUDECODE`, `CODEX_THREAD_ID`, ...), but a
//! process can drop them. So a shell command is refused when it plainly runs inside an agent,
//! and otherwise carried out, recorded as done from a terminal, and shown to the user at the next
//! stop and prompt, with the hint that it may have been the agent.

use crate::host::HookResponse;
use crate::host::Host;
use crate::host::Origin;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::Notes;
use crate::store::Store;
use crate::support::Environment;
use crate::support::Outcome;

/// The loop mutations a user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mutation {
    Start,
    Cancel,
    Resume,
    Rollback,
    Handoff,
}

impl Mutation {
    pub(crate) fn verb(self) -> &'static str {
        match self {
            Mutation::Start => "start",
            Mutation::Cancel => "cancel",
            Mutation::Resume => "resume",
            Mutation::Rollback => "roll back",
            Mutation::Handoff => "hand over",
        }
    }

    /// The user's own command for it on `host`.
    pub(crate) fn user_command(self, host: Host) -> &'static str {
        let commands = host.commands();
        match self {
            Mutation::Cancel => commands.cancel,
            Mutation::Resume => commands.resume,
            Mutation::Start => commands.start,
            Mutation::Rollback => commands.rollback,
            Mutation::Handoff => "/for-loop:handoff",
        }
    }
}

/// Whether a command-line mutation may go ahead. On a host whose prompt hook carries out the
/// user's commands, one run inside the agent's shell is refused: the user never needs it, so it
/// can only be the agent acting on its own loop.
pub(crate) fn command_line_allowed(host: Host, origin: Origin) -> bool {
    !(host.has_prompt_hook() && origin == Origin::Agent)
}

/// The refusal for a mutation run inside the agent's shell on a host with a prompt hook.
pub(crate) fn refusal(host: Host, mutation: Mutation) -> String {
    format!(
        "for-loop: refused: this loop takes `{}` only from the user's own prompt ({}), and this \
         command ran inside the agent's shell. The attempt is recorded and the user is told at the \
         next stop. Keep working on the task; if you are stuck, say so and let the user decide.",
        mutation.verb(),
        mutation.user_command(host)
    )
}

/// Refuses a command-line `mutation` of the loop in `paths` from the agent's shell on a host
/// whose prompt hook takes the user's commands, or returns `None` to let it go ahead. A refusal
/// is written to the ledger and left as a notice for the user.
pub(crate) fn gate(
    env: &Environment,
    notes: Notes<'_, '_>,
    state: &LoopState,
    mutation: Mutation,
    origin: Origin,
) -> Option<Outcome> {
    let host = state.meta.host;
    if command_line_allowed(host, origin) {
        return None;
    }
    let entry = LedgerEntry {
        origin: Some(origin),
        detail: Some(format!("`loop-hook {}` from the agent's shell", mutation.verb())),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Refused, ReasonCode::AgentCommandRefused)
    };
    let _ = notes.note(&entry);
    if state.is_active() {
        Notice::post_in(notes, &notice_text(mutation, origin, state.meta.iteration, true));
    }
    Some(Outcome::refused(refusal(host, mutation)))
}

/// Records who made a change that went ahead: a change not from the user's own prompt is left
/// as a notice for the user.
pub(crate) fn after(notes: Notes<'_, '_>, state: &LoopState, mutation: Mutation, origin: Origin) {
    if origin == Origin::User {
        return;
    }
    let text = if state.meta.host.has_prompt_hook() {
        notice_text(mutation, origin, state.meta.iteration, false)
    } else {
        // The user's own command runs in the agent's shell here too: nothing tells them apart.
        format!(
            "for-loop: a `loop-hook {}` command {} this loop at iteration {}. If you did not ask \
             for it, the agent did it on its own.",
            mutation.verb(),
            done(mutation),
            state.meta.iteration
        )
    };
    Notice::post_in(notes, &text);
}

fn done(mutation: Mutation) -> &'static str {
    match mutation {
        Mutation::Cancel => "cancelled",
        Mutation::Start => "started",
        Mutation::Resume => "resumed",
        Mutation::Rollback => "rolled back the working tree of",
        Mutation::Handoff => "handed over",
    }
}

/// Adds the session's pending notices to a stop's answer, so the user hears at the next stop what
/// was done to their loop outside their prompt.
pub(crate) fn with_notices(env: &Environment, session_id: &str, mut response: HookResponse) -> HookResponse {
    let Ok(store) = Store::locate(env) else { return response };
    let dir = store.paths(session_id).dir;
    if let Some(notice) = Notice::take(&dir) {
        response.system_message = Some(match response.system_message {
            Some(message) => format!("{notice}\n{message}"),
            None => notice,
        });
    }
    response
}

pub(crate) use crate::store::Notice;

/// What the user is told about a mutation that did not come from their prompt.
pub(crate) fn notice_text(mutation: Mutation, origin: Origin, iteration: u32, refused: bool) -> String {
    let done = match (mutation, refused) {
        (Mutation::Cancel, false) => "cancelled this loop".to_string(),
        (Mutation::Start, false) => "started this loop".to_string(),
        (Mutation::Resume, false) => "resumed this loop".to_string(),
        (Mutation::Rollback, false) => "rolled back the working tree".to_string(),
        (Mutation::Handoff, false) => "handed this loop over to loop-hook run".to_string(),
        (m, true) => format!("tried to {} this loop (refused; the loop goes on)", m.verb()),
    };
    let who = match origin {
        Origin::Agent => "for-loop: the agent".to_string(),
        Origin::Terminal => "for-loop: a command from a terminal outside the session".to_string(),
        Origin::User => "for-loop: you".to_string(),
    };
    let hint = if origin == Origin::Terminal {
        " If that was not you, it was the agent, with its shell's variables removed."
    } else {
        ""
    };
    format!("{who} {done} at iteration {iteration}.{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Environment {
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Environment::new(vars, std::path::PathBuf::from("/"), jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn the_agents_shell_is_told_by_its_hosts_variables() {
        assert_eq!(Origin::of_command_line(&env(&[])), Origin::Terminal);
        assert_eq!(Origin::of_command_line(&env(&[("HOME", "/h")])), Origin::Terminal);
        for var in crate::host::origin::AGENT_SHELL_VARS {
            assert_eq!(Origin::of_command_line(&env(&[(var, "x")])), Origin::Agent, "{var}");
        }
        // An empty variable is as good as none.
        assert_eq!(Origin::of_command_line(&env(&[("CLAUDECODE", "")])), Origin::Terminal);
    }

    #[test]
    fn only_the_agents_shell_is_refused_and_only_where_the_user_has_a_prompt_hook() {
        assert!(!command_line_allowed(Host::ClaudeCode, Origin::Agent));
        assert!(!command_line_allowed(Host::Codex, Origin::Agent));
        assert!(command_line_allowed(Host::ClaudeCode, Origin::Terminal));
        assert!(command_line_allowed(Host::ClaudeCode, Origin::User));
        // Without a prompt hook the agent's shell is the only way the user's command arrives.
        assert!(command_line_allowed(Host::Antigravity, Origin::Agent));
        let text = refusal(Host::ClaudeCode, Mutation::Cancel);
        assert!(text.contains("/cancel-loop") && text.contains("refused"), "{text}");
    }

    #[test]
    fn notices_are_shown_once() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Notice::take(dir.path()), None);
        Notice::post(dir.path(), &notice_text(Mutation::Cancel, Origin::Agent, 3, false));
        Notice::post(dir.path(), &notice_text(Mutation::Cancel, Origin::Terminal, 4, true));
        let shown = Notice::take(dir.path()).unwrap();
        assert!(shown.contains("the agent cancelled this loop at iteration 3"), "{shown}");
        assert!(shown.contains("tried to cancel this loop (refused; the loop goes on) at iteration 4"));
        assert!(shown.contains("If that was not you, it was the agent"), "{shown}");
        assert_eq!(Notice::take(dir.path()), None);
    }
}
