//! The gemini plugin through the gateway, against a fake Gemini API that replays real recorded
//! traffic (generateContent and streamGenerateContent: simple, tool and multi-step tool cases),
//! answers batchEmbedContents and image requests (Imagen's predict, Gemini image models'
//! generateContent), and fails on demand (Google's error answers, malformed bodies, streams cut
//! short).

use gateway_test_support::sse::{event_data, split_events};
use gateway_test_support::upstream::gemini::recording;
use gateway_test_support::{
    Gateway, GeminiUpstream, Interaction, ReceivedRequest, Reply, Response, Route, SseResponse,
    assert_chat_choice, assert_error, assert_ok, assert_provider_error, assert_stream_finished,
    assert_usage, chat_request, contains_bytes, embeddings_request, fake_embedding, list_cost,
    post_stream_with_provider_key, post_with_provider_key, recorded_tests, split_stream,
    streamed_record, streamed_text, success_record, text_request, tool_calls_of, unique, with,
};
use serde_json::{Value, json};

const ROUTE: &str = "gem";
/// The caller's provider key in most tests.
const PROVIDER_KEY: &str = "AIza-test-caller-0123456789";
const MODEL: &str = "gemini-2.5-flash";
/// The plugin's list price of gemini-2.5-flash (USD per million tokens).
const PRICE: (f64, f64) = (0.30, 2.50);

fn gateway(upstream: &GeminiUpstream) -> Gateway {
    Gateway::builder()
        .route(Route::new(ROUTE, "gemini").base_url(&upstream.base_url("/v1beta")))
        .start()
}

fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    post_with_provider_key(gw, path, PROVIDER_KEY, body)
}

fn post_stream(gw: &Gateway, body: &Value) -> SseResponse {
    post_stream_with_provider_key(gw, PROVIDER_KEY, body)
}

// ---------------------------------------------------------------- requests from recordings

/// How a request expresses functions and their results.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Style {
    /// `functions`/`functionCall`, assistant `function_call`, `function` role results.
    Commonbase,
    /// `tools`/`toolChoice`, assistant `tool_calls`, `tool` role results.
    OpenAi,
}

fn is_stream(interaction: &Interaction) -> bool {
    interaction.request.url.contains(":streamGenerateContent")
}

/// JSON Schema types as callers write them (the recording has Gemini's upper-case names).
fn lower_types(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| match (key.as_str(), value) {
                    ("type", Value::String(t)) => (key.clone(), json!(t.to_ascii_lowercase())),
                    _ => (key.clone(), lower_types(value)),
                })
                .collect(),
        ),
        Value::Array(items) => items.iter().map(lower_types).collect(),
        other => other.clone(),
    }
}

/// The gateway request that makes the plugin send what `interaction` recorded.
fn request_from(gw: &Gateway, interaction: &Interaction, style: Style) -> Value {
    let recorded = interaction.request_json();
    let mut messages = Vec::new();
    for part in recorded["systemInstruction"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        messages.push(json!({"role": "system", "content": part["text"]}));
    }
    for content in recorded["contents"].as_array().expect("contents") {
        let parts = content["parts"].as_array().expect("parts");
        if content["role"] == json!("model") {
            let calls: Vec<&Value> = parts.iter().map(|p| &p["functionCall"]).collect();
            assert!(calls.iter().all(|c| c.is_object()), "{content}");
            messages.push(match style {
                Style::Commonbase => {
                    assert_eq!(calls.len(), 1, "function_call carries one call");
                    json!({"role": "assistant", "content": null, "function_call": {
                        "name": calls[0]["name"], "arguments": calls[0]["args"].to_string()}})
                }
                Style::OpenAi => json!({"role": "assistant", "content": null, "tool_calls":
                    calls.iter().map(|c| json!({"id": c["id"], "type": "function", "function": {
                        "name": c["name"], "arguments": c["args"].to_string()}})).collect::<Vec<_>>()}),
            });
            continue;
        }
        for part in parts {
            if let Some(text) = part["text"].as_str() {
                messages.push(json!({"role": "user", "content": text}));
            } else {
                let result = &part["functionResponse"];
                messages.push(match style {
                    Style::Commonbase => json!({"role": "function", "name": result["name"],
                        "content": result["response"].to_string()}),
                    Style::OpenAi => json!({"role": "tool", "tool_call_id": result["id"],
                        "content": result["response"].to_string()}),
                });
            }
        }
    }
    let mut body = json!({
        "projectId": gw.project_id,
        "messages": messages,
        "providerConfig": {"provider": ROUTE, "params": {
            "type": "chat",
            "model": MODEL,
            "max_tokens": recorded["generationConfig"]["maxOutputTokens"],
        }}
    });
    if let Some(tools) = recorded["tools"].as_array() {
        let functions: Vec<Value> = tools
            .iter()
            .flat_map(|t| t["functionDeclarations"].as_array().expect("declarations"))
            .map(|f| {
                json!({"name": f["name"], "description": f["description"],
                            "parameters": lower_types(&f["parameters"])})
            })
            .collect();
        assert_eq!(
            recorded["toolConfig"]["functionCallingConfig"]["mode"],
            json!("AUTO")
        );
        match style {
            Style::Commonbase => {
                body["functions"] = json!(functions);
                body["functionCall"] = json!("auto");
            }
            Style::OpenAi => {
                body["tools"] = functions
                    .into_iter()
                    .map(|f| json!({"type": "function", "function": f}))
                    .collect();
                body["toolChoice"] = json!("auto");
            }
        }
    }
    if is_stream(interaction) {
        body["stream"] = json!(true);
    }
    body
}

