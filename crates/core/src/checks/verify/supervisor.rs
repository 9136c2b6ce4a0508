//! Running a judged command as the user's own shell would run it, not as a descendant of the
//! hook: code under test that walks its parent processes must not find `loop-hook` there and
//! pass only then.
//!
//! The hook starts a small supervisor shell through a double fork: the first child opens a
//! session of its own and exits at once, so the supervisor (its child) is handed to init, or to
//! the nearest subreaper, and its parent is never `loop-hook`. The supervisor runs the command,
//! and reports its exit status on a socket of its own, since the status the kernel hands a
//! parent no longer reaches the hook. That report is what code running as the user could forge
//! (it can open `/proc/<supervisor>/fd/3`), so:
//!
//! - each line carries a secret the hook draws for this run and hands the supervisor on its
//!   stdin, never in its arguments or environment (which `/proc` shows);
//! - on Linux the kernel names the process that wrote each line (`SCM_CREDENTIALS`): every line
//!   must come from the process that said it was ready before the command started;
//! - the command runs with that descriptor closed; a line without the secret, from another
//!   process, a second status, or no status at all is never a pass, and says why.

#[cfg(all(unix, test))]
pub(crate) use unix::execed;
#[cfg(unix)]
pub(crate) use unix::{Supervised, command};

/// Why a command's exit status cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) enum Untrusted {
    /// A line without the secret: written by a process other than the supervisor.
    Foreign,
    /// A line with the secret from another process than the supervisor's: the secret was read
    /// out of its memory.
    OtherProcess,
    /// A second status after the first.
    Second,
    /// The supervisor ended without a status: it was killed, or its channel was closed.
    NoStatus,
    /// The command's output was still open for writing once the command and everything it
    /// started were gone: a process outside the check holds it (its descriptor was passed out,
    /// or opened through `/proc/<pid>/fd`), and could have written into it.
    OutputHeld,
}

impl Untrusted {
    /// What happened, for the ledger and the user.
    pub(crate) fn words(&self) -> &'static str {
        match self {
            Untrusted::Foreign => {
                "a status line the shell that ran the check did not write came in on its status channel \
                 (a process wrote into it, e.g. through /proc/<pid>/fd)"
            }
            Untrusted::OtherProcess => {
                "a status line came in from another process than the shell that ran the check (its \
                 secret was read out of that shell's memory)"
            }
            Untrusted::Second => "a second exit status came in after the check's own",
            Untrusted::NoStatus => {
                "the shell that ran the check ended without reporting an exit status (it was killed, \
                 or its status channel was closed)"
            }
            Untrusted::OutputHeld => {
                "the check's output was still held open for writing after the check and everything it \
                 started had ended: a process outside the check got hold of it (its descriptor was passed \
                 out, or opened through /proc), and what it wrote after the exit was not read"
            }
        }
    }
}

/// Who wrote a line, as far as the kernel says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
enum Origin {
    /// No credentials on this system.
    Unknown,
    Pid(i32),
    /// Pieces of the line came from different processes.
    Mixed,
}

#[cfg_attr(not(unix), allow(dead_code))]
impl Origin {
    fn and(self, piece: Origin) -> Origin {
        match (self, piece) {
            (Origin::Unknown, piece) => piece,
            (same, piece) if same == piece => same,
            _ => Origin::Mixed,
        }
    }
}

/// What the status channel carries.
#[derive(Debug)]
#[cfg_attr(not(unix), allow(dead_code))]
enum Event {
    Line(Vec<u8>, Origin),
    End,
}

/// The supervisor's report, read line by line.
#[derive(Debug)]
#[cfg_attr(not(unix), allow(dead_code))]
struct Report {
    secret: String,
    /// Who said it was ready: every later line must come from there.
    supervisor: Option<Origin>,
    ended: Option<Result<i32, Untrusted>>,
}

#[cfg_attr(not(unix), allow(dead_code))]
impl Report {
    fn new(secret: String) -> Report {
        Report { secret, supervisor: None, ended: None }
    }

    fn line(&mut self, line: &[u8], from: Origin) {
        let judged = match self.ended {
            Some(Err(_)) => return,
            Some(Ok(_)) => Err(Untrusted::Second),
            None => self.judge(line, from),
        };
        if let Some(judged) = judged.transpose() {
            self.ended = Some(judged);
        }
    }

