//! The user's plan file as bytes: where each story's box sits (a Markdown `[ ]` or `[x]`, a
//! `prd.json` story's `passes`), the file's fingerprint with the boxes left out, and ticking one.
//!
//! for-loop ticks a story's box when its check passes and clears it when the story breaks, so
//! the file shows how far the loop is. Those ticks are no change of the check: the plan's
//! fingerprint leaves every box out. A box ticked that the loop has not verified is a change of
//! its own ([`unverified_ticks`]): the model cannot claim a story by ticking it, nor a restart of
//! the loop take it for done.
//!
//! A tick changes one box and nothing else. The file is read again just before it is written
//! and written only if its story's line is still there and nobody saved the file meanwhile: a
//! user's edit always wins over a tick.

use std::borrow::Cow;
use std::fs;
use std::io::{self, Write as _};
use std::ops::Range;
use std::path::Path;

use thiserror::Error;

use crate::checks::plan::{self, MAX_PLAN_BYTES, PlanProgress, Story};
use crate::support::digest::sha256_hex;
use crate::support::read::bounded_read;

/// How the oracle's record of a plan file starts: its digest with the boxes left out.
pub(crate) const DIGEST_PREFIX: &str = "plan-sha256:";

/// Why a story's box was not ticked (or cleared). Each says what the file is now.
#[derive(Debug, Error)]
pub(crate) enum TickError {
    #[error("the file is gone")]
    Gone,
    #[error("it is {0} now, not a regular file")]
    NotAFile(&'static str),
    #[error("it is read-only")]
    ReadOnly,
    #[error("the story's line is not there as it was at start (the file was edited)")]
    Moved,
    #[error("it was saved by someone else while for-loop ticked it")]
    Raced,
    #[error("the story has no `passes` field to set, and for-loop adds none to keep the file as it is")]
    NoPasses,
    #[error("it cannot be read or written: {0}")]
    Io(#[from] io::Error),
}

/// The fingerprint of the plan at `path`: its bytes with every story's box left out, so that
/// for-loop's own ticks change nothing.
pub(crate) fn fingerprint(path: &Path) -> io::Result<String> {
    let bytes = bounded_read::read(path, MAX_PLAN_BYTES)?;
    Ok(format!("{DIGEST_PREFIX}{}", sha256_hex(&without_boxes(is_json(path), &bytes))))
}

/// The stories whose box is ticked in the file at `path` although `progress` does not have them
/// done: ticks for-loop did not write. Empty when the file cannot be read as the plan (its
/// fingerprint tells that change).
pub(crate) fn unverified_ticks(path: &Path, progress: &PlanProgress) -> Vec<usize> {
    let read = bounded_read::read(path, MAX_PLAN_BYTES).ok().and_then(|bytes| String::from_utf8(bytes).ok());
    let Some(text) = read else { return Vec::new() };
    let shown = path.display().to_string();
    let stories =
        if is_json(path) { plan::parse_prd(&shown, &text) } else { plan::parse_markdown(&shown, &text) };
    let Ok(stories) = stories else { return Vec::new() };
    if stories.len() != progress.stories.len() {
        return Vec::new();
    }
    let ticked = stories.iter().zip(&progress.stories).map(|(s, p)| s.done && !p.done);
    ticked.enumerate().filter(|(_, t)| *t).map(|(i, _)| i).collect()
}

/// Sets the box of `story`, the plan's story `index`, in the file at `path` to `done`. `Ok(false)`
/// when it was set already. One box changes; every other byte stays.
pub(crate) fn tick(path: &Path, story: &Story, index: usize, done: bool) -> Result<bool, TickError> {
    let meta = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(TickError::Gone),
        meta => meta?,
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        // A link may lead anywhere: for-loop writes only the file the user named.
        return Err(TickError::NotAFile("a symbolic link"));
    }
    if !kind.is_file() {
        return Err(TickError::NotAFile(if kind.is_dir() {
            "a directory"
        } else {
            "a FIFO, socket or device"
        }));
    }
    if meta.permissions().readonly() {
        return Err(TickError::ReadOnly);
    }
    let old = bounded_read::read(path, MAX_PLAN_BYTES)?;
    let text = String::from_utf8(old.clone()).map_err(|_| TickError::Moved)?;
    let (range, value) = if is_json(path) {
        (prd_box(&text, story)?, if done { "true" } else { "false" })
    } else {
        (markdown_box(&text, story, index)?, if done { "x" } else { " " })
    };
    let now = &text[range.clone()];
    if now == value || (done && now == "X") {
        return Ok(false);
    }
    let new = [&text[..range.start], value, &text[range.end..]].concat();
    replace(path, &meta, &old, new.as_bytes())?;
    Ok(true)
}

/// Writes `new` over the file at `path` through a file beside it, with the same permissions, if
/// the file still holds `old`.
fn replace(path: &Path, meta: &fs::Metadata, old: &[u8], new: &[u8]) -> Result<(), TickError> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut temp = tempfile::Builder::new().prefix(&format!(".{name}.for-loop-")).tempfile_in(dir)?;
    temp.write_all(new)?;
    temp.as_file().set_permissions(meta.permissions())?;
    temp.as_file().sync_data()?;
    // The user may have saved the file since it was read: their edit wins.
    if bounded_read::read(path, MAX_PLAN_BYTES)? != old {
        return Err(TickError::Raced);
    }
    temp.persist(path).map_err(|e| TickError::Io(e.error))?;
    Ok(())
}

