//! Model usage: the tokens a session spent, per model, as the host's transcript records them.
//!
//! What counts toward `--max-tokens` is [`TokenCounts::counted`]: input, output and cache-write
//! tokens. Cache reads are kept and shown but not counted: every request of a long session
//! re-reads its whole context from the cache at a tenth of the input price, so counting them
//! would make the budget measure context length times requests rather than work done.
//!
//! The transcript is read incrementally: a [`UsageCursor`] in the loop's state remembers how far
//! it was read, so each stop reads only what was appended since the last one. Claude Code writes
//! each content block of a reply as its own line, every one carrying the reply's `message.id` and
//! its usage so far; a reply is counted once, at the largest usage any of its lines shows.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::AddAssign;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Tokens of one kind of request, as in Claude Code's `message.usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TokenCounts {
    #[serde(default)]
    pub(crate) input: u64,
    #[serde(default)]
    pub(crate) output: u64,
    /// `cache_creation_input_tokens`: input written to the prompt cache.
    #[serde(default)]
    pub(crate) cache_write: u64,
    /// `cache_read_input_tokens`: input read back from the prompt cache.
    #[serde(default)]
    pub(crate) cache_read: u64,
}

impl TokenCounts {
    /// The tokens that count toward a token budget (see the module docs).
    pub(crate) fn counted(&self) -> u64 {
        self.input.saturating_add(self.output).saturating_add(self.cache_write)
    }

    /// Each count's growth from `before` to `self` (none where it did not grow).
    pub(crate) fn growth_since(&self, before: &TokenCounts) -> TokenCounts {
        TokenCounts {
            input: self.input.saturating_sub(before.input),
            output: self.output.saturating_sub(before.output),
            cache_write: self.cache_write.saturating_sub(before.cache_write),
            cache_read: self.cache_read.saturating_sub(before.cache_read),
        }
    }

    pub(crate) fn is_zero(&self) -> bool {
        *self == TokenCounts::default()
    }
}

impl AddAssign for TokenCounts {
    fn add_assign(&mut self, other: TokenCounts) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
    }
}

/// Tokens per model id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Usage(pub(crate) BTreeMap<String, TokenCounts>);

impl Usage {
    pub(crate) fn add(&mut self, model: &str, counts: TokenCounts) {
        *self.0.entry(model.to_string()).or_default() += counts;
    }

    pub(crate) fn merge(&mut self, other: &Usage) {
        for (model, counts) in &other.0 {
            self.add(model, *counts);
        }
    }

    /// All models together.
    pub(crate) fn total(&self) -> TokenCounts {
        let mut total = TokenCounts::default();
        for counts in self.0.values() {
            total += *counts;
        }
        total
    }
}

/// The most of a transcript the first read of a loop looks at, from its end: the loop started
/// moments before, so what it used is at the end; earlier records do not count anyway.
const FIRST_READ_MAX: u64 = 64 << 20;
/// A line longer than this is no usage record (those are a few kilobytes): it is skipped unread.
const MAX_LINE: usize = 4 << 20;
/// Bytes before the cursor's offset whose digest tells that the file is still the one read.
const ANCHOR_BYTES: u64 = 256;
/// Every usage record holds this key; lines without it are passed over unparsed.
const USAGE_KEY: &[u8] = b"\"usage\"";
/// Replies remembered to count each once, however many lines repeat them.
const RECENT_MESSAGES: usize = 16;

/// How far a transcript has been read for usage, and what it showed: kept in the loop's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageCursor {
    /// The transcript read.
    pub(crate) transcript: PathBuf,
    /// Bytes read: the end of the last complete line.
    pub(crate) offset: u64,
    /// Digest of the bytes just before `offset`: a file that no longer has them was replaced or
    /// rewritten, and is read again from where the loop started.
    #[serde(default)]
    pub(crate) anchor: String,
    /// Tokens used since the loop started, per model.
    #[serde(default)]
    pub(crate) used: Usage,
    /// The time of the latest record counted: after a rewrite, only later records count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_time: Option<Timestamp>,
    /// The latest replies counted, and what was counted for each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) recent: Vec<CountedMessage>,
}

/// A reply already counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CountedMessage {
    pub(crate) id: String,
    pub(crate) counts: TokenCounts,
}

/// One usage record of the transcript.
struct Record {
    id: Option<String>,
    model: String,
    time: Option<Timestamp>,
    counts: TokenCounts,
}

