//! The OpenAI plugin through the gateway, against a fake upstream that
//! replays real recorded traffic (OpenAI, Azure, Groq, llama.cpp), answers
//! embeddings and legacy completions, and fails on demand. Also the
//! behaviours that need a slow upstream: a client leaving mid-stream and a
//! graceful shutdown during a stream.

use std::time::Duration;

use gateway_test_support::upstream::openai::{legacy_text, slow_word};
use gateway_test_support::{
    Gateway, Interaction, OpenAiUpstream, ReceivedRequest, Recording, Reply, Response, Route,
    SseResponse, assert_chat_choice, assert_error, assert_ok, assert_provider_error,
    assert_stream_finished, assert_usage, chat_params, chat_request, chat_request_with_params,
    contains_bytes, embeddings_request, fake_embedding, list_cost, open_stream_with_provider_key,
    post_stream_with_provider_key, post_with_provider_key, recorded_tests, split_stream,
    streamed_record, streamed_text, success_record, text_request, tool_calls_of, unique, with,
};
use serde_json::{Value, json};

/// The caller's provider key in most tests.
const PROVIDER_KEY: &str = "sk-test-caller-0123456789";
const ROUTE: &str = "oai";

fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    post_with_provider_key(gw, path, PROVIDER_KEY, body)
}

fn post_stream(gw: &Gateway, body: &Value) -> SseResponse {
    post_stream_with_provider_key(gw, PROVIDER_KEY, body)
}

/// A gateway with route `oai` (openai plugin, caller's key) at `upstream`.
fn gateway_for(upstream: &OpenAiUpstream, prefix: &str) -> Gateway {
    Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url(prefix)))
        .start()
}

/// How a request expresses functions and their results.
#[derive(Clone, Copy, PartialEq)]
enum Style {
    /// `functions`/`functionCall`, assistant `function_call`, `function` role results.
    Commonbase,
    /// `tools`/`toolChoice`, assistant `tool_calls`, `tool` role results.
    OpenAi,
}

/// The gateway request that makes the plugin send what `interaction`
/// recorded.
fn request_from(gw: &Gateway, interaction: &Interaction, style: Style) -> Value {
    let recorded = interaction.request_json();
    let params = chat_params(
        &recorded,
        &[
            "messages",
            "tools",
            "tool_choice",
            "stream",
            "stream_options",
        ],
    );
    let messages = convert_messages(&recorded["messages"], style);
    let mut body = chat_request_with_params(&gw.project_id, ROUTE, params, messages);
    if let Some(tools) = recorded["tools"].as_array() {
        match style {
            Style::Commonbase => {
                body["functions"] = tools
                    .iter()
                    .map(|tool| {
                        let f = &tool["function"];
                        json!({"name": f["name"], "description": f["description"], "parameters": f["parameters"]})
                    })
                    .collect();
                body["functionCall"] = json!("auto");
            }
            Style::OpenAi => {
                body["tools"] = json!(tools);
                body["toolChoice"] = recorded["tool_choice"].clone();
            }
        }
    }
    if recorded["stream"] == json!(true) {
        body["stream"] = json!(true);
    }
    body
}

fn convert_messages(messages: &Value, style: Style) -> Value {
    let messages = messages.as_array().expect("recorded messages");
    // Function names by call id, for `function` role results.
    let mut names = std::collections::HashMap::new();
    let mut out = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap_or_default();
        let calls = message["tool_calls"].as_array();
        for call in calls.into_iter().flatten() {
            names.insert(
                call["id"].as_str().unwrap_or_default().to_owned(),
                call["function"]["name"].clone(),
            );
        }
        let converted = match (style, role) {
            (Style::Commonbase, "assistant") if calls.is_some() => {
                let calls = calls.expect("checked");
                assert_eq!(calls.len(), 1, "function_call carries one call");
                json!({
                    "role": "assistant",
                    "content": message.get("content").cloned().unwrap_or(Value::Null),
                    "function_call": {
                        "name": calls[0]["function"]["name"],
                        "arguments": calls[0]["function"]["arguments"]
                    }
                })
            }
            (Style::Commonbase, "tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                json!({"role": "function", "name": names[id], "content": message["content"]})
            }
            _ => {
                let mut m = message.clone();
                // llama.cpp's reasoning is not part of the gateway's message shape.
                if let Some(object) = m.as_object_mut() {
                    object.remove("reasoning_content");
                }
                m
            }
        };
        out.push(converted);
    }
    Value::Array(out)
}

/// The comparable parts of a chat message: role, content, tool call id and
/// tool calls as `(id, name, arguments)`.
fn message_summary(message: &Value) -> Value {
    let calls: Vec<Value> = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!([c["id"], c["function"]["name"], c["function"]["arguments"]]))
        .collect();
    json!({
        "role": message["role"],
        "content": message.get("content").cloned().unwrap_or(Value::Null),
        "tool_call_id": message.get("tool_call_id").cloned().unwrap_or(Value::Null),
        "tool_calls": calls,
    })
}

