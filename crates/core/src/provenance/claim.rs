//! Loops started where the host tells commands no session id: Cursor and Antigravity give the
//! conversation id to hooks only. (Copilot CLI gives it to its prompt hook and the agent's
//! shell, so its loops are bound at once: see [`Host::tells_commands_the_session`].)
//!
//! Such a loop is written without an owner under `pending/<key>/`, and the start command prints
//! its token. The host keeps that output in the conversation's transcript, so the first turn end
//! whose transcript holds the token shows which conversation started the loop: the hook then
//! moves the loop into that session's directory and judges it from that stop on.
//!
//! This keeps both promises. A loop without an owner blocks nobody. Another conversation in the
//! same project cannot take the loop over, because its transcript does not hold the token: only
//! `start` ever prints it, and the directory is named after a digest of it, so the paths that
//! `status` and error messages print give nothing away. Any fault while claiming (an unreadable
//! transcript, a full disk) leaves the loop unclaimed and the stop allowed.

use std::io;

use jiff::{SignedDuration, Timestamp};

use crate::host::Host;
use crate::host::{StopEvent, Transcript};
use crate::state::ReasonCode;
use crate::state::Status;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::Transaction;
use crate::store::{LoopPaths, Store};
use crate::support::digest::{hex, sha256_hex};
use crate::support::read::bounded_read;

/// Every token starts with this, so it cannot be mistaken for anything else in a transcript.
pub(crate) const TOKEN_PREFIX: &str = "for-loop-claim-";
/// Hex digits after the prefix: 64 bits.
const TOKEN_HEX: usize = 16;
/// A loop nobody claimed within this long is no longer claimed; the next `start` or `cancel`
/// moves it to `unclaimed/`.
pub(crate) const CLAIM_WINDOW: SignedDuration = SignedDuration::from_hours(24);
/// How much of a transcript's end is searched. The start command's output is in the turn that
/// ends at the first stop, so this is far more than needed.
const TRANSCRIPT_TAIL: u64 = 32 << 20;

/// A token no transcript holds by chance and nobody can work out from what `status` shows:
/// 64 bits from the operating system's random source.
pub(crate) fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; TOKEN_HEX / 2];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{TOKEN_PREFIX}{}", hex(&bytes)))
}

/// The name of a waiting loop's directory: a digest of its token, never the token itself.
pub(crate) fn pending_key(token: &str) -> String {
    sha256_hex(token.as_bytes())[..32].to_string()
}

/// Gives the session of `event` the waiting loop whose token its transcript holds, if there is
/// one; the latest token in the transcript first. Returns whether a loop was claimed. Costs one
/// failed `read_dir` when no loop waits.
pub(crate) fn attach(store: &Store, host: Host, event: &StopEvent, now: Timestamp) -> bool {
    // Loops wait to be claimed only on hosts whose commands cannot name their session.
    if host.tells_commands_the_session() {
        return false;
    }
    let Some(transcript) = event.transcript.as_ref().map(Transcript::path) else {
        return false;
    };
    if !store.has_pending() {
        return false;
    }
    // Cancelled and expired loops go first, so that they never cost a transcript read again.
    sweep(store, now);
    if !store.has_pending() {
        return false;
    }
    // A transcript that is not a regular file (a FIFO, a device) claims nothing, at once.
    let Ok(tail) = bounded_read::read_tail(transcript, TRANSCRIPT_TAIL) else {
        return false;
    };
    let text = String::from_utf8_lossy(&tail);
    let mut tokens = tokens_in(&text);
    tokens.reverse();
    tokens.dedup();
    let Some(at) = tokens.iter().position(|token| {
        let pending = store.pending_paths(&pending_key(token));
        pending.state.exists() && claim(store, host, &pending, &event.session_id, now).unwrap_or(false)
    }) else {
        return false;
    };
    // Loops this conversation started before the one it just claimed were replaced by it: a
    // start run again to fix a flag. They must not come back when the claimed loop ends.
    for token in &tokens[at + 1..] {
        set_aside(store, &store.pending_paths(&pending_key(token)));
    }
    true
}