impl UsageCursor {
    /// The cursor after reading what `transcript` gained since `previous` (the loop's cursor so
    /// far, if any). Usage before `started_at` does not count. A different transcript (the
    /// session was resumed into a new file), a shorter one or one whose bytes before the offset
    /// changed is read again from the loop's start, counting only records newer than those
    /// already counted.
    pub(crate) fn advance(
        previous: Option<&UsageCursor>,
        transcript: &Path,
        started_at: Timestamp,
    ) -> io::Result<UsageCursor> {
        // The model can replace the transcript with a FIFO or a device: never block on it.
        let mut file = crate::support::read::bounded_read::open(transcript)?;
        let len = file.metadata()?.len();
        let mut cursor = previous.cloned().unwrap_or_default();
        let same_file = previous.is_some_and(|p| p.transcript == transcript)
            && cursor.offset <= len
            && anchor(&mut file, cursor.offset)? == cursor.anchor;
        let (start, since) = if same_file {
            (cursor.offset, None)
        } else {
            // From the loop's start, or from the last record counted if that is later.
            let since = cursor.last_time.map_or(started_at, |t| t.max(started_at));
            (len.saturating_sub(FIRST_READ_MAX), Some(since))
        };
        cursor.transcript = transcript.to_path_buf();
        let skip_partial_first = start > 0 && !same_file;
        cursor.offset = read_lines(&mut file, start, skip_partial_first, |line| {
            if let Some(record) = record(line) {
                cursor.count(record, since);
            }
        })?;
        cursor.anchor = anchor(&mut file, cursor.offset)?;
        Ok(cursor)
    }

    /// Counts a record: all of it if its reply is new, what it adds if the reply was counted.
    /// `since`: on a re-read, records at or before this time were already counted or predate the
    /// loop.
    fn count(&mut self, record: Record, since: Option<Timestamp>) {
        if let Some(since) = since
            && record.time.is_none_or(|t| t < since)
        {
            return;
        }
        let added = match record.id {
            Some(id) => {
                if let Some(seen) = self.recent.iter_mut().find(|m| m.id == id) {
                    let added = record.counts.growth_since(&seen.counts);
                    seen.counts = max_counts(&seen.counts, &record.counts);
                    added
                } else {
                    if self.recent.len() == RECENT_MESSAGES {
                        self.recent.remove(0);
                    }
                    self.recent.push(CountedMessage { id, counts: record.counts });
                    record.counts
                }
            }
            None => record.counts,
        };
        if !added.is_zero() {
            self.used.add(&record.model, added);
        }
        if record.time.is_some() {
            self.last_time = record.time.max(self.last_time);
        }
    }
}

fn max_counts(a: &TokenCounts, b: &TokenCounts) -> TokenCounts {
    TokenCounts {
        input: a.input.max(b.input),
        output: a.output.max(b.output),
        cache_write: a.cache_write.max(b.cache_write),
        cache_read: a.cache_read.max(b.cache_read),
    }
}

/// The usage record a transcript line holds, if any: an assistant reply from a real model.
/// [`read_lines`] hands out only lines that hold [`USAGE_KEY`].
fn record(line: &[u8]) -> Option<Record> {
    let value: Value = serde_json::from_slice(line).ok()?;
    if value.get("type").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let message = value.get("message")?;
    let model = message.get("model").and_then(Value::as_str).unwrap_or("unknown");
    if model == "<synthetic>" {
        return None;
    }
    let usage = message.get("usage")?;
    let field = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
    Some(Record {
        id: message.get("id").and_then(Value::as_str).map(str::to_string),
        model: model.to_string(),
        time: value.get("timestamp").and_then(Value::as_str).and_then(|t| t.parse().ok()),
        counts: TokenCounts {
            input: field("input_tokens"),
            output: field("output_tokens"),
            cache_write: field("cache_creation_input_tokens"),
            cache_read: field("cache_read_input_tokens"),
        },
    })
}

/// A digest of the [`ANCHOR_BYTES`] before `offset`.
fn anchor(file: &mut File, offset: u64) -> io::Result<String> {
    let from = offset.saturating_sub(ANCHOR_BYTES);
    // At most ANCHOR_BYTES, so it fits in memory on any target.
    let mut bytes = vec![0; usize::try_from(offset - from).map_err(io::Error::other)?];
    file.seek(SeekFrom::Start(from))?;
    file.read_exact(&mut bytes)?;
    Ok(crate::support::digest::hex(&Sha256::digest(&bytes)[..8]))
}

