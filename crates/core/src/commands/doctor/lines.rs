//! The judgement: facts in, one line per check out, each with what fixes it. Pure, so every
//! silent failure is tested here without a filesystem.

use super::facts::{Facts, LoopKind, StoreFacts, TierFacts};
use crate::host::Host;
use crate::host::first_install;
use crate::host::{
    Binary, BinaryFacts, INSTALL,
    install::{is_absolute, shell_quote},
};
pub(crate) use crate::host::{Check, install::all_pass};

/// Every check, in the order they are shown.
pub(crate) fn lines(facts: &Facts) -> Vec<Check> {
    let mut out: Vec<Check> = nothing_installed(facts).into_iter().collect();
    out.extend(binary_lines(&facts.binary));
    out.push(store_line(&facts.store));
    for (host, installation) in &facts.hosts {
        out.extend(installation.checks.iter().cloned());
        if host.offers_strict_tier() {
            out.push(tier_line(&facts.tier));
        }
    }
    out.extend(loop_lines(facts));
    out.extend(facts.containment.map(containment_line));
    out
}

/// Where a judged command's output ends: at its exit in a PID namespace; a moment after it
/// otherwise, which a process it left behind can race (worth knowing, not a fault of the loop).
fn containment_line(containment: crate::checks::Containment) -> Check {
    use crate::checks::Containment;
    let detail = format!("{} ({})", containment.words(), containment.name());
    match containment {
        Containment::Namespace => Check::pass("output ends with its command", detail),
        _ if cfg!(target_os = "linux") => Check::fail(
            "output ends with its command",
            detail,
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu, \
             kernel.apparmor_restrict_unprivileged_userns=0), or run the hooks as root",
        )
        .minor(),
        _ => Check::pass("output ends with its command", detail),
    }
}

/// The name of the check that fails when for-loop is installed for no host at all.
pub(crate) const NOTHING_INSTALLED: &str = "installed";

/// With no `--host`, and for-loop installed for none of the hosts here, no loop can hold: the
/// first line says so, and what to install first.
fn nothing_installed(facts: &Facts) -> Option<Check> {
    if facts.asked.is_some() || facts.hosts.iter().any(|(_, installation)| installation.installed) {
        return None;
    }
    let first = first_install(&facts.binary);
    Some(if facts.hosts_found.is_empty() {
        let programs: Vec<&str> = Host::ALL.iter().map(|host| host.program()).collect();
        let (last, others) = programs.split_last().expect("there are hosts");
        Check::fail(
            NOTHING_INSTALLED,
            format!(
                "no agent host is installed here (none of {} or {last} is on PATH, nor their settings \
                 directories), so nothing runs for-loop's hooks",
                others.join(", ")
            ),
            format!("install an agent host first, e.g. {}, then {}", first.get_host, first.package),
        )
    } else {
        let names: Vec<&str> = facts.hosts_found.iter().map(|host| host.name()).collect();
        Check::fail(
            NOTHING_INSTALLED,
            format!(
                "for-loop is installed for none of the hosts here ({}), so nothing runs its hooks",
                names.join(", ")
            ),
            if facts.hosts_found.contains(&first.host) {
                format!("install {} (or another host's package: the `installed` lines below)", first.package)
            } else {
                "install for-loop for one of them: the fix under its `installed` line below".to_string()
            },
        )
    })
}