/// The plugin sent what the recorded client sent: same path, the key in `x-goog-api-key`, and
/// the same body apart from what the gateway's API cannot carry (thought signatures; call ids
/// in the Commonbase style) and the role the Go SDK puts on the system instruction.
fn check_upstream_request(sent: &ReceivedRequest, interaction: &Interaction, style: Style) {
    sent.assert_json_post(&interaction.path());
    assert_eq!(sent.header("x-goog-api-key"), Some(PROVIDER_KEY));
    assert_eq!(sent.header("authorization"), None);
    assert!(!sent.path.contains("key="), "{}", sent.path);
    let mut expected = interaction.request_json();
    if let Some(instruction) = expected["systemInstruction"].as_object_mut() {
        instruction.remove("role");
    }
    for content in expected["contents"].as_array_mut().expect("contents") {
        for part in content["parts"].as_array_mut().expect("parts") {
            let part = part.as_object_mut().expect("part");
            part.remove("thoughtSignature");
            if style == Style::Commonbase {
                for key in ["functionCall", "functionResponse"] {
                    if let Some(call) = part.get_mut(key).and_then(Value::as_object_mut) {
                        call.remove("id");
                    }
                }
            }
        }
    }
    assert_eq!(sent.json(), expected);
}

// ---------------------------------------------------------------- what was recorded

/// What a recorded Gemini answer says (candidate 0).
#[derive(Debug, Default)]
struct Recorded {
    /// The answer text of each event that had some (one entry for a whole answer).
    texts: Vec<String>,
    /// `(name, args)` of the function calls.
    calls: Vec<(String, Value)>,
    finish_reason: Option<String>,
    /// `(prompt, candidates, thoughts, total)`.
    usage: Option<(u64, u64, u64, u64)>,
}

impl Recorded {
    fn of(interaction: &Interaction) -> Recorded {
        let payloads: Vec<Value> = if is_stream(interaction) {
            split_events(&interaction.response.body)
                .iter()
                .filter_map(|event| event_data(event))
                .map(|data| serde_json::from_str(&data).expect("recorded event is JSON"))
                .collect()
        } else {
            vec![serde_json::from_str(&interaction.response.body).expect("recorded JSON")]
        };
        let mut recorded = Recorded::default();
        for payload in payloads {
            let candidate = &payload["candidates"][0];
            let mut text = String::new();
            for part in candidate["content"]["parts"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(t) = part["text"].as_str()
                    && part["thought"] != json!(true)
                {
                    text.push_str(t);
                }
                if part["functionCall"].is_object() {
                    recorded.calls.push((
                        part["functionCall"]["name"]
                            .as_str()
                            .expect("name")
                            .to_owned(),
                        part["functionCall"]["args"].clone(),
                    ));
                }
            }
            if !text.is_empty() {
                recorded.texts.push(text);
            }
            if let Some(reason) = candidate["finishReason"].as_str() {
                recorded.finish_reason = Some(reason.to_owned());
            }
            let usage = &payload["usageMetadata"];
            if usage.is_object() {
                let count = |key: &str| usage[key].as_u64().unwrap_or(0);
                recorded.usage = Some((
                    count("promptTokenCount"),
                    count("candidatesTokenCount"),
                    count("thoughtsTokenCount"),
                    count("totalTokenCount"),
                ));
            }
        }
        recorded
    }

    fn text(&self) -> String {
        self.texts.concat()
    }

    /// The finish reason the gateway reports.
    fn gateway_finish_reason(&self) -> &'static str {
        match self.finish_reason.as_deref() {
            Some("STOP") if !self.calls.is_empty() => "tool_calls",
            Some("STOP") => "stop",
            other => panic!("unexpected recorded finish reason {other:?}"),
        }
    }
}

