//! The demo (crates/demo, run by `scripts/demo`) as a user runs it, so that it cannot rot: the
//! real Claude Code CLI with this plugin, the real loop, the scripted model. Its trace must show
//! the four phases in order, its account must read as designed, and the sample must be gone.

use std::path::PathBuf;

use serde_json::Value;

use crate::util::client_bin;

use for_loop_demo::{Config, EXPECTED_LEDGER, Output, PLAN, PLAN_LEDGER, Scenario, Step, Stop};

fn config(claude: PathBuf, output: Output) -> Config {
    Config {
        claude,
        loop_hook: PathBuf::from(env!("CARGO_BIN_EXE_loop-hook")),
        plugin_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("plugin/claude-code"),
        keep: false,
        output,
        scenario: Scenario::Guard,
    }
}

fn stops(steps: &[Step]) -> Vec<&Stop> {
    steps.iter().filter_map(|s| if let Step::Stop(stop) = s { Some(stop) } else { None }).collect()
}

/// The index of the first step matching `what`, which must exist.
fn position(steps: &[Step], what: impl Fn(&Step) -> bool) -> usize {
    steps.iter().position(what).unwrap_or_else(|| panic!("step not found in {steps:#?}"))
}

/// The run as the loop decided it: each denial, each stop's decision and reason, and (in the
/// plan demo) the plan's boxes after a stop.
fn phases(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .filter_map(|step| match step {
            Step::Denied { tool, .. } => Some(format!("denied {tool}")),
            Step::Stop(stop) => Some(format!("{} {}", stop.decision, stop.reason.as_deref().unwrap_or("-"))),
            Step::Plan { boxes, .. } => Some(boxes.iter().map(|b| &b[..5]).collect::<Vec<_>>().join(" ")),
            _ => None,
        })
        .collect()
}

/// Each of `lines` is in `text`, in this order.
fn in_order(text: &str, lines: &[&str]) {
    let mut from = 0;
    for line in lines {
        let at =
            text[from..].find(line).unwrap_or_else(|| panic!("{line:?} missing or out of order in:\n{text}"));
        from += at + line.len();
    }
}

