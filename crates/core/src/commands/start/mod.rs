//! `loop-hook start`: arm a loop for a session from the raw `/for-loop` text.

pub(crate) mod metric;
pub(crate) mod plan;

use std::path::{Path, PathBuf};

use crate::checks::Oracle;
use crate::checks::Streaks;
use crate::checks::TestRatchet;
use crate::checks::Tier;
use crate::checks::oracle;
use crate::commands::request::{LoopRequest, RequestError};
use crate::commands::session;
use crate::host::Host;
use crate::provenance::claim;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::state::{LoopState, Meta, SCHEMA_VERSION, Settings, Status};
use crate::store::Transaction;
use crate::store::{LoopPaths, Store};
use crate::support::Environment;
use crate::support::Fnv1a;
use crate::support::Outcome;
use crate::verdict::message::criterion;
use crate::verdict::{Gate, decision::gate};
use crate::worktree::WorkTree;

/// `/for-loop --help`: the usage, with every flag from the flag table.
pub(crate) fn usage() -> String {
    format!(
        "Usage: /for-loop TASK [flags]\n\n  \
         TASK  what the agent should do: any text, quoted or not (quote a flag's value that has spaces)\n\n\
         {}\n\n\
         Example: /for-loop \"make the login tests pass\" --verify \"cargo test login\" --max-iterations 20",
        crate::commands::request::flag_spec::flag_lines()
    )
}

/// Who is starting the loop, and where.
#[derive(Debug, Clone, Default)]
pub(crate) struct StartOptions {
    pub(crate) session_id: Option<String>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) host: Option<Host>,
    /// Who asked: written on the loop's first ledger line, like every other mutation's.
    pub(crate) origin: Option<crate::host::Origin>,
    /// The host's transcript, from the prompt hook's event (the user's own prompt).
    pub(crate) transcript: Option<PathBuf>,
    /// Set by the prompt hook: the start waits for the transcript to show the user's prompt.
    pub(crate) awaiting: Option<crate::state::Awaiting>,
    /// Set by `loop-hook run`: the tier of the run's own sandbox, in place of the host's (its
    /// agent never runs under the host's sandbox settings). Recorded in the state, and what
    /// `--require-strict` and `FOR_LOOP_REQUIRE_STRICT` are held to.
    pub(crate) tier: Option<Tier>,
}

/// Starts the loop the raw `/for-loop` text asks for.
pub(crate) fn run(env: &Environment, options: &StartOptions, raw: &str) -> Outcome {
    run_request(env, options, LoopRequest::parse(raw))
}

/// Starts the loop `request` is, as parsed from `/for-loop`'s text or a command line; a request
/// that did not parse is refused with why, and the usage.
pub(crate) fn run_request(
    env: &Environment,
    options: &StartOptions,
    request: Result<LoopRequest, RequestError>,
) -> Outcome {
    let request = match request {
        Ok(request) => request,
        Err(RequestError::HelpWanted) => return Outcome::ok(usage()),
        Err(e) => return Outcome::refused(format!("for-loop: not started: {e}\n\n{}", usage())),
    };
    let cwd = options.cwd.clone().unwrap_or_else(|| env.cwd.clone());
    let host = options.host.unwrap_or_default();
    let plan = match startable(env, &request, &cwd, host) {
        Ok(plan) => plan,
        Err(refusal) => return refusal,
    };
    let store = match Store::locate(env) {
        Ok(store) => store,
        Err(e) => return Outcome::refused(format!("for-loop: not started: {e}")),
    };
    let tier =
        options.tier.clone().unwrap_or_else(|| crate::checks::sandbox::tier(env, host, &cwd, store.root()));
    if let Some(refusal) = strict_required(env, &request, &tier) {
        return refusal;
    }
    let (paths, session_id, claim_token) = match place(env, options, &store, host) {
        Ok(place) => place,
        Err(refusal) => return refusal,
    };
    if let Err(e) = paths.make_dir() {
        return Outcome::refused(format!(
            "for-loop: not started: could not create {}: {e}",
            paths.dir.display()
        ));
    }
    let transaction = match Transaction::lock(&paths) {
        Ok(transaction) => transaction,
        Err(e) => return Outcome::refused(format!("for-loop: not started: {e}")),
    };
    if let Err(refusal) = clear_the_way(env, &transaction, session_id) {
        return refusal;
    }
    let mut state = new_state(env, options, &request, session_id, &cwd, &tier, plan.as_ref());
    let mut lessons = Vec::new();
    if let Some(metric) = &request.metric {
        match crate::commands::start::metric::baseline(env, &store, &mut state, metric) {
            Ok(found) => lessons = found,
            Err(why) => {
                if claim_token.is_some() {
                    let _ = transaction.remove_loop();
                }
                return Outcome::refused(format!("for-loop: not started: {why}"));
            }
        }
    }
    // Originals of the oracle files, so a changed one can be restored outside git too.
    let _ = transaction.save_oracle_originals(&state.meta.oracle, &cwd);
    let started = LedgerEntry {
        origin: options.origin,
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Start, ReasonCode::Started)
    };
    let mut lines = vec![started];
    lines.extend(crate::commands::start::metric::baseline_line(&state, env.now));
    if let Err(e) = transaction.commit(&state, &lines) {
        if claim_token.is_some() {
            // Nobody else knows this directory; leaving it would only cost stops a search.
            let _ = transaction.remove_loop();
        }
        return Outcome::refused(format!("for-loop: not started: {e}"));
    }
    let mut shown = banner(&state, &paths, claim_token.as_deref(), env, &tier);
    if let Some(words) = crate::commands::start::plan::banner(&state) {
        shown = shown.replacen("\nWork on the task now.", &format!("{words}\nWork on the task now."), 1);
    }
    if let Some(words) = crate::commands::start::metric::banner(&state, &lessons) {
        shown = shown.replacen("\nWork on the task now.", &format!("{words}\nWork on the task now."), 1);
    }
    Outcome::ok(shown)
}

