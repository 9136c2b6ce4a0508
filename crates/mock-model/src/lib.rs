//! A scripted, offline stand-in for model APIs, to drive real agent CLIs in tests and the demo:
//! the Anthropic Messages API (Claude Code), the Gemini API (Gemini CLI), the `OpenAI` Responses
//! API (Codex) and the `OpenAI` Chat Completions API (Copilot CLI). One server answers them all;
//! the path picks the dialect ([`Api`]).
//!
//! Point the CLI at [`MockModel::base_url`]: `ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`, a
//! Codex model provider whose `base_url` is `<base_url>/v1`, or `COPILOT_PROVIDER_BASE_URL` set to
//! `<base_url>/v1`. Each request of the agent's
//! own loop (a `POST /v1/messages` whose body has a non-empty `tools` array) gets the next
//! [`Step`] of the [`Script`]: a final text, or one tool call whose result comes back in the next
//! request. Side requests (session titles, summaries) get a short filler text and consume
//! nothing, so a script is exactly the conversation under test. Every request is recorded for
//! assertions, including the main requests that came after the script ran out.
//!
//! ```no_run
//! use mock_model::{MockModel, Script};
//!
//! let model = MockModel::start(Script::new().bash("echo hello > out.txt").text("done"))?;
//! // ... run `claude -p` with ANTHROPIC_BASE_URL=model.base_url() ...
//! let main = model.main_requests();
//! // Claude Code reports a silent command as "(Bash completed with no output)".
//! assert_eq!(main[1].tool_results().len(), 1);
//! assert_eq!(model.exhausted_requests(), 0);
//! # anyhow::Ok(())
//! ```
//!
//! The server is plain blocking std networking, a thread per connection, bound to the loopback
//! on a free port; it stops when the [`MockModel`] is dropped.

mod agent;
mod api_error;
mod chat;
mod gemini;
mod http;
mod record;
mod reply;
mod responses;
mod script;

use std::collections::HashMap;
use std::io::{BufReader, ErrorKind};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

pub use agent::{Agent, path_without};
pub use record::{Api, Recorded, Served, ToolResult};
pub use script::{Fix, Script, Step};

use http::{Request, Response};
use reply::{Content, Reply};

/// The answer to a main request after the last step, so a run that outlives its script ends its
/// turn instead of hanging, and says why in its transcript.
pub const EXHAUSTED_TEXT: &str = "(mock script exhausted)";

/// The answer to side requests. Titles and summaries only need to be some text.
pub const FILLER_TEXT: &str = "ok";

/// The summary a compaction request gets: Claude Code asks for it with the tools attached, but
/// it is no turn of the conversation, so it takes no step of the script (a scripted error still
/// answers it, so a compaction can be made to fail).
pub const COMPACTION_SUMMARY: &str = "Summary of the conversation so far (mock-model).";

/// How to start the server.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// The loopback port; 0 picks a free one.
    pub port: u16,
    /// Print one line per main request to stderr.
    pub log_main_requests: bool,
}

/// A running mock. Dropping it stops the server and closes its connections.
pub struct MockModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    connections: Mutex<Connections>,
    stopping: AtomicBool,
    log_main_requests: bool,
}

struct State {
    steps: Vec<Step>,
    next_step: usize,
    /// Counts every reply, for unique message, request and tool-use ids.
    replies: u64,
    requests: Vec<Recorded>,
    /// Answers for side requests, each with the text that picks its request, in order.
    side_answers: Vec<(String, String)>,
}

/// Open connections, so shutdown can close them: a keep-alive connection otherwise blocks its
/// thread in a read until the client goes away.
#[derive(Default)]
struct Connections {
    next_id: u64,
    open: HashMap<u64, TcpStream>,
    threads: Vec<JoinHandle<()>>,
}

impl MockModel {
    /// Serves `script` on a free loopback port.
    pub fn start(script: Script) -> anyhow::Result<MockModel> {
        MockModel::start_with(script, Options::default())
    }

