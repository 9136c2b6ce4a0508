//! The test suite behind the check, protected by default.
//!
//! Almost every check runs a test suite, and the common ways a model games a check act on the
//! tests, not on the check script: it edits an assertion or an expected value, deletes a test,
//! or adds a `conftest.py` that rewrites the report. So unless the user allows test edits, the
//! oracle takes in, at start:
//!
//! - every existing file that is a test by the conventions of the common runners ([`TEST_FILES`]:
//!   `tests/**`, `test_*.py`, `*_test.go`, `*.spec.ts`, …), and every runner configuration file
//!   ([`RUNNER_FILES`]): editing or deleting one is an oracle change;
//! - the runner sections of shared project files ([`Section`]: `[tool.pytest.ini_options]` in
//!   `pyproject.toml`, `jest` and the test scripts in `package.json`, `[[test]]` in `Cargo.toml`),
//!   so the rest of those files stays the model's to edit;
//! - the scripts the check's own scripts run, two levels down (`check.sh` running
//!   `tests/test_calc.sh`, `.ci/run` running `scripts/test`).
//!
//! New test files are welcome: writing tests is often the task. A new runner file (a
//! `conftest.py`, a jest setup file, `.cargo/config.toml`) is a hook into the check, loaded by the
//! runner by itself, and counts as a change.
//!
//! At most [`MAX_TEST_FILES`] test files are fingerprinted (runner files always are); the start
//! says how many were left unchecked beyond that, rather than claim to protect them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checks::oracle::{ChangeKind, OracleChange};
use crate::checks::protect::Protect;
use crate::support::digest::sha256_hex;
use crate::support::read::bounded_read;

/// Test files fingerprinted at most; runner files are always.
pub(crate) const MAX_TEST_FILES: usize = 2_000;

/// Files that are tests by the conventions of the common runners.
pub(crate) const TEST_FILES: &[&str] = &[
    "tests/**",
    "test/**",
    "spec/**",
    "**/__tests__/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/*_test.go",
    "**/*.{test,spec}.{js,jsx,ts,tsx,mjs,cjs,mts,cts}",
    "**/*_spec.rb",
    "**/*_test.rb",
    "**/*Test.php",
    "**/*.bats",
];

/// Files a runner reads as its configuration, or loads before the tests, by itself.
pub(crate) const RUNNER_FILES: &[&str] = &[
    "pytest.ini",
    ".pytest.ini",
    "**/conftest.py",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    "jest.config.{js,ts,mjs,cjs,json}",
    "jest.setup.{js,ts,mjs,cjs}",
    "vitest.config.{js,ts,mjs,cjs,mts,cts}",
    "vitest.setup.{js,ts,mjs,cjs}",
    "vitest.workspace.{js,ts,mjs,cjs,json}",
    "**/setupTests.{js,jsx,ts,tsx}",
    ".mocharc.{js,cjs,json,jsonc,yml,yaml}",
    "ava.config.{js,cjs,mjs}",
    "karma.conf.{js,ts}",
    ".rspec",
    "spec/spec_helper.rb",
    "spec/rails_helper.rb",
    "phpunit.xml",
    "phpunit.xml.dist",
    ".config/nextest.toml",
    ".cargo/config.toml",
    ".cargo/config",
];

/// The runner's part of a file the project uses for more than its tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    /// An INI or TOML table, by its header (`[tool.pytest.ini_options]`); `[[test]]` takes every
    /// array table of that name.
    Table { file: &'static str, header: &'static str },
    /// Keys of package.json: the runners' own, and the test scripts.
    PackageJson,
    /// Cargo.toml's test targets and the switches that turn tests off.
    CargoTests,
}

/// The sections watched in every project: one that appears where there was none is a change too.
pub(crate) const SECTIONS: &[Section] = &[
    Section::Table { file: "pyproject.toml", header: "[tool.pytest.ini_options]" },
    Section::Table { file: "pyproject.toml", header: "[tool.pytest]" },
    Section::Table { file: "setup.cfg", header: "[tool:pytest]" },
    Section::Table { file: "tox.ini", header: "[pytest]" },
    Section::PackageJson,
    Section::CargoTests,
];

/// The digest of a section that is not there (nor its file).
pub(crate) const ABSENT: &str = "missing";

