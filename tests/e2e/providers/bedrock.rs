//! The bedrock plugin through the gateway, against a fake Bedrock Runtime that checks the SigV4
//! signature of every request it receives (recomputed from what it received and the test's
//! secret; a wrong one is AWS's 403 and fails the test): Converse and ConverseStream for
//! Commonbase, OpenAI and Anthropic callers, whole and streamed; tool use; a damaged frame;
//! Bedrock's errors (throttling retried, validation, access denied) without a secret leaking;
//! the API-key mode; a cross-region inference profile; embeddings; cost.

use gateway_test_support::anthropic_client::{named_events, post_messages, stream_messages};
use gateway_test_support::sse::{event_data, split_events};
use gateway_test_support::upstream::bedrock::{
    BedrockAuth, BedrockReply, BedrockUpstream, corrupt, event_frame, exception_frame,
};
use gateway_test_support::upstream::counted_tokens;
use gateway_test_support::{
    Gateway, Response, Route, assert_error, assert_ok, assert_usage, chat_request,
    embeddings_request, fake_embedding, list_cost, split_stream, streamed_record, streamed_text,
    unique, with,
};
use serde_json::{Value, json};

const ROUTE: &str = "bedrock";
const MODEL: &str = "anthropic.claude-3-5-sonnet-20240620-v1:0";
/// How the model id travels in the path (and, encoded once more, is signed).
const MODEL_PATH: &str = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0";
const REGION: &str = "us-east-1";
/// The route's price of [`MODEL`] (USD per million input and output tokens).
const PRICE: (f64, f64) = (3.0, 15.0);

/// The AWS credentials of one test: unique values, so that a leak is found wherever it is.
struct Keys {
    access_key_id: String,
    secret_access_key: String,
    session_token: String,
}

impl Keys {
    fn new() -> Keys {
        Keys {
            access_key_id: unique("AKIATEST"),
            secret_access_key: unique("secret-"),
            session_token: unique("session-"),
        }
    }

    fn auth(&self) -> BedrockAuth {
        BedrockAuth::SigV4 {
            access_key_id: self.access_key_id.clone(),
            secret_access_key: self.secret_access_key.clone(),
            session_token: Some(self.session_token.clone()),
            region: REGION.to_owned(),
        }
    }

    /// The values that must never reach an answer, a record or the log.
    fn secrets(&self) -> [&str; 2] {
        [&self.secret_access_key, &self.session_token]
    }
}

/// A gateway with route `bedrock` at `upstream`, signing with `keys` (read from the
/// environment variables the route's settings name), priced by the route.
fn gateway_for(
    upstream: &BedrockUpstream,
    keys: &Keys,
    configure: impl FnOnce(Route) -> Route,
) -> Gateway {
    let vars = [
        unique("BEDROCK_KEY_ID_"),
        unique("BEDROCK_SECRET_"),
        unique("BEDROCK_TOKEN_"),
    ];
    let route = Route::new(ROUTE, "bedrock")
        .base_url(&upstream.base_url())
        .setting("region", &format!("\"{REGION}\""))
        .setting("aws_access_key_id_env", &format!("\"{}\"", vars[0]))
        .setting("aws_secret_access_key_env", &format!("\"{}\"", vars[1]))
        .setting("aws_session_token_env", &format!("\"{}\"", vars[2]))
        // The route signs with its AWS keys: callers need send no provider key (the secrets
        // count as the route's credentials, without `api_key_required = false`).
        .price(MODEL, PRICE.0, PRICE.1);
    Gateway::builder()
        .route(configure(route))
        .env(&vars[0], &keys.access_key_id)
        .env(&vars[1], &keys.secret_access_key)
        .env(&vars[2], &keys.session_token)
        .start()
}

fn hi_request(gw: &Gateway, model: &str) -> Value {
    with(
        chat_request(
            &gw.project_id,
            ROUTE,
            model,
            json!([{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Say hi in Portuguese"}]),
        ),
        "showUsage",
        json!(true),
    )
}

fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    gw.post(path, body)
}

/// Asserts the upstream request `n` went to `operation` of [`MODEL`] with the conversation of
/// [`hi_request`].
fn assert_converse_request(upstream: &BedrockUpstream, n: usize, operation: &str) {
    let sent = &upstream.requests()[n];
    assert_eq!(sent.path, format!("{MODEL_PATH}/{operation}"));
    assert_eq!(sent.method, "POST");
    let body = sent.json();
    assert_eq!(body["system"], json!([{"text": "Be brief."}]), "{body}");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"text": "Say hi in Portuguese"}]}]),
        "{body}"
    );
    assert!(
        sent.header("authorization")
            .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 Credential=AKIATEST")),
        "{:?}",
        sent.header("authorization")
    );
}

