//! `loop-hook report`: the HTML page of a loop, from ledgers written by scripted loops, its
//! structure, hostile text rendered inert, and the page as headless Chromium loads it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::util::{SESSION, TestEnv, run_bounded};

/// Task text a hostile model could have written: markup, quotes, the end of our style element,
/// the end of a CDATA section, a comment opener and control characters.
const HOSTILE_TASK: &str = "Fix the <script>alert('task')</script> \"login\" bug </style></title> ]]> <!-- \
                            <img src=x onerror=alert(2)> \u{1}\u{1b}[31m end";

fn git(env: &TestEnv, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(&env.project).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A loop with a hostile task in a git repository with checkpoints: verify fails three times
/// (twice the same way, once differently, its output hostile too), then passes.
fn scripted_loop() -> TestEnv {
    let env = TestEnv::new();
    git(&env, &["init", "-q"]);
    env.write(
        "check.sh",
        "state=$(cat state 2>/dev/null)\n\
         case \"$state\" in\n\
           fixed) echo ok; exit 0 ;;\n\
           build) echo 'error: </pre><script>alert(\"out\")</script> at src/lib.rs:12'; exit 2 ;;\n\
           *) echo \"test login ... FAILED after $(date +%N)ns\"; exit 1 ;;\n\
         esac\n",
    );
    env.start(&format!("{HOSTILE_TASK} --verify \"sh check.sh\" --checkpoint --max-iterations 10"));
    env.write("a.txt", "1\n");
    assert!(env.stop("1").blocked());
    env.write("a.txt", "2\n");
    env.write("b.txt", "2\n");
    // Later stops continue because of a block, as the host says with stop_hook_active.
    assert!(env.stop_as(SESSION, "2", true).blocked());
    env.write("state", "build");
    assert!(env.stop_as(SESSION, "3", true).blocked());
    env.write("state", "fixed");
    assert!(!env.stop_as(SESSION, "4", true).blocked());
    env
}

fn report(env: &TestEnv, name: &str) -> (PathBuf, String) {
    let out = env.project.join(name);
    let run = env.run(&["report", "--session", SESSION, "--out", name], "");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.trim(), format!("for-loop: report written to {}", out.display()));
    let html = std::fs::read_to_string(&out).unwrap();
    (out, html)
}

/// Every value of `attr` on elements whose tag starts with `open`, in page order.
fn attrs(html: &str, open: &str, attr: &str) -> Vec<String> {
    html.match_indices(open)
        .filter_map(|(at, _)| {
            let tag = &html[at..at + html[at..].find('>')?];
            let start = tag.find(&format!(" {attr}=\""))? + attr.len() + 3;
            Some(tag[start..start + tag[start..].find('"')?].to_string())
        })
        .collect()
}

/// The page's structure: sections in order, and what each one lists.
fn outline(html: &str) -> String {
    let sections: Vec<String> =
        attrs(html, "<header ", "id").into_iter().chain(attrs(html, "<section ", "id")).collect();
    let marks = attrs(html, " class=\"mark ", "data-reason");
    let failures = attrs(html, "<article class=\"failure\"", "data-iterations");
    let rows = attrs(html, "<tr data-reason", "data-reason");
    let per_iteration = html
        .find("id=\"files-per-iteration\"")
        .map_or(0, |at| html[at..html[at..].find("</table>").unwrap() + at].matches("<tr>").count() - 1);
    format!(
        "sections: {}\noutcome: {}\ntimeline marks: {}\nfailures (iterations each): {}\nfiles per iteration rows: {}\nstops table: {}\nscripts: {}\nstyle elements: {}\n",
        sections.join(", "),
        attrs(html, "<div class=\"outcome", "data-outcome").join(""),
        marks.join(" "),
        failures.join(" "),
        per_iteration,
        rows.join(" "),
        html.matches("<script").count(),
        html.matches("<style").count(),
    )
}

