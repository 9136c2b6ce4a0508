//! Qwen Code's configuration changed by the agent while a loop runs (issue 32).

use mock_model::{MockModel, Script};

use super::{Installed, SESSION};
use crate::util::python_base64;

/// The agent switches Qwen Code's hooks off for every later start (`disableAllHooks` in the
/// user's settings, written by python from base64) and claims done with a check that passes.
/// The session's `Stop` hook still runs, sees the change, names it to the agent, records it as
/// the agent's, and does not count that pass; the next stop is judged as usual.
#[test]
fn qwen_code_hooks_switched_off_by_the_agent_are_told_at_the_next_stop() {
    let installed = Installed::new(Some(100));
    let env = &installed.env;
    env.write("check.sh", "exit 0\n");
    let settings = env.home.join(".qwen/settings.json");
    let attack = python_base64(&format!(
        "import json\np = {:?}\ns = json.load(open(p))\ns['disableAllHooks'] = True\n\
         open(p, 'w').write(json.dumps(s))\n",
        settings.display().to_string()
    ));
    let model = MockModel::start(Script::new().bash(&attack).text("Done.").text("Done, again.")).unwrap();
    let dump =
        installed.run(&model, "/for-loop fix it --verify \"sh check.sh\" --max-iterations 3", SESSION, false);
    assert!(
        std::fs::read_to_string(&settings).unwrap().contains("disableAllHooks"),
        "the attack did not run: {dump}"
    );
    assert_eq!(env.ledger_reasons(SESSION), ["host_config_changed", "hooks_changed", "verified"], "{dump}");
    assert_eq!(env.ledger_of(SESSION)[0]["origin"], "agent");
    let fed = model.main_requests()[2].last_user_text().unwrap_or_default();
    assert!(fed.contains(&settings.display().to_string()), "the agent was not told: {fed}\n{dump}");
}
