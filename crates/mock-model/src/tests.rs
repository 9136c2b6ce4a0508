//! The server seen from a plain std TCP client, byte for byte.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;

use serde_json::{Value, json};

use super::*;

/// One keep-alive connection.
struct Client {
    reader: BufReader<TcpStream>,
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        http::header(&self.headers, name)
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// The `(event, data)` pairs of an event-stream body.
    fn events(&self) -> Vec<(String, Value)> {
        let text = std::str::from_utf8(&self.body).unwrap();
        assert!(text.ends_with("\n\n"), "{text:?}");
        text.trim_end()
            .split("\n\n")
            .map(|event| {
                let mut lines = event.lines();
                let name = lines.next().unwrap().strip_prefix("event: ").unwrap();
                let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
                assert!(lines.next().is_none(), "{event:?}");
                (name.to_owned(), serde_json::from_str(data).unwrap())
            })
            .collect()
    }
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        Client { reader: BufReader::new(TcpStream::connect(addr).unwrap()) }
    }

    fn send_raw(&mut self, raw: &[u8]) -> Reply {
        self.reader.get_mut().write_all(raw).unwrap();
        self.read_reply(raw.starts_with(b"HEAD "))
    }

    fn post(&mut self, path: &str, body: &Value) -> Reply {
        let body = body.to_string();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.send_raw(format!("{head}{body}").as_bytes())
    }

    /// Reads a response; the one to a HEAD has a length but no body.
    fn read_reply(&mut self, head: bool) -> Reply {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status = line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        let length: usize = http::header(&headers, "content-length").unwrap().parse().unwrap();
        let mut body = vec![0; if head { 0 } else { length }];
        self.reader.read_exact(&mut body).unwrap();
        Reply { status, headers, body }
    }

    /// Whether the server has closed the connection.
    fn at_eof(&mut self) -> bool {
        let mut rest = Vec::new();
        matches!(self.reader.read_to_end(&mut rest), Ok(0) | Err(_))
    }
}

fn main_body(user: &str) -> Value {
    json!({
        "model": "claude-test-model",
        "stream": true,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": user}],
    })
}

fn side_body() -> Value {
    json!({"model": "claude-haiku", "stream": true, "messages": [{"role": "user", "content": "title?"}]})
}

const EVENT_NAMES: [&str; 6] = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
];

/// The single content block of an event stream, rebuilt as the SDK does, and the stop reason.
fn assemble(reply: &Reply) -> (Value, String) {
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, EVENT_NAMES);
    for (name, data) in &events {
        assert_eq!(data["type"], name.as_str());
    }
    let mut block = events[1].1["content_block"].clone();
    let delta = &events[2].1["delta"];
    match delta["type"].as_str().unwrap() {
        "text_delta" => block["text"] = delta["text"].clone(),
        "input_json_delta" => {
            block["input"] = serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap();
        }
        other => panic!("unexpected delta {other}"),
    }
    let stop_reason = events[4].1["delta"]["stop_reason"].as_str().unwrap().to_owned();
    assert!(events[4].1["usage"]["output_tokens"].is_u64());
    (block, stop_reason)
}

#[test]
fn text_step_streams_as_sse() {
    let model = MockModel::start(Script::new().text("done")).unwrap();
    assert_eq!(model.base_url(), format!("http://127.0.0.1:{}", model.addr().port()));
    let reply = Client::connect(model.addr()).post("/v1/messages?beta=true", &main_body("hi"));
    let (block, stop_reason) = assemble(&reply);
    assert_eq!(block, json!({"type": "text", "text": "done"}));
    assert_eq!(stop_reason, "end_turn");
    let start = &reply.events()[0].1["message"];
    assert_eq!(start["model"], "claude-test-model");
    assert_eq!(start["role"], "assistant");
    assert!(start["usage"]["input_tokens"].is_u64());
    assert!(reply.header("request-id").unwrap().starts_with("req_"));
    assert_eq!(model.steps_served(), 1);
    let recorded = model.main_requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].path, "/v1/messages");
    assert_eq!(recorded[0].query.as_deref(), Some("beta=true"));
    assert_eq!(recorded[0].served, Served::Step(0));
    assert_eq!(recorded[0].last_user_text().unwrap(), "hi");
    assert_eq!(recorded[0].header("Host"), Some("x"));
}