/// Asserts none of `secrets` is in `text`.
fn assert_no_secret(text: &str, secrets: &[&str], what: &str) {
    for secret in secrets {
        assert!(!text.contains(secret), "a secret in the {what}: {text}");
    }
}

// ---------------------------------------------------------------- Commonbase callers

#[test]
fn commonbase_whole_and_streamed() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(
        keys.auth(),
        vec![
            BedrockReply::text("Olá!", 12, 3),
            BedrockReply::text_stream(&["Ol", "á", "!"], "max_tokens", 12, 3),
        ],
    );
    let gw = gateway_for(&upstream, &keys, |r| r);

    let body = assert_ok(&post(&gw, "/completions", &hi_request(&gw, MODEL)));
    assert_eq!(body["choices"][0]["text"], json!("Olá!"), "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], json!("stop"), "{body}");
    assert_usage(&body, (12, 3, 15), list_cost(12, 3, PRICE));
    let id = body["invocationId"].as_str().expect("id");
    let record = gw.get_invocation(id).json();
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["plugin"], json!("bedrock"), "{record}");
    assert_eq!(record["usageCost"], body["usage_cost"], "{record}");
    assert_converse_request(&upstream, 0, "converse");

    let streamed = gw.post_stream(
        "/completions",
        &with(hi_request(&gw, MODEL), "stream", json!(true)),
    );
    let (partial, last) = split_stream(&streamed);
    let pieces: Vec<&str> = (partial.iter())
        .map(|frame| frame["choices"][0]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(pieces, ["Ol", "á", "!"], "{}", streamed.raw);
    assert_eq!(
        last["choices"][0]["finish_reason"],
        json!("length"),
        "{last}"
    );
    assert_usage(&last, (12, 3, 15), list_cost(12, 3, PRICE));
    let record = streamed_record(&gw, &last);
    assert_eq!(
        record["response"]["choices"][0]["text"],
        json!("Olá!"),
        "{record}"
    );
    assert_converse_request(&upstream, 1, "converse-stream");
    assert_eq!(
        upstream.requests()[1].header("accept"),
        Some("application/vnd.amazon.eventstream")
    );
    assert_eq!(upstream.finished_streams(), 1);
    upstream.assert_all_signed();
}

/// The gateway adds the caller's trace context to the upstream request after the plugin signed
/// it: unsigned, it breaks nothing.
#[test]
fn a_trace_context_the_gateway_adds_is_not_signed() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(keys.auth(), vec![BedrockReply::text("Olá!", 12, 3)]);
    let gw = gateway_for(&upstream, &keys, |r| r);
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let response = gw.post_with_headers(
        "/completions",
        Some(&gw.key),
        &[("traceparent", traceparent)],
        &hi_request(&gw, MODEL),
    );
    assert_ok(&response);
    let sent = upstream.single_request();
    assert!(
        sent.header("traceparent")
            .is_some_and(|t| t.contains("4bf92f3577b34da6a3ce929d0e0e4736")),
        "{:?}",
        sent.headers
    );
    let authorization = sent.header("authorization").unwrap_or_default();
    assert!(!authorization.contains("traceparent"), "{authorization}");
    upstream.assert_all_signed();
}

