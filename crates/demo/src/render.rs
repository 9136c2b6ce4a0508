//! The readable account: each step as a few aligned lines, in colour on a terminal.

use std::path::Path;

use crate::trace::{End, Step, Stop, Verify};
use crate::{MAX_ITERATIONS, SESSION_ID};

/// Lines of verify output shown under its result; the ledger keeps more.
const TAIL_LINES: usize = 5;
/// Width of wrapped text after the label column, in characters.
const WIDTH: usize = 96;
/// Longest tool-call line after the label column: a little wider than text, so a command with
/// a path still fits on its one line. With the column, the account fits 120 columns.
const TOOL_WIDTH: usize = 106;
/// The label column: two spaces, the label, padding.
const INDENT: &str = "            ";

pub(crate) struct Human {
    color: bool,
    project: String,
    state_home: String,
}

impl Human {
    pub(crate) fn new(color: bool, project: &Path, state_home: &Path) -> Human {
        Human { color, project: project.display().to_string(), state_home: state_home.display().to_string() }
    }

    pub(crate) fn render(&self, step: &Step) -> String {
        match step {
            Step::Sample { project, state_home, files, command } => {
                let mut out = format!(
                    "{} · the real loop in the real Claude Code CLI, with a scripted model: no API key, no network\n\n",
                    self.paint("1", "for-loop demo")
                );
                out.push_str(&format!("sample project  {}  (throwaway)\n", project.display()));
                for file in files {
                    out.push_str(&format!("  {:<12}  {}\n", file.name, file.about));
                }
                out.push_str(&format!("loop state      FOR_LOOP_HOME={}\n\n", state_home.display()));
                // The plugin directory relative to here, as the reader would type it.
                let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
                let command: Vec<String> = command
                    .iter()
                    .map(|arg| match arg.strip_prefix(&cwd) {
                        Some("") if !cwd.is_empty() => ".".to_owned(),
                        Some(rest) if !cwd.is_empty() && rest.starts_with('/') => rest[1..].to_owned(),
                        _ => arg.clone(),
                    })
                    .collect();
                out.push_str(&self.paint("1", &shell_command(&command)));
                out.push('\n');
                out
            }
            Step::Cli { version, plugin_loaded } => {
                let plugin = if *plugin_loaded {
                    self.paint("2", "plugin for-loop loaded")
                } else {
                    self.paint("31", "plugin for-loop NOT loaded")
                };
                format!("{}{plugin}\n", self.paint("2", &format!("Claude Code {version} started · ")))
            }
            Step::LoopStarted { banner } => {
                let mut out = String::from("\n");
                for (i, line) in banner.iter().enumerate() {
                    let line = self.shorten(line);
                    if i == 0 {
                        out.push_str(&format!("{}\n", self.paint("1", &line)));
                    } else {
                        out.push_str(&format!("  {line}\n"));
                    }
                }
                out
            }
            Step::Iteration { n, of } => {
                let title = format!("── iteration {n}/{of} ");
                format!(
                    "\n{}\n",
                    self.paint("1;36", &format!("{title}{}", "─".repeat(60 - title.chars().count())))
                )
            }
            Step::Said { text, .. } => self.labelled("model", &wrap(&format!("“{}”", self.shorten(text)))),
            // One line per call, as the model's actions are a list to scan.
            Step::Tool { summary, .. } => self.labelled("tool", &clip(&self.shorten(summary), TOOL_WIDTH)),
            Step::Denied { reason, .. } => {
                let by = if reason.starts_with("for-loop:") { "for-loop's guard" } else { "a hook" };
                let reason = first_sentences(reason.trim_start_matches("for-loop:").trim(), 2);
                let text = wrap(&format!("✗ denied by {by}: {}", self.shorten(&reason)));
                let (head, rest) = text.split_at("✗ denied".len());
                Human::indented(&format!("{}{rest}", self.paint("1;31", head)))
            }
            Step::ToolFailed { error, .. } => {
                format!("{INDENT}{} {}\n", self.paint("31", "✗ failed:"), self.shorten(error))
            }
            Step::Stop(stop) => self.stop(stop),
            Step::Plan { file, boxes } => self.labelled(file, &boxes.join("\n")),
            Step::End(end) => self.end(end),
        }
    }

    /// Text that is not a step (the CLI's stderr after a failed run).
    pub(crate) fn note(&self, text: &str) -> String {
        let lines: Vec<String> = text.lines().map(|l| self.paint("2", l)).collect();
        self.labelled("note", &lines.join("\n"))
    }

