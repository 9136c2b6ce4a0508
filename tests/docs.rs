//! The README and docs/*.md: every relative link and `#anchor` resolves, the README stays short,
//! and every `loop-hook` subcommand and `--flag` they show in code exists.
//!
//! What exists is read at test time, never copied into this file: the subcommands and their
//! options from `loop-hook --help` and `loop-hook SUBCOMMAND --help` (the binary in
//! `$FOR_LOOP_BIN`, else the one cargo built), and the flags `/for-loop` accepts from its usage
//! (`echo --help | loop-hook start`), which prints the engine's table of loop flags. Each row of
//! a docs flags table (`| Flag | Default | Meaning |`) must match that table: the flag and its
//! value's name, the default, and a meaning that begins with the flag's help line; and every loop
//! flag has a row.
//!
//! What counts as a command in code: a code span or code block line whose words include
//! `loop-hook` (or a path ending in `/loop-hook`), `/for-loop…` or `$for-loop…`, or whose first word
//! is a `--flag` (a flag of ours shown on its own, as in the flags tables). Other programs' flags
//! are shown with their program (`claude --plugin-dir .`), so they are not taken for ours.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::repo;

const README_MAX_LINES: usize = 250;

/// README.md and every docs/*.md, as (path relative to the repository, text).
fn doc_files() -> Vec<(PathBuf, String)> {
    let root = repo();
    let mut paths = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| path.strip_prefix(&root).unwrap().to_path_buf())
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(root.join(&path))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, text)
        })
        .collect()
}

/// One piece of a Markdown file: prose (a paragraph, a table, a list, with its first line number)
/// or one logical line of a fenced code block (`\` continuations joined).
#[derive(Debug)]
enum Piece {
    Prose { line: usize, text: String },
    Code { line: usize, text: String },
}

fn pieces(text: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut fence: Option<String> = None;
    let mut prose: Option<(usize, String)> = None;
    let mut code: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        if let Some(open) = &fence {
            if trimmed.starts_with(open.as_str()) && trimmed.trim_end().chars().all(|c| c == '`' || c == '~')
            {
                fence = None;
                continue;
            }
            let (start, mut joined) = code.take().unwrap_or((number, String::new()));
            joined.push_str(line.trim());
            match joined.strip_suffix('\\') {
                Some(rest) => code = Some((start, format!("{rest} "))),
                None => pieces.push(Piece::Code { line: start, text: joined }),
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            if let Some((line, text)) = prose.take() {
                pieces.push(Piece::Prose { line, text });
            }
            let first = trimmed.chars().next();
            fence = Some(trimmed.chars().take_while(|&c| Some(c) == first).collect());
            continue;
        }
        if trimmed.is_empty() {
            if let Some((line, text)) = prose.take() {
                pieces.push(Piece::Prose { line, text });
            }
            continue;
        }
        let (_, text) = prose.get_or_insert_with(|| (number, String::new()));
        text.push_str(line);
        text.push('\n');
    }
    if let Some((line, text)) = prose.take() {
        pieces.push(Piece::Prose { line, text });
    }
    pieces
}

/// A piece of prose split into its code spans (`x`, ``x``, …, each with one space trimmed from
/// either end, as Markdown does) and the rest of its text. A run of backticks that no run of the
/// same length closes is text.
fn split_code(prose: &str) -> (Vec<String>, String) {
    let mut spans = Vec::new();
    let mut rest = String::new();
    let bytes = prose.as_bytes();
    let mut i = 0;
    let mut text_from = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
        let content_start = i + run;
        let mut j = content_start;
        let mut closed = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let close = bytes[j..].iter().take_while(|&&b| b == b'`').count();
                if close == run {
                    closed = Some(j);
                    break;
                }
                j += close;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                let content = prose[content_start..end].replace('\n', " ");
                let content = content.strip_prefix(' ').unwrap_or(&content);
                let content = content.strip_suffix(' ').unwrap_or(content);
                spans.push(content.to_string());
                rest.push_str(&prose[text_from..i]);
                rest.push(' ');
                i = end + run;
                text_from = i;
            }
            None => i = content_start,
        }
    }
    rest.push_str(&prose[text_from..]);
    (spans, rest)
}

