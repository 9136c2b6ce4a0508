//! `RSpec`.

use super::lines::Line;
use super::{Sink, Slot};

const BODY_LINES: u32 = 200;

/// Under `Failures:`, each failure is `  1) Calc divides` with `Failure/Error:`, `expected:` and
/// `got:` under it and its place `# ./spec/calc_spec.rb:10:in ...`; `Failed examples:` lists them
/// again as `rspec ./spec/calc_spec.rb:9 # Calc divides`. (The `Pending:` list is numbered the
/// same way and is no failure.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Rspec {
    in_failures: bool,
    in_examples: bool,
    current: Option<Slot>,
    left: u32,
}

impl Rspec {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let text = line.text;
        if text == "Failures:" {
            self.in_failures = true;
            self.current = None;
            return;
        }
        if text == "Failed examples:" {
            self.in_failures = false;
            self.in_examples = true;
            self.current = None;
            self.left = BODY_LINES * 10;
            return;
        }
        if self.in_examples {
            self.left = self.left.saturating_sub(1);
            if let Some((place, name)) = text.strip_prefix("rspec ").and_then(|rest| rest.split_once(" # ")) {
                let slot = sink.fail("rspec", name);
                sink.locate(slot, place);
            } else if !text.is_empty() || self.left == 0 {
                self.in_examples = false;
            }
            return;
        }
        if !self.in_failures {
            return;
        }
        let trimmed = line.trimmed;
        if let Some(name) = numbered(trimmed)
            && line.indent() == 2
        {
            let slot = sink.fail("rspec", name);
            self.current = sink.wants_details(slot).then_some(slot);
            self.left = BODY_LINES;
            return;
        }
        let Some(slot) = self.current else { return };
        self.left = self.left.saturating_sub(1);
        if self.left == 0 || text.starts_with("Finished in ") {
            self.current = None;
            self.in_failures = !text.starts_with("Finished in ");
            return;
        }
        if let Some(place) = trimmed.strip_prefix("# ") {
            let place = place.split(":in ").next().unwrap_or(place);
            sink.locate(slot, place);
        } else if trimmed != "(compared using ==)" {
            sink.detail(slot, trimmed);
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.current.is_some() || self.in_examples
    }
}

/// The title of `1) title`.
fn numbered(trimmed: &str) -> Option<&str> {
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    let rest = trimmed[digits..].strip_prefix(") ")?;
    (digits > 0).then_some(rest)
}
