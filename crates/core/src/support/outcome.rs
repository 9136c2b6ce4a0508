//! What a subcommand hands back to `main`: text for stdout and an exit code.

/// Exit codes of `loop-hook`, documented in `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// Done; for `stop-hook`, always (its verdict is in its output).
    Success = 0,
    /// The command was understood but refused (invalid loop text, a loop already running, no
    /// session id); the output says why.
    Refused = 1,
    /// loop-hook itself was called wrongly (unknown subcommand or option).
    Usage = 2,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub code: Code,
    pub stdout: String,
}

impl Outcome {
    pub(crate) fn ok(stdout: impl Into<String>) -> Outcome {
        Outcome { code: Code::Success, stdout: stdout.into() }
    }

    pub(crate) fn refused(stdout: impl Into<String>) -> Outcome {
        Outcome { code: Code::Refused, stdout: stdout.into() }
    }
}