    pub fn start_with(script: Script, options: Options) -> anyhow::Result<MockModel> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, options.port))
            .with_context(|| format!("cannot bind 127.0.0.1:{}", options.port))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                steps: script.into_steps(),
                next_step: 0,
                replies: 0,
                requests: Vec::new(),
                side_answers: Vec::new(),
            }),
            connections: Mutex::default(),
            stopping: AtomicBool::new(false),
            log_main_requests: options.log_main_requests,
        });
        let acceptor = thread::Builder::new()
            .name("mock-model-accept".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || accept_loop(&listener, &shared)
            })
            .context("cannot spawn the accept thread")?;
        Ok(MockModel { addr, shared, acceptor: Some(acceptor) })
    }

    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues `answer` for the next Chat Completions side request (one without tools) whose
    /// body holds `marker`: a client's own judge, such as Qwen Code's goal verifier, which wants
    /// a scripted verdict where a title gets the filler. Queued answers are used in order.
    pub fn answer_side_request(&self, marker: impl Into<String>, answer: impl Into<String>) {
        self.shared.state().side_answers.push((marker.into(), answer.into()));
    }

    /// Every request so far, in the order they were answered.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.clone()
    }

    /// The requests of the agent's own loop, including any that found the script exhausted.
    pub fn main_requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.iter().filter(|r| r.is_main).cloned().collect()
    }

    /// How many script steps have been served.
    pub fn steps_served(&self) -> usize {
        self.shared.state().next_step
    }

    /// How many main requests came after the last step. A test whose script matches the run
    /// expects 0.
    pub fn exhausted_requests(&self) -> usize {
        self.shared.state().requests.iter().filter(|r| r.served == Served::Exhausted).count()
    }

    /// Stops the server and waits for its threads; dropping does the same.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else { return };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // `accept` has no timeout; a connection of our own wakes it to see the flag.
        let woken = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5)).is_ok();
        if woken {
            let _ = acceptor.join();
        }
        let threads = {
            let mut connections = self.shared.connections();
            for stream in connections.open.values() {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
            std::mem::take(&mut connections.threads)
        };
        for thread in threads {
            let _ = thread.join();
        }
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    // A panicking test thread must not hide the requests from the test's own assertions.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn connections(&self) -> MutexGuard<'_, Connections> {
        self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        // Out of descriptors, or a client that reset before we accepted: try again shortly.
        let Ok(stream) = stream else {
            thread::sleep(Duration::from_millis(10));
            continue;
        };
        let Ok(registered) = stream.try_clone() else { continue };
        let mut connections = shared.connections();
        connections.threads.retain(|thread| !thread.is_finished());
        let id = connections.next_id;
        connections.next_id += 1;
        connections.open.insert(id, registered);
        let spawned = thread::Builder::new().name(format!("mock-model-conn-{id}")).spawn({
            let shared = Arc::clone(shared);
            move || {
                serve_connection(&shared, stream);
                shared.connections().open.remove(&id);
            }
        });
        match spawned {
            Ok(thread) => connections.threads.push(thread),
            Err(_) => {
                connections.open.remove(&id);
            }
        }
    }
}

fn serve_connection(shared: &Shared, stream: TcpStream) {
    // Small writes of whole responses: don't let Nagle hold an event stream back.
    let _ = stream.set_nodelay(true);
    let Ok(read_half) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read_half);
    let mut writer = stream;
    loop {
        match http::read_request(&mut reader, &mut writer) {
            Ok(None) => return,
            Ok(Some(request)) => {
                let close = request.wants_close();
                let response = shared.respond(&request);
                if response.write_to(&mut writer, close, request.method == "HEAD").is_err() || close {
                    return;
                }
            }
            Err(err) if err.kind() == ErrorKind::InvalidData => {
                let response = Response::error(400, "invalid_request_error", &err.to_string());
                let _ = response.write_to(&mut writer, true, false);
                return;
            }
            Err(_) => return,
        }
    }
}

