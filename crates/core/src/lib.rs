//! for-loop's engine: a loop that keeps a coding agent working until the user's verify command
//! passes.
//!
//! `loop-hook` is a thin `main` over [`run`]. The engine is one folder per layer;
//! docs/architecture.md has the layers and the rules `tests/layers.rs` keeps. The decision at
//! each turn end is the pure function [`verdict::decision::decide`]; everything around it (the
//! event, the state files, the verify process, the ledger) lives in its own module.
//!
//! The library's interface is what the binary needs: [`run`], the [`Environment`] it runs in and
//! [`VERSION`]. Every module is private, so the integration tests drive the real binary and a
//! refactor inside the engine never breaks a caller; the one exception, the `fuzzing` feature's
//! facade, is built only for the fuzz targets.

mod checks;
mod cli;
mod commands;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod hook;
mod host;
mod metric;
mod provenance;
mod report;
mod run;
mod state;
mod store;
mod support;
mod verdict;
mod worktree;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::panic::{self, AssertUnwindSafe};

pub use support::environment::Environment;
pub use support::text::version::VERSION;

use cli::Cli;
use host::hook_response::HookResponse;
use support::outcome::{Code, Outcome};

/// Sets up the process as the hook needs it; `main` calls it before [`run`].
///
/// Under a file-size limit (`ulimit -f`), a write past it raises SIGXFSZ, whose default action
/// kills the process: the host would see a crashed hook. With the signal caught, the write fails
/// with `EFBIG` instead, which every writer reports like a full disk and the stop is allowed.
/// The handler does nothing, and unlike an ignored signal it is reset to the default in the
/// programs we start (verify, git), which keep their usual behaviour.
pub fn prepare_process() {
    #[cfg(unix)]
    {
        use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
        extern "C" fn write_fails_instead(_: nix::libc::c_int) {}
        let action =
            SigAction::new(SigHandler::Handler(write_fails_instead), SaFlags::SA_RESTART, SigSet::empty());
        // SAFETY: the handler does nothing, so it is async-signal-safe; it replaces only the
        // default action (termination) of a signal nothing else in the process handles.
        #[allow(unsafe_code)]
        let _ = unsafe { sigaction(Signal::SIGXFSZ, &action) };
    }
}

/// Runs `loop-hook` with `args` (program name excluded) and returns the exit code.
pub fn run(
    args: impl IntoIterator<Item = OsString>,
    env: &Environment,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    let (cli, exit_zero) = match cli::Invocation::parse(args.iter().cloned()) {
        Ok(invocation) => (invocation.cli, invocation.exit_zero),
        Err(e) => return unparsed(env, &args, &e.to_string(), stdin, stdout),
    };
    // Where a command line comes from: mutations from an agent's shell are refused on hosts
    // whose prompt hook carries out the user's own commands.
    let origin = host::origin::Origin::of_command_line(env);
    let user_command = matches!(
        cli,
        Cli::Start(_) | Cli::Cancel(_) | Cli::Status(_) | Cli::Resume(_) | Cli::Rollback(_) | Cli::Handoff(_)
    );
    let outcome = dispatch(env, cli, origin, stdin);
    let outcome =
        if user_command { support::text::version::with_version_notice(env, outcome) } else { outcome };
    let _ = write_line(stdout, &outcome.stdout);
    if exit_zero { 0 } else { outcome.code as i32 }
}

/// A command line that did not parse: a hook answers its host as if nothing were asked, since a
/// hook must never fail on its arguments (Claude Code reads exit 2 from a Stop hook as a block
/// of every stop, and any other failure as a hook error at every turn); a user is told.
fn unparsed(
    env: &Environment,
    args: &[OsString],
    e: &str,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
) -> i32 {
    match cli::Hook::named_in(args) {
        Some(cli::Hook::Stop { host }) => {
            let response = panic::catch_unwind(AssertUnwindSafe(|| {
                hook::stop_hook::misinvoked(env, host, e, &mut *stdin)
            }));
            let (host, response) =
                response.unwrap_or_else(|_| (host.unwrap_or_default(), HookResponse::allow()));
            let _ = write_line(stdout, &host.render(&response));
            0
        }
        Some(cli::Hook::Guard) => {
            eprintln!("loop-hook: guard: {e}; the tool call is not examined");
            0
        }
        // A prompt hook that exits 2 blocks the user's prompt and erases it (Claude Code).
        Some(cli::Hook::Quiet(name)) => {
            eprintln!("loop-hook: {name}: {e}; nothing is added, and the prompt goes on");
            0
        }
        // Through a plugin of another version, an option this binary does not know is the
        // version gap, not a typo: say so, and never fail the host's command for it.
        None => {
            if let Some(line) =
                support::text::version::mismatch(env, support::text::version::current_exe().as_deref())
            {
                let _ = writeln!(stdout, "{line}\n(loop-hook: {e})");
                return 0;
            }
            let _ = writeln!(stdout, "loop-hook: {e}\nRun `loop-hook --help` for usage.");
            Code::Usage as i32
        }
    }
}