/// A streamed answer that calls a tool, with its input in pieces, then a whole one.
#[test]
fn tool_use_streamed_and_whole() {
    let keys = Keys::new();
    let call_stream = BedrockReply::stream(&[
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Checking."}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 0})),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 1,
            "start": {"toolUse": {"toolUseId": "tooluse_abc", "name": "weather"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"city\": "}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "\"Lisbon\"}"}}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 1})),
        ("messageStop", json!({"stopReason": "tool_use"})),
        (
            "metadata",
            json!({"usage": {"inputTokens": 40, "outputTokens": 9, "totalTokens": 49}}),
        ),
    ]);
    let call_whole = BedrockReply::converse(
        json!([{"toolUse": {"toolUseId": "tooluse_def", "name": "weather", "input": {"city": "Porto"}}}]),
        "tool_use",
        json!({"inputTokens": 40, "outputTokens": 9, "totalTokens": 49}),
    );
    let upstream = BedrockUpstream::start(keys.auth(), vec![call_stream, call_whole]);
    let gw = gateway_for(&upstream, &keys, |r| r);
    let mut request = hi_request(&gw, MODEL);
    request["tools"] = json!([{"type": "function", "function": {"name": "weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    request["toolChoice"] = json!("auto");

    let streamed = gw.post_stream(
        "/completions",
        &with(request.clone(), "stream", json!(true)),
    );
    let (partial, last) = split_stream(&streamed);
    assert_eq!(streamed_text(&partial, 0), "Checking.");
    let choice = &last["choices"][0];
    assert_eq!(choice["finish_reason"], json!("tool_calls"), "{last}");
    assert_eq!(
        choice["tool_calls"],
        json!([{"id": "tooluse_abc", "type": "function",
            "function": {"name": "weather", "arguments": "{\"city\": \"Lisbon\"}"}}]),
        "{last}"
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(
        body["choices"][0]["tool_calls"][0]["function"],
        json!({"name": "weather", "arguments": "{\"city\":\"Porto\"}"}),
        "{body}"
    );
    let sent = upstream.requests()[0].json();
    assert_eq!(
        sent["toolConfig"],
        json!({"tools": [{"toolSpec": {"name": "weather", "description": "Weather of a city",
            "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}}}}}],
            "toolChoice": {"auto": {}}}),
        "{sent}"
    );
    upstream.assert_all_signed();
}

// ---------------------------------------------------------------- OpenAI and Anthropic callers

fn openai_post(gw: &Gateway, body: &Value) -> Response {
    gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[
            ("Authorization", &format!("Bearer {}", gw.key)),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

#[test]
fn openai_callers_whole_and_streamed() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(
        keys.auth(),
        vec![
            BedrockReply::text("Olá!", 12, 3),
            BedrockReply::text_stream(&["Ol", "á!"], "end_turn", 12, 3),
        ],
    );
    let gw = gateway_for(&upstream, &keys, |r| r);
    let request = json!({
        "model": format!("{ROUTE}/{MODEL}"),
        "messages": [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hi in Portuguese"}],
        "max_tokens": 50,
        "temperature": 0.5
    });
    let response = openai_post(&gw, &request);
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["object"], json!("chat.completion"), "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        json!("Olá!"),
        "{body}"
    );
    assert_eq!(body["choices"][0]["finish_reason"], json!("stop"), "{body}");
    assert_eq!(body["usage"]["prompt_tokens"], json!(12), "{body}");
    assert_eq!(body["usage"]["completion_tokens"], json!(3), "{body}");
    assert_converse_request(&upstream, 0, "converse");
    assert_eq!(
        upstream.requests()[0].json()["inferenceConfig"],
        json!({"maxTokens": 50, "temperature": 0.5})
    );

    let auth = format!("Bearer {}", gw.key);
    let mut stream_request = request.clone();
    stream_request["stream"] = json!(true);
    let mut conn = gw.open_stream_with_headers(
        "/v1/chat/completions",
        None,
        &[("Authorization", &auth)],
        &stream_request,
    );
    assert_eq!(conn.status, 200);
    let raw = String::from_utf8_lossy(&conn.read_to_end()).into_owned();
    let datas: Vec<String> = split_events(&raw)
        .iter()
        .filter_map(|e| event_data(e))
        .collect();
    assert_eq!(datas.last().map(String::as_str), Some("[DONE]"), "{raw}");
    let chunks: Vec<Value> = (datas.iter())
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("a JSON chunk"))
        .collect();
    let text: String = (chunks.iter())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Olá!", "{raw}");
    let finish: Vec<&Value> = (chunks.iter())
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("stop")], "{raw}");
    assert_converse_request(&upstream, 1, "converse-stream");
    upstream.assert_all_signed();
}

#[test]
fn anthropic_callers_whole_and_streamed() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(
        keys.auth(),
        vec![
            BedrockReply::text("Olá!", 12, 3),
            BedrockReply::text_stream(&["Ol", "á!"], "end_turn", 12, 3),
        ],
    );
    let gw = gateway_for(&upstream, &keys, |r| r);
    let request = json!({
        "model": format!("{ROUTE}/{MODEL}"),
        "max_tokens": 64,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Say hi in Portuguese"}]
    });
    let response = post_messages(&gw, &[], &request);
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["type"], json!("message"), "{body}");
    assert_eq!(
        body["content"],
        json!([{"type": "text", "text": "Olá!"}]),
        "{body}"
    );
    assert_eq!(body["stop_reason"], json!("end_turn"), "{body}");
    assert_eq!(body["usage"]["input_tokens"], json!(12), "{body}");
    assert_eq!(body["usage"]["output_tokens"], json!(3), "{body}");
    assert_converse_request(&upstream, 0, "converse");
    assert_eq!(
        upstream.requests()[0].json()["inferenceConfig"],
        json!({"maxTokens": 64})
    );

    let mut stream_request = request.clone();
    stream_request["stream"] = json!(true);
    let streamed = stream_messages(&gw, &[], &stream_request);
    assert_eq!(streamed.status, 200, "{}", streamed.raw);
    let events = named_events(&streamed.raw);
    let text: String = (events.iter())
        .filter(|(name, _)| name == "content_block_delta")
        .filter_map(|(_, data)| data["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Olá!", "{}", streamed.raw);
    let stop = events
        .iter()
        .find(|(name, _)| name == "message_delta")
        .map(|(_, data)| data["delta"]["stop_reason"].clone());
    assert_eq!(stop, Some(json!("end_turn")), "{}", streamed.raw);
    assert_eq!(
        events.last().map(|(name, _)| name.as_str()),
        Some("message_stop")
    );
    assert_converse_request(&upstream, 1, "converse-stream");
    upstream.assert_all_signed();
}

#[test]
fn a_claude_token_count_is_bedrocks_count_tokens_signed() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(keys.auth(), Vec::new());
    let gw = gateway_for(&upstream, &keys, |r| r);
    let request = json!({
        "model": format!("{ROUTE}/{MODEL}"),
        "max_tokens": 64,
        "temperature": 0.5,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Say hi in Portuguese"}],
    });
    let response = gw.request(
        "POST",
        "/v1/messages/count_tokens",
        None,
        &[("x-api-key", &gw.key)],
        request.to_string().as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json(),
        json!({"input_tokens": counted_tokens(1, 0)})
    );
    // The Converse body as CountTokens' `converse` input, without `inferenceConfig`.
    let sent = upstream.single_request();
    assert_eq!(sent.path, format!("{MODEL_PATH}/count-tokens"));
    let converse = &sent.json()["input"]["converse"];
    assert_eq!(
        converse["system"],
        json!([{"text": "Be brief."}]),
        "{converse}"
    );
    assert!(converse.get("inferenceConfig").is_none(), "{converse}");
    upstream.assert_all_signed();
    assert_no_secret(&response.text(), &keys.secrets(), "answer");
}

// ---------------------------------------------------------------- broken streams and errors

#[test]
fn a_frame_with_a_bad_crc_ends_the_stream_with_an_error_frame() {
    let keys = Keys::new();
    let frames = vec![
        event_frame("messageStart", &json!({"role": "assistant"})),
        event_frame(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0, "delta": {"text": "Ol"}}),
        ),
        corrupt(event_frame(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0, "delta": {"text": "á"}}),
        )),
        event_frame("messageStop", &json!({"stopReason": "end_turn"})),
    ];
    let upstream = BedrockUpstream::start(keys.auth(), vec![BedrockReply::Frames(frames)]);
    let gw = gateway_for(&upstream, &keys, |r| r);
    let streamed = gw.post_stream(
        "/completions",
        &with(hi_request(&gw, MODEL), "stream", json!(true)),
    );
    assert_eq!(streamed.status, 200, "{}", streamed.raw);
    let (last, partial) = streamed.frames.split_last().expect("frames");
    assert_eq!(streamed_text(partial, 0), "Ol");
    assert!(
        last["error"].is_string(),
        "no error frame: {}",
        streamed.raw
    );
    let id = last["invocationId"].as_str().expect("id");
    let record = gw.wait_for_record(id, |r| r["status"] == json!("error"));
    assert_eq!(record["httpStatus"], json!(502), "{record}");
    assert!(
        record["providerError"]
            .as_str()
            .is_some_and(|e| e.contains("invalid event stream")),
        "{record}"
    );
    upstream.assert_all_signed();
}