impl Shared {
    /// Answers one request and records it. The record is written before the reply is sent, so
    /// once the client has its answer the test sees the request.
    fn respond(&self, request: &Request) -> Response {
        let body = decode_body(request);
        let mut state = self.state();
        state.replies += 1;
        let serial = state.replies;
        let path = request.path();
        let (api, served, is_main, response) = match (request.method.as_str(), path) {
            ("POST", "/v1/messages") => match &body {
                Ok(body) => answer_messages(&mut state, body, serial),
                Err(message) => bad_request(Api::Messages, "invalid_request_error", message),
            },
            ("POST", "/v1/messages/count_tokens") => match &body {
                Ok(_) => (
                    Api::Messages,
                    Served::CountTokens,
                    false,
                    Response::json(200, &json!({"input_tokens": 1})),
                ),
                Err(message) => bad_request(Api::Messages, "invalid_request_error", message),
            },
            ("POST", "/v1/responses") => match &body {
                Ok(body) => answer_responses(&mut state, body, serial),
                Err(message) => bad_request(Api::Responses, "invalid_request_error", message),
            },
            ("POST", "/v1/chat/completions") => match &body {
                Ok(body) => {
                    let tools = body["tools"].as_array().map_or(&[][..], Vec::as_slice);
                    let is_main = !tools.is_empty();
                    if let Some((served, response)) =
                        is_main.then(|| state.take_error(Api::ChatCompletions)).flatten()
                    {
                        return self.record(
                            state,
                            request,
                            (Api::ChatCompletions, served, true),
                            body.clone(),
                            response,
                        );
                    }
                    let (served, step) = if is_main {
                        state.next_step(&record::told(Api::ChatCompletions, body))
                    } else if let Some(answer) = state.side_answer(body) {
                        (Served::SideAnswer, Some(Step::Text(answer)))
                    } else {
                        (Served::Filler, Some(Step::Text(FILLER_TEXT.into())))
                    };
                    let turn = chat::turn(step.as_ref(), EXHAUSTED_TEXT, tools);
                    let model = body["model"].as_str().unwrap_or("mock-model");
                    let response = if body["stream"] == true {
                        Response::sse(chat::sse(&turn, model, serial))
                    } else {
                        Response::json(200, &chat::completion(&turn, model, serial))
                    };
                    (Api::ChatCompletions, served, is_main, response)
                }
                Err(message) => (
                    Api::ChatCompletions,
                    Served::BadRequest,
                    false,
                    Response::error(400, "invalid_request_error", message),
                ),
            },
            ("POST", path) if path.starts_with("/v1beta/models/") && path.contains(':') => match &body {
                Ok(body) => answer_gemini(&mut state, body, path),
                Err(message) => bad_request(Api::Gemini, "INVALID_ARGUMENT", message),
            },
            (method, path) => (
                Api::Messages,
                Served::NotFound,
                false,
                Response::error(
                    404,
                    "not_found_error",
                    &format!("mock-model does not serve {method} {path}"),
                ),
            ),
        };
        self.record(state, request, (api, served, is_main), body.unwrap_or(Value::Null), response)
    }

    /// Records a request and what it was served, then gives back the response.
    fn record(
        &self,
        mut state: MutexGuard<'_, State>,
        request: &Request,
        (api, served, is_main): (Api, Served, bool),
        body: Value,
        mut response: Response,
    ) -> Response {
        response.headers.push(("request-id", format!("req_mock_{}", state.replies)));
        let recorded = Recorded {
            api,
            method: request.method.clone(),
            path: request.path().to_owned(),
            query: request.query().map(str::to_owned),
            headers: request.headers.clone(),
            body,
            is_main,
            served,
        };
        if self.log_main_requests && is_main {
            eprintln!("{}", log_line(&state, &recorded));
        }
        state.requests.push(recorded);
        response
    }
}

impl State {
    /// The first queued side answer whose marker `body` holds, taken off the queue.
    fn side_answer(&mut self, body: &Value) -> Option<String> {
        let text = body.to_string();
        let index = self.side_answers.iter().position(|(marker, _)| text.contains(marker.as_str()))?;
        Some(self.side_answers.remove(index).1)
    }

    /// When the next step is a scripted error, takes it and gives its response in `api`'s shape.
    fn take_error(&mut self, api: Api) -> Option<(Served, Response)> {
        let response = match self.steps.get(self.next_step)? {
            Step::Error { status, retry_after } => api_error::response(api, *status, *retry_after),
            Step::UsageLimit { resets_in } => api_error::usage_limit(api, *resets_in),
            Step::PromptTooLong => api_error::prompt_too_long(api),
            _ => return None,
        };
        self.next_step += 1;
        Some((Served::Step(self.next_step - 1), response))
    }

    /// The next step for a main request of any dialect, as heard after the request's last user
    /// message (`told`); `None` once the script has run out.
    fn next_step(&mut self, told: &str) -> (Served, Option<Step>) {
        match self.steps.get(self.next_step).map(|step| step.heard(told)) {
            None => (Served::Exhausted, None),
            Some(step) => {
                self.next_step += 1;
                (Served::Step(self.next_step - 1), Some(step))
            }
        }
    }

    fn next_main_content(&mut self, serial: u64, told: &str) -> (Served, Content) {
        let Some(step) = self.steps.get(self.next_step).map(|step| step.heard(told)) else {
            return (Served::Exhausted, Content::Text(EXHAUSTED_TEXT.to_owned()));
        };
        let step = &step;
        let served = Served::Step(self.next_step);
        let content = match step.tool_call() {
            None => Content::Text(match step {
                Step::Text(text) => text.clone(),
                _ => unreachable!("only text steps have no tool call"),
            }),
            Some((name, input)) => Content::ToolUse { id: format!("toolu_mock_{serial}"), name, input },
        };
        self.next_step += 1;
        (served, content)
    }
}

/// What a request was served, and the response: the dialect, what the script gave, whether it
/// was a main request.
type Answer = (Api, Served, bool, Response);

/// A request whose body cannot be used, answered in `api`'s shape of error.
fn bad_request(api: Api, kind: &str, message: &str) -> Answer {
    (api, Served::BadRequest, false, Response::error(400, kind, message))
}