#[test]
fn a_scripted_loops_report_has_every_part_in_order() {
    let env = scripted_loop();
    let (_, html) = report(&env, "report.html");
    insta::assert_snapshot!(outline(&html), @r"
    sections: summary, timeline, failures, files, stops
    outcome: verified
    timeline marks: verify_failed verify_failed verify_failed verified
    failures (iterations each): 2 1
    files per iteration rows: 4
    stops table: verify_failed verify_failed verify_failed verified
    scripts: 0
    style elements: 1
    ");
    assert!(
        html.contains("<span class=\"count\">2 iterations</span><span class=\"muted\">at 1–2</span>"),
        "{html}"
    );
    assert!(html.contains("<strong>3</strong> files changed since the loop started"), "{html}");
    for file in ["a.txt", "b.txt", "state"] {
        assert!(html.contains(&format!("<li>{file}</li>")), "{file} missing");
    }
    assert!(html.contains("<code id=\"verify-command\">sh check.sh</code>"));
    assert!(html.contains("<dt>Iterations</dt><dd>4 / 10</dd>"));
    // The tier the start message named, kept with the loop.
    assert!(html.contains("<dt>Tier</dt><dd>default: "), "{html}");
}

#[test]
fn hostile_task_and_output_are_escaped_in_the_page() {
    let env = scripted_loop();
    let (_, html) = report(&env, "report.html");
    assert_eq!(html.matches("<script").count(), 0);
    assert_eq!(html.matches("</style>").count(), 1);
    assert_eq!(html.matches("<img").count(), 0);
    assert!(html.contains(
        "Fix the &lt;script&gt;alert(&#39;task&#39;)&lt;/script&gt; &quot;login&quot; bug &lt;/style&gt;&lt;/title&gt; ]]&gt; &lt;!-- "
    ));
    assert!(html.contains("^A^[[31m end"), "control characters are shown in caret notation");
    assert!(
        html.contains(
            "error: &lt;/pre&gt;&lt;script&gt;alert(&quot;out&quot;)&lt;/script&gt; at src/lib.rs:12"
        )
    );
}

#[test]
fn the_report_goes_next_to_the_state_unless_told_otherwise() {
    let env = TestEnv::new();
    env.start("t --verify false");
    assert!(env.stop("1").blocked());
    let run = env.run(&["report", "--session", SESSION], "");
    assert_eq!(run.code, 0, "{}", run.stdout);
    let beside = env.session_dir(SESSION).join("report.html");
    assert!(run.stdout.contains(&beside.display().to_string()), "{}", run.stdout);
    assert!(std::fs::read_to_string(&beside).unwrap().contains("<dt>Iterations</dt><dd>2 / 30</dd>"));
    // Without a session id: the one loop started in this directory, as `status` finds it.
    let here = env.run(&["report", "--out", "sub/dir/r.html"], "");
    assert_eq!(here.code, 0, "{}", here.stdout);
    assert!(env.project.join("sub/dir/r.html").is_file());
    // The options typed after /for-loop:report arrive on stdin.
    let typed = env.run(&["report", "--session", SESSION, "--options-on-stdin"], "--out 'typed name.html'\n");
    assert_eq!(typed.code, 0, "{}", typed.stdout);
    assert!(env.project.join("typed name.html").is_file());
    let bad = env.run(&["report", "--session", SESSION, "--options-on-stdin", "--exit-zero"], "--pdf");
    assert_eq!(bad.code, 0);
    assert!(bad.stdout.contains("`--pdf` is not a report option"), "{}", bad.stdout);
}

#[test]
fn no_loop_no_report() {
    let env = TestEnv::new();
    let run = env.run(&["report", "--session", SESSION], "");
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("no loop in session"), "{}", run.stdout);
    assert!(!env.session_dir(SESSION).join("report.html").exists());
}

