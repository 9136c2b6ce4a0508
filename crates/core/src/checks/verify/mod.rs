//! Running the user's verify command: through the platform shell, in the loop's directory, with
//! stdin closed, its output captured in bounded memory, and a deadline after which its whole
//! process group is killed (a shell's grandchildren would otherwise hold the output pipe open and
//! keep the hook waiting past the host's own timeout).

mod capture;
mod namespace;
mod supervisor;

pub(crate) use capture::Captured;
pub(crate) use namespace::Containment;
pub(crate) use supervisor::Untrusted;
#[cfg(unix)]
pub(crate) use supervisor::{Supervised, command};

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use thiserror::Error;

/// How long a process group gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long output is still read once verify has exited: what it wrote is in the pipe by then.
/// A process that left verify's group (setsid) can hold the pipe open for ever and write into it
/// later (a passing summary, a better `METRIC` line): output that counts ends with the command.
const OUTPUT_GRACE: Duration = Duration::from_millis(200);

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct VerifySpec {
    pub command: String,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// A sandbox to run the shell in (strict mode): its program and arguments, ending in `--`.
    pub sandbox: Vec<std::ffi::OsString>,
}

/// What a command gets besides its command line: bytes on its stdin (closed when empty) and
/// variables added to its environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommandInput {
    pub stdin: Vec<u8>,
    pub env: Vec<(&'static str, String)>,
}

/// How a verify run ended.
#[derive(Debug, Clone)]
pub(crate) struct VerifyOutcome {
    /// The exit code; `None` when killed by a signal or on timeout.
    pub exit_code: Option<i32>,
    /// The signal that ended it, on Unix.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Why the exit status reported for a detached command cannot be trusted: never a pass.
    pub untrusted: Option<Untrusted>,
    pub duration: Duration,
    /// stdout and stderr interleaved as the command wrote them.
    pub output: Captured,
}

#[cfg(test)]
impl VerifyOutcome {
    /// A run of a command that exited with `exit` after a second, having printed `output`.
    pub(crate) fn exited(exit: i32, output: &str) -> VerifyOutcome {
        let mut captured = Captured::default();
        captured.push(output.as_bytes());
        VerifyOutcome {
            exit_code: Some(exit),
            signal: None,
            timed_out: false,
            untrusted: None,
            duration: Duration::from_secs(1),
            output: captured,
        }
    }
}

impl VerifyOutcome {
    pub(crate) fn passed(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && self.untrusted.is_none()
    }

    /// `exit 1`, `timed out`, `killed by signal 9`.
    pub(crate) fn describe(&self) -> String {
        if let Some(why) = &self.untrusted {
            return format!("no exit status to trust: {}", why.words());
        }
        match (self.timed_out, self.exit_code, self.signal) {
            (true, _, _) => "timed out".to_string(),
            (false, Some(code), Some(signal)) => {
                format!("exit {code}, which a shell reports for a command killed by signal {signal}")
            }
            (false, Some(code), _) => format!("exit {code}"),
            (false, None, Some(signal)) => format!("killed by signal {signal}"),
            (false, None, None) => "ended without an exit code".to_string(),
        }
    }
}

/// Prefixes of the variables hosts and for-loop set for their hooks. Verify, the metric command
/// and its guard run without them, as the user's own shell would run them: code under test that
/// looks for `CLAUDE_PLUGIN_ROOT`, `CLAUDECODE` or the store's `FOR_LOOP_HOME` cannot tell that
/// it is being judged, and pass only then.
const HOOK_VARIABLE_PREFIXES: &[&str] =
    &["CLAUDE", "GEMINI_", "CODEX_", "COPILOT_", "CURSOR_", "ANTIGRAVITY_", "FOR_LOOP_"];

/// The variable that names (comma-separated) the hook variables a check needs on purpose, kept.
const KEEP_VARIABLE: &str = "FOR_LOOP_KEEP_ENV";

