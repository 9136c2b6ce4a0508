//! The test suite's rules on a change from one tree to another, as a loop that protects its tests
//! applies them at a stop: a runner file (a `conftest.py`, a `.pth`, a jest setup file, ...)
//! added, edited or deleted is a change to the check; so is a test file edited or deleted; a new
//! test file is welcome. The merge queue judges a merge by these rules, on the files the merge
//! changes, so that what a session loop refuses cannot land through a backlog either.

use crate::checks::oracle::test_suite::{is_artifact, is_runner_file, is_test_file};
use crate::checks::oracle::{ChangeKind, OracleChange};

/// Of `changed` (paths from the suite's root, each added, modified or deleted), the changes a
/// loop that protects its tests does not count a pass with, in the order given.
pub(crate) fn suite_rules(changed: &[OracleChange]) -> Vec<OracleChange> {
    changed
        .iter()
        .filter(|change| !is_artifact(&change.path))
        .filter(|change| {
            is_runner_file(&change.path) || (is_test_file(&change.path) && change.kind != ChangeKind::Added)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, kind: ChangeKind) -> OracleChange {
        OracleChange { path: path.into(), kind }
    }

    #[test]
    fn runner_files_in_any_way_and_tests_edited_or_deleted_break_the_rules() {
        let changed = [
            change("src/calc.py", ChangeKind::Modified),
            change("tests/test_new.py", ChangeKind::Added),
            change("conftest.py", ChangeKind::Added),
            change("tests/test_calc.py", ChangeKind::Modified),
            change("tests/test_old.py", ChangeKind::Deleted),
            change("lib/python3.12/site-packages/hook.pth", ChangeKind::Added),
            change("pytest.ini", ChangeKind::Deleted),
            change("tests/__pycache__/test_calc.cpython-312.pyc", ChangeKind::Modified),
        ];
        let broken: Vec<String> = suite_rules(&changed).into_iter().map(|c| c.path).collect();
        assert_eq!(
            broken,
            [
                "conftest.py",
                "tests/test_calc.py",
                "tests/test_old.py",
                "lib/python3.12/site-packages/hook.pth",
                "pytest.ini"
            ]
        );
        assert!(suite_rules(&[]).is_empty());
    }
}
