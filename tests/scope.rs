//! `--scope GLOB` and a story's `scope:` through the binary: a pass that changed files outside
//! the scope does not count until they are put back, a new file counts by the same globs, a
//! story's scope starts where the story began, a metric attempt outside is rolled back, and bad
//! scopes are refused at start.

use crate::util::{SESSION, TestEnv, git};

/// A git project whose check passes once `src/done` exists.
fn project() -> TestEnv {
    let env = TestEnv::new();
    git(&env.project, &["init", "-q"]);
    env.write("check.sh", "test -f src/done\n");
    env.write("src/lib.txt", "lib\n");
    env.write("README.md", "readme\n");
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "init"]);
    env
}

fn next(env: &TestEnv) -> crate::util::Run {
    env.stop_as(SESSION, "", true)
}

/// The next stop ends the loop verified, and the ledger holds `reasons`.
fn ends_verified(env: &TestEnv, reasons: &[&str]) {
    let done = next(env);
    assert!(!done.blocked(), "{}", done.stdout);
    assert_eq!(env.ledger_reasons(SESSION), reasons);
}

fn last_line(env: &TestEnv) -> serde_json::Value {
    env.ledger().pop().unwrap()
}

#[test]
fn a_pass_with_a_change_outside_the_scope_counts_only_once_it_is_put_back() {
    let env = project();
    let start = env.start(r#"fix it --verify "sh check.sh" --scope "src/**""#);
    assert!(
        start.stdout.contains("Scope:       src/**  (a pass that changed a file outside it"),
        "{}",
        start.stdout
    );

    env.write("src/done", "");
    env.write("README.md", "edited\n");
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    let reason = run.reason();
    assert!(
        reason.contains("the task may change only the files of its scope, src/**, and this change changed outside the scope: README.md."),
        "{reason}"
    );
    assert!(reason.contains("ask the user to widen --scope"), "{reason}");
    assert!(run.system_message().contains("files outside the scope changed"), "{}", run.system_message());
    assert_eq!(last_line(&env)["out_of_scope"], serde_json::json!(["README.md"]));
    let status = env.run(&["status", "--session", SESSION], "").stdout;
    assert!(status.contains("  scope:      src/**\n  outside:    at the last stop, README.md\n"), "{status}");
    let report = env.run(&["report", "--session", SESSION], "");
    assert_eq!(report.code, 0, "{}", report.stdout);
    let html = std::fs::read_to_string(env.session_dir(SESSION).join("report.html")).unwrap();
    assert!(html.contains("outside the scope: <span class=\"mono\">README.md</span>"), "the report names it");

    git(&env.project, &["checkout", "--", "README.md"]);
    ends_verified(&env, &["out_of_scope", "verified"]);
}

#[test]
fn a_new_file_outside_the_scope_counts_and_one_inside_does_not() {
    let env = project();
    env.start(r#"fix it --verify "sh check.sh" --scope src --scope Cargo.toml"#);
    env.write("src/done", "");
    env.write("src/new/inside.txt", "fine\n");
    env.write("notes/outside.txt", "not fine\n");
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("changed outside the scope: notes/outside.txt."), "{}", run.reason());
    std::fs::remove_dir_all(env.project.join("notes")).unwrap();
    ends_verified(&env, &["out_of_scope", "verified"]);
}

#[test]
fn a_failing_check_is_not_held_to_the_scope() {
    let env = project();
    env.start(r#"fix it --verify "sh check.sh" --scope "src/**""#);
    env.write("README.md", "edited\n");
    let run = env.stop("not yet");
    assert!(run.reason().contains("Verify `sh check.sh` failed"), "{}", run.reason());
    assert_eq!(env.ledger_reasons(SESSION), ["verify_failed"]);
    assert!(last_line(&env).get("out_of_scope").is_none());
}

#[test]
fn the_reviewer_sees_only_a_pass_inside_the_scope_with_its_change() {
    let env = project();
    let seen = tempfile::tempdir().unwrap();
    let file = seen.path().join("seen.json");
    env.start(&format!(r#"fix it --verify "sh check.sh" --scope src --review "cat > '{}'""#, file.display()));
    env.write("src/done", "");
    env.write("README.md", "edited\n");
    assert!(env.stop("done").blocked());
    assert!(!file.exists(), "a pass outside the scope is never reviewed");
    git(&env.project, &["checkout", "--", "README.md"]);
    let done = next(&env);
    assert!(!done.blocked(), "{}", done.stdout);
    let input: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(input["files_changed"], serde_json::json!(["src/done"]));
    assert!(input["diff"].as_str().unwrap().contains("src/done"), "{input}");
    assert_eq!(env.ledger_reasons(SESSION), ["out_of_scope", "review_approved", "verified"]);
}

/// A loop started below the top level judges paths from its own directory: a change above it is
/// outside every scope, named from there, and the loop's own store, inside the same work tree
/// here, is not the model's change.
#[test]
fn a_loop_below_the_top_level_names_changes_above_it_and_leaves_its_store_alone() {
    let env = TestEnv::new();
    let top = env.project.parent().unwrap().to_path_buf();
    git(&top, &["init", "-q"]);
    env.write("check.sh", "test -f src/done\n");
    std::fs::write(top.join("above.txt"), "above\n").unwrap();
    git(&top, &["add", "project", "above.txt"]);
    git(&top, &["commit", "-qm", "init"]);
    env.start(r#"fix it --verify "sh check.sh" --scope "src/**""#);
    env.write("src/done", "");
    std::fs::write(top.join("above.txt"), "edited\n").unwrap();
    let run = env.stop("done");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(run.reason().contains("changed outside the scope: ../above.txt."), "{}", run.reason());
    git(&top, &["checkout", "--", "above.txt"]);
    let done = next(&env);
    assert!(!done.blocked(), "the store's files are for-loop's, not the model's: {}", done.stdout);
}

const PLAN: &str = "\
- [ ] Write one
  scope: `one/**`
  verify: test -f one/done
- [ ] Write two
  scope: two/**, PLAN-notes.md
  verify: test -f two/done
";

#[test]
fn a_storys_scope_judges_the_change_since_that_story_began() {
    let env = project();
    env.write("PLAN.md", PLAN);
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "plan"]);
    let start = env.start("--plan PLAN.md --scope one --scope two");
    assert!(start.stdout.contains("Its scope: one/** (change only these files"), "{}", start.stdout);

    env.write("one/done", "");
    env.write("one/extra.txt", "story one's own file\n");
    let first = next(&env);
    assert!(first.reason().contains("Story 1. Write one is done"), "{}", first.reason());
    assert!(first.reason().contains("Its scope: two/**, PLAN-notes.md"), "{}", first.reason());

    // Story 1's files, changed before story 2 began, are not story 2's change.
    env.write("two/done", "");
    env.write("one/extra.txt", "changed during story two\n");
    env.write("PLAN-notes.md", "inside the story's scope, outside the loop's\n");
    let run = next(&env);
    assert!(run.blocked(), "{}", run.stdout);
    let reason = run.reason();
    assert!(
        reason.contains("one, two (the loop's), and within it two/**, PLAN-notes.md (this story's)"),
        "{reason}"
    );
    assert!(reason.contains("changed outside the scope: PLAN-notes.md, one/extra.txt."), "{reason}");

    std::fs::remove_file(env.project.join("PLAN-notes.md")).unwrap();
    env.write("one/extra.txt", "story one's own file\n");
    ends_verified(&env, &["story_verified", "out_of_scope", "verified"]);
}

#[test]
fn a_metric_attempt_outside_the_scope_is_rolled_back() {
    let env = TestEnv::new();
    git(&env.project, &["init", "-q"]);
    env.write("bench.sh", "cat value.txt\n");
    env.write("value.txt", "130\n");
    env.write("other.txt", "other\n");
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "init"]);
    env.start(r#"make it faster --metric "sh bench.sh" --direction min --scope value.txt"#);

    env.write("value.txt", "100\n");
    env.write("other.txt", "touched\n");
    let run = env.stop("");
    assert!(run.blocked(), "{}", run.stdout);
    assert!(
        run.reason()
            .contains("discarded: it changed outside the scope: other.txt, so its number does not count"),
        "{}",
        run.reason()
    );
    let read = |name: &str| std::fs::read_to_string(env.project.join(name)).unwrap();
    assert_eq!((read("value.txt").as_str(), read("other.txt").as_str()), ("130\n", "other\n"), "rolled back");

    env.write("value.txt", "100\n");
    let run = next(&env);
    assert!(run.reason().contains("kept: 130 → 100"), "{}", run.reason());
    assert_eq!(read("value.txt"), "100\n");
    assert_eq!(env.ledger_reasons(SESSION)[1..], ["out_of_scope", "metric_kept"]);
}

#[test]
fn bad_scopes_are_refused_at_start_naming_the_glob() {
    let env = project();
    for (flags, said) in [
        ("--scope ../up", "--scope `../up` is not valid: give a path inside the project"),
        ("--scope 'src/[x'", "--scope `src/[x` is not valid: it is not a glob"),
        ("--scope ''", "--scope needs a value"),
        ("--scopes src", "did you mean --scope?"),
    ] {
        let run = env.run(&["start", "--session", SESSION], format!("fix it --verify true {flags}"));
        assert_ne!(run.code, 0, "{flags}");
        assert!(run.stdout.contains(said), "{flags}: {}", run.stdout);
    }
    env.write("BAD.md", "- [ ] One\n  scope: /etc\n  verify: true\n");
    let run = env.run(&["start", "--session", SESSION], "--plan BAD.md");
    assert!(run.stdout.contains("story 1. One's scope `/etc` is not valid"), "{}", run.stdout);
    assert!(!env.state_path().exists(), "nothing was started");

    let plain = TestEnv::new();
    let run = plain.run(&["start", "--session", SESSION], "fix it --verify true --scope src");
    assert_ne!(run.code, 0);
    assert!(run.stdout.contains("is not in a git repository: run `git init` there first"), "{}", run.stdout);
}