    /// `Ok(None)`: the ready line; `Ok(Some(code))`: the status.
    fn judge(&mut self, line: &[u8], from: Origin) -> Result<Option<i32>, Untrusted> {
        let text = std::str::from_utf8(line).map_err(|_| Untrusted::Foreign)?;
        let word = text
            .strip_prefix(self.secret.as_str())
            .and_then(|rest| rest.strip_prefix(' '))
            .ok_or(Untrusted::Foreign)?;
        match self.supervisor {
            None if word == "ready" && from != Origin::Mixed => {
                self.supervisor = Some(from);
                Ok(None)
            }
            None => Err(Untrusted::Foreign),
            Some(supervisor) if supervisor != from => Err(Untrusted::OtherProcess),
            Some(_) => word.parse().map(Some).map_err(|_| Untrusted::Foreign),
        }
    }

    fn end(&mut self) {
        if self.ended.is_none() {
            self.ended = Some(Err(Untrusted::NoStatus));
        }
    }
}

/// Starting the supervisor and reading its report, on Unix.
#[cfg(unix)]
mod unix {
    #[cfg(not(target_os = "linux"))]
    use std::io::Read;
    use std::io::{self, Write};
    use std::os::fd::{AsRawFd, RawFd};
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    use std::sync::mpsc;
    use std::thread;
    use std::time::{Duration, Instant};

    use super::{Event, Origin, Report, Untrusted};
    use crate::checks::verify::namespace::Containment;

    /// The descriptor the supervisor reports on.
    const STATUS_FD: RawFd = 3;
    /// Longer than any line the supervisor writes: a longer one is somebody else's.
    const MAX_LINE: usize = 128;

    /// The supervisor, `$1` its command: it reads the secret, says it is ready, runs the command
    /// with the status descriptor closed, and reports the command's exit status. Its own stderr
    /// goes to `/dev/null` (a shell says `Killed` when its child is), the command's where it was:
    /// the command's redirections are made in a subshell, which a shell does not keep while it
    /// waits.
    /// `STDIN` is where the command's stdin comes from: `/dev/null`, or the rest of the
    /// supervisor's own.
    ///
    /// As the first process of a PID namespace ([`Containment::Namespace`]) it is the command
    /// itself: it skips the secret and execs the command, whose exit the process that entered the
    /// namespace reports. As a subreaper it kills what the command left (every child of its own
    /// but zombies, until none is left; a name cannot pass for a zombie, its state is read after
    /// the last `) `; the list is read until it comes back clean twice, since the kernel builds
    /// it without a lock), and closes its copies of the output, before it reports the status. It
    /// outlives a timeout's SIGTERM for that (a handler, which the command does not inherit).
    const SCRIPT: &str = "IFS= read -r n || exit 125\n\
                          [ $$ = 1 ] && exec /bin/sh -c \"$1\" 3>&- STDIN\n\
                          echo \"$n ready\" >&3\n\
                          trap : TERM\n\
                          exec 4>&2 2>/dev/null\n\
                          (exec /bin/sh -c \"$1\" 2>&4 3>&- 4>&- STDIN)\n\
                          s=$?\n\
                          exec 1>&- 4>&-\n\
                          c=/proc/$$/task/$$/children; z=0\n\
                          while [ -r $c ]; do\n\
                          k=; read -r k <$c; l=\n\
                          for p in $k; do t=; read -r t </proc/$p/stat; case ${t##*) } in Z*|X*|'') ;; *) l=\"$l $p\";; esac; done\n\
                          if [ -z \"$l\" ]; then z=$((z + 1)); [ $z -lt 2 ] || break; continue; fi\n\
                          z=0; kill -9 $l\n\
                          done\n\
                          echo \"$n $s\" >&3\n";

    /// The supervisor's command line for `command`: `/bin/sh -c SCRIPT sh COMMAND`. With `input`,
    /// the command reads what follows the secret on the supervisor's stdin; without, `/dev/null`.
    pub(crate) fn command(command: &str, input: bool) -> Command {
        let mut shell = Command::new("/bin/sh");
        let script = SCRIPT.replace("STDIN", if input { "" } else { "</dev/null" });
        shell.arg("-c").arg(script).arg("sh").arg(execed(command).as_ref());
        shell
    }

