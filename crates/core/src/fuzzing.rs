//! The engine's readers of text it does not control, opened to the fuzz targets in `fuzz/`.
//!
//! Compiled only with the `fuzzing` feature, and hidden from the docs: this is not an interface
//! for programs, it is how a fuzz target reaches a reader without every module becoming public.
//! Each function calls the reader by the path the engine itself uses (the hook's event reading,
//! the store's state parser, ...), so a reshaping of the engine that moves or breaks one fails
//! the fuzz crate's build instead of leaving a target that fuzzes nothing.
//!
//! What comes back is plain data, or a wrapper that compares and renders, so a target can state
//! its invariants without seeing the engine's types. Readers of files get their bytes written to
//! a scratch file first: they take paths, as the hook gives them.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::checks::failures::{self, FailureDigest, FailureScanner};
use crate::checks::plan;
use crate::checks::test_count::{Scanner, Tally};
use crate::commands::request::LoopRequest;
use crate::hook::shell_command;
use crate::host::Host;
use crate::host::event::{self, Transcript};
use crate::host::transcript;
use crate::host::usage::UsageCursor;
use crate::host::user_command::UserCommand;
use crate::metric::lessons::Lesson;
use crate::metric::{self, Direction, MinGain, Target};
use crate::state::{LedgerEntry, LoopState};
use crate::store::ledger;
use crate::support::read::frontmatter::Frontmatter;
use crate::support::read::reverse_lines::ReverseLines;

/// The hosts' names as `--host` takes them, in the engine's order.
pub fn hosts() -> Vec<&'static str> {
    Host::ALL.iter().map(|host| host.name()).collect()
}

/// A turn-end event as an adapter read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub session_id: String,
    pub stop_hook_active: Option<bool>,
    pub last_message: Option<String>,
    pub transcript: Option<PathBuf>,
}

/// Reads `bytes` as the Stop hook does for `--host HOST`: bounded, parsed as one JSON object,
/// handed to the host's adapter. `Err` holds the refusal's message.
pub fn stop_event(host: &str, bytes: &[u8]) -> Result<Event, String> {
    let host = Host::from_name(host).ok_or_else(|| format!("no host is named {host}"))?;
    let event = event::read_bounded(bytes)
        .and_then(|bytes| event::parse_object(&bytes))
        .and_then(|object| host.parse_stop(&object))
        .map_err(|e| e.to_string())?;
    Ok(Event {
        session_id: event.session_id,
        stop_hook_active: event.stop_hook_active,
        last_message: event.last_assistant_message,
        transcript: event.transcript.map(|t| match t {
            Transcript::ClaudeCode(path) | Transcript::Opaque(path) => path,
        }),
    })
}

/// The host a hook line without `--host` takes `bytes` for, when they are a JSON object.
pub fn guessed_host(bytes: &[u8]) -> Option<&'static str> {
    event::parse_object(bytes).ok().map(|object| Host::guess(&object).name())
}

/// A for-loop command at the start of a prompt, as the prompt hook finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The kind, as the engine spells it (`Start`, `Cancel`, ...).
    pub kind: String,
    pub name: String,
    pub args: String,
}

/// The command `prompt` begins with on `host`, if any.
pub fn user_command(host: &str, prompt: &str) -> Option<Command> {
    let host = Host::from_name(host)?;
    UserCommand::parse(host, prompt).map(|command| Command {
        kind: format!("{:?}", command.kind),
        name: command.name,
        args: command.args,
    })
}

/// A parsed state file: compares and renders, nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State(LoopState);

impl State {
    /// The state file as the store writes it.
    pub fn render(&self) -> Result<String, String> {
        self.0.render().map_err(|e| e.to_string())
    }

    pub fn task(&self) -> &str {
        &self.0.task
    }
}

/// Reads a state file's text as the store does.
pub fn state(text: &str) -> Result<State, String> {
    LoopState::parse(text).map(State).map_err(|e| e.to_string())
}

/// A Markdown file's YAML frontmatter and body, when it has frontmatter.
pub fn frontmatter_split(text: &str) -> Option<(&str, &str)> {
    Frontmatter::split(text).ok().map(|parts| (parts.yaml, parts.body))
}

/// YAML and body joined into one file, as the store writes them.
pub fn frontmatter_join(yaml: &str, body: &str) -> String {
    Frontmatter::join(yaml, body)
}

/// A `/for-loop` request: the parts whose bounds the parser promises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub task: String,
    pub verify: Option<String>,
    pub max_iterations: u32,
    pub verify_timeout_secs: u64,
    pub protect: Vec<String>,
}

/// The most `--max-iterations` takes, the most `--verify-timeout` takes, and the largest task.
pub const REQUEST_LIMITS: (u32, u64, usize) = (
    crate::commands::request::MAX_MAX_ITERATIONS,
    crate::commands::request::MAX_VERIFY_TIMEOUT_SECS,
    crate::commands::request::MAX_TASK_BYTES,
);