/// What the oracle keeps of the test suite besides its files, which join the oracle's files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SuiteGuard {
    /// Runner files' globs: a new file matching one is a change to the check. Empty when test
    /// edits are allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<String>,
    /// The runner sections of shared files that were there at start, by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sections: BTreeMap<String, String>,
    /// Test files found beyond [`MAX_TEST_FILES`], which are not fingerprinted.
    #[serde(default, skip_serializing_if = "crate::support::is_zero")]
    pub unchecked_files: u32,
}

impl SuiteGuard {
    /// The guard of a loop that protects the suite in `cwd`.
    pub(crate) fn on(cwd: &Path, unchecked_files: u32) -> SuiteGuard {
        let sections = sections(cwd).into_iter().filter(|(_, digest)| digest != ABSENT).collect();
        SuiteGuard {
            hooks: RUNNER_FILES.iter().map(|p| (*p).to_string()).collect(),
            sections,
            unchecked_files,
        }
    }

    /// Test edits are allowed: nothing of the suite is protected.
    pub(crate) fn is_off(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The runner sections that differ from the start, named by their keys.
    pub(crate) fn section_changes(&self, cwd: &Path) -> Vec<OracleChange> {
        if self.is_off() {
            return Vec::new();
        }
        sections(cwd)
            .into_iter()
            .filter_map(|(key, now)| {
                let was = self.sections.get(&key).map_or(ABSENT, String::as_str);
                let kind = match (was, now.as_str()) {
                    (a, b) if a == b => return None,
                    (ABSENT, _) => ChangeKind::Added,
                    (_, ABSENT) => ChangeKind::Deleted,
                    _ => ChangeKind::Modified,
                };
                Some(OracleChange { path: key, kind })
            })
            .collect()
    }
}

/// The globs of the files protected by default: tests and runner files.
pub(crate) fn patterns() -> Vec<String> {
    TEST_FILES.iter().chain(RUNNER_FILES).map(|p| (*p).to_string()).collect()
}

/// Whether `path` is a test file by the runners' conventions.
pub(crate) fn is_test_file(path: &str) -> bool {
    static COMPILED: LazyLock<Protect> = LazyLock::new(|| Protect::stored(&owned(TEST_FILES)));
    COMPILED.matches(path)
}

/// Whether a file found by the suite's globs is a runner's own file (configuration or hook).
pub(crate) fn is_runner_file(path: &str) -> bool {
    static COMPILED: LazyLock<Protect> = LazyLock::new(|| Protect::stored(&owned(RUNNER_FILES)));
    COMPILED.matches(path)
}

/// A list of patterns as [`Protect`] takes them. The fixed lists are compiled once per process,
/// as every file a stop looks at is asked about.
fn owned(patterns: &[&str]) -> Vec<String> {
    patterns.iter().map(|p| (*p).to_string()).collect()
}

/// Whether a file found by the suite's globs is something the tests leave behind rather than a
/// test: bytecode, caches, logs, coverage data.
pub(crate) fn is_artifact(path: &str) -> bool {
    const DIRS: &[&str] =
        &["__pycache__", ".pytest_cache", "node_modules", "target", "coverage", ".nyc_output"];
    const EXTENSIONS: &[&str] = &["pyc", "pyo", "log", "tmp", "swp"];
    path.split('/').any(|part| DIRS.contains(&part))
        || path.rsplit_once('.').is_some_and(|(_, extension)| EXTENSIONS.contains(&extension))
}

/// Files the check's scripts name, followed this many levels down.
const SCRIPT_DEPTH: usize = 2;
/// Files followed into at most, in all.
const MAX_FOLLOWED: usize = 64;
/// Scripts larger than this are not read for the files they name.
const MAX_SCRIPT_BYTES: u64 = 256 * 1024;
/// Sections are read from files up to this size.
const MAX_SECTION_FILE_BYTES: u64 = 4 << 20;

impl Section {
    /// How the section is named in the oracle and in messages: `pyproject.toml [tool.pytest]`.
    pub(crate) fn key(self) -> String {
        match self {
            Section::Table { file, header } => format!("{file} {header}"),
            Section::PackageJson => "package.json (test scripts and runner keys)".into(),
            Section::CargoTests => "Cargo.toml (test targets and test switches)".into(),
        }
    }

    /// The file the section is in.
    pub(crate) fn file(self) -> &'static str {
        match self {
            Section::Table { file, .. } => file,
            Section::PackageJson => "package.json",
            Section::CargoTests => "Cargo.toml",
        }
    }

