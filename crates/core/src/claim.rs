//! Loops started where the host tells commands no session id: Cursor, Antigravity and Copilot
//! CLI give the conversation id to hooks only.
//!
//! Such a loop is written without an owner under `pending/<token>/`, and the start command prints
//! its token. The host keeps that output in the conversation's transcript, so the first turn end
//! whose transcript holds the token shows which conversation started the loop: the hook then
//! moves the loop into that session's directory and judges it from that stop on.
//!
//! This keeps both promises. A loop without an owner blocks nobody. Another conversation in the
//! same project cannot take the loop over, because its transcript does not hold the token. Any
//! fault while claiming (an unreadable transcript, a full disk) leaves the loop unclaimed and the
//! stop allowed.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use jiff::{SignedDuration, Timestamp};
use sha2::{Digest, Sha256};

use crate::environment::Environment;
use crate::event::StopEvent;
use crate::host::Host;
use crate::lock::StateLock;
use crate::stop_hook::LOCK_WAIT;
use crate::store::{LoopPaths, Store};

/// Every token starts with this, so it cannot be mistaken for anything else in a transcript.
pub const TOKEN_PREFIX: &str = "for-loop-claim-";
/// A loop nobody claimed within this long is left alone; `status --all` still lists it.
pub const CLAIM_WINDOW: SignedDuration = SignedDuration::from_hours(24);
/// How much of a transcript's end is searched. The start command's output is in the turn that
/// ends at the first stop, so this is far more than needed.
const TRANSCRIPT_TAIL: u64 = 32 << 20;

/// A token no transcript holds by chance: 64 bits from the time, the process, the place and the
/// task.
pub fn new_token(env: &Environment, task: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(env.now.as_nanosecond().to_le_bytes());
    hash.update(std::process::id().to_le_bytes());
    hash.update(env.cwd.as_os_str().as_encoded_bytes());
    hash.update(task.as_bytes());
    let digest = hash.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{TOKEN_PREFIX}{hex}")
}

/// Gives the session of `event` the unclaimed loop its transcript names, if there is one.
/// Returns whether a loop was claimed. Costs one failed `read_dir` when no loop waits.
pub fn attach(store: &Store, host: Host, event: &StopEvent, now: Timestamp) -> bool {
    let Some(transcript) = event.host_transcript.as_deref() else {
        return false;
    };
    let Ok(waiting) = store.pending_all() else {
        return false;
    };
    for paths in waiting {
        let Ok(Some(state)) = paths.load() else { continue };
        let fresh = now.duration_since(state.meta.started_at) <= CLAIM_WINDOW;
        // A loop started outside this conversation's project is not its own: no need to read
        // the transcript.
        let inside = event.cwd.as_deref().is_none_or(|project| state.meta.cwd.starts_with(project));
        if state.meta.host != host.name() || !state.is_active() || !fresh || !inside {
            continue;
        }
        let Some(token) = paths.dir.file_name().and_then(|name| name.to_str()) else { continue };
        if transcript_holds(transcript, token, TRANSCRIPT_TAIL).unwrap_or(false) {
            return claim(store, &paths, &event.session_id, now).is_ok();
        }
    }
    false
}

/// Moves the waiting loop at `pending` into `session_id`'s directory, owned by that session.
fn claim(store: &Store, pending: &LoopPaths, session_id: &str, now: Timestamp) -> io::Result<()> {
    let target = store.paths(session_id);
    fs::create_dir_all(&target.dir)?;
    let _pending_lock = StateLock::acquire(&pending.lock, LOCK_WAIT).map_err(io::Error::other)?;
    let _target_lock = StateLock::acquire(&target.lock, LOCK_WAIT).map_err(io::Error::other)?;
    // Re-read under the lock: another stop may have claimed it meanwhile.
    let Some(mut state) = pending.load().map_err(io::Error::other)? else {
        return Err(io::ErrorKind::NotFound.into());
    };
    if let Some(previous) = target.load().map_err(io::Error::other)? {
        if previous.is_active() {
            return Err(io::Error::other("the session already has a loop"));
        }
        target.archive(&previous.meta.loop_id)?;
    }
    state.meta.session_id = session_id.to_string();
    state.meta.updated_at = now;
    target.save(&state).map_err(io::Error::other)?;
    let originals = pending.dir.join("oracle");
    if originals.exists() {
        let into = target.dir.join("oracle");
        if into.exists() {
            fs::rename(&into, target.dir.join(format!("oracle.before-{}", now.as_second())))?;
        }
        fs::rename(&originals, &into)?;
    }
    if pending.ledger.exists() {
        fs::rename(&pending.ledger, &target.ledger)?;
    }
    fs::remove_dir_all(&pending.dir)
}

