//! One `claude -p` run in the sample world, its stream-json events handed over as they arrive.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use mock_model::MockModel;
use serde_json::Value;

use super::sample::Sample;
use super::translate;
use super::{Config, Error};

/// The longest the CLI may run. The demo takes seconds; this only stops a hang.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// The translator's view of the model and the loop's ledger.
pub struct Sources<'a> {
    pub model: &'a MockModel,
    pub ledger: PathBuf,
}

impl translate::Sources for Sources<'_> {
    fn first_prompt(&self) -> Option<String> {
        self.model.main_requests().first().and_then(mock_model::Recorded::last_user_text)
    }

    fn ledger_entry(&self, index: usize) -> Option<Value> {
        let text = std::fs::read_to_string(&self.ledger).ok()?;
        serde_json::from_str(text.lines().nth(index)?).ok()
    }
}

/// How the CLI run went.
pub struct CliOutcome {
    pub stderr: String,
    /// Why the run did not finish normally, if it did not.
    pub problem: Option<String>,
}

/// Runs the CLI to its end, calling `on_event` with each stream-json event as it is printed.
pub fn run_cli(
    config: &Config,
    sample: &Sample,
    model: &MockModel,
    on_event: &mut dyn FnMut(&Value) -> Result<(), Error>,
) -> Result<CliOutcome, Error> {
    let mut child = command(config, sample, model)
        .spawn()
        .map_err(|err| Error(format!("cannot start {}: {err}", config.claude.display())))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr_pipe = child.stderr.take().expect("stderr is piped");
    // Both pipes drain on their own threads, so neither can fill up and stall the CLI while
    // this one renders; lines come over a channel so the wait for one can time out.
    let (lines, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });

    let deadline = Instant::now() + RUN_LIMIT;
    let mut problem = None;
    let mut saw_result = false;
    loop {
        match received.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                // The CLI prints only JSON lines in this mode; anything else is not ours to show.
                let Ok(event) = serde_json::from_str::<Value>(&line) else { continue };
                saw_result |= event["type"] == "result";
                if let Err(err) = on_event(&event) {
                    // stdout is gone (a closed pipe): stop the CLI rather than leave it running.
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(err);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                problem = Some(format!("claude ran past {} s and was stopped", RUN_LIMIT.as_secs()));
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait()?;
    let _ = reader.join();
    let stderr = stderr_reader.join().unwrap_or_default();
    if problem.is_none() && !status.success() {
        problem = Some(format!("claude exited with {status}"));
    }
    if problem.is_none() && !saw_result {
        problem = Some("claude ended without a result".to_owned());
    }
    Ok(CliOutcome { stderr, problem })
}

/// The CLI in the sample world: the same hermetic environment as the end-to-end tests
/// (tests/claude_code.rs), so nothing of the user's own Claude Code setup, loops or installed
/// loop-hook takes part, and nothing leaves the machine.
fn command(config: &Config, sample: &Sample, model: &MockModel) -> Command {
    let mut cmd = Command::new(&config.claude);
    cmd.args(sample.claude_args(&config.plugin_dir.display().to_string()))
        .env_clear()
        .env("PATH", path_without_loop_hook())
        .env("HOME", &sample.home)
        .env("CLAUDE_CONFIG_DIR", &sample.claude_config)
        .env("FOR_LOOP_HOME", &sample.state_home)
        .env("FOR_LOOP_BIN", &config.loop_hook)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        // The mock ignores it; the CLI only needs one to be set to skip its login.
        .env("ANTHROPIC_API_KEY", "offline-demo")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("CLAUDE_CODE_SYNC_PLUGIN_INSTALL", "1")
        .current_dir(&sample.project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// PATH without any directory holding a `loop-hook`, so an installed one cannot stand in for
/// the one the demo names.
fn path_without_loop_hook() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':').filter(|dir| !Path::new(dir).join("loop-hook").exists()).collect::<Vec<_>>().join(":")
}

/// The reason code of each ledger line.
pub fn ledger_reasons(ledger: &Path) -> Vec<String> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|entry| entry["reason"].as_str().unwrap_or("?").to_owned())
        .collect()
}