/// The `(target)` of every inline link `[text](target)` in a piece of prose.
fn link_targets(prose: &str) -> Vec<String> {
    let (_, text) = split_code(prose);
    let mut targets = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0usize;
        let mut end = None;
        for (k, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(k);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let target = after[..end].split_whitespace().next().unwrap_or_default();
        targets.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
        rest = &after[end..];
    }
    targets
}

/// The anchor GitHub gives a heading: inline code, links and emphasis reduced to their text,
/// lower case, every character that is not a letter, a digit, `_`, `-` or a space dropped, and
/// each space turned into `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](target) -> text
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else { break };
        let Some(close) = rest[open + mid..].find(')') else { break };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a Markdown file: its headings' slugs, a repeated one with `-1`, `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for piece in pieces(text) {
        let Piece::Prose { text, .. } = piece else { continue };
        for line in text.lines() {
            let hashes = line.chars().take_while(|&c| c == '#').count();
            if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
                continue;
            }
            let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
            let count = seen.entry(base.clone()).or_insert(0);
            anchors.insert(if *count == 0 { base.clone() } else { format!("{base}-{count}") });
            *count += 1;
        }
    }
    anchors
}

/// Every link in `docs` (path, text) whose file or anchor does not resolve, one line each.
fn broken_links(root: &Path, docs: &[(PathBuf, String)]) -> Vec<String> {
    let mut broken = Vec::new();
    for (path, text) in docs {
        for piece in pieces(text) {
            let Piece::Prose { line, text: prose } = piece else { continue };
            for target in link_targets(&prose) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
                let at = format!("{}:{line}: ({target})", path.display());
                if file.is_empty() {
                    if !anchors(text).contains(anchor) {
                        broken.push(format!("{at}: no heading with the anchor #{anchor}"));
                    }
                    continue;
                }
                let resolved = if let Some(from_root) = file.strip_prefix('/') {
                    root.join(from_root)
                } else {
                    root.join(path.parent().unwrap_or(Path::new(""))).join(file)
                };
                if !resolved.exists() {
                    broken.push(format!(
                        "{at}: no file {}",
                        resolved.strip_prefix(root).unwrap_or(&resolved).display()
                    ));
                    continue;
                }
                if anchor.is_empty() {
                    continue;
                }
                let Ok(target_text) = std::fs::read_to_string(&resolved) else {
                    broken.push(format!("{at}: an anchor into something that is not a text file"));
                    continue;
                };
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{at}: no heading with the anchor #{anchor}"));
                }
            }
        }
    }
    broken
}

/// Splits a shell-like line into words: whitespace separates, quotes group (and are removed), a
/// backslash escapes the next character, and a `#` that begins a word begins a comment, which is
/// left out. An unclosed quote runs to the end.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => word.extend(chars.next()),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                word.extend(chars.next());
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// `--name` for a word that is a long flag (`[--more`, `--yes]]`, `--host=agy` and `--x,` too).
fn flag_name(word: &str) -> Option<&str> {
    let word = word.trim_start_matches(['[', '(']);
    let rest = word.strip_prefix("--")?;
    let len = rest
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    let name = &word[..2 + len];
    (len > 0 && rest.starts_with(|c: char| c.is_ascii_lowercase())).then_some(name)
}

/// Whether a word ends the command it follows: a pipe, a list operator, a redirection, a comment.
fn ends_command(word: &str) -> bool {
    matches!(word, "|" | "||" | "&&" | ";" | "&")
        || word.starts_with(['<', '>', '#'])
        || word.starts_with("2>")
}

/// What the binary and the parser say exists.
struct Known {
    /// Each subcommand, with the options its help shows; "" for the options of `loop-hook` itself.
    subcommands: BTreeMap<String, BTreeSet<String>>,
    /// The flags `/for-loop` accepts.
    for_loop: BTreeSet<String>,
    /// Every flag of ours, for a flag shown on its own.
    all: BTreeSet<String>,
}

