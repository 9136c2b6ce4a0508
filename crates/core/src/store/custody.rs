//! Whether a loop's state is the one for-loop last committed, and putting it back when it is not.
//!
//! Three witnesses: the state file, its last good copy outside the store
//! ([`crate::store::Store::armed_root`]), and the digest of the state in the last ledger line a
//! commit wrote ([`crate::store::journal`]). Every writer of a loop commits all three together, under the
//! loop's lock, so they agree unless something else wrote. When they do not:
//!
//! - the state was edited, replaced, made unreadable or deleted, and the copy is the one the ledger
//!   names: the copy is restored, the loop goes on, and the user and the agent are told;
//! - the copy was deleted or changed, and the state is the one the ledger names: the copy is
//!   written again, and they are told;
//! - no trusted copy is left (the state and its copy both changed, or the state changed and its
//!   copy is gone): the loop ends as tampered, and the user is told it cannot be trusted.
//!
//! All three are files the user's account can write, so a process that knows this protocol can
//! forge them consistently; what this stops is the state being changed by anything else (an edit,
//! `sed`, python, `rm -rf` of the store or the session), silently. [`tell_deleted_store`] covers
//! the one case no file is left for, where the host's transcript still says a loop ran.

use std::cell::RefCell;
use std::fs;

/// Every re-injected prompt has this right after the task: how a later run recognises the loop's
/// own feedback in a transcript ([`crate::store::custody::tell_deleted_store`]).
use jiff::Timestamp;

use crate::state::LedgerEntry;
use crate::state::ReasonCode;
use crate::state::{Incident, REINJECTION_MARK};
use crate::state::{LoopState, StateError};
use crate::store::journal::{self, Journal};
use crate::store::{self, LoopPaths, StoreError};

/// What the state of a session's loop turned out to be.
#[derive(Debug)]
pub(crate) enum Custody {
    /// No loop.
    None,
    /// The loop as last committed (restored when something had changed it), and what was found.
    Loop { state: LoopState, incidents: Vec<Incident> },
    /// The state changed and no trusted copy of it is left: the loop cannot go on.
    Untrusted { state: LoopState, why: String },
}

/// The states one caller has read, each with the text it was parsed from. A stop reads its loop
/// through several witnesses (the state file, its last good copy, the reading again after
/// verify), nearly always the same text: each reading is handed what the caller read before and
/// parses only a text it has not seen. Owned by the caller, so nothing is kept past it.
#[derive(Debug, Default)]
pub(crate) struct Known {
    read: RefCell<Vec<(String, LoopState)>>,
}

impl Known {
    /// How many texts a caller keeps: a stop sees at most a few.
    const KEPT: usize = 4;

    /// `text` as a state: the one read before when the text is the same, else parsed now.
    fn parse(&self, text: &str) -> Result<LoopState, StateError> {
        if let Some((_, state)) = self.read.borrow().iter().find(|(seen, _)| seen == text) {
            return Ok(state.clone());
        }
        let state = LoopState::parse(text)?;
        let mut read = self.read.borrow_mut();
        if read.len() == Known::KEPT {
            read.remove(0);
        }
        read.push((text.to_string(), state.clone()));
        Ok(state)
    }
}

/// One witness read from its file.
enum Read {
    Missing,
    Bad(String),
    Good { text: String, state: Box<LoopState> },
}

impl Read {
    fn of(path: &std::path::Path, known: &Known) -> Read {
        match store::read_regular(path, store::MAX_STATE_BYTES) {
            Ok(None) => Read::Missing,
            Err(e) => Read::Bad(e.to_string()),
            Ok(Some(bytes)) => match String::from_utf8(bytes) {
                Err(_) => Read::Bad("it is not UTF-8 text".into()),
                Ok(text) => match known.parse(&text) {
                    Ok(state) => Read::Good { text, state: Box::new(state) },
                    Err(e) => Read::Bad(e.to_string()),
                },
            },
        }
    }

