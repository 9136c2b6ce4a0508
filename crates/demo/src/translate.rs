//! From the CLI's stream-json events to [`Step`]s.
//!
//! The events say what the model did and what the hooks answered; the loop's ledger, read at
//! each Stop, adds what the hook measured (verify's exit code, time and output, the changed
//! verify files). The ledger line of a stop is on disk before the hook answers, so reading it
//! when the answer arrives is not a race.

use std::collections::HashMap;

use serde_json::Value;

use crate::trace::{Step, Stop, Verify};

/// Longest rendering of an edit's old or new text, in characters.
const CLIP: usize = 100;

/// What the translator reads besides the events.
pub(crate) trait Sources {
    /// The text of the model's first request: the expanded `/for-loop` prompt with the loop's
    /// start message.
    fn first_prompt(&self) -> Option<String>;
    /// Ledger line `index` (0-based), parsed.
    fn ledger_entry(&self, index: usize) -> Option<Value>;
}

pub(crate) struct Translator {
    max_iterations: u32,
    /// The check the next stop runs: the loop's, or in a plan the current story's, as the last
    /// re-injected prompt named it.
    check: String,
    /// The turn in progress (1-based).
    iteration: u32,
    /// The last turn whose header was emitted; 0 before the first.
    announced: u32,
    loop_started: bool,
    /// Ledger lines already read.
    ledger_read: usize,
    /// Tool names by `tool_use` id, to name the tool a result belongs to.
    tools: HashMap<String, String>,
    /// `PreToolUse` denials not yet matched to their tool result: (tool, reason).
    denials: Vec<(String, String)>,
    last_stop_iteration: Option<u32>,
}

impl Translator {
    pub(crate) fn new(max_iterations: u32, check: &str) -> Translator {
        Translator {
            max_iterations,
            check: check.to_owned(),
            iteration: 1,
            announced: 0,
            loop_started: false,
            ledger_read: 0,
            tools: HashMap::new(),
            denials: Vec::new(),
            last_stop_iteration: None,
        }
    }

    /// Iterations the loop used: those that ended in a stop.
    pub(crate) fn iterations(&self) -> u32 {
        self.last_stop_iteration.unwrap_or(0)
    }

    /// The steps one event adds (often none: most events are bookkeeping).
    pub(crate) fn feed(&mut self, event: &Value, sources: &dyn Sources) -> Vec<Step> {
        let mut steps = Vec::new();
        match (event["type"].as_str().unwrap_or_default(), event["subtype"].as_str().unwrap_or_default()) {
            ("system", "init") => steps.push(Step::Cli {
                version: event["claude_code_version"].as_str().unwrap_or("unknown").to_owned(),
                plugin_loaded: event["plugins"]
                    .as_array()
                    .is_some_and(|plugins| plugins.iter().any(|p| p["name"] == "for-loop")),
            }),
            ("assistant", _) => {
                self.begin_turn(&mut steps, sources);
                for block in blocks(&event["message"]["content"]) {
                    match block["type"].as_str() {
                        Some("text") => {
                            let text = block["text"].as_str().unwrap_or_default().trim();
                            if !text.is_empty() {
                                steps.push(Step::Said { iteration: self.iteration, text: text.to_owned() });
                            }
                        }
                        Some("tool_use") => {
                            let tool = block["name"].as_str().unwrap_or("tool").to_owned();
                            let id = block["id"].as_str().unwrap_or_default().to_owned();
                            self.tools.insert(id, tool.clone());
                            steps.push(Step::Tool {
                                iteration: self.iteration,
                                summary: summarize(&tool, &block["input"]),
                                input: block["input"].clone(),
                                tool,
                            });
                        }
                        _ => {}
                    }
                }
            }
            ("user", _) => {
                for block in blocks(&event["message"]["content"]) {
                    if block["type"] == "tool_result" && block["is_error"] == true {
                        steps.push(self.failed_tool(block));
                    }
                }
            }
            ("system", "hook_response") => match event["hook_event"].as_str() {
                Some("PreToolUse") => self.note_denial(event),
                Some("Stop") => steps.push(self.stop(event, sources)),
                _ => {}
            },
            _ => {}
        }
        steps
    }

    /// Before the first thing a turn shows: the loop's start message (once) and the header.
    fn begin_turn(&mut self, steps: &mut Vec<Step>, sources: &dyn Sources) {
        if !self.loop_started {
            self.loop_started = true;
            steps.push(Step::LoopStarted { banner: banner(&sources.first_prompt().unwrap_or_default()) });
        }
        if self.announced < self.iteration {
            self.announced = self.iteration;
            steps.push(Step::Iteration { n: self.iteration, of: self.max_iterations });
        }
    }