fn loop_hook() -> PathBuf {
    match std::env::var_os("FOR_LOOP_BIN").filter(|bin| !bin.is_empty()) {
        Some(bin) => PathBuf::from(bin),
        None => PathBuf::from(env!("CARGO_BIN_EXE_loop-hook")),
    }
}

/// `loop-hook ARGS` with `stdin`, in a throwaway home, as its stdout.
fn help_of(args: &[&str], stdin: &str) -> String {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(loop_hook())
        .args(args)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", loop_hook().display()));
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

fn flags_in(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | '(' | ')' | ',' | '`' | '|'))
        .filter_map(flag_name)
        .map(str::to_string)
        .collect()
}

/// The options a subcommand's own help lists: the flags of its usage lines, and of each option
/// line (one that starts with a flag, indented as an entry's first line is, not as the lines
/// that continue its description) before the two spaces that begin its description.
fn options_in(help: &str) -> BTreeSet<String> {
    let mut options = BTreeSet::new();
    for raw in help.lines() {
        let line = raw.trim();
        if line.starts_with("Usage:") || line.starts_with("loop-hook ") || line.starts_with('[') {
            options.extend(flags_in(line));
        } else if raw.starts_with("  --") {
            options.extend(flags_in(line.split("  ").next().unwrap_or_default()));
        }
    }
    options
}

/// One loop flag as `/for-loop`'s usage lists it: `  --name VALUE   help [default: X]`.
#[derive(Debug)]
struct FlagLine {
    /// `--max-iterations N`, or the name alone for a switch.
    usage: String,
    help: String,
    /// What the help says after `default:`, if anything.
    default: Option<String>,
}

impl FlagLine {
    fn name(&self) -> &str {
        self.usage.split(' ').next().unwrap_or_default()
    }

    /// The Default column a docs table must show: the default, else `off` for a switch and
    /// `none` for a flag that takes a value.
    fn default_column(&self) -> &str {
        match &self.default {
            Some(default) => default,
            None if self.usage.contains(' ') => "none",
            None => "off",
        }
    }
}

/// The loop flags `/for-loop --help` lists, one a line.
fn for_loop_flag_lines() -> Vec<FlagLine> {
    let usage = help_of(&["start", "--session", "docs-test"], "--help");
    let lines: Vec<FlagLine> = usage
        .lines()
        .filter_map(|line| {
            let line = line.strip_prefix("  ")?;
            flag_name(line)?;
            let (usage, rest) = line.split_once("  ")?;
            let rest = rest.trim_start();
            let help = rest.split(" [").next().unwrap_or_default().to_string();
            let default = rest
                .split_once("[default: ")
                .and_then(|(_, after)| after.split_once(']'))
                .map(|(default, _)| default.to_string());
            Some(FlagLine { usage: usage.to_string(), help, default })
        })
        .collect();
    assert!(
        lines.iter().any(|line| line.name() == "--verify")
            && lines.iter().any(|line| line.name() == "--max-iterations"),
        "`echo --help | loop-hook start` lists no `  --flag VALUE  help` lines:\n{usage}"
    );
    lines
}

