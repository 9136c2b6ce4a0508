//! The engine's layers, enforced: every `crate::` path in `crates/core/src` points at its own
//! layer or one below it, `verdict` does no file, lock or process work, nothing reaches into
//! `lib.rs`, and no two production modules import each other, directly or around a circle.
//!
//! The rules are the table in `docs/architecture.md`; a failure names the file, the line and
//! the rule it breaks. Test modules may reach sideways inside their layer (a test of `receipt`
//! builds a sample `state`), but never upwards.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A layer may import itself and any layer before it; `run` and
/// `report` sit side by side and do not import each other. `cli` and `lib` are the top: they
/// dispatch to everything. `fuzzing` (built only for the fuzz targets) opens every layer's
/// readers, so it sits at the top too.
const LAYERS: &[(&str, u8)] = &[
    ("support", 0),
    ("host", 1),
    ("worktree", 2),
    ("checks", 3),
    ("metric", 4),
    ("state", 5),
    ("verdict", 6),
    ("store", 7),
    ("provenance", 8),
    ("commands", 9),
    ("hook", 10),
    ("run", 11),
    ("report", 11),
    ("cli", 12),
    ("fuzzing", 12),
    ("lib", 13),
];

/// What `verdict` may not name: it decides on facts gathered by others.
const NO_IO_IN_VERDICT: &[&str] =
    &["std::fs", "std::process", "std::net", "File::", "Command::", "StateLock", "Journal"];

/// One `crate::` reference: from a module, to a module, where.
#[derive(Debug, Clone)]
struct Reference {
    from: String,
    to: String,
    /// The whole path named, after `crate::` (`store::lock::StateLock`); empty for `super::`.
    path: String,
    file: String,
    line: usize,
    text: String,
    in_test: bool,
}

/// A source file of the crate: its module path (`store::state`) and its text.
struct Source {
    module: String,
    file: String,
    text: String,
}

impl Source {
    /// The file's lines up to its test module (every module keeps its tests at its end), each
    /// with its index.
    fn production_lines(&self) -> impl Iterator<Item = (usize, &str)> {
        self.text.lines().enumerate().take_while(|(_, line)| line.trim() != "#[cfg(test)]")
    }
}

fn core_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src")
}

