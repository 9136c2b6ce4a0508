//! The test-count ratchet: a pass counts only while verify runs at least as many tests as it
//! ever has, and skips no more than it did.
//!
//! Deleting a failing test, or marking it skipped, makes a check pass without fixing anything.
//! The summaries verify prints say how many tests ran ([`crate::checks::test_count`]); the ratchet
//! keeps, for each suite, the most that ever ran and the fewest skipped in a run where none of
//! that suite's tests failed, and a pass that falls short of either does not count.
//!
//! It arms at the first verify run that prints a recognised summary. Before that it waits, and
//! says once that it does: it never guesses a count. Failing runs teach it (a suite's count only
//! rises), but only a pass is judged, because a failing run may have stopped early: a pass ran
//! everything. Skips are compared only with runs where the suite had no failure, for the same
//! reason: a run cut short by `-x` or `--bail` may not have reached the skipped tests.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::checks::test_count::{Counts, MAX_SUITES, Tally};

/// Suites named in a re-injection before the rest are only counted.
const NAMED_SUITES: usize = 8;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RatchetStatus {
    /// Verify has not run yet.
    #[default]
    Unset,
    /// Verify ran, but printed no summary this build recognises: nothing to compare yet.
    Waiting,
    /// Counting: each pass is held to the records.
    Armed,
    /// Turned off by the user (`--allow-test-edits`).
    Off,
}

/// What the ratchet knows, carried from stop to stop in the loop's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestRatchet {
    #[serde(default)]
    pub status: RatchetStatus,
    /// Each suite seen, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub suites: BTreeMap<String, SuiteRecord>,
    /// All suites together at the run that armed the ratchet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<Counts>,
    /// All suites together at the last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<Counts>,
}

/// The best one suite has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SuiteRecord {
    /// The most of its tests that ever ran (passed or failed).
    pub most_ran: u64,
    /// The fewest it skipped in a run where none of its tests failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fewest_skipped: Option<u64>,
}

/// Why a pass does not count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// Tests that ran before and did not run now.
    pub missing: u64,
    /// Tests skipped now beyond the fewest skipped before.
    pub more_skipped: u64,
    /// One line per suite that fell short, e.g. `pytest: 10 ran, 12 before`.
    pub suites: Vec<String>,
}

impl Shortfall {
    /// The paragraph of the re-injection that asks for the tests back.
    pub(crate) fn explain(&self, verify: &str) -> String {
        let mut out = format!("\nVerify passed, but {}, so the pass does not count:\n", self.summary());
        for suite in &self.suites {
            out.push_str(&format!("  - {suite}\n"));
        }
        out.push_str(&format!(
            "Put the tests back: restore every test you deleted, renamed or emptied, and remove the \
             skip, xfail, ignore and only markers you added. Then run `{verify}` and see every test \
             run and pass.\n"
        ));
        out
    }

    /// `2 tests fewer ran and 1 more was skipped`, for the status line and the ledger.
    pub(crate) fn summary(&self) -> String {
        let plural =
            |n: u64, one: &str, many: &str| if n == 1 { one.to_string() } else { format!("{n} {many}") };
        match (self.missing, self.more_skipped) {
            (0, skipped) => format!("{} skipped than before", plural(skipped, "1 more test", "more tests")),
            (missing, 0) => format!("{} fewer ran than before", plural(missing, "1 test", "tests")),
            (missing, skipped) => format!(
                "{} fewer ran and {} skipped",
                plural(missing, "1 test", "tests"),
                plural(skipped, "1 more", "more")
            ),
        }
    }
}

/// What the ratchet makes of one verify run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestJudgement {
    pub next: TestRatchet,
    /// All suites of this run together, when it printed a summary.
    pub counts: Option<Counts>,
    /// Set when verify passed but fell short of the records: the pass does not count.
    pub shortfall: Option<Shortfall>,
    /// Said once, when the ratchet arms or finds nothing to count.
    pub news: Option<News>,
}

/// What the ratchet says once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum News {
    /// It armed: what it counts. The model hears this too.
    Counting(String),
    /// It found nothing to count. Only the user hears this: a model that learns the tests are
    /// not counted has learned how to pass.
    NotCounting(String),
}

impl News {
    pub(crate) fn text(&self) -> &str {
        match self {
            News::Counting(text) | News::NotCounting(text) => text,
        }
    }

    pub(crate) fn for_the_model(&self) -> Option<&str> {
        match self {
            News::Counting(text) => Some(text),
            News::NotCounting(_) => None,
        }
    }
}