fn known() -> Known {
    let help = help_of(&["--help"], "");
    assert!(help.contains("Usage:"), "loop-hook --help printed no usage:\n{help}");
    let mut subcommands: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Usage lines: `loop-hook SUB [--flag …]`; `loop-hook help | --help | --version` gives the
    // options of loop-hook itself.
    for line in help.lines() {
        let Some(rest) = line.trim().strip_prefix("loop-hook ") else { continue };
        let sub = rest.split_whitespace().next().unwrap_or_default();
        let key = if sub == "help" || sub.starts_with('-') { "" } else { sub };
        subcommands.entry(key.to_string()).or_default().extend(flags_in(rest));
    }
    let for_loop = {
        let mut flags: BTreeSet<String> =
            for_loop_flag_lines().iter().map(|line| line.name().to_string()).collect();
        // `/for-loop --help` is the whole text `--help`, which the parser answers with its usage.
        if help_of(&["start", "--session", "docs-test"], "--help").contains("Usage: /for-loop") {
            flags.insert("--help".to_string());
        }
        flags
    };
    let names: Vec<String> = subcommands.keys().filter(|sub| !sub.is_empty()).cloned().collect();
    for sub in names {
        let own = help_of(&[&sub, "--help"], "");
        if own != help {
            subcommands.get_mut(&sub).unwrap().extend(options_in(&own));
        }
        let takes_loop_flags = help.lines().any(|line| {
            line.trim().starts_with(&format!("loop-hook {sub} ")) && line.contains("[loop flags]")
        });
        if takes_loop_flags {
            subcommands.get_mut(&sub).unwrap().extend(for_loop.iter().cloned());
        }
    }
    let mut all: BTreeSet<String> = subcommands.values().flatten().cloned().collect();
    all.extend(for_loop.iter().cloned());
    Known { subcommands, for_loop, all }
}

/// The flags a slash command of ours passes on: `/for-loop` and `$for-loop:for-loop` take
/// `/for-loop`'s; `/for-loop:resume`, `/resume-loop`, `/loop-status` and the like take those of
/// the `loop-hook` subcommand they name. `None` for a word that is not one of our commands.
fn slash_command<'k>(word: &str, known: &'k Known) -> Option<Result<&'k BTreeSet<String>, String>> {
    let name = word.strip_prefix('/').or_else(|| word.strip_prefix('$'))?;
    let name = name.strip_prefix("for-loop:").unwrap_or(name);
    if !name.chars().all(|c| c.is_ascii_lowercase() || c == '-' || c == ':') {
        return None;
    }
    if name == "for-loop" {
        return Some(Ok(&known.for_loop));
    }
    if !(word.starts_with("/for-loop:")
        || word.starts_with("$for-loop:")
        || name.ends_with("-loop")
        || name.starts_with("loop-"))
    {
        return None;
    }
    let sub = name.strip_suffix("-loop").or_else(|| name.strip_prefix("loop-")).unwrap_or(name);
    Some(known.subcommands.get(sub).ok_or_else(|| format!("{word} names no loop-hook subcommand")))
}

/// What is wrong with the commands and flags in one code span or code line.
fn check_code(code: &str, known: &Known) -> Vec<String> {
    let mut wrong = Vec::new();
    let words = words(code);
    if let Some(flag) = words.first().and_then(|w| flag_name(w))
        && !known.all.contains(flag)
    {
        wrong.push(format!("{flag} is not a flag of loop-hook or /for-loop"));
    }
    let mut i = 0;
    while i < words.len() {
        let word = words[i].as_str();
        i += 1;
        let (allowed, command) = if word == "loop-hook" || word.ends_with("/loop-hook") {
            let path = word != "loop-hook";
            match words.get(i).map(String::as_str) {
                None => continue,
                Some(next) if ends_command(next) => continue,
                Some(next) if flag_name(next).is_some() => (&known.subcommands[""], "loop-hook".to_string()),
                Some(placeholder) if placeholder.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                    (&known.all, "loop-hook".to_string())
                }
                Some(sub) => {
                    i += 1;
                    match known.subcommands.get(sub) {
                        Some(allowed) => (allowed, format!("loop-hook {sub}")),
                        // A path shown in a listing (`bin/<platform>/loop-hook  static`).
                        None if path => continue,
                        None => {
                            wrong.push(format!("loop-hook {sub}: no such subcommand in loop-hook --help"));
                            continue;
                        }
                    }
                }
            }
        } else {
            match slash_command(word, known) {
                None => continue,
                Some(Err(why)) => {
                    wrong.push(why);
                    continue;
                }
                Some(Ok(allowed)) => (allowed, word.to_string()),
            }
        };
        while i < words.len() && !ends_command(&words[i]) {
            let arg = words[i].as_str();
            i += 1;
            if let Some(flag) = flag_name(arg) {
                if !allowed.contains(flag) {
                    wrong.push(format!("{command} has no flag {flag}"));
                }
                if flag == "--agent-arg" {
                    // Its value is the agent CLI's own flag.
                    i += 1;
                }
            }
        }
    }
    wrong
}