/// The plugin sent what the recorded client sent, in the parts that matter.
fn check_upstream_request(sent: &ReceivedRequest, interaction: &Interaction, style: Style) {
    sent.assert_json_post(&interaction.path());
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    let body = sent.json();
    let recorded = interaction.request_json();
    assert_eq!(body["model"], recorded["model"]);
    for key in ["max_tokens", "max_completion_tokens"] {
        if recorded.get(key).is_some() {
            assert_eq!(body[key], recorded[key], "{key} should pass through");
        }
    }
    let sent_messages = body["messages"].as_array().expect("messages");
    let recorded_messages = recorded["messages"].as_array().expect("messages");
    assert_eq!(sent_messages.len(), recorded_messages.len(), "{body}");
    match style {
        Style::OpenAi => {
            for (s, r) in sent_messages.iter().zip(recorded_messages) {
                assert_eq!(message_summary(s), message_summary(r), "sent: {body}");
            }
        }
        Style::Commonbase => {
            // System and user messages are sent as they are.
            for (s, r) in sent_messages.iter().zip(recorded_messages).take(2) {
                assert_eq!(message_summary(s), message_summary(r), "sent: {body}");
            }
        }
    }
    if let Some(tools) = recorded["tools"].as_array() {
        let names = |tools: &[Value]| -> Vec<Value> {
            tools
                .iter()
                .map(|t| t["function"]["name"].clone())
                .collect()
        };
        let sent_tools = body["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools sent: {body}"));
        assert_eq!(names(sent_tools), names(tools));
        for (s, r) in sent_tools.iter().zip(tools) {
            assert_eq!(s["type"], json!("function"));
            assert_eq!(s["function"]["parameters"], r["function"]["parameters"]);
        }
        assert_eq!(body["tool_choice"], json!("auto"), "{body}");
    }
    if recorded["stream"] == json!(true) {
        assert_eq!(body["stream"], json!(true), "{body}");
        assert_eq!(
            body["stream_options"]["include_usage"],
            json!(true),
            "{body}"
        );
    } else {
        assert_ne!(body["stream"], json!(true), "{body}");
    }
}

