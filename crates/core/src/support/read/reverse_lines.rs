//! Reading a file's lines from its end, with a cap on the bytes read.
//!
//! Transcripts grow to gigabytes and the hook runs at every turn end, so it reads only as far
//! back as it must. The cost is bounded by the cap, never by the file's size, and is linear in
//! the bytes read: a line that spans many chunks is put together once, when its start is found.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use crate::support::read::bounded_read;

const CHUNK: usize = 64 * 1024;
/// The first read: most readers want the last line or a few (the ledger's last entry), which a
/// read of the whole chunk would make them split and copy sixteen times over. Each read after it
/// doubles, up to [`CHUNK`].
const FIRST_CHUNK: usize = 4 * 1024;

/// Lines of a file, last first, blank lines skipped. A line longer than what is left of the
/// budget ends the walk.
pub(crate) struct ReverseLines {
    file: File,
    /// Offset of the first byte not yet read.
    pos: u64,
    /// The end of the line being read backwards, whose start is not read yet: chunks in the
    /// order they were read (the last one is the earliest in the file).
    pending: Vec<Vec<u8>>,
    /// Whole lines waiting to be handed out, last at the end.
    ready: Vec<Vec<u8>>,
    budget: u64,
    /// The size of the next read.
    chunk: usize,
    /// Bytes copied into lines and pending pieces, to keep the walk provably linear.
    copied: u64,
}

impl ReverseLines {
    /// Opens `path` (a regular file: see [`bounded_read::open`]) to read at most `max_bytes` of
    /// it, from the end.
    pub(crate) fn open(path: &Path, max_bytes: u64) -> io::Result<ReverseLines> {
        let file = bounded_read::open(path)?;
        let pos = file.metadata()?.len();
        Ok(ReverseLines {
            file,
            pos,
            pending: Vec::new(),
            ready: Vec::new(),
            budget: max_bytes,
            chunk: FIRST_CHUNK,
            copied: 0,
        })
    }

    fn fill(&mut self) -> io::Result<bool> {
        while self.ready.is_empty() {
            if self.pos == 0 || self.budget == 0 {
                return Ok(false);
            }
            let n =
                usize::try_from(self.pos.min(self.budget)).map_or(self.chunk, |left| left.min(self.chunk));
            self.chunk = (self.chunk * 2).min(CHUNK);
            self.pos -= n as u64;
            self.budget -= n as u64;
            let mut chunk = vec![0u8; n];
            self.file.seek(SeekFrom::Start(self.pos))?;
            self.file.read_exact(&mut chunk)?;
            self.split(chunk);
        }
        Ok(true)
    }

    /// Takes the lines `chunk` completes. Its pieces between newlines are whole lines; the piece
    /// after its last newline ends with the pending pieces; the piece before its first newline is
    /// pending until the chunk before it is read (or is the file's first line).
    fn split(&mut self, chunk: Vec<u8>) {
        let at_start = self.pos == 0;
        let Some(last_newline) = chunk.iter().rposition(|b| *b == b'\n') else {
            self.pending.push(chunk);
            if at_start {
                let pieces = std::mem::take(&mut self.pending);
                let line = self.join(&[], pieces);
                self.push_lines([line]);
            }
            return;
        };
        let first_newline = chunk.iter().position(|b| *b == b'\n').unwrap_or(last_newline);
        let rest = std::mem::take(&mut self.pending);
        let last = self.join(&chunk[last_newline + 1..], rest);
        let head = self.copy(&chunk[..first_newline]);
        let mut lines = Vec::new();
        if at_start {
            lines.push(head);
        } else {
            self.pending.push(head);
        }
        if first_newline < last_newline {
            for line in chunk[first_newline + 1..last_newline].split(|b| *b == b'\n') {
                lines.push(self.copy(line));
            }
        }
        lines.push(last);
        self.push_lines(lines);
    }

    /// `start` followed by `pieces` (read last-first), as one line.
    fn join(&mut self, start: &[u8], pieces: Vec<Vec<u8>>) -> Vec<u8> {
        let len = start.len() + pieces.iter().map(Vec::len).sum::<usize>();
        let mut line = Vec::with_capacity(len);
        line.extend_from_slice(start);
        for piece in pieces.into_iter().rev() {
            line.extend_from_slice(&piece);
        }
        self.copied += len as u64;
        line
    }

    fn copy(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.copied += bytes.len() as u64;
        bytes.to_vec()
    }

