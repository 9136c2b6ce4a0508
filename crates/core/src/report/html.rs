//! The report page: a [`LoopReport`] rendered as one self-contained HTML document.
//!
//! A pure function of the report, so every part of the page is tested without files or
//! processes. The page loads nothing: its CSS and SVG are inline, it has no script, and its
//! Content-Security-Policy forbids scripts and every fetch, so even a mistake in escaping could
//! not run code or call out. Every string from the state or the ledger passes through
//! [`escape::text`].

use std::fmt::Write;

use crate::host::{Usage, usage::human_tokens};
use crate::report::chart;
use crate::report::cost::{Cost, human_dollars};
use crate::report::escape::{self, truncate};
use crate::report::model::{LoopReport, how_it_failed, ranges};
use crate::state::ReasonCode;
use crate::state::Status;
use crate::support::text::duration::human_ms;

const CSS: &str = include_str!("report.css");
/// No scripts, no fetches: styles and images inline only.
const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'";
/// Files a per-iteration row names before it only counts them.
const NAMED_FILES: usize = 12;

/// What a reason code means, for people.
pub(crate) fn reason_label(code: ReasonCode) -> &'static str {
    match code {
        ReasonCode::Verified => "verified",
        ReasonCode::Promise => "promise kept",
        ReasonCode::CapReached => "cap reached",
        ReasonCode::Cancelled => "cancelled",
        ReasonCode::TargetMet => "target met",
        ReasonCode::MetricKept => "kept",
        ReasonCode::MetricDiscarded => "discarded",
        ReasonCode::MetricPlateau => "plateau: pivots without a keep",
        ReasonCode::VerifyFailed => "verify failed",
        ReasonCode::VerifyTimedOut => "verify timed out",
        ReasonCode::PromiseMissing => "promise missing",
        ReasonCode::NoCriterion => "no criterion",
        ReasonCode::OracleChanged => "verify files changed",
        ReasonCode::VerifyNotRun => "verify could not run",
        ReasonCode::TestsDropped => "fewer tests ran",
        ReasonCode::PassNotCounted => "a pass at a doubtful stop, not counted",
        ReasonCode::ReviewBlocked => "passed, vetoed by the reviewer",
        ReasonCode::StoryVerified => "story done",
        ReasonCode::StoryBroken => "a done story broke",
        ReasonCode::OutOfScope => "passed, but changed files outside the scope",
        ReasonCode::ReviewVetoed => "parked: reviewer's vetoes",
        ReasonCode::StoryStalled => "parked: a story took too long",
        ReasonCode::ReviewApproved => "approved by the reviewer",
        ReasonCode::Aborted => "the agent gave up",
        ReasonCode::SameFailures => "same failure repeated",
        ReasonCode::NoProgress => "no progress",
        ReasonCode::TimeBudget => "time budget spent",
        ReasonCode::TokenBudget => "token budget spent",
        ReasonCode::Started => "started",
        ReasonCode::Claimed => "claimed by its conversation",
        ReasonCode::HarnessOverride => "host overrode a block",
        ReasonCode::AgentCommandRefused => "agent's loop command refused",
        ReasonCode::RolledBack => "rolled back",
        ReasonCode::NotifyFailed => "notification failed",
        ReasonCode::Resumed => "resumed",
        ReasonCode::AgentLimited => "agent held by a rate limit",
        ReasonCode::AgentFailed => "agent run failed",
        ReasonCode::Interrupted => "interrupted",
        ReasonCode::ForeignSession => "another session",
        ReasonCode::StateTampered => "state tampered with",
        ReasonCode::StateDeleted => "state deleted and restored",
        ReasonCode::LedgerTampered => "ledger tampered with",
        ReasonCode::LockHeld => "lock held by another process",
        ReasonCode::HookInterrupted => "hook killed mid-judgment",
        ReasonCode::ForgedStop => "stop forged by the agent",
        ReasonCode::StopNotJudged => "turn ended unjudged (hooks off?)",
        ReasonCode::BackgroundWait => "waited on background work",
        ReasonCode::BackgroundWaitOver => "judged: the wait on background work ran out",
        ReasonCode::BlockCap => "parked: the host's cap of blocks without a tool call",
        ReasonCode::CommandPending => "command awaiting confirmation",
        ReasonCode::CommandConfirmed => "command confirmed as the user's",
        ReasonCode::CommandUnconfirmed => "command sent by a program, undone",
        ReasonCode::HostConfigChanged => "the host's hook settings changed",
        ReasonCode::VerifyStatusUntrusted => "verify's exit status forged or lost",
        ReasonCode::InternalError => "for-loop fault",
        ReasonCode::RecordFailed => "stop not recorded",
        ReasonCode::ContextExhausted => "turn ended: context window full",
        ReasonCode::AgentError => "turn ended on an API error",
        ReasonCode::HandedOver => "handed over to loop-hook run",
        ReasonCode::MergeFailed => "parked: failed to merge",
        ReasonCode::HooksChanged => "passed, but for-loop's hook settings changed",
        ReasonCode::StoreTightened => "store made private",
        ReasonCode::DriverMarkReplaced => "stale driver mark replaced",
    }
}