fn is_json(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("json"))
}

/// `bytes` with each story's box blanked: the same for any state of the boxes.
fn without_boxes(json: bool, bytes: &[u8]) -> Cow<'_, [u8]> {
    let Ok(text) = std::str::from_utf8(bytes) else { return Cow::Borrowed(bytes) };
    let boxes: Vec<Range<usize>> = if json {
        prd_stories(text).unwrap_or_default().into_iter().filter_map(|s| s.passes).collect()
    } else {
        markdown_items(text).into_iter().map(|item| item.at).collect()
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for at in boxes {
        out.extend_from_slice(&bytes[from..at.start]);
        out.push(b'_');
        from = at.end;
    }
    out.extend_from_slice(&bytes[from..]);
    Cow::Owned(out)
}

/// A top-level checklist item of a Markdown plan: where its box's mark is, and its title.
struct Item<'a> {
    at: Range<usize>,
    title: &'a str,
}

/// The stories' items of a Markdown plan, in order, read as [`plan::parse_markdown`] reads them.
fn markdown_items(text: &str) -> Vec<Item<'_>> {
    let mut items = Vec::new();
    let (mut fenced, mut start) = (false, 0);
    for line in text.split_inclusive('\n') {
        let at = start;
        start += line.len();
        let line = line.strip_suffix('\n').map_or(line, |l| l.strip_suffix('\r').unwrap_or(l));
        if line.starts_with([' ', '\t']) {
            continue;
        }
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let Some(rest) = line.strip_prefix(['-', '*', '+']).and_then(|r| r.strip_prefix(' ')) else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(after) = ["[ ]", "[x]", "[X]"].iter().find_map(|b| rest.strip_prefix(b)) else { continue };
        let mark = at + (line.len() - rest.len()) + 1;
        items.push(Item { at: mark..mark + 1, title: after.trim() });
    }
    items
}

/// Story `index`'s box in a Markdown plan, if its line is still the story's.
fn markdown_box(text: &str, story: &Story, index: usize) -> Result<Range<usize>, TickError> {
    let items = markdown_items(text);
    let item = items.get(index).filter(|item| item.title == story.title).ok_or(TickError::Moved)?;
    Ok(item.at.clone())
}

/// `story`'s `passes` value in a `prd.json`: the one entry of `userStories` with its id and title.
fn prd_box(text: &str, story: &Story) -> Result<Range<usize>, TickError> {
    let stories = prd_stories(text).ok_or(TickError::Moved)?;
    let mut matching = stories.into_iter().enumerate().filter(|(i, entry)| {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text[entry.object.clone()]) else {
            return false;
        };
        let id = match &value["id"] {
            serde_json::Value::String(id) if !id.trim().is_empty() => id.trim().to_string(),
            serde_json::Value::Number(n) => n.to_string(),
            _ => (i + 1).to_string(),
        };
        id == story.id && value["title"].as_str().map(str::trim) == Some(story.title.as_str())
    });
    match (matching.next(), matching.next()) {
        (Some((_, entry)), None) => entry.passes.ok_or(TickError::NoPasses),
        _ => Err(TickError::Moved),
    }
}

