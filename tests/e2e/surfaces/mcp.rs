//! `POST /mcp`, the MCP gateway, in front of real MCP servers built with the official SDKs
//! (`tests/mcp`): `modern`, the Python SDK's server (speaks the stateless 2026-07-28 revision),
//! and `legacy`, the TypeScript SDK's (the session era only). The official Python client
//! drives the gateway in both eras (`tests/mcp/test_gateway.py`); the rest is checked here on
//! the wire: the stateless revision's header checks, sessions, records, a server down, a
//! server that hangs, the byte bounds, the streams that tell of a server's new tools, and
//! progress streamed to its caller.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gateway_test_support::Gateway;
use gateway_test_support::mcp::{body, call, tool, tool_names};
use serde_json::{Value, json};

use crate::venv;

/// Where `cargo xtask test` installed the TypeScript SDK's server (`xtask`'s `mcp_node`).
const NODE_DIR_VAR: &str = "GATEWAY_TEST_MCP_NODE_DIR";
/// What the gateway sends the `modern` server as its `Authorization` (from `headers_env`).
const UPSTREAM_AUTH: &str = "Bearer upstream-secret-0f9a8b7c";

/// A server process, stopped when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` and reads the one line it prints once it listens.
fn server(mut command: Command, what: &str) -> Server {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the {what} MCP server: {e}"));
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("the {what} MCP server printed nothing: {e}"));
    let url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("the {what} MCP server printed {line:?}"))
        .to_owned();
    Server { child, url }
}

struct Upstreams {
    modern: Server,
    legacy: Server,
}

fn upstreams() -> Upstreams {
    let python = venv::python();
    let mut modern = venv::command(&python);
    modern.args(["tests/mcp/modern_server.py", "0"]);
    let node_dir = std::env::var_os(NODE_DIR_VAR).unwrap_or_else(|| {
        panic!(
            "{NODE_DIR_VAR} is not set: run `cargo xtask test`, which installs tests/mcp's packages"
        )
    });
    let mut legacy = Command::new("node");
    legacy
        .arg(std::path::Path::new(&node_dir).join("legacy_server.mjs"))
        .arg("0");
    Upstreams {
        modern: server(modern, "modern (Python SDK)"),
        legacy: server(legacy, "legacy (TypeScript SDK)"),
    }
}

/// A gateway fronting both upstreams, with `extra` config lines.
fn gateway(up: &Upstreams, extra: &[&str]) -> Gateway {
    let mut builder = Gateway::builder()
        .env("MCP_MODERN_AUTH", UPSTREAM_AUTH)
        .config_line(&format!(
            "[mcp_servers.modern]\nurl = {:?}\nheaders_env = {{ Authorization = \"MCP_MODERN_AUTH\" }}\n",
            up.modern.url
        ))
        .config_line(&format!("[mcp_servers.legacy]\nurl = {:?}\n", up.legacy.url));
    for line in extra {
        builder = builder.config_line(line);
    }
    builder.start()
}

