//! `scripts/test-latest-clients` and the weekly workflow that runs it. The script's own logic (its
//! arguments, which tests belong to which host, the line it prints per host, its exit status) is
//! tested offline: `--no-install` on a clients directory laid out as npm lays it out, with a
//! stand-in for cargo (`$CARGO`) that lists the tests it is given and fails the ones it is told
//! to. What the newest CLIs really do is the script's job, run by hand or by the workflow.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use crate::release_workflow::assert_valid_github_workflow;
use crate::util::repo;

const WORKFLOW: &str = ".github/workflows/latest-clients.yml";

/// Stands in for cargo: `build` succeeds, `nextest list` lists `$FAKE/tests.txt` as nextest's
/// oneline format does, and `nextest run -E EXPR` reports each test named `test(=NAME)` in EXPR as
/// nextest does, failing those in `$FAKE/fails.txt`; with `$FAKE/crash` it exits 101 saying
/// nothing. Each run appends `FOR_LOOP_CLIENTS_DIR|EXPR` to `$FAKE/runs.txt`.
const FAKE_CARGO: &str = r#"#!/bin/sh
set -eu
case "$1 ${2:-}" in
    "build --release") exit 0 ;;
    "nextest --version") echo "cargo-nextest 0.9.0"; exit 0 ;;
    "nextest list")
        while read -r name; do echo "for-loop::integration $name"; done < "$FAKE/tests.txt"
        exit 0 ;;
    "nextest run") ;;
    *) echo "fake cargo: unexpected $*" >&2; exit 64 ;;
