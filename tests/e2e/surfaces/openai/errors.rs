//! Errors in OpenAI's shape and statuses: the gateway's own, an upstream's (rate limits passed
//! through, client errors tried once), one after a stream started, sampling parameters out of
//! their ranges.

use super::*;

#[test]
fn errors_in_openai_shape() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let chat = |model: &str, messages: Value| json!({"model": model, "messages": messages});
    let hi = json!([{"role": "user", "content": "hi"}]);

    let missing = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[],
        chat("demo", hi.clone()).to_string().as_bytes(),
    );
    assert_openai_error(
        &missing,
        401,
        "authentication_error",
        None,
        Some("invalid_api_key"),
        "key",
    );
    let bad = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("Authorization", "Bearer gw_wrong")],
        chat("demo", hi.clone()).to_string().as_bytes(),
    );
    assert_openai_error(
        &bad,
        401,
        "authentication_error",
        None,
        Some("invalid_api_key"),
        "key",
    );

    let unknown = post(
        &gw,
        "/v1/chat/completions",
        &chat("nothing-like-it", hi.clone()),
    );
    assert_openai_error(
        &unknown,
        404,
        "invalid_request_error",
        Some("model"),
        Some("model_not_found"),
        "nothing-like-it",
    );
    let route = post(
        &gw,
        "/v1/chat/completions",
        &chat("nope/gpt-4o", hi.clone()),
    );
    assert_openai_error(
        &route,
        404,
        "invalid_request_error",
        Some("model"),
        Some("model_not_found"),
        "nope",
    );

    let no_messages = post(&gw, "/v1/chat/completions", &json!({"model": "demo"}));
    assert_openai_error(
        &no_messages,
        400,
        "invalid_request_error",
        Some("messages"),
        None,
        "messages",
    );
    let no_model = post(&gw, "/v1/chat/completions", &json!({"messages": hi}));
    assert_openai_error(
        &no_model,
        400,
        "invalid_request_error",
        Some("model"),
        None,
        "model",
    );
    let empty = post(&gw, "/v1/chat/completions", &chat("demo", json!([])));
    assert_openai_error(
        &empty,
        400,
        "invalid_request_error",
        Some("messages"),
        None,
        "at least one",
    );
    let role = post(
        &gw,
        "/v1/chat/completions",
        &chat("demo", json!([{"role": "robot", "content": "x"}])),
    );
    assert_openai_error(
        &role,
        400,
        "invalid_request_error",
        Some("messages[0].role"),
        None,
        "robot",
    );
    let image = post(
        &gw,
        "/v1/chat/completions",
        &chat(
            "demo",
            json!([{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "ftp://example.com/a.png"}}]}]),
        ),
    );
    assert_openai_error(
        &image,
        400,
        "invalid_request_error",
        Some("messages[0].content[1].image_url.url"),
        None,
        "must be https:",
    );
    let tool = post(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "demo", "messages": hi, "tools": [{"type": "web_search"}]}),
    );
    assert_openai_error(
        &tool,
        400,
        "invalid_request_error",
        Some("tools[0].type"),
        None,
        "web_search",
    );
    let options = post(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "demo", "messages": hi, "stream_options": {"include_usage": true}}),
    );
    assert_openai_error(
        &options,
        400,
        "invalid_request_error",
        Some("stream_options"),
        None,
        "stream",
    );
    let twice = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("Authorization", &bearer(&gw))],
        br#"{"model": "demo", "model": "demo", "messages": []}"#,
    );
    assert_openai_error(
        &twice,
        400,
        "invalid_request_error",
        Some("model"),
        None,
        "duplicate",
    );
    let trailing = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("Authorization", &bearer(&gw))],
        format!("{} x", chat("demo", hi.clone())).as_bytes(),
    );
    assert_openai_error(
        &trailing,
        400,
        "invalid_request_error",
        None,
        None,
        "trailing",
    );

    let get = gw.request(
        "GET",
        "/v1/chat/completions",
        None,
        &[("Authorization", &bearer(&gw))],
        b"",
    );
    assert_openai_error(&get, 405, "invalid_request_error", None, None, "POST");
    assert_eq!(get.header("allow"), Some("POST"));
}

/// An upstream 429 reaches the caller as a 429 with its Retry-After, in OpenAI's shape.
#[test]
fn upstream_rate_limit_passes_through() {
    let upstream = Upstream::OpenAi(OpenAiUpstream::each_call(Reply::openai_error(
        429,
        "Rate limit reached for gpt-4o-mini",
        "rate_limit_exceeded",
        Some("7"),
    )));
    let gw = gateway_for(OpenAi, &upstream);
    let body = json!({"model": OpenAi.target(), "messages": [{"role": "user", "content": "hi"}]});
    let response = post(&gw, "/v1/chat/completions", &body);
    assert_openai_error(
        &response,
        429,
        "rate_limit_error",
        None,
        Some("rate_limit_exceeded"),
        "Rate limit reached",
    );
    assert_eq!(response.header("retry-after"), Some("7"));

    let streamed = post_stream(&gw, "/v1/chat/completions", &with_stream(body));
    assert_eq!(streamed.status, 429, "{}", streamed.raw);
    assert_eq!(streamed.header("retry-after"), Some("7"));
    let error: Value = parse_json(&streamed.raw);
    assert_eq!(error["error"]["type"], json!("rate_limit_error"));
}