fn binary_lines(binary: &BinaryFacts) -> Vec<Check> {
    let mut out = vec![Check::pass(
        "binary",
        match &binary.this_path {
            Some(path) => format!("loop-hook {} at {}", binary.this_version, path.display()),
            None => format!("loop-hook {}", binary.this_version),
        },
    )];
    if let Some(plugin) = binary.launcher_plugin_version.as_deref().filter(|v| *v != binary.this_version) {
        out.push(Check::fail(
            "binary version",
            format!("the plugin that ran this is {plugin}, but this binary is {}", binary.this_version),
            format!(
                "{INSTALL} from the for-loop {plugin} checkout, or install the plugin of {}",
                binary.this_version
            ),
        ));
    }
    if let Some((value, is_file)) = &binary.for_loop_bin {
        if !is_absolute(value) {
            out.push(Check::fail(
                "FOR_LOOP_BIN",
                format!("FOR_LOOP_BIN={value} is not an absolute path, so every launcher ignores it"),
                "export FOR_LOOP_BIN=/absolute/path/to/loop-hook (or unset FOR_LOOP_BIN)",
            ));
        } else if !is_file {
            out.push(Check::fail(
                "FOR_LOOP_BIN",
                format!("FOR_LOOP_BIN={value} names no file, so the launchers look further"),
                "unset FOR_LOOP_BIN, or point it at a built loop-hook",
            ));
        }
    }
    match &binary.first_on_path {
        Some(found) if found.version.as_deref() != Some(binary.this_version.as_str()) => {
            out.push(version_gap("binary on PATH", "comes first on PATH", found, &binary.this_version));
        }
        Some(found) => {
            out.push(Check::pass("binary on PATH", format!("{} comes first on PATH", found.path.display())));
        }
        None => out.push(
            Check::pass(
                "binary on PATH",
                "no loop-hook on PATH (the plugins' launchers look elsewhere first)",
            )
            .minor(),
        ),
    }
    if let Some(found) = &binary.cargo
        && found.version.as_deref() != Some(binary.this_version.as_str())
    {
        out.push(version_gap(
            "binary from cargo install",
            "is what every launcher runs before a plugin's own binary",
            found,
            &binary.this_version,
        ));
    }
    out
}

/// A binary a hook would run whose version is not this one's.
fn version_gap(name: &str, role: &str, found: &Binary, expected: &str) -> Check {
    let version =
        found.version.as_deref().map_or_else(|| "of unknown version".to_string(), ToString::to_string);
    Check::fail(
        name,
        format!("loop-hook {version} at {} {role}, but this is {expected}", found.path.display()),
        format!("{INSTALL} --force (or remove it: rm {})", shell_quote(&found.path)),
    )
}

fn store_line(store: &StoreFacts) -> Check {
    let Some(root) = &store.root else {
        return Check::fail(
            "store",
            "no place for loop state: neither FOR_LOOP_HOME, XDG_STATE_HOME nor HOME is set",
            "export FOR_LOOP_HOME=/a/writable/directory",
        );
    };
    match &store.writable {
        Ok(()) => Check::pass("store", format!("{} is writable", root.display())),
        Err(why) => Check::fail(
            "store",
            format!("{} is not writable ({why}): every loop start and stop fails there", root.display()),
            format!(
                "mkdir -p {root} && chmod u+rwx {root} (or export FOR_LOOP_HOME=/a/writable/directory)",
                root = shell_quote(root)
            ),
        ),
    }
}

fn tier_line(tier: &TierFacts) -> Check {
    let name = "claude-code: tier";
    let needs = "strict needs sandbox.enabled: true, sandbox.allowUnsandboxedCommands: false and \
                 sandbox.failIfUnavailable: true in Claude Code's settings, bubblewrap and socat";
    let packages = "sudo apt-get install bubblewrap socat (or your system's packages of the same names)";
    match &tier.sandbox_settings {
        Err(why) => {
            let tools = match (&tier.bubblewrap, tier.socat || !tier.linux) {
                (None, true) => "bubblewrap and socat are here".to_string(),
                (Some(why), _) => format!("and {why}"),
                (None, false) => "and socat is not installed".to_string(),
            };
            Check::pass(name, format!("default: {why}; {needs}; {tools}")).minor()
        }
        Ok(()) => match (&tier.bubblewrap, tier.socat || !tier.linux) {
            (Some(why), _) => Check::fail(
                name,
                format!(
                    "Claude Code's sandbox is on for the strict tier, but verify cannot be sandboxed: {why}"
                ),
                packages,
            ),
            (None, false) => Check::fail(
                name,
                "Claude Code's sandbox is on for the strict tier, but socat is not installed, which its sandbox needs on Linux",
                packages,
            ),
            (None, true) => {
                Check::pass(name, "strict: Claude Code's sandbox on, verify sandboxed with bubblewrap")
            }
        },
    }
}