#[test]
fn an_exception_in_the_stream_before_any_text_is_its_status() {
    let keys = Keys::new();
    let frames = vec![
        event_frame("messageStart", &json!({"role": "assistant"})),
        exception_frame("throttlingException", "Too many tokens, please wait."),
    ];
    let upstream = BedrockUpstream::start(keys.auth(), vec![BedrockReply::Frames(frames)]);
    let gw = gateway_for(&upstream, &keys, |r| r);
    let streamed = gw.post_stream(
        "/completions",
        &with(hi_request(&gw, MODEL), "stream", json!(true)),
    );
    assert_eq!(streamed.status, 429, "{}", streamed.raw);
    assert_eq!(
        streamed.json()["providerError"],
        json!("Too many tokens, please wait.")
    );
    upstream.assert_all_signed();
}

#[test]
fn throttling_is_429_and_retried_by_the_route() {
    let keys = Keys::new();
    let throttled = || {
        BedrockReply::error(
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        )
    };
    // Without retries: the caller sees Bedrock's 429.
    let upstream = BedrockUpstream::start(keys.auth(), vec![throttled()]);
    let gw = gateway_for(&upstream, &keys, |r| r);
    let response = post(&gw, "/completions", &hi_request(&gw, MODEL));
    assert_error(&response, 429, "");
    assert_eq!(
        response.json()["providerError"],
        json!("Too many requests, please wait before trying again.")
    );
    upstream.assert_all_signed();
    drop(gw);

    // With a retry: the second try (signed anew) answers.
    let upstream = BedrockUpstream::start(
        keys.auth(),
        vec![throttled(), BedrockReply::text("Olá!", 12, 3)],
    );
    let gw = gateway_for(&upstream, &keys, |r| r.key("retries", "1"));
    let body = assert_ok(&post(&gw, "/completions", &hi_request(&gw, MODEL)));
    assert_eq!(body["choices"][0]["text"], json!("Olá!"));
    assert_eq!(upstream.request_count(), 2);
    let record = gw
        .get_invocation(body["invocationId"].as_str().expect("id"))
        .json();
    assert_eq!(
        record["attempts"].as_array().map(Vec::len),
        Some(2),
        "{record}"
    );
    upstream.assert_all_signed();
}