/// What the command `cli` does, run from `origin`.
fn dispatch(env: &Environment, cli: Cli, origin: host::origin::Origin, stdin: &mut dyn Read) -> Outcome {
    match cli {
        Cli::Help => Outcome::ok(cli::help()),
        Cli::CommandHelp(text) => Outcome::ok(text),
        Cli::Version => Outcome::ok(support::text::version::version_text(env)),
        Cli::StopHook { host } => Outcome::ok(stop_hook_never_failing(env, host, stdin)),
        Cli::Start(options)
            if !provenance::origin::command_line_allowed(options.host.unwrap_or_default(), origin) =>
        {
            Outcome::refused(provenance::origin::refusal(
                options.host.unwrap_or_default(),
                provenance::origin::Mutation::Start,
            ))
        }
        Cli::Start(mut options) => {
            options.origin = Some(origin);
            let mut raw = Vec::new();
            match stdin.take(start_input_limit()).read_to_end(&mut raw) {
                Ok(_) => commands::start::run(env, &options, &String::from_utf8_lossy(&raw)),
                Err(e) => Outcome::refused(format!(
                    "for-loop: not started: could not read the loop text on stdin: {e}"
                )),
            }
        }
        Cli::Cancel(target) => commands::cancel::run(env, &target, origin),
        Cli::Guard => Outcome::ok(guard_never_failing(env, stdin)),
        Cli::Resume(target) => {
            match read_text(stdin).map(|text| commands::resume::ResumeOptions::parse(&text)) {
                Ok(Ok(options)) => commands::resume::run(env, &target, &options, origin),
                Ok(Err(e)) => Outcome::refused(format!("for-loop: not resumed: {e}")),
                Err(e) => Outcome::refused(format!("for-loop: could not read the options on stdin: {e}")),
            }
        }
        Cli::Rollback(target) => match read_text(stdin) {
            Ok(text) => commands::rollback::run(env, &target, &text, origin),
            Err(e) => Outcome::refused(format!("for-loop: could not read the options on stdin: {e}")),
        },
        Cli::Status(options) => {
            let mut outcome = commands::status::run(env, &options);
            if options.all {
                run::add_backlogs_to_status(env, &mut outcome.stdout, options.json);
            }
            if !options.json {
                outcome.stdout.push_str(&format!(
                    "\n{}",
                    support::text::version::describe(env, support::text::version::current_exe().as_deref())
                ));
            }
            outcome
        }
        Cli::PromptHook { host } => Outcome::ok(prompt_hook_never_failing(env, host, stdin)),
        Cli::SessionStart { host } => Outcome::ok(
            panic::catch_unwind(AssertUnwindSafe(|| hook::session_start::run(env, host, &mut *stdin)))
                .unwrap_or_default(),
        ),
        Cli::Shown { session_id, command } => hook::prompt_hook::shown(env, session_id.as_deref(), &command),
        Cli::Run(options) => run::run(env, &options),
        Cli::Doctor(options) => commands::doctor::run(env, &options),
        Cli::Strict(scope) => commands::strict::run_in(env, scope),
        Cli::Handoff(target) => commands::handoff::run(env, &target, origin),
        Cli::Report(mut options) => {
            let typed = if options.options_on_stdin { read_text(stdin).map(Some) } else { Ok(None) };
            match typed.map(|text| text.map_or(Ok(()), |text| options.add_typed(&text))) {
                Ok(Ok(())) => report::run(env, &options),
                Ok(Err(e)) => Outcome::refused(format!("for-loop: no report: {e}")),
                Err(e) => Outcome::refused(format!("for-loop: could not read the options on stdin: {e}")),
            }
        }
    }
}

/// Prints `text` as one line, or nothing when it is empty.
fn write_line(stdout: &mut dyn Write, text: &str) -> std::io::Result<()> {
    if !text.is_empty() {
        writeln!(stdout, "{text}")?;
    }
    stdout.flush()
}

/// Reads a short option text from stdin (a slash command's arguments).
fn read_text(stdin: &mut dyn Read) -> std::io::Result<String> {
    let mut raw = Vec::new();
    stdin.take(64 * 1024).read_to_end(&mut raw)?;
    Ok(String::from_utf8_lossy(&raw).into_owned())
}

/// The `PreToolUse` guard's output. Like the Stop hook it never fails: a panic lets the tool run.
fn guard_never_failing(env: &Environment, stdin: &mut dyn Read) -> String {
    panic::catch_unwind(AssertUnwindSafe(|| hook::guard::run(env, stdin))).unwrap_or_default()
}

/// The prompt hook's output. A panic lets the prompt through unchanged.
fn prompt_hook_never_failing(env: &Environment, host: host::Host, stdin: &mut dyn Read) -> String {
    panic::catch_unwind(AssertUnwindSafe(|| hook::prompt_hook::run(env, host, stdin))).unwrap_or_default()
}

/// Lets the task-size check report an oversized task instead of reading without end.
fn start_input_limit() -> u64 {
    commands::request::MAX_TASK_BYTES as u64 * 2
}

/// The Stop hook's output. A panic anywhere below is caught and turned into an allowed stop with
/// a message, never a crash the host would show as a hook error or read as a block.
fn stop_hook_never_failing(env: &Environment, host: host::Host, stdin: &mut dyn Read) -> String {
    let result = panic::catch_unwind(AssertUnwindSafe(|| hook::stop_hook::run(env, host, stdin)));
    let response = result.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(std::string::ToString::to_string)
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        HookResponse::allow_with(format!(
            "for-loop: internal error ({what}); this stop is allowed. Please report it with `loop-hook --version`."
        ))
    });
    host.render(&response)
}
