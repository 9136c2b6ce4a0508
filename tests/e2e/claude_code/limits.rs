//! A loop that outlives its turn, with the real Claude Code CLI: the conversation outgrows the
//! model's context window, the account hits a usage limit, the user compacts mid-loop. A turn
//! that ends on an error is never an iteration and never silent; a compaction loses no block and
//! gives the agent its loop back.

use std::path::PathBuf;

use mock_model::{MockModel, Script};
use serde_json::Value;

use super::{ClaudeRun, SESSION_A, World, reinjections};

/// The check the loops here run: it passes once the file `fixed` exists.
const CHECK: &str = "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n";
const START: &str = "/for-loop create the file named fixed --verify \"sh check.sh\" --max-iterations 5";

/// `loop-hook status` of session A, as the user runs it.
fn status(world: &World) -> String {
    let run = world.env.run(&["status", "--session", SESSION_A], "");
    format!("{}{}", run.stdout, run.stderr)
}

/// Session A's ledger reasons once it holds `count` lines after the start: the failed turn's
/// hook may finish after the CLI has exited (`-p` ends on the error it reports).
fn ledger_of_length(world: &World, count: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let reasons = world.env.ledger_reasons(SESSION_A);
        if reasons.len() >= count || std::time::Instant::now() > deadline {
            return reasons;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Whether the failed turn's own report was recorded (the ledger `[verify_failed, kind]`) rather
/// than lost (`[verify_failed]`), once the first run is over; no iteration is used either way.
/// Claude Code's `-p` exits on the error and sends its hooks SIGTERM as it goes: on a loaded
/// machine the shell that starts the `StopFailure` hook can be gone before it ignores that (seen
/// once in a full test run). The user's next prompt then finds the error in the transcript and
/// records it as the report would have.
fn reported(world: &World, run: &ClaudeRun, kind: &str) -> bool {
    let reasons = ledger_of_length(world, 2);
    assert!(
        world.state(SESSION_A).contains("iteration: 2\n"),
        "no iteration used: {}",
        world.state(SESSION_A)
    );
    match reasons.as_slice() {
        [judged, failed] if judged == "verify_failed" && failed == kind => true,
        [judged] if judged == "verify_failed" => false,
        other => panic!("{other:?}: {}", run.dump()),
    }
}

/// Makes the hooks that would record the first run's failed turn exit at once, as ones the host's
/// SIGTERM reached first do: while the returned file exists, every `stop-hook` run after the first
/// (the blocked stop) exits 0 unread: Claude Code 2.1.332 runs it three times after the blocked
/// stop of such a turn, two of them at once. Remove the file to let them run again.
fn lose_the_failure_report(world: &mut World) -> PathBuf {
    let real = world.loop_hook.take().expect("the world runs the built loop-hook");
    let wrapper = world.env.home.join("loop-hook-losing-a-report");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\n\
         if [ \"$1\" = stop-hook ] && [ -e \"$LOSE_ARMED\" ]; then\n\
         [ -e \"$LOSE_ARMED.seen\" ] && exit 0\n\
         : >\"$LOSE_ARMED.seen\"\n\
         fi\n\
         exec \"$LOSE_REAL\" \"$@\"\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let armed = world.env.home.join("lose-the-failure-report");
    std::fs::write(&armed, "").unwrap();
    world.vars.push(("LOSE_ARMED", armed.display().to_string()));
    world.vars.push(("LOSE_REAL", real.display().to_string()));
    world.loop_hook = Some(wrapper);
    armed
}

fn failed_turn(world: &World) -> Value {
    let run = world.env.run(&["status", "--session", SESSION_A, "--json"], "");
    let status: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    status["loop"]["meta"]["failed_turn"].clone()
}

/// The model's blocked turn is answered `prompt is too long`, and so is every summary Claude
/// Code asks for to compact: the session ends. The loop uses no iteration, the user's next prompt
/// is told what happened and what to do, status shows it, and the loop then ends verified.
#[test]
fn a_prompt_too_long_mid_loop_uses_no_iteration_is_told_at_the_next_prompt_and_the_loop_goes_on() {
    let world = World::new();
    let (model, first) = outgrow_the_context_window(&world);
    if reported(&world, &first, "context_exhausted") {
        assert_eq!(failed_turn(&world)["kind"], "context_exhausted");
        let shown = status(&world);
        assert!(shown.contains("is active, iteration 2 of 5"), "{shown}");
        assert!(shown.contains("last turn:  ended on context_exhausted"), "{shown}");
        assert!(shown.contains("prompt is too long"), "{shown}");
    }
    the_next_prompt_is_told_and_the_loop_ends_verified(&world, &model);
}

/// The same turn, with the host's report of it lost (its hook gone before it ran, as the host's
/// SIGTERM can leave it): nothing is recorded at first, and the user's next prompt finds the error
/// in the transcript, records it and tells it, never as a turn nobody judged.
#[test]
fn a_prompt_too_long_whose_report_is_lost_is_recorded_and_told_at_the_next_prompt() {
    let mut world = World::new();
    let armed = lose_the_failure_report(&mut world);
    let (model, first) = outgrow_the_context_window(&world);
    assert_eq!(world.env.ledger_reasons(SESSION_A), ["verify_failed"], "{}", first.dump());
    assert!(failed_turn(&world).is_null());
    std::fs::remove_file(armed).unwrap();
    the_next_prompt_is_told_and_the_loop_ends_verified(&world, &model);
}

/// The loop started in session A, its first stop blocked, and the blocked turn answered `prompt
/// is too long`, as is every summary Claude Code asks for to compact: the session ends. The model
/// then fixes the check when it is next asked.
fn outgrow_the_context_window(world: &World) -> (MockModel, ClaudeRun) {
    world.env.write("check.sh", CHECK);
    let mut script = Script::new().text("I think it is done.");
    // The blocked turn's request, then each compaction Claude Code tries before it gives up.
    for _ in 0..5 {
        script = script.prompt_too_long();
    }
    let model = MockModel::start(script.bash("touch fixed").text("Fixed it.")).unwrap();
    let first = world.run(&model, SESSION_A, START, &["--allowedTools", "Bash(touch fixed)"]);
    first.assert_plugin_loaded();
    (model, first)
}

/// "go on" after a turn that outgrew the context window: the user is told what happened and what
/// to do, and the loop ends verified at iteration 2 with the failed turn recorded once.
fn the_next_prompt_is_told_and_the_loop_ends_verified(world: &World, model: &MockModel) {
    let next =
        world.run(model, SESSION_A, "go on", &["--resume", SESSION_A, "--allowedTools", "Bash(touch fixed)"]);
    let told = next.told_the_user();
    assert!(told.contains("outgrew the model's context window"), "{}", next.dump());
    assert!(told.contains("run /compact, then send a prompt"), "{told}");
    assert!(told.contains("/for-loop:handoff"), "{told}");
    assert!(!told.contains("without being judged"), "a failed turn is no unjudged one: {told}");
    assert_eq!(
        world.env.ledger_reasons(SESSION_A),
        ["verify_failed", "context_exhausted", "verified"],
        "{}",
        next.dump()
    );
    let last = next.stop_responses().last().map(|e| e["stdout"].to_string()).unwrap_or_default();
    assert!(last.contains("verified at iteration 2/5"), "{last}");
    assert!(failed_turn(world).is_null(), "the judged stop put the failed turn behind the loop");
}

/// A turn ends on a server error mid-loop; the user compacts (`/compact`) and goes on. After the
/// compaction the model is given the loop back (task, check, iteration, last failure, rules), and
/// the loop ends verified with one verdict per judged stop: no block lost or doubled.
#[test]
fn a_loop_whose_session_compacts_mid_way_is_given_back_to_the_agent_and_ends_verified() {
    let world = World::new();
    world.env.write("check.sh", CHECK);
    let model = MockModel::start(
        Script::new().text("I think it is done.").error(500, None).bash("touch fixed").text("Fixed it."),
    )
    .unwrap();
    let tools = ["--allowedTools", "Bash(touch fixed)"];
    let first = world.run(&model, SESSION_A, START, &tools);
    first.assert_plugin_loaded();
    let reported = reported(&world, &first, "agent_error");
    if reported {
        assert_eq!(failed_turn(&world)["kind"], "agent_error");
    }

    let compacted = world.run(&model, SESSION_A, "/compact", &["--resume", SESSION_A]);
    assert!(compacted.of_type("system", "compact_boundary").next().is_some(), "{}", compacted.dump());
    let brief: String = compacted
        .of_type("system", "hook_response")
        .filter(|e| e["hook_event"] == "SessionStart")
        .filter_map(|e| e["stdout"].as_str())
        .filter(|stdout| stdout.contains("additionalContext"))
        .collect();
    assert!(brief.contains("was just compacted"), "{brief}");

    let before = model.main_requests().len();
    let next = world.run(
        &model,
        SESSION_A,
        "go on",
        &["--resume", SESSION_A, "--allowedTools", "Bash(touch fixed)"],
    );
    let after: Vec<String> = model.main_requests()[before..].iter().map(|r| r.body.to_string()).collect();
    let given = after.first().unwrap_or_else(|| panic!("no request after the compaction: {}", next.dump()));
    for part in [
        "create the file named fixed",
        "This is iteration 2 of 5",
        "The check is `sh check.sh`",
        "The last judged stop, at iteration 1, was verify_failed (exit 1): FAIL: fixed is missing.",
        "<loop-abort>",
    ] {
        assert!(given.contains(part), "{part:?} is not in the request after the compaction: {given}");
    }
    // A report lost, the records of the user's /compact stand between the error and the next
    // prompt, which then finds no failed turn to record: the next stop tells the block the host
    // overrode.
    let failed = if reported { "agent_error" } else { "harness_override" };
    assert_eq!(world.env.ledger_reasons(SESSION_A), ["verify_failed", failed, "verified"], "{}", next.dump());
    assert_eq!(reinjections(&model).len(), 1, "one block, neither lost nor doubled");
}

/// The account hits its usage limit mid-loop (HTTP 429, the reset in the error): the loop is
/// parked `agent_limited` with the reset time, no iteration used, and the user's first prompt
/// after the reset continues it to a verified end.
#[test]
fn a_usage_limit_parks_the_loop_until_its_reset_and_the_next_prompt_continues_it() {
    let world = World::new();
    world.env.write("check.sh", CHECK);
    let model = MockModel::start(
        Script::new().text("I think it is done.").usage_limit(3).bash("touch fixed").text("Fixed it."),
    )
    .unwrap();
    let tools = ["--allowedTools", "Bash(touch fixed)"];
    let first = world.run(&model, SESSION_A, START, &tools);
    first.assert_plugin_loaded();
    let reported = reported(&world, &first, "agent_limited");
    let resets_at: jiff::Timestamp = if reported {
        let failed = failed_turn(&world);
        assert_eq!(failed["kind"], "agent_limited", "{failed}");
        let shown = status(&world);
        assert!(shown.contains("parked (agent_limited) at iteration 2 of 5"), "{shown}");
        assert!(shown.contains("the account is limited until"), "{shown}");
        failed["resets_at"]
            .as_str()
            .unwrap_or_else(|| panic!("no reset time recorded: {failed}"))
            .parse()
            .unwrap()
    } else {
        // The scripted limit lifts 3 s after it is hit.
        jiff::Timestamp::now() + jiff::SignedDuration::from_secs(4)
    };

    while jiff::Timestamp::now() < resets_at {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let next = world.run(
        &model,
        SESSION_A,
        "go on",
        &["--resume", SESSION_A, "--allowedTools", "Bash(touch fixed)"],
    );
    let told = next.told_the_user();
    // A report lost, the next prompt records the limit from the transcript, which parks nothing.
    let (said, reasons) = if reported {
        (
            "the usage limit has lifted; the loop goes on at iteration 2 of 5",
            vec!["verify_failed", "agent_limited", "resumed", "verified"],
        )
    } else {
        ("so the loop was not parked: it is still on", vec!["verify_failed", "agent_limited", "verified"])
    };
    assert!(told.contains(said), "{}", next.dump());
    assert_eq!(world.env.ledger_reasons(SESSION_A), reasons, "{}", next.dump());
}
