//! The reviewer (`--review CMD`): a second judge that runs only after the stop's check passed,
//! and can only say no.
//!
//! It runs exactly as verify runs (the same runner: directory, timeout, process-group kill,
//! tier, cleaned environment), with one JSON object on its stdin describing the change. Exit 0
//! approves; any other exit, a timeout or a reviewer that cannot start is a veto. What it
//! printed is cleaned and cut before anyone sees it: it is shown to the model as the reviewer's
//! findings, never as the user's instructions.

mod agent;

pub(crate) use agent::ask_reviewer_agent;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::checks::verify::{CommandInput, VerifyOutcome, VerifySpec};
use crate::host::Agent;
use crate::host::Usage;
use crate::support::text::is_hidden;

/// Vetoes in a row after which the loop is parked.
pub(crate) const DEFAULT_MAX_VETOES: u32 = 3;
/// The unified diff on the reviewer's stdin is cut at this many bytes (its input says so).
pub(crate) const MAX_DIFF_BYTES: usize = 64 * 1024;
/// The reviewer's findings are cut to this many characters before they are shown.
pub(crate) const MAX_FINDINGS_CHARS: usize = 3_000;
/// At most this many changed files are named on the reviewer's stdin.
const MAX_FILES: usize = 1_000;
/// How much of verify's output (its end) the reviewer is shown.
const VERIFY_TAIL_CHARS: usize = 4_000;

/// How a loop reviews its passes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReviewSettings {
    /// Shell command: exit 0 approves a pass, anything else vetoes it. Exactly `claude`, `codex`
    /// or `gemini` names the built-in reviewer instead ([`crate::checks::review`]).
    pub command: String,
    /// Vetoes without an approval after which the loop is parked.
    pub max_vetoes: u32,
}

impl ReviewSettings {
    /// The agent of the built-in reviewer, when the command names one.
    pub(crate) fn agent(&self) -> Option<Agent> {
        Agent::reviewer(&self.command)
    }
}

/// The working tree's change since the loop started, as the reviewer is shown it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Change {
    /// Files whose content changed, at most [`MAX_FILES`].
    pub files_changed: Vec<String>,
    pub files_total: usize,
    /// `git diff` of the loop's start against now, cut at [`MAX_DIFF_BYTES`].
    pub diff: String,
    pub diff_truncated: bool,
    pub diff_bound_bytes: usize,
    /// Why the change could not be read (not a git repository), when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why_unknown: Option<String>,
}

impl Change {
    /// The change from its files and its unified diff, both cut at their bounds.
    pub(crate) fn of(mut files: Vec<String>, diff: &[u8]) -> Change {
        let files_total = files.len();
        files.truncate(MAX_FILES);
        let cut = diff.len().min(MAX_DIFF_BYTES);
        let text = String::from_utf8_lossy(&diff[..cut]);
        // A cut inside a character decodes to a replacement character at the end: drop it.
        let text = if cut < diff.len() { text.trim_end_matches('\u{FFFD}') } else { &text };
        Change {
            files_changed: files,
            files_total,
            diff: text.to_string(),
            diff_truncated: cut < diff.len(),
            diff_bound_bytes: MAX_DIFF_BYTES,
            why_unknown: None,
        }
    }

    /// A change that could not be read, and why.
    pub(crate) fn unknown(why: String) -> Change {
        Change { diff_bound_bytes: MAX_DIFF_BYTES, why_unknown: Some(why), ..Change::default() }
    }
}

/// The verify run that passed, as the reviewer is shown it.
#[derive(Debug, Serialize)]
pub(crate) struct VerifySeen<'a> {
    pub command: &'a str,
    pub exit_code: Option<i32>,
    pub output_tail: String,
}

impl<'a> VerifySeen<'a> {
    pub(crate) fn of(command: &'a str, outcome: &VerifyOutcome) -> VerifySeen<'a> {
        VerifySeen {
            command,
            exit_code: outcome.exit_code,
            output_tail: outcome.output.last_lines(usize::MAX, VERIFY_TAIL_CHARS),
        }
    }
}

/// The one JSON object on the reviewer's stdin.
#[derive(Debug, Serialize)]
pub(crate) struct ReviewInput<'a> {
    pub task: &'a str,
    /// The plan's current story; `null` in a loop without a plan.
    pub story: Option<&'a str>,
    pub iteration: u32,
    pub verify: VerifySeen<'a>,
    #[serde(flatten)]
    pub change: &'a Change,
}

