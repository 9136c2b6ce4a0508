//! What the scripted model says, one step per main-loop request.
//!
//! A step is either a final text (the turn ends) or one tool call (the agent runs the tool and
//! comes back with its result, which is the next request). The JSON form is an array of one-key
//! objects so a script file reads like the conversation it drives:
//!
//! ```json
//! [{"bash": "cargo test"},
//!  {"write": {"file_path": "/abs/x", "content": "y"}},
//!  {"edit": {"file_path": "/abs/x", "old_string": "y", "new_string": "z"}},
//!  {"text": "done"}]
//! ```
//!
//! An `{"error": {"status": 429, "retry_after": 2}}` step answers the request with an API error in
//! the dialect of the API asked (a rate limit for 429, an overload for 529/503), with the wait in
//! the protocol's own header or field, so a test can see how a CLI reports a limit. A
//! `{"usage_limit": {"resets_in": 2}}` step answers with the usage-window limit each API has (a
//! daily quota for Gemini, `usage_limit_reached` for `OpenAI`), which a CLI does not retry itself.
//! A `{"background": "sleep 5 && make"}` step starts the command as the client's background
//! work and returns at once: Claude Code's `Bash` with `run_in_background`, the `is_background`
//! (or async mode) of a shell tool that has one, else `CMD &` in the shell.
//! A `{"prompt_too_long": null}` step answers that the conversation no longer fits the model's
//! context window (Anthropic's HTTP 400 `prompt is too long`), which a CLI does not retry either.
//!
//! A `{"listen": [{"name": "test_x", "expected": "7017", "file_path": "/abs/x", "old_string":
//! "a", "new_string": "b"}]}` step is a model that listens: it runs the edits of exactly the
//! failures its last user message named with their expected values, and no other
//! ([`Step::heard`]).

use std::fmt;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The description sent with every Bash call. Claude Code shows it in its UI and transcript, so
/// it says where the command came from.
const BASH_DESCRIPTION: &str = "Run the command scripted by mock-model";

/// One scripted model turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StepRepr", into = "StepRepr")]
pub enum Step {
    /// Say this and end the turn (`stop_reason: end_turn`).
    Text(String),
    /// Call the `Bash` tool.
    Bash { command: String },
    /// Start `command` in the background and return at once (Claude Code's `Bash` with
    /// `run_in_background`): the client wakes the model when it ends, where it does that.
    Background { command: String },
    /// Call the `Write` tool. Claude Code wants an absolute path.
    Write { file_path: String, content: String },
    /// Call the `Edit` tool. Claude Code 2.1.328 edits a file it has not read in the session.
    Edit { file_path: String, old_string: String, new_string: String },
    /// Answer with an API error of this HTTP status, saying the limit resets in
    /// `retry_after` seconds when given.
    Error { status: u16, retry_after: Option<u64> },
    /// Answer with the API's usage-window limit (HTTP 429), resetting in `resets_in` seconds.
    UsageLimit { resets_in: u64 },
    /// Call the tool `name` with `input`, whatever the client calls its tools: a client's own
    /// protocol tool, such as Qwen Code's `update_goal`. A client whose only tool is its shell
    /// (Codex, Copilot CLI) gets it as a text naming the call.
    Call { name: String, input: Value },
    /// Answer that the conversation is longer than the model's context window.
    PromptTooLong,
    /// A model that listens: call `Bash` to apply exactly the fixes whose failure the last user
    /// message (the prompt, or the Stop hook's feedback) named with its expected value, and
    /// nothing else ([`Fix::told_in`]); a command that says so when it named none.
    Listen { fixes: Vec<Fix> },
}

/// A fix a listening model knows how to make, and the failure it answers: a test that fails
/// until `old_string` in `file_path` becomes `new_string`, which only a model told the test's
/// name and the value it expects would know to write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fix {
    /// The failing test, as its runner names it (`tests::case_017`, `test_v.py::test_value[17]`).
    pub name: String,
    /// The value the test expects, as its runner prints it (`7017`).
    pub expected: String,
    pub file_path: String,
    pub old_string: String,
    pub new_string: String,
}

/// How many lines after a line naming a failure may hold its expected value: a runner prints
/// the assertion a few lines under the name.
const TOLD_WITHIN_LINES: usize = 12;

