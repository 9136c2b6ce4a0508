//! The windows workflow (`.github/workflows/windows.yml`) runs natively what `scripts/test-windows`
//! runs under Wine. It cannot run here, so it is validated against the GitHub workflow schema and
//! checked to run the same test targets, the ignored tests that need Git Bash and PowerShell
//! included.

use crate::release_workflow::assert_valid_github_workflow;
use crate::util::repo;

const WORKFLOW: &str = ".github/workflows/windows.yml";

#[test]
fn the_windows_workflow_is_a_valid_github_workflow() {
    assert_valid_github_workflow(WORKFLOW);
}

#[test]
fn the_windows_workflow_runs_what_wine_runs_natively_and_what_wine_cannot() {
    let workflow = std::fs::read_to_string(repo().join(WORKFLOW)).unwrap();
    let script = std::fs::read_to_string(repo().join("scripts/test-windows")).unwrap();
    assert!(workflow.contains("runs-on: windows-2022"), "{workflow}");
    assert!(workflow.contains("--target x86_64-pc-windows-msvc"), "the msvc build users install");
    for target in ["-p for-loop-core --lib", "-p for-loop --test integration"] {
        assert!(script.contains(target), "scripts/test-windows does not build `{target}`");
    }
    assert!(workflow.contains("run: scripts/test-windows --native"), "{workflow}");
    assert!(
        script.contains("--test integration -- --include-ignored"),
        "natively the tests Wine ignores (Git Bash, PowerShell) must run"
    );
    let windows_tests = std::fs::read_to_string(repo().join("tests/windows.rs")).unwrap();
    assert_eq!(
        windows_tests.matches("#[ignore").count(),
        3,
        "only Git Bash and PowerShell are left to the workflow"
    );
}
