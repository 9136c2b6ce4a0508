//! The live status line of `loop-hook run` on a terminal: one line on stderr, redrawn in place
//! every second, showing the iteration, the time so far, the agent's state (running, or waiting
//! for a limit to lift), the last verify and the streaks. It follows the driver's own events (the
//! ones `--json` prints), so it cannot tell a different story from them. Any other line is printed
//! above it: the line is cleared first and drawn again after. When stderr is not a terminal, or
//! with `--json`, nothing of it is written.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Go to the start of the line and erase it.
const CLEAR: &str = "\r\x1b[2K";
/// How often the elapsed time and the wait are redrawn.
const TICK: Duration = Duration::from_secs(1);
const NAP: Duration = Duration::from_millis(50);

/// How the last verify ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum LastVerify {
    #[default]
    NotYet,
    Exit(i64),
    /// Ended without an exit code: a timeout, a signal.
    Unfinished,
}

/// What the line shows, as the driver's events left it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub agent: String,
    pub iteration: u64,
    pub max_iterations: u64,
    pub last_verify: LastVerify,
    pub same_failure: u64,
    pub no_change: u64,
    /// Set while the driver waits for a rate or usage limit to lift.
    pub waiting_until: Option<Instant>,
    /// Whether the agent runs in the run's sandbox, once the driver said.
    pub sandboxed: Option<bool>,
}

impl Snapshot {
    /// Takes in one of the driver's events.
    pub(crate) fn apply(&mut self, event: &Value, now: Instant) {
        let number = |key: &str| event[key].as_u64();
        match event["event"].as_str() {
            Some("iteration") => {
                self.iteration = number("iteration").unwrap_or(self.iteration);
                self.max_iterations = number("max_iterations").unwrap_or(self.max_iterations);
                self.waiting_until = None;
            }
            Some("sandbox") => self.sandboxed = event["sandboxed"].as_bool(),
            Some("limit") => {
                self.waiting_until = Some(now + Duration::from_secs(number("wait_secs").unwrap_or(0)));
            }
            Some("verify") => {
                self.last_verify =
                    event["exit_code"].as_i64().map_or(LastVerify::Unfinished, LastVerify::Exit);
                self.same_failure = number("same_failure").unwrap_or(0);
                self.no_change = number("no_change").unwrap_or(0);
            }
            _ => {}
        }
    }
}

/// The line for `snapshot`, `elapsed` into the run, at `now`, at most `width` characters.
pub(crate) fn render(snapshot: &Snapshot, elapsed: Duration, now: Instant, width: usize) -> String {
    let mut parts = vec![
        format!("for-loop: iteration {}/{}", snapshot.iteration, snapshot.max_iterations),
        clock(elapsed),
    ];
    parts.push(match snapshot.waiting_until {
        Some(until) => format!("waiting for a limit, {} left", clock(until.saturating_duration_since(now))),
        None => format!("{} running", snapshot.agent),
    });
    parts.push(match snapshot.last_verify {
        LastVerify::NotYet => "no verify yet".to_string(),
        LastVerify::Exit(0) => "last verify passed".to_string(),
        LastVerify::Exit(code) => format!("last verify exit {code}"),
        LastVerify::Unfinished => "last verify did not finish".to_string(),
    });
    if snapshot.same_failure > 0 {
        parts.push(format!("same failure ×{}", snapshot.same_failure));
    }
    if snapshot.no_change > 0 {
        parts.push(format!("no change ×{}", snapshot.no_change));
    }
    match snapshot.sandboxed {
        Some(true) => parts.push("sandboxed".to_string()),
        Some(false) => parts.push("not sandboxed".to_string()),
        None => {}
    }
    fit(&parts.join(" · "), width)
}

/// `42s`, `3m07s`, `2h05m`.
fn clock(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// `text` cut to `width` characters (an ellipsis marks the cut): a line wider than the terminal
/// would wrap, and the carriage return would then redraw only its last row.
fn fit(text: &str, width: usize) -> String {
    let width = width.max(2);
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width - 1).collect();
    cut.push('…');
    cut
}

struct Shared {
    snapshot: Snapshot,
    /// Whether the line is on the screen now.
    shown: bool,
}

/// The status line, drawn by a thread of its own so it keeps time while the agent runs.
pub(crate) struct StatusLine {
    shared: Option<Arc<Mutex<Shared>>>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
    started: Instant,
}

impl StatusLine {
    /// A status line for `agent`'s run: live when `live` and stderr is a terminal, else inert.
    pub(crate) fn new(agent: &str, live: bool) -> StatusLine {
        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        if !live || !std::io::stderr().is_terminal() {
            return StatusLine { shared: None, stop, ticker: None, started };
        }
        let shared = Arc::new(Mutex::new(Shared {
            snapshot: Snapshot { agent: agent.to_string(), ..Snapshot::default() },
            shown: false,
        }));
        let ticker = thread::Builder::new()
            .name("status-line".into())
            .spawn({
                let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
                move || {
                    // Short naps, so the driver never waits long for this thread at its end.
                    let mut drawn = Instant::now();
                    while !stop.load(Ordering::SeqCst) {
                        thread::sleep(NAP);
                        let mut shared = lock(&shared);
                        if drawn.elapsed() >= TICK && shared.shown && !stop.load(Ordering::SeqCst) {
                            draw(&mut shared, started);
                            drawn = Instant::now();
                        }
                    }
                }
            })
            .ok();
        StatusLine { shared: Some(shared), stop, ticker, started }
    }

