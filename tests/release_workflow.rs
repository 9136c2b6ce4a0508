//! The release workflow (`.github/workflows/release.yml`) cannot run here, so it is checked:
//! against the GitHub workflow schema with a real validator (`check-jsonschema`, installed by
//! `scripts/test` into `tests/tools/`), and for doing its builds only through `scripts/release`,
//! the subcommands `scripts/release --local` runs and the release end-to-end test exercises.
//! `scripts/release assemble` itself runs here on a stand-in binary: the repository a release
//! is published from ends up in its install lines.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

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
        "scripts/release assemble --repository \"$GITHUB_REPOSITORY\" dist marketplace",
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
    let launcher = std::fs::read_to_string(repo().join("plugin/claude-code/scripts/loop-hook")).unwrap();
    for platform in ["linux-x86_64", "linux-aarch64", "macos-x86_64", "macos-aarch64", "windows-x86_64"] {
        assert!(launcher.contains(platform), "the launcher does not know {platform}");
    }
}

/// `scripts/release assemble` on a stand-in binary for this machine, writing to `dir`, with
/// `--repository REPO` when given.
fn assemble(repository: Option<&str>, dir: &Path) -> std::process::Output {
    let bins = dir.parent().unwrap().join("bins");
    let binary = bins.join(crate::packaging::platform()).join("loop-hook");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    std::fs::write(&binary, "#!/bin/sh\necho stand-in\n").unwrap();
    let mut cmd = Command::new(repo().join("scripts/release"));
    cmd.arg("assemble");
    if let Some(repository) = repository {
        cmd.args(["--repository", repository]);
    }
    cmd.arg(&bins).arg(dir).output().unwrap()
}

/// Every file of a release that still names the placeholder.
fn placeholders(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if std::fs::read(&path).unwrap().windows(10).any(|w| w == b"OWNER/REPO") {
                found.push(path);
            }
        }
    }
    found
}

fn readme_install_line(dir: &Path) -> String {
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    readme.lines().find(|l| l.starts_with("| Claude Code, release")).unwrap().to_string()
}

/// The published release names the repository the workflow ran in, in its README's install
/// line, its docs and its marketplace entry, and no file in it keeps the placeholder.
#[test]
fn a_release_names_the_repository_it_is_published_from() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("marketplace");
    let output = assemble(Some("acme-labs/for-loop.rs"), &dir);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        readme_install_line(&dir).contains(
            "`claude plugin marketplace add acme-labs/for-loop.rs@marketplace`, then `claude plugin install"
        ),
        "{}",
        readme_install_line(&dir)
    );
    assert!(placeholders(&dir).is_empty(), "{:?}", placeholders(&dir));
    let marketplace: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".claude-plugin/marketplace.json")).unwrap())
            .unwrap();
    let entry = &marketplace["plugins"][0];
    assert_eq!(entry["repository"], "https://github.com/acme-labs/for-loop.rs");
    assert_eq!(entry["source"], "./plugin/claude-code");
    let sums = std::fs::read_to_string(dir.join("plugin/claude-code/bin/SHA256SUMS")).unwrap();
    assert!(sums.ends_with(&format!("  {}/loop-hook\n", crate::packaging::platform())), "{sums}");
}

/// A release built here (`scripts/release --local`) names the directory it was written to.
#[test]
fn a_local_release_names_its_directory() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("marketplace");
    let output = assemble(None, &dir);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let home = dir.canonicalize().unwrap();
    assert!(
        readme_install_line(&dir)
            .contains(&format!("`claude plugin marketplace add {}`, then", home.display())),
        "{}",
        readme_install_line(&dir)
    );
    assert!(placeholders(&dir).is_empty(), "{:?}", placeholders(&dir));
    let marketplace = std::fs::read_to_string(dir.join(".claude-plugin/marketplace.json")).unwrap();
    assert!(!marketplace.contains("\"repository\""), "{marketplace}");
}

#[test]
fn a_repository_that_is_not_owner_slash_repo_is_refused() {
    for bad in [
        "",
        "acme",
        "acme/for-loop/extra",
        "acme/for loop",
        "acme|x/y",
        "acme/y&z",
        "../x",
        "acme/..",
        "acme/",
    ] {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("marketplace");
        let output = assemble(Some(bad), &dir);
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{bad:?} was taken");
        assert!(said.contains("--repository"), "{bad:?}: {said}");
        assert!(!dir.exists(), "{bad:?} left a release behind");
    }
}

/// In the source tree the install line says what OWNER/REPO is and how to do without it, in
/// the words `scripts/release` removes when it fills in the real name.
#[test]
fn the_source_readme_says_what_owner_repo_stands_for() {
    let line = readme_install_line(&repo());
    assert!(line.contains("`claude plugin marketplace add OWNER/REPO@marketplace`"), "{line}");
    let note =
        " (OWNER/REPO: the GitHub repository for-loop is published from; from a clone, use the next row)";
    assert!(line.contains(note), "{line}");
    let release = std::fs::read_to_string(repo().join("scripts/release")).unwrap();
    assert!(release.contains(&format!("placeholder_note='{note}'")), "scripts/release removes another note");
}
