//! Who holds a loop's lock: a for-loop process at work on this loop, which is waited for, or
//! anyone else, whose lock is taken over.
//!
//! Every for-loop process that takes a loop's lock writes a record into the lock file: its pid
//! and its start time. A holder counts as for-loop's own only when the kernel names it as the
//! holder (`/proc/locks`), it runs the same executable as this process, it is not stopped, and
//! the record names it with the start time it has now, so that a reused pid, a record written by
//! someone else, a process that merely renamed itself, or one of ours the agent stopped with a
//! signal does not count. The record alone proves nothing: the agent
//! can write the lock file as well as read it.
//!
//! Where the kernel does not name the holder (every system but Linux), nobody counts as
//! for-loop's own and the lock is taken over as before: a record there would let the agent stall
//! every stop by naming a live process in it.

use std::fs::File;

/// The holder of a loop's lock, as far as this machine can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::store) enum Holder {
    /// A for-loop process that took this loop's lock and still runs: never taken over. Only
    /// the kernel can say so, and only Linux's does.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    ForLoop { pid: u32, what: String },
    /// Anyone else, in words: another program, a process that has ended, this process, or one
    /// that cannot be named.
    Other(String),
}

impl Holder {
    /// Who holds the lock on `file` now.
    pub(in crate::store) fn of(file: &File) -> Holder {
        platform::holder(file)
    }

    /// Writes this process's record into the lock file it has just locked. Best effort: a holder
    /// without a record is only taken over sooner.
    pub(in crate::store) fn stamp(file: &File) {
        platform::stamp(file);
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Holder::ForLoop { pid, what } => write!(f, "for-loop's own process {pid} ({what})"),
            Holder::Other(who) => f.write_str(who),
        }
    }
}

/// The record a holder writes: `<pid> <start time>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Record {
    pid: u32,
    start: u64,
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
impl Record {
    /// A record as written by [`Holder::stamp`]; `None` for anything else (empty, garbage, huge).
    fn parse(text: &str) -> Option<Record> {
        let mut fields = text.strip_suffix('\n')?.split(' ');
        let pid = fields.next()?.parse().ok().filter(|&pid| pid != 0)?;
        let start = fields.next()?.parse().ok()?;
        fields.next().is_none().then_some(Record { pid, start })
    }
}

#[cfg(target_os = "linux")]
mod platform {
    use std::fs::{self, File};
    use std::io::Read;
    use std::os::unix::fs::{FileExt, MetadataExt};
    use std::sync::OnceLock;
    use std::time::Duration;

    use super::{Holder, Record};

    /// The longest record read: two numbers and two separators.
    const MAX_RECORD: usize = 64;

    pub(super) fn stamp(file: &File) {
        static RECORD: OnceLock<Option<String>> = OnceLock::new();
        let me = std::process::id();
        if let Some(record) = RECORD.get_or_init(|| start_time(me).map(|start| format!("{me} {start}\n"))) {
            let _ = file.write_all_at(record.as_bytes(), 0);
            let _ = file.set_len(record.len() as u64);
        }
    }

    pub(super) fn holder(file: &File) -> Holder {
        let Some(pid) = locker(file) else { return Holder::Other("a process".into()) };
        let me = std::process::id();
        if pid == 0 {
            // A lock whose taker has ended (its file kept open by a child) shows as pid 0 from
            // inside a pid namespace.
            return Holder::Other("a process that has ended".into());
        }
        if pid == me {
            return Holder::Other("this process".into());
        }
        let name = fs::read_to_string(format!("/proc/{pid}/comm")).map(|n| n.trim().to_string());
        let Ok(name) = name else { return Holder::Other(format!("process {pid}, which has ended")) };
        let named = format!("process {pid} ({})", clean(&name));
        if !same_executable(pid) {
            return Holder::Other(named);
        }
        // A for-loop process stopped with a signal (or under a debugger) is not at work: the
        // agent could stop one of ours while it holds the lock to stall every stop.
        if matches!(run_state(pid), Some('T' | 't' | 'Z' | 'X') | None) {
            return Holder::Other(format!("{named}, stopped"));
        }
        // A for-loop process writes its record just after it takes the lock: read once more
        // when it could be between the two.
        let recorded = || record(file).filter(|r| r.pid == pid && Some(r.start) == start_time(pid));
        if recorded().is_some() || {
            std::thread::sleep(Duration::from_millis(50));
            recorded().is_some()
        } {
            return Holder::ForLoop { pid, what: what(pid, &name) };
        }
        Holder::Other(format!("{named}, not the for-loop process its record names"))
    }

