//! Running a metric loop's commands: the metric (median of its runs) and the guard, through
//! verify's runner, so they get the same directory, timeout, process-group kill and sandbox.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::checks::{VerifyError, VerifyOutcome, VerifySpec};
use crate::metric;
use crate::metric::keep::{Measured, MetricSettings};

/// How much of a run's output is searched for its number.
const SEARCHED_CHARS: usize = 8_000;

/// A measurement: what it gave, and each run's value (for the baseline's noise floor).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Measurement {
    pub measured: Measured,
    pub runs: Vec<f64>,
}

fn spec(command: &str, cwd: &Path, timeout: Duration, sandbox: &[OsString]) -> VerifySpec {
    VerifySpec { command: command.to_string(), cwd: cwd.to_path_buf(), timeout, sandbox: sandbox.to_vec() }
}

/// Runs the metric `runs` times (`settings.runs` when `None`) and takes the median. The first
/// failed run fails the measurement.
pub(crate) fn run_metric(
    settings: &MetricSettings,
    runs: Option<u32>,
    cwd: &Path,
    timeout: Duration,
    sandbox: &[OsString],
) -> Result<Measurement, VerifyError> {
    let mut values = Vec::new();
    let mut name = None;
    for _ in 0..runs.unwrap_or(settings.runs).max(1) {
        let outcome = spec(&settings.command, cwd, timeout, sandbox).run()?;
        match reading(&outcome, timeout) {
            Ok((value, found)) => {
                values.push(value);
                name = found.or(name);
            }
            Err(why) => return Ok(Measurement { measured: Measured::Failed(why), runs: values }),
        }
    }
    let value = metric::median(&values).unwrap_or_default();
    Ok(Measurement { measured: Measured::Value { value, name }, runs: values })
}

/// The number one run printed, or why there is none.
fn reading(outcome: &VerifyOutcome, timeout: Duration) -> Result<(f64, Option<String>), String> {
    if outcome.timed_out {
        return Err(format!("it did not finish within {} s", timeout.as_secs()));
    }
    if !outcome.passed() {
        return Err(format!("it failed: {}", outcome.describe()));
    }
    // A number printed after the command exited is not its measurement, whichever it would be.
    if outcome.output.cut_at_exit() {
        return Err("a process it left behind kept its output open after it exited, and what it printed \
                    then was not read; make the command wait for everything it starts"
            .to_string());
    }
    metric::parse_value(&outcome.output.excerpt(SEARCHED_CHARS))
        .ok_or_else(|| "it printed no number (print one, or a line `METRIC name=value`)".to_string())
}

/// Runs the guard command, when there is one.
pub(crate) fn run_guard(
    settings: &MetricSettings,
    cwd: &Path,
    timeout: Duration,
    sandbox: &[OsString],
) -> Result<Option<VerifyOutcome>, VerifyError> {
    settings.guard.as_deref().map(|g| spec(g, cwd, timeout, sandbox).run()).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::keep::tests::settings;

    fn run(command: &str, runs: u32) -> Measurement {
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings();
        s.command = command.into();
        run_metric(&s, Some(runs), dir.path(), Duration::from_secs(5), &[]).unwrap()
    }

    #[test]
    fn the_median_of_the_runs() {
        // Each run appends a line and prints the line count: 1, 2, 3 → median 2.
        let m = run("echo x >> n; wc -l < n", 3);
        assert_eq!(m.measured, Measured::Value { value: 2.0, name: None });
        assert_eq!(m.runs, [1.0, 2.0, 3.0]);
        let m = run("echo 'METRIC ms=12'", 1);
        assert_eq!(m.measured, Measured::Value { value: 12.0, name: Some("ms".into()) });
    }

    #[test]
    fn a_failing_or_silent_metric_is_a_failed_measurement() {
        assert!(matches!(run("echo 5; exit 3", 1).measured, Measured::Failed(why) if why.contains("exit 3")));
        assert!(matches!(run("echo none", 1).measured, Measured::Failed(why) if why.contains("no number")));
    }
}