/// The badge and sentence at the top: how the loop stands.
fn standing(report: &LoopReport) -> (&'static str, &'static str, String) {
    let at = format!("at iteration {} of {}", report.iteration, report.max_iterations);
    match (report.status, report.outcome) {
        (Status::Active, _) => (
            "info",
            "Running",
            format!("iteration {} of {} in progress", report.iteration, report.max_iterations),
        ),
        (Status::Parked, outcome) => (
            "park",
            "Parked",
            format!(
                "{} {at}; {} continues it",
                outcome.map_or("stopped", reason_label),
                crate::host::Host::from_name(&report.host).unwrap_or_default().commands().resume
            ),
        ),
        (Status::Ended, Some(ReasonCode::Verified)) => ("good", "Verified", format!("verify passed {at}")),
        (Status::Ended, Some(ReasonCode::Promise)) => ("good", "Done", format!("promise kept {at}")),
        (Status::Ended, Some(ReasonCode::CapReached)) => {
            ("fail", "Not done", format!("all {} iterations used without a pass", report.max_iterations))
        }
        (Status::Ended, Some(ReasonCode::Cancelled)) => ("other", "Cancelled", format!("cancelled {at}")),
        (Status::Ended, outcome) => {
            ("other", "Ended", format!("{} {at}", outcome.map_or("ended", reason_label)))
        }
    }
}

/// `text` escaped, with its `backticked` spans set as code.
fn with_code_spans(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    if parts.len().is_multiple_of(2) {
        // An odd number of backticks: no pairing to trust.
        return escape::text(text);
    }
    parts
        .iter()
        .enumerate()
        .map(
            |(i, part)| {
                if i % 2 == 1 { format!("<code>{}</code>", escape::text(part)) } else { escape::text(part) }
            },
        )
        .collect()
}

/// The whole page.
pub(crate) fn render(report: &LoopReport) -> String {
    let mut page = String::with_capacity(64 * 1024);
    let title_task = report.task.lines().find(|l| !l.trim().is_empty()).unwrap_or("(no task)");
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"generator\" content=\"for-loop {version}\">\n\
         <title>for-loop · {title}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<main>\n",
        version = escape::text(report.version),
        title = escape::text(&truncate(title_task.trim(), 80)),
    );
    header(&mut page, report);
    if let Some(backlog) = &report.backlog {
        backlog.render(&mut page);
    }
    timeline(&mut page, report);
    failures(&mut page, report);
    if let Some(series) = report.metric() {
        let _ = write!(
            page,
            "<section id=\"metric\">\n<h2>Metric{name}</h2>\n{chart}\n<ul class=\"legend\">\
             <li><span class=\"swatch sw-good\"></span>kept</li>\
             <li><span class=\"swatch sw-fail\"></span>discarded</li>\
             <li><span class=\"swatch sw-info\"></span>measured</li>\
             <li><span class=\"swatch bar-swatch sw-good\"></span>best so far</li>{target}</ul>\n\
             <p class=\"note\">{direction} is better. Best: {best} at iteration {best_at}.</p>\n</section>\n",
            name = series.name.as_deref().map(|n| format!(": {}", escape::text(n))).unwrap_or_default(),
            chart = chart::metric(&series),
            target = series
                .target
                .map(|t| format!(
                    "<li><span class=\"swatch bar-swatch sw-fail\"></span>target {}</li>",
                    chart::short_number(t)
                ))
                .unwrap_or_default(),
            direction = match series.direction {
                crate::metric::Direction::Min => "Lower",
                crate::metric::Direction::Max => "Higher",
            },
            best = series.points.last().map(|p| chart::short_number(p.best)).unwrap_or_default(),
            best_at = series
                .points
                .iter()
                .find(|p| Some(p.value) == series.points.last().map(|l| l.best) && p.kept != Some(false))
                .map_or_else(|| "-".into(), |p| p.iteration.to_string()),
        );
    }
    files(&mut page, report);
    tokens(&mut page, report);
    stops(&mut page, report);
    let _ = write!(
        page,
        "<footer>Generated {at} by loop-hook {version} · loop {id}{unreadable}{cut}</footer>\n</main>\n</body>\n</html>\n",
        at = report.generated_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        version = escape::text(report.version),
        id = escape::text(&report.loop_id),
        unreadable = match report.unreadable_lines {
            0 => String::new(),
            n => format!(" · {n} ledger line(s) could not be read and are left out"),
        },
        cut = if report.ledger_cut {
            " · the ledger is too long to read whole: its oldest lines are left out"
        } else {
            ""
        },
    );
    page
}