/// The plan `request` names, read, once nothing refuses the request in `cwd` on `host`: what
/// the host cannot do, its cap of blocks, a plan that cannot be read, a scope without git.
fn startable(
    env: &Environment,
    request: &LoopRequest,
    cwd: &Path,
    host: Host,
) -> Result<Option<crate::checks::PlanSettings>, Outcome> {
    if let Some(refusal) = unsupported(request, cwd, host) {
        return Err(refusal);
    }
    if let Some(refusal) = over_the_block_cap(env, request, cwd, host) {
        return Err(refusal);
    }
    let plan = crate::commands::start::plan::read(request, cwd)
        .map_err(|why| Outcome::refused(format!("for-loop: not started: {why}")))?;
    if let Some(refusal) = scope_without_git(request, plan.as_ref(), cwd) {
        return Err(refusal);
    }
    Ok(plan)
}

/// Why `request` cannot be run in `cwd` on `host`, if it cannot.
fn unsupported(request: &LoopRequest, cwd: &Path, host: Host) -> Option<Outcome> {
    if cwd.to_str().is_none() {
        return Some(Outcome::refused(format!(
            "for-loop: not started: the directory {} has a name that is not UTF-8 text, and the \
             loop's state keeps it as text. Start the loop in a directory whose path is UTF-8 \
             (rename it, or pass --cwd through a symlink with a UTF-8 name).",
            cwd.display()
        )));
    }
    if request.metric.is_some() && !WorkTree::open(cwd).is_git() {
        return Some(Outcome::refused(format!(
            "for-loop: not started: metric mode keeps and rolls back changes with git checkpoints, and {} is \
             not in a git repository: run `git init` there first.",
            cwd.display()
        )));
    }
    if request.completion_promise.is_some() && !host.sends_last_message() {
        return Some(Outcome::refused(format!(
            "for-loop: not started: --completion-promise needs the agent's last message, which {} \
             does not give hooks. Use --verify CMD to decide when the task is done.",
            host.name()
        )));
    }
    if request.max_tokens.is_some() && !host.transcript_records_usage() {
        return Some(Outcome::refused(format!(
            "for-loop: not started: --max-tokens needs the model usage the host's transcript records, \
             and for-loop reads it only from Claude Code's transcripts, not {}'s. Use --max-time or \
             --max-iterations to bound the loop.",
            host.name()
        )));
    }
    None
}