#[test]
fn the_demo_shows_the_four_phases_in_order_and_cleans_up() {
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    let mut out = Vec::new();
    let report = for_loop_demo::run(&config(claude, Output::Human { color: false }), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(report.ok, "{text}");
    assert_eq!(report.ledger, EXPECTED_LEDGER, "{text}");

    // The phases, as the loop decided them: a claim of done is blocked, the Write of the check
    // is denied, the rewritten check's pass is refused, the real fix is verified.
    let phases = phases(&report.steps);
    assert_eq!(
        phases,
        ["block verify_failed", "denied Write", "block oracle_changed", "allow verified"],
        "{text}"
    );

    let stops = stops(&report.steps);
    // 1. Nothing was fixed: verify fails and its output goes back to the model.
    let failed = stops[0].verify.as_ref().unwrap();
    assert_eq!((stops[0].iteration, failed.exit_code), (1, Some(1)));
    let fed = stops[0].reinjected.as_deref().unwrap();
    assert!(fed.starts_with("fix calc.sh so check.sh passes\n"), "{fed}");
    assert!(fed.contains("FAIL: sh calc.sh 2 3 printed -1, expected 5"), "{fed}");
    // 2. The guard refuses the file tool on the check, in the second turn.
    let denied = position(&report.steps, |s| matches!(s, Step::Denied { iteration: 2, .. }));
    let Step::Denied { reason, .. } = &report.steps[denied] else { unreachable!() };
    assert!(reason.contains("`check.sh` is part of this loop's verify check"), "{reason}");
    assert!(
        matches!(&report.steps[denied - 1], Step::Tool { tool, summary, .. } if tool == "Write" && summary.contains("check.sh"))
    );
    // 3. The check rewritten around the guard passes, and the pass does not count.
    assert!(stops[1].verify.as_ref().unwrap().passed());
    assert_eq!(stops[1].oracle_changed, ["check.sh"]);
    let fed = stops[1].reinjected.as_deref().unwrap();
    assert!(fed.contains("check.sh (modified)") && fed.contains("a passing verify does not count"), "{fed}");
    // 4. Restore, then the real fix, in the third turn; verified, with the receipt.
    let fix = position(
        &report.steps,
        |s| matches!(s, Step::Tool { iteration: 3, tool, summary, .. } if tool == "Edit" && summary.contains("calc.sh")),
    );
    let restore = position(
        &report.steps,
        |s| matches!(s, Step::Tool { iteration: 3, summary, .. } if summary.contains("oracle/check.sh")),
    );
    assert!(restore < fix);
    assert_eq!(stops[2].iteration, 3);
    assert!(stops[2].verify.as_ref().unwrap().passed());
    assert!(stops[2].reinjected.is_none());
    assert!(stops[2].status.contains("receipt: verified · 3/10 iterations"), "{}", stops[2].status);

    // The account a person reads, in order, and no raw JSON or colour in a pipe.
    let key_lines = [
        "for-loop: loop started, iteration 1 of 10.",
        "── iteration 1/10",
        "  model     “Done: calc.sh adds two numbers now.”",
        "  verify    ✗ failed · exit 1 after",
        "│ FAIL: sh calc.sh 2 3 printed -1, expected 5",
        "  for-loop  BLOCKED: verify failed, so the stop is refused",
        "for-loop 2/10 · verify failed (exit 1,",
        "── iteration 2/10",
        "  tool      Write check.sh ← \"exit 0\\n\"",
        "✗ denied by for-loop's guard: `check.sh` is part of this loop's verify check",
        "  verify    ✓ passed · exit 0 after",
        "  for-loop  BLOCKED: check.sh changed since the loop started, so a pass does not count",
        "  - check.sh (modified)",
        "── iteration 3/10",
        "  tool      Edit calc.sh: \"$(($1 - $2))\" → \"$(($1 + $2))\"",
        "  for-loop  ALLOWED: verify passed with the check intact, so the loop ends",
        "for-loop: done, verified at iteration 3/10",
        "receipt: verified · 3/10 iterations",
        "✓ the loop ended verified after 3 of 10 iterations",
        "ledger: verify_failed → oracle_changed → verified",
        "the sample project was removed",
    ];
    in_order(&text, &key_lines);
    assert!(!text.contains('\x1b'), "colour in a pipe:\n{text}");
    assert!(!text.contains("\"type\""), "raw JSON in the account:\n{text}");
    assert!(!report.kept);
    assert!(!report.project.exists(), "the sample was left at {}", report.project.display());
}

#[test]
fn json_gives_one_object_per_step_and_keep_leaves_the_sample() {
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    let mut out = Vec::new();
    let config = Config { keep: true, ..config(claude, Output::Json) };
    let report = for_loop_demo::run(&config, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let objects: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    assert_eq!(objects, report.steps.iter().map(Step::to_json).collect::<Vec<_>>());
    let kinds: Vec<&str> = objects.iter().map(|o| o["step"].as_str().unwrap()).collect();
    assert_eq!(kinds[..4], ["sample", "cli", "loop_started", "iteration"], "{text}");
    let end = objects.last().unwrap();
    assert_eq!(end["step"], "end");
    assert_eq!(end["ok"], true, "{text}");
    assert_eq!(end["ledger"], serde_json::json!(EXPECTED_LEDGER));
    assert_eq!(end["kept"], true);

    // Kept: the fixed code and the check as it was, for the user to look at.
    assert!(report.kept);
    let calc = std::fs::read_to_string(report.project.join("calc.sh")).unwrap();
    assert!(calc.contains("$(($1 + $2))"), "{calc}");
    let check = std::fs::read_to_string(report.project.join("check.sh")).unwrap();
    assert!(check.contains("FAIL: sh calc.sh 2 3"), "the check was not restored: {check}");
    std::fs::remove_dir_all(end["sample"].as_str().unwrap()).unwrap();
}

#[test]
fn a_missing_cli_is_an_error_that_says_how_to_install_it() {
    let config = config(PathBuf::from("/nonexistent/claude"), Output::Json);
    let err = for_loop_demo::run(&config, &mut Vec::new()).unwrap_err();
    assert!(err.0.contains("/nonexistent/claude") && err.0.contains("scripts/demo"), "{err}");
}

/// The plan demo (`scripts/demo --plan`): the model's own tick is refused, each story passes by
/// its check alone, for-loop ticks each box as its story passes and clears the one that broke,
/// and the loop ends with every box ticked and every check passing at one stop.
#[test]
fn the_plan_demo_shows_a_loop_through_a_plan_with_for_loop_ticking_its_boxes() {
    let claude = client_bin("claude", "FOR_LOOP_CLAUDE");
    let config = Config { scenario: Scenario::Plan, ..config(claude, Output::Human { color: false }) };
    let mut out = Vec::new();
    let report = for_loop_demo::run(&config, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(report.ok, "{text}");
    assert_eq!(report.ledger, PLAN_LEDGER, "{text}");
    let phases = phases(&report.steps);
    assert_eq!(
        phases,
        [
            "denied Edit",
            "block verify_failed",
            "- [ ] - [ ]",
            "block story_verified",
            "- [x] - [ ]",
            "block story_broken",
            "- [ ] - [x]",
            "allow verified",
            "- [x] - [x]",
        ],
        "{text}"
    );
    let stops = stops(&report.steps);
    let checks: Vec<&str> = stops.iter().map(|s| s.verify.as_ref().unwrap().command.as_str()).collect();
    assert_eq!(
        checks,
        ["sh check-add.sh", "sh check-add.sh", "sh check-mul.sh", "sh check-add.sh"],
        "{text}"
    );
    let key_lines = [
        "PLAN.md       the plan: two stories, each with its check",
        "/for-loop --plan PLAN.md --max-iterations 10",
        "── iteration 1/10",
        "  tool      Edit PLAN.md",
        "✗ denied by for-loop's guard: `PLAN.md` is part of this loop's verify check",
        "  model     “Both stories are done.”",
        "  stop      the model ends its turn → for-loop runs `sh check-add.sh`",
        "│ FAIL: sh calc.sh add 2 3 printed -1, expected 5",
        "── iteration 2/10",
        "  for-loop  BLOCKED: the story's check passed, so for-loop ticks its box and the next story comes",
        "  PLAN.md   - [x] Add two numbers",
        "            - [ ] Multiply two numbers",
        "── iteration 3/10",
        "  stop      the model ends its turn → for-loop runs `sh check-mul.sh`",
        "  for-loop  BLOCKED: the last story passed, but at the end a done story's check failed again",
        "  PLAN.md   - [ ] Add two numbers",
        "            - [x] Multiply two numbers",
        "── iteration 4/10",
        "  for-loop  ALLOWED: verify passed with the check intact, so the loop ends",
        "  PLAN.md   - [x] Add two numbers",
        "            - [x] Multiply two numbers",
        "✓ the loop ended verified after 4 of 10 iterations",
        "ledger: verify_failed → story_verified → story_broken → verified",
    ];
    in_order(&text, &key_lines);
    assert!(PLAN.contains("- [ ] Add two numbers\n"), "the sample plan starts unticked");
    assert!(!report.project.exists(), "the sample was left at {}", report.project.display());
}