/// The answer's usage is the recording's, thoughts counted as completion tokens, and its cost
/// is each class times its price.
fn check_usage(body: &Value, recorded: &Recorded) {
    let (prompt, candidates, thoughts, total) = recorded.usage.expect("recorded usage");
    let completion = candidates + thoughts;
    assert_usage(
        body,
        (prompt, completion, total),
        list_cost(prompt, completion, PRICE),
    );
}

/// The invocation record keeps every token class.
fn check_record_usage(record: &Value, recorded: &Recorded) {
    let (prompt, candidates, thoughts, total) = recorded.usage.expect("recorded usage");
    let mut expected = json!({
        "prompt_tokens": prompt,
        "completion_tokens": candidates + thoughts,
        "total_tokens": total,
    });
    if thoughts > 0 {
        expected["reasoning_tokens"] = json!(thoughts);
    }
    assert_eq!(record["usage"], expected, "{record}");
    let cost = record["usageCost"].as_f64().expect("usageCost");
    let expected_cost =
        prompt as f64 * PRICE.0 / 1e6 + (candidates + thoughts) as f64 * PRICE.1 / 1e6;
    assert!((cost - expected_cost).abs() < 1e-12, "{record}");
}

// ---------------------------------------------------------------- recorded cases

fn check_simple(case: &str) {
    let upstream = GeminiUpstream::replay(&recording(case));
    let gw = gateway(&upstream);
    let recording = recording(case);
    let interaction = recording.interaction(0);
    let recorded = Recorded::of(interaction);

    let request = with(
        request_from(&gw, interaction, Style::Commonbase),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["model"], json!(MODEL));
    assert_chat_choice(&body, &recorded.text(), Some("stop"));
    check_usage(&body, &recorded);
    check_upstream_request(&upstream.single_request(), interaction, Style::Commonbase);

    let record = success_record(&gw, &body, ROUTE, "gemini");
    check_record_usage(&record, &recorded);
}

fn check_streaming(case: &str) {
    let upstream = GeminiUpstream::replay(&recording(case));
    let gw = gateway(&upstream);
    let recording = recording(case);
    let interaction = recording.interaction(0);
    assert!(
        is_stream(interaction),
        "{case} is not a streaming recording"
    );
    let recorded = Recorded::of(interaction);

    let request = with(
        request_from(&gw, interaction, Style::Commonbase),
        "showUsage",
        json!(true),
    );
    let response = post_stream(&gw, &request);
    let (partial, last) = split_stream(&response);
    let texts: Vec<String> = partial
        .iter()
        .map(|f| streamed_text(std::slice::from_ref(f), 0))
        .collect();
    assert_eq!(texts, recorded.texts, "{}", response.raw);
    assert_stream_finished(&last, Some("stop"));
    check_usage(&last, &recorded);
    check_upstream_request(&upstream.single_request(), interaction, Style::Commonbase);

    let record = streamed_record(&gw, &last);
    check_record_usage(&record, &recorded);
}

/// The answer to one step: the final frame (streamed) or the body's first choice.
fn answer(gw: &Gateway, request: &Value, recorded: &Recorded, streamed: bool) -> Value {
    if streamed {
        let response = post_stream(gw, request);
        let (partial, last) = split_stream(&response);
        // Text arrives event by event, in order; calls only in the final frame.
        let texts: Vec<String> = partial
            .iter()
            .map(|f| streamed_text(std::slice::from_ref(f), 0))
            .collect();
        assert_eq!(texts, recorded.texts, "{}", response.raw);
        for frame in &partial {
            assert!(
                frame["choices"][0]["function_call"].is_null(),
                "partial frame with a call: {frame}"
            );
        }
        last["choices"][0].clone()
    } else {
        let body = assert_ok(&post(gw, "/completions", request));
        assert_eq!(body["choices"][0]["text"], json!(recorded.text()), "{body}");
        body["choices"][0].clone()
    }
}

