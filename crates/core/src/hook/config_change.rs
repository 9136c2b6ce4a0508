//! Claude Code's `ConfigChange` hook: the host runs it when a settings file changes while the
//! session runs (`source` is `user_settings`, `project_settings`, `local_settings`,
//! `policy_settings` or `skills`, with the file's `file_path`), before it loads the change. While
//! a loop runs, what decides whether for-loop runs at all is compared at once
//! ([`crate::hook::guard_host_config::notice`]): a change is told to the user in this hook's
//! `systemMessage` and recorded as the agent's, and the change is kept out of the running session
//! (`decision: block`), so the hooks the session loaded keep running: the user's own change loads
//! at the next start, or when they make it again after the loop. A change of anything else, a
//! session without a loop and the managed settings (which the host does not let a hook block)
//! are left alone.
//!
//! The host does not run it for a plugin's own files (the plugin's `hooks.json`): those are
//! compared at the next hook that runs, a tool call, a stop or a prompt.
//!
//! It reaches the binary through the guard's command line (`loop-hook guard`), so that the hook
//! list needs no new subcommand, and like every hook it never fails: any doubt on our side prints
//! nothing.

use serde_json::{Map, Value, json};

use crate::host::Fields;
use crate::store::Store;
use crate::support::Environment;

/// The event this hook answers.
pub(crate) const EVENT: &str = "ConfigChange";

/// What to print for a `ConfigChange` event (empty: nothing to say).
pub(crate) fn run(env: &Environment, object: &Map<String, Value>) -> String {
    let fields = Fields(object);
    if fields.string("hook_event_name").ok().flatten().as_deref() != Some(EVENT) {
        return String::new();
    }
    let Ok(session_id) = fields.required_string("session_id") else { return String::new() };
    let Ok(store) = Store::locate(env) else { return String::new() };
    let paths = store.paths(&session_id);
    if !paths.state.exists() {
        return String::new();
    }
    let Ok(Some(state)) = crate::store::custody::trusted_state(&paths) else { return String::new() };
    if !state.is_active() || !state.is_owned_by(&session_id) {
        return String::new();
    }
    let Some(told) = crate::hook::guard_host_config::notice(env, &paths, &state) else {
        return String::new();
    };
    answer(&told, fields.string("source").ok().flatten().as_deref())
}

/// The hook's answer: the words for the user, and the change kept out of the session, except
/// for the managed settings, whose change the host applies whatever a hook says.
fn answer(told: &str, source: Option<&str>) -> String {
    let mut object = Map::new();
    if source != Some("policy_settings") {
        object.insert("decision".into(), json!("block"));
        object.insert(
            "reason".into(),
            json!("for-loop: a loop is running, and this change decides whether its hooks run"),
        );
    }
    object.insert("systemMessage".into(), json!(told));
    Value::Object(object).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_told_and_kept_out_of_the_session_except_the_managed_settings() {
        let blocked: Value = serde_json::from_str(&answer("changed", Some("local_settings"))).unwrap();
        assert_eq!(blocked["decision"], "block");
        assert_eq!(blocked["systemMessage"], "changed");
        let managed: Value = serde_json::from_str(&answer("changed", Some("policy_settings"))).unwrap();
        assert!(managed.get("decision").is_none(), "{managed}");
        assert_eq!(managed["systemMessage"], "changed");
    }

    #[test]
    fn another_event_or_a_session_without_a_loop_gets_nothing() {
        let home = tempfile::tempdir().unwrap();
        let vars = [("FOR_LOOP_HOME".to_string(), home.path().join("store").display().to_string())];
        let env = Environment::new(vars, home.path().to_path_buf(), jiff::Timestamp::now());
        let event = |text: &str| crate::host::event::parse_object(text.as_bytes()).unwrap();
        assert_eq!(run(&env, &event(r#"{"hook_event_name":"PreToolUse","session_id":"s"}"#)), "");
        assert_eq!(
            run(
                &env,
                &event(r#"{"hook_event_name":"ConfigChange","session_id":"s","source":"local_settings"}"#)
            ),
            ""
        );
        assert!(!home.path().join("store").exists(), "nothing written");
    }
}