/// The names among `vars` that a judged command runs without: the hooks' own variables, less
/// those the user keeps with [`KEEP_VARIABLE`].
fn hook_variables(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<OsString> {
    let vars: Vec<(OsString, OsString)> = vars.into_iter().collect();
    let kept: Vec<String> = vars
        .iter()
        .find(|(name, _)| name == KEEP_VARIABLE)
        .map(|(_, value)| value.to_string_lossy().split(',').map(|n| n.trim().to_string()).collect())
        .unwrap_or_default();
    vars.into_iter()
        .map(|(name, _)| name)
        .filter(|name| {
            let text = name.to_string_lossy();
            HOOK_VARIABLE_PREFIXES.iter().any(|prefix| text.starts_with(prefix))
                && !kept.iter().any(|keep| *keep == text)
        })
        .collect()
}

/// Verify could not be run at all: a fault to report, not a failed check.
#[derive(Debug, Error)]
pub(crate) enum VerifyError {
    #[error("the loop's directory {0} no longer exists; verify cannot run there")]
    MissingCwd(PathBuf),
    #[error("could not start the shell to run verify: {0}")]
    Spawn(io::Error),
}

impl VerifySpec {
    /// Runs the command to completion or to its deadline, with stdin closed.
    pub(crate) fn run(&self) -> Result<VerifyOutcome, VerifyError> {
        self.run_with(&CommandInput::default())
    }

    /// Runs the command with `input` to completion or to its deadline.
    pub(crate) fn run_with(&self, input: &CommandInput) -> Result<VerifyOutcome, VerifyError> {
        self.run_line(&self.command, input)
    }

    /// Runs the command with `input`, as before output had to end with it: a command whose
    /// output is not judged (a notification) runs in no namespace of ours, and what it leaves
    /// behind is cut off after a grace.
    pub(crate) fn run_unjudged(&self, input: &CommandInput) -> Result<VerifyOutcome, VerifyError> {
        self.run_contained(&self.command, input, Containment::Grace)
    }

    /// Runs `program` (its own command line, not `command`) as the command would run: in its
    /// directory and sandbox, environment, deadline and process group, detached from the hook.
    /// Its words are quoted for the shell that runs every judged command, the supervisor's.
    pub(crate) fn run_program(
        &self,
        program: &Command,
        input: &CommandInput,
    ) -> Result<VerifyOutcome, VerifyError> {
        let words = std::iter::once(program.get_program()).chain(program.get_args());
        let line = shell_words::join(words.map(|word| word.to_string_lossy()));
        self.run_line(&line, input)
    }

    /// Runs the shell command line `line` with `input` to completion or to its deadline.
    fn run_line(&self, line: &str, input: &CommandInput) -> Result<VerifyOutcome, VerifyError> {
        // A sandbox runs the command as a child of ours, and Windows has neither.
        let containment = if self.sandbox.is_empty() && cfg!(unix) {
            Containment::first_tried()
        } else {
            Containment::Grace
        };
        self.run_contained(line, input, containment)
    }

    /// [`VerifySpec::run_line`], its descendants kept from writing after its exit as `containment`
    /// says.
    fn run_contained(
        &self,
        line: &str,
        input: &CommandInput,
        containment: Containment,
    ) -> Result<VerifyOutcome, VerifyError> {
        if !self.cwd.is_dir() {
            return Err(VerifyError::MissingCwd(self.cwd.clone()));
        }
        let started = Instant::now();
        let (reader, writer) = io::pipe().map_err(VerifyError::Spawn)?;
        let (mut running, reader, containment) = match self.start(line, input, writer, containment) {
            Ok(running) => (running, reader, containment),
            // No namespace could be entered here (user namespaces off or restricted, `/proc`
            // not mountable, a limit on their number): the subreaper still ends the output with
            // the command.
            Err(_) if containment == Containment::Namespace => {
                let containment = Containment::namespace_failed();
                let (reader, writer) = io::pipe().map_err(VerifyError::Spawn)?;
                let running = self.start(line, input, writer, containment).map_err(VerifyError::Spawn)?;
                (running, reader, containment)
            }
            Err(error) => return Err(VerifyError::Spawn(error)),
        };
        let output = OutputReader::start(reader).map_err(VerifyError::Spawn)?;
        let group = running.group();
        let mut timed_out = false;
        let mut ended = running.wait_until(started + self.timeout);
        if ended.is_none() {
            timed_out = true;
            platform::terminate_group(group);
            ended = running.wait_until(Instant::now() + KILL_GRACE);
            if ended.is_none() {
                platform::kill_group(group);
                ended = running.wait_until(Instant::now() + KILL_GRACE);
            }
        }
        // Whatever verify left running in its group is an orphan of the check: end it, so it
        // cannot hold the output pipe or outlive the loop.
        platform::kill_group(group);
        let ended = running.finish(ended, OUTPUT_GRACE);
        let duration = started.elapsed();
        #[cfg(unix)]
        let (mut output, held) = match containment {
            Containment::Grace => (output.finish(OUTPUT_GRACE), false),
            _ => output.finish_at_exit(timed_out),
        };
        // Elsewhere the grace is the only way there is.
        #[cfg(not(unix))]
        let (mut output, held) = (output.finish(OUTPUT_GRACE), false);
        output.ended_by(containment);
        // A shell killed on the timeout ends without a status: that is the timeout's doing. So is
        // a descendant a subreaper killed on the timeout could not find any more.
        let untrusted = ended.untrusted.filter(|why| !(timed_out && *why == Untrusted::NoStatus));
        let held = (held && !timed_out).then_some(Untrusted::OutputHeld);
        Ok(VerifyOutcome {
            exit_code: if timed_out { None } else { ended.code },
            signal: ended.signal,
            timed_out,
            untrusted: untrusted.or(held),
            duration,
            output,
        })
    }

    /// Starts the command, its stdout and stderr into `output`: detached from the hook under a
    /// supervisor on Unix ([`crate::checks::verify`]), a child of ours in a sandbox (which
    /// gives it a PID namespace of its own) and on Windows.
    #[cfg_attr(not(unix), allow(unused_variables))]
    fn start(
        &self,
        line: &str,
        input: &CommandInput,
        output: io::PipeWriter,
        containment: Containment,
    ) -> io::Result<Running> {
        let mut command = match self.sandbox.split_first() {
            Some((program, args)) => {
                let shell = shell_command(line);
                let mut wrapped = Command::new(program);
                wrapped.args(args).arg(shell.get_program()).args(shell.get_args());
                wrapped
            }
            #[cfg(unix)]
            None => crate::checks::verify::command(line, !input.stdin.is_empty()),
            #[cfg(not(unix))]
            None => shell_command(line),
        };
        command.current_dir(&self.cwd).stdout(output.try_clone()?).stderr(output);
        for name in hook_variables(std::env::vars_os()) {
            command.env_remove(name);
        }
        command.envs(input.env.iter().map(|(name, value)| (name, value)));
        #[cfg(unix)]
        if self.sandbox.is_empty() {
            let supervised = crate::checks::verify::Supervised::spawn(command, &input.stdin, containment)?;
            return Ok(Running::Supervised(supervised));
        }
        command.stdin(if input.stdin.is_empty() { Stdio::null() } else { Stdio::piped() });
        platform::own_group(&mut command);
        let mut child = command.spawn()?;
        if let Some(mut pipe) = child.stdin.take() {
            // A command that never reads its stdin must not hold us up: the write waits in its
            // own thread, and fails once the command's group is gone.
            let bytes = input.stdin.clone();
            thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            });
        }
        // The command holds our copies of the pipe's write end: drop it, or EOF never comes.
        drop(command);
        let pid = child.id();
        let (status_tx, status_rx) = mpsc::channel();
        thread::spawn(move || wait_into(child, &status_tx));
        Ok(Running::Child { pid, status: status_rx })
    }
}

