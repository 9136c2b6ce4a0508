//! Just enough HTTP/1.1 for one client on the loopback: request framing with `Content-Length` or
//! chunked bodies, `Expect: 100-continue`, keep-alive, and responses that always carry a
//! `Content-Length` so the connection can be reused.
//!
//! Every reply is known in full before it is sent (the mock has nothing to wait for), so even
//! the event streams are written as one sized body; an SSE client only reads the bytes.

use std::io::{self, BufRead, Read, Write};

/// The request line and headers together. Claude Code sends a few kilobytes of headers.
const MAX_HEAD: u64 = 64 * 1024;
/// A main-loop request carries the system prompt, the tool schemas and the whole conversation,
/// so bodies of a megabyte are ordinary; this only stops a runaway client.
const MAX_BODY: usize = 256 * 1024 * 1024;

/// A parsed request. Header names are lowercased.
#[derive(Debug)]
pub(crate) struct Request {
    pub method: String,
    pub target: String,
    pub version: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The target without its query string: the CLI posts to `/v1/messages?beta=true`.
    pub(crate) fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(path, _)| path)
    }

    pub(crate) fn query(&self) -> Option<&str> {
        self.target.split_once('?').map(|(_, query)| query)
    }

    /// Whether the client asked to close after this exchange.
    pub(crate) fn wants_close(&self) -> bool {
        let connection = self.header("connection").map(str::to_ascii_lowercase);
        let has =
            |token: &str| connection.as_deref().is_some_and(|c| c.split(',').any(|t| t.trim() == token));
        if self.version == "HTTP/1.0" { !has("keep-alive") } else { has("close") }
    }
}

/// The first header named `name` (case-insensitive).
pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Reads one request. `Ok(None)` means the client closed the connection between requests, the
/// normal end of a keep-alive connection. `InvalidData` means a malformed request, which gets a
/// 400; any other error means the connection is gone.
///
/// `interim` receives the `100 Continue` a client that sent `Expect: 100-continue` waits for.
pub(crate) fn read_request<R: BufRead, W: Write>(
    reader: &mut R,
    interim: &mut W,
) -> io::Result<Option<Request>> {
    let mut budget = MAX_HEAD;
    let mut request_line = String::new();
    // RFC 9112 §2.2: ignore empty lines before a request line.
    while request_line.is_empty() {
        match read_line(reader, &mut budget)? {
            None => return Ok(None),
            Some(line) => request_line = line,
        }
    }
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(format!("bad request line {request_line:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(invalid(format!("unsupported version {version:?}")));
    }
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader, &mut budget)?.ok_or_else(|| invalid("eof in headers"))?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| invalid(format!("bad header {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let mut request = Request {
        method: method.to_owned(),
        target: target.to_owned(),
        version: version.to_owned(),
        headers,
        body: Vec::new(),
    };
    if request.header("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
        interim.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        interim.flush()?;
    }
    // RFC 9112 §6.3: chunked wins over Content-Length when both are present.
    let chunked = request.header("transfer-encoding").is_some_and(|te| {
        te.rsplit(',').next().is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
    });
    if chunked {
        request.body = read_chunked(reader)?;
    } else if let Some(length) = request.header("content-length") {
        let length: usize = length.parse().map_err(|_| invalid(format!("bad content-length {length:?}")))?;
        if length > MAX_BODY {
            return Err(invalid(format!("body of {length} bytes is too large")));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        request.body = body;
    }
    Ok(Some(request))
}

/// Reads a line ending in LF (a CR before it is dropped), charging its bytes to `budget`.
/// `None` is end of input before any byte.
fn read_line<R: BufRead>(reader: &mut R, budget: &mut u64) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = (&mut *reader).take(*budget).read_until(b'\n', &mut line)?;
    if n == 0 {
        return if *budget == 0 { Err(invalid("request head too large")) } else { Ok(None) };
    }
    *budget -= n as u64;
    if line.pop() != Some(b'\n') {
        return Err(if *budget == 0 { invalid("request head too large") } else { invalid("eof in line") });
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line).map(Some).map_err(|_| invalid("non-UTF-8 request head"))
}

fn read_chunked<R: BufRead>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    // Chunk-size lines and trailers are small; one head-sized budget covers all of them.
    let mut budget = MAX_HEAD;
    loop {
        let line = read_line(reader, &mut budget)?.ok_or_else(|| invalid("eof in chunked body"))?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size, 16).map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Trailers, up to the empty line that ends the message.
            while !read_line(reader, &mut budget)?.ok_or_else(|| invalid("eof in trailers"))?.is_empty() {}
            return Ok(body);
        }
        if body.len().saturating_add(size) > MAX_BODY {
            return Err(invalid("chunked body is too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        if !read_line(reader, &mut budget)?.ok_or_else(|| invalid("eof after chunk"))?.is_empty() {
            return Err(invalid("chunk longer than its size"));
        }
    }
}

