//! Where loops live on disk, and reading and writing them safely.
//!
//! Loops are kept in a per-user directory outside every project, so that the agent deleting or
//! editing files in the project (`rm -rf .claude`) cannot end or weaken a loop in passing. Each
//! session has its own directory, named after its id, so that the hook's no-loop path is one
//! failed `stat`, and two sessions in one repository never see each other's loop.
//!
//! An active loop's last good state is also kept outside the store, in a sibling directory
//! (`for-loop-armed/` beside `for-loop/`): deleting the store, or the session's directory, does
//! not delete the loop ([`crate::store::custody`]). That costs a plain session one more failed `stat`.
//!
//! Every file here is written atomically through a temporary file named `.<name>.<random>` in
//! the same directory. A writer killed midway leaves that temporary behind; the next writer of
//! the loop, holding its lock, sweeps them ([`LoopPaths::sweep_temporaries`]).

pub(crate) mod custody;
pub(crate) mod driver_mark;
pub(crate) mod incident;
pub(crate) mod journal;
pub(crate) mod judgment;
pub(crate) mod ledger;
pub(crate) mod lock;
pub(crate) mod private;
pub(crate) mod record;
pub(crate) mod transaction;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
pub(crate) use transaction::note_best_effort;

use jiff::Timestamp;
use thiserror::Error;

pub(crate) use self::custody::Custody;
pub(crate) use self::custody::Known;
pub(crate) use self::driver_mark::DriverMark;
pub(crate) use self::driver_mark::NotTaken;
pub(crate) use self::judgment::Found;
pub(crate) use self::judgment::Judgment;
pub(crate) use self::judgment::Marked;
pub(crate) use self::record::LoopFile;
pub(crate) use self::record::notice::Notice;
pub(crate) use self::transaction::Change;
pub(crate) use self::transaction::CommitError;
pub(crate) use self::transaction::Noted;
pub(crate) use self::transaction::Notes;
pub(crate) use self::transaction::OpenError;
pub(crate) use self::transaction::Transaction;
use crate::state::{LoopState, StateError};
use crate::support::Environment;
use crate::support::Fnv1a;
use crate::support::read::bounded_read;

/// The largest state file read: the task is at most 1 MiB, the settings far less.
pub(crate) const MAX_STATE_BYTES: u64 = 4 << 20;

#[derive(Debug, Error)]
pub(crate) enum StoreError {
    #[error("no place for loop state: set FOR_LOOP_HOME (or HOME) to a writable directory")]
    NoHome,
    #[error("could not read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("could not write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("{path}: {source}")]
    Invalid { path: PathBuf, source: StateError },
}

/// The per-user directory holding every loop.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    root: PathBuf,
}

/// The files of one session's loop.
#[derive(Debug, Clone)]
pub(crate) struct LoopPaths {
    pub(crate) dir: PathBuf,
    pub(crate) state: PathBuf,
    pub(crate) lock: PathBuf,
    pub(crate) ledger: PathBuf,
    /// A commit in progress ([`crate::store::journal`]).
    pub(crate) journal: PathBuf,
    /// The last good copy of the state while the loop is active, outside the store; `None` for
    /// loops waiting to be claimed (they block nobody) and stores at a root directory.
    pub(crate) armed: Option<PathBuf>,
}

impl Store {
    /// `$FOR_LOOP_HOME`, else `$XDG_STATE_HOME/for-loop`, else `~/.local/state/for-loop`
    /// (`%LOCALAPPDATA%\for-loop` on Windows).
    pub(crate) fn locate(env: &Environment) -> Result<Store, StoreError> {
        let root = if let Some(dir) = env.var("FOR_LOOP_HOME") {
            PathBuf::from(dir)
        } else if let Some(dir) = env.var("XDG_STATE_HOME") {
            Path::new(dir).join("for-loop")
        } else if let Some(dir) = env.var("LOCALAPPDATA").filter(|_| cfg!(windows)) {
            // Git Bash sets HOME and PowerShell does not: a hook run through either finds the
            // same loops only if HOME is not asked first.
            Path::new(dir).join("for-loop")
        } else if let Some(home) = env.var("HOME") {
            Path::new(home).join(".local/state/for-loop")
        } else if let Some(dir) = env.var("LOCALAPPDATA") {
            Path::new(dir).join("for-loop")
        } else {
            return Err(StoreError::NoHome);
        };
        Ok(Store { root })
    }

