//! `loop-hook rollback`: list a `--checkpoint` loop's snapshots, show what restoring one would
//! change, and restore it when confirmed with `--yes`.

use crate::commands::request::flag_spec::{Flag, Group};
use crate::commands::request::words::{self, Given};
use crate::commands::session::{self, Target};
use crate::host::Origin;
use crate::provenance::{Mutation, origin};
use crate::state::LoopState;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::Custody;
use crate::store::LoopPaths;
use crate::store::{Notes, Transaction};
use crate::support::Environment;
use crate::support::Outcome;
use crate::worktree::WorkTree;

/// Files a plan names before it only counts them.
const SHOWN: usize = 20;

/// `text` is what was typed after `/for-loop:rollback`: nothing (list), `N` (show the plan) or
/// `N --yes` (restore). The loop is read under its lock, held until the rollback is recorded, so
/// the rollback acts on the loop as last committed and its ledger line lands in that hold.
pub(crate) fn run(env: &Environment, target: &Target, text: &str, origin: Origin) -> Outcome {
    let Words { n, yes } = match Words::parse(text) {
        Ok(words) => words,
        Err(refusal) => return refusal,
    };
    let paths = match target.loop_paths(env) {
        Ok(Some(paths)) => paths,
        Ok(None) => return Outcome::refused("for-loop: no loop in this session."),
        Err(refusal) => return refusal,
    };
    // Refused before the lock: inside a sandbox the agent's shell cannot even open the lock file,
    // and the refusal is the message it should get.
    if yes && let Some(refusal) = refused_by_origin(env, &paths, origin) {
        return refusal;
    }
    let transaction = match session::locked(&paths, "roll back") {
        Ok(transaction) => transaction,
        Err(refusal) => return refusal,
    };
    let (state, noticed) = match transaction.read(env.now) {
        Ok(Custody::Loop { state, incidents }) => (state, incidents),
        Ok(Custody::Untrusted { why, .. }) => {
            return Outcome::refused(format!(
                "for-loop: not rolled back: {why}, so the loop's checkpoints cannot be told apart from \
                 forged ones. Its next stop ends it; git still holds the checkpoints (refs/for-loop/)."
            ));
        }
        Ok(Custody::None) => return Outcome::refused("for-loop: no loop in this session."),
        Err(e) => return Outcome::refused(format!("for-loop: {e}")),
    };
    // What custody restored is recorded now: no stop may come to tell it.
    for incident in &noticed {
        let _ = transaction.note_or_keep(&incident.note(&state, env.now));
    }
    let told = crate::verdict::message::incident_lines(&noticed);
    let tree = WorkTree::open(&state.meta.cwd);
    let loop_id = &state.meta.loop_id;
    let Some(n) = n else {
        return with_incidents(&told, list_checkpoints(&tree, &state));
    };
    let plan = match if yes { tree.rollback(loop_id, n) } else { tree.rollback_plan(loop_id, n) } {
        Ok(plan) => plan,
        Err(e) => return with_incidents(&told, Outcome::refused(format!("for-loop: {e}"))),
    };
    if yes {
        record_rollback(env, &transaction, &state, n, &plan.commit, origin);
    }
    with_incidents(
        &told,
        Outcome::ok(describe_plan(&state, n, yes, &plan.commit, &plan.restore, &plan.delete)),
    )
}

/// Whether `origin` may not roll back this loop's tree, judged on the loop as last committed
/// without taking its lock (read only).
fn refused_by_origin(env: &Environment, paths: &LoopPaths, origin: Origin) -> Option<Outcome> {
    let state = crate::store::custody::trusted_state(paths).ok().flatten()?;
    origin::gate(env, Notes::Free(paths), &state, Mutation::Rollback, origin)
}

/// `outcome` with the incidents custody found before it, for the user.
fn with_incidents(told: &str, mut outcome: Outcome) -> Outcome {
    outcome.stdout = format!("{told}{}", outcome.stdout);
    outcome
}

/// What was typed after `/for-loop:rollback`.
struct Words {
    /// The checkpoint asked for; none lists them.
    n: Option<u32>,
    /// `--yes`: restore it, not only show what restoring it would change.
    yes: bool,
}

/// What to write after `/for-loop:rollback`.
const USAGE: &str = "give a checkpoint number, then --yes to restore it";

