//! `/for-loop:strict`: the strict tier in one step. Shows the tested sandbox settings for Claude
//! Code, what they need installed and how to undo them; with `--project` (or `--apply`) or
//! `--user`, writes them. Carried out by the prompt hook, outside the agent's sandbox, from the
//! text the user typed.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::commands::request::flag_spec::{Flag, Group};
use crate::commands::request::words::{self, Given};
use crate::support::Environment;
use crate::support::Outcome;

/// Where the settings go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Project,
    User,
}

const USAGE: &str = "usage: /for-loop:strict [--project | --user]  (no option: show what it would write)";

/// Shows, or with a scope writes, the strict tier's settings for the project in `env.cwd`.
pub(crate) fn run(env: &Environment, args: &str) -> Outcome {
    match scope_asked(args) {
        Ok(scope) => run_in(env, scope),
        Err(why) => {
            let stop = if why.ends_with('?') { "" } else { "." };
            Outcome::refused(format!("for-loop: not done: {why}{stop} {USAGE}"))
        }
    }
}

/// Shows the settings (`None`), or writes them where `scope` says: `loop-hook strict`, whose
/// command line the option table has already read.
pub(crate) fn run_in(env: &Environment, scope: Option<Scope>) -> Outcome {
    let Some(file) = settings_file(env, scope.unwrap_or(Scope::Project)) else {
        return Outcome::refused(
            "for-loop: no home directory (HOME is not set), so no user settings to write.",
        );
    };
    let needs = missing_tools(env);
    match scope {
        None => Outcome::ok(shown(env, &file, &needs)),
        Some(scope) => match write(&file) {
            Ok(()) => Outcome::ok(format!(
                "for-loop: strict tier written to {} ({}).\n{}\n{}",
                file.display(),
                if scope == Scope::User { "every project of yours" } else { "this project" },
                needs_line(&needs),
                undo_line(&file)
            )),
            Err(why) => Outcome::refused(format!("for-loop: not written: {why}. Nothing was changed.")),
        },
    }
}

/// The scope `args` asks for, read through the option table ([`Group::STRICT`]): none shows.
fn scope_asked(args: &str) -> Result<Option<Scope>, String> {
    let given =
        words::read(Group::STRICT, args.split_whitespace().map(str::to_string)).map_err(|e| e.to_string())?;
    let mut scope = None;
    for given in given {
        let asked = match given {
            Given::Option(Flag::Project | Flag::ProjectApply, _) => Scope::Project,
            Given::Option(Flag::User, _) => Scope::User,
            Given::Option(flag, _) => return Err(format!("`{flag}` is not an option")),
            Given::Word(word) => return Err(format!("`{word}` is not an option")),
        };
        if scope.is_some_and(|given| given != asked) {
            return Err("--project and --user each write elsewhere: give one".into());
        }
        scope = Some(asked);
    }
    Ok(scope)
}

/// A line for the start message of a loop on Claude Code that runs in the default tier on a
/// machine where the strict tier could run (bubblewrap works, socat is installed).
pub(crate) fn could_run(
    env: &Environment,
    host: crate::host::Host,
    tier: &crate::checks::Tier,
) -> Option<String> {
    let possible = host.offers_strict_tier()
        && !tier.strict
        && missing_tools(env).is_empty()
        && crate::checks::sandbox::sandbox_unavailable().is_none();
    possible.then(|| {
        "             the strict tier could run on this machine and is not on: /for-loop:strict shows \
         its settings and writes them\n"
            .to_string()
    })
}

/// The settings, where they would go, what is missing, and how to write and undo them.
fn shown(env: &Environment, file: &Path, needs: &[&str]) -> String {
    let user = settings_file(env, Scope::User)
        .map_or_else(|| "your user settings".into(), |f| f.display().to_string());
    let verify = crate::checks::sandbox::sandbox_unavailable().map_or_else(
        || "bubblewrap works here, so verify is sandboxed too.".to_string(),
        |why| format!("verify cannot be sandboxed here: {why}."),
    );
    format!(
        "for-loop: the strict tier runs the agent's shell in Claude Code's sandbox, where it cannot \
         write the loop store, the plugin, the binary or the settings, and runs verify in bubblewrap. \
         It needs these settings (tested end to end with the pinned Claude Code, on Linux):\n\n{}\n\n\
         {verify}\n{}\n\
         To write them: `/for-loop:strict --project` (into {}) or `/for-loop:strict --user` (into {user}). \
         A new session picks them up; a loop started then runs in the strict tier.\n{}",
        settings(),
        needs_line(needs),
        file.display(),
        undo_line(file)
    )
}

/// The tested settings: each key matters (docs/integrity.md, "Strict mode on Claude Code").
fn settings() -> Value {
    json!({"sandbox": {"enabled": true, "allowUnsandboxedCommands": false, "failIfUnavailable": true}})
}

fn needs_line(needs: &[&str]) -> String {
    if needs.is_empty() {
        "bubblewrap and socat are installed.".into()
    } else {
        format!(
            "Install first: {} (Debian and Ubuntu: `sudo apt-get install {}`); without them a session with \
             these settings refuses to start.",
            needs.join(" and "),
            needs.iter().map(|t| if *t == "bwrap" { "bubblewrap" } else { t }).collect::<Vec<_>>().join(" ")
        )
    }
}

fn undo_line(file: &Path) -> String {
    format!("To undo: remove the \"sandbox\" key from {} (or set \"enabled\" to false).", file.display())
}