    /// The pid the kernel names as the holder of the lock on `file` (not one waiting for it).
    fn locker(file: &File) -> Option<u32> {
        let meta = file.metadata().ok()?;
        let dev = meta.dev();
        let id =
            format!("{:02x}:{:02x}:{}", nix::sys::stat::major(dev), nix::sys::stat::minor(dev), meta.ino());
        let locks = fs::read_to_string("/proc/locks").ok()?;
        locks.lines().filter(|line| !line.contains("->")).find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(5) == Some(&id.as_str())).then(|| fields.get(4)?.parse().ok()).flatten()
        })
    }

    fn record(file: &File) -> Option<Record> {
        let mut bytes = [0; MAX_RECORD];
        let n = file.read_at(&mut bytes, 0).ok()?;
        Record::parse(std::str::from_utf8(&bytes[..n]).ok()?)
    }

    /// When `pid` started, in clock ticks since boot (field 22 of `/proc/PID/stat`).
    pub(super) fn start_time(pid: u32) -> Option<u64> {
        stat_field(pid, 19)?.parse().ok()
    }

    /// Whether `pid` runs (`R`), sleeps (`S`, `D`), is stopped (`T`, `t`) or has ended (`Z`,
    /// `X`): field 3 of `/proc/PID/stat`.
    fn run_state(pid: u32) -> Option<char> {
        stat_field(pid, 0)?.chars().next()
    }

    /// Field `n` after the name in `/proc/PID/stat` (0 is the state, field 3).
    fn stat_field(pid: u32, n: usize) -> Option<String> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The name, field 2, may hold blanks and parentheses: fields count from its last `)`.
        let (_, rest) = stat.rsplit_once(')')?;
        rest.split_ascii_whitespace().nth(n).map(String::from)
    }

    /// Whether `pid` runs the very executable this process runs (its file, not its name).
    fn same_executable(pid: u32) -> bool {
        match (fs::metadata(format!("/proc/{pid}/exe")), fs::metadata("/proc/self/exe")) {
            (Ok(theirs), Ok(mine)) => theirs.dev() == mine.dev() && theirs.ino() == mine.ino(),
            _ => false,
        }
    }

    /// The holder's program and command, `loop-hook cancel`, from its command line.
    fn what(pid: u32, name: &str) -> String {
        let mut bytes = Vec::new();
        if let Ok(file) = File::open(format!("/proc/{pid}/cmdline")) {
            let _ = file.take(4096).read_to_end(&mut bytes);
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut args = text.split('\0');
        let program = args.next().and_then(|p| p.rsplit('/').next()).filter(|p| !p.is_empty());
        let words: Vec<&str> = program.into_iter().chain(args.next().filter(|a| !a.is_empty())).collect();
        if words.is_empty() { clean(name) } else { clean(&words.join(" ")) }
    }

    /// At most 60 printable characters of text another process chose.
    fn clean(text: &str) -> String {
        text.chars().filter(|c| !c.is_control()).take(60).collect()
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    use std::fs::File;

    use super::Holder;

    pub(super) fn stamp(_file: &File) {}

    pub(super) fn holder(_file: &File) -> Holder {
        Holder::Other("a process".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_record_as_written_is_read() {
        assert_eq!(Record::parse("12 345\n"), Some(Record { pid: 12, start: 345 }));
        for bad in ["", "\n", "12 345", "12\n", "0 5\n", "-1 5\n", "12 x\n", "12 3 4\n", " 12 3\n", "12  3\n"]
        {
            assert_eq!(Record::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Record::parse(&format!("{} 1\n", u64::MAX)), None, "a pid past u32");
    }

    #[test]
    fn a_holder_is_named_in_words() {
        let mine = Holder::ForLoop { pid: 7, what: "loop-hook cancel".into() };
        assert_eq!(mine.to_string(), "for-loop's own process 7 (loop-hook cancel)");
        assert_eq!(Holder::Other("process 9 (flock)".into()).to_string(), "process 9 (flock)");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_start_time_and_stamps_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("lock")).unwrap();
        std::fs::write(dir.path().join("lock"), "a much longer text than any record holds\n").unwrap();
        Holder::stamp(&file);
        let start = platform::start_time(std::process::id()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("lock")).unwrap();
        assert_eq!(text, format!("{} {start}\n", std::process::id()));
        assert_eq!(Record::parse(&text).map(|r| r.pid), Some(std::process::id()));
    }
}
