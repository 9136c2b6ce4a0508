//! An exclusive lock on a loop, held while its state is read and written.
//!
//! The lock is taken on a sidecar file, never on the state file itself: the state is replaced by
//! a rename, which would silently drop a lock held on the old file.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum LockError {
    #[error(
        "another process has held the loop's lock {path} for over {waited:?}; if no for-loop \
         command is running, that process is stuck: end it"
    )]
    Timeout { path: String, waited: Duration },
    #[error("could not open the lock file {path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Held until dropped.
#[derive(Debug)]
pub(crate) struct StateLock {
    _file: File,
}

impl StateLock {
    /// Waits up to `wait` for the lock. Hooks must not hang, so there is no unbounded wait.
    pub(crate) fn acquire(path: &Path, wait: Duration) -> Result<StateLock, LockError> {
        let io_error = |source| LockError::Io { path: path.display().to_string(), source };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_error)?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(StateLock { _file: file }),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(10));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(LockError::Timeout { path: path.display().to_string(), waited: wait });
                }
                Err(TryLockError::Error(e)) => return Err(io_error(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_times_out_and_is_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md.lock");
        let held = StateLock::acquire(&path, Duration::ZERO).unwrap();
        let started = Instant::now();
        let err = StateLock::acquire(&path, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, LockError::Timeout { .. }));
        assert!(started.elapsed() >= Duration::from_millis(100));
        drop(held);
        StateLock::acquire(&path, Duration::ZERO).unwrap();
    }
}
