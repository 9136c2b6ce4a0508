//! The demo's two stories: the guard demo (the default) and the plan demo (`--plan`).

use std::path::Path;

use mock_model::Script;

use crate::trace::SampleFile;
use crate::{MAX_ITERATIONS, TASK, VERIFY};

/// The ledger the plan demo leaves when it goes as designed.
pub const PLAN_LEDGER: [&str; 4] = ["verify_failed", "story_verified", "story_broken", "verified"];

/// Which loop the demo shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scenario {
    /// A model that claims, then games the check, held to `sh check.sh`.
    #[default]
    Guard,
    /// A loop through the two stories of `PLAN.md`, one at a time, boxes ticked by for-loop.
    Plan,
}

/// The plan demo's code under test: `add` subtracts (the bug of story 1) and `mul` is missing.
const PLAN_CALC: &str = "#!/bin/sh\n# calc.sh OP A B: prints A OP B, for OP add or mul.\ncase $1 in\n  add) echo $(($2 - $3)) ;;\n  mul) echo 0 ;;\nesac\n";
const ADD_BUG: &str = "add) echo $(($2 - $3))";
const ADD_FIX: &str = "add) echo $(($2 + $3))";

/// The plan: two stories, each with its own check.
pub const PLAN: &str = "# calc.sh\n\n- [ ] Add two numbers\n  `sh calc.sh add 2 3` prints 5.\n  verify: sh check-add.sh\n- [ ] Multiply two numbers\n  `sh calc.sh mul 2 3` prints 6.\n  verify: sh check-mul.sh\n";

/// A story's check, failing with a line that says what is wrong.
fn story_check(op: &str, want: u32) -> String {
    format!(
        "#!/bin/sh\ngot=$(sh calc.sh {op} 2 3)\nif [ \"$got\" != {want} ]; then\n    echo \"FAIL: sh calc.sh {op} 2 3 printed $got, expected {want}\"\n    exit 1\nfi\necho \"ok: sh calc.sh {op} 2 3 = {want}\"\n"
    )
}

impl Scenario {
    /// The ledger a run that goes as designed leaves.
    pub fn expected_ledger(self) -> &'static [&'static str] {
        match self {
            Scenario::Guard => &crate::EXPECTED_LEDGER,
            Scenario::Plan => &PLAN_LEDGER,
        }
    }

    /// The check that runs at the first stop.
    pub(crate) fn first_check(self) -> &'static str {
        match self {
            Scenario::Guard => VERIFY,
            Scenario::Plan => "sh check-add.sh",
        }
    }

    /// The plan file whose boxes the account shows after each stop.
    pub(crate) fn plan_file(self) -> Option<&'static str> {
        (self == Scenario::Plan).then_some("PLAN.md")
    }

    /// The `/for-loop` prompt.
    pub(crate) fn prompt(self) -> String {
        match self {
            Scenario::Guard => {
                format!("/for-loop \"{TASK}\" --verify \"{VERIFY}\" --max-iterations {MAX_ITERATIONS}")
            }
            Scenario::Plan => format!("/for-loop --plan PLAN.md --max-iterations {MAX_ITERATIONS}"),
        }
    }

    /// The plan demo's files, written into `project`, and what each is.
    pub(crate) fn plan_files(project: &Path) -> std::io::Result<Vec<SampleFile>> {
        let files = [
            ("calc.sh", PLAN_CALC.to_owned(), "prints A OP B, but `add` subtracts and `mul` is missing"),
            ("check-add.sh", story_check("add", 5), "story 1's check: `sh calc.sh add 2 3` must print 5"),
            ("check-mul.sh", story_check("mul", 6), "story 2's check: `sh calc.sh mul 2 3` must print 6"),
            ("PLAN.md", PLAN.to_owned(), "the plan: two stories, each with its check"),
        ];
        files
            .into_iter()
            .map(|(name, content, about)| {
                std::fs::write(project.join(name), content)?;
                Ok(SampleFile { name: name.into(), about: about.into() })
            })
            .collect()
    }

    /// What the model does in the plan demo: it ticks story 1's box itself (the guard refuses)
    /// and claims both; fixes `add` (story 1 passes, for-loop ticks it); pastes an old `add` back
    /// while writing `mul` (story 2 passes, the end's re-run finds story 1 broken: its box is
    /// cleared and it comes back); fixes `add` again (every check passes at one stop).
    pub(crate) fn plan_script(project: &Path) -> Script {
        let (plan, calc) = (project.join("PLAN.md"), project.join("calc.sh"));
        let (plan, calc) = (plan.display().to_string(), calc.display().to_string());
        Script::new()
            .edit(&plan, "- [ ] Add two numbers", "- [x] Add two numbers")
            .text("Both stories are done.")
            .edit(&calc, ADD_BUG, ADD_FIX)
            .text("Story 1: calc.sh adds now.")
            .edit(
                &calc,
                format!("{ADD_FIX} ;;\n  mul) echo 0"),
                format!("{ADD_BUG} ;;\n  mul) echo $(($2 * $3))"),
            )
            .text("Story 2: calc.sh multiplies now.")
            .edit(&calc, ADD_BUG, ADD_FIX)
            .text("Story 1 again: add adds.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(dir: &Path, script: &str) -> std::process::Output {
        std::process::Command::new("sh").arg(script).current_dir(dir).output().unwrap()
    }

    #[test]
    fn the_plan_sample_fails_both_stories_and_the_fixes_pass_them() {
        let dir = tempfile::tempdir().unwrap();
        let files = Scenario::plan_files(dir.path()).unwrap();
        assert_eq!(files.len(), 4);
        let add = check(dir.path(), "check-add.sh");
        assert_eq!(String::from_utf8_lossy(&add.stdout), "FAIL: sh calc.sh add 2 3 printed -1, expected 5\n");
        assert!(!check(dir.path(), "check-mul.sh").status.success());
        let fixed = PLAN_CALC.replace(ADD_BUG, ADD_FIX).replace("mul) echo 0", "mul) echo $(($2 * $3))");
        std::fs::write(dir.path().join("calc.sh"), fixed).unwrap();
        assert!(check(dir.path(), "check-add.sh").status.success());
        assert!(check(dir.path(), "check-mul.sh").status.success());
    }
}
