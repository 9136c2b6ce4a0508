//! A plan loop's start (`--plan FILE`): the plan read and checked before anything is written, and
//! the start message's lines about its stories.

use std::path::Path;

use crate::checks::Oracle;
use crate::checks::{PlanSettings, plan};
use crate::commands::request::LoopRequest;
use crate::state::LoopState;

/// The plan `request` names, read from the loop's directory; `Err` is why the loop does not
/// start. `Ok(None)` without `--plan`.
pub(crate) fn read(request: &LoopRequest, cwd: &Path) -> Result<Option<PlanSettings>, String> {
    let Some(file) = &request.plan else { return Ok(None) };
    let stories = plan::read(&cwd.join(file), request.verify.as_deref()).map_err(|e| e.to_string())?;
    Ok(Some(PlanSettings {
        file: file.clone(),
        stories,
        story_iterations: request.story_iterations,
        no_tick: request.boxes == plan::PlanBoxes::Left,
    }))
}

/// The plan's file and its stories' checks: part of the oracle, so the model can neither tick a
/// story nor change what checks it.
pub(crate) fn oracle_parts(plan: Option<&PlanSettings>) -> (Vec<&str>, Vec<String>) {
    let Some(plan) = plan else { return (Vec::new(), Vec::new()) };
    let checks = plan.stories.iter().filter_map(|s| s.verify.as_deref()).collect();
    (checks, vec![plan.file.clone()])
}

/// `oracle` with the plan file recorded by its fingerprint without the stories' boxes, so that
/// for-loop's own ticks are no change of the check.
pub(crate) fn with_plan(mut oracle: Oracle, cwd: &Path, plan: Option<&PlanSettings>) -> Oracle {
    if let Some(plan) = plan {
        oracle.fingerprint_plan(cwd, &plan.file);
    }
    oracle
}

/// The start message's lines about the plan: each story, and the one to work on first.
pub(crate) fn banner(state: &LoopState) -> Option<String> {
    let (plan, progress) = (state.meta.settings.plan.as_ref()?, state.meta.plan.as_ref()?);
    let verify = state.meta.settings.verify.as_deref();
    let mut out = format!(
        "\nPlan:        {} ({} stories, {} done already; one at a time, each done when its check passes)\n",
        plan.file,
        plan.stories.len(),
        progress.done_count()
    );
    for (i, story) in plan.stories.iter().enumerate() {
        let mark = if progress.stories.get(i).is_some_and(|s| s.done) { "x" } else { " " };
        let check = plan.check(i, verify).unwrap_or_default();
        out.push_str(&format!("  [{mark}] {}  (check: {check})\n", story.label()));
    }
    out.push_str(&crate::verdict::message::plan::story_brief(state, progress.current));
    if plan.stories.len() as u64 > u64::from(state.meta.settings.max_iterations) {
        out.push_str(&format!(
            "Note: {} iterations are fewer than the {} stories need; give --max-iterations N\n",
            state.meta.settings.max_iterations,
            plan.stories.len()
        ));
    }
    Some(out)
}