/// The refusal of a loop longer than the host lets a Stop hook hold one prompt (Qwen Code's cap
/// of blocks in a row): the host would end it early, with no verdict, so `--max-iterations`
/// would not mean what it says. The loop needs one stop per iteration, the last one let through.
fn over_the_block_cap(env: &Environment, request: &LoopRequest, cwd: &Path, host: Host) -> Option<Outcome> {
    let cap = host.settable_block_cap(env, cwd)?;
    let wanted = request.max_iterations;
    if wanted <= cap {
        return None;
    }
    let most = crate::host::QWEN_MAX_BLOCK_CAP;
    let fix = if wanted <= most {
        format!(
            "Set \"{}\": {wanted} (or up to {most}) in ~/.qwen/settings.json and restart qwen, or start \
             with --max-iterations {cap} or fewer.",
            crate::host::QWEN_BLOCK_CAP_SETTING
        )
    } else {
        format!("Qwen Code takes at most {most}: start with --max-iterations {most} or fewer.")
    };
    Some(Outcome::refused(format!(
        "for-loop: not started: Qwen Code lets a Stop hook block at most {cap} stops in a row (its \
         {} setting, or {}), then ends the turn, so a loop of --max-iterations {wanted} would be \
         cut short after {cap}. {fix}",
        crate::host::QWEN_BLOCK_CAP_SETTING,
        crate::host::QWEN_BLOCK_CAP_VAR,
    )))
}

/// The refusal of a scope (`--scope`, a story's `scope:`) outside git: which files changed since
/// the start is read from git's trees, and a scope that cannot be checked would hold nothing.
fn scope_without_git(
    request: &LoopRequest,
    plan: Option<&crate::checks::PlanSettings>,
    cwd: &Path,
) -> Option<Outcome> {
    let story_scope = plan.is_some_and(|p| p.stories.iter().any(|s| !s.scope.is_empty()));
    if (request.scope.is_empty() && !story_scope) || WorkTree::open(cwd).is_git() {
        return None;
    }
    Some(Outcome::refused(format!(
        "for-loop: not started: a scope is checked against the files git sees changed since the start, \
         and {} is not in a git repository: run `git init` there first, or drop --scope (and the \
         stories' `scope:` lines).",
        cwd.display()
    )))
}

/// The refusal when strict mode is required (`--require-strict` or `FOR_LOOP_REQUIRE_STRICT`)
/// and the loop would run in another tier.
fn strict_required(env: &Environment, request: &LoopRequest, tier: &Tier) -> Option<Outcome> {
    let required = request.require_strict || env.var("FOR_LOOP_REQUIRE_STRICT").is_some_and(|v| v != "0");
    if !required || tier.strict {
        return None;
    }
    Some(Outcome::refused(format!(
        "for-loop: not started: strict mode is required ({}), but this loop would run in the {}. \
         See the README's threat model for the settings that turn strict mode on.",
        if request.require_strict { "--require-strict" } else { "FOR_LOOP_REQUIRE_STRICT" },
        tier.line()
    )))
}

/// Where the loop is kept: under its session id, or, on a host that does not tell commands the
/// session, under a claim token until its conversation claims it. Returns the loop's files, its
/// session id (empty until claimed) and the claim token.
fn place<'a>(
    env: &'a Environment,
    options: &'a StartOptions,
    store: &Store,
    host: Host,
) -> Result<(LoopPaths, &'a str, Option<String>), Outcome> {
    match session::session_id(env, options.session_id.as_deref()) {
        Some(id) => Ok((store.paths(id), id, None)),
        None if !host.tells_commands_the_session() => {
            claim::sweep(store, env.now);
            let token = claim::new_token().map_err(|e| {
                Outcome::refused(format!(
                    "for-loop: not started: no random bytes for the loop's claim token ({e}). \
                     Start it with --session ID (the conversation id) instead."
                ))
            })?;
            Ok((store.pending_paths(&claim::pending_key(&token)), "", Some(token)))
        }
        None => Err(Outcome::refused(
            "for-loop: not started: no session id. The host must pass one (Claude Code 2.1.9 or \
             newer substitutes ${CLAUDE_SESSION_ID}); from a shell, use --session ID.",
        )),
    }
}

