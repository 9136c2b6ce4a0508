//! The loop's files beside its state and ledger: each a named record that only the store
//! writes, so that a path into a loop's directory is spelled in one place and every write of it
//! is atomic (`tests/layers.rs` fails on a loop file's name, or a write of one, outside `store`).

pub(crate) mod notice;

use std::io;
use std::path::{Path, PathBuf};

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
        }
    }

    /// Its path in the loop's directory `dir`: for reading, or to name it to someone else
    /// (never to write it: [`LoopFile::write`] does).
    pub(crate) fn path(self, dir: &Path) -> PathBuf {
        dir.join(self.name())
    }

    /// Its bytes, at most `limit` of them. Through `bounded_read`: a FIFO or a device put in its
    /// place must not hang a hook.
    pub(crate) fn read(self, dir: &Path, limit: u64) -> Option<Vec<u8>> {
        bounded_read::read(&self.path(dir), limit).ok()
    }

    /// Replaces it with `bytes`, atomically.
    pub(crate) fn write(self, dir: &Path, bytes: &[u8]) -> io::Result<()> {
        super::write_atomic(&self.path(dir), bytes, false)
    }

    /// Writes `bytes` unless the file is there already.
    pub(crate) fn begin(self, dir: &Path, bytes: &[u8]) -> io::Result<()> {
        if self.path(dir).exists() { Ok(()) } else { self.write(dir, bytes) }
    }

    /// Removes it; a file already gone is not an error.
    pub(crate) fn remove(self, dir: &Path) -> io::Result<()> {
        super::remove_if_present(&self.path(dir))
    }
}

/// Saves the oracle's files as they are now into the loop's directory, so that a changed one
/// can be restored even outside git; `false` when they are too large to keep.
pub(crate) fn save_oracle_originals(
    oracle: &crate::checks::oracle::Oracle,
    cwd: &Path,
    dir: &Path,
) -> io::Result<bool> {
    oracle.save_originals(cwd, &oracle_originals(dir))
}

/// Where the oracle's originals are kept in the loop's directory `dir`.
pub(crate) fn oracle_originals(dir: &Path) -> PathBuf {
    dir.join("oracle")
}

/// Moves a waiting loop's oracle originals (in `from`) to the loop that claims it (in `into`),
/// setting aside any the claimer had as `oracle.before-<seconds>`.
pub(crate) fn adopt_oracle_originals(from: &Path, into: &Path, now: jiff::Timestamp) -> io::Result<()> {
    let originals = oracle_originals(from);
    if originals.exists() {
        let target = oracle_originals(into);
        if target.exists() {
            std::fs::rename(&target, into.join(format!("oracle.before-{}", now.as_second())))?;
        }
        std::fs::rename(&originals, &target)?;
    }
    Ok(())
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
    }

    #[test]
    fn a_claim_takes_the_waiting_loops_originals_and_keeps_its_own_aside() {
        let root = tempfile::tempdir().unwrap();
        let (from, into) = (root.path().join("waiting"), root.path().join("session"));
        std::fs::create_dir_all(oracle_originals(&from)).unwrap();
        std::fs::create_dir_all(oracle_originals(&into)).unwrap();
        std::fs::write(oracle_originals(&from).join("t.sh"), "new").unwrap();
        adopt_oracle_originals(&from, &into, jiff::Timestamp::from_second(7).unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(oracle_originals(&into).join("t.sh")).unwrap(), "new");
        assert!(into.join("oracle.before-7").is_dir());
        assert!(!oracle_originals(&from).exists());
    }
}