/// Step one asks for function calls; step two sends the results back and gets the answer.
fn check_tool(case: &str, style: Style) {
    let upstream = GeminiUpstream::replay(&recording(case));
    let gw = gateway(&upstream);
    let recording = recording(case);
    let first = recording.interaction(0);
    let streamed = is_stream(first);
    let recorded = Recorded::of(first);
    assert!(!recorded.calls.is_empty(), "{case} has no function call");

    let choice = answer(&gw, &request_from(&gw, first, style), &recorded, streamed);
    let calls: Vec<(String, Value)> = tool_calls_of(&choice)
        .into_iter()
        .map(|(name, arguments)| {
            let arguments: Value = serde_json::from_str(&arguments)
                .unwrap_or_else(|e| panic!("arguments are not JSON ({e}): {choice}"));
            (name, arguments)
        })
        .collect();
    assert_eq!(calls, recorded.calls, "{choice}");
    // Commonbase clients read `function_call`: the first call.
    assert_eq!(
        choice["function_call"]["name"],
        json!(recorded.calls[0].0),
        "{choice}"
    );
    let ids: Vec<&str> = choice["tool_calls"]
        .as_array()
        .expect("tool_calls")
        .iter()
        .map(|c| c["id"].as_str().expect("id"))
        .collect();
    let expected_ids: Vec<String> = (0..recorded.calls.len())
        .map(|i| format!("call_0_{i}"))
        .collect();
    assert_eq!(ids, expected_ids, "{choice}");
    assert_eq!(
        choice["finish_reason"],
        json!(recorded.gateway_finish_reason())
    );
    check_upstream_request(&upstream.requests()[0], first, style);

    let second = recording.interaction(1);
    let recorded = Recorded::of(second);
    let choice = answer(&gw, &request_from(&gw, second, style), &recorded, streamed);
    assert_eq!(choice["finish_reason"], json!("stop"), "{choice}");
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    check_upstream_request(&requests[1], second, style);
    // The results went back as functionResponse parts of one user turn, after the calls.
    let contents = requests[1].json()["contents"].clone();
    let last = contents
        .as_array()
        .and_then(|c| c.last())
        .expect("contents");
    assert_eq!(last["role"], json!("user"), "{contents}");
    assert!(
        last["parts"]
            .as_array()
            .expect("parts")
            .iter()
            .all(|p| p["functionResponse"]["response"].is_object()),
        "{contents}"
    );
}

recorded_tests! {
    gemini_simple => check_simple("simple");
    gemini_streaming => check_streaming("simple_streaming");
    gemini_tool => check_tool("tool", Style::Commonbase);
    gemini_tool_openai_shape => check_tool("tool", Style::OpenAi);
    gemini_tool_streaming => check_tool("tool_streaming", Style::Commonbase);
    gemini_multi_tool => check_tool("multi_tool", Style::OpenAi);
    gemini_multi_tool_streaming => check_tool("multi_tool_streaming", Style::OpenAi);
}

// ---------------------------------------------------------------- requests

#[test]
fn text_prompt_is_one_user_turn_and_params_reach_generation_config() {
    let upstream = GeminiUpstream::replay(&recording("simple"));
    let gw = gateway(&upstream);
    let mut request = text_request(&gw.project_id, ROUTE, MODEL, "Say hi in Portuguese");
    let params = &mut request["providerConfig"]["params"];
    params["temperature"] = json!(0.25);
    params["stop"] = json!("END");
    params["top_k"] = json!(20);
    params["thinkingConfig"] = json!({"thinkingBudget": 0});
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["type"], json!("text"));
    assert_eq!(body["choices"][0]["text"], json!("Olá!"));
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(
        sent.json(),
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Say hi in Portuguese"}]}],
            "generationConfig": {"temperature": 0.25, "stopSequences": ["END"], "topK": 20,
                                 "thinkingConfig": {"thinkingBudget": 0}}
        })
    );
}

#[test]
fn a_named_function_choice_forces_that_function() {
    let upstream = GeminiUpstream::replay(&recording("tool"));
    let gw = gateway(&upstream);
    let mut request = chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([{"role": "user", "content": "What's the weather in Florence,Italy?"}]),
    );
    request["functions"] = json!([{"name": "weather", "description": "Get weather",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                       "required": ["location"], "additionalProperties": false}}]);
    request["functionCall"] = json!({"name": "weather"});
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(
        body["choices"][0]["function_call"]["name"],
        json!("weather")
    );
    let sent = upstream.requests()[0].json();
    assert_eq!(
        sent["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}})
    );
    assert_eq!(
        sent["tools"],
        json!([{"functionDeclarations": [{"name": "weather", "description": "Get weather",
            "parameters": {"type": "OBJECT", "properties": {"location": {"type": "STRING"}},
                           "required": ["location"]}}]}])
    );
}

