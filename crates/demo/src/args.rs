//! The command line, and where each input is found when it is not given.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::{Config, Error, Output, Scenario};

pub const USAGE: &str = "\
usage: for-loop-demo [--plan] [--json] [--keep] [--claude PATH] [--loop-hook PATH] [--plugin-dir DIR]

Runs the real for-loop in the real Claude Code CLI on a throwaway sample project, with a scripted
model instead of an API: no API key, no network. scripts/demo installs and builds what it needs.

  --plan            the plan demo: a loop through the two stories of a PLAN.md, boxes ticked by for-loop
  --json            one JSON object per step on stdout instead of the readable account
  --keep            leave the sample project and the loop's files, and say where
  --claude PATH     the Claude Code CLI          [$FOR_LOOP_CLAUDE, else tests/clients/node_modules/.bin/claude]
  --loop-hook PATH  the loop-hook binary         [$FOR_LOOP_BIN, else next to this binary, else target/release]
  --plugin-dir DIR  the for-loop checkout        [the repository this binary was built in]

Colour only when stdout is a terminal and NO_COLOR is unset or empty. Exit status 0 when the loop did
what the demo shows (ledger: verify_failed, oracle_changed, verified; with --plan: verify_failed,
story_verified, story_broken, verified), 1 otherwise.";

/// The command line as given; [`Options::resolve`] fills in the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub plan: bool,
    pub json: bool,
    pub keep: bool,
    pub claude: Option<PathBuf>,
    pub loop_hook: Option<PathBuf>,
    pub plugin_dir: Option<PathBuf>,
}

/// Parses the arguments after the program name; `Ok(None)` for `--help`.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Options>, Error> {
    let mut options = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let text = arg.to_str().ok_or_else(|| Error(format!("unexpected argument {arg:?}")))?;
        // `--flag=value` and `--flag value` both work, as in most CLIs.
        let (name, inline) = match text.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(OsString::from(value))),
            _ => (text, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .map(PathBuf::from)
                .ok_or_else(|| Error(format!("{name} needs a value")))
        };
        match name {
            "-h" | "--help" => return Ok(None),
            "--plan" => options.plan = true,
            "--json" => options.json = true,
            "--keep" => options.keep = true,
            "--claude" => options.claude = Some(value()?),
            "--loop-hook" => options.loop_hook = Some(value()?),
            "--plugin-dir" => options.plugin_dir = Some(value()?),
            _ => return Err(Error(format!("unexpected argument {text:?}"))),
        }
    }
    Ok(Some(options))
}

impl Options {
    /// The full configuration: flags first, then the environment, then places relative to the
    /// repository. `color` is whether the human output may use colour.
    pub fn resolve(self, color: bool) -> Result<Config, Error> {
        let exe = std::env::current_exe().ok();
        let checkout = repository(exe.as_deref());
        let plugin_dir = match (self.plugin_dir, &checkout) {
            (Some(dir), _) => dir,
            (None, Some(checkout)) => checkout.join(PLUGIN),
            (None, None) => {
                return Err(Error(
                    "cannot find the for-loop checkout to load as the plugin: pass --plugin-dir DIR".into(),
                ));
            }
        };
        // The pinned CLI and the release build live in the checkout, above the plugin's folder.
        let root = checkout.unwrap_or_else(|| plugin_dir.clone());
        let claude = self
            .claude
            .or_else(|| env_path("FOR_LOOP_CLAUDE"))
            .unwrap_or_else(|| root.join("tests/clients/node_modules/.bin/claude"));
        let loop_hook = self.loop_hook.or_else(|| env_path("FOR_LOOP_BIN")).unwrap_or_else(|| {
            // The loop-hook built with this binary (same target directory and profile) first:
            // scripts/demo builds both in one cargo invocation.
            let sibling = exe.as_deref().and_then(Path::parent).map(|dir| dir.join("loop-hook"));
            sibling.filter(|path| path.is_file()).unwrap_or_else(|| root.join("target/release/loop-hook"))
        });
        let output = if self.json { Output::Json } else { Output::Human { color } };
        // Absolute, because the CLI and its hooks run in the sample project, not here.
        let [claude, loop_hook, plugin_dir] =
            [claude, loop_hook, plugin_dir].map(|p| std::path::absolute(&p).unwrap_or(p));
        let scenario = if self.plan { Scenario::Plan } else { Scenario::Guard };
        Ok(Config { claude, loop_hook, plugin_dir, keep: self.keep, output, scenario })
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The for-loop checkout: an ancestor of the executable (`<repo>/target/release/…`), else of the
/// directory this crate was built from, else of the current directory.
fn repository(exe: Option<&Path>) -> Option<PathBuf> {
    let built_in = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cwd = std::env::current_dir().ok();
    [exe, Some(built_in), cwd.as_deref()]
        .into_iter()
        .flatten()
        .flat_map(Path::ancestors)
        .find(|dir| is_checkout(dir))
        .map(Path::to_path_buf)
}

/// Where the Claude Code plugin sits in a checkout.
const PLUGIN: &str = "plugin/claude-code";

fn is_checkout(dir: &Path) -> bool {
    let plugin = dir.join(PLUGIN);
    dir.join("Cargo.toml").is_file()
        && plugin.join("hooks/hooks.json").is_file()
        && plugin.join(".claude-plugin").is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> Result<Option<Options>, Error> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn flags_take_values_in_both_forms() {
        let options =
            parsed(&["--plan", "--json", "--keep", "--claude", "/c", "--loop-hook=/l", "--plugin-dir", "/p"])
                .unwrap()
                .unwrap();
        assert!(options.plan && options.json && options.keep);
        assert_eq!(options.claude.as_deref(), Some(Path::new("/c")));
        assert_eq!(options.loop_hook.as_deref(), Some(Path::new("/l")));
        assert_eq!(options.plugin_dir.as_deref(), Some(Path::new("/p")));
    }

    #[test]
    fn help_unknown_flags_and_missing_values() {
        assert_eq!(parsed(&["--help"]).unwrap(), None);
        assert!(parsed(&["--jsno"]).unwrap_err().0.contains("--jsno"));
        assert!(parsed(&["--claude"]).unwrap_err().0.contains("--claude needs a value"));
    }

    /// Without `--plugin-dir` the demo loads the checkout's Claude Code plugin, and takes the
    /// pinned CLI from the checkout, not from inside the plugin.
    #[test]
    fn the_plugin_is_the_checkouts_claude_code_package() {
        let config = Options { loop_hook: Some("/l".into()), ..Options::default() }.resolve(false).unwrap();
        assert!(config.plugin_dir.ends_with(PLUGIN), "{}", config.plugin_dir.display());
        assert!(config.plugin_dir.join("hooks/hooks.json").is_file());
        if std::env::var_os("FOR_LOOP_CLAUDE").is_none() {
            let root = config.plugin_dir.parent().and_then(Path::parent).unwrap();
            assert_eq!(config.claude, root.join("tests/clients/node_modules/.bin/claude"));
        }
    }
}