    #[cfg(test)]
    pub(crate) fn at(root: PathBuf) -> Store {
        Store { root }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The files of `session_id`'s loop, whether or not it exists.
    pub(crate) fn paths(&self, session_id: &str) -> LoopPaths {
        self.session_paths(&session_key(session_id))
    }

    fn session_paths(&self, key: &str) -> LoopPaths {
        let armed = self.armed_root().map(|root| root.join("sessions").join(format!("{key}.md")));
        LoopPaths::in_dir(self.root.join("sessions").join(key), armed)
    }

    /// Where active loops' last good states are kept: a sibling of the store, so that deleting
    /// the store leaves them.
    pub(crate) fn armed_root(&self) -> Option<PathBuf> {
        let name = self.root.file_name()?.to_string_lossy();
        Some(self.root.with_file_name(format!("{name}-armed")))
    }

    /// Every session directory that holds a state file.
    pub(crate) fn all(&self) -> io::Result<Vec<LoopPaths>> {
        let keys = keys_in(&self.root.join("sessions"))?;
        Ok(keys.iter().map(|key| self.session_paths(key)).filter(|paths| paths.state.is_file()).collect())
    }

    /// The files of a loop waiting to be claimed by its session; `key` is
    /// [`crate::provenance::claim::pending_key`] of its token.
    pub(crate) fn pending_paths(&self, key: &str) -> LoopPaths {
        LoopPaths::in_dir(self.root.join("pending").join(session_key(key)), None)
    }

    /// Whether any loop waits to be claimed (or was cancelled before it was): one failed
    /// `read_dir` when none does.
    pub(crate) fn has_pending(&self) -> bool {
        fs::read_dir(self.root.join("pending"))
            .is_ok_and(|entries| entries.flatten().any(|entry| entry.path().join("state.md").is_file()))
    }

    /// Every loop waiting to be claimed.
    pub(crate) fn pending_all(&self) -> io::Result<Vec<LoopPaths>> {
        let keys = keys_in(&self.root.join("pending"))?;
        Ok(keys
            .iter()
            .map(|key| self.pending_paths_of_dir(key))
            .filter(|paths| paths.state.is_file())
            .collect())
    }

    fn pending_paths_of_dir(&self, name: &str) -> LoopPaths {
        LoopPaths::in_dir(self.root.join("pending").join(name), None)
    }
}

/// The names of the directories under `parent`, sorted; none when `parent` does not exist.
fn keys_in(parent: &Path) -> io::Result<Vec<String>> {
    let entries = match fs::read_dir(parent) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut keys = Vec::new();
    for entry in entries {
        keys.push(entry?.file_name().to_string_lossy().into_owned());
    }
    keys.sort();
    Ok(keys)
}

impl LoopPaths {
    fn in_dir(dir: PathBuf, armed: Option<PathBuf>) -> LoopPaths {
        LoopPaths {
            state: dir.join("state.md"),
            lock: dir.join("state.md.lock"),
            ledger: dir.join("ledger.jsonl"),
            journal: dir.join("journal.json"),
            armed,
            dir,
        }
    }

    /// The loop as its file says, or `None` when the session has none. This is the file as it
    /// is, unchecked: the hook reads it through [`crate::store::custody`], which compares it with its
    /// last good copy.
    pub(crate) fn load(&self) -> Result<Option<LoopState>, StoreError> {
        match self.load_text()? {
            None => Ok(None),
            Some(text) => LoopState::parse(&text)
                .map(Some)
                .map_err(|source| StoreError::Invalid { path: self.state.clone(), source }),
        }
    }

    /// The state file's text, or `None` when there is none.
    pub(crate) fn load_text(&self) -> Result<Option<String>, StoreError> {
        read_text(&self.state, MAX_STATE_BYTES)
    }

    /// Replaces the state file atomically: a reader sees the old file or the new one, never a
    /// half-written one, even if the disk fills up or the process dies mid-write.
    #[cfg(test)]
    pub(crate) fn save(&self, state: &LoopState) -> Result<(), StoreError> {
        let text =
            state.render().map_err(|source| StoreError::Invalid { path: self.state.clone(), source })?;
        self.save_text(&text)
    }

    pub(in crate::store) fn save_text(&self, text: &str) -> Result<(), StoreError> {
        let write_error = |source| StoreError::Write { path: self.state.clone(), source };
        private::create_dir_all(&self.dir).map_err(write_error)?;
        write_atomic(&self.state, text.as_bytes(), true).map_err(write_error)
    }

