//! Skip markers added since the loop started: `@pytest.mark.skip`, `#[ignore]`, `it.skip`,
//! `t.Skip()`, `.only`, … A skipped test proves nothing, so each one the model adds is reported
//! in the re-injection and the receipt, even where no test count shows it (a new test file
//! skipped from the start, a runner whose summary for-loop cannot read).
//!
//! Markers are counted per file, before and after: a file that holds more of a marker than it
//! did at start has had that many added. Counting, not diffing, keeps this linear and immune to
//! reordered code. A line counts once, for the first marker it holds.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::support::read::bounded_read;
use crate::support::text::relative_path::relative_to;
use crate::worktree::WorkTree;

/// Files larger than this are not searched for markers.
pub(crate) const MAX_SCANNED_BYTES: usize = 1 << 20;
/// Changed files searched at one stop, at most.
const MAX_FILES: usize = 200;

/// A marker, and the source files it is looked for in.
struct Marker {
    /// What the report calls it.
    name: &'static str,
    /// The text that marks it, as a token of its own (see [`holds`]).
    text: &'static str,
    /// The extensions of the files it is looked for in.
    extensions: &'static [&'static str],
}

const PYTHON: &[&str] = &["py"];
const RUST: &[&str] = &["rs"];
const GO: &[&str] = &["go"];
const JS: &[&str] = &["js", "jsx", "ts", "tsx", "mjs", "cjs", "mts", "cts", "vue", "svelte"];
const RUBY: &[&str] = &["rb"];
const PHP: &[&str] = &["php"];
const BATS: &[&str] = &["bats"];