    /// `command` as the shell should run it: a single plain command is `exec`ed, so that the
    /// program it names is the process whose exit ends the output (in a PID namespace, the
    /// namespace's first process). `dash` does not `exec` the last command of `-c` by itself:
    /// without this, `sh bench.sh` runs as a child of the shell, and what it left behind can
    /// watch for that child's exit and write in the moment before the shell's own exit ends
    /// everything. Anything that is not plainly one external program (operators, quotes,
    /// expansions, redirections, an assignment, a builtin) is left as it is.
    pub(crate) fn execed(command: &str) -> std::borrow::Cow<'_, str> {
        /// Words a shell runs itself, whose `exec` would fail, mean something else, or look for
        /// a program the `PATH` may not have (`test -f x` needs no `/usr/bin/test` in a shell).
        const SHELL_OWN: &[&str] = &[
            "test", "true", "false", "echo", "printf", "pwd", "kill", "exec", "exit", "cd", "export", "set",
            "unset", "source", ".", ":", "wait", "read", "eval", "ulimit", "umask", "shift", "return",
            "trap", "alias", "unalias", "type", "command", "hash", "times", "getopts", "jobs", "fg", "bg",
            "local", "readonly", "break", "continue", "if", "then", "else", "elif", "fi", "while", "until",
            "for", "do", "done", "case", "esac", "function", "select", "time", "!", "{", "}",
        ];
        let plain = |c: char| c.is_ascii_alphanumeric() || " \t_./:@%+,=-".contains(c);
        let trimmed = command.trim();
        let first = trimmed.split([' ', '\t']).next().unwrap_or_default();
        let simple = !first.is_empty()
            && trimmed.chars().all(plain)
            && !first.contains('=')
            && !first.starts_with('-')
            && !SHELL_OWN.contains(&first);
        if simple { format!("exec {trimmed}").into() } else { command.into() }
    }

    /// A command running under its supervisor, out of the hook's process tree.
    pub(crate) struct Supervised {
        /// The session and process group of the supervisor and everything it starts.
        group: u32,
        events: mpsc::Receiver<Event>,
        report: Report,
    }

    impl Supervised {
        /// Starts `command` (from [`command`]), its stdout, stderr, directory and environment already
        /// set, detached from this process, with `input` after the secret on its stdin.
        pub(crate) fn spawn(
            mut command: Command,
            input: &[u8],
            containment: Containment,
        ) -> io::Result<Supervised> {
            let secret = secret()?;
            let (ours, theirs) = UnixStream::pair()?;
            // Above the standard descriptors, which the child's own stdin, stdout and stderr replace
            // before the supervisor's descriptor 3 is set.
            let theirs = std::os::fd::OwnedFd::from(theirs).try_clone()?;
            #[cfg(target_os = "linux")]
            nix::sys::socket::setsockopt(&ours, nix::sys::socket::sockopt::PassCred, &true)?;
            let (stdin, mut feed) = io::pipe()?;
            // Before the supervisor exists: nothing else can read the secret off the pipe first.
            feed.write_all(format!("{secret}\n").as_bytes())?;
            command.stdin(stdin);
            let status_fd = theirs.as_raw_fd();
            match containment {
                #[cfg(target_os = "linux")]
                Containment::Namespace => enter_namespace(&mut command, status_fd, &secret),
                _ => detach(&mut command, status_fd, containment == Containment::Subreaper),
            }
            let mut first = command.spawn()?;
            drop(command);
            drop(theirs);
            // The first child exits as soon as it has forked the supervisor.
            let group = first.id();
            first.wait()?;
            let bytes = input.to_vec();
            // A command that never reads its stdin must not hold us up: the write waits in its own
            // thread, and fails once the command's group is gone.
            thread::spawn(move || {
                let _ = feed.write_all(&bytes);
            });
            let (tx, events) = mpsc::channel();
            thread::spawn(move || read_lines(ours, &tx));
            Ok(Supervised { group, events, report: Report::new(secret) })
        }

        /// The process group to signal.
        pub(crate) fn group(&self) -> u32 {
            self.group
        }

        /// The command's exit code, or why there is none to trust, once the supervisor has said or
        /// cannot say any more; `None` if `deadline` comes first.
        pub(crate) fn wait_until(&mut self, deadline: Instant) -> Option<Result<i32, Untrusted>> {
            while self.report.ended.is_none() {
                match self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(Event::Line(line, from)) => self.report.line(&line, from),
                    Ok(Event::End) | Err(mpsc::RecvTimeoutError::Disconnected) => self.report.end(),
                    Err(mpsc::RecvTimeoutError::Timeout) => return None,
                }
            }
            self.report.ended.clone()
        }

        /// The report as it stands once the group is killed: a line that comes in until the channel
        /// closes, or for `grace` at most, makes a status given before it untrusted.
        pub(crate) fn finish(mut self, grace: Duration) -> Option<Result<i32, Untrusted>> {
            let deadline = Instant::now() + grace;
            while let Ok(Event::Line(line, from)) =
                self.events.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                self.report.line(&line, from);
            }
            self.report.ended
        }
    }

    /// 128 bits from the operating system's random source, in hex.
    fn secret() -> io::Result<String> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(io::Error::other)?;
        Ok(crate::support::digest::hex(&bytes))
    }

    /// Makes `command` start detached: its first child opens a new session and forks the process
    /// that runs the program, then exits, so that the program's parent is init or a subreaper, never
    /// us. `status_fd` becomes the program's descriptor 3. As a `subreaper`, what the program's
    /// children leave is handed to the program, not to init.
    #[allow(unsafe_code)]
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    fn detach(command: &mut Command, status_fd: RawFd, subreaper: bool) {
        use nix::libc;
        let in_child = move || {
            // SAFETY: between fork and exec only async-signal-safe calls are made: setsid, fork,
            // _exit, dup2 and fcntl, on descriptors and processes of this child alone.
            unsafe {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                match libc::fork() {
                    -1 => return Err(io::Error::last_os_error()),
                    0 => {}
                    _ => libc::_exit(0),
                }
                if status_fd == STATUS_FD {
                    if libc::fcntl(STATUS_FD, libc::F_SETFD, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                } else if libc::dup2(status_fd, STATUS_FD) < 0 {
                    return Err(io::Error::last_os_error());
                }
                // Kept across exec.
                #[cfg(target_os = "linux")]
                if subreaper && libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        };
        // SAFETY: the closure above is async-signal-safe, as `pre_exec` requires.
        unsafe {
            command.pre_exec(in_child);
        }
    }

    /// Makes `command` start as the first process of a PID namespace of its own
    /// ([`Containment::Namespace`]): its first child opens a new session and forks the process
    /// that enters the namespaces, then exits. That process says it is ready on `status_fd` and
    /// forks the namespace's first process, which mounts its `/proc` and runs the program; it
    /// stays behind as the supervisor, out of the namespace and out of sight of everything in it,
    /// and reports the program's exit status, which the kernel hands it only once every other
    /// process in the namespace is gone.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn enter_namespace(command: &mut Command, status_fd: RawFd, secret: &str) {
        use crate::checks::verify::namespace;
        use nix::libc;
        let entry = namespace::Entry::new();
        let ready = format!("{secret} ready\n").into_bytes();
        let prefix = format!("{secret} ").into_bytes();
        let in_child = move || {
            // SAFETY: between fork and exec only async-signal-safe calls are made: setsid, fork,
            // unshare, open, write, mount, prctl, seccomp, close, waitpid and _exit, on descriptors
            // and processes of this child alone; what they need was made before the fork.
            unsafe {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                match libc::fork() {
                    -1 => return Err(io::Error::last_os_error()),
                    0 => {}
                    _ => libc::_exit(0),
                }
                if !entry.unshare() {
                    return Err(io::Error::last_os_error());
                }
                // Before the command exists, as the supervisor shell says it.
                if !namespace::write_all(status_fd, &ready) {
                    return Err(io::Error::last_os_error());
                }
                match libc::fork() {
                    -1 => Err(io::Error::last_os_error()),
                    0 => {
                        if !namespace::mount_proc() {
                            return Err(io::Error::last_os_error());
                        }
                        // Without it a pidfd waiter can write as a program the command runs
                        // exits, as before: not a reason to fail the check.
                        namespace::deny_pidfd_open();
                        // `status_fd` closes on exec: the command never has it.
                        Ok(())
                    }
                    first => namespace::supervise(first, status_fd, &prefix),
                }
            }
        };
        // SAFETY: the closure above is async-signal-safe, as `pre_exec` requires.
        unsafe {
            command.pre_exec(in_child);
        }
    }

    /// Reads the status channel to its end, line by line, each with who wrote it.
    fn read_lines(mut socket: UnixStream, tx: &mpsc::Sender<Event>) {
        let mut buf = [0u8; 512];
        let mut line: Vec<u8> = Vec::new();
        let mut origin = Origin::Unknown;
        loop {
            let (n, from) = match receive(&mut socket, &mut buf) {
                Ok((0, _)) | Err(_) => break,
                Ok(read) => read,
            };
            for &byte in &buf[..n] {
                origin = origin.and(from);
                if byte == b'\n' || line.len() >= MAX_LINE {
                    let _ = tx.send(Event::Line(std::mem::take(&mut line), origin));
                    origin = Origin::Unknown;
                } else {
                    line.push(byte);
                }
            }
        }
        if !line.is_empty() {
            let _ = tx.send(Event::Line(line, origin));
        }
        let _ = tx.send(Event::End);
    }

    /// One read, with the writer's pid from the kernel.
    #[cfg(target_os = "linux")]
    fn receive(socket: &mut UnixStream, buf: &mut [u8]) -> io::Result<(usize, Origin)> {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixCredentials, recvmsg};
        let mut space = nix::cmsg_space!(UnixCredentials);
        let mut iov = [io::IoSliceMut::new(buf)];
        let message = loop {
            match recvmsg::<()>(socket.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
                Err(nix::errno::Errno::EINTR) => {}
                other => break other?,
            }
        };
        let pid = message.cmsgs()?.find_map(|cmsg| match cmsg {
            ControlMessageOwned::ScmCredentials(credentials) => Some(credentials.pid()),
            _ => None,
        });
        Ok((message.bytes, pid.map_or(Origin::Mixed, Origin::Pid)))
    }

    /// One read: this system names no writer.
    #[cfg(not(target_os = "linux"))]
    fn receive(socket: &mut UnixStream, buf: &mut [u8]) -> io::Result<(usize, Origin)> {
        Ok((socket.read(buf)?, Origin::Unknown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report::new("s3cret".into())
    }

    #[test]
    fn the_supervisors_two_lines_give_the_exit_code() {
        let mut r = report();
        r.line(b"s3cret ready", Origin::Pid(7));
        assert_eq!(r.ended, None);
        r.line(b"s3cret 3", Origin::Pid(7));
        assert_eq!(r.ended, Some(Ok(3)));
        let mut unknown = report();
        unknown.line(b"s3cret ready", Origin::Unknown);
        unknown.line(b"s3cret 0", Origin::Unknown);
        assert_eq!(unknown.ended, Some(Ok(0)));
    }

    #[test]
    fn a_line_without_the_secret_is_never_a_status() {
        for (ready, status) in [
            (&b"s3cret ready"[..], &b"guess 0"[..]),
            (b"s3cret ready", b"0"),
            (b"s3cret ready", b"s3cret"),
            (b"s3cret ready", b"s3cret zero"),
            (b"s3cret ready", b"s3cret 0 0"),
            (b"s3cret ready", b"s3cret\xff 0"),
            (b"s3cret 0", b"s3cret 0"),
            (b"", b"s3cret 0"),
        ] {
            let mut r = report();
            r.line(ready, Origin::Pid(7));
            r.line(status, Origin::Pid(7));
            r.end();
            assert_eq!(r.ended, Some(Err(Untrusted::Foreign)), "{ready:?} {status:?}");
        }
    }

    #[test]
    fn a_status_from_another_process_or_a_second_one_is_untrusted() {
        let mut r = report();
        r.line(b"s3cret ready", Origin::Pid(7));
        r.line(b"s3cret 0", Origin::Pid(8));
        assert_eq!(r.ended, Some(Err(Untrusted::OtherProcess)));
        let mut mixed = report();
        mixed.line(b"s3cret ready", Origin::Mixed);
        assert_eq!(mixed.ended, Some(Err(Untrusted::Foreign)));
        let mut twice = report();
        twice.line(b"s3cret ready", Origin::Pid(7));
        twice.line(b"s3cret 0", Origin::Pid(7));
        twice.line(b"s3cret 0", Origin::Pid(7));
        assert_eq!(twice.ended, Some(Err(Untrusted::Second)));
        let mut none = report();
        none.line(b"s3cret ready", Origin::Pid(7));
        none.end();
        assert_eq!(none.ended, Some(Err(Untrusted::NoStatus)));
    }

    #[test]
    fn pieces_of_one_line_from_two_writers_are_mixed() {
        assert_eq!(Origin::Unknown.and(Origin::Pid(1)), Origin::Pid(1));
        assert_eq!(Origin::Pid(1).and(Origin::Pid(1)), Origin::Pid(1));
        assert_eq!(Origin::Pid(1).and(Origin::Pid(2)), Origin::Mixed);
        assert_eq!(Origin::Mixed.and(Origin::Pid(1)), Origin::Mixed);
    }
}
