//! The failures a check's output reports, by name: what the re-injection leads with, so that the
//! agent's next turn is a targeted fix rather than a blind retry.
//!
//! Read from the whole output as it streams past, in bounded memory, whatever its size.

/// A failing test or diagnostic, as the output names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The test's full name (`tests/test_calc.py::test_add[2-3]`, `calc::tests::adds`) or the
    /// diagnostic's code and file (`error[E0308] src/lib.rs`).
    pub(crate) name: String,
    /// Where it failed (`src/lib.rs:12:5`), when the output says.
    pub(crate) location: Option<String>,
    /// The lines that say what went wrong (the assertion with expected and actual, the panic
    /// message, the compiler's error), most telling first.
    pub(crate) details: Vec<String>,
}

/// What a check's output reports as failing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FailureDigest {
    /// The runner or compiler whose report was read (`pytest`, `cargo test`, `rustc`), or `None`
    /// when no known format was found and [`FailureDigest::errors`] holds the generic reading.
    pub(crate) runner: Option<&'static str>,
    /// The failures, in the order the output reported them; each name once.
    pub(crate) failures: Vec<Failure>,
    /// How many more failures were reported than the digest kept names of.
    pub(crate) more: usize,
    /// With no runner: error-looking lines with a little context, in order.
    pub(crate) errors: Vec<String>,
}

/// Reads an output chunk by chunk and keeps what [`FailureDigest`] needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FailureScanner {
    pending: Vec<u8>,
    digest: FailureDigest,
}

/// Longest line read; the rest of a longer line is skipped.
const MAX_LINE_BYTES: usize = 4096;
/// Most error-looking lines kept by the generic reading.
const MAX_ERRORS: usize = 40;

impl FailureScanner {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        for &byte in chunk {
            if byte == b'\n' {
                let line = std::mem::take(&mut self.pending);
                self.line(&line);
            } else if self.pending.len() < MAX_LINE_BYTES {
                self.pending.push(byte);
            }
        }
    }

    /// What the output read so far reports (a last line without its newline included).
    pub(crate) fn digest(&self) -> FailureDigest {
        let mut scanner = self.clone();
        let line = std::mem::take(&mut scanner.pending);
        scanner.line(&line);
        scanner.digest
    }

    fn line(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\r');
        let lower = text.to_ascii_lowercase();
        if (lower.contains("error") || lower.contains("fail") || lower.contains("panicked"))
            && self.digest.errors.len() < MAX_ERRORS
        {
            self.digest.errors.push(text.to_string());
        }
    }
}
