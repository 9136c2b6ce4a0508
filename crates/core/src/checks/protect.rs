//! The `--protect` patterns: paths and globs naming files that belong to the check.
//!
//! Globs are [`globset`]'s, as in ripgrep and `.gitignore`: `*` and `?` stay within one path
//! component, `**` spans any number of them, `{unit,e2e}` is a choice and `[a-z]` a class. A
//! pattern without glob characters is a path: the file itself, or everything below a directory,
//! so `--protect tests` protects the directory. Paths are relative to the loop's directory and use
//! `/`. A pattern this engine cannot honour exactly is refused when the loop starts, never
//! ignored: a protection that silently protects nothing is worse than none.

use std::collections::HashSet;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Characters that make a pattern component a glob rather than a name.
const GLOB_CHARS: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

/// Compiled patterns, and where to look for the files they can match.
#[derive(Debug, Clone)]
pub(crate) struct Protect {
    /// The patterns that name a path, each standing for itself and everything below it: looked
    /// up by each of a candidate's ancestors. As globs (`x` and `x/**`) each would add a prefix
    /// search over every path asked about, which was most of a stop's own time in a large tree.
    paths: HashSet<String>,
    /// The first component of each of `paths`: a path whose first component is none of these
    /// has no ancestor among them, which is most paths, decided in one lookup.
    firsts: HashSet<String>,
    /// The other patterns, a brace set of plain names spelled out as the names it stands for
    /// (`jest.config.{js,ts}`), so that globset looks them up rather than searches for them.
    set: GlobSet,
    scopes: Vec<String>,
}

impl Protect {
    /// Compiles `patterns`, refusing the first one that cannot be honoured with the reason.
    pub(crate) fn new(patterns: &[String]) -> Result<Protect, String> {
        let mut builder = GlobSetBuilder::new();
        let mut paths = HashSet::new();
        let mut scopes = Vec::new();
        for pattern in patterns {
            let pattern = normalize(pattern);
            globs(pattern)?;
            for spelled in spelled_out(pattern) {
                match spelled.strip_suffix("/**").unwrap_or(&spelled) {
                    path if !is_glob(path) => {
                        paths.insert(path.to_string());
                    }
                    _ => {
                        for glob in globs(&spelled)? {
                            builder.add(glob);
                        }
                    }
                }
            }
            scopes.push(scope(pattern));
        }
        let set = builder.build().map_err(|e| e.to_string())?;
        let firsts = paths.iter().map(|path| first_component(path).to_string()).collect();
        Ok(Protect { paths, firsts, set, scopes: outermost(scopes) })
    }

    /// Compiles patterns stored by an earlier loop-hook, which checked less: a pattern that does
    /// not compile now stands for the path it spells.
    pub(crate) fn stored(patterns: &[String]) -> Protect {
        Protect::new(patterns).unwrap_or_else(|_| {
            let literal: Vec<String> = patterns
                .iter()
                .map(|p| if Protect::check(p).is_ok() { p.clone() } else { globset::escape(normalize(p)) })
                .collect();
            Protect::new(&literal).unwrap_or(Protect {
                paths: HashSet::new(),
                firsts: HashSet::new(),
                set: GlobSet::empty(),
                scopes: Vec::new(),
            })
        })
    }

    /// Why `pattern` cannot be a `--protect` value, if it cannot.
    pub(crate) fn check(pattern: &str) -> Result<(), String> {
        globs(normalize(pattern)).map(drop)
    }

    /// Whether `relative` (`/`-separated, relative to the loop's directory) is protected.
    pub(crate) fn matches(&self, relative: &str) -> bool {
        if self.firsts.contains(first_component(relative)) {
            let mut ancestor = Some(relative);
            while let Some(path) = ancestor {
                if self.paths.contains(path) {
                    return true;
                }
                ancestor = path.rsplit_once('/').map(|(parent, _)| parent);
            }
        }
        self.set.is_match(relative)
    }

    /// The directories (or files) below which every match lies, none inside another: `tests`
    /// for `tests/{unit,e2e}/**`, the empty path (everything) for `**/*.py`.
    pub(crate) fn scopes(&self) -> &[String] {
        &self.scopes
    }
}

fn normalize(pattern: &str) -> &str {
    let mut pattern = pattern.trim();
    while let Some(rest) = pattern.strip_prefix("./") {
        pattern = rest;
    }
    pattern.trim_end_matches('/')
}

fn is_glob(component: &str) -> bool {
    component.contains(GLOB_CHARS)
}

fn first_component(path: &str) -> &str {
    path.split_once('/').map_or(path, |(first, _)| first)
}