    fn digest(&self) -> Option<String> {
        match self {
            Read::Good { text, .. } => Some(journal::state_digest(text)),
            _ => None,
        }
    }

    fn state(&self) -> Option<&LoopState> {
        match self {
            Read::Good { state, .. } => Some(state),
            _ => None,
        }
    }
}

impl Custody {
    /// Checks the session's loop and restores what can be restored. Finishes an interrupted
    /// commit and sweeps temporaries first. Call it holding the loop's lock. `Err` is a state that
    /// cannot be read with no copy to restore it from (a loop older than the copies).
    pub(in crate::store) fn check(
        paths: &LoopPaths,
        now: Timestamp,
        known: &Known,
    ) -> Result<Custody, StoreError> {
        let recovery = Journal::recover(paths);
        if recovery != journal::Recovery::Clean {
            eprintln!("for-loop: an interrupted commit was found: {recovery:?}");
        }
        paths.sweep_temporaries();
        let mut incidents = Vec::new();
        incidents.extend(replace_ledger_if_not_a_file(paths, now)?);
        let stated = Read::of(&paths.state, known);
        let copy = paths.armed.as_deref().map_or(Read::Missing, |armed| Read::of(armed, known));
        let loop_id = stated.state().or(copy.state()).map(|s| s.meta.loop_id.clone());
        let witnessed = loop_id.and_then(|id| LedgerEntry::last_state_digest(&paths.ledger, &id));
        let trusted = |read: &Read| read.digest().is_some_and(|d| witnessed.as_ref().is_none_or(|w| *w == d));

        let state = match (&stated, &copy) {
            (Read::Missing, Read::Missing) => return Ok(Custody::None),
            (Read::Good { state, .. }, Read::Good { .. }) if stated.digest() == copy.digest() => {
                if !trusted(&stated) {
                    return Ok(both_changed_alike(state));
                }
                (**state).clone()
            }
            (_, Read::Good { state: copy_state, text }) if copy_state.is_active() && trusted(&copy) => {
                incidents.push(restore_from_copy(paths, &stated, copy_state, text, now)?);
                (**copy_state).clone()
            }
            (Read::Good { state, .. }, _) if trusted(&stated) => {
                incidents.extend(keep_copy_of_trusted_state(paths, state, &copy, witnessed.is_none(), now)?);
                (**state).clone()
            }
            (Read::Missing, Read::Good { state, .. }) if !state.is_active() => {
                forget_copy_of_ended_loop(paths);
                return Ok(Custody::None);
            }
            (Read::Good { state, .. }, _) | (Read::Missing | Read::Bad(_), Read::Good { state, .. }) => {
                return Ok(no_trusted_copy(&stated, &copy, state));
            }
            (Read::Missing | Read::Bad(_), Read::Missing | Read::Bad(_)) => {
                return Err(unreadable(paths, &stated, &copy));
            }
        };
        incidents.extend(begin_deleted_ledger(paths, &copy, &incidents, now)?);
        Ok(Custody::Loop { state, incidents })
    }
}

/// A ledger replaced by something other than a file (a directory, a symlink) is moved aside and
/// a new one begun.
fn replace_ledger_if_not_a_file(paths: &LoopPaths, now: Timestamp) -> Result<Option<Incident>, StoreError> {
    let Ok(meta) = fs::symlink_metadata(&paths.ledger) else { return Ok(None) };
    if meta.is_file() {
        return Ok(None);
    }
    let what = store::describe(&meta);
    let write_error = |source| StoreError::Write { path: paths.ledger.clone(), source };
    let aside = store::move_aside(&paths.ledger, now).map_err(write_error)?;
    // Begun now, so that a second look before this stop's commit does not take it for deleted.
    store::private::file_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&paths.ledger)
        .map_err(write_error)?;
    Ok(Some(Incident::new(
        ReasonCode::LedgerTampered,
        now,
        format!(
            "the loop's ledger had been replaced by {what}; that was moved to {} and a new \
             ledger begun",
            aside.display()
        ),
    )))
}

