//! The agent CLIs for-loop starts headless: `loop-hook run` drives one per iteration, and the
//! built-in reviewer (`--review claude|codex|gemini`) asks one, read-only, about a passing change.
//! How each is started, its safe default permissions, the final message and the tokens it reports.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::host::Host;
use crate::host::usage::{TokenCounts, Usage};
use crate::support::Environment;

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

    /// The built-in reviewer a whole `--review` value names: exactly `claude`, `codex` or
    /// `gemini`. Anything else is a command, so a script called `claude-review` stays one.
    pub(crate) fn reviewer(value: &str) -> Option<Agent> {
        match value {
            "claude" | "codex" | "gemini" => Agent::from_name(value),
            _ => None,
        }
    }

    /// The CLI's name as its makers write it.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Gemini => "Gemini CLI",
            Agent::Codex => "Codex",
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

    /// The headless, read-only command of a review: `prompt` as the instructions, the change on
    /// stdin (each CLI joins the two), structured output on stdout. No edits and no shell: Claude
    /// Code gets only its file-reading tools, denies anything that would ask and loads no project
    /// settings (their hooks are commands the project, so the agent under review, wrote); Codex
    /// runs in its read-only sandbox, Gemini CLI in its read-only plan mode. The session is not
    /// kept where the CLI can say so.
    pub(crate) fn review_command(self, program: &Path, prompt: &str) -> Command {
        let mut cmd = Command::new(program);
        match self {
            Agent::Claude => cmd.args(["-p", prompt, "--output-format", "stream-json", "--verbose"]).args([
                "--tools",
                "Read,Grep,Glob",
                "--permission-mode",
                "dontAsk",
                "--setting-sources",
                "user",
                "--strict-mcp-config",
                "--no-session-persistence",
            ]),
            Agent::Gemini => {
                cmd.args(["-p", prompt, "--output-format", "stream-json", "--approval-mode", "plan"])
            }
            Agent::Codex => cmd
                .args(["exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only", "--ephemeral"])
                .arg("--")
                .arg(prompt),
        };
        cmd
    }

    /// The variables the CLI needs to reach its model that look like a host's own hook variables
    /// and so are taken from the commands for-loop runs (see `checks::verify`): its config home
    /// and keys. Other provider variables (`ANTHROPIC_*`, `OPENAI_*`, `GOOGLE_*`) pass anyway.
    pub(crate) fn own_variables(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => &[
                "CLAUDE_CONFIG_DIR",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            ],
            // Gemini CLI runs only in a trusted folder: the user's own trust decision carries over.
            Agent::Gemini => {
                &["GEMINI_API_KEY", "GEMINI_CLI_HOME", "GEMINI_MODEL", "GEMINI_CLI_TRUST_WORKSPACE"]
            }
            Agent::Codex => &["CODEX_HOME", "CODEX_API_KEY"],
        }
    }

    /// The variable naming the CLI's program, ahead of a search of `PATH`.
    pub(crate) fn program_variable(self) -> &'static str {
        match self {
            Agent::Claude => "FOR_LOOP_CLAUDE",
            Agent::Gemini => "FOR_LOOP_GEMINI",
            Agent::Codex => "FOR_LOOP_CODEX",
        }
    }

    /// The CLI's program: the file [`Agent::program_variable`] names, else the first on `PATH`;
    /// `Err` says which was not found and what to do.
    pub(crate) fn find(self, env: &Environment) -> Result<PathBuf, String> {
        let variable = self.program_variable();
        match env.var(variable).filter(|p| !p.is_empty()) {
            Some(named) if Path::new(named).is_file() => Ok(PathBuf::from(named)),
            Some(named) => Err(format!("{variable} names {named}, which is not a file; correct or unset it")),
            None => self.locate(env.var("PATH")).ok_or_else(|| {
                format!("`{}` was not found on PATH; install it, or name it with {variable}", self.program())
            }),
        }
    }

    /// The tokens the CLI reports in its structured output, per model; empty when it reports
    /// none. Claude Code's `result` carries `modelUsage` (or `usage`), Codex each turn's
    /// `turn.completed.usage` (input includes the cached part), Gemini CLI's `result` its
    /// `stats.models`.
    pub(crate) fn usage(self, output: &str) -> Usage {
        let mut usage = Usage::default();
        let events = output.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok());
        for event in events {
            match self {
                Agent::Claude if event["type"] == "result" => usage = claude_usage(&event),
                Agent::Gemini if event["type"] == "result" => {
                    for (model, stats) in event["stats"]["models"].as_object().into_iter().flatten() {
                        let cached = count(&stats["cached"]);
                        let input = count(&stats["input_tokens"]).saturating_sub(cached);
                        let output = count(&stats["output_tokens"]);
                        usage.add(model, TokenCounts { input, output, cache_write: 0, cache_read: cached });
                    }
                }
                Agent::Codex if event["type"] == "turn.completed" => {
                    let used = &event["usage"];
                    let cached = count(&used["cached_input_tokens"]);
                    let input = count(&used["input_tokens"]).saturating_sub(cached);
                    let output = count(&used["output_tokens"]);
                    usage.add("codex", TokenCounts { input, output, cache_write: 0, cache_read: cached });
                }
                _ => {}
            }
        }
        usage
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
        // Windows separates PATH with `;` (its entries hold `C:`), and npm installs a CLI there as
        // `NAME.cmd` beside `NAME`.
        let suffixes: &[&str] = if cfg!(windows) { &["", ".exe", ".cmd"] } else { &[""] };
        std::env::split_paths(path.unwrap_or_default())
            .filter(|dir| !dir.as_os_str().is_empty())
            .flat_map(|dir| {
                suffixes.iter().map(move |suffix| dir.join(format!("{}{suffix}", self.program())))
            })
            .find(|candidate| candidate.is_file())
    }
}

