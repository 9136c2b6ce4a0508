//! A model that listens, with the real Claude Code CLI: it fixes a failing test only when the
//! last thing it was told (the Stop hook's feedback) named the test with the value it expects.
//! Its first turn claims done without doing anything; the re-injection that follows must carry
//! every failure, named with its expected value, for the loop to end verified at the next stop.
//! Told only part (an excerpt that lost the end of the output, ten of forty failures), the
//! model fixes only part, and the loop takes more turns or never ends.

use std::path::PathBuf;

use mock_model::{Fix, MockModel, Script};

use super::{SESSION_A, World, reinjections};
use crate::util::python;

/// The script: claim done untold, then fix what the feedback names, then say so.
fn listening(fixes: Vec<Fix>) -> Script {
    Script::new().text("I have finished the task.").listen(fixes).text("I fixed the failures I was told of.")
}

/// `/for-loop` with `check.sh` as verify, Bash allowed, three turns at most, and `flags`.
fn run_loop(world: &World, model: &MockModel, flags: &str) -> super::ClaudeRun {
    let prompt = format!("/for-loop make the check pass --verify \"sh check.sh\" --max-iterations 3 {flags}");
    let run = world.run(model, SESSION_A, &prompt, &["--allowedTools", "Bash"]);
    run.assert_plugin_loaded();
    run
}