/// Bytes read at a time: a first read covers up to [`FIRST_READ_MAX`], in few system calls.
const CHUNK: usize = 1 << 20;

/// Calls `each` with every complete line from `start` to the end of the file that holds
/// [`USAGE_KEY`] (no other line can be a usage record), and returns the offset after the last
/// complete line; a last line without its newline is left for the next read. `skip_first`:
/// `start` may be inside a line, whose rest is passed over. Lines are found inside each chunk
/// where they lie, with a vectorised search for the key, and never copied: only a line that
/// spans chunks is put together.
fn read_lines(file: &mut File, start: u64, skip_first: bool, mut each: impl FnMut(&[u8])) -> io::Result<u64> {
    file.seek(SeekFrom::Start(start))?;
    let key = memchr::memmem::Finder::new(USAGE_KEY);
    let mut carry = Carry { line: Vec::new(), skipping: skip_first };
    let mut chunk = vec![0u8; CHUNK];
    let mut offset = start;
    let mut pos = start;
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let data = &chunk[..n];
        if let Some(first) = memchr::memchr(b'\n', data) {
            let last = memchr::memrchr(b'\n', data).unwrap_or(first);
            if let Some(line) = carry.end(&data[..first])
                && key.find(line).is_some()
            {
                each(line);
            }
            if first < last {
                lines_holding(&key, &data[first + 1..last], &mut each);
            }
            offset = pos + last as u64 + 1;
            carry.restart(&data[last + 1..]);
        } else {
            carry.extend(data);
        }
        pos += n as u64;
    }
    Ok(offset)
}

/// Calls `each` with every line of `region` (lines without their newlines) that holds `key`.
fn lines_holding(key: &memchr::memmem::Finder<'_>, region: &[u8], each: &mut impl FnMut(&[u8])) {
    let mut from = 0;
    while let Some(at) = key.find(&region[from..]).map(|at| from + at) {
        let begin = memchr::memrchr(b'\n', &region[..at]).map_or(0, |newline| newline + 1);
        let end = memchr::memchr(b'\n', &region[at..]).map_or(region.len(), |newline| at + newline);
        each(&region[begin..end]);
        from = end;
    }
}

/// The start of a line that began in an earlier chunk.
struct Carry {
    line: Vec<u8>,
    /// The line is passed over: longer than [`MAX_LINE`], or the rest of one the read began in.
    skipping: bool,
}

impl Carry {
    /// Adds `bytes` to the line, or passes it over once it is too long to be a usage record.
    fn extend(&mut self, bytes: &[u8]) {
        if self.skipping || self.line.len() + bytes.len() > MAX_LINE {
            self.line.clear();
            self.skipping = true;
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    /// The line ended by `tail` (its bytes up to the newline), unless it is passed over.
    fn end(&mut self, tail: &[u8]) -> Option<&[u8]> {
        self.extend(tail);
        (!std::mem::take(&mut self.skipping)).then_some(self.line.as_slice())
    }

    /// Starts the next line with `bytes`, after the one [`Carry::end`] returned.
    fn restart(&mut self, bytes: &[u8]) {
        self.line.clear();
        self.skipping = false;
        self.extend(bytes);
    }
}

/// A token count as typed: digits with an optional `k` (thousand) or `M` (million), e.g. `500k`.
pub(crate) fn parse_tokens(value: &str) -> Result<u64, String> {
    let text = value.trim();
    let (digits, scale) = match text.strip_suffix(['k', 'K']) {
        Some(digits) => (digits, 1_000),
        None => match text.strip_suffix('M') {
            Some(digits) => (digits, 1_000_000),
            None => (text, 1),
        },
    };
    let n: u64 =
        digits.parse().map_err(|_| "give a whole number of tokens, e.g. 2000000, 500k or 2M".to_string())?;
    match n.checked_mul(scale) {
        Some(0) => Err("it must be at least 1 token".into()),
        Some(tokens) if tokens <= 1_000_000_000_000 => Ok(tokens),
        _ => Err("the most is 1000000M".into()),
    }
}

/// A token count for people: `950`, `12.3k`, `4.56M`.
pub(crate) fn human_tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.2}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write;

    const START: &str = "2026-11-22T03:00:00Z";

