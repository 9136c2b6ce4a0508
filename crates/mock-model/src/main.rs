//! `mock-model --script FILE [--port N]`: serves a script until killed, for the demo and for
//! poking at the CLI by hand.
//!
//! The first stdout line is `listening on http://127.0.0.1:PORT`, flushed at once, so a wrapper
//! script can read the address before starting the client. Each main request logs a line to
//! stderr.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use mock_model::{MockModel, Options, Script};

const USAGE: &str = "usage: mock-model --script FILE [--port N]";

fn main() -> anyhow::Result<()> {
    let mut script = None;
    let mut port = 0;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value\n{USAGE}"));
        match arg.to_str() {
            Some("--script") => script = Some(PathBuf::from(value("--script")?)),
            Some("--port") => {
                let text = value("--port")?;
                let text = text.to_string_lossy();
                port = text.parse().with_context(|| format!("bad --port {text:?}"))?;
            }
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return Ok(());
            }
            _ => bail!("unexpected argument {arg:?}\n{USAGE}"),
        }
    }
    let Some(script) = script else { bail!("--script is required\n{USAGE}") };
    let script = Script::from_file(&script)?;
    let model = MockModel::start_with(script, Options { port, log_main_requests: true })?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", model.base_url())?;
    stdout.flush()?;
    drop(stdout);
    // The server runs on its own threads; this one only keeps the process alive.
    loop {
        std::thread::park();
    }
}
