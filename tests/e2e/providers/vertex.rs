//! The vertex plugin through the gateway, against a fake Vertex AI and a fake Google token
//! endpoint (`upstream::vertex`: it verifies each JWT's RS256 signature with the test key's
//! public key, and its claims), each on its own port, the token endpoint's reached through the
//! route's `allowed_hosts`. Gemini and Claude answers are the recorded Gemini API and Anthropic
//! answers (Vertex serves the same bodies); the service account is the test-only key of
//! `tests/keys/`.

use std::time::Duration;

use gateway_test_support::anthropic_client::{post_messages, stream_messages};
use gateway_test_support::sse::{event_data, split_events};
use gateway_test_support::upstream::vertex::{TOKEN_PREFIX, private_key_fragment, test_key};
use gateway_test_support::upstream::{VertexUpstream, counted_tokens};
use gateway_test_support::{
    Gateway, Interaction, Recording, Reply, Response, Route, fake_embedding, unique,
};
use serde_json::{Value, json};

const ROUTE: &str = "vx";
const PROJECT: &str = "test-proj";
const LOCATION: &str = "us-central1";
const GEMINI: &str = "gemini-2.5-flash";
const CLAUDE: &str = "claude-sonnet-4@20250514";

/// Where the route's key comes from.
enum Key {
    /// A file whose path `credentials_file_env`'s variable holds.
    File,
    /// The JSON in `credentials_env`'s variable.
    Env,
}

/// A gateway with a vertex route to `models`, its service account's key (`how`) naming
/// `tokens`' `/token{query}` as its token endpoint, which `allowed_hosts` lets it reach unless
/// `allow_token_host` is false.
struct Setup {
    gw: Gateway,
    tokens: VertexUpstream,
    _key_file: tempfile::NamedTempFile,
}

fn setup(models: &VertexUpstream, query: &str, how: Key, allow_token_host: bool) -> Setup {
    let tokens = VertexUpstream::start();
    let key = test_key(&tokens.base_url(&format!("/token{query}")));
    let key_file = tempfile::NamedTempFile::new().expect("a temporary key file");
    std::fs::write(key_file.path(), &key).expect("the key file is written");
    let var = unique("VERTEX_TEST_KEY_");
    let (setting, value) = match how {
        Key::File => (
            "credentials_file_env",
            key_file.path().display().to_string(),
        ),
        Key::Env => ("credentials_env", key),
    };
    let mut route = Route::new(ROUTE, "vertex")
        .base_url(&models.base_url(""))
        .default_model(GEMINI)
        .setting("project", &format!("\"{PROJECT}\""))
        .setting("location", &format!("\"{LOCATION}\""))
        .setting(setting, &format!("\"{var}\""));
    if allow_token_host {
        route = route.key("allowed_hosts", &format!("[\"{}\"]", tokens.addr()));
    }
    let gw = Gateway::builder()
        .route(route)
        .env(&var, &value)
        .env("RUST_LOG", "info,gateway=debug,plugin=debug")
        .start();
    Setup {
        gw,
        tokens,
        _key_file: key_file,
    }
}

fn recording(name: &str) -> Recording {
    Recording::load(name)
}

fn gemini_recording(case: &str) -> Interaction {
    recording(&format!("Google__gemini-2.5-flash__{case}"))
        .interactions
        .remove(0)
}

fn claude_recording(case: &str) -> Interaction {
    recording(&format!("Anthropic__claude-sonnet-4__{case}"))
        .interactions
        .remove(0)
}

/// The model URL's path of `publisher`'s `model` and `method`.
fn model_path(publisher: &str, model: &str, method: &str) -> String {
    format!(
        "/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/{publisher}/models/{model}:{method}"
    )
}

fn bearer(gw: &Gateway) -> String {
    format!("Bearer {}", gw.key)
}

