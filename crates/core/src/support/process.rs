//! Another process, as the system shows it: whether it runs, when it started, what program it is
//! and with which arguments. On Linux all of it comes from `/proc`; elsewhere only whether a pid
//! is in use is known (macOS), or nothing (Windows).
//!
//! A pid alone proves nothing: any live process has one, and a pid is reused once its process is
//! gone. The start time, in clock ticks since boot, tells one process of a pid from a later one;
//! the program and arguments tell what it is.

/// What was seen of a process.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// No process has that pid.
    Gone,
    /// It runs, and this is what it is.
    Running(Process),
    /// A process has that pid, and nothing more can be read of it here.
    Unknown,
}

/// A running process, as `/proc` shows it.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Process {
    /// Clock ticks after boot at which it started (`/proc/PID/stat`, field 22).
    pub(crate) started: u64,
    /// The file name of its executable, when it can be read (another user's cannot).
    pub(crate) program: Option<String>,
    /// Its arguments, the first being the name it was started by.
    pub(crate) args: Vec<String>,
}

/// How much of a command line is read.
#[cfg(target_os = "linux")]
const ARGS_BYTES: u64 = 64 << 10;

/// What the system shows of process `pid`.
pub(crate) fn look(pid: u32) -> Seen {
    #[cfg(target_os = "linux")]
    {
        if std::path::Path::new("/proc/self/stat").exists() {
            return linux::look(pid);
        }
    }
    #[cfg(unix)]
    {
        use nix::sys::signal::kill;
        use nix::unistd::Pid;
        match i32::try_from(pid).map(|pid| kill(Pid::from_raw(pid), None)) {
            Ok(Ok(()) | Err(nix::errno::Errno::EPERM)) => Seen::Unknown,
            _ => Seen::Gone,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        Seen::Unknown
    }
}

/// When this process started, where that can be read.
pub(crate) fn own_start() -> Option<u64> {
    match look(std::process::id()) {
        Seen::Running(process) => Some(process.started),
        _ => None,
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{ARGS_BYTES, Process, Seen};
    use std::io::Read;

    pub(super) fn look(pid: u32) -> Seen {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return Seen::Gone;
        };
        let Some(started) = start_of(&stat) else { return Seen::Unknown };
        let mut bytes = Vec::new();
        if let Ok(file) = std::fs::File::open(format!("/proc/{pid}/cmdline")) {
            let _ = file.take(ARGS_BYTES).read_to_end(&mut bytes);
        }
        let args =
            bytes.split(|b| *b == 0).map(|arg| String::from_utf8_lossy(arg).into_owned()).collect::<Vec<_>>();
        let args = match args.split_last() {
            Some((last, rest)) if last.is_empty() => rest.to_vec(),
            _ => args,
        };
        let program = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .and_then(|path| path.file_name().map(|name| name.to_string_lossy().into_owned()));
        Seen::Running(Process { started, program, args })
    }

    /// Field 22 of `/proc/PID/stat`: `pid (comm) state ppid ...`, where comm may hold blanks and
    /// parentheses, so the fields are counted from the last `)`.
    pub(super) fn start_of(stat: &str) -> Option<u64> {
        let rest = &stat[stat.rfind(')')? + 1..];
        rest.split_whitespace().nth(19)?.parse().ok()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_start_time_is_read_after_the_name_whatever_the_name_holds() {
            let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
            assert_eq!(start_of(stat), Some(987_654));
            assert_eq!(start_of("42 (x) S 1"), None);
            assert_eq!(start_of("garbage"), None);
        }

        #[test]
        fn this_process_is_seen_with_its_arguments_and_a_gone_one_is_gone() {
            let Seen::Running(me) = look(std::process::id()) else { panic!("not seen") };
            assert!(!me.args.is_empty() && me.started > 0, "{me:?}");
            assert_eq!(super::super::own_start(), Some(me.started));
            assert_eq!(look(u32::MAX), Seen::Gone);
        }
    }
}