impl Fix {
    /// Whether `told` names this failure with its expected value: a line holding the name as a
    /// whole word, and the expected value as a whole word on that line or one of the
    /// twelve lines after it.
    pub fn told_in(&self, told: &str) -> bool {
        let lines: Vec<&str> = told.lines().collect();
        lines.iter().enumerate().any(|(at, line)| {
            has_word(line, &self.name)
                && lines[at..(at + 1 + TOLD_WITHIN_LINES).min(lines.len())]
                    .iter()
                    .any(|line| has_word(line, &self.expected))
        })
    }
}

/// Whether `word` occurs in `line` with no letter, digit or `_` right before or after it.
fn has_word(line: &str, word: &str) -> bool {
    let glued = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    !word.is_empty()
        && line.match_indices(word).any(|(at, _)| {
            !glued(line[..at].chars().next_back()) && !glued(line[at + word.len()..].chars().next())
        })
}

/// A step as an agent CLI whose only tool is its shell takes it (Codex, Copilot CLI).
pub(crate) enum ShellTurn {
    /// The command line the shell tool runs.
    Run(String),
    /// The text the model says instead, ending its turn.
    Say(String),
}

impl ShellTurn {
    /// What `step` becomes, or `exhausted` once the script is over. Write and Edit steps are
    /// shell commands, so a script runs the same on any client whatever its file tools are called.
    pub(crate) fn of(step: Option<&Step>, exhausted: &str) -> ShellTurn {
        let command = match step {
            None => return ShellTurn::Say(exhausted.to_owned()),
            Some(Step::Text(text)) => return ShellTurn::Say(text.clone()),
            // Served as an HTTP error before a reply is built.
            Some(Step::Error { status, .. }) => return ShellTurn::Say(format!("error {status}")),
            Some(Step::UsageLimit { .. }) => return ShellTurn::Say("usage limit".into()),
            Some(Step::Call { name, input }) => return ShellTurn::Say(format!("call {name} {input}")),
            Some(Step::PromptTooLong) => return ShellTurn::Say("prompt is too long".into()),
            Some(Step::Listen { .. }) => return ShellTurn::Say("listen".into()),
            Some(Step::Bash { command }) => command.clone(),
            Some(Step::Background { command }) => format!("nohup sh -c {} >/dev/null 2>&1 &", quote(command)),
            Some(Step::Write { file_path, content }) => {
                format!("printf '%s' {} > {}", quote(content), quote(file_path))
            }
            Some(Step::Edit { file_path, old_string, new_string }) => format!(
                "python3 -c 'import sys;p,a,b=sys.argv[1:];s=open(p).read();open(p,\"w\").write(s.replace(a,b,1))' {} {} {}",
                quote(file_path),
                quote(old_string),
                quote(new_string)
            ),
        };
        ShellTurn::Run(command)
    }
}