/// The state file and its copy agree with each other but not with the ledger.
fn both_changed_alike(state: &LoopState) -> Custody {
    Custody::Untrusted {
        state: state.clone(),
        why: "the state file and its last good copy were both changed the same way, so \
              they no longer match the ledger"
            .into(),
    }
}

/// The copy is the one the ledger names and the state file is not: the copy is written back over
/// the state file, whose content is kept aside.
fn restore_from_copy(
    paths: &LoopPaths,
    stated: &Read,
    copy_state: &LoopState,
    text: &str,
    now: Timestamp,
) -> Result<Incident, StoreError> {
    let (code, what) = match stated {
        Read::Missing => (ReasonCode::StateDeleted, "was deleted".to_string()),
        Read::Bad(why) => (ReasonCode::StateTampered, format!("was made unreadable ({why})")),
        Read::Good { state, .. } => {
            let changes = differences(copy_state, state);
            (ReasonCode::StateTampered, format!("was changed outside for-loop ({changes})"))
        }
    };
    let kept = match stated {
        Read::Missing => String::new(),
        _ => match store::move_aside(&paths.state, now) {
            Ok(aside) => format!("; what stood there is kept in {}", aside.display()),
            Err(_) => String::new(),
        },
    };
    paths.save_text(text)?;
    Ok(Incident::new(
        code,
        now,
        format!(
            "the loop's state file {what}; for-loop restored it from its last good copy{kept}, \
             and the loop goes on"
        ),
    ))
}

/// The state is the one the ledger names; its copy is missing, unreadable, stale or forged. Only
/// an active loop keeps one: it is written again, and an ended loop's is removed. `unwitnessed`:
/// the ledger names no state digest.
fn keep_copy_of_trusted_state(
    paths: &LoopPaths,
    state: &LoopState,
    copy: &Read,
    unwitnessed: bool,
    now: Timestamp,
) -> Result<Option<Incident>, StoreError> {
    let Some(armed) = &paths.armed else { return Ok(None) };
    if !state.is_active() {
        if !matches!(copy, Read::Missing) {
            let _ = store::remove_if_present(armed);
        }
        return Ok(None);
    }
    let restored = write_copy(armed, &paths.load_text()?.unwrap_or_default(), now);
    // A loop committed before copies were kept has neither a copy nor a digest.
    let first = matches!(copy, Read::Missing) && unwitnessed;
    if first {
        return Ok(None);
    }
    let what = match copy {
        Read::Missing => "was deleted",
        _ => "was changed or made unreadable",
    };
    let done = if restored { "it was written again" } else { "it could not be written again" };
    Ok(Some(Incident::new(
        ReasonCode::StateTampered,
        now,
        format!("the last good copy of the loop's state {what}; {done}"),
    )))
}

/// The copy of a loop that is over, with no state file: nothing to restore.
fn forget_copy_of_ended_loop(paths: &LoopPaths) {
    if let Some(armed) = &paths.armed {
        let _ = store::remove_if_present(armed);
    }
}

/// A state is left, but neither it nor its copy is the one the ledger names.
fn no_trusted_copy(stated: &Read, copy: &Read, state: &LoopState) -> Custody {
    let why = match (stated, copy) {
        (Read::Good { .. }, Read::Missing) => {
            "the state file was changed outside for-loop and its last good copy is gone"
        }
        (Read::Good { .. }, _) => {
            "the state file was changed outside for-loop and its last good copy does not match \
             the ledger either"
        }
        _ => "the state file is gone or unreadable and its last good copy does not match the ledger",
    };
    Custody::Untrusted { state: state.clone(), why: why.into() }
}