    /// Follows one of the driver's events: a final one takes the line away for good.
    pub(crate) fn observe(&self, event: &Value) {
        let Some(shared) = &self.shared else { return };
        let mut shared = lock(shared);
        if matches!(event["event"].as_str(), Some("end" | "parked")) {
            self.stop.store(true, Ordering::SeqCst);
            clear(&mut shared);
            return;
        }
        shared.snapshot.apply(event, Instant::now());
        if !self.stop.load(Ordering::SeqCst) {
            draw(&mut shared, self.started);
        }
    }

    /// Prints `line` on stderr above the status line.
    pub(crate) fn println(&self, line: &str) {
        let Some(shared) = &self.shared else {
            eprintln!("{line}");
            return;
        };
        let mut shared = lock(shared);
        let was_shown = shared.shown;
        clear(&mut shared);
        eprintln!("{line}");
        if was_shown && !self.stop.load(Ordering::SeqCst) {
            draw(&mut shared, self.started);
        }
    }
}

impl Drop for StatusLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(shared) = &self.shared {
            clear(&mut lock(shared));
        }
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

fn draw(shared: &mut Shared, started: Instant) {
    let now = Instant::now();
    let line = render(&shared.snapshot, now - started, now, terminal_width().unwrap_or(80) - 1);
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{CLEAR}{line}");
    let _ = err.flush();
    shared.shown = true;
}

fn clear(shared: &mut Shared) {
    if shared.shown {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{CLEAR}");
        let _ = err.flush();
        shared.shown = false;
    }
}

/// The terminal's width in columns, from stderr.
fn terminal_width() -> Option<usize> {
    #[cfg(unix)]
    {
        use nix::libc;
        let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCGWINSZ writes one `winsize` into the struct passed, which we own.
        #[allow(unsafe_code)]
        let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &raw mut size) } == 0;
        (ok && size.ws_col > 1).then_some(usize::from(size.ws_col))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn snapshot() -> Snapshot {
        Snapshot { agent: "claude".into(), ..Snapshot::default() }
    }

    #[test]
    fn the_line_follows_the_events() {
        let start = Instant::now();
        let mut status = snapshot();
        status.apply(&json!({"event": "iteration", "iteration": 1, "max_iterations": 30}), start);
        assert_eq!(
            render(&status, Duration::from_secs(4), start, 200),
            "for-loop: iteration 1/30 · 4s · claude running · no verify yet"
        );
        status.apply(
            &json!({"event": "verify", "iteration": 1, "exit_code": 1, "same_failure": 2, "no_change": 1}),
            start,
        );
        status.apply(&json!({"event": "iteration", "iteration": 2, "max_iterations": 30}), start);
        assert_eq!(
            render(&status, Duration::from_secs(187), start, 200),
            "for-loop: iteration 2/30 · 3m07s · claude running · last verify exit 1 · same failure ×2 · no change ×1"
        );
        status.apply(&json!({"event": "limit", "iteration": 2, "wait_secs": 90}), start);
        assert_eq!(
            render(&status, Duration::from_secs(7530), start + Duration::from_secs(30), 200),
            "for-loop: iteration 2/30 · 2h05m · waiting for a limit, 1m00s left · last verify exit 1 · same failure ×2 · no change ×1"
        );
        // The retry is the same iteration, running again.
        status.apply(&json!({"event": "iteration", "iteration": 2, "max_iterations": 30}), start);
        assert!(render(&status, Duration::ZERO, start, 200).contains("claude running"));
        status
            .apply(&json!({"event": "verify", "exit_code": null, "same_failure": 0, "no_change": 0}), start);
        assert!(render(&status, Duration::ZERO, start, 200).ends_with("last verify did not finish"));
        status.apply(&json!({"event": "verify", "exit_code": 0}), start);
        assert!(render(&status, Duration::ZERO, start, 200).ends_with("last verify passed"));
        status.apply(&json!({"event": "sandbox", "sandboxed": true}), start);
        assert!(render(&status, Duration::ZERO, start, 200).ends_with("last verify passed · sandboxed"));
        status.apply(&json!({"event": "sandbox", "sandboxed": false}), start);
        assert!(render(&status, Duration::ZERO, start, 200).ends_with(" · not sandboxed"));
    }

    #[test]
    fn a_narrow_terminal_gets_a_cut_line() {
        let status = snapshot();
        let line = render(&status, Duration::ZERO, Instant::now(), 20);
        assert_eq!(line, "for-loop: iteration…");
        assert_eq!(line.chars().count(), 20);
        assert_eq!(render(&status, Duration::ZERO, Instant::now(), 0).chars().count(), 2);
    }

    #[test]
    fn unknown_or_malformed_events_change_nothing() {
        let mut status = snapshot();
        for event in [json!({"event": "agent_failed"}), json!("text"), json!({"iteration": "x"}), json!(null)]
        {
            status.apply(&event, Instant::now());
        }
        assert_eq!(status, snapshot());
        status.apply(&json!({"event": "iteration", "iteration": "two"}), Instant::now());
        assert_eq!(status, snapshot());
    }
}
