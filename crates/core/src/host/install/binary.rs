//! The binaries a hook could run: this one, the first on `PATH`, `cargo install`'s, and what a
//! package's launcher picks, found in the launcher's own order (`scripts/loop-hook`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::Environment;
use crate::support::VERSION;

/// How long another binary gets to answer `--version`.
const VERSION_WAIT: Duration = Duration::from_secs(5);

/// A `loop-hook` executable and the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binary {
    pub path: PathBuf,
    /// `None` when it did not say (it failed, or it is not a loop-hook).
    pub version: Option<String>,
}

/// The binaries that could run, and the version they should be.
#[derive(Debug, Clone, Default)]
pub(crate) struct BinaryFacts {
    /// The version this binary is: the one the checks expect of every other.
    pub this_version: String,
    pub this_path: Option<PathBuf>,
    /// The plugin's version, when the plugin's launcher started this run.
    pub launcher_plugin_version: Option<String>,
    /// `$FOR_LOOP_BIN` as set in this environment, and whether it names a file.
    pub for_loop_bin: Option<(String, bool)>,
    /// The first `loop-hook` on `PATH` (absolute entries only, as every lookup reads it).
    pub first_on_path: Option<Binary>,
    /// `${CARGO_HOME:-~/.cargo}/bin/loop-hook`, when it is there.
    pub cargo: Option<Binary>,
    /// The checkout `cargo install --path` built for-loop from, when it still holds the Claude
    /// Code marketplace: the place a user can install the plugin from.
    pub cargo_checkout: Option<PathBuf>,
}

/// What a package's launcher (`scripts/loop-hook`) would run, found as the launcher finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The package's root, holding `scripts/loop-hook`.
    pub root: PathBuf,
    /// The version the launcher announces (`plugin_version=` in it).
    pub plugin_version: Option<String>,
    /// The binary it runs and where it was found (`FOR_LOOP_BIN`, `checkout`, `cargo`,
    /// `shipped`, `PATH`), or why it runs none.
    pub runs: Result<(Binary, &'static str), String>,
}

pub(crate) fn facts(env: &Environment) -> BinaryFacts {
    let this_path = crate::support::text::version::current_exe();
    let version = |path: PathBuf| {
        let version = version_of(&path, this_path.as_deref());
        Binary { path, version }
    };
    BinaryFacts {
        this_version: VERSION.to_string(),
        launcher_plugin_version: env.var("FOR_LOOP_PLUGIN_VERSION").map(str::to_string),
        for_loop_bin: env.var("FOR_LOOP_BIN").map(|value| (value.to_string(), Path::new(value).is_file())),
        first_on_path: on_path(env, "loop-hook").map(version),
        cargo: cargo_bin(env).filter(|path| is_executable(path)).map(version),
        cargo_checkout: cargo_home(env).and_then(|home| cargo_checkout(&home)),
        this_path,
    }
}

