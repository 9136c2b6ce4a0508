//! The rule that picks a best-of-K run's winner, one for every way the attempts run: the first
//! attempt to verify wins. "First" is the order the attempts are judged in: as they end on one
//! machine (one after another, or at once with `--parallel`), and by number when a pick
//! re-checks attempts that ran on other machines, whose own times are only their claims.

/// The winner so far of attempts judged one by one.
#[derive(Debug, Default)]
pub(super) struct FirstVerified {
    winner: Option<u32>,
}

impl FirstVerified {
    /// Judges attempt `n`; `true` when it is the winner from now on (the first to verify).
    pub(super) fn judged(&mut self, n: u32, verified: bool) -> bool {
        let wins = verified && self.winner.is_none();
        if wins {
            self.winner = Some(n);
        }
        wins
    }

    pub(super) fn winner(&self) -> Option<u32> {
        self.winner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_attempt_to_verify_wins_and_later_ones_do_not_replace_it() {
        let mut rule = FirstVerified::default();
        assert!(!rule.judged(1, false));
        assert_eq!(rule.winner(), None);
        assert!(rule.judged(3, true));
        assert!(!rule.judged(2, true), "a later verified attempt took the win");
        assert!(!rule.judged(4, false));
        assert_eq!(rule.winner(), Some(3));
    }
}