#[test]
fn validation_is_400_with_bedrocks_message() {
    let keys = Keys::new();
    let message = "The model returned the following errors: temperature: range: 0..1";
    let upstream = BedrockUpstream::start(
        keys.auth(),
        vec![BedrockReply::error(400, "ValidationException", message)],
    );
    let gw = gateway_for(&upstream, &keys, |r| r);
    let response = post(&gw, "/completions", &hi_request(&gw, MODEL));
    let id = assert_error(&response, 400, message);
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["httpStatus"], json!(400), "{record}");
    assert_eq!(upstream.request_count(), 1);
    upstream.assert_all_signed();
}

#[test]
fn access_denied_is_502_and_no_secret_leaks() {
    let keys = Keys::new();
    let message = "You don't have access to the model with the specified model ID.";
    let upstream = BedrockUpstream::start(
        keys.auth(),
        vec![BedrockReply::error(403, "AccessDeniedException", message)],
    );
    let gw = gateway_for(&upstream, &keys, |r| r);
    let response = post(&gw, "/completions", &hi_request(&gw, MODEL));
    let id = assert_error(&response, 502, "");
    assert_eq!(response.json()["providerError"], json!(message));
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["providerError"], json!(message), "{record}");
    assert_no_secret(&response.text(), &keys.secrets(), "answer");
    assert_no_secret(&record.to_string(), &keys.secrets(), "record");
    assert_no_secret(&gw.logs(), &keys.secrets(), "gateway's log");
    upstream.assert_all_signed();
}