#[test]
fn open_starts_the_platforms_opener_on_the_page() {
    let env = TestEnv::new();
    env.start("t --verify false");
    let bin = env.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let marker = env.home.join("opened");
    let opener = bin.join("xdg-open");
    // Written aside, then renamed: the test never reads a half-written marker.
    std::fs::write(
        &opener,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > '{m}.part' && mv '{m}.part' '{m}'\n", m = marker.display()),
    )
    .unwrap();
    make_executable(&opener);
    let mut cmd = env.command(&["report", "--session", SESSION, "--open"]);
    cmd.env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()));
    let run = crate::util::run_command(cmd, b"");
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.contains("opened with xdg-open"), "{}", run.stdout);
    let page = env.session_dir(SESSION).join("report.html");
    let deadline = std::time::Instant::now() + crate::util::PATIENCE;
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), page.display().to_string());
    // No opener at all: the page is still written, and the message says to open it by hand.
    let mut cmd = env.command(&["report", "--session", SESSION, "--open"]);
    cmd.env("PATH", env.home.join("nowhere"));
    let run = crate::util::run_command(cmd, b"");
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.contains("open the file in a browser yourself"), "{}", run.stdout);
}

#[cfg(unix)]
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A loop whose ledger has many stops of every kind, tokens and a metric series, as the stop
/// hook, the token budget and a metric loop write them.
fn synthetic_loop() -> TestEnv {
    let env = TestEnv::new();
    env.start(
        "make the benchmark faster than 120 ms\nKeep the public API. --verify false --max-iterations 40",
    );
    let state = std::fs::read_to_string(env.state_path()).unwrap();
    let loop_id = state.lines().find_map(|l| l.strip_prefix("loop_id: ")).unwrap().trim().to_string();
    let started: jiff::Timestamp = state
        .lines()
        .find_map(|l| l.strip_prefix("started_at: "))
        .unwrap()
        .trim()
        .trim_matches(['\'', '"'])
        .parse()
        .unwrap();
    let at = |secs: i64| (started + jiff::SignedDuration::from_secs(secs)).to_string();
    let reasons: Vec<&str> = (1..=23)
        .map(|iteration| match iteration {
            3 => "verify_timed_out",
            5 => "oracle_changed",
            8 => "promise_missing",
            23 => "time_budget",
            _ => "verify_failed",
        })
        .collect();
    let mut lines = String::new();
    let mut value = 150.0;
    for (i, (iteration, reason)) in (1u32..).zip(&reasons).enumerate() {
        let better = i % 3 != 1;
        let measured = if better { value - 3.0 - (i % 4) as f64 } else { value + 6.0 };
        if better {
            value = measured;
        }
        let mut line = json!({
            "time": at(40 * i64::from(iteration)),
            "loop_id": loop_id, "iteration": iteration, "max_iterations": 40,
            "decision": if *reason == "time_budget" { "allow" } else { "block" },
            "reason": reason, "stop_hook_active": i > 0,
            "verify": {"exit_code": if *reason == "verify_timed_out" { Value::Null } else { json!(1) },
                "timed_out": *reason == "verify_timed_out", "duration_ms": 900 + (i as u64 * 737) % 4000,
                "output_bytes": 120, "output_digest": "d",
                "tail": if i % 5 == 0 { "bench: 131 ms > 120 ms budget\nFAILED".to_string() } else { format!("assertion failed: left == right ({i})") }},
            "tokens": {"claude-sonnet-4-5-20250929": {"input": 1200 + i * 37, "output": 2400 + (i * 911) % 3000,
                "cache_write": 9000 + (i * 1733) % 6000, "cache_read": 80000 + i * 4000}},
            "metric": {"value": measured, "kept": better, "target": 120.0, "direction": "min", "name": "bench ms"},
        });
        if *reason == "oracle_changed" {
            line["oracle_changed"] = json!(["check.sh"]);
        }
        lines.push_str(&format!("{line}\n"));
        if iteration == 12 {
            lines.push_str(&format!(
                "{}\n",
                json!({"time": at(40 * i64::from(iteration) + 5), "loop_id": loop_id,
                    "iteration": iteration, "max_iterations": 40, "decision": "note", "reason": "harness_override",
                    "stop_hook_active": false, "detail": "the host ended the turn although the last stop was blocked"})
            ));
        }
    }
    lines.push_str("{\"torn line\n");
    std::fs::write(env.ledger_path(), lines).unwrap();
    env
}

