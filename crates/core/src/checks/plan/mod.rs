//! Reading a plan (`--plan FILE`): the stories a loop works through one at a time, each with the
//! check that says it is done.
//!
//! Two shapes are read. A Markdown checklist: each top-level `- [ ] TITLE` starts a story, the
//! lines indented under it are its details, an indented `verify: CMD` line (the command may
//! be in backticks) is its own check, and an indented `scope: GLOB, ...` line names the files it
//! may change ([`crate::checks::scope`]); `- [x]` marks a story done already. And a `prd.json` in
//! the shape ralph loops use: `userStories` with `id`, `title`, `description`,
//! `acceptanceCriteria`, `priority` and `passes`, plus an optional `verify` and `scope` (a
//! string or an array of globs) per story, taken in priority order. The file is the user's, and may be anything: it is read bounded, a FIFO or a
//! device is refused without blocking, and every refusal names what to fix.

mod file;

pub(crate) use file::{DIGEST_PREFIX, fingerprint, tick, unverified_ticks};

use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::support::read::bounded_read;

/// A plan file larger than this is refused: a plan is a list of stories, not a document.
pub(crate) const MAX_PLAN_BYTES: u64 = 256 * 1024;
/// A plan with more stories than this is refused.
pub(crate) const MAX_STORIES: usize = 200;

/// One story of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Story {
    /// `1`, `2`, ... in a Markdown plan; the `id` of a `prd.json` story.
    pub id: String,
    pub title: String,
    /// The lines under the title (a `prd.json` story's description and acceptance criteria).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
    /// The story's own check; `None`: the loop's `--verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<String>,
    /// Ticked (`- [x]`) or `passes: true` when the plan was read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
    /// The files this story may change (`scope:`), inside the loop's `--scope`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
}

impl Story {
    /// `US-002 Add login` or `2. Add login`.
    pub(crate) fn label(&self) -> String {
        if self.id.chars().all(|c| c.is_ascii_digit()) {
            format!("{}. {}", self.id, self.title)
        } else {
            format!("{} {}", self.id, self.title)
        }
    }
}

/// Whether for-loop sets the stories' boxes in the user's plan file as they pass and break.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum PlanBoxes {
    #[default]
    Ticked,
    /// `--no-tick`: left as the user wrote them.
    Left,
}

/// A loop's plan as it was read at start: it never changes during the loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanSettings {
    /// The plan file as the user named it.
    pub file: String,
    pub stories: Vec<Story>,
    /// Stops one story may take, since it became current or the loop resumed, before the loop
    /// is parked (`--story-iterations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub story_iterations: Option<u32>,
    /// The user's boxes are left as they are (`--no-tick`): for-loop does not tick a story's box
    /// when it passes ([`crate::checks::plan`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_tick: bool,
}

impl PlanSettings {
    /// Story `index`'s check: its own, or the loop's `verify`.
    pub(crate) fn check<'a>(&'a self, index: usize, verify: Option<&'a str>) -> Option<&'a str> {
        self.stories.get(index).and_then(|s| s.verify.as_deref()).or(verify)
    }
}

/// How far a loop is through its plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanProgress {
    /// The story being worked on, an index into the plan's stories.
    pub current: usize,
    pub stories: Vec<StoryProgress>,
    /// Stops on the current story since it became current or the loop resumed.
    #[serde(default)]
    pub current_stops: u32,
    /// The working tree when the current story became current, where it was read: a story's
    /// scope judges the change since then ([`crate::checks::scope`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub story_tree: Option<String>,
}

/// One story's progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoryProgress {
    pub done: bool,
    /// Judged stops spent on it.
    #[serde(default)]
    pub iterations: u32,
}

impl PlanProgress {
    /// The progress at start: the stories ticked in the file are done, the first other is current.
    pub(crate) fn start(plan: &PlanSettings) -> PlanProgress {
        let stories: Vec<StoryProgress> =
            plan.stories.iter().map(|s| StoryProgress { done: s.done, iterations: 0 }).collect();
        let current = stories.iter().position(|s| !s.done).unwrap_or(0);
        PlanProgress { current, stories, current_stops: 0, story_tree: None }
    }