/// In a function-style second step, the result reached the upstream after
/// the assistant's call.
fn check_function_result_sent(sent: &ReceivedRequest, step: &Interaction) {
    let body = sent.json();
    let recorded = step.request_json();
    let results: Vec<&Value> = recorded["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == json!("tool"))
        .collect();
    let messages = body["messages"].as_array().expect("messages");
    for result in results {
        let position = messages
            .iter()
            .position(|m| {
                m["content"] == result["content"]
                    && (m["role"] == json!("tool") || m["role"] == json!("function"))
            })
            .unwrap_or_else(|| panic!("result {} not sent: {body}", result["content"]));
        let call = messages[..position]
            .iter()
            .rev()
            .find(|m| m["role"] == json!("assistant"))
            .unwrap_or_else(|| panic!("no assistant call before the result: {body}"));
        let named = call["tool_calls"][0]["function"]["name"].as_str().is_some()
            || call["function_call"]["name"].as_str().is_some();
        assert!(named, "the assistant message lost its call: {call}");
    }
}

fn check_usage(body: &Value, expected: Option<(u64, u64, u64)>, price: (f64, f64)) {
    if let Some(usage) = expected {
        assert_usage(body, usage, list_cost(usage.0, usage.1, price));
    }
}

/// Prices set on the route for the recorded model (not the plugin's).
const PRICE: (f64, f64) = (0.15, 0.60);

fn recorded_gateway(recording: &Recording, upstream: &OpenAiUpstream) -> Gateway {
    let first = recording.interaction(0);
    let model = first.request_json()["model"]
        .as_str()
        .expect("recorded model")
        .to_owned();
    Gateway::builder()
        .route(
            Route::openai(ROUTE, &upstream.base_url(&first.base_path()))
                .price(&model, PRICE.0, PRICE.1),
        )
        .start()
}

fn check_simple(name: &str) {
    let recording = Recording::load(name);
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = recorded_gateway(&recording, &upstream);
    let interaction = recording.interaction(0);
    let expected = interaction.answer();

    let request = with(
        request_from(&gw, interaction, Style::Commonbase),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["projectId"], json!(gw.project_id));
    assert_chat_choice(&body, &expected.text, expected.finish_reason.as_deref());
    check_usage(&body, expected.usage, PRICE);
    check_upstream_request(&upstream.single_request(), interaction, Style::Commonbase);

    success_record(&gw, &body, ROUTE, "openai");
}

fn check_streaming(name: &str) {
    let recording = Recording::load(name);
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = recorded_gateway(&recording, &upstream);
    let interaction = recording.interaction(0);
    assert!(interaction.is_sse(), "{name} is not a streaming recording");
    let expected = interaction.answer();

    let request = with(
        request_from(&gw, interaction, Style::Commonbase),
        "showUsage",
        json!(true),
    );
    let response = post_stream(&gw, &request);
    let (partial, last) = split_stream(&response);
    assert!(!partial.is_empty(), "no partial frames: {}", response.raw);
    for frame in &partial {
        assert_eq!(frame["type"], json!("chat"), "{frame}");
        assert_eq!(frame["projectId"], json!(gw.project_id), "{frame}");
    }
    assert_eq!(streamed_text(&partial, 0), expected.text);
    assert_stream_finished(&last, expected.finish_reason.as_deref());
    check_usage(&last, expected.usage, PRICE);
    check_upstream_request(&upstream.single_request(), interaction, Style::Commonbase);

    let record = streamed_record(&gw, &last);
    if let Some((prompt, completion, _)) = expected.usage {
        assert_eq!(record["usage"]["prompt_tokens"], json!(prompt), "{record}");
        assert_eq!(
            record["usage"]["completion_tokens"],
            json!(completion),
            "{record}"
        );
    }
}

/// Step one asks for a function call; step two (when recorded) sends the
/// result back and gets the final answer.
fn check_tool(name: &str, style: Style) {
    let recording = Recording::load(name);
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = recorded_gateway(&recording, &upstream);
    let first = recording.interaction(0);
    let expected = first.answer();
    assert!(!expected.tool_calls.is_empty(), "{name} has no tool call");
    let streamed = first.is_sse();

    let request = request_from(&gw, first, style);
    let choice = if streamed {
        let response = post_stream(&gw, &request);
        let (partial, last) = split_stream(&response);
        assert_eq!(streamed_text(&partial, 0), expected.text);
        last["choices"][0].clone()
    } else {
        let body = assert_ok(&post(&gw, "/completions", &request));
        assert_eq!(body["choices"][0]["text"], json!(expected.text), "{body}");
        body["choices"][0].clone()
    };
    let expected_calls: Vec<(String, String)> = expected
        .tool_calls
        .iter()
        .map(|(_, name, arguments)| (name.clone(), arguments.clone()))
        .collect();
    match style {
        Style::OpenAi => assert_eq!(tool_calls_of(&choice), expected_calls, "{choice}"),
        Style::Commonbase => {
            // Commonbase clients read `function_call`: the first call.
            assert_eq!(
                choice["function_call"]["name"],
                json!(expected_calls[0].0),
                "{choice}"
            );
            assert_eq!(
                choice["function_call"]["arguments"],
                json!(expected_calls[0].1),
                "{choice}"
            );
        }
    }
    // Every call's arguments are the JSON the model produced.
    for (_, arguments) in &expected_calls {
        serde_json::from_str::<Value>(arguments).expect("recorded arguments are JSON");
    }
    let reason = choice["finish_reason"].as_str().unwrap_or_default();
    assert!(
        reason == "tool_calls" || reason == "function_call",
        "finish_reason {reason:?}: {choice}"
    );
    let requests = upstream.requests();
    check_upstream_request(&requests[0], first, style);

    if recording.interactions.len() < 2 {
        return;
    }
    let second = recording.interaction(1);
    let final_answer = second.answer();
    let request = request_from(&gw, second, style);
    if streamed {
        let response = post_stream(&gw, &request);
        let (partial, last) = split_stream(&response);
        assert_eq!(streamed_text(&partial, 0), final_answer.text);
        assert_eq!(
            last["choices"][0]["finish_reason"],
            json!(final_answer.finish_reason)
        );
    } else {
        let body = assert_ok(&post(&gw, "/completions", &request));
        assert_eq!(
            body["choices"][0]["text"],
            json!(final_answer.text),
            "{body}"
        );
        assert_eq!(
            body["choices"][0]["finish_reason"],
            json!(final_answer.finish_reason)
        );
    }
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    check_upstream_request(&requests[1], second, style);
    check_function_result_sent(&requests[1], second);
}

recorded_tests! {
    openai_simple => check_simple("OpenAI__openai-gpt-4o-mini__simple");
    openai_streaming => check_streaming("OpenAI__openai-gpt-4o-mini__simple_streaming");
    openai_tool => check_tool("OpenAI__openai-gpt-4o-mini__tool", Style::Commonbase);
    openai_tool_openai_shape => check_tool("OpenAI__openai-gpt-4o-mini__tool", Style::OpenAi);
    openai_tool_streaming => check_tool("OpenAI__openai-gpt-4o-mini__tool_streaming", Style::Commonbase);
    openai_multi_tool => check_tool("OpenAI__openai-gpt-4o-mini__multi_tool", Style::OpenAi);
    openai_multi_tool_streaming => check_tool("OpenAI__openai-gpt-4o-mini__multi_tool_streaming", Style::OpenAi);

    groq_simple => check_simple("OpenAICompatible__groq-kimi-k2__simple");
    groq_streaming => check_streaming("OpenAICompatible__groq-kimi-k2__simple_streaming");
    groq_tool => check_tool("OpenAICompatible__groq-kimi-k2__tool", Style::Commonbase);
    groq_tool_streaming => check_tool("OpenAICompatible__groq-kimi-k2__tool_streaming", Style::Commonbase);
    groq_multi_tool => check_tool("OpenAICompatible__groq-kimi-k2__multi_tool", Style::OpenAi);
    groq_multi_tool_streaming => check_tool("OpenAICompatible__groq-kimi-k2__multi_tool_streaming", Style::OpenAi);

    llama_cpp_simple => check_simple("OpenAICompatible__llama-cpp-gpt-oss__simple");
    llama_cpp_streaming => check_streaming("OpenAICompatible__llama-cpp-gpt-oss__simple_streaming");
    llama_cpp_tool => check_tool("OpenAICompatible__llama-cpp-gpt-oss__tool", Style::Commonbase);
    llama_cpp_tool_streaming => check_tool("OpenAICompatible__llama-cpp-gpt-oss__tool_streaming", Style::Commonbase);

    azure_simple => check_simple("Azure__azure-gpt-5-mini__simple");
    azure_streaming => check_streaming("Azure__azure-gpt-5-mini__simple_streaming");
    azure_tool => check_tool("Azure__azure-gpt-5-mini__tool", Style::Commonbase);
    azure_tool_streaming => check_tool("Azure__azure-gpt-5-mini__tool_streaming", Style::Commonbase);
}

/// The recorded tool-call argument deltas, reassembled by the gateway, are
/// exactly the JSON text the model produced, and partial frames carry no
/// half-built calls.
#[test]
fn streamed_tool_call_arguments_are_reassembled_from_deltas() {
    let name = "OpenAI__openai-gpt-4o-mini__tool_streaming";
    let recording = Recording::load(name);
    let first = recording.interaction(0);
    // The recording really splits the arguments over several events.
    let argument_events = first
        .sse_payloads()
        .iter()
        .filter(|p| p["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].is_string())
        .count();
    assert!(argument_events > 3, "{argument_events}");
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = recorded_gateway(&recording, &upstream);
    let response = post_stream(&gw, &request_from(&gw, first, Style::OpenAi));
    let (partial, last) = split_stream(&response);
    for frame in &partial {
        assert!(
            frame["choices"][0]["function_call"].is_null()
                && frame["choices"][0]["tool_calls"]
                    .as_array()
                    .is_none_or(|c| c.is_empty()),
            "partial frame with a call: {frame}"
        );
    }
    let calls = tool_calls_of(&last["choices"][0]);
    assert_eq!(calls.len(), 1, "{last}");
    assert_eq!(calls[0].0, "weather");
    assert_eq!(calls[0].1, "{\"location\":\"Florence,Italy\"}");
    assert_eq!(
        last["choices"][0]["function_call"]["arguments"],
        json!("{\"location\":\"Florence,Italy\"}"),
        "Commonbase clients read function_call: {last}"
    );
}

// ---------------------------------------------------------------- provider keys

fn simple_recording() -> Recording {
    Recording::load("OpenAI__openai-gpt-4o-mini__simple")
}

fn hi_request(gw: &Gateway) -> Value {
    chat_request(
        &gw.project_id,
        ROUTE,
        "gpt-4o-mini",
        json!([{"role": "user", "content": "Say hi in Portuguese"}]),
    )
}

#[test]
fn provider_key_reaches_the_upstream_as_bearer_and_nowhere_else() {
    let secret = unique("sk-secret-");
    let recording = Recording::concat(&[
        simple_recording(),
        Recording::load("OpenAI__openai-gpt-4o-mini__simple_streaming"),
    ]);
    let upstream = OpenAiUpstream::replay(&recording);
    let failing = OpenAiUpstream::always(Reply::openai_error(
        401,
        "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_api_key",
        None,
    ));
    let mut gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")))
        .route(Route::openai("failing", &failing.base_url("/v1")))
        .env("RUST_LOG", "debug")
        .start();
    let headers = [("Provider-API-Key", secret.as_str())];
    let mut answers = Vec::new();

    let plain = gw.post_with_headers("/completions", Some(&gw.key), &headers, &hi_request(&gw));
    assert_ok(&plain);
    answers.push(plain.text());
    let streamed = gw.post_stream_with_headers(
        "/completions",
        Some(&gw.key),
        &headers,
        &with(hi_request(&gw), "stream", json!(true)),
    );
    split_stream(&streamed);
    answers.push(streamed.raw.clone());
    let embedded = gw.post_with_headers(
        "/embeddings",
        Some(&gw.key),
        &headers,
        &embeddings_request(&gw.project_id, ROUTE, "text-embedding-3-small", json!("x")),
    );
    assert_ok(&embedded);
    answers.push(embedded.text());
    let mut failed_request = hi_request(&gw);
    failed_request["providerConfig"]["provider"] = json!("failing");
    let failed = gw.post_with_headers("/completions", Some(&gw.key), &headers, &failed_request);
    let failed_id = assert_error(&failed, 502, "");
    answers.push(failed.text());
    answers.push(gw.get_invocation(&failed_id).text());

    for request in upstream.requests().iter().chain(failing.requests().iter()) {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {secret}").as_str()),
            "{}",
            request.path
        );
    }
    assert_eq!(upstream.requests().len(), 3);

    let status = gw.shutdown();
    assert!(status.success(), "{status}");
    // The random part alone, in case a prefix is stripped or the key is cut.
    let distinctive = &secret["sk-secret-".len()..];
    for answer in &answers {
        assert!(!answer.contains(distinctive), "key in an answer: {answer}");
    }
    let logs = gw.logs();
    assert!(!logs.is_empty(), "RUST_LOG=debug should produce logs");
    assert!(
        !logs.contains(distinctive),
        "provider key in the logs:\n{logs}"
    );
    let db = gw.db_bytes();
    assert!(
        !contains_bytes(&db, distinctive.as_bytes()),
        "provider key in the database files"
    );
}

#[test]
fn missing_provider_key_is_400() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = gateway_for(&upstream, "/v1");
    let response = gw.post("/completions", &hi_request(&gw));
    let id = assert_error(&response, 400, "Provider-API-Key");
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["status"], json!("error"));
    assert_eq!(record["httpStatus"], json!(400));
    assert!(upstream.requests().is_empty(), "the upstream was called");
}

