//! Building blocks with no knowledge of loops: bounded reads, digests, durations, frontmatter, memos,
//! the environment, the shared walk of a project's files, and which binary this is.

pub(crate) mod bounded_read;
pub(crate) mod digest;
pub(crate) mod duration;
pub(crate) mod environment;
pub(crate) mod frontmatter;
pub(crate) mod memo;
pub(crate) mod nearest;
pub(crate) mod outcome;
pub(crate) mod relative_path;
pub(crate) mod reverse_lines;
pub(crate) mod text;
pub(crate) mod version;
pub(crate) mod walk;

/// For `skip_serializing_if`: a count of zero is left out of what is written.
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}
