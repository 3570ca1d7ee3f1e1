//! The Model Context Protocol as both sides of the gateway speak it: protocol versions and
//! their eras, JSON-RPC error codes, the `_meta` envelope keys and the Streamable HTTP
//! headers, the header-value encoding, and `x-mcp-header` parameters. The source of truth is
//! the specification's schema and transport pages (`modelcontextprotocol/modelcontextprotocol`,
//! `docs/specification/2026-07-28/basic/transports/streamable-http.mdx`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

/// The stateless revision: no handshake, no session; version and capabilities in every
/// request's `_meta`, mirrored in headers.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The revisions reached through `initialize`, newest first: what `/mcp` negotiates with a
/// client of the session era, and what the gateway offers an upstream of that era.
pub const HANDSHAKE_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// What a request of the session era without `MCP-Protocol-Version` is taken to speak
/// (streamable-http: "MAY treat a request that omits the header as protocol version
/// 2025-03-26").
pub const UNDECLARED_VERSION: &str = "2025-03-26";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Implementation-defined (`-32000`..`-32019`): the gateway's own refusals (a key, a limit,
/// a server that failed).
pub const GATEWAY_ERROR: i64 = -32000;
pub const HEADER_MISMATCH: i64 = -32020;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

pub const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_INFO_META: &str = "io.modelcontextprotocol/clientInfo";
pub const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
pub const SERVER_INFO_META: &str = "io.modelcontextprotocol/serverInfo";

pub const TOOLS_CHANGED: &str = "notifications/tools/list_changed";
pub const PROGRESS: &str = "notifications/progress";
/// The stateless revision's long-lived notification stream (the session era's is a GET).
pub const LISTEN: &str = "subscriptions/listen";

pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
pub const METHOD_HEADER: &str = "mcp-method";
pub const NAME_HEADER: &str = "mcp-name";
pub const SESSION_HEADER: &str = "mcp-session-id";
pub const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// Whether `version` is one the gateway serves through `initialize`.
pub fn is_handshake_version(version: &str) -> bool {
    HANDSHAKE_VERSIONS.contains(&version)
}

/// The HTTP status of a JSON-RPC error at the stateless revision (streamable-http: a
/// version, header or parameter problem is 400, an unknown method 404); other errors ride a
/// 200, as handler errors do in the SDKs.
pub fn modern_status(code: i64) -> u16 {
    match code {
        PARSE_ERROR
        | INVALID_REQUEST
        | INVALID_PARAMS
        | HEADER_MISMATCH
        | UNSUPPORTED_PROTOCOL_VERSION => 400,
        METHOD_NOT_FOUND => 404,
        _ => 200,
    }
}

/// A header value as the spec carries it: verbatim when it is plain printable ASCII without
/// edge whitespace, else `=?base64?…?=` of its UTF-8 (also when it looks like that form).
pub fn encode_header_value(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value.trim() == value
        && sentinel_payload(value).is_none();
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", STANDARD.encode(value))
    }
}

/// The inverse of [`encode_header_value`]; `None` for a sentinel that does not decode to
/// UTF-8, so that a corrupt header never matches a body value.
pub fn decode_header_value(value: &str) -> Option<String> {
    match sentinel_payload(value) {
        None => Some(value.to_owned()),
        Some(payload) => STANDARD
            .decode(payload)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
    }
}

fn sentinel_payload(value: &str) -> Option<&str> {
    value.strip_prefix("=?base64?")?.strip_suffix("?=")
}

/// The `Mcp-Param-*` headers a `tools/call` with `arguments` carries for a tool whose input
/// schema is `schema`: one per property marked `x-mcp-header` that is reachable from the root
/// through `properties` alone, when the arguments hold a string, integer or boolean there.
/// Names are lower-case (`mcp-param-region`).
pub fn param_headers(schema: &Value, arguments: &Value) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    collect_params(schema, Some(arguments), &mut headers, 0);
    headers
}

/// Deeper nesting than this is not followed: a schema is the upstream's, and a path of
/// properties this deep marks nothing a caller routes on.
const MAX_PARAM_DEPTH: usize = 16;

fn collect_params(
    schema: &Value,
    value: Option<&Value>,
    headers: &mut Vec<(String, String)>,
    depth: usize,
) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    if depth >= MAX_PARAM_DEPTH {
        return;
    }
    for (name, property) in properties {
        let at = value.and_then(|v| v.get(name));
        if let Some(token) = property.get("x-mcp-header").and_then(Value::as_str) {
            if let Some(rendered) = at.and_then(render_scalar) {
                headers.push((
                    format!("{PARAM_HEADER_PREFIX}{}", token.to_ascii_lowercase()),
                    encode_header_value(&rendered),
                ));
            }
            continue;
        }
        collect_params(property, at, headers, depth + 1);
    }
}

/// A body value as a header carries it: strings as they are, integers in decimal, booleans
/// as `true`/`false`; nothing for other values (and null).
fn render_scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Value::Number(n) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15)
            .map(|f| format!("{}", f as i64)),
        _ => None,
    }
}