#[test]
fn route_key_variable_that_is_unset_means_the_caller_must_send_one() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let var = unique("GATEWAY_TEST_UNSET_KEY_");
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")).api_key_env(&var))
        .start();
    let response = gw.post("/completions", &hi_request(&gw));
    assert_error(&response, 400, "Provider-API-Key");
    assert_ok(&post(&gw, "/completions", &hi_request(&gw)));
    assert_eq!(
        upstream.single_request().header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
}

#[test]
fn route_key_is_used_without_a_header_and_the_header_wins() {
    let recording = Recording::concat(&[simple_recording(), simple_recording()]);
    let upstream = OpenAiUpstream::replay(&recording);
    let var = unique("GATEWAY_TEST_ROUTE_KEY_");
    let route_key = unique("sk-route-");
    let mut gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")).api_key_env(&var))
        .env(&var, &route_key)
        .env("RUST_LOG", "debug")
        .start();
    assert_ok(&gw.post("/completions", &hi_request(&gw)));
    assert_ok(&post(&gw, "/completions", &hi_request(&gw)));
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {route_key}").as_str())
    );
    assert_eq!(
        requests[1].header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    gw.shutdown();
    let distinctive = &route_key["sk-route-".len()..];
    assert!(!gw.logs().contains(distinctive), "route key in the logs");
    assert!(
        !contains_bytes(&gw.db_bytes(), distinctive.as_bytes()),
        "route key in the database"
    );
}