#[test]
fn the_official_python_client_in_both_eras() {
    let up = upstreams();
    let gw = gateway(&up, &[]);
    let project = gw.create_project("agents");
    let scoped_tools = ["modern__add", "legacy__*"];
    let scoped_key = gw
        .cli(&[
            "key",
            "create",
            &project.id,
            "--tools",
            &scoped_tools.join(","),
        ])
        .checked("key create --tools")
        .last_line();
    let scenario = json!({
        "url": format!("{}/mcp", gw.url()),
        "key": gw.key,
        "scoped_key": scoped_key,
        "scoped_tools": scoped_tools,
    });
    let output = venv::command(&venv::python())
        .args(["-m", "pytest", "tests/mcp", "-q", "-p", "no:cacheprovider"])
        .env("GATEWAY_MCP_SCENARIO", scenario.to_string())
        .output()
        .expect("pytest runs");
    assert!(
        output.status.success(),
        "the MCP client suite failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_tool_call_is_an_invocation_record_and_the_upstreams_secret_stays_out() {
    let up = upstreams();
    let gw = gateway(&up, &["record_bodies = \"full\""]);
    let (response, answer) = tool(&gw, "modern__add", json!({"a": 2, "b": 40}));
    assert_eq!(response.status, 200, "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["result"], 42,
        "{answer}"
    );
    assert_eq!(answer["result"]["resultType"], "complete");
    let id = response
        .header("x-invocation-id")
        .expect("an invocation id")
        .to_owned();
    let record = gw.record(&id);
    assert_eq!(record["type"], "tool", "{record}");
    assert_eq!(record["route"], "modern");
    assert_eq!(record["model"], "add");
    assert_eq!(record["status"], "success");
    assert_eq!(record["httpStatus"], 200);
    assert_eq!(
        body(&record["request"]),
        json!({"a": 2, "b": 40}),
        "{record}"
    );
    assert_eq!(
        body(&record["response"])["structuredContent"]["result"],
        42,
        "{record}"
    );

    // The upstream saw the config's credential; the caller and the record never do.
    let (_, answer) = tool(&gw, "modern__headers", json!({}));
    let text = answer.to_string();
    assert!(text.contains("[redacted]"), "{text}");
    assert!(!text.contains("upstream-secret"), "{text}");
    assert!(!text.contains(&gw.key), "{text}");

    // A tool reporting an error is answered as it is, and recorded as an error.
    let (response, answer) = tool(&gw, "modern__fail", json!({}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let record = gw.record(response.header("x-invocation-id").unwrap());
    assert_eq!(record["status"], "error", "{record}");

    // An unknown tool: -32602, recorded.
    let (response, answer) = tool(&gw, "modern__nope", json!({}));
    assert_eq!(
        (response.status, answer["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{answer}"
    );
    let record = gw.record(response.header("x-invocation-id").unwrap());
    assert_eq!(record["status"], "error", "{record}");
    assert_eq!(record["route"], "modern");
    // A name of no server: a tool record all the same.
    let (response, _) = tool(&gw, "nowhere", json!({}));
    let record = gw.record(response.header("x-invocation-id").unwrap());
    assert_eq!(
        (record["type"].as_str(), record["model"].as_str()),
        (Some("tool"), Some("nowhere")),
        "{record}"
    );
}

#[test]
fn the_stateless_revision_checks_its_envelope_and_headers() {
    let up = upstreams();
    let gw = gateway(&up, &[]);
    let post = |headers: &[(&str, &str)], body: Value| {
        let r = gw.request(
            "POST",
            "/mcp",
            Some(&gw.key),
            headers,
            body.to_string().as_bytes(),
        );
        let answer: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        (r.status, answer["error"]["code"].as_i64(), answer)
    };
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let list =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}});
    let v = ("MCP-Protocol-Version", "2026-07-28");
    // Mcp-Method missing, or not the body's.
    assert_eq!(post(&[v], list.clone()).0, 400);
    assert_eq!(
        post(&[v, ("Mcp-Method", "tools/call")], list.clone()).1,
        Some(-32020)
    );
    // Mcp-Name not the tool's.
    let tool = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "modern__add", "arguments": {"a": 1, "b": 1}, "_meta": meta}});
    let (status, code, _) = post(
        &[
            v,
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "modern__echo"),
        ],
        tool,
    );
    assert_eq!((status, code), (400, Some(-32020)));
    // No envelope.
    let bare = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    assert_eq!(
        post(&[v, ("Mcp-Method", "tools/list")], bare).1,
        Some(-32602)
    );
    // A version the gateway does not speak: the spec's error, naming what it does.
    let mut future = list.clone();
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let (status, code, answer) = post(
        &[
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/list"),
        ],
        future,
    );
    assert_eq!((status, code), (400, Some(-32022)), "{answer}");
    assert_eq!(answer["error"]["data"]["supported"], json!(["2026-07-28"]));
    // An unknown method: 404, -32601.
    let (response, answer) = call(&gw, &gw.key, "prompts/list", json!({}));
    assert_eq!(
        (response.status, answer["error"]["code"].as_i64()),
        (404, Some(-32601))
    );
    // Not JSON; a batch; a notification.
    assert_eq!(post(&[v], json!("x")).0, 400);
    let (status, code, _) = post(&[], json!([list.clone()]));
    assert_eq!((status, code), (400, Some(-32600)));
    let r = gw.request("POST", "/mcp", Some(&gw.key), &[], b"{not json");
    assert_eq!(r.status, 400);
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&[v], notification).0, 202);
    // No key, a wrong key: 401, with an invocation id.
    let r = gw.request("POST", "/mcp", None, &[v], list.to_string().as_bytes());
    assert_eq!(r.status, 401);
    assert!(r.header("x-invocation-id").is_some());
    let r = gw.request(
        "POST",
        "/mcp",
        Some("gw_wrong"),
        &[v],
        list.to_string().as_bytes(),
    );
    assert_eq!(r.status, 401);
    // No server stream.
    assert_eq!(
        gw.request("GET", "/mcp", Some(&gw.key), &[], b"").status,
        405
    );
}