/// `${CARGO_HOME:-~/.cargo}`, when it is an absolute path.
fn cargo_home(env: &Environment) -> Option<PathBuf> {
    let home = env
        .var("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".cargo")))?;
    home.is_absolute().then_some(home)
}

/// `${CARGO_HOME:-~/.cargo}/bin/loop-hook`.
fn cargo_bin(env: &Environment) -> Option<PathBuf> {
    cargo_home(env).map(|home| home.join("bin/loop-hook"))
}

/// The directory `cargo install --path DIR` installed for-loop from, as cargo records it in
/// `.crates2.json` (`"for-loop 0.1.0 (path+file:///DIR)"`), when DIR still holds the marketplace.
fn cargo_checkout(cargo_home: &Path) -> Option<PathBuf> {
    let record = super::read_json(&cargo_home.join(".crates2.json"))?;
    let installs = record.get("installs")?.as_object()?;
    let url = installs.keys().find_map(|key| key.strip_prefix("for-loop ")?.split_once(" (path+file://"))?.1;
    let dir = PathBuf::from(percent_decoded(url.strip_suffix(')')?)?);
    (dir.is_absolute() && dir.join(".claude-plugin/marketplace.json").is_file()).then_some(dir)
}

/// A file URL's path with its `%XX` escapes undone; `None` when one is malformed or the result
/// is not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// The first executable `name` in an absolute `PATH` entry outside the current directory, as
/// every lookup of ours reads `PATH`.
pub(crate) fn on_path(env: &Environment, name: &str) -> Option<PathBuf> {
    std::env::split_paths(env.var("PATH")?)
        .filter(|dir| dir.is_absolute() && !dir.starts_with(&env.cwd))
        .map(|dir| dir.join(name))
        .find(|path| is_executable(path))
}

pub(in crate::host) fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// The version `path` reports: this build's own when it is this binary, else what its
/// `--version` prints (`loop-hook X`), waited for a few seconds at most.
fn version_of(path: &Path, this: Option<&Path>) -> Option<String> {
    let same = |a: &Path, b: &Path| {
        std::fs::canonicalize(a).ok().is_some_and(|a| Some(a) == std::fs::canonicalize(b).ok())
    };
    if this.is_some_and(|this| same(path, this)) {
        return Some(VERSION.to_string());
    }
    let mut child = Command::new(path)
        .arg("--version")
        .env_remove("FOR_LOOP_PLUGIN_VERSION")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < VERSION_WAIT => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let output = child.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines().next()?.strip_prefix("loop-hook ").map(|v| v.trim().to_string())
}

/// What the launcher in `root/scripts/loop-hook` would run, in its order: `$FOR_LOOP_BIN`, the
/// build of the checkout the plugin is (its root holds `Cargo.toml`) or sits in (`plugin/<host>/`
/// under one; never an installed copy), `cargo install`'s, a release's verified binary, then
/// `PATH` (no release).
pub(in crate::host) fn launch(env: &Environment, root: &Path) -> Launch {
    let launcher = std::fs::read_to_string(root.join("scripts/loop-hook")).unwrap_or_default();
    let plugin_version =
        launcher.lines().find_map(|line| line.strip_prefix("plugin_version=")).map(|v| v.trim().to_string());
    let this = crate::support::text::version::current_exe();
    let found = |path: PathBuf, source: &'static str| {
        let version = version_of(&path, this.as_deref());
        Ok((Binary { path, version }, source))
    };
    let runs = 'runs: {
        if let Some(path) =
            env.var("FOR_LOOP_BIN").map(PathBuf::from).filter(|p| p.is_absolute() && is_executable(p))
        {
            break 'runs found(path, "FOR_LOOP_BIN");
        }
        let sums = root.join("bin/SHA256SUMS");
        let release = sums.is_file();
        for checkout in [root.to_path_buf(), root.join("../..")] {
            if release || !checkout.join("Cargo.toml").is_file() {
                continue;
            }
            for profile in ["release", "debug"] {
                let path = checkout.join("target").join(profile).join("loop-hook");
                if is_executable(&path) {
                    break 'runs found(path, "checkout");
                }
            }
        }
        if let Some(path) = cargo_bin(env).filter(|p| is_executable(p)) {
            break 'runs found(path, "cargo");
        }
        if release {
            break 'runs shipped(root, &sums).and_then(|path| found(path, "shipped"));
        }
        match on_path(env, "loop-hook") {
            Some(path) => found(path, "PATH"),
            None => Err(format!(
                "the launcher at {} finds no loop-hook ($FOR_LOOP_BIN, target/, ~/.cargo/bin, PATH): every stop is allowed",
                root.display()
            )),
        }
    };
    Launch { root: root.to_path_buf(), plugin_version, runs }
}

