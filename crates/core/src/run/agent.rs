//! The agent CLIs `loop-hook run` drives, one headless run per iteration: how each is started,
//! its safe default permissions, and the final message it reports.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::host::Host;
use crate::support::environment::Environment;

/// An agent CLI with a headless mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agent {
    Claude,
    Gemini,
    Codex,
}

impl Agent {
    pub(crate) const ALL: [Agent; 3] = [Agent::Claude, Agent::Gemini, Agent::Codex];

    pub(crate) fn from_name(name: &str) -> Option<Agent> {
        match name {
            "claude" | "claude-code" => Some(Agent::Claude),
            "gemini" | "gemini-cli" => Some(Agent::Gemini),
            "codex" => Some(Agent::Codex),
            _ => None,
        }
    }

    /// The program's name on `PATH`.
    pub(crate) fn program(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Gemini => "gemini",
            Agent::Codex => "codex",
        }
    }

    /// The host whose loop settings apply (what it reports to hooks, its tier).
    pub(crate) fn host(self) -> Host {
        match self {
            Agent::Claude => Host::ClaudeCode,
            Agent::Gemini => Host::GeminiCli,
            Agent::Codex => Host::Codex,
        }
    }

    /// The permission flags used unless the user's `--agent-arg`s set the permissions
    /// themselves: file edits in the project are allowed, anything else stays under the CLI's own
    /// rules (Claude Code denies what it would have asked about, Gemini CLI the same, Codex runs
    /// commands in its workspace sandbox).
    pub(crate) fn default_args(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => &["--permission-mode", "acceptEdits"],
            Agent::Gemini => &["--approval-mode", "auto_edit"],
            Agent::Codex => &["--sandbox", "workspace-write"],
        }
    }

    /// The CLI's flags that choose its permissions: one of them among the user's arguments
    /// replaces [`Agent::default_args`]; any other argument (a model, allowed tools) is added.
    fn permission_flags(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => &["--permission-mode", "--dangerously-skip-permissions"],
            Agent::Gemini => &["--approval-mode", "--yolo", "-y"],
            Agent::Codex => {
                &["--sandbox", "-s", "--full-auto", "--dangerously-bypass-approvals-and-sandbox", "--yolo"]
            }
        }
    }

    fn sets_permissions(self, user_args: &[String]) -> bool {
        user_args.iter().any(|arg| {
            let name = arg.split_once('=').map_or(arg.as_str(), |(name, _)| name);
            self.permission_flags().contains(&name)
        })
    }

    /// The headless command for one iteration: structured output on stdout, `prompt` as the
    /// one user message of a new session.
    pub(crate) fn command(self, program: &Path, prompt: &str, user_args: &[String]) -> Command {
        let mut cmd = Command::new(program);
        match self {
            Agent::Claude => cmd.args(["-p", prompt, "--output-format", "stream-json", "--verbose"]),
            Agent::Gemini => cmd.args(["-p", prompt, "--output-format", "stream-json"]),
            Agent::Codex => cmd.args(["exec", "--json", "--skip-git-repo-check"]),
        };
        if !self.sets_permissions(user_args) {
            cmd.args(self.default_args());
        }
        cmd.args(user_args);
        if self == Agent::Codex {
            // After the options: codex exec's prompt is its positional argument.
            cmd.arg("--").arg(prompt);
        }
        cmd
    }

    /// The agent's final message, from its structured output.
    pub(crate) fn final_message(self, output: &str) -> Option<String> {
        let events = output.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok());
        let mut last = None;
        let mut gemini_text = String::new();
        for event in events {
            match self {
                Agent::Claude if event["type"] == "result" => {
                    last = event["result"].as_str().map(str::to_owned);
                }
                Agent::Gemini if event["type"] == "message" && event["role"] == "assistant" => {
                    if event["delta"] != true {
                        gemini_text.clear();
                    }
                    gemini_text.push_str(event["content"].as_str().unwrap_or_default());
                }
                Agent::Gemini if event["type"] == "message" && event["role"] == "user" => gemini_text.clear(),
                Agent::Codex
                    if event["type"] == "item.completed" && event["item"]["type"] == "agent_message" =>
                {
                    last = event["item"]["text"].as_str().map(str::to_owned);
                }
                _ => {}
            }
        }
        if self == Agent::Gemini && !gemini_text.is_empty() {
            last = Some(gemini_text);
        }
        last
    }

    /// Where the CLI keeps its own settings, credentials and sessions: what the run's sandbox
    /// gives it a private, writable copy of.
    pub(crate) fn config_paths(self, env: &Environment) -> Vec<PathBuf> {
        let home = env.var("HOME").map(PathBuf::from).unwrap_or_default();
        let named = |var: &str, default: &str| env.var(var).map_or_else(|| home.join(default), PathBuf::from);
        match self {
            Agent::Claude => vec![named("CLAUDE_CONFIG_DIR", ".claude"), home.join(".claude.json")],
            Agent::Gemini => vec![home.join(".gemini")],
            Agent::Codex => vec![named("CODEX_HOME", ".codex")],
        }
    }

    /// The first of the agents installed on `path`, or the named one's location.
    pub(crate) fn locate(self, path: Option<&str>) -> Option<std::path::PathBuf> {
        path.unwrap_or_default()
            .split(':')
            .filter(|dir| !dir.is_empty())
            .map(|dir| Path::new(dir).join(self.program()))
            .find(|candidate| candidate.is_file())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_message_of_each_cli() {
        let claude = "{\"type\":\"system\"}\n{\"type\":\"result\",\"result\":\"done\"}\n";
        assert_eq!(Agent::Claude.final_message(claude).as_deref(), Some("done"));
        let gemini = concat!(
            "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"a\",\"delta\":true}\n",
            "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"b\",\"delta\":true}\n",
            "{\"type\":\"result\",\"status\":\"success\"}\n"
        );
        assert_eq!(Agent::Gemini.final_message(gemini).as_deref(), Some("ab"));
        let codex = "{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"ok\"}}\n";
        assert_eq!(Agent::Codex.final_message(codex).as_deref(), Some("ok"));
        assert_eq!(Agent::Codex.final_message("not json\n"), None);
    }

    #[test]
    fn only_a_permission_flag_replaces_the_default_permissions() {
        let args_of = |agent: Agent, user: &[&str]| -> Vec<String> {
            let user: Vec<String> = user.iter().map(ToString::to_string).collect();
            agent
                .command(Path::new("cli"), "fix it", &user)
                .get_args()
                .map(|a| a.to_str().unwrap().into())
                .collect()
        };
        assert_eq!(
            args_of(Agent::Codex, &[]),
            ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "--", "fix it"]
        );
        // A model or allowed tools are added to the defaults.
        let claude = args_of(Agent::Claude, &["--model", "opus", "--allowedTools", "Bash"]);
        assert!(
            claude.ends_with(
                &["--permission-mode", "acceptEdits", "--model", "opus", "--allowedTools", "Bash"]
                    .map(String::from)
            ),
            "{claude:?}"
        );
        let codex = args_of(Agent::Codex, &["-m", "o4"]);
        assert!(codex.contains(&"workspace-write".to_string()), "{codex:?}");
        // The user's own permissions replace them, in either spelling.
        let claude = args_of(Agent::Claude, &["--permission-mode=plan"]);
        assert!(
            !claude.contains(&"acceptEdits".to_string())
                && claude.contains(&"--permission-mode=plan".to_string()),
            "{claude:?}"
        );
        let gemini = args_of(Agent::Gemini, &["--yolo"]);
        assert!(!gemini.contains(&"auto_edit".to_string()), "{gemini:?}");
        let codex = args_of(Agent::Codex, &["-s", "read-only"]);
        assert!(
            !codex.contains(&"workspace-write".to_string())
                && codex.ends_with(&["-s", "read-only", "--", "fix it"].map(String::from)),
            "{codex:?}"
        );
    }
}
