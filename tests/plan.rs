//! `--plan FILE` through the binary: stories worked one at a time, a done story broken by a later
//! one coming back at the end, a `prd.json`, the plan as part of the check, and plans refused at
//! start.

use serde_json::Value;

use crate::util::{SESSION, TestEnv, git};

const PLAN: &str = "\
# Three stories

- [ ] Write one
  The first file.
  verify: `test -f one`
- [ ] Write two
  verify: test -f two
- [ ] Write three
  verify: test -f three
";

fn project(plan_name: &str, plan: &str) -> TestEnv {
    let env = TestEnv::new();
    git(&env.project, &["init", "-q"]);
    env.write(plan_name, plan);
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "plan"]);
    env
}

fn next(env: &TestEnv) -> crate::util::Run {
    env.stop_as(SESSION, "", true)
}

#[test]
fn stories_are_done_one_at_a_time_and_a_broken_one_comes_back_before_the_end() {
    let env = project("PLAN.md", PLAN);
    let start = env.start("--plan PLAN.md");
    let shown = &start.stdout;
    assert!(shown.contains("Plan:        PLAN.md (3 stories, 0 done already"), "{shown}");
    assert!(!shown.contains("the loop runs all"), "the stories' checks end the loop: {shown}");
    assert!(
        shown.contains("Now: story 1 of 3: 1. Write one\n  The first file.\nIts check: `test -f one`"),
        "{shown}"
    );
    assert!(shown.contains("PLAN.md"), "{shown}");

    let lied = env.stop("All three stories are done.");
    assert!(lied.blocked());
    assert!(lied.reason().contains("Verify `test -f one` failed"), "{}", lied.reason());

    env.write("one", "");
    let first = next(&env);
    assert!(first.blocked(), "{}", first.stdout);
    let reason = first.reason();
    assert!(reason.contains("Story 1. Write one is done: its check `test -f one` passed."), "{reason}");
    assert!(reason.contains("Done: 1 of 3 (1. Write one)."), "{reason}");
    assert!(reason.contains("Now: story 2 of 3: 2. Write two"), "{reason}");

    // Story 2 is done, but story 1 is broken on the way.
    env.write("two", "");
    std::fs::remove_file(env.project.join("one")).unwrap();
    let second = next(&env);
    let status = env.run(&["status", "--session", SESSION], "").stdout;
    assert!(
        status.contains("stories:    2 of 3 done: ✓ 1. Write one (2 stop(s)), ✓ 2. Write two (1 stop(s)), · 3. Write three (0 stop(s))"),
        "{status}"
    );
    assert!(second.reason().contains("Now: story 3 of 3: 3. Write three"), "{}", second.reason());

    env.write("three", "");
    let broken = next(&env);
    assert!(broken.blocked(), "{}", broken.stdout);
    let reason = broken.reason();
    assert!(reason.contains("the check of story 1. Write one failed again (exit 1)"), "{reason}");
    assert!(reason.contains("Now: story 1 of 3: 1. Write one"), "{reason}");
    assert!(reason.contains("Done: 2 of 3 (2. Write two, 3. Write three)."), "{reason}");

    env.write("one", "");
    let done = next(&env);
    assert!(!done.blocked(), "{}", done.stdout);
    let shown = done.system_message();
    assert!(
        shown.contains("for-loop: done, verified at iteration 5/30: every story of PLAN.md passed its check at the same stop."),
        "{shown}"
    );
    assert!(
        shown.contains("stories: 3 of 3 done: ✓ 1. Write one (3 stop(s)), ✓ 2. Write two (1 stop(s)), ✓ 3. Write three (1 stop(s))"),
        "{shown}"
    );
    assert_eq!(
        env.ledger_reasons(SESSION),
        ["verify_failed", "story_verified", "story_verified", "story_broken", "verified"]
    );
    let status = env.run(&["status", "--json", "--session", SESSION], "");
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let done: Vec<bool> = status["loop"]["meta"]["plan"]["stories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["done"].as_bool().unwrap())
        .collect();
    assert_eq!(done, [true, true, true]);
}

#[test]
fn the_plan_file_is_part_of_the_check() {
    let env = project("PLAN.md", PLAN);
    env.start("--plan PLAN.md");
    env.write("one", "");
    env.write("PLAN.md", "- [x] Write one\n  verify: true\n");
    let run = env.stop("");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("PLAN.md (modified)"), "{}", run.reason());
    assert_eq!(env.ledger_reasons(SESSION), ["oracle_changed"]);
}