/// Whether the last `tail_bytes` of the file at `path` hold `token`.
fn transcript_holds(path: &Path, token: &str, tail_bytes: u64) -> io::Result<bool> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(tail_bytes)))?;
    let mut tail = Vec::new();
    file.take(tail_bytes).read_to_end(&mut tail)?;
    // Transcripts are JSON text; `str::contains` searches far faster than comparing windows.
    Ok(String::from_utf8_lossy(&tail).contains(token))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::state::tests::sample;

    const NOW: &str = "2026-11-22T03:00:00Z";

    fn env(cwd: &str) -> Environment {
        Environment::new(std::iter::empty(), PathBuf::from(cwd), NOW.parse().unwrap())
    }

    /// A store holding one unclaimed Cursor loop, and a transcript that holds its token.
    fn world(dir: &Path) -> (Store, String, PathBuf) {
        let store = Store::at(dir.join("store"));
        let token = new_token(&env("/p"), "task");
        let mut state = sample();
        state.meta.session_id.clear();
        state.meta.host = Host::Cursor.name().into();
        state.meta.started_at = NOW.parse().unwrap();
        let pending = store.pending_paths(&token);
        pending.save(&state).unwrap();
        fs::create_dir_all(pending.dir.join("oracle")).unwrap();
        fs::write(pending.dir.join("oracle/check.sh"), "exit 1\n").unwrap();
        let transcript = dir.join("transcript.jsonl");
        fs::write(&transcript, format!("{{\"tool_result\":\"loop started\\nclaim {token}\\n\"}}\n")).unwrap();
        (store, token, transcript)
    }

    fn stop(session: &str, transcript: &Path) -> StopEvent {
        StopEvent {
            session_id: session.into(),
            cwd: Some(PathBuf::from("/project")),
            host_transcript: Some(transcript.to_path_buf()),
            ..StopEvent::default()
        }
    }

    #[test]
    fn tokens_are_distinct_and_marked() {
        let a = new_token(&env("/p"), "task");
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 16, "{a}");
        assert_ne!(a, new_token(&env("/q"), "task"));
        assert_ne!(a, new_token(&env("/p"), "other task"));
    }

    #[test]
    fn the_conversation_whose_transcript_holds_the_token_claims_the_loop() {
        let dir = tempfile::tempdir().unwrap();
        let (store, token, transcript) = world(dir.path());
        assert!(attach(&store, Host::Cursor, &stop("conv-1", &transcript), NOW.parse().unwrap()));
        let claimed = store.paths("conv-1").load().unwrap().unwrap();
        assert_eq!(claimed.meta.session_id, "conv-1");
        assert!(store.paths("conv-1").dir.join("oracle/check.sh").is_file());
        assert!(!store.pending_paths(&token).dir.exists());
        assert!(store.pending_all().unwrap().is_empty());
    }

    #[test]
    fn other_conversations_hosts_and_old_loops_claim_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, transcript) = world(dir.path());
        let now = NOW.parse().unwrap();
        let elsewhere = dir.path().join("other.jsonl");
        fs::write(&elsewhere, "{\"text\":\"for-loop-claim-0000000000000000\"}\n").unwrap();
        assert!(!attach(&store, Host::Cursor, &stop("conv-2", &elsewhere), now));
        assert!(!attach(&store, Host::Cursor, &stop("conv-2", &dir.path().join("missing")), now));
        assert!(!attach(
            &store,
            Host::Cursor,
            &StopEvent { session_id: "c".into(), ..Default::default() },
            now
        ));
        assert!(!attach(&store, Host::Antigravity, &stop("conv-2", &transcript), now));
        let other_project = StopEvent { cwd: Some("/elsewhere".into()), ..stop("conv-2", &transcript) };
        assert!(!attach(&store, Host::Cursor, &other_project, now));
        let later = now + CLAIM_WINDOW + SignedDuration::from_secs(1);
        assert!(!attach(&store, Host::Cursor, &stop("conv-2", &transcript), later));
        assert_eq!(store.pending_all().unwrap().len(), 1, "the loop still waits");
        assert!(store.all().unwrap().is_empty());
    }

    #[test]
    fn a_session_with_an_active_loop_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, transcript) = world(dir.path());
        let mut own = sample();
        own.meta.session_id = "conv-1".into();
        own.task = "the session's own loop".into();
        store.paths("conv-1").save(&own).unwrap();
        assert!(!attach(&store, Host::Cursor, &stop("conv-1", &transcript), NOW.parse().unwrap()));
        assert_eq!(store.paths("conv-1").load().unwrap().unwrap().task, "the session's own loop");
        assert_eq!(store.pending_all().unwrap().len(), 1);
    }

    #[test]
    fn only_the_transcripts_end_is_searched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let token = "for-loop-claim-0123456789abcdef";
        let mut text = format!("{token}\n").into_bytes();
        text.resize(4_096, b'x');
        fs::write(&path, &text).unwrap();
        assert!(transcript_holds(&path, token, 8_192).unwrap());
        assert!(!transcript_holds(&path, token, 4_000).unwrap());
        text.extend_from_slice(token.as_bytes());
        fs::write(&path, &text).unwrap();
        assert!(transcript_holds(&path, token, 4_000).unwrap());
    }
}