    /// What the section is in `cwd` now: `sha256:<hex>` of its text, or [`ABSENT`].
    pub(crate) fn digest(self, cwd: &Path) -> String {
        let Ok(bytes) = bounded_read::read(&cwd.join(self.file()), MAX_SECTION_FILE_BYTES) else {
            return ABSENT.into();
        };
        let text = String::from_utf8_lossy(&bytes);
        match self.text(&text) {
            Some(section) => format!("sha256:{}", sha256_hex(section.as_bytes())),
            None => ABSENT.into(),
        }
    }

    /// The section's text in `file`, when it has one.
    fn text(self, file: &str) -> Option<String> {
        match self {
            Section::Table { header, .. } => tables(file, |line| line == header),
            Section::PackageJson => package_json_tests(file),
            Section::CargoTests => cargo_tests(file),
        }
    }
}

/// The lines of the tables whose header line `is_header` picks, with their headers.
fn tables(file: &str, is_header: impl Fn(&str) -> bool) -> Option<String> {
    let mut out = String::new();
    let mut inside = false;
    for line in file.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = is_header(trimmed);
        }
        if inside {
            out.push_str(trimmed);
            out.push('\n');
        }
    }
    (!out.is_empty()).then_some(out)
}

/// package.json's runner keys (`jest`, `mocha`, `ava`, `c8`, `nyc`) and test scripts, as JSON.
/// A package.json that does not parse has a section nobody can read: it differs from any that
/// did.
fn package_json_tests(file: &str) -> Option<String> {
    let Ok(Value::Object(root)) = serde_json::from_str::<Value>(file) else {
        return Some(format!("unparsable package.json: {}", sha256_hex(file.as_bytes())));
    };
    let mut kept = serde_json::Map::new();
    for key in ["jest", "mocha", "ava", "c8", "nyc", "vitest"] {
        if let Some(value) = root.get(key) {
            kept.insert(key.to_string(), value.clone());
        }
    }
    if let Some(Value::Object(scripts)) = root.get("scripts") {
        let tests: serde_json::Map<String, Value> = scripts
            .iter()
            .filter(|(name, _)| {
                name.starts_with("test") || name.starts_with("pretest") || name.starts_with("posttest")
            })
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        if !tests.is_empty() {
            kept.insert("scripts".into(), Value::Object(tests));
        }
    }
    (!kept.is_empty()).then(|| Value::Object(kept).to_string())
}

