//! `run --apply` trusts nothing the attempt says: the winner's change is judged again where it
//! is going to live, by the winner's own verify in the user's working tree. An attempt passed
//! in a linked work tree under the store; code that behaves only there (a `.git` file, the
//! store's path) fails here, and the change is taken back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::checks::verify::VerifySpec;
use crate::store::state::LoopState;

/// The winner's check, as it will run in the user's working tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppliedCheck {
    verify: Option<String>,
    timeout: Duration,
    /// Where verify runs: the user's repository, at the attempt's place in it.
    cwd: PathBuf,
    /// The files the check stands on, relative to the repository's top level.
    oracle: Vec<String>,
}

impl AppliedCheck {
    /// The check of the winner's loop `state`, whose work tree was `tree`, moved to the user's
    /// repository `repo`.
    pub(crate) fn of(state: &LoopState, tree: &Path, repo: &Path) -> AppliedCheck {
        let prefix = state.meta.cwd.strip_prefix(tree).map(Path::to_path_buf).unwrap_or_default();
        let in_repo = |file: &String| prefix.join(file).to_string_lossy().into_owned();
        AppliedCheck {
            verify: state.meta.settings.verify.clone(),
            timeout: Duration::from_secs(state.meta.settings.verify_timeout_secs.max(1)),
            cwd: repo.join(&prefix),
            oracle: state.meta.oracle.files.keys().map(in_repo).collect(),
        }
    }

    /// The files among `changed` (repository paths) that the check stands on: a change to
    /// them is a change of the judge, never applied.
    pub(crate) fn judged_by_itself(&self, changed: &[String]) -> Vec<String> {
        changed.iter().filter(|file| self.oracle.contains(file)).cloned().collect()
    }

    /// Runs verify in the user's working tree. `Ok`: what passed (or that there is nothing to
    /// run); `Err`: how it failed, with the end of its output.
    pub(crate) fn run(&self) -> Result<String, String> {
        let Some(command) = &self.verify else {
            return Ok("the winner's loop has no verify command to run here".into());
        };
        let spec = VerifySpec {
            command: command.clone(),
            cwd: self.cwd.clone(),
            timeout: self.timeout,
            sandbox: Vec::new(),
        };
        match spec.run() {
            Ok(outcome) if outcome.passed() => Ok(format!("`{command}` passes in your working tree")),
            Ok(outcome) => Err(format!(
                "`{command}` fails in your working tree ({}):\n{}",
                outcome.describe(),
                outcome.output.last_lines(12, 2_000)
            )),
            Err(e) => Err(format!("`{command}` could not run in your working tree: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(verify: &str, cwd: &Path, oracle: &[&str]) -> AppliedCheck {
        AppliedCheck {
            verify: Some(verify.into()),
            timeout: Duration::from_secs(30),
            cwd: cwd.to_path_buf(),
            oracle: oracle.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn a_failing_verify_says_how_and_a_change_to_the_check_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let failing = check("echo 'FAIL: nope'; exit 3", dir.path(), &["check.sh"]);
        let error = failing.run().unwrap_err();
        assert!(
            error.contains("fails in your working tree (exit 3)") && error.contains("FAIL: nope"),
            "{error}"
        );
        assert!(check("true", dir.path(), &[]).run().unwrap().contains("passes"));
        let changed = ["src/a.rs".to_string(), "check.sh".into()];
        assert_eq!(failing.judged_by_itself(&changed), ["check.sh"]);
        let gone = check("true", &dir.path().join("gone"), &[]).run().unwrap_err();
        assert!(gone.contains("could not run"), "{gone}");
    }
}