fn header(page: &mut String, report: &LoopReport) {
    let (tone, badge, sentence) = standing(report);
    let code = report.outcome.map_or("active", ReasonCode::as_str);
    let _ = write!(
        page,
        "<header class=\"top\" id=\"summary\">\n<div class=\"brand\"><strong>for-loop report</strong><span>loop <span class=\"mono\">{id}</span></span></div>\n\
         <div class=\"outcome tone-{tone}\" data-outcome=\"{code}\"><span class=\"badge\">{badge}</span><code>{code}</code><span class=\"sentence\">{sentence}</span></div>\n",
        id = escape::text(&report.loop_id),
        sentence = escape::text(&sentence),
    );
    title_and_task(page, report);
    page.push_str("<dl class=\"facts\">\n");
    facts(page, report, badge, code);
    page.push_str("</dl>\n</header>\n");
}

/// The task's first line as the title, and the whole task below it unless the title is all of it.
fn title_and_task(page: &mut String, report: &LoopReport) {
    let task = report.task.trim_end();
    let first = task.lines().find(|l| !l.trim().is_empty()).unwrap_or("(no task)").trim();
    let _ = writeln!(page, "<h1 id=\"task-title\">{}</h1>", escape::text(&truncate(first, 200)));
    if task.trim() != first || first.chars().count() > 200 {
        let _ = writeln!(page, "<pre class=\"task\" id=\"task\">{}</pre>", escape::text(task));
    }
}

/// The summary's facts: the check, the outcome, the time, the tokens and where the loop ran.
fn facts(page: &mut String, report: &LoopReport, badge: &str, code: &str) {
    let verify = match &report.verify {
        Some(v) => format!("<code id=\"verify-command\">{}</code>", escape::text(v)),
        None => "<span class=\"muted\">none</span>".into(),
    };
    fact(page, "Verify", &verify, "wide");
    fact(page, "Done when", &with_code_spans(&report.done_when), "wide");
    fact(page, "Outcome", &format!("{badge} <span class=\"muted\">({code})</span>"), "");
    fact(page, "Iterations", &format!("{} / {}", report.iteration, report.max_iterations), "");
    fact(page, "Elapsed", &human_ms(report.elapsed_ms), "");
    fact(page, "Time in verify", &time_in_verify(report), "");
    fact(page, "Host", &escape::text(&report.host), "");
    let tier = report
        .tier
        .as_deref()
        .map_or_else(|| "<span class=\"muted\">not recorded</span>".into(), escape::text);
    fact(page, "Tier", &tier, "");
    if let Some(usage) = report.tokens() {
        let budget = report
            .max_tokens
            .map(|max| format!(" <span class=\"muted\">of {}</span>", human_tokens(max)))
            .unwrap_or_default();
        fact(page, "Tokens", &format!("{}{budget}", human_tokens(usage.total().counted())), "");
        fact(page, "Cost", &estimated_cost(&usage), "");
    } else if let Some(max) = report.max_tokens {
        let none = format!("<span class=\"muted\">none recorded, budget {}</span>", human_tokens(max));
        fact(page, "Tokens", &none, "");
    }
    fact(page, "Started", &report.started_at.strftime("%Y-%m-%d %H:%M UTC").to_string(), "");
    fact(page, "Directory", &format!("<span class=\"mono\">{}</span>", escape::text(&report.cwd)), "wide");
    if let Some(failed) = &report.failed_turn {
        fact(page, "Last turn", &escape::text(failed), "wide");
    }
}