fn plan_now(env: &TestEnv, name: &str) -> String {
    std::fs::read_to_string(env.project.join(name)).unwrap()
}

/// PLAN with the boxes of the stories numbered in `ticked` ticked.
fn ticked(ticked: &[usize]) -> String {
    let titles = ["one", "two", "three"];
    ticked.iter().fold(PLAN.to_string(), |plan, n| {
        plan.replacen(&format!("- [ ] Write {}", titles[n - 1]), &format!("- [x] Write {}", titles[n - 1]), 1)
    })
}

#[test]
fn the_boxes_are_ticked_as_stories_pass_and_cleared_when_one_breaks_and_that_is_no_change_of_the_check() {
    let env = project("PLAN.md", PLAN);
    env.start("--plan PLAN.md");
    env.write("one", "");
    assert!(next(&env).reason().contains("Now: story 2 of 3"));
    assert_eq!(plan_now(&env, "PLAN.md"), ticked(&[1]), "story 1's box alone, byte for byte");
    env.write("two", "");
    assert!(
        next(&env).reason().contains("Now: story 3 of 3"),
        "for-loop's own tick is no change of the check"
    );
    assert_eq!(plan_now(&env, "PLAN.md"), ticked(&[1, 2]));
    env.write("three", "");
    std::fs::remove_file(env.project.join("one")).unwrap();
    let broken = next(&env);
    assert!(broken.reason().contains("Now: story 1 of 3"), "{}", broken.reason());
    assert_eq!(plan_now(&env, "PLAN.md"), ticked(&[2, 3]), "the broken story's box is cleared");
    env.write("one", "");
    let done = next(&env);
    assert!(!done.blocked(), "{}", done.stdout);
    assert_eq!(plan_now(&env, "PLAN.md"), ticked(&[1, 2, 3]));
    assert_eq!(
        env.ledger_reasons(SESSION),
        ["story_verified", "story_verified", "story_broken", "verified"],
        "no tick of for-loop's counts as a change of the check"
    );
}

#[test]
fn a_model_that_ticks_a_box_itself_is_caught_and_clearing_it_makes_the_pass_count() {
    let env = project("PLAN.md", PLAN);
    env.start("--plan PLAN.md");
    env.write("one", "");
    env.write("PLAN.md", &ticked(&[1]));
    let caught = env.stop("Story 1 is done, I ticked it.");
    assert!(caught.blocked(), "{}", caught.stdout);
    let reason = caught.reason();
    assert!(
        reason.contains("PLAN.md, the box of story 1. Write one (ticked, but not verified: for-loop ticks"),
        "{reason}"
    );
    assert!(
        reason.contains("until `test -f one` exits 0 for the current story"),
        "the pass did not count: {reason}"
    );
    // A story ahead of the current one, ticked while the current one passes, is caught too.
    env.write("PLAN.md", &ticked(&[3]));
    let ahead = next(&env);
    assert!(
        ahead.reason().contains("the box of story 3. Write three (ticked, but not verified"),
        "{}",
        ahead.reason()
    );
    env.write("PLAN.md", PLAN);
    let counted = next(&env);
    assert!(counted.reason().contains("Now: story 2 of 3"), "{}", counted.reason());
    assert_eq!(plan_now(&env, "PLAN.md"), ticked(&[1]));
    assert_eq!(env.ledger_reasons(SESSION), ["oracle_changed", "oracle_changed", "story_verified"]);
}