/// Every command or flag shown in code in `docs` that does not exist, one line each.
fn unknown_commands(docs: &[(PathBuf, String)], known: &Known) -> Vec<String> {
    let mut wrong = Vec::new();
    for (path, text) in docs {
        for piece in pieces(text) {
            let (line, codes) = match piece {
                Piece::Prose { line, text } => (line, split_code(&text).0),
                Piece::Code { line, text } => (line, vec![text]),
            };
            for code in codes {
                for why in check_code(&code, known) {
                    wrong.push(format!("{}:{line}: `{code}`: {why}", path.display()));
                }
            }
        }
    }
    wrong
}

/// The cells of a Markdown table row, `\|` read as a `|` inside a cell.
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.replace("\\|", "\u{0}").split('|').map(|cell| cell.trim().replace('\u{0}', "|")).collect()
}

/// Every row of a flags table (`| Flag | Default | Meaning |`) in `docs` that does not match
/// the loop flags `lines`, one line each, and the flags no table has a row for. A row that
/// names several flags (`--metric CMD`, `--target`, ...) only points elsewhere: its flags are
/// checked as every flag in code is.
fn flag_rows_that_drift(docs: &[(PathBuf, String)], lines: &[FlagLine]) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut rows = BTreeSet::new();
    for (path, text) in docs {
        for piece in pieces(text) {
            let Piece::Prose { line, text } = piece else { continue };
            let mut table = text.lines();
            if table.next().map(cells) != Some(vec!["Flag".into(), "Default".into(), "Meaning".into()]) {
                continue;
            }
            for (n, row) in table.skip(1).enumerate() {
                let at = format!("{}:{}", path.display(), line + 2 + n);
                let [flag, default, meaning] = &cells(row)[..] else {
                    wrong.push(format!("{at}: not three cells: {row}"));
                    continue;
                };
                let (spans, _) = split_code(flag);
                let [usage] = &spans[..] else { continue };
                let Some(spec) = lines.iter().find(|line| Some(line.name()) == flag_name(usage)) else {
                    wrong.push(format!("{at}: {usage} is not a flag of /for-loop"));
                    continue;
                };
                rows.insert(spec.name().to_string());
                if *usage != spec.usage {
                    wrong.push(format!("{at}: `{usage}` where /for-loop --help says `{}`", spec.usage));
                }
                if default != spec.default_column() {
                    wrong.push(format!(
                        "{at}: {} defaults to {}, not {default}",
                        spec.name(),
                        spec.default_column()
                    ));
                }
                let meaning = meaning.replace('`', "");
                if !meaning.starts_with(spec.help.trim_end_matches('.')) {
                    wrong.push(format!(
                        "{at}: the meaning of {} does not begin with its help line \"{}\"",
                        spec.name(),
                        spec.help
                    ));
                }
            }
        }
    }
    for line in lines.iter().filter(|line| !rows.contains(line.name())) {
        wrong.push(format!("{} has no row in a flags table of the docs", line.name()));
    }
    wrong
}