#[test]
fn the_key_goes_in_x_goog_api_key_and_nowhere_else() {
    let secret = unique("AIza-secret-");
    let route_key = unique("AIza-route-");
    let env_var = unique("GEMINI_KEY_");
    let upstream = GeminiUpstream::script(vec![
        Reply::recorded(recording("simple").interaction(0)),
        Reply::recorded(recording("simple_streaming").interaction(0)),
        Reply::recorded(recording("simple").interaction(0)),
        Reply::google_error(
            400,
            "API key not valid. Please pass a valid API key.",
            "INVALID_ARGUMENT",
        ),
    ]);
    let mut gw = Gateway::builder()
        .route(
            Route::new(ROUTE, "gemini")
                .base_url(&upstream.base_url("/v1beta"))
                .api_key_env(&env_var),
        )
        .env(&env_var, &route_key)
        .env("RUST_LOG", "debug")
        .start();
    let request = chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([{"role": "user", "content": "Say hi in Portuguese"}]),
    );
    let headers = [("Provider-API-Key", secret.as_str())];
    let plain = gw.post_with_headers("/completions", Some(&gw.key), &headers, &request);
    assert_ok(&plain);
    let streamed = gw.post_stream_with_headers(
        "/completions",
        Some(&gw.key),
        &headers,
        &with(request.clone(), "stream", json!(true)),
    );
    split_stream(&streamed);
    // Without the caller's key, the route's own key is used.
    assert_ok(&gw.post("/completions", &request));
    let failed = gw.post_with_headers("/completions", Some(&gw.key), &headers, &request);
    let failed_id = assert_error(&failed, 400, "");

    let requests = upstream.requests();
    let keys: Vec<Option<&str>> = requests
        .iter()
        .map(|r| r.header("x-goog-api-key"))
        .collect();
    assert_eq!(
        keys,
        [
            Some(secret.as_str()),
            Some(secret.as_str()),
            Some(route_key.as_str()),
            Some(secret.as_str())
        ]
    );
    assert_eq!(
        requests[1].path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    for sent in &requests {
        assert!(
            !sent.path.contains(&secret) && !sent.path.contains("key="),
            "{}",
            sent.path
        );
        assert_eq!(sent.header("authorization"), None);
    }
    let record = gw.get_invocation(&failed_id).json();
    gw.shutdown();
    for text in [
        plain.text(),
        streamed.raw.clone(),
        failed.text(),
        record.to_string(),
        gw.logs(),
        gw.stdout().join("\n"),
    ] {
        assert!(!text.contains(&secret), "the caller's key leaked: {text}");
        assert!(!text.contains(&route_key), "the route's key leaked: {text}");
    }
    assert!(
        !contains_bytes(&gw.db_bytes(), secret.as_bytes()),
        "the caller's key is in the database"
    );
}

// ---------------------------------------------------------------- embeddings

#[test]
fn embeddings_are_one_batch_call_in_input_order() {
    let upstream = GeminiUpstream::start();
    let gw = gateway(&upstream);
    let inputs = ["first input", "second", "the third one"];
    let mut request =
        embeddings_request(&gw.project_id, ROUTE, "text-embedding-004", json!(inputs));
    request["providerConfig"]["params"]["task_type"] = json!("RETRIEVAL_DOCUMENT");
    let body = assert_ok(&post(
        &gw,
        "/embeddings",
        &with(request, "showUsage", json!(true)),
    ));
    let expected: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(i, input)}))
        .collect();
    assert_eq!(body["data"], json!(expected));

    let sent = upstream.single_request();
    assert_eq!(
        sent.path,
        "/v1beta/models/text-embedding-004:batchEmbedContents"
    );
    assert_eq!(sent.header("x-goog-api-key"), Some(PROVIDER_KEY));
    let requests: Vec<Value> = inputs
        .iter()
        .map(|input| {
            json!({"model": "models/text-embedding-004", "taskType": "RETRIEVAL_DOCUMENT",
                            "content": {"parts": [{"text": input}]}})
        })
        .collect();
    assert_eq!(sent.json(), json!({"requests": requests}));

    let id = body["invocationId"].as_str().expect("id");
    let record = gw.get_invocation(id).json();
    assert_eq!(record["type"], json!("embeddings"));
    assert_eq!(record["status"], json!("success"));
    // Google reports no token counts for embeddings: none are made up.
    assert_eq!(record["usage"], Value::Null, "{record}");
}

