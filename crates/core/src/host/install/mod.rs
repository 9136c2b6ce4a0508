//! What `loop-hook doctor` checks of a host's installation: each adapter's spec names where its
//! host keeps its settings ([`Install::home`]) and reads and judges its files
//! ([`Install::check`]), one [`Check`] per line; doctor runs them over [`Host::ALL`] and never
//! learns which host it looks at. What a hook's binary is, shared by every host's checks, is in
//! [`binary`].

mod binary;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub(crate) use binary::{Binary, BinaryFacts, Launch, facts as binary_facts, on_path};
pub(in crate::host) use binary::{is_executable, launch};

use crate::host::Host;
use crate::support::Environment;

/// The line for a binary that is not installed anywhere a hook looks.
pub(crate) const INSTALL: &str = "cargo install --locked --path <for-loop checkout>";

/// The most of a settings or hook file read.
const JSON_BYTES: u64 = 4 << 20;

/// How doctor checks one host's installation, as its adapter declares it.
#[derive(Clone, Copy)]
pub(crate) struct Install {
    /// The folder whose presence says the host is installed here, beside its program on `PATH`.
    pub(crate) home: fn(&Environment) -> Option<PathBuf>,
    /// Reads the host's files as the host reads them and judges them; `None` where there is
    /// nothing of the host's to look at (it is not installed and the project holds nothing of it).
    pub(crate) check: fn(&Look) -> Option<Installation>,
}

/// What a host's check is given.
pub(crate) struct Look<'a> {
    pub(crate) env: &'a Environment,
    /// The project doctor runs in (its git top level when it is in git).
    pub(crate) project: &'a Path,
    /// The loop-hook binaries a hook could run.
    pub(crate) binary: &'a BinaryFacts,
    /// `--host` named this host: its checks count even when it looks not installed.
    pub(crate) asked: bool,
    /// Asked for, or its program on `PATH`, or its [`Install::home`] there.
    pub(crate) present: bool,
}

/// A host's checks, and whether for-loop's package for it is there at all (well or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Installation {
    pub(crate) installed: bool,
    pub(crate) checks: Vec<Check>,
}

/// One check: what was looked at, whether it passed, and the command that fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
    /// A failure here keeps a loop from holding (exit 1); otherwise it is worth knowing only.
    pub matters: bool,
}

impl Check {
    pub(crate) fn pass(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check { name: name.into(), ok: true, detail: detail.into(), fix: None, matters: true }
    }

    pub(crate) fn fail(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { name: name.into(), ok: false, detail: detail.into(), fix: Some(fix.into()), matters: true }
    }

    /// A failure that does not stop a loop from holding.
    pub(crate) fn minor(self) -> Check {
        Check { matters: false, ..self }
    }
}

/// Whether everything that matters passed.
pub(crate) fn all_pass(checks: &[Check]) -> bool {
    checks.iter().all(|check| check.ok || !check.matters)
}

impl Host {
    /// The folder whose presence says this host is installed here, beside its program.
    pub(crate) fn install_home(self, env: &Environment) -> Option<PathBuf> {
        (self.spec().install.home)(env)
    }

    /// This host's installation, checked: `None` when there is nothing of it to look at.
    pub(crate) fn check_install(self, look: &Look) -> Option<Installation> {
        (self.spec().install.check)(look)
    }
}

