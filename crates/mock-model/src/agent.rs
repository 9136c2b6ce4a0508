//! How each pinned agent CLI is run offline against a [`MockModel`]: the one place that knows
//! which variables point a CLI at the mock and turn off its updates, telemetry and retries, so
//! the end-to-end tests and the demo run the CLIs the same way.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Command;

use crate::MockModel;

/// An agent CLI the mock can drive, with the directory it keeps its own state in.
#[derive(Debug, Clone, Copy)]
pub enum Agent<'a> {
    /// Claude Code; settings, plugins and transcripts go to `config_dir` (`CLAUDE_CONFIG_DIR`).
    ClaudeCode { config_dir: &'a Path },
    /// Gemini CLI; it keeps its settings and extensions under `$HOME/.gemini`.
    GeminiCli,
    /// Codex; `codex_home` (`CODEX_HOME`) must hold the `config.toml` that
    /// [`MockModel::codex_config`] gives.
    Codex { codex_home: &'a Path },
    /// Copilot CLI in offline mode with this mock as its own provider (Chat Completions); it
    /// keeps its config, hooks and sessions under `$HOME/.copilot`. Run it with `-p PROMPT
    /// --no-auto-update`.
    CopilotCli,
    /// Qwen Code with its `openai` provider (Chat Completions) pointed at this mock; it keeps
    /// its settings, extensions and chats under `$HOME/.qwen`, whose `settings.json` must hold
    /// [`MockModel::qwen_settings`]. Run it with `--yolo -p PROMPT`.
    QwenCode,
}

/// The API key each CLI is given: the mock ignores it, but a CLI without one asks for a login.
const API_KEY: &str = "offline-mock-key";

impl MockModel {
    /// A command running `program` as `agent`, offline against this mock: an environment
    /// cleared of everything but `PATH` and `HOME`, plus the variables that point the CLI at the
    /// mock and turn off what would reach the network or outlive the run. `PATH` leaves out
    /// every directory holding one of `hidden`, so a copy installed on the machine cannot stand
    /// in for the one the caller provides (or withholds).
    pub fn agent_command(&self, program: &Path, agent: Agent<'_>, home: &Path, hidden: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear().env("PATH", path_without(hidden)).env("HOME", home);
        match agent {
            Agent::ClaudeCode { config_dir } => {
                cmd.env("CLAUDE_CONFIG_DIR", config_dir)
                    .env("ANTHROPIC_BASE_URL", self.base_url())
                    .env("ANTHROPIC_API_KEY", API_KEY)
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                    .env("DISABLE_AUTOUPDATER", "1")
                    .env("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
                    .env("CLAUDE_CODE_MAX_RETRIES", "0")
                    .env("CLAUDE_CODE_SYNC_PLUGIN_INSTALL", "1");
            }
            Agent::GeminiCli => {
                cmd.env("GEMINI_API_KEY", API_KEY)
                    .env("GOOGLE_GEMINI_BASE_URL", self.base_url())
                    .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
            }
            Agent::Codex { codex_home } => {
                cmd.env("CODEX_HOME", codex_home).env(CODEX_KEY_VAR, API_KEY);
            }
            Agent::CopilotCli => {
                // Offline: no GitHub login, telemetry, update check or web tools.
                cmd.env("COPILOT_OFFLINE", "true")
                    .env("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", self.base_url()))
                    .env("COPILOT_PROVIDER_API_KEY", API_KEY)
                    .env("COPILOT_MODEL", COPILOT_MODEL)
                    .env("COPILOT_AUTO_UPDATE", "false");
            }
            Agent::QwenCode => {
                cmd.env("OPENAI_API_KEY", API_KEY)
                    .env("OPENAI_BASE_URL", format!("{}/v1", self.base_url()))
                    .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1");
            }
        }
        cmd
    }

    /// The Qwen Code settings that select the `openai` provider and a model, and turn off what
    /// would send the mock requests of its own: update checks, and the managed memory and skill
    /// passes, which run after a turn with tools and would take the next scripted step.
    pub fn qwen_settings() -> serde_json::Value {
        serde_json::json!({
            "general": {"enableAutoUpdate": false},
            "memory": {"enableManagedAutoMemory": false, "enableManagedAutoDream": false, "enableAutoSkill": false},
            "security": {"auth": {"selectedType": "openai"}},
            "model": {"name": QWEN_MODEL},
        })
    }

    /// A Codex `config.toml` whose default model provider is this mock, with retries off.
    pub fn codex_config(&self) -> String {
        format!(
            "model = \"gpt-5\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\nname = \"mock\"\n\
             base_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"{CODEX_KEY_VAR}\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n",
            self.base_url()
        )
    }
}

/// The model Copilot CLI is told to use: not one it knows, so it applies no model-specific
/// prompting, and the mock echoes it back.
const COPILOT_MODEL: &str = "mock-gpt";

/// The model Qwen Code is told to use.
const QWEN_MODEL: &str = "mock-gpt";

/// The variable [`MockModel::codex_config`] tells Codex to read its key from.
const CODEX_KEY_VAR: &str = "MOCK_API_KEY";

/// This process's `PATH` without the directories that hold any of `programs`.
pub fn path_without(programs: &[&str]) -> OsString {
    filter_path(&std::env::var_os("PATH").unwrap_or_default(), programs)
}

fn filter_path(path: &OsStr, programs: &[&str]) -> OsString {
    let kept: Vec<_> = std::env::split_paths(path)
        .filter(|dir| !programs.iter().any(|program| dir.join(program).exists()))
        .collect();
    std::env::join_paths(kept).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Script;

    fn vars(cmd: &Command) -> Vec<(String, String)> {
        cmd.get_envs().filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v?.to_str()?.to_owned()))).collect()
    }

    #[test]
    fn each_agent_is_pointed_at_the_mock_and_nothing_else_leaks_in() {
        let model = MockModel::start(Script::new()).unwrap();
        let home = Path::new("/home/test");
        let claude = model.agent_command(
            Path::new("claude"),
            Agent::ClaudeCode { config_dir: Path::new("/c") },
            home,
            &[],
        );
        let claude_vars = vars(&claude);
        assert!(claude_vars.contains(&("ANTHROPIC_BASE_URL".into(), model.base_url())));
        assert!(claude_vars.contains(&("CLAUDE_CONFIG_DIR".into(), "/c".into())));
        assert!(claude_vars.contains(&("DISABLE_AUTOUPDATER".into(), "1".into())));
        let gemini = vars(&model.agent_command(Path::new("gemini"), Agent::GeminiCli, home, &[]));
        assert!(gemini.contains(&("GOOGLE_GEMINI_BASE_URL".into(), model.base_url())));
        let codex_home = Path::new("/x");
        let codex = vars(&model.agent_command(Path::new("codex"), Agent::Codex { codex_home }, home, &[]));
        assert!(codex.contains(&(CODEX_KEY_VAR.into(), API_KEY.into())));
        assert!(model.codex_config().contains(&format!("base_url = \"{}/v1\"", model.base_url())));
        let copilot = vars(&model.agent_command(Path::new("copilot"), Agent::CopilotCli, home, &[]));
        assert!(copilot.contains(&("COPILOT_PROVIDER_BASE_URL".into(), format!("{}/v1", model.base_url()))));
        assert!(copilot.contains(&("COPILOT_OFFLINE".into(), "true".into())));
        let qwen = vars(&model.agent_command(Path::new("qwen"), Agent::QwenCode, home, &[]));
        assert!(qwen.contains(&("OPENAI_BASE_URL".into(), format!("{}/v1", model.base_url()))));
        assert_eq!(MockModel::qwen_settings()["security"]["auth"]["selectedType"], "openai");
        for cmd in [claude_vars, gemini, codex, copilot, qwen] {
            assert!(cmd.contains(&("HOME".into(), "/home/test".into())));
            let names: Vec<&str> = cmd.iter().map(|(k, _)| k.as_str()).collect();
            assert!(!names.contains(&"USER") && !names.contains(&"ANTHROPIC_AUTH_TOKEN"), "{names:?}");
        }
    }

    #[test]
    fn path_leaves_out_directories_holding_a_hidden_program() {
        let root = std::env::temp_dir().join(format!("mock-model-path-test-{}", std::process::id()));
        let (with, without) = (root.join("with"), root.join("without"));
        std::fs::create_dir_all(&with).unwrap();
        std::fs::create_dir_all(&without).unwrap();
        std::fs::write(with.join("hidden-program"), "").unwrap();
        let path = std::env::join_paths([&with, &without]).unwrap();
        let kept: Vec<_> = std::env::split_paths(&filter_path(&path, &["hidden-program"])).collect();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(kept, [without]);
    }
}