/// A request the provider refuses as the caller's own fault (400, 404, 413, 422: issue 46 item
/// 7) is the caller's 4xx in OpenAI's shape, with the provider's message (never the key it was
/// sent), and it is tried once: no retry, no fallback, so that a client sees at once what to
/// fix and does not send it again as it does after a 502. An upstream 5xx stays a 502.
#[test]
fn upstream_client_errors_are_the_callers_and_tried_once() {
    let var = unique("OPENAI_SURFACE_KEY_");
    let spare = OpenAiUpstream::each_call(Reply::openai_answer(
        OpenAi.model(),
        "served by the fallback",
        json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}),
    ));
    let message = format!("limit must be <= 4096 (key {PROVIDER_KEY})");
    let statuses = [400, 404, 413, 422, 500];
    let refusing: Vec<OpenAiUpstream> = (statuses.iter())
        .map(|&status| {
            let reply = Reply::openai_error(status, &message, "invalid_value", None);
            OpenAiUpstream::always(reply)
        })
        .collect();
    let mut builder = Gateway::builder()
        .route(
            Route::new("spare", "openai")
                .base_url(&spare.base_url("/v1"))
                .api_key_env(&var),
        )
        .env(&var, PROVIDER_KEY);
    for (status, upstream) in statuses.iter().zip(&refusing) {
        let route = Route::new(&format!("r{status}"), "openai")
            .base_url(&upstream.base_url("/v1"))
            .api_key_env(&var)
            .key("retries", "2")
            .key("retry_backoff_ms", "1");
        // The 5xx route has no fallback: what reaches the caller is the 502 itself.
        let route = if *status < 500 {
            route.key("fallbacks", "[\"spare\"]")
        } else {
            route
        };
        builder = builder.route(route);
    }
    let gw = builder.start();
    let chat = |status: u16| {
        json!({"model": format!("r{status}/{}", OpenAi.model()),
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000})
    };
    for (status, upstream) in statuses.iter().zip(&refusing) {
        let response = post(&gw, "/v1/chat/completions", &chat(*status));
        let (status_out, kind) = match status {
            500 => (502, "api_error"),
            client => (*client, "invalid_request_error"),
        };
        let error = assert_openai_error(
            &response,
            status_out,
            kind,
            None,
            None,
            "limit must be <= 4096",
        );
        assert!(!response.text().contains(PROVIDER_KEY), "{error}");
        let tries = if *status == 500 { 3 } else { 1 };
        assert_eq!(upstream.requests().len(), tries, "HTTP {status}: {error}");
        let id = response.header("x-invocation-id").expect("id");
        let record = gw.wait_for_record(id, |r| r["status"] == json!("error"));
        assert_eq!(record["httpStatus"], json!(status_out), "{record}");
        assert!(!record.to_string().contains(PROVIDER_KEY), "{record}");
    }
    assert!(spare.requests().is_empty(), "no fallback was tried");
    // Before a stream has started, its status is the error's own too.
    let streamed = post_stream(&gw, "/v1/chat/completions", &with_stream(chat(400)));
    assert_eq!(streamed.status, 400, "{}", streamed.raw);
    let error: Value = parse_json(&streamed.raw);
    assert_eq!(
        error["error"]["type"],
        json!("invalid_request_error"),
        "{error}"
    );
    assert_eq!(refusing[0].requests().len(), 2);
}

fn with_stream(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}