#[test]
fn a_single_embedding_input() {
    let upstream = GeminiUpstream::start();
    let gw = gateway(&upstream);
    let request = embeddings_request(
        &gw.project_id,
        ROUTE,
        "gemini-embedding-001",
        json!("hello"),
    );
    let body = assert_ok(&post(&gw, "/embeddings", &request));
    assert_eq!(
        body["data"][0]["embedding"],
        json!(fake_embedding(0, "hello"))
    );
    assert_eq!(
        upstream.single_request().json()["requests"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

// ---------------------------------------------------------------- errors

fn chat(gw: &Gateway) -> Value {
    chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([{"role": "user", "content": "Say hi in Portuguese"}]),
    )
}

/// An error answer in Google's shape reaches the caller as `expected_status`, with Google's
/// message as `providerError`, and is recorded; the gateway does not retry.
fn check_google_error(status: u16, message: &str, status_name: &str, expected_status: u16) {
    let upstream = GeminiUpstream::always(Reply::google_error(status, message, status_name));
    let gw = gateway(&upstream);
    let response = post(&gw, "/completions", &chat(&gw));
    assert_provider_error(
        &gw,
        &response,
        expected_status,
        message,
        upstream.requests().len(),
    );
}

/// Google answers a wrong key with 400 `INVALID_ARGUMENT`, reason `API_KEY_INVALID` (its body
/// as Google writes it): the route's key is at fault, not the caller's request, so it is a 502
/// as another provider's 401 is, with Google's message. A 400 without that reason stays the
/// caller's (an upstream 400 is the caller's: issue 46 item 7).
#[test]
fn an_invalid_key_is_a_502_with_googles_message_and_other_400s_stay_the_callers() {
    let message = "API key not valid. Please pass a valid API key.";
    let body = json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID", "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"}}]}});
    let upstream = GeminiUpstream::always(Reply::gemini_json(400, &body.to_string()));
    let gw = gateway(&upstream);
    let response = post(&gw, "/completions", &chat(&gw));
    assert_provider_error(&gw, &response, 502, message, upstream.requests().len());
    // Streamed, the refusal comes before any frame: the same 502.
    let streamed = post_stream(&gw, &with(chat(&gw), "stream", json!(true)));
    assert_eq!(streamed.status, 502, "{}", streamed.raw);
    assert_eq!(
        streamed.json()["providerError"],
        json!(message),
        "{}",
        streamed.raw
    );
    check_google_error(
        400,
        "* GenerateContentRequest.contents: contents is not specified",
        "INVALID_ARGUMENT",
        400,
    );
}

#[test]
fn upstream_401_is_502() {
    check_google_error(
        401,
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        "UNAUTHENTICATED",
        502,
    );
}

#[test]
fn upstream_403_is_502() {
    check_google_error(
        403,
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
        "PERMISSION_DENIED",
        502,
    );
}

#[test]
fn upstream_500_is_502() {
    check_google_error(
        500,
        "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
        "INTERNAL",
        502,
    );
}

#[test]
fn upstream_429_is_429_with_retry_after() {
    let message = "You exceeded your current quota, please check your plan and billing details.";
    let upstream = GeminiUpstream::always(
        Reply::google_error(429, message, "RESOURCE_EXHAUSTED").header("retry-after", "31"),
    );
    let gw = gateway(&upstream);
    let response = post(&gw, "/completions", &chat(&gw));
    let id = assert_error(&response, 429, "");
    assert_eq!(response.header("retry-after"), Some("31"));
    assert_eq!(response.json()["providerError"], json!(message));
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["httpStatus"], json!(429), "{record}");
}

#[test]
fn an_error_on_a_streaming_request_is_reported() {
    let message = "The model is overloaded. Please try again later.";
    let upstream = GeminiUpstream::always(Reply::google_error(503, message, "UNAVAILABLE"));
    let gw = gateway(&upstream);
    let response = post_stream(&gw, &with(chat(&gw), "stream", json!(true)));
    let id = if response.is_event_stream() {
        let last = response.frames.last().expect("an error frame");
        assert!(last["error"].is_string(), "{last}");
        last["invocationId"].as_str().expect("id").to_owned()
    } else {
        assert_eq!(response.status, 502, "{}", response.raw);
        let body = response.json();
        assert_eq!(body["providerError"], json!(message));
        body["invocationId"].as_str().expect("id").to_owned()
    };
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(record["providerError"], json!(message), "{record}");
}

#[test]
fn embeddings_errors_are_reported() {
    let message =
        "models/nope is not found for API version v1beta, or is not supported for embedContent.";
    let upstream = GeminiUpstream::always(Reply::google_error(404, message, "NOT_FOUND"));
    let gw = gateway(&upstream);
    let request = embeddings_request(&gw.project_id, ROUTE, "nope", json!("x"));
    let response = post(&gw, "/embeddings", &request);
    assert_error(&response, 404, "");
    assert_eq!(response.json()["providerError"], json!(message));
}

#[test]
fn malformed_json_is_502() {
    let upstream =
        GeminiUpstream::always(Reply::gemini_json(200, "{\"candidates\": [{\"content\": "));
    let gw = gateway(&upstream);
    let response = post(&gw, "/completions", &chat(&gw));
    let id = assert_error(&response, 502, "");
    let provider_error = response.json()["providerError"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        provider_error.starts_with("malformed response from upstream"),
        "{}",
        response.text()
    );
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["status"], json!("error"), "{record}");
}

