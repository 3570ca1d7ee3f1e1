//! The fake upstream's MCP server at `POST /mcp`: the stateless revision (2026-07-28) as the
//! gateway's client of remote servers speaks it (`host/src/tools/server.rs`), answering JSON
//! (never SSE) and keeping no session. One tool, `echo`, which answers its `text`.
//!
//! - `server/discover`: the one version, the `tools` capability, the server's name;
//! - `tools/list`: `echo`, whose input is an object with a `text` string;
//! - `tools/call` of `echo`: `{"content":[{"type":"text","text":TEXT}]}`;
//! - anything else: JSON-RPC error `-32601` (method not found).
//!
//! As cheap as the chat endpoint: answers are fixed strings around the request's id (and the
//! echoed text, copied as the request wrote it, escapes and all), found by scanning the body
//! rather than parsing it; the method and the tool come from the `Mcp-Method` and `Mcp-Name`
//! headers the revision mirrors them in, checked against the body. A request that breaks the
//! revision's rules (no or another `MCP-Protocol-Version`, no `_meta` envelope of that version,
//! headers that do not match the body) gets the error a server of the revision answers, so a
//! client that sends them wrong shows up as failed requests.

use bytes::Bytes;
use hyper::{HeaderMap, StatusCode};

use super::find_after;

/// The stateless revision, the one this server speaks.
pub const VERSION: &str = "2026-07-28";
/// Its one tool.
pub const ECHO: &str = "echo";

pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
pub const METHOD_HEADER: &str = "mcp-method";
pub const NAME_HEADER: &str = "mcp-name";

const DISCOVER: &str = r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"bench-upstream","version":"1.0.0"}}"#;
const TOOLS: &str = r#"{"tools":[{"name":"echo","description":"Answers its text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}"#;
/// The `_meta` envelope's version, as a client of the revision writes it.
const META_VERSION: &[u8] = br#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#;

const METHOD_NOT_FOUND: i32 = -32601;
const INVALID_PARAMS: i32 = -32602;
const HEADER_MISMATCH: i32 = -32020;
const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;

/// The status and JSON body answering `body`, a request to `/mcp` with `headers`.
pub fn answer(headers: &HeaderMap, body: &[u8]) -> (StatusCode, Bytes) {
    let Some(id) = request_id(body) else {
        // A notification (or a client's answer): nothing to say.
        return (StatusCode::ACCEPTED, Bytes::new());
    };
    match result(headers, body) {
        Ok(result) => (StatusCode::OK, envelope(id, b"result", &result)),
        Err((status, code, message)) => {
            let error = format!(r#"{{"code":{code},"message":"{message}"}}"#);
            (status, envelope(id, b"error", error.as_bytes()))
        }
    }
}

type Failure = (StatusCode, i32, &'static str);

/// The result of the request, or its error (the HTTP status the revision gives it, the code,
/// the message).
fn result(headers: &HeaderMap, body: &[u8]) -> Result<Bytes, Failure> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mismatch = |message| (StatusCode::BAD_REQUEST, HEADER_MISMATCH, message);
    if header(PROTOCOL_VERSION_HEADER) != Some(VERSION) {
        return Err((
            StatusCode::BAD_REQUEST,
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version (supported: 2026-07-28)",
        ));
    }
    if !contains(body, META_VERSION) {
        return Err(mismatch(
            "MCP-Protocol-Version does not match the request's _meta protocol version",
        ));
    }
    let method = header(METHOD_HEADER).ok_or(mismatch("no Mcp-Method header"))?;
    if !contains(body, format!(r#""method":"{method}""#).as_bytes()) {
        return Err(mismatch("Mcp-Method does not match the request's method"));
    }
    match method {
        "server/discover" => Ok(Bytes::from_static(DISCOVER.as_bytes())),
        "tools/list" => Ok(Bytes::from_static(TOOLS.as_bytes())),
        "tools/call" => {
            let unknown = (StatusCode::BAD_REQUEST, INVALID_PARAMS, "unknown tool");
            if header(NAME_HEADER) != Some(ECHO) {
                return Err(unknown);
            }
            if !contains(body, br#""name":"echo""#) {
                return Err(mismatch("Mcp-Name does not match the request's tool name"));
            }
            let text = string_after(body, br#""text":""#).ok_or((
                StatusCode::BAD_REQUEST,
                INVALID_PARAMS,
                "arguments.text (a string) is missing",
            ))?;
            let mut result = Vec::with_capacity(text.len() + 48);
            result.extend_from_slice(br#"{"content":[{"type":"text","text":""#);
            result.extend_from_slice(text);
            result.extend_from_slice(br#""}]}"#);
            Ok(Bytes::from(result))
        }
        _ => Err((StatusCode::NOT_FOUND, METHOD_NOT_FOUND, "Method not found")),
    }
}

/// `{"jsonrpc":"2.0","id":ID,"KIND":VALUE}`.
fn envelope(id: &[u8], kind: &[u8], value: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(id.len() + value.len() + 40);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id);
    out.extend_from_slice(b",\"");
    out.extend_from_slice(kind);
    out.extend_from_slice(b"\":");
    out.extend_from_slice(value);
    out.push(b'}');
    Bytes::from(out)
}

/// The request's `id` as it is written (a number, or a string with its quotes). The first
/// `"id":` of the body: a client writes the envelope's keys before (or, sorted, beside) its
/// `params`, and none of the keys of `_meta` or of `echo`'s arguments is `id`.
fn request_id(body: &[u8]) -> Option<&[u8]> {
    let rest = find_after(body, b"\"id\":")?;
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = &rest[start..];
    let len = if rest.first() == Some(&b'"') {
        1 + string_len(&rest[1..])? + 1
    } else {
        rest.iter()
            .take_while(|b| b.is_ascii_digit() || **b == b'-')
            .count()
    };
    (len > 0).then(|| &rest[..len])
}

/// The contents of the JSON string that begins right after `marker`, escapes as written.
fn string_after<'b>(body: &'b [u8], marker: &[u8]) -> Option<&'b [u8]> {
    let rest = find_after(body, marker)?;
    Some(&rest[..string_len(rest)?])
}