/// One entry of a `prd.json`'s `userStories`: where it is, and its `passes` value if that is
/// `true` or `false`.
struct PrdEntry {
    object: Range<usize>,
    passes: Option<Range<usize>>,
}

/// The entries of `userStories` in a `prd.json`, in the file's order; `None` when the text is
/// not a JSON object.
fn prd_stories(text: &str) -> Option<Vec<PrdEntry>> {
    let mut json = Scanner { text, at: 0, depth: 0 };
    let mut entries = Vec::new();
    json.object(&mut |json, key| {
        if key != "userStories" || json.peek() != Some(b'[') {
            return json.value().map(drop);
        }
        json.array(&mut |json| {
            json.blank();
            let start = json.at;
            let mut passes = None;
            if json.peek() == Some(b'{') {
                json.object(&mut |json, key| {
                    let value = json.value()?;
                    if key == "passes" && matches!(&json.text[value.clone()], "true" | "false") {
                        passes = Some(value);
                    }
                    Some(())
                })?;
            } else {
                json.value()?;
            }
            entries.push(PrdEntry { object: start..json.at, passes });
            Some(())
        })
    })?;
    Some(entries)
}

/// The least of a JSON reader that knows where each value is: enough to find `passes` values
/// in text `serde_json` reads as a plan. Nesting is bounded, like `serde_json`'s.
struct Scanner<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