#[test]
fn sessions_are_signed_for_their_key_and_end_with_delete() {
    let up = upstreams();
    let gw = gateway(&up, &[]);
    let other = gw.create_project("other");
    let json = [("Content-Type", "application/json")];
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = gw.request(
        "POST",
        "/mcp",
        Some(&gw.key),
        &json,
        initialize.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200);
    let answer: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
    let session = r.header("mcp-session-id").expect("a session id").to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let in_session = |key: &str, session: &str| {
        let headers = [
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        gw.request("POST", "/mcp", Some(key), &headers, list.as_bytes())
    };
    let r = in_session(&gw.key, &session);
    assert_eq!(r.status, 200);
    let answer: Value = serde_json::from_slice(&r.body).unwrap();
    let names = tool_names(&answer);
    assert!(
        names.contains(&"modern__add") && names.contains(&"legacy__search"),
        "{names:?}"
    );
    // Another key cannot use it; a forged one is unknown; none at all is a 400.
    assert_eq!(in_session(&other.key, &session).status, 404);
    assert_eq!(in_session(&gw.key, &format!("{session}x")).status, 404);
    assert_eq!(
        gw.request("POST", "/mcp", Some(&gw.key), &[], list.as_bytes())
            .status,
        400
    );
    // DELETE ends it.
    let r = gw.request(
        "DELETE",
        "/mcp",
        Some(&gw.key),
        &[("Mcp-Session-Id", &session)],
        b"",
    );
    assert_eq!(r.status, 204);
    assert_eq!(in_session(&gw.key, &session).status, 404);
}

#[test]
fn a_server_down_hanging_or_too_talkative_ends_as_an_error_and_a_record() {
    let up = upstreams();
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let gw = gateway(
        &up,
        &[
            &format!("[mcp_servers.down]\nurl = \"http://{closed}/mcp\"\n"),
            "[mcp]\nmax_tool_result_bytes = 4096\nmax_tool_argument_bytes = 2048\n",
            "[mcp_servers.modern]\ntimeout_secs = 2\n",
        ],
    );
    // The list leaves the server down out.
    let (response, answer) = call(&gw, &gw.key, "tools/list", json!({}));
    assert_eq!(response.status, 200, "{answer}");
    let names = tool_names(&answer);
    assert!(
        names.contains(&"modern__add") && !names.iter().any(|n| n.starts_with("down__")),
        "{names:?}"
    );
    // A call to it is an error naming it, and a record.
    let (response, answer) = tool(&gw, "down__anything", json!({}));
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("down"),
        "{answer}"
    );
    let record = gw.record(response.header("x-invocation-id").unwrap());
    assert_eq!(
        (record["status"].as_str(), record["route"].as_str()),
        (Some("error"), Some("down")),
        "{record}"
    );
    // A tool that does not answer within the server's timeout_secs.
    let started = Instant::now();
    let (response, answer) = tool(&gw, "modern__sleep", json!({"seconds": 30}));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{answer}"
    );
    let record = gw.record(response.header("x-invocation-id").unwrap());
    assert_eq!(record["status"], "error", "{record}");
    // An answer over max_tool_result_bytes; arguments over max_tool_argument_bytes.
    let (_, answer) = tool(&gw, "modern__big", json!({"n": 10000}));
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tool_result_bytes"),
        "{answer}"
    );
    let (_, answer) = tool(&gw, "modern__big", json!({"n": 100}));
    assert_eq!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .map(str::len),
        Some(100),
        "{answer}"
    );
    let (response, answer) = tool(&gw, "modern__echo", json!({"text": "x".repeat(3000)}));
    assert_eq!(
        (response.status, answer["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tool_argument_bytes")
    );
}