fn fact(page: &mut String, label: &str, value: &str, class: &str) {
    let _ = writeln!(page, "<div class=\"{class}\"><dt>{label}</dt><dd>{value}</dd></div>");
}

/// The time spent in verify, with its share of the time elapsed.
fn time_in_verify(report: &LoopReport) -> String {
    let share = if report.elapsed_ms > 0 {
        format!(
            " <span class=\"muted\">({:.0}%)</span>",
            report.verify_ms as f64 * 100.0 / report.elapsed_ms as f64
        )
    } else {
        String::new()
    };
    format!("{}{share}", human_ms(report.verify_ms))
}

/// The estimated cost of `usage`, and the models it has no price for.
fn estimated_cost(usage: &Usage) -> String {
    let cost = Cost::of(usage);
    match (cost.is_complete(), cost.dollars > 0.0) {
        (true, _) => format!("{} <span class=\"muted\">est.</span>", human_dollars(cost.dollars)),
        (false, true) => format!(
            "≥ {} <span class=\"muted\">(no price for {})</span>",
            human_dollars(cost.dollars),
            escape::text(&cost.unpriced.join(", "))
        ),
        (false, false) => {
            format!("<span class=\"muted\">no price for {}</span>", escape::text(&cost.unpriced.join(", ")))
        }
    }
}

fn timeline(page: &mut String, report: &LoopReport) {
    page.push_str("<section id=\"timeline\">\n<h2>Timeline</h2>\n");
    if report.stops.is_empty() {
        page.push_str("<p class=\"note\">No stop has been recorded yet.</p>\n</section>\n");
        return;
    }
    page.push_str(&chart::timeline(report));
    page.push_str("\n<ul class=\"legend\">");
    let mut seen: Vec<ReasonCode> = Vec::new();
    for stop in &report.stops {
        if !seen.contains(&stop.reason) {
            seen.push(stop.reason);
        }
    }
    for code in seen {
        let _ = write!(
            page,
            "<li data-reason=\"{c}\"><span class=\"swatch r-{c}\"></span>{label}</li>",
            c = code.as_str(),
            label = reason_label(code)
        );
    }
    page.push_str("<li><span class=\"swatch bar-swatch verify-swatch\"></span>bar: verify duration</li></ul>\n</section>\n");
}

/// The most distinct failures shown, the most frequent first.
const MAX_FAILURES: usize = 30;

fn failures(page: &mut String, report: &LoopReport) {
    page.push_str("<section id=\"failures\">\n<h2>Failures</h2>\n");
    if report.failures.is_empty() {
        page.push_str("<p class=\"note\">Verify never failed.</p>\n</section>\n");
        return;
    }
    let _ = writeln!(
        page,
        "<p class=\"note\">{} distinct failure(s). Runs that differ only in times, counters, ids or temporary paths count as one.</p>",
        report.failures.len()
    );
    let mut order: Vec<usize> = (0..report.failures.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(report.failures[*i].iterations.len()));
    let more = order.split_off(order.len().min(MAX_FAILURES));
    for i in order {
        let failure = &report.failures[i];
        let n = failure.iterations.len();
        let _ = write!(
            page,
            "<article class=\"failure\" id=\"failure-{id}\" data-iterations=\"{n}\">\n<header><span class=\"mono\">#{id}</span>\
             <span>{how}</span><span class=\"count\">{n} iteration{s}</span><span class=\"muted\">at {at}</span></header>\n\
             <pre class=\"tail\">{tail}</pre>\n</article>\n",
            id = escape::text(&failure.id),
            how = escape::text(&failure.how),
            s = if n == 1 { "" } else { "s" },
            at = escape::text(&ranges(&failure.iterations)),
            tail =
                if failure.tail.is_empty() { "(no output)".to_string() } else { escape::text(&failure.tail) },
        );
    }
    if !more.is_empty() {
        let iterations: usize = more.iter().map(|i| report.failures[*i].iterations.len()).sum();
        let _ = writeln!(
            page,
            "<p class=\"note\" id=\"failures-more\">{} more distinct failure(s), {iterations} iteration(s) in all, \
             each rarer than those above: not shown. The ledger has every one.</p>",
            more.len()
        );
    }
    page.push_str("</section>\n");
}

