//! The process environment and clock, passed in so that everything above `main` can be tested
//! without touching the real environment or the real time.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::Timestamp;

/// Where hosts put the session id, first found wins.
const SESSION_VARS: [&str; 6] = [
    "CLAUDE_CODE_SESSION_ID",
    "FOR_LOOP_SESSION_ID",
    "GEMINI_SESSION_ID",
    "CODEX_THREAD_ID",
    "COPILOT_AGENT_SESSION_ID",
    // Qwen Code's hooks, `!{…}` lines and shell tool.
    "QWEN_CODE_SESSION_ID",
];

/// Variables, working directory and time as the process sees them.
#[derive(Debug, Clone)]
pub struct Environment {
    vars: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub now: Timestamp,
}

impl Environment {
    pub fn from_process() -> Environment {
        Environment {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            now: Timestamp::now(),
        }
    }

    pub fn new(
        vars: impl IntoIterator<Item = (String, String)>,
        cwd: PathBuf,
        now: Timestamp,
    ) -> Environment {
        Environment { vars: vars.into_iter().collect(), cwd, now }
    }

    /// The same variables and time, seen from another directory.
    pub fn with_cwd(&self, cwd: PathBuf) -> Environment {
        Environment { cwd, ..self.clone() }
    }

    /// The same variables and directory at another time: a long-running command's clock.
    pub fn with_now(&self, now: Timestamp) -> Environment {
        Environment { now, ..self.clone() }
    }

    /// The same, with `name` set to `value`: what a command of ours passes on to code it calls
    /// in-process, never seen by the process's own children.
    pub fn with_var(&self, name: &str, value: &str) -> Environment {
        let mut env = self.clone();
        env.vars.insert(name.to_string(), value.to_string());
        env
    }

    /// A variable's value, if set and not empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// The session id the host exports to hooks and commands, when it does: Claude Code to both,
    /// Gemini CLI to hooks only (`GEMINI_SESSION_ID`), Codex to the shell commands the agent runs
    /// (`CODEX_THREAD_ID`, the `session_id` of its hook events), Copilot CLI to the agent's shell
    /// (`COPILOT_AGENT_SESSION_ID`, measured on 1.0.102; its hooks get the id in their events).
    /// Antigravity and Cursor export none; their loops are claimed by their transcripts
    /// ([`crate::provenance::claim`]).
    pub fn session_id(&self) -> Option<&str> {
        SESSION_VARS.into_iter().find_map(|name| self.var(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Environment {
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Environment::new(vars, PathBuf::from("/"), Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn session_id_from_each_host() {
        assert_eq!(with(&[]).session_id(), None);
        assert_eq!(with(&[("CODEX_THREAD_ID", "c")]).session_id(), Some("c"));
        assert_eq!(with(&[("GEMINI_SESSION_ID", "g"), ("CODEX_THREAD_ID", "c")]).session_id(), Some("g"));
        assert_eq!(with(&[("FOR_LOOP_SESSION_ID", "f"), ("GEMINI_SESSION_ID", "g")]).session_id(), Some("f"));
        assert_eq!(
            with(&[("CLAUDE_CODE_SESSION_ID", "a"), ("FOR_LOOP_SESSION_ID", "f")]).session_id(),
            Some("a")
        );
        assert_eq!(with(&[("CLAUDE_CODE_SESSION_ID", ""), ("CODEX_THREAD_ID", "c")]).session_id(), Some("c"));
    }
}