/// What the reviewer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReviewOutcome {
    pub approved: bool,
    /// How it ended: `exit 0`, `exit 2`, `timed out`, `could not run: ...`.
    pub ended: String,
    pub timed_out: bool,
    /// What it printed, cleaned and cut ([`clean`]).
    pub findings: String,
    /// Digest of everything it printed (the built-in reviewer: of its answer).
    pub digest: String,
    pub duration: Duration,
    /// A finding below the blocking severity (the built-in reviewer): shown, no veto.
    pub note: Option<String>,
    /// The tokens the reviewer reported spending (the built-in reviewer, where its CLI says).
    pub usage: Usage,
}

/// What the ledger keeps of a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReviewRecord {
    pub approved: bool,
    pub ended: String,
    /// Digest of the reviewer's whole output.
    pub findings_digest: String,
    /// The tokens the reviewer reported, counted toward `--max-tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

impl ReviewOutcome {
    pub(crate) fn record(&self) -> ReviewRecord {
        let tokens = self.usage.total().counted();
        ReviewRecord {
            approved: self.approved,
            ended: self.ended.clone(),
            findings_digest: self.digest.clone(),
            tokens: (tokens > 0).then_some(tokens),
        }
    }
}

/// Runs the reviewer `spec` with `input` on its stdin. Never fails: a reviewer that cannot run
/// vetoes, so that a broken reviewer can never be mistaken for an approving one.
pub(crate) fn run_reviewer(spec: &VerifySpec, input: &ReviewInput<'_>) -> ReviewOutcome {
    let stdin = match serde_json::to_vec(input) {
        Ok(bytes) => bytes,
        Err(e) => return not_run(&format!("its input could not be written: {e}")),
    };
    match spec.run_with(&CommandInput { stdin, env: Vec::new() }) {
        Ok(outcome) => ReviewOutcome {
            approved: outcome.passed(),
            ended: outcome.describe(),
            timed_out: outcome.timed_out,
            findings: clean(&outcome.output.excerpt(MAX_FINDINGS_CHARS), MAX_FINDINGS_CHARS),
            digest: outcome.output.digest_hex(),
            duration: outcome.duration,
            note: None,
            usage: Usage::default(),
        },
        Err(e) => not_run(&e.to_string()),
    }
}

/// The veto of a reviewer that could not run, and why.
pub(crate) fn not_run(why: &str) -> ReviewOutcome {
    ReviewOutcome {
        approved: false,
        ended: format!("could not run: {why}"),
        timed_out: false,
        findings: String::new(),
        digest: String::new(),
        duration: Duration::ZERO,
        note: None,
        usage: Usage::default(),
    }
}

/// `text` with control and invisible characters taken out (tabs become spaces, line breaks
/// stay), blank lines at either end trimmed, and cut to `max_chars` characters.
pub(crate) fn clean(text: &str, max_chars: usize) -> String {
    let shown: String = text
        .chars()
        .filter_map(|c| match c {
            '\n' => Some('\n'),
            '\t' => Some(' '),
            c if is_hidden(c) => None,
            c => Some(c),
        })
        .collect();
    crate::support::text::cut(shown.trim_matches('\n').trim_end(), max_chars)
}

#[cfg(all(test, unix))]
pub(crate) mod tests {
    use super::*;
    use crate::checks::verify::Captured;

    fn spec(command: &str, timeout_ms: u64) -> (tempfile::TempDir, VerifySpec) {
        let dir = tempfile::tempdir().unwrap();
        let spec = VerifySpec {
            command: command.into(),
            cwd: dir.path().to_path_buf(),
            timeout: Duration::from_millis(timeout_ms),
            sandbox: Vec::new(),
        };
        (dir, spec)
    }

    /// A check that passed, as a runner reports it.
    pub(crate) fn passed() -> VerifyOutcome {
        let mut output = Captured::default();
        output.push(b"running 3 tests\ntest result: ok. 3 passed\n");
        VerifyOutcome {
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            untrusted: None,
            duration: Duration::ZERO,
            output,
        }
    }

