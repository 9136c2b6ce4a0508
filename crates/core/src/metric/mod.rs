//! Metric mode's numbers: reading a measurement from a command's output, the target and its
//! direction, the minimum gain, the median of repeated runs and the noise floor of the baseline.
//!
//! Everything here is pure, so the rules a keep depends on are tested without processes.

pub(crate) mod keep;
pub(crate) mod lessons;
pub(crate) mod measure;
use std::fmt;
use std::str::FromStr;

pub(crate) use self::keep::Discard;
pub(crate) use self::keep::Judgement;
pub(crate) use self::keep::Measured;
pub(crate) use self::keep::MetricFacts;
pub(crate) use self::keep::MetricProgress;
pub(crate) use self::keep::MetricRecord;
pub(crate) use self::keep::MetricSettings;
pub(crate) use self::keep::Rung;
pub(crate) use self::lessons::Lesson;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A finite measured value. Kept in the state file and the ledger, so it compares and hashes by
/// its bits (a loop never stores NaN: [`parse_value`] refuses it).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Number(pub f64);

impl PartialEq for Number {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Number {}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(d)?;
        if value.is_finite() {
            Ok(Number(value))
        } else {
            Err(serde::de::Error::custom("not a finite number"))
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&show(self.0))
    }
}

/// A number as people write it: no trailing zeros, at most 6 significant decimals.
pub(crate) fn show(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    if value.abs() >= 1e-3 && value.abs() < 1e15 {
        let text = format!("{value:.6}");
        return text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    format!("{value:e}")
}

/// Whether lower or higher is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Direction {
    Min,
    Max,
}

impl Direction {
    /// How much `candidate` improves on `best`: positive when it is better.
    pub(crate) fn gain(self, best: f64, candidate: f64) -> f64 {
        match self {
            Direction::Min => best - candidate,
            Direction::Max => candidate - best,
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Direction::Min => "lower",
            Direction::Max => "higher",
        }
    }
}

impl FromStr for Direction {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "min" | "lower" | "minimize" | "minimise" => Ok(Direction::Min),
            "max" | "higher" | "maximize" | "maximise" => Ok(Direction::Max),
            _ => Err("give min (lower is better) or max (higher is better)".into()),
        }
    }
}

/// The comparison of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Comparison {
    #[serde(rename = "<=")]
    AtMost,
    #[serde(rename = "<")]
    Below,
    #[serde(rename = ">=")]
    AtLeast,
    #[serde(rename = ">")]
    Above,
}

impl Comparison {
    fn symbol(self) -> &'static str {
        match self {
            Comparison::AtMost => "<=",
            Comparison::Below => "<",
            Comparison::AtLeast => ">=",
            Comparison::Above => ">",
        }
    }
}

/// `--target`: a comparison with a number, e.g. `<= 120`, `>= 0.93`, `< 1.5e-3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Target {
    pub comparison: Comparison,
    pub value: Number,
}

impl Target {
    /// The direction the target implies: `<`/`<=` mean lower is better.
    pub(crate) fn direction(self) -> Direction {
        match self.comparison {
            Comparison::AtMost | Comparison::Below => Direction::Min,
            Comparison::AtLeast | Comparison::Above => Direction::Max,
        }
    }

    pub(crate) fn is_met_by(self, value: f64) -> bool {
        let target = self.value.0;
        match self.comparison {
            Comparison::AtMost => value <= target,
            Comparison::Below => value < target,
            Comparison::AtLeast => value >= target,
            Comparison::Above => value > target,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.comparison.symbol(), self.value)
    }
}