/// Moves the waiting loop at `pending` into `session_id`'s directory, owned by that session.
/// Ok(false) when it is not to be claimed (any more). Safe to repeat after a crash midway: a
/// copy whose loop the session already holds is removed, never started again.
fn claim(
    store: &Store,
    host: Host,
    pending: &LoopPaths,
    session_id: &str,
    now: Timestamp,
) -> io::Result<bool> {
    let target = store.paths(session_id);
    target.make_dir()?;
    let waiting = Transaction::lock(pending).map_err(io::Error::other)?;
    let claiming = Transaction::lock(&target).map_err(io::Error::other)?;
    // Read under the locks: a cancel or another stop may have got here first.
    let Some(mut state) = pending.load().map_err(io::Error::other)? else {
        return Ok(false);
    };
    let loop_id = state.meta.loop_id.clone();
    let current = target.load().map_err(io::Error::other)?;
    let held_before =
        current.as_ref().is_some_and(|current| current.meta.loop_id == loop_id) || target.archived(&loop_id);
    if held_before {
        let _ = waiting.remove_loop();
        return Ok(false);
    }
    let fresh = now.duration_since(state.meta.started_at) <= CLAIM_WINDOW;
    if state.meta.host != host || !state.is_active() || !fresh {
        return Ok(false);
    }
    match current {
        // The session's own running loop goes on; this one waits (and expires).
        Some(current) if current.is_active() => return Ok(false),
        Some(current) => {
            claiming.archive(&current.meta.loop_id)?;
        }
        None => {}
    }
    claiming.adopt_oracle_originals(&waiting, now)?;
    claiming.adopt_ledger(&waiting)?;
    state.meta.session_id = session_id.to_string();
    state.meta.updated_at = now;
    let claimed = LedgerEntry {
        detail: Some(format!("claimed by conversation {session_id}")),
        ..LedgerEntry::new(&state, now, LedgerDecision::Note, ReasonCode::Claimed)
    };
    // A commit of its own, not a stage's change for the stop's one commit: the loop it makes must
    // be on disk between the moves above and the removal of the waiting copy below, and before
    // the stop opens it to judge it (a crash in between is repaired by the next claim).
    claiming.commit(&state, &[claimed]).map_err(io::Error::other)?;
    // The loop is the session's now; a copy left here by a crash is removed by the next claim.
    let _ = waiting.remove_loop();
    Ok(true)
}

/// Moves waiting loops that were cancelled or not claimed in time out of the way, to
/// `unclaimed/`, so that stops stop searching transcripts for them. Nothing is deleted.
pub(crate) fn sweep(store: &Store, now: Timestamp) {
    let Ok(waiting) = store.pending_all() else { return };
    for pending in waiting {
        let done = match pending.load() {
            Ok(Some(state)) => {
                state.meta.status == Status::Ended || now.duration_since(state.meta.started_at) > CLAIM_WINDOW
            }
            _ => false,
        };
        if done {
            set_aside(store, &pending);
        }
    }
}

/// Moves a waiting loop to `unclaimed/`, under its lock.
fn set_aside(store: &Store, pending: &LoopPaths) {
    if !pending.state.exists() {
        return;
    }
    let Ok(held) = Transaction::lock(pending) else { return };
    let _ = held.set_aside_unclaimed(store);
}

