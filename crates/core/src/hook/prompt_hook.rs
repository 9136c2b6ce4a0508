//! `loop-hook prompt-hook`: the host's prompt-submit hook (Claude Code's and Codex's
//! `UserPromptSubmit`, Copilot CLI's `userPromptSubmitted`). It carries out the user's `/for-loop`, `/cancel-loop`, `/loop-status`,
//! resume and rollback itself, from the text the user submitted, before the model sees anything.
//!
//! Why here and not in the command file: the hook gets the user's literal prompt, which the model
//! cannot write, and it runs outside the model's sandbox, where the loop store is writable. A
//! command file's `!` line runs in the model's shell and sandbox, like any tool call. The command
//! files now only show what this hook did ([`shown`]).
//!
//! A prompt the agent wrote is refused: Claude Code also submits, as prompts, the text the model
//! gave `ScheduleWakeup` or `CronCreate`, with nothing in the hook's event to tell them apart. The
//! transcript does: the text is in one of the model's own tool calls.
//!
//! Every other prompt costs one `stat` (a notice waiting for the user), and never fails: any
//! fault here lets the prompt through unchanged.

use std::io::Read;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::commands::Target;
use crate::commands::cancel;
use crate::commands::rollback;
use crate::commands::{ResumeOptions, resume};
use crate::commands::{StartOptions, start};
use crate::commands::{StatusOptions, status};
use crate::host::Host;
use crate::host::Origin;
use crate::host::{CommandKind, UserCommand};
use crate::host::{Fields, event};
use crate::provenance::Notice;
use crate::state::ReasonCode;
use crate::state::{Incident, LoopState};
use crate::state::{LedgerDecision, LedgerEntry};
use crate::store::Custody;
use crate::store::{Change, CommitError, Notes, Transaction};
use crate::store::{LoopPaths, Store};
use crate::support::Environment;
use crate::support::ReverseLines;
use crate::support::{Code, Outcome};

/// How far back the transcript is searched for the model's own copy of a command.
const TRANSCRIPT_BYTES: u64 = 16 << 20;
/// How long after the hook a command file's `!` line may show its result.
const SHOWN_WITHIN_SECS: i64 = 300;

/// What the hook decided, before it is rendered for the host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PromptResponse {
    /// `Some`: do not send the prompt to the model; show this to the user instead.
    pub(crate) block: Option<String>,
    /// A line for the user only.
    pub(crate) system_message: Option<String>,
    /// What the hook did with a command the model goes on to work on (a start, a resume), for
    /// hosts whose model learns it from the hook's answer: Copilot CLI has no command file to
    /// show it.
    pub(crate) context: Option<String>,
}

/// What the hook did with a command, kept beside the loop for the command file to show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PromptRecord {
    pub(crate) time: Timestamp,
    pub(crate) command: String,
    pub(crate) ok: bool,
    pub(crate) output: String,
}

/// Handles one prompt-submit event of `host`; returns what to print.
pub(crate) fn run(env: &Environment, host: Host, stdin: impl Read) -> String {
    let Ok(object) = event::read_bounded(stdin).and_then(|bytes| event::parse_object(&bytes)) else {
        return String::new();
    };
    render(host, &respond(env, host, &object))
}

pub(super) fn respond(env: &Environment, host: Host, object: &Map<String, Value>) -> PromptResponse {
    let fields = Fields(object);
    let read = if host.prompt_hook_replaces_the_command() {
        crate::host::opencode_command(object).map(|c| (c.session_id, c.prompt))
    } else {
        session_and_prompt(host, &fields)
    };
    let Some((session_id, prompt)) = read else { return PromptResponse::default() };
    let Ok(store) = Store::locate(env) else { return PromptResponse::default() };
    let paths = store.paths(&session_id);
    // Sent by a process of the agent's (its process tree shows it): before anything is settled,
    // taken or carried out.
    match crate::provenance::sender::prompt_from_the_agent(env, host, &paths, &prompt) {
        Some(crate::provenance::AgentPrompt::Refused(why)) => return not_run(why, None),
        Some(crate::provenance::AgentPrompt::Ignored) => return PromptResponse::default(),
        None => {}
    }
    let mut held = Held::new(&paths, env.now);
    let route = route(env, host, &fields, &session_id, &prompt, &mut held);
    // The hook's one commit, before any command runs: what its stages changed in the loop.
    let committed = held.commit();
    route.answer(env, host, &session_id, &paths, committed.as_ref().copied())
}

/// The loop of a prompt's session as one prompt-hook run holds it: opened by the first stage
/// that changes it (most prompts open nothing), read and changed by each later stage as the
/// earlier ones left it, and committed once, by [`Held::commit`], before any command runs; a
/// command commits in a transaction of its own (`commands/`).
struct Held<'p> {
    paths: &'p LoopPaths,
    now: Timestamp,
    opened: Option<Result<Option<HeldLoop<'p>>, String>>,
}

/// A loop held open by the prompt hook, as its stages have changed it so far.
struct HeldLoop<'p> {
    transaction: Transaction<'p>,
    state: LoopState,
    /// What custody found when the loop was opened, for the first stage that records it (a
    /// stage that opened a transaction of its own after that one would find nothing left).
    incidents: Vec<Incident>,
    lines: Vec<LedgerEntry>,
    /// Notes that are part of no change, written after the commit.
    notes: Vec<LedgerEntry>,
}

impl<'p> Held<'p> {
    fn new(paths: &'p LoopPaths, now: Timestamp) -> Held<'p> {
        Held { paths, now, opened: None }
    }

    /// The loop, opened and read through custody the first time it is asked for; `Ok(None)` when
    /// the session has none, `Err` when it cannot be opened or trusted.
    fn open(&mut self) -> Result<Option<&mut HeldLoop<'p>>, String> {
        let (paths, now) = (self.paths, self.now);
        let opened = self.opened.get_or_insert_with(|| match Transaction::open(paths, now) {
            Ok((transaction, Custody::Loop { state, incidents })) => {
                Ok(Some(HeldLoop { transaction, state, incidents, lines: Vec::new(), notes: Vec::new() }))
            }
            Ok((_, Custody::None)) => Ok(None),
            Ok((_, Custody::Untrusted { why, .. })) => Err(why),
            Err(e) => Err(e.to_string()),
        });
        match opened {
            Ok(held) => Ok(held.as_mut()),
            Err(why) => Err(why.clone()),
        }
    }

    /// The loop to change, opened if need be; `None` when there is none.
    fn running(&mut self) -> Option<&mut HeldLoop<'p>> {
        self.open().ok().flatten()
    }

    /// The transaction the loop is held open in, when a stage opened it.
    fn transaction(&self) -> Option<&Transaction<'p>> {
        match &self.opened {
            Some(Ok(Some(held))) => Some(&held.transaction),
            _ => None,
        }
    }

    /// The loop as held and changed so far, when it is open.
    fn state(&self) -> Option<&LoopState> {
        match &self.opened {
            Some(Ok(Some(held))) => Some(&held.state),
            _ => None,
        }
    }

    /// Writes a note that is part of no change: after the commit, under the held lock, when the
    /// loop is held (so it follows the lines of the change, as it would follow a commit of its
    /// own); else at once, under the lock taken briefly.
    fn note(&mut self, entry: LedgerEntry) {
        match &mut self.opened {
            Some(Ok(Some(held))) => held.notes.push(entry),
            _ => {
                let _ = crate::store::note_best_effort(self.paths, &entry);
            }
        }
    }

    /// The one commit of this hook run: every stage's change, all or nothing; `Ok` when there
    /// was nothing to commit. Then the notes, and the loop's lock is released.
    fn commit(self) -> Result<(), CommitError> {
        let Some(Ok(Some(held))) = self.opened else { return Ok(()) };
        let HeldLoop { transaction, state, lines, notes, .. } = held;
        let committed =
            if lines.is_empty() { Ok(()) } else { Change::new(state, lines).commit_in(&transaction) };
        for note in &notes {
            let _ = Notes::Held(&transaction).note(note);
        }
        committed
    }
}

/// A line for the user, as a stage says it once the hook's commit is made or failed.
enum Told {
    Said(String),
    Settled(Option<String>),
    Limit(crate::hook::turn_failure::AfterLimit),
    HostConfig(crate::hook::guard_host_config::Noticed),
}

impl Told {
    fn after(&self, committed: Result<(), &CommitError>) -> Option<String> {
        match self {
            Told::Said(line) => Some(line.clone()),
            Told::Settled(told) => match committed {
                Ok(()) => told.clone(),
                Err(e) => Some(crate::provenance::Settlement::not_recorded(told.clone(), &e.to_string())),
            },
            Told::Limit(after) => Some(after.told(committed)),
            Told::HostConfig(noticed) => Some(noticed.told(committed.is_ok())),
        }
    }
}

