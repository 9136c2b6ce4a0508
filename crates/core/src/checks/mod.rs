//! What a stop checks besides verify's exit code, and verify itself: the oracle fingerprint and its
//! watch, the test suite behind the check, test summaries and the ratchet, skip markers, stalls,
//! the tier verify runs in, the supervisor that runs it detached from the hook, the reviewer that
//! may veto a pass (a command or a built-in agent), the scope a pass's change must stay inside, and
//! a plan with the boxes of its file. Nothing here reads or writes a loop's store.

pub(crate) mod failures;
pub(crate) mod oracle;
pub(crate) mod plan;
pub(crate) mod protect;
pub(crate) mod review;
pub(crate) mod sandbox;
pub(crate) mod scope;
pub(crate) mod stall;
pub(crate) mod test_count;
pub(crate) mod verify;
pub(crate) use self::failures::Failure;
pub(crate) use self::failures::FailureDigest;
pub(crate) use self::oracle::ChangeKind;
pub(crate) use self::oracle::Oracle;
pub(crate) use self::oracle::OracleChange;
pub(crate) use self::oracle::OracleWatch;
pub(crate) use self::oracle::SkipMarker;
pub(crate) use self::oracle::SuiteGuard;
pub(crate) use self::oracle::Touched;
pub(crate) use self::plan::PlanProgress;
pub(crate) use self::plan::PlanSettings;
pub(crate) use self::plan::PlanSweep;
pub(crate) use self::plan::Story;
pub(crate) use self::protect::Protect;
pub(crate) use self::review::Change;
pub(crate) use self::review::DEFAULT_MAX_VETOES;
pub(crate) use self::review::ReviewInput;
pub(crate) use self::review::ReviewOutcome;
pub(crate) use self::review::ReviewRecord;
pub(crate) use self::review::ReviewSettings;
pub(crate) use self::review::VerifySeen;
pub(crate) use self::sandbox::Bwrap;
pub(crate) use self::sandbox::RUN_SANDBOX_VAR;
pub(crate) use self::sandbox::Tier;
pub(crate) use self::scope::MAX_GLOBS;
pub(crate) use self::scope::Scope;
pub(crate) use self::scope::ScopeCheck;
pub(crate) use self::stall::DEFAULT_ESCALATION;
pub(crate) use self::stall::DEFAULT_MAX_SAME_FAILURES;
pub(crate) use self::stall::Streaks;
pub(crate) use self::test_count::Counts;
pub(crate) use self::test_count::News;
pub(crate) use self::test_count::RatchetStatus;
pub(crate) use self::test_count::Tally;
pub(crate) use self::test_count::TestJudgement;
pub(crate) use self::test_count::TestRatchet;
pub(crate) use self::verify::Captured;
pub(crate) use self::verify::CommandInput;
pub(crate) use self::verify::Containment;
pub(crate) use self::verify::VerifyError;
pub(crate) use self::verify::VerifyOutcome;
pub(crate) use self::verify::VerifySpec;