impl FromStr for Target {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (comparison, rest) = [
            ("<=", Comparison::AtMost),
            ("≤", Comparison::AtMost),
            (">=", Comparison::AtLeast),
            ("≥", Comparison::AtLeast),
            ("<", Comparison::Below),
            (">", Comparison::Above),
        ]
        .into_iter()
        .find_map(|(symbol, comparison)| text.strip_prefix(symbol).map(|rest| (comparison, rest)))
        .ok_or("start with a comparison: <=, <, >= or >, e.g. --target \"<= 120\"")?;
        let value =
            finite(rest.trim()).ok_or("give a number after the comparison, e.g. --target \"<= 120\"")?;
        Ok(Target { comparison, value: Number(value) })
    }
}

/// `--min-gain`: how much better than the best a change must be, absolute or in percent of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MinGain {
    Absolute(Number),
    Percent(Number),
}

impl Default for MinGain {
    fn default() -> Self {
        MinGain::Absolute(Number(0.0))
    }
}

impl MinGain {
    /// The gain needed over `best`, as an absolute amount.
    pub(crate) fn over(self, best: f64) -> f64 {
        match self {
            MinGain::Absolute(n) => n.0,
            MinGain::Percent(p) => best.abs() * p.0 / 100.0,
        }
    }
}

impl fmt::Display for MinGain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MinGain::Absolute(n) => write!(f, "{n}"),
            MinGain::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl FromStr for MinGain {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (number, percent) = match text.strip_suffix('%') {
            Some(number) => (number.trim(), true),
            None => (text, false),
        };
        let value = finite(number)
            .filter(|v| *v >= 0.0)
            .ok_or("give a number of at least 0, or a percentage, e.g. --min-gain 2 or --min-gain 1%")?;
        Ok(if percent { MinGain::Percent(Number(value)) } else { MinGain::Absolute(Number(value)) })
    }
}

fn finite(text: &str) -> Option<f64> {
    let value: f64 = text.parse().ok()?;
    value.is_finite().then_some(value)
}

/// The measurement a metric command printed: the value of the last `METRIC name=value` line if
/// there is one, else the last number in the output. The name comes with a `METRIC` line.
pub(crate) fn parse_value(output: &str) -> Option<(f64, Option<String>)> {
    let named = output.lines().rev().find_map(|line| {
        let rest = line.trim().strip_prefix("METRIC")?;
        let (name, value) = rest.trim().split_once('=')?;
        let value = finite(value.trim())?;
        let name = name.trim();
        Some((value, (!name.is_empty()).then(|| name.to_string())))
    });
    named.or_else(|| last_number(output).map(|v| (v, None)))
}

/// The last number in `text`: the last run of digits, signs, points and exponents that reads as
/// one number. A run that does not (`1.2.3`) is a version, not a measurement, and is passed over.
fn last_number(text: &str) -> Option<f64> {
    let is_part = |c: char| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-');
    let mut tokens = Vec::new();
    let mut from = None;
    for (i, c) in text.char_indices() {
        if is_part(c) {
            from.get_or_insert(i);
        } else if let Some(f) = from.take() {
            tokens.push((f, &text[f..i]));
        }
    }
    if let Some(f) = from {
        tokens.push((f, &text[f..]));
    }
    tokens.into_iter().rev().find_map(|(from, token)| {
        let piece = token.trim_end_matches('.');
        let value = finite(piece).filter(|_| piece.bytes().any(|b| b.is_ascii_digit()))?;
        // A sign glued to a word (`item-5`) is a hyphen, not a minus.
        let glued =
            piece.starts_with('-') && text[..from].chars().next_back().is_some_and(char::is_alphanumeric);
        Some(if glued { value.abs() } else { value })
    })
}

/// The median of `values`; `None` for none.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 { sorted[mid] } else { f64::midpoint(sorted[mid - 1], sorted[mid]) })
}

/// The noise floor of repeated runs of an unchanged tree: their spread (largest minus smallest).
/// A change must beat the best by more than this to be told from noise.
pub(crate) fn noise_floor(values: &[f64]) -> f64 {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo.is_finite() && hi.is_finite() { hi - lo } else { 0.0 }
}