/// POSTs an OpenAI-format body, as OpenAI's SDKs do.
fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    gw.request(
        "POST",
        path,
        None,
        &[
            ("Authorization", &bearer(gw)),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

fn chat(gw: &Gateway, model: &str) -> Response {
    post(
        gw,
        "/v1/chat/completions",
        &json!({"model": format!("{ROUTE}/{model}"), "max_tokens": 100,
            "messages": [{"role": "user", "content": "Say hello"}]}),
    )
}

/// A streamed OpenAI chat answer: its invocation id, raw text and chunks.
fn chat_stream(gw: &Gateway, model: &str) -> (String, String, Vec<Value>) {
    let auth = bearer(gw);
    let body = json!({"model": format!("{ROUTE}/{model}"), "max_tokens": 100, "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Say hello"}]});
    let mut conn = gw.open_stream_with_headers(
        "/v1/chat/completions",
        None,
        &[("Authorization", &auth)],
        &body,
    );
    assert_eq!(conn.status, 200);
    let id = conn
        .header("x-invocation-id")
        .expect("x-invocation-id")
        .to_owned();
    let raw = String::from_utf8_lossy(&conn.read_to_end()).into_owned();
    let chunks = split_events(&raw)
        .iter()
        .filter_map(|event| event_data(event))
        .filter(|data| data != "[DONE]")
        .map(|data| serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {raw}")))
        .collect();
    assert!(raw.trim_end().ends_with("data: [DONE]"), "{raw}");
    (id, raw, chunks)
}

fn streamed_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str())
        .collect()
}

