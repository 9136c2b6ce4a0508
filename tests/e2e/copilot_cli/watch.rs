//! Copilot CLI's hook folder changed by the agent while a loop runs (issue 32).

use mock_model::{MockModel, Script};

use super::{Installed, SESSION};
use crate::util::python_base64;

/// The agent removes for-loop's hook file from Copilot CLI's hook folder (python from base64),
/// so that no later session runs it, and claims done with a check that passes. The session's
/// `agentStop` hook still runs, sees the change, names the folder to the agent, records it as the
/// agent's, and does not count that pass; the next stop is judged as usual.
#[test]
fn copilot_cli_hook_file_removed_by_the_agent_is_told_at_the_next_stop() {
    let installed = Installed::new();
    let env = &installed.env;
    env.write("check.sh", "exit 0\n");
    let folder = env.home.join(".copilot/hooks");
    let attack = python_base64(&format!(
        "import os\nos.remove({:?})\n",
        folder.join("for-loop.json").display().to_string()
    ));
    let model = MockModel::start(Script::new().bash(&attack).text("Done.").text("Done, again.")).unwrap();
    let dump = installed.run_with(
        &model,
        "/for-loop fix it --verify \"sh check.sh\" --max-iterations 3",
        SESSION,
        false,
        &["--allow-all-paths"],
    );
    assert!(!folder.join("for-loop.json").exists(), "the attack did not run: {dump}");
    assert_eq!(env.ledger_reasons(SESSION), ["host_config_changed", "hooks_changed", "verified"], "{dump}");
    assert_eq!(env.ledger_of(SESSION)[0]["origin"], "agent");
    let fed = model.main_requests()[2].last_user_text().unwrap_or_default();
    assert!(fed.contains(&folder.display().to_string()), "the agent was not told: {fed}\n{dump}");
}
