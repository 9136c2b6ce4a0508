//! Reading a file's lines from its end, with a cap on the bytes read.
//!
//! Transcripts grow to gigabytes and the hook runs at every turn end, so it reads only as far
//! back as it must. The cost is bounded by the cap, never by the file's size.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

const CHUNK: usize = 64 * 1024;

/// Lines of a file, last first. A line longer than what is left of the budget ends the walk.
pub(crate) struct ReverseLines {
    file: File,
    /// Offset of the first byte not yet read.
    pos: u64,
    /// Bytes read before `pos` that do not yet form a whole line.
    pending: Vec<u8>,
    /// Whole lines waiting to be handed out, last at the end.
    ready: Vec<Vec<u8>>,
    budget: u64,
}

impl ReverseLines {
    /// Opens `path` to read at most `max_bytes` of it, from the end.
    pub(crate) fn open(path: &Path, max_bytes: u64) -> io::Result<ReverseLines> {
        let file = File::open(path)?;
        let pos = file.metadata()?.len();
        Ok(ReverseLines { file, pos, pending: Vec::new(), ready: Vec::new(), budget: max_bytes })
    }

    fn fill(&mut self) -> io::Result<bool> {
        while self.ready.is_empty() {
            if self.pos == 0 || self.budget == 0 {
                return Ok(false);
            }
            let n = usize::try_from(self.pos.min(self.budget)).map_or(CHUNK, |left| left.min(CHUNK));
            self.pos -= n as u64;
            self.budget -= n as u64;
            let mut chunk = vec![0u8; n];
            self.file.seek(SeekFrom::Start(self.pos))?;
            self.file.read_exact(&mut chunk)?;
            chunk.extend_from_slice(&self.pending);
            self.pending.clear();
            let whole = if self.pos == 0 {
                &chunk[..]
            } else if let Some(first_newline) = chunk.iter().position(|b| *b == b'\n') {
                self.pending = chunk[..first_newline].to_vec();
                &chunk[first_newline + 1..]
            } else {
                self.pending = chunk;
                continue;
            };
            // Empty pieces are blank lines or the end of a file that ends with a newline.
            self.ready.extend(whole.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec));
        }
        Ok(true)
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

    fn lines(content: &[u8], budget: u64) -> Vec<String> {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(content).unwrap();
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
        assert!(lines(b"", 1 << 20).is_empty());
    }

    #[test]
    fn lines_across_chunk_boundaries() {
        let long = "x".repeat(CHUNK + 10);
        let content = format!("first\n{long}\nlast\n");
        assert_eq!(lines(content.as_bytes(), 1 << 20), ["last", long.as_str(), "first"]);
    }

    #[test]
    fn stops_at_the_budget() {
        let content = "0123456789\n".repeat(100);
        let got = lines(content.as_bytes(), 33);
        assert_eq!(got, ["0123456789", "0123456789"]);
    }
}