/// Cargo.toml's `[[test]]` tables, `[profile.test]`, and the `test`, `doctest` and `harness`
/// switches of its other targets.
fn cargo_tests(file: &str) -> Option<String> {
    let mut out =
        tables(file, |header| header == "[[test]]" || header == "[profile.test]").unwrap_or_default();
    let mut table = "";
    for line in file.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            table = trimmed;
            continue;
        }
        let key = trimmed.split('=').next().unwrap_or_default().trim();
        if table != "[[test]]" && matches!(key, "test" | "doctest" | "harness" | "autotests") {
            out.push_str(&format!("{table} {trimmed}\n"));
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The sections of `cwd` as they are now, by key.
pub(crate) fn sections(cwd: &Path) -> BTreeMap<String, String> {
    SECTIONS.iter().map(|section| (section.key(), section.digest(cwd))).collect()
}

/// The files the check's own files name, followed [`SCRIPT_DEPTH`] levels down: `check.sh`
/// running `sh tests/test_calc.sh`, a Makefile recipe running `./scripts/lint.sh`, package.json's
/// `node scripts/test.js`. Only existing files inside `cwd` count; directories are left to the
/// test patterns.
pub(crate) fn named_by_scripts(cwd: &Path, scripts: &[String]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut level: Vec<String> = scripts.to_vec();
    for _ in 0..SCRIPT_DEPTH {
        let mut next = Vec::new();
        for script in &level {
            let Ok(bytes) = bounded_read::read(&cwd.join(script), MAX_SCRIPT_BYTES) else { continue };
            if bytes.contains(&0) {
                continue;
            }
            for word in words(&String::from_utf8_lossy(&bytes)) {
                if found.len() >= MAX_FOLLOWED {
                    return found;
                }
                let Some(relative) = crate::support::text::relative_path::relative_to(cwd, Path::new(word))
                else {
                    continue;
                };
                if scripts.contains(&relative)
                    || found.contains(&relative)
                    || !is_check_script(cwd, &relative)
                {
                    continue;
                }
                found.push(relative.clone());
                next.push(relative);
            }
        }
        level = next;
    }
    found
}

/// Whether a file a check script names is part of the check rather than the code it checks: any
/// file in a scripts or CI directory, a Makefile or justfile, a test file, or a shell script whose
/// name says it tests or checks (`test_calc.sh`, `check-api.sh`). Anything else a check runs is
/// the program under test (`sh calc.sh 2 3`, `python3 calc.py`), which must stay the model's to fix.
fn is_check_script(cwd: &Path, relative: &str) -> bool {
    const SCRIPT_DIRS: &[&str] = &["scripts", "script", "ci", ".ci", ".github", ".circleci", ".buildkite"];
    const SHELLS: &[&str] = &["sh", "bash", "zsh", "ksh", "dash", "bats"];
    let path = cwd.join(relative);
    if !path.is_file() {
        return false;
    }
    let name = relative.rsplit('/').next().unwrap_or(relative);
    let (stem, extension) = match name.rsplit_once('.') {
        Some((stem, extension)) => (stem, Some(extension)),
        None => (name, None),
    };
    if SCRIPT_DIRS.contains(&relative.split('/').next().unwrap_or_default())
        || extension == Some("mk")
        || matches!(name, "Makefile" | "makefile" | "GNUmakefile" | "justfile" | "Justfile")
        || is_test_file(relative)
    {
        return true;
    }
    let stem = stem.to_ascii_lowercase();
    let says_so = ["test", "check"].iter().any(|word| {
        stem.starts_with(word) || stem.strip_suffix(word).is_some_and(|rest| rest.ends_with(['_', '-']))
    });
    let shell = extension.is_some_and(|e| SHELLS.contains(&e))
        // An executable without an extension is a script if its first line says which shell runs it.
        || (extension.is_none()
            && bounded_read::read(&path, 128).is_ok_and(|head| {
                head.starts_with(b"#!")
                    && SHELLS.iter().any(|shell| {
                        head.split(|b| *b == b'\n').next().is_some_and(|line| line.ends_with(shell.as_bytes()))
                    })
            }));
    says_so && shell
}

/// The words of a script that could be paths: split at whitespace, quotes and shell punctuation,
/// without a leading `./`, and none with a variable or a glob in it.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || "\"'`;|&()<>=,[]{}".contains(c))
        .map(|word| word.trim_start_matches("./"))
        .filter(|word| {
            !word.is_empty()
                && !word.starts_with('-')
                && !word.starts_with('/')
                && !word.contains(['$', '*', '?', ':'])
                && (word.contains('/') || word.contains('.'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        dir
    }

    fn changes(oracle: &crate::checks::oracle::Oracle, cwd: &Path) -> Vec<String> {
        oracle.changes(cwd).iter().map(|c| format!("{} {:?}", c.path, c.kind)).collect()
    }

    fn write(cwd: &Path, path: &str, content: &str) {
        std::fs::create_dir_all(cwd.join(path).parent().unwrap()).unwrap();
        std::fs::write(cwd.join(path), content).unwrap();
    }

    #[test]
    fn the_suite_behind_a_check_is_protected_and_new_tests_are_welcome() {
        let dir = project(&[
            ("check.sh", "sh tests/test_calc.sh && python3 -m pytest -q\n"),
            ("tests/test_calc.sh", "test \"$(python3 calc.py 2 3)\" = 5\n"),
            ("tests/test_calc.py", "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"),
            ("tests/__pycache__/test_calc.cpython-311.pyc", "bytecode"),
            ("calc.py", "def add(a, b):\n    return a - b\n"),
            ("pyproject.toml", "[project]\nname = \"calc\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n"),
        ]);
        let cwd = dir.path();
        let oracle = crate::checks::oracle::Oracle::capture(cwd, Some("sh check.sh"), &[], true);
        let files: Vec<&str> = oracle.files.keys().map(String::as_str).collect();
        assert_eq!(files, ["check.sh", "tests/test_calc.py", "tests/test_calc.sh"]);
        assert_eq!(
            oracle.tests.sections.keys().collect::<Vec<_>>(),
            ["pyproject.toml [tool.pytest.ini_options]"]
        );
        assert!(changes(&oracle, cwd).is_empty());

        // Writing tests, and the code under test, is the work.
        write(
            cwd,
            "tests/test_more.py",
            "from calc import add\n\ndef test_neg():\n    assert add(-1, 1) == 0\n",
        );
        write(cwd, "calc.py", "def add(a, b):\n    return a + b\n");
        write(
            cwd,
            "pyproject.toml",
            "[project]\nname = \"calc\"\nversion = \"2\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n",
        );
        assert!(changes(&oracle, cwd).is_empty(), "{:?}", changes(&oracle, cwd));
        assert!(!oracle.covers(cwd, Path::new("tests/test_more.py")));

        // Weakening an existing test, hooking the runner, or changing its options is not.
        write(
            cwd,
            "tests/test_calc.py",
            "from calc import add\n\ndef test_add():\n    assert add(2, 3) == -1\n",
        );
        write(cwd, "tests/unit/conftest.py", "import sys\nsys.exit(0)\n");
        write(
            cwd,
            "pyproject.toml",
            "[project]\nname = \"calc\"\n\n[tool.pytest.ini_options]\naddopts = \"-q -k 'not add'\"\n",
        );
        assert_eq!(
            changes(&oracle, cwd),
            [
                "pyproject.toml [tool.pytest.ini_options] Modified",
                "tests/test_calc.py Modified",
                "tests/unit/conftest.py Added"
            ]
        );
        assert!(oracle.covers(cwd, Path::new("tests/test_calc.py")));
        assert!(
            oracle.covers(cwd, Path::new("conftest.py")),
            "a hook the model might write is covered before it exists"
        );
    }

    #[test]
    fn in_git_the_suite_is_what_git_tracks_and_sees_and_hooks_are_found_however_hidden() {
        use crate::worktree::testing::{repo, write as put};
        let dir = repo(&[("tests/test_calc.py", "def test_a(): pass\n"), ("tests/ignored/out.txt", "")]);
        let cwd = dir.path();
        put(cwd, "tests/test_new_untracked.py", "def test_b(): pass\n");
        put(cwd, "tests/ignored/report.txt", "written by every run\n");
        let oracle = crate::checks::oracle::Oracle::capture(cwd, None, &[], true);
        let files: Vec<&str> = oracle.files.keys().map(String::as_str).collect();
        assert_eq!(files, ["tests/test_calc.py", "tests/test_new_untracked.py"]);
        put(cwd, "tests/ignored/report.txt", "another run\n");
        assert!(changes(&oracle, cwd).is_empty(), "{:?}", changes(&oracle, cwd));
        // A hook git is told to ignore is still a hook.
        put(cwd, ".gitignore", "*.log\nignored/\nconftest.py\n");
        put(cwd, "tests/ignored/conftest.py", "import sys; sys.exit(0)\n");
        assert_eq!(changes(&oracle, cwd), ["tests/ignored/conftest.py Added"]);
    }

    #[test]
    fn allowed_test_edits_protect_only_the_check_itself() {
        let dir = project(&[("check.sh", "sh tests/test_calc.sh\n"), ("tests/test_calc.sh", "exit 1\n")]);
        let cwd = dir.path();
        let oracle = crate::checks::oracle::Oracle::capture(cwd, Some("sh check.sh"), &[], false);
        assert_eq!(oracle.files.keys().collect::<Vec<_>>(), ["check.sh"]);
        assert!(oracle.tests.is_off());
        write(cwd, "tests/test_calc.sh", "exit 0\n");
        write(cwd, "conftest.py", "");
        assert!(changes(&oracle, cwd).is_empty());
    }

    #[test]
    fn test_files_past_the_bound_are_counted_not_claimed() {
        let dir = project(&[("conftest.py", "")]);
        let cwd = dir.path();
        for i in 0..MAX_TEST_FILES + 3 {
            write(cwd, &format!("tests/test_{i:05}.py"), "");
        }
        let oracle = crate::checks::oracle::Oracle::capture(cwd, None, &[], true);
        assert_eq!(oracle.files.len(), MAX_TEST_FILES + 1, "the runner file is always kept");
        assert!(oracle.files.contains_key("conftest.py"));
        assert_eq!(oracle.tests.unchecked_files, 3);
        assert!(changes(&oracle, cwd).is_empty(), "the unchecked ones are not added files");
    }

    #[test]
    fn the_default_globs_are_ones_the_glob_engine_honours() {
        for pattern in patterns() {
            assert_eq!(Protect::check(&pattern), Ok(()), "{pattern}");
        }
        assert!(is_runner_file("conftest.py") && is_runner_file("tests/unit/conftest.py"));
        assert!(is_runner_file("jest.config.ts") && is_runner_file(".cargo/config.toml"));
        assert!(is_runner_file("sitecustomize.py") && is_runner_file("lib/usercustomize.py"));
        assert!(is_runner_file("venv/lib/python3.11/site-packages/hook.pth"));
        assert!(!is_runner_file("tests/test_calc.py"));
        assert!(is_artifact("tests/__pycache__/test_calc.cpython-311.pyc") && is_artifact("test/run.log"));
        assert!(!is_artifact("tests/test_calc.py"));
    }

    #[test]
    fn sections_that_change_appear_or_go_are_changes_named_by_their_keys() {
        let dir = project(&[("pyproject.toml", "[tool.pytest.ini_options]\naddopts = \"-q\"\n")]);
        let guard = SuiteGuard::on(dir.path(), 0);
        assert_eq!(guard.sections.len(), 1, "{guard:?}");
        assert!(guard.section_changes(dir.path()).is_empty());
        std::fs::write(dir.path().join("pyproject.toml"), "[project]\nname = \"calc\"\n").unwrap();
        std::fs::write(dir.path().join("tox.ini"), "[pytest]\naddopts = -x\n").unwrap();
        let changes = guard.section_changes(dir.path());
        let shown: Vec<String> = changes.iter().map(|c| format!("{} {:?}", c.path, c.kind)).collect();
        assert_eq!(shown, ["pyproject.toml [tool.pytest.ini_options] Deleted", "tox.ini [pytest] Added"]);
        assert!(SuiteGuard::default().section_changes(dir.path()).is_empty(), "off checks nothing");
    }

    #[test]
    fn a_toml_table_is_its_header_and_lines_up_to_the_next_header() {
        let pyproject = "[project]\nname = \"calc\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\ntestpaths = [\"tests\"]\n\n[tool.ruff]\nline-length = 99\n";
        let section = Section::Table { file: "pyproject.toml", header: "[tool.pytest.ini_options]" };
        assert_eq!(
            section.text(pyproject).as_deref(),
            Some("[tool.pytest.ini_options]\naddopts = \"-q\"\ntestpaths = [\"tests\"]\n\n")
        );
        assert_eq!(section.text("[project]\nname = \"calc\"\n"), None);
    }

    #[test]
    fn editing_the_rest_of_a_shared_file_leaves_its_test_section_as_it_was() {
        let before = "[project]\nversion = \"1\"\n[tool.pytest.ini_options]\naddopts = \"-q\"\n";
        let dir = project(&[("pyproject.toml", before)]);
        let was = sections(dir.path());
        std::fs::write(dir.path().join("pyproject.toml"), before.replace("\"1\"", "\"2\"")).unwrap();
        assert_eq!(sections(dir.path()), was);
        std::fs::write(dir.path().join("pyproject.toml"), before.replace("-q", "-q -k 'not slow'")).unwrap();
        let now = sections(dir.path());
        assert_ne!(
            now["pyproject.toml [tool.pytest.ini_options]"],
            was["pyproject.toml [tool.pytest.ini_options]"]
        );
    }

    #[test]
    fn a_section_that_appears_is_a_change_from_absent() {
        let dir = project(&[]);
        let was = sections(dir.path());
        assert!(was.values().all(|digest| digest == ABSENT), "{was:?}");
        std::fs::write(dir.path().join("setup.cfg"), "[tool:pytest]\naddopts = -p no:warnings\n").unwrap();
        assert_ne!(sections(dir.path())["setup.cfg [tool:pytest]"], ABSENT);
    }

    #[test]
    fn package_json_keeps_the_test_scripts_and_runner_keys_only() {
        let json = r#"{"name":"calc","version":"1.0.0","scripts":{"build":"tsc","test":"jest","test:watch":"jest --watch"},"jest":{"testTimeout":5000},"dependencies":{"left-pad":"1"}}"#;
        let text = package_json_tests(json).unwrap();
        assert!(text.contains("\"test\":\"jest\"") && text.contains("testTimeout"), "{text}");
        assert!(!text.contains("tsc") && !text.contains("left-pad") && !text.contains("1.0.0"), "{text}");
        assert_eq!(package_json_tests(r#"{"name":"calc","scripts":{"build":"tsc"}}"#), None);
        assert!(package_json_tests("{ not json").is_some_and(|t| t.starts_with("unparsable")));
    }

    #[test]
    fn cargo_toml_keeps_test_targets_and_switches() {
        let toml = "[package]\nname = \"calc\"\nversion = \"0.1.0\"\n\n[lib]\ndoctest = false\npath = \"src/lib.rs\"\n\n\
                    [[test]]\nname = \"it\"\nharness = false\n\n[dependencies]\nserde = \"1\"\n";
        let text = cargo_tests(toml).unwrap();
        assert_eq!(text, "[[test]]\nname = \"it\"\nharness = false\n\n[lib] doctest = false\n");
        assert_eq!(cargo_tests("[package]\nname = \"calc\"\n[dependencies]\nserde = \"1\"\n"), None);
    }

    #[test]
    fn hostile_scripts_name_nothing_outside_the_project_and_huge_ones_are_not_read() {
        let outer = project(&[("outside.sh", "true\n")]);
        let cwd = outer.path().join("project");
        let big = format!("{}\nsh scripts/real.sh\n", "#".repeat(usize::try_from(MAX_SCRIPT_BYTES).unwrap()));
        for (path, content) in [
            (
                "check.sh",
                "sh ../outside.sh\nsh /etc/passwd\nsh $HOME/x.sh\nsh tests/*.sh\nsh \"scripts/a b.sh\"\n\
                 sh scripts/../../outside.sh\n",
            ),
            ("scripts/a b.sh", "true\n"),
            ("big.sh", big.as_str()),
            ("scripts/real.sh", "true\n"),
        ] {
            write(&cwd, path, content);
        }
        assert!(named_by_scripts(&cwd, &["check.sh".into()]).is_empty());
        assert!(named_by_scripts(&cwd, &["big.sh".into()]).is_empty());
    }

    #[test]
    fn follows_the_files_the_check_scripts_run_two_levels_down() {
        let dir = project(&[
            (
                "check.sh",
                "#!/bin/sh\nset -e\nsh tests/test_calc.sh && ./scripts/lint.sh \"$@\"\ncat /etc/passwd\n",
            ),
            ("tests/test_calc.sh", "python3 tests/helper.py\n"),
            ("tests/helper.py", "import scripts.deep\n"),
            ("scripts/lint.sh", "echo lint; scripts/deeper.sh\n"),
            ("scripts/deeper.sh", "scripts/deepest.sh\n"),
            ("scripts/deepest.sh", "true\n"),
            ("package.json", r#"{"scripts":{"test":"node scripts/run.js"}}"#),
            ("scripts/run.js", "require('./lib')\n"),
            (".ci/run", "#!/usr/bin/env bash\nexec scripts/test \"$@\"\n"),
            ("scripts/test", "#!/bin/sh\npython3 calc.py --selftest\n"),
            ("calc.py", "print(1)\n"),
            ("calc.sh", "echo $(($1 - $2))\n"),
            ("check_calc.sh", "test \"$(sh calc.sh 2 3)\" = 5 && sh lint-check.sh\n"),
            ("lint-check.sh", "true\n"),
        ]);
        let found = named_by_scripts(dir.path(), &["check.sh".into()]);
        // Two levels: scripts/deepest.sh, named by scripts/deeper.sh, is one too far.
        assert_eq!(found, ["tests/test_calc.sh", "scripts/lint.sh", "tests/helper.py", "scripts/deeper.sh"]);
        assert_eq!(named_by_scripts(dir.path(), &["package.json".into()]), ["scripts/run.js"]);
        assert!(named_by_scripts(dir.path(), &["missing.sh".into()]).is_empty());
        // The code under test a script runs stays the model's to fix.
        assert_eq!(named_by_scripts(dir.path(), &[".ci/run".into()]), ["scripts/test"]);
        // A script the check runs as the program under test is the model's to fix; one whose name
        // says it checks is part of the check.
        assert_eq!(named_by_scripts(dir.path(), &["check_calc.sh".into()]), ["lint-check.sh"]);
    }
}