/// Why a request's `Mcp-Param-*` headers disagree with its arguments, if they do: each header
/// the tool's schema declares must be there exactly when its argument is, with the same value.
/// `given` holds the request's headers of that prefix, lower-cased, decoded as received.
pub fn param_mismatch(
    schema: &Value,
    arguments: &Value,
    given: &[(String, String)],
) -> Option<String> {
    let expected = param_headers(schema, arguments);
    let mut declared = Vec::new();
    collect_declared(schema, &mut declared, 0);
    for name in declared {
        let mut copies = given.iter().filter(|(n, _)| *n == name);
        let (first, second) = (copies.next(), copies.next());
        if second.is_some() {
            return Some(format!("{name} appears more than once"));
        }
        let wanted = expected.iter().find(|(n, _)| *n == name);
        match (first, wanted) {
            (None, None) => {}
            (Some(_), None) => {
                return Some(format!("{name} is sent without its argument in the body"));
            }
            (None, Some(_)) => {
                return Some(format!("{name} is missing but its argument is in the body"));
            }
            (Some((_, sent)), Some((_, value))) => {
                let matches = match (decode_header_value(sent), decode_header_value(value)) {
                    (Some(sent), Some(value)) => sent == value || same_integer(&sent, &value),
                    _ => false,
                };
                if !matches {
                    return Some(format!("{name} does not match its argument in the body"));
                }
            }
        }
    }
    None
}

/// `42` and `42.0` name the same integer (the spec's SHOULD for integer parameters).
fn same_integer(a: &str, b: &str) -> bool {
    let whole = |s: &str| -> Option<i64> {
        match s.split_once('.') {
            Some((int, frac)) if frac.bytes().all(|c| c == b'0') => int.parse().ok(),
            Some(_) => None,
            None => s.parse().ok(),
        }
    };
    matches!((whole(a), whole(b)), (Some(x), Some(y)) if x == y)
}

fn collect_declared(schema: &Value, names: &mut Vec<String>, depth: usize) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    if depth >= MAX_PARAM_DEPTH {
        return;
    }
    for property in properties.values() {
        match property.get("x-mcp-header").and_then(Value::as_str) {
            Some(token) => names.push(format!(
                "{PARAM_HEADER_PREFIX}{}",
                token.to_ascii_lowercase()
            )),
            None => collect_declared(property, names, depth + 1),
        }
    }
}

/// The `_meta` of a stateless-era request the gateway sends upstream: the envelope, and the
/// caller's own `_meta` keys (a progress token, a trace context) passed on.
pub fn modern_meta(passed_on: Option<&Map<String, Value>>) -> Value {
    let mut meta = Map::new();
    if let Some(passed_on) = passed_on {
        for (key, value) in passed_on {
            if !key.starts_with("io.modelcontextprotocol/") {
                meta.insert(key.clone(), value.clone());
            }
        }
    }
    meta.insert(PROTOCOL_VERSION_META.into(), MODERN_VERSION.into());
    meta.insert(
        CLIENT_INFO_META.into(),
        serde_json::json!({"name": "gateway", "version": env!("CARGO_PKG_VERSION")}),
    );
    meta.insert(CLIENT_CAPABILITIES_META.into(), Value::Object(Map::new()));
    Value::Object(meta)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn header_values_round_trip() {
        for (value, encoded) in [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ] {
            assert_eq!(encode_header_value(value), encoded);
            assert_eq!(decode_header_value(encoded).as_deref(), Some(value));
        }
        assert_eq!(decode_header_value("=?base64?//8=?="), None);
    }

    #[test]
    fn param_headers_follow_properties_only() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
            "opts": {"type": "object", "properties": {
                "tenant": {"type": "integer", "x-mcp-header": "Tenant"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {
                "x": {"type": "string", "x-mcp-header": "X"}}}}
        }});
        let arguments = json!({"region": "us-west1", "query": "q", "opts": {"tenant": 42}});
        let mut headers = param_headers(&schema, &arguments);
        headers.sort();
        assert_eq!(
            headers,
            [
                ("mcp-param-region".to_owned(), "us-west1".to_owned()),
                ("mcp-param-tenant".to_owned(), "42".to_owned()),
            ]
        );
        let sent = headers;
        assert_eq!(param_mismatch(&schema, &arguments, &sent), None);
        let float = [
            ("mcp-param-region".to_owned(), "us-west1".to_owned()),
            ("mcp-param-tenant".to_owned(), "42.0".to_owned()),
        ];
        assert_eq!(param_mismatch(&schema, &arguments, &float), None);
        assert!(param_mismatch(&schema, &arguments, &sent[..1]).is_some());
        let wrong = [
            ("mcp-param-region".to_owned(), "eu".to_owned()),
            ("mcp-param-tenant".to_owned(), "42".to_owned()),
        ];
        assert!(param_mismatch(&schema, &arguments, &wrong).is_some());
        let no_region = json!({"query": "q"});
        assert!(param_mismatch(&schema, &no_region, &sent[..1]).is_some());
        assert_eq!(param_mismatch(&schema, &no_region, &[]), None);
    }
}