#[test]
fn a_metric_loops_report_plots_the_series_with_target_and_best() {
    let env = synthetic_loop();
    let (_, html) = report(&env, "metric.html");
    let kept = html.matches("class=\"point kept\"").count();
    let discarded = html.matches("class=\"point discarded\"").count();
    assert_eq!((kept, discarded), (15, 8));
    assert_eq!(html.matches("class=\"target\"").count(), 1);
    assert!(html.contains("<h2>Metric: bench ms</h2>"), "{html}");
    assert!(html.contains("Lower is better. Best: 84 at iteration 22."), "{html}");
    assert!(html.contains("id=\"tokens\""));
    assert!(html.contains("<dt>Cost</dt><dd>$"), "a priced model gets a cost");
    assert!(html.contains("1 ledger line(s) could not be read"), "the torn line is counted");
    assert_eq!(attrs(&html, " class=\"mark ", "data-reason").len(), 24, "23 stops and 1 event");
}

// ---------------------------------------------------------------------------------------------
// Headless Chromium.

/// The browser: `$FOR_LOOP_CHROMIUM`, else `chromium` on PATH. Missing fails the test.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("FOR_LOOP_CHROMIUM") {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!("chromium is not installed: run scripts/install-test-deps (scripts/test does), or set FOR_LOOP_CHROMIUM")
        })
}

/// Where the tests leave files for people to look at: target/test-artifacts.
fn artifacts() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| crate::util::repo().join("target"), PathBuf::from)
        .join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs headless Chromium on `page` with `args`; returns its stdout and stderr.
fn chromium_run(page: &Path, args: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(args)
    .arg(format!("file://{}", page.display()));
    let out = run_bounded(cmd, "chromium", b"");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "chromium failed: {stderr}");
    (stdout, stderr)
}

/// Loads `page`, checks it loaded without a console message (a blocked script or fetch is
/// one, under the page's Content-Security-Policy), and returns the DOM Chromium built.
fn load_cleanly(page: &Path) -> String {
    let (dom, stderr) = chromium_run(page, &["--dump-dom", "--virtual-time-budget=2000"]);
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "the page logged to the console:\n{}", console.join("\n"));
    assert!(dom.contains("</html>"), "no DOM dumped: {dom}\n{stderr}");
    dom
}

fn screenshot(page: &Path, name: &str, width: u32, height: u32) -> PathBuf {
    let shot = artifacts().join(name);
    let _ = std::fs::remove_file(&shot);
    chromium_run(
        page,
        &[&format!("--window-size={width},{height}"), &format!("--screenshot={}", shot.display())],
    );
    let png = std::fs::read(&shot).unwrap_or_default();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "no screenshot at {}", shot.display());
    shot
}

#[test]
fn chromium_loads_the_report_cleanly_with_hostile_text_inert() {
    let env = scripted_loop();
    let (page, _) = report(&env, "report.html");
    let dom = load_cleanly(&page);
    // The DOM is what a real HTML parser made of the page: had any hostile text escaped its
    // escaping, it would be an element here.
    assert_eq!(dom.matches("<script").count(), 0, "{dom}");
    assert_eq!(dom.matches("<img").count(), 0, "{dom}");
    assert_eq!(dom.matches("<style").count(), 1, "{dom}");
    assert!(dom.contains("<title>for-loop · Fix the &lt;script&gt;alert('task')&lt;/script&gt;"), "{dom}");
    assert!(
        dom.contains(
            "<h1 id=\"task-title\">Fix the &lt;script&gt;alert('task')&lt;/script&gt; \"login\" bug"
        ),
        "{dom}"
    );
    assert!(
        dom.contains("error: &lt;/pre&gt;&lt;script&gt;alert(\"out\")&lt;/script&gt; at src/lib.rs:12"),
        "{dom}"
    );
    assert!(dom.contains("<span class=\"badge\">Verified</span>"), "{dom}");
    assert_eq!(dom.matches("class=\"mark r-").count(), 4);
    screenshot(&page, "report-scripted-1280.png", 1280, 1800);
}