/// A JSON file's value, or `None` when it is missing or not JSON (a host ignores it then too).
pub(in crate::host) fn read_json(path: &Path) -> Option<Value> {
    let bytes = crate::support::read::bounded_read::read(path, JSON_BYTES).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `$VAR`, else `~/default`.
pub(in crate::host) fn home_dir(env: &Environment, var: &str, default: &str) -> Option<PathBuf> {
    env.var(var).map(PathBuf::from).or_else(|| env.var("HOME").map(|home| Path::new(home).join(default)))
}

/// A host where for-loop is not installed: worth a line, and a failure only if it was asked for.
pub(in crate::host) fn not_installed(host: Host, detail: String, fix: String, asked: bool) -> Check {
    let check = Check::fail(format!("{}: installed", host.name()), detail, fix);
    if asked { check } else { check.minor() }
}

/// The `hooks on` lines of `host`, whose settings `files` each set `disableAllHooks`: a failure
/// for each, or one pass when there is none.
pub(in crate::host) fn hooks_on_lines(host: Host, files: &[PathBuf]) -> Vec<Check> {
    let name = format!("{}: hooks on", host.name());
    if files.is_empty() {
        return vec![Check::pass(name, "no settings file sets disableAllHooks")];
    }
    let off = |file: &PathBuf| {
        Check::fail(
            name.clone(),
            format!("{} sets disableAllHooks, so no hook runs and no loop holds", file.display()),
            format!("remove \"disableAllHooks\": true from {}", file.display()),
        )
    };
    files.iter().map(off).collect()
}

/// for-loop's extension of a CLI that keeps them in `HOME/extensions/` (Gemini CLI, and Qwen
/// Code, which forked Gemini CLI's extensions and their enablement file).
pub(in crate::host) struct Extension<'a> {
    pub(in crate::host) host: Host,
    /// The host's own folder (`~/.gemini`, `~/.qwen`).
    pub(in crate::host) home: &'a Path,
    /// The installed extension's folder, when there is one.
    pub(in crate::host) found: Option<&'a Path>,
    /// `Some(false)` when it is disabled for this project or everywhere.
    pub(in crate::host) enabled: Option<bool>,
    /// The host's program, for the commands that fix it.
    pub(in crate::host) program: &'static str,
    /// The command that installs it.
    pub(in crate::host) install: &'static str,
}

impl Extension<'_> {
    /// Its checks, installed and enabled: the first alone, failed, when it is not installed.
    pub(in crate::host) fn lines(&self, asked: bool) -> Vec<Check> {
        let Some(found) = self.found else {
            let detail =
                format!("the for-loop extension is not in {}", self.home.join("extensions").display());
            return vec![not_installed(self.host, detail, self.install.into(), asked)];
        };
        let name = |what: &str| format!("{}: {what}", self.host.name());
        let mut out = vec![Check::pass(name("installed"), format!("extension at {}", found.display()))];
        if self.enabled == Some(false) {
            out.push(Check::fail(
                name("enabled"),
                "the for-loop extension is disabled here, so its hooks do not run",
                format!("{} extensions enable for-loop", self.program),
            ));
        }
        out
    }
}

/// A hook file of Copilot CLI or Cursor that runs for-loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::host) struct HookFile {
    pub(in crate::host) path: PathBuf,
    /// For Cursor: `loop_limit` is `null` or missing a cap below which the loop would end early.
    pub(in crate::host) limit: Option<String>,
}

/// Whether a hook command runs for-loop's Stop hook for `host`.
pub(in crate::host) fn runs_us(command: &str, host: &str) -> bool {
    command.contains("stop-hook --host ") && command.contains(host) && command.contains("loop-hook")
}

/// The binary line of a host: what its package's launcher runs, or, for a hook file without a
/// launcher, the binary it finds.
pub(in crate::host) fn binary_line(name: &str, launch: Option<&Launch>, binary: &BinaryFacts) -> Check {
    match launch {
        Some(launch) => launch_line(name, launch),
        None => standalone_binary(name, binary),
    }
}