/// A complete response.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub(crate) fn json(status: u16, body: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: serde_json::to_vec(body).expect("a Value always serializes"),
        }
    }

    /// A complete `text/event-stream` body.
    pub(crate) fn sse(body: Vec<u8>) -> Response {
        Response {
            status: 200,
            content_type: "text/event-stream",
            headers: vec![("cache-control", "no-cache".to_owned())],
            body,
        }
    }

    /// An error in the shape the Anthropic SDKs parse.
    pub(crate) fn error(status: u16, kind: &str, message: &str) -> Response {
        Response::json(
            status,
            &serde_json::json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// Writes the response; HEAD gets the headers only. `close` adds `Connection: close`, after
    /// which the caller drops the connection.
    pub(crate) fn write_to<W: Write>(&self, out: &mut W, close: bool, head_only: bool) -> io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(if close { "connection: close\r\n\r\n" } else { "connection: keep-alive\r\n\r\n" });
        // One write for head and body, so a reader never sees a head without its body.
        let mut bytes = head.into_bytes();
        if !head_only {
            bytes.extend_from_slice(&self.body);
        }
        out.write_all(&bytes)?;
        out.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        415 => "Unsupported Media Type",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> io::Result<Option<Request>> {
        let mut interim = Vec::new();
        read_request(&mut &raw[..], &mut interim)
    }

    #[test]
    fn content_length_body_and_query() {
        let request = parse(b"POST /v1/messages?beta=true HTTP/1.1\r\nContent-Length: 2\r\nX-A: b\r\n\r\n{}")
            .unwrap()
            .unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path(), "/v1/messages");
        assert_eq!(request.query(), Some("beta=true"));
        assert_eq!(request.header("x-a"), Some("b"));
        assert_eq!(request.body, b"{}");
        assert!(!request.wants_close());
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nT: v\r\n\r\n";
        assert_eq!(parse(raw).unwrap().unwrap().body, b"abc0123456789");
    }

    #[test]
    fn eof_between_requests_is_not_an_error() {
        assert!(parse(b"").unwrap().is_none());
        assert!(parse(b"\r\n").unwrap().is_none());
    }

    #[test]
    fn malformed_requests_are_invalid_data() {
        for raw in [
            &b"GARBAGE\r\n\r\n"[..],
            b"GET / HTTP/2\r\n\r\n",
            b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n0\r\n\r\n",
        ] {
            let err = parse(raw).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn oversized_head_is_rejected() {
        let mut raw = b"GET / HTTP/1.1\r\nX: ".to_vec();
        raw.extend(std::iter::repeat_n(b'a', usize::try_from(MAX_HEAD).unwrap()));
        assert_eq!(parse(&raw).unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn expect_continue_gets_an_interim_response() {
        let raw = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx";
        let mut interim = Vec::new();
        let request = read_request(&mut &raw[..], &mut interim).unwrap().unwrap();
        assert_eq!(request.body, b"x");
        assert_eq!(interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    }

    #[test]
    fn connection_close_rules() {
        let close = |raw: &[u8]| parse(raw).unwrap().unwrap().wants_close();
        assert!(close(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"));
        assert!(close(b"GET / HTTP/1.0\r\n\r\n"));
        assert!(!close(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    }
}
