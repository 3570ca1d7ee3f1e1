//! What records and logs keep: bodies only for authenticated callers and as `record_bodies` says,
//! and provider keys (the route's, the caller's, a target's) redacted everywhere, sent upstream
//! once.

use super::*;

// ------------------------------------------------------------------ 2: what records keep

#[test]
fn bodies_without_a_valid_key_are_not_stored() {
    let gw = Gateway::demo();
    flush_records(&gw);
    let before = gw.db_bytes().len();
    let big = text_request(&gw.project_id, "demo", "echo", &"A".repeat(1_000_000));
    let mut ids = Vec::new();
    for i in 0..20 {
        let key = if i % 2 == 0 {
            None
        } else {
            Some("gw_not_a_real_key")
        };
        let response = gw.post_as("/completions", key, &big);
        ids.push(assert_error(&response, 401, "key"));
    }
    flush_records(&gw);
    let grown = gw.db_bytes().len().saturating_sub(before);
    assert!(
        grown < 512 * 1024,
        "20 refused 1 MB bodies grew the database by {grown} bytes"
    );
    for id in &ids[..2] {
        let record = gw.record(id);
        assert_eq!(record["httpStatus"], json!(401), "{record}");
        assert_eq!(record["request"], Value::Null, "{record}");
    }
}

fn echo_gateway(record_bodies: &str) -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(record_bodies)
        .start()
}

#[test]
fn records_keep_bodies_as_record_bodies_says() {
    let prompt = "B".repeat(100_000);
    let request_of = |gw: &Gateway| {
        let body = assert_ok(&gw.post(
            "/completions",
            &text_request(&gw.project_id, "demo", "echo", &prompt),
        ));
        gw.record(body["invocationId"].as_str().expect("id"))
    };

    // Default: truncated at 64 KiB, with a note of the whole size.
    let gw = Gateway::demo();
    let record = request_of(&gw);
    for field in ["request", "response"] {
        let kept = record[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field}: {record}"));
        assert!(
            kept.len() <= 64 * 1024 + 64,
            "{field}: {} bytes kept",
            kept.len()
        );
        assert!(
            kept.contains("[truncated: "),
            "{field}: {}",
            &kept[kept.len() - 60..]
        );
    }

    let gw = echo_gateway("record_bodies = \"none\"");
    let record = request_of(&gw);
    assert_eq!(record["request"], Value::Null, "{record}");
    assert_eq!(record["response"], Value::Null, "{record}");
    assert!(
        record["usage"]["prompt_tokens"].as_u64().is_some(),
        "{record}"
    );

    let gw = echo_gateway("record_bodies = \"full\"");
    let record = request_of(&gw);
    assert_eq!(record["request"]["prompt"], json!(prompt));

    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("record_body_max_bytes = 1000")
        .start();
    let record = request_of(&gw);
    let kept = record["request"].as_str().expect("a cut request is text");
    assert!(
        kept.len() < 1100 && kept.ends_with("bytes in all]"),
        "{kept}"
    );
}

// ------------------------------------------------------------------ 8, 9: provider keys

#[test]
fn provider_keys_in_upstream_errors_are_redacted_everywhere() {
    let route_key = "sk-route-secret-4242424242";
    let caller_key = "sk-caller-secret-7777777777";
    let echoing = json!({"error": {
        "message": format!("Incorrect API key provided: Bearer {route_key} (or {caller_key})"),
        "type": "invalid_request_error", "code": "invalid_api_key"}});
    let upstream = OpenAiUpstream::always(Reply::json(401, &echoing));
    let gw = Gateway::builder()
        .route(Route::openai("keyed", &upstream.base_url("/v1")).api_key_env("TEST_ROUTE_KEY"))
        .env("TEST_ROUTE_KEY", route_key)
        .env("RUST_LOG", "debug")
        .start();
    let chat = chat_request(
        &gw.project_id,
        "keyed",
        "gpt-4o-mini",
        json!([{"role": "user", "content": "hi"}]),
    );
    let with_route_key = gw.post("/completions", &chat);
    let with_caller_key = gw.post_with_headers(
        "/completions",
        Some(&gw.key),
        &[("Provider-API-Key", caller_key)],
        &chat,
    );
    let streamed = gw.post_stream_with_headers(
        "/completions",
        Some(&gw.key),
        &[("Provider-API-Key", caller_key)],
        &with(chat.clone(), "stream", json!(true)),
    );
    // Sent with the route's key, the caller's is unknown to the request: the
    // route's is what must not come back.
    let response = with_route_key.text();
    assert!(response.contains("Bearer [redacted]"), "{response}");
    assert!(!response.contains(route_key), "{response}");
    // With the caller's key, both keys the request knows are taken out.
    for (response, what) in [
        (&with_caller_key.text(), "caller key"),
        (&streamed.raw, "stream"),
    ] {
        assert!(
            response.contains("Bearer [redacted] (or [redacted])"),
            "{what}: {response}"
        );
        assert!(
            !response.contains(route_key) && !response.contains(caller_key),
            "{what}: {response}"
        );
    }
    let id = assert_error(&with_caller_key, 502, "");
    let record = gw.record(&id).to_string();
    assert!(record.contains("[redacted]"), "{record}");
    assert!(
        !record.contains(route_key) && !record.contains(caller_key),
        "{record}"
    );
    let logs = gw.logs();
    assert!(
        !logs.contains(route_key) && !logs.contains(caller_key),
        "a key in the log:\n{logs}"
    );
    // (The first request's record keeps the caller's key the upstream made up: that request
    // did not carry it.)
    assert!(!String::from_utf8_lossy(&gw.db_bytes()).contains(route_key));
}

