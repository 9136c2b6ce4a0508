//! Reading and writing human durations: `300`, `45s`, `5m`, `2h` in; `4.2 s`, `12m 03s` out.

use std::time::Duration;

/// Parses seconds written as a whole number with an optional `s`, `m` or `h` unit.
pub(crate) fn parse_seconds(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let scale = match unit {
        "" | "s" | "sec" | "secs" => 1,
        "m" | "min" | "mins" => 60,
        "h" | "hr" | "hrs" => 3_600,
        _ => {
            return Err("give whole seconds, or a number with s, m or h (e.g. 300, 90s, 5m, 1h)".into());
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| "give whole seconds, or a number with s, m or h (e.g. 300, 90s, 5m, 1h)".to_string())?;
    n.checked_mul(scale).ok_or_else(|| "that is far too long".to_string())
}

/// A short duration for status lines: `850 ms`, `4.2 s`, `3m 07s`, `2h 05m`.
pub(crate) fn human(duration: Duration) -> String {
    let ms = duration.as_millis();
    let secs = duration.as_secs();
    match secs {
        _ if ms < 1_000 => format!("{ms} ms"),
        0..60 => format!("{:.1} s", duration.as_secs_f64()),
        60..3_600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3_600, secs % 3_600 / 60),
    }
}

pub(crate) fn human_ms(ms: u64) -> String {
    human(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_seconds("300"), Ok(300));
        assert_eq!(parse_seconds("90s"), Ok(90));
        assert_eq!(parse_seconds("5m"), Ok(300));
        assert_eq!(parse_seconds("2h"), Ok(7_200));
        assert!(parse_seconds("").is_err());
        assert!(parse_seconds("5 minutes").is_err());
        assert!(parse_seconds("-3").is_err());
        assert!(parse_seconds("1.5m").is_err());
        assert!(parse_seconds("99999999999999999999h").is_err());
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(human(Duration::from_millis(850)), "850 ms");
        assert_eq!(human(Duration::from_millis(4_200)), "4.2 s");
        assert_eq!(human(Duration::from_secs(187)), "3m 07s");
        assert_eq!(human(Duration::from_secs(7_500)), "2h 05m");
    }
}
