//! The steps of a run: what the human account and the `--json` trace are both made from.

use std::path::PathBuf;

use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Where the run happens and what it runs.
    Sample { project: PathBuf, state_home: PathBuf, files: Vec<SampleFile>, command: Vec<String> },
    /// The CLI started and reported its version and whether the plugin loaded.
    Cli { version: String, plugin_loaded: bool },
    /// The loop's start message, as the model received it.
    LoopStarted { banner: Vec<String> },
    /// A new turn of the model begins.
    Iteration { n: u32, of: u32 },
    /// The model's text.
    Said { iteration: u32, text: String },
    /// The model called a tool.
    Tool { iteration: u32, tool: String, summary: String, input: Value },
    /// A hook refused the tool call.
    Denied { iteration: u32, tool: String, reason: String },
    /// The tool call ran and failed (or Claude Code refused it).
    ToolFailed { iteration: u32, tool: String, error: String },
    /// The model ended its turn and for-loop's Stop hook decided.
    Stop(Stop),
    /// The plan demo's plan file after a stop: its story lines, with the boxes for-loop set.
    Plan { file: String, boxes: Vec<String> },
    /// The run is over.
    End(End),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleFile {
    pub name: String,
    pub about: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub iteration: u32,
    pub of: u32,
    /// `block` (the turn goes on) or `allow` (the stop happens).
    pub decision: String,
    /// The ledger's reason code; `None` when the hook wrote no ledger line.
    pub reason: Option<String>,
    pub verify: Option<Verify>,
    /// Verify files changed since the loop started.
    pub oracle_changed: Vec<String>,
    /// The hook's `systemMessage`: the status line, or the summary with the receipt.
    pub status: String,
    /// The prompt fed back to the model with a block.
    pub reinjected: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    pub command: String,
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The end of its output, as the ledger keeps it.
    pub tail: String,
}

impl Verify {
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    /// The loop did what the demo shows.
    pub ok: bool,
    /// The last ledger reason.
    pub outcome: Option<String>,
    pub iterations: u32,
    pub ledger: Vec<String>,
    pub elapsed_ms: u64,
    /// The run's directory (sample project, home, loop store).
    pub sample: PathBuf,
    pub kept: bool,
    /// What went wrong, when not `ok`.
    pub problem: Option<String>,
}

impl Step {
    /// The `--json` form: one object, `step` naming the kind (documented in the crate docs).
    pub fn to_json(&self) -> Value {
        match self {
            Step::Sample { project, state_home, files, command } => json!({
                "step": "sample",
                "project": project,
                "state_home": state_home,
                "files": files.iter().map(|f| json!({"name": f.name, "about": f.about})).collect::<Vec<_>>(),
                "command": command,
            }),
            Step::Cli { version, plugin_loaded } => {
                json!({"step": "cli", "version": version, "plugin_loaded": plugin_loaded})
            }
            Step::LoopStarted { banner } => json!({"step": "loop_started", "banner": banner}),
            Step::Iteration { n, of } => json!({"step": "iteration", "n": n, "of": of}),
            Step::Said { iteration, text } => json!({"step": "said", "iteration": iteration, "text": text}),
            Step::Tool { iteration, tool, summary, input } => json!({
                "step": "tool", "iteration": iteration, "tool": tool, "summary": summary, "input": input,
            }),
            Step::Denied { iteration, tool, reason } => {
                json!({"step": "denied", "iteration": iteration, "tool": tool, "reason": reason})
            }
            Step::ToolFailed { iteration, tool, error } => {
                json!({"step": "tool_failed", "iteration": iteration, "tool": tool, "error": error})
            }
            Step::Stop(stop) => json!({
                "step": "stop",
                "iteration": stop.iteration,
                "of": stop.of,
                "decision": stop.decision,
                "reason": stop.reason,
                "verify": stop.verify.as_ref().map(|v| json!({
                    "command": v.command,
                    "exit_code": v.exit_code,
                    "timed_out": v.timed_out,
                    "duration_ms": v.duration_ms,
                    "tail": v.tail,
                })),
                "oracle_changed": stop.oracle_changed,
                "status": stop.status,
                "reinjected": stop.reinjected,
            }),
            Step::Plan { file, boxes } => json!({"step": "plan", "file": file, "boxes": boxes}),
            Step::End(end) => json!({
                "step": "end",
                "ok": end.ok,
                "outcome": end.outcome,
                "iterations": end.iterations,
                "ledger": end.ledger,
                "elapsed_ms": end.elapsed_ms,
                "sample": end.sample,
                "kept": end.kept,
                "problem": end.problem,
            }),
        }
    }
}