/// The answer text of a recorded Gemini answer (whole, or each streamed event's).
fn gemini_text(interaction: &Interaction) -> String {
    let answers: Vec<Value> = if interaction.is_sse() {
        interaction
            .sse_events()
            .iter()
            .filter_map(|event| event_data(event))
            .filter_map(|data| serde_json::from_str(&data).ok())
            .collect()
    } else {
        vec![serde_json::from_str(&interaction.response.body).expect("recorded JSON")]
    };
    answers
        .iter()
        .flat_map(|answer| {
            answer["candidates"][0]["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|part| part["thought"] != json!(true))
        .filter_map(|part| part["text"].as_str().map(str::to_owned))
        .collect()
}

/// The answer text of a recorded Anthropic answer (whole, or its `text_delta`s).
fn claude_text(interaction: &Interaction) -> String {
    if interaction.is_sse() {
        return interaction
            .sse_events()
            .iter()
            .filter_map(|event| event_data(event))
            .filter_map(|data| serde_json::from_str::<Value>(&data).ok())
            .filter(|event| event["delta"]["type"] == "text_delta")
            .filter_map(|event| event["delta"]["text"].as_str().map(str::to_owned))
            .collect();
    }
    let body: Value = serde_json::from_str(&interaction.response.body).expect("recorded JSON");
    body["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect()
}

/// The tokens the fake endpoint minted, in order, read from the model calls' headers.
fn bearers(models: &VertexUpstream) -> Vec<String> {
    models
        .requests()
        .iter()
        .map(|request| {
            let header = request.header("authorization").expect("authorization");
            header.strip_prefix("Bearer ").expect("a bearer").to_owned()
        })
        .collect()
}

fn token_requests(setup: &Setup) -> usize {
    setup
        .tokens
        .requests()
        .iter()
        .filter(|request| request.path_only() == "/token")
        .count()
}

/// Asserts `text` shows neither an access token nor the private key.
fn assert_no_secret(text: &str, what: &str) {
    assert!(
        !text.contains(TOKEN_PREFIX),
        "{what} shows an access token: {text}"
    );
    assert!(
        !text.contains(&private_key_fragment()),
        "{what} shows the private key: {text}"
    );
    assert!(
        !text.contains("PRIVATE KEY"),
        "{what} shows the private key: {text}"
    );
}

// ---------------------------------------------------------------- tokens

#[test]
fn twenty_requests_mint_one_token_that_no_answer_record_or_log_shows() {
    let models = VertexUpstream::each_call(Reply::recorded(&gemini_recording("simple")));
    let setup = setup(&models, "", Key::File, true);
    let mut ids = Vec::new();
    for _ in 0..20 {
        let response = chat(&setup.gw, GEMINI);
        assert_eq!(response.status, 200, "{}", response.text());
        assert_no_secret(&response.text(), "an answer");
        ids.push(response.header("x-invocation-id").expect("id").to_owned());
    }
    assert_eq!(token_requests(&setup), 1, "twenty calls, one token");
    let tokens = bearers(&models);
    assert_eq!(tokens.len(), 20);
    assert!(tokens[0].starts_with(TOKEN_PREFIX), "{}", tokens[0]);
    assert!(tokens.iter().all(|token| *token == tokens[0]), "{tokens:?}");
    // The JWT the endpoint got was the test account's (the fake checked its signature).
    let grant = setup.tokens.single_request();
    assert!(
        String::from_utf8_lossy(&grant.body).contains("assertion="),
        "a JWT bearer grant"
    );

    // Records are written off the request path, in order: once the last is there, all are.
    let last = ids.last().expect("twenty ids");
    assert_no_secret(&setup.gw.record(last).to_string(), "a record");
    for id in &ids {
        let record = setup.gw.get_invocation(id);
        assert_eq!(record.status, 200, "{}", record.text());
        assert_no_secret(&record.text(), "a record");
    }
    let logs = setup.gw.logs();
    assert!(logs.contains("/token"), "debug lines were logged: {logs}");
    assert_no_secret(&logs, "the gateway's log");
    assert!(!logs.contains(&tokens[0]), "the log shows the token");
}

/// A Gemini answer on Vertex whose text is `text`.
fn gemini_answer_of(text: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 5, "totalTokenCount": 8},
        "modelVersion": GEMINI})
}

#[test]
fn a_minted_token_the_upstream_echoes_is_redacted_whole_streamed_and_in_errors() {
    // An upstream that says the token it was sent: in a whole answer, cut in two over a
    // stream's events, and in the message of a refusal.
    let models = VertexUpstream::computing(|request| {
        let token = request
            .header("authorization")
            .and_then(|header| header.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_owned();
        let body = String::from_utf8_lossy(&request.body).into_owned();
        if body.contains("refuse me") {
            return Reply::json(
                403,
                &json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
                    "message": format!("token {token} may not call this model")}}),
            );
        }
        if request.path_only().ends_with(":streamGenerateContent") {
            let (first, rest) = token.split_at(token.len() / 2);
            let event = |text: &str, last: bool| {
                let mut answer = gemini_answer_of(text);
                if !last {
                    answer["candidates"][0]
                        .as_object_mut()
                        .map(|c| c.remove("finishReason"));
                    answer.as_object_mut().map(|a| a.remove("usageMetadata"));
                }
                format!("data: {answer}\r\n\r\n")
            };
            return Reply::events(vec![
                event(&format!("you sent {first}"), false),
                event(&format!("{rest} as your token"), true),
            ]);
        }
        Reply::json(
            200,
            &gemini_answer_of(&format!("you sent {token} as your token")),
        )
    });
    let setup = setup(&models, "", Key::File, true);
    let gw = &setup.gw;

    let whole = chat(gw, GEMINI);
    assert_eq!(whole.status, 200, "{}", whole.text());
    let text = whole.json()["choices"][0]["message"]["content"].to_string();
    assert!(text.contains("you sent [redacted] as your token"), "{text}");
    assert_no_secret(&whole.text(), "an answer");

    let (stream_id, raw, chunks) = chat_stream(gw, GEMINI);
    let streamed = streamed_text(&chunks);
    assert!(
        streamed.contains("you sent [redacted] as your token"),
        "{streamed}"
    );
    assert_no_secret(&raw, "a stream");

    let refused = post(
        gw,
        "/v1/chat/completions",
        &json!({"model": format!("{ROUTE}/{GEMINI}"), "max_tokens": 100,
            "messages": [{"role": "user", "content": "refuse me"}]}),
    );
    assert!(refused.status >= 400, "{}", refused.text());
    assert!(
        refused.text().contains("may not call"),
        "{}",
        refused.text()
    );
    assert_no_secret(&refused.text(), "an error");

    // One token, minted once, was what every call carried.
    let tokens = bearers(&models);
    assert_eq!(tokens.len(), 3);
    assert!(tokens.iter().all(|token| token.starts_with(TOKEN_PREFIX)));
    let ids = [
        whole.header("x-invocation-id").expect("id").to_owned(),
        stream_id,
        refused.header("x-invocation-id").expect("id").to_owned(),
    ];
    let last = ids.last().expect("ids");
    assert_no_secret(&gw.record(last).to_string(), "a record");
    for id in &ids {
        assert_no_secret(&gw.get_invocation(id).text(), "a record");
    }
    let logs = gw.logs();
    assert_no_secret(&logs, "the gateway's log");
}