/// Makes room for the new loop: a loop still running refuses it, an ended one is archived.
fn clear_the_way(env: &Environment, transaction: &Transaction<'_>, session_id: &str) -> Result<(), Outcome> {
    let paths = transaction.paths();
    match paths.load() {
        Ok(Some(existing)) if gate(&existing, session_id) == Gate::Judge => Err(Outcome::refused(format!(
            "for-loop: not started: this session already has a loop at iteration {} of {}. \
             Cancel it first ({}), or let it finish.",
            existing.meta.iteration,
            existing.meta.settings.max_iterations,
            existing.meta.host.commands().cancel
        ))),
        Ok(Some(existing)) => transaction.archive(&existing.meta.loop_id).map(|_| ()).map_err(|e| {
            Outcome::refused(format!("for-loop: not started: could not archive the last loop: {e}"))
        }),
        Ok(None) => Ok(()),
        // An unreadable old state is kept for inspection, out of the new loop's way.
        Err(_) => transaction.set_unreadable_state_aside(env.now).map(|_| ()).map_err(|e| {
            Outcome::refused(format!("for-loop: not started: could not move the unreadable state aside: {e}"))
        }),
    }
}

/// The new loop's state at its first iteration.
fn new_state(
    env: &Environment,
    options: &StartOptions,
    request: &LoopRequest,
    session_id: &str,
    cwd: &Path,
    tier: &Tier,
    plan: Option<&crate::checks::PlanSettings>,
) -> LoopState {
    let (plan_checks, plan_files) = crate::commands::start::plan::oracle_parts(plan);
    let judged: Vec<&str> = judges(request).into_iter().chain(plan_checks).collect();
    let protect: Vec<String> = request.protect.iter().cloned().chain(plan_files).collect();
    LoopState {
        meta: Meta {
            schema: SCHEMA_VERSION,
            loop_id: loop_id(env, session_id),
            session_id: session_id.to_string(),
            host: options.host.unwrap_or_default(),
            cwd: cwd.to_path_buf(),
            settings: Settings {
                verify: request.verify.clone(),
                completion_promise: request.completion_promise.clone(),
                max_iterations: request.max_iterations,
                verify_timeout_secs: request.verify_timeout_secs,
                max_same_failures: request.max_same_failures,
                escalation: request.escalation.clone(),
                max_time_secs: request.max_time_secs,
                checkpoint: request.checkpoint,
                max_tokens: request.max_tokens,
                notify: request.notify.clone(),
                metric: request.metric.clone(),
                allow_test_edits: request.allow_test_edits,
                review: request.review.clone(),
                plan: plan.cloned(),
                scope: request.scope.clone(),
                on_limit: request.on_limit,
                background_wait_secs: request.background_wait_secs,
                feedback_tokens: request.feedback_tokens,
            },
            iteration: 1,
            status: Status::Active,
            outcome: None,
            started_at: env.now,
            updated_at: env.now,
            verify_total_ms: 0,
            last_verify: None,
            tests: TestRatchet::new(request.allow_test_edits),
            oracle: crate::commands::start::plan::with_plan(
                Oracle::capture_commands(cwd, &judged, &protect, !request.allow_test_edits),
                cwd,
                plan,
            ),
            streaks: Streaks::default(),
            failing: None,
            baseline_tree: WorkTree::open(cwd).tree_id().ok(),
            last_blocked: false,
            harness_overrides: 0,
            receipt: None,
            usage: None,
            metric: None,
            transcript: options.transcript.clone(),
            awaiting: options.awaiting.clone(),
            plan: plan.map(crate::checks::PlanProgress::start),
            tier: Some(tier.line()),
            last_reply: None,
            forged_stops: Some(0),
            handoff: None,
            rhythm: crate::state::Rhythm::default(),
            // What decides whether the hooks run at all, for the guard to compare with.
            host_config: (options.host.unwrap_or_default().hook_settings_can_be_watched())
                .then(|| options.host.unwrap_or_default().config_snapshot(env, cwd)),
            failed_turn: None,
        },
        task: request.task.clone(),
    }
}