/// A started command, and how its end is learnt.
enum Running {
    /// A child of ours: the kernel hands us its exit status.
    Child { pid: u32, status: mpsc::Receiver<Option<ExitStatus>> },
    /// Under a detached supervisor, which reports the status.
    #[cfg(unix)]
    Supervised(crate::checks::verify::Supervised),
}

/// How a command ended, as far as it is known.
#[derive(Debug, Default)]
struct Ended {
    code: Option<i32>,
    signal: Option<i32>,
    untrusted: Option<Untrusted>,
}

impl Running {
    /// The process group that holds the command and what it started.
    fn group(&self) -> u32 {
        match self {
            Running::Child { pid, .. } => *pid,
            #[cfg(unix)]
            Running::Supervised(supervised) => supervised.group(),
        }
    }

    /// How the command ended, or `None` if `deadline` came first.
    fn wait_until(&mut self, deadline: Instant) -> Option<Ended> {
        match self {
            Running::Child { status, .. } => {
                match status.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(status) => Some(Ended {
                        code: status.and_then(|s| s.code()),
                        signal: status.and_then(platform::signal_of),
                        untrusted: None,
                    }),
                    Err(mpsc::RecvTimeoutError::Disconnected) => Some(Ended::default()),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                }
            }
            #[cfg(unix)]
            Running::Supervised(supervised) => supervised.wait_until(deadline).map(Ended::reported),
        }
    }

    /// The end once the group is killed: a supervisor's report is read for `grace` more, in
    /// case a second status comes in.
    #[cfg_attr(not(unix), allow(unused_variables))]
    fn finish(self, ended: Option<Ended>, grace: Duration) -> Ended {
        match self {
            Running::Child { .. } => ended.unwrap_or_default(),
            #[cfg(unix)]
            Running::Supervised(supervised) => {
                let reported = supervised.finish(grace).map(Ended::reported);
                reported.or(ended).unwrap_or_default()
            }
        }
    }
}

impl Ended {
    /// What a supervisor reported: a shell's exit code, which is 128 + N for a command killed
    /// by signal N.
    #[cfg(unix)]
    fn reported(report: Result<i32, Untrusted>) -> Ended {
        match report {
            Ok(code) => Ended {
                code: Some(code),
                signal: (129..=192).contains(&code).then_some(code - 128),
                untrusted: None,
            },
            Err(why) => Ended { untrusted: Some(why), ..Ended::default() },
        }
    }
}

/// The output pipe, read to its end in a thread of its own, and cut where the command's output
/// stops counting.
struct OutputReader {
    shared: Arc<Mutex<ReadSoFar>>,
    done: mpsc::Receiver<()>,
    /// The pipe's read end, to ask whether anything still holds its write end.
    #[cfg(unix)]
    pipe: std::os::fd::OwnedFd,
}

/// What the reading thread has read, and whether it is still wanted.
#[derive(Default)]
struct ReadSoFar {
    captured: Captured,
    /// Set when the command's output stopped counting: later bytes are dropped unread.
    cut: bool,
    failed: bool,
    /// How many more bytes count, once the output was held open past the command's end.
    budget: Option<usize>,
}