fn loop_lines(facts: &Facts) -> Vec<Check> {
    facts
        .loops
        .iter()
        .map(|found| {
            let id = &found.session_id;
            let name = format!("loop {id}");
            let check = match found.kind {
                LoopKind::Parked => Check::fail(
                    name,
                    format!("a {} loop of this project is parked (idle {} h)", found.host.name(), found.idle_hours),
                    format!("resume it in its session, or end it: loop-hook cancel --session {id} --host {}", found.host.name()),
                ),
                LoopKind::Stale => Check::fail(
                    name,
                    format!(
                        "a {} loop of this project is active but no stop was judged for {} h: its session is probably gone",
                        found.host.name(),
                        found.idle_hours
                    ),
                    format!("loop-hook cancel --session {id} --host {}", found.host.name()),
                ),
                LoopKind::Unclaimed => Check::fail(
                    name,
                    format!(
                        "a {} loop of this project was never claimed by a conversation (idle {} h)",
                        found.host.name(),
                        found.idle_hours
                    ),
                    format!("loop-hook cancel --host {} in this directory, then start it again", found.host.name()),
                ),
            };
            check.minor()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::commands::doctor::facts::LoopFact;
    use crate::host::install::Installation;
    use crate::host::install::tests::{binary, failing};

    fn facts() -> Facts {
        Facts {
            project: PathBuf::from("/p"),
            binary: binary(),
            store: StoreFacts { root: Some(PathBuf::from("/h/.local/state/for-loop")), writable: Ok(()) },
            ..Facts::default()
        }
    }

    /// A host whose installation passes every check.
    fn healthy(host: Host) -> (Host, Installation) {
        let checks = vec![Check::pass(format!("{}: installed", host.name()), "it is there")];
        (host, Installation { installed: true, checks })
    }

    /// A host where for-loop is not installed, and not asked for.
    fn bare(host: Host) -> (Host, Installation) {
        let check =
            Check::fail(format!("{}: installed", host.name()), "it is not there", "install it").minor();
        (host, Installation { installed: false, checks: vec![check] })
    }

    #[test]
    fn where_output_ends_is_said_and_a_missing_namespace_is_minor() {
        use crate::checks::verify::Containment;
        let line = |containment| containment_line(containment);
        assert!(line(Containment::Namespace).ok);
        assert!(line(Containment::Namespace).detail.contains("pid-namespace"));
        let subreaper = line(Containment::Subreaper);
        assert!(!subreaper.matters, "{subreaper:?}");
        assert!(subreaper.detail.contains("subreaper"));
        assert_eq!(subreaper.ok, !cfg!(target_os = "linux"));
        let shown = lines(&Facts { containment: Some(Containment::Grace), ..facts() });
        assert!(
            shown.iter().any(|c| c.name == "output ends with its command" && c.detail.contains("200 ms"))
        );
        assert!(all_pass(&shown) == all_pass(&lines(&facts())));
    }

    #[test]
    fn an_old_binary_first_on_path_fails() {
        let old = Binary { path: PathBuf::from("/usr/local/bin/loop-hook"), version: Some("0.9.0".into()) };
        let checks =
            lines(&Facts { binary: BinaryFacts { first_on_path: Some(old), ..binary() }, ..facts() });
        let check = failing(&checks, "binary on PATH");
        assert!(
            check.detail.contains("loop-hook 0.9.0 at /usr/local/bin/loop-hook comes first on PATH"),
            "{check:?}"
        );
        assert!(check.fix.as_deref().unwrap().contains("rm /usr/local/bin/loop-hook"));
    }

    #[test]
    fn a_store_that_cannot_be_written_fails_with_the_commands_that_make_it_writable() {
        let store =
            StoreFacts { root: Some(PathBuf::from("/h/state")), writable: Err("Permission denied".into()) };
        let checks = lines(&Facts { store, ..facts() });
        assert_eq!(
            failing(&checks, "store").fix.as_deref(),
            Some("mkdir -p /h/state && chmod u+rwx /h/state (or export FOR_LOOP_HOME=/a/writable/directory)")
        );
    }

    #[test]
    fn the_strict_tier_without_bubblewrap_fails_only_when_its_sandbox_is_asked_for() {
        let missing = TierFacts {
            bubblewrap: Some("bubblewrap (bwrap) is not installed".into()),
            ..TierFacts::default()
        };
        let strict = || vec![healthy(Host::ClaudeCode)];
        let checks = lines(&Facts { hosts: strict(), tier: missing.clone(), ..facts() });
        assert!(all_pass(&checks), "no sandbox asked for, so the default tier is fine: {checks:#?}");
        let asked = TierFacts { sandbox_settings: Ok(()), ..missing };
        let checks = lines(&Facts { hosts: strict(), tier: asked.clone(), ..facts() });
        assert!(failing(&checks, "claude-code: tier").fix.as_deref().unwrap().contains("bubblewrap"));
        let no_socat = TierFacts { sandbox_settings: Ok(()), socat: false, ..TierFacts::default() };
        failing(&lines(&Facts { hosts: strict(), tier: no_socat, ..facts() }), "claude-code: tier");
        // The tier is a line of the hosts that offer it, under their own checks.
        let elsewhere = lines(&Facts { hosts: vec![healthy(Host::Codex)], tier: asked, ..facts() });
        assert!(elsewhere.iter().all(|c| !c.name.ends_with(": tier")), "{elsewhere:#?}");
    }

    #[test]
    fn with_no_host_and_no_plugin_the_first_line_says_so_and_what_to_install_first() {
        let checks = lines(&facts());
        let first = &checks[0];
        assert_eq!(first, failing(&checks, NOTHING_INSTALLED));
        assert!(first.detail.starts_with("no agent host is installed here"), "{first:?}");
        let fix = first.fix.as_deref().unwrap();
        assert!(fix.starts_with("install an agent host first"), "{fix}");
        assert!(fix.contains("claude plugin marketplace add <a for-loop checkout>"), "{fix}");
        let checks =
            lines(&Facts { hosts: vec![bare(Host::Codex)], hosts_found: vec![Host::Codex], ..facts() });
        let check = failing(&checks, NOTHING_INSTALLED);
        assert!(check.detail.contains("installed for none of the hosts here (codex)"), "{check:?}");
        assert!(check.fix.as_deref().unwrap().contains("`installed` line below"), "{check:?}");
        let asked = lines(&Facts { hosts: vec![bare(Host::Codex)], asked: Some(Host::Codex), ..facts() });
        assert!(asked.iter().all(|c| c.name != NOTHING_INSTALLED), "--host's own line says it: {asked:#?}");
    }

    #[test]
    fn parked_and_stale_loops_are_listed_without_failing_the_run() {
        let parked = LoopFact {
            session_id: "s1".into(),
            host: Host::ClaudeCode,
            kind: LoopKind::Parked,
            idle_hours: 3,
        };
        let checks = lines(&Facts { loops: vec![parked], hosts: vec![healthy(Host::ClaudeCode)], ..facts() });
        let check = checks.iter().find(|c| c.name == "loop s1").unwrap();
        assert!(!check.ok && !check.matters && all_pass(&checks));
        assert!(check.fix.as_deref().unwrap().contains("loop-hook cancel --session s1"));
    }
}
