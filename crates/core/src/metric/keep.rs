//! Metric mode's keep-or-discard rule, its pivot ladder and its progress, as pure functions.
//!
//! At each stop of a metric loop the change the agent made is measured and judged against the
//! best kept state: kept (it becomes the best checkpoint) or discarded (the working tree goes back
//! to the best checkpoint). Discards in a row climb a ladder: a note to refine, then one to pivot,
//! and after enough pivots without a keep the loop parks. One keep resets the ladder.

use serde::{Deserialize, Serialize};

use crate::metric::{Direction, MinGain, Number, Target};

pub(crate) const DEFAULT_METRIC_RUNS: u32 = 1;
pub(crate) const DEFAULT_REFINE_AFTER: u32 = 3;
pub(crate) const DEFAULT_PIVOT_AFTER: u32 = 5;
pub(crate) const DEFAULT_PARK_AFTER_PIVOTS: u32 = 3;
/// How many attempts the re-injection and the state remember.
pub(crate) const REMEMBERED_ATTEMPTS: usize = 5;

/// A metric loop's settings. They never change during the loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetricSettings {
    /// The command whose output gives the number.
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    pub direction: Direction,
    /// A command that must pass (with verify, when set) for a change to be kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
    /// Runs per measurement; the median counts.
    #[serde(default = "default_runs")]
    pub runs: u32,
    #[serde(default)]
    pub min_gain: MinGain,
    #[serde(default = "default_refine_after")]
    pub refine_after: u32,
    #[serde(default = "default_pivot_after")]
    pub pivot_after: u32,
    #[serde(default = "default_park_after_pivots")]
    pub park_after_pivots: u32,
}

fn default_runs() -> u32 {
    DEFAULT_METRIC_RUNS
}
fn default_refine_after() -> u32 {
    DEFAULT_REFINE_AFTER
}
fn default_pivot_after() -> u32 {
    DEFAULT_PIVOT_AFTER
}
fn default_park_after_pivots() -> u32 {
    DEFAULT_PARK_AFTER_PIVOTS
}

/// Discards in a row, and pivots asked for since the last keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ladder {
    pub discards: u32,
    pub pivots: u32,
}

/// The note a discard earns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rung {
    /// Nothing to add.
    None,
    /// Several discards in a row: refine the idea.
    Refine,
    /// Many discards in a row: try something fundamentally different.
    Pivot,
    /// Too many pivots without a keep: the loop parks.
    Park,
}

impl Ladder {
    /// The ladder after a stop, and the note it earns.
    pub(crate) fn after(self, kept: bool, settings: &MetricSettings) -> (Ladder, Rung) {
        if kept {
            return (Ladder::default(), Rung::None);
        }
        let discards = self.discards + 1;
        if discards >= settings.pivot_after.max(1) {
            let pivots = self.pivots + 1;
            if pivots >= settings.park_after_pivots.max(1) {
                return (Ladder { discards: 0, pivots }, Rung::Park);
            }
            return (Ladder { discards: 0, pivots }, Rung::Pivot);
        }
        let rung = if discards >= settings.refine_after.max(1) { Rung::Refine } else { Rung::None };
        (Ladder { discards, pivots: self.pivots }, rung)
    }
}

/// What a measurement gave.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Measured {
    /// The median of the runs, with the name a `METRIC` line gave.
    Value { value: f64, name: Option<String> },
    /// No number, a non-zero exit, or a timeout: why, in a few words.
    Failed(String),
}

/// Why a change was not kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Discard {
    /// The measurement failed.
    Unmeasured(String),
    /// The guard or verify failed.
    GuardFailed,
    /// The metric command or the files it runs changed: the number does not count.
    OracleChanged,
    /// The change reached outside the loop's scope (`--scope`): what, in a few words.
    OutOfScope(String),
    /// Not better than the best by more than the minimum gain and the noise floor.
    NotBetter { needed: f64 },
}

/// The judgement of one attempt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Judgement {
    Kept,
    Discarded(Discard),
}