#[cfg(test)]
// The values compared are exact in binary (small integers and halves).
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    #[test]
    fn the_last_number_or_the_metric_line() {
        assert_eq!(parse_value("build ok\ntime: 124.5 ms\n"), Some((124.5, None)));
        assert_eq!(parse_value("3 runs\n1.5e-3\n"), Some((1.5e-3, None)));
        assert_eq!(parse_value("delta -4\n"), Some((-4.0, None)));
        assert_eq!(parse_value("binary-size 2048 bytes (v1.2.3)"), Some((2048.0, None)));
        assert_eq!(parse_value("METRIC ms=131\nwarmup 9999\n"), Some((131.0, Some("ms".into()))));
        assert_eq!(parse_value("METRIC a=1\nMETRIC loss = 0.25\n"), Some((0.25, Some("loss".into()))));
        assert_eq!(parse_value("METRIC =7\n"), Some((7.0, None)));
        assert_eq!(parse_value("item-5"), Some((5.0, None)));
        assert_eq!(parse_value("took 12."), Some((12.0, None)));
    }

    #[test]
    fn no_number_is_no_measurement() {
        assert_eq!(parse_value(""), None);
        assert_eq!(parse_value("error: nothing to measure\n"), None);
        assert_eq!(parse_value("NaN inf"), None);
        // A METRIC line without a number falls back to the last number.
        assert_eq!(parse_value("METRIC ms=fast\nran 3\n"), Some((3.0, None)));
    }

    #[test]
    fn targets_parse_and_set_the_direction() {
        let t: Target = "<= 120".parse().unwrap();
        assert_eq!(t, Target { comparison: Comparison::AtMost, value: Number(120.0) });
        assert_eq!(t.direction(), Direction::Min);
        assert!(t.is_met_by(120.0) && !t.is_met_by(120.5));
        let t: Target = ">=0.93".parse().unwrap();
        assert_eq!(t.direction(), Direction::Max);
        assert!(t.is_met_by(0.93) && !t.is_met_by(0.92));
        let t: Target = "< 1.5e-3".parse().unwrap();
        assert!(t.is_met_by(1e-3) && !t.is_met_by(1.5e-3));
        let t: Target = "> -2".parse().unwrap();
        assert!(t.is_met_by(-1.0) && !t.is_met_by(-2.0));
        assert_eq!(t.to_string(), "> -2");
        for bad in ["120", "<=", "== 3", "<= abc", "<= inf", "<= NaN", ""] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
        }
    }

    #[test]
    fn min_gain_is_absolute_or_percent() {
        assert_eq!("2".parse::<MinGain>().unwrap().over(130.0), 2.0);
        assert_eq!("10%".parse::<MinGain>().unwrap().over(130.0), 13.0);
        assert_eq!("1 %".parse::<MinGain>().unwrap().to_string(), "1%");
        for bad in ["-1", "x", "%", "inf"] {
            assert!(bad.parse::<MinGain>().is_err(), "{bad}");
        }
    }

    #[test]
    fn median_and_noise_floor() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(noise_floor(&[130.0, 132.0, 131.0]), 2.0);
        assert_eq!(noise_floor(&[5.0]), 0.0);
        assert_eq!(noise_floor(&[]), 0.0);
    }

    #[test]
    fn directions_and_gains() {
        assert_eq!(Direction::Min.gain(131.0, 124.0), 7.0);
        assert!(Direction::Max.gain(0.9, 0.93) > 0.0);
        assert_eq!("max".parse::<Direction>(), Ok(Direction::Max));
        assert!("up".parse::<Direction>().is_err());
    }

    #[test]
    fn numbers_show_as_written() {
        assert_eq!(show(124.0), "124");
        assert_eq!(show(0.25), "0.25");
        assert_eq!(show(1.5e-5), "1.5e-5");
        assert_eq!(Number(-3.5).to_string(), "-3.5");
    }
}