    /// Removes the temporary files that writers killed midway left in the loop's directories.
    /// Only call it holding the loop's lock: every writer of these files holds it while it
    /// writes, so any temporary found then is a dead writer's.
    pub(crate) fn sweep_temporaries(&self) {
        let marker = self.dir.join("judging.json");
        let mut places = vec![(
            self.dir.clone(),
            vec![
                temp_prefix(&self.state),
                temp_prefix(&self.journal),
                temp_prefix(&self.ledger),
                temp_prefix(&marker),
                // Written only under the lock too; the other records are not (`record`).
                temp_prefix(&record::LoopFile::Notices.path(&self.dir)),
                temp_prefix(&record::LoopFile::RunRecord.path(&self.dir)),
                temp_prefix(&self.dir.join(driver_mark::NAME)),
            ],
        )];
        if let Some(armed) = &self.armed
            && let Some(parent) = armed.parent()
        {
            places.push((parent.to_path_buf(), vec![temp_prefix(armed)]));
        }
        for (dir, prefixes) in places {
            let Ok(entries) = fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if prefixes.iter().any(|prefix| name.starts_with(prefix.as_str())) {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
    }
}

/// The text of the file at `path`, or `None` when there is none.
fn read_text(path: &Path, limit: u64) -> Result<Option<String>, StoreError> {
    let read_error = |source| StoreError::Read { path: path.to_path_buf(), source };
    let Some(bytes) = read_regular(path, limit).map_err(read_error)? else { return Ok(None) };
    String::from_utf8(bytes).map(Some).map_err(|e| StoreError::Invalid {
        path: path.to_path_buf(),
        source: StateError::Yaml(format!("it is not UTF-8 text ({e})")),
    })
}

/// The bytes of a file for-loop wrote but anyone could have replaced: only a regular file (a
/// FIFO would block the hook, a device could be endless), and at most `limit` bytes. `None` when
/// there is nothing at `path`.
pub(crate) fn read_regular(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    match bounded_read::read(path, limit) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// What kind of thing is at a path, in words.
pub(crate) fn describe(meta: &fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "a special file (a FIFO, socket or device)"
    }
}

/// The prefix of the temporary files [`write_atomic`] makes for `path`.
fn temp_prefix(path: &Path) -> String {
    format!(".{}.", path.file_name().unwrap_or_default().to_string_lossy())
}

/// Replaces `path` with `bytes` atomically, through a temporary file beside it; `sync` flushes it
/// to the disk first, for files whose loss on a power cut matters.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new().prefix(&temp_prefix(path)).tempfile_in(dir)?;
    temp.write_all(bytes)?;
    if sync {
        temp.as_file().sync_data()?;
    }
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Moves whatever is at `path` out of the way, to `<path>.aside-<seconds>`, and returns where.
pub(crate) fn move_aside(path: &Path, now: Timestamp) -> io::Result<PathBuf> {
    let mut aside = PathBuf::from(format!("{}.aside-{}", path.display(), now.as_second()));
    let mut n = 1;
    while fs::symlink_metadata(&aside).is_ok() {
        aside = PathBuf::from(format!("{}.aside-{}-{n}", path.display(), now.as_second()));
        n += 1;
    }
    fs::rename(path, &aside)?;
    Ok(aside)
}

/// Removes the file at `path`; nothing there is fine.
pub(crate) fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A directory name for a session id: the id itself when it is a plain name, otherwise a
/// digest of it, so that no id can reach outside the store (`../..`).
fn session_key(session_id: &str) -> String {
    let plain = !session_id.is_empty()
        && session_id.len() <= 128
        && !session_id.starts_with('.')
        && session_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if plain {
        return session_id.to_string();
    }
    format!("id-{:016x}", Fnv1a::of(session_id.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;

    fn env(vars: &[(&str, &str)]) -> Environment {
        Environment::new(
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())),
            "/".into(),
            "2026-11-22T03:00:00Z".parse().unwrap(),
        )
    }

    #[test]
    fn locates_the_store_by_precedence() {
        let root = |vars: &[(&str, &str)]| Store::locate(&env(vars)).unwrap().root;
        assert_eq!(root(&[("FOR_LOOP_HOME", "/a"), ("HOME", "/h")]), PathBuf::from("/a"));
        assert_eq!(root(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")]), PathBuf::from("/x/for-loop"));
        assert_eq!(root(&[("HOME", "/h")]), PathBuf::from("/h/.local/state/for-loop"));
        let both = root(&[("HOME", "/h"), ("LOCALAPPDATA", "/l")]);
        if cfg!(windows) {
            assert_eq!(both, PathBuf::from("/l/for-loop"), "Git Bash's HOME must not move the store");
        } else {
            assert_eq!(both, PathBuf::from("/h/.local/state/for-loop"));
        }
        assert!(matches!(Store::locate(&env(&[("HOME", "")])), Err(StoreError::NoHome)));
    }

    #[test]
    fn session_ids_cannot_escape_the_store() {
        assert_eq!(session_key("0b8c3a2e-1f"), "0b8c3a2e-1f");
        for hostile in ["../../etc", "..", ".", "", "a/b", "a\\b", "x\0y", &"a".repeat(200)] {
            let key = session_key(hostile);
            assert!(key.starts_with("id-") && key.len() == 19, "{hostile:?} -> {key}");
        }
        assert_ne!(session_key("a/b"), session_key("a\\b"));
    }

    #[test]
    fn saves_loads_and_archives() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().into());
        let paths = store.paths("sess-1");
        assert!(paths.load().unwrap().is_none());
        let state = sample();
        paths.save(&state).unwrap();
        assert_eq!(paths.load().unwrap().unwrap(), state);
        assert_eq!(store.all().unwrap().len(), 1);
        let archived = transaction::Transaction::lock(&paths).unwrap().archive(&state.meta.loop_id).unwrap();
        assert!(archived.join("state.md").is_file());
        assert!(paths.load().unwrap().is_none());
    }

    #[test]
    fn the_armed_copy_lives_beside_the_store() {
        let store = Store::at(PathBuf::from("/h/.local/state/for-loop"));
        assert_eq!(
            store.paths("s-1").armed,
            Some(PathBuf::from("/h/.local/state/for-loop-armed/sessions/s-1.md"))
        );
        assert_eq!(store.pending_paths("k").armed, None);
        assert_eq!(Store::at(PathBuf::from("/")).paths("s").armed, None);
    }

    #[test]
    #[cfg(unix)]
    fn only_regular_files_are_read_and_never_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = read_regular(&fifo, 10).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        assert!(read_regular(dir.path(), 10).unwrap_err().to_string().contains("a directory"));
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read_regular(&link, 10).is_err());
        let big = dir.path().join("big");
        fs::write(&big, vec![b'x'; 11]).unwrap();
        assert!(read_regular(&big, 10).is_err());
        assert_eq!(read_regular(&big, 11).unwrap().unwrap().len(), 11);
        assert_eq!(read_regular(&dir.path().join("none"), 10).unwrap(), None);
    }