impl Words {
    /// Reads the checkpoint's number and `--yes` through the option table ([`Group::ROLLBACK`]).
    fn parse(text: &str) -> Result<Words, Outcome> {
        let refused = |why: String| Outcome::refused(format!("for-loop: {why}"));
        let given = words::read(Group::ROLLBACK, text.split_whitespace().map(str::to_string))
            .map_err(|e| refused(e.describe("a rollback option", USAGE)))?;
        let mut words = Words { n: None, yes: false };
        for given in given {
            match given {
                Given::Option(Flag::Yes, _) => words.yes = true,
                Given::Word(word) => match word.parse::<u32>() {
                    Ok(value) if words.n.is_none() => words.n = Some(value),
                    _ => return Err(refused(format!("`{word}` is not a rollback option: {USAGE}"))),
                },
                Given::Option(flag, _) => {
                    return Err(refused(format!("`{flag}` is not a rollback option: {USAGE}")));
                }
            }
        }
        Ok(words)
    }
}

/// The loop's checkpoints, one a line, or why there are none.
fn list_checkpoints(tree: &WorkTree, state: &LoopState) -> Outcome {
    let loop_id = &state.meta.loop_id;
    match tree.checkpoints(loop_id) {
        Ok(list) if list.is_empty() => Outcome::ok(if state.meta.settings.checkpoint {
            "for-loop: no checkpoints yet; one is taken after each iteration."
        } else {
            "for-loop: this loop takes no checkpoints; start a loop with --checkpoint to get them."
        }),
        Ok(list) => {
            let lines: Vec<String> = list
                .iter()
                .map(|(n, commit)| {
                    format!("  {n:>3}  {}  refs/for-loop/{loop_id}/{n}", &commit[..commit.len().min(12)])
                })
                .collect();
            Outcome::ok(format!(
                "for-loop: checkpoints of loop {loop_id} (after each iteration):\n{}\n/for-loop:rollback N shows what restoring N would change.",
                lines.join("\n")
            ))
        }
        Err(e) => Outcome::refused(format!("for-loop: {e}")),
    }
}

/// Writes the rollback done to checkpoint `n` (`commit`) to the ledger, in the transaction that
/// read the loop, and tells whoever watches mutations by `origin`.
fn record_rollback(
    env: &Environment,
    transaction: &Transaction<'_>,
    state: &LoopState,
    n: u32,
    commit: &str,
    origin: Origin,
) {
    let entry = LedgerEntry {
        detail: Some(format!("rolled back to checkpoint {n} ({commit})")),
        origin: Some(origin),
        ..LedgerEntry::new(state, env.now, LedgerDecision::Rollback, ReasonCode::RolledBack)
    };
    let _ = transaction.note_or_keep(&entry);
    origin::after(Notes::Held(transaction), state, Mutation::Rollback, origin);
}

/// What rolling back to checkpoint `n` changed (`done`) or would change: the files restored and
/// deleted.
fn describe_plan(
    state: &LoopState,
    n: u32,
    done: bool,
    commit: &str,
    restore: &[String],
    delete: &[String],
) -> String {
    let (verb_restore, verb_delete) =
        if done { ("restored", "deleted") } else { ("would restore", "would delete") };
    let mut out = format!(
        "for-loop: {} checkpoint {n} ({}) in {}\n  {verb_restore}:\n{}\n  {verb_delete}:\n{}",
        if done { "rolled back to" } else { "rolling back to" },
        &commit[..commit.len().min(12)],
        state.meta.cwd.display(),
        file_list(restore),
        file_list(delete)
    );
    if !done {
        out.push_str(&format!(
            "\nNothing was changed. To do it: /for-loop:rollback {n} --yes (your git index, HEAD, branches and stash are not touched)."
        ));
    }
    out
}

/// `files` one a line, the first [`SHOWN`] of them by name.
fn file_list(files: &[String]) -> String {
    let mut shown: Vec<String> = files.iter().take(SHOWN).map(|f| format!("    {f}")).collect();
    if files.len() > SHOWN {
        shown.push(format!("    and {} more", files.len() - SHOWN));
    }
    if shown.is_empty() { "    (none)".to_string() } else { shown.join("\n") }
}
