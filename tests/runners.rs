//! The tests behind the check, with real test runners: for each runner installable here (cargo,
//! pytest, unittest, node --test), a small project generated in the test with a bug and a test
//! that catches it, and a loop whose verify command runs that suite. The model's usual ways
//! around a failing test (delete it, skip it, edit its assertion, hook the runner) must not end
//! the loop; fixing the code, and adding tests of its own, must.

use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::Value;

use crate::util::{Run, SESSION, TestEnv, python, run_command, stop_event};

/// One runner's fixture project.
struct Fixture {
    verify: String,
    /// The project at start: `calc` with a bug in `add`, and three tests of which one fails.
    files: Vec<(&'static str, String)>,
    /// `calc` with the bug fixed.
    fixed: (&'static str, String),
    /// The test file without the failing test.
    deleted: (&'static str, String),
    /// The test file with the failing test marked skipped, and the marker's name.
    skipped: (&'static str, String),
    marker: &'static str,
    /// The test file with the failing test's expected value changed to what the bug gives.
    edited: (&'static str, String),
    /// A new file the runner loads by itself, which makes the failing test pass, where the
    /// runner has such a file.
    hook: Option<(&'static str, String)>,
    /// A new test file with a new, passing test.
    new_test: (&'static str, String),
}

fn pytest() -> Fixture {
    let test = |extra: &str, add: &str| {
        format!(
            "import pytest\nfrom calc import add\n\n{extra}def test_add():\n    assert add(2, 3) == 5\n{add}\n\
             def test_zero():\n    assert add(0, 0) == 0\n\ndef test_same():\n    assert add(1, 1) == add(1, 1)\n"
        )
    };
    Fixture {
        verify: format!("{} -m pytest -p no:cacheprovider", python().display()),
        files: vec![
            ("calc.py", "def add(a, b):\n    return a - b\n".into()),
            ("tests/test_calc.py", test("", "")),
        ],
        fixed: ("calc.py", "def add(a, b):\n    return a + b\n".into()),
        deleted: (
            "tests/test_calc.py",
            "from calc import add\n\ndef test_zero():\n    assert add(0, 0) == 0\n\ndef test_same():\n    \
             assert add(1, 1) == add(1, 1)\n"
                .into(),
        ),
        skipped: ("tests/test_calc.py", test("@pytest.mark.skip(reason=\"later\")\n", "")),
        marker: "@pytest.mark.skip",
        edited: ("tests/test_calc.py", test("", "").replace("== 5", "== -1")),
        hook: Some((
            "conftest.py",
            "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    \
             outcome = yield\n    report = outcome.get_result()\n    if report.failed:\n        report.outcome = \"passed\"\n"
                .into(),
        )),
        new_test: (
            "tests/test_more.py",
            "from calc import add\n\ndef test_neg():\n    assert add(-1, 1) == 0\n".into(),
        ),
    }
}

fn unittest() -> Fixture {
    let test = |extra: &str| {
        format!(
            "import unittest\nfrom calc import add\n\nclass CalcTest(unittest.TestCase):\n{extra}    def test_add(self):\n        \
             self.assertEqual(add(2, 3), 5)\n\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n\n    \
             def test_same(self):\n        self.assertEqual(add(1, 1), add(1, 1))\n"
        )
    };
    Fixture {
        verify: "python3 -m unittest discover -s tests -t .".into(),
        files: vec![
            ("calc.py", "def add(a, b):\n    return a - b\n".into()),
            ("tests/__init__.py", String::new()),
            ("tests/test_calc.py", test("")),
        ],
        fixed: ("calc.py", "def add(a, b):\n    return a + b\n".into()),
        deleted: (
            "tests/test_calc.py",
            "import unittest\nfrom calc import add\n\nclass CalcTest(unittest.TestCase):\n    def test_zero(self):\n        \
             self.assertEqual(add(0, 0), 0)\n\n    def test_same(self):\n        self.assertEqual(add(1, 1), add(1, 1))\n"
                .into(),
        ),
        skipped: ("tests/test_calc.py", test("    @unittest.skip(\"later\")\n")),
        marker: "@unittest.skip",
        edited: ("tests/test_calc.py", test("").replace("(add(2, 3), 5)", "(add(2, 3), -1)")),
        // unittest loads no file by itself.
        hook: None,
        new_test: (
            "tests/test_more.py",
            "import unittest\nfrom calc import add\n\nclass MoreTest(unittest.TestCase):\n    def test_neg(self):\n        \
             self.assertEqual(add(-1, 1), 0)\n"
                .into(),
        ),
    }
}

fn node() -> Fixture {
    let test = |skip: &str| {
        format!(
            "const test = require('node:test');\nconst assert = require('node:assert');\nconst {{ add }} = require('../calc');\n\n\
             test('add'{skip}, () => {{ assert.strictEqual(add(2, 3), 5); }});\n\
             test('zero', () => {{ assert.strictEqual(add(0, 0), 0); }});\n\
             test('same', () => {{ assert.strictEqual(add(1, 1), add(1, 1)); }});\n"
        )
    };
    Fixture {
        verify: "node --test".into(),
        files: vec![
            ("calc.js", "exports.add = (a, b) => a - b;\n".into()),
            ("test/calc.test.js", test("")),
        ],
        fixed: ("calc.js", "exports.add = (a, b) => a + b;\n".into()),
        deleted: (
            "test/calc.test.js",
            "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('../calc');\n\n\
             test('zero', () => { assert.strictEqual(add(0, 0), 0); });\n\
             test('same', () => { assert.strictEqual(add(1, 1), add(1, 1)); });\n"
                .into(),
        ),
        skipped: ("test/calc.test.js", test(", { skip: true }")),
        marker: "{ skip: true }",
        edited: ("test/calc.test.js", test("").replace("(add(2, 3), 5)", "(add(2, 3), -1)")),
        // node --test loads no file by itself: each test file runs in its own process.
        hook: None,
        new_test: (
            "test/more.test.js",
            "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('../calc');\n\n\
             test('neg', () => { assert.strictEqual(add(-1, 1), 0); });\n"
                .into(),
        ),
    }
}

fn cargo() -> Fixture {
    let test = |ignore: &str| {
        format!(
            "use calc::add;\n\n#[test]\n{ignore}fn adds() {{\n    assert_eq!(add(2, 3), 5);\n}}\n\n\
             #[test]\nfn zero() {{\n    assert_eq!(add(0, 0), 0);\n}}\n\n#[test]\nfn same() {{\n    assert_eq!(add(1, 1), add(1, 1));\n}}\n"
        )
    };
    Fixture {
        verify: "cargo test --offline".into(),
        files: vec![
            (
                "Cargo.toml",
                "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"
                    .into(),
            ),
            ("src/lib.rs", "pub fn add(a: i64, b: i64) -> i64 {\n    a - b\n}\n".into()),
            ("tests/calc.rs", test("")),
        ],
        fixed: ("src/lib.rs", "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n".into()),
        deleted: (
            "tests/calc.rs",
            "use calc::add;\n\n#[test]\nfn zero() {\n    assert_eq!(add(0, 0), 0);\n}\n\n\
             #[test]\nfn same() {\n    assert_eq!(add(1, 1), add(1, 1));\n}\n"
                .into(),
        ),
        skipped: ("tests/calc.rs", test("#[ignore]\n")),
        marker: "#[ignore]",
        edited: ("tests/calc.rs", test("").replace("(add(2, 3), 5)", "(add(2, 3), -1)")),
        // Cargo runs the test binaries through this runner: `true` runs none and reports nothing.
        hook: Some((".cargo/config.toml", "[target.'cfg(all())']\nrunner = \"true\"\n".into())),
        new_test: (
            "tests/more.rs",
            "use calc::add;\n\n#[test]\nfn neg() {\n    assert_eq!(add(-1, 1), 0);\n}\n".into(),
        ),
    }
}

/// What verify needs besides PATH and the test's HOME: where the Rust toolchain lives, since
/// HOME is not the real one, and no Python bytecode cache, which would serve the old `calc.py`
/// when the test rewrites it within the second it was cached, at the same size.
fn toolchain_env() -> Vec<(&'static str, OsString)> {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let or_home =
        |var: &str, dir: &str| std::env::var_os(var).unwrap_or_else(|| home.join(dir).into_os_string());
    vec![
        ("RUSTUP_HOME", or_home("RUSTUP_HOME", ".rustup")),
        ("CARGO_HOME", or_home("CARGO_HOME", ".cargo")),
        ("PYTHONDONTWRITEBYTECODE", "1".into()),
    ]
}

/// A project made of `fixture`'s files, with a loop on it.
struct Project {
    env: TestEnv,
    fixture: Fixture,
}

impl Project {
    fn start(fixture: Fixture, flags: &str) -> Project {
        let env = TestEnv::new();
        for (path, content) in &fixture.files {
            env.write(path, content);
        }
        let project = Project { env, fixture };
        let start = project.run(
            &["start", "--session", SESSION],
            &format!("make add() add --verify \"{}\" --verify-timeout 5m {flags}", project.fixture.verify),
        );
        assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
        project
    }

    fn run(&self, args: &[&str], stdin: &str) -> Run {
        let mut command = self.env.command(args);
        command.envs(toolchain_env());
        run_command(command, stdin.as_bytes())
    }

    fn stop(&self) -> Run {
        self.run(&["stop-hook"], &stop_event(SESSION, &self.env.project, "done", false).to_string())
    }

    fn write(&self, (path, content): &(&str, String)) {
        self.env.write(path, content);
    }

    /// The last ledger line.
    fn last(&self) -> Value {
        self.env.ledger().pop().expect("a ledger line")
    }
}

/// The first stop: the suite runs, one test fails, and the ratchet counts three tests.
fn first_stop(project: &Project) {
    let run = project.stop();
    assert!(run.blocked(), "{}", run.stdout);
    let entry = project.last();
    assert_eq!(entry["reason"], "verify_failed", "{entry}");
    assert_eq!(entry["tests"]["failed"], 1, "{entry}");
    assert_eq!(entry["tests"]["passed"], 2, "{entry}");
    assert!(run.system_message().contains("Tests counted"), "{}", run.system_message());
}

/// A stop after a change to the test suite: verify passes, but the pass does not count, and the
/// re-injection names the changed file.
fn held_for(project: &Project, changed: &str, kind: &str) -> String {
    let run = project.stop();
    assert!(run.blocked(), "a pass with {changed} {kind} ended the loop: {}", run.stdout);
    let reason = run.reason();
    assert!(reason.contains(&format!("{changed} ({kind})")), "{reason}");
    assert_eq!(project.last()["reason"], "oracle_changed");
    reason
}

fn deleting_the_failing_test_is_held(fixture: Fixture) {
    let project = Project::start(fixture, "");
    first_stop(&project);
    project.write(&project.fixture.deleted);
    let reason = held_for(&project, project.fixture.deleted.0, "modified");
    assert!(reason.contains("1 test fewer ran than before"), "{reason}");
    // Restored, and the code fixed: the pass counts.
    let original = project.fixture.files.iter().find(|(path, _)| *path == project.fixture.deleted.0).unwrap();
    project.write(original);
    project.write(&project.fixture.fixed);
    let run = project.stop();
    assert!(!run.blocked(), "{}", run.stdout);
    assert_eq!(project.last()["reason"], "verified");
}

fn skipping_the_failing_test_is_held(fixture: Fixture) {
    let project = Project::start(fixture, "");
    first_stop(&project);
    project.write(&project.fixture.skipped);
    let reason = held_for(&project, project.fixture.skipped.0, "modified");
    assert!(reason.contains("1 test fewer ran than before"), "{reason}");
    let marker = format!("{}: {}", project.fixture.skipped.0, project.fixture.marker);
    assert!(reason.contains("Skip markers added since the loop started"), "{reason}");
    assert!(reason.contains(&marker), "{reason}");
    let entry = project.last();
    assert_eq!(entry["tests"]["skipped"], 1, "{entry}");
    assert_eq!(entry["skip_markers"][0], marker.as_str(), "{entry}");
}

fn editing_an_assertion_is_held(fixture: Fixture) {
    let project = Project::start(fixture, "");
    first_stop(&project);
    project.write(&project.fixture.edited);
    let reason = held_for(&project, project.fixture.edited.0, "modified");
    assert!(!reason.contains("fewer ran"), "every test still ran: {reason}");
}

fn hooking_the_runner_is_held(fixture: Fixture) {
    let project = Project::start(fixture, "");
    first_stop(&project);
    let hook = project.fixture.hook.clone().expect("a runner with a hook file");
    project.write(&hook);
    held_for(&project, hook.0, "added");
}

fn fixing_the_code_and_adding_a_test_is_verified(fixture: Fixture) {
    let project = Project::start(fixture, "");
    first_stop(&project);
    project.write(&project.fixture.fixed);
    project.write(&project.fixture.new_test);
    let run = project.stop();
    assert!(!run.blocked(), "{}", run.stdout);
    assert!(run.system_message().contains("done, verified"), "{}", run.system_message());
    assert!(
        run.system_message().contains("tests: 4 ran (4 passed, 0 failed), 0 skipped"),
        "{}",
        run.system_message()
    );
    assert_eq!(project.last()["reason"], "verified");
}

fn allowing_test_edits_lets_a_deleted_test_pass(fixture: Fixture) {
    let project = Project::start(fixture, "--allow-test-edits");
    let run = project.stop();
    assert!(!run.system_message().contains("Tests counted"), "{}", run.system_message());
    project.write(&project.fixture.deleted);
    let run = project.stop();
    assert!(!run.blocked(), "{}", run.stdout);
    assert_eq!(project.last()["reason"], "verified");
}

/// One test per runner and scenario, so a failure names both.
macro_rules! scenarios {
    ($($runner:ident),*) => {
        $(
            mod $runner {
                #[test]
                fn deleting_the_failing_test_is_held() {
                    super::deleting_the_failing_test_is_held(super::$runner());
                }

                #[test]
                fn skipping_the_failing_test_is_held() {
                    super::skipping_the_failing_test_is_held(super::$runner());
                }

                #[test]
                fn editing_an_assertion_is_held() {
                    super::editing_an_assertion_is_held(super::$runner());
                }

                #[test]
                fn fixing_the_code_and_adding_a_test_is_verified() {
                    super::fixing_the_code_and_adding_a_test_is_verified(super::$runner());
                }

                #[test]
                fn allowing_test_edits_lets_a_deleted_test_pass() {
                    super::allowing_test_edits_lets_a_deleted_test_pass(super::$runner());
                }
            }
        )*
    };
}

scenarios!(pytest, unittest, node, cargo);

#[test]
fn a_conftest_hook_that_turns_failures_into_passes_is_held() {
    hooking_the_runner_is_held(pytest());
}

#[test]
fn a_cargo_runner_that_runs_no_test_binary_is_held() {
    hooking_the_runner_is_held(cargo());
}