/// The fake is no pushover: signed with another secret, the request is refused as AWS refuses
/// it, and the canonical request AWS quotes (with the session token) stays out of the answer.
#[test]
fn a_wrong_secret_is_refused_by_the_fake_and_its_quote_cut() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(keys.auth(), vec![BedrockReply::text("Olá!", 1, 1)]);
    let wrong = Keys {
        access_key_id: keys.access_key_id.clone(),
        secret_access_key: unique("wrong-secret-"),
        session_token: keys.session_token.clone(),
    };
    let gw = gateway_for(&upstream, &wrong, |r| r);
    let response = post(&gw, "/completions", &hi_request(&gw, MODEL));
    assert_error(&response, 502, "");
    assert_eq!(
        response.json()["providerError"],
        json!(
            "The request signature we calculated does not match the signature you provided. \
             Check your AWS Secret Access Key and signing method."
        )
    );
    assert_no_secret(&response.text(), &wrong.secrets(), "answer");
    let rejected = upstream.rejected();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(
        rejected[0].starts_with("the signature does not match"),
        "{rejected:?}"
    );
}

#[test]
fn a_named_but_unset_variable_is_named_in_the_error() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(keys.auth(), Vec::new());
    let unset = unique("BEDROCK_UNSET_");
    let gw = gateway_for(&upstream, &keys, |r| {
        r.setting("aws_session_token_env", &format!("\"{unset}\""))
    });
    let response = post(&gw, "/completions", &hi_request(&gw, MODEL));
    assert_error(&response, 502, "");
    let provider_error = response.json()["providerError"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        provider_error.contains("aws_session_token_env") && provider_error.contains(&unset),
        "{provider_error}"
    );
    assert_eq!(upstream.request_count(), 0);
}

// ---------------------------------------------------------------- keys, models, embeddings

#[test]
fn a_bedrock_api_key_is_a_bearer_token() {
    let api_key = unique("bedrock-api-key-");
    let var = unique("BEDROCK_API_KEY_");
    let upstream = BedrockUpstream::start(
        BedrockAuth::Bearer(api_key.clone()),
        vec![BedrockReply::text("Olá!", 12, 3)],
    );
    let gw = Gateway::builder()
        .route(
            Route::new(ROUTE, "bedrock")
                .base_url(&upstream.base_url())
                .api_key_env(&var)
                .price(MODEL, PRICE.0, PRICE.1),
        )
        .env(&var, &api_key)
        .start();
    let response = post(&gw, "/completions", &hi_request(&gw, MODEL));
    let body = assert_ok(&response);
    assert_eq!(body["choices"][0]["text"], json!("Olá!"));
    assert!(!response.text().contains(&api_key));
    let sent = upstream.single_request();
    assert_eq!(sent.header("x-amz-date"), None);
    upstream.assert_all_signed();
}

#[test]
fn a_cross_region_inference_profile_is_a_model() {
    let keys = Keys::new();
    let profile = "us.anthropic.claude-sonnet-4-20250514-v1:0";
    let upstream = BedrockUpstream::start(
        keys.auth(),
        vec![BedrockReply::text_stream(&["Olá!"], "end_turn", 12, 3)],
    );
    let gw = gateway_for(&upstream, &keys, |r| r.price(profile, 3.0, 15.0));
    let request = with(hi_request(&gw, profile), "stream", json!(true));
    let streamed = gw.post_stream("/completions", &request);
    let (partial, last) = split_stream(&streamed);
    assert_eq!(streamed_text(&partial, 0), "Olá!");
    assert_usage(&last, (12, 3, 15), list_cost(12, 3, (3.0, 15.0)));
    let sent = upstream.single_request();
    assert_eq!(
        sent.path,
        "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
    );
    upstream.assert_all_signed();
}

