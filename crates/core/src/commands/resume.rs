//! `loop-hook resume`: continue a parked loop, one that hit its cap, or one that was cancelled,
//! with more iterations or time when it needs them.

use crate::checks::Streaks;
use crate::commands::request::MAX_MAX_ITERATIONS;
use crate::commands::request::flag_spec::{Flag, Group, Value};
use crate::commands::request::words::{self, Given};
use crate::commands::session::{self, Target};
use crate::host::Origin;
use crate::provenance::{Mutation, origin};
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry};
use crate::state::{Meta, Status};
use crate::store::Custody;
use crate::store::Notes;
use crate::support::Environment;
use crate::support::Outcome;
use crate::support::text::duration::parse_seconds;
use jiff::Timestamp;

/// Iterations added when a loop at its cap is resumed without `--more`.
const DEFAULT_MORE: u32 = 10;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ResumeOptions {
    pub iterations: Option<u32>,
    pub time_secs: Option<u64>,
    pub tokens: Option<u64>,
}

impl ResumeOptions {
    /// Parses `[--more N] [--more-time DURATION] [--more-tokens N]`, as typed after
    /// `/for-loop:resume`: the names are the option table's [`Group::RESUME`] rows.
    pub(crate) fn parse(text: &str) -> Result<ResumeOptions, String> {
        let mut options = ResumeOptions::default();
        let given = words::read(Group::RESUME, text.split_whitespace().map(str::to_string)).map_err(|e| {
            e.describe("a resume option", "use --more N, --more-time DURATION and --more-tokens N")
        })?;
        for given in given {
            match given {
                Given::Option(flag, value) => options.take(flag, &value)?,
                Given::Word(word) => {
                    return Err(format!(
                        "`{word}` is not a resume option: use --more N, --more-time DURATION and --more-tokens N"
                    ));
                }
            }
        }
        Ok(options)
    }

    /// Records one option of the resume group with its value, typed: `/for-loop:resume`'s text
    /// and `loop-hook run --resume`'s words both come here.
    pub(crate) fn take(&mut self, flag: Flag, value: &str) -> Result<(), String> {
        let name = flag.name();
        match flag {
            Flag::More => {
                let most = match flag.spec().value {
                    Value::Count { most } => most,
                    _ => MAX_MAX_ITERATIONS,
                };
                let n: u32 = value.parse().ok().filter(|n| (1..=most).contains(n)).ok_or_else(|| {
                    format!("{name} `{value}` is not valid: give a whole number from 1 to {most}")
                })?;
                self.iterations = Some(n);
            }
            Flag::MoreTime => {
                let secs =
                    parse_seconds(value).map_err(|why| format!("{name} `{value}` is not valid: {why}"))?;
                self.time_secs = Some(secs);
            }
            Flag::MoreTokens => {
                let tokens = crate::host::usage::parse_tokens(value)
                    .map_err(|why| format!("{name} `{value}` is not valid: {why}"))?;
                self.tokens = Some(tokens);
            }
            other => return Err(format!("`{other}` is not a resume option: please report it")),
        }
        Ok(())
    }
}