    fn stop(&self, stop: &Stop) -> String {
        let mut out = match &stop.verify {
            Some(verify) => self
                .labelled("stop", &format!("the model ends its turn → for-loop runs `{}`", verify.command)),
            None => self.labelled("stop", "the model ends its turn"),
        };
        if let Some(verify) = &stop.verify {
            out.push_str(&self.verify(verify));
        }
        let blocked = stop.decision == "block";
        let word = if blocked { self.paint("1;33", "BLOCKED") } else { self.paint("1;32", "ALLOWED") };
        let why = explain(stop);
        out.push_str(
            &self.labelled("for-loop", &if why.is_empty() { word } else { format!("{word}: {why}") }),
        );
        for line in stop.status.lines().filter(|l| !l.trim().is_empty()) {
            out.push_str(&format!("{INDENT}{}\n", self.paint("2", &self.shorten(line))));
        }
        if let Some(prompt) = &stop.reinjected {
            let lines = reinjected_lines(prompt);
            let shown: Vec<String> = lines
                .iter()
                .flat_map(|l| wrap(&self.shorten(l)).lines().map(|w| self.paint("2", w)).collect::<Vec<_>>())
                .collect();
            out.push_str(&self.labelled("re-sent", &shown.join("\n")));
        }
        out
    }

    fn verify(&self, verify: &Verify) -> String {
        let result = if verify.timed_out {
            self.paint("31", &format!("✗ timed out after {} ms", verify.duration_ms))
        } else if verify.passed() {
            self.paint("32", &format!("✓ passed · exit 0 after {} ms", verify.duration_ms))
        } else {
            let code = verify.exit_code.map_or("a signal".to_owned(), |c| format!("exit {c}"));
            self.paint("31", &format!("✗ failed · {code} after {} ms", verify.duration_ms))
        };
        let mut out = self.labelled("verify", &result);
        let tail: Vec<&str> = verify.tail.lines().filter(|l| !l.trim().is_empty()).collect();
        for line in &tail[tail.len().saturating_sub(TAIL_LINES)..] {
            out.push_str(&format!("{INDENT}{}\n", self.paint("2", &format!("│ {}", self.shorten(line)))));
        }
        out
    }

    fn end(&self, end: &End) -> String {
        let mut out = format!("\n{}\n", self.paint("1;36", &format!("── result {}", "─".repeat(50))));
        let seconds = format!("{:.1} s", end.elapsed_ms as f64 / 1000.0);
        if end.ok {
            out.push_str(&format!(
                "  {} the loop ended {} after {} of {MAX_ITERATIONS} iterations, in {seconds}\n",
                self.paint("1;32", "✓"),
                end.outcome.as_deref().unwrap_or("?"),
                end.iterations
            ));
        } else {
            out.push_str(&format!(
                "  {} the demo did not go as designed: {}\n",
                self.paint("1;31", "✗"),
                end.problem.as_deref().unwrap_or("unknown")
            ));
        }
        let ledger = if end.ledger.is_empty() { "(empty)".to_owned() } else { end.ledger.join(" → ") };
        out.push_str(&format!("  ledger: {ledger}\n"));
        if end.kept {
            out.push_str(&format!(
                "  kept: {root}\n    project/       the sample (calc.sh, check.sh)\n    for-loop/      the loop's state, ledger and saved originals (FOR_LOOP_HOME)\n    claude-config/ the CLI's session transcript\n",
                root = end.sample.display()
            ));
        } else {
            out.push_str("  the sample project was removed (--keep keeps it)\n");
        }
        out
    }

    /// `  label     text`, with further lines of `text` under the first.
    fn labelled(&self, label: &str, text: &str) -> String {
        let mut out = String::new();
        for (i, line) in text.lines().enumerate() {
            if i == 0 {
                out.push_str(&format!("  {:<9} {line}\n", self.paint_label(label)));
            } else {
                out.push_str(&format!("{INDENT}{line}\n"));
            }
        }
        if out.is_empty() {
            out.push_str(&format!("  {}\n", self.paint_label(label)));
        }
        out
    }

    /// Each line of `text` in the text column.
    fn indented(text: &str) -> String {
        text.lines().fold(String::with_capacity(text.len() * 2), |mut out, line| {
            out.push_str(INDENT);
            out.push_str(line);
            out.push('\n');
            out
        })
    }

    /// The label, padded before colouring so the escape codes do not count as width.
    fn paint_label(&self, label: &str) -> String {
        self.paint("1", &format!("{label:<9}"))
    }

    fn paint(&self, codes: &str, text: &str) -> String {
        if self.color { format!("\x1b[{codes}m{text}\x1b[0m") } else { text.to_owned() }
    }

    /// Paths of the demo's world, the way a reader thinks of them.
    fn shorten(&self, text: &str) -> String {
        text.replace(&format!("{}/", self.project), "")
            .replace(&self.project, "the sample project")
            .replace(&self.state_home, "$FOR_LOOP_HOME")
            .replace(SESSION_ID, "<session>")
    }
}

