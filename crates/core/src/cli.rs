//! The command line of `loop-hook`.

use std::ffi::OsString;
use std::path::PathBuf;

use lexopt::prelude::*;

use crate::commands::doctor::DoctorOptions;
use crate::commands::session::Target;
use crate::commands::start::StartOptions;
use crate::commands::status::StatusOptions;
use crate::host::Host;
use crate::report::ReportOptions;

/// `loop-hook --help`, with `{HOSTS}` standing for `--host`'s list: see [`help`].
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
  --session ID  the host's session id (status and report also take the loop id `status --all`
                prints; default: $CLAUDE_CODE_SESSION_ID, $FOR_LOOP_SESSION_ID,
                $GEMINI_SESSION_ID, $CODEX_THREAD_ID or $COPILOT_AGENT_SESSION_ID). Without one,
                start on antigravity or cursor leaves the loop to be claimed by the conversation
                whose transcript holds its token, and the other commands act on the loop started
                in this directory (by --host's agent, when given).
  --cwd DIR     where verify runs (default: the current directory)
  --host NAME   {HOSTS}
  --json        machine-readable status
  --exit-zero   exit 0 even when refused (for slash commands whose host aborts on failure)

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
}

impl Hook {
    /// The hook command `args` run, whether or not the rest of them parse.
    pub(crate) fn named_in(args: &[OsString]) -> Option<Hook> {
        match args.first()?.to_str()? {
            "stop-hook" | "stop" => {
                let words: Vec<&str> = args[1..].iter().filter_map(|a| a.to_str()).collect();
                let host = words.iter().enumerate().find_map(|(i, word)| match word.strip_prefix("--host") {
                    Some("") => words.get(i + 1).and_then(|name| Host::from_name(name)),
                    Some(inline) => inline.strip_prefix('=').and_then(Host::from_name),
                    None => None,
                });
                Some(Hook::Stop { host })
            }
            "guard" => Some(Hook::Guard),
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
    /// The scope option as typed (`--project`, `--user`), or empty to show.
    Strict(String),
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
        let mut exit_zero = false;
        let mut start = StartOptions::default();
        let mut status = StatusOptions::default();
        let mut report = ReportOptions::default();
        let mut doctor = DoctorOptions::default();
        let mut session_id = None;
        let mut host = None;
        let mut shown = None;
        let mut scope = String::new();
        while let Some(arg) = parser.next()? {
            match (command.as_str(), arg) {
                ("help", Value(word)) => return plain(Cli::CommandHelp(command_help(&word.string()?)?)),
                (_, Long("help") | Short('h')) => return plain(Cli::CommandHelp(command_help(&command)?)),
                (
                    "start" | "cancel" | "status" | "resume" | "rollback" | "shown" | "report" | "doctor"
                    | "strict" | "handoff",
                    Long("exit-zero"),
                ) => {
                    exit_zero = true;
                }
                (
                    "start" | "cancel" | "status" | "resume" | "rollback" | "shown" | "report" | "handoff",
                    Long("session"),
                ) => {
                    session_id = Some(parser.value()?.string()?);
                }
                ("start", Long("cwd")) => start.cwd = Some(PathBuf::from(parser.value()?)),
                (
                    "start" | "stop-hook" | "prompt-hook" | "cancel" | "status" | "resume" | "rollback"
                    | "report" | "doctor" | "session-start" | "handoff",
                    Long("host"),
                ) => {
                    let name = parser.value()?.string()?;
                    let names: Vec<&str> = Host::ALL.iter().map(|host| host.name()).collect();
                    host = Some(
                        Host::from_name(&name)
                            .ok_or_else(|| unknown(&name, "host", &names, &Host::names()))?,
                    );
                }
                ("status", Long("json")) => status.json = true,
                ("doctor", Long("json")) => doctor.json = true,
                ("status", Long("all")) => status.all = true,
                ("strict", Long(name @ ("project" | "user"))) if scope.is_empty() => {
                    scope = format!("--{name}");
                }
                ("shown", Value(word)) if shown.is_none() => shown = Some(word.string()?),
                ("report", Long("out")) => report.out = Some(PathBuf::from(parser.value()?)),
                ("report", Long("open")) => report.open = true,
                ("report", Long("options-on-stdin")) => report.options_on_stdin = true,
                (_, arg) => return Err(refusal(&command, arg)),
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

/// `loop-hook --help`. `--host`'s entry names every host the host layer knows ([`Host::ALL`]),
/// so that a host added there is listed here too.
pub(crate) fn help() -> String {
    let names: Vec<String> =
        Host::ALL
            .iter()
            .map(|&host| {
                if host == Host::default() {
                    format!("{} (default)", host.name())
                } else {
                    host.name().into()
                }
            })
            .collect();
    let list = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    // Wrapped as the entries around it are: under 100 columns, under the entry's first word.
    let mut entry = String::from("the agent host:");
    let mut width = "  --host NAME   ".len() + entry.len();
    for word in list.split(' ') {
        if width + 1 + word.len() > 100 {
            entry.push_str(&format!("\n{:16}{word}", ""));
            width = 16 + word.len();
        } else {
            entry.push_str(&format!(" {word}"));
            width += 1 + word.len();
        }
    }
    HELP.replace("{HOSTS}", &entry)
}

/// `loop-hook COMMAND --help`: the command's usage lines, what it does and the options it
/// takes, cut from [`help`] so that the two never disagree.
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
    let options: Vec<String> = options_of(command)
        .iter()
        .map(|option| entry(section("Options"), |line| names(line, option)))
        .filter(|found| !found.is_empty())
        .collect();
    if !options.is_empty() {
        out.push_str(&format!("\nOptions:\n{}\n", options.join("\n")));
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

/// The options each command reads, for the nearest one to a mistyped option.
fn options_of(command: &str) -> &'static [&'static str] {
    match command {
        "start" => &["--session", "--cwd", "--host", "--exit-zero"],
        "stop-hook" | "stop" | "prompt-hook" => &["--host"],
        "cancel" | "resume" | "rollback" => &["--session", "--host", "--exit-zero"],
        "status" => &["--session", "--host", "--json", "--all", "--exit-zero"],
        "shown" => &["--session", "--exit-zero"],
        "report" => &["--session", "--host", "--out", "--open", "--options-on-stdin", "--exit-zero"],
        "doctor" => &["--host", "--json", "--exit-zero"],
        "strict" => &["--project", "--user", "--exit-zero"],
        "handoff" => &["--session", "--host", "--exit-zero"],
        _ => &[],
    }
}

/// Why `arg` is refused; a mistyped option names the one it was probably meant to be.
fn refusal(command: &str, arg: lexopt::Arg<'_>) -> lexopt::Error {
    let typed = match &arg {
        Long(name) => format!("--{name}"),
        Short(letter) => format!("-{letter}"),
        Value(_) => return arg.unexpected(),
    };
    match crate::support::text::nearest::nearest(&typed, options_of(command).iter().copied()) {
        Some(known) => lexopt::Error::Custom(
            format!("`{typed}` is not an option of `loop-hook {command}`: did you mean {known}?").into(),
        ),
        None => arg.unexpected(),
    }
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
        assert!(matches!(parse(&["strict"]), Ok(Cli::Strict(scope)) if scope.is_empty()));
        assert!(matches!(parse(&["strict", "--user"]), Ok(Cli::Strict(scope)) if scope == "--user"));
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
        assert!(entry.trim_end().ends_with(&format!("or {}", Host::ALL.last().unwrap().name())), "{entry}");
        let whole = help();
        assert!(!whole.contains("{HOSTS}"));
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
        use crate::commands::request::flag_spec::{Flag, Group};
        let shows = |help: &str, flag: Flag| {
            help.split(|c: char| !(c == '-' || c.is_alphanumeric())).any(|word| word == flag.name())
        };
        let run = crate::run::usage();
        // `--help` is how the help is seen.
        for flag in Flag::all_in(Group::RUN.and(Group::LOOP)).filter(|flag| *flag != Flag::Help) {
            assert!(shows(&run, flag), "run: {} is read but not in its help", flag.name());
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
