//! The built-in reviewer (`--review claude|codex|gemini`): that agent's CLI, run headless and
//! read-only as verify runs (directory, timeout, process group, tier, cleaned environment), with
//! a fixed brief ([`BRIEF`]) and the same JSON a reviewer command reads on its stdin.
//!
//! Its verdict is the last non-empty line of its final message, read strictly: `APPROVE`, or
//! `BLOCK [severity]: finding`. A finding of [`BLOCKING`] severity or above vetoes; a lesser one
//! is kept as a note and shown, and the pass stands, so a nit can never spin the loop. Anything
//! else (no final message, another last line, a CLI that failed or timed out) is a veto with
//! its text: a reviewer that cannot be read is never taken for one that approved.

use std::path::Path;

use crate::checks::review::{self, MAX_FINDINGS_CHARS, ReviewInput, ReviewOutcome};
use crate::checks::verify::{CommandInput, VerifyOutcome, VerifySpec};
use crate::host::Agent;

/// The fixed instructions the reviewer gets; the change follows them on its stdin.
pub(crate) const BRIEF: &str = include_str!("review_brief.txt");

/// The least severity that vetoes a pass.
pub(crate) const BLOCKING: Severity = Severity::Major;

/// How bad a finding is, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    Nit,
    Minor,
    Major,
    Critical,
}

impl Severity {
    fn from_word(word: &str) -> Option<Severity> {
        match word.to_ascii_lowercase().as_str() {
            "nit" => Some(Severity::Nit),
            "minor" => Some(Severity::Minor),
            "major" => Some(Severity::Major),
            "critical" => Some(Severity::Critical),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Severity::Nit => "nit",
            Severity::Minor => "minor",
            Severity::Major => "major",
            Severity::Critical => "critical",
        }
    }
}

/// What the reviewer's last line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LastLine {
    Approve,
    Block {
        severity: Severity,
        finding: String,
    },
    /// No verdict: an empty answer, or a last line in neither form.
    Unreadable,
}

impl LastLine {
    /// The verdict in the last non-empty line of `message`. Only whitespace around the line is
    /// forgiven: `APPROVE.`, `**APPROVE**` or a severity outside the four are no verdict.
    pub(crate) fn of(message: &str) -> LastLine {
        let Some(line) = message.lines().map(str::trim).rfind(|line| !line.is_empty()) else {
            return LastLine::Unreadable;
        };
        if line == "APPROVE" {
            return LastLine::Approve;
        }
        let block = line.strip_prefix("BLOCK [").and_then(|rest| rest.split_once("]:"));
        match block.and_then(|(word, finding)| Some((Severity::from_word(word)?, finding.trim()))) {
            Some((severity, finding)) if !finding.is_empty() => {
                LastLine::Block { severity, finding: finding.to_string() }
            }
            _ => LastLine::Unreadable,
        }
    }
}