/// A stream that stops in the middle of an event: the text before it reached the caller, then
/// an error frame; the invocation is an error.
fn check_cut_stream(abort: bool) {
    let events = split_events(
        &recording("multi_tool_streaming")
            .interaction(1)
            .response
            .body,
    );
    assert_eq!(events.len(), 3);
    let half = &events[1][..events[1].len() / 2];
    let reply = Reply::events(vec![events[0].clone(), half.to_owned()]);
    let upstream = GeminiUpstream::always(if abort { reply.cut() } else { reply });
    let gw = gateway(&upstream);
    let response = post_stream(&gw, &with(chat(&gw), "stream", json!(true)));
    assert_eq!(response.status, 200, "{}", response.raw);
    let (last, partial) = response.frames.split_last().expect("frames");
    assert_eq!(streamed_text(partial, 0), "The sum of ", "{}", response.raw);
    let error = last["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error frame: {}", response.raw));
    assert!(!error.is_empty());
    let id = last["invocationId"].as_str().expect("id");
    let record = gw.wait_for_record(id, |r| r["status"] == json!("error"));
    assert_eq!(record["stream"], json!(true), "{record}");
    // An event that ends with the body cannot be read; a dropped connection fails the read.
    let provider_error = record["providerError"].as_str().unwrap_or_default();
    let expected = if abort {
        "HTTP failure reading the answer"
    } else {
        "malformed response from upstream"
    };
    assert!(provider_error.starts_with(expected), "{record}");
    // The usage reported before the cut is kept.
    assert_eq!(record["usage"]["prompt_tokens"], json!(218), "{record}");
}

#[test]
fn a_stream_ending_mid_event_is_an_error() {
    check_cut_stream(false);
}

#[test]
fn a_stream_whose_connection_drops_mid_event_is_an_error() {
    check_cut_stream(true);
}

#[test]
fn a_stream_without_a_finish_reason_ended_early() {
    let events = split_events(
        &recording("multi_tool_streaming")
            .interaction(1)
            .response
            .body,
    );
    let upstream = GeminiUpstream::always(Reply::events(events[..2].to_vec()));
    let gw = gateway(&upstream);
    let response = post_stream(&gw, &with(chat(&gw), "stream", json!(true)));
    let last = response.frames.last().expect("frames");
    let id = last["invocationId"].as_str().expect("id");
    let record = gw.wait_for_record(id, |r| r["status"] == json!("error"));
    assert_eq!(
        record["providerError"],
        json!("stream ended early"),
        "{record}"
    );
}

#[test]
fn a_blocked_prompt_is_a_content_filtered_answer() {
    let upstream = GeminiUpstream::always(Reply::gemini_json(
        200,
        r#"{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
            "modelVersion": "gemini-2.5-flash"}"#,
    ));
    let gw = gateway(&upstream);
    let body = assert_ok(&post(
        &gw,
        "/completions",
        &with(chat(&gw), "showUsage", json!(true)),
    ));
    assert_eq!(body["choices"][0]["text"], json!(""), "{body}");
    assert_eq!(
        body["choices"][0]["finish_reason"],
        json!("content_filter"),
        "{body}"
    );
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 9, "completion_tokens": 0, "total_tokens": 9})
    );
}

// ---------------------------------------------------------------- images