impl OutputReader {
    fn start(mut reader: io::PipeReader) -> io::Result<OutputReader> {
        #[cfg(unix)]
        let pipe = std::os::fd::AsFd::as_fd(&reader).try_clone_to_owned()?;
        let shared = Arc::new(Mutex::new(ReadSoFar::default()));
        let (done_tx, done) = mpsc::channel();
        let writer = Arc::clone(&shared);
        thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match io::Read::read(&mut reader, &mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        writer.lock().map(|mut read| read.failed = true).ok();
                        break;
                    }
                };
                let Ok(mut read) = writer.lock() else { break };
                if read.cut {
                    break;
                }
                let n = read.budget.map_or(n, |budget| n.min(budget));
                read.captured.push(&buf[..n]);
                if let Some(budget) = read.budget.as_mut() {
                    *budget -= n;
                    if *budget == 0 {
                        break;
                    }
                }
            }
            let _ = done_tx.send(());
        });
        Ok(OutputReader {
            shared,
            done,
            #[cfg(unix)]
            pipe,
        })
    }

    /// What was written before the command, and everything it started, ended: all of it when
    /// nothing holds the pipe open any more (it is all in the pipe by then, and no grace is
    /// waited); otherwise only what is in the pipe now, and `true`: a process outside the
    /// command's tree holds it. After a timeout the kill is given a moment to finish.
    #[cfg(unix)]
    fn finish_at_exit(self, timed_out: bool) -> (Captured, bool) {
        let settle = Instant::now() + if timed_out { KILL_GRACE } else { Duration::ZERO };
        let mut held = !closed(&self.pipe);
        while held && Instant::now() < settle {
            thread::sleep(Duration::from_millis(5));
            held = !closed(&self.pipe);
        }
        if !held {
            // Every byte is in the pipe and its end is near: this waits only for the reading.
            return (self.finish(READ_TO_END), false);
        }
        if let Ok(mut read) = self.shared.lock() {
            // Bytes the reading thread has taken off the pipe but not yet added count against
            // this: some written before the exit may be left out, none written after is read.
            read.budget = Some(waiting(&self.pipe));
        }
        let mut captured = self.finish(HELD_READ);
        captured.note(b"[for-loop: the check's output was held open after it ended; nothing written after that was read]\n");
        (captured, true)
    }

    /// What was read by the end of the pipe, or by `grace` from now, whichever comes first: a
    /// pipe still open then is held by a process the command left behind, and nothing it writes
    /// from then on is read. The captured output says so.
    fn finish(self, grace: Duration) -> Captured {
        let ended = self.done.recv_timeout(grace).is_ok();
        let Ok(mut read) = self.shared.lock() else {
            let mut partial = Captured::default();
            partial.note(b"[for-loop: the output could not be read to its end]\n");
            return partial;
        };
        read.cut = true;
        let mut captured = std::mem::take(&mut read.captured);
        if read.failed {
            captured.note(b"[for-loop: the output could not be read to its end]\n");
        } else if !ended {
            captured.mark_cut_at_exit();
        }
        captured
    }
}

/// How long the reading of a pipe nothing writes to any more may take: it is all there.
#[cfg(unix)]
const READ_TO_END: Duration = Duration::from_secs(5);
/// How long the bytes in a pipe still held open get to be read: they are there already.
#[cfg(unix)]
const HELD_READ: Duration = Duration::from_millis(100);

/// Whether every write end of the pipe whose read end is `pipe` is closed.
#[cfg(unix)]
#[allow(unsafe_code)]
fn closed(pipe: &std::os::fd::OwnedFd) -> bool {
    use nix::libc;
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: pipe.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd, valid for the call; no waiting.
    let ready = unsafe { libc::poll(&raw mut fd, 1, 0) };
    ready > 0 && fd.revents & libc::POLLHUP != 0
}

/// How many bytes are in the pipe whose read end is `pipe`, not yet read.
#[cfg(unix)]
#[allow(unsafe_code)]
fn waiting(pipe: &std::os::fd::OwnedFd) -> usize {
    use std::os::fd::AsRawFd;
    let mut count: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through a pointer to one.
    let ok = unsafe { nix::libc::ioctl(pipe.as_raw_fd(), nix::libc::FIONREAD, &raw mut count) } == 0;
    if ok { usize::try_from(count).unwrap_or(0) } else { 0 }
}

fn wait_into(mut child: Child, tx: &mpsc::Sender<Option<ExitStatus>>) {
    let _ = tx.send(child.wait().ok());
}

#[cfg(unix)]
fn shell_command(command: &str) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(command);
    cmd
}

#[cfg(windows)]
fn shell_command(command: &str) -> Command {
    use std::os::windows::process::CommandExt;
    let mut cmd = Command::new("cmd.exe");
    cmd.arg("/D").arg("/S").arg("/C").raw_arg(format!("\"{command}\""));
    cmd
}

#[cfg(unix)]
mod platform {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, ExitStatus};

    pub(super) fn own_group(command: &mut Command) {
        command.process_group(0);
    }

    pub(super) fn terminate_group(pid: u32) {
        let _ = killpg(group(pid), Signal::SIGTERM);
    }

    pub(super) fn kill_group(pid: u32) {
        let _ = killpg(group(pid), Signal::SIGKILL);
    }

    pub(super) fn signal_of(status: ExitStatus) -> Option<i32> {
        status.signal()
    }

    /// The process group a child leads: its pid, which the kernel keeps below `i32::MAX`.
    fn group(pid: u32) -> Pid {
        Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
    }
}

#[cfg(windows)]
mod platform {
    use std::process::{Command, ExitStatus};

    // Windows has no process groups to signal; the shell is killed through taskkill's tree mode.
    pub(super) fn own_group(_command: &mut Command) {}

