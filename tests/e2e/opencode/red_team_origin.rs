//! The agent sends its own `/cancel-loop` and idle through for-loop's plugin programs in a real
//! opencode session, without the `OPENCODE` variables: the programs' process tree gives it away,
//! in the foreground of a tool call and from a job left behind.

use mock_model::{MockModel, Script};
use serde_json::json;

use super::{Installed, ended, settle};
use crate::e2e::forge::{Forge, answers, assert_held};

#[test]
fn opencode_a_cancel_and_an_idle_the_agent_sends_itself_are_refused_and_recorded() {
    let installed = Installed::new();
    let forge = Forge {
        binary: "[os.path.expanduser('~/.cargo/bin/loop-' + 'hook')]",
        prompt_args: &["prompt-hook", "--host", "opencode"],
        prompt_event: json!({"opencode_hook": "command.execute.before", "directory": "@cwd",
            "input": {"command": "cancel-loop", "sessionID": "@session", "arguments": ""}}),
        stop_args: &["stop-hook", "--host", "opencode"],
        stop_event: json!({"opencode_hook": "event", "directory": "@cwd",
            "event": {"type": "session.idle", "properties": {"sessionID": "@session"}}}),
        drop_vars: &["OPENCODE", "OPENCODE_PID"],
    };
    let model = MockModel::start(
        Script::new().bash(forge.foreground()).bash(forge.left_behind()).text("Done.").text("Done again."),
    )
    .unwrap();
    let server = installed.serve(&model);
    let (session, dump) = installed.start_loop(&server, 2);
    settle("the loop to end", || ended(&installed.state(&session)));
    assert_held(&answers(&installed.env.project), &installed.env.ledger_of_raw(&session), true, &dump);
    assert!(installed.state(&session).contains("outcome: cap_reached"), "{dump}");
}