#[test]
fn imagen_makes_images_through_predict_answered_in_openai_s_shape_and_priced_by_the_image() {
    use base64::Engine as _;
    use gateway_test_support::upstream::fake_png;
    use gateway_test_support::upstream::gemini::{REFUSED_PROMPT, filtered_reason};
    let upstream = GeminiUpstream::start();
    let gw = gateway(&upstream);
    let prompt = "a lighthouse at dawn";
    let body = json!({"model": format!("{ROUTE}/imagen-4.0-generate-001"), "prompt": prompt,
                      "n": 2, "size": "1408x768"});
    let response = post(&gw, "/v1/images/generations", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    let images = answer["data"].as_array().expect("data");
    assert_eq!(images.len(), 2, "{answer}");
    for (i, image) in images.iter().enumerate() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(image["b64_json"].as_str().expect("b64_json"))
            .expect("base64");
        assert_eq!(bytes, fake_png(&format!("{prompt}#{i}")));
    }
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1beta/models/imagen-4.0-generate-001:predict");
    assert_eq!(sent.header("x-goog-api-key"), Some(PROVIDER_KEY));
    let sent = sent.json();
    assert_eq!(sent["instances"], json!([{"prompt": prompt}]), "{sent}");
    assert_eq!(sent["parameters"]["sampleCount"], json!(2), "{sent}");
    assert_eq!(sent["parameters"]["aspectRatio"], json!("16:9"), "{sent}");
    let id = response
        .header("x-invocation-id")
        .expect("an id")
        .to_owned();
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["type"], json!("images"), "{record}");
    assert_eq!(record["usage"]["images"], json!(2), "{record}");
    // Imagen 4 at $0.04 an image, from the shipped table.
    assert_eq!(record["usageCost"], json!(0.08), "{record}");

    // Every image filtered: a 400 with Imagen's reason, nothing billed.
    let body =
        json!({"model": format!("{ROUTE}/imagen-4.0-generate-001"), "prompt": REFUSED_PROMPT});
    let response = post(&gw, "/v1/images/generations", &body);
    assert_eq!(response.status, 400, "{}", response.text());
    let reason = filtered_reason(1);
    assert!(
        response.text().contains(&reason[..20]),
        "{}",
        response.text()
    );
    // A size Imagen does not make, and a model that is not Imagen: refused before any call.
    let calls = upstream.requests().len();
    for (model, size) in [
        ("imagen-4.0-generate-001", "1000x300"),
        (MODEL, "1024x1024"),
    ] {
        let body = json!({"model": format!("{ROUTE}/{model}"), "prompt": prompt, "size": size});
        let response = post(&gw, "/v1/images/generations", &body);
        assert_eq!(response.status, 400, "{model}: {}", response.text());
    }
    assert_eq!(upstream.requests().len(), calls);
}

#[test]
fn gemini_image_models_make_images_through_generate_content_priced_by_their_tokens() {
    use base64::Engine as _;
    use gateway_test_support::upstream::fake_png;
    use gateway_test_support::upstream::gemini::{IMAGE_TOKENS, REFUSED_PROMPT};
    let upstream = GeminiUpstream::start();
    let gw = gateway(&upstream);
    let model = format!("{ROUTE}/gemini-2.5-flash-image");
    let prompt = "a lighthouse at dawn";
    let body = json!({"model": model, "prompt": prompt, "size": "1344x768"});
    let response = post(&gw, "/v1/images/generations", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    let images = answer["data"].as_array().expect("data");
    assert_eq!(images.len(), 1, "{answer}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(images[0]["b64_json"].as_str().expect("b64_json"))
        .expect("base64");
    assert_eq!(bytes, fake_png(&format!("{prompt}#0")));
    assert_eq!(answer["size"], json!("1344x768"), "{answer}");
    let words = prompt.split_whitespace().count() as u64;
    assert_eq!(
        answer["usage"],
        json!({"input_tokens": words, "output_tokens": IMAGE_TOKENS,
               "total_tokens": words + IMAGE_TOKENS,
               "input_tokens_details": {"text_tokens": words, "image_tokens": 0}}),
    );
    let sent = upstream.single_request();
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-2.5-flash-image:generateContent"
    );
    assert_eq!(sent.header("x-goog-api-key"), Some(PROVIDER_KEY));
    assert_eq!(
        sent.json(),
        json!({
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "generationConfig": {"responseModalities": ["IMAGE"],
                                 "imageConfig": {"aspectRatio": "16:9"}},
        })
    );
    let id = response
        .header("x-invocation-id")
        .expect("an id")
        .to_owned();
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["type"], json!("images"), "{record}");
    assert_eq!(record["usage"]["images"], json!(1), "{record}");
    assert_eq!(record["usage"]["prompt_tokens"], json!(words), "{record}");
    assert_eq!(
        record["usage"]["completion_tokens"],
        json!(IMAGE_TOKENS),
        "{record}"
    );
    // The shipped gemini-2.5-flash-image price: $0.30 a million prompt tokens, $30 a million
    // output (image) tokens.
    let expected = (words as f64 * 0.30 + IMAGE_TOKENS as f64 * 30.0) / 1e6;
    let cost = record["usageCost"].as_f64().expect("a cost");
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");

    // The image filtered: a 400 with Gemini's reason.
    let body = json!({"model": model, "prompt": REFUSED_PROMPT});
    let response = post(&gw, "/v1/images/generations", &body);
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("IMAGE_SAFETY"),
        "{}",
        response.text()
    );
    // More than one image, and a size of no ratio the model takes: refused before any call.
    let calls = upstream.requests().len();
    for body in [
        json!({"model": model, "prompt": prompt, "n": 2}),
        json!({"model": model, "prompt": prompt, "size": "1792x1024"}),
    ] {
        let response = post(&gw, "/v1/images/generations", &body);
        assert_eq!(response.status, 400, "{body}: {}", response.text());
    }
    assert_eq!(upstream.requests().len(), calls);
}