#[test]
fn embeddings_by_titan_and_cohere() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(keys.auth(), Vec::new());
    let titan = "amazon.titan-embed-text-v2:0";
    let cohere = "cohere.embed-english-v3";
    let gw = gateway_for(&upstream, &keys, |r| {
        r.price(titan, 0.02, 0.0).price(cohere, 0.1, 0.0)
    });
    let inputs = ["hello world", "one two three"];

    let request = with(
        embeddings_request(&gw.project_id, ROUTE, titan, json!(inputs)),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post(&gw, "/embeddings", &request));
    // Titan embeds one text per call: each is the first of its call.
    let expected: Vec<Value> = (inputs.iter().enumerate())
        .map(|(i, input)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(0, input)}))
        .collect();
    assert_eq!(body["data"], json!(expected), "{body}");
    let record = gw
        .get_invocation(body["invocationId"].as_str().expect("id"))
        .json();
    assert_eq!(record["usage"]["prompt_tokens"], json!(5), "{record}");
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].path, "/model/amazon.titan-embed-text-v2%3A0/invoke");
    assert_eq!(sent[1].json(), json!({"inputText": "one two three"}));

    let request = with(
        embeddings_request(&gw.project_id, ROUTE, cohere, json!(inputs)),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post(&gw, "/embeddings", &request));
    let expected: Vec<Value> = (inputs.iter().enumerate())
        .map(|(i, input)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(i, input)}))
        .collect();
    assert_eq!(body["data"], json!(expected), "{body}");
    let cohere_request = upstream.requests()[2].json();
    assert_eq!(
        cohere_request,
        json!({"texts": inputs, "input_type": "search_document"})
    );
    let record = gw
        .get_invocation(body["invocationId"].as_str().expect("id"))
        .json();
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["usage"]["prompt_tokens"], json!(5), "{record}");
    assert!(
        record["usageCost"].as_f64().is_some_and(|c| c > 0.0),
        "{record}"
    );
    upstream.assert_all_signed();
}

#[test]
fn rerank_by_cohere_and_amazon_models_through_signed_invoke_model_calls() {
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(keys.auth(), Vec::new());
    let gw = gateway_for(&upstream, &keys, |r| r);
    let query = "capital of France";
    let documents = [
        "Berlin is in Germany",
        "Paris is the capital of France",
        "France grows wine",
    ];
    // (model, its path, its price a search unit in host/prices.toml)
    for (model, path, price) in [
        (
            "cohere.rerank-v3-5:0",
            "/model/cohere.rerank-v3-5%3A0/invoke",
            0.002,
        ),
        (
            "amazon.rerank-v1:0",
            "/model/amazon.rerank-v1%3A0/invoke",
            0.001,
        ),
    ] {
        let body = json!({
            "model": format!("{ROUTE}/{model}"),
            "query": query,
            "documents": documents,
            "top_n": 2,
        });
        let response = post(&gw, "/v1/rerank", &body);
        assert_eq!(response.status, 200, "{model}: {}", response.text());
        let answer = response.json();
        let indexes: Vec<&Value> = (answer["results"].as_array().into_iter().flatten())
            .map(|result| &result["index"])
            .collect();
        assert_eq!(indexes, [&json!(1), &json!(2)], "{model}: {answer}");
        assert_eq!(
            answer["results"][0]["relevance_score"],
            json!(gateway_test_support::upstream::fake_relevance(
                query,
                documents[1]
            ))
        );
        // One query of up to 100 documents, as Bedrock bills them.
        assert_eq!(
            answer["meta"]["billed_units"],
            json!({"search_units": 1}),
            "{answer}"
        );
        let sent = upstream.requests().pop().expect("a call");
        assert_eq!(sent.path, path);
        let mut expected = json!({"query": query, "documents": documents, "top_n": 2});
        if model.starts_with("cohere") {
            expected["api_version"] = json!(2);
        }
        assert_eq!(sent.json(), expected, "{model}");
        let id = response
            .header("x-invocation-id")
            .expect("an id")
            .to_owned();
        let record = gw.get_invocation(&id).json();
        assert_eq!(record["type"], json!("rerank"), "{record}");
        assert_eq!(record["status"], json!("success"), "{record}");
        assert_eq!(record["usage"]["search_units"], json!(1), "{record}");
        assert_eq!(record["usageCost"], json!(price), "{record}");
    }
    // Not a rerank model: refused by the plugin before any call.
    let body = json!({"model": format!("{ROUTE}/{MODEL}"), "query": query, "documents": documents});
    let response = post(&gw, "/v1/rerank", &body);
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(upstream.requests().len(), 2);
    upstream.assert_all_signed();
}