/// A POSIX shell single-quoted word.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl Step {
    /// The step as served after the model was `told` the last user message's text: a listening
    /// step becomes the command that applies the fixes it was told of; any other step is itself.
    pub fn heard(&self, told: &str) -> Step {
        let Step::Listen { fixes } = self else { return self.clone() };
        let applied: Vec<String> = fixes
            .iter()
            .filter(|fix| fix.told_in(told))
            .map(|fix| {
                format!(
                    "python3 -c 'import sys;p,a,b=sys.argv[1:];s=open(p).read();open(p,\"w\").write(s.replace(a,b,1))' {} {} {}",
                    quote(&fix.file_path),
                    quote(&fix.old_string),
                    quote(&fix.new_string)
                )
            })
            .collect();
        let command = if applied.is_empty() {
            "echo 'mock-model: I was told of no failure I know the fix for'".to_owned()
        } else {
            format!("{} && echo 'mock-model: fixed {} failure(s)'", applied.join(" && "), applied.len())
        };
        Step::Bash { command }
    }

    /// The tool name and input this step calls, or `None` for a text step.
    pub fn tool_call(&self) -> Option<(String, Value)> {
        match self {
            Step::Text(_) | Step::Error { .. } | Step::UsageLimit { .. } | Step::PromptTooLong => None,
            // Served as [`Step::heard`] makes it.
            Step::Listen { .. } => None,
            Step::Bash { command } => {
                Some(("Bash".into(), json!({"command": command, "description": BASH_DESCRIPTION})))
            }
            Step::Background { command } => Some((
                "Bash".into(),
                json!({"command": command, "description": BASH_DESCRIPTION, "run_in_background": true}),
            )),
            Step::Write { file_path, content } => {
                Some(("Write".into(), json!({"file_path": file_path, "content": content})))
            }
            Step::Edit { file_path, old_string, new_string } => Some((
                "Edit".into(),
                json!({"file_path": file_path, "old_string": old_string, "new_string": new_string}),
            )),
            Step::Call { name, input } => Some((name.clone(), input.clone())),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Text(text) => write!(f, "text {text:?}"),
            Step::Bash { command } => write!(f, "bash {command:?}"),
            Step::Background { command } => write!(f, "background {command:?}"),
            Step::Write { file_path, .. } => write!(f, "write {file_path}"),
            Step::Edit { file_path, .. } => write!(f, "edit {file_path}"),
            Step::Error { status, .. } => write!(f, "error {status}"),
            Step::UsageLimit { resets_in } => write!(f, "usage limit, resets in {resets_in}s"),
            Step::Call { name, .. } => write!(f, "call {name}"),
            Step::PromptTooLong => write!(f, "prompt too long"),
            Step::Listen { fixes } => write!(f, "listen for {} failure(s)", fixes.len()),
        }
    }
}

/// The wire form of a step. `bash` takes a bare string, the short form people write, or an
/// object, the form the other tools use.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum StepRepr {
    Text(String),
    Bash(BashRepr),
    Background(String),
    Write {
        file_path: String,
        content: String,
    },
    Edit {
        file_path: String,
        old_string: String,
        new_string: String,
    },
    Error {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<u64>,
    },
    UsageLimit {
        resets_in: u64,
    },
    Call {
        name: String,
        input: Value,
    },
    PromptTooLong(Option<Value>),
    Listen(Vec<Fix>),
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum BashRepr {
    Short(String),
    Long(BashCommand),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BashCommand {
    command: String,
}

impl From<StepRepr> for Step {
    fn from(repr: StepRepr) -> Step {
        match repr {
            StepRepr::Text(text) => Step::Text(text),
            StepRepr::Bash(BashRepr::Short(command) | BashRepr::Long(BashCommand { command })) => {
                Step::Bash { command }
            }
            StepRepr::Background(command) => Step::Background { command },
            StepRepr::Write { file_path, content } => Step::Write { file_path, content },
            StepRepr::Edit { file_path, old_string, new_string } => {
                Step::Edit { file_path, old_string, new_string }
            }
            StepRepr::Error { status, retry_after } => Step::Error { status, retry_after },
            StepRepr::UsageLimit { resets_in } => Step::UsageLimit { resets_in },
            StepRepr::Call { name, input } => Step::Call { name, input },
            StepRepr::PromptTooLong(_) => Step::PromptTooLong,
            StepRepr::Listen(fixes) => Step::Listen { fixes },
        }
    }
}

impl From<Step> for StepRepr {
    fn from(step: Step) -> StepRepr {
        match step {
            Step::Text(text) => StepRepr::Text(text),
            Step::Bash { command } => StepRepr::Bash(BashRepr::Short(command)),
            Step::Background { command } => StepRepr::Background(command),
            Step::Write { file_path, content } => StepRepr::Write { file_path, content },
            Step::Edit { file_path, old_string, new_string } => {
                StepRepr::Edit { file_path, old_string, new_string }
            }
            Step::Error { status, retry_after } => StepRepr::Error { status, retry_after },
            Step::UsageLimit { resets_in } => StepRepr::UsageLimit { resets_in },
            Step::Call { name, input } => StepRepr::Call { name, input },
            Step::PromptTooLong => StepRepr::PromptTooLong(None),
            Step::Listen { fixes } => StepRepr::Listen(fixes),
        }
    }
}

/// The steps served, in order, to the main-loop requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Script {
    steps: Vec<Step>,
}

impl Script {
    /// An empty script: every main request gets the exhausted reply.
    pub fn new() -> Script {
        Script::default()
    }