fn files(page: &mut String, report: &LoopReport) {
    page.push_str("<section id=\"files\">\n<h2>Files changed</h2>\n");
    let files = &report.files;
    match &files.total {
        Some(total) if total.is_empty() => page.push_str("<p>No files changed since the loop started.</p>\n"),
        Some(total) => {
            let _ = writeln!(page, "<p><strong>{}</strong> file{} changed since the loop started:</p>\n<ul class=\"files mono\">", total.len(), if total.len() == 1 { "" } else { "s" });
            for file in total {
                let _ = writeln!(page, "<li>{}</li>", escape::text(file));
            }
            page.push_str("</ul>\n");
        }
        None => page.push_str("<p class=\"note\">The files changed in all are not known (the loop is not in a git repository, or git failed).</p>\n"),
    }
    if !files.per_iteration.is_empty() {
        page.push_str("<div class=\"table-wrap\"><table id=\"files-per-iteration\">\n<thead><tr><th class=\"num narrow\">Iteration</th><th class=\"num narrow\">Files</th><th>Changed</th></tr></thead>\n<tbody>\n");
        for (iteration, changed) in &files.per_iteration {
            let mut names: Vec<String> = changed.iter().take(NAMED_FILES).map(|f| escape::text(f)).collect();
            if changed.len() > NAMED_FILES {
                names.push(format!("and {} more", changed.len() - NAMED_FILES));
            }
            let _ = writeln!(
                page,
                "<tr><td class=\"num\">{iteration}</td><td class=\"num\">{}</td><td class=\"mono\">{}</td></tr>",
                changed.len(),
                if names.is_empty() {
                    "<span class=\"muted\">none</span>".to_string()
                } else {
                    names.join(", ")
                }
            );
        }
        page.push_str("</tbody></table></div>\n");
    }
    if let Some(note) = &files.note {
        let _ = writeln!(page, "<p class=\"note\">{}</p>", escape::text(note));
    }
    page.push_str("</section>\n");
}

fn tokens(page: &mut String, report: &LoopReport) {
    let Some(chart) = chart::tokens(report) else {
        return;
    };
    let total = report.tokens().unwrap_or_default().total();
    let _ = write!(
        page,
        "<section id=\"tokens\">\n<h2>Tokens</h2>\n{chart}\n<ul class=\"legend\">\
         <li><span class=\"swatch bar-swatch t-input\" \"></span>input</li>\
         <li><span class=\"swatch bar-swatch t-cache-write\"></span>cache write</li>\
         <li><span class=\"swatch bar-swatch t-output\"></span>output</li></ul>\n\
         <p class=\"note\">In all: {counted} counted ({input} input, {write} cache write, {output} output) and {read} read from the cache, which a token budget does not count.</p>\n</section>\n",
        counted = human_tokens(total.counted()),
        input = human_tokens(total.input),
        write = human_tokens(total.cache_write),
        output = human_tokens(total.output),
        read = human_tokens(total.cache_read),
    );
}

