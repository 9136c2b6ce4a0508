//! The mark of the driver running a loop (`driver.pid` in its folder): `PID START`, the driver's
//! process id and its start time, so that a second driver (a `--resume` typed while the one a
//! handoff started runs) refuses rather than judging the same loop twice.
//!
//! A mark counts only when it is proven: the process it names runs, started when the mark says
//! (a pid reused since is another process), and is a `loop-hook run` of this loop (its program
//! and arguments). Anything else (a dead pid, a live `sleep`, a reused pid, text that is no mark)
//! is replaced by the driver taking the loop, which records why (`driver_mark_replaced`): a mark
//! the agent wrote naming any live process used to keep every driver out, while
//! `/for-loop:handoff` said the loop ran.
//!
//! Where `/proc` cannot be read (macOS), a live pid counts, as nothing more can be known of it;
//! on Windows no pid can be checked and a mark is always taken over.

use std::path::{Path, PathBuf};

use crate::store::LoopPaths;
use crate::store::lock::{LockError, StateLock};
use crate::store::transaction::{NOTE_WAIT, Transaction};
use crate::support::{Seen, process};

/// A mark as written: the driver's pid and start time (`None`: not readable here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) pid: u32,
    pub(crate) started: Option<u64>,
}

impl Mark {
    fn parse(text: &str) -> Option<Mark> {
        let mut words = text.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        let started = match words.next() {
            None => None,
            Some(word) => Some(word.parse().ok()?),
        };
        words.next().is_none().then_some(Mark { pid, started })
    }

    fn render(self) -> String {
        match self.started {
            Some(started) => format!("{} {started}\n", self.pid),
            None => format!("{}\n", self.pid),
        }
    }
}

/// What a mark found in a loop's folder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// No mark.
    None,
    /// A running `loop-hook run` of this loop holds it (or, where `/proc` cannot be read, a live
    /// pid).
    Held(u32),
    /// A mark that proves nothing, and why, in words.
    Stale(String),
}

/// The driver's mark, removed when it is dropped (the driver ends).
#[derive(Debug)]
pub(crate) struct DriverMark {
    path: PathBuf,
}

/// The mark's name in the loop's folder.
pub(in crate::store) const NAME: &str = "driver.pid";

fn path(paths: &LoopPaths) -> PathBuf {
    paths.dir.join(NAME)
}

/// What the mark in `paths`' folder is, for the loop known by `ids` (its session id, its loop id).
pub(crate) fn found(paths: &LoopPaths, ids: &[&str]) -> Found {
    // A link in its place proves nothing, whatever it points to.
    if std::fs::symlink_metadata(path(paths)).is_ok_and(|meta| !meta.file_type().is_file()) {
        return Found::Stale("the driver mark is not a file that can be read".into());
    }
    let Ok(bytes) = crate::support::read::bounded_read::read(&path(paths), 256) else {
        return if std::fs::symlink_metadata(path(paths)).is_ok() {
            Found::Stale("the driver mark is not a file that can be read".into())
        } else {
            Found::None
        };
    };
    let text = String::from_utf8_lossy(&bytes);
    let Some(mark) = Mark::parse(&text) else {
        return Found::Stale(format!(
            "the driver mark holds no process id and start time ({:?})",
            clip(&text)
        ));
    };
    judge(mark, process::look(mark.pid), ids)
}

/// Whether `mark` is proven by what `seen` shows of its process.
fn judge(mark: Mark, seen: Seen, ids: &[&str]) -> Found {
    let pid = mark.pid;
    match seen {
        Seen::Gone => Found::Stale(format!("the driver mark names process {pid}, which is gone")),
        // Where only liveness can be asked (macOS) a live pid holds, as nothing more is known;
        // where not even that can (Windows), no mark holds.
        Seen::Unknown if cfg!(unix) => Found::Held(pid),
        Seen::Unknown => {
            Found::Stale(format!("the driver mark names process {pid}, which cannot be checked here"))
        }
        Seen::Running(process) => {
            if mark.started.is_some_and(|started| started != process.started) {
                return Found::Stale(format!(
                    "the driver mark names process {pid}, but that pid is now another process (started at \
                     another time)"
                ));
            }
            if !is_driver_of(&process, ids) {
                return Found::Stale(format!(
                    "the driver mark names process {pid}, which is not loop-hook run of this loop (it is `{}`)",
                    clip(&process.args.join(" "))
                ));
            }
            Found::Held(pid)
        }
    }
}