    /// Appends a final text.
    pub fn text(mut self, text: impl Into<String>) -> Script {
        self.steps.push(Step::Text(text.into()));
        self
    }

    /// Appends a Bash call.
    pub fn bash(mut self, command: impl Into<String>) -> Script {
        self.steps.push(Step::Bash { command: command.into() });
        self
    }

    /// Appends a command started in the background ([`Step::Background`]).
    pub fn background(mut self, command: impl Into<String>) -> Script {
        self.steps.push(Step::Background { command: command.into() });
        self
    }

    /// Appends a Write call.
    pub fn write(mut self, file_path: impl Into<String>, content: impl Into<String>) -> Script {
        self.steps.push(Step::Write { file_path: file_path.into(), content: content.into() });
        self
    }

    /// Appends an Edit call.
    pub fn edit(
        mut self,
        file_path: impl Into<String>,
        old_string: impl Into<String>,
        new_string: impl Into<String>,
    ) -> Script {
        self.steps.push(Step::Edit {
            file_path: file_path.into(),
            old_string: old_string.into(),
            new_string: new_string.into(),
        });
        self
    }

    /// Appends an API error of HTTP `status` (429: rate limit), with the reset `retry_after`
    /// seconds away when given.
    pub fn error(mut self, status: u16, retry_after: Option<u64>) -> Script {
        self.steps.push(Step::Error { status, retry_after });
        self
    }

    /// Appends the API's usage-window limit, resetting `resets_in` seconds after it is served.
    pub fn usage_limit(mut self, resets_in: u64) -> Script {
        self.steps.push(Step::UsageLimit { resets_in });
        self
    }

    /// Appends a call of the tool `name` with `input`.
    pub fn call(mut self, name: impl Into<String>, input: Value) -> Script {
        self.steps.push(Step::Call { name: name.into(), input });
        self
    }

    /// Appends the answer that the conversation no longer fits the model's context window.
    pub fn prompt_too_long(mut self) -> Script {
        self.steps.push(Step::PromptTooLong);
        self
    }

    /// Appends a listening step: the fixes of the failures the last user message names with
    /// their expected values ([`Step::Listen`]).
    pub fn listen(mut self, fixes: Vec<Fix>) -> Script {
        self.steps.push(Step::Listen { fixes });
        self
    }

    /// Parses the JSON form (an array of steps).
    pub fn from_json(text: &str) -> anyhow::Result<Script> {
        serde_json::from_str(text).context("invalid script")
    }

