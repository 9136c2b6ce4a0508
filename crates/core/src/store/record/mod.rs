//! The loop's files beside its state and ledger: each a named record that only the store
//! writes, so that a path into a loop's directory is spelled in one place and every write of it
//! is atomic (`tests/layers.rs` fails on a loop file's name, or a write of one, outside `store`).
//!
//! Who may write which, and whether under the loop's lock: a record read, changed and written
//! again (the notices) only under the lock; a record whose writer holds the loop's transaction
//! ([`Transaction::write_record`]) under it; a hint written whole by a hook that holds nothing
//! ([`LoopFile::write`]) atomically, without the lock: a hook must not wait on a judgment for a
//! memo whose loss the state and ledger survive. The directory as a whole is moved only through
//! [`directory`], under its lock.

pub(crate) mod directory;
pub(crate) mod notice;

use std::io;
use std::path::{Component, Path, PathBuf};

use jiff::Timestamp;

use crate::store::transaction::Transaction;
use crate::support::read::bounded_read;

/// A file a loop keeps in its directory, other than the state, the ledger, the journal and the
/// lock (those are the transaction's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LoopFile {
    /// Notes for the user, shown at the next stop or prompt ([`notice::Notice`]).
    Notices,
    /// The last `/for-loop` command's outcome, for the host's command file to show.
    PromptRecord,
    /// The digest of the reason Copilot CLI's last stop was blocked with.
    BlockMemo,
    /// The run driver's next prompt: the judge's last re-injection.
    NextPrompt,
    /// The notes each of the run driver's iterations leaves for the next one (the agent writes
    /// them; the store only begins the file).
    Progress,
    /// The host process that sent the session's last event.
    HostProcess,
    /// The run driver's settings, so that `loop-hook run --resume` runs the same agent.
    RunRecord,
    /// The loop's HTML report, when `loop-hook report` is not told where else to write it.
    Report,
}

impl LoopFile {
    /// Its name in the loop's directory.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            LoopFile::Notices => "notice.json",
            LoopFile::PromptRecord => "prompt.json",
            LoopFile::BlockMemo => "copilot-last-block",
            LoopFile::NextPrompt => "next-prompt.md",
            LoopFile::Progress => "progress.md",
            LoopFile::HostProcess => "host-process.json",
            LoopFile::RunRecord => "run.json",
            LoopFile::Report => "report.html",
        }
    }

    /// Its path in the loop's directory `dir`: for reading, or to name it to someone else
    /// (never to write it: [`LoopFile::write`] does).
    pub(crate) fn path(self, dir: &Path) -> PathBuf {
        dir.join(self.name())
    }

    /// Its bytes, at most `limit` of them; `None` when it is missing or cannot be read as the
    /// record (for a hint, where either means the same). Through `bounded_read`: a FIFO or a
    /// device put in its place must not hang a hook.
    pub(crate) fn read(self, dir: &Path, limit: u64) -> Option<Vec<u8>> {
        self.read_record(dir, limit).ok().flatten()
    }

    /// Its bytes, `None` when there is nothing at its path, or why what is there is not the
    /// record for-loop wrote, in words: something other than a regular file (a directory, a
    /// link, a FIFO) or a file over `limit` bytes.
    pub(crate) fn read_record(self, dir: &Path, limit: u64) -> Result<Option<Vec<u8>>, String> {
        let path = self.path(dir);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{} cannot be looked at ({e})", path.display())),
        };
        if !meta.file_type().is_file() {
            return Err(format!("{} is {}, not a file", path.display(), super::describe(&meta)));
        }
        bounded_read::read(&path, limit)
            .map(Some)
            .map_err(|e| format!("{} cannot be read ({e})", path.display()))
    }

    /// Replaces it with `bytes`, atomically, holding no lock: for a hint written whole outside
    /// any transaction (the last command's record, Copilot CLI's block memo, the run driver's
    /// next prompt, the host process, the report). A caller holding the loop's transaction
    /// writes through [`Transaction::write_record`]. A loop's directory that is gone is not made
    /// again for a hint: the write fails.
    pub(crate) fn write(self, dir: &Path, bytes: &[u8]) -> io::Result<()> {
        super::write_atomic(&self.path(dir), bytes, false)
    }

    /// [`LoopFile::write`], making the loop's directory first (its user's alone) when it is
    /// missing: for the record of a command that may have made no loop (a refused start).
    pub(crate) fn write_making_dir(self, dir: &Path, bytes: &[u8]) -> io::Result<()> {
        super::private::create_dir_all(dir)?;
        self.write(dir, bytes)
    }

    /// Writes `bytes` unless something is there already, atomically: two writers that begin it
    /// at once leave one whole file, and one the agent began is kept.
    pub(crate) fn begin(self, dir: &Path, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let path = self.path(dir);
        if std::fs::symlink_metadata(&path).is_ok() {
            return Ok(());
        }
        let mut temp = tempfile::Builder::new().prefix(&super::temp_prefix(&path)).tempfile_in(dir)?;
        temp.write_all(bytes)?;
        match temp.persist_noclobber(&path) {
            Ok(_) => Ok(()),
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e.error),
        }
    }

    /// Removes it; a file already gone is not an error.
    pub(crate) fn remove(self, dir: &Path) -> io::Result<()> {
        super::remove_if_present(&self.path(dir))
    }

    /// Moves whatever is at its path (a corrupt file, a directory, a link) aside, kept beside it
    /// as `<name>.aside-<seconds>`; returns where.
    pub(in crate::store) fn set_aside(self, dir: &Path, now: Timestamp) -> io::Result<PathBuf> {
        super::move_aside(&self.path(dir), now)
    }
}