/// `POST /v1/messages`: a main request (one with tools) gets the script's next step.
fn answer_messages(state: &mut State, body: &Value, serial: u64) -> Answer {
    let is_main = body["tools"].as_array().is_some_and(|tools| !tools.is_empty());
    if let Some((served, response)) = is_main.then(|| state.take_error(Api::Messages)).flatten() {
        return (Api::Messages, served, true, response);
    }
    let (served, content) = if is_main && record::is_compaction(body) {
        (Served::Filler, Content::Text(COMPACTION_SUMMARY.to_owned()))
    } else if is_main {
        state.next_main_content(serial, &record::told(Api::Messages, body))
    } else {
        (Served::Filler, Content::Text(FILLER_TEXT.to_owned()))
    };
    let reply = Reply {
        id: format!("msg_mock_{serial}"),
        // Echoed, so the CLI's model bookkeeping sees the model it asked for.
        model: body["model"].as_str().unwrap_or("mock-model").to_owned(),
        content,
    };
    let response = if body["stream"] == true {
        Response::sse(reply.sse())
    } else {
        Response::json(200, &reply.message())
    };
    (Api::Messages, served, is_main && served != Served::Filler, response)
}

/// `POST /v1/responses`: a main request (one with tools) gets the script's next step.
fn answer_responses(state: &mut State, body: &Value, serial: u64) -> Answer {
    let tools = body["tools"].as_array().map_or(&[][..], Vec::as_slice);
    let is_main = !tools.is_empty();
    if let Some((served, response)) = is_main.then(|| state.take_error(Api::Responses)).flatten() {
        return (Api::Responses, served, true, response);
    }
    let (served, step) = if is_main {
        state.next_step(&record::told(Api::Responses, body))
    } else {
        (Served::Filler, Some(Step::Text(FILLER_TEXT.into())))
    };
    let item = responses::item(step.as_ref(), EXHAUSTED_TEXT, tools, serial);
    let model = body["model"].as_str().unwrap_or("mock-model");
    (Api::Responses, served, is_main, Response::sse(responses::sse(&item, model, serial)))
}

/// `POST /v1beta/models/MODEL:ACTION`: a streamed main request gets the script's next step.
fn answer_gemini(state: &mut State, body: &Value, path: &str) -> Answer {
    let streaming = path.ends_with(":streamGenerateContent");
    let is_main = streaming && gemini::is_main(body);
    if let Some((served, response)) = is_main.then(|| state.take_error(Api::Gemini)).flatten() {
        return (Api::Gemini, served, true, response);
    }
    let (served, step) = if is_main {
        state.next_step(&record::told(Api::Gemini, body))
    } else {
        (Served::Filler, Some(Step::Text(gemini::filler(body, FILLER_TEXT).into())))
    };
    let part = gemini::part(step.as_ref(), EXHAUSTED_TEXT);
    let response = if streaming {
        Response::sse(gemini::sse(&part))
    } else {
        Response::json(200, &gemini::response(&part))
    };
    (Api::Gemini, served, is_main, response)
}

/// The JSON body, or why there is none to use. An empty body is `Null`, which routes as a side
/// request.
fn decode_body(request: &Request) -> Result<Value, String> {
    if request.body.is_empty() {
        return Ok(Value::Null);
    }
    // std has no inflate; the CLI sends plain JSON, so an encoded body is a surprise to report.
    if let Some(encoding) = request.header("content-encoding").filter(|e| !e.eq_ignore_ascii_case("identity"))
    {
        return Err(format!("mock-model cannot decode content-encoding {encoding:?}"));
    }
    serde_json::from_slice(&request.body).map_err(|err| format!("body is not JSON: {err}"))
}

/// `mock-model: main #2 -> step 2/2 text "done" | last user: "Stop hook feedback:\nrun the tests"`
fn log_line(state: &State, recorded: &Recorded) -> String {
    let number = state.requests.iter().filter(|r| r.is_main).count() + 1;
    let served = match recorded.served {
        Served::Step(index) => format!("step {}/{} {}", index + 1, state.steps.len(), state.steps[index]),
        _ => "script exhausted".to_owned(),
    };
    let text = without_reminders(&recorded.last_user_text().unwrap_or_default());
    let mut shown: String = text.trim().chars().take(100).collect();
    if shown.len() < text.trim().len() {
        shown.push('…');
    }
    format!("mock-model: main #{number} -> {served} | last user: {shown:?}")
}

/// The text without the `<system-reminder>` blocks the CLI adds to user messages, which would
/// otherwise fill every log line.
fn without_reminders(text: &str) -> String {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        match rest[start..].find(CLOSE) {
            Some(end) => rest = &rest[start + end + CLOSE.len()..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
