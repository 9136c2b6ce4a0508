//! The last few results of a pure and costly computation, kept for the thread that made them.
//!
//! One stop reads the same loop state through several witnesses (the state file, its last good
//! copy, the reading again after verify) and asks the same patterns of the tree before and after
//! verify. Parsing the YAML and compiling the globs were most of a stop's own CPU time; the input
//! is the whole key, so a hit returns exactly what the computation would.

use std::cell::RefCell;
use std::thread::LocalKey;

/// How many results a memo keeps: a stop asks for at most a handful of distinct ones.
const KEPT: usize = 8;

/// The results kept, newest last.
pub(crate) struct Memo<K, V> {
    kept: RefCell<Vec<(K, V)>>,
}

impl<K, V> Memo<K, V> {
    pub(crate) const fn new() -> Memo<K, V> {
        Memo { kept: RefCell::new(Vec::new()) }
    }
}

/// `compute(key)`, or a copy of what it returned for an equal key before on this thread. Only
/// successes are kept: an error is computed again each time, with its message as it is then.
pub(crate) fn get_or_try<K, Q, V, E>(
    memo: &'static LocalKey<Memo<K, V>>,
    key: &Q,
    compute: impl FnOnce(&Q) -> Result<V, E>,
) -> Result<V, E>
where
    K: std::borrow::Borrow<Q> + 'static,
    Q: PartialEq + ToOwned<Owned = K> + ?Sized,
    V: Clone + 'static,
{
    let found =
        memo.with(|m| m.kept.borrow().iter().find(|(k, _)| k.borrow() == key).map(|(_, v)| v.clone()));
    if let Some(value) = found {
        return Ok(value);
    }
    let value = compute(key)?;
    memo.with(|m| {
        let mut kept = m.kept.borrow_mut();
        if kept.len() == KEPT {
            kept.remove(0);
        }
        kept.push((key.to_owned(), value.clone()));
    });
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static LENGTHS: Memo<String, usize> = const { Memo::new() };
        static CALLS: Cell<usize> = const { Cell::new(0) };
    }

    fn length(text: &str) -> Result<usize, String> {
        get_or_try(&LENGTHS, text, |t: &str| {
            CALLS.with(|c| c.set(c.get() + 1));
            if t.is_empty() { Err("empty".to_string()) } else { Ok(t.len()) }
        })
    }

    #[test]
    fn an_equal_key_is_computed_once_and_an_error_every_time() {
        assert_eq!(length("abc"), Ok(3));
        assert_eq!(length("abc"), Ok(3));
        assert_eq!(CALLS.with(Cell::get), 1);
        assert_eq!(length("abcd"), Ok(4));
        assert_eq!(CALLS.with(Cell::get), 2);
        assert!(length("").is_err());
        assert!(length("").is_err());
        assert_eq!(CALLS.with(Cell::get), 4);
    }

    #[test]
    fn the_oldest_result_makes_room() {
        let keys: Vec<String> = (0..=KEPT).map(|n| "x".repeat(n + 1)).collect();
        for k in &keys {
            assert_eq!(length(k), Ok(k.len()));
        }
        let before = CALLS.with(Cell::get);
        assert_eq!(length(&keys[KEPT]), Ok(KEPT + 1));
        assert_eq!(CALLS.with(Cell::get), before, "the newest is kept");
        assert_eq!(length(&keys[0]), Ok(1));
        assert_eq!(CALLS.with(Cell::get), before + 1, "the oldest made room");
    }
}