#[test]
fn every_flags_table_row_matches_the_flag_table_and_every_flag_has_a_row() {
    let wrong = flag_rows_that_drift(&doc_files(), &for_loop_flag_lines());
    assert!(
        wrong.is_empty(),
        "flags tables that drifted from `echo --help | loop-hook start`:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_flags_table_check_catches_a_drifted_row() {
    let lines = for_loop_flag_lines();
    let doc = "| Flag | Default | Meaning |\n| --- | --- | --- |\n\
               | `--max-iterations COUNT` | 31 | Turns. |\n\
               | `--verify CMD` | none | A command that decides done. |\n\
               | `--checkpoint` | none | After each iteration, snapshots the working tree to `refs/for-loop/<loop id>/<n>` (git only). |\n\
               | `--no-such-flag N` | none | Nothing. |\n\
               | `--metric CMD`, `--target` | | Metric mode. |\n";
    let wrong = flag_rows_that_drift(&[(PathBuf::from("PAGE.md"), doc.to_string())], &lines).join("\n");
    for expected in [
        "PAGE.md:3: `--max-iterations COUNT` where /for-loop --help says `--max-iterations N`",
        "PAGE.md:3: --max-iterations defaults to 30, not 31",
        "PAGE.md:3: the meaning of --max-iterations does not begin",
        "PAGE.md:4: the meaning of --verify does not begin",
        "PAGE.md:5: --checkpoint defaults to off, not none",
        "PAGE.md:6: --no-such-flag N is not a flag of /for-loop",
        "--review has no row in a flags table",
    ] {
        assert!(wrong.contains(expected), "not caught: {expected}\n{wrong}");
    }
    assert!(!wrong.contains("--verify has no row"), "{wrong}");
}

#[test]
fn every_relative_link_and_anchor_in_the_readme_and_docs_resolves() {
    let broken = broken_links(&repo(), &doc_files());
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_at_most_250_lines() {
    let lines = std::fs::read_to_string(repo().join("README.md")).unwrap().lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail to a page under docs/"
    );
}

#[test]
fn every_subcommand_and_flag_shown_in_code_exists() {
    let known = known();
    let wrong = unknown_commands(&doc_files(), &known);
    assert!(wrong.is_empty(), "commands or flags that do not exist:\n{}", wrong.join("\n"));
}

#[test]
fn the_checks_catch_a_made_up_flag_subcommand_link_and_anchor() {
    let root = repo();
    let known = known();
    let doc = "# A page\n\n\
               ## Fresh context: `loop-hook run`\n\n\
               Start with `/for-loop fix it --verify true --no-such-flag 3`, then\n\
               `loop-hook status --all --no-such-option`, `loop-hook frobnicate`,\n\
               `/for-loop:resume --more 2 --fewer 1` and `--made-up N`.\n\n\
               ```sh\n\
               loop-hook run \"task\" --verify true \\\n  --agent-arg --yolo --max-iterations 3 --bogus\n\
               claude --plugin-dir . --not-ours-to-check\n\
               ```\n\n\
               [ok](#fresh-context-loop-hook-run), [ok](docs/usage.md#flags), [bad](#no-such-heading),\n\
               [bad](docs/no-such-page.md), [bad](docs/usage.md#no-such-heading), `[not a link](nowhere.md)`.\n";
    let docs = vec![(PathBuf::from("PAGE.md"), doc.to_string())];
    let wrong = unknown_commands(&docs, &known).join("\n");
    for expected in [
        "/for-loop has no flag --no-such-flag",
        "loop-hook status has no flag --no-such-option",
        "loop-hook frobnicate: no such subcommand",
        "/for-loop:resume has no flag --fewer",
        "--made-up is not a flag",
        "loop-hook run has no flag --bogus",
    ] {
        assert!(wrong.contains(expected), "not caught: {expected}\n{wrong}");
    }
    assert_eq!(wrong.lines().count(), 6, "{wrong}");

    let broken = broken_links(&root, &docs).join("\n");
    for expected in ["(#no-such-heading)", "(docs/no-such-page.md)", "(docs/usage.md#no-such-heading)"] {
        assert!(broken.contains(expected), "not caught: {expected}\n{broken}");
    }
    assert_eq!(broken.lines().count(), 3, "{broken}");
}

#[test]
fn anchors_follow_githubs_rules() {
    let text = "# for-loop\n\n## Fresh context: `loop-hook run`\n\n### 1. No loop (every turn end)\n\n\
                ## Install\n\n## Install\n\n```sh\n# not a heading\n```\n\n## Links: [docs](x.md) and *emphasis*\n";
    let anchors = anchors(text);
    let expected = [
        "for-loop",
        "fresh-context-loop-hook-run",
        "1-no-loop-every-turn-end",
        "install",
        "install-1",
        "links-docs-and-emphasis",
    ];
    assert_eq!(anchors, expected.iter().map(|a| (*a).to_string()).collect(), "{anchors:?}");
}