#[test]
fn images_by_nova_canvas_and_titan_through_signed_invoke_model_calls() {
    use base64::Engine as _;
    use gateway_test_support::upstream::bedrock::{CONTENT_FILTERED, REFUSED_PROMPT};
    use gateway_test_support::upstream::fake_png;
    let keys = Keys::new();
    let upstream = BedrockUpstream::start(keys.auth(), Vec::new());
    let gw = gateway_for(&upstream, &keys, |r| r);
    let prompt = "a lighthouse at dawn";
    // (model, its path, what is asked, the quality sent, the price of the image in
    // host/prices.toml)
    for (model, path, asked, quality, price) in [
        (
            "amazon.nova-canvas-v1:0",
            "/model/amazon.nova-canvas-v1%3A0/invoke",
            json!({"quality": "hd", "size": "1024x1024", "n": 2, "seed": 7}),
            "premium",
            0.06,
        ),
        (
            "amazon.titan-image-generator-v2:0",
            "/model/amazon.titan-image-generator-v2%3A0/invoke",
            json!({"size": "512x512", "negative_prompt": "fog"}),
            "standard",
            0.008,
        ),
    ] {
        let mut body = json!({"model": format!("{ROUTE}/{model}"), "prompt": prompt});
        body.as_object_mut()
            .expect("an object")
            .extend(asked.as_object().expect("an object").clone());
        let response = post(&gw, "/v1/images/generations", &body);
        assert_eq!(response.status, 200, "{model}: {}", response.text());
        let answer = response.json();
        let n = asked["n"].as_u64().unwrap_or(1);
        let images = answer["data"].as_array().expect("data");
        assert_eq!(images.len() as u64, n, "{answer}");
        for (i, image) in images.iter().enumerate() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(image["b64_json"].as_str().expect("b64_json"))
                .expect("base64");
            assert_eq!(bytes, fake_png(&format!("{prompt}#{i}")), "{model}");
        }
        assert_eq!(answer["quality"], json!(quality), "{answer}");
        let sent = upstream.requests().pop().expect("a call");
        assert_eq!(sent.path, path);
        let sent = sent.json();
        assert_eq!(sent["taskType"], json!("TEXT_IMAGE"), "{sent}");
        assert_eq!(sent["textToImageParams"]["text"], json!(prompt), "{sent}");
        let config = &sent["imageGenerationConfig"];
        assert_eq!(config["numberOfImages"], json!(n), "{sent}");
        assert_eq!(config["quality"], json!(quality), "{sent}");
        let id = response
            .header("x-invocation-id")
            .expect("an id")
            .to_owned();
        let record = gw.get_invocation(&id).json();
        assert_eq!(record["type"], json!("images"), "{record}");
        assert_eq!(record["usage"]["images"], json!(n), "{record}");
        let cost = record["usageCost"].as_f64().expect("a cost");
        assert!((cost - price * n as f64).abs() < 1e-12, "{model}: {record}");
    }
    // Bedrock answers bytes: a caller who asks for URLs gets data: URLs of them.
    let body = json!({"model": format!("{ROUTE}/amazon.nova-canvas-v1:0"), "prompt": prompt,
                      "response_format": "url"});
    let response = post(&gw, "/v1/images/generations", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let url = response.json()["data"][0]["url"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let png = fake_png(&format!("{prompt}#0"));
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    assert_eq!(url, format!("data:image/png;base64,{data}"));
    let sent = upstream.requests().pop().expect("a call").json();
    assert!(sent.get("response_format").is_none(), "{sent}");
    // Nova Canvas's content filter: its 400 and message reach the caller.
    let body =
        json!({"model": format!("{ROUTE}/amazon.nova-canvas-v1:0"), "prompt": REFUSED_PROMPT});
    let response = post(&gw, "/v1/images/generations", &body);
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains(&CONTENT_FILTERED[..30]),
        "{}",
        response.text()
    );
    // More images than Bedrock makes, or a chat model: refused by the plugin before any call.
    let calls = upstream.requests().len();
    for model in ["amazon.nova-canvas-v1:0", MODEL] {
        let body = json!({"model": format!("{ROUTE}/{model}"), "prompt": prompt, "n": 6});
        let response = post(&gw, "/v1/images/generations", &body);
        assert_eq!(response.status, 400, "{model}: {}", response.text());
    }
    assert_eq!(upstream.requests().len(), calls);
    upstream.assert_all_signed();
}
