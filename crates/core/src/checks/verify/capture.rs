//! Keeping the head and the tail of a stream of any size in bounded memory.
//!
//! Verify output can be gigabytes (a test suite stuck printing in a loop); the hook must neither
//! run out of memory nor put more than a few kilobytes of it into the re-injected prompt.

use crate::checks::failures::{FailureDigest, FailureScanner};
use crate::checks::test_count::{Scanner, Tally};
use crate::support::Xxh64;

const HEAD_BYTES: usize = 16 * 1024;
const TAIL_BYTES: usize = 64 * 1024;

/// What was kept of a stream: its first and last bytes, its size, a digest of all of it, and the
/// test runners' summaries anywhere in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Captured {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    digest: Xxh64,
    tests: Scanner,
    failures: FailureScanner,
    /// The command exited while a process it left behind still held its output open: what that
    /// process wrote afterwards was not read.
    cut_at_exit: bool,
    /// How the command's descendants were kept from writing after its exit.
    ended_by: crate::checks::verify::Containment,
}

/// The line the output ends with when it was cut at the command's exit. No digits: a metric's
/// number is read from the output's last lines.
const CUT_AT_EXIT: &[u8] =
    b"[for-loop: output written after the check exited was not read (a process it left behind held its output open)]\n";

impl Captured {
    /// Reads `reader` to its end, keeping the head and tail only.
    #[cfg(test)]
    pub(crate) fn read_from(mut reader: impl std::io::Read) -> std::io::Result<Captured> {
        let mut captured = Captured::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            captured.push(&buf[..n]);
        }
        Ok(captured)
    }

    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.digest.update(chunk);
        self.tests.push(chunk);
        self.failures.push(chunk);
        if self.head.len() < HEAD_BYTES {
            let take = chunk.len().min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if chunk.len() >= TAIL_BYTES {
            // Reads come a megabyte at a time: only the chunk's end can be kept, so only that
            // is copied.
            self.tail.clear();
            chunk = &chunk[chunk.len() - TAIL_BYTES..];
        }
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > 2 * TAIL_BYTES {
            self.tail.drain(..self.tail.len() - TAIL_BYTES);
        }
    }

    /// Adds a line of ours at the end: shown with the output, never read as the command's (not
    /// by the test-summary parsers, not in the digest).
    pub(crate) fn note(&mut self, line: &[u8]) {
        let tests = std::mem::take(&mut self.tests);
        let failures = std::mem::take(&mut self.failures);
        let digest = std::mem::take(&mut self.digest);
        self.push(line);
        (self.tests, self.failures, self.digest) = (tests, failures, digest);
    }

    /// Records that the output was cut at the command's exit, and says so at its end.
    pub(crate) fn mark_cut_at_exit(&mut self) {
        self.cut_at_exit = true;
        self.note(CUT_AT_EXIT);
    }

    /// Whether output written after the command exited was left unread
    /// ([`Captured::mark_cut_at_exit`]).
    pub(crate) fn cut_at_exit(&self) -> bool {
        self.cut_at_exit
    }

    /// Records how the command's descendants were kept from writing after its exit.
    pub(crate) fn ended_by(&mut self, containment: crate::checks::verify::Containment) {
        self.ended_by = containment;
    }

    /// How the command's descendants were kept from writing after its exit
    /// ([`Captured::ended_by`]).
    pub(crate) fn containment(&self) -> crate::checks::verify::Containment {
        self.ended_by
    }

    /// Bytes seen in all.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total
    }

    /// What the test runners' summaries in the whole stream say.
    pub(crate) fn tests(&self) -> Tally {
        self.tests.tally()
    }

    /// The failures the whole stream reports, by name.
    #[allow(dead_code, reason = "read by the re-injection and the ledger")]
    pub(crate) fn failures(&self) -> FailureDigest {
        self.failures.digest()
    }

    /// The digest of the whole stream, named by its hash (`xxh64:<16 hex digits>`): ledgers
    /// written before hold a bare FNV-1a digest, which never equals one of these.
    pub(crate) fn digest_hex(&self) -> String {
        self.digest.finish_text()
    }

    /// All of the output if it fits in `max_chars`, otherwise its start and end around a line
    /// saying how much was left out. Decoded lossily: verify output need not be UTF-8.
    pub(crate) fn excerpt(&self, max_chars: usize) -> String {
        // With nothing left out between them, the head and the tail are one text: cut as one,
        // or an output a little longer than the room would lose its end (where runners print
        // their failures and summaries) to a short tail.
        let (head, tail) = match self.whole() {
            Some(whole) => (String::from_utf8_lossy(&whole).into_owned(), String::new()),
            None => (
                String::from_utf8_lossy(&self.head).into_owned(),
                String::from_utf8_lossy(self.kept_tail()).into_owned(),
            ),
        };
        if tail.is_empty() && head.chars().count() <= max_chars {
            return head;
        }
        // Failures usually show at the end (summaries) and sometimes at the start (the first
        // compile error), so most of the room goes to the end: a quarter to the start, more when
        // the end is shorter than its share.
        let marker_room = 60;
        let room = max_chars.saturating_sub(marker_room);
        let (head_part, tail_part) = if tail.is_empty() {
            let chars = head.chars().count();
            let head_room = room / 4;
            let tail_room = room - head_room;
            let start: String = head.chars().take(head_room).collect();
            let end: String = head.chars().skip(chars - tail_room).collect();
            (start, end)
        } else {
            let (head_chars, tail_chars) = (head.chars().count(), tail.chars().count());
            let tail_room = tail_chars.min(room - (room / 4).min(head_chars));
            let head_room = head_chars.min(room - tail_room);
            let start: String = head.chars().take(head_room).collect();
            let end: String = tail.chars().skip(tail_chars - tail_room).collect();
            (start, end)
        };
        let shown = (head_part.len() + tail_part.len()) as u64;
        let left_out = self.total.saturating_sub(shown);
        format!("{head_part}\n[... {left_out} bytes of output left out ...]\n{tail_part}")
    }

    /// The last `n` lines, at most `max_chars` characters, for the ledger.
    pub(crate) fn last_lines(&self, n: usize, max_chars: usize) -> String {
        let whole = self.whole();
        let text = String::from_utf8_lossy(whole.as_deref().unwrap_or_else(|| self.kept_tail()));
        let lines: Vec<&str> = text.trim_end().lines().collect();
        let joined = lines[lines.len().saturating_sub(n)..].join("\n");
        let count = joined.chars().count();
        joined.chars().skip(count.saturating_sub(max_chars)).collect()
    }

    /// The whole output, when nothing of it was left out between the head and the tail.
    fn whole(&self) -> Option<Vec<u8>> {
        let tail = self.kept_tail();
        (self.total == (self.head.len() + tail.len()) as u64).then(|| [&self.head[..], tail].concat())
    }

    /// The tail, starting at a character boundary when the cut fell inside one.
    fn kept_tail(&self) -> &[u8] {
        let start = self.tail.len().saturating_sub(TAIL_BYTES);
        let mut tail = &self.tail[start..];
        if start > 0 || self.total > (self.head.len() + self.tail.len()) as u64 {
            let skip = tail.iter().take(4).take_while(|b| (**b & 0xC0) == 0x80).count();
            tail = &tail[skip..];
        }
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let captured = Captured::read_from(&b"hello\nworld\n"[..]).unwrap();
        assert_eq!(captured.excerpt(1_000), "hello\nworld\n");
        assert_eq!(captured.total_bytes(), 12);
        assert_eq!(captured.last_lines(1, 100), "world");
    }

    #[test]
    fn huge_output_keeps_head_and_tail_in_bounded_memory() {
        let mut captured = Captured::default();
        let line = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
        captured.push(b"FIRST LINE\n");
        for _ in 0..200_000 {
            captured.push(line);
        }
        captured.push(b"LAST LINE\n");
        assert!(captured.head.len() + captured.tail.len() <= HEAD_BYTES + 2 * TAIL_BYTES);
        let excerpt = captured.excerpt(2_000);
        assert!(excerpt.chars().count() <= 2_000, "{}", excerpt.len());
        assert!(excerpt.starts_with("FIRST LINE"));
        assert!(excerpt.ends_with("LAST LINE\n"));
        assert!(excerpt.contains("bytes of output left out"));
    }

    /// An output of `size` bytes: numbered lines between a first and a last line.
    fn output_of(size: usize) -> Vec<u8> {
        let (first, last) = (&b"FIRST LINE\n"[..], &b"LAST LINE\n"[..]);
        let mut out = first.to_vec();
        let mut n = 0;
        while out.len() + last.len() < size {
            out.extend_from_slice(format!("line {n:06} of the middle\n").as_bytes());
            n += 1;
        }
        out.truncate(size - last.len());
        if let Some(end) = out.last_mut() {
            *end = b'\n';
        }
        out.extend_from_slice(last);
        out
    }

    #[test]
    fn the_excerpt_keeps_the_start_and_the_end_at_every_size() {
        let room = 2_000;
        let sizes = [
            100,
            room - 1,
            room + 1,
            9_000,
            HEAD_BYTES - 1,
            HEAD_BYTES,
            HEAD_BYTES + 1,
            HEAD_BYTES + 10,
            HEAD_BYTES + 10_000,
            HEAD_BYTES + TAIL_BYTES,
            HEAD_BYTES + TAIL_BYTES + 1,
            HEAD_BYTES + 3 * TAIL_BYTES + 7,
            4 << 20,
        ];
        for size in sizes {
            let bytes = output_of(size);
            assert_eq!(bytes.len(), size);
            for pieces in [1, 4_096] {
                let mut captured = Captured::default();
                bytes.chunks(pieces.max(1) * 16).for_each(|chunk| captured.push(chunk));
                let excerpt = captured.excerpt(room);
                let text = String::from_utf8_lossy(&bytes);
                assert!(excerpt.chars().count() <= room, "{size}: {} chars", excerpt.chars().count());
                assert!(excerpt.starts_with("FIRST LINE\n"), "{size}: {excerpt}");
                assert!(excerpt.ends_with("LAST LINE\n"), "{size}: the end is lost: {excerpt}");
                assert_eq!(captured.last_lines(1, 100), "LAST LINE", "{size}");
                if size <= room {
                    assert_eq!(excerpt, text, "{size}: what fits is shown whole");
                } else {
                    let (start, end) = excerpt.split_once("\n[... ").unwrap();
                    let (said, end) = end.split_once(" bytes of output left out ...]\n").unwrap();
                    assert!(text.starts_with(start) && text.ends_with(end), "{size}");
                    assert!(end.len() >= 3 * start.len(), "{size}: most of the room goes to the end");
                    assert_eq!(said.parse::<usize>().unwrap(), size - start.len() - end.len(), "{size}");
                    assert!(excerpt.chars().count() > room - 100, "{size}: the room is used");
                }
            }
        }
    }

    #[test]
    fn a_note_is_shown_but_never_read_as_the_commands_output() {
        let mut captured = Captured::read_from(&b"3 passed, 1 failed\n"[..]).unwrap();
        let (tally, digest) = (captured.tests(), captured.digest_hex());
        captured.note(b"4 passed, 0 failed\n");
        assert_eq!(captured.tests(), tally);
        assert_eq!(captured.digest_hex(), digest);
        assert!(captured.excerpt(1_000).ends_with("4 passed, 0 failed\n"));
        assert!(!captured.cut_at_exit());
        captured.mark_cut_at_exit();
        assert!(captured.cut_at_exit());
        assert!(!CUT_AT_EXIT.iter().any(u8::is_ascii_digit), "a metric reads the last number");
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let captured = Captured::read_from(&b"bad \xff\xfe bytes"[..]).unwrap();
        assert_eq!(captured.excerpt(100), "bad \u{fffd}\u{fffd} bytes");
    }

    #[test]
    fn a_chunk_larger_than_the_tail_keeps_the_same_head_and_tail_as_small_pieces() {
        let bytes: Vec<u8> = (0..(3 * TAIL_BYTES + 5)).map(|i| b"abcdefghij\n"[i % 11]).collect();
        let mut whole = Captured::default();
        whole.push(&bytes[..10]);
        whole.push(&bytes[10..]);
        let mut pieces = Captured::default();
        bytes.chunks(1000).for_each(|piece| pieces.push(piece));
        assert_eq!(whole.kept_tail(), pieces.kept_tail());
        assert_eq!(whole.kept_tail(), &bytes[bytes.len() - TAIL_BYTES..]);
        assert_eq!(whole.excerpt(10_000), pieces.excerpt(10_000));
        assert!(whole.tail.len() <= 2 * TAIL_BYTES);
    }

    #[test]
    fn digest_tells_outputs_apart_and_is_stable() {
        let a = Captured::read_from(&b"one"[..]).unwrap();
        let b = Captured::read_from(&b"two"[..]).unwrap();
        assert_ne!(a.digest_hex(), b.digest_hex());
        assert_eq!(a.digest_hex(), Captured::read_from(&b"one"[..]).unwrap().digest_hex());
        assert_eq!(Captured::read_from(&b""[..]).unwrap().digest_hex(), "xxh64:ef46db3751d8e999");
    }
}