#[test]
fn tool_steps_stream_as_tool_calls_with_unique_ids() {
    let script = Script::new().bash("echo hello > out.txt").bash("true").write("/abs/x", "y");
    let model = MockModel::start(script).unwrap();
    let mut client = Client::connect(model.addr());
    let mut ids = Vec::new();
    for expected in [
        json!({"name": "Bash", "command": "echo hello > out.txt"}),
        json!({"name": "Bash", "command": "true"}),
        json!({"name": "Write", "file_path": "/abs/x"}),
    ] {
        let (block, stop_reason) = assemble(&client.post("/v1/messages", &main_body("go")));
        assert_eq!(stop_reason, "tool_use");
        assert_eq!(block["type"], "tool_use");
        assert_eq!(block["name"], expected["name"]);
        if block["name"] == "Bash" {
            assert_eq!(block["input"]["command"], expected["command"]);
            assert!(block["input"]["description"].is_string());
        } else {
            assert_eq!(block["input"], json!({"file_path": "/abs/x", "content": "y"}));
        }
        ids.push(block["id"].as_str().unwrap().to_owned());
    }
    assert!(ids.iter().all(|id| id.starts_with("toolu_")), "{ids:?}");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3);
}

#[test]
fn side_requests_consume_no_steps() {
    let model = MockModel::start(Script::new().text("main")).unwrap();
    let mut client = Client::connect(model.addr());
    let (block, stop_reason) = assemble(&client.post("/v1/messages?beta=true", &side_body()));
    assert_eq!((block["text"].as_str().unwrap(), stop_reason.as_str()), (FILLER_TEXT, "end_turn"));
    // An empty tools array is not the main loop either.
    let mut empty_tools = main_body("x");
    empty_tools["tools"] = json!([]);
    assert_eq!(assemble(&client.post("/v1/messages", &empty_tools)).0["text"], FILLER_TEXT);
    let count = client.post("/v1/messages/count_tokens?beta=true", &main_body("x"));
    assert_eq!((count.status, count.json()), (200, json!({"input_tokens": 1})));
    let hello = client.send_raw(b"HEAD /api/hello HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(hello.status, 404);
    let models = client.send_raw(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(models.status, 404);
    assert_eq!(models.json()["error"]["type"], "not_found_error");
    assert_eq!(model.steps_served(), 0);
    assert_eq!(assemble(&client.post("/v1/messages", &main_body("x"))).0["text"], "main");
    assert_eq!(model.steps_served(), 1);
    let served: Vec<Served> = model.requests().iter().map(|r| r.served).collect();
    let expected = [
        Served::Filler,
        Served::Filler,
        Served::CountTokens,
        Served::NotFound,
        Served::NotFound,
        Served::Step(0),
    ];
    assert_eq!(served, expected);
    assert_eq!(model.main_requests().len(), 1);
}

#[test]
fn exhausted_script_answers_and_is_recorded() {
    let model = MockModel::start(Script::new().text("only")).unwrap();
    let mut client = Client::connect(model.addr());
    assert_eq!(assemble(&client.post("/v1/messages", &main_body("1"))).0["text"], "only");
    assert_eq!(model.exhausted_requests(), 0);
    let (block, stop_reason) = assemble(&client.post("/v1/messages", &main_body("2")));
    assert_eq!((block["text"].as_str().unwrap(), stop_reason.as_str()), (EXHAUSTED_TEXT, "end_turn"));
    assert_eq!(model.exhausted_requests(), 1);
    assert_eq!(model.steps_served(), 1);
    assert_eq!(model.main_requests()[1].served, Served::Exhausted);
}

#[test]
fn chunked_request_body() {
    let model = MockModel::start(Script::new().text("chunked ok")).unwrap();
    let body = main_body("Stop hook feedback:\nrun the tests").to_string();
    let (a, b) = body.split_at(body.len() / 2);
    let raw = format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x};ext=1\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let reply = Client::connect(model.addr()).send_raw(raw.as_bytes());
    assert_eq!(assemble(&reply).0["text"], "chunked ok");
    let main = model.main_requests();
    assert_eq!(main[0].last_user_text().unwrap(), "Stop hook feedback:\nrun the tests");
}

#[test]
fn concurrent_requests_each_get_one_step() {
    const N: usize = 16;
    let model = MockModel::start((0..N).map(|i| Step::Text(i.to_string())).collect()).unwrap();
    let addr = model.addr();
    let threads: Vec<_> = (0..N)
        .map(|_| {
            thread::spawn(move || {
                let reply = Client::connect(addr).post("/v1/messages", &main_body("x"));
                assemble(&reply).0["text"].as_str().unwrap().to_owned()
            })
        })
        .collect();
    let mut texts: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap().parse().unwrap()).collect();
    texts.sort_unstable();
    assert_eq!(texts, (0..N).collect::<Vec<_>>());
    assert_eq!(model.steps_served(), N);
    assert_eq!(model.exhausted_requests(), 0);
}