/// What the hook does with the prompt once its stages have run and their change is committed.
enum Route {
    /// Copilot CLI's re-injection of a block's reason: what is told waits for the next prompt.
    Reinjection(Vec<Told>),
    /// No command: the prompt goes to the model, with what is told for the user, and Copilot
    /// CLI's override of a block, told once it is recorded.
    NotACommand(Vec<Told>, Option<String>),
    /// A command refused: it is not carried out.
    NotRun(String, Vec<Told>),
    /// A command to carry out.
    CarryOut(Box<CarryOut>),
}

/// A command to carry out once the hook's commit is made.
struct CarryOut {
    command: UserCommand,
    cwd: PathBuf,
    transcript: Option<PathBuf>,
    awaiting: Option<crate::state::Awaiting>,
    /// The loop was marked as awaiting the command's confirmation: it runs only once that mark
    /// is committed.
    marked: bool,
    /// The session had a loop when the prompt came.
    had_loop: bool,
    notice: Vec<Told>,
}

impl Route {
    fn answer(
        self,
        env: &Environment,
        host: Host,
        session_id: &str,
        paths: &LoopPaths,
        committed: Result<(), &CommitError>,
    ) -> PromptResponse {
        let said = |told: &[Told]| -> Option<String> {
            let lines: Vec<String> = told.iter().filter_map(|t| t.after(committed)).collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        };
        match self {
            Route::Reinjection(told) => {
                if let Some(notice) = said(&told) {
                    Notice::post(&paths.dir, &notice);
                }
                PromptResponse::default()
            }
            Route::NotACommand(told, overridden) => {
                not_a_command(host, paths, said(&told), overridden.filter(|_| committed.is_ok()))
            }
            Route::NotRun(why, told) => not_run(why, said(&told)),
            Route::CarryOut(carry) => {
                let notice = said(&carry.notice);
                if carry.marked
                    && let Err(e) = committed
                {
                    return not_run(format!("for-loop: `{}` was not run: {e}.", carry.command.name), notice);
                }
                let CarryOut { command, cwd, transcript, awaiting, had_loop, .. } = *carry;
                let outcome = carry_out(
                    env,
                    host,
                    session_id,
                    &cwd,
                    transcript.as_deref(),
                    awaiting.as_ref(),
                    &command,
                );
                if command.kind == CommandKind::Strict && outcome.code == Code::Success && had_loop {
                    crate::hook::guard_host_config::user_changed(
                        &env.with_cwd(cwd.clone()),
                        paths,
                        "the user's /for-loop:strict",
                    );
                }
                answer(env, host, &paths.dir, &command, outcome, notice)
            }
        }
    }
}

/// The prompt hook's stages, in order, each changing the held loop as the one before left it;
/// where the prompt goes from here.
fn route(
    env: &Environment,
    host: Host,
    fields: &Fields<'_>,
    session_id: &str,
    prompt: &str,
    held: &mut Held<'_>,
) -> Route {
    let paths = held.paths;
    let dir = paths.dir.clone();
    let (trusted, mut notice) = loop_stages(env, host, session_id, held);
    let loop_transcript =
        trusted.as_ref().and_then(|state| state.meta.transcript.clone()).filter(|t| t.is_file());
    // A loop without one (started from a terminal) has only the event's to show a turn nobody
    // judged; a change to it needs its own (below).
    let anchorless = trusted.is_some() && loop_transcript.is_none();
    let transcript = loop_transcript.or_else(|| fields.path("transcript_path").ok().flatten());
    // A hook killed while it judged the last stop let that stop through: the user hears it now,
    // and the next stop records it.
    let forged = transcript.as_deref().is_some_and(crate::host::transcript::tool_call_still_pending);
    if let Some(line) = missed_stop(env, host, held, transcript.as_deref(), forged) {
        notice.insert(0, Told::Said(line));
    }
    // Copilot CLI submits a block's reason as the next prompt, through this hook: the loop going
    // on, never a command. Nothing is told now; a notice waits for the user's next prompt.
    if host.resubmits_block_reason_as_prompt()
        && dir.exists()
        && crate::hook::copilot_block::is_reinjection(paths, prompt)
    {
        return Route::Reinjection(notice);
    }
    let Some(command) = UserCommand::parse(host, prompt) else {
        // Copilot CLI shows the user nothing a hook says unless the hook answers the prompt
        // itself: an override of its cap of blocks is recorded, and told that way.
        let overridden = if host.prompt_hook_answers_in_place() && dir.exists() {
            held.running().and_then(|open| {
                open.incidents.clear();
                let (line, told) = crate::hook::copilot_block::block_overridden(env, &mut open.state)?;
                open.lines.push(line);
                Some(told)
            })
        } else {
            None
        };
        return Route::NotACommand(notice, overridden);
    };
    let looked = Looked { trusted, transcript, anchorless, forged, notice, session_id, prompt };
    command_route(env, host, fields, held, command, looked)
}

/// What the stages before a command found: the loop as trusted, the transcript to read, whether
/// the loop has none of its own, whether a tool call is still pending in it, what to tell.
struct Looked<'a> {
    trusted: Option<LoopState>,
    transcript: Option<PathBuf>,
    anchorless: bool,
    forged: bool,
    notice: Vec<Told>,
    session_id: &'a str,
    prompt: &'a str,
}

/// The stages that change a loop whatever the prompt is: a command never confirmed undone, the
/// notices taken, a loop parked on a usage limit lifted, a change of the host's configuration
/// told. The loop as trusted after them, and what to tell.
fn loop_stages(
    env: &Environment,
    host: Host,
    session_id: &str,
    held: &mut Held<'_>,
) -> (Option<LoopState>, Vec<Told>) {
    let paths = held.paths;
    let dir = paths.dir.clone();
    let mut notice: Vec<Told> = Vec::new();
    // A command this hook carried out earlier that the host never recorded the user sending is
    // undone first, so what follows sees the loop as it really is.
    if dir.exists()
        && let Some(settlement) = crate::provenance::Settlement::find(paths, &crate::store::Known::default())
        && let Some(open) = held.running()
    {
        let incidents = std::mem::take(&mut open.incidents);
        if let Some((lines, told)) = settlement.settle(&mut open.state, &incidents, env.now) {
            open.lines.extend(lines);
            notice.push(Told::Settled(told));
        }
    }
    if dir.exists() {
        // Taken under the lock the hook holds once a stage opened the loop: a second take of
        // that lock would wait for this very hook, and the notices would never be shown.
        let taken = match held.transaction() {
            Some(transaction) => Notice::take_held(transaction),
            None => Notice::take(&dir),
        };
        notice.extend(taken.map(Told::Said));
    }
    // The transcript to read: the one the user's own start named, whenever this session has a
    // loop. The event's is whatever its sender wrote, and a program the agent runs can send one
    // naming an empty file.
    let mut trusted = if !dir.exists() {
        None
    } else if let Some(state) = held.state() {
        Some(state.clone())
    } else {
        crate::store::custody::trusted_state(paths).ok().flatten()
    };
    // A failed turn whose report never came is recorded first, as the report would have been, so
    // that what follows sees the loop as it stands after it.
    if let Some(state) =
        trusted.clone().filter(|state| host.keeps_claude_transcript() && state.is_owned_by(session_id))
        && let Some(told) = lost_failure_report(held, &state)
    {
        notice.push(Told::Said(told));
        trusted = held.state().cloned();
    }
    // A loop parked on a usage limit goes on at the user's first prompt after the reset.
    if trusted.as_ref().is_some_and(|state| crate::hook::turn_failure::parked_on_limit(host, state))
        && let Some(open) = held.running()
    {
        open.incidents.clear();
        if let Some((line, after)) = crate::hook::turn_failure::after_limit(env, &mut open.state) {
            open.lines.extend(line);
            notice.push(Told::Limit(after));
        }
    }
    // What decides whether for-loop's hooks run, looked at again (issue 32): a change since the
    // last look is told now, and recorded.
    if let Some(now) = trusted
        .as_ref()
        .filter(|state| state.is_active() && state.is_owned_by(session_id))
        .and_then(|state| crate::hook::guard_host_config::changed_since(env, state))
        && let Some(open) = held.running()
    {
        let incidents = std::mem::take(&mut open.incidents);
        if let Some(noticed) =
            crate::hook::guard_host_config::notice_in(env, &mut open.state, &incidents, now)
        {
            open.lines.extend(noticed.lines.iter().cloned());
            notice.push(Told::HostConfig(noticed));
        }
    }
    (trusted, notice)
}