#[test]
fn a_servers_change_of_tools_reaches_the_list_before_its_ttl() {
    // Each upstream adds a tool at `grow` and says so only on the stream the gateway keeps
    // open to it: the session's GET stream (TypeScript, session era), `subscriptions/listen`
    // (Python, 2026-07-28). With a list kept for an hour, only those streams can tell.
    let up = upstreams();
    let gw = gateway(&up, &["[mcp]\ntools_list_ttl_secs = 3600\n"]);
    let listed = || {
        let (response, answer) = call(&gw, &gw.key, "tools/list", json!({}));
        assert_eq!(response.status, 200, "{answer}");
        tool_names(&answer)
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let before = listed();
    assert!(
        before.contains(&"legacy__grow".to_owned())
            && !before.iter().any(|n| n.ends_with("__extra")),
        "{before:?}"
    );
    for grow in ["legacy__grow", "modern__grow"] {
        let (_, answer) = tool(&gw, grow, json!({}));
        assert_eq!(answer["result"]["content"][0]["text"], "grown", "{answer}");
    }
    // The notifications travel on their own streams: a few list requests may come first.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut names = listed();
    while !(names.contains(&"legacy__extra".to_owned())
        && names.contains(&"modern__extra".to_owned()))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
        names = listed();
    }
    assert!(
        names.contains(&"legacy__extra".to_owned()) && names.contains(&"modern__extra".to_owned()),
        "the gateway did not hear of the new tools: {names:?}"
    );
    for (extra, said) in [
        ("legacy__extra", "extra called"),
        ("modern__extra", "extra called"),
    ] {
        let (_, answer) = tool(&gw, extra, json!({}));
        assert_eq!(answer["result"]["content"][0]["text"], said, "{answer}");
    }
}

#[test]
fn progress_streams_to_its_caller_and_closing_the_stream_cancels_the_call() {
    let up = upstreams();
    let gw = gateway(&up, &[]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "p-1",
    });
    let request = |name: &str, arguments: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": meta}});
        let auth = format!("Bearer {}", gw.key);
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ];
        gateway_test_support::Connection::open(
            gw.addr,
            "POST",
            "/mcp",
            &headers,
            body.to_string().as_bytes(),
        )
    };
    // The session-era upstream's progress, relayed to a caller of the stateless revision: its
    // own token, every step, then the answer, which ends the stream.
    let mut stream = request("legacy__count", json!({"n": 2}));
    assert_eq!(stream.status, 200);
    assert!(
        stream
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream")),
        "{:?}",
        stream.header("content-type")
    );
    assert_eq!(stream.header("mcp-protocol-version"), Some("2026-07-28"));
    let id = stream.header("x-invocation-id").unwrap().to_owned();
    let mut frames = Vec::new();
    while let Some(frame) = stream.next_frame() {
        frames.push(frame);
    }
    let steps: Vec<(&str, &str, u64)> = frames
        .iter()
        .filter(|f| f["method"] == "notifications/progress")
        .map(|f| {
            let p = &f["params"];
            (
                p["progressToken"].as_str().unwrap_or(""),
                p["message"].as_str().unwrap_or(""),
                p["progress"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [("p-1", "counted 1", 1), ("p-1", "counted 2", 2)],
        "{frames:?}"
    );
    let last = frames.last().unwrap();
    assert_eq!(last["id"], 9, "{frames:?}");
    assert_eq!(last["result"]["content"][0]["text"], "counted to 2");
    assert_eq!(last["result"]["resultType"], "complete");
    let record = gw.record(&id);
    assert_eq!(record["status"], "success", "{record}");

    // At the stateless revision, a caller that closes its stream cancels the call: the record
    // says so at once, not when the tool would have ended.
    let stream = request("modern__sleep", json!({"seconds": 40}));
    assert_eq!(stream.status, 200);
    let id = stream.header("x-invocation-id").unwrap().to_owned();
    drop(stream);
    let record = gw.record(&id);
    assert_eq!(
        (record["status"].as_str(), record["httpStatus"].as_i64()),
        (Some("cancelled"), Some(499)),
        "{record}"
    );
}

#[test]
fn a_tool_call_running_when_the_grace_ends_is_ended_and_recorded() {
    let up = upstreams();
    let mut gw = gateway(&up, &["shutdown_grace_secs = 1"]);
    let (addr, key) = (gw.addr, gw.key.clone());
    let caller = std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "modern__sleep", "arguments": {"seconds": 60}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        let auth = format!("Bearer {key}");
        gateway_test_support::client::request(
            addr,
            "POST",
            "/mcp",
            &[
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "modern__sleep"),
            ],
            body.to_string().as_bytes(),
        )
    });
    // Sequencing only: the call is then at the upstream, which sleeps for a minute.
    std::thread::sleep(Duration::from_millis(1500));
    gw.terminate();
    let answered = caller.join().expect("the caller's thread");
    let answer: Value = serde_json::from_slice(&answered.body).unwrap();
    assert_eq!(
        answer["error"]["message"], "the gateway shut down",
        "{answer}"
    );
    assert!(gw.wait_exit().success());
    let id = answered.header("x-invocation-id").unwrap();
    let record = gw.record(id);
    assert_eq!(
        (record["status"].as_str(), record["httpStatus"].as_i64()),
        (Some("cancelled"), Some(503)),
        "{record}"
    );
}