/// Whether `process` is `loop-hook run` of the loop known by `ids`: its program (where it can be
/// read) and its first argument's name are loop-hook's, its command is `run`, and a `--resume`
/// it was given names this loop.
fn is_driver_of(process: &process::Process, ids: &[&str]) -> bool {
    let named = |name: &str| {
        Path::new(name).file_name().is_some_and(|file| file.to_string_lossy().starts_with("loop-hook"))
    };
    if process.program.as_deref().is_some_and(|program| !named(program)) {
        return false;
    }
    let args = &process.args;
    if !args.first().is_some_and(|first| named(first)) || args.get(1).map(String::as_str) != Some("run") {
        return false;
    }
    match args.iter().position(|arg| arg == "--resume") {
        Some(at) => args.get(at + 1).is_some_and(|resumed| ids.contains(&resumed.as_str())),
        None => true,
    }
}

fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Why a driver cannot take the mark.
#[derive(Debug)]
pub(crate) enum NotTaken {
    /// A proven driver, another process, holds it.
    Held(u32),
    /// The loop's lock, under which the mark is read and written, could not be taken.
    Lock(LockError),
}

impl DriverMark {
    /// Takes the mark for this process, under the loop's lock (the mark is read, judged and
    /// written again: two drivers started at once must not both take it). Refused when a proven
    /// driver holds it; otherwise the mark, and why a mark that was there did not count, for the
    /// ledger.
    pub(crate) fn take(paths: &LoopPaths, ids: &[&str]) -> Result<(DriverMark, Option<String>), NotTaken> {
        let _held = Transaction::lock(paths).map_err(NotTaken::Lock)?;
        let own = std::process::id();
        let replaced = match found(paths, ids) {
            Found::Held(pid) if pid != own => return Err(NotTaken::Held(pid)),
            Found::Held(_) | Found::None => None,
            Found::Stale(why) => Some(why),
        };
        let mark = Mark { pid: own, started: process::own_start() };
        let path = path(paths);
        if let Ok(meta) = std::fs::symlink_metadata(&path)
            && !meta.is_file()
        {
            let _ = crate::store::move_aside(&path, jiff::Timestamp::now());
        }
        let _ = crate::store::private::create_dir_all(&paths.dir);
        let _ = crate::store::write_atomic(&path, mark.render().as_bytes(), false);
        Ok((DriverMark { path }, replaced))
    }
}

