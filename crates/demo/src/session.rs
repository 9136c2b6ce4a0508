//! One `claude -p` run in the sample world, its stream-json events handed over as they arrive.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use mock_model::{Agent, MockModel};
use serde_json::Value;

use crate::sample::Sample;
use crate::translate;
use crate::{Config, Error};

/// The longest the CLI may run. The demo takes seconds; this only stops a hang.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// The translator's view of the model and the loop's ledger.
pub(crate) struct Sources<'a> {
    pub model: &'a MockModel,
    pub ledger: PathBuf,
}

impl translate::Sources for Sources<'_> {
    fn first_prompt(&self) -> Option<String> {
        self.model.main_requests().first().and_then(mock_model::Recorded::last_user_text)
    }

    fn ledger_entry(&self, index: usize) -> Option<Value> {
        stop_entries(&self.ledger).into_iter().nth(index)
    }
}

/// The ledger's lines after the loop's start: one for each stop (and note). The lines that only
/// witness a command awaiting, then getting, the host's confirmation are not stops.
fn stop_entries(ledger: &Path) -> Vec<Value> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["decision"] != "start")
        .filter(|entry| !matches!(entry["reason"].as_str(), Some("command_pending" | "command_confirmed")))
        .collect()
}

/// How the CLI run went.
pub(crate) struct CliOutcome {
    pub stderr: String,
    /// Why the run did not finish normally, if it did not.
    pub problem: Option<String>,
}

/// Runs the CLI to its end, calling `on_event` with each stream-json event as it is printed.
pub(crate) fn run_cli(
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

/// The CLI in the sample world, run the way the end-to-end tests run it
/// ([`MockModel::agent_command`]), so nothing of the user's own Claude Code setup, loops or
/// installed loop-hook takes part, and nothing leaves the machine.
fn command(config: &Config, sample: &Sample, model: &MockModel) -> Command {
    let agent = Agent::ClaudeCode { config_dir: &sample.claude_config };
    let mut cmd = model.agent_command(&config.claude, agent, &sample.home, &["loop-hook"]);
    cmd.args(Sample::claude_args(&config.plugin_dir.display().to_string(), sample.scenario))
        .env("FOR_LOOP_HOME", &sample.state_home)
        .env("FOR_LOOP_BIN", &config.loop_hook)
        .current_dir(&sample.project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The reason code of each ledger line after the loop's start.
pub(crate) fn ledger_reasons(ledger: &Path) -> Vec<String> {
    stop_entries(ledger).iter().map(|entry| entry["reason"].as_str().unwrap_or("?").to_owned()).collect()
}
