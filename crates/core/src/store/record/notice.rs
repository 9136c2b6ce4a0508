//! The loop's pending notices (`notice.json`): notes for the user about a change to their loop
//! they may not have made, kept until the next stop or prompt shows them.
//!
//! The list is read, added to and written again, so it is changed only under the loop's lock: a
//! caller holding the loop's transaction posts through it ([`Notice::post_held`]); anyone else
//! takes the lock within [`NOTE_WAIT`] and never takes it over. When the lock stays busy (a
//! judgment holds it, or the caller's own transaction it did not pass down) the notice is kept
//! in a file of its own (`notice.kept.<time>.<n>`), which needs no lock to write, and the next
//! taker shows it after the list. A list that cannot be read (corrupt, too large, a directory or
//! a link in its place) is moved aside, never overwritten, and the user is told where it is.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use super::LoopFile;
use crate::store::lock::StateLock;
use crate::store::transaction::{NOTE_WAIT, Notes, Transaction};
use crate::store::{LoopPaths, private};

/// The largest list read, and kept: notices are lines for the user, a few a stop at most.
const LIMIT: u64 = 1 << 20;
/// [`LIMIT`] as a length, for the tests.
#[cfg(test)]
const LIMIT_LEN: usize = 1 << 20;
/// The names of notices kept while the lock was busy.
const KEPT_PREFIX: &str = "notice.kept.";
/// How many kept notices share one time before a post gives up (a loop of posts in one
/// nanosecond is a bug or an attack; the notice is then lost, never written over another).
const MAX_KEPT_PER_TIME: u32 = 100;

/// A note for the user about a change to their loop they may not have made, kept in the loop's
/// directory until the next stop or prompt shows it.
pub(crate) struct Notice;

impl Notice {
    /// Adds `text` to the pending notices of the loop in `dir`, from a caller that holds none of
    /// its locks. Best effort: the ledger keeps the record whatever happens here.
    pub(crate) fn post(dir: &Path, text: &str) {
        match StateLock::try_acquire(&lock_of(dir), NOTE_WAIT) {
            Some(_held) => add_or_keep(dir, text),
            None => {
                let _ = keep(dir, text, Timestamp::now());
            }
        }
    }

    /// Adds `text` to the pending notices of the loop `transaction` holds, under its lock.
    pub(crate) fn post_held(transaction: &Transaction<'_>, text: &str) {
        add_or_keep(&transaction.paths().dir, text);
    }

    /// Adds `text` under the transaction `notes` hands down, or as [`Notice::post`] without one.
    pub(crate) fn post_in(notes: Notes<'_, '_>, text: &str) {
        match notes {
            Notes::Held(transaction) => Notice::post_held(transaction, text),
            Notes::Free(paths) => Notice::post(&paths.dir, text),
        }
    }

    /// The pending notices as one message, oldest first, removed so each is shown once. `None`
    /// when there are none, or when the lock stays busy: they wait for the next taker then.
    pub(crate) fn take(dir: &Path) -> Option<String> {
        let listed = fs::symlink_metadata(LoopFile::Notices.path(dir)).is_ok();
        let kept = kept_in(dir);
        if !listed && kept.is_empty() {
            return None;
        }
        let _held = StateLock::try_acquire(&lock_of(dir), NOTE_WAIT)?;
        taken(dir)
    }

    /// [`Notice::take`] for a caller that holds the loop's lock in `transaction`.
    pub(crate) fn take_held(transaction: &Transaction<'_>) -> Option<String> {
        let dir = &transaction.paths().dir;
        let listed = fs::symlink_metadata(LoopFile::Notices.path(dir)).is_ok();
        if !listed && kept_in(dir).is_empty() {
            return None;
        }
        taken(dir)
    }
}

