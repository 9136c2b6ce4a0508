//! What a report shows, built from a loop's state and ledger lines without touching any file.
//!
//! The ledger is read leniently: a line that does not parse is counted and passed over, and
//! fields a newer or older for-loop may not write are optional. Two optional fields per line feed
//! parts of the report that other features write:
//!
//! - `tokens`: the model usage of that iteration, per model ([`Usage`]);
//! - `metric`: a metric loop's measurement at that stop, shaped
//!   `{"value": 124.0, "kept": true, "target": 120.0, "direction": "min", "name": "ms"}`, where
//!   all but `value` may be left out (`direction` is `min` or `max`; without one, a target above
//!   the first value means higher is better).

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::checks::stall::normalize;
use crate::host::Usage;
use crate::metric::Direction;
use crate::state::ReasonCode;
use crate::state::{LedgerDecision, LedgerEntry, VerifyRecord};
use crate::state::{LoopState, Status};
use crate::verdict::message::criterion;

/// One ledger line as the report reads it.
#[derive(Debug, Clone, Deserialize)]
struct Line {
    #[serde(flatten)]
    entry: LedgerEntry,
    #[serde(default)]
    metric: Option<MetricPoint>,
}

/// A metric loop's measurement at one stop.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct MetricPoint {
    pub(crate) value: f64,
    #[serde(default)]
    pub(crate) kept: Option<bool>,
    #[serde(default)]
    pub(crate) target: Option<f64>,
    #[serde(default)]
    pub(crate) direction: Option<Direction>,
    #[serde(default)]
    pub(crate) name: Option<String>,
}

/// One stop (or event) of the loop, in ledger order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stop {
    pub(crate) loop_id: String,
    pub(crate) time: Timestamp,
    pub(crate) iteration: u32,
    pub(crate) decision: LedgerDecision,
    pub(crate) reason: ReasonCode,
    pub(crate) verify: Option<VerifyRecord>,
    pub(crate) detail: Option<String>,
    pub(crate) oracle_changed: Vec<String>,
    /// Files changed outside the loop's scope at this stop.
    pub(crate) out_of_scope: Vec<String>,
    pub(crate) tokens: Option<Usage>,
    pub(crate) metric: Option<MetricPoint>,
    /// The reviewer's verdict, on the lines of a review.
    pub(crate) review: Option<crate::checks::ReviewRecord>,
    /// Index into [`LoopReport::failures`], for a failed verify.
    pub(crate) failure: Option<usize>,
    /// The failures verify's output named, and what changed since the stop before
    /// ([`crate::state::describe_failing`]); `None` where the ledger kept no names.
    pub(crate) failing: Option<String>,
}

impl Stop {
    /// Whether this line judged a turn end (rather than noting an event such as a resume).
    pub(crate) fn is_judged(&self) -> bool {
        matches!(self.decision, LedgerDecision::Block | LedgerDecision::Allow)
            && !matches!(self.reason, ReasonCode::ForeignSession | ReasonCode::InternalError)
    }
}

/// One distinct failure: verify runs whose exit and normalised output tail were the same.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    /// A short digest naming it on the page.
    pub(crate) id: String,
    /// `exit 1`, `timed out`, `killed by signal 9`.
    pub(crate) how: String,
    /// The iterations it failed at, in order.
    pub(crate) iterations: Vec<u32>,
    /// The output tail of its latest occurrence.
    pub(crate) tail: String,
}

/// The files the loop changed, from its checkpoints and its receipt.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FileChanges {
    /// Files changed in each iteration (checkpoint `n` against the one before), by iteration.
    pub(crate) per_iteration: Vec<(u32, Vec<String>)>,
    /// Files changed since the loop started; `None` when unknown.
    pub(crate) total: Option<Vec<String>>,
    /// Why per-iteration changes are missing, when they are.
    pub(crate) note: Option<String>,
}

/// Everything the page shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoopReport {
    pub(crate) loop_id: String,
    pub(crate) task: String,
    pub(crate) verify: Option<String>,
    pub(crate) done_when: String,
    pub(crate) host: String,
    /// `strict` or `default`, when the state says.
    pub(crate) tier: Option<String>,
    pub(crate) status: Status,
    pub(crate) outcome: Option<ReasonCode>,
    pub(crate) iteration: u32,
    pub(crate) max_iterations: u32,
    pub(crate) started_at: Timestamp,
    pub(crate) generated_at: Timestamp,
    pub(crate) elapsed_ms: u64,
    pub(crate) verify_ms: u64,
    pub(crate) cwd: String,
    pub(crate) checkpoints: bool,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) stops: Vec<Stop>,
    pub(crate) failures: Vec<Failure>,
    pub(crate) files: FileChanges,
    /// Ledger lines that could not be read.
    pub(crate) unreadable_lines: usize,
    /// Ledger lines left out because the ledger is larger than a report reads.
    pub(crate) ledger_cut: bool,
    pub(crate) version: &'static str,
    /// How the last turn ended, when the host ended it on an error and no judged stop came after.
    pub(crate) failed_turn: Option<String>,
    /// The backlog run the loop is a task of, when it is one.
    pub(crate) backlog: Option<super::backlog::BacklogSection>,
}

