//! Whether Codex trusts for-loop's Stop hook.
//!
//! Codex runs a plugin's hook only once the user has trusted its definition (in `/hooks`, or
//! through `codex app-server`), and skips an untrusted hook without a word: a loop would start
//! and then never hold. Codex records trust in the user's `config.toml` (under `CODEX_HOME`,
//! `~/.codex` by default) as a table per hook,
//! `[hooks.state."for-loop@MARKETPLACE:hooks/hooks.json:stop:0:0"]` holding a `trusted_hash`.
//! The hash is Codex's own to compute, so a record left by an older definition still counts here:
//! this finds a Stop hook that was never trusted, not one changed since it was.

use std::path::PathBuf;

use crate::support::Environment;

/// How much of `config.toml` is read; a user's Codex config is a few kilobytes.
const CONFIG_BYTES: u64 = 4 << 20;

/// The line the user sees when a loop starts on Codex and its Stop hook is not trusted.
pub(crate) fn untrusted_warning(env: &Environment) -> Option<String> {
    let config = codex_home(env)?.join("config.toml");
    let text = crate::support::read::bounded_read::read(&config, CONFIG_BYTES).unwrap_or_default();
    if stop_hook_trusted(&String::from_utf8_lossy(&text)) {
        return None;
    }
    Some(format!(
        "for-loop: warning: Codex has no trust record for for-loop's Stop hook in {}, and Codex \
         skips an untrusted hook silently, so this loop will not hold the agent. Trust it in \
         /hooks, or from a terminal with `sh PLUGIN_ROOT/scripts/trust-hooks` (docs/hosts.md, \
         Codex CLI). A run with --dangerously-bypass-hook-trust needs no trust.",
        config.display()
    ))
}

fn codex_home(env: &Environment) -> Option<PathBuf> {
    match env.var("CODEX_HOME") {
        Some(home) => Some(PathBuf::from(home)),
        None => Some(PathBuf::from(env.var("HOME")?).join(".codex")),
    }
}

/// Whether `config` (a Codex `config.toml`) trusts a Stop hook of a plugin named `for-loop`,
/// from whichever marketplace it was installed.
pub(crate) fn stop_hook_trusted(config: &str) -> bool {
    hook_trusted(config, "stop")
}

/// Whether `config` trusts for-loop's hook of `event` as Codex names it in the record's key
/// (`stop`, `user_prompt_submit`).
pub(crate) fn hook_trusted(config: &str, event: &str) -> bool {
    let marker = format!(":{event}:");
    let mut in_our_stop_hook = false;
    for line in config.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            in_our_stop_hook = header
                .strip_prefix("hooks.state.\"")
                .and_then(|rest| rest.split_once('"'))
                .is_some_and(|(key, after)| {
                    after.trim() == "]" && key.starts_with("for-loop@") && key.contains(&marker)
                });
        } else if in_our_stop_hook
            && let Some((name, value)) = line.split_once('=')
            && name.trim() == "trusted_hash"
            && value.trim().trim_matches('"').starts_with("sha256:")
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRUSTED: &str = "[plugins.\"for-loop@for-loop\"]\nenabled = true\n\n\
        [hooks.state.\"for-loop@for-loop:hooks/hooks.json:stop:0:0\"]\n\
        trusted_hash = \"sha256:08a8\"\ntrusted_content_hash = \"sha256:6d04\"\n";

    #[test]
    fn a_trust_record_for_our_stop_hook_counts_from_any_marketplace() {
        assert!(stop_hook_trusted(TRUSTED));
        assert!(stop_hook_trusted(&TRUSTED.replace("for-loop@for-loop", "for-loop@team-tools")));
    }

    #[test]
    fn the_prompt_hook_has_a_record_of_its_own() {
        let prompt = TRUSTED.replace(":stop:", ":user_prompt_submit:");
        assert!(hook_trusted(&prompt, "user_prompt_submit"));
        assert!(!hook_trusted(TRUSTED, "user_prompt_submit"));
    }

    #[test]
    fn anything_else_is_not_trust_in_our_stop_hook() {
        for config in [
            String::new(),
            "not toml at all [[[ \u{0} \"".to_string(),
            // Only the prompt hook trusted: the loop would start and never hold.
            TRUSTED.replace(":stop:", ":user_prompt_submit:"),
            // Another plugin's Stop hook.
            TRUSTED.replace("for-loop@for-loop", "other@for-loop"),
            // A table for our hook with no trust in it (e.g. only disabled).
            TRUSTED.replace("trusted_hash = \"sha256:08a8\"", "enabled = false"),
            // The trust line under another table.
            format!("{TRUSTED}\n[features]\n").replace("trusted_hash", "x") + "trusted_hash = \"sha256:1\"\n",
        ] {
            assert!(!stop_hook_trusted(&config), "{config}");
        }
    }

    #[test]
    fn the_warning_names_the_config_it_read_and_the_way_to_trust() {
        let dir = tempfile::tempdir().unwrap();
        let env = |vars: Vec<(&str, String)>| {
            Environment::new(
                vars.into_iter().map(|(k, v)| (k.to_string(), v)),
                dir.path().to_path_buf(),
                jiff::Timestamp::UNIX_EPOCH,
            )
        };
        let home = env(vec![("HOME", dir.path().display().to_string())]);
        let warning = untrusted_warning(&home).unwrap();
        assert!(warning.contains(&dir.path().join(".codex/config.toml").display().to_string()), "{warning}");
        assert!(warning.contains("/hooks") && warning.contains("trust-hooks"), "{warning}");
        let codex_home = dir.path().join("codex");
        std::fs::create_dir_all(&codex_home).unwrap();
        std::fs::write(codex_home.join("config.toml"), TRUSTED).unwrap();
        assert_eq!(untrusted_warning(&env(vec![("CODEX_HOME", codex_home.display().to_string())])), None);
        assert_eq!(untrusted_warning(&env(vec![])), None, "no home: nothing to read, nothing said");
    }
}
