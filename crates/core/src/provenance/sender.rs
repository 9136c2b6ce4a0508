//! What becomes of a prompt-hook event whose process tree shows the agent sent it
//! ([`crate::provenance::ancestry`]): its command is not carried out, the attempt is recorded
//! (origin agent) and the user hears of it at the next stop or prompt. Nothing the event could
//! have done on the user's behalf happens either: no command awaiting confirmation is settled,
//! no notice meant for the user is taken.

use crate::host::Host;
use crate::host::Origin;
use crate::host::{CommandKind, UserCommand};
use crate::provenance::ancestry::{self, AgentPath, Provenance};
use crate::provenance::origin::Notice;
use crate::state::{LedgerDecision, LedgerEntry, LoopState, ReasonCode};
use crate::store::LoopPaths;
use crate::support::Environment;

/// A prompt hook event the agent sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentPrompt {
    /// A for-loop command: not carried out; the words for whoever sent it.
    Refused(String),
    /// Any other prompt: let through untouched, as if no hook had run.
    Ignored,
}

/// Whether the prompt-hook event of `host` carrying `prompt`, for the session whose loop files
/// are `paths`, came from the agent, and if so what it gets. The process tree is read only where
/// there is something to protect: a loop of this session, or a start (a loop started from a copy
/// of the host the agent ran would have all its stops taken for the agent's).
pub(crate) fn prompt_from_the_agent(
    env: &Environment,
    host: Host,
    paths: &LoopPaths,
    prompt: &str,
) -> Option<AgentPrompt> {
    let command = UserCommand::parse(host, prompt);
    let trusted =
        if paths.dir.exists() { crate::store::custody::trusted_state(paths).ok().flatten() } else { None };
    if trusted.is_none() && command.as_ref().is_none_or(|c| c.kind != CommandKind::Start) {
        return None;
    }
    // The loop's own host, never the one the event's command line names: the agent chooses that.
    let loop_host = trusted.as_ref().map_or(host, |state| state.meta.host);
    let Provenance::Agent(path) = ancestry::of_this_hook(loop_host) else { return None };
    let Some(command) = command else { return Some(AgentPrompt::Ignored) };
    if let Some(state) = &trusted {
        record(env, paths, state, &command, path);
    }
    Some(AgentPrompt::Refused(refusal(&command, path, trusted.is_some())))
}

/// The ledger line and the user's notice for `command`, sent by the agent along `path`.
fn record(env: &Environment, paths: &LoopPaths, state: &LoopState, command: &UserCommand, path: AgentPath) {
    let entry = LedgerEntry {
        origin: Some(Origin::Agent),
        detail: Some(format!(
            "`{}` sent through the prompt hook {} (the hook's process tree shows it): not carried out",
            command.name,
            path.how()
        )),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Refused, ReasonCode::AgentCommandRefused)
    };
    let _ = crate::store::note_best_effort(paths, &entry);
    Notice::post(&paths.dir, &notice(command, path, state.meta.iteration));
}

/// What the user is told about `command` the agent sent.
pub(crate) fn notice(command: &UserCommand, path: AgentPath, iteration: u32) -> String {
    format!(
        "for-loop: the agent sent `{}` through for-loop's prompt hook itself ({}) at iteration \
         {iteration}; it was not carried out, and the loop is as it was. Your own commands, typed in \
         your prompt, still work.",
        command.name,
        path.how()
    )
}

/// What the process that sent `command` is told; `recorded`: the session has a loop, whose
/// ledger and user hear of it.
fn refusal(command: &UserCommand, path: AgentPath, recorded: bool) -> String {
    let told = if recorded { " The attempt is recorded and the user is told." } else { "" };
    format!(
        "for-loop: `{}` was not run: this prompt hook was started {}, not by the host for a prompt \
         the user typed.{told} Keep working on the task; if you are stuck, say so and let the user \
         decide.",
        command.name,
        path.how()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_name_the_command_and_the_way_it_came() {
        let command = UserCommand::parse(Host::ClaudeCode, "/for-loop:cancel-loop").unwrap();
        let told = notice(&command, AgentPath::ExecedToolShell, 3);
        assert!(told.contains("`/for-loop:cancel-loop`") && told.contains("exec'ed"), "{told}");
        assert!(told.contains("iteration 3") && told.contains("not carried out"), "{told}");
        let refused = refusal(&command, AgentPath::LeftBehind, true);
        assert!(refused.contains("was not run") && refused.contains("left behind"), "{refused}");
        assert!(refused.contains("recorded"), "{refused}");
        // A start with no loop yet: nothing to record it in.
        assert!(!refusal(&command, AgentPath::NestedHost, false).contains("recorded"));
    }

    /// Outside a hook's process tree (this test's), with no loop and no start, nothing is read.
    #[test]
    fn without_a_loop_or_a_start_nothing_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let vars = [("FOR_LOOP_HOME".to_string(), dir.path().display().to_string())];
        let env = Environment::new(vars, dir.path().to_path_buf(), jiff::Timestamp::UNIX_EPOCH);
        let paths = crate::store::Store::locate(&env).unwrap().paths("s");
        assert_eq!(prompt_from_the_agent(&env, Host::ClaudeCode, &paths, "/cancel-loop"), None);
        assert_eq!(prompt_from_the_agent(&env, Host::ClaudeCode, &paths, "hello"), None);
    }
}
