//! `loop-hook rollback`: list a `--checkpoint` loop's snapshots, show what restoring one would
//! change, and restore it when confirmed with `--yes`.

use crate::commands::session::Target;
use crate::host::origin::Origin;
use crate::provenance::origin::{self, Mutation};
use crate::store::ledger::{LedgerDecision, LedgerEntry};
use crate::store::reason_code::ReasonCode;
use crate::support::environment::Environment;
use crate::support::outcome::Outcome;
use crate::worktree::WorkTree;

/// Files a plan names before it only counts them.
const SHOWN: usize = 20;

/// `text` is what was typed after `/for-loop:rollback`: nothing (list), `N` (show the plan) or
/// `N --yes` (restore).
pub(crate) fn run(env: &Environment, target: &Target, text: &str, origin: Origin) -> Outcome {
    let mut n = None;
    let mut yes = false;
    for word in text.split_whitespace() {
        match word {
            "--yes" | "-y" => yes = true,
            _ => match word.parse::<u32>() {
                Ok(value) if n.is_none() => n = Some(value),
                _ => {
                    return Outcome::refused(format!(
                        "for-loop: `{word}` is not a rollback option: give a checkpoint number, then --yes to restore it"
                    ));
                }
            },
        }
    }
    let (paths, state) = match target.loop_paths(env).map(|paths| paths.map(|p| (p.load(), p))) {
        Ok(Some((Ok(Some(state)), paths))) => (paths, state),
        Ok(None | Some((Ok(None), _))) => return Outcome::refused("for-loop: no loop in this session."),
        Ok(Some((Err(e), _))) => return Outcome::refused(format!("for-loop: {e}")),
        Err(refusal) => return refusal,
    };
    if yes && let Some(refusal) = origin::gate(env, &paths, &state, Mutation::Rollback, origin) {
        return refusal;
    }
    let tree = WorkTree::open(&state.meta.cwd);
    let loop_id = &state.meta.loop_id;
    let Some(n) = n else {
        return match tree.checkpoints(loop_id) {
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
        };
    };
    let plan = match if yes { tree.rollback(loop_id, n) } else { tree.rollback_plan(loop_id, n) } {
        Ok(plan) => plan,
        Err(e) => return Outcome::refused(format!("for-loop: {e}")),
    };
    if yes {
        let entry = LedgerEntry {
            detail: Some(format!("rolled back to checkpoint {n} ({})", plan.commit)),
            origin: Some(origin),
            ..LedgerEntry::new(&state, env.now, LedgerDecision::Rollback, ReasonCode::RolledBack)
        };
        let _ = entry.append_to(&paths.ledger);
        origin::after(&paths, &state, Mutation::Rollback, origin);
    }
    let list = |files: &[String]| {
        let mut shown: Vec<String> = files.iter().take(SHOWN).map(|f| format!("    {f}")).collect();
        if files.len() > SHOWN {
            shown.push(format!("    and {} more", files.len() - SHOWN));
        }
        if shown.is_empty() { "    (none)".to_string() } else { shown.join("\n") }
    };
    let (verb_restore, verb_delete) =
        if yes { ("restored", "deleted") } else { ("would restore", "would delete") };
    let mut out = format!(
        "for-loop: {} checkpoint {n} ({}) in {}\n  {verb_restore}:\n{}\n  {verb_delete}:\n{}",
        if yes { "rolled back to" } else { "rolling back to" },
        &plan.commit[..plan.commit.len().min(12)],
        state.meta.cwd.display(),
        list(&plan.restore),
        list(&plan.delete)
    );
    if !yes {
        out.push_str(&format!(
            "\nNothing was changed. To do it: /for-loop:rollback {n} --yes (your git index, HEAD, branches and stash are not touched)."
        ));
    }
    Outcome::ok(out)
}