/// The markers, most specific first: a line is counted for the first one it holds.
const MARKERS: &[Marker] = &[
    // pytest and unittest
    Marker { name: "@pytest.mark.skipif", text: "@pytest.mark.skipif", extensions: PYTHON },
    Marker { name: "@pytest.mark.skip", text: "@pytest.mark.skip", extensions: PYTHON },
    Marker { name: "@pytest.mark.xfail", text: "@pytest.mark.xfail", extensions: PYTHON },
    Marker { name: "pytest.mark.skip", text: "pytest.mark.skip", extensions: PYTHON },
    Marker { name: "pytest.mark.xfail", text: "pytest.mark.xfail", extensions: PYTHON },
    Marker { name: "pytest.skip()", text: "pytest.skip(", extensions: PYTHON },
    Marker { name: "pytest.xfail()", text: "pytest.xfail(", extensions: PYTHON },
    Marker { name: "pytest.importorskip()", text: "pytest.importorskip(", extensions: PYTHON },
    Marker { name: "@unittest.skip", text: "@unittest.skip", extensions: PYTHON },
    Marker { name: "@unittest.skipIf", text: "@unittest.skipIf", extensions: PYTHON },
    Marker { name: "@unittest.skipUnless", text: "@unittest.skipUnless", extensions: PYTHON },
    Marker { name: "@unittest.expectedFailure", text: "@unittest.expectedFailure", extensions: PYTHON },
    Marker { name: "@skip", text: "@skip", extensions: PYTHON },
    Marker { name: "@expectedFailure", text: "@expectedFailure", extensions: PYTHON },
    Marker { name: "skipTest()", text: ".skipTest(", extensions: PYTHON },
    Marker { name: "SkipTest", text: "SkipTest", extensions: PYTHON },
    // Rust
    Marker { name: "#[ignore]", text: "#[ignore", extensions: RUST },
    Marker { name: "#[should_panic]", text: "#[should_panic", extensions: RUST },
    // Go
    Marker { name: "t.Skip()", text: ".Skip(", extensions: GO },
    Marker { name: "t.Skipf()", text: ".Skipf(", extensions: GO },
    Marker { name: "t.SkipNow()", text: ".SkipNow(", extensions: GO },
    // jest, vitest, mocha, jasmine, node:test
    Marker { name: "describe.skip", text: "describe.skip", extensions: JS },
    Marker { name: "describe.only", text: "describe.only", extensions: JS },
    Marker { name: "describe.todo", text: "describe.todo", extensions: JS },
    Marker { name: "it.skip", text: "it.skip", extensions: JS },
    Marker { name: "it.only", text: "it.only", extensions: JS },
    Marker { name: "it.todo", text: "it.todo", extensions: JS },
    Marker { name: "it.fails", text: "it.fails", extensions: JS },
    Marker { name: "test.skip", text: "test.skip", extensions: JS },
    Marker { name: "test.only", text: "test.only", extensions: JS },
    Marker { name: "test.todo", text: "test.todo", extensions: JS },
    Marker { name: "test.fails", text: "test.fails", extensions: JS },
    Marker { name: "context.skip", text: "context.skip", extensions: JS },
    Marker { name: "suite.skip", text: "suite.skip", extensions: JS },
    Marker { name: "xdescribe", text: "xdescribe(", extensions: JS },
    Marker { name: "xit", text: "xit(", extensions: JS },
    Marker { name: "xtest", text: "xtest(", extensions: JS },
    Marker { name: "fdescribe", text: "fdescribe(", extensions: JS },
    Marker { name: "fit", text: "fit(", extensions: JS },
    Marker { name: "this.skip()", text: "this.skip(", extensions: JS },
    Marker { name: "t.skip()", text: "t.skip(", extensions: JS },
    Marker { name: "t.todo()", text: "t.todo(", extensions: JS },
    Marker { name: "{ skip: true }", text: "skip: true", extensions: JS },
    Marker { name: "{ todo: true }", text: "todo: true", extensions: JS },
    Marker { name: "{ only: true }", text: "only: true", extensions: JS },
    // RSpec
    Marker { name: "xit", text: "xit ", extensions: RUBY },
    Marker { name: "xdescribe", text: "xdescribe ", extensions: RUBY },
    Marker { name: "xcontext", text: "xcontext ", extensions: RUBY },
    Marker { name: "skip", text: "skip ", extensions: RUBY },
    Marker { name: "skip", text: "skip(", extensions: RUBY },
    Marker { name: "pending", text: "pending ", extensions: RUBY },
    Marker { name: "pending", text: "pending(", extensions: RUBY },
    Marker { name: "focus", text: ":focus", extensions: RUBY },
    Marker { name: "focus", text: "focus: true", extensions: RUBY },
    // PHPUnit
    Marker { name: "markTestSkipped()", text: "markTestSkipped(", extensions: PHP },
    Marker { name: "markTestIncomplete()", text: "markTestIncomplete(", extensions: PHP },
    // bats
    Marker { name: "skip", text: "skip", extensions: BATS },
];

/// Skip markers added to one file since the loop started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkipMarker {
    pub path: String,
    pub marker: String,
    pub added: u32,
}

impl fmt::Display for SkipMarker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.added == 1 {
            write!(f, "{}: {}", self.path, self.marker)
        } else {
            write!(f, "{}: {} ×{}", self.path, self.marker, self.added)
        }
    }
}