/// The patterns `pattern` stands for with its one brace set of plain names spelled out
/// (`tests/{unit,e2e}/**`: `tests/unit/**` and `tests/e2e/**`); itself when it has another
/// kind of glob in braces, or more than one set.
fn spelled_out(pattern: &str) -> Vec<String> {
    let plain = |name: &str| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    let whole = || vec![pattern.to_string()];
    let (Some(open), Some(close)) = (pattern.find('{'), pattern.find('}')) else { return whole() };
    let (before, set, after) =
        (&pattern[..open], pattern.get(open + 1..close).unwrap_or(","), &pattern[close + 1..]);
    if before.contains(['{', '}', '[', ']', '\\'])
        || after.contains(['{', '}', '[', ']', '\\'])
        || !set.split(',').all(plain)
    {
        return whole();
    }
    set.split(',').map(|name| format!("{before}{name}{after}")).collect()
}

/// The globs a pattern stands for: a path is itself and everything below it.
fn globs(pattern: &str) -> Result<Vec<Glob>, String> {
    if pattern.is_empty() {
        return Err("it is empty".into());
    }
    if pattern.starts_with('!') {
        return Err("a leading `!` (an exclusion) is not supported: list what to protect".into());
    }
    if pattern.starts_with('/') || pattern.split('/').any(|part| part == "..") {
        return Err("give a path inside the project, relative to where the loop starts".into());
    }
    if pattern.split('/').any(|part| part.is_empty() || part == ".") {
        return Err("it has an empty or `.` path component".into());
    }
    // globset reads `a**b` as `a*b`, which is not what a `**` asks for.
    if pattern.split('/').any(|part| part.contains("**") && part != "**") {
        return Err("`**` must be a whole path component, as in `tests/**` or `**/test_*.py`".into());
    }
    let build = |text: &str| {
        GlobBuilder::new(text)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| glob_error(&e))
    };
    if !is_glob(pattern) {
        let escaped = globset::escape(pattern);
        return Ok(vec![build(&escaped)?, build(&format!("{escaped}/**"))?]);
    }
    let mut globs = vec![build(pattern)?];
    // `tests/**` also stands for the directory itself: removing it removes what it protects.
    if let Some(dir) = pattern.strip_suffix("/**").filter(|dir| !dir.is_empty() && !dir.ends_with("**")) {
        globs.push(build(dir)?);
    }
    Ok(globs)
}

/// globset's message without the pattern it repeats, which the caller already shows.
fn glob_error(error: &globset::Error) -> String {
    let text = error.kind().to_string();
    format!("it is not a glob this engine can honour ({text})")
}

/// The literal directory a pattern's matches lie under: its components before the first glob.
fn scope(pattern: &str) -> String {
    if !is_glob(pattern) {
        return pattern.to_string();
    }
    let literal: Vec<&str> = pattern.split('/').take_while(|part| !is_glob(part)).collect();
    literal.join("/")
}