/// Judges an attempt against the best kept value. `correct`: the guard and verify passed (or are
/// not set); `oracle_intact`: the metric's, guard's and verify's files are as at the start;
/// `breach`: what the change did outside the loop's scope, if it did.
pub(crate) fn judge(
    settings: &MetricSettings,
    best: f64,
    noise: f64,
    measured: &Measured,
    correct: bool,
    (oracle_intact, breach): (bool, Option<String>),
) -> Judgement {
    let value = match measured {
        Measured::Failed(why) => return Judgement::Discarded(Discard::Unmeasured(why.clone())),
        Measured::Value { value, .. } => *value,
    };
    if !oracle_intact {
        return Judgement::Discarded(Discard::OracleChanged);
    }
    if let Some(breach) = breach {
        return Judgement::Discarded(Discard::OutOfScope(breach));
    }
    if !correct {
        return Judgement::Discarded(Discard::GuardFailed);
    }
    let needed = settings.min_gain.over(best).max(noise);
    if settings.direction.gain(best, value) > needed {
        Judgement::Kept
    } else {
        Judgement::Discarded(Discard::NotBetter { needed })
    }
}

/// One attempt, as the loop remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Attempt {
    pub iteration: u32,
    /// `None`: the measurement failed.
    pub value: Option<Number>,
    pub kept: bool,
    /// The change, from its diff stat, in one line.
    pub summary: String,
}

/// A metric loop's progress, in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetricProgress {
    pub baseline: Number,
    /// The baseline's runs, whose spread is the noise floor.
    pub baseline_runs: Vec<Number>,
    pub noise: Number,
    pub best: Number,
    /// The checkpoint holding the best state: 0 is the baseline, else the iteration kept.
    pub best_checkpoint: u32,
    /// The name a `METRIC name=value` line gave, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub keeps: u32,
    pub discards: u32,
    pub ladder: Ladder,
    /// The last few attempts, oldest first.
    pub attempts: Vec<Attempt>,
}

impl MetricProgress {
    /// The progress of a loop whose baseline measured `runs` (at least one).
    pub(crate) fn at_baseline(runs: &[f64], name: Option<String>) -> MetricProgress {
        let baseline = crate::metric::median(runs).unwrap_or_default();
        MetricProgress {
            baseline: Number(baseline),
            baseline_runs: runs.iter().copied().map(Number).collect(),
            noise: Number(crate::metric::noise_floor(runs)),
            best: Number(baseline),
            best_checkpoint: 0,
            name,
            keeps: 0,
            discards: 0,
            ladder: Ladder::default(),
            attempts: Vec::new(),
        }
    }

    /// The progress after an attempt judged at `iteration`.
    pub(crate) fn after(
        &self,
        settings: &MetricSettings,
        iteration: u32,
        measured: &Measured,
        judgement: &Judgement,
        summary: &str,
    ) -> (MetricProgress, Rung) {
        let kept = *judgement == Judgement::Kept;
        let mut next = self.clone();
        let value = match measured {
            Measured::Value { value, name } => {
                if name.is_some() {
                    next.name.clone_from(name);
                }
                Some(Number(*value))
            }
            Measured::Failed(_) => None,
        };
        if kept {
            next.best = value.unwrap_or(self.best);
            next.best_checkpoint = iteration;
            next.keeps += 1;
        } else {
            next.discards += 1;
        }
        let (ladder, rung) = self.ladder.after(kept, settings);
        next.ladder = ladder;
        next.attempts.push(Attempt { iteration, value, kept, summary: summary.to_string() });
        let excess = next.attempts.len().saturating_sub(REMEMBERED_ATTEMPTS);
        next.attempts.drain(..excess);
        (next, rung)
    }

    /// Whether the best kept state meets the target.
    pub(crate) fn target_met(&self, settings: &MetricSettings) -> bool {
        settings.target.is_some_and(|t| t.is_met_by(self.best.0))
    }

    /// `131 → 124 ms` style: the baseline and the best.
    pub(crate) fn baseline_to_best(&self) -> String {
        format!("{} → {}{}", self.baseline, self.best, self.unit())
    }

    pub(crate) fn unit(&self) -> String {
        self.name.as_deref().map(|n| format!(" {n}")).unwrap_or_default()
    }
}

/// What the gathering step learnt about a metric loop's attempt.
#[derive(Debug, Clone)]
pub(crate) struct MetricFacts {
    pub measured: Measured,
    /// The guard run, when there is a guard.
    pub guard: Option<crate::checks::VerifyOutcome>,
    /// The change since the best checkpoint, in one line.
    pub summary: String,
}

/// A metric loop's measurement in a ledger line: `value`, `kept`, `target`, `direction` and
/// `name` as reports read them, with the best so far, the noise floor and the best checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MetricRecord {
    pub value: Number,
    pub kept: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target: Option<Number>,
    pub direction: Direction,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub name: Option<String>,
    pub best: Number,
    pub noise: Number,
    pub best_checkpoint: u32,
    /// True on the baseline's line, written at the start.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub baseline: bool,
}

