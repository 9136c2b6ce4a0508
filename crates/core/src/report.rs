//! `loop-hook report`: one self-contained HTML page that shows how a loop went, written next to
//! the loop's state (or where `--out` says) and optionally opened in a browser.
//!
//! This module reads the files (state, ledger, checkpoints); [`model`] turns them into what the
//! page shows and [`html`] renders it, both without touching anything.

mod attempt;
mod backlog;
mod chart;
mod cost;
mod escape;
mod html;
mod model;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::commands::Target;
use crate::commands::{Flag, Group};
use crate::commands::{Given, OptionError, request::words};
use crate::state::{LoopState, Status};
use crate::store::LoopFile;
use crate::store::{LoopPaths, Store};
use crate::support::Environment;
use crate::support::Outcome;
use crate::support::ReverseLines;
use crate::worktree::WorkTree;
use model::{FileChanges, LedgerLines, LoopReport};

/// The most of a ledger a report reads, from its end: about 30,000 stops.
const MAX_LEDGER_BYTES: u64 = 32 << 20;

#[derive(Debug, Clone, Default)]
pub(crate) struct ReportOptions {
    pub(crate) target: Target,
    /// Where to write the page; default: the loop's own (`LoopFile::Report`), next to its state.
    pub(crate) out: Option<PathBuf>,
    /// Open the page in the default browser once written.
    pub(crate) open: bool,
    /// Read more options (`--out FILE`, `--open`) from stdin, as typed after `/for-loop:report`.
    pub(crate) options_on_stdin: bool,
}

impl ReportOptions {
    /// Adds the options typed after `/for-loop:report`.
    pub(crate) fn add_typed(&mut self, text: &str) -> Result<(), String> {
        let words = shell_words::split(text).map_err(|e| format!("could not read the options ({e})"))?;
        let given = words::read(Group::REPORT, words)
            .map_err(|e| e.describe("a report option", "use --out FILE and --open"))?;
        for given in given {
            match given {
                Given::Option(Flag::Open, _) => self.open = true,
                Given::Option(Flag::Out, file) if !file.is_empty() => self.out = Some(PathBuf::from(file)),
                Given::Option(Flag::Out, _) => {
                    return Err(OptionError::MissingValue { flag: Flag::Out }.to_string());
                }
                Given::Option(flag, _) => {
                    return Err(format!("`{flag}` is not a report option: use --out FILE and --open"));
                }
                Given::Word(word) => {
                    return Err(format!("`{word}` is not a report option: use --out FILE and --open"));
                }
            }
        }
        Ok(())
    }
}

pub(crate) fn run(env: &Environment, options: &ReportOptions) -> Outcome {
    let store = match Store::locate(env) {
        Ok(store) => store,
        Err(e) => return Outcome::refused(format!("for-loop: {e}")),
    };
    let (paths, state) = match options.target.session_id(env) {
        Some(id) => {
            let (paths, loaded) =
                if let Some((paths, state)) = crate::commands::status::by_loop_id(&store, id) {
                    (paths, Ok(Some(state)))
                } else {
                    let paths = store.paths(id);
                    let loaded = paths.load();
                    (paths, loaded)
                };
            match loaded {
                Ok(Some(state)) => (paths, state),
                Ok(None) => {
                    return Outcome::refused(format!(
                        "for-loop: no loop in session {id}, nor one whose loop id it is, so there is nothing to report. \
                         `loop-hook status --all` lists the loops."
                    ));
                }
                Err(e) => return Outcome::refused(format!("for-loop: no report: {e}")),
            }
        }
        None => match options.target.here(&store, env) {
            Ok(found) => found,
            Err(refusal) => return refusal,
        },
    };
    let ledger = match read_ledger(&paths) {
        Ok(ledger) => ledger,
        Err(e) => {
            return Outcome::refused(format!(
                "for-loop: no report: could not read the ledger {}: {e}",
                paths.ledger.display()
            ));
        }
    };
    let mut report =
        LoopReport::build(&state, ledger, file_changes(&store, &state), state.meta.tier.clone(), env.now);
    report.backlog = backlog::BacklogSection::of(&store, &state.meta.session_id);
    let page = html::render(&report);
    let (out, written) = match &options.out {
        Some(out) => {
            let out = env.cwd.join(out);
            let written = write_atomically(&out, page.as_bytes());
            (out, written)
        }
        None => (LoopFile::Report.path(&paths.dir), LoopFile::Report.write(&paths.dir, page.as_bytes())),
    };
    if let Err(e) = written {
        return Outcome::refused(format!("for-loop: could not write the report to {}: {e}", out.display()));
    }
    let mut message = format!("for-loop: report written to {}", out.display());
    if options.open {
        match open_in_browser(&out) {
            Ok(opener) => message.push_str(&format!("\n  opened with {opener}")),
            Err(e) => {
                message
                    .push_str(&format!("\n  could not open it ({e}): open the file in a browser yourself"));
            }
        }
    }
    Outcome::ok(message)
}