impl TestRatchet {
    /// A ratchet for a new loop; `off` when the user allows test edits.
    pub(crate) fn new(off: bool) -> TestRatchet {
        TestRatchet {
            status: if off { RatchetStatus::Off } else { RatchetStatus::Unset },
            ..TestRatchet::default()
        }
    }

    /// Nothing recorded yet and nothing turned off: the state file leaves it out.
    pub(crate) fn is_unset(&self) -> bool {
        *self == TestRatchet::default()
    }

    /// Judges a verify run with these counts; `passed` is whether verify exited 0.
    pub(crate) fn judge(&self, tally: &Tally, passed: bool) -> TestJudgement {
        let mut next = self.clone();
        let counts = (!tally.suites.is_empty()).then(|| tally.total());
        if tally.suites.is_empty() {
            return match self.status {
                RatchetStatus::Unset => {
                    next.status = RatchetStatus::Waiting;
                    let why = tally.note.map_or_else(String::new, |note| format!(" ({note})"));
                    TestJudgement {
                        next,
                        counts,
                        shortfall: None,
                        news: Some(News::NotCounting(format!(
                            "No test runner's summary was recognised in verify's output{why}, so the \
                             test-count ratchet is off until a run prints one."
                        ))),
                    }
                }
                RatchetStatus::Armed if passed => {
                    next.last = Some(Counts::default());
                    TestJudgement { shortfall: self.shortfall(tally), next, counts, news: None }
                }
                _ => TestJudgement { next, counts, shortfall: None, news: None },
            };
        }
        match self.status {
            RatchetStatus::Off => TestJudgement { next, counts, shortfall: None, news: None },
            RatchetStatus::Unset | RatchetStatus::Waiting => {
                next.status = RatchetStatus::Armed;
                next.first = Some(tally.total());
                next.record(tally);
                let runners: Vec<&str> = tally.runners().iter().map(|r| r.name()).collect();
                let news = format!(
                    "Tests counted ({}): {}. From now on a pass that runs fewer tests, or skips more, \
                     does not count.",
                    runners.join(", "),
                    tally.total()
                );
                TestJudgement { next, counts, shortfall: None, news: Some(News::Counting(news)) }
            }
            RatchetStatus::Armed => {
                let shortfall = if passed { self.shortfall(tally) } else { None };
                next.record(tally);
                TestJudgement { next, counts, shortfall, news: None }
            }
        }
    }

    /// How this run falls short of the records, if it does.
    fn shortfall(&self, tally: &Tally) -> Option<Shortfall> {
        let mut shortfall = Shortfall::default();
        for (name, record) in &self.suites {
            match tally.suites.iter().find(|s| &s.name == name) {
                Some(suite) => {
                    let counts = suite.counts;
                    if counts.ran() < record.most_ran {
                        shortfall.missing += record.most_ran - counts.ran();
                        shortfall.suites.push(format!(
                            "{name}: {} ran, {} before",
                            counts.ran(),
                            record.most_ran
                        ));
                    }
                    if let Some(fewest) = record.fewest_skipped.filter(|f| counts.skipped > *f) {
                        shortfall.more_skipped += counts.skipped - fewest;
                        shortfall.suites.push(format!("{name}: {} skipped, {fewest} before", counts.skipped));
                    }
                }
                None if record.most_ran > 0 => {
                    shortfall.missing += record.most_ran;
                    shortfall
                        .suites
                        .push(format!("{name}: no summary this time, {} ran before", record.most_ran));
                }
                None => {}
            }
        }
        if shortfall.suites.len() > NAMED_SUITES {
            let more = shortfall.suites.len() - NAMED_SUITES;
            shortfall.suites.truncate(NAMED_SUITES);
            shortfall.suites.push(format!("and {more} more"));
        }
        (shortfall.missing > 0 || shortfall.more_skipped > 0).then_some(shortfall)
    }

    /// Raises the records with this run.
    fn record(&mut self, tally: &Tally) {
        for suite in &tally.suites {
            if !self.suites.contains_key(&suite.name) && self.suites.len() >= MAX_SUITES {
                continue;
            }
            let record = self.suites.entry(suite.name.clone()).or_default();
            record.most_ran = record.most_ran.max(suite.counts.ran());
            if suite.counts.failed == 0 {
                record.fewest_skipped =
                    Some(record.fewest_skipped.map_or(suite.counts.skipped, |f| f.min(suite.counts.skipped)));
            }
        }
        self.last = Some(tally.total());
    }

