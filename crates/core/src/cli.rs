//! The command line of `loop-hook`.

use std::ffi::OsString;
use std::path::PathBuf;

use lexopt::prelude::*;

use crate::commands::DoctorOptions;
use crate::commands::Scope;
use crate::commands::StartOptions;
use crate::commands::StatusOptions;
use crate::commands::Target;
use crate::commands::{Flag, Group, request::flag_spec::option_entries};
use crate::host::Host;
use crate::report::ReportOptions;

/// `loop-hook --help`, with `{OPTIONS}` standing for the options of its command lines, which
/// the option table prints: see [`help`].
const HELP: &str = "\
loop-hook: the engine of for-loop, a verified agent loop.
The user's verify command is the only judge of done.

Usage:
  loop-hook start [--session ID] [--cwd DIR] [--host NAME] [--exit-zero]  < loop text on stdin
  loop-hook stop-hook [--host NAME]                      < the host's Stop event on stdin
  loop-hook guard                                        < the host's PreToolUse event on stdin
  loop-hook prompt-hook [--host NAME]                    < the host's UserPromptSubmit event on stdin
  loop-hook session-start [--host NAME]                  < the host's SessionStart event on stdin
  loop-hook shown COMMAND [--session ID] [--exit-zero]
  loop-hook cancel [--session ID] [--host NAME] [--exit-zero]
  loop-hook handoff [--session ID] [--host NAME] [--exit-zero]
  loop-hook resume [--session ID] [--host NAME] [--exit-zero]    < [--more N] [--more-time D] [--more-tokens N] on stdin
  loop-hook rollback [--session ID] [--host NAME] [--exit-zero]  < N [--yes] on stdin
  loop-hook status [--session ID] [--host NAME] [--json] [--all] [--exit-zero]
  loop-hook report [--session ID] [--host NAME] [--out FILE] [--open] [--exit-zero]
  loop-hook run TASK --verify CMD [--agent claude|gemini|codex] [--agent-arg ARG ...] [--json] [loop flags]
  loop-hook run --resume [LOOP]
  loop-hook doctor [--host NAME] [--json] [--exit-zero]
  loop-hook strict [--project | --user] [--exit-zero]
  loop-hook help [COMMAND] | COMMAND --help | --help | --version