/// The length of a JSON string's contents up to its closing quote.
fn string_len(text: &[u8]) -> Option<usize> {
    let mut escaped = false;
    for (i, &b) in text.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return Some(i),
            _ => {}
        }
    }
    None
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find_after(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;
    use serde_json::{Value, json};

    use super::*;

    fn headers(method: &str, name: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(PROTOCOL_VERSION_HEADER, HeaderValue::from_static(VERSION));
        headers.insert(METHOD_HEADER, HeaderValue::from_str(method).unwrap());
        if let Some(name) = name {
            headers.insert(NAME_HEADER, HeaderValue::from_str(name).unwrap());
        }
        headers
    }

    fn ask(headers: &HeaderMap, body: &Value) -> (StatusCode, Value) {
        let (status, answer) = answer(headers, body.to_string().as_bytes());
        (status, serde_json::from_slice(&answer).unwrap())
    }

    fn meta() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "gateway", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        })
    }

    #[test]
    fn it_serves_discover_list_and_echo() {
        let (status, answer) = ask(
            &headers("server/discover", None),
            &json!({"jsonrpc": "2.0", "id": 7, "method": "server/discover",
                    "params": {"_meta": meta()}}),
        );
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["result"]["supportedVersions"], json!([VERSION]));

        let (_, answer) = ask(
            &headers("tools/list", None),
            &json!({"jsonrpc": "2.0", "id": "a-1", "method": "tools/list",
                    "params": {"_meta": meta()}}),
        );
        assert_eq!(answer["id"], "a-1");
        assert_eq!(answer["result"]["tools"][0]["name"], ECHO);

        // Keys sorted, as serde_json writes them: `_meta` (with a `name`) before `name`.
        let (status, answer) = ask(
            &headers("tools/call", Some(ECHO)),
            &json!({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {
                "_meta": meta(), "arguments": {"text": "he said \"hi\""}, "name": ECHO}}),
        );
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": 12, "result": {
                "content": [{"type": "text", "text": "he said \"hi\""}]}})
        );
    }

    #[test]
    fn it_refuses_what_the_revision_refuses() {
        let call = |meta: Value, name: &str| {
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": name, "arguments": {"text": "x"}, "_meta": meta}})
        };
        let code = |(_, answer): (StatusCode, Value)| answer["error"]["code"].as_i64();
        let mut old = headers("tools/call", Some(ECHO));
        old.insert(
            PROTOCOL_VERSION_HEADER,
            HeaderValue::from_static("2025-11-25"),
        );
        assert_eq!(code(ask(&old, &call(meta(), ECHO))), Some(-32022));
        assert_eq!(
            code(ask(
                &headers("tools/call", Some(ECHO)),
                &call(json!({}), ECHO)
            )),
            Some(-32020)
        );
        assert_eq!(
            code(ask(&headers("tools/list", None), &call(meta(), ECHO))),
            Some(-32020)
        );
        assert_eq!(
            code(ask(
                &headers("tools/call", Some("other")),
                &call(meta(), "other")
            )),
            Some(-32602)
        );
        let (status, refused) = ask(
            &headers("resources/list", None),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list",
                    "params": {"_meta": meta()}}),
        );
        assert_eq!(
            (status, refused["error"]["code"].as_i64()),
            (StatusCode::NOT_FOUND, Some(-32601))
        );
        let notification = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let (status, body) = answer(&headers("notifications/initialized", None), notification);
        assert_eq!((status, body.len()), (StatusCode::ACCEPTED, 0));
    }
}