impl Drop for DriverMark {
    /// Removes the mark if it is still this process's, under the loop's lock taken within a
    /// note's wait; a mark left behind names a process that is gone, which the next driver
    /// replaces.
    fn drop(&mut self) {
        let Some(dir) = self.path.parent() else { return };
        let Some(_held) = StateLock::try_acquire(&LoopPaths::in_dir(dir.to_path_buf(), None).lock, NOTE_WAIT)
        else {
            return;
        };
        if own_mark(&self.path).is_some_and(|mark| mark.pid == std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The mark at `path`, if it is a file that holds one.
fn own_mark(path: &Path) -> Option<Mark> {
    let bytes = crate::store::read_regular(path, 256).ok().flatten()?;
    Mark::parse(&String::from_utf8_lossy(&bytes))
}

/// Whether the driver `pid` a handoff started, and has not reaped (so its pid is not reused),
/// has written its mark: it has taken the loop.
pub(crate) fn taken_by(paths: &LoopPaths, pid: u32) -> bool {
    own_mark(&path(paths)).is_some_and(|mark| mark.pid == pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(program: &str, args: &[&str], started: u64) -> Seen {
        Seen::Running(process::Process {
            started,
            program: Some(program.into()),
            args: args.iter().map(|a| (*a).to_string()).collect(),
        })
    }

    #[test]
    fn a_mark_is_read_with_or_without_its_start_time_and_garbage_is_none() {
        assert_eq!(Mark::parse("12 345\n"), Some(Mark { pid: 12, started: Some(345) }));
        assert_eq!(Mark::parse("12"), Some(Mark { pid: 12, started: None }));
        for garbage in ["", "x", "12 y", "12 3 4", "-1", "99999999999999"] {
            assert_eq!(Mark::parse(garbage), None, "{garbage}");
        }
        let mark = Mark { pid: 7, started: Some(9) };
        assert_eq!(Mark::parse(&mark.render()), Some(mark));
    }

    /// A link, a directory or text that is no mark in the mark's place proves nothing: the
    /// driver taking the loop moves it aside (kept) and says why; a link is never followed.
    #[test]
    #[cfg(unix)]
    fn what_is_not_a_mark_is_replaced_with_why_and_kept_aside() {
        let root = tempfile::tempdir().unwrap();
        let paths = crate::store::Store::at(root.path().join("for-loop")).paths("run-l1");
        paths.make_dir().unwrap();
        let own = format!("{} {}\n", std::process::id(), process::own_start().unwrap_or(0));
        let elsewhere = root.path().join("elsewhere");
        std::fs::write(&elsewhere, &own).unwrap();
        std::os::unix::fs::symlink(&elsewhere, path(&paths)).unwrap();
        assert_eq!(
            found(&paths, &["run-l1"]),
            Found::Stale("the driver mark is not a file that can be read".into())
        );
        let (mark, replaced) = DriverMark::take(&paths, &["run-l1"]).unwrap();
        assert!(replaced.is_some_and(|why| why.contains("not a file")));
        assert!(std::fs::symlink_metadata(path(&paths)).unwrap().is_file(), "the link was replaced");
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), own, "its target untouched");
        drop(mark);
        assert!(!path(&paths).exists(), "the driver's own mark goes with it");
        std::fs::write(path(&paths), "not a mark").unwrap();
        assert!(matches!(found(&paths, &["run-l1"]), Found::Stale(why) if why.contains("no process id")));
        std::fs::remove_file(path(&paths)).unwrap();
        std::fs::create_dir(path(&paths)).unwrap();
        let (_mark, replaced) = DriverMark::take(&paths, &["run-l1"]).unwrap();
        assert!(replaced.is_some());
        let aside = std::fs::read_dir(&paths.dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("driver.pid.aside-"))
            .count();
        assert_eq!(aside, 2, "the link and the directory are kept aside");
    }

    #[test]
    fn only_loop_hook_run_of_this_loop_started_when_the_mark_says_holds_it() {
        let ids = ["run-l1", "l1"];
        let mark = Mark { pid: 5, started: Some(100) };
        let driver = running("loop-hook", &["/x/loop-hook", "run", "--resume", "run-l1"], 100);
        assert_eq!(judge(mark, driver.clone(), &ids), Found::Held(5));
        assert_eq!(
            judge(mark, running("loop-hook", &["loop-hook", "run", "task"], 100), &ids),
            Found::Held(5)
        );
        let stale = |seen: Seen| matches!(judge(mark, seen, &ids), Found::Stale(_));
        assert!(stale(Seen::Gone));
        assert!(stale(running("sleep", &["sleep", "100"], 100)), "a foreign process");
        assert!(stale(running("loop-hook", &["/x/loop-hook", "run", "--resume", "run-l1"], 101)), "reused");
        assert!(
            stale(running("loop-hook", &["loop-hook", "run", "--resume", "run-other"], 100)),
            "another loop"
        );
        assert!(stale(running("loop-hook", &["loop-hook", "status"], 100)), "not a run");
        assert!(stale(running("python3", &["loop-hook", "run"], 100)), "a program named after it");
        if cfg!(unix) {
            assert_eq!(judge(mark, Seen::Unknown, &ids), Found::Held(5), "nothing more can be known");
        }
    }
}