    /// Lines in file order; `ready` hands out the last first. Empty ones are blank lines or the
    /// end of a file that ends with a newline.
    fn push_lines(&mut self, lines: impl IntoIterator<Item = Vec<u8>>) {
        self.ready.extend(lines.into_iter().filter(|line| !line.is_empty()));
    }
}

impl Iterator for ReverseLines {
    type Item = io::Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.fill() {
            Ok(true) => self.ready.pop().map(Ok),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(content: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(content).unwrap();
        file
    }

    fn lines(content: &[u8], budget: u64) -> Vec<String> {
        let file = file(content);
        ReverseLines::open(file.path(), budget)
            .unwrap()
            .map(|l| String::from_utf8(l.unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn reads_lines_last_first() {
        assert_eq!(lines(b"a\nb\nc\n", 1 << 20), ["c", "b", "a"]);
        assert_eq!(lines(b"a\nb\nc", 1 << 20), ["c", "b", "a"]);
        assert_eq!(lines(b"\n\na\n\n", 1 << 20), ["a"]);
        assert_eq!(lines(b"only", 1 << 20), ["only"]);
        assert!(lines(b"", 1 << 20).is_empty());
        assert!(lines(b"\n\n", 1 << 20).is_empty());
    }

    #[test]
    fn lines_across_chunk_boundaries() {
        let long = "x".repeat(CHUNK + 10);
        let content = format!("first\n{long}\nlast\n");
        assert_eq!(lines(content.as_bytes(), 1 << 20), ["last", long.as_str(), "first"]);
        // A newline exactly at a chunk's edge, and lines of every length around it.
        let growing = [FIRST_CHUNK, 3 * FIRST_CHUNK, 7 * FIRST_CHUNK, CHUNK, CHUNK + FIRST_CHUNK];
        for shift in growing.into_iter().flat_map(|edge| [edge - 2, edge - 1, edge, edge + 1]) {
            let a = "a".repeat(shift);
            let content = format!("{a}\nb\n{a}c");
            assert_eq!(lines(content.as_bytes(), 1 << 20), [format!("{a}c"), "b".into(), a], "{shift}");
        }
    }

    #[test]
    fn the_last_line_costs_one_small_read() {
        let content = "0123456789\n".repeat(50_000);
        let mut reader = ReverseLines::open(file(content.as_bytes()).path(), 1 << 20).unwrap();
        assert_eq!(reader.next().unwrap().unwrap(), b"0123456789");
        assert!(reader.copied <= FIRST_CHUNK as u64, "{} bytes copied", reader.copied);
        assert_eq!(reader.count(), 49_999, "the rest still reads");
    }

    #[test]
    fn stops_at_the_budget() {
        let content = "0123456789\n".repeat(100);
        let got = lines(content.as_bytes(), 33);
        assert_eq!(got, ["0123456789", "0123456789"]);
    }

    /// Regression: each chunk used to be joined to the whole pending line, so a tail without a
    /// newline cost the square of its size (8 MiB: half a gigabyte copied, half a second).
    #[test]
    fn a_huge_line_is_read_in_linear_time() {
        let size = 8 << 20;
        let mut content = b"first line\n".to_vec();
        content.extend(std::iter::repeat_n(b'x', size));
        let file = file(&content);
        let mut reader = ReverseLines::open(file.path(), content.len() as u64).unwrap();
        let line = reader.next().unwrap().unwrap();
        assert_eq!(line.len(), size);
        assert!(line.iter().all(|b| *b == b'x'));
        assert_eq!(reader.next().unwrap().unwrap(), b"first line");
        assert!(reader.next().is_none());
        assert!(reader.copied <= 2 * content.len() as u64, "{} bytes copied", reader.copied);
    }

    #[test]
    fn a_huge_line_beyond_the_budget_ends_the_walk() {
        let mut content = b"first line\n".to_vec();
        content.extend(std::iter::repeat_n(b'x', 3 * CHUNK));
        assert!(lines(&content, 2 * CHUNK as u64).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("transcript.jsonl");
        crate::support::read::bounded_read::tests::mkfifo(&fifo);
        let err = crate::support::read::bounded_read::tests::within_two_seconds(move || {
            ReverseLines::open(&fifo, 1 << 20).err().unwrap()
        });
        assert_eq!(err.to_string(), "it is a FIFO, not a regular file");
    }
}
