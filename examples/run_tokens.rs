//! Model input per iteration: `loop-hook run` (a fresh Claude Code session per iteration) against
//! the in-session loop (one conversation, the task re-injected by the Stop hook), over the same
//! scripted 10-iteration task, with the real Claude Code CLI against mock-model. Prints a Markdown
//! table for docs/benchmarks.md. Run it with `scripts/bench-tokens`.
//!
//! The task: create a file named `fixed`. In iterations 1 to 9 the model runs the check and
//! claims to be done without fixing anything; in iteration 10 it writes the file. Each iteration
//! is two model requests (the tool call, then the final text), in both modes. The stall breaker
//! is set to allow the 9 identical failures.
//!
//! The mock does not tokenize: input is measured as the UTF-8 bytes of each request's system
//! prompt, tool definitions and messages, and shown as tokens at 4 bytes per token.

use std::error::Error;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use mock_model::{Agent, MockModel, Recorded, Script};
use serde_json::Value;

const ITERATIONS: usize = 10;
const TASK: &str = "create the file named fixed";
const CHECK: &str = "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n";
/// The same tools allowed in both modes: the check, and the write that fixes it.
const ALLOWED_TOOLS: &str = "Bash(sh check.sh) Write";
const SESSION_ID: &str = "6c1f3a52-9d0e-4b7a-8e21-3f5a7c9b0d14";
const BYTES_PER_TOKEN: usize = 4;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

struct Options {
    claude: PathBuf,
    loop_hook: PathBuf,
    plugin_dir: PathBuf,
}

fn main() -> Result<()> {
    let options = Options::from_args()?;
    let run = measure(&options, Mode::Run)?;
    let session = measure(&options, Mode::InSession)?;
    print_table(&run, &session);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Run,
    InSession,
}

/// Input bytes of one request: everything, and the conversation (`messages`) alone.
#[derive(Default, Clone, Copy)]
struct Input {
    total: usize,
    conversation: usize,
}

impl Options {
    fn from_args() -> Result<Options> {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut options = Options {
            claude: std::env::var_os("FOR_LOOP_CLAUDE")
                .map_or_else(|| repo.join("tests/clients/node_modules/.bin/claude"), PathBuf::from),
            loop_hook: repo.join("target/release/loop-hook"),
            plugin_dir: repo.join("plugin/claude-code"),
        };
        let mut args = std::env::args_os().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().map(PathBuf::from).ok_or_else(|| format!("{arg:?} needs a value"));
            match arg.to_str() {
                Some("--claude") => options.claude = value()?,
                Some("--loop-hook") => options.loop_hook = value()?,
                _ => {
                    return Err(format!(
                        "unexpected argument {arg:?}; usage: run_tokens [--claude PATH] [--loop-hook PATH]"
                    )
                    .into());
                }
            }
        }
        // Absolute (links kept: `claude` must stay the name on PATH): the commands run in the
        // project directory of a throwaway world.
        for (what, path) in [("claude", &mut options.claude), ("loop-hook", &mut options.loop_hook)] {
            if !path.is_file() {
                return Err(
                    format!("{what} not found at {}: see scripts/bench-tokens", path.display()).into()
                );
            }
            *path = std::path::absolute(&*path)?;
        }
        Ok(options)
    }
}

/// Runs the task in `mode` and gives the input of each of its iterations.
fn measure(options: &Options, mode: Mode) -> Result<Vec<Input>> {
    let world = tempfile::tempdir()?;
    let (home, project, store, config) = (
        world.path().join("home"),
        world.path().join("project"),
        world.path().join("store"),
        world.path().join("claude-config"),
    );
    for dir in [&home, &project, &store, &config] {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(project.join("check.sh"), CHECK)?;
    let fixed = project.join("fixed");
    let mut script = Script::new();
    for _ in 1..ITERATIONS {
        script = script.bash("sh check.sh").text("I have finished the task.");
    }
    let model = MockModel::start(script.write(fixed.to_string_lossy(), "ok\n").text("Fixed it."))?;
    let agent = Agent::ClaudeCode { config_dir: &config };
    let max = ITERATIONS.to_string();
    let mut cmd = match mode {
        Mode::Run => {
            let mut cmd = model.agent_command(&options.loop_hook, agent, &home, &["loop-hook", "claude"]);
            let mut path = OsString::from(options.claude.parent().unwrap_or(Path::new(".")));
            path.push(":");
            path.push(mock_model::path_without(&["loop-hook", "claude"]));
            cmd.env("PATH", path).args(["run", TASK, "--verify", "sh check.sh", "--max-iterations", &max]);
            cmd.args(["--max-same-failures", &max]);
            cmd.args(["--agent", "claude", "--agent-arg", "--allowedTools", "--agent-arg", ALLOWED_TOOLS]);
            cmd
        }
        Mode::InSession => {
            let mut cmd = model.agent_command(&options.claude, agent, &home, &["loop-hook"]);
            let prompt = format!(
                "/for-loop {TASK} --verify \"sh check.sh\" --max-iterations {max} --max-same-failures {max}"
            );
            let plugin = options.plugin_dir.to_string_lossy().into_owned();
            cmd.args(["-p", &prompt, "--plugin-dir", &plugin, "--session-id", SESSION_ID])
                .args(["--allowedTools", ALLOWED_TOOLS, "--output-format", "stream-json", "--verbose"])
                .env("FOR_LOOP_BIN", &options.loop_hook)
                // Each iteration runs a tool, which resets Claude Code's cap on consecutive
                // Stop-hook blocks; turned off anyway, so the cap cannot end the measurement.
                .env("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "0");
            cmd
        }
    };
    let output = cmd
        .env("FOR_LOOP_HOME", &store)
        .current_dir(&project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", cmd.get_program().to_string_lossy()))?;
    let requests = model.main_requests();
    let label = if mode == Mode::Run { "loop-hook run" } else { "the in-session loop" };
    if requests.len() != 2 * ITERATIONS || !fixed.exists() || model.exhausted_requests() > 0 {
        return Err(format!(
            "{label} did not run the scripted {ITERATIONS} iterations ({} model requests):\n{}\n{}",
            requests.len(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(requests
        .chunks(2)
        .map(|pair| {
            pair.iter().map(input_of).fold(Input::default(), |sum, one| Input {
                total: sum.total + one.total,
                conversation: sum.conversation + one.conversation,
            })
        })
        .collect())
}

fn input_of(request: &Recorded) -> Input {
    let size = |key: &str| match &request.body[key] {
        Value::Null => 0,
        value => value.to_string().len(),
    };
    let conversation = size("messages");
    Input { total: size("system") + size("tools") + conversation, conversation }
}

fn tokens(bytes: usize) -> String {
    let tokens = bytes / BYTES_PER_TOKEN;
    let digits = tokens.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn print_table(run: &[Input], session: &[Input]) {
    println!(
        "| iteration | `run`: input tokens | of which conversation | in-session: input tokens | of which conversation |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (i, (r, s)) in run.iter().zip(session).enumerate() {
        println!(
            "| {} | {} | {} | {} | {} |",
            i + 1,
            tokens(r.total),
            tokens(r.conversation),
            tokens(s.total),
            tokens(s.conversation)
        );
    }
    let sum = |inputs: &[Input], pick: fn(&Input) -> usize| inputs.iter().map(pick).sum::<usize>();
    println!(
        "| total | {} | {} | {} | {} |",
        tokens(sum(run, |i| i.total)),
        tokens(sum(run, |i| i.conversation)),
        tokens(sum(session, |i| i.total)),
        tokens(sum(session, |i| i.conversation))
    );
}