/// A release's binary for this platform, when its SHA-256 matches `bin/SHA256SUMS`.
fn shipped(root: &Path, sums: &Path) -> Result<PathBuf, String> {
    let os = std::env::consts::OS;
    let platform = format!("{os}-{}", std::env::consts::ARCH);
    let exe = if os == "windows" { "loop-hook.exe" } else { "loop-hook" };
    let name = format!("{platform}/{exe}");
    let sums = std::fs::read_to_string(sums).map_err(|e| format!("cannot read {}: {e}", sums.display()))?;
    let expected = sums
        .lines()
        .filter_map(|line| line.split_once(char::is_whitespace))
        .find(|(_, file)| file.trim().trim_start_matches('*') == name)
        .map(|(sum, _)| sum.to_ascii_lowercase())
        .ok_or_else(|| format!("the package at {} ships no loop-hook for {platform}", root.display()))?;
    let path = root.join("bin").join(&name);
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if crate::support::digest::sha256_hex(&bytes) != expected {
        return Err(format!(
            "{} does not match its SHA-256 in bin/SHA256SUMS, so it is not run",
            path.display()
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cargo home whose install record names `key`, and a checkout at `home/src dir` that
    /// holds the marketplace when `marketplace`.
    fn cargo_home_naming(key: &str, marketplace: bool) -> (tempfile::TempDir, PathBuf) {
        let temp = tempfile::tempdir().unwrap();
        let checkout = temp.path().join("src dir");
        if marketplace {
            std::fs::create_dir_all(checkout.join(".claude-plugin")).unwrap();
            std::fs::write(checkout.join(".claude-plugin/marketplace.json"), "{}").unwrap();
        }
        let key = key.replace("CHECKOUT", &checkout.display().to_string().replace(' ', "%20"));
        let record = serde_json::json!({"installs": {"other 1.0.0 (registry+https://x)": {}, key: {}}});
        std::fs::write(temp.path().join(".crates2.json"), record.to_string()).unwrap();
        (temp, checkout)
    }

    /// A package at `src/plugin/claude-code` with a build at `src/target/release`: a checkout's
    /// build is what the launcher runs only while `src` holds `Cargo.toml`, as the launcher has it.
    #[cfg(unix)]
    #[test]
    fn a_checkouts_build_runs_only_for_a_package_inside_a_source_tree() {
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("src/plugin/claude-code");
        std::fs::create_dir_all(root.join("scripts")).unwrap();
        let build = temp.path().join("src/target/release/loop-hook");
        std::fs::create_dir_all(build.parent().unwrap()).unwrap();
        std::fs::write(&build, "#!/bin/sh\necho loop-hook 0.0.1\n").unwrap();
        std::fs::set_permissions(&build, std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = temp.path().join("home").display().to_string();
        let vars = [("HOME".to_string(), home), ("PATH".to_string(), "/nonexistent".to_string())];
        let env = Environment::new(vars, temp.path().to_path_buf(), jiff::Timestamp::UNIX_EPOCH);
        let runs = launch(&env, &root).runs;
        assert!(runs.is_err(), "a package outside a source tree ran {runs:?}");
        std::fs::write(temp.path().join("src/Cargo.toml"), "[workspace]\n").unwrap();
        let (binary, source) = launch(&env, &root).runs.unwrap();
        assert_eq!((binary.path, source), (root.join("../../target/release/loop-hook"), "checkout"));
        // The checkout's root is the plugin too (`claude --plugin-dir .`).
        let src = temp.path().join("src");
        std::fs::create_dir_all(src.join("scripts")).unwrap();
        let (binary, source) = launch(&env, &src).runs.unwrap();
        assert_eq!((binary.path, source), (src.join("target/release/loop-hook"), "checkout"));
    }

    #[test]
    fn the_checkout_cargo_installed_from_is_found_while_it_holds_the_marketplace() {
        let (home, checkout) = cargo_home_naming("for-loop 0.1.0 (path+file://CHECKOUT)", true);
        assert_eq!(cargo_checkout(home.path()), Some(checkout));
        let (gone, _) = cargo_home_naming("for-loop 0.1.0 (path+file://CHECKOUT)", false);
        assert_eq!(cargo_checkout(gone.path()), None);
    }

    #[test]
    fn an_install_from_elsewhere_or_an_unreadable_record_names_no_checkout() {
        for key in [
            "for-loop 0.1.0 (git+https://example.invalid/for-loop#0123)",
            "for-loop-other 0.1.0 (path+file://CHECKOUT)",
            "for-loop 0.1.0 (path+file://CHECKOUT",
            "for-loop 0.1.0 (path+file://relative/dir)",
            "for-loop 0.1.0 (path+file://CHECKOUT%2)",
            "for-loop 0.1.0 (path+file://CHECKOUT%ff)",
        ] {
            let (home, _) = cargo_home_naming(key, true);
            assert_eq!(cargo_checkout(home.path()), None, "{key}");
        }
        let (home, _) = cargo_home_naming("for-loop 0.1.0 (path+file://CHECKOUT)", true);
        std::fs::write(home.path().join(".crates2.json"), "not json").unwrap();
        assert_eq!(cargo_checkout(home.path()), None);
    }
}
