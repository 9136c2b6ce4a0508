//! An exclusive lock on a loop, held while its state is read and written.
//!
//! The lock is taken on a sidecar file, never on the state file itself: the state is replaced by
//! a rename, which would silently drop a lock held on the old file.
//!
//! for-loop's own commands hold the lock for milliseconds (verify runs without it), but a loaded
//! machine can stretch that to seconds. A lock still held after [`LOCK_WAIT`] is looked at
//! ([`Holder`]): a for-loop process at work on this loop is waited for, up to [`LIVE_WAIT`], and
//! never taken over (taking it would lose that command's change); anyone else (a process that has
//! ended, another program: an agent can run `flock state.md.lock sleep 1d` in the background to
//! make every stop fail) has the lock taken over: the lock file is unlinked and a new one locked,
//! and the caller is told who held it. Every acquirer checks, once it holds a lock, that its file
//! is still the one at the path, so two of them never both believe they hold it.

mod holder;

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

/// The longest a hook or command waits for a loop's lock before it looks at who holds it.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(3);

/// The longest a hook or command waits for a for-loop process at work on the same loop, then
/// gives up without taking the lock. Below every host's shortest hook timeout (30 s), and leaves
/// the Stop hook's 3,660 s room for verify's longest 3,600 s and two opens of the loop.
pub(crate) const LIVE_WAIT: Duration = Duration::from_secs(15);

/// How often a holder for-loop waits for is looked at again: it may end, or hand the lock on.
const LOOK_AGAIN: Duration = Duration::from_millis(250);

use thiserror::Error;

use self::holder::Holder;

/// How often a lock changes hands before acquiring gives up.
const ATTEMPTS: usize = 4;

#[derive(Debug, Error)]
pub(crate) enum LockError {
    #[error(
        "the loop's lock {path} kept changing hands and could not be taken; if a for-loop command \
         is stuck, end it"
    )]
    Contended { path: String },
    #[error(
        "{holder} still held the loop's lock {path} after {waited} s, and for-loop never takes the \
         lock from one of its own commands at work; if that command is stuck, end it (kill {pid})"
    )]
    Busy { path: String, holder: String, pid: u32, waited: u64 },
    #[error("could not open the lock file {path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Held until dropped.
#[derive(Debug)]
pub(crate) struct StateLock {
    _file: File,
    taken_over: Option<String>,
}

