//! opencode's plugin removed by the agent while a loop runs (issue 32).

use mock_model::{MockModel, Script};

use super::{Installed, ended, settle};
use crate::util::python_base64;

/// The agent removes for-loop's plugin from opencode's config folder (python from base64), so
/// that no later start loads it, and claims done with a check that passes. The running server
/// keeps the plugin it loaded, so the idle is still judged: the change is named to the agent,
/// recorded as the agent's, and that pass does not count; the next idle is judged as usual.
#[test]
fn opencode_plugin_removed_by_the_agent_is_told_at_the_next_idle() {
    let installed = Installed::new();
    let env = &installed.env;
    env.write("check.sh", "exit 0\n");
    let plugin = env.home.join(".config/opencode/plugins/for-loop.js");
    let attack = python_base64(&format!("import os\nos.remove({:?})\n", plugin.display().to_string()));
    let model = MockModel::start(Script::new().bash(&attack).text("Done.").text("Done, again.")).unwrap();
    let server = installed.serve(&model);
    let (session, dump) = installed.start_loop(&server, 3);
    settle("the loop to end", || ended(&installed.state(&session)));
    assert!(!plugin.exists(), "the attack did not run: {dump}");
    assert_eq!(env.ledger_reasons(&session), ["host_config_changed", "hooks_changed", "verified"], "{dump}");
    assert_eq!(env.ledger_of(&session)[0]["origin"], "agent");
    let fed = model.main_requests()[2].last_user_text().unwrap_or_default();
    assert!(fed.contains(&plugin.display().to_string()), "the agent was not told: {fed}\n{dump}");
}
