//! Copilot CLI's cap of blocks in a row, kept outside its adapter because it reads and writes
//! the loop: the reason of the last block is remembered, so that the prompt hook can tell the
//! CLI's re-injection of it from the user's own prompt, and an override of the cap is recorded
//! and told to the user once.

use crate::host::COPILOT_BLOCK_CAP;
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::LoopFile;
use crate::store::LoopPaths;
use crate::support::Environment;
use crate::support::digest::sha256_hex;

/// When the user's prompt arrives while this session's loop (`state`, as the prompt hook holds
/// it) last blocked a stop: the override recorded in `state`, its ledger line for the hook's one
/// commit, and the words for the user once it is recorded; `None` when it did not. A blocked
/// stop keeps the agent working, so a prompt can come only after the CLI ended the turn in spite
/// of the block: its cap of [`COPILOT_BLOCK_CAP`] blocks in a row, or the user interrupting it.
/// The CLI tells nobody (one line in its log file), so this hook does, once: the override is
/// recorded as the stop hook records one, and the loop stays on.
pub(crate) fn block_overridden(env: &Environment, state: &mut LoopState) -> Option<(LedgerEntry, String)> {
    if !state.meta.host.caps_blocks_in_a_row() || !state.is_active() || !state.meta.last_blocked {
        return None;
    }
    let entry = LedgerEntry {
        detail: Some(format!(
            "Copilot CLI ended the turn although the last stop was blocked (its cap of {COPILOT_BLOCK_CAP} \
             blocks in a row, or the user interrupted the agent); the user was told at their next prompt"
        )),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Note, ReasonCode::HarnessOverride)
    };
    state.meta.last_blocked = false;
    state.meta.harness_overrides += 1;
    state.meta.updated_at = env.now;
    let told = format!(
        "for-loop: Copilot CLI ended the agent's last turn although for-loop had blocked it: it \
         honours at most {COPILOT_BLOCK_CAP} blocks in a row (or you interrupted the agent). Your loop is still \
         on, at iteration {} of {}, and verify has not passed. This prompt was not sent to the \
         agent: send it again to go on with the loop, or /cancel-loop to end it (/loop-status shows it).",
        state.meta.iteration, state.meta.settings.max_iterations
    );
    Some((entry, told))
}

/// Keeps the digest of `reason`, which the CLI is about to submit as the next prompt, for
/// [`block_overridden`] to know it. A failure only means a continuation may be taken for the
/// user's prompt once: the user is told the loop is on and asked to send the prompt again.
pub(crate) fn remember_block(env: &Environment, session_id: &str, reason: &str) {
    let Ok(store) = crate::store::Store::locate(env) else { return };
    let dir = store.paths(session_id).dir;
    if dir.is_dir() {
        let _ = LoopFile::BlockMemo.write(&dir, sha256_hex(reason.as_bytes()).as_bytes());
    }
}

/// Whether `prompt` is the reason the last stop of this loop was blocked with. The CLI submits
/// a block's reason as the next prompt, through the same `userPromptSubmitted` hook: that prompt
/// is the loop going on, not the user. Matched by content, so a user who pastes it is only not
/// told of an override.
pub(crate) fn is_reinjection(paths: &LoopPaths, prompt: &str) -> bool {
    let remembered = LoopFile::BlockMemo.read(&paths.dir, 64);
    remembered.as_deref() == Some(sha256_hex(prompt.as_bytes()).as_bytes())
}
