//! The process environment and clock, passed in so that everything above `main` can be tested
//! without touching the real environment or the real time.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::Timestamp;

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

    /// A variable's value, if set and not empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// The session id the host exports to hooks and commands, when it does.
    pub fn session_id(&self) -> Option<&str> {
        ["CLAUDE_CODE_SESSION_ID", "FOR_LOOP_SESSION_ID"].into_iter().find_map(|name| self.var(name))
    }
}