/// Neither the state file nor its copy can be read, or neither is there.
fn unreadable(paths: &LoopPaths, stated: &Read, copy: &Read) -> StoreError {
    let why = match (stated, copy) {
        (Read::Bad(why), _) => why.clone(),
        (_, Read::Bad(why)) => format!("it is gone, and its last good copy is unreadable: {why}"),
        _ => "it is missing".into(),
    };
    StoreError::Read { path: paths.state.clone(), source: std::io::Error::other(why) }
}

/// Every commit since copies are kept writes a ledger line, so a loop with a copy and no ledger
/// had its ledger deleted: a new one is begun.
fn begin_deleted_ledger(
    paths: &LoopPaths,
    copy: &Read,
    incidents: &[Incident],
    now: Timestamp,
) -> Result<Option<Incident>, StoreError> {
    let ledger_noted = incidents.iter().any(|i| i.code == ReasonCode::LedgerTampered);
    if !matches!(copy, Read::Good { .. }) || ledger_noted || fs::symlink_metadata(&paths.ledger).is_ok() {
        return Ok(None);
    }
    // Begun now, so that a second look before this stop's commit does not tell it twice.
    store::private::file_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&paths.ledger)
        .map_err(|source| StoreError::Write { path: paths.ledger.clone(), source })?;
    Ok(Some(Incident::new(
        ReasonCode::LedgerTampered,
        now,
        "the loop's ledger was deleted; its history is lost, and a new ledger begins here",
    )))
}

/// The state to trust without changing anything, for readers that must not write (the guard):
/// the state file when it matches its last good copy, else that copy, else the file as it is.
pub(crate) fn trusted_state(paths: &LoopPaths) -> Result<Option<LoopState>, StoreError> {
    trusted_state_known(paths, &Known::default())
}

/// [`trusted_state`], parsing only texts `known` has not read.
pub(crate) fn trusted_state_known(paths: &LoopPaths, known: &Known) -> Result<Option<LoopState>, StoreError> {
    let copy = paths.armed.as_deref().map_or(Read::Missing, |armed| Read::of(armed, known));
    let stated = Read::of(&paths.state, known);
    match (stated, copy) {
        (stated @ Read::Good { .. }, copy @ Read::Good { .. }) if stated.digest() != copy.digest() => {
            Ok(copy.state().cloned())
        }
        (Read::Missing | Read::Bad(_), Read::Good { state, .. }) if state.is_active() => Ok(Some(*state)),
        (Read::Good { state, .. }, _) => Ok(Some(*state)),
        (Read::Missing, _) => Ok(None),
        // The file as it is cannot be read: the error as a plain load reports it.
        (Read::Bad(_), _) => paths.load(),
    }
}

fn write_copy(armed: &std::path::Path, text: &str, now: Timestamp) -> bool {
    if fs::symlink_metadata(armed).is_ok_and(|m| !m.is_file()) && store::move_aside(armed, now).is_err() {
        return false;
    }
    armed.parent().is_some_and(|parent| store::private::create_dir_all(parent).is_ok())
        && store::write_atomic(armed, text.as_bytes(), false).is_ok()
}

/// What differs between the committed state and the one found, in words.
fn differences(committed: &LoopState, found: &LoopState) -> String {
    let (a, b) = (&committed.meta, &found.meta);
    let mut out = Vec::new();
    let mut field = |name: &str, was: String, now: String| {
        if was != now {
            out.push(format!("{name} {was} → {now}"));
        }
    };
    field("status", format!("{:?}", a.status).to_lowercase(), format!("{:?}", b.status).to_lowercase());
    field("owner", format!("`{}`", a.session_id), format!("`{}`", b.session_id));
    field("verify", quoted(a.settings.verify.as_deref()), quoted(b.settings.verify.as_deref()));
    field(
        "promise",
        quoted(a.settings.completion_promise.as_deref()),
        quoted(b.settings.completion_promise.as_deref()),
    );
    field("cap", a.settings.max_iterations.to_string(), b.settings.max_iterations.to_string());
    field("iteration", a.iteration.to_string(), b.iteration.to_string());
    if a.oracle != b.oracle {
        out.push("the oracle's fingerprints".into());
    }
    if a.loop_id != b.loop_id {
        out.push("the loop id".into());
    }
    if committed.task != found.task {
        out.push("the task".into());
    }
    if out.is_empty() { "other fields".into() } else { out.join(", ") }
}