/// Parses the argument text of `/for-loop`. `Err` holds the message the user would see.
pub fn loop_request(raw: &str) -> Result<Request, String> {
    LoopRequest::parse(raw)
        .map(|request| Request {
            task: request.task,
            verify: request.verify,
            max_iterations: request.max_iterations,
            verify_timeout_secs: request.verify_timeout_secs,
            protect: request.protect,
        })
        .map_err(|e| e.to_string())
}

/// One simple command of a shell line: its words and the files it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    pub words: Vec<String>,
    pub writes: Vec<String>,
}

/// Splits a shell line as the guard does. `vars` stand for the hook's environment.
pub fn shell_commands(line: &str, vars: &[(&str, &str)], home: Option<&str>) -> Vec<ShellCommand> {
    let lookup =
        |name: &str| vars.iter().find(|(var, _)| *var == name).map(|(_, value)| (*value).to_string());
    shell_command::parse(line, &lookup, home)
        .into_iter()
        .map(|command| ShellCommand { words: command.words, writes: command.writes })
        .collect()
}

/// What the test-runner summaries in an output said: compares, and tells its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSummary(Tally);

impl TestSummary {
    pub fn suites(&self) -> usize {
        self.0.suites.len()
    }

    /// Passed, failed and skipped, all suites together.
    pub fn total(&self) -> (u64, u64, u64) {
        let total = self.0.total();
        (total.passed, total.failed, total.skipped)
    }
}

/// The most suites a summary keeps.
pub const MAX_SUITES: usize = crate::checks::test_count::MAX_SUITES;

/// Scans verify's output as it streams past, in the pieces `cuts` marks (offsets into
/// `output`, in any order; those past its end are ignored), as the verify runner does.
pub fn test_summary(output: &[u8], cuts: &[usize]) -> TestSummary {
    let mut cuts: Vec<usize> = cuts.iter().copied().filter(|cut| *cut <= output.len()).collect();
    cuts.sort_unstable();
    let mut scanner = Scanner::default();
    let mut from = 0;
    for cut in cuts.into_iter().chain([output.len()]) {
        scanner.push(&output[from..cut]);
        from = cut;
    }
    TestSummary(scanner.tally())
}

/// The failures an output reports, by name: compares, and hands out every text it kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureReport(FailureDigest);

impl FailureReport {
    pub fn names(&self) -> Vec<&str> {
        self.0.failures.iter().map(|failure| failure.name.as_str()).collect()
    }

    /// Failures reported beyond the names kept.
    pub fn more(&self) -> usize {
        self.0.more
    }

    /// The most details kept of one failure.
    pub fn most_details(&self) -> usize {
        self.0.failures.iter().map(|failure| failure.details.len()).max().unwrap_or(0)
    }

    /// Every name, place, detail and generic error line kept.
    pub fn texts(&self) -> Vec<&str> {
        let failures = self.0.failures.iter().flat_map(|failure| {
            std::iter::once(failure.name.as_str())
                .chain(failure.location.as_deref())
                .chain(failure.details.iter().map(String::as_str))
        });
        failures.chain(self.0.errors.iter().map(String::as_str)).collect()
    }
}

/// The bounds of a failure digest: names kept, details kept of one failure, characters of a
/// kept text (a cut one carries a mark after these), generic error lines.
pub const FAILURE_BOUNDS: (usize, usize, usize, usize) =
    (failures::MAX_NAMES, failures::MAX_DETAILS, failures::MAX_DETAIL_CHARS, failures::MAX_ERRORS);

/// Reads verify's output for its failures as it streams past, in the pieces `cuts` marks
/// (offsets into `output`, in any order; those past its end are ignored), as the capture does.
pub fn failure_digest(output: &[u8], cuts: &[usize]) -> FailureReport {
    let mut cuts: Vec<usize> = cuts.iter().copied().filter(|cut| *cut <= output.len()).collect();
    cuts.sort_unstable();
    let mut scanner = FailureScanner::default();
    let mut from = 0;
    for cut in cuts.into_iter().chain([output.len()]) {
        scanner.push(&output[from..cut]);
        from = cut;
    }
    FailureReport(scanner.digest())
}

/// The measurement a metric command printed, and its name if a `METRIC` line gave one.
pub fn metric_value(output: &str) -> Option<(f64, Option<String>)> {
    metric::parse_value(output)
}

/// `--target`, `--min-gain` and `--direction` as the request reads them, each shown back as the
/// engine shows it, or the refusal's message.
pub fn metric_flags(text: &str) -> [Result<String, String>; 3] {
    [
        text.parse::<Target>().map(|t| t.to_string()),
        text.parse::<MinGain>().map(|g| g.to_string()),
        text.parse::<Direction>().map(|d| d.word().to_string()),
    ]
}

/// What the hook reads from a Claude Code transcript with these bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRead {
    /// The current turn's text, and its tool calls.
    pub text: Option<String>,
    pub tool_uses: usize,
    /// Whether a tool call of the current turn has no result yet.
    pub call_pending: bool,
    /// When the last turn began, as RFC 3339.
    pub began: Option<String>,
}