    fn note_denial(&mut self, event: &Value) {
        let answer = hook_json(event);
        let output = &answer["hookSpecificOutput"];
        if output["permissionDecision"] == "deny" {
            // hook_name is `PreToolUse:Write`: the tool is after the colon.
            let tool = event["hook_name"].as_str().and_then(|n| n.split_once(':')).map_or("tool", |(_, t)| t);
            let reason = output["permissionDecisionReason"].as_str().unwrap_or_default();
            self.denials.push((tool.to_owned(), reason.to_owned()));
        }
    }

    fn failed_tool(&mut self, block: &Value) -> Step {
        let id = block["tool_use_id"].as_str().unwrap_or_default();
        let tool = self.tools.get(id).cloned().unwrap_or_else(|| "tool".to_owned());
        if let Some(at) = self.denials.iter().position(|(t, _)| *t == tool) {
            let (_, reason) = self.denials.remove(at);
            return Step::Denied { iteration: self.iteration, tool, reason };
        }
        let text = content_text(&block["content"]);
        let error = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("(no message)").trim().to_owned();
        Step::ToolFailed { iteration: self.iteration, tool, error }
    }

    fn stop(&mut self, event: &Value, sources: &dyn Sources) -> Step {
        let answer = hook_json(event);
        let block = answer["decision"] == "block";
        // A stop the hook let pass without a loop writes no ledger line; only count lines read.
        let entry = sources.ledger_entry(self.ledger_read);
        if entry.is_some() {
            self.ledger_read += 1;
        }
        let entry = entry.unwrap_or(Value::Null);
        let number = |field: &str, default: u32| {
            entry[field].as_u64().map_or(default, |n| u32::try_from(n).unwrap_or(u32::MAX))
        };
        let iteration = number("iteration", self.iteration);
        let of = number("max_iterations", self.max_iterations);
        let verify = entry["verify"].is_object().then(|| {
            let v = &entry["verify"];
            Verify {
                command: self.check.clone(),
                exit_code: v["exit_code"].as_i64(),
                timed_out: v["timed_out"] == true,
                duration_ms: v["duration_ms"].as_u64().unwrap_or(0),
                tail: v["tail"].as_str().unwrap_or_default().to_owned(),
            }
        });
        let oracle_changed = entry["oracle_changed"]
            .as_array()
            .map(|paths| paths.iter().filter_map(|p| p.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        self.last_stop_iteration = Some(iteration);
        let reinjected = answer["reason"].as_str().unwrap_or_default();
        if block {
            self.iteration = iteration + 1;
            if let Some(next) = next_check(reinjected) {
                self.check = next;
            }
        }
        Stop {
            iteration,
            of,
            decision: if block { "block" } else { "allow" }.to_owned(),
            reason: entry["reason"].as_str().map(str::to_owned),
            verify,
            oracle_changed,
            status: answer["systemMessage"].as_str().unwrap_or_default().to_owned(),
            reinjected: block.then(|| reinjected.to_owned()),
        }
        .into()
    }
}

/// The check a re-injected prompt says the loop goes on until: "until `CMD` exits 0".
fn next_check(prompt: &str) -> Option<String> {
    let rest = &prompt[prompt.find("until `")? + "until `".len()..];
    Some(rest[..rest.find("` exits 0")?].to_owned())
}

impl From<Stop> for Step {
    fn from(stop: Stop) -> Step {
        Step::Stop(stop)
    }
}

fn blocks(content: &Value) -> &[Value] {
    content.as_array().map_or(&[], Vec::as_slice)
}

/// What a hook printed on stdout, parsed; `Null` when it printed nothing (a silent allow).
fn hook_json(event: &Value) -> Value {
    let stdout = event["stdout"].as_str().or_else(|| event["output"].as_str()).unwrap_or_default();
    serde_json::from_str(stdout.trim()).unwrap_or(Value::Null)
}

/// A string content, or the text blocks of an array content, joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// The loop's start message out of the first prompt: its headline and the settings a reader
/// needs (not the state paths, which are the demo's temporary ones). When the loop did not
/// start, whatever for-loop said instead.
fn banner(prompt: &str) -> Vec<String> {
    const SHOWN: &[&str] = &["Verify:", "Done when:", "Iterations:", "Protected:"];
    // The prompt starts with the command's own tags (`<command-message>for-loop:for-loop…`), so
    // look for for-loop's words, not its name.
    let at = prompt.find("for-loop: loop started").or_else(|| prompt.find("for-loop: "));
    let Some(at) = at else {
        return vec!["(for-loop said nothing: the loop did not start)".to_owned()];
    };
    let mut lines = prompt[at..].lines();
    let headline = lines.next().unwrap_or_default().to_owned();
    if !headline.starts_with("for-loop: loop started") {
        let mut said = vec![headline];
        said.extend(lines.take_while(|l| !l.trim().is_empty()).take(4).map(str::to_owned));
        return said;
    }
    let mut banner = vec![headline];
    banner.extend(lines.filter(|l| SHOWN.iter().any(|s| l.starts_with(s))).map(str::to_owned));
    banner
}

/// One line for a tool call: the command, or the file and what is written into it.
fn summarize(tool: &str, input: &Value) -> String {
    let field = |name: &str| input[name].as_str().unwrap_or_default();
    match tool {
        "Bash" => format!("$ {}", first_line(field("command"))),
        "Write" => {
            let content = field("content");
            if content.lines().count() <= 1 && content.len() <= 40 {
                format!("Write {} ← {content:?}", field("file_path"))
            } else {
                format!("Write {} ({} lines)", field("file_path"), content.lines().count())
            }
        }
        "Edit" => format!(
            "Edit {}: {:?} → {:?}",
            field("file_path"),
            clip(field("old_string")),
            clip(field("new_string"))
        ),
        _ => format!("{tool} {}", clip(&input.to_string())),
    }
}

/// The first line of `text`, marked when there are more.
fn first_line(text: &str) -> String {
    let mut lines = text.lines();
    let mut out = lines.next().unwrap_or_default().to_owned();
    if lines.next().is_some() {
        out.push_str(" …");
    }
    out
}

/// The first line of `text`, at most [`CLIP`] characters, marked when cut.
fn clip(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(CLIP).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fixed {
        prompt: &'static str,
        ledger: Vec<Value>,
    }

    impl Sources for Fixed {
        fn first_prompt(&self) -> Option<String> {
            Some(self.prompt.to_owned())
        }
        fn ledger_entry(&self, index: usize) -> Option<Value> {
            self.ledger.get(index).cloned()
        }
    }

    #[test]
    fn a_denied_write_and_a_blocked_stop() {
        let sources = Fixed {
            prompt: "<command-name>/for-loop</command-name>\nfor-loop: loop started, iteration 1 of 10.\n\nTask:\nt\n\n\
                     Verify:      sh check.sh\nState:       /x/state.md\nProtected:   check.sh\n",
            ledger: vec![json!({"iteration": 1, "max_iterations": 10, "reason": "oracle_changed",
                "verify": {"exit_code": 0, "timed_out": false, "duration_ms": 3, "tail": ""},
                "oracle_changed": ["check.sh"]})],
        };
        let mut t = Translator::new(10, "sh check.sh");
        let events = [
            json!({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": "t1", "name": "Write", "input": {"file_path": "check.sh", "content": "exit 0\n"}}]}}),
            json!({"type": "system", "subtype": "hook_response", "hook_event": "PreToolUse", "hook_name": "PreToolUse:Write",
                "stdout": "{\"hookSpecificOutput\":{\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"protected\"}}"}),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "t1", "is_error": true, "content": "PreToolUse:Write hook error: protected"}]}}),
            json!({"type": "system", "subtype": "hook_response", "hook_event": "Stop",
                "stdout": "{\"decision\":\"block\",\"reason\":\"again\",\"systemMessage\":\"for-loop 2/10\"}\n"}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "ok"}]}}),
        ];
        let steps: Vec<Step> = events.iter().flat_map(|e| t.feed(e, &sources)).collect();
        assert_eq!(
            steps[0],
            Step::LoopStarted {
                banner: vec![
                    "for-loop: loop started, iteration 1 of 10.".into(),
                    "Verify:      sh check.sh".into(),
                    "Protected:   check.sh".into()
                ]
            }
        );
        assert_eq!(steps[1], Step::Iteration { n: 1, of: 10 });
        assert!(
            matches!(&steps[2], Step::Tool { summary, .. } if summary == "Write check.sh ← \"exit 0\\n\"")
        );
        assert_eq!(steps[3], Step::Denied { iteration: 1, tool: "Write".into(), reason: "protected".into() });
        let Step::Stop(stop) = &steps[4] else { panic!("{:?}", steps[4]) };
        assert_eq!(stop.decision, "block");
        assert_eq!(stop.reason.as_deref(), Some("oracle_changed"));
        assert_eq!(stop.oracle_changed, ["check.sh"]);
        assert!(stop.verify.as_ref().unwrap().passed());
        assert_eq!(stop.reinjected.as_deref(), Some("again"));
        assert_eq!(steps[5], Step::Iteration { n: 2, of: 10 });
        assert_eq!(steps[6], Step::Said { iteration: 2, text: "ok".into() });
        assert_eq!(t.iterations(), 1);
    }

    #[test]
    fn the_next_check_is_the_one_the_reinjected_prompt_names() {
        let prompt =
            "for-loop: this is iteration 3 of 10. The loop goes on until `sh check-mul.sh` exits 0 for the";
        assert_eq!(next_check(prompt).as_deref(), Some("sh check-mul.sh"));
        assert_eq!(next_check("no check named here"), None);
        assert_eq!(next_check("until `never closed"), None);
    }
}
