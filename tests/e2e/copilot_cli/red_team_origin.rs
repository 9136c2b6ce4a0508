//! The agent sends its own cancel and stop through for-loop's hooks in a real Copilot CLI
//! session: the hooks' process tree gives it away, in the foreground of a tool call and from a
//! job left behind.

use mock_model::{MockModel, Script};
use serde_json::json;

use super::{Installed, SESSION};
use crate::e2e::forge::{Forge, answers, assert_held};

#[test]
fn copilot_cli_a_cancel_and_a_stop_the_agent_sends_itself_are_refused_and_recorded() {
    let installed = Installed::new();
    let forge = Forge {
        binary: "[os.path.expanduser('~/.cargo/bin/loop-' + 'hook')]",
        prompt_args: &["prompt-hook", "--host", "copilot-cli"],
        prompt_event: json!({"sessionId": SESSION, "prompt": "/cancel-loop"}),
        stop_args: &["stop-hook", "--host", "copilot-cli"],
        stop_event: json!({"sessionId": SESSION, "stopReason": "end_turn"}),
        drop_vars: &["COPILOT_AGENT_SESSION_ID", "COPILOT_CLI"],
    };
    let model = MockModel::start(
        Script::new().bash(forge.foreground()).bash(forge.left_behind()).text("Done.").text("Done again."),
    )
    .unwrap();
    let dump = installed.run_with(
        &model,
        "/for-loop create the file named fixed --verify \"sh check.sh\" --max-iterations 2",
        SESSION,
        false,
        &["--allow-all-paths"],
    );
    let answers = answers(&installed.env.project);
    assert_held(&answers, &installed.env.ledger_of_raw(SESSION), true, &dump);
    assert!(installed.state(SESSION).contains("outcome: cap_reached"), "{dump}");
}
