//! `loop-hook doctor`: whether a loop would hold here, checked for every host installed on this
//! machine (or the one `--host` names) and the project it runs in, one line per check with the
//! command that fixes it. With for-loop installed for no host at all, its first line says so and
//! what to install first, rather than judging nothing and finding nothing wrong.
//!
//! Every failure it looks for is a silent one: a hook that is not registered, not trusted or
//! switched off, a binary of another version found first, a store the hooks cannot write. Each
//! lets the agent stop as if no loop ran, and says nothing. The facts are gathered in
//! [`gather`] and judged in [`lines`], a pure function tested without a filesystem; what each
//! host's installation needs is its adapter's to check ([`crate::host::install`]), so nothing
//! here names a host.

mod facts;
mod gather;
mod lines;

use serde_json::json;

use crate::host::Host;
use crate::support::Environment;
use crate::support::{Code, Outcome};
use lines::Check;

/// What `loop-hook doctor` was asked.
#[derive(Debug, Clone, Default)]
pub(crate) struct DoctorOptions {
    pub host: Option<Host>,
    pub json: bool,
}

pub(crate) fn run(env: &Environment, options: &DoctorOptions) -> Outcome {
    let facts = gather::gather(env, options.host);
    let mut checks = lines::lines(&facts);
    checks.extend(watch_checks(env));
    let pass = lines::all_pass(&checks);
    let stdout = if options.json {
        json_report(&checks, pass)
    } else {
        text_report(&checks, pass, &facts.project.display().to_string())
    };
    Outcome { code: if pass { Code::Success } else { Code::Refused }, stdout }
}

/// One failing line per running loop whose host configuration changed since its last hook: the
/// change may have stopped the host running any hook of for-loop's, which then cannot say so.
fn watch_checks(env: &Environment) -> Vec<Check> {
    let Ok(store) = crate::store::Store::locate(env) else { return Vec::new() };
    let loops = store.all().unwrap_or_default();
    loops
        .iter()
        .filter_map(|paths| crate::store::custody::trusted_state(paths).ok().flatten())
        .filter_map(|state| {
            let changes = crate::commands::status::watch_changes(&state, env);
            (!changes.is_empty()).then(|| Check {
                name: format!("loop {}", state.meta.loop_id),
                ok: false,
                detail: format!(
                    "since its last hook, something that decides whether for-loop's hooks run at all changed: {}",
                    changes.join("; ")
                ),
                fix: Some(format!(
                    "put it back, or {} if you meant to end the loop",
                    state.meta.host.commands().cancel
                )),
                matters: true,
            })
        })
        .collect()
}

fn json_report(checks: &[Check], pass: bool) -> String {
    let checks: Vec<_> = checks
        .iter()
        .map(|c| json!({"name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix, "matters": c.matters}))
        .collect();
    json!({"ok": pass, "checks": checks}).to_string()
}

fn text_report(checks: &[Check], pass: bool, project: &str) -> String {
    let mut out = format!("for-loop doctor: {project}\n");
    for check in checks {
        let mark = if check.ok { '✓' } else { '✗' };
        out.push_str(&format!("{mark} {}: {}\n", check.name, check.detail));
        if let Some(fix) = check.fix.as_ref().filter(|_| !check.ok) {
            out.push_str(&format!("    fix: {fix}\n"));
        }
    }
    let failing = checks.iter().filter(|c| !c.ok && c.matters).count();
    let minor = checks.iter().any(|c| !c.ok && !c.matters);
    let nothing = checks.iter().any(|c| c.name == lines::NOTHING_INSTALLED && !c.ok);
    out.push_str(&if nothing {
        "for-loop is not installed for any agent host here, so no loop can hold: install what the first fix \
         says, then run `loop-hook doctor` again."
            .to_string()
    } else if pass && minor {
        "Everything a loop needs here is in place; the ✗ lines above are about hosts or loops it does not need."
            .to_string()
    } else if pass {
        "Everything a loop needs here is in place.".to_string()
    } else {
        format!("{failing} problem(s) above keep a loop from holding: run each fix, then `loop-hook doctor` again.")
    });
    out
}