    /// An assistant line as Claude Code writes it: one content block, the reply's id and usage.
    fn reply(id: &str, minute: u32, input: u64, output: u64) -> String {
        json!({
            "type": "assistant", "timestamp": format!("2026-11-22T03:{minute:02}:00.000Z"),
            "message": {"id": id, "model": "claude-sonnet-4-5", "role": "assistant",
                "content": [{"type": "text", "text": "work"}],
                "usage": {"input_tokens": input, "output_tokens": output,
                    "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000}},
        })
        .to_string()
            + "\n"
    }

    fn append(path: &Path, text: &str) {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    fn advance(previous: Option<&UsageCursor>, path: &Path) -> UsageCursor {
        UsageCursor::advance(previous, path, START.parse().unwrap()).unwrap()
    }

    fn counted(cursor: &UsageCursor) -> u64 {
        cursor.used.total().counted()
    }

    #[test]
    fn a_reply_written_as_several_lines_counts_once_at_its_largest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        // Before the loop: not counted. Then one reply as three lines, the last with more output.
        append(&path, &(reply("msg_old", 0, 9_999, 9_999).replace("03:00:00", "02:59:00")));
        append(&path, &(reply("msg_1", 1, 10, 5) + &reply("msg_1", 1, 10, 5) + &reply("msg_1", 1, 10, 40)));
        append(&path, &reply("msg_2", 2, 20, 7));
        let cursor = advance(None, &path);
        assert_eq!(
            cursor.used.total(),
            TokenCounts { input: 30, output: 47, cache_write: 200, cache_read: 2_000 }
        );
        assert_eq!(counted(&cursor), 277);
    }

    #[test]
    fn each_stop_reads_only_what_was_appended_and_waits_for_a_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, &reply("msg_1", 1, 10, 10));
        let first = advance(None, &path);
        assert_eq!(counted(&first), 120);
        // A line being written: not counted yet, and not lost.
        let next = reply("msg_2", 2, 1_000, 0);
        let (head, tail) = next.split_at(40);
        append(&path, head);
        let second = advance(Some(&first), &path);
        assert_eq!((counted(&second), second.offset), (120, first.offset));
        append(&path, tail);
        let third = advance(Some(&second), &path);
        assert_eq!(counted(&third), 1_220);
        // Nothing new: nothing added. The reply's id repeated later adds only its growth.
        assert_eq!(counted(&advance(Some(&third), &path)), 1_220);
        append(&path, &reply("msg_2", 2, 1_000, 30));
        assert_eq!(counted(&advance(Some(&third), &path)), 1_250);
    }

