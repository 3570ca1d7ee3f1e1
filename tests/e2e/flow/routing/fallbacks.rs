//! A route's `fallbacks`, in order, after its own retries: the caller's model and key to a route
//! of the same plugin, its own default model to another plugin's; refused connections and first-byte
//! timeouts; the OpenAI surface too.

use super::*;

#[test]
fn a_500_falls_back_with_the_callers_model_and_key_to_a_route_of_its_plugin_forwarding_it() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &[FALLBACK]),
        forwarded(FALLBACK, &backup).default_model("backup-default-model"),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert_eq!(primary.requests().len(), 1, "retries = 0: no retry");
    let sent = backup.single_request();
    assert_eq!(sent.json()["model"], json!(MODEL), "the caller's model");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str()),
        "the caller's key goes to a route of the same plugin that forwards it"
    );
    let record = record(&gw, &invocation_id(&response.json()));
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn a_fallback_is_tried_after_the_routes_own_retries() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(retries(openai(PRIMARY, &primary), 2), &[FALLBACK]).key("retry_backoff_ms", "10"),
        forwarded(FALLBACK, &backup),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(primary.requests().len(), 3, "the try and its 2 retries");
    assert_eq!(backup.requests().len(), 1);
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(PRIMARY, primary.addr(), Some(500)),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn fallbacks_are_tried_in_order() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let second = OpenAiUpstream::always(Reply::openai_error(
        503,
        "second is down too",
        "server_error",
        None,
    ));
    let third = OpenAiUpstream::script(vec![answer("from the third")]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &["second", "third"]),
        forwarded("second", &second),
        forwarded("third", &third),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the third");
    assert_eq!(response.header("x-gateway-route"), Some("third"));
    assert_eq!((primary.requests().len(), second.requests().len()), (1, 1));
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, primary.addr(), Some(500)),
            tried("second", second.addr(), Some(503)),
            tried("third", third.addr(), Some(200)),
        ],
    );
}

#[test]
fn a_fallback_of_another_plugin_gets_its_own_default_model_and_not_the_callers_key() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let claude = AnthropicUpstream::script(vec![Reply::json(
        200,
        &json!({
            "id": "msg_routing", "type": "message", "role": "assistant",
            "model": "claude-fallback-model",
            "content": [{"type": "text", "text": "from claude"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 2}
        }),
    )]);
    let var = unique("GATEWAY_TEST_ROUTING_ANTHROPIC_KEY_");
    let route_key = unique("sk-ant-route-");
    let gw = Gateway::builder()
        .route(fallbacks(openai(PRIMARY, &primary), &["claude"]))
        .route(
            Route::new("claude", "anthropic")
                .base_url(&claude.base_url("/v1"))
                .api_key_env(&var)
                .default_model("claude-fallback-model"),
        )
        .env(&var, &route_key)
        .start();
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from claude");
    assert_eq!(response.header("x-gateway-route"), Some("claude"));
    let sent = claude.single_request();
    assert_eq!(sent.json()["model"], json!("claude-fallback-model"));
    assert_eq!(sent.header("x-api-key"), Some(route_key.as_str()));
    assert!(
        sent.headers.iter().all(|(_, v)| !v.contains(PROVIDER_KEY)),
        "the caller's key went to another provider: {:?}",
        sent.headers
    );
}

#[test]
fn a_refused_connection_falls_back() {
    let (closed, closed_addr) = closed_url();
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(
            Route::openai(PRIMARY, &closed).timeout_secs(30),
            &[FALLBACK],
        ),
        forwarded(FALLBACK, &backup),
    ]);
    let (response, took) = timed_post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert!(took < Duration::from_secs(15), "took {took:?} of 30 s");
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, closed_addr, None),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn a_refused_connection_is_retried() {
    let (closed, _) = closed_url();
    let gw = start(vec![
        retries(Route::openai(PRIMARY, &closed), 2).key("retry_backoff_ms", "10"),
    ]);
    let response = post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(response.status, 502, "{}", response.text());
    let message = response.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(attempts_named(&message), Some(3), "{message}");
}

#[test]
fn a_first_byte_timeout_falls_back_well_before_the_deadline() {
    let stuck = OpenAiUpstream::hang();
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &stuck), &[FALLBACK])
            .timeout_secs(30)
            .key("first_byte_timeout_ms", "300"),
        forwarded(FALLBACK, &backup),
    ]);
    let (response, took) = timed_post(&gw, &hi(&gw, PRIMARY));
    assert_eq!(text_of(&response), "from the backup");
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert_eq!(stuck.requests().len(), 1);
    assert!(took < Duration::from_secs(15), "took {took:?} of 30 s");
    let record = record(&gw, &invocation_id(&response.json()));
    assert_attempts(
        &record,
        &[
            tried(PRIMARY, stuck.addr(), None),
            tried(FALLBACK, backup.addr(), Some(200)),
        ],
    );
}

#[test]
fn the_openai_surface_falls_back_too() {
    let primary = OpenAiUpstream::always(server_error("primary is down"));
    let backup = OpenAiUpstream::script(vec![answer("from the backup")]);
    let gw = start(vec![
        fallbacks(openai(PRIMARY, &primary), &[FALLBACK]),
        forwarded(FALLBACK, &backup),
    ]);
    let body = json!({
        "model": format!("{PRIMARY}/{MODEL}"),
        "messages": [{"role": "user", "content": "Say hi"}]
    });
    let bearer = format!("Bearer {}", gw.key);
    let response = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
            ("Provider-API-Key", PROVIDER_KEY),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json()["choices"][0]["message"]["content"],
        json!("from the backup")
    );
    assert_eq!(response.header("x-gateway-route"), Some(FALLBACK));
    assert_eq!(backup.single_request().json()["model"], json!(MODEL));
}