impl Transaction<'_> {
    /// Replaces the loop's record `file` with `bytes`, atomically, under the lock this
    /// transaction holds.
    pub(crate) fn write_record(&self, file: LoopFile, bytes: &[u8]) -> io::Result<()> {
        file.write_making_dir(&self.paths().dir, bytes)
    }

    /// Keeps the oracle's files as they are now (read from the project `cwd`) in the loop's
    /// directory, so that a changed one can be restored even outside git; `false` when they are
    /// too large to keep, or there are none. Each file is written whole, its user's alone.
    pub(crate) fn save_oracle_originals(
        &self,
        oracle: &crate::checks::Oracle,
        cwd: &Path,
    ) -> io::Result<bool> {
        let Some(files) = oracle.originals(cwd)? else { return Ok(false) };
        let root = oracle_originals(&self.paths().dir);
        for (relative, bytes) in files {
            // The oracle names files inside the project; anything else is not kept.
            if !Path::new(&relative).components().all(|c| matches!(c, Component::Normal(_))) {
                continue;
            }
            let target = root.join(&relative);
            if let Some(parent) = target.parent() {
                super::private::create_dir_all(parent)?;
            }
            super::write_atomic(&target, &bytes, false)?;
        }
        super::private::tighten(&root, &[]);
        Ok(true)
    }
}

/// Where the log `name` of the loop in `dir` is kept: the run driver's, and each iteration's
/// agent output.
pub(crate) fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join("logs").join(name)
}

/// Opens the log at `path` (from [`log_path`]) to be written as its output comes, emptied
/// first unless `append`. A log is a stream followed live (`loop-hook status`) and never read to
/// decide anything, so it is neither written whole nor under the lock; it is its user's alone.
pub(crate) fn open_log(path: &Path, append: bool) -> io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        super::private::create_dir_all(dir)?;
    }
    let mut options = super::private::file_options();
    options.create(true);
    if append {
        options.append(true)
    } else {
        options.write(true).truncate(true)
    };
    options.open(path)
}

