//! `GET /v1/models` in Anthropic's shape for Anthropic clients (their `anthropic-version`
//! header), the key's scope included.

use super::*;

/// Anthropic's SDKs list models at the same `GET /v1/models` as OpenAI's; their
/// `anthropic-version` header gets Anthropic's shape (one page), errors included.
#[test]
fn models_are_listed_in_anthropic_shape_for_anthropic_clients() {
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url("http://127.0.0.1:9/v1"))
        .config_line("[models.smart]\nroute = \"claude\"\nmodel = \"claude-sonnet-4-5\"")
        .start();
    let headers = [
        ("x-api-key", gw.key.as_str()),
        ("anthropic-version", ANTHROPIC_VERSION),
    ];
    let listed = gw.request("GET", "/v1/models", None, &headers, b"");
    assert_eq!(listed.status, 200, "{}", listed.text());
    let body = listed.json();
    let data = body["data"].as_array().expect("data");
    let ids: Vec<&str> = data.iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids.first(), Some(&"smart"), "{body}");
    assert!(ids.contains(&"claude/claude-sonnet-4-5"), "{body}");
    assert_eq!(
        data[0],
        json!({"type": "model", "id": "smart", "display_name": "smart",
            "created_at": "1970-01-01T00:00:00Z"})
    );
    assert_eq!(body["has_more"], json!(false));
    assert_eq!(body["first_id"], json!("smart"));
    assert_eq!(body["last_id"], json!(ids.last()));

    let one = gw.request(
        "GET",
        "/v1/models/claude%2Fclaude-sonnet-4-5",
        None,
        &headers,
        b"",
    );
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(one.json()["id"], json!("claude/claude-sonnet-4-5"));
    let unknown = gw.request("GET", "/v1/models/nope", None, &headers, b"");
    assert_anthropic_error(&unknown, 404, "not_found_error", "nope");
    let bad_key = gw.request(
        "GET",
        "/v1/models",
        None,
        &[
            ("x-api-key", "gw_wrong"),
            ("anthropic-version", ANTHROPIC_VERSION),
        ],
        b"",
    );
    assert_anthropic_error(&bad_key, 401, "authentication_error", "key");
}

/// A key scoped to one route sees only that route's models; another's answers 404 in
/// Anthropic's shape, as an unknown model does.
#[test]
fn models_outside_the_keys_scope_are_not_found_in_anthropic_shape() {
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url("http://127.0.0.1:9/v1"))
        .route(Route::echo("demo"))
        .config_line("[models.smart]\nroute = \"claude\"\nmodel = \"claude-sonnet-4-5\"")
        .start();
    let args = ["key", "create", gw.project_id.as_str(), "--routes", "demo"];
    let key = gw
        .cli(&args)
        .checked("key create --routes demo")
        .last_line();
    let headers = [
        ("x-api-key", key.as_str()),
        ("anthropic-version", ANTHROPIC_VERSION),
    ];
    let listed = gw.request("GET", "/v1/models", None, &headers, b"");
    assert_eq!(listed.status, 200, "{}", listed.text());
    let body = listed.json();
    let ids: Vec<&str> = body["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(ids.contains(&"demo/echo"), "{body}");
    assert!(
        ids.iter().all(|id| id.starts_with("demo/")),
        "names outside --routes demo: {body}"
    );
    assert_eq!(body["first_id"], json!(ids.first()), "{body}");
    for (path, name) in [
        (
            "/v1/models/claude%2Fclaude-sonnet-4-5",
            "claude/claude-sonnet-4-5",
        ),
        ("/v1/models/smart", "smart"),
    ] {
        let refused = gw.request("GET", path, None, &headers, b"");
        assert_anthropic_error(&refused, 404, "not_found_error", name);
    }
}
