//! Real agents' rhythms with the real Claude Code CLI (issue 41): a model that starts its build
//! in the background and ends its turn, and a model that only talks until the CLI's own cap of
//! blocks in a row without a tool call.

use mock_model::{MockModel, Script};

use super::{SESSION_A, World, reinjections};

/// The model starts the build in the background (`Bash` with `run_in_background`) and ends its
/// turn; Claude Code wakes it when the build ends, and it ends its turn again. The stop made
/// while the build ran is not judged and uses no iteration; the one after it is judged and
/// passes at iteration 1.
#[test]
fn a_build_in_the_background_is_waited_for_and_the_loop_ends_verified_with_no_iteration_spent() {
    let world = World::new();
    world.env.write("check.sh", "test -f built || { echo 'FAIL: not built'; exit 1; }\n");
    // The build lands only once the loop has recorded its wait: an event, not a race with the
    // clock, whatever the load (it gives up after two minutes, which fails the test).
    let ledger = world.env.session_dir(SESSION_A).join("ledger.jsonl");
    let build = format!(
        "i=0; until grep -q background_wait {ledger} 2>/dev/null || [ $i -ge 600 ]; do sleep 0.2; i=$((i+1)); done; \
         sleep 1; touch built",
        ledger = ledger.display()
    );
    let model = MockModel::start(
        Script::new()
            .background(build)
            .text("The build runs in the background; I will look at it when it ends.")
            .text("The build has finished."),
    )
    .unwrap();
    let run = world.run(
        &model,
        SESSION_A,
        "/for-loop build it --verify \"sh check.sh\" --max-iterations 3",
        &["--allowedTools", "Bash"],
    );
    run.assert_plugin_loaded();
    assert!(world.env.project.join("built").exists(), "the build never landed: {}", run.dump());
    assert_eq!(world.env.ledger_reasons(SESSION_A), ["background_wait", "verified"], "{}", run.dump());
    assert!(reinjections(&model).is_empty(), "a stop was blocked while the build ran: {}", run.dump());
    let stops = run.stop_responses();
    let first = stops.first().map(|e| e["stdout"].to_string()).unwrap_or_default();
    assert!(first.contains("for-loop: waiting for 1 background task before judging"), "{first}");
    let last = stops.last().map(|e| e["stdout"].to_string()).unwrap_or_default();
    assert!(last.contains("verified at iteration 1/3"), "{last}");
    assert!(world.state(SESSION_A).contains("waited_stops: 1"), "{}", world.state(SESSION_A));
}

/// A model that only talks: Claude Code honours 8 blocks in a row without a tool call (its
/// default), so the loop blocks 8 times, warns the agent at the 8th, and parks at the 9th stop,
/// naming the cap and how to go on, instead of sending a block the CLI would throw away.
#[test]
fn a_model_that_only_talks_is_parked_at_the_clis_cap_named_and_told() {
    let world = World::new();
    let mut script = Script::new();
    for n in 1..=10 {
        script = script.text(format!("I believe it is done ({n})."));
    }
    let model = MockModel::start(script).unwrap();
    let run = world.run(&model, SESSION_A, "/for-loop finish it --verify false --max-same-failures 20", &[]);
    run.assert_plugin_loaded();
    assert_eq!(model.main_requests().len(), 9, "{}", run.dump());
    let fed = reinjections(&model);
    assert_eq!(fed.len(), 8, "{fed:?}");
    assert!(fed[7].contains("this is the last"), "{}", fed[7]);
    assert!(!fed[6].contains("this is the last"), "{}", fed[6]);
    let last = run.stop_responses().last().map(|e| e["stdout"].to_string()).unwrap_or_default();
    assert!(last.contains("parked at iteration 9/30"), "{last}");
    assert!(last.contains("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP") && last.contains("/for-loop:resume"), "{last}");
    assert!(!run.dump().contains("overriding and ending turn"), "the CLI threw a block away: {}", run.dump());
    let reasons = world.env.ledger_reasons(SESSION_A);
    assert_eq!(reasons.len(), 9, "{reasons:?}");
    assert_eq!(reasons.last().map(String::as_str), Some("block_cap"));
    assert!(!reasons.iter().any(|r| r == "harness_override"), "{reasons:?}");
    assert!(world.state(SESSION_A).contains("status: parked"));
}