pub(crate) fn run(env: &Environment, target: &Target, options: &ResumeOptions, origin: Origin) -> Outcome {
    let paths = match target.loop_paths(env) {
        Ok(Some(paths)) => paths,
        Ok(None) => {
            return Outcome::refused(
                "for-loop: no loop in this session to resume; start one with /for-loop.",
            );
        }
        Err(refusal) => return refusal,
    };
    let transaction = match session::locked(&paths, "resume") {
        Ok(transaction) => transaction,
        Err(refusal) => return refusal,
    };
    let mut state = match transaction.read(env.now) {
        Ok(Custody::Loop { state, .. }) => state,
        Ok(Custody::Untrusted { why, .. }) => {
            return Outcome::refused(format!(
                "for-loop: not resumed: {why}, so its settings cannot be trusted. Start a new loop with /for-loop."
            ));
        }
        Ok(Custody::None) => return Outcome::refused("for-loop: no loop in this session to resume."),
        Err(e) => return Outcome::refused(format!("for-loop: could not resume: {e}")),
    };
    if state.meta.status != Status::Active
        && let Some(refusal) = origin::gate(env, Notes::Held(&transaction), &state, Mutation::Resume, origin)
    {
        return refusal;
    }
    if let Some(refusal) = not_resumable(&state) {
        return refusal;
    }
    let meta = &mut state.meta;
    let was = meta.outcome.map_or("unknown".to_string(), |o| o.to_string());
    // The stop that parked or ended the loop closed a turn; this resume opens the next one.
    meta.iteration += 1;
    reopen(meta, options, env.now);
    meta.updated_at = env.now;
    if let Some(refusal) = over_the_block_cap(env, &state) {
        return refusal;
    }
    let entry = LedgerEntry {
        detail: Some(format!("resumed after {was}")),
        origin: Some(origin),
        ..LedgerEntry::new(&state, env.now, LedgerDecision::Resume, ReasonCode::Resumed)
    };
    if let Err(e) = transaction.commit(&state, &[entry]) {
        return Outcome::refused(format!("for-loop: could not resume, nothing changed: {e}"));
    }
    origin::after(Notes::Held(&transaction), &state, Mutation::Resume, origin);
    let meta = &state.meta;
    Outcome::ok(format!(
        "for-loop: resumed after {was}, now at iteration {} of {}{}.\n\nTask:\n{}\n\nWork on the task now; the \
         loop judges your next stop as before.",
        meta.iteration,
        meta.settings.max_iterations,
        meta.settings.max_time_secs.map_or(String::new(), |s| format!(
            ", time budget {}",
            crate::support::text::duration::human_ms(s * 1_000)
        )),
        state.task.trim_end()
    ))
}

/// The answer when the loop is not one to resume: running already, handed over, or done.
fn not_resumable(state: &crate::state::LoopState) -> Option<Outcome> {
    let meta = &state.meta;
    match (meta.status, meta.outcome) {
        (Status::Active, _) => Some(Outcome::ok(format!(
            "for-loop: the loop is already running (iteration {} of {}); it judges your next stop.",
            meta.iteration, meta.settings.max_iterations
        ))),
        (Status::Ended, Some(ReasonCode::HandedOver)) => {
            let to = meta.handoff.as_ref().map_or("a run loop", |h| h.to.as_str());
            Some(Outcome::refused(format!(
                "for-loop: this loop was handed over to loop-hook run ({to}) and goes on there: \
                 `loop-hook status --session {to}` follows it, `loop-hook run --resume {to}` continues it."
            )))
        }
        (Status::Ended, Some(ReasonCode::Verified | ReasonCode::Promise)) => Some(Outcome::refused(
            "for-loop: this loop ended because it was done. Start a new one with /for-loop.",
        )),
        _ => None,
    }
}

/// The refusal of a resume that leaves more iterations than the host lets a Stop hook hold in
/// one prompt (Qwen Code's cap of blocks in a row), as a start of that length is refused.
fn over_the_block_cap(env: &Environment, state: &crate::state::LoopState) -> Option<Outcome> {
    let meta = &state.meta;
    let cap = meta.host.settable_block_cap(env, &meta.cwd)?;
    let left = meta.settings.max_iterations.saturating_sub(meta.iteration) + 1;
    (left > cap).then(|| {
        Outcome::refused(format!(
            "for-loop: not resumed: Qwen Code lets a Stop hook block at most {cap} stops in a row \
             ({} in its settings, or {}), and this resume would leave {left} iterations, so Qwen Code \
             would cut it short. Resume with --more {cap} or fewer, or raise the setting (at most {}) \
             and restart qwen.",
            crate::host::QWEN_BLOCK_CAP_SETTING,
            crate::host::QWEN_BLOCK_CAP_VAR,
            crate::host::QWEN_MAX_BLOCK_CAP,
        ))
    })
}