/// Where a user's command goes: refused when nothing tells the user's prompt from a program's
/// (and said why), or carried out, marked first when the host's transcript confirms it later.
fn command_route(
    env: &Environment,
    host: Host,
    fields: &Fields<'_>,
    held: &mut Held<'_>,
    command: UserCommand,
    looked: Looked<'_>,
) -> Route {
    let Looked { trusted, transcript, anchorless, forged, notice, session_id, prompt } = looked;
    // opencode's plugin names the session's directory.
    let cwd = fields
        .path("cwd")
        .ok()
        .flatten()
        .or_else(|| fields.path("directory").ok().flatten())
        .unwrap_or_else(|| env.cwd.clone());
    let kind = crate::state::AwaitingKind::of(command.kind);
    // Without the loop's transcript nothing tells the user's prompt from a program's.
    if let (Some(kind), Some(state), true) =
        (kind, &trusted, anchorless && host.confirms_commands_from_transcript())
        // A start over a running loop is refused anyway, and says why.
        && !(kind == crate::state::AwaitingKind::Start && state.is_active())
    {
        return Route::NotRun(unreadable_transcript(&command, state, kind, session_id), notice);
    }
    // A handoff is carried out at once, never undone, so it needs the transcript that tells the
    // user's prompt from a program's even more than the commands confirmed later.
    if command.kind == CommandKind::Handoff
        && trusted.is_some()
        && anchorless
        && host.confirms_commands_from_transcript()
    {
        return Route::NotRun(handoff_without_transcript(&command, session_id), notice);
    }
    if forged {
        return Route::NotRun(sent_mid_tool_call(&command), notice);
    }
    if let Some(marker) = host.agent_shell_marker().filter(|name| env.var(name).is_some()) {
        return Route::NotRun(from_the_agents_shell(&command, marker), notice);
    }
    if let Some(tool) = transcript.as_deref().and_then(|path| written_by_the_agent(path, prompt)) {
        return Route::NotRun(in_agent_tool_call(&command, &tool), notice);
    }
    // Confirmed later from the transcript (Claude Code's is the one read): marked before it is
    // carried out, by the hook's one commit, so a hook killed in between leaves the mark, never a
    // change without one.
    let awaiting = kind
        .filter(|_| host.confirms_commands_from_transcript() && transcript.is_some())
        .map(|kind| crate::state::Awaiting { command: command.name.clone(), kind, at: env.now });
    let mut marked = false;
    if let (Some(awaiting), Some(_)) = (&awaiting, &trusted)
        && awaiting.kind != crate::state::AwaitingKind::Start
    {
        match held.open() {
            Ok(Some(open)) => {
                open.incidents.clear();
                open.lines.push(crate::provenance::confirmation::mark(&mut open.state, awaiting, env.now));
                marked = true;
            }
            Ok(None) => {}
            Err(why) => {
                return Route::NotRun(format!("for-loop: `{}` was not run: {why}.", command.name), notice);
            }
        }
    }
    Route::CarryOut(Box::new(CarryOut {
        command,
        cwd,
        transcript,
        awaiting,
        marked,
        had_loop: trusted.is_some(),
        notice,
    }))
}

/// The refusal of a handoff in a loop started without its session's transcript.
fn handoff_without_transcript(command: &UserCommand, session_id: &str) -> String {
    format!(
        "for-loop: `{}` was not run: this loop was started without its session's transcript, so \
         nothing tells your prompt from a program's. Hand it over from your own terminal: \
         loop-hook handoff --session {session_id}",
        command.name
    )
}

/// The event's session id and the prompt the user typed, when it has both.
fn session_and_prompt(host: Host, fields: &Fields) -> Option<(String, String)> {
    // Copilot CLI's `userPromptSubmitted` spells it in camelCase.
    let session_id =
        fields.string("session_id").ok().flatten().or_else(|| fields.string("sessionId").ok().flatten());
    let (Some(session_id), Ok(Some(prompt))) = (session_id, fields.string(host.typed_prompt_field())) else {
        return None;
    };
    Some((session_id, prompt))
}

/// Words for the user about the loop's last stop, when no Stop judgment held it: the hook was
/// killed while it judged, or it did not run.
fn missed_stop(
    env: &Environment,
    host: Host,
    held: &mut Held<'_>,
    transcript: Option<&Path>,
    forged: bool,
) -> Option<String> {
    let paths = held.paths;
    let interrupted =
        if paths.dir.exists() { crate::store::Judgment::interrupted(paths, env.now) } else { None };
    // A turn the Stop hook never judged: the hook was killed (told above), or it did not run.
    let unjudged = match (&interrupted, transcript) {
        (None, Some(transcript)) if host.keeps_claude_transcript() && !forged && paths.dir.exists() => {
            unjudged_turn(env, held, transcript)
        }
        _ => None,
    };
    interrupted.map(|what| format!("for-loop: {what}.")).or(unjudged)
}

/// The answer to a prompt that is no command: it goes to the model, with `notice` for the user.
fn not_a_command(
    host: Host,
    paths: &LoopPaths,
    notice: Option<String>,
    overridden: Option<String>,
) -> PromptResponse {
    // Copilot CLI shows the user nothing a hook says unless the hook answers the prompt
    // itself: what they must hear is told that way, and they send the prompt again.
    if host.prompt_hook_answers_in_place() && paths.dir.exists() {
        let told = match (notice, overridden) {
            (Some(notice), Some(overridden)) => Some(format!("{notice}\n\n{overridden}")),
            (Some(notice), None) => Some(format!(
                "{notice}\n\nThis prompt was not sent to the agent, so that you see this first: send it again."
            )),
            (None, overridden) => overridden,
        };
        return PromptResponse { block: told, ..PromptResponse::default() };
    }
    // Qwen Code shows the user no message of this hook: the agent is given it to pass on.
    let context = notice.as_ref().filter(|_| host.prompt_hook_adds_context()).map(|notice| {
        format!("{notice}\n\n(for-loop: the user's screen does not show the lines above; tell them first.)")
    });
    PromptResponse { system_message: notice, context, ..PromptResponse::default() }
}

/// A command refused before it was carried out: `why` is shown to the user, the prompt goes no
/// further.
fn not_run(why: String, notice: Option<String>) -> PromptResponse {
    PromptResponse { block: Some(why), system_message: notice, context: None }
}

fn unreadable_transcript(
    command: &UserCommand,
    state: &crate::state::LoopState,
    kind: crate::state::AwaitingKind,
    session_id: &str,
) -> String {
    format!(
        "for-loop: `{}` was not run: this loop's transcript ({}) cannot be read, so for-loop \
         cannot tell your prompt from one a program sent. From a terminal outside the agent, \
         run `{}`.",
        command.name,
        state.meta.transcript.as_ref().map_or("not recorded".into(), |t| t.display().to_string()),
        kind.terminal_command(session_id)
    )
}

fn sent_mid_tool_call(command: &UserCommand) -> String {
    format!(
        "for-loop: `{}` was not run: the agent is in the middle of a tool call, and a prompt \
         you type arrives between turns, so this one came from a program the agent ran. \
         If you typed it, send it again once the agent has stopped.",
        command.name
    )
}

fn from_the_agents_shell(command: &UserCommand, marker: &str) -> String {
    format!(
        "for-loop: `{}` was not run: this prompt hook runs in an environment with {marker} set, \
         which the host gives the agent's shell and never its own hooks, so the prompt came from \
         a session the agent started, not from you. Type it in your own session.",
        command.name
    )
}

fn in_agent_tool_call(command: &UserCommand, tool: &str) -> String {
    format!(
        "for-loop: `{}` was not run: this exact text is in the agent's own {tool} call \
         earlier in this conversation, so it may have been submitted by the agent, not \
         typed by you. If you typed it, type it again with a word added at the end (e.g. \
         `{} now`); for-loop ignores extra words after cancel and status.",
        command.name, command.name
    )
}

/// The answer for a command carried out with `outcome`, which is also kept beside the loop in
/// `dir` for the command file to show.
fn answer(
    env: &Environment,
    host: Host,
    dir: &Path,
    command: &UserCommand,
    mut outcome: Outcome,
    notice: Option<String>,
) -> PromptResponse {
    // Codex skips a hook it was not told to trust, silently: a loop started there must not look
    // like one that holds.
    let untrusted =
        (host.skips_untrusted_hooks() && command.kind == CommandKind::Start && outcome.code == Code::Success)
            .then(|| crate::host::codex_trust::untrusted_warning(env))
            .flatten();
    if let Some(warning) = &untrusted {
        outcome.stdout = format!("{}\n\n{warning}", outcome.stdout.trim_end());
    }
    let record = PromptRecord {
        time: env.now,
        command: command.name.clone(),
        ok: outcome.code == Code::Success,
        output: outcome.stdout.clone(),
    };
    if let Ok(bytes) = serde_json::to_vec(&record) {
        let _ = crate::store::LoopFile::PromptRecord.write_making_dir(dir, &bytes);
    }
    // A started or resumed loop goes on to the model, which works on it; the command file shows
    // it what happened. Everything else is for the user alone.
    let to_model = record.ok && matches!(command.kind, CommandKind::Start | CommandKind::Resume);
    let mut headline = outcome.stdout.lines().next().unwrap_or_default().to_string();
    if let Some(warning) = untrusted {
        headline = format!("{headline}\n{warning}");
    }
    let notice_then = |line: String| Some(notice.clone().map_or(line.clone(), |n| format!("{n}\n{line}")));
    if to_model {
        PromptResponse { block: None, system_message: notice_then(headline), context: Some(outcome.stdout) }
    } else {
        let shown = match notice {
            Some(n) => format!("{n}\n\n{}", outcome.stdout),
            None => outcome.stdout,
        };
        PromptResponse { block: Some(shown), system_message: None, context: None }
    }
}

