//! Watching the check's files while verify runs.
//!
//! The oracle is fingerprinted before verify and again after it; a check that differs at either
//! point does not count. A check that rewrites itself to pass and then puts itself back, or a
//! background job that swaps it for the length of one verify run, is the same at both points. On
//! Linux the hook therefore also watches, with inotify, every directory holding an oracle file
//! (and the loop's directory), from before verify starts until it ends: any write, attribute
//! change, creation, deletion or rename of an oracle file — or of a directory on its path — in
//! that window means the pass does not count.
//!
//! Elsewhere (macOS, Windows) only the two fingerprints are compared: a swap that is undone
//! within one verify run is not seen there. Reads are not events, so running the check is never
//! mistaken for changing it. If the kernel's event queue overflows, the watch says it cannot tell,
//! and the two fingerprints decide.

use std::collections::BTreeSet;
use std::path::Path;

use crate::checks::oracle::Oracle;

/// What the watch saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Touched {
    /// Oracle files (relative paths) written, replaced, moved or deleted during verify.
    pub(crate) files: BTreeSet<String>,
}

pub(crate) struct OracleWatch {
    #[cfg(target_os = "linux")]
    inner: Option<linux::Watch>,
}

impl OracleWatch {
    /// Starts watching the oracle files of a loop in `cwd`. Never fails: without inotify (another
    /// OS, no watches left) the watch sees nothing and the fingerprints decide alone.
    pub(crate) fn start(cwd: &Path, oracle: &Oracle) -> OracleWatch {
        #[cfg(target_os = "linux")]
        {
            OracleWatch { inner: linux::Watch::start(cwd, oracle.files.keys()) }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (cwd, oracle);
            OracleWatch {}
        }
    }

    /// Stops watching and says which oracle files were touched.
    pub(crate) fn finish(self) -> Touched {
        #[cfg(target_os = "linux")]
        if let Some(watch) = self.inner {
            return watch.finish();
        }
        Touched::default()
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

    use super::Touched;

    pub(super) struct Watch {
        inotify: Inotify,
        /// Each watched directory, relative to the loop's directory (`""` for the directory itself).
        dirs: BTreeMap<WatchDescriptor, String>,
        files: BTreeSet<String>,
    }

    impl Watch {
        pub(super) fn start<'a>(cwd: &Path, files: impl Iterator<Item = &'a String>) -> Option<Watch> {
            let files: BTreeSet<String> = files.cloned().collect();
            if files.is_empty() {
                return None;
            }
            let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
            let mask = AddWatchFlags::IN_MODIFY
                | AddWatchFlags::IN_ATTRIB
                | AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_DELETE
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_MOVE_SELF
                | AddWatchFlags::IN_DONT_FOLLOW;
            // Every directory on the way to an oracle file, so that renaming a directory over
            // another is seen too.
            let mut dirs: BTreeSet<String> = BTreeSet::from([String::new()]);
            for file in &files {
                let mut prefix = String::new();
                for part in file.split('/').rev().skip(1).collect::<Vec<_>>().into_iter().rev() {
                    if !prefix.is_empty() {
                        prefix.push('/');
                    }
                    prefix.push_str(part);
                    dirs.insert(prefix.clone());
                }
            }
            let mut watched = BTreeMap::new();
            for dir in dirs {
                if let Ok(wd) = inotify.add_watch(&cwd.join(&dir), mask) {
                    watched.insert(wd, dir);
                }
            }
            Some(Watch { inotify, dirs: watched, files })
        }

        pub(super) fn finish(self) -> Touched {
            let mut touched = Touched::default();
            // Non-blocking: an error is an empty queue.
            while let Ok(events) = self.inotify.read_events() {
                if events.is_empty() {
                    break;
                }
                for event in events {
                    if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                        // Cannot tell what happened: leave it to the fingerprints.
                        continue;
                    }
                    let Some(dir) = self.dirs.get(&event.wd) else { continue };
                    let path = match &event.name {
                        Some(name) if dir.is_empty() => name.to_string_lossy().into_owned(),
                        Some(name) => format!("{dir}/{}", name.to_string_lossy()),
                        // The watched directory itself was moved or deleted.
                        None => dir.clone(),
                    };
                    if event.mask.contains(AddWatchFlags::IN_IGNORED) && event.name.is_none() {
                        // A watch going away after its directory is deleted: the deletion itself
                        // came as its own event.
                        continue;
                    }
                    let under = |file: &String| {
                        *file == path || path.is_empty() || file.starts_with(&format!("{path}/"))
                    };
                    let moved_or_deleted =
                        event.mask.intersects(AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF);
                    if event.name.is_some() || moved_or_deleted {
                        touched.files.extend(self.files.iter().filter(|f| under(f)).cloned());
                    }
                }
            }
            touched
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::fs;

    use super::*;

    fn project() -> (tempfile::TempDir, Oracle) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("tests")).unwrap();
        fs::write(dir.path().join("check.sh"), "exit 1\n").unwrap();
        fs::write(dir.path().join("tests/a.rs"), "a").unwrap();
        fs::write(dir.path().join("src.rs"), "s").unwrap();
        let oracle = Oracle::capture(dir.path(), Some("sh check.sh"), &["tests/**".to_string()], false);
        (dir, oracle)
    }

    #[test]
    fn reading_and_running_the_check_and_changing_other_files_touch_nothing() {
        let (dir, oracle) = project();
        let watch = OracleWatch::start(dir.path(), &oracle);
        let _ = fs::read(dir.path().join("check.sh")).unwrap();
        let status = std::process::Command::new("sh").arg("check.sh").current_dir(dir.path()).status();
        assert!(status.is_ok());
        fs::write(dir.path().join("src.rs"), "changed").unwrap();
        fs::write(dir.path().join("new.txt"), "n").unwrap();
        assert_eq!(watch.finish(), Touched::default());
    }

    #[test]
    fn a_check_swapped_and_put_back_is_seen() {
        let (dir, oracle) = project();
        let watch = OracleWatch::start(dir.path(), &oracle);
        fs::write(dir.path().join("check.sh"), "exit 0\n").unwrap();
        fs::write(dir.path().join("check.sh"), "exit 1\n").unwrap();
        assert_eq!(watch.finish().files, BTreeSet::from(["check.sh".to_string()]));
    }

    #[test]
    fn a_rename_over_the_check_or_its_directory_is_seen() {
        let (dir, oracle) = project();
        let watch = OracleWatch::start(dir.path(), &oracle);
        fs::write(dir.path().join("evil.sh"), "exit 0\n").unwrap();
        fs::rename(dir.path().join("check.sh"), dir.path().join("kept.sh")).unwrap();
        fs::rename(dir.path().join("evil.sh"), dir.path().join("check.sh")).unwrap();
        fs::rename(dir.path().join("tests"), dir.path().join("tests.real")).unwrap();
        fs::create_dir(dir.path().join("tests")).unwrap();
        let touched = watch.finish().files;
        assert!(touched.contains("check.sh") && touched.contains("tests/a.rs"), "{touched:?}");
    }

    #[test]
    fn a_loop_without_oracle_files_watches_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let watch = OracleWatch::start(dir.path(), &Oracle::default());
        fs::write(dir.path().join("x"), "x").unwrap();
        assert_eq!(watch.finish(), Touched::default());
    }
}