fn sources(root: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).unwrap().with_extension("");
                let mut parts: Vec<String> =
                    relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                if parts.last().is_some_and(|p| p == "mod") {
                    parts.pop();
                }
                out.push(Source {
                    module: parts.join("::"),
                    file: relative.with_extension("rs").to_string_lossy().replace('\\', "/"),
                    text: fs::read_to_string(&path).unwrap(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.module.cmp(&b.module));
    out
}

/// The text of a line without its `//` comment (doc comments name modules in links, which is
/// not an import).
fn code_of(line: &str) -> &str {
    let mut in_string = false;
    let bytes = line.as_bytes();
    for i in 0..bytes.len() {
        match bytes[i] {
            b'"' if i == 0 || bytes[i - 1] != b'\\' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Every full path a `crate::` reference at the start of `rest` names: `a::b`, or each leaf of
/// a `{a::{b, c}, d}` group.
fn paths_after(rest: &str) -> Vec<String> {
    fn skip_space(s: &[u8], i: &mut usize) {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }
    fn tree(s: &[u8], i: &mut usize, prefix: &str, out: &mut Vec<String>) {
        skip_space(s, i);
        if s.get(*i) == Some(&b'{') {
            *i += 1;
            loop {
                skip_space(s, i);
                match s.get(*i) {
                    None => return,
                    Some(b'}') => {
                        *i += 1;
                        return;
                    }
                    Some(b',') => *i += 1,
                    Some(_) => {
                        let before = *i;
                        tree(s, i, prefix, out);
                        if *i == before {
                            return;
                        }
                    }
                }
            }
        }
        let mut path = prefix.to_string();
        loop {
            let start = *i;
            while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
                *i += 1;
            }
            if *i == start {
                break;
            }
            if !path.is_empty() {
                path.push_str("::");
            }
            path.push_str(&String::from_utf8_lossy(&s[start..*i]));
            if s[*i..].starts_with(b"::") {
                *i += 2;
                if s.get(*i) == Some(&b'{') {
                    tree(s, i, &path, out);
                    return;
                }
            } else {
                break;
            }
        }
        if path != prefix {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    tree(rest.as_bytes(), &mut 0, "", &mut out);
    out
}

/// The module a path names: the longest prefix that is a file of the crate. `None` for an item
/// of `lib.rs` itself.
fn module_of(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|candidate| modules.contains(candidate))
}

/// The paths after each `keyword` in `text` that begins a path: not the end of a longer name
/// (`my_crate::`), nor of `also` (`$crate::` in a macro, `super::super::`).
fn paths_following(text: &str, keyword: &str, also: char) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(keyword) {
        let before = rest[..at].chars().last();
        rest = &rest[at + keyword.len()..];
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == also) {
            found.extend(paths_after(rest));
        }
    }
    found
}

fn references(sources: &[Source]) -> (Vec<Reference>, Vec<String>) {
    let modules: BTreeSet<String> = sources.iter().map(|s| s.module.clone()).collect();
    let mut refs = Vec::new();
    let mut into_lib = Vec::new();
    for source in sources {
        let test_file = source.file.ends_with("/tests.rs") || source.file.ends_with("/testing.rs");
        // Code after `#[cfg(test)]` on a `mod` is test code up to the end of the file: every
        // module keeps its tests at its end.
        let mut in_test = test_file;
        // A `use crate::{...}` group may span lines: join the statement before reading it.
        let mut pending: Option<(usize, String)> = None;
        let mut after_cfg_test = false;
        for (index, raw) in source.text.lines().enumerate() {
            let line = code_of(raw);
            if line.trim() == "#[cfg(test)]" {
                after_cfg_test = true;
                continue;
            }
            // `pub(crate) mod tests`: a test module whose helpers other tests of the layer use.
            if after_cfg_test && line.trim_start().trim_start_matches("pub(crate) ").starts_with("mod ") {
                in_test = true;
            }
            after_cfg_test = false;
            let (start, text) = match pending.take() {
                Some((start, mut text)) => {
                    text.push(' ');
                    text.push_str(line.trim());
                    (start, text)
                }
                None => (index + 1, line.to_string()),
            };
            if (text.trim_start().starts_with("use crate::") || text.contains("use crate::{"))
                && !text.contains(';')
            {
                pending = Some((start, text));
                continue;
            }
            // `super::` names a sibling (or, in a file's inline test module, the file itself).
            let parent =
                if in_test && !test_file { source.module.clone() } else { parent_of(&source.module) };
            let reference = |to: String, path: &str| Reference {
                from: source.module.clone(),
                to,
                path: path.to_string(),
                file: source.file.clone(),
                line: start,
                text: text.trim().to_string(),
                in_test,
            };
            for path in paths_following(&text, "super::", ':') {
                let full = if parent.is_empty() { path } else { format!("{parent}::{path}") };
                if let Some(to) = module_of(&full, &modules).filter(|to| *to != source.module) {
                    refs.push(reference(to, ""));
                }
            }
            for path in paths_following(&text, "crate::", '$') {
                match module_of(&path, &modules) {
                    Some(to) if to != source.module => refs.push(reference(to, &path)),
                    Some(_) => {}
                    None => into_lib.push(format!(
                        "{}:{}: `crate::{path}` reaches into lib.rs; name the module that defines it\n    {}",
                        source.file,
                        start,
                        text.trim()
                    )),
                }
            }
        }
    }
    (refs, into_lib)
}

fn parent_of(module: &str) -> String {
    module.rsplit_once("::").map_or_else(String::new, |(parent, _)| parent.to_string())
}

fn layer(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

fn rank(module: &str) -> Option<u8> {
    let name = layer(module);
    LAYERS.iter().find(|(layer, _)| *layer == name).map(|(_, rank)| *rank)
}

/// References that run upwards or sideways between layers.
fn upward(refs: &[Reference]) -> Vec<String> {
    refs.iter()
        .filter(|r| layer(&r.from) != layer(&r.to))
        .filter_map(|r| match (rank(&r.from), rank(&r.to)) {
            (Some(from), Some(to)) if to < from => None,
            (Some(_), Some(_)) => Some(format!(
                "{}:{}: `{}` imports `{}`, but {} may only import the layers below it\n    {}",
                r.file,
                r.line,
                r.from,
                r.to,
                layer(&r.from),
                r.text
            )),
            _ => Some(format!(
                "{}:{}: `{}` or `{}` is in no layer; add its folder to the table in tests/layers.rs and \
                 docs/architecture.md\n    {}",
                r.file, r.line, r.from, r.to, r.text
            )),
        })
        .collect()
}

/// Circles of production modules that import each other (Tarjan's strongly connected components).
fn cycles(refs: &[Reference]) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for &w in &self.graph[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in refs.iter().filter(|r| !r.in_test) {
        graph.entry(&r.from).or_default().insert(&r.to);
        graph.entry(&r.to).or_default();
    }
    let mut walk = Walk {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for &v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found.sort();
    walk.found
}

/// Lines of `verdict` that do file, lock or process work.
fn io_in_verdict(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for source in sources.iter().filter(|s| layer(&s.module) == "verdict") {
        for (index, raw) in source.production_lines() {
            let line = code_of(raw);
            if let Some(name) = NO_IO_IN_VERDICT.iter().find(|name| line.contains(*name)) {
                out.push(format!(
                    "{}:{}: verdict names `{name}`; it decides on gathered facts and does no IO\n    {}",
                    source.file,
                    index + 1,
                    line.trim()
                ));
            }
        }
    }
    out
}

fn source(module: &str, text: &str) -> Source {
    Source { module: module.into(), file: format!("{}.rs", module.replace("::", "/")), text: text.into() }
}

#[test]
fn every_import_runs_down_the_layers() {
    let sources = sources(&core_src());
    assert!(sources.len() > 50, "found only {} source files under crates/core/src", sources.len());
    let (refs, into_lib) = references(&sources);
    assert!(refs.len() > 300, "found only {} crate:: references: the reader is broken", refs.len());
    let problems: Vec<String> = upward(&refs).into_iter().chain(into_lib).collect();
    assert!(problems.is_empty(), "{} imports break the layers:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn no_production_modules_import_each_other_in_a_circle() {
    let (refs, _) = references(&sources(&core_src()));
    let found = cycles(&refs);
    let shown: Vec<String> = found.iter().map(|c| c.join(" -> ")).collect();
    assert!(found.is_empty(), "import cycles:\n{}", shown.join("\n"));
}

#[test]
fn the_verdict_does_no_io() {
    let problems = io_in_verdict(&sources(&core_src()));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The verdict decides on the loop's data (`state`) and can reach none of the files it is kept
/// in: `store` sits above it, so any import of it from `verdict` runs upward.
#[test]
fn the_verdict_cannot_reach_the_store() {
    assert!(rank("state") < rank("verdict") && rank("verdict") < rank("store"), "{LAYERS:?}");
    let (refs, _) = references(&sources(&core_src()));
    let reaching: Vec<String> = refs
        .iter()
        .filter(|r| layer(&r.from) == "verdict" && layer(&r.to) == "store")
        .map(|r| format!("{}:{}: {}", r.file, r.line, r.text))
        .collect();
    assert!(reaching.is_empty(), "the verdict reaches the store:\n{}", reaching.join("\n"));
    assert!(
        refs.iter().any(|r| layer(&r.from) == "verdict" && layer(&r.to) == "state"),
        "the reader sees nothing"
    );
}

#[test]
fn at_most_sixteen_files_at_the_top_of_the_engine() {
    let top: Vec<String> = fs::read_dir(core_src())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(top.len() <= 16, "{} files at the top of crates/core/src: {top:?}", top.len());
}

/// A layer folder holds at most ten files of its own; a concept that needs more gets a folder of
/// its own inside the layer, so `ls` of a layer reads as its table of contents.
#[test]
fn at_most_ten_files_at_the_top_of_each_layer() {
    let mut crowded = Vec::new();
    for entry in fs::read_dir(core_src()).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let files: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        if files.len() > 10 {
            crowded.push(format!(
                "{}/: {} files {files:?}",
                dir.file_name().unwrap().to_string_lossy(),
                files.len()
            ));
        }
    }
    assert!(crowded.is_empty(), "layers with more than ten files of their own:\n{}", crowded.join("\n"));
}

#[test]
fn every_folder_of_the_engine_is_a_layer() {
    for entry in fs::read_dir(core_src()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(rank(&name).is_some(), "crates/core/src/{name} is in no layer of tests/layers.rs");
    }
}

/// Lines outside `worktree/` that start git themselves: `run` and the rest ask `worktree` for
/// typed operations, which run git with the project's filters, hooks and fsmonitor off.
fn git_outside_worktree(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for source in sources.iter().filter(|s| layer(&s.module) != "worktree") {
        for (index, raw) in source.production_lines() {
            let line = code_of(raw);
            if line.contains("Command::new(\"git\")") || line.contains("run_git") {
                out.push(format!(
                    "{}:{}: starts git outside worktree/; add a typed operation to worktree instead\n    {}",
                    source.file,
                    index + 1,
                    line.trim()
                ));
            }
        }
    }
    out
}

#[test]
fn only_the_worktree_layer_runs_git() {
    let problems = git_outside_worktree(&sources(&core_src()));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let planted = [source("run::pick", "fn f(user: &WorkTree) { user.run_git(&[\"fetch\"], None); }\n")];
    assert_eq!(git_outside_worktree(&planted).len(), 1, "the reader misses a git command line");
    let in_tests = [source("run::pick", "#[cfg(test)]\nfn t() { Command::new(\"git\"); }\n")];
    assert!(git_outside_worktree(&in_tests).is_empty(), "a test may set up its repository with git");
}

/// Paths from one layer into another that name a type, a trait or a constant (an item whose name
/// starts upper-case) inside one of that layer's modules (`crate::store::lock::StateLock`)
/// instead of at its front door (`crate::store::StateLock`, re-exported by `store/mod.rs`).
/// Functions are named through their module (`crate::support::process::start_time`): a function's
/// name reads with its module's, as in Rust's own idiom. `fuzzing` (built only for the fuzz
/// targets) opens every layer's readers where they are.
fn past_the_door(refs: &[Reference]) -> Vec<String> {
    refs.iter()
        .filter(|r| {
            !r.in_test && r.from != "fuzzing" && layer(&r.from) != layer(&r.to) && r.to.contains("::")
        })
        .filter(|r| {
            let item = r.path.strip_prefix(&format!("{}::", r.to)).and_then(|rest| rest.split("::").next());
            item.is_some_and(|item| item.starts_with(|c: char| c.is_ascii_uppercase()))
        })
        .map(|r| {
            let item = &r.path[r.to.len() + 2..];
            format!(
                "{}:{}: `crate::{}` reaches past {}'s front door: name it `crate::{}::{item}` (re-export it \
                 from {}/mod.rs)\n    {}",
                r.file,
                r.line,
                r.path,
                layer(&r.to),
                layer(&r.to),
                layer(&r.to),
                r.text
            )
        })
        .collect()
}

#[test]
fn every_type_from_another_layer_comes_through_its_front_door() {
    let (refs, _) = references(&sources(&core_src()));
    let problems = past_the_door(&refs);
    assert!(
        problems.is_empty(),
        "{} paths reach past a front door:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The doors are used: most paths between layers go through one.
    let between: Vec<&Reference> =
        refs.iter().filter(|r| !r.in_test && !r.path.is_empty() && layer(&r.from) != layer(&r.to)).collect();
    let at_door = between.iter().filter(|r| !r.to.contains("::")).count();
    assert!(
        at_door * 2 > between.len(),
        "{at_door} of {} paths between layers use a front door",
        between.len()
    );
}

#[test]
fn the_reader_catches_a_type_named_past_its_layers_front_door() {
    let sources = vec![
        source("store", "pub(crate) use self::lock::StateLock;\n"),
        source("store::lock", ""),
        source("hook", ""),
        source(
            "hook::stop_hook",
            "use crate::store::{lock::StateLock, self};\nuse crate::store::StateLock;\n\
             fn f() { crate::store::lock::acquire(); crate::store::lock::LOCK_WAIT; }\n\
             #[cfg(test)]\nmod tests {\n    use crate::store::lock::StateLock;\n}\n",
        ),
        source("store::journal", "use crate::store::lock::StateLock;\n"),
    ];
    let (refs, _) = references(&sources);
    let past = past_the_door(&refs);
    assert_eq!(past.len(), 2, "{past:#?}");
    assert!(
        past[0].starts_with("hook/stop_hook.rs:1: `crate::store::lock::StateLock` reaches past"),
        "{past:#?}"
    );
    assert!(past[0].contains("name it `crate::store::StateLock`"), "{past:#?}");
    assert!(past[1].starts_with("hook/stop_hook.rs:3: `crate::store::lock::LOCK_WAIT`"), "{past:#?}");
}

/// The checks above would pass on a reader that sees nothing; these show they see what they must.
#[test]
fn the_reader_catches_an_upward_import_a_circle_a_lib_item_and_io_in_verdict() {
    let sources = vec![
        source("support::digest", "use crate::store::state::LoopState;\n"),
        source("store", "//! [`crate::hook::stop_hook`] is a doc link, not an import\n"),
        source("store::state", "use crate::{\n    support::digest,\n    store::ledger::{Entry, Line},\n};\n"),
        source("store::ledger", "fn f() { crate::store::state::g(); }\n"),
        source("hook", ""),
        source("hook::stop_hook", "use crate::VERSION;\nuse crate::store::{self, state};\n"),
        source("verdict::decision", "use std::fs;\n#[cfg(test)]\nmod tests {\n    use std::fs;\n}\n"),
        source("checks::oracle", "#[cfg(test)]\nmod tests {\n    use crate::checks::test_suite::x;\n}\n"),
        source("checks::test_suite", "use crate::checks::oracle::Oracle;\n"),
        source("run", ""),
        source("run::driver", "fn f() { super::attempts::sweep(); }\n"),
        source(
            "run::attempts",
            "use super::driver::{Attempt, Driver};\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
    ];
    let (refs, into_lib) = references(&sources);
    let up = upward(&refs);
    assert_eq!(up.len(), 1, "{up:#?}");
    assert!(up[0].starts_with("support/digest.rs:1: `support::digest` imports `store::state`"), "{up:#?}");
    assert_eq!(into_lib.len(), 1, "{into_lib:#?}");
    assert!(into_lib[0].contains("crate::VERSION"), "{into_lib:#?}");
    // The upward import closes a second circle through `support::digest`.
    let circle: Vec<String> = ["store::ledger", "store::state", "support::digest"].map(String::from).into();
    let siblings: Vec<String> = ["run::attempts", "run::driver"].map(String::from).into();
    assert_eq!(cycles(&refs), vec![siblings, circle]);
    let multi_line = refs.iter().find(|r| r.from == "store::state" && r.to == "store::ledger").unwrap();
    assert_eq!(multi_line.line, 1);
    assert!(refs.iter().any(|r| r.from == "hook::stop_hook" && r.to == "store::state"));
    assert!(
        !refs.iter().any(|r| r.from == "store" && r.to == "hook::stop_hook"),
        "a doc link was read as an import"
    );
    assert!(refs.iter().any(|r| r.from == "checks::oracle" && r.in_test));
    let io = io_in_verdict(&sources);
    assert_eq!(io.len(), 1, "{io:#?}");
    assert!(io[0].starts_with("verdict/decision.rs:1:"), "{io:#?}");
}

/// Lines outside `host/` that name one of `Host`'s variants (`Host::Codex`), to compare it or to
/// build it: a host is a table in `host/` (each adapter's `HostSpec`), and the loop asks it what
/// it can do by a method that names the capability, never learning which host it is. `Host::ALL`,
/// `Host::from_name` and the like name no host; test modules are not read.
fn host_names(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for source in sources.iter().filter(|s| layer(&s.module) != "host") {
        for (index, raw) in source.production_lines() {
            let line = code_of(raw);
            if !host_variants_at(line).is_empty() {
                out.push(format!(
                    "{}:{}: names a host outside host/; give the host's spec (host/adapter/) a field that \
                     says what it can do, and read it through a method of `Host`\n    {}",
                    source.file,
                    index + 1,
                    line.trim()
                ));
            }
        }
    }
    out
}

/// Where each `Host::<Variant>` starts and ends in `line` (a variant is CamelCase: `Host::ALL`
/// and `Host::from_name` are not).
fn host_variants_at(line: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = line[from..].find("Host::").map(|at| from + at) {
        let before = line[..at].chars().last();
        let name_start = at + "Host::".len();
        let name_len = line[name_start..]
            .find(|c: char| !c.is_alphanumeric() && c != '_')
            .unwrap_or(line.len() - name_start);
        let name = &line[name_start..name_start + name_len];
        let camel = name.starts_with(|c: char| c.is_ascii_uppercase())
            && name.chars().any(|c| c.is_ascii_lowercase());
        if camel && !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            found.push((at, name_start + name_len));
        }
        from = name_start;
    }
    found
}

#[test]
fn no_host_is_named_outside_the_host_layer() {
    let found = host_names(&sources(&core_src()));
    assert!(found.is_empty(), "{} host names outside host/:\n{}", found.len(), found.join("\n"));
}

/// The check above would pass on a reader that sees nothing; this shows it sees each form.
#[test]
fn the_reader_catches_each_way_of_naming_a_host() {
    let sources = vec![
        source("hook::a", "fn f(host: Host) -> bool { host == Host::CopilotCli }\n"),
        source("hook::b", "fn f(h: Host) { if Host::Codex != h {} }\n"),
        source("hook::c", "fn f(h: Host) -> bool { matches!(h, Host::Cursor | Host::Codex) }\n"),
        source(
            "hook::d",
            "fn f(h: Host) -> u8 {\n    match h {\n        Host::ClaudeCode => 1,\n        _ => 2,\n    }\n}\n",
        ),
        source("hook::e", "fn f(h: Host) { if let (true, Host::GeminiCli) = (true, h) {} }\n"),
        source("hook::f", "fn f(h: Host) { if state.meta.host == crate::host::Host::ClaudeCode {} }\n"),
        source(
            "cli",
            "fn f() -> Host {\n    let all = Host::ALL;\n    Host::from_name(\"codex\").unwrap_or(Host::Codex)\n}\n",
        ),
        source(
            "commands::x",
            "fn f(o: Opt) -> Host {\n    match o {\n        Opt::A => Host::Cursor,\n    }\n}\n",
        ),
        source(
            "commands::y",
            "fn f() -> Vec<&'static str> { Host::ALL.iter().map(|h| h.name()).collect() }\n",
        ),
        source("host", "fn f(h: Host) -> bool { h == Host::ClaudeCode }\n"),
        source(
            "hook::g",
            "fn g() {}\n#[cfg(test)]\nmod tests {\n    fn t(h: Host) { assert!(h == Host::Codex); }\n}\n",
        ),
    ];
    let found = host_names(&sources);
    let files: Vec<&str> = found.iter().map(|p| p.split(':').next().unwrap()).collect();
    assert_eq!(
        files,
        [
            "hook/a.rs",
            "hook/b.rs",
            "hook/c.rs",
            "hook/d.rs",
            "hook/e.rs",
            "hook/f.rs",
            "cli.rs",
            "commands/x.rs"
        ],
        "{found:#?}"
    );
    assert!(found[3].starts_with("hook/d.rs:3:"), "{found:#?}");
    assert!(found[6].starts_with("cli.rs:3:"), "{found:#?}");
}

/// A loop's files as `LoopPaths` names them (`paths.ledger`), its directory (`paths.dir`,
/// `target.dir`), and its files' names on disk: only `store` writes them, so that every write
/// goes through its lock and its journal.
const LOOP_FILES: &[&str] = &[
    ".state",
    ".ledger",
    ".journal",
    ".armed",
    ".lock",
    ".dir",
    "paths()",
    "\"archive\"",
    "\"unclaimed\"",
    "\"logs\"",
    "\"state.md\"",
    "\"ledger.jsonl\"",
    "\"journal.json\"",
    "\"notice.json\"",
    "\"prompt.json\"",
    "\"copilot-last-block\"",
    "\"next-prompt.md\"",
    "\"progress.md\"",
    "\"driver.pid\"",
    "\"host-process.json\"",
    "\"oracle\"",
    "LoopFile::",
    "oracle_originals(",
    "log_path(",
];

/// The names on disk of the files a loop keeps beside its state (`store::record::LoopFile`,
/// the driver mark, the oracle's originals): spelled only in `store`, so that no code outside it
/// builds a path into a loop's directory to write through a name of its own.
const LOOP_FILE_NAMES: &[&str] = &[
    "\"notice.json\"",
    "\"prompt.json\"",
    "\"copilot-last-block\"",
    "\"next-prompt.md\"",
    "\"progress.md\"",
    "\"driver.pid\"",
    "\"host-process.json\"",
    "\"oracle\"",
    "\"report.html\"",
];

/// Calls that write, move or delete a file or a directory. A rename, a removal or a creation is
/// caught however it is imported (`fs::rename`, `std::fs::rename`, `rename` after
/// `use std::fs::rename`); a write by `fs::write`, as `write(` alone is every writer's method.
const FILE_WRITES: &[&str] = &[
    "fs::write",
    "rename(",
    "remove_file",
    "remove_dir",
    "create_dir",
    "DirBuilder",
    "fs::copy",
    "hard_link",
    "File::create",
    "File::options",
    "OpenOptions",
    "file_options(",
    "write_atomic",
    "persist",
    "tempfile_in(",
    "remove_if_present",
    "move_aside",
    "set_len",
    "set_permissions",
    "append_to",
    "append_lines",
    "symlink(",
];

/// Whether the line at `index` opens a test module (`#[cfg(test)]` or `#[cfg(all(test, unix))]`
/// before a `mod`): every module keeps its tests at its end, so the rest of the file is tests.
fn opens_test_module(lines: &[&str], index: usize) -> bool {
    let attribute = lines[index].trim();
    let is_test = attribute == "#[cfg(test)]"
        || (attribute.starts_with("#[cfg(all(") && attribute.contains("(test,") && attribute.ends_with(")]"));
    let next = lines[index + 1..].iter().find(|l| !l.trim().is_empty()).map(|l| l.trim());
    is_test && next.is_some_and(|l| l.trim_start_matches("pub(crate) ").starts_with("mod "))
}

/// Statements outside `store` that write one of a loop's files: a file-writing call and a loop
/// file in one statement (text up to a `;`, `{` or `}`, across lines). Test modules are left
/// out: they set up and break stores on purpose.
fn loop_file_writes(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for source in sources.iter().filter(|s| layer(&s.module) != "store") {
        let lines: Vec<&str> = source.text.lines().collect();
        let mut statement = String::new();
        let mut starts = 0;
        for (index, raw) in lines.iter().enumerate() {
            if opens_test_module(&lines, index) {
                break;
            }
            for c in code_of(raw).chars() {
                if matches!(c, ';' | '{' | '}') {
                    out.extend(loop_file_write(&statement).map(|(call, file)| {
                        format!(
                            "{}:{}: `{call}` on `{file}` outside store; a loop's files are written only through \
                             store (a Transaction, or store::note_best_effort)\n    {}",
                            source.file,
                            starts + 1,
                            statement.split_whitespace().collect::<Vec<_>>().join(" ")
                        )
                    }));
                    statement.clear();
                } else {
                    if statement.trim().is_empty() {
                        starts = index;
                    }
                    statement.push(c);
                }
            }
            statement.push(' ');
        }
    }
    out
}

/// The write call and the loop file a statement names together, if it does.
fn loop_file_write(statement: &str) -> Option<(&'static str, &'static str)> {
    let call = FILE_WRITES.iter().find(|call| statement.contains(*call))?;
    let file = LOOP_FILES.iter().find(|file| {
        statement.match_indices(*file).any(|(at, _)| {
            // `paths.state`, never `paths.state_digest` or `file.lock()`.
            let after = statement[at + file.len()..].chars().next();
            file.starts_with('"')
                || file.ends_with(['(', ':'])
                || !after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '(')
        })
    })?;
    Some((call, file))
}

#[test]
fn no_loop_state_or_ledger_is_written_outside_store() {
    let problems = loop_file_writes(&sources(&core_src()));
    assert!(
        problems.is_empty(),
        "{} writes of a loop's files outside store:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The rule sees what it must: a write over several lines, a file named on disk, and not a
    // test module, a comment or store itself.
    let planted = vec![
        source(
            "commands::rollback",
            "fn f(paths: &LoopPaths) {\n    let _ = std::fs::write(\n        &paths.state,\n        \"x\",\n    );\n}\n",
        ),
        source(
            "run::driver",
            "fn g(dir: &Path) { let _ = OpenOptions::new().append(true).open(dir.join(\"ledger.jsonl\")); }\n",
        ),
        source(
            "hook::prompt_hook",
            "fn h(p: &LoopPaths) { let _ = fs::read(&p.ledger); } // fs::write(&p.ledger)\n",
        ),
        source(
            "provenance::claim",
            "#[cfg(test)]\nmod tests {\n    fn t(p: &LoopPaths) { std::fs::write(&p.state, \"\").unwrap(); }\n}\n",
        ),
        source("store::journal", "fn j(p: &LoopPaths) { let _ = fs::remove_file(&p.journal); }\n"),
        source(
            "commands::status",
            "fn s(p: &LoopPaths) { file.lock(); let _ = fs::write(p.report.join(\"x\"), p.state_digest); }\n",
        ),
    ];
    let found = loop_file_writes(&planted);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("commands/rollback.rs:2: `fs::write` on `.state`"), "{found:#?}");
    assert!(found[1].starts_with("run/driver.rs:1: `OpenOptions` on `\"ledger.jsonl\"`"), "{found:#?}");
}

/// The reader of writes above, shown to catch each way of writing, creating, moving or removing
/// a file or directory on each way of naming a loop's path, and nothing else: a write elsewhere,
/// a name that only begins like a loop's path, a comment, a test module, `store` itself.
#[test]
fn the_write_reader_catches_each_form_of_a_write_on_a_loop_path() {
    let caught = [
        "fn a(paths: &LoopPaths) { let _ = fs::write(paths.dir.join(\"x\"), b\"x\"); }",
        "fn a(paths: &LoopPaths) { let _ = File::create(paths.dir.join(\"x\")); }",
        "fn a(paths: &LoopPaths) { let _ = File::options().write(true).open(&paths.state); }",
        "fn a(paths: &LoopPaths) { let _ = OpenOptions::new().create(true).write(true).open(&paths.ledger); }",
        "fn a(p: &LoopPaths) { let _ = crate::store::private::file_options().append(true).open(p.dir.join(\"y\")); }",
        "fn a(pending: &LoopPaths) { let _ = fs::rename(&pending.dir, \"/elsewhere\"); }",
        "fn a(pending: &LoopPaths) { let _ = std::fs::rename(&pending.journal, \"j\"); }",
        "use std::fs::rename;\nfn a(target: &LoopPaths) {\n    let _ = rename(\n        &target.dir,\n        \"u\",\n    );\n}",
        "fn a(t: &Transaction) { let _ = std::fs::create_dir_all(t.paths().dir.join(\"sub\")); }",
        "fn a(paths: &LoopPaths) { let _ = fs::create_dir(paths.dir.join(\"archive\")); }",
        "fn a(root: &Path) { let _ = fs::create_dir_all(root.join(\"unclaimed\")); }",
        "fn a(paths: &LoopPaths) { let _ = std::fs::remove_dir_all(&paths.dir); }",
        "fn a(paths: &LoopPaths) { let _ = fs::remove_file(&paths.lock); }",
        "fn a(paths: &LoopPaths) { let _ = DirBuilder::new().create(paths.dir.join(\"logs\")); }",
        "fn a(d: &Path) { let _ = temp.persist(LoopFile::NextPrompt.path(d)); }",
        "fn a(d: &Path) { let _ = tempfile::Builder::new().tempfile_in(oracle_originals(d)); }",
        "fn a(d: &Path) { let _ = fs::copy(\"x\", log_path(d, \"driver.log\")); }",
        "fn a(p: &LoopPaths) { let _ = fs::set_permissions(&p.armed.clone().unwrap(), perms); }",
    ];
    let mut sources: Vec<Source> = caught
        .iter()
        .enumerate()
        .map(|(n, text)| source(&format!("run::w{n}"), &format!("{text}\n")))
        .collect();
    let missed = [
        ("run::elsewhere", "fn b(report: &Path) { let _ = fs::write(report.join(\"x.html\"), b\"x\"); }\n"),
        ("run::method", "fn b(t: &Tree) { let _ = fs::create_dir_all(t.dir().join(\"x\")); }\n"),
        (
            "run::longer",
            "fn b(s: &Run) { let _ = fs::remove_dir_all(&s.dirs[0]); let _ = fs::write(&s.state_file, b\"\"); }\n",
        ),
        (
            "run::comment",
            "fn b(paths: &LoopPaths) { let _ = fs::read(&paths.state); } // fs::write(&paths.dir)\n",
        ),
        (
            "run::tested",
            "fn b() {}\n#[cfg(all(test, unix))]\nmod tests {\n    fn t(p: &LoopPaths) { std::fs::remove_dir_all(&p.dir).unwrap(); }\n}\n",
        ),
        ("store::record", "fn b(paths: &LoopPaths) { let _ = fs::remove_dir_all(&paths.dir); }\n"),
    ];
    sources.extend(missed.iter().map(|(module, text)| source(module, text)));
    let found = loop_file_writes(&sources);
    let files: Vec<&str> = found.iter().map(|f| f.split(':').next().unwrap()).collect();
    let expected: Vec<String> = (0..caught.len()).map(|n| format!("run/w{n}.rs")).collect();
    assert_eq!(files, expected, "{found:#?}");
    assert!(found[7].starts_with("run/w7.rs:3: `rename(` on `.dir`"), "{found:#?}");
}

/// Lines outside `store` (test modules left out) that spell the name of one of a loop's files.
fn loop_file_names(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for source in sources.iter().filter(|s| layer(&s.module) != "store") {
        let lines: Vec<&str> = source.text.lines().collect();
        for (index, raw) in lines.iter().enumerate() {
            if opens_test_module(&lines, index) {
                break;
            }
            if let Some(name) = LOOP_FILE_NAMES.iter().find(|name| code_of(raw).contains(*name)) {
                out.push(format!(
                    "{}:{}: names the loop's file {name} outside store; use store::record (LoopFile)",
                    source.file,
                    index + 1
                ));
            }
        }
    }
    out
}

#[test]
fn the_store_alone_names_and_writes_the_files_of_a_loops_directory() {
    let sources = sources(&core_src());
    let named = loop_file_names(&sources);
    assert!(named.is_empty(), "{} names of a loop's files outside store:\n{}", named.len(), named.join("\n"));
    let planted = vec![
        source("hook::copilot_block", "const LAST_BLOCK: &str = \"copilot-last-block\";\n"),
        source("run::driver", "fn f(d: &Path) { let _ = fs::write(d.join(\"next-prompt.md\"), b\"x\"); }\n"),
        source(
            "run::schedule",
            "fn g(d: &Path) { let _ = std::fs::write(LoopFile::NextPrompt.path(d), b\"x\"); }\n",
        ),
        source(
            "provenance::claim",
            "fn h(d: &Path) { let _ = fs::rename(oracle_originals(d), d.join(\"x\")); }\n",
        ),
        source("store::record", "const N: &str = \"notice.json\";\n"),
        source(
            "hook::prompt_hook",
            "fn r(d: &Path) { let _ = LoopFile::PromptRecord.read(d, 64); } // \"prompt.json\"\n",
        ),
        source("provenance::sender", "#[cfg(test)]\nmod tests {\n    const N: &str = \"notice.json\";\n}\n"),
    ];
    let named = loop_file_names(&planted);
    assert_eq!(named.len(), 2, "{named:#?}");
    assert!(named[0].starts_with("hook/copilot_block.rs:1: names the loop's file \"copilot-last-block\""));
    assert!(named[1].starts_with("run/driver.rs:1:"), "{named:#?}");
    let written = loop_file_writes(&planted);
    assert_eq!(written.len(), 3, "{written:#?}");
    assert!(written[1].starts_with("run/schedule.rs:1: `fs::write` on `LoopFile::`"), "{written:#?}");
    assert!(
        written[2].starts_with("provenance/claim.rs:1: `rename(` on `oracle_originals(`"),
        "{written:#?}"
    );
}

/// Runs of twelve or more blanks inside a one-line string literal, between two words: what a line
/// continuation without its `\` leaves in a message (the indentation of the next line). Aligned
/// columns (`Tier:        ...`) are shorter; an indented line starts its literal.
fn space_runs(sources: &[Source]) -> Vec<String> {
    let mut found = Vec::new();
    for source in sources {
        for (n, line) in source.text.lines().enumerate() {
            let bytes = code_of(line).as_bytes();
            let (mut in_string, mut run, mut after_word) = (false, 0, false);
            for (i, &b) in bytes.iter().enumerate() {
                match b {
                    b'"' if i == 0 || bytes[i - 1] != b'\\' => {
                        (in_string, run, after_word) = (!in_string, 0, false);
                    }
                    b' ' if in_string => run += 1,
                    _ if in_string => {
                        if after_word && run >= 12 {
                            found.push(format!("{}:{}: {run} blanks in a string", source.file, n + 1));
                        }
                        (run, after_word) = (0, true);
                    }
                    _ => {}
                }
            }
        }
    }
    found
}

#[test]
fn no_message_carries_the_indentation_of_a_line_continuation() {
    let found = space_runs(&sources(&core_src()));
    assert!(
        found.is_empty(),
        "end the line with `\\` so that the next line's indentation is dropped:\n{found:#?}"
    );
    let planted = vec![
        source("run::driver", "fn f() { refuse(\"a loop is judged in                      one place\"); }\n"),
        source(
            "commands::start",
            "fn g() { out.push_str(\"Tier:        {}\\n\"); out.push_str(\"             not ready\"); }\n",
        ),
        source(
            "hook::prompt_hook",
            "fn h() { let x = \"so \\\n                 nothing\"; } // \"a                    b\"\n",
        ),
    ];
    assert_eq!(space_runs(&planted), ["run/driver.rs:1: 22 blanks in a string"]);
}

/// The files that commit a hook run's change, once: the Stop hook's (its judged stops, forged
/// stops, settled commands, loops ended as tampered, and the turns the host ended on an error)
/// and the prompt hook's. Their stages return a `Change` and never commit.
const HOOK_COMMIT_OWNERS: &[&str] = &["hook/stop_hook/mod.rs", "hook/prompt_hook.rs"];

/// Files on the stop's and the prompt's paths that still commit on their own, and why.
const COMMITS_OF_THEIR_OWN: &[(&str, &str)] = &[
    (
        "provenance/claim.rs",
        "a claim moves a waiting loop into the session under two locks; its commit sits between the \
         moves and the removal of the waiting copy, before the loop it makes is judged",
    ),
    (
        "hook/guard_host_config.rs",
        "the one commit of a tool call's guard and of a settings change, and the snapshot taken \
         after the user's /for-loop:strict, which follows that command's own commit",
    ),
];

/// Lines under `hook/` and `provenance/` that commit a loop's change anywhere but in the owner
/// of a hook run's one commit, and owners that commit in more than one place.
fn commits_outside_their_owner(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for source in sources.iter().filter(|s| matches!(layer(&s.module), "hook" | "provenance")) {
        let owner = HOOK_COMMIT_OWNERS.contains(&source.file.as_str());
        let exempt = COMMITS_OF_THEIR_OWN.iter().any(|(file, _)| *file == source.file);
        let mut owned = 0;
        for (index, raw) in source.production_lines() {
            let line = code_of(raw);
            let at = format!("{}:{}", source.file, index + 1);
            if line.contains("commit_in(") {
                owned += 1;
                if !owner {
                    out.push(format!("{at}: commits a Change outside its hook's owner\n    {}", line.trim()));
                }
            } else if (owner && line.contains("transaction.commit("))
                || (!owner && !exempt && line.contains(".commit("))
            {
                out.push(format!(
                    "{at}: commits on its own; return a Change to the hook's one commit\n    {}",
                    line.trim()
                ));
            }
        }
        if owner && owned != 1 {
            out.push(format!("{}: commits a Change in {owned} places, not one", source.file));
        }
    }
    out
}

/// A stop commits what its stages decided once, in one place that holds its transaction; so does
/// the prompt hook (issue 43). A stage that commits on its own is named here.
#[test]
fn a_hook_run_commits_in_one_place() {
    let problems = commits_outside_their_owner(&sources(&core_src()));
    assert!(problems.is_empty(), "{} commits outside their owner:\n{}", problems.len(), problems.join("\n"));
    // The rule sees a stage that commits, an owner that commits twice, and not a test module or
    // a comment.
    let planted = [
        source("hook::stop_hook::open", "fn f(t: &Transaction) { let _ = transaction.commit(&s, &[]); }\n"),
        source("provenance::confirmation", "fn f(c: Change, t: &Transaction) { c.commit_in(t); }\n"),
        source("hook::stop_hook::mod", "fn a() { c.commit_in(t); }\nfn b() { d.commit_in(t); }\n"),
        source("hook::prompt_hook", "fn a() { c.commit_in(t); }\n// transaction.commit(\n"),
        source(
            "hook::turn_failure",
            "#[cfg(test)]\nmod tests {\n    fn t() { transaction.commit(&s, &[]); }\n}\n",
        ),
    ];
    let found = commits_outside_their_owner(&planted);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("hook/stop_hook/open.rs:1"), "{found:#?}");
    assert!(found[1].starts_with("provenance/confirmation.rs:1"), "{found:#?}");
    assert!(found[2].starts_with("hook/stop_hook/mod.rs: commits a Change in 2 places"), "{found:#?}");
}

/// The most lines a production function of the engine may have without saying, in a comment
/// just above it, why it is longer (`// Over 80 lines: ...`).
const LONGEST_FUNCTION: usize = 80;

/// Production functions longer than [`LONGEST_FUNCTION`] lines (from `fn` to its closing brace,
/// which rustfmt puts at the `fn`'s indentation) with no `Over 80 lines:` comment above them.
fn long_functions(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for source in sources {
        let lines: Vec<&str> = source.text.lines().collect();
        let end = lines.iter().position(|l| l.trim() == "#[cfg(test)]").unwrap_or(lines.len());
        for (at, line) in lines[..end].iter().enumerate() {
            let code = code_of(line);
            let body = code.trim_start();
            let indent = code.len() - body.len();
            let words: Vec<&str> = body.split_whitespace().collect();
            let Some(fn_at) = words.iter().position(|w| *w == "fn") else { continue };
            if !words[..fn_at].iter().all(|w| {
                ["pub", "pub(crate)", "pub(super)", "const", "async", "unsafe"].contains(w)
                    || w.starts_with("pub(in")
            }) {
                continue;
            }
            let closing = format!("{}}}", " ".repeat(indent));
            let Some(length) = lines[at + 1..end].iter().position(|l| l.trim_end() == closing) else {
                continue;
            };
            let length = length + 2;
            let said = lines[..at]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("//") || l.trim_start().starts_with("#["))
                .any(|l| l.contains("Over 80 lines:"));
            if length > LONGEST_FUNCTION && !said {
                out.push(format!(
                    "{}:{}: `{}` is {length} lines: split it, or say why it is not in a comment above it \
                     (`// Over 80 lines: ...`)",
                    source.file,
                    at + 1,
                    words.get(fn_at + 1).map_or("", |w| w.split(['(', '<']).next().unwrap_or(w))
                ));
            }
        }
    }
    out
}

#[test]
fn no_production_function_is_over_80_lines_without_a_reason() {
    let long = long_functions(&sources(&core_src()));
    assert!(long.is_empty(), "{} long functions:\n{}", long.len(), long.join("\n"));
}

#[test]
fn the_reader_catches_a_long_function_and_hears_its_reason() {
    let body = |name: &str| format!("fn {name}() {{\n{}}}\n", "    x();\n".repeat(LONGEST_FUNCTION));
    let text = format!(
        "{}// Over 80 lines: one table of cases, read in one place.\n{}{}#[cfg(test)]\nmod tests {{\n{}}}\n",
        body("long"),
        body("said"),
        "fn short() {\n    x();\n}\n",
        body("in_test")
    );
    let long = long_functions(&[source("checks::sample", &text)]);
    assert_eq!(long.len(), 1, "{long:#?}");
    assert!(long[0].starts_with("checks/sample.rs:1: `long` is 82 lines"), "{long:#?}");
}