/// Words for the user when the last turn of this session's running loop ended with no Stop
/// judgment on record, and that fact written to the ledger (so the next judged stop tells it
/// again). The Stop hook writes a line at every stop of a running loop, and it runs after the
/// turn's replies are written: so a turn that began after the loop's last line written by a
/// stop was never judged. The hook did not run: hooks turned off (`disableAllHooks`), the
/// plugin's `hooks.json` changed, `loop-hook` replaced, or a crash the host swallowed.
fn unjudged_turn(env: &Environment, held: &mut Held<'_>, transcript: &Path) -> Option<String> {
    let paths = held.paths;
    // The loop as this hook holds it, when it does: what its commit will leave.
    let state = match held.state() {
        Some(state) => state.clone(),
        None => crate::store::custody::trusted_state(paths).ok().flatten()?,
    };
    if crate::verdict::decision::gate(&state, &state.meta.session_id) != crate::verdict::Gate::Judge {
        return None;
    }
    let began = crate::host::transcript::last_turn_began(transcript)?;
    if began <= state.meta.started_at {
        return None;
    }
    let judged = lines_since(paths, &state, began)?
        // A stop's own line, or this very notice already given for the turn.
        .any(|entry| {
            matches!(entry.decision, LedgerDecision::Block | LedgerDecision::Allow)
                || entry.reason == ReasonCode::StopNotJudged
                // A stop that arrived mid tool call and was taken for forged: the hook ran, and
                // that stop was told; a real one caught by a long flush lag must not read as
                // hooks being off.
                || entry.reason == ReasonCode::ForgedStop
                // A turn the host ended on an error: no Stop hook runs for it, and it was told.
                || entry.reason.ends_a_failed_turn()
                // A stop let through to wait on background work: the hook ran, and told it.
                || entry.reason == ReasonCode::BackgroundWait
        });
    if judged {
        return None;
    }
    let detail = format!(
        "the turn that began at {} ended without for-loop judging it: the Stop hook did not run \
         (hooks turned off with disableAllHooks, the plugin's hooks.json changed, loop-hook replaced \
         or crashing)",
        began.strftime("%H:%M:%S UTC")
    );
    let entry = LedgerEntry {
        detail: Some(detail),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Note, ReasonCode::StopNotJudged)
    };
    held.note(entry);
    Some(format!(
        "for-loop: your loop's last turn ended without being judged: for-loop's Stop hook did not run, \
         so nothing held the agent to the check. Check that hooks are on (no `disableAllHooks` in any \
         settings file, the plugin's hooks listed in /hooks) and that loop-hook runs; if you did not \
         change them, the agent may have. The loop is still on (iteration {} of {}).",
        state.meta.iteration, state.meta.settings.max_iterations
    ))
}

/// The ledger lines of `state`'s loop written at `since` or later, newest first (of the last 200).
fn lines_since<'a>(
    paths: &LoopPaths,
    state: &'a LoopState,
    since: Timestamp,
) -> Option<impl Iterator<Item = LedgerEntry> + 'a> {
    let lines = ReverseLines::open(&paths.ledger, 1 << 20).ok()?;
    Some(
        lines
            .map_while(Result::ok)
            .take(200)
            .filter_map(|line| serde_json::from_slice::<LedgerEntry>(&line).ok())
            .filter(move |entry| entry.loop_id == state.meta.loop_id)
            .take_while(move |entry| entry.time >= since),
    )
}

/// When the last turn of `state`'s loop ended on an API error its transcript records and the
/// loop has none of (the host's report of it never reached for-loop), that error recorded and told
/// as the report would have been; `None` when there is none or it was recorded already.
fn lost_failure_report(held: &mut Held<'_>, state: &LoopState) -> Option<String> {
    if crate::verdict::decision::gate(state, &state.meta.session_id) != crate::verdict::Gate::Judge {
        return None;
    }
    let transcript = state.meta.transcript.as_deref().filter(|t| t.is_file())?;
    let reply = crate::host::transcript::last_reply_api_error(transcript)?;
    if reply.at <= state.meta.started_at {
        return None;
    }
    let (paths, now) = (held.paths, held.now);
    // Read under the loop's lock, so the ledger read is the one this commit follows.
    let open = held.running()?;
    let recorded = lines_since(paths, state, reply.at)?
        .any(|entry| entry.reason.ends_a_failed_turn() || entry.reason == ReasonCode::ForgedStop);
    if recorded {
        return None;
    }
    let (line, told) = crate::hook::turn_failure::recovered(&mut open.state, &reply, now);
    open.lines.push(line);
    Some(told)
}

fn carry_out(
    env: &Environment,
    host: Host,
    session_id: &str,
    cwd: &Path,
    transcript: Option<&Path>,
    awaiting: Option<&crate::state::Awaiting>,
    command: &UserCommand,
) -> Outcome {
    let target = Target { session_id: Some(session_id.to_string()), host: Some(host) };
    let here = env.with_cwd(cwd.to_path_buf());
    let outcome = match command.kind {
        CommandKind::Start => {
            let options = StartOptions {
                session_id: Some(session_id.to_string()),
                cwd: Some(cwd.to_path_buf()),
                host: Some(host),
                origin: Some(Origin::User),
                transcript: transcript.map(Path::to_path_buf),
                awaiting: awaiting.cloned(),
                ..StartOptions::default()
            };
            start::run(&here, &options, &command.args)
        }
        CommandKind::Cancel => cancel::run(&here, &target, Origin::User),
        CommandKind::Status => {
            let mut outcome = status::run(&here, &StatusOptions { target, ..StatusOptions::default() });
            let binary = crate::support::text::version::describe(
                env,
                crate::support::text::version::current_exe().as_deref(),
            );
            outcome.stdout.push_str(&format!("\n{binary}"));
            outcome
        }
        CommandKind::Resume => match ResumeOptions::parse(&command.args) {
            Ok(options) => resume::run(&here, &target, &options, Origin::User),
            Err(e) => Outcome::refused(format!("for-loop: not resumed: {e}")),
        },
        CommandKind::Rollback => rollback::run(&here, &target, &command.args, Origin::User),
        CommandKind::Strict => crate::commands::strict::run(&here, &command.args),
        CommandKind::Handoff => crate::commands::handoff::run(&here, &target, Origin::User),
    };
    crate::support::text::version::with_version_notice(env, outcome)
}

