//! Reviewers that never change their answer, with the real Claude Code CLI: one that always
//! vetoes parks the loop after `--max-vetoes`, one that approves everything cannot pass a
//! failing check.

use mock_model::{MockModel, Script};

use super::{SESSION_A, World, reinjections};

/// The check passes at once, but the reviewer vetoes every pass: after two vetoes the loop is
/// parked (`review_vetoed`) with its last findings, never counted as done, and the model is not
/// sent a third turn.
#[test]
fn a_reviewer_that_always_vetoes_parks_the_loop_after_max_vetoes() {
    let world = World::new();
    world.env.write("review.sh", "echo 'FINDING: not like this'; exit 1\n");
    let model =
        MockModel::start(Script::new().text("Done.").text("Done, addressed.").text("Never sent.")).unwrap();
    let run = world.run(
        &model,
        SESSION_A,
        "/for-loop tidy up --verify true --review \"sh review.sh\" --max-vetoes 2",
        &[],
    );
    run.assert_plugin_loaded();
    assert_eq!(world.env.ledger_reasons(SESSION_A), ["review_blocked", "review_vetoed"], "{}", run.dump());
    let fed = reinjections(&model);
    assert_eq!(fed.len(), 1, "{}", run.dump());
    assert!(fed[0].contains("FINDING: not like this"), "{}", fed[0]);
    let told = run.told_the_user();
    assert!(told.contains("parked"), "{told}");
    assert!(told.contains("FINDING: not like this"), "{told}");
    assert!(world.state(SESSION_A).contains("status: parked"), "{}", world.state(SESSION_A));
}

/// A reviewer that approves everything is never asked while the check fails: the loop goes on
/// to its cap, and no review is recorded.
#[test]
fn a_reviewer_that_approves_everything_cannot_pass_a_failing_check() {
    let world = World::new();
    let reviews = world.env.home.join("reviews");
    world.env.write("review.sh", &format!("echo approved >> '{}'; exit 0\n", reviews.display()));
    let model = MockModel::start(Script::new().text("Done.").text("Done again.")).unwrap();
    let run = world.run(
        &model,
        SESSION_A,
        "/for-loop fix it --verify false --review \"sh review.sh\" --max-iterations 2",
        &[],
    );
    run.assert_plugin_loaded();
    assert_eq!(world.env.ledger_reasons(SESSION_A), ["verify_failed", "cap_reached"], "{}", run.dump());
    assert!(!reviews.exists(), "the reviewer ran on a failing check");
}