/// The skip markers added since the loop started. In git: every changed source file of the
/// working tree (the tree `now`) against the tree at start (`baseline`). Outside git, or without
/// those trees: the oracle's files against the originals saved at start in `originals`.
pub(crate) fn since_start(
    worktree: &WorkTree,
    trees: Option<(&str, &str)>,
    cwd: &Path,
    oracle_files: &BTreeMap<String, String>,
    originals: &Path,
) -> Vec<SkipMarker> {
    let read = |path: &Path| {
        bounded_read::read(path, MAX_SCANNED_BYTES as u64 + 1).ok().filter(|b| b.len() <= MAX_SCANNED_BYTES)
    };
    let mut markers = Vec::new();
    match trees {
        Some((baseline, now)) if worktree.is_git() => {
            let Ok(changed) = worktree.changed_files(baseline, now) else { return markers };
            let scanned: Vec<String> =
                changed.into_iter().filter(|p| is_scanned(p)).take(MAX_FILES).collect();
            let Ok(before) = worktree.files_at(baseline, &scanned, MAX_SCANNED_BYTES) else { return markers };
            for (path, before) in scanned.iter().zip(before) {
                let absolute = worktree.root().join(path);
                let Some(after) = read(&absolute) else { continue };
                let shown = relative_to(cwd, &absolute).unwrap_or_else(|| path.clone());
                markers.extend(added(&shown, before.as_deref(), &after));
            }
        }
        _ => {
            for path in oracle_files.keys().filter(|p| is_scanned(p)).take(MAX_FILES) {
                let (Some(before), Some(after)) = (read(&originals.join(path)), read(&cwd.join(path))) else {
                    continue;
                };
                markers.extend(added(path, Some(&before), &after));
            }
        }
    }
    markers
}

/// Whether markers are looked for in `path` at all.
pub(crate) fn is_scanned(path: &str) -> bool {
    let extension = path.rsplit_once('.').map_or("", |(_, e)| e);
    MARKERS.iter().any(|m| m.extensions.contains(&extension))
}

/// The markers `after` holds beyond those `before` held (`None`: the file is new), for a file
/// at `path`.
pub(crate) fn added(path: &str, before: Option<&[u8]>, after: &[u8]) -> Vec<SkipMarker> {
    let extension = path.rsplit_once('.').map_or("", |(_, e)| e);
    let was = before.map(|b| counts(extension, b)).unwrap_or_default();
    let now = counts(extension, after);
    now.into_iter()
        .filter_map(|(marker, n)| {
            let before = was.iter().find(|(m, _)| *m == marker).map_or(0, |(_, n)| *n);
            (n > before).then(|| SkipMarker {
                path: path.to_string(),
                marker: marker.to_string(),
                added: n - before,
            })
        })
        .collect()
}