/// The settings file of `scope`: the project's `.claude/settings.json` (at the host's project
/// directory when it names one), or the user's.
fn settings_file(env: &Environment, scope: Scope) -> Option<PathBuf> {
    match scope {
        Scope::Project => Some(
            env.var("CLAUDE_PROJECT_DIR")
                .map_or_else(|| env.cwd.clone(), PathBuf::from)
                .join(".claude/settings.json"),
        ),
        Scope::User => env
            .var("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| env.var("HOME").map(|home| Path::new(home).join(".claude")))
            .map(|dir| dir.join("settings.json")),
    }
}

/// The programs Claude Code's sandbox needs on Linux that are not on `PATH`.
fn missing_tools(env: &Environment) -> Vec<&'static str> {
    let path = env.var("PATH").unwrap_or_default();
    ["bwrap", "socat"]
        .into_iter()
        .filter(|tool| !std::env::split_paths(path).any(|dir| dir.join(tool).is_file()))
        .collect()
}

/// Writes the sandbox keys into `file`, keeping everything else in it (other sandbox keys too).
/// A file that is not a JSON object is left alone: rewriting it would lose the user's settings.
fn write(file: &Path) -> Result<(), String> {
    let mut top = match std::fs::read(file) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(top)) => top,
            _ => {
                return Err(format!(
                    "{} is not a JSON object; fix it or add the settings by hand",
                    file.display()
                ));
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(e) => return Err(format!("{} could not be read ({e})", file.display())),
    };
    let sandbox = top.entry("sandbox").or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(sandbox) = sandbox else {
        return Err(format!("\"sandbox\" in {} is not an object; fix it by hand", file.display()));
    };
    if let Value::Object(wanted) = &settings()["sandbox"] {
        sandbox.extend(wanted.clone());
    }
    let text = serde_json::to_string_pretty(&Value::Object(top)).map_err(|e| e.to_string())?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{} could not be created ({e})", dir.display()))?;
    }
    crate::store::write_atomic(file, format!("{text}\n").as_bytes(), true)
        .map_err(|e| format!("{} could not be written ({e})", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(dir: &Path) -> Environment {
        Environment::new(
            [
                ("HOME".to_string(), dir.join("home").display().to_string()),
                ("PATH".to_string(), String::new()),
            ],
            dir.join("project"),
            jiff::Timestamp::UNIX_EPOCH,
        )
    }

    #[test]
    fn without_an_option_it_shows_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let shown = run(&env(dir.path()), "");
        assert_eq!(shown.code, crate::support::outcome::Code::Success);
        for part in [
            r#"{"sandbox":{"allowUnsandboxedCommands":false,"enabled":true,"failIfUnavailable":true}}"#,
            "Install first: bwrap and socat (Debian and Ubuntu: `sudo apt-get install bubblewrap socat`)",
            "/for-loop:strict --project",
            "To undo: remove the \"sandbox\" key",
        ] {
            assert!(shown.stdout.contains(part), "{part}\n{}", shown.stdout);
        }
        assert!(!dir.path().join("project/.claude").exists());
    }

    #[test]
    fn it_writes_the_settings_keeping_the_users_own() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("project/.claude/settings.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            r#"{"model": "m", "sandbox": {"filesystem": {"allowWrite": ["/x"]}, "enabled": false}}"#,
        )
        .unwrap();
        let done = run(&env(dir.path()), "--project");
        assert_eq!(done.code, crate::support::outcome::Code::Success, "{}", done.stdout);
        assert!(done.stdout.starts_with("for-loop: strict tier written to"), "{}", done.stdout);
        let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(written["model"], "m");
        assert_eq!(written["sandbox"]["filesystem"]["allowWrite"][0], "/x");
        assert_eq!(written["sandbox"]["enabled"], true);
        assert_eq!(written["sandbox"]["allowUnsandboxedCommands"], false);
        assert_eq!(written["sandbox"]["failIfUnavailable"], true);
        assert!(run(&env(dir.path()), "--user").stdout.contains("home/.claude/settings.json"));
        assert!(dir.path().join("home/.claude/settings.json").is_file());
    }

    #[test]
    fn bad_options_and_files_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let wrong = run(&env(dir.path()), "--everywhere");
        assert_eq!(wrong.code, crate::support::outcome::Code::Refused);
        assert!(wrong.stdout.contains("usage: /for-loop:strict"), "{}", wrong.stdout);
        for (args, said) in [
            ("--projet", "did you mean --project?"),
            ("--user=me", "--user takes no value"),
            ("--project --user", "give one"),
            ("yes", "`yes` is not an option"),
        ] {
            let refused = run(&env(dir.path()), args);
            assert_eq!(refused.code, crate::support::outcome::Code::Refused, "{args}");
            assert!(refused.stdout.contains(said), "{args}: {}", refused.stdout);
            assert!(refused.stdout.contains("usage: /for-loop:strict"), "{args}: {}", refused.stdout);
        }
        assert!(!dir.path().join("project/.claude").exists(), "a refusal writes nothing");
        let file = dir.path().join("project/.claude/settings.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        for text in ["not json", "[1]", r#"{"sandbox": true}"#] {
            std::fs::write(&file, text).unwrap();
            let refused = run(&env(dir.path()), "--project");
            assert_eq!(refused.code, crate::support::outcome::Code::Refused, "{text}");
            assert!(refused.stdout.contains("Nothing was changed"), "{}", refused.stdout);
            assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        }
    }
}