esac
expr=
while [ $# -gt 0 ]; do
    [ "$1" = -E ] && expr=$2
    shift
done
echo "$FOR_LOOP_CLIENTS_DIR|$expr" >> "$FAKE/runs.txt"
[ ! -e "$FAKE/crash" ] || exit 101
failed=
for name in $(printf '%s\n' "$expr" | grep -o 'test(=[^)]*)' | sed 's/^test(=//; s/)$//'); do
    if grep -qxF "$name" "$FAKE/fails.txt"; then
        echo "        FAIL [   0.012s] (1/1) for-loop::integration $name"
        failed="$failed $name"
    else
        echo "        PASS [   0.010s] (1/1) for-loop::integration $name"
    fi
done
echo "------------"
echo "     Summary [   0.020s] tests run"
for name in $failed; do
    echo "        FAIL [   0.012s] (1/1) for-loop::integration $name"
done
[ -z "$failed" ] || exit 100
"#;

/// A clients directory as npm leaves it, and the fake cargo's files.
struct Fake {
    root: TempDir,
}

impl Fake {
    /// `installed`: (package, version, executable or "" for a package without one).
    fn new(installed: &[(&str, &str, &str)], tests: &[&str], fails: &[&str]) -> Fake {
        let root = tempfile::Builder::new().prefix("for-loop-latest-").tempdir().unwrap();
        let fake = Fake { root };
        let bin = fake.clients().join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        for (package, version, executable) in installed {
            let dir = fake.clients().join("node_modules").join(package);
            std::fs::create_dir_all(&dir).unwrap();
            let manifest = format!(
                "{{\n  \"name\": \"{package}\",\n  \"version\": \"{version}\",\n  \"engines\": {{ \"node\": \">=20\" }}\n}}\n"
            );
            std::fs::write(dir.join("package.json"), manifest).unwrap();
            if !executable.is_empty() {
                write_executable(&bin.join(executable), "#!/bin/sh\nexit 0\n");
            }
        }
        write_executable(&fake.cargo(), FAKE_CARGO);
        std::fs::write(fake.root.path().join("tests.txt"), lines(tests)).unwrap();
        std::fs::write(fake.root.path().join("fails.txt"), lines(fails)).unwrap();
        fake
    }

    fn clients(&self) -> PathBuf {
        self.root.path().join("clients")
    }

    fn cargo(&self) -> PathBuf {
        self.root.path().join("cargo")
    }

    /// `scripts/test-latest-clients --no-install --dir CLIENTS ARGS` with the fake cargo.
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let mut cmd = script();
        cmd.arg("--no-install")
            .arg("--dir")
            .arg(self.clients())
            .args(args)
            .env("CARGO", self.cargo())
            .env("FAKE", self.root.path())
            // Set by the caller's scripts/test; the script must not let it pick the CLIs.
            .env("FOR_LOOP_CLAUDE", "/nonexistent/claude");
        outcome(&mut cmd)
    }

    /// What each `nextest run` was given: the clients directory and the filter expression.
    fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.path().join("runs.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn lines(items: &[&str]) -> String {
    items.iter().flat_map(|item| [*item, "\n"]).collect()
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn script() -> Command {
    let mut cmd = Command::new(repo().join("scripts/test-latest-clients"));
    cmd.env_remove("CARGO");
    cmd
}

fn outcome(cmd: &mut Command) -> (i32, String, String) {
    let output = cmd.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

const NEWEST: &[(&str, &str, &str)] = &[
    ("@anthropic-ai/claude-code", "9.1.0", "claude"),
    ("@google/gemini-cli", "9.2.0", "gemini"),
    ("@openai/codex", "9.3.0", "codex"),
    ("@github/copilot", "9.4.0", "copilot"),
    ("opencode-ai", "9.5.0", "opencode"),
    ("@qwen-code/qwen-code", "9.6.0", "qwen"),
];

const TESTS: &[&str] = &[
    "cli::not_an_end_to_end_test",
    "e2e::claude_code::a_loop",
    "e2e::demo::the_demo",
    "e2e::release::a_release",
    "e2e::run::run_with_claude_code_is_fresh",
    "e2e::gemini_cli::gemini_cli_holds",
    "e2e::run::run_with_gemini_cli_is_fresh",
    "e2e::codex::codex_holds",
    "e2e::codex::codex_trusts",
    "e2e::run::run_with_codex_is_fresh",
    "e2e::elsewhere::a_test_of_no_host",
];

#[test]
fn each_host_gets_one_line_with_its_version_and_what_broke_and_the_exit_says_so() {
    let fake = Fake::new(NEWEST, TESTS, &["e2e::codex::codex_trusts", "e2e::run::run_with_codex_is_fresh"]);
    let (code, stdout, stderr) = fake.run(&[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "claude-code  9.1.0      passed (4 tests)\n\
         gemini-cli   9.2.0      passed (2 tests)\n\
         codex        9.3.0      broke: e2e::codex::codex_trusts, e2e::run::run_with_codex_is_fresh\n\
         copilot-cli  9.4.0      no tests yet (no e2e:: test is named for it, e.g. e2e::copilot_cli::)\n\
         opencode     9.5.0      no tests yet (no e2e:: test is named for it, e.g. e2e::opencode::)\n\
         qwen-code    9.6.0      no tests yet (no e2e:: test is named for it, e.g. e2e::qwen_code::)\n\
         other        -          passed (1 test)\n",
        "{stderr}"
    );
    // One run per host with tests, each of exactly its tests, with the CLIs in the given directory.
    let clients = fake.clients().canonicalize().unwrap();
    let runs = fake.runs();
    assert_eq!(runs.len(), 4, "{runs:#?}");
    for run in &runs {
        assert!(run.starts_with(&format!("{}|binary(integration) & (", clients.display())), "{run}");
    }
    assert!(runs[2].ends_with(
        "(test(=e2e::codex::codex_holds) | test(=e2e::codex::codex_trusts) | test(=e2e::run::run_with_codex_is_fresh))"
    ));
    assert!(runs.iter().all(|run| !run.contains("cli::not_an_end_to_end_test")), "{runs:#?}");
}

#[test]
fn copilot_tests_are_picked_up_by_name_once_they_exist() {
    let mut tests = TESTS.to_vec();
    tests.extend(["e2e::copilot_cli::copilot_holds", "e2e::run::run_with_copilot_cli_is_fresh"]);
    let fake = Fake::new(NEWEST, &tests, &[]);
    let (code, stdout, stderr) = fake.run(&[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("copilot-cli  9.4.0      passed (2 tests)\n"), "{stdout}");
    assert!(fake.runs()[3].ends_with(
        "(test(=e2e::copilot_cli::copilot_holds) | test(=e2e::run::run_with_copilot_cli_is_fresh))"
    ));

    // Without its CLI installed, the host broke and its tests are not run.
    let without = Fake::new(&NEWEST[..3], &tests, &[]);
    let (code, stdout, stderr) = without.run(&[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let line = stdout.lines().find(|line| line.starts_with("copilot-cli")).unwrap();
    assert!(line.starts_with("copilot-cli  -          broke: copilot is not installed in "), "{line}");
    assert!(line.ends_with("(2 tests not run)"), "{line}");
    assert_eq!(without.runs().len(), 4, "{:#?}", without.runs());
}

#[test]
fn qwen_code_tests_are_picked_up_by_name() {
    let mut tests = TESTS.to_vec();
    tests.extend(["e2e::qwen_code::qwen_code_holds", "e2e::qwen_code::qwen_goal_baseline"]);
    let fake = Fake::new(NEWEST, &tests, &["e2e::qwen_code::qwen_goal_baseline"]);
    let (code, stdout, stderr) = fake.run(&[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("qwen-code    9.6.0      broke: e2e::qwen_code::qwen_goal_baseline\n"),
        "{stdout}"
    );
    assert!(
        fake.runs()[3].ends_with(
            "(test(=e2e::qwen_code::qwen_code_holds) | test(=e2e::qwen_code::qwen_goal_baseline))"
        )
    );
}

#[test]
fn a_run_that_fails_without_naming_a_test_is_a_break() {
    let fake = Fake::new(NEWEST, TESTS, &[]);
    std::fs::write(fake.root.path().join("crash"), "").unwrap();
    let (code, stdout, stderr) = fake.run(&[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "gemini-cli   9.2.0      broke: cargo nextest run exited 101 without naming a failed test\n"
        ),
        "{stdout}"
    );
}

#[test]
fn help_and_bad_arguments() {
    let (code, stdout, _) = outcome(script().arg("--help"));
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("Usage: scripts/test-latest-clients [--dir DIR] [--no-install]\n"),
        "{stdout}"
    );
    for args in [&["--frobnicate"][..], &["--dir"], &["--dir="]] {
        let (code, stdout, stderr) = outcome(script().args(args));
        assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.ends_with("Try: scripts/test-latest-clients --help\n"), "{args:?}: {stderr}");
    }
    let missing = tempfile::tempdir().unwrap();
    let absent = missing.path().join("absent");
    let (code, _, stderr) = outcome(script().arg("--no-install").arg("--dir").arg(&absent));
    assert_eq!(code, 1);
    assert!(stderr.contains("does not exist: leave out --no-install"), "{stderr}");
    let (code, _, stderr) =
        outcome(script().arg("--no-install").arg("--dir").arg(repo().join("tests/clients")));
    assert_eq!(code, 1);
    assert!(stderr.contains("must not be tests/clients"), "{stderr}");
}

#[test]
fn the_latest_clients_workflow_is_a_valid_github_workflow() {
    assert_valid_github_workflow(WORKFLOW);
}

/// Weekly and by hand, it runs the script, and it may read the repository and write issues, no
/// more.
#[test]
fn the_latest_clients_workflow_runs_the_script_weekly_and_may_only_write_issues() {
    let workflow = std::fs::read_to_string(repo().join(WORKFLOW)).unwrap();
    for needed in ["schedule:", "- cron: ", "workflow_dispatch:", "scripts/test-latest-clients"] {
        assert!(workflow.contains(needed), "the workflow lacks `{needed}`");
    }
    let granted: Vec<&str> = workflow
        .lines()
        .map(str::trim)
        .filter(|line| line.ends_with(": write") || line.ends_with(": read") || line.contains("write-all"))
        .collect();
    assert_eq!(granted, ["contents: read", "contents: read", "issues: write"], "{workflow}");
    assert!(workflow.contains("gh issue create") && workflow.contains("gh issue comment"));
}

#[test]
fn opencode_tests_are_picked_up_by_name() {
    let mut tests = TESTS.to_vec();
    tests.extend(["e2e::opencode::opencode_holds", "e2e::opencode::opencode_cancels"]);
    let fake = Fake::new(NEWEST, &tests, &["e2e::opencode::opencode_cancels"]);
    let (code, stdout, stderr) = fake.run(&[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("opencode     9.5.0      broke: e2e::opencode::opencode_cancels\n"), "{stdout}");
    let runs = fake.runs();
    assert!(
        runs.iter().any(|run| run
            .ends_with("(test(=e2e::opencode::opencode_cancels) | test(=e2e::opencode::opencode_holds))")),
        "{runs:#?}"
    );
}
