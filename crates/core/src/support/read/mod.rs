//! Reading what may be hostile or huge without trusting it: a file up to a bound and never through
//! a link or a device ([`bounded_read`]), a file's lines from its end ([`reverse_lines`]), a
//! project's files ([`walk`]), and a Markdown file's YAML frontmatter ([`frontmatter`]).

pub(crate) mod bounded_read;
pub(crate) mod frontmatter;
pub(crate) mod reverse_lines;
pub(crate) mod walk;