/// A stream that fails after it started ends with an `error` event (which OpenAI's SDKs raise)
/// and no `[DONE]`.
#[test]
fn error_after_the_stream_started_is_an_error_event() {
    let recording = OpenAi.recording("simple_streaming");
    let events = recording.interaction(0).sse_events();
    let upstream = Upstream::OpenAi(OpenAiUpstream::script(vec![
        Reply::events(events[..3].to_vec()).cut(),
    ]));
    let gw = gateway_for(OpenAi, &upstream);
    let body = json!({"model": OpenAi.target(), "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let stream = post_stream(&gw, "/v1/chat/completions", &body);
    assert_eq!(stream.status, 200, "{}", stream.raw);
    assert!(!stream.done, "{}", stream.raw);
    let last = stream.chunks.last().expect("chunks");
    let error = &last["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{last}"
    );
    assert_eq!(error["type"], json!("api_error"), "{last}");
    assert!(
        stream.chunks.len() > 1,
        "text went out first: {}",
        stream.raw
    );
}

/// A body of `path` on the echo route `demo`, with `param` set to `value`.
fn with_param_on(path: &str, param: &str, value: &Value) -> Value {
    let mut body = match path {
        "/v1/chat/completions" => {
            json!({"model": "demo", "messages": [{"role": "user", "content": "hi"}]})
        }
        "/v1/completions" => json!({"model": "demo", "prompt": "hi"}),
        _ => json!({"model": "demo", "input": "hi"}),
    };
    body[param] = value.clone();
    body
}

/// The ranges and types OpenAI's API reference gives its parameters are checked here: a value
/// outside them is a 400 naming it (never a call upstream), recorded as any other 400; the
/// values at the edges of the ranges, and nulls, are requests like any other.
#[test]
fn sampling_parameters_outside_their_ranges_are_refused_naming_them() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    const CHAT: &str = "/v1/chat/completions";
    const TEXT: &str = "/v1/completions";
    const EMBED: &str = "/v1/embeddings";
    let long_user = "u".repeat(257);
    let refused = [
        (CHAT, "n", json!(1_000_000)),
        (CHAT, "n", json!(0)),
        (CHAT, "n", json!(2.5)),
        (CHAT, "n", json!("2")),
        (TEXT, "n", json!(129)),
        (CHAT, "max_tokens", json!(-5)),
        (CHAT, "max_tokens", json!(0)),
        (CHAT, "max_tokens", json!(10.5)),
        (CHAT, "max_completion_tokens", json!(0)),
        (CHAT, "max_completion_tokens", json!("100")),
        (TEXT, "max_tokens", json!(-1)),
        (CHAT, "temperature", json!("NaN")),
        (CHAT, "temperature", json!(2.01)),
        (TEXT, "temperature", json!(-0.5)),
        (CHAT, "top_p", json!(1.5)),
        (TEXT, "top_p", json!(-0.1)),
        (CHAT, "presence_penalty", json!(2.5)),
        (CHAT, "frequency_penalty", json!(-3)),
        (TEXT, "presence_penalty", json!("high")),
        (CHAT, "logprobs", json!(1)),
        (TEXT, "logprobs", json!(6)),
        (TEXT, "logprobs", json!(true)),
        (CHAT, "top_logprobs", json!(21)),
        (CHAT, "top_logprobs", json!(-1)),
        (TEXT, "best_of", json!(21)),
        (CHAT, "seed", json!(1.5)),
        (CHAT, "seed", json!("42")),
        (CHAT, "seed", json!(u64::MAX)),
        (CHAT, "stop", json!(5)),
        (CHAT, "stop", json!(["a", "b", "c", "d", "e"])),
        (TEXT, "stop", json!(["a", 1])),
        (CHAT, "user", json!(long_user)),
        (TEXT, "user", json!(long_user)),
        (EMBED, "user", json!(long_user)),
        (EMBED, "dimensions", json!(0)),
        (EMBED, "dimensions", json!("256")),
    ];
    for (path, param, value) in &refused {
        let response = post(&gw, path, &with_param_on(path, param, value));
        let what = format!("{path} {param} = {value}");
        assert_eq!(response.status, 400, "{what}: {}", response.text());
        assert_openai_error(
            &response,
            400,
            "invalid_request_error",
            Some(param),
            None,
            param,
        );
        let message = response.json()["error"]["message"].to_string();
        assert!(
            message.len() < 400,
            "{what}: the message repeats the value: {message}"
        );
        let id = response.header("x-invocation-id").expect("x-invocation-id");
        let record = gw.get_invocation(id).json();
        assert_eq!(record["httpStatus"], json!(400), "{what}: {record}");
        assert_eq!(record["status"], json!("error"), "{what}: {record}");
    }

    let user = "é".repeat(128);
    let accepted = [
        (CHAT, "n", json!(128)),
        (CHAT, "n", json!(1)),
        (TEXT, "n", json!(null)),
        (CHAT, "max_tokens", json!(1)),
        (CHAT, "max_completion_tokens", json!(4096)),
        (TEXT, "max_tokens", json!(0)),
        (CHAT, "temperature", json!(0)),
        (CHAT, "temperature", json!(2)),
        (TEXT, "temperature", json!(0.7)),
        (CHAT, "temperature", json!(null)),
        (CHAT, "top_p", json!(1)),
        (CHAT, "presence_penalty", json!(-2)),
        (TEXT, "frequency_penalty", json!(2.0)),
        (CHAT, "logprobs", json!(true)),
        (TEXT, "logprobs", json!(5)),
        (CHAT, "top_logprobs", json!(20)),
        (TEXT, "best_of", json!(20)),
        (CHAT, "seed", json!(i64::MIN)),
        (CHAT, "stop", json!("END")),
        (CHAT, "stop", json!(["a", "b", "c", "d"])),
        (TEXT, "stop", json!(null)),
        (CHAT, "user", json!(user)),
        (EMBED, "user", json!(user)),
        (EMBED, "dimensions", json!(256)),
    ];
    for (path, param, value) in &accepted {
        let response = post(&gw, path, &with_param_on(path, param, value));
        assert_eq!(
            response.status,
            200,
            "{path} {param} = {value}: {}",
            response.text()
        );
    }
}