#[test]
fn keep_alive_and_connection_close() {
    let model = MockModel::start(Script::new()).unwrap();
    let mut client = Client::connect(model.addr());
    for _ in 0..3 {
        let reply = client.post("/v1/messages", &side_body());
        assert_eq!(reply.header("connection"), Some("keep-alive"));
    }
    let reply = client.send_raw(
        b"POST /v1/messages/count_tokens HTTP/1.1\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
    );
    assert_eq!(reply.header("connection"), Some("close"));
    assert!(client.at_eof());
}

#[test]
fn non_streaming_request_gets_a_json_message() {
    let model = MockModel::start(Script::new().bash("ls")).unwrap();
    let mut body = main_body("x");
    body["stream"] = json!(false);
    let reply = Client::connect(model.addr()).post("/v1/messages", &body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let message = reply.json();
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["input"]["command"], "ls");
}

#[test]
fn bad_requests_get_400_and_are_recorded() {
    let model = MockModel::start(Script::new().text("unused")).unwrap();
    let mut client = Client::connect(model.addr());
    let reply = client.send_raw(b"POST /v1/messages HTTP/1.1\r\nContent-Length: 3\r\n\r\n{x}");
    assert_eq!(reply.status, 400);
    let reply = client
        .send_raw(b"POST /v1/messages HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}");
    assert_eq!(reply.status, 400);
    assert!(reply.json()["error"]["message"].as_str().unwrap().contains("gzip"));
    let malformed = client.send_raw(b"NONSENSE\r\n\r\n");
    assert_eq!(malformed.status, 400);
    assert!(client.at_eof());
    let served: Vec<Served> = model.requests().iter().map(|r| r.served).collect();
    assert_eq!(served, [Served::BadRequest, Served::BadRequest]);
    assert_eq!(model.steps_served(), 0);
}

