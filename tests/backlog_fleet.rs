//! A backlog across machines, simulated: `docs/ci/for-loop-backlog.yml` valid against the GitHub
//! workflow schema, and its jobs run as a runner runs them against a bare repository standing in
//! for GitHub: one job per task pushing `refs/for-loop/backlog/RUN/tasks/N`, then the merge job
//! that judges what was pushed on the merged tree, trusting no claim.

use crate::release_workflow::assert_valid_github_workflow;

const WORKFLOW: &str = "docs/ci/for-loop-backlog.yml";

#[test]
fn the_backlog_workflow_is_a_valid_github_workflow() {
    assert_valid_github_workflow(WORKFLOW);
}