    #[test]
    fn the_read_starts_at_the_cursor_not_at_the_beginning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, &reply("msg_1", 1, 10, 10));
        let first = advance(None, &path);
        // Forget which replies were counted: had the read started over, msg_1 would count again.
        let forgetful = UsageCursor { recent: Vec::new(), last_time: None, ..first };
        append(&path, &reply("msg_2", 2, 5, 5));
        let second = advance(Some(&forgetful), &path);
        assert_eq!(counted(&second), 230);
        assert_eq!(second.offset, std::fs::metadata(&path).unwrap().len());
    }

    #[test]
    fn a_rewritten_or_truncated_transcript_is_read_again_without_double_counting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, &(reply("msg_1", 1, 10, 10) + &reply("msg_2", 2, 10, 10)));
        let first = advance(None, &path);
        assert_eq!(counted(&first), 240);
        // Rewritten shorter (compacted): the old replies are there again, and one new reply.
        std::fs::write(&path, reply("msg_2", 2, 10, 10) + &reply("msg_3", 3, 1, 1)).unwrap();
        let second = advance(Some(&first), &path);
        assert_eq!(counted(&second), 342, "only msg_3 is new");
        // Replaced by a file of the same length with different bytes before the offset.
        let other = reply("msg_4", 4, 1, 1);
        std::fs::write(&path, &other).unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        let third = advance(Some(&UsageCursor { offset: len, ..second.clone() }), &path);
        assert_eq!(counted(&third), 444);
        // The session went on in another file: its records after the last counted one count.
        let moved = dir.path().join("t2.jsonl");
        append(&moved, &(reply("msg_4", 4, 1, 1) + &reply("msg_5", 5, 2, 2)));
        assert_eq!(counted(&advance(Some(&third), &moved)), 548);
    }

    #[test]
    fn synthetic_replies_other_records_and_bad_lines_count_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, &reply("msg_e", 1, 10, 10).replace("claude-sonnet-4-5", "<synthetic>"));
        append(&path, &(json!({"type": "user", "timestamp": "2026-11-22T03:01:00Z", "message": {"usage": {"input_tokens": 5}}}).to_string() + "\n"));
        append(&path, "{\"usage\": not json\n\n");
        append(&path, &format!("{}\n", "x".repeat(MAX_LINE + 10)));
        let mut sidechain: Value = serde_json::from_str(&reply("msg_s", 2, 1, 1)).unwrap();
        sidechain["isSidechain"] = json!(true);
        append(&path, &format!("{sidechain}\n"));
        let cursor = advance(None, &path);
        assert_eq!(counted(&cursor), 102, "only the subagent's reply, which the session paid for");
        assert_eq!(cursor.offset, std::fs::metadata(&path).unwrap().len());
        assert!(UsageCursor::advance(None, &dir.path().join("none"), START.parse().unwrap()).is_err());
        assert!(UsageCursor::advance(None, dir.path(), START.parse().unwrap()).is_err());
    }

    /// Lines are found inside each chunk read: a reply that straddles a chunk's edge, one right
    /// after it, one that ends exactly at it and one in the chunk after all count once.
    #[test]
    fn replies_across_chunk_edges_count_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let one = reply("msg_x", 1, 10, 10);
        for shift in [0, 1, one.len() / 2, one.len() - 1, one.len()] {
            let path = dir.path().join(format!("t{shift}.jsonl"));
            // Filler lines without usage, up to `shift` bytes before the first chunk's end.
            let filler_line = format!("{}\n", "f".repeat(999));
            let filler_len = CHUNK - shift;
            let mut text = filler_line.repeat((filler_len - 1) / filler_line.len());
            text.push_str(&"g".repeat(filler_len - text.len() - 1));
            text.push('\n');
            assert_eq!(text.len(), filler_len);
            text.push_str(&(reply("msg_1", 1, 10, 10) + &reply("msg_2", 2, 20, 20)));
            text.push_str(&filler_line.repeat(3));
            text.push_str(&reply("msg_3", 3, 30, 30));
            append(&path, &text);
            let cursor = advance(None, &path);
            assert_eq!(cursor.used.total().input, 60, "shift {shift}");
            assert_eq!(cursor.recent.len(), 3, "shift {shift}");
            assert_eq!(cursor.offset, text.len() as u64, "shift {shift}");
        }
    }

    /// A line longer than [`MAX_LINE`] that spans chunks is no record, wherever its key is, and
    /// the line after it still counts; a last line without its newline waits, across chunks too.
    #[test]
    fn an_overlong_line_across_chunks_is_passed_over_and_a_partial_one_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let long = format!("{{\"usage\": {{\"input_tokens\": 9}}, \"pad\": \"{}\"}}\n", "p".repeat(MAX_LINE));
        append(&path, &(long + &reply("msg_1", 1, 10, 10)));
        let partial = reply("msg_2", 2, 1_000, 0);
        let padded = partial.replace("\"work\"", &format!("\"{}\"", "w".repeat(2 * CHUNK)));
        let (head, tail) = padded.split_at(padded.len() - 10);
        append(&path, head);
        let first = advance(None, &path);
        assert_eq!(counted(&first), 120);
        append(&path, tail);
        assert_eq!(counted(&advance(Some(&first), &path)), 1_220);
    }

    #[test]
    fn counts_input_output_and_cache_writes_not_cache_reads() {
        let c = TokenCounts { input: 10, output: 20, cache_write: 300, cache_read: 40_000 };
        assert_eq!(c.counted(), 330);
    }

    #[test]
    fn sums_per_model_and_in_all() {
        let mut usage = Usage::default();
        usage.add("a", TokenCounts { input: 1, output: 2, ..TokenCounts::default() });
        usage.add("b", TokenCounts { input: 10, ..TokenCounts::default() });
        usage.add("a", TokenCounts { cache_read: 5, ..TokenCounts::default() });
        assert_eq!(usage.0["a"], TokenCounts { input: 1, output: 2, cache_write: 0, cache_read: 5 });
        assert_eq!(usage.total().counted(), 13);
        assert_eq!(
            serde_json::to_string(&usage).unwrap(),
            r#"{"a":{"input":1,"output":2,"cache_write":0,"cache_read":5},"b":{"input":10,"output":0,"cache_write":0,"cache_read":0}}"#
        );
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(human_tokens(950), "950");
        assert_eq!(human_tokens(12_345), "12.3k");
        assert_eq!(human_tokens(4_560_000), "4.56M");
    }
}
