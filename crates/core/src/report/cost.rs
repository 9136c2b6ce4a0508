//! What tokens cost at list prices, for the models whose prices are known.
//!
//! Prices are Anthropic's published list prices per million tokens (the pricing page of the
//! Claude documentation): cache writes (5-minute) cost 1.25 times the input price and cache reads
//! a tenth of it. A model not in the table has no cost shown, rather than a guess; batch and
//! long-context prices and subscription plans are not modelled, so the figure is an estimate.

use crate::host::{TokenCounts, Usage};

/// US dollars per million input and output tokens.
struct Price {
    input: f64,
    output: f64,
}

/// Model ids without their date suffix, and their prices.
const PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-5", Price { input: 5.0, output: 25.0 }),
    ("claude-opus-4-1", Price { input: 15.0, output: 75.0 }),
    ("claude-opus-4", Price { input: 15.0, output: 75.0 }),
    ("claude-sonnet-4-5", Price { input: 3.0, output: 15.0 }),
    ("claude-sonnet-4", Price { input: 3.0, output: 15.0 }),
    ("claude-3-7-sonnet", Price { input: 3.0, output: 15.0 }),
    ("claude-haiku-4-5", Price { input: 1.0, output: 5.0 }),
    ("claude-3-5-haiku", Price { input: 0.8, output: 4.0 }),
    ("claude-3-haiku", Price { input: 0.25, output: 1.25 }),
];

/// The price of `model`, by its id with any `-YYYYMMDD` date suffix removed.
fn price(model: &str) -> Option<&'static Price> {
    let base = match model.rsplit_once('-') {
        Some((base, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => model,
    };
    PRICES.iter().find(|(id, _)| *id == base).map(|(_, price)| price)
}

fn dollars(price: &Price, counts: &TokenCounts) -> f64 {
    let per_token = |per_million: f64| per_million / 1e6;
    counts.input as f64 * per_token(price.input)
        + counts.cache_write as f64 * per_token(price.input * 1.25)
        + counts.cache_read as f64 * per_token(price.input * 0.1)
        + counts.output as f64 * per_token(price.output)
}

/// The estimated cost of `usage`: dollars for the models with a known price, and the ids of
/// those without one.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Cost {
    pub(crate) dollars: f64,
    pub(crate) unpriced: Vec<String>,
}

impl Cost {
    pub(crate) fn of(usage: &Usage) -> Cost {
        let mut cost = Cost::default();
        for (model, counts) in &usage.0 {
            match price(model) {
                Some(price) => cost.dollars += dollars(price, counts),
                None if !counts.is_zero() => cost.unpriced.push(model.clone()),
                None => {}
            }
        }
        cost
    }

    /// Whether every model with usage has a price.
    pub(crate) fn is_complete(&self) -> bool {
        self.unpriced.is_empty()
    }
}

/// Dollars for people: `$0.004`, `$1.23`.
pub(crate) fn human_dollars(dollars: f64) -> String {
    if dollars > 0.0 && dollars < 0.01 { format!("${dollars:.3}") } else { format!("${dollars:.2}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_known_models_by_their_base_id() {
        let mut usage = Usage::default();
        let million = TokenCounts {
            input: 1_000_000,
            output: 1_000_000,
            cache_write: 1_000_000,
            cache_read: 1_000_000,
        };
        usage.add("claude-sonnet-4-5-20250929", million);
        // 3 + 15 + 3.75 + 0.30
        assert!((Cost::of(&usage).dollars - 22.05).abs() < 1e-9);
        assert!(Cost::of(&usage).is_complete());
    }

    #[test]
    fn an_unknown_model_is_named_not_guessed() {
        let mut usage = Usage::default();
        usage.add("claude-opus-4-5", TokenCounts { output: 1_000, ..TokenCounts::default() });
        usage.add("claude-opus-9", TokenCounts { output: 1_000, ..TokenCounts::default() });
        usage.add("idle", TokenCounts::default());
        let cost = Cost::of(&usage);
        assert!((cost.dollars - 0.025).abs() < 1e-9);
        assert_eq!(cost.unpriced, ["claude-opus-9"]);
        assert_eq!(human_dollars(0.0042), "$0.004");
        assert_eq!(human_dollars(12.345), "$12.35");
    }
}