/// What was read of a ledger: its stops, oldest first, and how many lines did not parse.
#[derive(Debug, Clone, Default)]
pub(crate) struct LedgerLines {
    stops: Vec<Stop>,
    unreadable: usize,
    cut: bool,
}

impl LedgerLines {
    /// Parses ledger lines, oldest first. `cut`: the first lines of the ledger were not read.
    pub(crate) fn parse<'a>(lines: impl IntoIterator<Item = &'a [u8]>, cut: bool) -> LedgerLines {
        let mut read = LedgerLines { cut, ..LedgerLines::default() };
        let mut before: Option<(String, crate::state::FailingNames)> = None;
        for line in lines {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Line>(line) {
                Ok(Line { entry, metric }) => read.stops.push(Stop {
                    failing: entry.verify.as_ref().and_then(|v| v.failing.as_ref()).map(|now| {
                        let earlier = before.as_ref().filter(|(id, _)| *id == entry.loop_id).map(|(_, f)| f);
                        let said = crate::state::describe_failing(earlier, now);
                        before = Some((entry.loop_id.clone(), now.clone()));
                        said
                    }),
                    loop_id: entry.loop_id,
                    time: entry.time,
                    iteration: entry.iteration,
                    decision: entry.decision,
                    reason: entry.reason,
                    verify: entry.verify,
                    detail: entry.detail,
                    oracle_changed: entry.oracle_changed,
                    out_of_scope: entry.out_of_scope,
                    tokens: entry.tokens,
                    metric,
                    review: entry.review,
                    failure: None,
                }),
                Err(_) => read.unreadable += 1,
            }
        }
        read
    }
}

impl LoopReport {
    /// The report of `state` with the ledger lines read for it, at `now`.
    pub(crate) fn build(
        state: &LoopState,
        ledger: LedgerLines,
        files: FileChanges,
        tier: Option<String>,
        now: Timestamp,
    ) -> LoopReport {
        let meta = &state.meta;
        // Only the lines of this loop: a session directory can hold an older loop's lines if
        // archiving it was interrupted.
        let mut stops = ledger.stops;
        // The lines that open a loop (its start, a claim) vouch for its first state; they are
        // not stops.
        stops.retain(|stop| {
            stop.loop_id == meta.loop_id && !matches!(stop.reason, ReasonCode::Started | ReasonCode::Claimed)
        });
        let failures = group_failures(&mut stops);
        let over = meta.status != Status::Active;
        let elapsed_ms = match (&meta.receipt, over) {
            (Some(receipt), true) => receipt.elapsed_ms,
            (None, true) => millis_between(meta.started_at, meta.updated_at),
            (_, false) => millis_between(meta.started_at, now),
        };
        LoopReport {
            loop_id: meta.loop_id.clone(),
            task: state.task.clone(),
            verify: meta.settings.verify.clone(),
            done_when: criterion(state),
            host: meta.host.name().to_string(),
            tier,
            status: meta.status,
            outcome: meta.outcome,
            iteration: meta.iteration,
            max_iterations: meta.settings.max_iterations,
            started_at: meta.started_at,
            generated_at: now,
            elapsed_ms,
            verify_ms: meta.verify_total_ms,
            cwd: meta.cwd.display().to_string(),
            checkpoints: meta.settings.checkpoint,
            max_tokens: meta.settings.max_tokens,
            stops,
            failures,
            files,
            unreadable_lines: ledger.unreadable,
            ledger_cut: ledger.cut,
            version: crate::support::VERSION,
            failed_turn: meta
                .failed_turn
                .as_ref()
                .map(|failed| crate::verdict::message::failed_turn::status_line(failed, now)),
            backlog: None,
        }
    }

    /// Tokens over the whole loop, if any stop recorded usage.
    pub(crate) fn tokens(&self) -> Option<Usage> {
        let mut total: Option<Usage> = None;
        for tokens in self.stops.iter().filter_map(|stop| stop.tokens.as_ref()) {
            total.get_or_insert_with(Usage::default).merge(tokens);
        }
        total
    }

