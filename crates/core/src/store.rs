//! Where loops live on disk, and reading and writing them safely.
//!
//! Loops are kept in a per-user directory outside every project, so that the agent deleting or
//! editing files in the project (`rm -rf .claude`) cannot end or weaken a loop in passing. Each
//! session has its own directory, named after its id, so that the hook's no-loop path is one
//! failed `stat`, and two sessions in one repository never see each other's loop.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::digest::Fnv1a;
use crate::environment::Environment;
use crate::state::{LoopState, StateError};

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
    pub dir: PathBuf,
    pub state: PathBuf,
    pub lock: PathBuf,
    pub ledger: PathBuf,
}

impl Store {
    /// `$FOR_LOOP_HOME`, else `$XDG_STATE_HOME/for-loop`, else `~/.local/state/for-loop`
    /// (`%LOCALAPPDATA%\for-loop` on Windows).
    pub(crate) fn locate(env: &Environment) -> Result<Store, StoreError> {
        let root = if let Some(dir) = env.var("FOR_LOOP_HOME") {
            PathBuf::from(dir)
        } else if let Some(dir) = env.var("XDG_STATE_HOME") {
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
        LoopPaths::in_dir(self.root.join("sessions").join(session_key(session_id)))
    }

    /// Every session directory that holds a state file.
    pub(crate) fn all(&self) -> io::Result<Vec<LoopPaths>> {
        loops_in(&self.root.join("sessions"))
    }

    /// The files of a loop waiting to be claimed by its session; `key` is
    /// [`crate::claim::pending_key`] of its token.
    pub(crate) fn pending_paths(&self, key: &str) -> LoopPaths {
        LoopPaths::in_dir(self.root.join("pending").join(session_key(key)))
    }

    /// Whether any loop waits to be claimed (or was cancelled before it was): one failed
    /// `read_dir` when none does.
    pub(crate) fn has_pending(&self) -> bool {
        fs::read_dir(self.root.join("pending"))
            .is_ok_and(|entries| entries.flatten().any(|entry| entry.path().join("state.md").is_file()))
    }

    /// Every loop waiting to be claimed.
    pub(crate) fn pending_all(&self) -> io::Result<Vec<LoopPaths>> {
        loops_in(&self.root.join("pending"))
    }
}

/// The loops in the directories under `parent`, by name; none when `parent` does not exist.
fn loops_in(parent: &Path) -> io::Result<Vec<LoopPaths>> {
    let entries = match fs::read_dir(parent) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut all = Vec::new();
    for entry in entries {
        let paths = LoopPaths::in_dir(entry?.path());
        if paths.state.is_file() {
            all.push(paths);
        }
    }
    all.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(all)
}

impl LoopPaths {
    fn in_dir(dir: PathBuf) -> LoopPaths {
        LoopPaths {
            state: dir.join("state.md"),
            lock: dir.join("state.md.lock"),
            ledger: dir.join("ledger.jsonl"),
            dir,
        }
    }

    /// The loop, or `None` when the session has none.
    pub(crate) fn load(&self) -> Result<Option<LoopState>, StoreError> {
        let text = match fs::read(&self.state) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StoreError::Read { path: self.state.clone(), source });
            }
        };
        let text = String::from_utf8(text).map_err(|e| StoreError::Invalid {
            path: self.state.clone(),
            source: StateError::Yaml(format!("it is not UTF-8 text ({e})")),
        })?;
        LoopState::parse(&text)
            .map(Some)
            .map_err(|source| StoreError::Invalid { path: self.state.clone(), source })
    }

    /// Replaces the state file atomically: a reader sees the old file or the new one, never a
    /// half-written one, even if the disk fills up or the process dies mid-write.
    pub(crate) fn save(&self, state: &LoopState) -> Result<(), StoreError> {
        let text =
            state.render().map_err(|source| StoreError::Invalid { path: self.state.clone(), source })?;
        let write_error = |source| StoreError::Write { path: self.state.clone(), source };
        fs::create_dir_all(&self.dir).map_err(write_error)?;
        let mut temp =
            tempfile::Builder::new().prefix(".state.md.").tempfile_in(&self.dir).map_err(write_error)?;
        temp.write_all(text.as_bytes()).map_err(write_error)?;
        temp.as_file().sync_data().map_err(write_error)?;
        temp.persist(&self.state).map_err(|e| write_error(e.error))?;
        Ok(())
    }

    /// Moves a finished loop's files aside so a new loop can start in the same session.
    pub(crate) fn archive(&self, loop_id: &str) -> io::Result<PathBuf> {
        let archive = self.dir.join("archive").join(loop_id);
        fs::create_dir_all(&archive)?;
        fs::rename(&self.state, archive.join("state.md"))?;
        if self.ledger.exists() {
            fs::rename(&self.ledger, archive.join("ledger.jsonl"))?;
        }
        let originals = self.dir.join("oracle");
        if originals.exists() {
            fs::rename(&originals, archive.join("oracle"))?;
        }
        Ok(archive)
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
    use crate::state::tests::sample;

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
        let archived = paths.archive(&state.meta.loop_id).unwrap();
        assert!(archived.join("state.md").is_file());
        assert!(paths.load().unwrap().is_none());
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
