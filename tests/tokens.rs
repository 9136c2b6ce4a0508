//! `--max-tokens`: the session's model usage, read incrementally from a Claude Code transcript
//! as the loop runs, and shown by status, the receipt and the report.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use crate::util::{SESSION, TestEnv};

/// An assistant line as Claude Code writes it (one content block per line), `secs` after now.
fn reply(id: &str, secs: i64, input: u64, output: u64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
    json!({
        "type": "assistant", "uuid": format!("u-{id}-{input}"), "sessionId": SESSION, "timestamp": at.to_string(),
        "message": {"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "working on it"}], "stop_reason": null,
            "usage": {"input_tokens": input, "output_tokens": output,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 90_000}},
    })
    .to_string()
        + "\n"
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

fn state(env: &TestEnv) -> String {
    std::fs::read_to_string(env.state_path()).unwrap()
}

#[test]
fn the_token_budget_parks_the_loop_once_the_transcript_shows_it_spent() {
    let env = TestEnv::new();
    // The stop events name <project>/transcript.jsonl. What the session used before the loop
    // started does not count.
    let transcript = env.project.join("transcript.jsonl");
    append(&transcript, &reply("msg_before", -3_600, 1_000_000, 1_000_000));
    let started = env.start("t --verify false --max-tokens 1000");
    assert!(
        started.stdout.contains("Token budget: 1.0k (input + output + cache writes"),
        "{}",
        started.stdout
    );

    // One reply written as two lines (two content blocks): counted once.
    append(&transcript, &(reply("msg_1", 1, 300, 100) + &reply("msg_1", 1, 300, 100)));
    assert!(env.stop("1").blocked());
    let ledger = env.ledger();
    assert_eq!(ledger[0]["tokens"]["claude-sonnet-4-5-20250929"]["input"], 300);
    assert_eq!(ledger[0]["tokens"]["claude-sonnet-4-5-20250929"]["output"], 100);
    let status = env.run(&["status", "--session", SESSION], "");
    assert!(status.stdout.contains("tokens:     400 counted of a 1.0k budget"), "{}", status.stdout);

    // Appended while the loop runs, the last line still being written.
    let next = reply("msg_3", 3, 100, 0);
    let (head, tail) = next.split_at(50);
    append(&transcript, &(reply("msg_2", 2, 500, 50) + head));
    assert!(env.stop_as(SESSION, "2", true).blocked(), "950 tokens: under the budget");
    append(&transcript, tail);
    let parked = env.stop_as(SESSION, "3", true);
    assert!(!parked.blocked());
    let message = parked.system_message();
    assert!(message.contains("the token budget of 1.0k is spent (1.1k used)"), "{message}");
    assert!(message.contains("· 1.1k tokens"), "{message}");
    assert!(message.contains("--more-tokens"), "{message}");
    assert_eq!(env.ledger_reasons(SESSION), ["verify_failed", "verify_failed", "token_budget"]);
    let tokens: Vec<Value> =
        env.ledger().iter().map(|e| e["tokens"]["claude-sonnet-4-5-20250929"]["input"].clone()).collect();
    assert_eq!(tokens, [json!(300), json!(500), json!(100)], "each stop records its own iteration's tokens");
    let len = std::fs::metadata(&transcript).unwrap().len();
    assert!(state(&env).contains(&format!("offset: {len}")), "{}", state(&env));

    let report = env.run(&["report", "--session", SESSION, "--out", "r.html"], "");
    assert_eq!(report.code, 0, "{}", report.stdout);
    let html = std::fs::read_to_string(env.project.join("r.html")).unwrap();
    assert!(html.contains("<dt>Tokens</dt><dd>1.1k <span class=\"muted\">of 1.0k</span></dd>"), "{html}");
    assert!(html.contains("id=\"tokens\""));

    let resumed = env.run(&["resume", "--session", SESSION], "--more-tokens 5k");
    assert_eq!(resumed.code, 0, "{}", resumed.stdout);
    assert!(state(&env).contains("max_tokens: 6050"), "{}", state(&env));
    assert!(env.stop_as(SESSION, "4", true).blocked());
}

#[test]
fn a_host_whose_transcript_is_not_read_for_usage_refuses_a_token_budget() {
    let env = TestEnv::new();
    let run = env.run(&["start", "--session", "c-1", "--host", "cursor"], "t --verify false --max-tokens 2M");
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("--max-tokens needs the model usage"), "{}", run.stdout);
}