/// Runs `agent`'s CLI (`program`, or why it was not found) as a reviewer of `input`, with
/// `spec`'s directory, deadline and sandbox and `env` added to its environment. Never fails: a
/// reviewer that cannot run vetoes.
pub(crate) fn ask_reviewer_agent(
    agent: Agent,
    program: Result<&Path, &str>,
    spec: &VerifySpec,
    input: &ReviewInput<'_>,
    env: Vec<(&'static str, String)>,
) -> ReviewOutcome {
    let program = match program {
        Ok(program) => program,
        Err(why) => return review::not_run(why),
    };
    let stdin = match serde_json::to_vec(input) {
        Ok(bytes) => bytes,
        Err(e) => return review::not_run(&format!("its input could not be written: {e}")),
    };
    match spec.run_program(&agent.review_command(program, BRIEF), &CommandInput { stdin, env }) {
        Ok(outcome) => judged(agent, &outcome),
        Err(e) => review::not_run(&e.to_string()),
    }
}

/// The verdict of a review that ran, from what the CLI printed.
fn judged(agent: Agent, outcome: &VerifyOutcome) -> ReviewOutcome {
    let printed = outcome.output.excerpt(usize::MAX);
    let message = agent.final_message(&printed).filter(|_| outcome.passed());
    let usage = agent.usage(&printed);
    let verdict = message.as_deref().map_or(LastLine::Unreadable, LastLine::of);
    let (approved, said, note) = match &verdict {
        LastLine::Approve => (true, "APPROVE".to_string(), None),
        LastLine::Block { severity, finding } if *severity < BLOCKING => {
            let note = review::clean(&format!("{}: {finding}", severity.name()), MAX_FINDINGS_CHARS);
            (true, format!("BLOCK [{}], below {}", severity.name(), BLOCKING.name()), Some(note))
        }
        LastLine::Block { severity, .. } => (false, format!("BLOCK [{}]", severity.name()), None),
        LastLine::Unreadable => (false, "no APPROVE or BLOCK line".to_string(), None),
    };
    // What the model is shown: the reviewer's answer, or what the CLI printed when it gave none.
    let shown = message.unwrap_or_else(|| outcome.output.excerpt(MAX_FINDINGS_CHARS));
    ReviewOutcome {
        approved,
        ended: format!("{}, {said}", outcome.describe()),
        timed_out: outcome.timed_out,
        findings: review::clean(&shown, MAX_FINDINGS_CHARS),
        digest: format!("{:016x}", crate::support::Fnv1a::of(shown.as_bytes())),
        duration: outcome.duration,
        note,
        usage,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    use super::*;
    use crate::checks::review::{Change, VerifySeen};

    #[test]
    fn approve_alone_on_the_last_line_approves() {
        assert_eq!(LastLine::of("Looks fine.\n\nAPPROVE\n\n"), LastLine::Approve);
        assert_eq!(LastLine::of("APPROVE"), LastLine::Approve);
        assert_eq!(LastLine::of("  APPROVE \r\n"), LastLine::Approve);
    }

    #[test]
    fn block_lines_carry_each_severity_and_their_finding() {
        for (word, severity) in [
            ("critical", Severity::Critical),
            ("major", Severity::Major),
            ("minor", Severity::Minor),
            ("nit", Severity::Nit),
            ("MAJOR", Severity::Major),
        ] {
            let said = LastLine::of(&format!("notes\nBLOCK [{word}]: src/a.rs:3 unwrap on input "));
            assert_eq!(said, LastLine::Block { severity, finding: "src/a.rs:3 unwrap on input".into() });
        }
        assert!(
            Severity::Critical > Severity::Major && Severity::Minor < BLOCKING && Severity::Nit < BLOCKING
        );
    }

    #[test]
    fn anything_else_is_no_verdict() {
        for text in [
            "",
            "\n \n",
            "APPROVE.",
            "**APPROVE**",
            "approve",
            "APPROVE\nbut one more thing",
            "BLOCK: no severity",
            "BLOCK [blocker]: unknown severity",
            "BLOCK [major]:",
            "BLOCK [major]:   ",
            "BLOCK [major] missing colon",
            "\u{1b}[2KAPPROVE",
            "\u{202E}APPROVE",
            "APPROVE\u{200B}",
        ] {
            assert_eq!(LastLine::of(text), LastLine::Unreadable, "{text:?}");
        }
        let huge = format!("{}\nBLOCK [major]: {}", "x".repeat(1 << 20), "y".repeat(1 << 20));
        assert!(matches!(LastLine::of(&huge), LastLine::Block { severity: Severity::Major, .. }));
    }

    /// A stand-in Claude Code that prints `events` as its stream-json output and keeps its
    /// arguments and stdin in the directory.
    fn stand_in(dir: &Path, events: &str, exit: i32) -> std::path::PathBuf {
        let path = dir.join("claude");
        let script = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > args.txt\necho \"$REVIEW_VAR\" > env.txt\ncat > stdin.txt\ncat <<'EOF'\n{events}\nEOF\nexit {exit}\n"
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// `agent` at `program` asked about a small change in `dir`.
    fn ask(agent: Agent, program: Result<&Path, &str>, dir: &Path) -> ReviewOutcome {
        let spec = VerifySpec {
            command: agent.program().into(),
            cwd: dir.to_path_buf(),
            timeout: Duration::from_secs(20),
            sandbox: Vec::new(),
        };
        let verified = crate::checks::review::tests::passed();
        let change = Change::of(vec!["src/a.rs".into()], b"+fn a() {}\n");
        let input = ReviewInput {
            task: "add a",
            story: None,
            iteration: 4,
            verify: VerifySeen::of("cargo test", &verified),
            change: &change,
        };
        ask_reviewer_agent(agent, program, &spec, &input, vec![("REVIEW_VAR", "kept".into())])
    }

    fn run(events: &str, exit: i32) -> (tempfile::TempDir, ReviewOutcome) {
        let dir = tempfile::tempdir().unwrap();
        let program = stand_in(dir.path(), events, exit);
        let outcome = ask(Agent::Claude, Ok(&program), dir.path());
        (dir, outcome)
    }

    fn result(text: &str) -> String {
        serde_json::json!({
            "type": "result", "result": text, "usage": {"input_tokens": 9},
            "modelUsage": {"claude-sonnet-4-5": {"inputTokens": 100, "outputTokens": 20, "cacheReadInputTokens": 7}}
        })
        .to_string()
    }

    #[test]
    fn the_cli_reads_the_brief_and_the_change_and_its_approval_counts_its_tokens() {
        let (dir, outcome) = run(&format!("{{\"type\":\"system\"}}\n{}", result("Fine.\nAPPROVE")), 0);
        assert!(outcome.approved, "{outcome:?}");
        assert_eq!(outcome.ended, "exit 0, APPROVE");
        let args = std::fs::read_to_string(dir.path().join("args.txt")).unwrap();
        assert!(args.starts_with("-p\nYou are the reviewer"), "{args}");
        assert!(args.contains("--tools\nRead,Grep,Glob\n--permission-mode\ndontAsk\n"), "{args}");
        let stdin: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("stdin.txt")).unwrap()).unwrap();
        assert_eq!((stdin["task"].as_str(), stdin["iteration"].as_u64()), (Some("add a"), Some(4)));
        assert_eq!(std::fs::read_to_string(dir.path().join("env.txt")).unwrap(), "kept\n");
        let counts = outcome.usage.0["claude-sonnet-4-5"];
        assert_eq!((counts.input, counts.output, counts.cache_read, counts.counted()), (100, 20, 7, 120));
    }

    #[test]
    fn a_major_finding_vetoes_and_a_minor_or_nit_one_is_noted_without_a_veto() {
        let (_dir, vetoed) = run(&result("Broken.\nBLOCK [major]: a.rs drops errors"), 0);
        assert!(!vetoed.approved);
        assert_eq!(vetoed.ended, "exit 0, BLOCK [major]");
        assert_eq!(vetoed.findings, "Broken.\nBLOCK [major]: a.rs drops errors");
        assert_eq!(vetoed.digest.len(), 16);
        let (_dir, noted) = run(&result("BLOCK [minor]: name `a` is vague"), 0);
        assert!(noted.approved, "{noted:?}");
        assert_eq!(noted.ended, "exit 0, BLOCK [minor], below major");
        assert_eq!(noted.note.as_deref(), Some("minor: name `a` is vague"));
        let (_dir, nit) = run(&result("BLOCK [nit]: a blank line too many"), 0);
        assert!(nit.approved && nit.note.as_deref() == Some("nit: a blank line too many"), "{nit:?}");
    }

    #[test]
    fn garbage_a_failed_cli_and_a_missing_one_veto_with_their_text() {
        let (_dir, garbage) = run(&result("I think it is fine \u{1b}[2J"), 0);
        assert!(!garbage.approved);
        assert_eq!(garbage.ended, "exit 0, no APPROVE or BLOCK line");
        assert_eq!(garbage.findings, "I think it is fine [2J");
        let (_dir, failed) = run("Error: not logged in", 1);
        assert!(!failed.approved);
        assert_eq!(failed.ended, "exit 1, no APPROVE or BLOCK line");
        assert!(failed.findings.contains("not logged in"), "{failed:?}");
        // An approval printed by a CLI that then failed is not an approval.
        let (_dir, late) = run(&result("APPROVE"), 2);
        assert!(!late.approved, "{late:?}");
        let (_dir, flood) = run(&result(&format!("{}\nBLOCK [critical]: x", "y".repeat(100_000))), 0);
        assert!(!flood.approved && flood.findings.chars().count() <= MAX_FINDINGS_CHARS);
        let dir = tempfile::tempdir().unwrap();
        let missing = ask(Agent::Codex, Err("`codex` was not found on PATH"), dir.path());
        assert!(!missing.approved);
        assert_eq!(missing.ended, "could not run: `codex` was not found on PATH");
    }
}