/// What a package's launcher would run, checked against the package's version.
fn launch_line(name: &str, launch: &Launch) -> Check {
    match &launch.runs {
        Err(why) => Check::fail(name, why.clone(), INSTALL),
        Ok((binary, source)) => {
            let runs = format!("{} ({})", binary.path.display(), source_words(source));
            match (&launch.plugin_version, &binary.version) {
                (Some(plugin), Some(version)) if plugin != version => Check::fail(
                    name,
                    format!(
                        "the package at {} is {plugin} but runs loop-hook {version} at {runs}",
                        launch.root.display()
                    ),
                    match *source {
                        "cargo" => format!("{INSTALL} --force from the for-loop {plugin} checkout"),
                        "FOR_LOOP_BIN" => {
                            "rebuild the binary FOR_LOOP_BIN names, or unset FOR_LOOP_BIN".into()
                        }
                        "checkout" => {
                            format!("cargo build --release --locked in {}", shell_quote(&launch.root))
                        }
                        _ => "reinstall the plugin".into(),
                    },
                ),
                (_, None) => Check::fail(
                    name,
                    format!(
                        "the package at {} runs {runs}, which does not answer --version",
                        launch.root.display()
                    ),
                    INSTALL,
                ),
                _ => Check::pass(name, format!("the package at {} runs {runs}", launch.root.display())),
            }
        }
    }
}

fn source_words(source: &str) -> &str {
    match source {
        "FOR_LOOP_BIN" => "set by $FOR_LOOP_BIN",
        "checkout" => "built in the package's checkout",
        "cargo" => "from cargo install",
        "shipped" => "shipped with the package, SHA-256 verified",
        "PATH" => "found on PATH",
        other => other,
    }
}

/// The binary a hook file without a launcher runs: `$FOR_LOOP_BIN`, `~/.cargo/bin`, then PATH.
fn standalone_binary(name: &str, binary: &BinaryFacts) -> Check {
    let set = binary.for_loop_bin.as_ref().filter(|(value, is_file)| is_absolute(value) && *is_file);
    let found = set
        .map(|(value, _)| (value.clone(), "set by $FOR_LOOP_BIN"))
        .or_else(|| binary.cargo.as_ref().map(|b| (b.path.display().to_string(), "from cargo install")))
        .or_else(|| binary.first_on_path.as_ref().map(|b| (b.path.display().to_string(), "found on PATH")));
    match found {
        Some((path, source)) => Check::pass(name, format!("its hook runs {path} ({source})")),
        None => Check::fail(
            name,
            "its hook looks in $FOR_LOOP_BIN, ~/.cargo/bin and PATH, and finds no loop-hook: every stop is allowed",
            INSTALL,
        ),
    }
}

pub(crate) fn is_absolute(value: &str) -> bool {
    Path::new(value).is_absolute()
}

/// A path as one shell word.
pub(crate) fn shell_quote(path: &Path) -> String {
    shell_words::quote(&path.to_string_lossy()).into_owned()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::PathBuf;

    use super::*;

    pub(crate) fn binary() -> BinaryFacts {
        BinaryFacts {
            this_version: "1.2.0".into(),
            this_path: Some(PathBuf::from("/opt/loop-hook")),
            cargo: Some(Binary {
                path: PathBuf::from("/h/.cargo/bin/loop-hook"),
                version: Some("1.2.0".into()),
            }),
            ..BinaryFacts::default()
        }
    }

    /// The one failing check named `name`, which must count.
    pub(crate) fn failing<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        let found = checks
            .iter()
            .find(|c| c.name == name && !c.ok)
            .unwrap_or_else(|| panic!("no failing {name}: {checks:#?}"));
        assert!(found.matters && !all_pass(checks), "{found:?}");
        found
    }

    #[test]
    fn a_launcher_running_a_binary_of_another_version_fails() {
        let launch = Launch {
            root: PathBuf::from("/h/.claude/plugins/cache/for-loop/for-loop/1.3.0"),
            plugin_version: Some("1.3.0".into()),
            runs: Ok((
                Binary { path: PathBuf::from("/h/.cargo/bin/loop-hook"), version: Some("1.2.0".into()) },
                "cargo",
            )),
        };
        let check = binary_line("claude-code: binary", Some(&launch), &binary());
        assert!(!check.ok && check.matters, "{check:?}");
        assert!(check.detail.contains("is 1.3.0 but runs loop-hook 1.2.0"), "{check:?}");
    }
}