fn stops(page: &mut String, report: &LoopReport) {
    page.push_str("<section id=\"stops\">\n<h2>Stops</h2>\n");
    if report.stops.is_empty() {
        page.push_str("<p class=\"note\">No stop has been recorded yet.</p>\n</section>\n");
        return;
    }
    let with_tokens = report.stops.iter().any(|s| s.tokens.is_some());
    let _ = write!(
        page,
        "<div class=\"table-wrap\"><table id=\"stops-table\">\n<thead><tr><th class=\"num\">#</th><th>Time (UTC)</th><th>Verdict</th><th>Reason</th><th>Verify</th><th>Failure</th>{}<th>Note</th></tr></thead>\n<tbody>\n",
        if with_tokens { "<th class=\"num\">Tokens</th>" } else { "" }
    );
    let (head, skipped, tail) = table_rows(&report.stops);
    for (n, stop) in head.iter().chain(tail).enumerate() {
        if n == head.len() && !skipped.is_empty() {
            skipped_row(page, skipped, if with_tokens { 8 } else { 7 });
        }
        let verify = stop.verify.as_ref().map_or_else(
            || "<span class=\"muted\">-</span>".into(),
            |v| format!("{} · {}", escape::text(&how_it_failed(v)), human_ms(v.duration_ms)),
        );
        let failure = stop
            .failure
            .map(|i| {
                let id = escape::text(&report.failures[i].id);
                format!("<span class=\"mono\">#{id}</span>")
            })
            .unwrap_or_default();
        let tokens = if with_tokens {
            format!(
                "<td class=\"num\">{}</td>",
                stop.tokens.as_ref().map(|t| human_tokens(t.total().counted())).unwrap_or_default()
            )
        } else {
            String::new()
        };
        let mut note = stop.detail.as_deref().map(escape::text).unwrap_or_default();
        if !stop.oracle_changed.is_empty() {
            let names: Vec<String> = stop.oracle_changed.iter().take(5).map(|p| escape::text(p)).collect();
            if !note.is_empty() {
                note.push_str("; ");
            }
            let _ = write!(note, "changed: <span class=\"mono\">{}</span>", names.join(", "));
        }
        if !stop.out_of_scope.is_empty() {
            let names: Vec<String> = stop.out_of_scope.iter().take(5).map(|p| escape::text(p)).collect();
            let more = stop.out_of_scope.len().saturating_sub(names.len());
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            if !note.is_empty() {
                note.push_str("; ");
            }
            let _ = write!(note, "outside the scope: <span class=\"mono\">{}</span>{more}", names.join(", "));
        }
        if let Some(review) = &stop.review {
            if !note.is_empty() {
                note.push_str("; ");
            }
            note.push_str(&review_note(review));
        }
        if let Some(failing) = stop.failing.as_deref().filter(|f| *f != "none failing") {
            if !note.is_empty() {
                note.push_str("; ");
            }
            let _ = write!(note, "<span class=\"mono\">{}</span>", escape::text(failing));
        }
        let _ = writeln!(
            page,
            "<tr data-reason=\"{code}\"><td class=\"num\">{it}</td><td class=\"nowrap\">{time}</td><td>{decision}</td>\
             <td><span class=\"reason\"><span class=\"swatch r-{code}\"></span>{label}</span></td><td class=\"nowrap\">{verify}</td><td>{failure}</td>{tokens}<td>{note}</td></tr>",
            code = stop.reason.as_str(),
            it = stop.iteration,
            time = stop.time.strftime("%H:%M:%S"),
            decision = stop.decision,
            label = reason_label(stop.reason),
        );
    }
    page.push_str("</tbody></table></div>\n</section>\n");
}

/// Rows of the stops table: every stop up to [`TABLE_FIRST`] + [`TABLE_LAST`], else the first
/// and the last ones with the stops between them summarised in one row.
const TABLE_FIRST: usize = 50;
const TABLE_LAST: usize = 100;

/// The stops the table lists first, those it summarises, and those it lists last.
fn table_rows(
    stops: &[crate::report::model::Stop],
) -> (&[crate::report::model::Stop], &[crate::report::model::Stop], &[crate::report::model::Stop]) {
    if stops.len() <= TABLE_FIRST + TABLE_LAST {
        return (stops, &[], &[]);
    }
    let (head, rest) = stops.split_at(TABLE_FIRST);
    let (skipped, tail) = rest.split_at(rest.len() - TABLE_LAST);
    (head, skipped, tail)
}

/// The row that stands for the stops the table leaves out: how many, which iterations, and how
/// many of each reason.
fn skipped_row(page: &mut String, skipped: &[crate::report::model::Stop], columns: usize) {
    let (Some(first), Some(last)) = (skipped.first(), skipped.last()) else { return };
    let mut reasons: Vec<(ReasonCode, usize)> = Vec::new();
    for stop in skipped {
        match reasons.iter_mut().find(|(code, _)| *code == stop.reason) {
            Some((_, n)) => *n += 1,
            None => reasons.push((stop.reason, 1)),
        }
    }
    reasons.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let counts: Vec<String> = reasons
        .iter()
        .map(|(code, n)| {
            format!(
                "<span class=\"reason\"><span class=\"swatch r-{c}\"></span>{label} ×{n}</span>",
                c = code.as_str(),
                label = reason_label(*code)
            )
        })
        .collect();
    let _ = writeln!(
        page,
        "<tr class=\"skipped\"><td colspan=\"{columns}\">{n} more stops, iterations {a} to {b} ({from} to {to} UTC), \
         not listed one by one: {counts}. The ledger has every one.</td></tr>",
        n = skipped.len(),
        a = first.iteration,
        b = last.iteration,
        from = first.time.strftime("%H:%M:%S"),
        to = last.time.strftime("%H:%M:%S"),
        counts = counts.join(", "),
    );
}

