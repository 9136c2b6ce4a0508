//! The agent sends its own cancel and stop through for-loop's hooks in a real Qwen Code session,
//! without the `QWEN_CODE` variable that gave its shell away before: the hooks' process tree
//! does, in the foreground of a tool call and from a job left behind.

use mock_model::{MockModel, Script};
use serde_json::json;

use super::{CHECK, Installed, SESSION};
use crate::e2e::forge::{Forge, answers, assert_held};

#[test]
fn qwen_code_a_cancel_and_a_stop_the_agent_sends_itself_are_refused_and_recorded() {
    let installed = Installed::new(Some(100));
    installed.env.write("check.sh", CHECK);
    let started = installed.env.run(
        &["start", "--session", SESSION, "--host", "qwen-code"],
        "create the file named fixed --verify \"sh check.sh\" --max-iterations 2",
    );
    assert_eq!(started.code, 0, "{}", started.stdout);
    let forge = Forge {
        binary: "[os.environ['FOR_LOOP_' + 'BIN']]",
        prompt_args: &["prompt-hook", "--host", "qwen-code"],
        prompt_event: json!({"session_id": SESSION, "hook_event_name": "UserPromptSubmit",
            "prompt": "/cancel-loop", "submitted_prompt": "/cancel-loop"}),
        stop_args: &["stop-hook", "--host", "qwen-code"],
        stop_event: json!({"session_id": SESSION, "hook_event_name": "Stop", "stop_hook_active": false,
            "crons": [], "last_assistant_message": "All fixed."}),
        drop_vars: &["QWEN_CODE"],
    };
    let model = MockModel::start(
        Script::new().bash(forge.foreground()).bash(forge.left_behind()).text("Done.").text("Done again."),
    )
    .unwrap();
    let dump = installed.run(&model, "go on", SESSION, false);
    let answers = answers(&installed.env.project);
    assert_held(&answers, &installed.env.ledger_of_raw(SESSION), true, &dump);
    assert!(installed.state(SESSION).contains("outcome: cap_reached"), "{dump}");
}