#[test]
fn a_caller_who_leaves_cancels_its_call_at_the_stateless_revision_and_not_in_a_session() {
    let up = upstreams();
    let gw = gateway(&up, &[]);
    // A session of the handshake era, for the second caller.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let r = gw.request(
        "POST",
        "/mcp",
        Some(&gw.key),
        &[("Accept", "application/json, text/event-stream")],
        initialize.to_string().as_bytes(),
    );
    let session = r.header("mcp-session-id").expect("a session id").to_owned();
    // Each caller sends a plain (JSON) call of a tool that sleeps, and hangs up before it ends.
    let leave = |seconds: u64, headers_of_era: &[(&str, &str)], meta: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "modern__sleep", "arguments": {"seconds": seconds}, "_meta": meta}})
        .to_string();
        let mut headers = vec![("Accept", "application/json, text/event-stream")];
        headers.extend_from_slice(headers_of_era);
        let stream = gw.send("POST", "/mcp", Some(&gw.key), &headers, body.as_bytes());
        // Sequencing only: the call is then at the upstream.
        std::thread::sleep(Duration::from_millis(1000));
        let _ = stream.shutdown(std::net::Shutdown::Both);
    };
    let modern_meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    leave(
        120,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "modern__sleep"),
        ],
        modern_meta,
    );
    leave(
        3,
        &[
            ("MCP-Protocol-Version", "2025-06-18"),
            ("Mcp-Session-Id", &session),
        ],
        json!({}),
    );
    // The stateless caller's call ends at once, cancelled; the session's runs on to its end
    // and is recorded as it ended. Neither record is lost.
    let deadline = Instant::now() + Duration::from_secs(60);
    let statuses = loop {
        let statuses: Vec<(String, String)> = gw
            .list_invocations(&[])
            .iter()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                (fields.get(4..6) == Some(&["modern", "sleep"][..]))
                    .then(|| (fields[2].to_owned(), fields[3].to_owned()))
            })
            .collect();
        if statuses.len() == 2 || Instant::now() > deadline {
            break statuses;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut statuses = statuses;
    statuses.sort();
    assert_eq!(
        statuses,
        [
            ("cancelled".to_owned(), "499".to_owned()),
            ("success".to_owned(), "200".to_owned())
        ],
        "the two calls' records"
    );
}
