//! Building blocks with no knowledge of loops: bounded reads, digests, durations, frontmatter,
//! the environment, the shared walk of a project's files, and which binary this is.

pub(crate) mod digest;
pub(crate) mod environment;
pub(crate) mod outcome;
pub(crate) mod process;
pub(crate) mod read;
pub(crate) mod text;
pub(crate) use self::digest::Fnv1a;
pub(crate) use self::digest::Xxh64;
pub(crate) use self::environment::Environment;
pub(crate) use self::outcome::Code;
pub(crate) use self::outcome::Outcome;
pub(crate) use self::process::Seen;
pub(crate) use self::read::frontmatter::Frontmatter;
pub(crate) use self::read::frontmatter::FrontmatterError;
pub(crate) use self::read::reverse_lines::ReverseLines;
pub(crate) use self::read::walk::MAX_ENTRIES;
pub(crate) use self::text::version::VERSION;

/// For `skip_serializing_if`: a count of zero is left out of what is written.
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}