    /// The metric series, if this is a metric loop.
    pub(crate) fn metric(&self) -> Option<MetricSeries> {
        MetricSeries::of(&self.stops)
    }
}

fn millis_between(from: Timestamp, to: Timestamp) -> u64 {
    u64::try_from(to.duration_since(from).as_millis()).unwrap_or(0)
}

/// `exit 1`, `timed out`, `killed by signal 9`.
pub(crate) fn how_it_failed(verify: &VerifyRecord) -> String {
    match (verify.timed_out, verify.exit_code, verify.signal) {
        (true, _, _) => "timed out".to_string(),
        (false, Some(code), _) => format!("exit {code}"),
        (false, None, Some(signal)) => format!("killed by signal {signal}"),
        (false, None, None) => "no exit status".to_string(),
    }
}

fn failed(verify: &VerifyRecord) -> bool {
    verify.timed_out || verify.exit_code != Some(0)
}

/// Groups the failed verify runs by how they failed and their output tail with run-to-run noise
/// (times, counters, ids, temporary paths) taken out, and links each stop to its group.
fn group_failures(stops: &mut [Stop]) -> Vec<Failure> {
    let mut failures: Vec<Failure> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for stop in stops.iter_mut() {
        let Some(verify) = stop.verify.as_ref().filter(|v| failed(v)) else {
            continue;
        };
        let how = how_it_failed(verify);
        let mut hasher = Sha256::new();
        hasher.update(how.as_bytes());
        hasher.update([0]);
        hasher.update(normalize(&verify.tail).as_bytes());
        let id = crate::support::digest::hex(&hasher.finalize()[..4]);
        let at = *index.entry(id.clone()).or_insert_with(|| {
            failures.push(Failure { id, how, iterations: Vec::new(), tail: String::new() });
            failures.len() - 1
        });
        failures[at].iterations.push(stop.iteration);
        failures[at].tail.clone_from(&verify.tail);
        stop.failure = Some(at);
    }
    failures
}