    /// Reads the JSON form from a file.
    pub fn from_file(path: &Path) -> anyhow::Result<Script> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Script::from_json(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    pub(crate) fn into_steps(self) -> Vec<Step> {
        self.steps
    }
}

impl From<Vec<Step>> for Script {
    fn from(steps: Vec<Step>) -> Script {
        Script { steps }
    }
}

impl FromIterator<Step> for Script {
    fn from_iter<I: IntoIterator<Item = Step>>(iter: I) -> Script {
        Script { steps: iter.into_iter().collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_form_round_trips() {
        let text = r#"[{"text":"done"},{"bash":"cargo test"},{"write":{"file_path":"/abs/x","content":"y"}},
            {"edit":{"file_path":"/abs/x","old_string":"y","new_string":"z"}},
            {"error":{"status":429,"retry_after":2}},{"error":{"status":529}},{"usage_limit":{"resets_in":3}},{"prompt_too_long":null}]"#;
        let script = Script::from_json(text).unwrap();
        let expected = Script::new()
            .text("done")
            .bash("cargo test")
            .write("/abs/x", "y")
            .edit("/abs/x", "y", "z")
            .error(429, Some(2))
            .error(529, None)
            .usage_limit(3)
            .prompt_too_long();
        assert_eq!(script, expected);
        let back = serde_json::to_string(&script).unwrap();
        assert_eq!(Script::from_json(&back).unwrap(), expected);
        assert!(back.starts_with(r#"[{"text":"done"},{"bash":"cargo test"},"#), "{back}");
    }

    #[test]
    fn a_background_step_is_each_clients_background_work() {
        let script = Script::from_json(r#"[{"background":"sleep 5 && touch built"}]"#).unwrap();
        assert_eq!(script, Script::new().background("sleep 5 && touch built"));
        let (name, input) = script.steps()[0].tool_call().unwrap();
        assert_eq!((name.as_str(), &input["run_in_background"]), ("Bash", &json!(true)));
        assert_eq!(input["command"], "sleep 5 && touch built");
        let ShellTurn::Run(line) = ShellTurn::of(script.steps().first(), "") else { panic!() };
        assert_eq!(line, "nohup sh -c 'sleep 5 && touch built' >/dev/null 2>&1 &");
    }

    #[test]
    fn bash_accepts_the_object_form() {
        let script = Script::from_json(r#"[{"bash":{"command":"ls"}}]"#).unwrap();
        assert_eq!(script, Script::new().bash("ls"));
    }

    #[test]
    fn unknown_steps_and_fields_are_errors() {
        assert!(Script::from_json(r#"[{"read":"/x"}]"#).is_err());
        assert!(Script::from_json(r#"[{"write":{"file_path":"/x","content":"y","mode":1}}]"#).is_err());
        assert!(Script::from_json(r#"[{"bash":{"command":"ls","cwd":"/"}}]"#).is_err());
        assert!(Script::from_json(r#"{"text":"not an array"}"#).is_err());
    }

    #[test]
    fn tool_inputs_match_claude_code_schemas() {
        let (name, input) = Step::Bash { command: "ls".into() }.tool_call().unwrap();
        assert_eq!(name, "Bash");
        assert_eq!(input["command"], "ls");
        assert!(input["description"].is_string());
        let (name, input) = Script::new().edit("/a", "b", "c").steps()[0].tool_call().unwrap();
        assert_eq!(name, "Edit");
        assert_eq!(input, json!({"file_path": "/a", "old_string": "b", "new_string": "c"}));
        assert!(Step::Text("x".into()).tool_call().is_none());
        let call = Script::from_json(
            r#"[{"call":{"name":"update_goal","input":{"status":"complete","reason":"r"}}}]"#,
        )
        .unwrap();
        assert_eq!(call, Script::new().call("update_goal", json!({"status": "complete", "reason": "r"})));
        let (name, input) = call.steps()[0].tool_call().unwrap();
        assert_eq!((name.as_str(), input["status"].as_str()), ("update_goal", Some("complete")));
        assert!(
            matches!(ShellTurn::of(call.steps().first(), "x"), ShellTurn::Say(text) if text.starts_with("call update_goal"))
        );
    }

    fn fix(name: &str, expected: &str) -> Fix {
        Fix {
            name: name.into(),
            expected: expected.into(),
            file_path: "/abs/lib.rs".into(),
            old_string: format!("{name} => 0"),
            new_string: format!("{name} => {expected}"),
        }
    }

    #[test]
    fn a_listening_model_fixes_only_what_it_was_told_with_its_expected_value() {
        let fixes = vec![fix("case_017", "7017"), fix("case_090", "7090"), fix("case_1", "7001")];
        let listen = Script::new().listen(fixes.clone()).steps()[0].clone();
        let told = "Failing (2):\n- case_017 — assertion failed\n     left: 0\n    right: 7017\n- case_090 — assertion failed\n";
        let Step::Bash { command } = listen.heard(told) else { panic!("a listening step runs a command") };
        assert!(command.contains("'case_017 => 7017'"), "{command}");
        assert!(!command.contains("case_090"), "named without its expected value: {command}");
        assert!(!command.contains("case_1 "), "case_1 is not case_017: {command}");
        assert!(command.ends_with("fixed 1 failure(s)'"), "{command}");
        let Step::Bash { command } = listen.heard("the tests fail; fix them") else { panic!() };
        assert!(command.contains("told of no failure"), "{command}");
        let far = format!("- case_090\n{}right: 7090\n", "context\n".repeat(TOLD_WITHIN_LINES + 1));
        let Step::Bash { command } = listen.heard(&far) else { panic!() };
        assert!(!command.contains("case_090"), "the value far from the name is not its: {command}");
        assert_eq!(Step::Text("x".into()).heard(told), Step::Text("x".into()));
        let json = serde_json::to_string(&Script::new().listen(fixes.clone())).unwrap();
        assert_eq!(Script::from_json(&json).unwrap(), Script::new().listen(fixes));
    }
}