#[test]
fn an_expired_token_is_minted_again() {
    let models = VertexUpstream::each_call(Reply::recorded(&gemini_recording("simple")));
    // Five minutes and four seconds: kept for four seconds (room for a loaded machine's
    // second request to come within them).
    let setup = setup(&models, "?expires_in=304", Key::Env, true);
    for _ in 0..2 {
        assert_eq!(chat(&setup.gw, GEMINI).status, 200);
    }
    assert_eq!(token_requests(&setup), 1);
    std::thread::sleep(Duration::from_millis(4500));
    assert_eq!(chat(&setup.gw, GEMINI).status, 200);
    assert_eq!(token_requests(&setup), 2, "expired: minted again");
    let tokens = bearers(&models);
    assert_eq!(tokens[0], tokens[1]);
    assert_ne!(tokens[1], tokens[2]);
}

#[test]
fn a_token_endpoint_refusal_is_502_naming_its_error_and_no_secret() {
    let models = VertexUpstream::start();
    let setup = setup(&models, "?fail", Key::File, true);
    let response = chat(&setup.gw, GEMINI);
    assert_eq!(response.status, 502, "{}", response.text());
    let text = response.text();
    assert!(text.contains("invalid_grant"), "{text}");
    assert!(text.contains("token endpoint"), "{text}");
    assert_no_secret(&text, "the error");
    assert_eq!(models.request_count(), 0, "no model call without a token");
    let id = response.header("x-invocation-id").expect("id").to_owned();
    assert_no_secret(&setup.gw.record(&id).to_string(), "the record");
    assert_no_secret(&setup.gw.get_invocation(&id).text(), "the record");
    assert_no_secret(&setup.gw.logs(), "the gateway's log");
}

#[test]
fn a_token_host_outside_allowed_hosts_is_not_reached() {
    let models = VertexUpstream::start();
    let setup = setup(&models, "", Key::File, false);
    let response = chat(&setup.gw, GEMINI);
    assert_eq!(response.status, 502, "{}", response.text());
    assert!(
        response.text().contains("token endpoint"),
        "{}",
        response.text()
    );
    assert_eq!(setup.tokens.request_count(), 0);
}

#[test]
fn the_routes_key_is_an_access_token_when_no_credentials_are_set() {
    let models = VertexUpstream::each_call(Reply::recorded(&gemini_recording("simple")));
    let var = unique("VERTEX_ACCESS_TOKEN_");
    let gw = Gateway::builder()
        .route(
            Route::new(ROUTE, "vertex")
                .base_url(&models.base_url(""))
                .api_key_env(&var)
                .setting("project", &format!("\"{PROJECT}\""))
                .setting("location", &format!("\"{LOCATION}\"")),
        )
        .env(&var, "ya29.gcloud-printed-token")
        .start();
    assert_eq!(chat(&gw, GEMINI).status, 200);
    assert_eq!(bearers(&models), ["ya29.gcloud-printed-token"]);
}

// ---------------------------------------------------------------- Gemini on Vertex

#[test]
fn gemini_answers_whole_and_streamed_through_the_openai_surface() {
    let whole = gemini_recording("simple");
    let streamed = gemini_recording("simple_streaming");
    let models = VertexUpstream::script(vec![Reply::recorded(&whole), Reply::recorded(&streamed)]);
    let setup = setup(&models, "", Key::File, true);

    let response = chat(&setup.gw, GEMINI);
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        json!(gemini_text(&whole))
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert!(
        body["usage"]["prompt_tokens"].as_u64().unwrap_or(0) > 0,
        "{body}"
    );

    let (_, raw, chunks) = chat_stream(&setup.gw, GEMINI);
    assert_eq!(streamed_text(&chunks), gemini_text(&streamed), "{raw}");
    assert!(
        chunks
            .iter()
            .any(|c| c["usage"]["total_tokens"].as_u64().is_some()),
        "{raw}"
    );

    let sent = models.requests();
    assert_eq!(
        sent[0].path,
        model_path("google", GEMINI, "generateContent")
    );
    assert_eq!(
        sent[1].path,
        format!(
            "{}?alt=sse",
            model_path("google", GEMINI, "streamGenerateContent")
        )
    );
    for request in &sent {
        let body = request.json();
        assert_eq!(
            body["contents"][0]["parts"][0]["text"], "Say hello",
            "{body}"
        );
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 100, "{body}");
        assert_eq!(request.header("x-goog-api-key"), None);
    }
    assert_eq!(token_requests(&setup), 1);
}