impl StateLock {
    /// Waits up to `wait` for the lock, then looks at who holds it: a for-loop process at work on
    /// this loop is waited for until `live` has passed, then the caller gives up
    /// ([`LockError::Busy`]); anyone else has the lock taken over. Hooks must not hang, so there is
    /// no unbounded wait.
    pub(in crate::store) fn acquire(
        path: &Path,
        wait: Duration,
        live: Duration,
    ) -> Result<StateLock, LockError> {
        let io_error = |source| LockError::Io { path: path.display().to_string(), source };
        let mut taken_over = None;
        // The loop's directory may be gone (deleted under a running loop): the lock recreates it.
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_error)?;
        }
        for _ in 0..ATTEMPTS {
            if let Ok(meta) = fs::symlink_metadata(path)
                && !meta.is_file()
            {
                // A directory or a link where the lock file goes would make every open fail.
                let aside = crate::store::move_aside(path, jiff::Timestamp::now()).map_err(io_error)?;
                taken_over = Some(format!(
                    "{} stood where the loop's lock file goes; it was moved to {}",
                    crate::store::describe(&meta),
                    aside.display()
                ));
            }
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(io_error)?;
            let started = Instant::now();
            let mut look_at = started + wait;
            let locked = loop {
                match file.try_lock() {
                    Ok(()) => break Ok(()),
                    Err(TryLockError::WouldBlock) if Instant::now() < look_at => {
                        thread::sleep(Duration::from_millis(10));
                    }
                    Err(TryLockError::WouldBlock) => match Holder::of(&file) {
                        Holder::ForLoop { .. } if started.elapsed() < live => {
                            look_at = Instant::now() + LOOK_AGAIN;
                        }
                        holder @ Holder::ForLoop { pid, .. } => {
                            return Err(LockError::Busy {
                                path: path.display().to_string(),
                                holder: holder.to_string(),
                                pid,
                                waited: started.elapsed().as_secs(),
                            });
                        }
                        other @ Holder::Other(_) => break Err(other),
                    },
                    Err(TryLockError::Error(e)) => return Err(io_error(e)),
                }
            };
            match locked {
                Ok(()) if platform::is_at(&file, path) => {
                    Holder::stamp(&file);
                    return Ok(StateLock::held(file, taken_over));
                }
                Ok(()) => {}
                Err(holder) => {
                    // Only the file waited on is unlinked: another acquirer may have replaced it already.
                    if platform::is_at(&file, path) {
                        let _ = fs::remove_file(path);
                    }
                    taken_over = Some(format!(
                        "{holder} held the loop's lock {} for over {} s and is not a for-loop command at \
                         work on this loop; for-loop took the lock over",
                        path.display(),
                        wait.as_secs_f32()
                    ));
                }
            }
        }
        Err(LockError::Contended { path: path.display().to_string() })
    }

    /// Waits up to `wait` for the lock and never takes it over: for a note that is worth less
    /// than the commit of whoever holds it. `None` when it stayed busy, or cannot be taken here
    /// (no loop directory, something other than a file at the lock's path).
    pub(in crate::store) fn try_acquire(path: &Path, wait: Duration) -> Option<StateLock> {
        if fs::symlink_metadata(path).is_ok_and(|meta| !meta.is_file()) {
            return None;
        }
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).ok()?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return None,
            }
        }
        if !platform::is_at(&file, path) {
            return None;
        }
        Holder::stamp(&file);
        Some(StateLock::held(file, None))
    }

    fn held(file: File, taken_over: Option<String>) -> StateLock {
        StateLock { _file: file, taken_over }
    }

    /// Who held the lock when it had to be taken over, in words; `None` when it was free in time.
    pub(crate) fn taken_over(&self) -> Option<&str> {
        self.taken_over.as_deref()
    }
}

#[cfg(unix)]
mod platform {
    use std::fs::{self, File};
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    /// Whether `file` is the file at `path` now (not one unlinked or replaced since it was opened).
    pub(super) fn is_at(file: &File, path: &Path) -> bool {
        match (file.metadata(), fs::metadata(path)) {
            (Ok(open), Ok(now)) => open.dev() == now.dev() && open.ino() == now.ino(),
            _ => false,
        }
    }
}

#[cfg(not(unix))]
mod platform {
    use std::fs::File;
    use std::path::Path;

    pub(super) fn is_at(_file: &File, path: &Path) -> bool {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_exclusive_and_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let held = StateLock::acquire(&path, Duration::ZERO, Duration::ZERO).unwrap();
        assert_eq!(held.taken_over(), None);
        drop(held);
        assert_eq!(StateLock::acquire(&path, Duration::ZERO, Duration::ZERO).unwrap().taken_over(), None);
    }