    pub(super) fn terminate_group(pid: u32) {
        kill_group(pid);
    }

    pub(super) fn kill_group(pid: u32) {
        let _ = Command::new("taskkill").args(["/T", "/F", "/PID", &pid.to_string()]).output();
    }

    pub(super) fn signal_of(_status: ExitStatus) -> Option<i32> {
        None
    }
}

/// `command` run in the temporary directory with `timeout_ms`, as the tests of both platforms
/// run it.
#[cfg(test)]
fn run_for_test(command: &str, timeout_ms: u64) -> VerifyOutcome {
    VerifySpec {
        command: command.into(),
        cwd: std::env::temp_dir(),
        timeout: Duration::from_millis(timeout_ms),
        sandbox: Vec::new(),
    }
    .run()
    .unwrap()
}

#[cfg(all(test, unix))]
mod tests {
    use super::run_for_test as run;
    use super::*;

    #[test]
    fn judged_commands_run_without_the_hooks_variables_unless_kept() {
        let vars = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs.iter().map(|(n, v)| (OsString::from(n), OsString::from(v))).collect()
        };
        let removed = hook_variables(vars(&[
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("CLAUDECODE", "1"),
            ("CLAUDE_PLUGIN_ROOT", "/p"),
            ("GEMINI_CLI", "1"),
            ("CODEX_THREAD_ID", "t"),
            ("COPILOT_AGENT_SESSION_ID", "s"),
            ("FOR_LOOP_HOME", "/store"),
            ("FOR_LOOP_BIN_SOURCE", "cargo"),
            ("MY_CLAUDE", "kept: not a prefix"),
        ]));
        let names: Vec<&str> = removed.iter().filter_map(|n| n.to_str()).collect();
        assert_eq!(
            names,
            [
                "CLAUDECODE",
                "CLAUDE_PLUGIN_ROOT",
                "GEMINI_CLI",
                "CODEX_THREAD_ID",
                "COPILOT_AGENT_SESSION_ID",
                "FOR_LOOP_HOME",
                "FOR_LOOP_BIN_SOURCE"
            ]
        );
        let kept = hook_variables(vars(&[
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("GEMINI_API_KEY", "k"),
            ("FOR_LOOP_KEEP_ENV", "GEMINI_API_KEY, CLAUDE_CONFIG_DIR"),
        ]));
        assert_eq!(kept, [OsString::from("FOR_LOOP_KEEP_ENV")]);
    }

    #[test]
    #[cfg(unix)]
    fn a_judged_command_still_gets_the_variables_it_is_handed() {
        let dir = tempfile::tempdir().unwrap();
        let spec = VerifySpec {
            command: "env".into(),
            cwd: dir.path().to_path_buf(),
            timeout: Duration::from_secs(10),
            sandbox: Vec::new(),
        };
        // Removing the hooks' variables must not take the ones for-loop hands a command (a
        // notification's summary); the removal itself is tested through the binary.
        let input = CommandInput { env: vec![("FOR_LOOP_SUMMARY", "s".into())], ..CommandInput::default() };
        let outcome = spec.run_with(&input).unwrap();
        let output = outcome.output.excerpt(100_000);
        assert!(output.contains("FOR_LOOP_SUMMARY=s"), "{output}");
    }

    #[test]
    fn passing_and_failing_commands() {
        let ok = run("true", 10_000);
        assert!(ok.passed());
        assert_eq!(ok.describe(), "exit 0");
        let failed = run("echo out; echo err >&2; exit 3", 10_000);
        assert!(!failed.passed());
        assert_eq!(failed.exit_code, Some(3));
        assert_eq!(failed.output.excerpt(1_000), "out\nerr\n");
    }

    #[test]
    fn stdin_is_closed() {
        let outcome = run("cat; echo end", 10_000);
        assert_eq!(outcome.output.excerpt(100), "end\n");
    }

    #[test]
    fn runs_in_the_given_directory() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = VerifySpec {
            command: "pwd".into(),
            cwd: dir.path().into(),
            timeout: Duration::from_secs(10),
            sandbox: Vec::new(),
        }
        .run()
        .unwrap();
        let printed = std::fs::canonicalize(outcome.output.excerpt(1_000).trim()).unwrap();
        assert_eq!(printed, std::fs::canonicalize(dir.path()).unwrap());
    }

    #[test]
    fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild-survived");
        let command = format!("(sleep 3; touch '{}') & sleep 30", marker.display());
        let started = Instant::now();
        let outcome = run(&command, 300);
        assert!(outcome.timed_out);
        assert_eq!(outcome.exit_code, None);
        assert_eq!(outcome.describe(), "timed out");
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
        thread::sleep(Duration::from_millis(3_500));
        assert!(!marker.exists(), "a grandchild outlived the timeout");
    }

    /// `command` run as [`run`] runs it, its descendants kept from writing after its exit as
    /// `containment` says.
    fn run_in(command: &str, timeout_ms: u64, containment: Containment) -> VerifyOutcome {
        VerifySpec {
            command: command.into(),
            cwd: std::env::temp_dir(),
            timeout: Duration::from_millis(timeout_ms),
            sandbox: Vec::new(),
        }
        .run_contained(command, &CommandInput::default(), containment)
        .unwrap()
    }

    /// The ways this system has to end a command's output at its exit: the subreaper on Linux,
    /// and the namespace where it works.
    fn contained() -> Vec<Containment> {
        let mut all = vec![Containment::Subreaper];
        if Containment::probed() == Containment::Namespace {
            all.push(Containment::Namespace);
        }
        all
    }

    #[test]
    fn output_written_after_the_command_exited_is_not_read_and_that_is_said() {
        let started = Instant::now();
        // It waits until the process is out of its group, which its exit would otherwise kill.
        let outcome = run_in(
            "m=$(mktemp -u); echo early; setsid sh -c \"touch $m; sleep 0.6; echo late\" & \
             while [ ! -e $m ]; do sleep 0.02; done; rm -f $m; echo done",
            10_000,
            Containment::Grace,
        );
        assert!(started.elapsed() < Duration::from_millis(600), "{:?}", started.elapsed());
        let output = outcome.output.excerpt(10_000);
        assert!(output.starts_with("early\ndone\n"), "{output}");
        assert!(!output.contains("late\n"), "{output}");
        assert!(output.contains("output written after the check exited was not read"), "{output}");
        assert!(outcome.output.cut_at_exit());
        let whole = run_in("echo one; (sleep 0.1; echo two) ; echo three", 10_000, Containment::Grace);
        assert!(!whole.output.cut_at_exit());
        assert_eq!(whole.output.excerpt(1_000), "one\ntwo\nthree\n");
    }

    /// What a command leaves behind, however it leaves it (a new session, a double fork), that
    /// writes a passing summary and a better metric after the command's exit, is gone before the
    /// output is read, and nothing of it is read. Nothing waits for a grace. In a namespace it may
    /// poll for the exit as fast as it likes; a subreaper's kill comes a moment after the exit,
    /// which a poller can race, so there it writes a little later.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_descendant_that_writes_after_the_exit_is_gone_and_not_read() {
        let dir = tempfile::tempdir().unwrap();
        for containment in contained() {
            let later = if containment == Containment::Namespace { "" } else { "sleep 0.3; " };
            let forge = format!(
                "while kill -0 $P 2>/dev/null; do sleep 0.005; done; {later}\
                 echo \"test result: ok. 999 passed; 0 failed\"; echo \"METRIC ms=1\"; touch ALIVE"
            );
            for (how, leave) in [
                ("setsid", format!("setsid sh -c '{forge}' &")),
                ("double fork", format!("(sh -c '{forge}' &);")),
            ] {
                let alive = dir.path().join("ALIVE");
                let command = format!(
                    "cd '{}'; export P=$$; {leave} sleep 0.1; echo 'METRIC ms=324'",
                    dir.path().display()
                );
                let started = Instant::now();
                let outcome = run_in(&command, 10_000, containment);
                let output = outcome.output.excerpt(10_000);
                assert!(outcome.passed(), "{containment:?} {how}: {} {output}", outcome.describe());
                assert_eq!(output, "METRIC ms=324\n", "{containment:?} {how}");
                assert!(!outcome.output.cut_at_exit(), "{containment:?} {how}");
                assert_eq!(outcome.output.containment(), containment);
                assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
                thread::sleep(Duration::from_millis(300));
                assert!(!alive.exists(), "{containment:?} {how}: the descendant outlived the command");
            }
        }
    }

    /// The issue's own shape: the check is one plain command (`sh bench.sh`), and what the code
    /// under test leaves watches that command, its parent, without pause. The command is
    /// `exec`ed, so it is the namespace's first process, and nothing is left to write once it
    /// has gone; run as a child of the shell, its poller was read in most runs.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_poller_on_a_plain_command_writes_nothing_after_its_exit() {
        if Containment::probed() != Containment::Namespace {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("prog.sh"),
            "p=$PPID\nsetsid sh -c \"while kill -0 $p 2>/dev/null; do :; done; echo 'METRIC ms=1' >&2\" &\n",
        )
        .unwrap();
        let bench = format!("echo 'METRIC ms=324'\nsh {}/prog.sh\nsleep 0.05\n", dir.path().display());
        std::fs::write(dir.path().join("bench.sh"), bench).unwrap();
        for run in 0..8 {
            let command = format!("sh {}/bench.sh", dir.path().display());
            let outcome = run_in(&command, 10_000, Containment::Namespace);
            let output = outcome.output.excerpt(10_000);
            assert_eq!(output, "METRIC ms=324\n", "run {run}: {}", outcome.describe());
        }
    }

    #[test]
    fn one_plain_command_is_execed_and_anything_else_is_left_as_it_is() {
        use super::supervisor::execed;
        assert_eq!(execed("sh bench.sh"), "exec sh bench.sh");
        assert_eq!(execed("  cargo test --features=x -- login "), "exec cargo test --features=x -- login");
        for left in [
            "cargo build && cargo test",
            "npm test; echo done",
            "FOO=1 cargo test",
            "exit 1",
            "test -f done.txt",
            "true",
            "echo ok",
            "cd sub && make",
            "test -f \"a b\"",
            "echo $HOME",
            "pytest > out.txt",
            "ls *.rs",
            "a | b",
            "-x",
            "",
        ] {
            assert_eq!(execed(left), left, "{left}");
        }
    }

    /// A process outside the command's tree that was handed its output (here over a socket, as
    /// a daemon left by an earlier run would be) can write after the exit: its line is not
    /// read, and the run is never a pass.
    #[test]
    #[cfg(target_os = "linux")]
    fn output_passed_out_of_the_check_is_told_and_never_a_pass() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("daemon.sock");
        let daemon = "import socket, sys, time, os\n\
                      s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)\n\
                      while True:\n    c, _ = s.accept(); _, fds, _, _ = socket.recv_fds(c, 1, 1)\n    \
                      time.sleep(0.3); os.write(fds[0], b'METRIC ms=1\\n'); time.sleep(0.5); os.close(fds[0])\n";
        let mut holder = Command::new("python3").arg("-c").arg(daemon).arg(&socket).spawn().unwrap();
        while !socket.exists() {
            thread::sleep(Duration::from_millis(10));
        }
        let pass = format!(
            "python3 -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); \
             socket.send_fds(s, [b'x'], [1])\" '{}'; echo 'METRIC ms=324'",
            socket.display()
        );
        for containment in contained() {
            let outcome = run_in(&pass, 10_000, containment);
            let output = outcome.output.excerpt(10_000);
            assert_eq!(outcome.untrusted, Some(Untrusted::OutputHeld), "{containment:?}: {output}");
            assert!(!outcome.passed());
            assert!(output.starts_with("METRIC ms=324\n"), "{output}");
            assert!(!output.contains("ms=1\n"), "{output}");
            assert!(outcome.describe().contains("still held open"), "{}", outcome.describe());
        }
        holder.kill().unwrap();
        holder.wait().unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_timeout_kills_what_left_the_group_too() {
        let dir = tempfile::tempdir().unwrap();
        for containment in contained() {
            let marker = dir.path().join(format!("{containment:?}"));
            let command = format!("setsid sh -c 'sleep 1; touch {}' & sleep 30", marker.display());
            let started = Instant::now();
            let outcome = run_in(&command, 300, containment);
            assert!(outcome.timed_out, "{containment:?}");
            assert_eq!(outcome.untrusted, None, "{containment:?}");
            assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
            thread::sleep(Duration::from_millis(1_500));
            assert!(!marker.exists(), "{containment:?}: a descendant outlived the timeout");
        }
    }

    /// As the first process of a namespace, the command is not ended by a signal from inside
    /// unless it handles it: a `trap` still runs, and a check that ignores the timeout's SIGTERM
    /// is killed from outside.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_trap_still_runs_and_an_ignored_term_still_times_out() {
        if Containment::probed() != Containment::Namespace {
            return;
        }
        let trapped = run_in(
            "trap 'echo trapped; exit 3' TERM; kill -TERM $$; sleep 5",
            10_000,
            Containment::Namespace,
        );
        assert_eq!(trapped.exit_code, Some(3));
        assert_eq!(trapped.output.excerpt(100), "trapped\n");
        let started = Instant::now();
        let stubborn = run_in("trap '' TERM; sleep 30", 200, Containment::Namespace);
        assert!(stubborn.timed_out);
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }

    /// In a namespace `pidfd_open` fails as on a kernel without it, for the command and all it
    /// starts: a descendant that would be woken by a pidfd when a program the command runs
    /// exits, while the command's shell still runs, cannot get one. This waiter is told of the
    /// exit only through the pidfd, so without one it never writes its line.
    #[test]
    #[cfg(target_os = "linux")]
    fn in_a_namespace_a_pidfd_on_the_command_cannot_be_opened() {
        if Containment::probed() != Containment::Namespace {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let waiter = "import os, select\n\
                      try:\n    fd = os.pidfd_open(1)\n\
                      except OSError as e:\n    print('no pidfd: errno', e.errno, flush=True)\n\
                      open('READY', 'w').close()\n\
                      if 'fd' in dir():\n    select.select([fd], [], [])\n    \
                      print('METRIC ms=1', flush=True); open('ALIVE', 'w').close()\n";
        std::fs::write(dir.path().join("waiter.py"), waiter).unwrap();
        let command = format!(
            "cd '{}'; python3 -c 'import os; os.pidfd_open(1)' 2>&1 | tail -n 1; \
             setsid python3 waiter.py & while [ ! -e READY ]; do sleep 0.01; done; echo 'METRIC ms=324'",
            dir.path().display()
        );
        let outcome = run_in(&command, 10_000, Containment::Namespace);
        let output = outcome.output.excerpt(10_000);
        assert!(outcome.passed(), "{} {output}", outcome.describe());
        assert_eq!(
            output,
            "OSError: [Errno 38] Function not implemented\nno pidfd: errno 38\nMETRIC ms=324\n"
        );
        thread::sleep(Duration::from_millis(300));
        assert!(!dir.path().join("ALIVE").exists(), "the waiter outlived the command");
    }

    /// A subreaper gets no filter: `no_new_privs` would keep `sudo` from working in a check.
    #[test]
    #[cfg(target_os = "linux")]
    fn with_a_subreaper_pidfd_open_and_setuid_are_left_alone() {
        let outcome = run_in(
            "python3 -c 'import os; os.close(os.pidfd_open(os.getpid())); print(\"opened\")'; \
             grep NoNewPrivs /proc/self/status",
            10_000,
            Containment::Subreaper,
        );
        assert_eq!(outcome.output.excerpt(1_000), "opened\nNoNewPrivs:\t0\n");
    }

    /// Inside its namespace the command sees its own processes in `/proc`, itself first, and
    /// runs as the same user.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_namespace_has_a_proc_of_its_own() {
        if Containment::probed() != Containment::Namespace {
            return;
        }
        let outcome = run_in("test -d /proc/$$ && echo $$ && id -u", 10_000, Containment::Namespace);
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
        assert_eq!(outcome.output.excerpt(100), format!("1\n{uid}\n"));
    }

    /// The command's parent processes, walked up to init: the test process (in the hook's place)
    /// is not among them, so code that looks for its judge there does not find it.
    #[test]
    fn the_command_runs_detached_from_the_process_that_judges_it() {
        let walk = "p=$$; echo $p; while [ \"$p\" -gt 1 ]; do p=$(ps -o ppid= -p \"$p\" | tr -d ' '); echo \"$p\"; done";
        for containment in [Containment::probed(), Containment::Grace] {
            let outcome = run_in(walk, 10_000, containment);
            assert!(outcome.passed(), "{}", outcome.output.excerpt(1_000));
            let chain = outcome.output.excerpt(10_000);
            let ours = std::process::id().to_string();
            assert!(chain.lines().count() >= 1, "{chain}");
            assert!(!chain.lines().any(|pid| pid == ours), "the judge {ours} is an ancestor: {chain}");
        }
    }

    /// The command's own shell is the first process of its namespace where there is one, which a
    /// signal it sends itself does not end: what ends by a signal is what it runs.
    #[test]
    fn a_command_killed_by_a_signal_says_so() {
        let outcome = run("sleep 5 & kill -9 $!; wait $!", 10_000);
        assert_eq!((outcome.exit_code, outcome.signal), (Some(137), Some(9)));
        assert!(outcome.describe().contains("killed by signal 9"), "{}", outcome.describe());
        assert!(!outcome.passed());
    }

    /// The supervisor is the command's parent: its status channel is a socket, which cannot be
    /// opened through `/proc`, and a supervisor killed before it reports is never a pass.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_forged_or_missing_exit_status_is_never_a_pass() {
        // The supervisor shell's way; in a namespace the supervisor is out of the command's sight.
        let run = |command: &str, timeout_ms: u64| run_in(command, timeout_ms, Containment::Subreaper);
        let forged =
            run("readlink /proc/$PPID/fd/3; echo 'x 0' > /proc/$PPID/fd/3 && echo wrote; exit 3", 10_000);
        assert_eq!((forged.exit_code, forged.untrusted.as_ref()), (Some(3), None), "{}", forged.describe());
        let output = forged.output.excerpt(1_000);
        assert!(output.starts_with("socket:[") && !output.contains("wrote"), "{output}");
        let killed = run("kill -9 $PPID; exit 0", 10_000);
        assert_eq!(killed.untrusted, Some(Untrusted::NoStatus), "{}", killed.describe());
        assert!(!killed.passed());
        assert!(
            killed.describe().contains("ended without reporting an exit status"),
            "{}",
            killed.describe()
        );
    }

    #[test]
    fn a_term_ignoring_command_is_killed_after_the_grace() {
        let started = Instant::now();
        let outcome = run("trap '' TERM; sleep 30", 200);
        assert!(outcome.timed_out);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_failure() {
        let spec = VerifySpec {
            command: "true".into(),
            cwd: "/no/such/dir".into(),
            timeout: Duration::from_secs(1),
            sandbox: Vec::new(),
        };
        assert!(matches!(spec.run(), Err(VerifyError::MissingCwd(_))));
    }

    #[test]
    fn command_not_found_is_a_failed_check() {
        let outcome = run("no-such-command-for-loop-test", 10_000);
        assert_eq!(outcome.exit_code, Some(127));
    }
}

/// Windows runs verify through `cmd.exe` and kills it with `taskkill /T`; these run in the
/// release workflow's Windows job.
#[cfg(all(test, windows))]
mod windows_tests {
    use super::run_for_test as run;
    use super::*;

    #[test]
    fn passing_and_failing_commands() {
        assert!(run("exit /b 0", 10_000).passed());
        let failed = run("echo out& exit /b 3", 10_000);
        assert!(!failed.passed());
        assert_eq!(failed.exit_code, Some(3));
        assert!(failed.output.excerpt(1_000).contains("out"));
    }

    #[test]
    fn timeout_kills_the_whole_process_tree() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild-survived");
        let command = format!(
            "start /b cmd /c \"ping -n 4 127.0.0.1 >nul & echo x> \"{}\"\" & ping -n 31 127.0.0.1 >nul",
            marker.display()
        );
        let started = Instant::now();
        let outcome = run(&command, 500);
        assert!(outcome.timed_out);
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        thread::sleep(Duration::from_millis(5_000));
        assert!(!marker.exists(), "a grandchild outlived the timeout");
    }
}
