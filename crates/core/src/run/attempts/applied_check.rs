//! `run --apply` trusts nothing the attempt says: the winner's change is judged again where it
//! is going to live, by the winner's own verify in the user's working tree. An attempt passed
//! in a linked work tree under the store; code that behaves only there (a `.git` file, the
//! store's path) fails here, and the change is taken back.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::checks::VerifySpec;
use crate::checks::sandbox::verify_sandbox;
use crate::state::LoopState;

/// The winner's check, as it will run in the user's working tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppliedCheck {
    /// The commands that judge the change: `--verify`, and in a plan loop every story's check.
    checks: Vec<String>,
    timeout: Duration,
    /// The user's repository.
    repo: PathBuf,
    /// Where verify runs: the user's repository, at the attempt's place in it.
    cwd: PathBuf,
    /// The files the check stands on, relative to the repository's top level.
    oracle: Vec<String>,
    /// bubblewrap's arguments, when verify runs sandboxed.
    sandbox: Vec<OsString>,
}

impl AppliedCheck {
    /// The check of the winner's loop `state`, whose work tree was `tree`, moved to the user's
    /// repository `repo`.
    pub(crate) fn of(state: &LoopState, tree: &Path, repo: &Path) -> AppliedCheck {
        let prefix = state.meta.cwd.strip_prefix(tree).map(Path::to_path_buf).unwrap_or_default();
        let in_repo = |file: &String| prefix.join(file).to_string_lossy().into_owned();
        AppliedCheck {
            checks: checks_of(state),
            timeout: Duration::from_secs(state.meta.settings.verify_timeout_secs.max(1)),
            repo: repo.to_path_buf(),
            cwd: repo.join(&prefix),
            oracle: state.meta.oracle.files.keys().map(in_repo).collect(),
            sandbox: Vec::new(),
        }
    }

    /// The same check run in verify's sandbox when `available`: the working tree and `/tmp`
    /// writable, `read_only` (the store, for-loop's files), git's hooks and config and the
    /// check's own files read-only, and no way out to the process that applied the change.
    pub(crate) fn sandboxed(mut self, available: bool, mut read_only: Vec<PathBuf>) -> AppliedCheck {
        if available {
            read_only.extend(self.oracle.iter().map(|file| self.repo.join(file)));
            self.sandbox = verify_sandbox(&self.cwd, &read_only);
        }
        self
    }

    /// The files among `changed` (repository paths) that the check stands on: a change to
    /// them is a change of the judge, never applied.
    pub(crate) fn judged_by_itself(&self, changed: &[String]) -> Vec<String> {
        changed.iter().filter(|file| self.oracle.contains(file)).cloned().collect()
    }

    /// Runs verify in the user's working tree. `Ok`: what passed (or that there is nothing to
    /// run); `Err`: how it failed, with the end of its output.
    pub(crate) fn run(&self) -> Result<String, String> {
        if self.checks.is_empty() {
            return Ok("the winner's loop has no verify command to run here".into());
        }
        let passed: Vec<String> =
            self.checks.iter().map(|command| self.run_one(command)).collect::<Result<_, _>>()?;
        Ok(passed.join(", "))
    }

    fn run_one(&self, command: &str) -> Result<String, String> {
        let spec = VerifySpec {
            command: command.to_string(),
            cwd: self.cwd.clone(),
            timeout: self.timeout,
            sandbox: self.sandbox.clone(),
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

/// Every command that judged the winner's loop, each once: every story's check in a plan loop
/// (a story without one uses `--verify`), and `--verify`.
fn checks_of(state: &LoopState) -> Vec<String> {
    let verify = state.meta.settings.verify.as_deref();
    let stories = state.meta.settings.plan.as_ref().map_or(0, |plan| plan.stories.len());
    let plan = state.meta.settings.plan.as_ref();
    let mut checks: Vec<String> = Vec::new();
    let all = (0..stories).filter_map(|i| plan.and_then(|p| p.check(i, verify))).chain(verify);
    for check in all {
        if !checks.iter().any(|c| c == check) {
            checks.push(check.to_string());
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(verify: &str, cwd: &Path, oracle: &[&str]) -> AppliedCheck {
        AppliedCheck {
            checks: vec![verify.into()],
            timeout: Duration::from_secs(30),
            repo: cwd.to_path_buf(),
            cwd: cwd.to_path_buf(),
            oracle: oracle.iter().map(ToString::to_string).collect(),
            sandbox: Vec::new(),
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

    #[test]
    fn in_its_sandbox_the_applied_code_cannot_write_the_check_or_reach_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("check.sh"), "exit 1\n").unwrap();
        let attack =
            format!("echo 'exit 0' > check.sh; touch {}/planted; echo ok > out.txt", store.path().display());
        let sandboxed = check(&attack, dir.path(), &["check.sh"]).sandboxed(true, vec![store.path().into()]);
        let _ = sandboxed.run();
        assert_eq!(std::fs::read_to_string(dir.path().join("check.sh")).unwrap(), "exit 1\n");
        assert!(!store.path().join("planted").exists());
        assert!(dir.path().join("out.txt").exists(), "the working tree must stay writable");
        let plain = check("true", dir.path(), &[]).sandboxed(false, vec![]);
        assert!(plain.sandbox.is_empty());
    }

    #[test]
    fn a_plan_loop_is_judged_by_every_storys_check_and_verify_each_once() {
        use crate::checks::plan::{PlanSettings, Story};
        let story = |id: &str, verify: Option<&str>| Story {
            id: id.into(),
            title: format!("story {id}"),
            details: String::new(),
            verify: verify.map(Into::into),
            done: false,
            scope: Vec::new(),
        };
        let mut state = crate::state::sample();
        state.meta.settings.verify = Some("cargo test".into());
        state.meta.settings.plan = Some(PlanSettings {
            file: "PLAN.md".into(),
            stories: vec![story("1", Some("test -f a")), story("2", None), story("3", Some("test -f a"))],
            story_iterations: None,
            no_tick: false,
        });
        assert_eq!(checks_of(&state), ["test -f a", "cargo test"]);
        state.meta.settings.verify = None;
        assert_eq!(checks_of(&state), ["test -f a"]);
        state.meta.settings.plan = None;
        assert!(checks_of(&state).is_empty());

        let dir = tempfile::tempdir().unwrap();
        let mut both = check("true", dir.path(), &[]);
        both.checks.push("echo 'FAIL: story 2'; exit 1".into());
        let error = both.run().unwrap_err();
        assert!(error.contains("FAIL: story 2"), "the second check runs too: {error}");
    }
}
