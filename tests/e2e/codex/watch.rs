//! Codex's configuration changed by the agent while a loop runs (issue 32).

use mock_model::{MockModel, Script};

use super::super::{only_session, run_text};
use super::{Installed, project};
use crate::util::python_base64;

/// The agent switches Codex's hooks off for every later start (`[features] hooks = false` in
/// `config.toml`, written by python from base64, in a run without Codex's sandbox, which would
/// keep the agent out of `CODEX_HOME`) and claims done with a check that passes. The session's
/// Stop hook still runs, sees the change, names it to the agent, records it as the agent's, and
/// does not count that pass; the next stop is judged as usual.
#[test]
fn codex_hooks_switched_off_by_the_agent_are_told_at_the_next_stop() {
    let env = project();
    let config = env.home.join("codex-home/config.toml");
    let attack = python_base64(&format!(
        "p = {:?}\nopen(p, 'a').write('\\n[features]\\nhooks = false\\n')\n",
        config.display().to_string()
    ));
    let model = MockModel::start(Script::new().bash(&attack).text("Done.").text("Done, again.")).unwrap();
    let installed = Installed::new(env, &model);
    let env = &installed.env;
    env.write("check.sh", "exit 0\n");
    let mut cmd = installed.command(&model, &installed.codex);
    cmd.args(["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"])
        .arg("--dangerously-bypass-hook-trust")
        .arg("$for-loop:for-loop fix it --verify \"sh check.sh\" --max-iterations 3");
    let (stdout, stderr) = run_text(cmd, "codex", b"");
    let dump = format!("{stdout}\n--- stderr:\n{stderr}");
    assert!(
        std::fs::read_to_string(&config).unwrap().contains("hooks = false"),
        "the attack did not run: {dump}"
    );
    let session = only_session(env);
    assert_eq!(env.ledger_reasons(&session), ["host_config_changed", "hooks_changed", "verified"], "{dump}");
    assert_eq!(env.ledger_of(&session)[0]["origin"], "agent");
    let fed = model.main_requests()[2].last_user_text().unwrap_or_default();
    assert!(fed.contains(&config.display().to_string()), "the agent was not told: {fed}\n{dump}");
}