// ---------------------------------------------------------------- request mapping

#[test]
fn variables_reach_the_upstream_substituted() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = gateway_for(&upstream, "/v1");
    let request = with(
        chat_request(
            &gw.project_id,
            ROUTE,
            "gpt-4o-mini",
            json!([
                {"role": "system", "content": "You are {{persona}}"},
                {"role": "user", "content": "Say {{word}} in {{lang}}, {{word}}!"}
            ]),
        ),
        "variables",
        json!({"persona": "a helpful assistant", "word": "hi", "lang": "Portuguese"}),
    );
    assert_ok(&post(&gw, "/completions", &request));
    let sent = upstream.single_request().json();
    let summaries: Vec<Value> = sent["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(message_summary)
        .collect();
    assert_eq!(
        summaries,
        [
            message_summary(&json!({"role": "system", "content": "You are a helpful assistant"})),
            message_summary(&json!({"role": "user", "content": "Say hi in Portuguese, hi!"}))
        ]
    );
}

#[test]
fn text_prompts_are_sent_as_one_user_message() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = gateway_for(&upstream, "/v1");
    let request = text_request(&gw.project_id, ROUTE, "gpt-4o-mini", "Say hi in Portuguese");
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["type"], json!("text"));
    assert_eq!(body["choices"][0]["text"], json!("Olá!"));
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/chat/completions");
    let messages = sent.json()["messages"].clone();
    assert_eq!(messages.as_array().map(Vec::len), Some(1), "{messages}");
    assert_eq!(messages[0]["role"], json!("user"));
    assert_eq!(messages[0]["content"], json!("Say hi in Portuguese"));
}

#[test]
fn params_pass_through_to_the_upstream() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = gateway_for(&upstream, "/v1");
    let mut request = hi_request(&gw);
    let params = &mut request["providerConfig"]["params"];
    params["temperature"] = json!(0.25);
    params["top_p"] = json!(0.5);
    params["max_tokens"] = json!(42);
    params["stop"] = json!(["\n\n", "END"]);
    params["presence_penalty"] = json!(0.1);
    params["frequency_penalty"] = json!(-0.2);
    params["seed"] = json!(7);
    params["n"] = json!(1);
    assert_ok(&post(&gw, "/completions", &request));
    let sent = upstream.single_request().json();
    for (key, value) in [
        ("temperature", json!(0.25)),
        ("top_p", json!(0.5)),
        ("max_tokens", json!(42)),
        ("stop", json!(["\n\n", "END"])),
        ("presence_penalty", json!(0.1)),
        ("frequency_penalty", json!(-0.2)),
        ("seed", json!(7)),
        ("n", json!(1)),
    ] {
        assert_eq!(sent[key], value, "{key} in {sent}");
    }
    assert!(
        sent.get("type").is_none(),
        "`type` is the gateway's: {sent}"
    );
}

#[test]
fn default_model_of_the_route_is_sent_when_params_have_none() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")).default_model("gpt-4o-mini"))
        .start();
    let request = json!({
        "projectId": gw.project_id,
        "messages": [{"role": "user", "content": "Say hi in Portuguese"}],
        "providerConfig": {"provider": ROUTE, "params": {"type": "chat"}}
    });
    assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(
        upstream.single_request().json()["model"],
        json!("gpt-4o-mini")
    );
}

