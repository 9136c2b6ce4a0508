//! The loop's ledger: one JSON line per judged stop, appended under the loop's lock. Lines are
//! never rewritten; only a commit that is undone takes its own lines out again
//! ([`crate::store::journal`]).
//!
//! It is the loop's history for `status`, for the end-of-loop summary and for anyone asking
//! afterwards why a loop went on or ended. Each line a commit writes carries the digest of the
//! state that commit left, so the ledger also witnesses the state ([`crate::store::custody`]).
//!
//! New fields are optional, so ledgers written by earlier versions still read.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::state::{LedgerDecision, LedgerEntry, ReasonCode};
use crate::support::ReverseLines;

impl LedgerEntry {
    /// Appends this entry as one line, written with a single call. Only under the loop's lock
    /// ([`crate::store::transaction`]): a commit undone removes its own bytes, and must find
    /// nobody else's inside them. A last line left unfinished (a commit killed mid-write) is
    /// ended first, so that this line stays one of its own.
    pub(in crate::store) fn append_to(&self, path: &Path) -> io::Result<()> {
        let mut bytes = lines_of(std::slice::from_ref(self))?;
        if ends_mid_line(path) {
            bytes.insert(0, b'\n');
        }
        append_lines(path, &bytes)
    }

    /// The digest of the state the last committed line of `loop_id` left, if a line says.
    pub(crate) fn last_state_digest(path: &Path, loop_id: &str) -> Option<String> {
        let lines = ReverseLines::open(path, 1 << 20).ok()?;
        lines
            .filter_map(|line| serde_json::from_slice::<LedgerEntry>(&line.ok()?).ok())
            .find(|entry| entry.loop_id == loop_id && entry.state_digest.is_some())
            .and_then(|entry| entry.state_digest)
    }

    /// The lines after the last judged stop of `loop_id`: the stops allowed since without a
    /// verdict, each of which the next judged stop tells the user about again.
    pub(crate) fn since_last_verdict(path: &Path, loop_id: &str) -> Vec<LedgerEntry> {
        let mut since = Vec::new();
        let Ok(lines) = ReverseLines::open(path, 1 << 20) else { return since };
        for line in lines.take(50) {
            let Some(entry) = line.ok().and_then(|l| serde_json::from_slice::<LedgerEntry>(&l).ok()) else {
                continue;
            };
            if entry.loop_id != loop_id && !entry.loop_id.is_empty() {
                continue;
            }
            if entry.reason.is_verdict()
                || matches!(entry.decision, LedgerDecision::Resume | LedgerDecision::Start)
            {
                break;
            }
            // A change of the host's configuration the agent made, told at a tool call or a
            // prompt, is told again at the next judged stop, whose pass it takes away.
            let hooks_changed = entry.reason == ReasonCode::HostConfigChanged
                && entry.origin == Some(crate::host::Origin::Agent);
            if entry.reason.let_through_unjudged() || entry.reason == ReasonCode::ForgedStop || hooks_changed
            {
                since.push(entry);
            }
        }
        since.reverse();
        since
    }
}

impl LedgerEntry {
    /// How many of `loop_id`'s stops in a row, since its last verdict, were taken for forged.
    pub(crate) fn forged_streak(path: &Path, loop_id: &str) -> u32 {
        let since = LedgerEntry::since_last_verdict(path, loop_id);
        let streak = since.iter().rev().take_while(|e| e.reason == ReasonCode::ForgedStop).count();
        u32::try_from(streak).unwrap_or(u32::MAX)
    }

    /// How many stops of `loop_id` were taken for forged, in all.
    pub(crate) fn forged_stops(path: &Path, loop_id: &str) -> u32 {
        let Ok(lines) = ReverseLines::open(path, 4 << 20) else { return 0 };
        let forged = lines
            .filter_map(|line| serde_json::from_slice::<LedgerEntry>(&line.ok()?).ok())
            .filter(|e| e.loop_id == loop_id && e.reason == ReasonCode::ForgedStop)
            .count();
        u32::try_from(forged).unwrap_or(u32::MAX)
    }
}