/// A stop's note about its review: the verdict, how the reviewer ended, the digest of its
/// findings and the tokens it reported.
fn review_note(review: &crate::checks::ReviewRecord) -> String {
    let verdict = if review.approved { "approved" } else { "vetoed" };
    let mut note = format!("reviewer {verdict} ({})", escape::text(&review.ended));
    if !review.findings_digest.is_empty() {
        let _ =
            write!(note, ", findings <span class=\"mono\">{}</span>", escape::text(&review.findings_digest));
    }
    if let Some(tokens) = review.tokens {
        let _ = write!(note, ", {} tokens", human_tokens(tokens));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{FileChanges, LedgerLines};
    use crate::state::VerifyRecord;
    use crate::state::sample;
    use serde_json::json;

    fn report_with(task: &str, verify_tail: &str) -> LoopReport {
        let mut state = sample();
        state.task = task.to_string();
        state.meta.settings.verify = Some(format!("{task} && true"));
        let line = json!({
            "time": "2026-11-22T03:01:00Z", "loop_id": state.meta.loop_id, "iteration": 1,
            "max_iterations": 30, "decision": "block", "reason": "verify_failed",
            "stop_hook_active": false, "detail": task, "oracle_changed": [task],
            "verify": VerifyRecord { exit_code: Some(1), signal: None, timed_out: false, duration_ms: 5,
                output_bytes: 1, output_digest: "d".into(), tail: verify_tail.into(), output_ended_by: None,
                failing: None },
            "tokens": { task: {"input": 5, "output": 5} },
            "metric": {"value": 3.0, "name": task},
            "review": {"approved": false, "ended": task, "findings_digest": task, "tokens": 1200},
        })
        .to_string();
        let files = FileChanges {
            per_iteration: vec![(1, vec![task.to_string()])],
            total: Some(vec![task.to_string()]),
            note: Some(task.to_string()),
        };
        let mut report = LoopReport::build(
            &state,
            LedgerLines::parse([line.as_bytes()], false),
            files,
            Some(task.to_string()),
            "2026-11-22T04:00:00Z".parse().unwrap(),
        );
        report.host = task.to_string();
        report.cwd = task.to_string();
        report.loop_id = task.to_string();
        report
    }

    /// A turn the host ended on an error is shown in the summary until a judged stop follows it.
    #[test]
    fn a_failed_last_turn_is_in_the_summary() {
        let mut report = report_with("task", "tail");
        assert!(!render(&report).contains("<dt>Last turn</dt>"));
        report.failed_turn = Some("ended on context_exhausted at 03:01:00 UTC (<prompt is too long>)".into());
        let page = render(&report);
        assert!(
            page.contains("<dt>Last turn</dt><dd>ended on context_exhausted at 03:01:00 UTC (&lt;prompt"),
            "{page}"
        );
    }

    const HOSTILE: &str =
        "<script>alert(1)</script>\"'</style></title>]]><!--\u{0}\u{1b}[2J<img src=x onerror=alert(2)>";

    #[test]
    fn hostile_text_everywhere_renders_inert() {
        let page = render(&report_with(HOSTILE, HOSTILE));
        assert_eq!(page.matches("<script").count(), 0, "no script element anywhere");
        assert_eq!(page.matches("<img").count(), 0);
        assert_eq!(page.matches("</style>").count(), 1, "only the page's own style element ends");
        assert_eq!(page.matches("</title>").count(), page.matches("<title").count());
        assert!(!page.contains('\u{0}') && !page.contains('\u{1b}'));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&lt;/style&gt;"));
        assert!(page.contains("^@^[[2J"));
        // No attribute value can be closed early: every quote in the page is ours.
        for line in page.lines().filter(|l| l.contains("alert")) {
            assert!(!line.contains("alert(1)</"), "{line}");
        }
    }

    #[test]
    fn each_review_shows_its_verdict_how_it_ended_its_findings_digest_and_tokens() {
        let page = render(&report_with("exit 0, BLOCK [major]", "boom"));
        assert!(
            page.contains(
                "reviewer vetoed (exit 0, BLOCK [major]), findings <span class=\"mono\">exit 0, BLOCK [major]</span>, 1.2k tokens"
            ),
            "{page}"
        );
    }

    #[test]
    fn the_page_loads_nothing_and_runs_nothing() {
        let page = render(&report_with("fix it", "boom"));
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains(&format!("content=\"{CSP}\"")));
        for outside in ["http:", "https:", "src=", "href=", "url(", "@import", "<script", "<link"] {
            assert!(!page.contains(outside), "the page must not reference {outside}");
        }
    }

    #[test]
    fn sections_follow_what_the_loop_recorded() {
        let page = render(&report_with("fix it", "boom"));
        for id in ["summary", "timeline", "failures", "metric", "files", "tokens", "stops"] {
            assert!(page.contains(&format!("id=\"{id}\"")), "missing section {id}");
        }
        let mut plain = report_with("fix it", "boom");
        for stop in &mut plain.stops {
            stop.tokens = None;
            stop.metric = None;
        }
        let page = render(&plain);
        assert!(!page.contains("id=\"metric\"") && !page.contains("id=\"tokens\""));
    }

    /// A loop of `stops` stops, each failing in its own way (no two outputs alike).
    fn long_report(stops: u32) -> LoopReport {
        let state = sample();
        let lines: Vec<String> = (1..=stops)
            .map(|i| {
                // Letters past the hex digits, so no two failures are taken for one.
                let word: String = i.to_string().bytes().map(|d| char::from(d - b'0' + b'g')).collect();
                json!({
                    "time": "2026-11-22T03:01:00Z", "loop_id": state.meta.loop_id, "iteration": i,
                    "max_iterations": 10000, "decision": "block", "reason": "verify_failed",
                    "stop_hook_active": false,
                    "verify": VerifyRecord { exit_code: Some(1), signal: None, timed_out: false, duration_ms: 5,
                        output_bytes: 1, output_digest: "d".into(), tail: format!("FAIL: step {word}"),
                        output_ended_by: None, failing: None },
                })
                .to_string()
            })
            .collect();
        LoopReport::build(
            &state,
            LedgerLines::parse(lines.iter().map(String::as_bytes), false),
            FileChanges::default(),
            None,
            "2026-11-22T04:00:00Z".parse().unwrap(),
        )
    }

    #[test]
    fn a_long_loop_is_summarised_not_listed_stop_by_stop() {
        let page = render(&long_report(2_000));
        assert_eq!(
            page.matches("<tr data-reason=").count(),
            TABLE_FIRST + TABLE_LAST,
            "rows of the stops table"
        );
        assert_eq!(page.matches("<tr class=\"skipped\">").count(), 1);
        assert!(page.contains("1850 more stops, iterations 51 to 1900"), "the summary row");
        let marks = page.matches("class=\"mark ").count();
        assert!((100..=crate::report::chart::MAX_MARKS).contains(&marks), "{marks} marks on the timeline");
        assert!(page.contains("#1991–#2000 · 10 stops: verify_failed ×10"), "a run's title names its stops");
        assert_eq!(page.matches("<article class=\"failure\"").count(), MAX_FAILURES);
        assert!(page.contains("1970 more distinct failure(s), 1970 iteration(s) in all"));
        assert!(page.len() < 400_000, "the page is {} bytes", page.len());
    }

    #[test]
    fn a_short_loop_lists_every_stop() {
        let page = render(&long_report(u32::try_from(TABLE_FIRST + TABLE_LAST).unwrap()));
        assert_eq!(page.matches("<tr data-reason=").count(), TABLE_FIRST + TABLE_LAST);
        assert!(!page.contains("class=\"skipped\""));
        assert_eq!(page.matches("class=\"mark ").count(), TABLE_FIRST + TABLE_LAST);
    }
}