/// A Rust project of 150 tests, each expecting entry `i` of a table to be `7000 + i`; the
/// entries of `wrong` are 0.
fn cargo_project(world: &World, wrong: &[u32]) -> Vec<Fix> {
    let env = &world.env;
    env.write(
        "Cargo.toml",
        "[package]\nname = \"table\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    );
    let mut lib = String::from("/// Entry `i` of the table.\npub fn entry(i: u32) -> u32 {\n    match i {\n");
    for &i in wrong {
        lib.push_str(&format!("        {i} => 0,\n"));
    }
    lib.push_str("        _ => 7000 + i,\n    }\n}\n");
    env.write("src/lib.rs", &lib);
    let mut tests = String::from("use table::entry;\n");
    for i in 0..150 {
        tests.push_str(&format!(
            "\n#[test]\nfn entry_{i:03}_holds_its_value_from_the_table() {{\n    assert_eq!(entry({i}), {});\n}}\n",
            7000 + i
        ));
    }
    env.write("tests/table.rs", &tests);
    let target = env.home.join("cargo-target");
    env.write(
        "check.sh",
        &format!(
            "{}CARGO_TARGET_DIR='{}' cargo test --offline --color never 2>&1\n",
            toolchain(),
            target.display()
        ),
    );
    let lib_path = env.project.join("src/lib.rs").display().to_string();
    (0..150)
        .map(|i| Fix {
            name: format!("entry_{i:03}_holds_its_value_from_the_table"),
            expected: (7000 + i).to_string(),
            file_path: lib_path.clone(),
            old_string: format!("        {i} => 0,\n"),
            new_string: format!("        {i} => {},\n", 7000 + i),
        })
        .collect()
}

/// The toolchain of the tests' own build, for a check run with the test's private `$HOME`:
/// `RUSTUP_HOME` and `CARGO_HOME` as the build has them (rustup's defaults under the real home).
fn toolchain() -> String {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let var = |name: &str, default: &str| {
        std::env::var_os(name).map_or_else(|| home.join(default), PathBuf::from).display().to_string()
    };
    format!(
        "export RUSTUP_HOME='{}' CARGO_HOME='{}'\n",
        var("RUSTUP_HOME", ".rustup"),
        var("CARGO_HOME", ".cargo")
    )
}

/// A Python project of 400 tests, one per entry of a table, each expecting entry `i` to be
/// `7000 + i`; the entries of `wrong` are 0.
fn pytest_project(world: &World, wrong: &[u32]) -> Vec<Fix> {
    let env = &world.env;
    let mut table = String::from("TABLE = {\n");
    for i in 0..400 {
        let value = if wrong.contains(&i) { 0 } else { 7000 + i };
        table.push_str(&format!("    {i}: {value},\n"));
    }
    table.push_str("}\n\n\ndef entry(i):\n    return TABLE[i]\n");
    env.write("table.py", &table);
    env.write(
        "tests/test_table.py",
        "import pytest\n\nfrom table import entry\n\n\n@pytest.mark.parametrize(\"i\", range(400))\n\
         def test_entry(i):\n    expected = 7000 + i\n    assert entry(i) == expected, f\"entry {i} of the table is off\"\n",
    );
    env.write(
        "tests/conftest.py",
        "import sys, os\nsys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n",
    );
    env.write("check.sh", &format!("'{}' -m pytest -v -p no:cacheprovider tests 2>&1\n", python().display()));
    let table_path = env.project.join("table.py").display().to_string();
    (0..400)
        .map(|i| Fix {
            name: format!("test_entry[{i}]"),
            expected: (7000 + i).to_string(),
            file_path: table_path.clone(),
            old_string: format!("\n    {i}: 0,\n"),
            new_string: format!("\n    {i}: {},\n", 7000 + i),
        })
        .collect()
}

/// The loop ended verified at the second stop: one turn claiming done, one fixing turn.
fn assert_verified_after_one_fixing_turn(world: &World, model: &MockModel, run: &super::ClaudeRun) {
    let fed = reinjections(model);
    assert_eq!(
        world.env.ledger_reasons(SESSION_A),
        ["verify_failed", "verified"],
        "the model fixed only what the re-injection told it:\n{}\n{}",
        fed.join("\n=====\n"),
        run.dump()
    );
    assert_eq!(fed.len(), 1, "{fed:?}");
    assert!(fed[0].chars().count() <= 10_000, "{}", fed[0].chars().count());
    assert_eq!(model.exhausted_requests(), 0, "{}", run.dump());
}

#[test]
fn two_cargo_test_failures_in_nine_kilobytes_are_both_told_and_fixed_in_one_turn() {
    let world = World::new();
    let wrong = [17, 90];
    let fixes = cargo_project(&world, &wrong);
    let model = MockModel::start(listening(fixes)).unwrap();
    let run = run_loop(&world, &model, "");
    let fed = reinjections(&model);
    let first = fed.first().cloned().unwrap_or_default();
    for i in wrong {
        let name = format!("entry_{i:03}_holds_its_value_from_the_table");
        assert!(first.contains(&name), "{name} is not named:\n{first}");
    }
    let output_bytes =
        world.env.ledger_of(SESSION_A)[0]["verify"]["output_bytes"].as_u64().unwrap_or_default();
    assert!((6_000..16_384).contains(&output_bytes), "an output under the head's 16 KB: {output_bytes}");
    assert_verified_after_one_fixing_turn(&world, &model, &run);
}

#[test]
fn forty_pytest_failures_of_four_hundred_are_all_told_and_fixed_in_one_turn() {
    let world = World::new();
    let wrong: Vec<u32> = (0..400).filter(|i| i % 10 == 7).collect();
    let fixes = pytest_project(&world, &wrong);
    let model = MockModel::start(listening(fixes)).unwrap();
    let run = run_loop(&world, &model, "");
    let fed = reinjections(&model);
    let first = fed.first().cloned().unwrap_or_default();
    assert!(first.contains("Failing (40)"), "the block leads with the count:\n{first}");
    for &i in &wrong {
        assert!(first.contains(&format!("test_entry[{i}]")), "test_entry[{i}] is not named:\n{first}");
    }
    assert_verified_after_one_fixing_turn(&world, &model, &run);
    let status = world.env.run(&["status", "--session", SESSION_A], "");
    assert!(status.stdout.contains("none failing; 40 of 40 fixed"), "{}{}", status.stdout, status.stderr);
}

/// The control: the same model and project, with a re-injection too small to carry forty
/// failures with their values. The model fixes exactly the ones it was told of with their values
/// (here the names come, the values do not), so the second stop still fails: what ends the loop
/// above is what the re-injection carried.
#[test]
fn a_reinjection_too_small_for_forty_failures_with_their_values_leaves_them_unfixed() {
    let world = World::new();
    let wrong: Vec<u32> = (0..400).filter(|i| i % 10 == 7).collect();
    let fixes = pytest_project(&world, &wrong);
    let model = MockModel::start(listening(fixes.clone())).unwrap();
    let run = run_loop(&world, &model, "--feedback-tokens 1500");
    let reasons = world.env.ledger_reasons(SESSION_A);
    assert_eq!(reasons[..2], ["verify_failed", "verify_failed"], "{}", run.dump());
    let fed = reinjections(&model);
    // Only the failing tests are in the output, so only their fixes can be told.
    let told = fixes.iter().filter(|fix| fix.told_in(&fed[0])).count();
    assert!(told < wrong.len(), "{}", fed[0]);
    assert!(
        wrong.iter().all(|i| fed[0].contains(&format!("test_entry[{i}]"))),
        "every name still comes: {}",
        fed[0]
    );
    let second = &world.env.ledger_of(SESSION_A)[1];
    let failing = second["verify"]["failing"]["names"].as_array().map_or(0, Vec::len);
    assert_eq!(failing, wrong.len() - told, "the model fixed exactly what it was told:\n{}", fed[0]);
}