    /// What `/loop-status` says about the tests; `None` before verify ran.
    pub(crate) fn status_line(&self) -> Option<String> {
        match self.status {
            RatchetStatus::Unset => None,
            RatchetStatus::Off => Some("may be changed (--allow-test-edits); not counted".into()),
            RatchetStatus::Waiting => Some("no test runner's summary recognised yet; not counted".into()),
            RatchetStatus::Armed => Some(format!(
                "last run {}; the most that ran: {}",
                self.last.unwrap_or_default(),
                self.most_ran().unwrap_or_default()
            )),
        }
    }

    /// The most tests that ran, all suites together; `None` before the ratchet armed.
    pub(crate) fn most_ran(&self) -> Option<u64> {
        (self.status == RatchetStatus::Armed || !self.suites.is_empty())
            .then(|| self.suites.values().map(|r| r.most_ran).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::test_count::tally;

    fn pytest(passed: u64, failed: u64, skipped: u64) -> String {
        format!(
            "============================= test session starts ==============================\n\
             ======== {passed} passed, {failed} failed, {skipped} skipped in 0.10s ========\n"
        )
    }

    fn cargo(binary: &str, passed: u64, failed: u64, ignored: u64) -> String {
        format!(
            "     Running tests/{binary}.rs (target/debug/deps/{binary}-0123456789abcdef)\n\nrunning {} tests\n\n\
             test result: ok. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; 0 filtered out\n",
            passed + failed + ignored
        )
    }

    /// The ratchet after the given runs, each `(output, passed)`, and the last judgement.
    fn after(runs: &[(&str, bool)]) -> TestJudgement {
        let mut ratchet = TestRatchet::new(false);
        let mut last = None;
        for (output, passed) in runs {
            let judgement = ratchet.judge(&tally(output), *passed);
            ratchet = judgement.next.clone();
            last = Some(judgement);
        }
        last.unwrap()
    }

    #[test]
    fn arms_at_the_first_run_with_a_summary_and_says_so_once() {
        let first = after(&[(&pytest(8, 2, 1), false)]);
        assert_eq!(first.next.status, RatchetStatus::Armed);
        assert_eq!(
            first.news.as_ref().and_then(News::for_the_model),
            Some(
                "Tests counted (pytest): 10 ran (8 passed, 2 failed), 1 skipped. From now on a pass that \
                 runs fewer tests, or skips more, does not count."
            )
        );
        assert_eq!(first.next.first, Some(Counts { passed: 8, failed: 2, skipped: 1 }));
        let second = first.next.judge(&tally(&pytest(9, 1, 1)), false);
        assert_eq!(second.news, None);
    }

    #[test]
    fn waits_without_a_summary_says_why_once_and_arms_later() {
        let waiting = after(&[("error: could not compile\n", false)]);
        assert_eq!(waiting.next.status, RatchetStatus::Waiting);
        let news = waiting.news.as_ref().unwrap();
        assert!(news.text().contains("No test runner's summary"), "{news:?}");
        assert_eq!(news.for_the_model(), None, "a model must not learn that its tests are not counted");
        let again = waiting.next.judge(&tally("still broken\n"), false);
        assert_eq!((again.news, again.next.status), (None, RatchetStatus::Waiting));
        let armed = again.next.judge(&tally(&pytest(3, 0, 0)), true);
        assert_eq!(armed.next.status, RatchetStatus::Armed);
        assert_eq!(armed.shortfall, None, "nothing to compare with yet");
        let go = after(&[("ok  \texample.com/calc\t0.01s\n", true)]);
        assert!(go.news.as_ref().is_some_and(|n| n.text().contains("-v")), "{go:?}");
    }

    #[test]
    fn a_pass_with_fewer_tests_does_not_count() {
        let held = after(&[(&pytest(8, 2, 0), false), (&pytest(8, 0, 0), true)]);
        let shortfall = held.shortfall.unwrap();
        assert_eq!((shortfall.missing, shortfall.more_skipped), (2, 0));
        assert_eq!(shortfall.suites, ["pytest: 8 ran, 10 before"]);
        assert_eq!(shortfall.summary(), "2 tests fewer ran than before");
        let counted = after(&[(&pytest(8, 2, 0), false), (&pytest(10, 0, 0), true)]);
        assert_eq!(counted.shortfall, None);
        let more = after(&[(&pytest(8, 2, 0), false), (&pytest(13, 0, 0), true)]);
        assert_eq!(more.shortfall, None, "new tests are welcome");
    }

    #[test]
    fn the_highest_count_seen_is_kept() {
        let held = after(&[(&pytest(8, 2, 0), false), (&pytest(10, 3, 0), false), (&pytest(12, 0, 0), true)]);
        assert_eq!(held.shortfall.map(|s| s.missing), Some(1));
    }

    #[test]
    fn a_pass_that_skips_more_than_a_clean_run_did_does_not_count() {
        let first = format!("{}{}", cargo("calc", 3, 1, 0), cargo("parse", 4, 0, 0));
        // One test added to `parse` and one skipped: as many ran, one more skipped.
        let then = format!("{}{}", cargo("calc", 4, 0, 0), cargo("parse", 4, 0, 1));
        let held = after(&[(&first, false), (&then, true)]);
        let shortfall = held.shortfall.unwrap();
        assert_eq!((shortfall.missing, shortfall.more_skipped), (0, 1));
        assert_eq!(shortfall.suites, ["cargo test: parse (tests/parse.rs): 1 skipped, 0 before"]);
        assert_eq!(shortfall.summary(), "1 more test skipped than before");
    }

    #[test]
    fn skips_are_not_compared_with_a_run_cut_short_by_a_failure() {
        // `pytest -x` stopped at the first failure, before the skipped tests.
        let held = after(&[(&pytest(3, 1, 0), false), (&pytest(8, 0, 2), true)]);
        assert_eq!(held.shortfall, None);
    }

    #[test]
    fn a_suite_missing_from_a_pass_is_tests_missing_but_not_from_a_failing_run() {
        let both = format!("{}{}", cargo("calc", 3, 0, 0), cargo("parse", 2, 0, 0));
        let one = cargo("calc", 3, 0, 0);
        let held = after(&[(&both, false), (&one, true)]);
        assert_eq!(held.shortfall.as_ref().map(|s| s.missing), Some(2));
        assert_eq!(
            held.shortfall.unwrap().suites,
            ["cargo test: parse (tests/parse.rs): no summary this time, 2 ran before"]
        );
        let failing = after(&[(&both, false), (&one, false)]);
        assert_eq!(failing.shortfall, None);
        assert_eq!(failing.next.suites["cargo test: parse (tests/parse.rs)"].most_ran, 2, "kept");
    }

    #[test]
    fn a_pass_without_any_summary_after_one_was_seen_does_not_count() {
        // `sys.exit(0)` in a conftest.py: pytest prints nothing and exits 0.
        let held = after(&[(&pytest(8, 2, 0), false), ("", true)]);
        assert_eq!(held.shortfall.map(|s| s.missing), Some(10));
    }

    #[test]
    fn off_judges_nothing_and_records_nothing() {
        let off = TestRatchet::new(true);
        let judgement = off.judge(&tally(&pytest(1, 0, 0)), true);
        assert_eq!(judgement.next, off);
        assert_eq!((judgement.shortfall, judgement.news), (None, None));
        assert_eq!(off.judge(&tally(""), true).news, None);
        assert!(!off.is_unset());
        assert!(TestRatchet::new(false).is_unset());
    }

    #[test]
    fn a_long_shortfall_names_some_suites_and_counts_the_rest() {
        let many: String = (0..20).map(|i| cargo(&format!("t{i:02}"), 1, 0, 0)).collect();
        let held = after(&[(&many, false), ("", true)]);
        let suites = held.shortfall.unwrap().suites;
        assert_eq!(suites.len(), NAMED_SUITES + 1);
        assert_eq!(suites.last().map(String::as_str), Some("and 12 more"));
    }

    #[test]
    fn keeps_the_last_run_and_the_most_that_ran() {
        let judged = after(&[(&pytest(8, 2, 1), false), (&pytest(9, 0, 1), true)]);
        assert_eq!(judged.next.last, Some(Counts { passed: 9, failed: 0, skipped: 1 }));
        assert_eq!(judged.next.most_ran(), Some(10));
        assert_eq!(TestRatchet::default().most_ran(), None);
        assert_eq!(
            judged.next.status_line().as_deref(),
            Some("last run 9 ran (9 passed, 0 failed), 1 skipped; the most that ran: 10")
        );
        assert_eq!(TestRatchet::default().status_line(), None);
        assert!(TestRatchet::new(true).status_line().is_some_and(|s| s.contains("--allow-test-edits")));
    }

    #[test]
    fn the_records_survive_the_state_file() {
        let judged = after(&[(&format!("{}{}", cargo("calc", 3, 1, 0), pytest(2, 0, 1)), false)]);
        let yaml = serde_saphyr::to_string(&judged.next).unwrap();
        let back: TestRatchet = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, judged.next);
    }
}