#[cfg(unix)]
#[test]
fn a_plan_file_that_cannot_be_ticked_costs_one_line_and_nothing_of_the_loop() {
    use std::os::unix::fs::PermissionsExt;
    let env = project("PLAN.md", PLAN);
    env.start("--plan PLAN.md");
    let read_only = |mode| {
        std::fs::set_permissions(env.project.join("PLAN.md"), std::fs::Permissions::from_mode(mode)).unwrap();
    };
    env.write("one", "");
    read_only(0o444);
    let first = next(&env);
    assert!(first.blocked() && first.reason().contains("Now: story 2 of 3"), "{}", first.stdout);
    let told = first.system_message();
    let line = "for-loop: could not tick the box of story 1. Write one in PLAN.md (it is read-only); \
                the loop's own record of its stories is kept and it goes on.";
    assert!(told.lines().any(|l| l == line), "{told}");
    assert!(!first.reason().contains("could not tick"), "the model is not told: {}", first.reason());
    assert_eq!(plan_now(&env, "PLAN.md"), PLAN);
    read_only(0o644);
    env.write("two", "");
    assert!(
        next(&env).reason().contains("Now: story 3 of 3"),
        "an unticked box of a done story is no change"
    );
    assert_eq!(plan_now(&env, "PLAN.md"), ticked(&[2]));
    // Story 3 passes and story 2 breaks while the file is read-only: neither box can be set.
    env.write("three", "");
    std::fs::remove_file(env.project.join("two")).unwrap();
    read_only(0o444);
    let broken = next(&env);
    let told = broken.system_message();
    assert!(told.contains("could not clear the box of story 2. Write two in PLAN.md (it is read-only); could not tick the box of story 3. Write three"), "{told}");
    assert!(
        told.contains(
            "Clear that box by hand: a ticked box the loop has not verified counts as a change of the check."
        ),
        "{told}"
    );
    let status = env.run(&["status", "--session", SESSION], "").stdout;
    assert!(
        status.contains("✓ 1. Write one")
            && status.contains("· 2. Write two")
            && status.contains("✓ 3. Write three"),
        "{status}"
    );
    assert_eq!(env.ledger_reasons(SESSION), ["story_verified", "story_verified", "story_broken"]);
}

#[test]
fn after_for_loops_tick_the_guard_still_refuses_the_model_an_edit_of_the_plan() {
    let env = project("PLAN.md", PLAN);
    env.start("--plan PLAN.md");
    env.write("one", "");
    assert!(next(&env).reason().contains("Now: story 2 of 3"));
    assert_eq!(plan_now(&env, "PLAN.md"), ticked(&[1]));
    let edit = serde_json::json!({
        "session_id": SESSION,
        "transcript_path": env.project.join("t.jsonl"),
        "cwd": env.project,
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": env.project.join("PLAN.md"), "old_string": "- [ ] Write two", "new_string": "- [x] Write two"},
        "tool_use_id": "toolu_1",
    });
    let run = env.run(&["guard"], edit.to_string());
    let answer: Value = serde_json::from_str(&run.stdout).unwrap_or_default();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny", "{}", run.stdout);
    let reason = answer["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap_or_default();
    assert!(reason.contains("`PLAN.md` is part of this loop's verify check"), "{reason}");
}

#[test]
fn no_tick_leaves_the_plan_as_the_user_wrote_it() {
    let env = project("PLAN.md", PLAN);
    env.start("--plan PLAN.md --no-tick");
    env.write("one", "");
    assert!(next(&env).reason().contains("Now: story 2 of 3"));
    assert_eq!(plan_now(&env, "PLAN.md"), PLAN);
}

#[test]
fn a_prd_jsons_passes_are_set_in_place_as_its_stories_pass() {
    let prd = "{\n  \"userStories\": [\n    {\"id\": \"US-1\", \"title\": \"First\", \"passes\": false, \"verify\": \"test -f a\"},\n    {\"id\": \"US-2\", \"title\": \"Second\",\n     \"passes\":false, \"verify\": \"test -f b\"}\n  ]\n}\n";
    let env = project("prd.json", prd);
    env.start("--plan prd.json");
    env.write("a", "");
    // The model sets a story's `passes` itself: caught, and the pass does not count.
    env.write("prd.json", &prd.replacen("\"passes\":false", "\"passes\":true", 1));
    let caught = env.stop("");
    assert!(
        caught.reason().contains("prd.json, the box of story US-2 Second (ticked, but not verified"),
        "{}",
        caught.reason()
    );
    env.write("prd.json", prd);
    assert!(next(&env).reason().contains("Now: story 2 of 2"));
    let first = prd.replacen("\"passes\": false", "\"passes\": true", 1);
    assert_eq!(plan_now(&env, "prd.json"), first, "one value changed, the user's layout kept");
    env.write("b", "");
    assert!(!next(&env).blocked());
    assert_eq!(plan_now(&env, "prd.json"), first.replacen("\"passes\":false", "\"passes\":true", 1));
    assert_eq!(env.ledger_reasons(SESSION), ["oracle_changed", "story_verified", "verified"]);
}

#[test]
fn a_prd_json_is_worked_in_priority_order_with_verify_for_stories_without_a_check() {
    let prd = r#"{"project": "demo", "userStories": [
        {"id": "US-2", "title": "Second", "description": "after the first", "acceptanceCriteria": ["b exists"],
         "priority": 2, "passes": false},
        {"id": "US-1", "title": "First", "description": "", "acceptanceCriteria": [], "priority": 1,
         "passes": false, "verify": "test -f a"}
    ]}"#;
    let env = project("prd.json", prd);
    env.write("review.sh", "cat > \"$HOME/seen.json\"\n");
    let start = env.start(r#"--plan prd.json --verify "test -f b" --review "sh review.sh""#);
    assert!(start.stdout.contains("Now: story 1 of 2: US-1 First"), "{}", start.stdout);
    assert!(start.stdout.contains("[ ] US-2 Second  (check: test -f b)"), "{}", start.stdout);
    env.write("a", "");
    let first = env.stop("");
    assert!(
        first.reason().contains(
            "Now: story 2 of 2: US-2 Second\n  after the first\n  Acceptance criteria:\n  - b exists"
        ),
        "{}",
        first.reason()
    );
    let seen: Value = serde_json::from_slice(&std::fs::read(env.home.join("seen.json")).unwrap()).unwrap();
    assert!(seen["story"].as_str().unwrap().starts_with("Now: story 1 of 2: US-1 First"), "{seen}");
    env.write("b", "");
    let done = next(&env);
    assert!(!done.blocked(), "{}", done.stdout);
    assert_eq!(
        env.ledger_reasons(SESSION),
        ["review_approved", "story_verified", "review_approved", "verified"],
        "the reviewer sees every story's pass"
    );
}