/// The commands whose files are the oracle: verify, a metric loop's metric and guard, and the
/// reviewer's command (a built-in reviewer has no files in the project).
fn judges(request: &LoopRequest) -> Vec<&str> {
    let metric = request.metric.as_ref();
    let review = request.review.as_ref().filter(|r| r.agent().is_none()).map(|r| r.command.as_str());
    [
        request.verify.as_deref(),
        metric.map(|m| m.command.as_str()),
        metric.and_then(|m| m.guard.as_deref()),
        review,
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn banner(
    state: &LoopState,
    paths: &LoopPaths,
    claim_token: Option<&str>,
    env: &Environment,
    tier: &Tier,
) -> String {
    let settings = &state.meta.settings;
    let mut out = format!("for-loop: loop started, iteration 1 of {}.\n", settings.max_iterations);
    // First, so that a host keeping only the start of a long output still has it.
    if let Some(token) = claim_token {
        out.push_str(&format!(
            "Claim: {token} (the loop binds to the conversation whose transcript holds this token, \
             at its first stop; until then it blocks nothing)\n"
        ));
    }
    out.push_str(&format!("\nTask:\n{}\n\n", state.task.trim_end()));
    out.push_str(&format!("Verify:      {}\n", verify_line(state)));
    out.push_str(&format!("Done when:   {}\n", criterion(state)));
    out.push_str(&format!("Iterations:  at most {}\n", settings.max_iterations));
    out.push_str(&format!("Tier:        {}\n", tier.line()));
    out.push_str(&crate::commands::strict::could_run(env, state.meta.host, tier).unwrap_or_default());
    out.push_str(&oracle_lines(&state.meta.oracle));
    if settings.verify.is_some() {
        out.push_str(if settings.allow_test_edits {
            "Tests:       may be changed (--allow-test-edits): the suite is not protected, and not counted\n"
        } else {
            "Tests:       counted from verify's output; a pass that runs fewer tests than before, or \
             skips more, does not count (--allow-test-edits turns this off)\n"
        });
    }
    out.push_str(&limit_lines(settings));
    // Told now rather than at the first pass, which it would veto.
    if let Some(why) = settings
        .review
        .as_ref()
        .and_then(crate::checks::ReviewSettings::agent)
        .and_then(|agent| agent.find(env).err())
    {
        out.push_str(&format!("             not ready: {why}; until then every pass is vetoed\n"));
    }
    out.push_str(&where_kept(paths, claim_token.is_some()));
    if let Some(warning) =
        settings.verify.as_deref().and_then(|cmd| missing_program(cmd, &state.meta.cwd, env))
    {
        out.push_str(&format!("\nWarning: {warning}\n"));
    }
    // A plan's stories carry their own checks: they end the loop.
    if settings.verify.is_none() && settings.completion_promise.is_none() && settings.plan.is_none() {
        out.push_str(&format!(
            "\nNo --verify and no --completion-promise: the loop runs all {} iterations. \
             Give --verify CMD to end it when a check passes.\n",
            settings.max_iterations
        ));
    }
    out.push_str(
        "\nWork on the task now. Each time you stop, for-loop judges the result and either ends \
         the loop or gives you the task again with what is still missing.",
    );
    out
}

/// The verify command, where it runs and when it is killed.
fn verify_line(state: &LoopState) -> String {
    let settings = &state.meta.settings;
    match &settings.verify {
        Some(cmd) => format!(
            "{cmd}  (runs at every stop in {}, killed after {} s)",
            state.meta.cwd.display(),
            settings.verify_timeout_secs
        ),
        None => "none".into(),
    }
}

/// What the start protects: the oracle's files, the test suite, and `--protect` patterns that
/// match nothing yet.
fn oracle_lines(oracle: &Oracle) -> String {
    let mut out = String::new();
    if !oracle.files.is_empty() {
        let mut names: Vec<&str> = oracle.files.keys().take(6).map(String::as_str).collect();
        if oracle.files.len() > 6 {
            names.push("…");
        }
        out.push_str(&format!(
            "Protected:   {} ({} file{} fingerprinted; while they are changed, a pass does not count)\n",
            names.join(", "),
            oracle.files.len(),
            if oracle.files.len() == 1 { "" } else { "s" }
        ));
    }
    if !oracle.tests.is_off() {
        out.push_str(&suite_line(oracle));
    }
    if oracle.approximate {
        out.push_str(&format!(
            "             (over {} files where protected ones could be added: an added file may go unseen \
             outside what git tracks and sees)\n",
            crate::support::MAX_ENTRIES
        ));
    }
    for pattern in &oracle.protect {
        let one = crate::checks::Protect::stored(std::slice::from_ref(pattern));
        if !oracle.files.keys().any(|file| one.matches(file)) {
            out.push_str(&format!(
                "Note:        --protect {pattern} matches no file yet; a file created there counts as a \
                 change to the check\n"
            ));
        }
    }
    out
}

/// The budgets, the notify command and checkpoints, each when it is set.
fn limit_lines(settings: &Settings) -> String {
    let mut out = String::new();
    if let Some(budget) = settings.max_time_secs {
        out.push_str(&format!("Time budget: {}\n", crate::support::text::duration::human_ms(budget * 1_000)));
    }
    if let Some(budget) = settings.max_tokens {
        out.push_str(&format!(
            "Token budget: {} (input + output + cache writes since now; cache reads not counted)\n",
            crate::host::usage::human_tokens(budget)
        ));
    }
    if let Some(command) = &settings.notify {
        out.push_str(&format!(
            "Notify:      {command}  (when the loop ends or parks; killed after {} s)\n",
            crate::commands::notify::NOTIFY_TIMEOUT.as_secs()
        ));
    }
    if settings.checkpoint {
        out.push_str("Checkpoints: after each iteration, to refs/for-loop/<loop id>/<n>\n");
    }
    if let Some(review) = &settings.review {
        out.push_str(&crate::verdict::message::review::start_line(review, settings.verify_timeout_secs));
    }
    if !settings.scope.is_empty() {
        out.push_str(&crate::verdict::message::scope::start_line(&settings.scope));
    }
    out
}

/// Where the loop's state and ledger are; an unclaimed loop moves once it is claimed.
fn where_kept(paths: &LoopPaths, unclaimed: bool) -> String {
    if unclaimed {
        format!(
            "State:       {} (until claimed; then under sessions/<conversation id>/ in the same store)\n",
            paths.state.display()
        )
    } else {
        format!("State:       {}\nLedger:      {}\n", paths.state.display(), paths.ledger.display())
    }
}

/// What the start says about the test suite it protects: how many test and runner files, the
/// runner sections, and what the model may still do.
fn suite_line(oracle: &Oracle) -> String {
    let runner = oracle.files.keys().filter(|f| oracle::is_runner_file(f)).count();
    let tests = oracle.files.keys().filter(|f| oracle::is_test_file(f) && !oracle::is_runner_file(f)).count();
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts =
        vec![plural(tests, "test file", "test files"), plural(runner, "runner file", "runner files")];
    parts.extend(oracle.tests.sections.keys().cloned());
    let mut out = format!(
        "Test suite:  {}. New test files are welcome; editing an existing one, or adding a \
         conftest.py or another file a runner loads by itself, counts as changing the check \
         (--allow-test-edits turns this off)\n",
        parts.join(", ")
    );
    if oracle.tests.unchecked_files > 0 {
        out.push_str(&format!(
            "             ({} more test files were found past the {} fingerprinted; they are not checked)\n",
            oracle.tests.unchecked_files,
            oracle::MAX_TEST_FILES
        ));
    }
    out
}

/// A warning when the program verify starts cannot be found: it would fail every time with
/// exit 127, and the user would rather know now than after thirty iterations.
fn missing_program(command: &str, cwd: &Path, env: &Environment) -> Option<String> {
    const SHELL_WORDS: &[&str] = &[
        "!", ".", ":", "[", "[[", "{", "(", "cd", "case", "command", "echo", "env", "eval", "exec", "exit",
        "export", "false", "for", "if", "printf", "set", "source", "test", "time", "true", "until", "while",
    ];
    let words = shell_words::split(command).ok()?;
    let program = words.iter().find(|w| !w.contains('=') || w.starts_with('='))?;
    if SHELL_WORDS.contains(&program.as_str()) || program.starts_with('(') || program.starts_with('$') {
        return None;
    }
    if program.contains('/') {
        let path = cwd.join(program);
        return (!path.exists()).then(|| {
            format!("`{program}` does not exist in {}; verify will fail until it does.", cwd.display())
        });
    }
    let found = env
        .var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|dir| !dir.is_empty() && Path::new(dir).join(program).is_file());
    (!found).then(|| {
        format!("`{program}` was not found on PATH; verify will fail with exit 127 until it is installed.")
    })
}

/// `20261122-031900-1a2b3c`: sortable by start time, distinct across sessions.
fn loop_id(env: &Environment, session_id: &str) -> String {
    let salt = format!("{session_id}{}{}", env.now.as_nanosecond(), std::process::id());
    let hash = Fnv1a::of(salt.as_bytes());
    let stamp = env.now.strftime("%Y%m%d-%H%M%S");
    format!("{stamp}-{:06x}", hash & 0xff_ffff)
}