/// The pending notices as one message, removed (the lock held).
fn taken(dir: &Path) -> Option<String> {
    let (mut all, cleared) = pending(dir, Timestamp::now());
    if cleared {
        let _ = LoopFile::Notices.remove(dir);
    }
    // Listed again under the lock: a post that kept one meanwhile is shown too.
    for path in kept_in(dir) {
        all.push(match read_kept(&path) {
            Ok(text) => {
                let _ = fs::remove_file(&path);
                text
            }
            Err(why) => match crate::store::move_aside(&path, Timestamp::now()) {
                Ok(aside) => format!(
                    "for-loop: a notice kept for you could not be read ({why}); it is kept at {}.",
                    aside.display()
                ),
                Err(e) => format!(
                    "for-loop: a notice kept at {} could not be read ({why}) nor moved aside ({e}).",
                    path.display()
                ),
            },
        });
    }
    (!all.is_empty()).then(|| all.join("\n"))
}

/// The loop's lock file, by its directory.
fn lock_of(dir: &Path) -> PathBuf {
    LoopPaths::in_dir(dir.to_path_buf(), None).lock
}

/// Adds `text` to the list (the lock held), or keeps it in a file of its own when the list
/// cannot be written.
fn add_or_keep(dir: &Path, text: &str) {
    let now = Timestamp::now();
    let (mut all, cleared) = pending(dir, now);
    if !cleared {
        // What is in the list's place could not be moved aside: it is not written over.
        let _ = keep(dir, &all.join("\n"), now);
        let _ = keep(dir, text, now);
        return;
    }
    if text.len() as u64 > LIMIT / 2 {
        // Longer than a list item can be: a file of its own, and the list left as it is.
        let _ = keep(dir, text, now);
        return;
    }
    all.push(text.to_string());
    let mut bytes = serde_json::to_vec(&all).unwrap_or_default();
    if bytes.len() as u64 > LIMIT {
        // Over the limit it could not be read back: the list so far goes aside, whole.
        let Ok(aside) = LoopFile::Notices.set_aside(dir, now) else {
            // It could not be moved: the list is not written over, and the notice keeps a file
            // of its own.
            let _ = keep(dir, text, now);
            return;
        };
        let told = format!(
            "for-loop: earlier notices grew past {} KiB and are kept at {}.",
            LIMIT >> 10,
            aside.display()
        );
        bytes = serde_json::to_vec(&[told, text.to_string()]).unwrap_or_default();
    }
    if LoopFile::Notices.write(dir, &bytes).is_err() {
        let _ = keep(dir, text, now);
    }
}

/// The list as written (the lock held), and whether its place may be written over. A list that
/// cannot be read is moved aside, and its one line says where, so that nothing in it is lost or
/// shown as something it is not; one that cannot even be moved is left where it is.
fn pending(dir: &Path, now: Timestamp) -> (Vec<String>, bool) {
    let why = match LoopFile::Notices.read_record(dir, LIMIT) {
        Ok(None) => return (Vec::new(), true),
        Ok(Some(bytes)) => match serde_json::from_slice::<Vec<String>>(&bytes) {
            Ok(all) => return (all, true),
            Err(e) => format!("it is not a list of notices: {e}"),
        },
        Err(why) => why,
    };
    match LoopFile::Notices.set_aside(dir, now) {
        Ok(aside) => (
            vec![format!(
                "for-loop: the loop's notices could not be read ({why}); they are kept at {}.",
                aside.display()
            )],
            true,
        ),
        Err(e) => (
            vec![format!(
                "for-loop: the loop's notices could not be read ({why}) nor moved aside ({e}); they are \
                 left at {}.",
                LoopFile::Notices.path(dir).display()
            )],
            false,
        ),
    }
}

/// Keeps `text` in a new file of its own, written whole; `false` when even that fails.
fn keep(dir: &Path, text: &str, now: Timestamp) -> bool {
    let stamp = format!("{KEPT_PREFIX}{:020}", now.as_nanosecond().max(0));
    (0..MAX_KEPT_PER_TIME).any(|n| {
        let path = dir.join(format!("{stamp}.{n:03}"));
        // A new file, never one there already nor what a link at its name points to.
        match private::file_options().write(true).create_new(true).open(&path) {
            Ok(mut file) => file.write_all(text.as_bytes()).is_ok(),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(_) => false,
        }
    })
}

/// The notices kept while the lock was busy, oldest first (their names sort by time).
fn kept_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut kept: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| is_kept(&entry.file_name().to_string_lossy()))
        .map(|entry| entry.path())
        .collect();
    kept.sort();
    kept
}