    /// The first story after the current one (wrapping round) that is not done, if any.
    pub(crate) fn next_pending(&self) -> Option<usize> {
        let n = self.stories.len();
        (1..=n).map(|k| (self.current + k) % n).find(|&i| i != self.current && !self.stories[i].done)
    }

    pub(crate) fn done_count(&self) -> usize {
        self.stories.iter().filter(|s| s.done).count()
    }
}

impl PlanProgress {
    /// The current story passed its check: it is done, and the next pending one is current.
    pub(crate) fn story_passed(&mut self) {
        if let Some(story) = self.stories.get_mut(self.current) {
            story.done = true;
        }
        if let Some(next) = self.next_pending() {
            self.current = next;
        }
    }

    /// A done story's check failed at the end: it is current again.
    pub(crate) fn reopen(&mut self, index: usize) {
        if let Some(story) = self.stories.get_mut(index) {
            story.done = false;
            self.current = index;
        }
    }
}

/// The end of a plan: every check run again at the stop where the last story passed.
#[derive(Debug, Clone)]
pub(crate) struct PlanSweep {
    /// The first check that failed: its story (`None`: the loop's own `--verify`) and its run.
    pub broken: Option<(Option<usize>, crate::checks::verify::VerifyOutcome)>,
}

/// Why a plan cannot be used. Each message names the file or story and what to change.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum PlanError {
    #[error("the plan {path} cannot be read: {why}")]
    Unreadable { path: String, why: String },
    #[error("the plan {path} is not UTF-8 text")]
    NotText { path: String },
    #[error("the plan {path} is not valid JSON in the prd.json shape: {why}")]
    Json { path: String, why: String },
    #[error(
        "the plan {path} has no stories: write each as a top-level `- [ ] TITLE` line (or, in a prd.json, \
         an entry of `userStories`)"
    )]
    NoStories { path: String },
    #[error("the plan {path} has {count} stories; the most is {MAX_STORIES}: split it into several plans")]
    TooManyStories { path: String, count: usize },
    #[error("the plan {path} has a story without a title on line {line}: write it after `- [ ]`")]
    Untitled { path: String, line: usize },
    #[error("story {story} has two `verify:` lines: keep one")]
    TwoChecks { story: String },
    #[error("story {story} has two `scope:` lines: keep one, with its globs separated by commas")]
    TwoScopes { story: String },
    #[error("story {story}'s scope `{glob}` is not valid: {why}")]
    BadScope { story: String, glob: String, why: String },
    #[error(
        "story {story} has no check: add an indented `verify: CMD` line under it (or `\"verify\"` in a \
         prd.json), or give the loop --verify CMD for the stories without one"
    )]
    NoCheck { story: String },
}

/// Reads the plan at `path` (a `.json` file as a `prd.json`, anything else as Markdown), and
/// checks that every story has a check, its own or `default_check`.
pub(crate) fn read(path: &Path, default_check: Option<&str>) -> Result<Vec<Story>, PlanError> {
    let shown = path.display().to_string();
    let bytes = bounded_read::read(path, MAX_PLAN_BYTES)
        .map_err(|e| PlanError::Unreadable { path: shown.clone(), why: e.to_string() })?;
    let text = String::from_utf8(bytes).map_err(|_| PlanError::NotText { path: shown.clone() })?;
    let is_json = path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
    let stories = if is_json { parse_prd(&shown, &text)? } else { parse_markdown(&shown, &text)? };
    if stories.is_empty() {
        return Err(PlanError::NoStories { path: shown });
    }
    if stories.len() > MAX_STORIES {
        return Err(PlanError::TooManyStories { path: shown, count: stories.len() });
    }
    if default_check.is_none_or(|c| c.trim().is_empty())
        && let Some(story) = stories.iter().find(|s| s.verify.is_none())
    {
        return Err(PlanError::NoCheck { story: story.label() });
    }
    check_scopes(&stories)?;
    Ok(stories)
}

