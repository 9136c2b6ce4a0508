//! Gemini CLI's configuration changed by the agent while a loop runs (issue 32).

use mock_model::{MockModel, Script};

use super::super::only_session;
use super::{gemini_world, run_gemini};
use crate::util::python_base64;

/// The agent switches Gemini CLI's hooks off for every later start (`hooksConfig.enabled:
/// false` in the user's settings, written by python from base64) and claims done with a check
/// that passes. The session's `AfterAgent` hook still runs (the CLI loaded it at the start), sees
/// the change, names it to the agent and the user, records it as the agent's, and does not count
/// that pass; the next turn end is judged as usual.
#[test]
fn gemini_cli_hooks_switched_off_by_the_agent_are_told_at_the_next_turn_end() {
    let (gemini, env) = gemini_world();
    env.write("check.sh", "exit 0\n");
    let settings = env.home.join(".gemini/settings.json");
    let attack = python_base64(&format!(
        "import json\np = {:?}\ns = json.load(open(p))\ns['hooksConfig'] = {{'enabled': False}}\n\
         open(p, 'w').write(json.dumps(s))\n",
        settings.display().to_string()
    ));
    let model = MockModel::start(Script::new().bash(&attack).text("Done.").text("Done, again.")).unwrap();
    let (stdout, stderr) = run_gemini(
        &gemini,
        &env,
        &model,
        "/for-loop fix it --verify \"sh check.sh\" --max-iterations 3",
        &[],
    );
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    assert!(
        std::fs::read_to_string(&settings).unwrap().contains("hooksConfig"),
        "the attack did not run: {dump}"
    );
    let session = only_session(&env);
    assert_eq!(env.ledger_reasons(&session), ["host_config_changed", "hooks_changed", "verified"], "{dump}");
    assert_eq!(env.ledger_of(&session)[0]["origin"], "agent");
    let named = settings.display().to_string();
    let fed = model.main_requests()[2].last_user_text().unwrap_or_default();
    assert!(fed.contains(&named), "the agent was not told: {fed}\n{dump}");
}