#[test]
fn chromium_renders_a_full_report_at_laptop_width_and_in_print() {
    let env = synthetic_loop();
    let (page, _) = report(&env, "metric.html");
    let dom = load_cleanly(&page);
    for id in ["summary", "timeline", "failures", "metric", "files", "tokens", "stops"] {
        assert!(dom.contains(&format!("id=\"{id}\"")), "section {id} missing from the DOM");
    }
    screenshot(&page, "report-metric-1280.png", 1280, 3200);
    screenshot(&page, "report-metric-420.png", 420, 3000);
    let pdf = artifacts().join("report-metric-print.pdf");
    let _ = std::fs::remove_file(&pdf);
    chromium_run(&page, &["--no-pdf-header-footer", &format!("--print-to-pdf={}", pdf.display())]);
    let bytes = std::fs::read(&pdf).unwrap_or_default();
    assert!(bytes.starts_with(b"%PDF") && bytes.len() > 10_000, "no PDF at {}", pdf.display());
}

/// A loop in a linked git work tree (`git worktree add`, whose `.git` is a file naming its git
/// directory) is a loop in git: the report lists the files each checkpoint changed.
#[test]
fn a_loop_in_a_linked_work_tree_reports_its_changes_as_in_git() {
    let env = TestEnv::new();
    git(&env, &["init", "-q"]);
    env.write("check.sh", "test -f fixed\n");
    git(&env, &["add", "."]);
    git(&env, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]);
    let linked = env.home.join("linked");
    git(&env, &["worktree", "add", "-q", "--detach", linked.to_str().unwrap()]);
    assert!(linked.join(".git").is_file(), "a linked work tree's .git is a file");
    let started = env.run(
        &["start", "--session", SESSION, "--cwd", linked.to_str().unwrap()],
        "make fixed --verify 'sh check.sh' --checkpoint",
    );
    assert_eq!(started.code, 0, "{}", started.stdout);
    std::fs::write(linked.join("a.txt"), "1\n").unwrap();
    let mut stop = env.command(&["stop-hook"]);
    stop.current_dir(&linked);
    let event = crate::util::stop_event(SESSION, &linked, "done", false);
    let run = crate::util::run_command(stop, event.to_string().as_bytes());
    assert!(run.blocked(), "{}", run.stdout);
    let (_, html) = report(&env, "report.html");
    assert!(!html.contains("not in a git repository"), "{html}");
    assert!(html.contains("<table id=\"files-per-iteration\">"), "{html}");
    assert!(html.contains("<strong>1</strong> file changed since the loop started"), "{html}");
    assert!(html.contains("<li>a.txt</li>"), "{html}");
}

#[test]
fn report_and_status_take_either_id_status_all_prints() {
    let env = TestEnv::new();
    env.start("t --verify false");
    assert!(env.stop("1").blocked());
    let all = env.run(&["status", "--all"], "");
    let row = all.stdout.lines().find(|l| l.contains(&format!("session {SESSION}"))).unwrap();
    let loop_id = row.split_whitespace().next().unwrap().to_string();
    assert_ne!(loop_id, SESSION, "{}", all.stdout);
    for id in [SESSION, loop_id.as_str()] {
        let run = env.run(&["report", "--session", id, "--out", "r.html"], "");
        assert_eq!(run.code, 0, "{id}: {}", run.stdout);
        assert!(env.project.join("r.html").is_file(), "{id}");
        std::fs::remove_file(env.project.join("r.html")).unwrap();
        let status = env.run(&["status", "--session", id, "--json"], "");
        let status: Value = serde_json::from_str(&status.stdout).unwrap();
        assert_eq!(status["session_id"], SESSION, "{id}: {status}");
        assert_eq!(status["loop"]["meta"]["loop_id"], loop_id.as_str(), "{id}: {status}");
        let human = env.run(&["status", "--session", id], "");
        assert!(human.stdout.contains(&format!("loop {loop_id} is active")), "{id}: {}", human.stdout);
    }
    let neither = env.run(&["report", "--session", "neither-id"], "");
    assert_eq!(neither.code, 1, "{}", neither.stdout);
    assert!(neither.stdout.contains("nor one whose loop id it is"), "{}", neither.stdout);
    let status = env.run(&["status", "--session", "neither-id"], "");
    assert!(status.stdout.contains("no loop in this session"), "{}", status.stdout);
}