/// Refuses the first story scope that cannot be honoured, naming the story and the glob.
fn check_scopes(stories: &[Story]) -> Result<(), PlanError> {
    for story in stories {
        if story.scope.len() > crate::checks::scope::MAX_GLOBS {
            let why = format!("the most is {} globs in one scope", crate::checks::scope::MAX_GLOBS);
            return Err(PlanError::BadScope { story: story.label(), glob: story.scope.join(", "), why });
        }
        for glob in &story.scope {
            crate::checks::scope::check_glob(glob).map_err(|why| PlanError::BadScope {
                story: story.label(),
                glob: glob.clone(),
                why,
            })?;
        }
    }
    Ok(())
}

/// The stories of a Markdown checklist.
pub(crate) fn parse_markdown(path: &str, text: &str) -> Result<Vec<Story>, PlanError> {
    let mut stories: Vec<Story> = Vec::new();
    let mut open = false;
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        let indented = line.starts_with([' ', '\t']);
        if !indented && line.trim_start().starts_with("```") {
            fenced = !fenced;
            open = false;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some((done, title)) = (!indented).then(|| checklist_item(line)).flatten() {
            if title.is_empty() {
                return Err(PlanError::Untitled { path: path.into(), line: n + 1 });
            }
            let id = (stories.len() + 1).to_string();
            let details = String::new();
            stories.push(Story { id, title: title.into(), details, verify: None, done, scope: Vec::new() });
            open = true;
        } else if indented && open {
            let Some(story) = stories.last_mut() else { continue };
            add_detail(story, line)?;
        } else if !line.trim().is_empty() {
            // Text at the top level (a heading, a paragraph) ends the story above it.
            open = false;
        }
    }
    for story in &mut stories {
        story.details = story.details.trim_end().to_string();
    }
    Ok(stories)
}

/// `- [ ] TITLE` (also `*` or `+`, and `[x]`): whether it is ticked, and the title.
fn checklist_item(line: &str) -> Option<(bool, &str)> {
    let rest = line.strip_prefix(['-', '*', '+'])?.strip_prefix(' ')?.trim_start();
    let (done, title) = if let Some(title) = rest.strip_prefix("[ ]") {
        (false, title)
    } else {
        (true, rest.strip_prefix("[x]").or_else(|| rest.strip_prefix("[X]"))?)
    };
    Some((done, title.trim()))
}

/// One indented line under a story: its check, or a line of its details.
fn add_detail(story: &mut Story, line: &str) -> Result<(), PlanError> {
    let trimmed = line.trim();
    let bare = trimmed.strip_prefix(['-', '*']).map_or(trimmed, str::trim_start);
    let check = bare.get(..7).filter(|head| head.eq_ignore_ascii_case("verify:")).map(|_| bare[7..].trim());
    if let Some(globs) = bare.get(..6).filter(|head| head.eq_ignore_ascii_case("scope:")).map(|_| &bare[6..])
    {
        return add_scope(story, globs);
    }
    match check {
        Some(command) if !unticked(command).is_empty() => {
            if story.verify.is_some() {
                return Err(PlanError::TwoChecks { story: story.label() });
            }
            story.verify = Some(unticked(command).to_string());
        }
        _ => {
            if !story.details.is_empty() || !trimmed.is_empty() {
                story.details.push_str(trimmed);
                story.details.push('\n');
            }
        }
    }
    Ok(())
}

/// A story's `scope:` line: its globs, once.
fn add_scope(story: &mut Story, globs: &str) -> Result<(), PlanError> {
    if !story.scope.is_empty() {
        return Err(PlanError::TwoScopes { story: story.label() });
    }
    story.scope = crate::checks::scope::split_list(unticked(globs.trim()));
    if story.scope.is_empty() {
        let why = "name the files the story may change, e.g. `scope: src/login/**, tests/login.rs`".into();
        return Err(PlanError::BadScope { story: story.label(), glob: String::new(), why });
    }
    Ok(())
}