#[test]
fn usage_is_absent_without_show_usage_and_cost_null_for_unknown_models() {
    let recording = Recording::concat(&[
        Recording::load("OpenAICompatible__llama-cpp-gpt-oss__simple"),
        Recording::load("OpenAICompatible__llama-cpp-gpt-oss__simple"),
    ]);
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = gateway_for(&upstream, "/v1");
    let request = chat_request(
        &gw.project_id,
        ROUTE,
        "a-model-nobody-prices",
        json!([{"role": "user", "content": "hi"}]),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert!(body.get("usage").is_none(), "{body}");
    assert!(body.get("usage_cost").is_none(), "{body}");

    let body = assert_ok(&post(
        &gw,
        "/completions",
        &with(request, "showUsage", json!(true)),
    ));
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 84, "completion_tokens": 47, "total_tokens": 131}),
        "{body}"
    );
    assert!(
        body.get("usage_cost").is_some_and(Value::is_null),
        "unknown price must be usage_cost: null: {body}"
    );
}

// ---------------------------------------------------------------- embeddings

#[test]
fn embeddings_of_a_string() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway_for(&upstream, "/v1");
    let request = embeddings_request(
        &gw.project_id,
        ROUTE,
        "text-embedding-3-small",
        json!("hello world"),
    );
    let body = assert_ok(&post(&gw, "/embeddings", &request));
    assert_eq!(body["type"], json!("embeddings"));
    assert_eq!(body["projectId"], json!(gw.project_id));
    assert_eq!(body["model"], json!("text-embedding-3-small"));
    assert_eq!(
        body["data"],
        json!([{"object": "embedding", "index": 0, "embedding": fake_embedding(0, "hello world")}])
    );
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    let sent = sent.json();
    assert_eq!(sent["model"], json!("text-embedding-3-small"));
    let input = match &sent["input"] {
        Value::String(s) => vec![s.clone()],
        other => serde_json::from_value::<Vec<String>>(other.clone()).expect("input list"),
    };
    assert_eq!(input, ["hello world"]);
}

#[test]
fn embeddings_of_an_array_come_back_sorted_by_index() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway_for(&upstream, "/v1");
    let inputs = ["first input", "second", "the third one"];
    let request = embeddings_request(
        &gw.project_id,
        ROUTE,
        "text-embedding-3-small",
        json!(inputs),
    );
    let body = assert_ok(&post(&gw, "/embeddings", &request));
    let expected: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(i, input)}))
        .collect();
    assert_eq!(body["data"], json!(expected));
    assert_eq!(upstream.single_request().json()["input"], json!(inputs));
    let id = body["invocationId"].as_str().expect("id");
    let record = gw.get_invocation(id).json();
    assert_eq!(record["type"], json!("embeddings"));
    assert_eq!(record["status"], json!("success"));
}

#[test]
fn embeddings_upstream_error_is_502() {
    let upstream = OpenAiUpstream::always(Reply::openai_error(
        500,
        "The server had an error",
        "server_error",
        None,
    ));
    let gw = gateway_for(&upstream, "/v1");
    let request = embeddings_request(&gw.project_id, ROUTE, "text-embedding-3-small", json!("x"));
    let response = post(&gw, "/embeddings", &request);
    assert_error(&response, 502, "");
    assert_eq!(
        response.json()["providerError"],
        json!("The server had an error")
    );
}

// ---------------------------------------------------------------- legacy completions

fn legacy_gateway(upstream: &OpenAiUpstream) -> Gateway {
    Gateway::builder()
        .route(
            Route::openai(ROUTE, &upstream.base_url("/v1")).setting("legacy_completions", "true"),
        )
        .start()
}