/// Whether `name` is a kept notice's, as [`keep`] names them (one set aside is not).
fn is_kept(name: &str) -> bool {
    name.strip_prefix(KEPT_PREFIX).and_then(|rest| rest.split_once('.')).is_some_and(|(time, n)| {
        time.len() == 20 && n.len() == 3 && time.bytes().chain(n.bytes()).all(|b| b.is_ascii_digit())
    })
}

fn read_kept(path: &Path) -> Result<String, String> {
    let meta = fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() {
        return Err(format!("it is {}", crate::store::describe(&meta)));
    }
    let bytes = crate::support::read::bounded_read::read(path, LIMIT).map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn loop_dir() -> (tempfile::TempDir, LoopPaths) {
        let root = tempfile::tempdir().unwrap();
        let paths = Store::at(root.path().join("for-loop")).paths("s");
        paths.make_dir().unwrap();
        (root, paths)
    }

    fn asides(dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("notice.json.aside-"))
            .collect();
        found.sort();
        found
    }

    #[test]
    fn notices_are_kept_in_order_and_shown_once() {
        let (_root, paths) = loop_dir();
        assert_eq!(Notice::take(&paths.dir), None);
        Notice::post(&paths.dir, "first");
        Notice::post(&paths.dir, "second");
        assert_eq!(Notice::take(&paths.dir).as_deref(), Some("first\nsecond"));
        assert_eq!(Notice::take(&paths.dir), None);
    }

    /// A caller holding the loop's transaction posts through it, at once; one that holds it but
    /// posts as if it did not (or anyone, while a judgment holds the lock) waits its short while
    /// and keeps the notice in a file of its own, which the next take shows after the list.
    #[test]
    fn a_notice_under_a_held_lock_goes_through_the_transaction_or_is_kept_beside_the_list() {
        let (_root, paths) = loop_dir();
        let held = Transaction::lock(&paths).unwrap();
        let started = std::time::Instant::now();
        Notice::post_in(Notes::Held(&held), "through the transaction");
        assert!(started.elapsed() < NOTE_WAIT, "{:?}", started.elapsed());
        Notice::post(&paths.dir, "kept while the lock was busy");
        Notice::post(&paths.dir, "kept again");
        assert_eq!(kept_in(&paths.dir).len(), 2);
        assert_eq!(Notice::take(&paths.dir), None, "nothing is taken while the lock is busy");
        drop(held);
        assert_eq!(
            Notice::take(&paths.dir).as_deref(),
            Some("through the transaction\nkept while the lock was busy\nkept again")
        );
        assert!(kept_in(&paths.dir).is_empty());
        assert_eq!(Notice::take(&paths.dir), None);
    }

    /// What is in the list's place and is not a list (broken JSON, the wrong type, a file past
    /// the limit, a directory, a link) is moved aside whole, and the user is told where; the new
    /// notice is kept.
    #[test]
    fn a_list_that_cannot_be_read_is_set_aside_and_told_never_overwritten() {
        type Plant = Box<dyn Fn(&Path)>;
        let cases: Vec<(&str, Plant)> = vec![
            ("broken JSON", Box::new(|p: &Path| fs::write(p, "{not json").unwrap())),
            ("an object", Box::new(|p: &Path| fs::write(p, r#"{"a":"b"}"#).unwrap())),
            ("numbers", Box::new(|p: &Path| fs::write(p, "[1,2]").unwrap())),
            ("empty", Box::new(|p: &Path| fs::write(p, "").unwrap())),
            ("huge", Box::new(|p: &Path| fs::write(p, vec![b' '; LIMIT_LEN + 1]).unwrap())),
            ("a directory", Box::new(|p: &Path| fs::create_dir_all(p.join("inside")).unwrap())),
            #[cfg(unix)]
            ("a link", Box::new(|p: &Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap())),
        ];
        for (what, plant) in cases {
            let (_root, paths) = loop_dir();
            let list = LoopFile::Notices.path(&paths.dir);
            plant(&list);
            let before = fs::symlink_metadata(&list).unwrap();
            Notice::post(&paths.dir, "the new one");
            let aside = asides(&paths.dir);
            assert_eq!(aside.len(), 1, "{what}: {aside:?}");
            let moved = fs::symlink_metadata(&aside[0]).unwrap();
            assert_eq!(moved.file_type(), before.file_type(), "{what}: kept as it was");
            assert_eq!(moved.len(), before.len(), "{what}");
            let told = Notice::take(&paths.dir).unwrap();
            let lines: Vec<&str> = told.lines().collect();
            assert_eq!(lines.len(), 2, "{what}: {told}");
            assert!(
                lines[0].starts_with("for-loop: the loop's notices could not be read ("),
                "{what}: {told}"
            );
            assert!(
                lines[0].ends_with(&format!("they are kept at {}.", aside[0].display())),
                "{what}: {told}"
            );
            assert_eq!(lines[1], "the new one", "{what}");
        }
    }

    #[test]
    fn an_unreadable_list_is_set_aside_by_a_take_too() {
        let (_root, paths) = loop_dir();
        fs::write(LoopFile::Notices.path(&paths.dir), "[\"cut off").unwrap();
        let told = Notice::take(&paths.dir).unwrap();
        assert!(told.contains("is not a list of notices"), "{told}");
        assert_eq!(asides(&paths.dir).len(), 1);
        assert_eq!(fs::read_to_string(&asides(&paths.dir)[0]).unwrap(), "[\"cut off");
    }

    /// A list near the limit is not let grow past what can be read back: it goes aside whole.
    #[test]
    fn a_list_that_would_grow_past_the_limit_goes_aside_whole() {
        let (_root, paths) = loop_dir();
        let long = "x".repeat(LIMIT_LEN / 2);
        Notice::post(&paths.dir, &long);
        Notice::post(&paths.dir, &long);
        let aside = asides(&paths.dir);
        assert_eq!(aside.len(), 1);
        let kept: Vec<String> = serde_json::from_slice(&fs::read(&aside[0]).unwrap()).unwrap();
        assert_eq!(kept, std::slice::from_ref(&long));
        let told = Notice::take(&paths.dir).unwrap();
        assert!(
            told.starts_with("for-loop: earlier notices grew past 1024 KiB and are kept at "),
            "{}",
            &told[..200]
        );
        assert!(told.ends_with(&long));
    }

    /// A notice longer than any list may hold is never written over the list: it keeps a file
    /// of its own, which, too long to show, is set aside whole and named.
    #[test]
    fn a_notice_too_long_for_the_list_is_kept_whole_beside_it() {
        let (_root, paths) = loop_dir();
        Notice::post(&paths.dir, "short");
        let huge = "y".repeat(LIMIT_LEN + 10);
        Notice::post(&paths.dir, &huge);
        assert_eq!(kept_in(&paths.dir).len(), 1);
        let told = Notice::take(&paths.dir).unwrap();
        let (first, second) = told.split_once('\n').unwrap();
        assert_eq!(first, "short");
        assert!(second.starts_with("for-loop: a notice kept for you could not be read ("), "{second}");
        let aside = PathBuf::from(second.rsplit_once("kept at ").unwrap().1.trim_end_matches('.'));
        assert_eq!(fs::read_to_string(aside).unwrap(), huge);
    }

    #[test]
    fn a_kept_notice_that_is_not_a_file_is_set_aside_and_told_once() {
        let (_root, paths) = loop_dir();
        let odd = paths.dir.join(format!("{KEPT_PREFIX}00000000000000000001.000"));
        fs::create_dir_all(odd.join("inside")).unwrap();
        let told = Notice::take(&paths.dir).unwrap();
        assert!(told.contains("could not be read (it is a directory); it is kept at "), "{told}");
        assert!(!odd.exists());
        let aside = PathBuf::from(told.rsplit_once("kept at ").unwrap().1.trim_end_matches('.'));
        assert!(aside.join("inside").is_dir(), "{told}");
        assert_eq!(Notice::take(&paths.dir), None, "told once");
        assert!(!is_kept("notice.kept.1.000") && !is_kept("notice.kept.00000000000000000001.000.aside-9"));
    }
}