/// A command without the backticks around it.
fn unticked(command: &str) -> &str {
    let ticks = command.len() - command.trim_start_matches('`').len();
    if ticks > 0 && command.len() > 2 * ticks && command.ends_with(&"`".repeat(ticks)) {
        command[ticks..command.len() - ticks].trim()
    } else {
        command.trim()
    }
}

/// A `prd.json` as ralph loops write it; other fields are left alone.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Prd {
    user_stories: Vec<PrdStory>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PrdStory {
    id: Option<serde_json::Value>,
    title: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    acceptance_criteria: Vec<String>,
    priority: Option<f64>,
    #[serde(default)]
    passes: bool,
    verify: Option<String>,
    scope: Option<serde_json::Value>,
}

/// The stories of a `prd.json`, in priority order (lowest number first; the file's order among
/// equals and for stories without one).
pub(crate) fn parse_prd(path: &str, text: &str) -> Result<Vec<Story>, PlanError> {
    let prd: Prd =
        serde_json::from_str(text).map_err(|e| PlanError::Json { path: path.into(), why: e.to_string() })?;
    let mut ranked: Vec<(usize, PrdStory)> = prd.user_stories.into_iter().enumerate().collect();
    ranked.sort_by(|(i, a), (j, b)| {
        let rank = |p: Option<f64>| p.filter(|p| p.is_finite()).unwrap_or(f64::MAX);
        rank(a.priority).total_cmp(&rank(b.priority)).then(i.cmp(j))
    });
    ranked
        .into_iter()
        .map(|(i, story)| {
            let id = match story.id {
                Some(serde_json::Value::String(id)) if !id.trim().is_empty() => id.trim().to_string(),
                Some(serde_json::Value::Number(n)) => n.to_string(),
                _ => (i + 1).to_string(),
            };
            if story.title.trim().is_empty() {
                return Err(PlanError::Untitled { path: path.into(), line: 0 });
            }
            let mut details = story.description.trim().to_string();
            if !story.acceptance_criteria.is_empty() {
                details.push_str("\nAcceptance criteria:");
                for criterion in &story.acceptance_criteria {
                    details.push_str(&format!("\n- {}", criterion.trim()));
                }
            }
            let verify = story.verify.map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
            let scope = prd_scope(&id, story.scope)?;
            Ok(Story {
                id,
                title: story.title.trim().into(),
                details: details.trim().into(),
                verify,
                done: story.passes,
                scope,
            })
        })
        .collect()
}