impl MetricRecord {
    /// The record of `value` given the loop's progress after it.
    pub(crate) fn of(
        settings: &MetricSettings,
        after: &MetricProgress,
        value: f64,
        kept: bool,
    ) -> MetricRecord {
        MetricRecord {
            value: Number(value),
            kept,
            target: settings.target.map(|t| t.value),
            direction: settings.direction,
            name: after.name.clone(),
            best: after.best,
            noise: after.noise,
            best_checkpoint: after.best_checkpoint,
            baseline: false,
        }
    }
}

/// The line saying what happened to this attempt, e.g. `kept: 131 → 124 ms (best so far)`.
pub(crate) fn outcome_line(before: &MetricProgress, measured: &Measured, judgement: &Judgement) -> String {
    let unit = before.unit();
    let best = before.best;
    let noise = before.noise;
    match (judgement, measured) {
        (Judgement::Kept, Measured::Value { value, .. }) => {
            format!("kept: {best} → {}{unit} (best so far)", Number(*value))
        }
        (Judgement::Kept, Measured::Failed(_)) => "kept".into(),
        (Judgement::Discarded(Discard::Unmeasured(why)), _) => {
            format!("discarded: the metric could not be measured ({why}); your change was rolled back")
        }
        (Judgement::Discarded(Discard::GuardFailed), Measured::Value { value, .. }) => format!(
            "discarded: {}{unit}, but the guard failed; your change was rolled back",
            Number(*value)
        ),
        (Judgement::Discarded(Discard::OracleChanged), _) => {
            "discarded: the metric's own files were changed, so its number does not count; your change was rolled back"
                .into()
        }
        (Judgement::Discarded(Discard::OutOfScope(breach)), _) => {
            format!("discarded: it {breach}, so its number does not count; your change was rolled back")
        }
        (Judgement::Discarded(Discard::NotBetter { .. }), Measured::Value { value, .. }) => format!(
            "discarded: {}{unit} vs best {best}{unit} (noise ±{noise}); your change was rolled back",
            Number(*value)
        ),
        (Judgement::Discarded(_), Measured::Failed(why)) => {
            format!("discarded: {why}; your change was rolled back")
        }
    }
}

/// The note a rung adds to the re-injection.
pub(crate) fn rung_note(rung: Rung, ladder: Ladder, settings: &MetricSettings) -> Option<String> {
    match rung {
        Rung::None | Rung::Park => None,
        Rung::Refine => Some(format!(
            "Refine: {} changes in a row were discarded. Look at why the last ones did not help \
             and refine the idea rather than repeating it.",
            ladder.discards
        )),
        Rung::Pivot => Some(format!(
            "Pivot: try a fundamentally different approach; {} discards in a row show this one is \
             spent (pivot {} of {} before the loop parks).",
            settings.pivot_after, ladder.pivots, settings.park_after_pivots
        )),
    }
}

