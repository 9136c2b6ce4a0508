//! The environment variables that decide which `loop-hook` runs, or whether one runs at all:
//! what the launcher (`scripts/loop-hook`, `scripts/loop-hook.ps1`) and the hook commands of
//! every host package read, and where the binary looks for its store. A host's settings can set
//! any of them for the hooks it starts (Claude Code's and Qwen Code's `env`), so the watch of the
//! host's configuration reads these keys of a settings `env`: `CARGO_HOME` pointed at a folder
//! holding a do-nothing `loop-hook` takes every stop away from for-loop without a word.
//!
//! One list, and a test that reads the launcher and every package's hook commands and fails on a
//! variable they read that the list lacks: a variable added to the launcher is watched from the
//! day it is added.

/// Every variable whose name starts with this is for-loop's own.
pub(crate) const OWN_PREFIX: &str = "FOR_LOOP_";

/// The other variables the launcher and the hooks read.
pub(crate) const READ: &[&str] = &[
    // Where the binary is looked for.
    "PATH",
    "HOME",
    "USERPROFILE",
    "CARGO_HOME",
    "PROCESSOR_ARCHITECTURE",
    // Where the launcher keeps its record of a verified shipped binary.
    "CLAUDE_PLUGIN_DATA",
    "PLUGIN_DATA",
    // Where the plugin is, which the hook commands join to the launcher's path.
    "CLAUDE_PLUGIN_ROOT",
    "PLUGIN_ROOT",
    "CURSOR_PLUGIN_ROOT",
    // Where the store is: a loop not found is a loop not judged.
    "XDG_STATE_HOME",
    "LOCALAPPDATA",
    // Which session's loop a hook that found no binary tells of.
    "CLAUDE_CODE_SESSION_ID",
    "GEMINI_SESSION_ID",
];

/// Whether a settings `env` key named `name` can change which `loop-hook` runs, or where it
/// looks for its loops. In any case: Windows reads `Path` as `PATH`.
pub(crate) fn decides(name: &str) -> bool {
    name.get(..OWN_PREFIX.len()).is_some_and(|start| start.eq_ignore_ascii_case(OWN_PREFIX))
        || READ.iter().any(|read| read.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launchers and every package's hook commands, as shipped.
    /// Each file, whether it is PowerShell, and its text.
    const SOURCES: &[(&str, &str)] = &[
        ("scripts/loop-hook", include_str!("../../../../../scripts/loop-hook")),
        ("scripts/loop-hook.ps1", include_str!("../../../../../scripts/loop-hook.ps1")),
        ("hooks/hooks.json", include_str!("../../../../../hooks/hooks.json")),
        (
            "plugin/claude-code/hooks/hooks.json",
            include_str!("../../../../../plugin/claude-code/hooks/hooks.json"),
        ),
        ("plugin/codex/hooks/hooks.json", include_str!("../../../../../plugin/codex/hooks/hooks.json")),
        ("plugin/cursor/hooks/hooks.json", include_str!("../../../../../plugin/cursor/hooks/hooks.json")),
        (
            "plugin/gemini-cli/hooks/hooks.json",
            include_str!("../../../../../plugin/gemini-cli/hooks/hooks.json"),
        ),
        (
            "plugin/gemini-cli/scripts/command",
            include_str!("../../../../../plugin/gemini-cli/scripts/command"),
        ),
        (
            "plugin/qwen-code/hooks/hooks.json",
            include_str!("../../../../../plugin/qwen-code/hooks/hooks.json"),
        ),
        ("plugin/copilot-cli/for-loop.json", include_str!("../../../../../plugin/copilot-cli/for-loop.json")),
        ("plugin/antigravity/hooks.json", include_str!("../../../../../plugin/antigravity/hooks.json")),
        (
            "plugin/opencode/plugins/for-loop.js",
            include_str!("../../../../../plugin/opencode/plugins/for-loop.js"),
        ),
    ];

    /// Set by the shell itself whatever the environment says, so no setting can choose them.
    const SHELL_OWN: &[&str] = &["PWD", "PPID", "IFS"];

    /// The names of environment variables `text` reads: `$NAME` and `${NAME` in shell (upper
    /// case: the launcher's own variables are lower case), `$env:NAME` in PowerShell and
    /// `process.env.NAME` in JavaScript.
    /// In a PowerShell file only `$env:NAME` is the environment (`$LASTEXITCODE` is the shell's).
    fn read_in(text: &str, powershell: bool) -> Vec<String> {
        let mut names = Vec::new();
        let name_at = |rest: &str| -> String {
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
        };
        for (at, _) in text.match_indices('$') {
            let rest = &text[at + 1..];
            let rest = rest.strip_prefix('{').unwrap_or(rest);
            let (rest, any_case) = match rest.get(..4) {
                Some(prefix) if prefix.eq_ignore_ascii_case("env:") => (&rest[4..], true),
                _ => (rest, false),
            };
            let name = name_at(rest);
            let upper = name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && name.chars().all(|c| !c.is_ascii_lowercase());
            if !name.is_empty() && (any_case || (upper && !powershell)) {
                names.push(name);
            }
        }
        for (at, _) in text.match_indices("process.env.") {
            names.push(name_at(&text[at + "process.env.".len()..]));
        }
        names
    }

    #[test]
    fn every_variable_the_launcher_and_the_hooks_read_is_watched() {
        for (file, text) in SOURCES {
            let powershell =
                std::path::Path::new(file).extension().is_some_and(|e| e.eq_ignore_ascii_case("ps1"));
            for name in read_in(text, powershell) {
                assert!(
                    decides(&name) || SHELL_OWN.contains(&name.as_str()),
                    "{file} reads ${name}, which a settings env can set: add it to launcher_env::READ"
                );
            }
        }
    }

    #[test]
    fn the_reader_finds_each_way_of_reading_a_variable() {
        let names =
            read_in("a=${CARGO_HOME:-x} $HOME $env:Path ${for_loop_launcher} $x process.env.PATH", false);
        assert_eq!(names, ["CARGO_HOME", "HOME", "Path", "PATH"]);
        assert_eq!(read_in("$LASTEXITCODE $env:CARGO_HOME", true), ["CARGO_HOME"]);
        assert!(
            !decides("OTHER") && decides("FOR_LOOP_ANYTHING") && decides("CARGO_HOME") && decides("Path")
        );
    }
}