/// A `prd.json` story's `scope`: a string of comma-separated globs, or an array of globs.
fn prd_scope(id: &str, scope: Option<serde_json::Value>) -> Result<Vec<String>, PlanError> {
    let bad = |glob: String| PlanError::BadScope {
        story: id.to_string(),
        glob,
        why: "give `scope` as a string of globs separated by commas, or an array of glob strings".into(),
    };
    match scope {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::String(text)) => Ok(crate::checks::scope::split_list(&text)),
        Some(serde_json::Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                serde_json::Value::String(glob) => Ok(glob.trim().to_string()),
                other => Err(bad(other.to_string())),
            })
            .collect(),
        Some(other) => Err(bad(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "\
# Login

Some notes at the top.

- [ ] Add the login form
  It takes a name and a password.
  verify: `sh test-form.sh`
- [x] Set up the database
    verify: sh test-db.sh
- [ ] Reject empty names
  - names are trimmed first

```
- [ ] not a story: inside a fence
```
";

    #[test]
    fn a_markdown_checklist_gives_its_stories_details_and_checks() {
        let stories = parse_markdown("PLAN.md", PLAN).unwrap();
        assert_eq!(stories.len(), 3);
        assert_eq!(stories[0].label(), "1. Add the login form");
        assert_eq!(stories[0].details, "It takes a name and a password.");
        assert_eq!(stories[0].verify.as_deref(), Some("sh test-form.sh"));
        assert!(!stories[0].done);
        assert_eq!((stories[1].verify.as_deref(), stories[1].done), (Some("sh test-db.sh"), true));
        assert_eq!(stories[2].details, "- names are trimmed first");
        assert_eq!(stories[2].verify, None);
    }

    #[test]
    fn a_prd_json_gives_its_stories_in_priority_order() {
        let prd = r#"{"project": "x", "branchName": "ralph/x", "userStories": [
            {"id": "US-002", "title": "Second", "description": "d2", "acceptanceCriteria": ["a", "b"],
             "priority": 2, "passes": false, "verify": "cargo test two"},
            {"id": "US-001", "title": "First", "description": "d1", "acceptanceCriteria": [],
             "priority": 1, "passes": true, "notes": ""},
            {"title": "Third, no id or priority"}
        ]}"#;
        let stories = parse_prd("prd.json", prd).unwrap();
        let labels: Vec<String> = stories.iter().map(Story::label).collect();
        assert_eq!(labels, ["US-001 First", "US-002 Second", "3. Third, no id or priority"]);
        assert!(stories[0].done);
        assert_eq!(stories[1].details, "d2\nAcceptance criteria:\n- a\n- b");
        assert_eq!(stories[1].verify.as_deref(), Some("cargo test two"));
    }

    fn file(dir: &tempfile::TempDir, name: &str, content: &str) -> std::path::PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    #[test]
    fn every_story_needs_a_check_its_own_or_the_loops() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(&dir, "PLAN.md", PLAN);
        let refused = read(&path, None).unwrap_err();
        assert_eq!(refused, PlanError::NoCheck { story: "3. Reject empty names".into() });
        assert!(refused.to_string().contains("add an indented `verify: CMD` line"), "{refused}");
        assert_eq!(read(&path, Some("cargo test")).unwrap().len(), 3);
        assert!(matches!(read(&path, Some("  ")), Err(PlanError::NoCheck { .. })));
    }

    #[test]
    fn bad_plans_are_refused_with_what_to_fix() {
        let dir = tempfile::tempdir().unwrap();
        let empty = read(&file(&dir, "empty.md", ""), Some("true")).unwrap_err();
        assert!(matches!(empty, PlanError::NoStories { .. }), "{empty}");
        let prose = read(&file(&dir, "prose.md", "# Plan\n\nJust words.\n- a bullet\n"), Some("true"));
        assert!(matches!(prose, Err(PlanError::NoStories { .. })));
        let untitled = read(&file(&dir, "u.md", "- [ ] one\n- [ ]   \n"), Some("true")).unwrap_err();
        assert_eq!(
            untitled.to_string(),
            format!(
                "the plan {} has a story without a title on line 2: write it after `- [ ]`",
                dir.path().join("u.md").display()
            )
        );
        let two = read(&file(&dir, "two.md", "- [ ] one\n  verify: a\n  verify: b\n"), None).unwrap_err();
        assert_eq!(two, PlanError::TwoChecks { story: "1. one".into() });
        let json =
            read(&file(&dir, "prd.json", "{\"userStories\": [{\"title\": 3}]}"), Some("true")).unwrap_err();
        assert!(matches!(json, PlanError::Json { .. }), "{json}");
        let shape = read(&file(&dir, "other.json", "{\"stories\": []}"), Some("true")).unwrap_err();
        assert!(shape.to_string().contains("missing field `userStories`"), "{shape}");
        let no_stories = read(&file(&dir, "none.json", "{\"userStories\": []}"), Some("true")).unwrap_err();
        assert!(matches!(no_stories, PlanError::NoStories { .. }));
        std::fs::write(dir.path().join("bin.md"), [0xff, 0xfe, b'-']).unwrap();
        assert!(matches!(read(&dir.path().join("bin.md"), Some("true")), Err(PlanError::NotText { .. })));
        let many = "- [ ] s\n".repeat(MAX_STORIES + 1);
        let too_many = read(&file(&dir, "many.md", &many), Some("true")).unwrap_err();
        assert!(matches!(too_many, PlanError::TooManyStories { count: 201, .. }), "{too_many}");
        let missing = read(&dir.path().join("missing.md"), Some("true")).unwrap_err();
        assert!(matches!(missing, PlanError::Unreadable { .. }), "{missing}");
    }

    #[test]
    fn a_huge_plan_or_a_fifo_is_refused_without_reading_it_all_or_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let huge = "- [ ] story\n".repeat(30_000);
        let refused = read(&file(&dir, "huge.md", &huge), Some("true")).unwrap_err().to_string();
        assert!(refused.contains("cannot be read") && refused.contains("256 KiB"), "{refused}");
        #[cfg(unix)]
        {
            let fifo = dir.path().join("fifo.md");
            nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
            let started = std::time::Instant::now();
            let refused = read(&fifo, Some("true")).unwrap_err().to_string();
            assert!(started.elapsed() < std::time::Duration::from_secs(2));
            assert!(refused.contains("cannot be read"), "{refused}");
        }
    }

    #[test]
    fn a_storys_scope_line_or_prd_field_names_its_globs() {
        let plan = "- [ ] Login\n  scope: `src/login/**, src/{a,b}.rs`\n  verify: true\n- [ ] Docs\n  - Scope: docs\n";
        let stories = parse_markdown("PLAN.md", plan).unwrap();
        assert_eq!(stories[0].scope, ["src/login/**", "src/{a,b}.rs"]);
        assert_eq!((stories[0].details.as_str(), stories[0].verify.as_deref()), ("", Some("true")));
        assert_eq!(stories[1].scope, ["docs"]);
        assert!(parse_markdown("P.md", "- [ ] a\n").unwrap()[0].scope.is_empty());
        let prd = r#"{"userStories": [{"id": "A", "title": "a", "scope": "src/**, docs"},
            {"id": "B", "title": "b", "scope": ["x/**", "y.rs"]}, {"id": "C", "title": "c", "scope": null}]}"#;
        let stories = parse_prd("prd.json", prd).unwrap();
        assert_eq!(stories[0].scope, ["src/**", "docs"]);
        assert_eq!(stories[1].scope, ["x/**", "y.rs"]);
        assert!(stories[2].scope.is_empty());
    }

    #[test]
    fn bad_story_scopes_are_refused_naming_the_story_and_the_glob() {
        let dir = tempfile::tempdir().unwrap();
        let refused = |name: &str, text: &str| read(&file(&dir, name, text), Some("true")).unwrap_err();
        let bad = refused("bad.md", "- [ ] Login\n  scope: src/**, ../etc\n");
        assert_eq!(
            bad.to_string(),
            "story 1. Login's scope `../etc` is not valid: give a path inside the project, relative to where the loop starts"
        );
        let empty = refused("empty.md", "- [ ] Login\n  scope:  ,\n");
        assert!(empty.to_string().contains("name the files the story may change"), "{empty}");
        let two = refused("two.md", "- [ ] Login\n  scope: a\n  scope: b\n");
        assert_eq!(two, PlanError::TwoScopes { story: "1. Login".into() });
        let glob = refused("glob.md", "- [ ] Login\n  scope: src/[a\n");
        assert!(glob.to_string().contains("`src/[a` is not valid: it is not a glob"), "{glob}");
        let many = format!("- [ ] Login\n  scope: {}\n", vec!["a"; 101].join(","));
        assert!(refused("many.md", &many).to_string().contains("the most is 100 globs"));
        for scope in ["3", "{\"a\": 1}", "[\"ok\", 7]", "[\"\"]", "true"] {
            let prd = format!(r#"{{"userStories": [{{"id": "A", "title": "a", "scope": {scope}}}]}}"#);
            let refused = refused("prd.json", &prd).to_string();
            assert!(refused.starts_with("story A"), "{scope}: {refused}");
        }
    }

    #[test]
    fn backticks_around_a_check_are_taken_off_and_inner_ones_kept() {
        assert_eq!(unticked("`cargo test`"), "cargo test");
        assert_eq!(unticked("``sh -c 'echo `date`'``"), "sh -c 'echo `date`'");
        assert_eq!(unticked("make check"), "make check");
        assert_eq!(unticked("`"), "`");
    }
}