#[test]
fn a_story_that_takes_too_long_parks_the_loop_and_resume_gives_it_its_stops_again() {
    let env = project("PLAN.md", PLAN);
    env.start("--plan PLAN.md --story-iterations 2");
    assert!(env.stop("").blocked());
    let parked = next(&env);
    assert!(!parked.blocked(), "{}", parked.stdout);
    assert!(
        parked
            .system_message()
            .contains("story 1. Write one used 2 stops without its check `test -f one` passing"),
        "{}",
        parked.system_message()
    );
    assert_eq!(env.ledger_reasons(SESSION), ["verify_failed", "story_stalled"]);
    let resumed = env.run(&["resume", "--session", SESSION], "");
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert!(env.stop_as(SESSION, "", false).blocked(), "the story has its stops again");
}

#[test]
fn bad_plans_are_refused_at_start_naming_what_to_fix() {
    let env = project("empty.md", "# nothing here\n");
    env.write("unchecked.md", "- [ ] Has a check\n  verify: true\n- [ ] Has none\n");
    env.write("broken.json", "{\"userStories\": [");
    env.write("huge.md", &"- [ ] story\n  verify: true\n".repeat(20_000));
    #[cfg(unix)]
    assert!(
        std::process::Command::new("mkfifo").arg(env.project.join("fifo.md")).status().unwrap().success()
    );
    let cases = [
        ("--plan empty.md --verify true", "has no stories: write each as a top-level `- [ ] TITLE` line"),
        ("--plan unchecked.md", "story 2. Has none has no check: add an indented `verify: CMD` line"),
        ("--plan broken.json --verify true", "is not valid JSON in the prd.json shape: EOF while parsing"),
        ("--plan huge.md", "cannot be read"),
        ("--plan missing.md --verify true", "cannot be read"),
        #[cfg(unix)]
        ("--plan fifo.md --verify true", "cannot be read"),
    ];
    for (text, expected) in cases {
        let run = env.run_quickly(&["start", "--session", SESSION], text);
        assert_ne!(run.code, 0, "{text}: {}", run.stdout);
        assert!(
            run.stdout.contains("for-loop: not started: the plan")
                || run.stdout.contains("for-loop: not started: story"),
            "{text}: {}",
            run.stdout
        );
        assert!(run.stdout.contains(expected), "{text}: {}", run.stdout);
        assert!(!env.state_path().exists(), "{text}: nothing started");
    }
}
