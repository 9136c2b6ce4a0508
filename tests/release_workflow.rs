//! The release workflow (`.github/workflows/release.yml`) cannot run here, so it is checked:
//! against the GitHub workflow schema with a real validator (`check-jsonschema`, installed by
//! `scripts/test` into `tests/tools/`), and for doing its builds only through `scripts/release`,
//! the subcommands `scripts/release --local` runs and the release end-to-end test exercises.

use std::process::Command;

use crate::util::repo;

const WORKFLOW: &str = ".github/workflows/release.yml";

#[test]
fn the_release_workflow_is_a_valid_github_workflow() {
    assert_valid_github_workflow(WORKFLOW);
}

/// Validates the workflow at `path` (in the repository) against the GitHub workflow schema with
/// `check-jsonschema`; a missing validator fails the test.
pub(crate) fn assert_valid_github_workflow(path: &str) {
    let tool = repo().join("tests/tools/.venv/bin/check-jsonschema");
    assert!(
        tool.exists(),
        "{} is missing: scripts/test installs it (python3 -m venv tests/tools/.venv, then pip install check-jsonschema)",
        tool.display()
    );
    let output = Command::new(&tool)
        .args(["--builtin-schema", "vendor.github-workflows"])
        .arg(repo().join(path))
        .output()
        .unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && said.contains("ok -- validation done"), "{path}: {said}");
}

#[test]
fn the_release_workflow_builds_only_through_scripts_release() {
    let workflow = std::fs::read_to_string(repo().join(WORKFLOW)).unwrap();
    for step in [
        "scripts/release versions",
        "scripts/release build --target \"${{ matrix.target }}\" dist",
        "scripts/release assemble dist tree",
        "scripts/release assemble dist marketplace",
        "scripts/release commit marketplace",
    ] {
        assert!(workflow.contains(step), "the workflow lacks `{step}`");
    }
    assert!(!workflow.contains("cargo build"), "the workflow builds outside scripts/release");
    let release = std::fs::read_to_string(repo().join("scripts/release")).unwrap();
    for (target, platform) in [
        ("x86_64-unknown-linux-musl", "linux-x86_64"),
        ("aarch64-unknown-linux-musl", "linux-aarch64"),
        ("x86_64-apple-darwin", "macos-x86_64"),
        ("aarch64-apple-darwin", "macos-aarch64"),
        ("x86_64-pc-windows-msvc", "windows-x86_64"),
    ] {
        assert!(
            workflow.contains(&format!("target: {target}, platform: {platform}")),
            "the workflow does not build {target} as {platform}"
        );
        assert!(release.contains(platform), "scripts/release does not know {platform}");
    }
    let launcher = std::fs::read_to_string(repo().join("scripts/loop-hook")).unwrap();
    for platform in ["linux-x86_64", "linux-aarch64", "macos-x86_64", "macos-aarch64", "windows-x86_64"] {
        assert!(launcher.contains(platform), "the launcher does not know {platform}");
    }
}