type Member<'s, 'a> = dyn FnMut(&mut Scanner<'a>, &'a str) -> Option<()> + 's;
type Element<'s, 'a> = dyn FnMut(&mut Scanner<'a>) -> Option<()> + 's;

impl<'a> Scanner<'a> {
    const MAX_DEPTH: usize = 128;

    fn peek(&mut self) -> Option<u8> {
        self.blank();
        self.text.as_bytes().get(self.at).copied()
    }

    fn blank(&mut self) {
        let bytes = self.text.as_bytes();
        while bytes.get(self.at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    /// A string: its text between the quotes, escapes as written.
    fn string(&mut self) -> Option<&'a str> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        let bytes = self.text.as_bytes();
        loop {
            match bytes.get(self.at)? {
                b'\\' => self.at += 2,
                b'"' => break,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        self.text.get(start..self.at - 1)
    }

    /// Any value: where it is.
    fn value(&mut self) -> Option<Range<usize>> {
        self.blank();
        let start = self.at;
        match self.peek()? {
            b'"' => drop(self.string()?),
            b'{' => self.object(&mut |json, _| json.value().map(drop))?,
            b'[' => self.array(&mut |json| json.value().map(drop))?,
            _ => {
                let bytes = self.text.as_bytes();
                while bytes.get(self.at).is_some_and(|b| !b",}] \t\r\n".contains(b)) {
                    self.at += 1;
                }
                if self.at == start {
                    return None;
                }
            }
        }
        Some(start..self.at)
    }

    fn nested(&mut self, open: u8, close: u8, each: &mut dyn FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if !self.eat(open) || self.depth >= Self::MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        if !self.eat(close) {
            loop {
                each(self)?;
                if self.eat(close) {
                    break;
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    fn object(&mut self, member: &mut Member<'_, 'a>) -> Option<()> {
        self.nested(b'{', b'}', &mut |json| {
            let key = json.string()?;
            if !json.eat(b':') {
                return None;
            }
            member(json, key)
        })
    }

    fn array(&mut self, element: &mut Element<'_, 'a>) -> Option<()> {
        self.nested(b'[', b']', element)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "# Plan\r\n\r\n- [ ] One\r\n  verify: true\r\n* [X] Two\r\n```\r\n- [ ] fenced\r\n```\r\n  - [ ] nested\r\n+ [ ] Three\r\n";

    #[test]
    fn markdown_boxes_are_found_where_the_plan_reader_finds_stories() {
        let items = markdown_items(PLAN);
        let titles: Vec<&str> = items.iter().map(|i| i.title).collect();
        assert_eq!(titles, ["One", "Two", "Three"]);
        let marks: Vec<&str> = items.iter().map(|i| &PLAN[i.at.clone()]).collect();
        assert_eq!(marks, [" ", "X", " "]);
        assert_eq!(titles.len(), plan::parse_markdown("p", PLAN).unwrap().len());
    }

    #[test]
    fn the_fingerprint_leaves_out_the_boxes_and_nothing_else() {
        let ticked = PLAN.replacen("- [ ] One", "- [x] One", 1).replacen("[X] Two", "[ ] Two", 1);
        assert_eq!(without_boxes(false, PLAN.as_bytes()), without_boxes(false, ticked.as_bytes()));
        for changed in [
            PLAN.replacen("verify: true", "verify: false", 1),
            PLAN.replacen("One", "Uno", 1),
            format!("{PLAN}- [ ] Four\n"),
            PLAN.replacen("* [X] Two\r\n", "", 1),
            PLAN.replacen("- [ ] fenced", "- [x] fenced", 1),
        ] {
            assert_ne!(
                without_boxes(false, PLAN.as_bytes()),
                without_boxes(false, changed.as_bytes()),
                "{changed}"
            );
        }
    }

    const PRD: &str = r#"{
  "project": "x",
  "userStories": [
    {"id": "US-2", "title": "Second", "priority": 2, "passes": false, "notes": "a \"passes\": true"},
    {"id": "US-1", "title": "First", "priority": 1, "passes" :true, "nested": {"passes": false}},
    {"title": "No passes"}
  ],
  "passes": false
}
"#;

    #[test]
    fn a_prd_jsons_passes_values_are_found_in_its_stories_only() {
        let entries = prd_stories(PRD).unwrap();
        let passes: Vec<Option<&str>> = entries.iter().map(|e| e.passes.clone().map(|r| &PRD[r])).collect();
        assert_eq!(passes, [Some("false"), Some("true"), None]);
        let flipped = PRD.replacen("\"passes\": false,", "\"passes\": true,", 1);
        assert_eq!(without_boxes(true, PRD.as_bytes()), without_boxes(true, flipped.as_bytes()));
        let other = PRD.replacen("\"nested\": {\"passes\": false}", "\"nested\": {\"passes\": true}", 1);
        assert_ne!(without_boxes(true, PRD.as_bytes()), without_boxes(true, other.as_bytes()));
        for bad in ["", "[]", "{\"userStories\": [", "{\"a\": tru", &"[".repeat(10_000)] {
            assert!(prd_stories(bad).is_none(), "{bad}");
        }
    }

    fn story(id: &str, title: &str) -> Story {
        Story {
            id: id.into(),
            title: title.into(),
            details: String::new(),
            verify: None,
            done: false,
            scope: Vec::new(),
        }
    }

    #[test]
    fn ticking_a_prd_story_changes_its_passes_value_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prd.json");
        fs::write(&path, PRD).unwrap();
        assert!(tick(&path, &story("US-2", "Second"), 1, true).unwrap());
        let after = fs::read_to_string(&path).unwrap();
        assert_eq!(after, PRD.replacen("\"passes\": false, \"notes\"", "\"passes\": true, \"notes\"", 1));
        assert!(!tick(&path, &story("US-2", "Second"), 1, true).unwrap(), "set already");
        assert!(tick(&path, &story("US-1", "First"), 0, false).unwrap());
        assert!(fs::read_to_string(&path).unwrap().contains("\"passes\" :false, \"nested\""));
        assert!(matches!(tick(&path, &story("3", "No passes"), 2, true), Err(TickError::NoPasses)));
        assert!(matches!(tick(&path, &story("US-9", "Second"), 1, true), Err(TickError::Moved)));
    }

    fn markdown(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
        let path = dir.path().join("PLAN.md");
        fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn ticking_a_markdown_story_changes_its_mark_alone_and_clearing_puts_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = markdown(&dir, PLAN);
        assert!(tick(&path, &story("3", "Three"), 2, true).unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), PLAN.replacen("+ [ ] Three", "+ [x] Three", 1));
        assert!(!tick(&path, &story("2", "Two"), 1, true).unwrap(), "`[X]` is ticked already");
        assert!(tick(&path, &story("3", "Three"), 2, false).unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), PLAN);
    }

    #[test]
    fn a_users_edit_is_kept_and_a_story_whose_line_changed_is_not_ticked() {
        let dir = tempfile::tempdir().unwrap();
        let edited = format!("{PLAN}\nNotes the user added meanwhile.\n");
        let path = markdown(&dir, &edited);
        assert!(tick(&path, &story("1", "One"), 0, true).unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), edited.replacen("- [ ] One", "- [x] One", 1));
        let renamed = PLAN.replacen("- [ ] One", "- [ ] One, renamed", 1);
        fs::write(&path, &renamed).unwrap();
        assert!(matches!(tick(&path, &story("1", "One"), 0, true), Err(TickError::Moved)));
        let inserted = format!("- [ ] Zero\n{PLAN}");
        fs::write(&path, &inserted).unwrap();
        assert!(matches!(tick(&path, &story("1", "One"), 0, true), Err(TickError::Moved)));
        fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(matches!(tick(&path, &story("1", "One"), 0, true), Err(TickError::Moved)));
        assert_eq!(fs::read(&path).unwrap(), [0xff, 0xfe], "nothing written");
    }

    #[cfg(unix)]
    #[test]
    fn a_plan_gone_read_only_or_replaced_by_a_fifo_or_a_link_is_left_alone_with_why() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = markdown(&dir, PLAN);
        let one = story("1", "One");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
        let refused = tick(&path, &one, 0, true).unwrap_err();
        assert_eq!(refused.to_string(), "it is read-only");
        assert_eq!(fs::read_to_string(&path).unwrap(), PLAN);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(tick(&path, &one, 0, true).unwrap());
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "the file keeps its permissions");

        let elsewhere = dir.path().join("elsewhere.md");
        fs::write(&elsewhere, PLAN).unwrap();
        fs::remove_file(&path).unwrap();
        assert!(matches!(tick(&path, &one, 0, true), Err(TickError::Gone)));
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let refused = tick(&path, &one, 0, true).unwrap_err().to_string();
        assert_eq!(refused, "it is a symbolic link now, not a regular file");
        assert_eq!(fs::read_to_string(&elsewhere).unwrap(), PLAN, "the link's target is not written");
        fs::remove_file(&path).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let started = std::time::Instant::now();
        let refused = tick(&path, &one, 0, true).unwrap_err().to_string();
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "never blocks on a FIFO");
        assert_eq!(refused, "it is a FIFO, socket or device now, not a regular file");
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        assert_eq!(
            tick(&path, &one, 0, true).unwrap_err().to_string(),
            "it is a directory now, not a regular file"
        );
        let left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into())
            .collect();
        assert!(left.iter().all(|name| !name.contains("for-loop")), "no temporary file left: {left:?}");
    }

    #[test]
    fn a_file_saved_meanwhile_or_grown_huge_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = markdown(&dir, PLAN);
        let meta = fs::metadata(&path).unwrap();
        let raced = replace(&path, &meta, b"what was read before the user saved", b"ours");
        assert!(matches!(raced, Err(TickError::Raced)), "{raced:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), PLAN, "the user's save is kept");
        let huge = format!("{PLAN}{}", "x".repeat(usize::try_from(MAX_PLAN_BYTES).unwrap()));
        fs::write(&path, &huge).unwrap();
        let refused = tick(&path, &story("1", "One"), 0, true).unwrap_err().to_string();
        assert!(
            refused.starts_with("it cannot be read or written:") && refused.contains("256 KiB"),
            "{refused}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), huge);
    }

    #[test]
    fn ticks_the_loop_has_not_verified_are_found_and_its_own_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = markdown(&dir, PLAN);
        let stories = plan::parse_markdown("p", PLAN).unwrap();
        let settings =
            plan::PlanSettings { file: "PLAN.md".into(), stories, story_iterations: None, no_tick: false };
        let mut progress = PlanProgress::start(&settings);
        assert!(unverified_ticks(&path, &progress).is_empty(), "`[X] Two` was done at start");
        fs::write(&path, PLAN.replacen("+ [ ] Three", "+ [x] Three", 1)).unwrap();
        assert_eq!(unverified_ticks(&path, &progress), [2]);
        progress.stories[2].done = true;
        assert!(unverified_ticks(&path, &progress).is_empty());
        progress.stories[1].done = false;
        assert_eq!(
            unverified_ticks(&path, &progress),
            [1],
            "a story that broke is not done, whatever its box says"
        );
        fs::write(&path, "not a plan").unwrap();
        assert!(unverified_ticks(&path, &progress).is_empty(), "the fingerprint tells that change");
    }
}
