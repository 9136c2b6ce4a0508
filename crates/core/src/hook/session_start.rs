//! `loop-hook session-start`: the host's `SessionStart` hook. When the host has just compacted
//! the conversation of a session whose loop runs, the agent gets the loop back with the
//! compacted context: the summary keeps what the model thought mattered, which may not be the
//! check, the iteration or the story it is on. Any other start of a session is left alone.
//!
//! It only reads the loop, so a compaction can never lose or double a block: the blocks are the
//! Stop hook's, and the next stop is judged as every other. Like every hook of for-loop it never
//! fails: a fault of ours gives the agent nothing and says why on stderr.

use std::io::Read;

use crate::host::Host;
use crate::host::event;
use crate::state::LedgerEntry;
use crate::store::Store;
use crate::support::Environment;

/// How many of the ledger's last lines are searched for the loop's last judged failure.
const LAST_LINES: usize = 50;

/// What to print for the session-start event on `stdin`.
pub(crate) fn run(env: &Environment, host: Host, stdin: impl Read) -> String {
    let session = event::read_bounded(stdin)
        .and_then(|bytes| event::parse_object(&bytes))
        .and_then(|object| host.parse_compacted(&object));
    let session_id = match session {
        Ok(Some(session_id)) => session_id,
        Ok(None) => return String::new(),
        Err(e) => {
            eprintln!("for-loop: session-start: {e}; nothing to add");
            return String::new();
        }
    };
    host.render_session_context(&brief(env, &session_id).unwrap_or_default())
}

/// The brief of `session_id`'s running loop, when it has one.
fn brief(env: &Environment, session_id: &str) -> Option<String> {
    let paths = Store::locate(env).ok()?.paths(session_id);
    if !paths.state.exists() {
        return None;
    }
    // The loop as last committed: a state edited behind for-loop's back is not what is briefed.
    let state = match crate::store::custody::trusted_state(&paths) {
        Ok(Some(state)) => state,
        Ok(None) => return None,
        Err(e) => {
            eprintln!("for-loop: session-start: the loop's state cannot be read ({e}); nothing to add");
            return None;
        }
    };
    if !state.is_active() || !state.is_owned_by(session_id) {
        return None;
    }
    let last = LedgerEntry::read_last(&paths.ledger, LAST_LINES).unwrap_or_default();
    Some(crate::verdict::message::compacted::brief(&state, &last, &paths.state.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(home: &std::path::Path) -> Environment {
        let vars = [("FOR_LOOP_HOME".to_string(), home.join("store").display().to_string())];
        Environment::new(vars, home.to_path_buf(), jiff::Timestamp::now())
    }

    fn compacted(env: &Environment, session: &str) -> String {
        let event =
            format!(r#"{{"session_id":"{session}","hook_event_name":"SessionStart","source":"compact"}}"#);
        run(env, Host::ClaudeCode, event.as_bytes())
    }

    #[test]
    fn a_session_without_a_loop_or_any_other_start_gets_nothing() {
        let home = tempfile::tempdir().unwrap();
        let env = env(home.path());
        assert_eq!(compacted(&env, "s-1"), "");
        let startup = r#"{"session_id":"s-1","hook_event_name":"SessionStart","source":"startup"}"#;
        assert_eq!(run(&env, Host::ClaudeCode, startup.as_bytes()), "");
        for bad in ["", "not json", "[1]", r#"{"source":"compact"}"#] {
            assert_eq!(run(&env, Host::ClaudeCode, bad.as_bytes()), "", "{bad}");
        }
        assert_eq!(run(&env, Host::Codex, r#"{"session_id":"s-1","source":"compact"}"#.as_bytes()), "");
        assert!(!home.path().join("store").exists(), "nothing is written");
    }

    #[test]
    fn a_running_loop_is_briefed_and_an_ended_one_is_not() {
        let home = tempfile::tempdir().unwrap();
        let env = env(home.path());
        let paths = Store::locate(&env).unwrap().paths("s-1");
        std::fs::create_dir_all(&paths.dir).unwrap();
        let mut state = crate::state::sample();
        state.meta.session_id = "s-1".into();
        paths.save(&state).unwrap();
        let told: serde_json::Value = serde_json::from_str(&compacted(&env, "s-1")).unwrap();
        let context = told["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
        assert!(context.contains("was just compacted"), "{context}");
        assert!(context.contains("fix the login"), "{context}");
        assert_eq!(compacted(&env, "s-2"), "", "another session's loop is not briefed");
        state.meta.status = crate::state::Status::Ended;
        paths.save(&state).unwrap();
        assert_eq!(compacted(&env, "s-1"), "");
    }
}