/// An upstream that answers 200 with the keys it was sent in its text: whole, and streamed
/// with each key cut over two or three events (and in a tool call's arguments).
#[test]
fn provider_keys_in_successful_answers_are_redacted_everywhere() {
    let route_key = "sk-route-answer-0123456789abcdef";
    let caller_key = "sk-caller-answer-fedcba9876543210";
    let text = format!("route {route_key}, caller {caller_key}, route again {route_key}.");
    let whole = Reply::openai_answer(
        "gpt-4o-mini",
        &text,
        json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
    );
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-leak", "object": "chat.completion.chunk", "created": 0,
                "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta,
                "logprobs": null, "finish_reason": finish}]})
        )
    };
    let (r1, r2) = route_key.split_at(9);
    let (c1, rest) = caller_key.split_at(4);
    let (c2, c3) = rest.split_at(10);
    let call = |arguments: &str, first: bool| {
        let mut call = json!({"index": 0, "function": {"arguments": arguments}});
        if first {
            call["id"] = json!("call_1");
            call["type"] = json!("function");
            call["function"]["name"] = json!("lookup");
        }
        json!({"tool_calls": [call]})
    };
    let (a1, a2) = route_key.split_at(20);
    let mut events = vec![
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": format!("route {r1}")}), Value::Null),
        chunk(
            json!({"content": format!("{r2}, caller {c1}")}),
            Value::Null,
        ),
        chunk(json!({"content": c2}), Value::Null),
        chunk(
            json!({"content": format!("{c3}, route again {route_key}.")}),
            Value::Null,
        ),
        // A text ending in what looks like the start of a key that is not one.
        chunk(json!({"content": " sk-rou"}), Value::Null),
        chunk(json!({"content": "nd"}), Value::Null),
        chunk(call(&format!("{{\"key\": \"{a1}"), true), Value::Null),
        chunk(call(&format!("{a2}\"}}"), false), Value::Null),
        chunk(json!({}), json!("tool_calls")),
    ];
    events.push("data: [DONE]\n\n".into());
    let upstream = OpenAiUpstream::script(vec![
        whole.clone(),
        whole.clone(),
        Reply::events(events.clone()),
        Reply::events(events.clone()),
        Reply::events(events),
    ]);
    let gw = Gateway::builder()
        .route(Route::openai("keyed", &upstream.base_url("/v1")).api_key_env("TEST_ROUTE_KEY"))
        .env("TEST_ROUTE_KEY", route_key)
        .config_line("record_bodies = \"full\"")
        .start();
    let chat = chat_request(
        &gw.project_id,
        "keyed",
        "gpt-4o-mini",
        json!([{"role": "user", "content": "what is my key?"}]),
    );
    let caller = [("Provider-API-Key", caller_key)];
    let plain = gw.post_with_headers("/completions", Some(&gw.key), &caller, &chat);
    let openai_chat = json!({"model": "keyed/gpt-4o-mini",
        "messages": [{"role": "user", "content": "what is my key?"}]});
    let openai = gw.post_with_headers("/v1/chat/completions", Some(&gw.key), &caller, &openai_chat);
    let streamed = gw.post_stream_with_headers(
        "/completions",
        Some(&gw.key),
        &caller,
        &with(chat.clone(), "stream", json!(true)),
    );
    let openai_streamed = gw.request(
        "POST",
        "/v1/chat/completions",
        Some(&gw.key),
        &caller,
        with(openai_chat.clone(), "stream", json!(true))
            .to_string()
            .as_bytes(),
    );
    let openai_raw = openai_streamed.text();
    let anthropic_streamed = gw.request(
        "POST",
        "/v1/messages",
        None,
        &[("x-api-key", gw.key.as_str()), caller[0]],
        json!({"model": "keyed/gpt-4o-mini", "max_tokens": 100, "stream": true,
            "messages": [{"role": "user", "content": "what is my key?"}]})
        .to_string()
        .as_bytes(),
    );
    let anthropic_raw = anthropic_streamed.text();
    let leaks = |text: &str| text.contains(route_key) || text.contains(caller_key);
    let body = assert_ok(&plain);
    assert_eq!(
        body["choices"][0]["text"],
        json!("route [redacted], caller [redacted], route again [redacted]."),
        "{body}"
    );
    let openai_body = openai.json();
    assert_eq!(
        openai_body["choices"][0]["message"]["content"],
        json!("route [redacted], caller [redacted], route again [redacted]."),
        "{openai_body}"
    );
    for (what, raw) in [
        ("commonbase stream", &streamed.raw),
        ("openai stream", &openai_raw),
        ("anthropic stream", &anthropic_raw),
    ] {
        assert!(!leaks(raw), "{what}: {raw}");
    }
    // What the OpenAI stream's caller reads, put together: every piece arrived, redacted.
    let mut said = String::new();
    let mut arguments = String::new();
    let chunks = openai_raw
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str::<Value>(data).expect("a JSON chunk"));
    for chunk in chunks {
        if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
            said.push_str(piece);
        }
        if let Some(piece) =
            chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
        {
            arguments.push_str(piece);
        }
    }
    assert_eq!(
        said, "route [redacted], caller [redacted], route again [redacted]. sk-round",
        "{openai_raw}"
    );
    assert_eq!(arguments, "{\"key\": \"[redacted]\"}", "{openai_raw}");
    let (mut said, mut arguments) = (String::new(), String::new());
    for data in anthropic_raw
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
    {
        let event: Value = serde_json::from_str(data).expect("a JSON event");
        let delta = &event["delta"];
        if let Some(piece) = delta["text"].as_str() {
            said.push_str(piece);
        }
        if let Some(piece) = delta["partial_json"].as_str() {
            arguments.push_str(piece);
        }
    }
    assert_eq!(
        said, "route [redacted], caller [redacted], route again [redacted]. sk-round",
        "{anthropic_raw}"
    );
    assert_eq!(arguments, "{\"key\": \"[redacted]\"}", "{anthropic_raw}");
    // Records (bodies kept whole), the export and the data directory hold no key either.
    let ids = [
        plain.header("x-invocation-id"),
        openai.header("x-invocation-id"),
        streamed.header("x-invocation-id"),
        openai_streamed.header("x-invocation-id"),
        anthropic_streamed.header("x-invocation-id"),
    ];
    for id in ids {
        let id = id.expect("an invocation id");
        let record = gw.record(id).to_string();
        assert!(record.contains("[redacted]"), "{record}");
        assert!(!leaks(&record), "{record}");
    }
    let export = gw.cli_ok(&[
        "invocations",
        "export",
        "--since",
        "2000-01-01",
        "--format",
        "jsonl",
    ]);
    assert_eq!(export.lines().count(), 5, "{export}");
    assert!(!leaks(&export), "{export}");
    assert!(!leaks(&gw.logs()), "a key in the log");
    assert!(!leaks(&String::from_utf8_lossy(&gw.db_bytes())));
}

#[test]
fn a_provider_key_with_its_bearer_scheme_is_sent_once() {
    let simple = Recording::load("OpenAI__openai-gpt-4o-mini__simple");
    let upstream = OpenAiUpstream::replay(&Recording::concat(&[
        simple.clone(),
        simple.clone(),
        simple,
    ]));
    let gw = Gateway::builder()
        .route(Route::openai("oai", &upstream.base_url("/v1")))
        .start();
    let chat = chat_request(
        &gw.project_id,
        "oai",
        "gpt-4o-mini",
        json!([{"role": "user", "content": "hi"}]),
    );
    for header in ["Bearer sk-abc-123", "bearer sk-abc-123", "sk-abc-123"] {
        let response = gw.post_with_headers(
            "/completions",
            Some(&gw.key),
            &[("Provider-API-Key", header)],
            &chat,
        );
        assert_ok(&response);
    }
    for request in upstream.requests() {
        assert_eq!(request.header("authorization"), Some("Bearer sk-abc-123"));
    }
    assert_eq!(upstream.requests().len(), 3);
}
