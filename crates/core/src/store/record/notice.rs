//! The loop's pending notices (`notice.json`): notes for the user about a change to their loop
//! they may not have made, kept until the next stop or prompt shows them.

use std::path::Path;

use super::LoopFile;

/// A note for the user about a change to their loop they may not have made, kept in the loop's
/// directory until the next stop or prompt shows it.
pub(crate) struct Notice;

impl Notice {
    /// Adds `text` to the loop's pending notices. Best effort: the ledger keeps the record
    /// whatever happens here.
    pub(crate) fn post(dir: &Path, text: &str) {
        let mut all = Notice::pending(dir);
        all.push(text.to_string());
        let _ = LoopFile::Notices.write(dir, serde_json::json!(all).to_string().as_bytes());
    }

    fn pending(dir: &Path) -> Vec<String> {
        LoopFile::Notices
            .read(dir, 1 << 20)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// The pending notices as one message, removed so each is shown once.
    pub(crate) fn take(dir: &Path) -> Option<String> {
        if !LoopFile::Notices.path(dir).exists() {
            return None;
        }
        let all = Notice::pending(dir);
        let _ = LoopFile::Notices.remove(dir);
        (!all.is_empty()).then(|| all.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_are_kept_in_order_shown_once_and_a_malformed_file_shows_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Notice::take(dir.path()), None);
        Notice::post(dir.path(), "first");
        Notice::post(dir.path(), "second");
        assert_eq!(Notice::take(dir.path()).as_deref(), Some("first\nsecond"));
        assert_eq!(Notice::take(dir.path()), None);
        std::fs::write(LoopFile::Notices.path(dir.path()), "{not json").unwrap();
        assert_eq!(Notice::take(dir.path()), None);
        assert!(!LoopFile::Notices.path(dir.path()).exists(), "a malformed file is cleared");
    }
}