#[test]
fn drop_closes_idle_connections() {
    let model = MockModel::start(Script::new()).unwrap();
    let mut client = Client::connect(model.addr());
    client.post("/v1/messages", &side_body());
    let addr = model.addr();
    drop(model);
    assert!(client.at_eof());
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn log_lines_skip_reminders() {
    assert_eq!(without_reminders("<system-reminder>\nx\n</system-reminder>\n\nhi"), "\n\nhi");
    assert_eq!(without_reminders("a<system-reminder>b"), "a");
    assert_eq!(without_reminders("plain"), "plain");
}

/// The `data:` payloads of an event stream whose events may have no `event:` line (Gemini).
fn data_events(reply: &Reply) -> Vec<Value> {
    let text = std::str::from_utf8(&reply.body).unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[test]
fn gemini_main_requests_take_steps_and_side_requests_do_not() {
    let model = MockModel::start(Script::new().bash("touch x").text("done")).unwrap();
    let mut client = Client::connect(model.addr());
    let main = json!({
        "contents": [{"role": "user", "parts": [{"text": "task"}]}],
        "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
    });
    let path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    let reply = client.post(path, &main);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = data_events(&reply);
    assert_eq!(events.len(), 1);
    let part = &events[0]["candidates"][0]["content"]["parts"][0];
    assert_eq!(part["functionCall"]["name"], "run_shell_command");
    assert_eq!(part["functionCall"]["args"]["command"], "touch x");

    let router = json!({"contents": [], "generationConfig": {"responseMimeType": "application/json"}});
    let side = client.post("/v1beta/models/gemini-2.5-flash-lite:generateContent", &router).json();
    assert_eq!(side["candidates"][0]["content"]["parts"][0]["text"], "{}");

    let reply = client.post(path, &main);
    assert_eq!(data_events(&reply)[0]["candidates"][0]["content"]["parts"][0]["text"], "done");
    let recorded = model.main_requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].api, Api::Gemini);
    assert_eq!(recorded[0].last_user_text().unwrap(), "task");
    assert_eq!(model.steps_served(), 2);
}

#[test]
fn responses_requests_stream_items_for_the_declared_shell_tool() {
    let model = MockModel::start(Script::new().bash("touch x").text("done")).unwrap();
    let mut client = Client::connect(model.addr());
    let body = json!({
        "model": "gpt-5",
        "stream": true,
        "tools": [{"type": "function", "name": "exec_command"}],
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]}],
    });
    let reply = client.post("/v1/responses", &body);
    let events = reply.events();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["response.created", "response.output_item.done", "response.completed"]);
    let item = &events[1].1["item"];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "exec_command");
    assert_eq!(item["arguments"], r#"{"cmd":"touch x"}"#);
    let text = client.post("/v1/responses", &body).events()[1].1["item"].clone();
    assert_eq!(text["content"][0]["text"], "done");
    let exhausted = client.post("/v1/responses", &body).events()[1].1["item"].clone();
    assert_eq!(exhausted["content"][0]["text"], EXHAUSTED_TEXT);
    let recorded = model.main_requests();
    assert_eq!(recorded[0].api, Api::Responses);
    assert_eq!(recorded[0].last_user_text().unwrap(), "task");
    assert_eq!(model.exhausted_requests(), 1);
}

/// Chat Completions as Copilot CLI sends it: the agent's loop declares its `bash` tool and gets
/// one streamed call of it, then the script's text; a request without tools is a side request.
#[test]
fn chat_completions_stream_calls_of_the_declared_shell_tool() {
    let model = MockModel::start(Script::new().bash("touch x").text("done")).unwrap();
    let mut client = Client::connect(model.addr());
    let body = json!({
        "model": "mock-gpt",
        "stream": true,
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"properties": {
            "command": {"type": "string"}, "mode": {"type": "string"}}}}}],
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}],
    });
    let data = |reply: &Reply| -> Vec<Value> {
        let text = std::str::from_utf8(&reply.body).unwrap().to_owned();
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        text.split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    };
    let call = data(&client.post("/v1/chat/completions", &body));
    let tool = &call[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(tool["function"]["name"], "bash");
    let arguments: Value = serde_json::from_str(tool["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!((arguments["command"].as_str(), arguments["mode"].as_str()), (Some("touch x"), Some("sync")));
    assert_eq!(call[1]["choices"][0]["finish_reason"], "tool_calls");
    let text = data(&client.post("/v1/chat/completions", &body));
    assert_eq!(text[0]["choices"][0]["delta"]["content"], "done");
    let side = client.post("/v1/chat/completions", &json!({"model": "m", "messages": []}));
    let side: Value = serde_json::from_slice(&side.body).unwrap();
    assert_eq!(side["choices"][0]["message"]["content"], FILLER_TEXT);
    let recorded = model.main_requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].api, Api::ChatCompletions);
    assert_eq!(recorded[0].last_user_text().unwrap(), "task");
    assert_eq!(model.exhausted_requests(), 0);
}