/// Reads `bytes` as a transcript, as the Stop hook and the prompt hook do.
pub fn transcript(bytes: &[u8]) -> io::Result<TurnRead> {
    let path = scratch_file("transcript.jsonl", bytes)?;
    let turn = transcript::current_turn(&path)?;
    Ok(TurnRead {
        text: turn.text,
        tool_uses: turn.tool_uses,
        call_pending: transcript::tool_call_pending(&path),
        began: transcript::last_turn_began(&path).map(|t| t.to_string()),
    })
}

/// One read of a transcript for usage: where the cursor stopped, and the tokens counted so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRead {
    pub offset: u64,
    pub counted: u64,
    cursor: UsageCursor,
}

/// Reads a transcript for usage as the Stop hook does at three stops: with `first` written,
/// after `second` is appended, and once more with nothing appended. Records count from
/// 2000-01-01 on.
pub fn usage_reads(first: &[u8], second: &[u8]) -> io::Result<[UsageRead; 3]> {
    let started_at = jiff::Timestamp::from_second(946_684_800).map_err(io::Error::other)?;
    let path = scratch_file("usage.jsonl", first)?;
    let read = |previous: Option<&UsageRead>| {
        UsageCursor::advance(previous.map(|p| &p.cursor), &path, started_at).map(|cursor| UsageRead {
            offset: cursor.offset,
            counted: cursor.used.total().counted(),
            cursor,
        })
    };
    let one = read(None)?;
    fs::OpenOptions::new().append(true).open(&path)?.write_all(second)?;
    let two = read(Some(&one))?;
    let three = read(Some(&two))?;
    Ok([one, two, three])
}

/// What the store's line readers make of a ledger (or lessons file) with these bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRead {
    /// The last `n` entries, each as the line the ledger would write for it.
    pub last: Vec<String>,
    /// Those lines read back and written again: the same lines, if entries round-trip.
    pub last_again: Vec<String>,
    pub since_last_verdict: usize,
    pub forged_streak: u32,
    pub forged_stops: u32,
    pub last_state_digest: Option<String>,
    pub lessons: usize,
}

/// Reads `bytes` as a ledger, the last `n` entries of `loop_id`, and as a lessons file.
pub fn ledger(bytes: &[u8], n: usize, loop_id: &str) -> io::Result<LedgerRead> {
    let path = scratch_file("ledger.jsonl", bytes)?;
    let entries = LedgerEntry::read_last(&path, n)?;
    let lines = |entries: &[LedgerEntry]| -> io::Result<Vec<String>> {
        let bytes = ledger::lines_of(entries)?;
        Ok(String::from_utf8_lossy(&bytes).lines().map(str::to_string).collect())
    };
    let last = lines(&entries)?;
    let again: Vec<LedgerEntry> = last
        .iter()
        .map(|line| serde_json::from_str(line).map_err(io::Error::other))
        .collect::<io::Result<_>>()?;
    Ok(LedgerRead {
        last_again: lines(&again)?,
        last,
        since_last_verdict: LedgerEntry::since_last_verdict(&path, loop_id).len(),
        forged_streak: LedgerEntry::forged_streak(&path, loop_id),
        forged_stops: LedgerEntry::forged_stops(&path, loop_id),
        last_state_digest: LedgerEntry::last_state_digest(&path, loop_id),
        lessons: Lesson::read_last(&path, n).len(),
    })
}

/// The lines of `bytes` from the last, as the store's line reader hands them out when it may
/// read `max_bytes` from the end.
pub fn reverse_lines(bytes: &[u8], max_bytes: u64) -> io::Result<Vec<Vec<u8>>> {
    let path = scratch_file("lines", bytes)?;
    ReverseLines::open(&path, max_bytes)?.collect()
}

/// One story of a plan, as the plan reader took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoryRead {
    pub id: String,
    pub title: String,
    pub details: String,
    pub verify: Option<String>,
    pub done: bool,
}

/// The most stories a plan may have.
pub const MAX_STORIES: usize = plan::MAX_STORIES;

/// Reads `bytes` as `--plan` reads a plan file at start (a `prd.json` when `json`), with a
/// `--verify` for stories without a check of their own. `Err` holds the refusal's message.
pub fn plan(bytes: &[u8], json: bool) -> Result<Vec<StoryRead>, String> {
    let path = scratch_file(if json { "prd.json" } else { "PLAN.md" }, bytes).map_err(|e| e.to_string())?;
    let stories = plan::read(&path, Some("true")).map_err(|e| e.to_string())?;
    Ok(stories
        .into_iter()
        .map(|s| StoryRead { id: s.id, title: s.title, details: s.details, verify: s.verify, done: s.done })
        .collect())
}

/// Writes `bytes` to `name` in this process's scratch directory, replacing what was there.
fn scratch_file(name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    // Kept for the whole run: a fuzz target reads millions of inputs, and a directory per input
    // would cost more than the read.
    let dir = DIR.get_or_init(|| tempfile::tempdir().ok()).as_ref().map(tempfile::TempDir::path);
    let path =
        dir.map(|dir: &Path| dir.join(name)).ok_or_else(|| io::Error::other("no scratch directory"))?;
    fs::write(&path, bytes)?;
    Ok(path)
}