#[test]
fn embeddings_are_predict_calls_with_token_counts() {
    let models = VertexUpstream::start();
    let setup = setup(&models, "", Key::File, true);
    let inputs = ["hello vertex world", "one more"];
    let response = post(
        &setup.gw,
        "/v1/embeddings",
        &json!({"model": format!("{ROUTE}/text-embedding-005"), "input": inputs, "dimensions": 3}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    for (i, input) in inputs.iter().enumerate() {
        assert_eq!(
            body["data"][i]["embedding"],
            json!(fake_embedding(i, input)),
            "{body}"
        );
    }
    assert_eq!(body["usage"]["prompt_tokens"], 5, "{body}");
    let sent = models.single_request();
    assert_eq!(
        sent.path,
        model_path("google", "text-embedding-005", "predict")
    );
    assert_eq!(
        sent.json(),
        json!({"instances": [{"content": inputs[0]}, {"content": inputs[1]}],
            "parameters": {"outputDimensionality": 3}})
    );

    // Gemini's embedding model takes one input a call.
    let response = post(
        &setup.gw,
        "/v1/embeddings",
        &json!({"model": format!("{ROUTE}/gemini-embedding-001"), "input": inputs}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(
        body["data"][1]["embedding"],
        json!(fake_embedding(0, inputs[1])),
        "{body}"
    );
    assert_eq!(models.request_count(), 3);
    assert_eq!(token_requests(&setup), 1);
}

// ---------------------------------------------------------------- Claude on Vertex

#[test]
fn claude_answers_whole_and_streamed_through_the_openai_surface() {
    let whole = claude_recording("simple");
    let streamed = claude_recording("simple_streaming");
    let models = VertexUpstream::script(vec![Reply::recorded(&whole), Reply::recorded(&streamed)]);
    let setup = setup(&models, "", Key::Env, true);

    let response = chat(&setup.gw, CLAUDE);
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        json!(claude_text(&whole))
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");

    let (_, raw, chunks) = chat_stream(&setup.gw, CLAUDE);
    assert_eq!(streamed_text(&chunks), claude_text(&streamed), "{raw}");

    let sent = models.requests();
    assert_eq!(sent[0].path, model_path("anthropic", CLAUDE, "rawPredict"));
    assert_eq!(
        sent[1].path,
        model_path("anthropic", CLAUDE, "streamRawPredict")
    );
    for (request, stream) in sent.iter().zip([false, true]) {
        let body = request.json();
        assert_eq!(body["anthropic_version"], "vertex-2023-10-16", "{body}");
        assert_eq!(body.get("model"), None, "{body}");
        assert_eq!(body["max_tokens"], 100, "{body}");
        assert_eq!(body.get("stream").is_some(), stream, "{body}");
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "Say hello"}]}])
        );
        assert_eq!(request.header("x-api-key"), None);
        assert!(
            request
                .header("authorization")
                .is_some_and(|value| value.starts_with(&format!("Bearer {TOKEN_PREFIX}")))
        );
    }
    assert_eq!(token_requests(&setup), 1);
}