    #[test]
    fn temporaries_of_dead_writers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("for-loop"));
        let paths = store.paths("s");
        paths.save(&sample()).unwrap();
        let armed = paths.armed.clone().unwrap();
        fs::create_dir_all(armed.parent().unwrap()).unwrap();
        let litter = [
            paths.dir.join(".state.md.abc123"),
            paths.dir.join(".journal.json.x"),
            paths.dir.join(".notice.json.k2"),
            paths.dir.join(".driver.pid.z"),
            armed.parent().unwrap().join(".s.md.q1"),
        ];
        // A hint written without the lock may have a live writer: its temporary is not swept.
        let kept = [
            paths.dir.join("notes.txt"),
            armed.parent().unwrap().join(".other.md.q1"),
            paths.dir.join(".next-prompt.md.a1"),
        ];
        for path in litter.iter().chain(&kept) {
            fs::write(path, "x").unwrap();
        }
        paths.sweep_temporaries();
        assert!(litter.iter().all(|p| !p.exists()));
        assert!(kept.iter().all(|p| p.exists()));
        assert!(paths.state.exists());
    }

    #[test]
    fn what_is_in_the_way_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        fs::create_dir_all(path.join("sub")).unwrap();
        let now: Timestamp = "2026-11-22T03:00:00Z".parse().unwrap();
        let aside = move_aside(&path, now).unwrap();
        assert!(aside.join("sub").is_dir() && !path.exists());
        fs::create_dir_all(&path).unwrap();
        assert_ne!(move_aside(&path, now).unwrap(), aside);
    }

    #[test]
    fn a_corrupt_state_is_reported_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().into()).paths("s");
        fs::create_dir_all(&paths.dir).unwrap();
        fs::write(&paths.state, b"---\niteration: [\n---\ntask").unwrap();
        assert!(matches!(paths.load(), Err(StoreError::Invalid { .. })));
        fs::write(&paths.state, b"\xff\xfe").unwrap();
        assert!(matches!(paths.load(), Err(StoreError::Invalid { .. })));
        assert!(paths.state.exists());
    }
}
