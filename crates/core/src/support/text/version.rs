//! Which `loop-hook` this is, and whether it matches the plugin that launched it.
//!
//! The plugin's launcher (`scripts/loop-hook`) exports `FOR_LOOP_PLUGIN_VERSION` (its own
//! version) and `FOR_LOOP_BIN_SOURCE` (where it found this binary: `FOR_LOOP_BIN`, `checkout`,
//! `cargo`, `shipped` or `PATH`). A binary from `cargo install` or a checkout wins over the one the
//! plugin ships, so the two can drift apart; when they do, the user is told in one line instead
//! of meeting options one side does not know.

use std::cmp::Ordering;
use std::path::Path;

use crate::support::environment::Environment;
use crate::support::outcome::Outcome;

/// This build's version, as `--version` prints it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The path of this binary, for messages that say which `loop-hook` ran.
pub(crate) fn current_exe() -> Option<std::path::PathBuf> {
    std::env::current_exe().ok()
}

/// A user command run through a plugin of another version says so on its first line.
pub(crate) fn with_version_notice(env: &Environment, mut outcome: Outcome) -> Outcome {
    if let Some(line) = mismatch(env, current_exe().as_deref()) {
        outcome.stdout = format!("{line}\n{}", outcome.stdout);
    }
    outcome
}

/// The launcher's plugin version, when it differs from this binary's.
fn plugin_version(env: &Environment) -> Option<&str> {
    env.var("FOR_LOOP_PLUGIN_VERSION").filter(|v| *v != VERSION)
}

/// `loop-hook X`, and on a second line the plugin's version when it differs.
pub(crate) fn version_text(env: &Environment) -> String {
    match plugin_version(env) {
        Some(plugin) => format!("loop-hook {VERSION}\nplugin {plugin} (versions differ)"),
        None => format!("loop-hook {VERSION}"),
    }
}

/// One line naming this binary: its version, where it is and how the launcher found it.
pub(crate) fn describe(env: &Environment, exe: Option<&Path>) -> String {
    let mut line = format!("loop-hook {VERSION}");
    if let Some(exe) = exe {
        line.push_str(&format!(" at {}", exe.display()));
    }
    if let Some(source) = env.var("FOR_LOOP_BIN_SOURCE") {
        line.push_str(&format!(" ({})", source_words(source)));
    }
    line
}

fn source_words(source: &str) -> &str {
    match source {
        "FOR_LOOP_BIN" => "set by $FOR_LOOP_BIN",
        "checkout" => "built in this plugin's checkout",
        "cargo" => "installed by cargo install",
        "shipped" => "shipped with the plugin, SHA-256 verified",
        "PATH" => "found on PATH",
        other => other,
    }
}

/// The one line shown when the plugin and the binary it runs are of different versions, with
/// what to do about it.
pub(crate) fn mismatch(env: &Environment, exe: Option<&Path>) -> Option<String> {
    let plugin = plugin_version(env)?;
    let binary = describe(env, exe);
    let fix = match env.var("FOR_LOOP_BIN_SOURCE") {
        Some("FOR_LOOP_BIN") => "rebuild it, or unset FOR_LOOP_BIN to use the binary the plugin ships",
        Some("cargo") => {
            "update it with `cargo install --locked --path <for-loop checkout>`, or remove it to use the binary the plugin ships"
        }
        Some("checkout") => "rebuild it with `cargo build --release --locked`",
        _ => "install the loop-hook of the same version as the plugin",
    };
    let relation = match compare(VERSION, plugin) {
        Some(Ordering::Less) => "older than",
        Some(Ordering::Greater) => "newer than",
        _ => "not the same version as",
    };
    Some(format!("for-loop: this plugin is {plugin}, but it runs {binary}, {relation} the plugin: {fix}."))
}

/// Compares two `MAJOR.MINOR.PATCH` versions; `None` when either is not one.
fn compare(a: &str, b: &str) -> Option<Ordering> {
    let parse = |v: &str| -> Option<Vec<u64>> {
        let parts: Option<Vec<u64>> = v.split('.').map(|p| p.parse().ok()).collect();
        parts.filter(|p| p.len() == 3)
    };
    Some(parse(a)?.cmp(&parse(b)?))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use jiff::Timestamp;

    use super::*;

    fn with(vars: &[(&str, &str)]) -> Environment {
        let vars = vars.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string()));
        Environment::new(vars, PathBuf::from("/"), Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn same_version_or_no_launcher_says_nothing() {
        assert_eq!(mismatch(&with(&[]), None), None);
        assert_eq!(mismatch(&with(&[("FOR_LOOP_PLUGIN_VERSION", VERSION)]), None), None);
        assert_eq!(
            version_text(&with(&[("FOR_LOOP_PLUGIN_VERSION", VERSION)])),
            format!("loop-hook {VERSION}")
        );
    }

    #[test]
    fn a_newer_plugin_names_the_binary_and_the_fix() {
        let env = with(&[("FOR_LOOP_PLUGIN_VERSION", "999.0.0"), ("FOR_LOOP_BIN_SOURCE", "cargo")]);
        let line = mismatch(&env, Some(Path::new("/home/u/.cargo/bin/loop-hook"))).unwrap();
        assert_eq!(
            line,
            format!(
                "for-loop: this plugin is 999.0.0, but it runs loop-hook {VERSION} at /home/u/.cargo/bin/loop-hook \
                 (installed by cargo install), older than the plugin: update it with \
                 `cargo install --locked --path <for-loop checkout>`, or remove it to use the binary the plugin ships."
            )
        );
        assert!(!line.contains('\n'));
        assert_eq!(version_text(&env), format!("loop-hook {VERSION}\nplugin 999.0.0 (versions differ)"));
    }

    #[test]
    fn an_older_plugin_or_an_odd_version_is_named_too() {
        let older = mismatch(&with(&[("FOR_LOOP_PLUGIN_VERSION", "0.0.0")]), None).unwrap();
        assert!(older.contains("newer than the plugin"), "{older}");
        let odd = mismatch(&with(&[("FOR_LOOP_PLUGIN_VERSION", "dev")]), None).unwrap();
        assert!(odd.contains("not the same version as the plugin"), "{odd}");
    }

    #[test]
    fn versions_compare_by_number() {
        assert_eq!(compare("0.10.0", "0.9.1"), Some(Ordering::Greater));
        assert_eq!(compare("1.0.0", "1.0.0"), Some(Ordering::Equal));
        assert_eq!(compare("1.0", "1.0.0"), None);
        assert_eq!(compare("1.0.x", "1.0.0"), None);
    }
}
