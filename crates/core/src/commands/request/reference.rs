//! The options reference in `docs/usage.md`, printed from the option table: the loop flags'
//! table and the table of every other command's options sit between markers there, and a test
//! fails when they differ from what the table prints. To regenerate them after a change to the
//! table, run
//!
//! ```text
//! FOR_LOOP_WRITE_DOCS=1 cargo test --locked -p for-loop-core --lib options_reference
//! ```
//!
//! Test-only: the engine never prints Markdown.

use std::path::PathBuf;

use super::flag_spec::{Default, FLAGS, Flag, FlagSpec, Group};

/// The environment variable that makes the test write the blocks instead of comparing them.
const WRITE: &str = "FOR_LOOP_WRITE_DOCS";

fn usage_md() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/usage.md")
}

/// A table cell's text: a `|` inside it is written `\|`.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The Default column: the default, else `off` for a switch and `none` for a value.
fn default_column(spec: &FlagSpec) -> String {
    match spec.default {
        Default::Off => "off".into(),
        default => default.shown().unwrap_or_else(|| "none".into()),
    }
}

/// What the docs' tables say the option means: its help line, or more.
fn meaning(spec: &FlagSpec) -> String {
    if spec.docs.is_empty() { spec.help_line() } else { spec.docs.to_string() }
}

/// `--help`, `-h` for an option with a short name.
fn names(spec: &FlagSpec) -> String {
    match spec.short {
        Some(short) => format!("`{}`, `{short}`", spec.usage()),
        None => format!("`{}`", spec.usage()),
    }
}

/// The loop flags, one row each, and one row pointing to `docs/metric.md` for metric mode's.
fn loop_flags() -> String {
    let mut out = String::from("| Flag | Default | Meaning |\n| --- | --- | --- |\n");
    let (metric, rest): (Vec<Flag>, Vec<Flag>) =
        Flag::all().partition(|flag| flag.spec().groups.has(Group::METRIC));
    for spec in rest.into_iter().map(Flag::spec) {
        let row = [cell(&names(spec)), default_column(spec), cell(&meaning(spec))];
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    let metric: Vec<String> = metric.iter().map(|flag| format!("`{}`", flag.name())).collect();
    out.push_str(&format!(
        "| {} | | Metric mode: keep what improves a number. See [metric.md](metric.md). |\n",
        metric.join(", ")
    ));
    out
}

/// The commands that take an option, as its user types them: the slash commands and `loop-hook
/// run` whole, `loop-hook`'s other commands after one `loop-hook`.
fn taken_by(spec: &FlagSpec) -> String {
    let mut whole = Vec::new();
    let mut lines = Vec::new();
    for (group, command) in Group::COMMANDS {
        if !spec.groups.has(group) {
            continue;
        }
        match command.strip_prefix("loop-hook ") {
            Some(name) if group != Group::RUN => lines.push(name),
            _ => whole.push(format!("`{command}`")),
        }
    }
    let every = Group::COMMANDS.iter().filter(|(group, _)| Group::LINES.has(*group)).count();
    if lines.len() == every {
        let but_run = if spec.groups.has(Group::RUN) { "every other" } else { "every but run's" };
        whole.push(format!("{but_run} `loop-hook` command"));
    } else if !lines.is_empty() {
        whole.push(format!("`loop-hook` {}", lines.join(", ")));
    }
    whole.join("; ")
}

/// Every option that is not only a loop flag, one row each, with the commands that take it.
fn command_options() -> String {
    let mut out = String::from("| Option | Taken by | Default | Meaning |\n| --- | --- | --- | --- |\n");
    for spec in FLAGS.iter().filter(|spec| spec.groups != Group::LOOP && !spec.groups.has(Group::METRIC)) {
        let row = [cell(&names(spec)), cell(&taken_by(spec)), default_column(spec), cell(&meaning(spec))];
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// Each generated block by its marker's name, a blank line either side of its table.
fn blocks() -> [(&'static str, String); 2] {
    [
        ("loop flags", format!("\n{}\n", loop_flags())),
        ("command options", format!("\n{}\n", command_options())),
    ]
}

/// `text` with the block `name` replaced by `block`, or why it cannot be.
fn with_block(text: &str, name: &str, block: &str) -> Result<String, String> {
    let begin = format!("<!-- begin generated: {name} -->\n");
    let end = format!("<!-- end generated: {name} -->");
    let from = text.find(&begin).ok_or_else(|| format!("no `{}` line", begin.trim()))? + begin.len();
    let to =
        from + text[from..].find(&end).ok_or_else(|| format!("no `{end}` line after `{}`", begin.trim()))?;
    Ok(format!("{}{block}{}", &text[..from], &text[to..]))
}

#[test]
fn options_reference_in_the_docs_is_the_option_tables() {
    let path = usage_md();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut generated = text.clone();
    for (name, block) in blocks() {
        generated = with_block(&generated, name, &block).unwrap_or_else(|why| panic!("docs/usage.md: {why}"));
    }
    if std::env::var_os(WRITE).is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    assert!(
        generated == text,
        "docs/usage.md's generated options reference differs from the option table: run \
         `{WRITE}=1 cargo test --locked -p for-loop-core --lib options_reference` and commit the result"
    );
}

#[test]
fn options_reference_blocks_are_found_replaced_and_missed() {
    let text = "a\n<!-- begin generated: x -->\nold\n<!-- end generated: x -->\nb\n";
    assert_eq!(
        with_block(text, "x", "new\n").unwrap(),
        "a\n<!-- begin generated: x -->\nnew\n<!-- end generated: x -->\nb\n"
    );
    assert!(with_block(text, "y", "").unwrap_err().contains("begin generated: y"));
    assert!(with_block("<!-- begin generated: x -->\n", "x", "").unwrap_err().contains("end generated: x"));
}

#[test]
fn options_reference_rows_say_what_the_table_says() {
    let flags = loop_flags();
    assert!(flags.contains("| `--on-limit wait\\|handoff` | wait | What a usage limit"), "{flags}");
    assert!(flags.contains("| `--checkpoint` | off | After each iteration"), "{flags}");
    assert!(!flags.contains("| `--target"), "metric mode's flags point to metric.md: {flags}");
    assert!(flags.contains("`--metric`, `--target`"), "{flags}");
    assert_eq!(
        flags.lines().count(),
        2 + Flag::all().filter(|f| !f.spec().groups.has(Group::METRIC)).count() + 1
    );
    let options = command_options();
    assert!(
        options.contains("| `--yes`, `-y` | `/for-loop:rollback` | off | Restores the checkpoint. |"),
        "{options}"
    );
    assert!(
        options.contains("| `--out FILE` | `/for-loop:report`; `loop-hook` report | none | Where the report"),
        "{options}"
    );
    assert!(options.contains("| `--more N` | `/for-loop:resume`; `loop-hook run` |"), "{options}");
    assert!(!options.contains("`--verify CMD`"), "a loop flag alone is in the flags table: {options}");
    assert!(options.contains("claude-code (default)"), "--host lists the hosts: {options}");
}

/// Every loop flag's meaning in the docs begins with its help line, as `tests/docs.rs` holds
/// the other pages' flags tables to.
#[test]
fn each_docs_meaning_begins_with_its_help_line() {
    for spec in &FLAGS {
        let meaning = meaning(spec).replace('`', "");
        let help = spec.help.replace('`', "");
        assert!(meaning.starts_with(help.trim_end_matches('.')), "{}: {meaning}", spec.name);
    }
}