/// Where the oracle's originals are kept in the loop's directory `dir` (for reading them back).
pub(crate) fn oracle_originals(dir: &Path) -> PathBuf {
    dir.join("oracle")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_written_whole_read_bounded_begun_once_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(LoopFile::NextPrompt.read(dir.path(), 64), None);
        LoopFile::NextPrompt.write(dir.path(), b"fix the test").unwrap();
        assert_eq!(LoopFile::NextPrompt.read(dir.path(), 64).as_deref(), Some(&b"fix the test"[..]));
        LoopFile::Progress.begin(dir.path(), b"# Progress\n").unwrap();
        LoopFile::Progress.begin(dir.path(), b"again").unwrap();
        assert_eq!(LoopFile::Progress.read(dir.path(), 64).as_deref(), Some(&b"# Progress\n"[..]));
        LoopFile::NextPrompt.remove(dir.path()).unwrap();
        LoopFile::NextPrompt.remove(dir.path()).unwrap();
        assert!(!LoopFile::NextPrompt.path(dir.path()).exists());
        // A hint never makes a loop's directory again; a command's record may.
        let gone = dir.path().join("gone");
        assert!(LoopFile::BlockMemo.write(&gone, b"x").is_err());
        assert!(!gone.exists());
        LoopFile::PromptRecord.write_making_dir(&gone, b"{}").unwrap();
        assert_eq!(LoopFile::PromptRecord.read(&gone, 8).as_deref(), Some(&b"{}"[..]));
    }

    /// What is in a record's place and is not the record (a directory, a link, a FIFO, a file
    /// past the limit) is told in words, and left as it is.
    #[test]
    fn what_is_not_the_record_is_named_and_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = LoopFile::RunRecord.path(dir.path());
        assert_eq!(LoopFile::RunRecord.read_record(dir.path(), 8), Ok(None));
        std::fs::write(&path, "123456789").unwrap();
        let why = LoopFile::RunRecord.read_record(dir.path(), 8).unwrap_err();
        assert!(why.contains("cannot be read") && why.contains("8 bytes"), "{why}");
        assert_eq!(LoopFile::RunRecord.read(dir.path(), 8), None);
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let why = LoopFile::RunRecord.read_record(dir.path(), 8).unwrap_err();
        assert!(why.ends_with("is a directory, not a file"), "{why}");
        assert!(path.is_dir());
        #[cfg(unix)]
        {
            std::fs::remove_dir(&path).unwrap();
            std::fs::write(dir.path().join("elsewhere"), "{}").unwrap();
            std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
            let why = LoopFile::RunRecord.read_record(dir.path(), 8).unwrap_err();
            assert!(why.ends_with("is a symbolic link, not a file"), "{why}");
            std::fs::remove_file(&path).unwrap();
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
            let why = LoopFile::RunRecord.read_record(dir.path(), 8).unwrap_err();
            assert!(why.contains("a special file"), "{why}");
        }
    }

    /// A record begun by someone else (the agent's own notes, or a link it put there) is kept.
    #[test]
    fn a_begun_record_is_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(LoopFile::Progress.path(dir.path()), "the agent's").unwrap();
        LoopFile::Progress.begin(dir.path(), b"ours").unwrap();
        assert_eq!(std::fs::read_to_string(LoopFile::Progress.path(dir.path())).unwrap(), "the agent's");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(leftovers.len(), 1, "no temporary left: {leftovers:?}");
    }

    #[test]
    fn a_record_is_written_under_the_held_transaction_and_the_originals_stay_in_their_folder() {
        use crate::store::Store;
        let root = tempfile::tempdir().unwrap();
        let paths = Store::at(root.path().join("for-loop")).paths("s");
        let held = Transaction::lock(&paths).unwrap();
        held.write_record(LoopFile::RunRecord, b"{}").unwrap();
        assert_eq!(LoopFile::RunRecord.read(&paths.dir, 8).as_deref(), Some(&b"{}"[..]));
        let project = root.path().join("project");
        std::fs::create_dir_all(project.join("scripts")).unwrap();
        std::fs::write(project.join("scripts/check.sh"), "exit 1").unwrap();
        let oracle =
            crate::checks::oracle::Oracle::capture(&project, Some("sh scripts/check.sh"), &[], false);
        assert!(held.save_oracle_originals(&oracle, &project).unwrap());
        let kept = oracle_originals(&paths.dir).join("scripts/check.sh");
        assert_eq!(std::fs::read_to_string(kept).unwrap(), "exit 1");
        let none = crate::checks::oracle::Oracle::capture(&project, Some("true"), &[], false);
        assert!(!held.save_oracle_originals(&none, &project).unwrap());
    }
}
