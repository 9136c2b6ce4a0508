//! A loop's directory as a whole: made, archived, handed its waiting loop's originals, removed,
//! set aside. Each move is a function of the store taken under the loop's lock (a
//! [`Transaction`] is its receipt), so that no code outside `store` renames or deletes a loop's
//! files, and no stop reads a loop whose directory is half moved.

use std::fs;
use std::io;
use std::path::PathBuf;

use jiff::Timestamp;

use super::oracle_originals;
use crate::store::transaction::Transaction;
use crate::store::{LoopPaths, Store, private, remove_if_present};

/// Where the files of the loops a session ended are kept, under its directory.
const ARCHIVE: &str = "archive";
/// Where waiting loops nobody claimed in time are set aside, under the store's root.
const UNCLAIMED: &str = "unclaimed";

impl LoopPaths {
    /// Makes the loop's directory (and the store's above it), its user's alone. Taking the lock
    /// makes it too; a command calls this first to say plainly when it cannot.
    pub(crate) fn make_dir(&self) -> io::Result<()> {
        private::create_dir_all(&self.dir)
    }

    /// Whether the loop `loop_id` ended in this session and was archived here.
    pub(crate) fn archived(&self, loop_id: &str) -> bool {
        self.dir.join(ARCHIVE).join(loop_id).exists()
    }
}

impl Transaction<'_> {
    /// Moves the ended loop `loop_id`'s files (state, ledger, the oracle's originals) to its
    /// archive, so that a new loop can start in the same session; its last good copy is dropped.
    pub(crate) fn archive(&self, loop_id: &str) -> io::Result<PathBuf> {
        let paths = self.paths();
        let archive = paths.dir.join(ARCHIVE).join(loop_id);
        private::create_dir_all(&archive)?;
        fs::rename(&paths.state, archive.join("state.md"))?;
        if let Some(armed) = &paths.armed {
            remove_if_present(armed)?;
        }
        if paths.ledger.exists() {
            fs::rename(&paths.ledger, archive.join("ledger.jsonl"))?;
        }
        let originals = oracle_originals(&paths.dir);
        if originals.exists() {
            fs::rename(&originals, oracle_originals(&archive))?;
        }
        Ok(archive)
    }

    /// Moves the oracle's originals of the waiting loop `waiting` holds to this transaction's
    /// loop, which claims it; any this loop had are kept aside as `oracle.before-<seconds>`.
    pub(crate) fn adopt_oracle_originals(&self, waiting: &Transaction<'_>, now: Timestamp) -> io::Result<()> {
        let originals = oracle_originals(&waiting.paths().dir);
        if originals.exists() {
            let target = oracle_originals(&self.paths().dir);
            if target.exists() {
                fs::rename(&target, self.paths().dir.join(format!("oracle.before-{}", now.as_second())))?;
            }
            fs::rename(&originals, &target)?;
        }
        Ok(())
    }

    /// Removes the loop's whole directory: a waiting loop its session has claimed, or one a
    /// start created and could not start, which nobody else knows. The lock file goes with it;
    /// the next taker of the lock makes a new one.
    pub(crate) fn remove_loop(&self) -> io::Result<()> {
        match fs::remove_dir_all(&self.paths().dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Moves a waiting loop nobody claimed in time (or cancelled) to `unclaimed/` at the store's
    /// root, out of the stops' search; nothing is deleted.
    pub(crate) fn set_aside_unclaimed(&self, store: &Store) -> io::Result<()> {
        let dir = &self.paths().dir;
        let Some(name) = dir.file_name() else { return Ok(()) };
        let unclaimed = store.root().join(UNCLAIMED);
        private::create_dir_all(&unclaimed)?;
        fs::rename(dir, unclaimed.join(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;

    #[test]
    fn an_ended_loop_is_archived_with_its_ledger_and_originals() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::at(root.path().join("for-loop"));
        let paths = store.paths("s");
        let held = Transaction::lock(&paths).unwrap();
        held.commit(&sample(), &[]).unwrap();
        fs::write(&paths.ledger, "{}\n").unwrap();
        fs::create_dir_all(oracle_originals(&paths.dir)).unwrap();
        let archive = held.archive("loop-1").unwrap();
        assert!(archive.join("state.md").is_file() && archive.join("ledger.jsonl").is_file());
        assert!(oracle_originals(&archive).is_dir());
        assert!(!paths.state.exists() && !paths.armed.as_ref().unwrap().exists());
        assert!(paths.archived("loop-1") && !paths.archived("loop-2"));
    }

    #[test]
    fn a_claim_takes_the_waiting_loops_originals_and_keeps_its_own_aside() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::at(root.path().join("for-loop"));
        let (from, into) = (store.pending_paths("k"), store.paths("session"));
        let (waiting, claiming) = (Transaction::lock(&from).unwrap(), Transaction::lock(&into).unwrap());
        fs::create_dir_all(oracle_originals(&from.dir)).unwrap();
        fs::create_dir_all(oracle_originals(&into.dir)).unwrap();
        fs::write(oracle_originals(&from.dir).join("t.sh"), "new").unwrap();
        claiming.adopt_oracle_originals(&waiting, Timestamp::from_second(7).unwrap()).unwrap();
        assert_eq!(fs::read_to_string(oracle_originals(&into.dir).join("t.sh")).unwrap(), "new");
        assert!(into.dir.join("oracle.before-7").is_dir());
        assert!(!oracle_originals(&from.dir).exists());
    }

    #[test]
    fn a_waiting_loop_is_set_aside_whole_or_removed_under_its_lock() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::at(root.path().join("for-loop"));
        let pending = store.pending_paths("k");
        let held = Transaction::lock(&pending).unwrap();
        held.commit(&sample(), &[]).unwrap();
        held.set_aside_unclaimed(&store).unwrap();
        let name = pending.dir.file_name().unwrap();
        assert!(store.root().join(UNCLAIMED).join(name).join("state.md").is_file());
        assert!(!pending.dir.exists());
        drop(held);
        let again = store.pending_paths("k2");
        let held = Transaction::lock(&again).unwrap();
        held.commit(&sample(), &[]).unwrap();
        held.remove_loop().unwrap();
        held.remove_loop().unwrap();
        assert!(!again.dir.exists());
    }
}