Commands:
  start      Arms a loop for a session. stdin is the raw text typed after /for-loop: TASK [flags]
             (`echo --help | loop-hook start` lists the flags). Prints the parsed loop.
  stop-hook  Judges a turn end: runs verify and prints the host's block or allow JSON.
  guard      Denies file edits and shell commands that would change the loop's verify check or
             its files while the loop runs (prints the host's deny JSON, or nothing).
  cancel     Ends the session's loop now; its next stop is allowed.
  handoff    Hands the session's loop over to `loop-hook run` and starts the run in the
             background: one fresh agent session per iteration, the same ledger, iteration,
             budgets, story and reviewer. The session's stops are let through from then on.
  resume     Continues a parked, capped or cancelled loop (--more adds iterations, --more-time time,
             --more-tokens tokens).
  rollback   Lists a --checkpoint loop's snapshots, or restores snapshot N (with --yes) without
             touching the git index, HEAD, branches or stash.
  status     Shows the session's loop, its last verify and recent stops; --all lists every loop.
  prompt-hook  Carries out the user's /for-loop, /cancel-loop, /loop-status, resume and rollback
             from the prompt they submitted (Claude Code, Codex). On those hosts the same
             commands run from the agent's shell are refused: only the user changes a loop.
  session-start  After the host compacted the conversation (Claude Code's SessionStart with
             source compact), gives the agent its running loop back: the task, the check, the
             iteration, the story, the last failure and the rules. Says nothing otherwise.
  shown      Prints what prompt-hook did with the user's last COMMAND (for-loop, resume), for the
             command files to show the model. Reads only.
  report     Writes one self-contained HTML page about the loop (timeline, failures, files changed,
             tokens) next to its state, or to --out FILE, and prints its path; --open opens it.
             --options-on-stdin reads --out and --open from stdin, as typed after /for-loop:report.
  doctor     Checks whether a loop would hold here, for every host installed on this machine (or
             --host's): the binary each hook runs and its version, the hooks registered, enabled
             and trusted, settings that switch hooks off, the store, the tier, and this project's
             stale or parked loops. One line per check, with the command that fixes it; exits 1
             when something that keeps a loop from holding fails. With for-loop installed for no
             host, the first line says so and what to install first. --json prints one object.
  strict     Shows Claude Code's sandbox settings for the strict tier, what they need installed
             (bubblewrap, socat) and how to undo them; --project writes them into this project's
             .claude/settings.json, --user into the user's settings. /for-loop:strict runs it.
  run        The fresh-context loop: runs an agent CLI headless (claude -p, gemini -p, codex exec),
             one new session per iteration, judged by verify like the in-session loop; Ctrl-C
             parks it (`run --resume` continues). `loop-hook run --help` explains it.

Options:
{OPTIONS}

Files:
  Loops live in $FOR_LOOP_HOME, else $XDG_STATE_HOME/for-loop, else ~/.local/state/for-loop:
  sessions/<session id>/state.md (settings and task), ledger.jsonl (one line per stop);
  pending/ for loops not yet claimed, unclaimed/ for those cancelled or expired before.

Exit codes:
  0  success. stop-hook and guard always exit 0, even on their own errors or arguments they do
     not understand: the stop is then allowed (and a running loop's user told why in
     systemMessage) and the tool call goes ahead, so a fault of for-loop never traps a session.
  1  refused: the loop text is invalid, a loop is already running, or there is no session id.
  2  usage: unknown command or option (never from stop-hook or guard).";

/// The hook commands, which answer every problem (their own arguments included) with the host's
/// plain "go ahead" and exit 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hook {
    /// `stop-hook`, with the host its line names if this build knows it.
    Stop {
        host: Option<Host>,
    },
    Guard,
    /// `prompt-hook` or `session-start`, whose answer of "nothing to add" is an empty output.
    Quiet(&'static str),
}

impl Hook {
    /// The hook command `args` run, whether or not the rest of them parse.
    pub(crate) fn named_in(args: &[OsString]) -> Option<Hook> {
        match args.first()?.to_str()? {
            "stop-hook" | "stop" => {
                let words: Vec<&str> = args[1..].iter().filter_map(|a| a.to_str()).collect();
                let host = words.iter().enumerate().find_map(|(i, word)| {
                    match word.strip_prefix(Flag::Host.name()) {
                        Some("") => words.get(i + 1).and_then(|name| Host::from_name(name)),
                        Some(inline) => inline.strip_prefix('=').and_then(Host::from_name),
                        None => None,
                    }
                });
                Some(Hook::Stop { host })
            }
            "guard" => Some(Hook::Guard),
            "prompt-hook" => Some(Hook::Quiet("prompt-hook")),
            "session-start" => Some(Hook::Quiet("session-start")),
            _ => None,
        }
    }
}

/// A parsed command line: what to do, and whether refusals still exit 0.
#[derive(Debug, Clone)]
pub(crate) struct Invocation {
    pub cli: Cli,
    /// Refusals exit 0 too. Hosts that abort a slash command on a non-zero exit then still show
    /// the message to the user and the model.
    pub exit_zero: bool,
}

#[derive(Debug, Clone)]
pub(crate) enum Cli {
    Start(StartOptions),
    StopHook {
        host: Host,
    },
    Cancel(Target),
    Guard,
    /// Options come as text on stdin, as typed after `/for-loop:resume`.
    Resume(Target),
    /// Options come as text on stdin, as typed after `/for-loop:rollback`.
    Rollback(Target),
    Status(StatusOptions),
    PromptHook {
        host: Host,
    },
    SessionStart {
        host: Host,
    },
    Shown {
        session_id: Option<String>,
        command: String,
    },
    Report(ReportOptions),
    Run(Box<crate::run::RunOptions>),
    Doctor(DoctorOptions),
    /// Where to write the strict tier's settings; `None` shows them.
    Strict(Option<Scope>),
    Help,
    /// `loop-hook COMMAND --help` (or `loop-hook help COMMAND`): that command's own usage.
    CommandHelp(String),
    Version,
    /// `loop-hook handoff`: the session's loop to `loop-hook run`.
    Handoff(Target),
}

#[cfg(test)]
impl Cli {
    pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Cli, lexopt::Error> {
        Invocation::parse(args).map(|invocation| invocation.cli)
    }
}

impl Invocation {
    pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Invocation, lexopt::Error> {
        let mut parser = lexopt::Parser::from_args(args);
        let plain = |cli| Ok(Invocation { cli, exit_zero: false });
        let command = match parser.next()? {
            None => return plain(Cli::Help),
            Some(Long("help") | Short('h')) => return plain(Cli::Help),
            Some(Long("version") | Short('V')) => return plain(Cli::Version),
            Some(Value(word)) => word.string()?,
            Some(other) => return Err(other.unexpected()),
        };
        // Checked before its options, so that a misspelt command is named as such rather than
        // as a command that has no such option.
        if !COMMANDS.contains(&command.as_str()) && command != "stop" {
            return Err(unknown(&command, "command", COMMANDS, &COMMANDS.join(", ")));
        }
        if command == "run" {
            let rest = parser.raw_args()?.collect();
            let options = crate::run::RunOptions::parse(rest).map_err(|e| lexopt::Error::Custom(e.into()))?;
            return plain(Cli::Run(Box::new(options)));
        }
        let group = group_of(&command);
        let mut exit_zero = false;
        let mut start = StartOptions::default();
        let mut status = StatusOptions::default();
        let mut report = ReportOptions::default();
        let mut doctor = DoctorOptions::default();
        let mut session_id = None;
        let mut host = None;
        let mut shown = None;
        let mut scope = None;
        while let Some(arg) = parser.next()? {
            let name = match arg {
                Value(word) if command == "help" => {
                    return plain(Cli::CommandHelp(command_help(&word.string()?)?));
                }
                Value(word) if command == "shown" && shown.is_none() => {
                    shown = Some(word.string()?);
                    continue;
                }
                Value(_) => return Err(arg.unexpected()),
                Long(name) => format!("--{name}"),
                Short(letter) => format!("-{letter}"),
            };
            let Some(flag) = Flag::named_in(group, &name) else {
                return Err(refusal(&command, &name));
            };
            // A switch given a value (`--json=yes`) is refused rather than read as on or off.
            if flag.is_switch() && parser.optional_value().is_some() {
                return Err(lexopt::Error::Custom(
                    format!("{name} takes no value: write just {name}").into(),
                ));
            }
            match flag {
                Flag::Help => return plain(Cli::CommandHelp(command_help(&command)?)),
                Flag::ExitZero => exit_zero = true,
                Flag::Session => session_id = Some(parser.value()?.string()?),
                Flag::Cwd => start.cwd = Some(PathBuf::from(parser.value()?)),
                Flag::Host => {
                    let name = parser.value()?.string()?;
                    let names: Vec<&str> = Host::ALL.iter().map(|host| host.name()).collect();
                    host = Some(
                        Host::from_name(&name)
                            .ok_or_else(|| unknown(&name, "host", &names, &Host::names()))?,
                    );
                }
                Flag::JsonOutput => (status.json, doctor.json) = (true, true),
                Flag::All => status.all = true,
                Flag::Project | Flag::User => {
                    let asked = if flag == Flag::User { Scope::User } else { Scope::Project };
                    if scope.is_some_and(|given| given != asked) {
                        return Err(lexopt::Error::Custom(
                            "--project and --user each write elsewhere: give one".into(),
                        ));
                    }
                    scope = Some(asked);
                }
                Flag::Out => report.out = Some(PathBuf::from(parser.value()?)),
                Flag::Open => report.open = true,
                Flag::OptionsOnStdin => report.options_on_stdin = true,
                other => {
                    let why =
                        format!("`{other}` is known but not read by loop-hook {command}: please report it");
                    return Err(lexopt::Error::Custom(why.into()));
                }
            }
        }
        let cli = match command.as_str() {
            "start" => Cli::Start(StartOptions { session_id, host, ..start }),
            "stop-hook" | "stop" => Cli::StopHook { host: host.unwrap_or_default() },
            "cancel" => Cli::Cancel(Target { session_id, host }),
            "guard" => Cli::Guard,
            "prompt-hook" => Cli::PromptHook { host: host.unwrap_or_default() },
            "session-start" => Cli::SessionStart { host: host.unwrap_or_default() },
            "shown" => Cli::Shown {
                session_id,
                command: shown.ok_or_else(|| {
                    lexopt::Error::Custom("shown needs the command's name, e.g. `shown for-loop`".into())
                })?,
            },
            "resume" => Cli::Resume(Target { session_id, host }),
            "rollback" => Cli::Rollback(Target { session_id, host }),
            "status" => Cli::Status(StatusOptions { target: Target { session_id, host }, ..status }),
            "report" => Cli::Report(ReportOptions { target: Target { session_id, host }, ..report }),
            "doctor" => Cli::Doctor(DoctorOptions { host, ..doctor }),
            "strict" => Cli::Strict(scope),
            "handoff" => Cli::Handoff(Target { session_id, host }),
            "help" => Cli::Help,
            other => return Err(unknown(other, "command", COMMANDS, &COMMANDS.join(", "))),
        };
        Ok(Invocation { cli, exit_zero })
    }
}

/// Every command `loop-hook` dispatches (`stop` is also taken for `stop-hook`).
const COMMANDS: &[&str] = &[
    "start",
    "stop-hook",
    "prompt-hook",
    "guard",
    "shown",
    "cancel",
    "resume",
    "rollback",
    "status",
    "report",
    "run",
    "doctor",
    "strict",
    "handoff",
    "help",
    "session-start",
];

/// Why the `what` (command, host) named `typed` is refused: the nearest of the `known` names
/// when one is close, else the whole `listing`.
fn unknown(typed: &str, what: &str, known: &[&str], listing: &str) -> lexopt::Error {
    let message = match crate::support::text::nearest::nearest(typed, known.iter().copied()) {
        Some(near) => format!("unknown {what} `{typed}`: did you mean {near}?"),
        None => format!("unknown {what} `{typed}`: use one of {listing}"),
    };
    lexopt::Error::Custom(message.into())
}

/// `loop-hook --help`: its options section is the option table's rows of every command line
/// ([`Group::LINES`]), so that an option is described once and a host added to the host layer
/// is listed in `--host`'s entry.
pub(crate) fn help() -> String {
    HELP.replace("{OPTIONS}", &option_entries(Group::LINES))
}

/// `loop-hook COMMAND --help`: the command's usage lines and what it does, cut from [`help`],
/// and the options its line takes, printed from the option table as [`help`] prints them.
pub(crate) fn command_help(command: &str) -> Result<String, lexopt::Error> {
    let command = if command == "stop" { "stop-hook" } else { command };
    if !COMMANDS.contains(&command) {
        return Err(unknown(command, "command", COMMANDS, &COMMANDS.join(", ")));
    }
    let help = help();
    let section = |title: &str| {
        let rest = help.split(&format!("\n{title}:\n")).nth(1).unwrap_or_default();
        rest.split("\n\n").next().unwrap_or_default()
    };
    let names = |line: &str, name: &str| line.split_whitespace().next() == Some(name);
    let usage: Vec<&str> = section("Usage")
        .lines()
        .filter(|line| line.trim_start().strip_prefix("loop-hook ").is_some_and(|rest| names(rest, command)))
        .collect();
    let mut out = format!("Usage:\n{}\n", usage.join("\n"));
    let what = entry(section("Commands"), |line| names(line, command));
    if !what.is_empty() {
        out.push_str(&format!("\n{what}\n"));
    }
    let options = option_entries(group_of(command));
    if !options.is_empty() {
        out.push_str(&format!("\nOptions:\n{options}\n"));
    }
    out.push_str("\n`loop-hook --help` lists every command, where loops live and the exit codes.");
    Ok(out)
}

/// The entry of a help section whose first line `starts` says is the one: that line and the
/// more deeply indented lines that continue it.
fn entry(section: &str, starts: impl Fn(&str) -> bool) -> String {
    let mut lines = Vec::new();
    for line in section.lines() {
        let first = !line.starts_with("   ");
        if first && !lines.is_empty() {
            break;
        }
        if !lines.is_empty() || first && starts(line) {
            lines.push(line);
        }
    }
    lines.join("\n")
}

/// The options of `command`'s line in the option table (`stop` is also taken for `stop-hook`).
/// `run` reads its own words, and `loop-hook run --help` lists them: here it takes `--help`.
fn group_of(command: &str) -> Group {
    let command = if command == "stop" { "stop-hook" } else { command };
    Group::COMMANDS
        .iter()
        .find(|(group, name)| *group != Group::RUN && name.strip_prefix("loop-hook ") == Some(command))
        .map_or(Group::HELP_LINE, |(group, _)| *group)
}

/// Why the option `typed` is refused; a mistyped one names the option of the command it was
/// probably meant to be.
fn refusal(command: &str, typed: &str) -> lexopt::Error {
    let names = Flag::all_in(group_of(command)).map(Flag::name);
    let message = match crate::support::text::nearest::nearest(typed, names) {
        Some(known) => format!("`{typed}` is not an option of `loop-hook {command}`: did you mean {known}?"),
        None => format!("invalid option '{typed}'"),
    };
    lexopt::Error::Custom(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, lexopt::Error> {
        Cli::parse(args.iter().map(OsString::from))
    }

    #[test]
    fn parses_each_command() {
        assert!(matches!(parse(&[]), Ok(Cli::Help)));
        assert!(matches!(parse(&["--version"]), Ok(Cli::Version)));
        assert!(matches!(parse(&["stop-hook"]), Ok(Cli::StopHook { host: Host::ClaudeCode })));
        assert!(matches!(parse(&["strict"]), Ok(Cli::Strict(None))));
        assert!(matches!(parse(&["strict", "--user"]), Ok(Cli::Strict(Some(Scope::User)))));
        assert!(matches!(
            parse(&["strict", "--project", "--project"]),
            Ok(Cli::Strict(Some(Scope::Project)))
        ));
        assert!(parse(&["strict", "--user", "--project"]).is_err(), "one scope at a time");
        assert!(matches!(parse(&["stop-hook", "--host", "claude-code"]), Ok(Cli::StopHook { .. })));
        match parse(&["start", "--session", "s", "--cwd", "/p"]).unwrap() {
            Cli::Start(o) => {
                assert_eq!(o.session_id.as_deref(), Some("s"));
                assert_eq!(o.cwd, Some(PathBuf::from("/p")));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["handoff", "--session", "s", "--exit-zero"]).unwrap() {
            Cli::Handoff(target) => assert_eq!(target.session_id.as_deref(), Some("s")),
            other => panic!("{other:?}"),
        }
        match parse(&["doctor", "--host=codex", "--json"]).unwrap() {
            Cli::Doctor(o) => assert_eq!((o.host, o.json), (Some(Host::Codex), true)),
            other => panic!("{other:?}"),
        }
        match parse(&["status", "--json", "--all"]).unwrap() {
            Cli::Status(o) => assert!(o.json && o.all),
            other => panic!("{other:?}"),
        }
        match parse(&["report", "--session", "s", "--out", "r.html", "--open"]).unwrap() {
            Cli::Report(o) => {
                assert_eq!(o.target.session_id.as_deref(), Some("s"));
                assert_eq!(o.out, Some(PathBuf::from("r.html")));
                assert!(o.open && !o.options_on_stdin);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn commands_without_a_session_take_a_host() {
        match parse(&["cancel", "--host", "agy"]).unwrap() {
            Cli::Cancel(target) => {
                assert_eq!((target.session_id, target.host), (None, Some(Host::Antigravity)));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["status", "--host", "cursor", "--session", "c"]).unwrap() {
            Cli::Status(o) => {
                assert_eq!((o.target.session_id.as_deref(), o.target.host), (Some("c"), Some(Host::Cursor)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_what_it_does_not_know() {
        assert!(parse(&["frobnicate"]).is_err());
        assert!(parse(&["cancel", "--json"]).is_err());
        assert!(parse(&["report", "--json"]).is_err());
        assert!(parse(&["report", "--out"]).is_err());
        assert!(parse(&["status", "--open"]).is_err());
        assert!(parse(&["start", "--session"]).is_err());
        assert!(parse(&["stop-hook", "--host", "vim"]).is_err());
        assert!(parse(&["cancel", "--host", "vim"]).is_err());
        assert!(parse(&["status", "--host"]).is_err());
        assert!(parse(&["guard", "--host", "cursor"]).is_err());
        assert!(parse(&["stop-hook", "--exit-zero"]).is_err());
        let invocation = Invocation::parse(["start", "--exit-zero"].map(OsString::from)).unwrap();
        assert!(invocation.exit_zero);
    }

    #[test]
    fn every_option_takes_its_value_after_an_equals_sign_too() {
        match parse(&["start", "--session=s", "--cwd=/p", "--host=cursor"]).unwrap() {
            Cli::Start(o) => {
                assert_eq!(
                    (o.session_id.as_deref(), o.cwd, o.host),
                    (Some("s"), Some(PathBuf::from("/p")), Some(Host::Cursor))
                );
            }
            other => panic!("{other:?}"),
        }
        match parse(&["report", "--session=s", "--out=a b.html"]).unwrap() {
            Cli::Report(o) => {
                assert_eq!(o.target.session_id.as_deref(), Some("s"));
                assert_eq!(o.out, Some(PathBuf::from("a b.html")));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["stop-hook", "--host=gemini-cli"]),
            Ok(Cli::StopHook { host: Host::GeminiCli })
        ));
        assert!(parse(&["status", "--json=yes"]).is_err(), "a switch takes no value");
    }

    #[test]
    fn a_mistyped_option_names_the_nearest_one() {
        for (args, expected) in [
            (
                &["status", "--jsn"][..],
                "`--jsn` is not an option of `loop-hook status`: did you mean --json?",
            ),
            (&["start", "--sesion", "s"], "did you mean --session?"),
            (&["report", "--output", "r.html"], "did you mean --out?"),
            (&["cancel", "--exit_zero"], "did you mean --exit-zero?"),
        ] {
            let error = parse(args).unwrap_err().to_string();
            assert!(error.contains(expected), "{args:?}: {error}");
        }
        let far = parse(&["status", "--frobnicate"]).unwrap_err().to_string();
        assert!(!far.contains("did you mean"), "{far}");
    }

    /// `start --help` once named six hosts of eight: the list now comes from the host layer.
    #[test]
    fn start_help_names_every_host_the_host_layer_knows() {
        let Ok(Cli::CommandHelp(start)) = parse(&["start", "--help"]) else { panic!() };
        let entry: String =
            start.split("  --host NAME").nth(1).unwrap().split("\n  --").next().unwrap().into();
        for host in Host::ALL {
            assert!(entry.contains(host.name()), "{} is missing: {entry}", host.name());
        }
        assert!(entry.contains("claude-code (default)"), "{entry}");
        assert!(entry.trim_end().ends_with(&format!("or {}.", Host::ALL.last().unwrap().name())), "{entry}");
        let whole = help();
        assert!(!whole.contains("{OPTIONS}"));
        let lines: Vec<&str> =
            whole.lines().skip_while(|l| !l.starts_with("  --host NAME")).take(3).collect();
        assert!(lines.iter().all(|line| line.len() <= 100), "{lines:#?}");
        assert!(
            lines[1].starts_with(&" ".repeat(16)) && !lines[1].starts_with(&" ".repeat(17)),
            "{lines:#?}"
        );
    }

    /// The help texts and the option table agree: every option a command reads through the
    /// table is in the help that command prints, under the name the table gives it.
    #[test]
    fn every_option_of_the_table_is_in_its_commands_help() {
        use crate::commands::request::flag_spec::Flag;
        let shows = |help: &str, flag: Flag| {
            help.split(|c: char| !(c == '-' || c.is_alphanumeric())).any(|word| word == flag.name())
        };
        let run = crate::run::usage();
        // `--help` is how the help is seen.
        for flag in Flag::all_in(Group::RUN.and(Group::LOOP)).filter(|flag| *flag != Flag::Help) {
            assert!(shows(&run, flag), "run: {} is read but not in its help", flag.name());
        }
        for command in COMMANDS.iter().filter(|c| **c != "run") {
            let help = command_help(command).unwrap();
            for flag in Flag::all_in(group_of(command)).filter(|flag| *flag != Flag::Help) {
                assert!(
                    shows(&help, flag),
                    "{command}: {} is read but not in its help:\n{help}",
                    flag.name()
                );
            }
        }
        for (command, group) in [
            ("resume", Group::RESUME),
            ("rollback", Group::ROLLBACK),
            ("report", Group::REPORT),
            ("strict", Group::STRICT),
        ] {
            let help = command_help(command).unwrap();
            // `strict --apply` is read as `--project` and left out of the help.
            for flag in Flag::all_in(group).filter(|flag| *flag != Flag::ProjectApply) {
                assert!(
                    shows(&help, flag),
                    "{command}: {} is read but not in its help:\n{help}",
                    flag.name()
                );
            }
        }
    }

    /// Each command's `Options:` section is its line's rows of the table, entry for entry, and
    /// the global help's is every line's: nothing is written twice or left out.
    #[test]
    fn each_commands_options_section_is_printed_from_its_rows() {
        use crate::commands::request::flag_spec::Flag;
        let entries = |text: &str| -> Vec<String> {
            let section = text.split("\nOptions:\n").nth(1).unwrap_or_default();
            let section = section.split("\n\n").next().unwrap_or_default();
            section
                .lines()
                .filter(|line| line.starts_with("  --"))
                .map(|line| line.split_whitespace().next().unwrap().to_string())
                .collect()
        };
        for command in COMMANDS {
            let help = command_help(command).unwrap();
            let rows: Vec<String> = Flag::all_in(group_of(command))
                .filter(|flag| *flag != Flag::Help)
                .map(|flag| flag.name().to_string())
                .collect();
            assert_eq!(entries(&help), rows, "{command}:\n{help}");
            let options = help.split("\nOptions:\n").nth(1).unwrap_or_default();
            assert!(options.lines().all(|line| line.chars().count() <= 100), "{command}:\n{help}");
        }
        let status = command_help("status").unwrap();
        assert!(status.contains("\n  --all         Lists every loop, not only this session's."), "{status}");
        let report = command_help("report").unwrap();
        let entry = format!("\n  --options-on-stdin\n{:16}Reads --out and --open", "");
        assert!(report.contains(&entry), "a name too long for its column stands alone: {report}");
        let global: Vec<String> = Flag::all_in(Group::LINES)
            .filter(|flag| *flag != Flag::Help)
            .map(|flag| flag.name().to_string())
            .collect();
        assert_eq!(entries(&help()), global);
    }

    /// The parser reads what the table says each command line takes, and nothing else: every
    /// option of the command lines parses for the commands whose group has it and is refused,
    /// naming the command, for every other.
    #[test]
    fn each_command_line_takes_exactly_the_options_of_its_rows() {
        use crate::commands::request::flag_spec::Flag;
        for command in COMMANDS.iter().filter(|c| !matches!(**c, "run" | "help")) {
            for flag in Flag::all_in(Group::LINES).filter(|flag| *flag != Flag::Help) {
                let mut args = vec![command.to_string()];
                if *command == "shown" {
                    args.push("for-loop".into());
                }
                args.push(flag.name().into());
                if !flag.is_switch() {
                    args.push(if flag == Flag::Host { "codex".into() } else { "x".into() });
                }
                let parsed = Cli::parse(args.iter().map(OsString::from));
                if group_of(command).has(flag.spec().groups) {
                    assert!(parsed.is_ok(), "{args:?}: {:?}", parsed.err().map(|e| e.to_string()));
                } else {
                    assert!(parsed.is_err(), "{args:?} is read, though its row leaves {command} out");
                }
            }
        }
    }

    #[test]
    fn a_bad_option_of_a_command_line_is_refused_in_one_line_saying_what_to_write() {
        for (args, expected) in [
            (&["status", "--json=yes"][..], "--json takes no value: write just --json"),
            (&["cancel", "--exit-zero=1"], "--exit-zero takes no value: write just --exit-zero"),
            (&["report", "--open=now"], "--open takes no value: write just --open"),
            (&["strict", "--user", "--project"], "--project and --user each write elsewhere: give one"),
            (&["strict", "--apply"], "invalid option '--apply'"),
            (&["status", "--session"], "missing argument for option '--session'"),
            (&["start", "--cwd"], "missing argument for option '--cwd'"),
            (&["doctor", "--host"], "missing argument for option '--host'"),
            (&["report", "--out"], "missing argument for option '--out'"),
            (&["shown", "for-loop", "--host", "codex"], "invalid option '--host'"),
            (&["guard", "--json"], "invalid option '--json'"),
            (&["status", "--al"], "did you mean --all?"),
            (&["report", "--options-on-stdn"], "did you mean --options-on-stdin?"),
            (&["strict", "--usr"], "did you mean --user?"),
        ] {
            let error = parse(args).unwrap_err().to_string();
            assert!(error.contains(expected), "{args:?}: {error}");
            assert!(!error.contains('\n'), "{args:?}: {error}");
        }
        let huge = format!("--{}", "x".repeat(100_000));
        assert!(parse(&["status", &huge]).is_err());
    }

    #[test]
    fn every_command_prints_its_own_help() {
        for command in COMMANDS.iter().filter(|c| **c != "run") {
            for args in [vec![*command, "--help"], vec![*command, "-h"], vec!["help", *command]] {
                let Ok(Cli::CommandHelp(text)) = parse(&args) else { panic!("{args:?}") };
                assert!(text.starts_with("Usage:\n  loop-hook "), "{args:?}: {text}");
                let usage = text.lines().skip(1).take_while(|l| !l.is_empty()).collect::<Vec<_>>();
                assert!(
                    usage.iter().all(|line| line.trim_start().starts_with(&format!("loop-hook {command}"))),
                    "{args:?}: only its own usage: {text}"
                );
            }
        }
        let Ok(Cli::CommandHelp(report)) = parse(&["report", "--help"]) else { panic!() };
        assert!(report.contains("Writes one self-contained HTML page"), "{report}");
        assert!(report.contains("\n  --session ID") && report.contains("\n  --host NAME"), "{report}");
        assert!(!report.contains("loop-hook status") && !report.contains("Exit codes"), "{report}");
        let Ok(Cli::CommandHelp(stop)) = parse(&["stop", "--help"]) else { panic!() };
        assert!(stop.contains("loop-hook stop-hook [--host NAME]"), "{stop}");
        let Ok(Cli::CommandHelp(doctor)) = parse(&["doctor", "--json", "--help"]) else { panic!() };
        assert!(doctor.contains("--json") && !doctor.contains("--session"), "{doctor}");
        assert!(parse(&["help", "frobnicate"]).is_err());
    }

    #[test]
    fn a_misspelt_command_or_host_names_the_nearest_one() {
        for (args, expected) in [
            (&["stats", "--json"][..], "unknown command `stats`: did you mean status?"),
            (&["reprot"], "unknown command `reprot`: did you mean report?"),
            (&["doctr", "--host", "codex"], "did you mean doctor?"),
            (&["help", "cancle"], "did you mean cancel?"),
            (&["doctor", "--host", "claud"], "unknown host `claud`: did you mean claude-code?"),
            (&["status", "--host=codx"], "unknown host `codx`: did you mean codex?"),
            (&["start", "--host", "gemini-cl"], "did you mean gemini-cli?"),
        ] {
            let error = parse(args).unwrap_err().to_string();
            assert!(error.contains(expected), "{args:?}: {error}");
        }
        let far = parse(&["frobnicate"]).unwrap_err().to_string();
        assert!(far.contains("use one of start, stop-hook") && !far.contains("did you mean"), "{far}");
        let far = parse(&["doctor", "--host", "vim"]).unwrap_err().to_string();
        assert!(far.contains("use one of claude-code, ") && !far.contains("did you mean"), "{far}");
    }

    #[test]
    fn hooks_are_recognised_whatever_follows() {
        let hook = |args: &[&str]| Hook::named_in(&args.iter().map(OsString::from).collect::<Vec<_>>());
        assert_eq!(hook(&["stop-hook", "--host", "newer-host"]), Some(Hook::Stop { host: None }));
        assert_eq!(
            hook(&["stop-hook", "--host", "gemini-cli", "--new"]),
            Some(Hook::Stop { host: Some(Host::GeminiCli) })
        );
        assert_eq!(
            hook(&["stop-hook", "--new", "--host=agy"]),
            Some(Hook::Stop { host: Some(Host::Antigravity) })
        );
        assert_eq!(hook(&["stop-hook", "--host"]), Some(Hook::Stop { host: None }));
        assert_eq!(hook(&["guard", "--host", "cursor"]), Some(Hook::Guard));
        assert_eq!(hook(&["status", "--bogus"]), None);
        assert_eq!(hook(&[]), None);
    }
}