#[test]
fn legacy_completions_route_sends_text_to_completions() {
    let upstream = OpenAiUpstream::start();
    let gw = legacy_gateway(&upstream);
    let request = text_request(
        &gw.project_id,
        ROUTE,
        "gpt-3.5-turbo-instruct",
        "Once upon a time",
    );
    let body = assert_ok(&post(
        &gw,
        "/completions",
        &with(request, "showUsage", json!(true)),
    ));
    assert_eq!(body["type"], json!("text"));
    assert_eq!(
        body["choices"][0]["text"],
        json!(legacy_text("Once upon a time"))
    );
    assert_eq!(body["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9})
    );
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/completions");
    let sent = sent.json();
    assert_eq!(sent["model"], json!("gpt-3.5-turbo-instruct"));
    let prompt = match &sent["prompt"] {
        Value::Array(items) => items[0].clone(),
        other => other.clone(),
    };
    assert_eq!(prompt, json!("Once upon a time"));
    assert!(sent.get("messages").is_none(), "{sent}");
}

#[test]
fn legacy_completions_stream() {
    let upstream = OpenAiUpstream::start();
    let gw = legacy_gateway(&upstream);
    let request = with(
        text_request(&gw.project_id, ROUTE, "gpt-3.5-turbo-instruct", "tell me"),
        "stream",
        json!(true),
    );
    let response = post_stream(&gw, &request);
    let (partial, last) = split_stream(&response);
    assert_eq!(streamed_text(&partial, 0), legacy_text("tell me"));
    assert_eq!(last["choices"][0]["finish_reason"], json!("stop"));
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/completions");
    assert_eq!(sent.json()["stream"], json!(true));
}

// ---------------------------------------------------------------- upstream errors

fn failing_call(upstream: &OpenAiUpstream) -> (Gateway, Response) {
    let gw = gateway_for(upstream, "/v1");
    let response = post(&gw, "/completions", &hi_request(&gw));
    (gw, response)
}

fn check_upstream_failure(status: u16, message: &str, code: &str, expected_status: u16) {
    let upstream = OpenAiUpstream::always(Reply::openai_error(status, message, code, None));
    let (gw, response) = failing_call(&upstream);
    assert_provider_error(
        &gw,
        &response,
        expected_status,
        message,
        upstream.requests().len(),
    );
}

#[test]
fn upstream_401_is_502_with_provider_error() {
    check_upstream_failure(
        401,
        "Incorrect API key provided: sk-test-****6789.",
        "invalid_api_key",
        502,
    );
}

/// The caller asked for a model the provider does not have: the caller's 404 (issue 46 item 7).
#[test]
fn upstream_404_is_404_with_provider_error() {
    check_upstream_failure(
        404,
        "The model `gpt-9` does not exist or you do not have access to it.",
        "model_not_found",
        404,
    );
}

#[test]
fn upstream_500_is_502_with_provider_error() {
    check_upstream_failure(
        500,
        "The server had an error while processing your request.",
        "server_error",
        502,
    );
}

#[test]
fn upstream_429_is_429_with_retry_after() {
    let message = "Rate limit reached for gpt-4o-mini. Please try again in 7s.";
    let upstream = OpenAiUpstream::always(Reply::openai_error(
        429,
        message,
        "rate_limit_exceeded",
        Some("7"),
    ));
    let (gw, response) = failing_call(&upstream);
    let id = assert_error(&response, 429, "");
    assert_eq!(response.header("retry-after"), Some("7"));
    assert_eq!(response.json()["providerError"], json!(message));
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["httpStatus"], json!(429), "{record}");
    assert_eq!(record["status"], json!("error"), "{record}");
}

#[test]
fn upstream_429_without_retry_after_is_429() {
    let upstream = OpenAiUpstream::always(Reply::openai_error(
        429,
        "Slow down",
        "rate_limit_exceeded",
        None,
    ));
    let (_gw, response) = failing_call(&upstream);
    assert_error(&response, 429, "");
    assert!(response.header("retry-after").is_none());
}

#[test]
fn upstream_error_with_a_plain_text_body_is_502() {
    let upstream =
        OpenAiUpstream::always(Reply::raw(503, "application/json", "upstream overloaded\n"));
    let (_gw, response) = failing_call(&upstream);
    assert_error(&response, 502, "");
    assert_eq!(
        response.json()["providerError"],
        json!("upstream overloaded")
    );
}

#[test]
fn upstream_error_on_a_streaming_request_is_reported() {
    let upstream = OpenAiUpstream::always(Reply::openai_error(
        500,
        "The server had an error",
        "server_error",
        None,
    ));
    let gw = gateway_for(&upstream, "/v1");
    let response = post_stream(&gw, &with(hi_request(&gw), "stream", json!(true)));
    let id = if response.is_event_stream() {
        let last = response.frames.last().expect("an error frame");
        assert!(last["error"].is_string(), "{last}");
        last["invocationId"].as_str().expect("id").to_owned()
    } else {
        assert_eq!(response.status, 502, "{}", response.raw);
        let body = response.json();
        assert_eq!(body["providerError"], json!("The server had an error"));
        body["invocationId"].as_str().expect("id").to_owned()
    };
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(
        record["providerError"],
        json!("The server had an error"),
        "{record}"
    );
}

#[test]
fn upstream_that_never_answers_is_504() {
    let upstream = OpenAiUpstream::hang();
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")).timeout_secs(1))
        .start();
    let response = post(&gw, "/completions", &hi_request(&gw));
    let id = assert_error(&response, 504, "");
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["httpStatus"], json!(504), "{record}");
    assert_eq!(record["status"], json!("error"), "{record}");
}

// ---------------------------------------------------------------- stream lifecycle

#[test]
fn client_disconnect_mid_stream_cancels_and_records_cancelled() {
    let upstream =
        OpenAiUpstream::each_call(Reply::openai_slow_stream(50, Duration::from_millis(200)));
    let gw = gateway_for(&upstream, "/v1");
    let mut stream = open_stream_with_provider_key(
        &gw,
        PROVIDER_KEY,
        &with(hi_request(&gw), "stream", json!(true)),
    );
    assert_eq!(stream.status, 200);
    let first = stream.next_frame().expect("a first frame");
    let second = stream.next_frame().expect("a second frame");
    assert_eq!(streamed_text(&[first.clone(), second], 0), "w0 w1 ");
    let id = first["invocationId"].as_str().expect("id").to_owned();
    drop(stream);

    // The upstream call is cancelled, not left to run to its end.
    upstream.wait_until("the upstream stream to be dropped", |u| {
        u.aborted_streams() == 1
    });
    assert_eq!(upstream.finished_streams(), 0);
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("cancelled"));
    assert_eq!(record["stream"], json!(true), "{record}");
}