    fn with_input(spec: &VerifySpec, change: &Change) -> ReviewOutcome {
        let verified = passed();
        let input = ReviewInput {
            task: "fix the login",
            story: None,
            iteration: 2,
            verify: VerifySeen::of("cargo test", &verified),
            change,
        };
        run_reviewer(spec, &input)
    }

    #[test]
    fn the_reviewer_reads_one_json_object_with_the_task_the_check_and_the_change() {
        let (dir, spec) = spec("cat > seen.json", 10_000);
        let change = Change::of(vec!["src/login.rs".into()], b"--- a/src/login.rs\n+++ b/src/login.rs\n");
        let outcome = with_input(&spec, &change);
        assert!(outcome.approved, "{outcome:?}");
        let seen: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("seen.json")).unwrap()).unwrap();
        assert_eq!(seen["task"], "fix the login");
        assert_eq!(seen["story"], serde_json::Value::Null);
        assert_eq!(seen["iteration"], 2);
        assert_eq!(seen["verify"]["command"], "cargo test");
        assert_eq!(seen["verify"]["exit_code"], 0);
        assert!(seen["verify"]["output_tail"].as_str().unwrap().ends_with("3 passed"));
        assert_eq!(seen["files_changed"][0], "src/login.rs");
        assert_eq!(seen["diff_bound_bytes"], MAX_DIFF_BYTES);
        assert_eq!(seen["diff_truncated"], false);
    }

    #[test]
    fn any_exit_but_zero_is_a_veto_with_its_findings() {
        let (_dir, spec) = spec("echo 'login.rs:3 unwrap on user input'; exit 2", 10_000);
        let outcome = with_input(&spec, &Change::default());
        assert!(!outcome.approved);
        assert_eq!(outcome.ended, "exit 2");
        assert_eq!(outcome.findings, "login.rs:3 unwrap on user input");
        assert!(outcome.record().findings_digest.starts_with("xxh64:"));
    }

    #[test]
    fn a_reviewer_that_never_exits_is_stopped_and_vetoes() {
        let (_dir, spec) = spec("echo looking; sleep 30", 300);
        let started = std::time::Instant::now();
        let outcome = with_input(&spec, &Change::default());
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(!outcome.approved && outcome.timed_out, "{outcome:?}");
        assert_eq!(outcome.ended, "timed out");
    }

    #[test]
    fn a_flood_of_output_is_cut_to_the_bound() {
        let (_dir, spec) = spec("yes 'bad line' | head -c 5000000; exit 1", 30_000);
        let outcome = with_input(&spec, &Change::default());
        assert!(!outcome.approved);
        assert!(outcome.findings.chars().count() <= MAX_FINDINGS_CHARS, "{}", outcome.findings.len());
        assert!(outcome.findings.contains("bytes of output left out"), "{}", &outcome.findings[..200]);
    }

    #[test]
    fn a_reviewer_that_cannot_start_vetoes() {
        let (dir, spec) = spec("true", 1_000);
        let gone = VerifySpec { cwd: dir.path().join("gone"), ..spec };
        let outcome = with_input(&gone, &Change::default());
        assert!(!outcome.approved);
        assert!(outcome.ended.starts_with("could not run: "), "{}", outcome.ended);
    }

    #[test]
    fn findings_lose_escapes_and_invisible_characters_but_keep_their_lines() {
        let hostile = "\u{1b}[2J\u{1b}]0;t\u{7}first\u{202E}\u{200B}\r\n\tsecond\0\n\n";
        assert_eq!(clean(hostile, 100), "[2J]0;tfirst\n second");
        assert_eq!(clean("", 100), "");
        let cut = clean(&"x".repeat(50), 10);
        assert_eq!(cut.chars().count(), 10);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn a_huge_diff_is_cut_at_its_bound_on_a_character_boundary() {
        let diff = "é".repeat(MAX_DIFF_BYTES);
        let change = Change::of(vec!["a".into(); MAX_FILES + 5], diff.as_bytes());
        assert!(change.diff_truncated);
        assert!(change.diff.len() <= MAX_DIFF_BYTES);
        assert!(!change.diff.ends_with('\u{FFFD}'));
        assert_eq!((change.files_changed.len(), change.files_total), (MAX_FILES, MAX_FILES + 5));
        let small = Change::of(Vec::new(), b"+x\n");
        assert!(!small.diff_truncated);
        assert_eq!(small.diff, "+x\n");
    }
}
