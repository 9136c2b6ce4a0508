//! The store is its user's alone: folders 0700 and files 0600 from creation on, whatever the
//! umask, and a store left readable by an older for-loop (folders 0755, a ledger 0644) tightened
//! at its next write. A loop's files hold the task, the check's command line and its output:
//! where a home folder is 0755, as Debian makes it, every local user could list the loops and
//! read their ledgers.
//!
//! On Windows the permission bits do not exist: a folder under `%LOCALAPPDATA%` inherits its
//! owner-only access, and these functions create what they are asked to and change nothing else.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::Path;

/// The mode of every folder of the store.
#[cfg(unix)]
const FOLDER: u32 = 0o700;
/// The mode of every file of the store.
#[cfg(unix)]
const FILE: u32 = 0o600;
/// How many entries a tightening looks at: a store of many loops, each with its archive, is a
/// few thousand; a bound keeps a hostile tree of millions from holding a hook.
const MAX_ENTRIES: usize = 100_000;

/// Creates `dir` and every missing folder above it, each 0700 (exactly: the umask cannot loosen
/// or narrow it).
pub(crate) fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(path) =
        at.filter(|path| !path.as_os_str().is_empty() && fs::symlink_metadata(path).is_err())
    {
        missing.push(path);
        at = path.parent();
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(FOLDER);
    }
    builder.create(dir)?;
    for path in missing {
        set_folder_mode(path)?;
    }
    Ok(())
}

/// Options that create a file 0600 (then narrowed by the umask only; [`restrict`] makes it
/// exact where that matters).
pub(crate) fn file_options() -> OpenOptions {
    #[allow(unused_mut)]
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE);
    }
    options
}

/// Makes the file or folder at `path` its owner's alone, when it is more open: the group's and
/// others' bits taken away, the owner's kept (a script in a run's work tree stays executable); a
/// link is left as it is (its target is not the store's).
pub(crate) fn restrict(path: &Path) -> io::Result<bool> {
    let Ok(meta) = fs::symlink_metadata(path) else { return Ok(false) };
    if meta.file_type().is_symlink() || !loose(&meta) {
        return Ok(false);
    }
    owner_only(path, &meta)?;
    Ok(true)
}

/// Tightens a store made before it was private: when `root` is open to others, `root` itself and
/// everything under its folders named `within` (the loops' own: `sessions`, `pending`; every
/// folder when `within` is empty) are made their owner's alone. Only those: a store set at a
/// folder that holds other things (`FOR_LOOP_HOME=$HOME`) has only its own files changed.
/// Returns how many were changed; 0 at once (one `stat`) for a store already private, which is
/// every store after its first tightening.
pub(crate) fn tighten(root: &Path, within: &[&str]) -> usize {
    let Ok(meta) = fs::symlink_metadata(root) else { return 0 };
    if !meta.is_dir() || !loose(&meta) {
        return 0;
    }
    let mut changed = usize::from(restrict(root).unwrap_or(false));
    let mut seen = 0;
    let mut folders: Vec<std::path::PathBuf> = if within.is_empty() {
        entries_of(root, &mut changed)
    } else {
        within.iter().map(|name| root.join(name)).filter(|path| path.is_dir()).collect()
    };
    while let Some(folder) = folders.pop() {
        changed += usize::from(restrict(&folder).unwrap_or(false));
        let Ok(entries) = fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return changed;
            }
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => folders.push(path),
                Ok(kind) if kind.is_file() => changed += usize::from(restrict(&path).unwrap_or(false)),
                _ => {}
            }
        }
    }
    changed
}

/// The folders directly in `root`, its files made private on the way.
fn entries_of(root: &Path, changed: &mut usize) -> Vec<std::path::PathBuf> {
    let Ok(entries) = fs::read_dir(root) else { return Vec::new() };
    let mut folders = Vec::new();
    for entry in entries.flatten().take(MAX_ENTRIES) {
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => folders.push(entry.path()),
            Ok(kind) if kind.is_file() => *changed += usize::from(restrict(&entry.path()).unwrap_or(false)),
            _ => {}
        }
    }
    folders
}

#[cfg(unix)]
fn loose(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o077 != 0
}

#[cfg(not(unix))]
fn loose(_: &fs::Metadata) -> bool {
    false
}

#[cfg(unix)]
fn owner_only(path: &Path, meta: &fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o700;
    fs::set_permissions(path, fs::Permissions::from_mode(if meta.is_dir() { FOLDER } else { mode }))
}

#[cfg(not(unix))]
fn owner_only(_: &Path, _: &fs::Metadata) -> io::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn set_folder_mode(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(FOLDER))
}

#[cfg(not(unix))]
fn set_folder_mode(_: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn folders_are_created_0700_each() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        for path in ["a", "a/b", "a/b/c"] {
            assert_eq!(mode(&dir.path().join(path)), 0o700, "{path}");
        }
        // A folder there already is left as it is: tightening is the store's, at its root.
        assert_eq!(mode(dir.path()), fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777);
    }

    #[test]
    fn an_open_store_is_tightened_once_and_a_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        fs::create_dir_all(root.join("sessions/s")).unwrap();
        fs::write(root.join("sessions/s/ledger.jsonl"), "x").unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, "not the store's").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("sessions/s/link")).unwrap();
        for path in [&root, &root.join("sessions"), &root.join("sessions/s")] {
            fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
        }
        fs::set_permissions(root.join("sessions/s/ledger.jsonl"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(root.join("sessions/s/run.sh"), "exit 0").unwrap();
        fs::set_permissions(root.join("sessions/s/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::create_dir_all(root.join("other")).unwrap();
        fs::set_permissions(root.join("other"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(tighten(&root, &["sessions", "pending"]), 5);
        assert_eq!(mode(&root.join("other")), 0o755, "not the loops' own");
        assert_eq!(mode(&root.join("sessions/s/run.sh")), 0o700, "its owner may still run it");
        assert_eq!(
            [mode(&root), mode(&root.join("sessions/s")), mode(&root.join("sessions/s/ledger.jsonl"))],
            [0o700, 0o700, 0o600]
        );
        assert_eq!(mode(&outside), 0o644);
        assert_eq!(tighten(&root, &["sessions"]), 0, "once");
        assert_eq!(tighten(&dir.path().join("missing"), &[]), 0);
    }
}