#[test]
fn sigterm_finishes_an_in_flight_stream_and_records_it() {
    let frames = 10;
    let upstream = OpenAiUpstream::each_call(Reply::openai_slow_stream(
        frames,
        Duration::from_millis(200),
    ));
    let mut gw = gateway_for(&upstream, "/v1");
    let mut stream = open_stream_with_provider_key(
        &gw,
        PROVIDER_KEY,
        &with(hi_request(&gw), "stream", json!(true)),
    );
    assert_eq!(stream.status, 200);
    let first = stream.next_frame().expect("a first frame");
    let id = first["invocationId"].as_str().expect("id").to_owned();

    gw.terminate();
    let mut all = vec![first];
    while let Some(frame) = stream.next_frame() {
        all.push(frame);
    }
    let last = all.last().expect("frames").clone();
    assert_eq!(last["completed"], json!(true), "stream cut short: {last}");
    let expected: String = (0..frames).map(slow_word).collect();
    assert_eq!(streamed_text(&all, 0), expected);

    let status = gw.wait_exit();
    assert!(status.success(), "exit status {status}");
    // The gateway has exited: the record must already be in the database.
    let line = gw
        .list_invocations(&[])
        .into_iter()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not recorded before the gateway exited"));
    assert!(line.split_whitespace().any(|c| c == "success"), "{line}");
    assert_eq!(gw.record(&id)["status"], json!("success"));
}

/// The SDK's proof: `examples/minimal-provider`, a whole provider in under 70
/// lines, serves the recorded OpenAI traffic with text, usage and cost, as a
/// plain answer and as a stream.
mod minimal_example {
    use super::*;

    const MINIMAL: &str = "min";

    fn gateway(recording: &Recording, upstream: &OpenAiUpstream) -> Gateway {
        let first = recording.interaction(0);
        let model = first.request_json()["model"]
            .as_str()
            .expect("model")
            .to_owned();
        Gateway::builder()
            .route(
                Route::new(MINIMAL, "minimal")
                    .base_url(&upstream.base_url(&first.base_path()))
                    .price(&model, PRICE.0, PRICE.1),
            )
            .start()
    }

    /// The recorded conversation as a request to the minimal route.
    fn request(gw: &Gateway, interaction: &Interaction) -> Value {
        let recorded = interaction.request_json();
        let mut body = chat_request_with_params(
            &gw.project_id,
            MINIMAL,
            json!({"type": "chat", "model": recorded["model"]}),
            convert_messages(&recorded["messages"], Style::Commonbase),
        );
        body["showUsage"] = json!(true);
        body
    }

    #[test]
    fn serves_a_chat_with_usage_and_cost() {
        let recording = Recording::load("OpenAI__openai-gpt-4o-mini__simple");
        let upstream = OpenAiUpstream::replay(&recording);
        let gw = gateway(&recording, &upstream);
        let interaction = recording.interaction(0);
        let expected = interaction.answer();
        let body = assert_ok(&post(&gw, "/completions", &request(&gw, interaction)));
        assert_chat_choice(&body, &expected.text, expected.finish_reason.as_deref());
        check_usage(&body, expected.usage, PRICE);
        let sent = upstream.single_request();
        assert_eq!(sent.path, interaction.path());
        let sent: Value = serde_json::from_slice(&sent.body).expect("JSON");
        assert_eq!(sent["messages"], interaction.request_json()["messages"]);
        assert_eq!(sent["stream"], json!(false));
        success_record(&gw, &body, MINIMAL, "minimal");
    }

    #[test]
    fn streams_a_chat_with_usage() {
        let recording = Recording::load("OpenAI__openai-gpt-4o-mini__simple_streaming");
        let upstream = OpenAiUpstream::replay(&recording);
        let gw = gateway(&recording, &upstream);
        let interaction = recording.interaction(0);
        let expected = interaction.answer();
        let mut body = request(&gw, interaction);
        body["stream"] = json!(true);
        let response = post_stream(&gw, &body);
        let (partial, last) = split_stream(&response);
        assert!(partial.len() > 1, "not streamed: {}", response.raw);
        assert_eq!(streamed_text(&partial, 0), expected.text);
        assert_stream_finished(&last, expected.finish_reason.as_deref());
        check_usage(&last, expected.usage, PRICE);
        let sent: Value = serde_json::from_slice(&upstream.single_request().body).expect("JSON");
        assert_eq!(sent["stream"], json!(true));
        assert_eq!(sent["stream_options"], json!({"include_usage": true}));
        streamed_record(&gw, &last);
    }

    #[test]
    fn sends_a_text_prompt_as_one_user_message() {
        let recording = Recording::load("OpenAI__openai-gpt-4o-mini__simple");
        let upstream = OpenAiUpstream::replay(&recording);
        let gw = gateway(&recording, &upstream);
        let expected = recording.interaction(0).answer();
        let model = recording.interaction(0).request_json()["model"].clone();
        let mut body = text_request(&gw.project_id, MINIMAL, "", "Say hi");
        body["providerConfig"]["params"]["model"] = model;
        let body = assert_ok(&post(&gw, "/completions", &body));
        assert_eq!(body["choices"][0]["text"], json!(expected.text));
        let sent: Value = serde_json::from_slice(&upstream.single_request().body).expect("JSON");
        assert_eq!(
            sent["messages"],
            json!([{"role": "user", "content": "Say hi"}])
        );
    }
}
