//! The user's for-loop commands as they arrive in a prompt hook: the raw text the user submitted,
//! e.g. `/for-loop:for-loop fix it --verify "cargo test"` or, typed in Claude Code's interactive
//! prompt, the bare `/for-loop fix it ...`.
//!
//! Only a prompt that *begins* with one of these names is a command. Hosts also submit prompts
//! the user did not type (Claude Code wraps a subagent's result in `<task-notification>`), and a
//! command name later in a prompt is just text.

use crate::host::Host;

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommandKind {
    Start,
    Cancel,
    Status,
    Resume,
    Rollback,
    /// `/for-loop:strict`: show, or write, the strict tier's settings.
    Strict,
    /// `/for-loop:handoff`: move the session's loop to `loop-hook run`.
    Handoff,
}

/// A for-loop command found at the start of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserCommand {
    pub(crate) kind: CommandKind,
    /// The name as typed, e.g. `/for-loop:cancel-loop`.
    pub(crate) name: String,
    /// Everything after the name and the blank that ends it, exactly as typed.
    pub(crate) args: String,
}

/// A host's command names as its user types them, each with the command it is: a spec's
/// `typed_commands`, tried in order (a longer name before its prefix).
pub(crate) type TypedCommands = &'static [(&'static str, CommandKind)];

/// The command names of a host with plugin commands in Claude Code's manner, the default.
/// Claude Code namespaces plugin commands (`/for-loop:NAME`) and, in its interactive prompt, also
/// takes the bare `/NAME`, passing the bare text to hooks. Bare `/resume` is Claude Code's own
/// command and `/rollback` too generic to claim, so those two are recognised only namespaced.
pub(crate) const NAMESPACED: TypedCommands = &[
    ("/for-loop:for-loop", CommandKind::Start),
    ("/for-loop:cancel-loop", CommandKind::Cancel),
    ("/for-loop:loop-status", CommandKind::Status),
    ("/for-loop:resume", CommandKind::Resume),
    ("/for-loop:rollback", CommandKind::Rollback),
    ("/for-loop:strict", CommandKind::Strict),
    ("/for-loop", CommandKind::Start),
    ("/cancel-loop", CommandKind::Cancel),
    ("/loop-status", CommandKind::Status),
    ("/for-loop:handoff", CommandKind::Handoff),
];

/// The command names of a host whose commands take no namespace and that has no rollback
/// command (`loop-hook rollback` runs from a terminal).
pub(crate) const BARE: TypedCommands = &[
    ("/for-loop", CommandKind::Start),
    ("/cancel-loop", CommandKind::Cancel),
    ("/loop-status", CommandKind::Status),
    ("/resume-loop", CommandKind::Resume),
];

impl UserCommand {
    /// The command `prompt` begins with on `host`, if any. Leading blank lines and spaces are
    /// skipped, as the hosts skip them.
    pub(crate) fn parse(host: Host, prompt: &str) -> Option<UserCommand> {
        let text = prompt.trim_start();
        host.spec().typed_commands.iter().find_map(|&(name, kind)| {
            let rest = text.strip_prefix(name)?;
            let args = match rest.chars().next() {
                None => "",
                Some(c) if c.is_whitespace() => &rest[c.len_utf8()..],
                Some(_) => return None,
            };
            Some(UserCommand { kind, name: name.to_string(), args: args.to_string() })
        })
    }

    /// The command a prompt recorded in Claude Code's transcript begins with: the one format
    /// [`Host::confirms_commands_from_transcript`] reads.
    pub(crate) fn in_claude_transcript(prompt: &str) -> Option<UserCommand> {
        UserCommand::parse(Host::ClaudeCode, prompt)
    }