    #[test]
    fn a_lock_held_past_the_wait_is_taken_over_and_its_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let squatter = OpenOptions::new().create(true).truncate(false).write(true).open(&path).unwrap();
        squatter.lock().unwrap();
        let started = Instant::now();
        let taken = StateLock::acquire(&path, Duration::from_millis(100), Duration::ZERO).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(100));
        let said = taken.taken_over().unwrap();
        assert!(said.contains("held the loop's lock") && said.contains("took the lock over"), "{said}");
        #[cfg(target_os = "linux")]
        assert!(said.starts_with("this process"), "{said}");
        // The next acquirer waits for the new holder, not for the squatter.
        assert!(
            StateLock::acquire(&path, Duration::from_millis(50), Duration::ZERO)
                .unwrap()
                .taken_over()
                .is_some()
        );
    }

    #[test]
    fn a_brief_try_waits_for_a_holder_and_never_takes_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let squatter = OpenOptions::new().create(true).truncate(false).write(true).open(&path).unwrap();
        squatter.lock().unwrap();
        let started = Instant::now();
        assert!(StateLock::try_acquire(&path, Duration::from_millis(50)).is_none());
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(path.is_file(), "the held lock file was left where it was");
        drop(squatter);
        let lock = StateLock::try_acquire(&path, Duration::from_millis(50)).expect("a free lock is taken");
        assert!(StateLock::try_acquire(&path, Duration::ZERO).is_none(), "held: a second take waits");
        drop(lock);
        assert!(StateLock::try_acquire(&path, Duration::ZERO).is_some(), "dropped: free again");
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        assert!(StateLock::try_acquire(&path, Duration::ZERO).is_none(), "a directory is not moved aside");
    }

    #[test]
    fn a_directory_in_place_of_the_lock_file_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        fs::create_dir_all(&path).unwrap();
        let lock = StateLock::acquire(&path, Duration::ZERO, Duration::ZERO).unwrap();
        assert!(lock.taken_over().unwrap().contains("a directory stood where"), "{:?}", lock.taken_over());
        assert!(path.is_file());
    }

    /// A child process running this test binary (the same executable, so the same program as
    /// for-loop's own to [`Holder`]), holding the lock at `path` as `how` says until its stdin
    /// closes. Returns it once it holds the lock, with what it printed then.
    #[cfg(target_os = "linux")]
    fn holder(path: &Path, how: &str) -> (std::process::Child, String) {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "store::lock::tests::hold_the_lock_named_in_the_environment"])
            .args(["--ignored", "--nocapture", "--test-threads=1"])
            .env("FOR_LOOP_TEST_LOCK", format!("{how}:{}", path.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("held") {
            line.clear();
            assert_ne!(out.read_line(&mut line).unwrap(), 0, "the holder ended before it held the lock");
        }
        (child, line.trim().to_string())
    }

    /// Not a test: the process [`holder`] starts. `live` takes the lock as for-loop does;
    /// `reused` and `forged` lock the file and write a record that names the holder with another
    /// start time (its pid reused) or another for-loop process (this one's parent); `ended` hands
    /// its lock to a child that outlives it and exits.
    #[cfg(target_os = "linux")]
    #[test]
    #[ignore = "a helper the lock tests start as a child process"]
    fn hold_the_lock_named_in_the_environment() {
        use std::io::{Read, Write};
        use std::os::unix::fs::FileExt;
        let how = std::env::var("FOR_LOOP_TEST_LOCK").expect("started by the lock tests");
        let (how, path) = how.split_once(':').unwrap();
        let path = Path::new(path);
        let (me, parent) = (std::process::id(), std::os::unix::process::parent_id());
        let start = |pid: u32| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            stat.rsplit_once(')').unwrap().1.split_whitespace().nth(19).unwrap().parse::<u64>().unwrap()
        };
        let raw = || {
            let file =
                OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).unwrap();
            file.lock().unwrap();
            file
        };
        let _held: Box<dyn std::any::Any> = match how {
            "live" => Box::new(StateLock::acquire(path, Duration::ZERO, Duration::ZERO).unwrap()),
            "reused" | "forged" => {
                let file = raw();
                let record = if how == "reused" {
                    format!("{me} {}\n", start(me) + 1)
                } else {
                    format!("{parent} {}\n", start(parent))
                };
                file.set_len(0).unwrap();
                file.write_all_at(record.as_bytes(), 0).unwrap();
                Box::new(file)
            }
            "ended" => {
                let file = raw();
                file.write_all_at(format!("{me} {}\n", start(me)).as_bytes(), 0).unwrap();
                // Never waited for: it is to outlive this process, holding the lock it inherited.
                #[allow(clippy::zombie_processes)]
                let heir = std::process::Command::new("sleep").arg("600").stdin(file).spawn().unwrap();
                println!("\nheld {}", heir.id());
                return;
            }
            other => panic!("no way to hold a lock called {other}"),
        };
        println!("\nheld {me}");
        std::io::stdout().flush().unwrap();
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    }

    /// The failure: a stop took the lock from a user's cancel slowed on a loaded machine.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_live_for_loop_holder_is_waited_for_and_never_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let (mut child, said) = holder(&path, "live");
        let pid = said.strip_prefix("held ").unwrap().to_string();
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let theirs = inode(&path);
        let started = Instant::now();
        let busy = StateLock::acquire(&path, Duration::ZERO, Duration::from_millis(300)).unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(300));
        let said = busy.to_string();
        assert!(matches!(busy, LockError::Busy { .. }), "{said}");
        assert!(said.starts_with(&format!("for-loop's own process {pid} (")), "{said}");
        assert!(said.contains("never takes the lock from one of its own commands"), "{said}");
        assert!(said.contains(&format!("(kill {pid})")), "{said}");
        assert_eq!(inode(&path), theirs, "the holder's lock file was left in place");

        // Stopped with a signal, it is not at work: the agent could stall every stop so.
        let stopped = nix::unistd::Pid::from_raw(pid.parse().unwrap());
        nix::sys::signal::kill(stopped, nix::sys::signal::Signal::SIGSTOP).unwrap();
        let taken = StateLock::acquire(&path, Duration::ZERO, Duration::from_secs(600));
        let said = taken.unwrap().taken_over().unwrap().to_string();
        assert!(said.contains(&format!("process {pid} (")) && said.contains(", stopped"), "{said}");
        nix::sys::signal::kill(stopped, nix::sys::signal::Signal::SIGCONT).unwrap();
        drop(child.stdin.take());
        child.wait().unwrap();
        let (mut child, said) = holder(&path, "live");
        assert!(said.starts_with("held "), "{said}");

        // Waited for (with the wait for anyone else long gone), the lock is taken once it is free.
        let waiting = {
            let path = path.clone();
            thread::spawn(move || {
                StateLock::acquire(&path, Duration::ZERO, Duration::from_secs(600))
                    .map(|l| l.taken_over().map(String::from))
            })
        };
        thread::sleep(Duration::from_millis(200));
        drop(child.stdin.take());
        child.wait().unwrap();
        assert_eq!(waiting.join().unwrap().unwrap(), None, "not taken over");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_reused_pid_or_a_forged_record_does_not_pass_for_a_for_loop_holder() {
        for how in ["reused", "forged"] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("state.md.lock");
            let (mut child, said) = holder(&path, how);
            let pid = said.strip_prefix("held ").unwrap().to_string();
            let lock = StateLock::acquire(&path, Duration::ZERO, Duration::from_secs(600)).unwrap();
            let said = lock.taken_over().unwrap();
            assert!(said.starts_with(&format!("process {pid} (")), "{how}: {said}");
            assert!(said.contains("not the for-loop process its record names"), "{how}: {said}");
            assert!(said.contains("for-loop took the lock over"), "{how}: {said}");
            drop(child.stdin.take());
            child.wait().unwrap();
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_lock_whose_taker_has_ended_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let (mut child, said) = holder(&path, "ended");
        child.wait().unwrap();
        let heir: i32 = said.strip_prefix("held ").unwrap().parse().unwrap();
        let lock = StateLock::acquire(&path, Duration::ZERO, Duration::from_secs(600));
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(heir), nix::sys::signal::Signal::SIGKILL);
        let said = lock.unwrap().taken_over().unwrap().to_string();
        assert!(said.contains("has ended") && said.contains("for-loop took the lock over"), "{said}");
    }
}