/// Iteration numbers as short ranges: `1–3, 5, 7–8`.
pub(crate) fn ranges(iterations: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < iterations.len() {
        let start = iterations[i];
        let mut end = start;
        while i + 1 < iterations.len() && iterations[i + 1] == end + 1 {
            i += 1;
            end = iterations[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}–{end}") });
        i += 1;
    }
    parts.join(", ")
}

/// A metric loop's measurements, in order, with the best so far.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MetricSeries {
    pub(crate) name: Option<String>,
    pub(crate) target: Option<f64>,
    pub(crate) direction: Direction,
    /// Iteration, value, kept (when known), best so far after it.
    pub(crate) points: Vec<MetricSample>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MetricSample {
    pub(crate) iteration: u32,
    pub(crate) value: f64,
    pub(crate) kept: Option<bool>,
    pub(crate) best: f64,
}

impl MetricSeries {
    fn of(stops: &[Stop]) -> Option<MetricSeries> {
        let measured: Vec<(u32, &MetricPoint)> = stops
            .iter()
            .filter_map(|stop| stop.metric.as_ref().map(|m| (stop.iteration, m)))
            .filter(|(_, m)| m.value.is_finite())
            .collect();
        let (_, first) = measured.first()?;
        let target = measured.iter().rev().find_map(|(_, m)| m.target).filter(|t| t.is_finite());
        let direction = measured.iter().rev().find_map(|(_, m)| m.direction).unwrap_or(match target {
            Some(target) if target > first.value => Direction::Max,
            _ => Direction::Min,
        });
        let name = measured.iter().rev().find_map(|(_, m)| m.name.clone());
        let better = |a: f64, b: f64| direction.gain(b, a) > 0.0;
        let mut best: Option<f64> = None;
        let points = measured
            .iter()
            .map(|(iteration, m)| {
                // A discarded measurement is never the best, however good its number.
                if m.kept != Some(false) && best.is_none_or(|b| better(m.value, b)) {
                    best = Some(m.value);
                }
                MetricSample {
                    iteration: *iteration,
                    value: m.value,
                    kept: m.kept,
                    best: best.unwrap_or(m.value),
                }
            })
            .collect();
        Some(MetricSeries { name, target, direction, points })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::sample;
    use serde_json::json;

    fn line(iteration: u32, reason: &str, verify: Option<(i32, &str)>, extra: serde_json::Value) -> Vec<u8> {
        let mut value = json!({
            "time": format!("2026-11-22T03:{:02}:00Z", iteration),
            "loop_id": "20261122-030000-abcdef", "iteration": iteration, "max_iterations": 30,
            "decision": if reason == "verified" { "allow" } else { "block" },
            "reason": reason, "stop_hook_active": false,
        });
        if let Some((code, tail)) = verify {
            value["verify"] = json!({"exit_code": code, "timed_out": false, "duration_ms": 1200,
                "output_bytes": 10, "output_digest": "d", "tail": tail});
        }
        if let serde_json::Value::Object(extra) = extra {
            for (k, v) in extra {
                value[k] = v;
            }
        }
        serde_json::to_vec(&value).unwrap()
    }

    fn build(lines: &[Vec<u8>]) -> LoopReport {
        let ledger = LedgerLines::parse(lines.iter().map(Vec::as_slice), false);
        LoopReport::build(
            &sample(),
            ledger,
            FileChanges::default(),
            None,
            "2026-11-22T04:00:00Z".parse().unwrap(),
        )
    }

    #[test]
    fn groups_failures_whose_output_differs_only_by_noise() {
        let report = build(&[
            line(1, "verify_failed", Some((1, "test a FAILED in 0.31s")), json!({})),
            line(2, "verify_failed", Some((1, "test a FAILED in 0.52s")), json!({})),
            line(3, "verify_failed", Some((2, "build error at src/x.rs:12")), json!({})),
            line(4, "verify_failed", Some((1, "test a FAILED in 0.40s")), json!({})),
            line(5, "verified", Some((0, "ok")), json!({})),
        ]);
        assert_eq!(report.failures.len(), 2);
        assert_eq!(report.failures[0].iterations, [1, 2, 4]);
        assert_eq!(report.failures[0].how, "exit 1");
        assert_eq!(report.failures[0].tail, "test a FAILED in 0.40s");
        assert_eq!(report.failures[1].iterations, [3]);
        assert_eq!(report.stops[3].failure, Some(0));
        assert_eq!(report.stops[4].failure, None);
        assert_eq!(ranges(&report.failures[0].iterations), "1–2, 4");
    }

    #[test]
    fn unreadable_lines_are_counted_and_passed_over() {
        let report =
            build(&[b"not json".to_vec(), line(1, "verify_failed", None, json!({})), b"{}".to_vec()]);
        assert_eq!((report.stops.len(), report.unreadable_lines), (1, 2));
    }

    #[test]
    fn tokens_sum_over_the_stops_that_recorded_them() {
        let tokens = |n: u64| json!({"tokens": {"m": {"input": n, "output": 1}}});
        let report = build(&[
            line(1, "verify_failed", None, tokens(10)),
            line(2, "verify_failed", None, json!({})),
            line(3, "verify_failed", None, tokens(5)),
        ]);
        assert_eq!(report.tokens().unwrap().total().counted(), 17);
        assert!(build(&[line(1, "verify_failed", None, json!({}))]).tokens().is_none());
    }

    #[test]
    fn the_metric_series_keeps_the_best_kept_value() {
        let m = |value: f64, kept: bool| json!({"metric": {"value": value, "kept": kept, "target": 100.0}});
        let report = build(&[
            line(1, "verify_failed", None, m(130.0, true)),
            line(2, "verify_failed", None, m(90.0, false)),
            line(3, "verify_failed", None, m(120.0, true)),
            line(4, "verify_failed", None, m(125.0, false)),
        ]);
        let series = report.metric().unwrap();
        assert_eq!(series.direction, Direction::Min);
        assert_eq!(series.target, Some(100.0));
        let best: Vec<f64> = series.points.iter().map(|p| p.best).collect();
        assert_eq!(best, [130.0, 130.0, 120.0, 120.0]);
        assert!(build(&[line(1, "verify_failed", None, json!({}))]).metric().is_none());
    }

    #[test]
    fn a_direction_in_the_ledger_reads_as_the_metric_writes_it() {
        let m = |value: f64| json!({"metric": {"value": value, "direction": "max", "target": 0.1}});
        let report = build(&[line(1, "verify_failed", None, m(0.5)), line(2, "verify_failed", None, m(0.7))]);
        let series = report.metric().unwrap();
        assert_eq!(series.direction, Direction::Max, "the ledger's word wins over the target's side");
        let best: Vec<f64> = series.points.iter().map(|p| p.best).collect();
        assert_eq!(best, [0.5, 0.7]);
        let written = serde_json::to_value(Direction::Max).unwrap();
        assert_eq!(written, json!("max"));
    }

    #[test]
    fn a_target_above_the_start_means_higher_is_better() {
        let m = |value: f64| json!({"metric": {"value": value, "target": 0.9}});
        let report = build(&[line(1, "verify_failed", None, m(0.5)), line(2, "verify_failed", None, m(0.7))]);
        let series = report.metric().unwrap();
        assert_eq!(series.direction, Direction::Max);
        assert!((series.points[1].best - 0.7).abs() < 1e-12);
    }
}
