//! What metric loops in a project learnt: one JSON line per keep or discard (value, delta from
//! the best, the change's summary), kept in the store per project, so a new metric loop there
//! starts from what was already tried.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::metric::Number;
use crate::support::Fnv1a;
use crate::support::ReverseLines;

/// How many lessons a new loop is shown.
pub(crate) const SHOWN: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Lesson {
    pub time: Timestamp,
    pub loop_id: String,
    pub iteration: u32,
    /// `None`: the measurement failed.
    pub value: Option<Number>,
    /// The value minus the best before it.
    pub delta: Option<Number>,
    pub kept: bool,
    pub summary: String,
}

/// The lessons file of the project at `cwd`, under the store's root.
pub(crate) fn path(store_root: &Path, cwd: &Path) -> PathBuf {
    let mut hash = Fnv1a::new();
    hash.update(cwd.as_os_str().as_encoded_bytes());
    store_root.join("lessons").join(format!("{:016x}.jsonl", hash.finish()))
}

impl Lesson {
    pub(crate) fn append_to(&self, path: &Path) -> io::Result<()> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let mut line = serde_json::to_vec(self).map_err(io::Error::other)?;
        line.push(b'\n');
        OpenOptions::new().create(true).append(true).open(path)?.write_all(&line)
    }

    /// The last `n` lessons, oldest first; lines that do not parse are passed over.
    pub(crate) fn read_last(path: &Path, n: usize) -> Vec<Lesson> {
        let Ok(lines) = ReverseLines::open(path, 1 << 20) else { return Vec::new() };
        let mut found: Vec<Lesson> =
            lines.filter_map(|l| serde_json::from_slice(&l.ok()?).ok()).take(n).collect();
        found.reverse();
        found
    }

    /// `kept 124 (-7): 1 file (+2 -1): src/sort.rs`.
    pub(crate) fn line(&self) -> String {
        let verdict = if self.kept { "kept" } else { "discarded" };
        let value = match (self.value, self.delta) {
            (Some(v), Some(d)) if d.0 >= 0.0 => format!("{v} (+{d})"),
            (Some(v), Some(d)) => format!("{v} ({d})"),
            (Some(v), None) => v.to_string(),
            (None, _) => "no value".into(),
        };
        format!("{verdict} {value}: {}", self.summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lesson(i: u32, kept: bool) -> Lesson {
        Lesson {
            time: "2026-11-22T03:00:00Z".parse().unwrap(),
            loop_id: "l".into(),
            iteration: i,
            value: Some(Number(100.0 - f64::from(i))),
            delta: Some(Number(-1.0)),
            kept,
            summary: format!("change {i}"),
        }
    }

    #[test]
    fn lessons_append_per_project_and_read_back_the_last_ones() {
        let dir = tempfile::tempdir().unwrap();
        let a = path(dir.path(), Path::new("/p/a"));
        assert_ne!(a, path(dir.path(), Path::new("/p/b")));
        for i in 1..=10 {
            lesson(i, i % 2 == 0).append_to(&a).unwrap();
        }
        fs::OpenOptions::new().append(true).open(&a).unwrap().write_all(b"not json\n").unwrap();
        let last = Lesson::read_last(&a, 3);
        assert_eq!(last.iter().map(|l| l.iteration).collect::<Vec<_>>(), [8, 9, 10]);
        assert_eq!(last[2].line(), "kept 90 (-1): change 10");
        assert!(Lesson::read_last(&dir.path().join("none"), 3).is_empty());
    }
}