/// The agent's tool that holds `prompt` in its input, if one does: the model wrote this text.
/// Only the main conversation counts; a subagent's prompt is not the user's either, but it never
/// reaches this hook.
fn written_by_the_agent(transcript: &Path, prompt: &str) -> Option<String> {
    let wanted = prompt.trim();
    for line in ReverseLines::open(transcript, TRANSCRIPT_BYTES).ok()?.map_while(Result::ok) {
        // Cheap filter before parsing: the text must be on the line at all (JSON-escaped).
        let escaped = serde_json::to_string(wanted).ok()?;
        let needle = &escaped[1..escaped.len() - 1];
        if !contains(&line, needle.as_bytes()) {
            continue;
        }
        let Ok(record) = serde_json::from_slice::<Value>(&line) else { continue };
        if record["type"] != "assistant" {
            continue;
        }
        let blocks = record["message"]["content"].as_array().cloned().unwrap_or_default();
        for block in blocks {
            let name = block["name"].as_str().unwrap_or_default();
            // A tool that submits prompts later holds the command anywhere in its input (`/loop
            // 5m /cancel-loop`); any other tool only as a whole value, not a mention in a
            // command line such as `grep -r /cancel-loop docs`.
            let schedules = SCHEDULERS.contains(&name);
            if block["type"] == "tool_use" && mentions(&block["input"], wanted, schedules) {
                return Some(block["name"].as_str().unwrap_or("tool").to_string());
            }
        }
    }
    None
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// Tools whose input becomes a prompt submitted later, as if typed.
const SCHEDULERS: &[&str] = &["ScheduleWakeup", "CronCreate", "Skill", "SendMessage", "RemoteTrigger"];

fn mentions(value: &Value, text: &str, anywhere: bool) -> bool {
    match value {
        Value::String(s) if anywhere => s.contains(text),
        Value::String(s) => s.trim() == text,
        Value::Array(items) => items.iter().any(|v| mentions(v, text, anywhere)),
        Value::Object(map) => map.values().any(|v| mentions(v, text, anywhere)),
        _ => false,
    }
}

/// The hook's output. Claude Code and Codex take the same keys for `UserPromptSubmit`: a block
/// with its reason (shown to the user; the prompt never reaches the model) and a `systemMessage`.
fn render(host: Host, response: &PromptResponse) -> String {
    if host.prompt_hook_answers_in_place() {
        return copilot_answer(response);
    }
    if host.prompt_hook_replaces_the_command() {
        return opencode_answer(response);
    }
    let mut object = Map::new();
    if let Some(reason) = &response.block {
        object.insert("decision".into(), json!("block"));
        object.insert("reason".into(), json!(reason));
    }
    if let Some(message) = &response.system_message {
        object.insert("systemMessage".into(), json!(message));
    }
    if let Some(context) = response.context.as_ref().filter(|_| host.prompt_hook_adds_context()) {
        object.insert(
            "hookSpecificOutput".into(),
            json!({"hookEventName": "UserPromptSubmit", "additionalContext": context}),
        );
    }
    if object.is_empty() { String::new() } else { Value::Object(object).to_string() }
}

/// `loop-hook shown`: what the prompt hook did with the command the user just typed, for the
/// command file to show. It only reads, so it works inside the model's sandbox.
pub(crate) fn shown(env: &Environment, session_id: Option<&str>, command: &str) -> Outcome {
    let Some(session_id) = crate::commands::session::session_id(env, session_id) else {
        return Outcome::refused("for-loop: no session id; the host passes one to its commands.");
    };
    let record = Store::locate(env)
        .ok()
        .and_then(|store| crate::store::LoopFile::PromptRecord.read(&store.paths(session_id).dir, 1 << 20))
        .and_then(|bytes| serde_json::from_slice::<PromptRecord>(&bytes).ok());
    match record {
        Some(r)
            if r.command.trim_start_matches(['/', '$']).ends_with(command)
                && env.now.duration_since(r.time).as_secs() <= SHOWN_WITHIN_SECS =>
        {
            Outcome::ok(r.output)
        }
        // The prompt hook would have answered this command itself, so it did not run: with
        // `disableAllHooks`, no hook of for-loop's runs, the Stop hook included, and the
        // command file's own line is all that still reaches the user.
        _ if command == "loop-status" => {
            let target = crate::commands::Target { session_id: Some(session_id.to_string()), host: None };
            let status = status::run(env, &StatusOptions { target, ..StatusOptions::default() });
            Outcome::ok(format!("{HOOKS_OFF}\n\n{}", status.stdout))
        }
        _ => Outcome::refused(format!("{HOOKS_OFF} Nothing was done: no loop was changed.")),
    }
}

/// What a command file says when for-loop's prompt hook did not handle its command.
const HOOKS_OFF: &str = "for-loop: WARNING: for-loop's hooks are not running in this session: \
    the prompt hook did not handle this command, and while the hooks are off no stop is judged, so \
    a loop does not hold the agent to its check. Check: `disableAllHooks` in ~/.claude/settings.json, \
    .claude/settings.json and .claude/settings.local.json (and managed settings); that the for-loop \
    plugin is enabled and its hooks are listed in /hooks; that `loop-hook --version` runs. Tell the \
    user this warning first, in full, and do not work on a loop's task until they answer.";

/// The prompt hook's answer in the shape `userPromptSubmitted` reads (1.0.44 and newer):
/// `{"handled":true,"responseContent":R}` shows R to the user and sends nothing to the model;
/// `{"additionalContext":C}` sends the prompt on with C beside it (1.0.65 and newer), which is
/// how the model learns the loop a start began. The CLI has no line for the user alone, so a
/// `system_message` is not printed.
fn copilot_answer(response: &PromptResponse) -> String {
    match (&response.block, &response.context) {
        (Some(shown), _) => {
            crate::host::object_line([("handled", json!(true)), ("responseContent", json!(shown))])
        }
        (None, Some(context)) => crate::host::object_line([("additionalContext", json!(context))]),
        (None, None) => "{}".to_string(),
    }
}

/// The prompt hook's answer in the shape opencode's plugin reads: `prompt` takes the place of
/// the command's text, and goes to the model, since a command cannot skip its turn (throwing
/// from `command.execute.before` fails the whole request); `message` is shown to the user. What
/// the hook answered itself is sent for the model to repeat, word for word.
fn opencode_answer(response: &PromptResponse) -> String {
    let mut pairs = Vec::new();
    match (&response.block, &response.context) {
        (Some(shown), _) => pairs.push(("prompt", json!(format!("{RELAY}\n\n{shown}")))),
        (None, Some(context)) => pairs.push(("prompt", json!(context))),
        (None, None) => {}
    }
    if let Some(message) = response.system_message.as_ref().or(response.block.as_ref()) {
        pairs.push(("message", json!(message)));
    }
    crate::host::object_line(pairs)
}

/// What the model is told when the prompt hook answered the user's command itself.
const RELAY: &str = "for-loop carried out the user's command itself; there is no task in it for you. \
    Reply to the user with the text below, exactly as it is, and nothing else; run no tools.";

#[cfg(test)]
mod tests {
    use super::*;

    fn env(home: &Path) -> Environment {
        Environment::new(
            [("HOME".to_string(), home.display().to_string())],
            home.to_path_buf(),
            "2026-11-22T03:00:00Z".parse().unwrap(),
        )
    }

    fn event(session: &str, prompt: &str, cwd: &Path, transcript: Option<&Path>) -> Map<String, Value> {
        let value = json!({
            "session_id": session,
            "transcript_path": transcript,
            "cwd": cwd,
            "prompt_id": "p-1",
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        });
        value.as_object().unwrap().clone()
    }

    /// A loop started by the user's typed `prompt`, whose transcript shows that prompt, as
    /// Claude Code's does; returns the transcript.
    fn started(env: &Environment, dir: &Path, prompt: &str) -> std::path::PathBuf {
        let transcript = dir.join("t.jsonl");
        std::fs::write(&transcript, format!("{}\n", typed(prompt, "2026-11-22T03:00:00Z"))).unwrap();
        let response = respond(env, Host::ClaudeCode, &event("s", prompt, dir, Some(&transcript)));
        assert_eq!(response.block, None, "{response:?}");
        transcript
    }

    /// The host's record of a prompt the user sent.
    fn typed(prompt: &str, time: &str) -> Value {
        json!({"type": "user", "timestamp": time, "message": {"role": "user", "content": prompt}})
    }

    fn append(path: &Path, records: &[Value]) {
        let mut text = std::fs::read_to_string(path).unwrap_or_default();
        for record in records {
            text.push_str(&format!("{record}\n"));
        }
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn copilot_prompt_answers_are_handled_or_context() {
        let shown = PromptResponse { block: Some("status".into()), ..PromptResponse::default() };
        assert_eq!(copilot_answer(&shown), r#"{"handled":true,"responseContent":"status"}"#);
        let started = PromptResponse {
            system_message: Some("for the user".into()),
            context: Some("for-loop: started".into()),
            ..PromptResponse::default()
        };
        assert_eq!(copilot_answer(&started), r#"{"additionalContext":"for-loop: started"}"#);
        assert_eq!(copilot_answer(&PromptResponse::default()), "{}");
    }

    #[test]
    fn opencode_answers_replace_the_command() {
        let shown = PromptResponse { block: Some("status".into()), ..PromptResponse::default() };
        let answer: Value = serde_json::from_str(&opencode_answer(&shown)).unwrap();
        assert!(answer["prompt"].as_str().unwrap().starts_with(RELAY), "{answer}");
        assert!(answer["prompt"].as_str().unwrap().ends_with("\n\nstatus"), "{answer}");
        assert_eq!(answer["message"], "status");
        let started = PromptResponse {
            system_message: Some("for the user".into()),
            context: Some("for-loop: started".into()),
            ..PromptResponse::default()
        };
        assert_eq!(opencode_answer(&started), r#"{"message":"for the user","prompt":"for-loop: started"}"#);
        assert_eq!(opencode_answer(&PromptResponse::default()), "{}");
    }

    fn opencode_command(session: &str, command: &str, arguments: &str, dir: &Path) -> Map<String, Value> {
        let value = json!({
            "opencode_hook": "command.execute.before",
            "directory": dir,
            "input": {"command": command, "sessionID": session, "arguments": arguments},
            "output": {"parts": [{"type": "text", "text": "the command file's text"}]},
        });
        value.as_object().unwrap().clone()
    }

    #[test]
    fn an_opencode_command_is_carried_out_for_its_session_and_directory() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let env = env(&home);
        let started = respond(
            &env,
            Host::Opencode,
            &opencode_command("ses_1", "for-loop", "fix --verify false", &project),
        );
        assert_eq!(started.block, None, "{started:?}");
        assert!(started.context.unwrap().contains("Task:\nfix\n"));
        let status = respond(&env, Host::Opencode, &opencode_command("ses_1", "loop-status", "", &project));
        assert!(status.block.unwrap().contains("is active, iteration"));
        let state = std::fs::read_to_string(Store::locate(&env).unwrap().paths("ses_1").state).unwrap();
        assert!(state.contains(&project.display().to_string()), "{state}");
        // Another of the user's commands, another host's prompt event: nothing to do.
        assert_eq!(
            respond(&env, Host::Opencode, &opencode_command("ses_1", "init", "", &project)),
            PromptResponse::default()
        );
        assert_eq!(
            respond(&env, Host::Opencode, &event("ses_1", "/cancel-loop", &project, None)),
            PromptResponse::default()
        );
        assert_eq!(
            respond(&env, Host::ClaudeCode, &opencode_command("ses_1", "cancel-loop", "", &project)),
            PromptResponse::default()
        );
        let cancelled =
            respond(&env, Host::Opencode, &opencode_command("ses_1", "cancel-loop", "", &project));
        assert!(cancelled.block.unwrap().contains("cancelled by the user"));
    }

    #[test]
    fn a_typed_start_starts_the_loop_and_lets_the_prompt_through() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let response =
            respond(&env, Host::ClaudeCode, &event("s", "/for-loop fix --verify false", dir.path(), None));
        assert_eq!(response.block, None);
        assert!(response.system_message.unwrap().contains("loop started"));
        let shown = shown(&env, Some("s"), "for-loop");
        assert_eq!(shown.code, Code::Success);
        assert!(shown.stdout.contains("Task:\nfix\n"), "{}", shown.stdout);
        // A second start is refused to the user directly, and the model never sees it.
        let again = respond(&env, Host::ClaudeCode, &event("s", "/for-loop other", dir.path(), None));
        assert!(again.block.unwrap().contains("already has a loop"));
    }

    /// A turn the host ended on an error had no Stop to judge it: the next prompt tells what
    /// ended it, never that the Stop hook did not run.
    #[test]
    fn a_turn_that_ended_on_an_error_is_told_as_such_not_as_unjudged() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop t --verify false");
        let reply = json!({"type": "assistant", "timestamp": "2026-11-22T03:00:30Z",
            "message": {"content": [{"type": "text", "text": "Prompt is too long"}]}});
        append(&transcript, &[reply]);
        let mut failed = env.clone();
        failed.now = "2026-11-22T03:00:31Z".parse().unwrap();
        let failure = json!({"session_id": "s", "hook_event_name": "StopFailure", "error": "invalid_request",
            "last_assistant_message": "Prompt is too long"});
        crate::hook::stop_hook::run(&failed, Host::ClaudeCode, failure.to_string().as_bytes());
        let mut later = env.clone();
        later.now = "2026-11-22T03:01:00Z".parse().unwrap();
        let told = respond(&later, Host::ClaudeCode, &event("s", "go on", dir.path(), Some(&transcript)));
        let message = told.system_message.unwrap_or_default();
        assert!(message.contains("outgrew the model's context window"), "{message}");
        assert!(!message.contains("without being judged"), "{message}");
    }

    /// The ledger's reasons for session `s`, in order.
    fn reasons(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join(".local/state/for-loop/sessions/s/ledger.jsonl"))
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap()["reason"].as_str().unwrap().to_string())
            .collect()
    }

    /// Claude Code's record of the API error that ended a turn, at `time`.
    fn api_error(time: &str, text: &str, error: &str) -> Value {
        json!({"type": "assistant", "timestamp": time, "isApiErrorMessage": true, "error": error,
            "message": {"model": "<synthetic>", "content": [{"type": "text", "text": text}]}})
    }

    /// A loop of session `s` whose turn at 03:00:30 ended on the API error `said` (`error`), as
    /// the transcript records it: the store's directory, the environment and the transcript.
    fn ended_on(said: &str, error: &str) -> (tempfile::TempDir, Environment, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop t --verify false");
        append(&transcript, &[api_error("2026-11-22T03:00:30Z", said, error)]);
        (dir, env, transcript)
    }

    /// The user's "go on" at 03:01:00: what they are told.
    fn go_on(env: &Environment, dir: &Path, transcript: &Path) -> String {
        let mut later = env.clone();
        later.now = "2026-11-22T03:01:00Z".parse().unwrap();
        let told = respond(&later, Host::ClaudeCode, &event("s", "go on", dir, Some(transcript)));
        told.system_message.unwrap_or_default()
    }

    fn state_of(env: &Environment) -> LoopState {
        crate::store::custody::trusted_state(&Store::locate(env).unwrap().paths("s")).unwrap().unwrap()
    }

    /// The host ended the turn on an error and its report never reached the hook (Claude Code's
    /// `-p` sends its hooks SIGTERM as it exits): the next prompt finds the error in the
    /// transcript, records it as the report would have, and tells it, once.
    #[test]
    fn a_failed_turn_whose_report_never_came_is_recorded_and_told_at_the_next_prompt() {
        let (dir, env, transcript) = ended_on("Prompt is too long", "invalid_request");
        let message = go_on(&env, dir.path(), &transcript);
        assert!(message.contains("outgrew the model's context window"), "{message}");
        assert!(message.contains("No iteration was used"), "{message}");
        assert!(!message.contains("without being judged"), "{message}");
        assert_eq!(reasons(dir.path()).last().map(String::as_str), Some("context_exhausted"));
        let state = state_of(&env);
        assert_eq!(state.meta.failed_turn.as_ref().map(|f| f.kind), Some(ReasonCode::ContextExhausted));
        assert_eq!(state.meta.iteration, 1);
        assert!(state.is_active());
        // Recorded once: the next prompt finds the record.
        assert_eq!(go_on(&env, dir.path(), &transcript), "");
        assert_eq!(reasons(dir.path()).iter().filter(|r| *r == "context_exhausted").count(), 1);
    }

    /// A usage limit found that way is recorded and told, and parks nothing: the transcript is
    /// the agent's to write, and a loop parked on a limit lets the agent stop. A limit forged
    /// there to last a year leaves the loop running.
    #[test]
    fn a_usage_limit_found_only_in_the_transcript_is_told_and_never_parks_the_loop() {
        // 2027-11-22T04:00:00Z
        let (dir, env, transcript) = ended_on("Claude AI usage limit reached|1826856000", "rate_limit");
        let message = go_on(&env, dir.path(), &transcript);
        assert!(message.contains("ended on a usage limit"), "{message}");
        assert!(message.contains("the account is limited until 2027-11-22 04:00 UTC"), "{message}");
        assert!(message.contains("so the loop was not parked: it is still on"), "{message}");
        assert_eq!(reasons(dir.path()).last().map(String::as_str), Some("agent_limited"));
        let state = state_of(&env);
        assert!(state.is_active(), "{:?}", state.meta);
        assert!(!crate::hook::turn_failure::parked_on_limit(Host::ClaudeCode, &state));
    }

    /// A report that did arrive is not recorded a second time from the transcript.
    #[test]
    fn a_failed_turn_the_hook_recorded_is_not_recorded_again_at_the_next_prompt() {
        let (dir, env, transcript) = ended_on("Prompt is too long", "invalid_request");
        let mut failed = env.clone();
        failed.now = "2026-11-22T03:00:31Z".parse().unwrap();
        let failure = json!({"session_id": "s", "hook_event_name": "StopFailure", "error": "invalid_request",
            "last_assistant_message": "Prompt is too long"});
        crate::hook::stop_hook::run(&failed, Host::ClaudeCode, failure.to_string().as_bytes());
        let message = go_on(&env, dir.path(), &transcript);
        assert_eq!(message.matches("outgrew the model's context window").count(), 1, "{message}");
        assert_eq!(reasons(dir.path()).iter().filter(|r| *r == "context_exhausted").count(), 1);
    }

    #[test]
    fn a_turn_of_a_running_loop_that_no_stop_judged_is_told_once_and_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop t --verify false");
        let reply = json!({"type": "assistant", "timestamp": "2026-11-22T03:00:30Z",
            "message": {"content": [{"type": "text", "text": "done"}]}});
        append(&transcript, &[reply]);
        let mut later = env.clone();
        later.now = "2026-11-22T03:01:00Z".parse().unwrap();
        let told = respond(&later, Host::ClaudeCode, &event("s", "hello", dir.path(), Some(&transcript)));
        let message = told.system_message.unwrap_or_default();
        assert!(message.contains("last turn ended without being judged"), "{message}");
        let ledger =
            std::fs::read_to_string(dir.path().join(".local/state/for-loop/sessions/s/ledger.jsonl"))
                .unwrap();
        assert!(ledger.lines().last().unwrap().contains("\"reason\":\"stop_not_judged\""), "{ledger}");
        assert!(ledger.lines().next().unwrap().contains("\"origin\":\"user\""), "{ledger}");
        // Told once: the record now stands after that turn.
        let again = respond(&later, Host::ClaudeCode, &event("s", "hello", dir.path(), Some(&transcript)));
        assert_eq!(again.system_message, None);
        // A turn a stop judged is not told.
        let judged = "2026-11-22T03:00:00Z".parse().unwrap();
        let state =
            crate::store::custody::trusted_state(&Store::locate(&env).unwrap().paths("s")).unwrap().unwrap();
        let line = LedgerEntry::new(&state, judged, LedgerDecision::Block, ReasonCode::VerifyFailed);
        let dir2 = tempfile::tempdir().unwrap();
        let mut env2 = crate::hook::prompt_hook::tests::env(dir2.path());
        env2.now = judged;
        respond(
            &env2,
            Host::ClaudeCode,
            &event("s", "/for-loop t --verify false", dir2.path(), Some(&transcript)),
        );
        let paths2 = Store::locate(&env2).unwrap().paths("s");
        let judged_line = LedgerEntry {
            loop_id: crate::store::custody::trusted_state(&paths2).unwrap().unwrap().meta.loop_id,
            time: "2026-11-22T03:00:40Z".parse().unwrap(),
            ..line
        };
        let noted = crate::store::transaction::Transaction::lock(&paths2).unwrap().note_or_keep(&judged_line);
        assert_eq!(noted, crate::store::transaction::Noted::Ledger);
        let mut later2 = env2.clone();
        later2.now = "2026-11-22T03:01:00Z".parse().unwrap();
        let quiet = respond(&later2, Host::ClaudeCode, &event("s", "hello", dir2.path(), Some(&transcript)));
        assert_eq!(quiet.system_message, None);
    }

    #[test]
    fn cancel_and_status_are_answered_to_the_user_alone() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop:for-loop t --verify false");
        let status = respond(&env, Host::ClaudeCode, &event("s", "/loop-status", dir.path(), None));
        assert!(status.block.unwrap().contains("active, iteration 1"));
        let cancel =
            respond(&env, Host::ClaudeCode, &event("s", "/cancel-loop", dir.path(), Some(&transcript)));
        assert!(cancel.block.unwrap().contains("cancelled at iteration 1"));
        let ledger =
            std::fs::read_to_string(dir.path().join(".local/state/for-loop/sessions/s/ledger.jsonl"))
                .unwrap();
        assert!(ledger.contains("\"origin\":\"user\""), "{ledger}");
    }

    /// Qwen Code's `UserPromptSubmit` (0.24.4): `prompt` is the text after a command's
    /// expansion, `submitted_prompt` what the user typed, absent on the CLI's own re-sends.
    fn qwen_event(prompt: &str, typed: Option<&str>, cwd: &Path) -> Map<String, Value> {
        let mut value = json!({
            "session_id": "q-1",
            "transcript_path": cwd.join("chats/q-1.jsonl"),
            "cwd": cwd,
            "hook_event_name": "UserPromptSubmit",
            "timestamp": "2026-11-29T00:40:41.048Z",
            "permission_mode": "yolo",
            "prompt_id": "q-1########0",
            "prompt": prompt,
        });
        if let Some(typed) = typed {
            value["submitted_prompt"] = json!(typed);
        }
        value.as_object().unwrap().clone()
    }

    #[test]
    fn qwen_code_takes_commands_from_what_the_user_typed() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        // The expanded text of the command file is not the command; what was typed is.
        let expanded = "Work on the task for-loop started.";
        let start = respond(
            &env,
            Host::QwenCode,
            &qwen_event(expanded, Some("/for-loop fix --verify false --max-iterations 3"), dir.path()),
        );
        assert_eq!(start.block, None, "{start:?}");
        let context = start.context.clone().unwrap();
        assert!(context.contains("Task:\nfix\n"), "{context}");
        let out: Value = serde_json::from_str(&render(Host::QwenCode, &start)).unwrap();
        assert_eq!(out["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
        assert_eq!(out["hookSpecificOutput"]["additionalContext"], json!(context));
        assert!(out["systemMessage"].as_str().unwrap().contains("loop started"), "{out}");
        assert!(out.get("decision").is_none(), "{out}");
        // A prompt nobody typed (the CLI's re-send after a tool result) is never a command,
        // whatever its text.
        let resent = respond(&env, Host::QwenCode, &qwen_event("/cancel-loop", None, dir.path()));
        assert_eq!(resent, PromptResponse::default());
        let status = respond(&env, Host::QwenCode, &qwen_event("x", Some("/loop-status"), dir.path()));
        assert!(status.block.unwrap().contains("active, iteration 1"));
        let cancel = respond(&env, Host::QwenCode, &qwen_event("x", Some("/cancel-loop"), dir.path()));
        let shown = cancel.block.clone().unwrap();
        assert!(shown.contains("cancelled at iteration 1"), "{shown}");
        let out: Value = serde_json::from_str(&render(Host::QwenCode, &cancel)).unwrap();
        assert_eq!((out["decision"].as_str(), out["reason"].as_str()), (Some("block"), Some(shown.as_str())));
    }

    /// Qwen Code shows the user no message of this hook: what waits to be told is also given to
    /// the agent with the prompt, to pass on. Claude Code shows it, so its agent is not given it.
    #[test]
    fn qwen_code_gives_a_waiting_notice_to_the_agent_to_pass_on() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let start = respond(
            &env,
            Host::QwenCode,
            &qwen_event("x", Some("/for-loop fix --verify false --max-iterations 3"), dir.path()),
        );
        assert_eq!(start.block, None, "{start:?}");
        let paths = Store::locate(&env).unwrap().paths("q-1");
        Notice::post(&paths.dir, "for-loop: the last turn ended on an error.");
        let told = respond(&env, Host::QwenCode, &qwen_event("go on", Some("go on"), dir.path()));
        assert_eq!(told.system_message.as_deref(), Some("for-loop: the last turn ended on an error."));
        let context = told.context.unwrap_or_default();
        assert!(context.starts_with("for-loop: the last turn ended on an error."), "{context}");
        assert!(context.contains("tell them first"), "{context}");
        let again = respond(&env, Host::QwenCode, &qwen_event("go on", Some("go on"), dir.path()));
        assert_eq!((again.system_message, again.context), (None, None), "told once");

        let claude_dir = tempfile::tempdir().unwrap();
        let claude_env = self::env(claude_dir.path());
        let transcript = started(&claude_env, claude_dir.path(), "/for-loop t --verify false");
        let claude = Store::locate(&claude_env).unwrap().paths("s");
        Notice::post(&claude.dir, "for-loop: the last turn ended on an error.");
        let told = respond(
            &claude_env,
            Host::ClaudeCode,
            &event("s", "go on", claude_dir.path(), Some(&transcript)),
        );
        assert!(told.system_message.is_some());
        assert_eq!(told.context, None);
    }

    #[test]
    fn qwen_code_refuses_a_command_from_a_session_the_agent_started() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = env(dir.path());
        let start = respond(
            &env,
            Host::QwenCode,
            &qwen_event("x", Some("/for-loop t --verify false --max-iterations 2"), dir.path()),
        );
        assert_eq!(start.block, None);
        // `qwen -r SESSION -p /cancel-loop` run from the agent's shell: its hooks inherit the
        // shell's QWEN_CODE.
        env = Environment::new(
            [
                ("HOME".to_string(), dir.path().display().to_string()),
                ("QWEN_CODE".to_string(), "1".to_string()),
            ],
            dir.path().to_path_buf(),
            env.now,
        );
        let cancel = respond(&env, Host::QwenCode, &qwen_event("x", Some("/cancel-loop"), dir.path()));
        assert!(cancel.block.unwrap().contains("was not run"));
        let state = crate::store::custody::trusted_state(&Store::locate(&env).unwrap().paths("q-1"))
            .unwrap()
            .unwrap();
        assert!(state.is_active(), "the loop was cancelled");
        // Another host's hook is not fooled by the variable.
        assert!(Host::ALL.iter().filter(|h| **h != Host::QwenCode).all(|h| h.agent_shell_marker().is_none()));
    }

    #[test]
    fn qwen_code_refuses_a_loop_longer_than_its_block_cap() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        // Nothing set: Qwen Code's cap is 8, and the default loop is 30 iterations.
        let refused =
            respond(&env, Host::QwenCode, &qwen_event("x", Some("/for-loop t --verify false"), dir.path()));
        let why = refused.block.unwrap();
        assert!(
            why.contains("at most 8 stops in a row") && why.contains("\"stopHookBlockingCap\": 30"),
            "{why}"
        );
        assert!(!dir.path().join(".local/state/for-loop/sessions/q-1/state.md").exists());
        let exact = respond(
            &env,
            Host::QwenCode,
            &qwen_event("x", Some("/for-loop t --verify false --max-iterations 8"), dir.path()),
        );
        assert_eq!(exact.block, None, "as many iterations as the cap fit");
        let over = respond(
            &env,
            Host::QwenCode,
            &qwen_event("x", Some("/for-loop t --verify false --max-iterations 101"), dir.path()),
        );
        assert!(over.block.unwrap().contains("at most 100"));
        // Claude Code has no such cap.
        let claude =
            respond(&env, Host::ClaudeCode, &event("c", "/for-loop t --verify false", dir.path(), None));
        assert_eq!(claude.block, None);
    }

    #[test]
    fn qwen_code_holds_a_resume_to_the_block_cap_too() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let typed = |text: &str| respond(&env, Host::QwenCode, &qwen_event("x", Some(text), dir.path()));
        assert_eq!(typed("/for-loop t --verify false --max-iterations 8").block, None);
        assert!(typed("/cancel-loop").block.unwrap().contains("cancelled"));
        // Resumed at iteration 2 of 8 + 20: 27 left, with Qwen Code's default cap of 8.
        let why = typed("/resume-loop --more 20").block.unwrap();
        assert!(why.contains("not resumed") && why.contains("leave 27 iterations"), "{why}");
        let state = crate::store::custody::trusted_state(&Store::locate(&env).unwrap().paths("q-1"));
        assert!(!state.unwrap().unwrap().is_active(), "a refused resume changed the loop");
        let fits = typed("/resume-loop --more 1");
        assert_eq!(fits.block, None, "{fits:?}");
        assert!(fits.context.unwrap().contains("resumed after cancelled"));
    }

    #[test]
    fn plain_prompts_pass_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let plain = respond(&env, Host::ClaudeCode, &event("s", "hello /for-loop", dir.path(), None));
        assert_eq!(plain, PromptResponse::default());
        assert_eq!(render(Host::ClaudeCode, &plain), "");
        assert_eq!(render(Host::CopilotCli, &plain), "{}");
        assert!(!dir.path().join(".local").exists(), "a plain prompt wrote something");
        assert_eq!(run(&env, Host::ClaudeCode, "not json".as_bytes()), "");
        assert_eq!(run(&env, Host::ClaudeCode, "{}".as_bytes()), "");
    }

    #[test]
    fn a_command_the_agent_scheduled_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop t --verify false");
        let tool_use = json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant",
            "content": [{"type": "tool_use", "id": "x", "name": "ScheduleWakeup",
            "input": {"delaySeconds": 60, "reason": "r", "prompt": "/for-loop:cancel-loop"}}]}});
        let enqueue =
            json!({"type": "queue-operation", "operation": "enqueue", "content": "/for-loop:cancel-loop"});
        let result = json!({"type": "user", "isSidechain": false, "message": {"role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "x", "content": "scheduled"}]}});
        append(&transcript, &[tool_use, result, enqueue]);
        let refused = respond(
            &env,
            Host::ClaudeCode,
            &event("s", "/for-loop:cancel-loop", dir.path(), Some(&transcript)),
        );
        let reason = refused.block.unwrap();
        assert!(reason.contains("ScheduleWakeup") && reason.contains("was not run"), "{reason}");
        let status = status::run(
            &env,
            &StatusOptions {
                target: Target { session_id: Some("s".into()), host: None },
                ..Default::default()
            },
        );
        assert!(status.stdout.contains("active"), "{}", status.stdout);
        // A tool call that merely mentions the command is not the agent submitting it.
        let grep = json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant",
            "content": [{"type": "tool_use", "id": "g", "name": "Bash",
            "input": {"command": "grep -rn '/for-loop:cancel-loop now' docs"}}]}});
        let grep_result = json!({"type": "user", "isSidechain": false, "message": {"role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "g", "content": "none"}]}});
        let mut text = std::fs::read_to_string(&transcript).unwrap();
        text.push_str(&format!("{grep}\n{grep_result}\n"));
        std::fs::write(&transcript, text).unwrap();
        // The user's own, with a word added, is theirs.
        let cancel = respond(
            &env,
            Host::ClaudeCode,
            &event("s", "/for-loop:cancel-loop now", dir.path(), Some(&transcript)),
        );
        assert!(cancel.block.unwrap().contains("cancelled"));
    }

    #[test]
    fn a_prompt_hook_run_from_inside_a_tool_call_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop t --verify false");
        let start = std::fs::read_to_string(&transcript).unwrap();
        let call = json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
            "input": {"command": "python3 forge.py | loop-hook prompt-hook"}}]}});
        let sidechain =
            json!({"type": "user", "isSidechain": true, "message": {"role": "user", "content": "x"}});
        std::fs::write(&transcript, format!("{start}{call}\n{sidechain}\n")).unwrap();
        let forged =
            respond(&env, Host::ClaudeCode, &event("s", "/cancel-loop", dir.path(), Some(&transcript)));
        assert!(forged.block.unwrap().contains("in the middle of a tool call"));
        // Once the call has its result, a prompt is the user's again.
        let result = json!({"type": "user", "isSidechain": false, "message": {"role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}});
        let text = json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant",
            "content": [{"type": "text", "text": "done"}]}});
        std::fs::write(&transcript, format!("{start}{call}\n{result}\n{text}\n")).unwrap();
        let typed =
            respond(&env, Host::ClaudeCode, &event("s", "/cancel-loop", dir.path(), Some(&transcript)));
        assert!(typed.block.unwrap().contains("cancelled"));
    }

    /// The hole a forged event opened: the agent runs the prompt hook itself, naming a
    /// transcript of its choice. The loop's own transcript is read instead; the cancel goes
    /// through (nothing in that transcript is pending), but the host never records the user
    /// sending it, so the next hook run undoes it and says so.
    #[test]
    fn a_cancel_the_user_never_sent_is_undone_at_the_next_hook_run() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop t --verify false");
        let mut later = env.clone();
        later.now = "2026-11-22T03:05:00Z".parse().unwrap();
        let forged = event("s", "/cancel-loop", dir.path(), Some(Path::new("/nonexistent")));
        let cancelled = respond(&later, Host::ClaudeCode, &forged);
        assert!(cancelled.block.unwrap().contains("cancelled"));
        let paths = Store::locate(&env).unwrap().paths("s");
        let state = crate::store::custody::trusted_state(&paths).unwrap().unwrap();
        assert!(!state.is_active() && state.meta.awaiting.is_some());
        let mut next = later.clone();
        next.now = "2026-11-22T03:06:00Z".parse().unwrap();
        let told = respond(&next, Host::ClaudeCode, &event("s", "hello", dir.path(), Some(&transcript)));
        let message = told.system_message.unwrap_or_default();
        assert!(
            message.contains("`/cancel-loop` at 03:05:00 UTC did not come from the user's prompt"),
            "{message}"
        );
        assert!(message.contains("the loop is on again"), "{message}");
        let state = crate::store::custody::trusted_state(&paths).unwrap().unwrap();
        assert!(state.is_active() && state.meta.awaiting.is_none(), "{state:?}");
        let ledger = std::fs::read_to_string(&paths.ledger).unwrap();
        let last = ledger.lines().last().unwrap();
        assert!(
            last.contains("\"reason\":\"command_unconfirmed\"") && last.contains("\"origin\":\"agent\""),
            "{last}"
        );
    }

    #[test]
    fn a_cancel_the_user_typed_is_confirmed_and_stays() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop t --verify false");
        let mut later = env.clone();
        later.now = "2026-11-22T03:05:00Z".parse().unwrap();
        respond(
            &later,
            Host::ClaudeCode,
            &event("s", "/for-loop:cancel-loop", dir.path(), Some(&transcript)),
        );
        let blocked = json!({"type": "system", "subtype": "informational", "timestamp": "2026-11-22T03:05:00.300Z",
            "content": "UserPromptSubmit operation blocked by hook:\nfor-loop: cancelled\n\nOriginal prompt: /for-loop:cancel-loop"});
        append(&transcript, &[blocked]);
        let quiet = respond(&later, Host::ClaudeCode, &event("s", "hello", dir.path(), Some(&transcript)));
        assert_eq!(quiet.system_message, None);
        let paths = Store::locate(&env).unwrap().paths("s");
        let state = crate::store::custody::trusted_state(&paths).unwrap().unwrap();
        assert!(!state.is_active() && state.meta.awaiting.is_none(), "{state:?}");
        let ledger = std::fs::read_to_string(&paths.ledger).unwrap();
        assert!(ledger.lines().last().unwrap().contains("command_confirmed"), "{ledger}");
    }

    #[test]
    fn without_the_loops_transcript_a_change_is_refused_with_the_terminal_command() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let transcript = started(&env, dir.path(), "/for-loop t --verify false");
        std::fs::remove_file(&transcript).unwrap();
        let refused =
            respond(&env, Host::ClaudeCode, &event("s", "/cancel-loop", dir.path(), Some(Path::new("/x"))));
        let reason = refused.block.unwrap();
        assert!(
            reason.contains("was not run") && reason.contains("loop-hook cancel --session s"),
            "{reason}"
        );
        // The start could not be confirmed either, and is kept: the user is told.
        let message = refused.system_message.unwrap_or_default();
        assert!(message.contains("could not be confirmed; the loop is kept"), "{message}");
        let state =
            crate::store::custody::trusted_state(&Store::locate(&env).unwrap().paths("s")).unwrap().unwrap();
        assert!(state.is_active());
    }

    #[test]
    fn nothing_handled_means_shown_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let shown = shown(&env(dir.path()), Some("s"), "for-loop");
        assert_eq!(shown.code, Code::Refused);
        assert!(shown.stdout.contains("hooks are not running in this session"), "{}", shown.stdout);
    }
}