#[test]
fn chat_completions_scripted_calls_and_side_answers() {
    let model = MockModel::start(
        Script::new().call("update_goal", json!({"status": "complete", "reason": "all tests passed"})),
    )
    .unwrap();
    model.answer_side_request("Goal Verifier", r#"{"decision":"accept","reason":"the output shows it"}"#);
    let mut client = Client::connect(model.addr());
    let tools = json!([{"type": "function", "function": {"name": "run_shell_command"}},
        {"type": "function", "function": {"name": "update_goal"}}]);
    let main = json!({"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": tools});
    let call: Value = serde_json::from_slice(&client.post("/v1/chat/completions", &main).body).unwrap();
    let tool = &call["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(tool["name"], "update_goal");
    let arguments: Value = serde_json::from_str(tool["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"status": "complete", "reason": "all tests passed"}));
    // A side request without the marker gets the filler and leaves the answer queued.
    let title = json!({"model": "m", "messages": [{"role": "user", "content": "a title"}]});
    let side: Value = serde_json::from_slice(&client.post("/v1/chat/completions", &title).body).unwrap();
    assert_eq!(side["choices"][0]["message"]["content"], FILLER_TEXT);
    let verifier = json!({"model": "m", "messages": [{"role": "system", "content": "You are an independent Goal Verifier."}]});
    for expected in [r#"{"decision":"accept","reason":"the output shows it"}"#, FILLER_TEXT] {
        let side: Value =
            serde_json::from_slice(&client.post("/v1/chat/completions", &verifier).body).unwrap();
        assert_eq!(side["choices"][0]["message"]["content"], expected);
    }
    let served: Vec<Served> = model.requests().iter().map(|r| r.served).collect();
    assert_eq!(served, [Served::Step(0), Served::Filler, Served::SideAnswer, Served::Filler]);
}

/// A compaction's summary request carries the tools, but takes no step; a scripted error still
/// answers it, so a test can make the compaction fail.
#[test]
fn a_compaction_request_gets_a_summary_and_takes_no_step_but_an_error_answers_it() {
    let model = MockModel::start(Script::new().prompt_too_long().text("after")).unwrap();
    let mut client = Client::connect(model.addr());
    let summary = main_body("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.");
    let failed = client.post("/v1/messages", &summary);
    assert_eq!(failed.status, 400);
    assert!(failed.json()["error"]["message"].as_str().unwrap().starts_with("prompt is too long"));
    assert_eq!(assemble(&client.post("/v1/messages", &summary)).0["text"], COMPACTION_SUMMARY);
    // After a turn that ended on an error, the ask follows that turn's prompt in one message.
    let after_error = main_body("go on\n\nCRITICAL: Respond with TEXT ONLY. Do NOT call any tools.");
    assert_eq!(assemble(&client.post("/v1/messages", &after_error)).0["text"], COMPACTION_SUMMARY);
    assert_eq!(model.steps_served(), 1);
    assert_eq!(assemble(&client.post("/v1/messages", &main_body("go on"))).0["text"], "after");
    let served: Vec<Served> = model.requests().iter().map(|r| r.served).collect();
    assert_eq!(served, [Served::Step(0), Served::Filler, Served::Filler, Served::Step(1)]);
    assert_eq!(model.main_requests().len(), 2, "the summary is no turn of the conversation");
}
