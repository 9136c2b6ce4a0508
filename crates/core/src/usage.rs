//! Model usage: the tokens a session spent, per model, as the host's transcript records them.
//!
//! What counts toward `--max-tokens` is [`TokenCounts::counted`]: input, output and cache-write
//! tokens. Cache reads are kept and shown but not counted: every request of a long session
//! re-reads its whole context from the cache at a tenth of the input price, so counting them
//! would make the budget measure context length times requests rather than work done.

use std::collections::BTreeMap;
use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

/// Tokens of one kind of request, as in Claude Code's `message.usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TokenCounts {
    #[serde(default)]
    pub(crate) input: u64,
    #[serde(default)]
    pub(crate) output: u64,
    /// `cache_creation_input_tokens`: input written to the prompt cache.
    #[serde(default)]
    pub(crate) cache_write: u64,
    /// `cache_read_input_tokens`: input read back from the prompt cache.
    #[serde(default)]
    pub(crate) cache_read: u64,
}

impl TokenCounts {
    /// The tokens that count toward a token budget (see the module docs).
    pub(crate) fn counted(&self) -> u64 {
        self.input.saturating_add(self.output).saturating_add(self.cache_write)
    }

    pub(crate) fn is_zero(&self) -> bool {
        *self == TokenCounts::default()
    }
}

impl AddAssign for TokenCounts {
    fn add_assign(&mut self, other: TokenCounts) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
    }
}

/// Tokens per model id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Usage(pub(crate) BTreeMap<String, TokenCounts>);

impl Usage {
    pub(crate) fn add(&mut self, model: &str, counts: TokenCounts) {
        *self.0.entry(model.to_string()).or_default() += counts;
    }

    pub(crate) fn merge(&mut self, other: &Usage) {
        for (model, counts) in &other.0 {
            self.add(model, *counts);
        }
    }

    /// All models together.
    pub(crate) fn total(&self) -> TokenCounts {
        let mut total = TokenCounts::default();
        for counts in self.0.values() {
            total += *counts;
        }
        total
    }
}

/// A token count for people: `950`, `12.3k`, `4.56M`.
pub(crate) fn human_tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.2}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_input_output_and_cache_writes_not_cache_reads() {
        let c = TokenCounts { input: 10, output: 20, cache_write: 300, cache_read: 40_000 };
        assert_eq!(c.counted(), 330);
    }

    #[test]
    fn sums_per_model_and_in_all() {
        let mut usage = Usage::default();
        usage.add("a", TokenCounts { input: 1, output: 2, ..TokenCounts::default() });
        usage.add("b", TokenCounts { input: 10, ..TokenCounts::default() });
        usage.add("a", TokenCounts { cache_read: 5, ..TokenCounts::default() });
        assert_eq!(usage.0["a"], TokenCounts { input: 1, output: 2, cache_write: 0, cache_read: 5 });
        assert_eq!(usage.total().counted(), 13);
        assert_eq!(
            serde_json::to_string(&usage).unwrap(),
            r#"{"a":{"input":1,"output":2,"cache_write":0,"cache_read":5},"b":{"input":10,"output":0,"cache_write":0,"cache_read":0}}"#
        );
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(human_tokens(950), "950");
        assert_eq!(human_tokens(12_345), "12.3k");
        assert_eq!(human_tokens(4_560_000), "4.56M");
    }
}