fn quoted(text: Option<&str>) -> String {
    text.map_or("none".into(), |t| format!("`{t}`"))
}

/// The words for a session whose loop files are all gone although the host's transcript shows
/// that for-loop blocked its last stop: the store was deleted under a running loop. Only asked
/// for a continuation (Claude Code's `stop_hook_active`), so a plain session never pays for it.
pub(crate) fn tell_deleted_store(transcript: &std::path::Path) -> Option<String> {
    use serde_json::Value;
    let lines = crate::support::ReverseLines::open(transcript, 1 << 20).ok()?;
    for line in lines.take(200) {
        let Ok(record) = serde_json::from_slice::<Value>(&line.ok()?) else { continue };
        if record.get("type").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let text = match record.pointer("/message/content") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => continue,
        };
        if text.starts_with("Stop hook feedback:") {
            return text.contains(REINJECTION_MARK).then(|| {
                "for-loop: this session's last stop was blocked by a for-loop loop, but the loop's state \
                 and its last good copy are both gone: something deleted them while the loop ran (if it \
                 was not you, it was the agent). The loop cannot go on without them; start it again with \
                 the for-loop command. To end a loop, cancel it rather than deleting its files."
                    .to_string()
            });
        }
        if record.get("isMeta").and_then(Value::as_bool) != Some(true) {
            // The user's own prompt: the turn began after no block of ours.
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop hands each reading what it read before: the same text is not parsed again, and a
    /// text that changed (a commit in between, an edit behind the loop's back) is never answered
    /// with the state read before it.
    #[test]
    fn a_known_text_is_parsed_once_and_a_changed_one_anew() {
        let known = Known::default();
        let state = crate::state::sample();
        let text = state.render().unwrap();
        assert_eq!(known.parse(&text).unwrap(), state);
        assert_eq!(known.read.borrow().len(), 1);
        assert_eq!(known.parse(&text).unwrap(), state);
        assert_eq!(known.read.borrow().len(), 1, "the same text was parsed again");
        let mut next = state.clone();
        next.meta.iteration += 1;
        assert_eq!(known.parse(&next.render().unwrap()).unwrap(), next);
        for n in 0..10 {
            let mut other = state.clone();
            other.meta.iteration = 100 + n;
            assert_eq!(known.parse(&other.render().unwrap()).unwrap().meta.iteration, 100 + n);
        }
        assert_eq!(known.read.borrow().len(), Known::KEPT, "what a caller keeps is bounded");
        assert!(known.parse("---\nnot: a state\n---\n").is_err());
    }
    use crate::state::LedgerDecision;
    use crate::state::Status;
    use crate::state::sample;
    use crate::store::Store;

    fn now() -> Timestamp {
        "2026-11-22T03:05:00Z".parse().unwrap()
    }

    /// A loop committed once at start and once at a stop, as the hook leaves it.
    fn world() -> (tempfile::TempDir, LoopPaths, LoopState) {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().join("for-loop")).paths("sess-1");
        let state = sample();
        Journal::commit(&paths, &state, &[]).unwrap();
        let mut next = state.clone();
        next.meta.iteration = 2;
        let entry = LedgerEntry::new(&state, now(), LedgerDecision::Block, ReasonCode::VerifyFailed);
        Journal::commit(&paths, &next, &[entry]).unwrap();
        (dir, paths, next)
    }

    fn checked(paths: &LoopPaths) -> (LoopState, Vec<Incident>) {
        match Custody::check(paths, now(), &Known::default()).unwrap() {
            Custody::Loop { state, incidents } => (state, incidents),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_untouched_loop_passes_quietly() {
        let (_dir, paths, state) = world();
        assert_eq!(checked(&paths), (state, vec![]));
    }

    #[test]
    fn an_edited_state_is_restored_and_the_edit_named() {
        let (_dir, paths, state) = world();
        let text = paths.load_text().unwrap().unwrap();
        let edited =
            text.replace("status: active", "status: ended").replace("verify: cargo test", "verify: 'true'");
        fs::write(&paths.state, &edited).unwrap();
        let (found, incidents) = checked(&paths);
        assert_eq!(found, state);
        assert_eq!(paths.load_text().unwrap().unwrap(), text, "restored on disk");
        assert_eq!(incidents.len(), 1);
        assert_eq!(incidents[0].code, ReasonCode::StateTampered);
        let what = &incidents[0].what;
        assert!(what.contains("status active → ended"), "{what}");
        assert!(what.contains("verify `cargo test` → `true`"), "{what}");
        assert!(what.contains("the loop goes on"), "{what}");
        let aside = fs::read_dir(&paths.dir)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().contains("aside"));
        assert_eq!(
            fs::read_to_string(aside.unwrap().path()).unwrap(),
            edited,
            "the edit is kept for inspection"
        );
    }

    #[test]
    fn a_deleted_state_or_session_or_store_is_restored() {
        for delete in ["state", "session", "store"] {
            let (dir, paths, state) = world();
            match delete {
                "state" => fs::remove_file(&paths.state).unwrap(),
                "session" => fs::remove_dir_all(&paths.dir).unwrap(),
                _ => fs::remove_dir_all(dir.path().join("for-loop")).unwrap(),
            }
            let (found, incidents) = checked(&paths);
            assert_eq!(found, state, "{delete}");
            assert_eq!(incidents[0].code, ReasonCode::StateDeleted, "{delete}");
            let ledger_lost = incidents.iter().any(|i| i.code == ReasonCode::LedgerTampered);
            assert_eq!(ledger_lost, delete != "state", "{delete}: {incidents:?}");
            assert!(paths.state.is_file(), "{delete}");
        }
    }

    #[test]
    fn an_unreadable_state_is_restored() {
        let (_dir, paths, state) = world();
        fs::remove_file(&paths.state).unwrap();
        fs::create_dir_all(&paths.state).unwrap();
        let (found, incidents) = checked(&paths);
        assert_eq!(found, state);
        assert!(incidents[0].what.contains("made unreadable (it is a directory"), "{}", incidents[0].what);
        fs::write(&paths.state, "garbage").unwrap();
        let (found, _) = checked(&paths);
        assert_eq!(found, state);
    }

    #[test]
    fn a_deleted_copy_is_written_again_and_told() {
        let (_dir, paths, state) = world();
        let armed = paths.armed.clone().unwrap();
        fs::remove_file(&armed).unwrap();
        let (found, incidents) = checked(&paths);
        assert_eq!(found, state);
        assert!(
            incidents[0].what.contains("last good copy of the loop's state was deleted"),
            "{}",
            incidents[0].what
        );
        assert!(armed.is_file());
    }

    #[test]
    fn with_no_trusted_copy_the_loop_cannot_go_on() {
        // The state edited and its copy deleted.
        let (_dir, paths, _) = world();
        let text = paths.load_text().unwrap().unwrap();
        fs::write(&paths.state, text.replace("verify: cargo test", "verify: 'true'")).unwrap();
        fs::remove_file(paths.armed.as_ref().unwrap()).unwrap();
        assert!(
            matches!(Custody::check(&paths, now(), &Known::default()).unwrap(), Custody::Untrusted { why, .. } if why.contains("is gone"))
        );
        // The state and its copy edited alike.
        let (_dir, paths, _) = world();
        let forged = paths.load_text().unwrap().unwrap().replace("verify: cargo test", "verify: 'true'");
        fs::write(&paths.state, &forged).unwrap();
        fs::write(paths.armed.as_ref().unwrap(), &forged).unwrap();
        assert!(matches!(
            Custody::check(&paths, now(), &Known::default()).unwrap(),
            Custody::Untrusted { .. }
        ));
    }

    #[test]
    fn a_copy_the_ledger_does_not_vouch_for_is_not_restored() {
        let (_dir, paths, _) = world();
        let forged = paths.load_text().unwrap().unwrap().replace("verify: cargo test", "verify: 'true'");
        fs::write(paths.armed.as_ref().unwrap(), &forged).unwrap();
        fs::remove_file(&paths.state).unwrap();
        assert!(matches!(
            Custody::check(&paths, now(), &Known::default()).unwrap(),
            Custody::Untrusted { .. }
        ));
        assert!(!paths.state.exists());
    }

    #[test]
    fn a_loop_from_before_copies_gets_one_silently() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Store::at(dir.path().join("for-loop")).paths("sess-1");
        paths.save(&sample()).unwrap();
        let (found, incidents) = checked(&paths);
        assert_eq!((found, incidents), (sample(), vec![]));
        assert!(paths.armed.as_ref().unwrap().is_file());
    }

    #[test]
    fn an_ended_loop_is_not_checked_and_its_copy_not_restored() {
        let (_dir, paths, state) = world();
        let mut ended = state.clone();
        ended.meta.status = Status::Ended;
        Journal::commit(&paths, &ended, &[]).unwrap();
        fs::remove_file(&paths.state).unwrap();
        assert!(matches!(Custody::check(&paths, now(), &Known::default()).unwrap(), Custody::None));
    }

    #[test]
    fn a_directory_on_the_ledger_path_is_moved_aside() {
        let (_dir, paths, state) = world();
        fs::remove_file(&paths.ledger).unwrap();
        fs::create_dir_all(paths.ledger.join("x")).unwrap();
        let (found, incidents) = checked(&paths);
        assert_eq!(found, state);
        assert_eq!(incidents[0].code, ReasonCode::LedgerTampered);
        assert!(paths.ledger.is_file(), "a new, empty ledger");
        assert_eq!(fs::read(&paths.ledger).unwrap(), b"");
    }

    #[test]
    fn the_guard_reads_the_last_good_copy_of_a_tampered_state() {
        let (_dir, paths, state) = world();
        let text = paths.load_text().unwrap().unwrap();
        fs::write(&paths.state, text.replace("status: active", "status: ended")).unwrap();
        assert_eq!(trusted_state(&paths).unwrap(), Some(state.clone()));
        fs::remove_file(&paths.state).unwrap();
        assert_eq!(trusted_state(&paths).unwrap(), Some(state));
        assert!(!paths.state.exists(), "the guard changes nothing");
    }

    #[test]
    fn a_deleted_store_is_told_from_the_transcript_of_a_continuation() {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("t.jsonl");
        let feedback = format!(
            "Stop hook feedback:
fix it

---
{REINJECTION_MARK} 2 of 30."
        );
        let ours = serde_json::json!({"type": "user", "isMeta": true, "message": {"content": feedback}});
        let theirs = serde_json::json!({"type": "user", "isMeta": true, "message": {"content": "Stop hook feedback:\nlint!"}});
        let assistant = serde_json::json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "ok"}]}});
        fs::write(&transcript, format!("{ours}\n{assistant}\n")).unwrap();
        assert!(tell_deleted_store(&transcript).unwrap().contains("both gone"));
        fs::write(&transcript, format!("{theirs}\n{assistant}\n")).unwrap();
        assert_eq!(tell_deleted_store(&transcript), None);
    }
}