/// `scopes` without duplicates and without any that lies inside another.
fn outermost(mut scopes: Vec<String>) -> Vec<String> {
    scopes.sort();
    scopes.dedup();
    let mut kept: Vec<String> = Vec::new();
    for scope in scopes {
        // A scope below a hidden or skipped directory is walked on its own: the outer walk would
        // pass it over (`.cargo/config.toml` beside `**/conftest.py`).
        let reached = |outer: &String| {
            let rest = if outer.is_empty() {
                Some(scope.as_str())
            } else {
                scope.strip_prefix(&format!("{outer}/"))
            };
            rest.is_some_and(|rest| {
                !rest.split('/').any(|part| crate::support::read::walk::is_skipped_name(part.as_bytes()))
            })
        };
        let inside = kept.iter().any(reached);
        if !inside {
            kept.push(scope);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protect(patterns: &[&str]) -> Protect {
        Protect::new(&patterns.iter().map(|p| (*p).to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn globs_paths_and_directories() {
        let p = protect(&["tests/**", "*.py", "**/test_?.rs", "check.sh", "./docs/"]);
        for yes in ["tests/a.rs", "tests/deep/b.rs", "x.py", "a/b/test_1.rs", "check.sh", "docs/x/y.md"] {
            assert!(p.matches(yes), "{yes}");
        }
        assert!(p.matches("tests"), "the directory a `/**` pattern protects");
        for no in ["src/tests.rs", "src/x.py", "testsuite/a", "check.sh.bak", "docsx/a", "test"] {
            assert!(!p.matches(no), "{no}");
        }
    }

    /// Regression: the hand-written matcher knew no brace sets, so this protected nothing.
    #[test]
    fn brace_sets_and_classes() {
        let p = protect(&["tests/{unit,e2e}/**", "src/[ab]*.rs"]);
        assert!(p.matches("tests/unit/a.rs") && p.matches("tests/e2e/x/y.rs"));
        assert!(!p.matches("tests/other/a.rs"));
        assert!(p.matches("src/a1.rs") && p.matches("src/b.rs") && !p.matches("src/c.rs"));
    }

    #[test]
    fn patterns_the_engine_cannot_honour_are_refused_with_the_reason() {
        for (bad, why) in [
            ("tests/{unit,e2e/**", "not a glob this engine can honour"),
            ("src/[ab.rs", "not a glob this engine can honour"),
            ("a**b", "whole path component"),
            ("tests/**.py", "whole path component"),
            ("!tests/**", "exclusion"),
            ("/etc/passwd", "inside the project"),
            ("../x", "inside the project"),
            ("a//b", "empty or `.` path component"),
            ("", "empty"),
        ] {
            let err = Protect::check(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        assert!(Protect::check("tests/{unit,e2e}/**").is_ok());
    }

    #[test]
    fn scopes_are_the_literal_directories_outermost_first() {
        assert_eq!(
            protect(&["tests/{unit,e2e}/**", "tests/unit/x.rs", "check.sh"]).scopes(),
            ["check.sh", "tests"]
        );
        assert_eq!(protect(&["**/*.py", "tests/**"]).scopes(), [""]);
        assert_eq!(protect(&["a/b/*.rs", "a/bc/**"]).scopes(), ["a/b", "a/bc"]);
        // The walk of `""` passes hidden and dependency directories over: those stay scopes.
        assert_eq!(
            protect(&[
                "**/conftest.py",
                ".cargo/config.toml",
                ".github/**",
                "web/node_modules/x.js",
                "tests/**"
            ])
            .scopes(),
            ["", ".cargo/config.toml", ".github", "web/node_modules/x.js"]
        );
    }

    /// What each pattern's globs say, with nothing looked up or spelled out.
    fn reference(patterns: &[&str]) -> GlobSet {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            for glob in globs(normalize(pattern)).unwrap() {
                builder.add(glob);
            }
        }
        builder.build().unwrap()
    }

    #[test]
    fn paths_looked_up_and_brace_sets_spelled_out_match_what_the_globs_match() {
        let mut patterns: Vec<&str> = crate::checks::oracle::RUNNER_FILES.to_vec();
        patterns.extend(crate::checks::oracle::TEST_FILES);
        patterns.extend([
            "tests/{unit,e2e}/**",
            "src/{a,b}.rs",
            "{x,y}/z/*.py",
            "docs",
            "deep/er/dir/**",
            "q/{a,*}.rs",
            "r/{a,}/s",
            "t/{a,b}/{c,d}",
        ]);
        let p = protect(&patterns);
        let globs = reference(&patterns);
        let names =
            ["", "a", "b", "c", "z", "x", "y", "tests", "unit", "e2e", "src", "docs", "deep", "er", "dir"];
        let files = [
            "a.rs",
            "b.rs",
            "c.py",
            "conftest.py",
            "x.pth",
            "pytest.ini",
            "jest.config.js",
            "jest.config.ts",
            "jest.config.jsx",
            "setupTests.tsx",
            "test_a.py",
            "a_test.go",
            "a.test.js",
            "config.toml",
            "s",
            "d",
        ];
        let mut asked = 0;
        for first in names {
            for second in names {
                for file in files {
                    let path = [first, second, file]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join("/");
                    for candidate in [path.clone(), format!(".cargo/{path}"), format!("spec/{path}")] {
                        assert_eq!(p.matches(&candidate), globs.is_match(&candidate), "{candidate}");
                        asked += 1;
                    }
                }
            }
        }
        for literal in [
            "docs",
            "deep/er/dir",
            "deep/er/dir/x/y",
            "pytest.ini",
            "pytest.ini/x",
            "jest.config.mjs",
            "r/a/s",
            "t/b/c",
        ] {
            assert_eq!(p.matches(literal), globs.is_match(literal), "{literal}");
            assert!(p.matches(literal), "{literal}");
        }
        assert!(asked > 10_000);
        assert!(!p.paths.is_empty(), "paths are looked up");
    }

    #[test]
    fn patterns_stored_before_this_engine_still_protect_what_they_spell() {
        let p = Protect::stored(&["tests/[x".to_string(), "check.sh".to_string()]);
        assert!(p.matches("tests/[x") && p.matches("check.sh") && !p.matches("tests/a"));
    }
}