/// The ledger's lines, oldest first; at most [`MAX_LEDGER_BYTES`] from its end.
fn read_ledger(paths: &LoopPaths) -> std::io::Result<LedgerLines> {
    let size = match fs::metadata(&paths.ledger) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LedgerLines::default()),
        Err(e) => return Err(e),
    };
    let mut lines = ReverseLines::open(&paths.ledger, MAX_LEDGER_BYTES)?.collect::<Result<Vec<_>, _>>()?;
    lines.reverse();
    Ok(LedgerLines::parse(lines.iter().map(Vec::as_slice), size > MAX_LEDGER_BYTES))
}

/// The files the loop changed: per iteration from its checkpoints, and in all from its receipt
/// once it is over, else from its start until now.
fn file_changes(store: &Store, state: &LoopState) -> FileChanges {
    let meta = &state.meta;
    let mut changes = FileChanges::default();
    let here = WorkTree::open(&meta.cwd);
    // A best-of-K attempt's work tree is removed when its run ends: its checkpoints are refs of
    // the repository it was made from, so they are read there. "Now" is not its state any more.
    let (tree, gone) = if here.is_git() {
        (here, false)
    } else if let Some(origin) =
        attempt::repository(store, &meta.session_id).filter(|_| fs::metadata(&meta.cwd).is_err())
    {
        changes.note = Some(format!(
            "This attempt's work tree was removed when its run ended; its checkpoints are read from {}.",
            origin.root().display()
        ));
        (origin, true)
    } else {
        changes.total = meta.receipt.as_ref().and_then(|r| r.files_changed.clone());
        changes.note = Some(if fs::metadata(&meta.cwd).is_err() {
            format!(
                "The loop's directory {} no longer exists, so changes per iteration are not known.",
                meta.cwd.display()
            )
        } else {
            "The loop's directory is not in a git repository, so changes per iteration are not known.".into()
        });
        return changes;
    };
    changes.total = match (&meta.receipt, meta.status) {
        (Some(receipt), Status::Ended | Status::Parked) => receipt.files_changed.clone(),
        _ if gone => None,
        _ => meta
            .baseline_tree
            .as_ref()
            // A tree id, not the fingerprint: only a tree can be compared file by file.
            .and_then(|from| tree.tree_id().ok().and_then(|now| tree.changed_files(from, &now).ok())),
    };
    if !meta.settings.checkpoint {
        changes.note =
            Some("Start a loop with --checkpoint to see the files changed in each iteration.".into());
        return changes;
    }
    match tree.checkpoints(&meta.loop_id) {
        Ok(checkpoints) => {
            let mut before = meta.baseline_tree.clone();
            for (n, commit) in checkpoints {
                if let Some(from) = &before
                    && let Ok(files) = tree.changed_files(from, &commit)
                {
                    changes.per_iteration.push((n, files));
                }
                before = Some(commit);
            }
        }
        Err(e) => changes.note = Some(format!("The checkpoints could not be read: {e}")),
    }
    changes
}

/// Writes `bytes` to `path` through a temporary file beside it, so a reader never sees half a page.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let mut temp = tempfile::Builder::new().prefix(".report.").suffix(".html").tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_data()?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Starts the platform's opener on `path` without waiting for it; returns the opener's name.
fn open_in_browser(path: &Path) -> std::io::Result<&'static str> {
    let (program, args): (&str, &[&str]) = if cfg!(target_os = "macos") {
        ("open", &[])
    } else if cfg!(windows) {
        ("cmd", &["/C", "start", ""])
    } else {
        ("xdg-open", &[])
    };
    Command::new(program)
        .args(args)
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(|_| program)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{program}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_options_are_parsed_and_checked() {
        let mut options = ReportOptions::default();
        options.add_typed("--open --out 'my report.html'").unwrap();
        assert!(options.open);
        assert_eq!(options.out, Some(PathBuf::from("my report.html")));
        assert!(ReportOptions::default().add_typed("--out").is_err());
        let missing = ReportOptions::default().add_typed("--out ''").unwrap_err();
        assert!(missing.contains("--out needs a file name"), "{missing}");
        let typo = ReportOptions::default().add_typed("--opn").unwrap_err();
        assert!(typo.contains("did you mean --open?"), "{typo}");
        let switch = ReportOptions::default().add_typed("--open=yes").unwrap_err();
        assert!(switch.contains("--open takes no value"), "{switch}");
        assert!(ReportOptions::default().add_typed("--frobnicate").unwrap_err().contains("--frobnicate"));
        assert!(ReportOptions::default().add_typed("'unclosed").is_err());
        ReportOptions::default().add_typed("  \n").unwrap();
    }
}