/// Makes a loop that is about to run again active, with the room `options` asks for: at a spent
/// cap `DEFAULT_MORE` iterations unless told, at a spent time or token budget half again unless
/// told, and fresh streaks. `meta.iteration` is the turn about to start. Shared with
/// `loop-hook run --resume`, so `--more`, `--more-time` and `--more-tokens` mean the same there.
pub(crate) fn reopen(meta: &mut Meta, options: &ResumeOptions, now: Timestamp) {
    let needed = meta.iteration.saturating_sub(meta.settings.max_iterations);
    let more = options.iterations.unwrap_or(if needed > 0 { DEFAULT_MORE } else { 0 });
    meta.settings.max_iterations = meta.settings.max_iterations.max(meta.iteration - 1) + more.max(needed);
    if let Some(budget) = meta.settings.max_time_secs {
        let spent = u64::try_from(now.duration_since(meta.started_at).as_secs()).unwrap_or(0);
        let extra = options.time_secs.unwrap_or(if spent >= budget { budget / 2 + 60 } else { 0 });
        meta.settings.max_time_secs = Some(budget.max(spent) + extra);
    } else if let Some(extra) = options.time_secs {
        let spent = u64::try_from(now.duration_since(meta.started_at).as_secs()).unwrap_or(0);
        meta.settings.max_time_secs = Some(spent + extra);
    }
    let used = meta.usage.as_ref().map_or(0, |u| u.used.total().counted());
    match (meta.settings.max_tokens, options.tokens) {
        // A spent budget gets half again unless told how much.
        (Some(budget), more) => {
            let extra = more.unwrap_or(if used >= budget { budget / 2 } else { 0 });
            meta.settings.max_tokens = Some(budget.max(used).saturating_add(extra));
        }
        (None, Some(extra)) => meta.settings.max_tokens = Some(used.saturating_add(extra)),
        (None, None) => {}
    }
    meta.status = Status::Active;
    meta.outcome = None;
    meta.receipt = None;
    meta.last_blocked = false;
    meta.streaks = Streaks { last_tree: meta.streaks.last_tree.take(), ..Streaks::default() };
    // A wait the loop was parked in is over: the next one on background work starts afresh.
    meta.rhythm = crate::state::Rhythm { wait: None, quiet_blocks: 0, ..meta.rhythm.clone() };
    // The current story gets its `--story-iterations` again.
    if let Some(plan) = meta.plan.as_mut() {
        plan.current_stops = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_resume_options() {
        assert_eq!(ResumeOptions::parse("").unwrap(), ResumeOptions::default());
        let o = ResumeOptions::parse("--more 5 --more-time=30m --more-tokens 2M").unwrap();
        assert_eq!((o.iterations, o.time_secs, o.tokens), (Some(5), Some(1_800), Some(2_000_000)));
        assert!(ResumeOptions::parse("--more-tokens many").is_err());
        assert!(ResumeOptions::parse("--more").is_err());
        assert!(ResumeOptions::parse("--more zero").is_err());
        assert!(ResumeOptions::parse("--more 0").is_err());
        assert!(ResumeOptions::parse("--more-time soon").is_err());
        assert!(ResumeOptions::parse("please").unwrap_err().contains("not a resume option"));
        let typo = ResumeOptions::parse("--mor 3").unwrap_err();
        assert!(typo.contains("did you mean --more?"), "{typo}");
        let typo = ResumeOptions::parse("--more-tokes=5k").unwrap_err();
        assert!(typo.contains("did you mean --more-tokens?"), "{typo}");
        let missing = ResumeOptions::parse("--more-time").unwrap_err();
        assert!(missing.contains("--more-time needs a duration"), "{missing}");
        let missing = ResumeOptions::parse("--more --more-time 1h").unwrap_err();
        assert!(missing.contains("--more needs a whole number from 1 to 10000"), "{missing}");
        let huge = ResumeOptions::parse(&format!("--more {}", "9".repeat(10_000))).unwrap_err();
        assert!(huge.contains("give a whole number from 1 to 10000"), "{huge}");
    }
}