    /// Whether `line` holds a for-loop command a prompt could submit later: beginning with one in
    /// the slash or the `$` form, or naming a slash one as a word of its own. The guard refuses a
    /// tool call that writes one, for a host to run as the user's.
    pub(crate) fn is_named_in(line: &str) -> bool {
        [Host::ClaudeCode, Host::Codex].into_iter().any(|host| UserCommand::parse(host, line).is_some())
            || line.split_whitespace().any(|word| UserCommand::parse(Host::ClaudeCode, word).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(prompt: &str) -> Option<(CommandKind, String)> {
        UserCommand::parse(Host::ClaudeCode, prompt).map(|c| (c.kind, c.args))
    }

    #[test]
    fn a_command_is_named_at_the_start_or_as_a_word() {
        assert!(UserCommand::is_named_in("/for-loop:cancel-loop"));
        assert!(UserCommand::is_named_in("$cancel-loop"), "Codex's form");
        assert!(UserCommand::is_named_in("then type /cancel-loop please"));
        assert!(!UserCommand::is_named_in("then type $cancel-loop please"), "only a slash form as a word");
        assert!(!UserCommand::is_named_in("/cancel-loops"));
        assert!(!UserCommand::is_named_in(""));
        assert!(!UserCommand::is_named_in("cancel the loop"));
    }

    #[test]
    fn namespaced_and_bare_forms() {
        let start = Some((CommandKind::Start, "fix it --verify \"sh check.sh\"".to_string()));
        assert_eq!(parse("/for-loop:for-loop fix it --verify \"sh check.sh\""), start);
        assert_eq!(parse("/for-loop fix it --verify \"sh check.sh\""), start);
        assert_eq!(parse("  \n/for-loop fix it --verify \"sh check.sh\""), start);
        assert_eq!(parse("/cancel-loop"), Some((CommandKind::Cancel, String::new())));
        assert_eq!(parse("/for-loop:cancel-loop"), Some((CommandKind::Cancel, String::new())));
        assert_eq!(parse("/loop-status"), Some((CommandKind::Status, String::new())));
        assert_eq!(parse("/for-loop:resume --more 5"), Some((CommandKind::Resume, "--more 5".into())));
        assert_eq!(parse("/for-loop:rollback 3 --yes"), Some((CommandKind::Rollback, "3 --yes".into())));
        assert_eq!(parse("/for-loop"), Some((CommandKind::Start, String::new())));
        assert_eq!(parse("/for-loop:strict --user"), Some((CommandKind::Strict, "--user".into())));
        assert_eq!(parse("/for-loop:strictly"), None);
        assert_eq!(parse("/for-loop:handoff"), Some((CommandKind::Handoff, String::new())));
        assert_eq!(parse("/for-loop:handoffs"), None);
    }

    #[test]
    fn the_text_after_the_name_is_kept_exactly() {
        let task = "line one\nFOR_LOOP_TASK_TEXT_END\n  'quoted' \"x\" $(y) `z` \\ ;&|";
        assert_eq!(parse(&format!("/for-loop {task}")), Some((CommandKind::Start, task.to_string())));
        assert_eq!(parse(&format!("/for-loop\n{task}")), Some((CommandKind::Start, task.to_string())));
    }

    #[test]
    fn other_prompts_are_not_commands() {
        for prompt in [
            "",
            "please run /for-loop later",
            "/for-loopy thing",
            "/for-loop-x",
            "/resume",
            "/rollback 2",
            "/cancel-loops",
            "<task-notification>\n<result>/cancel-loop</result>\n</task-notification>",
            "for-loop fix it",
        ] {
            assert_eq!(parse(prompt), None, "{prompt:?}");
        }
    }

    #[test]
    fn codex_skill_mentions() {
        let parsed = UserCommand::parse(Host::Codex, "$for-loop fix it --verify true").unwrap();
        assert_eq!((parsed.kind, parsed.args.as_str()), (CommandKind::Start, "fix it --verify true"));
        assert_eq!(UserCommand::parse(Host::Codex, "$cancel-loop").unwrap().kind, CommandKind::Cancel);
        let namespaced = UserCommand::parse(Host::Codex, "$for-loop:for-loop fix it --verify true").unwrap();
        assert_eq!((namespaced.kind, namespaced.args.as_str()), (CommandKind::Start, "fix it --verify true"));
        for (typed, kind) in [
            ("$for-loop:cancel-loop", CommandKind::Cancel),
            ("$for-loop:loop-status", CommandKind::Status),
            ("$for-loop:resume-loop --more 3", CommandKind::Resume),
        ] {
            assert_eq!(UserCommand::parse(Host::Codex, typed).unwrap().kind, kind, "{typed}");
        }
        assert_eq!(UserCommand::parse(Host::Codex, "$for-loop:other x"), None);
        assert_eq!(UserCommand::parse(Host::Codex, "/for-loop fix it"), None);
    }

    #[test]
    fn opencode_and_qwen_code_commands() {
        for host in [Host::Opencode, Host::QwenCode] {
            let parsed = UserCommand::parse(host, "/for-loop fix it --verify true").unwrap();
            assert_eq!((parsed.kind, parsed.args.as_str()), (CommandKind::Start, "fix it --verify true"));
            for (typed, kind) in [
                ("/cancel-loop", CommandKind::Cancel),
                ("/loop-status", CommandKind::Status),
                ("/resume-loop --more 3", CommandKind::Resume),
            ] {
                assert_eq!(UserCommand::parse(host, typed).unwrap().kind, kind, "{typed}");
            }
            for other in [
                "/for-loop:for-loop x",
                "/resume",
                "/init",
                "/for-loop:rollback 2",
                "please /cancel-loop",
                "/goal x",
            ] {
                assert_eq!(UserCommand::parse(host, other), None, "{other}");
            }
        }
    }
}