/// The entries as the bytes of their lines.
pub(crate) fn lines_of(entries: &[LedgerEntry]) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    for entry in entries {
        serde_json::to_writer(&mut bytes, entry).map_err(io::Error::other)?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// Whether the ledger's last byte is not the end of a line.
fn ends_mid_line(path: &Path) -> bool {
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    let mut last = [0u8; 1];
    file.seek(SeekFrom::End(-1)).is_ok() && file.read_exact(&mut last).is_ok() && last[0] != b'\n'
}

/// Appends `bytes` (whole lines) with one write, so concurrent appends never interleave within
/// a line. A ledger path that is not a regular file is refused rather than followed.
pub(in crate::store) fn append_lines(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && !meta.is_file()
    {
        return Err(io::Error::other(format!(
            "{} is {}, not the ledger file",
            path.display(),
            crate::store::describe(&meta)
        )));
    }
    let mut file = crate::store::private::file_options().create(true).append(true).open(path)?;
    file.write_all(bytes)?;
    file.flush()
}

impl LedgerEntry {
    /// The last `n` entries of a ledger, oldest first. Lines that do not parse are skipped.
    pub(crate) fn read_last(path: &Path, n: usize) -> io::Result<Vec<LedgerEntry>> {
        let mut entries = Vec::new();
        for line in ReverseLines::open(path, 4 << 20)? {
            if entries.len() == n {
                break;
            }
            if let Ok(entry) = serde_json::from_slice(&line?) {
                entries.push(entry);
            }
        }
        entries.reverse();
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::verify::VerifyOutcome;
    use crate::state::VerifyRecord;

    fn entry(iteration: u32) -> LedgerEntry {
        let time = "2026-11-22T03:00:00Z".parse().unwrap();
        LedgerEntry {
            loop_id: "l".into(),
            iteration,
            stop_hook_active: Some(false),
            ..LedgerEntry::new(&crate::state::sample(), time, LedgerDecision::Block, ReasonCode::VerifyFailed)
        }
    }

    /// Issue 32: a change of the host's configuration the agent made, told at a tool call or a
    /// prompt, is told again at the next judged stop; the user's own change is not.
    #[test]
    fn the_agents_host_config_change_since_the_last_verdict_is_told_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let note = |origin| LedgerEntry {
            decision: LedgerDecision::Note,
            reason: ReasonCode::HostConfigChanged,
            origin: Some(origin),
            detail: Some("changed".into()),
            ..entry(1)
        };
        entry(1).append_to(&path).unwrap();
        note(crate::host::origin::Origin::User).append_to(&path).unwrap();
        note(crate::host::origin::Origin::Agent).append_to(&path).unwrap();
        let since = LedgerEntry::since_last_verdict(&path, "l");
        assert_eq!(since.len(), 1, "{since:?}");
        assert_eq!(since[0].origin, Some(crate::host::origin::Origin::Agent));
        entry(2).append_to(&path).unwrap();
        assert!(LedgerEntry::since_last_verdict(&path, "l").is_empty(), "a verdict told it");
    }

    #[test]
    fn appends_lines_and_reads_the_last_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        for i in 1..=5 {
            entry(i).append_to(&path).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 5);
        let last = LedgerEntry::read_last(&path, 2).unwrap();
        assert_eq!(last.iter().map(|e| e.iteration).collect::<Vec<_>>(), [4, 5]);
    }

    #[test]
    fn a_line_appended_after_an_unfinished_one_stays_a_line_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        entry(1).append_to(&path).unwrap();
        append_lines(&path, br#"{"time":"2026-11-22T03:0"#).unwrap();
        entry(2).append_to(&path).unwrap();
        let read: Vec<u32> = LedgerEntry::read_last(&path, 10).unwrap().iter().map(|e| e.iteration).collect();
        assert_eq!(read, [1, 2]);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
    }

    /// A line written when the output digest was a bare FNV-1a still reads, and its digest
    /// differs from the one this version records for the same output: the same failure is not
    /// claimed across the change of hash.
    #[test]
    fn an_older_lines_fnv1a_output_digest_reads_as_a_different_output() {
        let old = r#"{"time":"2026-11-22T03:00:00Z","loop_id":"l","iteration":2,"max_iterations":30,"decision":"block","reason":"verify_failed","verify":{"exit_code":1,"timed_out":false,"duration_ms":5,"output_bytes":4,"output_digest":"9a2ed69baa128e76","tail":"bad"}}"#;
        let entry: LedgerEntry = serde_json::from_str(old).unwrap();
        let old_digest = entry.verify.unwrap().output_digest;
        assert_eq!(old_digest, format!("{:016x}", crate::support::digest::Fnv1a::of(b"bad\n")));
        let mut output = crate::checks::verify::Captured::default();
        output.push(b"bad\n");
        let outcome = VerifyOutcome {
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            untrusted: None,
            duration: std::time::Duration::from_millis(5),
            output,
        };
        let now = VerifyRecord::of(&outcome).output_digest;
        assert!(now.starts_with("xxh64:"), "{now}");
        assert_ne!(now, old_digest);
    }

    /// Lines as earlier versions wrote them still read, and the words on disk stay the same.
    #[test]
    fn reads_the_lines_earlier_versions_wrote() {
        let old = r#"{"time":"2026-11-22T03:00:00Z","loop_id":"l","iteration":2,"max_iterations":30,"decision":"note","reason":"harness_override","stop_hook_active":false,"detail":"x"}"#;
        let entry: LedgerEntry = serde_json::from_str(old).unwrap();
        assert_eq!((entry.decision, entry.reason), (LedgerDecision::Note, ReasonCode::HarnessOverride));
        for decision in [
            LedgerDecision::Start,
            LedgerDecision::Block,
            LedgerDecision::Allow,
            LedgerDecision::Cancel,
            LedgerDecision::Resume,
            LedgerDecision::Note,
        ] {
            assert_eq!(serde_json::to_string(&decision).unwrap(), format!("\"{decision}\""));
        }
        assert_eq!(format!("{:<6}|", LedgerDecision::Note), "note  |");
    }

    /// Whatever stands at the ledger's path instead of the file is refused, never written through
    /// (a link to `/dev/full`, a directory): the hook moves it aside first.
    #[test]
    #[cfg(unix)]
    fn only_the_ledger_file_itself_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        std::os::unix::fs::symlink("/dev/full", &path).unwrap();
        let err = entry(1).append_to(&path).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link, not the ledger file"), "{err}");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(entry(1).append_to(&path).unwrap_err().to_string().contains("a directory"));
    }

    #[test]
    fn tells_the_last_digest_and_the_stops_let_through_since_the_last_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let line = |decision, reason, digest: Option<&str>| LedgerEntry {
            decision,
            reason,
            state_digest: digest.map(str::to_string),
            ..entry(1)
        };
        for e in [
            line(LedgerDecision::Start, ReasonCode::Started, Some("sha256:a")),
            line(LedgerDecision::Allow, ReasonCode::InternalError, None),
            line(LedgerDecision::Block, ReasonCode::VerifyFailed, Some("sha256:b")),
            line(LedgerDecision::Allow, ReasonCode::InternalError, None),
            line(LedgerDecision::Allow, ReasonCode::ForeignSession, None),
            line(LedgerDecision::Allow, ReasonCode::RecordFailed, None),
        ] {
            e.append_to(&path).unwrap();
        }
        assert_eq!(LedgerEntry::last_state_digest(&path, "l").as_deref(), Some("sha256:b"));
        assert_eq!(LedgerEntry::last_state_digest(&path, "other"), None);
        let since: Vec<ReasonCode> =
            LedgerEntry::since_last_verdict(&path, "l").iter().map(|e| e.reason).collect();
        assert_eq!(since, [ReasonCode::InternalError, ReasonCode::RecordFailed]);
    }
}