#[test]
fn claude_answers_through_the_anthropic_surface() {
    let whole = claude_recording("simple");
    let streamed = claude_recording("simple_streaming");
    let models = VertexUpstream::script(vec![Reply::recorded(&whole), Reply::recorded(&streamed)]);
    let setup = setup(&models, "", Key::File, true);
    let body = json!({"model": format!("{ROUTE}/{CLAUDE}"), "max_tokens": 100,
        "messages": [{"role": "user", "content": "Say hello"}]});
    let response = post_messages(&setup.gw, &[], &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(answer["type"], "message", "{answer}");
    assert_eq!(
        answer["content"][0]["text"],
        json!(claude_text(&whole)),
        "{answer}"
    );
    assert_eq!(answer["stop_reason"], "end_turn", "{answer}");

    let mut streaming = body.clone();
    streaming["stream"] = json!(true);
    let streamed_answer = stream_messages(&setup.gw, &[], &streaming);
    assert_eq!(streamed_answer.status, 200, "{}", streamed_answer.raw);
    let text: String = streamed_answer
        .frames
        .iter()
        .filter(|event| event["delta"]["type"] == "text_delta")
        .filter_map(|event| event["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, claude_text(&streamed));
    assert_eq!(
        models.requests()[1].path,
        model_path("anthropic", CLAUDE, "streamRawPredict")
    );
}

#[test]
fn a_gemini_token_count_is_vertexs_count_tokens_and_a_claude_one_the_gateways() {
    let models = VertexUpstream::each_call(Reply::recorded(&gemini_recording("simple")));
    let setup = setup(&models, "", Key::File, true);
    let body = |model: &str| {
        json!({"model": format!("{ROUTE}/{model}"), "instructions": "Be brief.",
            "input": "Say hello", "temperature": 0.5})
    };
    let response = post(&setup.gw, "/v1/responses/input_tokens", &body(GEMINI));
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json(),
        json!({"object": "response.input_tokens", "input_tokens": counted_tokens(1, 0)})
    );
    let sent = models.single_request();
    assert_eq!(sent.path, model_path("google", GEMINI, "countTokens"));
    assert!(
        sent.header("authorization")
            .is_some_and(|a| a.starts_with("Bearer ya29."))
    );
    let sent = sent.json();
    assert_eq!(
        sent["systemInstruction"]["parts"][0]["text"],
        json!("Be brief."),
        "{sent}"
    );
    assert_eq!(
        sent["generationConfig"]["temperature"],
        json!(0.5),
        "{sent}"
    );

    let response = post(&setup.gw, "/v1/responses/input_tokens", &body(CLAUDE));
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["estimated"], json!(true));
    assert_eq!(models.request_count(), 1, "Claude's count is the gateway's");
}

// ---------------------------------------------------------------- images

#[test]
fn imagen_on_vertex_makes_images_through_predict() {
    use base64::Engine as _;
    use gateway_test_support::upstream::fake_png;
    let models = VertexUpstream::start();
    let setup = setup(&models, "", Key::File, true);
    let prompt = "a lighthouse at dawn";
    let response = post(
        &setup.gw,
        "/v1/images/generations",
        &json!({"model": format!("{ROUTE}/imagen-3.0-generate-002"), "prompt": prompt,
                "negative_prompt": "fog", "seed": 7, "add_watermark": false}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    let image = answer["data"][0]["b64_json"].as_str().expect("b64_json");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(image)
        .expect("base64");
    assert_eq!(bytes, fake_png(&format!("{prompt}#0")));
    let sent = models.single_request();
    assert_eq!(
        sent.path,
        model_path("google", "imagen-3.0-generate-002", "predict")
    );
    assert!(
        sent.header("authorization")
            .is_some_and(|a| a.starts_with("Bearer ")),
        "a minted token"
    );
    let sent = sent.json();
    assert_eq!(sent["instances"], json!([{"prompt": prompt}]), "{sent}");
    let parameters = &sent["parameters"];
    assert_eq!(parameters["sampleCount"], json!(1), "{sent}");
    assert_eq!(parameters["negativePrompt"], json!("fog"), "{sent}");
    assert_eq!(parameters["seed"], json!(7), "{sent}");
    let id = response
        .header("x-invocation-id")
        .expect("an id")
        .to_owned();
    let record = setup.gw.get_invocation(&id).json();
    assert_eq!(record["usage"]["images"], json!(1), "{record}");
    // Imagen 3 on Vertex at $0.04 an image, from the shipped table.
    assert_eq!(record["usageCost"], json!(0.04), "{record}");
    assert_eq!(token_requests(&setup), 1);
}