/// The last attempts, one line each, for the re-injection.
pub(crate) fn history(progress: &MetricProgress) -> String {
    let unit = progress.unit();
    let mut out = String::new();
    for a in &progress.attempts {
        let value = a.value.map_or("no value".into(), |v| format!("{v}{unit}"));
        let verdict = if a.kept { "kept" } else { "discarded" };
        out.push_str(&format!("  - iteration {}: {value}, {verdict}: {}\n", a.iteration, a.summary));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn settings() -> MetricSettings {
        MetricSettings {
            command: "sh bench.sh".into(),
            target: Some("<= 120".parse().unwrap()),
            direction: Direction::Min,
            guard: None,
            runs: 1,
            min_gain: MinGain::default(),
            refine_after: 3,
            pivot_after: 5,
            park_after_pivots: 3,
        }
    }

    fn value(v: f64) -> Measured {
        Measured::Value { value: v, name: Some("ms".into()) }
    }

    #[test]
    fn a_change_is_kept_only_when_it_beats_the_best_by_more_than_gain_and_noise() {
        let mut s = settings();
        assert_eq!(judge(&s, 131.0, 0.0, &value(124.0), true, (true, None)), Judgement::Kept);
        assert!(matches!(judge(&s, 131.0, 0.0, &value(131.0), true, (true, None)), Judgement::Discarded(_)));
        assert!(matches!(judge(&s, 131.0, 2.0, &value(129.5), true, (true, None)), Judgement::Discarded(_)));
        assert_eq!(judge(&s, 131.0, 2.0, &value(128.9), true, (true, None)), Judgement::Kept);
        s.min_gain = "5%".parse().unwrap();
        assert_eq!(
            judge(&s, 100.0, 2.0, &value(96.0), true, (true, None)),
            Judgement::Discarded(Discard::NotBetter { needed: 5.0 })
        );
        assert_eq!(judge(&s, 100.0, 2.0, &value(94.0), true, (true, None)), Judgement::Kept);
        s.direction = Direction::Max;
        s.min_gain = MinGain::default();
        assert_eq!(judge(&s, 0.9, 0.0, &value(0.93), true, (true, None)), Judgement::Kept);
        assert!(matches!(judge(&s, 0.9, 0.0, &value(0.8), true, (true, None)), Judgement::Discarded(_)));
    }

    #[test]
    fn correctness_the_oracle_and_a_number_come_first() {
        let s = settings();
        assert_eq!(
            judge(&s, 131.0, 0.0, &value(1.0), false, (true, None)),
            Judgement::Discarded(Discard::GuardFailed)
        );
        assert_eq!(
            judge(&s, 131.0, 0.0, &value(1.0), true, (false, None)),
            Judgement::Discarded(Discard::OracleChanged)
        );
        assert_eq!(
            judge(&s, 131.0, 0.0, &value(1.0), true, (true, Some("changed outside the scope: a.rs".into()))),
            Judgement::Discarded(Discard::OutOfScope("changed outside the scope: a.rs".into())),
            "a better number outside the scope is not kept"
        );
        assert_eq!(
            judge(&s, 131.0, 0.0, &Measured::Failed("exit 1".into()), true, (true, None)),
            Judgement::Discarded(Discard::Unmeasured("exit 1".into()))
        );
    }

    #[test]
    fn the_ladder_refines_pivots_parks_and_resets_on_a_keep() {
        use Rung::{None as N, Park, Pivot, Refine};
        let s = settings();
        let mut ladder = Ladder::default();
        let mut rungs = Vec::new();
        for _ in 0..15 {
            let (next, rung) = ladder.after(false, &s);
            ladder = next;
            rungs.push(rung);
        }
        assert_eq!(
            rungs,
            [N, N, Refine, Refine, Pivot, N, N, Refine, Refine, Pivot, N, N, Refine, Refine, Park]
        );
        let (mut ladder, _) = Ladder { discards: 4, pivots: 2 }.after(true, &s);
        assert_eq!(ladder, Ladder::default());
        for _ in 0..4 {
            ladder = ladder.after(false, &s).0;
        }
        assert_eq!(ladder.after(false, &s).1, Pivot, "a keep starts the count again");
    }

    #[test]
    fn progress_tracks_best_keeps_discards_and_the_last_attempts() {
        let s = settings();
        let p = MetricProgress::at_baseline(&[131.0, 133.0, 130.0], None);
        assert_eq!((p.baseline, p.noise, p.best), (Number(131.0), Number(3.0), Number(131.0)));
        let (p, _) = p.after(&s, 1, &value(124.0), &Judgement::Kept, "src/a.rs +3 -1");
        assert_eq!((p.best, p.best_checkpoint, p.keeps), (Number(124.0), 1, 1));
        assert_eq!(p.baseline_to_best(), "131 → 124 ms");
        let mut p = p;
        for i in 2..10 {
            p = p
                .after(&s, i, &value(127.0), &Judgement::Discarded(Discard::NotBetter { needed: 3.0 }), "x")
                .0;
        }
        assert_eq!((p.best, p.best_checkpoint, p.keeps, p.discards), (Number(124.0), 1, 1, 8));
        assert_eq!(p.attempts.len(), REMEMBERED_ATTEMPTS);
        assert_eq!(p.attempts[0].iteration, 5);
        assert!(!p.target_met(&settings()));
    }

    #[test]
    fn the_words_of_a_keep_and_a_discard() {
        let mut p = MetricProgress::at_baseline(&[131.0], Some("ms".into()));
        assert_eq!(outcome_line(&p, &value(124.0), &Judgement::Kept), "kept: 131 → 124 ms (best so far)");
        p.best = Number(124.0);
        p.noise = Number(2.0);
        assert_eq!(
            outcome_line(&p, &value(127.0), &Judgement::Discarded(Discard::NotBetter { needed: 2.0 })),
            "discarded: 127 ms vs best 124 ms (noise ±2); your change was rolled back"
        );
    }
}