/// What the decision means, in words.
fn explain(stop: &Stop) -> String {
    let changed = stop.oracle_changed.join(", ");
    match stop.reason.as_deref() {
        Some("verify_failed") => {
            "verify failed, so the stop is refused and the task goes back with the failing output".into()
        }
        Some("verify_timed_out") => "verify did not finish in time, so the stop is refused".into(),
        Some("oracle_changed") => {
            format!("{changed} changed since the loop started, so a pass does not count")
        }
        Some("verified") => "verify passed with the check intact, so the loop ends".into(),
        Some("story_verified") => {
            "the story's check passed, so for-loop ticks its box and the next story comes".into()
        }
        Some("story_broken") => {
            "the last story passed, but at the end a done story's check failed again, so it comes back".into()
        }
        Some("cap_reached") => "the iteration cap is reached, so the loop ends without a pass".into(),
        Some(other) => other.to_owned(),
        None => String::new(),
    }
}

/// The re-injected prompt without blank lines and separators. A fenced block holds the verify
/// output already shown above, so it becomes one line pointing there.
fn reinjected_lines(prompt: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in prompt.lines() {
        if line.starts_with("```") {
            if !fenced {
                lines.push("  (the verify output shown above)".to_owned());
            }
            fenced = !fenced;
            continue;
        }
        if fenced || line.trim().is_empty() || line.trim() == "---" {
            continue;
        }
        lines.push(line.to_owned());
    }
    lines
}

/// The first `n` sentences of `text`.
fn first_sentences(text: &str, n: usize) -> String {
    let mut end = text.len();
    let mut seen = 0;
    for (i, _) in text.match_indices(". ") {
        seen += 1;
        if seen == n {
            end = i + 1;
            break;
        }
    }
    text[..end].to_owned()
}

/// `text` broken at spaces into lines of at most [`WIDTH`] characters (a longer word keeps its
/// own line). Its line breaks stay, and a wrapped line's continuation keeps its indentation.
fn wrap(text: &str) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut current = indent.to_owned();
        for word in line.split_whitespace() {
            let started = current.len() > indent.len();
            if started && current.chars().count() + 1 + word.chars().count() > WIDTH {
                out.push(std::mem::replace(&mut current, indent.to_owned()));
            } else if started {
                current.push(' ');
            }
            current.push_str(word);
        }
        out.push(current);
    }
    out.join("\n")
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// The command as a reader could paste it: shell-quoted, the prompt on the first line and the
/// other flags wrapped under it.
fn shell_command(args: &[String]) -> String {
    let mut groups: Vec<String> = Vec::new();
    for arg in args {
        let quoted = quote(arg);
        match groups.last_mut() {
            Some(group) if !arg.starts_with('-') => {
                group.push(' ');
                group.push_str(&quoted);
            }
            _ => groups.push(quoted),
        }
    }
    let mut lines = vec![format!("$ claude {}", groups.first().cloned().unwrap_or_default())];
    let mut line = String::new();
    for group in groups.iter().skip(1) {
        if !line.is_empty() && line.len() + group.len() > 80 {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(group);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.join(" \\\n    ")
}

/// `arg` as one shell word: bare when that is safe, else in single quotes.
fn quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.' | ':' | '=' | ',' | '+'));
    if safe { arg.to_owned() } else { format!("'{}'", arg.replace('\'', "'\\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_quoted_and_wrapped() {
        let args: Vec<String> = [
            "-p",
            "/for-loop \"x\" --verify \"sh c\"",
            "--plugin-dir",
            "/repo",
            "--allowedTools",
            "Edit Bash(node:*)",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            shell_command(&args),
            "$ claude -p '/for-loop \"x\" --verify \"sh c\"' \\\n    --plugin-dir /repo --allowedTools 'Edit Bash(node:*)'"
        );
    }

    #[test]
    fn reinjected_prompts_drop_fences_and_separators() {
        let prompt = "task\n\n---\nfor-loop: iteration 2\n\n```text\nFAIL\n```\n\nTo finish: fix it.";
        assert_eq!(
            reinjected_lines(prompt),
            ["task", "for-loop: iteration 2", "  (the verify output shown above)", "To finish: fix it."]
        );
    }

    #[test]
    fn wrapping_keeps_indentation_and_line_breaks() {
        let long = format!("  - {}", "word ".repeat(30));
        let wrapped = wrap(&format!("first\n{long}"));
        let lines: Vec<&str> = wrapped.lines().collect();
        assert_eq!(lines[0], "first");
        assert!(lines.len() == 3 && lines[2].starts_with("  word"), "{wrapped}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{wrapped}");
    }

    #[test]
    fn paths_are_shortened_and_colour_is_optional() {
        let human = Human::new(false, Path::new("/t/project"), Path::new("/t/for-loop"));
        assert_eq!(
            human.shorten("Write /t/project/check.sh in /t/project"),
            "Write check.sh in the sample project"
        );
        assert_eq!(human.shorten("/t/for-loop/sessions/x"), "$FOR_LOOP_HOME/sessions/x");
        let plain = human.render(&Step::Said { iteration: 1, text: "done".into() });
        assert_eq!(plain, "  model     “done”\n");
        let colored = Human::new(true, Path::new("/p"), Path::new("/s"))
            .render(&Step::Said { iteration: 1, text: "done".into() });
        assert!(colored.contains("\x1b[1m"), "{colored:?}");
    }
}