/// The tokens in `text`, in order of appearance.
fn tokens_in(text: &str) -> Vec<&str> {
    text.match_indices(TOKEN_PREFIX)
        .filter_map(|(at, _)| text.get(at..at + TOKEN_PREFIX.len() + TOKEN_HEX))
        .filter(|token| {
            token[TOKEN_PREFIX.len()..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::state::sample;

    const NOW: &str = "2026-11-22T03:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    /// A store holding one waiting Cursor loop, and a transcript that holds its token.
    fn world(dir: &Path) -> (Store, String, PathBuf) {
        let store = Store::at(dir.join("store"));
        let token = new_token().unwrap();
        let mut state = sample();
        state.meta.session_id.clear();
        state.meta.host = Host::Cursor;
        state.meta.started_at = now();
        let pending = store.pending_paths(&pending_key(&token));
        pending.save(&state).unwrap();
        fs::create_dir_all(pending.dir.join("oracle")).unwrap();
        fs::write(pending.dir.join("oracle/check.sh"), "exit 1\n").unwrap();
        let transcript = dir.join("transcript.jsonl");
        fs::write(&transcript, format!("{{\"tool_result\":\"loop started\\nClaim: {token} (...)\"}}\n"))
            .unwrap();
        (store, token, transcript)
    }

    fn stop(session: &str, transcript: &Path) -> StopEvent {
        StopEvent {
            session_id: session.into(),
            transcript: Some(Transcript::Opaque(transcript.to_path_buf())),
            ..StopEvent::default()
        }
    }

    #[test]
    fn tokens_are_random_marked_and_not_their_directorys_name() {
        let a = new_token().unwrap();
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + TOKEN_HEX, "{a}");
        assert_eq!(tokens_in(&a), [a.as_str()]);
        assert_ne!(a, new_token().unwrap());
        let key = pending_key(&a);
        assert!(!key.contains(&a[TOKEN_PREFIX.len()..]) && key.len() == 32, "{key}");
    }

    #[test]
    fn tokens_are_found_in_any_text() {
        let text = "x for-loop-claim-0123456789abcdef\\n\"for-loop-claim-fedcba9876543210\" \
                    for-loop-claim-short for-loop-claim-0123456789ABCDEF for-loop-claim-0123456789abcde";
        assert_eq!(tokens_in(text), ["for-loop-claim-0123456789abcdef", "for-loop-claim-fedcba9876543210"]);
    }

    #[test]
    fn the_conversation_whose_transcript_holds_the_token_claims_the_loop() {
        let dir = tempfile::tempdir().unwrap();
        let (store, token, transcript) = world(dir.path());
        assert!(attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
        let claimed = store.paths("conv-1").load().unwrap().unwrap();
        assert_eq!(claimed.meta.session_id, "conv-1");
        assert!(store.paths("conv-1").dir.join("oracle/check.sh").is_file());
        assert!(!store.pending_paths(&pending_key(&token)).dir.exists());
        assert!(!store.has_pending());
    }

    #[test]
    fn other_conversations_hosts_and_old_loops_claim_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, transcript) = world(dir.path());
        let elsewhere = dir.path().join("other.jsonl");
        fs::write(&elsewhere, "{\"text\":\"for-loop-claim-0000000000000000\"}\n").unwrap();
        assert!(!attach(&store, Host::Cursor, &stop("conv-2", &elsewhere), now()));
        assert!(!attach(&store, Host::Cursor, &stop("conv-2", &dir.path().join("missing")), now()));
        assert!(!attach(&store, Host::Cursor, &stop("conv-2", dir.path()), now()), "a directory");
        let no_transcript = StopEvent { session_id: "conv-2".into(), ..StopEvent::default() };
        assert!(!attach(&store, Host::Cursor, &no_transcript, now()));
        assert!(!attach(&store, Host::Antigravity, &stop("conv-2", &transcript), now()));
        assert_eq!(store.pending_all().unwrap().len(), 1, "the loop still waits");
        // Past the window even the right transcript claims nothing, and the loop is set aside.
        let later = now() + CLAIM_WINDOW + SignedDuration::from_secs(1);
        assert!(!attach(&store, Host::Cursor, &stop("conv-1", &transcript), later));
        assert!(!store.has_pending());
        assert!(store.all().unwrap().is_empty());
    }

    #[test]
    fn a_session_with_a_running_loop_keeps_it_and_an_ended_one_is_archived() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, transcript) = world(dir.path());
        let mut own = sample();
        own.meta.session_id = "conv-1".into();
        own.meta.loop_id = "own-loop".into();
        store.paths("conv-1").save(&own).unwrap();
        assert!(!attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
        assert_eq!(store.paths("conv-1").load().unwrap().unwrap().meta.loop_id, "own-loop");
        assert!(store.has_pending());

        own.meta.status = Status::Ended;
        store.paths("conv-1").save(&own).unwrap();
        assert!(attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
        assert_ne!(store.paths("conv-1").load().unwrap().unwrap().meta.loop_id, "own-loop");
        assert!(store.paths("conv-1").dir.join("archive/own-loop/state.md").is_file());
    }

    /// A waiting loop in `store` with a fresh token; returns the token.
    fn wait(store: &Store, loop_id: &str) -> String {
        let token = new_token().unwrap();
        let mut state = sample();
        state.meta.session_id.clear();
        state.meta.loop_id = loop_id.into();
        state.meta.host = Host::Cursor;
        state.meta.started_at = now();
        store.pending_paths(&pending_key(&token)).save(&state).unwrap();
        token
    }

    fn end(store: &Store, session: &str) {
        let paths = store.paths(session);
        let mut state = paths.load().unwrap().unwrap();
        state.meta.status = Status::Ended;
        paths.save(&state).unwrap();
    }

    #[test]
    fn a_copy_left_by_an_interrupted_claim_is_removed_not_restarted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("store"));
        let first = wait(&store, "first-loop");
        let pending = store.pending_paths(&pending_key(&first));
        let copy = fs::read(&pending.state).unwrap();
        let transcript = dir.path().join("t");
        fs::write(&transcript, format!("{first}\n")).unwrap();
        assert!(attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
        end(&store, "conv-1");
        // As if the claim had died before removing the waiting copy: the session's ended loop
        // is that same loop, so the copy goes and nothing starts again.
        fs::create_dir_all(&pending.dir).unwrap();
        fs::write(&pending.state, &copy).unwrap();
        assert!(!attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
        assert!(!pending.dir.exists());
        assert!(!store.paths("conv-1").load().unwrap().unwrap().is_active());

        // The same once a later loop has replaced it and it is only in the archive.
        let second = wait(&store, "second-loop");
        fs::write(&transcript, format!("{first}\n{second}\n")).unwrap();
        assert!(attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
        assert_eq!(store.paths("conv-1").load().unwrap().unwrap().meta.loop_id, "second-loop");
        end(&store, "conv-1");
        fs::create_dir_all(&pending.dir).unwrap();
        fs::write(&pending.state, &copy).unwrap();
        assert!(!attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
        assert!(!pending.dir.exists());
        assert_eq!(store.paths("conv-1").load().unwrap().unwrap().meta.loop_id, "second-loop");
    }

    #[test]
    fn the_newest_start_wins_and_the_ones_it_replaced_never_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("store"));
        let older = wait(&store, "older-loop");
        let newer = wait(&store, "newer-loop");
        let transcript = dir.path().join("t");
        fs::write(&transcript, format!("Claim: {older}\n...\nClaim: {newer}\n")).unwrap();
        assert!(attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
        assert_eq!(store.paths("conv-1").load().unwrap().unwrap().meta.loop_id, "newer-loop");
        assert!(!store.has_pending(), "the replaced loop still waits");
        assert!(store.root().join("unclaimed").join(pending_key(&older)).join("state.md").is_file());
        end(&store, "conv-1");
        assert!(!attach(&store, Host::Cursor, &stop("conv-1", &transcript), now()));
    }

    #[test]
    fn sweep_moves_cancelled_and_expired_loops_aside() {
        let dir = tempfile::tempdir().unwrap();
        let (store, token, _) = world(dir.path());
        sweep(&store, now());
        assert!(store.has_pending(), "a fresh waiting loop stays");
        sweep(&store, now() + CLAIM_WINDOW + SignedDuration::from_secs(1));
        assert!(!store.has_pending());
        assert!(store.root().join("unclaimed").join(pending_key(&token)).join("state.md").is_file());

        let cancelled = wait(&store, "cancelled-loop");
        let pending = store.pending_paths(&pending_key(&cancelled));
        let mut state = pending.load().unwrap().unwrap();
        state.meta.status = Status::Ended;
        pending.save(&state).unwrap();
        sweep(&store, now());
        assert!(!store.has_pending());
        assert!(store.root().join("unclaimed").join(pending_key(&cancelled)).join("state.md").is_file());
    }
}