/// How many lines of a file hold each marker, in marker order.
fn counts(extension: &str, bytes: &[u8]) -> Vec<(&'static str, u32)> {
    let markers: Vec<&Marker> = MARKERS.iter().filter(|m| m.extensions.contains(&extension)).collect();
    let mut counts: Vec<(&'static str, u32)> = Vec::new();
    if markers.is_empty() || bytes.len() > MAX_SCANNED_BYTES {
        return counts;
    }
    let text = String::from_utf8_lossy(bytes);
    for line in text.lines() {
        let Some(marker) = markers.iter().find(|m| holds(line, m, extension)) else { continue };
        match counts.iter_mut().find(|(name, _)| *name == marker.name) {
            Some((_, n)) => *n += 1,
            None => counts.push((marker.name, 1)),
        }
    }
    counts
}

/// Whether `line` holds `marker` as a token of its own: not the tail of a longer name
/// (`unfit(` is not `fit(`, `@skipped` is not `@skip`).
fn holds(line: &str, marker: &Marker, extension: &str) -> bool {
    if extension == "bats" {
        // bats' `skip` is a command at the start of a line.
        let trimmed = line.trim_start();
        return trimmed == "skip" || trimmed.starts_with("skip ") || trimmed.starts_with("skip\t");
    }
    let text = marker.text;
    let mut from = 0;
    while let Some(at) = line[from..].find(text) {
        let start = from + at;
        let end = start + text.len();
        let before_ok = line[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !is_name_char(c) || text.starts_with(['.', '@', '#', ':']));
        let last = text.chars().next_back().unwrap_or(' ');
        let after_ok = !is_name_char(last) || line[end..].chars().next().is_none_or(|c| !is_name_char(c));
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(path: &str, before: Option<&str>, after: &str) -> Vec<String> {
        added(path, before.map(str::as_bytes), after.as_bytes()).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn python_markers() {
        let before = "import pytest\n\ndef test_a():\n    assert f() == 1\n";
        let after = "import pytest\n\n@pytest.mark.skip(reason='later')\ndef test_a():\n    assert f() == 1\n\n\
                     @pytest.mark.xfail\ndef test_b():\n    pass\n\n@pytest.mark.skipif(True, reason='x')\ndef test_c(): pass\n";
        assert_eq!(
            names("tests/test_calc.py", Some(before), after),
            [
                "tests/test_calc.py: @pytest.mark.skip",
                "tests/test_calc.py: @pytest.mark.xfail",
                "tests/test_calc.py: @pytest.mark.skipif"
            ]
        );
        let unit = "class T(unittest.TestCase):\n    @unittest.skip('no')\n    def test_a(self):\n        self.skipTest('x')\n\n\
                    @unittest.skipIf(True, 'y')\n    def test_b(self): raise unittest.SkipTest('z')\n    @unittest.expectedFailure\n    def test_c(self): pass\n";
        assert_eq!(
            names("test_t.py", Some(""), unit),
            [
                "test_t.py: @unittest.skip",
                "test_t.py: skipTest()",
                "test_t.py: @unittest.skipIf",
                "test_t.py: SkipTest",
                "test_t.py: @unittest.expectedFailure"
            ]
        );
    }

    #[test]
    fn markers_in_other_languages() {
        assert_eq!(
            names("src/lib.rs", Some("#[test]\nfn a() {}\n"), "#[test]\n#[ignore]\nfn a() {}\n"),
            ["src/lib.rs: #[ignore]"]
        );
        assert_eq!(
            names("src/lib.rs", None, "#[test]\n#[should_panic]\nfn a() {}\n"),
            ["src/lib.rs: #[should_panic]"]
        );
        assert_eq!(
            names("calc_test.go", Some(""), "func TestA(t *testing.T) {\n\tt.Skip(\"later\")\n}\n"),
            ["calc_test.go: t.Skip()"]
        );
        let js = "describe.skip('a', () => {});\nit.only('b', () => {});\ntest.todo('c');\nxit('d', () => {});\n\
                  test('e', { skip: true }, () => {});\nfit('f', () => {});\n";
        assert_eq!(
            names("test/calc.test.js", Some(""), js),
            [
                "test/calc.test.js: describe.skip",
                "test/calc.test.js: it.only",
                "test/calc.test.js: test.todo",
                "test/calc.test.js: xit",
                "test/calc.test.js: { skip: true }",
                "test/calc.test.js: fit"
            ]
        );
        assert_eq!(
            names("spec/calc_spec.rb", Some(""), "  xit 'adds' do\n  end\n  it 'b' do\n    skip 'later'\n"),
            ["spec/calc_spec.rb: xit", "spec/calc_spec.rb: skip"]
        );
        assert_eq!(
            names("tests/CalcTest.php", Some(""), "$this->markTestSkipped('x');\n"),
            ["tests/CalcTest.php: markTestSkipped()"]
        );
        assert_eq!(
            names("test/calc.bats", Some(""), "@test \"a\" {\n  skip \"later\"\n}\n"),
            ["test/calc.bats: skip"]
        );
    }

    #[test]
    fn markers_already_there_are_not_added_and_removed_ones_are_not_reported() {
        let two = "@pytest.mark.skip\ndef test_a(): pass\n@pytest.mark.skip\ndef test_b(): pass\n";
        let one = "@pytest.mark.skip\ndef test_a(): pass\ndef test_b(): pass\n";
        assert!(names("t.py", Some(two), two).is_empty());
        assert!(names("t.py", Some(two), one).is_empty());
        assert_eq!(names("t.py", Some(one), two), ["t.py: @pytest.mark.skip"]);
    }

    #[test]
    fn names_that_only_contain_a_marker_do_not_count() {
        let code = "def unfit(x):\n    return benefit(x)\nskip_count = 0\nmy_test.skipped = 1\nsplit(', ')\n";
        assert!(names("a.py", Some(""), code).is_empty(), "{:?}", names("a.py", Some(""), code));
        let js = "const outfit = benefit(1);\nconst suitcase = 2;\nhabit(3);\n";
        assert!(names("a.js", Some(""), js).is_empty(), "{:?}", names("a.js", Some(""), js));
        assert!(names("a.bats", Some(""), "echo skip\nskipped=1\n").is_empty());
    }

    #[test]
    fn in_git_changed_and_new_files_are_compared_with_the_tree_at_start() {
        use crate::worktree::testing::{repo, write};
        let dir = repo(&[
            ("tests/test_calc.py", "def test_add():\n    assert add(2, 3) == 5\n"),
            ("src/lib.rs", "#[test]\n#[ignore]\nfn slow() {}\n"),
            ("docs/notes.md", "it.skip(\n"),
        ]);
        let cwd = dir.path();
        let tree = WorkTree::open(cwd);
        let baseline = tree.tree_id().unwrap();
        write(
            cwd,
            "tests/test_calc.py",
            "import pytest\n\n@pytest.mark.skip\ndef test_add():\n    assert add(2, 3) == 5\n",
        );
        write(cwd, "tests/test_new.py", "import pytest\n\n@pytest.mark.xfail\ndef test_b():\n    pass\n");
        write(cwd, "src/lib.rs", "#[test]\nfn slow() {}\n");
        write(cwd, "docs/notes.md", "it.skip(\nit.skip(\n");
        let now = tree.tree_id().unwrap();
        let found: Vec<String> =
            since_start(&tree, Some((&baseline, &now)), cwd, &BTreeMap::new(), Path::new("/nonexistent"))
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(found, ["tests/test_calc.py: @pytest.mark.skip", "tests/test_new.py: @pytest.mark.xfail"]);
    }

    #[test]
    fn outside_git_the_checks_files_are_compared_with_their_saved_originals() {
        let dir = tempfile::tempdir().unwrap();
        let (cwd, originals) = (dir.path().join("project"), dir.path().join("originals"));
        for (root, content) in [(&cwd, "it('a', () => {});\n"), (&originals, "it('a', () => {});\n")] {
            std::fs::create_dir_all(root.join("test")).unwrap();
            std::fs::write(root.join("test/a.test.js"), content).unwrap();
        }
        std::fs::write(cwd.join("test/a.test.js"), "it.only('a', () => {});\n").unwrap();
        let files = BTreeMap::from([("test/a.test.js".to_string(), "sha256:…".to_string())]);
        let found = since_start(&WorkTree::open(&cwd), None, &cwd, &files, &originals);
        assert_eq!(found.iter().map(ToString::to_string).collect::<Vec<_>>(), ["test/a.test.js: it.only"]);
    }

    #[test]
    fn invalid_utf8_crlf_and_repeated_markers_on_one_line() {
        let bytes = b"\xff\xfe@pytest.mark.skip\r\ndef test_a(): pass\r\n";
        let found: Vec<String> = added("t.py", Some(b""), bytes).iter().map(ToString::to_string).collect();
        assert_eq!(found, ["t.py: @pytest.mark.skip"]);
        // One line counts once, whatever it repeats.
        let line = format!("{}\n", "it.skip(".repeat(10_000));
        assert_eq!(names("a.test.js", Some(""), &line), ["a.test.js: it.skip"]);
        assert!(names("a.test.js", None, "").is_empty());
    }

    #[test]
    fn other_files_and_huge_files_are_not_searched() {
        assert!(!is_scanned("README.md"));
        assert!(is_scanned("tests/test_calc.py"));
        assert!(names("README.md", Some(""), "it.skip(\n").is_empty());
        let huge = format!("{}\n@pytest.mark.skip\n", "x".repeat(MAX_SCANNED_BYTES));
        assert!(names("t.py", Some(""), &huge).is_empty());
    }
}
