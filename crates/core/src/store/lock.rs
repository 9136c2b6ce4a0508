//! An exclusive lock on a loop, held while its state is read and written.
//!
//! The lock is taken on a sidecar file, never on the state file itself: the state is replaced by
//! a rename, which would silently drop a lock held on the old file.
//!
//! for-loop's own commands hold the lock for milliseconds (verify runs without it), so a lock
//! still held after the wait is not one of them at work: it is a stuck or hostile process (an
//! agent can run `flock state.md.lock sleep 1d` in the background to make every stop fail). The
//! lock is then taken over: the lock file is unlinked and a new one locked, and the caller is told
//! who held it. Every acquirer checks, once it holds a lock, that its file is still the one at the
//! path, so two of them never both believe they hold it.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// The longest a hook or command waits for a loop's lock before giving up.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(3);

use thiserror::Error;

/// How often a lock changes hands before acquiring gives up.
const ATTEMPTS: usize = 4;

#[derive(Debug, Error)]
pub(crate) enum LockError {
    #[error(
        "the loop's lock {path} kept changing hands and could not be taken; if a for-loop command \
         is stuck, end it"
    )]
    Contended { path: String },
    #[error("could not open the lock file {path}: {source}")]
    Io { path: String, source: io::Error },
}

thread_local! {
    /// The lock files this thread holds. A note written by code that runs while its caller
    /// holds the loop's lock appends under that hold instead of waiting on itself
    /// ([`crate::store::transaction::note_best_effort`]).
    static HELD: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
}

/// Held until dropped, by the thread that took it.
#[derive(Debug)]
pub(crate) struct StateLock {
    _file: File,
    taken_over: Option<String>,
    path: PathBuf,
    /// Not `Send`: [`HELD`] is per thread, so the lock must be released where it was taken.
    _here: PhantomData<*const ()>,
}

impl StateLock {
    /// Waits up to `wait` for the lock, then takes it over from whoever holds it. Hooks must not
    /// hang, so there is no unbounded wait.
    pub(in crate::store) fn acquire(path: &Path, wait: Duration) -> Result<StateLock, LockError> {
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
            let deadline = Instant::now() + wait;
            let locked = loop {
                match file.try_lock() {
                    Ok(()) => break true,
                    Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                        thread::sleep(Duration::from_millis(10));
                    }
                    Err(TryLockError::WouldBlock) => break false,
                    Err(TryLockError::Error(e)) => return Err(io_error(e)),
                }
            };
            if locked && platform::is_at(&file, path) {
                return Ok(StateLock::held(file, path, taken_over));
            }
            if !locked {
                let holder = platform::holder(&file).unwrap_or_else(|| "a process".into());
                // Only the file waited on is unlinked: another acquirer may have replaced it already.
                if platform::is_at(&file, path) {
                    let _ = fs::remove_file(path);
                }
                taken_over = Some(format!(
                    "{holder} held the loop's lock {} for over {} s, longer than any for-loop command \
                     holds it; for-loop took the lock over",
                    path.display(),
                    wait.as_secs_f32()
                ));
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
        platform::is_at(&file, path).then(|| StateLock::held(file, path, None))
    }

    fn held(file: File, path: &Path, taken_over: Option<String>) -> StateLock {
        HELD.with(|held| held.borrow_mut().push(path.to_path_buf()));
        StateLock { _file: file, taken_over, path: path.to_path_buf(), _here: PhantomData }
    }

    /// Whether this thread holds the lock at `path`.
    pub(in crate::store) fn held_here(path: &Path) -> bool {
        HELD.with(|held| held.borrow().iter().any(|p| p == path))
    }

    /// Who held the lock when it had to be taken over, in words; `None` when it was free in time.
    pub(crate) fn taken_over(&self) -> Option<&str> {
        self.taken_over.as_deref()
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|p| *p == self.path) {
                held.remove(at);
            }
        });
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

    /// The process holding a lock on `file`, as `process 1234 (name)`, from `/proc/locks`.
    pub(super) fn holder(file: &File) -> Option<String> {
        let meta = file.metadata().ok()?;
        let dev = meta.dev();
        let id =
            format!("{:02x}:{:02x}:{}", nix::sys::stat::major(dev), nix::sys::stat::minor(dev), meta.ino());
        let locks = fs::read_to_string("/proc/locks").ok()?;
        let pid = locks.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().filter(|f| *f != "->").collect();
            (fields.get(5) == Some(&id.as_str())).then(|| fields.get(4).map(ToString::to_string)).flatten()
        })?;
        if pid == std::process::id().to_string() {
            return Some("this process".into());
        }
        let name = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        Some(format!("process {pid} ({})", name.trim()))
    }
}

#[cfg(not(unix))]
mod platform {
    use std::fs::File;
    use std::path::Path;

    pub(super) fn is_at(_file: &File, path: &Path) -> bool {
        path.is_file()
    }

    pub(super) fn holder(_file: &File) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_exclusive_and_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let held = StateLock::acquire(&path, Duration::ZERO).unwrap();
        assert_eq!(held.taken_over(), None);
        drop(held);
        assert_eq!(StateLock::acquire(&path, Duration::ZERO).unwrap().taken_over(), None);
    }

    #[test]
    fn a_lock_held_past_the_wait_is_taken_over_and_its_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let squatter = OpenOptions::new().create(true).truncate(false).write(true).open(&path).unwrap();
        squatter.lock().unwrap();
        let started = Instant::now();
        let taken = StateLock::acquire(&path, Duration::from_millis(100)).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(100));
        let said = taken.taken_over().unwrap();
        assert!(said.contains("held the loop's lock") && said.contains("took the lock over"), "{said}");
        #[cfg(target_os = "linux")]
        assert!(said.starts_with("this process"), "{said}");
        // The next acquirer waits for the new holder, not for the squatter.
        assert!(StateLock::acquire(&path, Duration::from_millis(50)).unwrap().taken_over().is_some());
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
        assert!(StateLock::held_here(&path));
        drop(lock);
        assert!(!StateLock::held_here(&path));
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        assert!(StateLock::try_acquire(&path, Duration::ZERO).is_none(), "a directory is not moved aside");
    }

    #[test]
    fn only_the_thread_that_holds_a_lock_counts_as_holding_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let held = StateLock::acquire(&path, Duration::ZERO).unwrap();
        assert!(StateLock::held_here(&path));
        let elsewhere = path.clone();
        assert!(!thread::spawn(move || StateLock::held_here(&elsewhere)).join().unwrap());
        drop(held);
        assert!(!StateLock::held_here(&path));
    }

    #[test]
    fn a_directory_in_place_of_the_lock_file_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        fs::create_dir_all(&path).unwrap();
        let lock = StateLock::acquire(&path, Duration::ZERO).unwrap();
        assert!(lock.taken_over().unwrap().contains("a directory stood where"), "{:?}", lock.taken_over());
        assert!(path.is_file());
    }
}