/// Claude Code's `result` event: per model from `modelUsage`, else the session's `usage`.
fn claude_usage(result: &Value) -> Usage {
    let mut usage = Usage::default();
    for (model, used) in result["modelUsage"].as_object().into_iter().flatten() {
        usage.add(
            model,
            TokenCounts {
                input: count(&used["inputTokens"]),
                output: count(&used["outputTokens"]),
                cache_write: count(&used["cacheCreationInputTokens"]),
                cache_read: count(&used["cacheReadInputTokens"]),
            },
        );
    }
    if usage.0.is_empty() && result["usage"].is_object() {
        let used = &result["usage"];
        usage.add(
            "claude",
            TokenCounts {
                input: count(&used["input_tokens"]),
                output: count(&used["output_tokens"]),
                cache_write: count(&used["cache_creation_input_tokens"]),
                cache_read: count(&used["cache_read_input_tokens"]),
            },
        );
    }
    usage
}

/// A token count, or 0 where the field is missing or not a count.
fn count(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PATH as this platform writes it (`;` between entries on Windows, whose entries hold `C:`):
    /// the CLI is found in a later entry, and not where it is absent.
    #[test]
    fn an_agent_is_located_on_path_as_the_platform_writes_it() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        std::fs::write(second.path().join("gemini"), "").unwrap();
        let path = std::env::join_paths([first.path(), second.path()]).unwrap();
        let path = path.to_str().unwrap();
        assert_eq!(Agent::Gemini.locate(Some(path)), Some(second.path().join("gemini")));
        assert_eq!(Agent::Claude.locate(Some(path)), None);
        assert_eq!(Agent::Claude.locate(None), None);
    }

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

    fn review_args(agent: Agent) -> Vec<String> {
        agent
            .review_command(Path::new("cli"), "the brief")
            .get_args()
            .map(|a| a.to_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn each_reviewer_runs_headless_and_read_only() {
        let claude = review_args(Agent::Claude);
        assert!(claude.starts_with(&["-p", "the brief", "--output-format", "stream-json"].map(String::from)));
        let has = |pair: [&str; 2]| claude.windows(2).any(|w| w == pair);
        for pair in
            [["--tools", "Read,Grep,Glob"], ["--permission-mode", "dontAsk"], ["--setting-sources", "user"]]
        {
            assert!(has(pair), "{pair:?} in {claude:?}");
        }
        assert!(!claude.iter().any(|a| a.contains("Bash") || a.contains("Edit")), "{claude:?}");
        assert_eq!(
            review_args(Agent::Codex),
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "read-only",
                "--ephemeral",
                "--",
                "the brief"
            ]
        );
        assert_eq!(
            review_args(Agent::Gemini),
            ["-p", "the brief", "--output-format", "stream-json", "--approval-mode", "plan"]
        );
    }

    #[test]
    fn only_the_exact_names_are_built_in_reviewers() {
        assert_eq!(Agent::reviewer("claude"), Some(Agent::Claude));
        assert_eq!(Agent::reviewer("codex"), Some(Agent::Codex));
        assert_eq!(Agent::reviewer("gemini"), Some(Agent::Gemini));
        for command in ["claude-code", "gemini-cli", "Claude", " claude", "claude -p", "sh review.sh", ""] {
            assert_eq!(Agent::reviewer(command), None, "{command:?}");
        }
    }

    #[test]
    fn a_named_program_comes_before_path_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let (on_path, named) = (dir.path().join("claude"), dir.path().join("my-claude"));
        std::fs::write(&on_path, "").unwrap();
        std::fs::write(&named, "").unwrap();
        let env = Environment::new(
            [("PATH".to_string(), dir.path().display().to_string())],
            dir.path().to_path_buf(),
            "2026-11-22T03:00:00Z".parse().unwrap(),
        );
        assert_eq!(Agent::Claude.find(&env), Ok(on_path));
        let chosen = env.with_var("FOR_LOOP_CLAUDE", &named.display().to_string());
        assert_eq!(Agent::Claude.find(&chosen), Ok(named));
        // A named program that is not there is not replaced by PATH's.
        let gone = env.with_var("FOR_LOOP_CLAUDE", "/nonexistent/claude");
        assert_eq!(
            Agent::Claude.find(&gone),
            Err("FOR_LOOP_CLAUDE names /nonexistent/claude, which is not a file; correct or unset it".into())
        );
        assert_eq!(
            Agent::Codex.find(&env),
            Err("`codex` was not found on PATH; install it, or name it with FOR_LOOP_CODEX".into())
        );
    }

    #[test]
    fn usage_each_cli_reports() {
        let claude = concat!(
            "{\"type\":\"assistant\",\"message\":{\"usage\":{\"input_tokens\":999}}}\n",
            "{\"type\":\"result\",\"usage\":{\"input_tokens\":3,\"output_tokens\":4,",
            "\"cache_creation_input_tokens\":5,\"cache_read_input_tokens\":6}}\n"
        );
        let used = Agent::Claude.usage(claude);
        assert_eq!(used.0["claude"], TokenCounts { input: 3, output: 4, cache_write: 5, cache_read: 6 });
        let codex = concat!(
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":100,\"cached_input_tokens\":40,\"output_tokens\":7}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}\n"
        );
        assert_eq!(
            Agent::Codex.usage(codex).0["codex"],
            TokenCounts { input: 70, output: 8, cache_write: 0, cache_read: 40 }
        );
        let gemini = "{\"type\":\"result\",\"stats\":{\"models\":{\"gemini-2.5-pro\":{\"input_tokens\":50,\"output_tokens\":5,\"cached\":20}}}}\n";
        assert_eq!(
            Agent::Gemini.usage(gemini).0["gemini-2.5-pro"],
            TokenCounts { input: 30, output: 5, cache_write: 0, cache_read: 20 }
        );
        for garbage in [
            "",
            "not json\n",
            "{\"type\":\"result\",\"usage\":\"lots\"}\n",
            "{\"type\":\"result\",\"stats\":[]}\n",
        ] {
            assert!(Agent::Claude.usage(garbage).0.is_empty(), "{garbage}");
            assert!(Agent::Gemini.usage(garbage).0.is_empty(), "{garbage}");
        }
    }
}
