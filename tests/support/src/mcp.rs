//! `POST /mcp` as tests speak it on the wire: stateless-era (2026-07-28) requests with their
//! envelope and mirrored headers, and what their answers and records hold.

use serde_json::{Value, json};

use crate::Gateway;
use crate::client::Response;

/// A stateless-era request (2026-07-28) with its envelope and mirrored headers.
pub fn call(gw: &Gateway, key: &str, method: &str, params: Value) -> (Response, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let name = params["name"].as_str().map(str::to_owned);
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28".to_owned()),
        ("Mcp-Method", method.to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
    ];
    if method == "tools/call"
        && let Some(name) = name
    {
        headers.push(("Mcp-Name", name));
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let response = gw.request(
        "POST",
        "/mcp",
        Some(key),
        &headers,
        body.to_string().as_bytes(),
    );
    let answer = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response, answer)
}

/// A stateless-era `tools/call` of `name` with `arguments`, with the gateway's test key.
pub fn tool(gw: &Gateway, name: &str, arguments: Value) -> (Response, Value) {
    call(
        gw,
        &gw.key,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

/// The tool names of a `tools/list` answer.
pub fn tool_names(answer: &Value) -> Vec<&str> {
    answer["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default()
}

/// A record's body: JSON as `invocations show` prints it, or its text.
pub fn body(kept: &Value) -> Value {
    match kept {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    }
}
