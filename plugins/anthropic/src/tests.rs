//! Unit tests of the pure mapping functions, partly against real recorded Anthropic traffic.

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::{
    Audio, Chunk, Completion, CompletionRequest, Document, EmbeddingRequest, FinishReason,
    FunctionCall, FunctionChoice, FunctionDef, Image, Message, Part, Prompt, Provider,
    ProviderError, Reasoning, ReasoningConfig, ReasoningEffort, Role, Route, Sink, Source,
    ToolCall, Usage, read_completion, read_stream,
};
use gateway_test_support::fixtures::{
    calling, failed, invalid_request, message as msg, named, upstream,
};
use gateway_test_support::recording::recording;
use serde_json::{Value, json};

use crate::Anthropic;
use crate::convert::{
    DEFAULT_MAX_TOKENS, Settings, caller_params, chat, message_body, messages_url, tool_choice,
    tools, upstream_request,
};
use crate::stream::{Decoder, finish_reason, usage};
use crate::wire::WireUsage;

// ---------------------------------------------------------------------------------------------
// Helpers

fn route(settings: &str) -> Route {
    Route {
        id: "claude".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: Some("sk-ant-test".into()),
        settings: settings.into(),
        secrets: Vec::new(),
    }
}

fn request(prompt: Prompt) -> CompletionRequest {
    CompletionRequest {
        route: route("{}"),
        model: "claude-sonnet-4-20250514".into(),
        prompt,
        functions: Vec::new(),
        function_choice: None,
        reasoning: None,
        output: gateway_plugin_sdk::OutputLimit::NONE,
        params: "{}".into(),
    }
}

fn tool_call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn weather_function() -> FunctionDef {
    FunctionDef {
        name: "weather".into(),
        description: Some("Get weather information for a location".into()),
        parameters: Some(
            r#"{"properties":{"location":{"description":"the city","type":"string"}},"required":["location"],"type":"object"}"#
                .into(),
        ),
    }
}

fn body(request: &CompletionRequest, stream: bool) -> Value {
    Value::Object(message_body(request, &Settings::default(), stream).expect("body builds"))
}

/// The `messages` and `system` of a chat, as JSON.
fn chat_json(messages: &[Message]) -> (Value, Option<String>) {
    let conversation = chat(messages).expect("conversation maps");
    (
        serde_json::to_value(&conversation.messages).expect("serializes"),
        conversation.system,
    )
}

/// What a stream replay produced: the chunks to send, in order, and the final completion.
struct Replayed {
    chunks: Vec<Chunk>,
    completion: Completion,
}

impl Replayed {
    fn text(&self) -> String {
        self.chunks
            .iter()
            .flat_map(|c| &c.deltas)
            .map(|d| d.text.as_str())
            .collect()
    }

    fn usages(&self) -> Vec<Usage> {
        self.chunks.iter().filter_map(|c| c.usage).collect()
    }
}

/// Reads an SSE body through the SDK's stream driver, arriving in small pieces (to cross chunk
/// boundaries the way a network does).
fn replay_stream(body: &str) -> Result<Replayed, ProviderError> {
    let mut sink = Sink::buffered();
    let response = http_response(200, "text/event-stream", body, 7);
    let completion = read_stream(response, &mut sink, "requested-model", Decoder::default())?;
    Ok(Replayed {
        chunks: sink.sent().to_vec(),
        completion,
    })
}

/// Reads a non-streamed answer through the SDK's driver.
fn parse_completion(body: &[u8], requested_model: &str) -> Result<Completion, ProviderError> {
    let response = Response::from_chunks(200, Vec::new(), vec![body.to_vec()]);
    read_completion(response, requested_model, Decoder::default())
}

/// An SSE body of `(event name, data)` pairs.
fn stream_of(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

fn message_start(usage: Value) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage}}),
    )
}

fn text_events(index: u32, pieces: &[&str]) -> Vec<(&'static str, Value)> {
    let mut events = vec![(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )];
    for piece in pieces {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    ));
    events
}

fn message_end(stop_reason: &str, usage: Value) -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": usage}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

fn http_response(status: u16, content_type: &str, body: &str, chunk_size: usize) -> Response {
    Response::from_chunks(
        status,
        vec![("Content-Type".into(), content_type.into())],
        body.as_bytes()
            .chunks(chunk_size.max(1))
            .map(<[u8]>::to_vec)
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------------
// Recorded traffic (go-vcr YAML, read by `gateway_test_support`)

const RECORDINGS: &[&str] = &[
    "Anthropic__claude-sonnet-4__simple",
    "Anthropic__claude-sonnet-4__simple_streaming",
    "Anthropic__claude-sonnet-4__tool",
    "Anthropic__claude-sonnet-4__tool_streaming",
    "Anthropic__claude-sonnet-4__multi_tool",
    "Anthropic__claude-sonnet-4__multi_tool_streaming",
];

// ---------------------------------------------------------------------------------------------
// info and embeddings

#[test]
fn info_lists_models_with_list_prices() {
    let info = Anthropic::info();
    assert_eq!(info.name, "anthropic");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let expected = [
        ("claude-opus-4-1", 15.0, 75.0),
        ("claude-opus-4", 15.0, 75.0),
        ("claude-sonnet-4-5", 3.0, 15.0),
        ("claude-sonnet-4", 3.0, 15.0),
        ("claude-3-7-sonnet", 3.0, 15.0),
        ("claude-haiku-4-5", 1.0, 5.0),
        ("claude-3-5-haiku", 0.8, 4.0),
        ("claude-3-haiku", 0.25, 1.25),
    ];
    assert_eq!(info.models.len(), expected.len());
    for (model, input, output) in expected {
        let price = info
            .models
            .iter()
            .find(|p| p.model == model)
            .unwrap_or_else(|| panic!("{model} missing"));
        assert_eq!(
            (price.input_per_mtok, price.output_per_mtok),
            (input, output)
        );
    }
}

#[test]
fn embeddings_are_not_offered() {
    let result = Anthropic::embed(EmbeddingRequest {
        route: route("{}"),
        model: "claude-sonnet-4-5".into(),
        input: vec!["x".into()],
        params: "{}".into(),
    });
    let message = invalid_request(result);
    assert!(message.contains("anthropic"), "{message}");
}

// ---------------------------------------------------------------------------------------------
// Requests

#[test]
fn text_prompt_is_one_user_message_with_default_max_tokens() {
    let mut req = request(Prompt::Text("Say hi".into()));
    req.params = r#"{"temperature":0.2,"top_p":0.9,"top_k":5,"metadata":{"user_id":"u1"},
        "future_param":{"x":1},
        "model":"evil","messages":[],"system":"evil","stream":true,"tools":[],"tool_choice":{"type":"any"}}"#
        .into();
    assert_eq!(
        body(&req, false),
        json!({
            "model": "claude-sonnet-4-20250514",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hi"}]}],
            "temperature": 0.2,
            "top_p": 0.9,
            "top_k": 5,
            "metadata": {"user_id": "u1"},
            "future_param": {"x": 1},
        })
    );
    assert_eq!(DEFAULT_MAX_TOKENS, 4096);
}

#[test]
fn streaming_body_asks_for_a_stream() {
    let mut req = request(Prompt::Text("Say hi".into()));
    req.params = r#"{"stream":false}"#.into();
    assert_eq!(body(&req, true)["stream"], json!(true));
    assert!(body(&req, false).get("stream").is_none());
}

/// The caller's params mapped by `caller_params` on the route `claude`, as JSON.
fn mapped(params: &str, default_max_tokens: u64) -> Result<Value, ProviderError> {
    let params = caller_params(params, "claude", default_max_tokens)?;
    Ok(Value::Object(params.body))
}

/// The refusal of `params` by the whole body's mapping, checked to name the route and `param`.
fn refusal(params: &str, param: &str) -> String {
    let mut req = request(Prompt::Text("x".into()));
    req.params = params.into();
    let message = invalid_request(message_body(&req, &Settings::default(), false));
    assert!(
        message.starts_with(&format!("route `claude`: {param}")),
        "{params}: {message}"
    );
    message
}

#[test]
fn legacy_parameter_names_are_translated() {
    let params = mapped(
        r#"{"max_tokens_to_sample":300,"stop_sequences":["\n\nHuman:"],"stop":"END","top_k":3}"#,
        4096,
    )
    .expect("params");
    assert_eq!(
        params,
        json!({"max_tokens": 300, "stop_sequences": ["\n\nHuman:", "END"], "top_k": 3})
    );

    // `max_tokens` wins over the legacy name; a single stop string becomes a list; duplicates go.
    let params = mapped(
        r#"{"max_tokens":50,"max_tokens_to_sample":300,"stop":["a","b"],"stop_sequences":"a"}"#,
        4096,
    )
    .expect("params");
    assert_eq!(
        params,
        json!({"max_tokens": 50, "stop_sequences": ["a", "b"]})
    );

    // Nulls count as absent.
    let params = mapped(
        r#"{"max_tokens":null,"max_tokens_to_sample":null,"stop":null}"#,
        1000,
    )
    .expect("params");
    assert_eq!(params, json!({"max_tokens": 1000}));

    for bad in [r#"{"stop":5}"#, r#"{"stop_sequences":["a",1]}"#] {
        let message = invalid_request(mapped(bad, 4096));
        assert!(message.starts_with("route `claude`: stop"), "{message}");
    }
    invalid_request(mapped("[1]", 4096));
    assert_eq!(
        mapped("", 7).expect("empty params"),
        json!({"max_tokens": 7})
    );
}

#[test]
fn max_completion_tokens_is_max_tokens_when_that_is_absent() {
    let max = |params: &str| mapped(params, 4096).expect("params");
    assert_eq!(
        max(r#"{"max_completion_tokens":300}"#),
        json!({"max_tokens": 300})
    );
    assert_eq!(
        max(r#"{"max_tokens":null,"max_completion_tokens":300,"max_tokens_to_sample":20}"#),
        json!({"max_tokens": 300})
    );
    // `max_tokens` is Anthropic's own name, so it wins; the other name never reaches Anthropic.
    assert_eq!(
        max(r#"{"max_tokens":50,"max_completion_tokens":300}"#),
        json!({"max_tokens": 50})
    );
    assert_eq!(
        max(r#"{"max_completion_tokens":null}"#),
        json!({"max_tokens": DEFAULT_MAX_TOKENS})
    );
}

/// OpenAI params whose value asks for what Anthropic does anyway, and `seed` and `stream_options`,
/// never reach Anthropic (which would refuse the unknown fields); its own fields pass.
#[test]
fn openai_params_asking_for_defaults_are_dropped() {
    let mut req = request(Prompt::Text("Say hi".into()));
    req.params = r#"{"n":1,"seed":42,"response_format":{"type":"text"},
        "presence_penalty":0,"frequency_penalty":0.0,"logprobs":false,"top_logprobs":0,
        "logit_bias":{},"parallel_tool_calls":true,"stream_options":{"include_usage":true},
        "temperature":0.5,"top_p":0.9,"top_k":10,"thinking":{"type":"enabled","budget_tokens":2048},
        "service_tier":"auto","metadata":{"user_id":"u1"}}"#
        .into();
    let expected = json!({
        "model": "claude-sonnet-4-20250514",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hi"}]}],
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 10,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "service_tier": "auto",
        "metadata": {"user_id": "u1"},
    });
    assert_eq!(body(&req, false), expected);

    req.params = r#"{"n":null,"seed":null,"response_format":null,"presence_penalty":null,
        "frequency_penalty":null,"logprobs":null,"top_logprobs":null,"logit_bias":null,
        "parallel_tool_calls":null,"stream_options":null,"max_completion_tokens":null,"user":null}"#
        .into();
    let sent = upstream_request(&req, true).expect("request");
    let sent: Value = serde_json::from_slice(sent.body_bytes()).expect("JSON body");
    assert_eq!(
        sent,
        json!({
            "model": "claude-sonnet-4-20250514",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hi"}]}],
            "stream": true,
        })
    );
}

#[test]
fn openai_params_anthropic_cannot_honor_are_refused() {
    for (params, param) in [
        (r#"{"n":2}"#, "n = 2"),
        (r#"{"n":0}"#, "n = 0"),
        (
            r#"{"response_format":{"type":"json_object"}}"#,
            r#"response_format of type "json_object""#,
        ),
        (
            r#"{"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}"#,
            r#"response_format of type "json_schema""#,
        ),
        (r#"{"response_format":"json"}"#, "response_format"),
        (r#"{"presence_penalty":0.5}"#, "presence_penalty = 0.5"),
        (r#"{"frequency_penalty":-1}"#, "frequency_penalty = -1"),
        (r#"{"logprobs":true}"#, "logprobs = true"),
        (r#"{"top_logprobs":5}"#, "top_logprobs = 5"),
        (r#"{"logit_bias":{"50256":-100}}"#, "logit_bias"),
        (r#"{"parallel_tool_calls":"no"}"#, "parallel_tool_calls"),
        (r#"{"user":42}"#, "user"),
    ] {
        let message = refusal(params, param);
        if !param.starts_with("parallel") && !param.starts_with("user") {
            assert!(
                message.contains("is not supported by Anthropic's Messages API"),
                "{message}"
            );
        }
    }
    assert_eq!(
        refusal(r#"{"n":3}"#, "n"),
        "route `claude`: n = 3 is not supported by Anthropic's Messages API (it answers with one \
         choice; leave n out or set it to 1)"
    );
    // The refusal reaches the caller as it is: the upstream request is never built.
    let mut req = request(Prompt::Text("x".into()));
    req.params = r#"{"logprobs":true}"#.into();
    invalid_request(upstream_request(&req, false));
}

#[test]
fn user_becomes_metadata_user_id() {
    let sent = |params: &str| mapped(params, 10).expect("params");
    assert_eq!(
        sent(r#"{"user":"user-123"}"#),
        json!({"max_tokens": 10, "metadata": {"user_id": "user-123"}})
    );
    assert_eq!(
        sent(r#"{"user":"user-123","metadata":null}"#),
        json!({"max_tokens": 10, "metadata": {"user_id": "user-123"}})
    );
    assert_eq!(
        sent(r#"{"user":"user-123","metadata":{"user_id":null}}"#),
        json!({"max_tokens": 10, "metadata": {"user_id": "user-123"}})
    );
    // The caller's own `metadata.user_id` is the more specific ask.
    assert_eq!(
        sent(r#"{"user":"user-123","metadata":{"user_id":"anthropic-id"}}"#),
        json!({"max_tokens": 10, "metadata": {"user_id": "anthropic-id"}})
    );
    assert_eq!(sent(r#"{"user":""}"#), json!({"max_tokens": 10}));
}

#[test]
fn parallel_tool_calls_false_allows_one_tool_call() {
    let mut req = request(Prompt::Text("x".into()));
    req.params = r#"{"parallel_tool_calls":false}"#.into();
    // Without tools there is no call to limit, and Anthropic refuses `tool_choice` alone.
    let without = body(&req, false);
    assert!(without.get("tool_choice").is_none(), "{without}");
    assert!(without.get("parallel_tool_calls").is_none(), "{without}");

    req.functions = vec![weather_function()];
    let choice = |req: &CompletionRequest| body(req, false).get("tool_choice").cloned();
    assert_eq!(
        choice(&req),
        Some(json!({"type": "auto", "disable_parallel_tool_use": true}))
    );
    for (function_choice, expected) in [
        (
            FunctionChoice::Auto,
            json!({"type": "auto", "disable_parallel_tool_use": true}),
        ),
        (
            FunctionChoice::Required,
            json!({"type": "any", "disable_parallel_tool_use": true}),
        ),
        (
            FunctionChoice::Named("weather".into()),
            json!({"type": "tool", "name": "weather", "disable_parallel_tool_use": true}),
        ),
        // `none` calls no tool and has no such field.
        (FunctionChoice::None, json!({"type": "none"})),
    ] {
        req.function_choice = Some(function_choice);
        assert_eq!(choice(&req), Some(expected));
    }
    assert!(body(&req, false).get("parallel_tool_calls").is_none());

    // `true` is Anthropic's default: nothing is added.
    req.params = r#"{"parallel_tool_calls":true}"#.into();
    req.function_choice = None;
    assert_eq!(choice(&req), None);
    req.function_choice = Some(FunctionChoice::Required);
    assert_eq!(choice(&req), Some(json!({"type": "any"})));
}

#[test]
fn route_settings_are_checked() {
    let settings = |text: &str| route(text).settings::<Settings>();
    for empty in ["", "{}", r#"{"default_max_tokens":null}"#] {
        assert_eq!(
            settings(empty).expect("empty settings"),
            Settings::default()
        );
    }
    let mut req = request(Prompt::Text("x".into()));
    req.route = route(r#"{"default_max_tokens":1024}"#);
    let sent = upstream_request(&req, false).expect("request");
    let sent: Value = serde_json::from_slice(sent.body_bytes()).expect("JSON body");
    assert_eq!(sent["max_tokens"], json!(1024));
    for bad in [
        r#"{"default_max_tokens":0}"#,
        r#"{"default_max_tokens":"many"}"#,
        r#"{"default_max_tokens":-5}"#,
    ] {
        let message = failed(settings(bad));
        assert!(
            message.starts_with("route `claude`: setting `default_max_tokens`: "),
            "{message}"
        );
    }
    // A misspelt or unknown setting is refused rather than ignored.
    let message = failed(settings(r#"{"default_max_tokens":1024,"other":true}"#));
    assert!(
        message.starts_with("route `claude`: setting `other`: unknown field"),
        "{message}"
    );
    req.route = route(r#"{"max_tokens":10}"#);
    failed(upstream_request(&req, false));
}

#[test]
fn base_url_is_required_and_its_trailing_slash_dropped() {
    let mut r = route("{}");
    r.base_url = "https://api.anthropic.com/v1/".into();
    assert_eq!(
        messages_url(&r).expect("url"),
        "https://api.anthropic.com/v1/messages"
    );
    r.base_url = " ".into();
    let message = failed(messages_url(&r));
    assert!(message.contains("base_url"), "{message}");
}

#[test]
fn system_messages_become_the_system_field_and_roles_alternate() {
    let messages = [
        msg(Role::System, "Be brief."),
        msg(Role::User, "Hi"),
        named(Role::User, "ann", "Still there?"),
        msg(Role::System, "Answer in Portuguese."),
        msg(Role::Assistant, "Olá"),
        msg(Role::Assistant, ""),
        Message {
            parts: Vec::new(),
            ..msg(Role::User, "")
        },
        msg(Role::Assistant, "Tudo bem?"),
        msg(Role::System, ""),
    ];
    let (json, system) = chat_json(&messages);
    assert_eq!(
        system.as_deref(),
        Some("Be brief.\n\nAnswer in Portuguese.")
    );
    assert_eq!(
        json,
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Still there?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Olá"}, {"type": "text", "text": "Tudo bem?"}]},
        ])
    );

    let (_, system) = chat_json(&[msg(Role::User, "x")]);
    assert_eq!(system, None);
    let req = request(Prompt::Chat(vec![msg(Role::User, "x")]));
    assert!(body(&req, false).get("system").is_none());
}

#[test]
fn a_prompt_without_content_is_refused() {
    let message = invalid_request(chat(&[msg(Role::System, "only a system prompt")]));
    assert!(message.contains("at least one"), "{message}");
    let req = request(Prompt::Text(String::new()));
    invalid_request(message_body(&req, &Settings::default(), false));
}

#[test]
fn legacy_function_call_becomes_tool_use_answered_by_tool_result() {
    let messages = [
        msg(Role::User, "Weather in Florence?"),
        calling("weather", r#"{"location":"Florence"}"#),
        named(Role::Function, "weather", "40 C"),
        msg(Role::Assistant, "It is hot."),
        msg(Role::User, "And in Rome?"),
        calling("weather", r#" {"location":"Rome"} "#),
        named(Role::Function, "weather", ""),
    ];
    let (json, _) = chat_json(&messages);
    assert_eq!(
        json,
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather in Florence?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_gw_0", "name": "weather", "input": {"location": "Florence"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_gw_0", "content": [{"type": "text", "text": "40 C"}]}]},
            {"role": "assistant", "content": [{"type": "text", "text": "It is hot."}]},
            {"role": "user", "content": [{"type": "text", "text": "And in Rome?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_gw_1", "name": "weather", "input": {"location": "Rome"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gw_1"}]},
        ])
    );
}

#[test]
fn results_answer_open_calls_by_name_in_order_and_come_first() {
    let assistant = Message {
        parts: vec![Part::Text("Let me compute.".into())],
        tool_calls: vec![
            tool_call("a1", "add", r#"{"a":2,"b":3}"#),
            tool_call("m1", "multiply", r#"{"a":2,"b":3}"#),
            tool_call("a2", "add", ""),
        ],
        // Commonbase clients echo function_call = first tool call; tool_calls win.
        function_call: Some(FunctionCall {
            name: "add".into(),
            arguments: "{}".into(),
        }),
        ..msg(Role::Assistant, "")
    };
    let messages = [
        msg(Role::User, "go"),
        assistant,
        named(Role::Function, "multiply", "6"),
        named(Role::Tool, "add", "5"),
        msg(Role::User, "thanks, and?"),
        Message {
            tool_call_id: Some("a2".into()),
            ..msg(Role::Tool, "7")
        },
    ];
    let (json, _) = chat_json(&messages);
    assert_eq!(json.as_array().map(Vec::len), Some(3), "{json}");
    assert_eq!(
        json[1]["content"],
        json!([
            {"type": "text", "text": "Let me compute."},
            {"type": "tool_use", "id": "a1", "name": "add", "input": {"a": 2, "b": 3}},
            {"type": "tool_use", "id": "m1", "name": "multiply", "input": {"a": 2, "b": 3}},
            {"type": "tool_use", "id": "a2", "name": "add", "input": {}},
        ])
    );
    let results: Vec<(&str, &str)> = json[2]["content"]
        .as_array()
        .expect("blocks")
        .iter()
        .map(|b| {
            (
                b["type"].as_str().unwrap_or_default(),
                b["tool_use_id"]
                    .as_str()
                    .or(b["text"].as_str())
                    .unwrap_or_default(),
            )
        })
        .collect();
    // One user message; Anthropic wants the results before any text.
    assert_eq!(
        results,
        [
            ("tool_result", "m1"),
            ("tool_result", "a1"),
            ("tool_result", "a2"),
            ("text", "thanks, and?"),
        ]
    );
}

#[test]
fn results_without_a_call_to_answer_are_refused() {
    let message = invalid_request(chat(&[
        msg(Role::User, "hi"),
        named(Role::Function, "weather", "40 C"),
    ]));
    assert!(message.contains("messages[1]"), "{message}");
    let message = invalid_request(chat(&[
        calling("weather", "{}"),
        named(Role::Function, "weather", "1"),
        named(Role::Function, "weather", "2"),
    ]));
    assert!(message.contains("messages[2]"), "{message}");
    let message = invalid_request(chat(&[msg(Role::Tool, "3")]));
    assert!(message.contains("tool_call_id"), "{message}");
}

#[test]
fn call_arguments_must_be_a_json_object() {
    for bad in ["[1,2]", "{nope", "\"text\""] {
        let message = invalid_request(chat(&[msg(Role::User, "x"), calling("weather", bad)]));
        assert!(message.contains("messages[1]"), "{message}");
    }
}

#[test]
fn foreign_call_ids_are_made_acceptable_on_both_sides() {
    let messages = [
        msg(Role::User, "x"),
        Message {
            tool_calls: vec![tool_call("functions.weather:0", "weather", "{}")],
            ..msg(Role::Assistant, "")
        },
        Message {
            tool_call_id: Some("functions.weather:0".into()),
            ..msg(Role::Tool, "ok")
        },
    ];
    let (json, _) = chat_json(&messages);
    assert_eq!(json[1]["content"][0]["id"], json!("functions_weather_0"));
    assert_eq!(
        json[2]["content"][0]["tool_use_id"],
        json!("functions_weather_0")
    );
}

#[test]
fn functions_become_tools_and_function_choice_tool_choice() {
    let functions = [
        weather_function(),
        FunctionDef {
            name: "noop".into(),
            description: None,
            parameters: None,
        },
        FunctionDef {
            name: "untyped".into(),
            description: Some(String::new()),
            parameters: Some(r#"{"properties":{}}"#.into()),
        },
    ];
    assert_eq!(
        serde_json::to_value(tools(&functions).expect("tools")).expect("json"),
        json!([
            {"name": "weather", "description": "Get weather information for a location",
                "input_schema": {"properties": {"location": {"description": "the city", "type": "string"}},
                    "required": ["location"], "type": "object"}},
            {"name": "noop", "input_schema": {"type": "object"}},
            {"name": "untyped", "input_schema": {"type": "object", "properties": {}}},
        ])
    );
    assert_eq!(tool_choice(&FunctionChoice::None), json!({"type": "none"}));
    assert_eq!(tool_choice(&FunctionChoice::Auto), json!({"type": "auto"}));
    assert_eq!(
        tool_choice(&FunctionChoice::Required),
        json!({"type": "any"})
    );
    assert_eq!(
        tool_choice(&FunctionChoice::Named("weather".into())),
        json!({"type": "tool", "name": "weather"})
    );

    for (bad, needle) in [("{nope", "not valid JSON"), ("[1]", "JSON Schema object")] {
        let functions = [FunctionDef {
            parameters: Some(bad.into()),
            ..weather_function()
        }];
        let message = invalid_request(tools(&functions));
        assert!(
            message.contains("functions[0].parameters") && message.contains(needle),
            "{message}"
        );
    }
}

#[test]
fn tool_choice_travels_only_with_tools() {
    let mut req = request(Prompt::Text("x".into()));
    req.function_choice = Some(FunctionChoice::Required);
    let without = body(&req, false);
    assert!(without.get("tools").is_none() && without.get("tool_choice").is_none());
    req.functions = vec![weather_function()];
    req.function_choice = Some(FunctionChoice::Named("weather".into()));
    let with = body(&req, false);
    assert_eq!(with["tools"][0]["name"], json!("weather"));
    assert_eq!(
        with["tool_choice"],
        json!({"type": "tool", "name": "weather"})
    );
    req.function_choice = None;
    assert!(body(&req, false).get("tool_choice").is_none());
}

/// The second request of the multi-tool recording carries the whole tool conversation; the same
/// conversation in the gateway's types must map to the same `messages` and `tools`.
#[test]
fn multi_tool_conversation_matches_the_recorded_request() {
    let interactions = recording("Anthropic__claude-sonnet-4__multi_tool");
    let recorded: Value = interactions[1].request_json();
    let parameters = r#"{"properties":{"a":{"description":"first number","type":"integer"},"b":{"description":"second number","type":"integer"}},"required":["a","b"],"type":"object"}"#;
    let system = "You are a helpful assistant. CRITICAL: Always use both add and multiply at the same time ALWAYS.";
    let mut req = request(Prompt::Chat(vec![
        msg(Role::System, system),
        msg(Role::User, "Add and multiply the number 2 and 3"),
        Message {
            tool_calls: vec![
                tool_call(
                    "toolu_01StBeRxDEwsqcc3arbDgpS9",
                    "add",
                    r#"{"a": 2, "b": 3}"#,
                ),
                tool_call(
                    "toolu_01AC6WQhj2iRkdYHgTAGMpVQ",
                    "multiply",
                    r#"{"a": 2, "b": 3}"#,
                ),
            ],
            ..msg(
                Role::Assistant,
                "I'll add and multiply the numbers 2 and 3 for you.",
            )
        },
        named(Role::Function, "add", "5"),
        Message {
            tool_call_id: Some("toolu_01AC6WQhj2iRkdYHgTAGMpVQ".into()),
            ..msg(Role::Tool, "6")
        },
    ]));
    req.functions = ["add", "multiply"]
        .iter()
        .map(|name| FunctionDef {
            name: (*name).into(),
            description: Some(format!(
                "{} two numbers",
                if *name == "add" { "Add" } else { "Multiply" }
            )),
            parameters: Some(parameters.into()),
        })
        .collect();
    req.function_choice = Some(FunctionChoice::Auto);
    req.params = r#"{"max_tokens":4000}"#.into();

    let ours = body(&req, false);
    assert_eq!(ours["messages"], recorded["messages"]);
    assert_eq!(ours["tools"], recorded["tools"]);
    assert_eq!(ours["model"], recorded["model"]);
    assert_eq!(ours["max_tokens"], recorded["max_tokens"]);
    // The recording sends the system prompt as one text block; a string is the same prompt.
    assert_eq!(
        recorded["system"],
        json!([{"type": "text", "text": system}])
    );
    assert_eq!(ours["system"], json!(system));
    // The recording spells out the default `disable_parallel_tool_use: false`.
    assert_eq!(recorded["tool_choice"]["type"], json!("auto"));
    assert_eq!(ours["tool_choice"], json!({"type": "auto"}));
}

// ---------------------------------------------------------------------------------------------
// Responses

#[test]
fn stop_reasons_map() {
    assert_eq!(finish_reason("end_turn", None), FinishReason::Stop);
    assert_eq!(
        finish_reason("stop_sequence", Some("END")),
        FinishReason::StopSequence("END".into())
    );
    assert_eq!(finish_reason("stop_sequence", None), FinishReason::Stop);
    assert_eq!(finish_reason("max_tokens", None), FinishReason::Length);
    assert_eq!(
        finish_reason("model_context_window_exceeded", None),
        FinishReason::Length
    );
    assert_eq!(finish_reason("tool_use", None), FinishReason::ToolCalls);
    assert_eq!(finish_reason("refusal", None), FinishReason::Refusal);
    assert_eq!(finish_reason("pause_turn", None), FinishReason::Pause);
    assert_eq!(finish_reason("something_new", None), FinishReason::Other);
}

#[test]
fn usage_counts_cached_tokens_as_prompt_tokens() {
    let wire: WireUsage = serde_json::from_value(json!({
        "input_tokens": 100, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1000,
        "output_tokens": 50, "service_tier": "standard"
    }))
    .expect("usage");
    assert_eq!(
        usage(&wire),
        Usage {
            prompt_tokens: 1300,
            completion_tokens: 50,
            total_tokens: 1350,
            cached_prompt_tokens: Some(1000),
            cache_creation_tokens: Some(200),
            reasoning_tokens: None,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        }
    );
    let wire: WireUsage = serde_json::from_value(
        json!({"input_tokens": 7.0, "output_tokens": null, "cache_read_input_tokens": "x"}),
    )
    .expect("lenient usage");
    assert_eq!(
        usage(&wire),
        Usage {
            prompt_tokens: 7,
            completion_tokens: 0,
            total_tokens: 7,
            cached_prompt_tokens: None,
            cache_creation_tokens: None,
            reasoning_tokens: None,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        }
    );
}

#[test]
fn simple_recorded_answer_parses() {
    let interactions = recording("Anthropic__claude-sonnet-4__simple");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "asked").expect("parses");
    assert_eq!(completion.model, "claude-sonnet-4-20250514");
    assert_eq!(completion.choices.len(), 1);
    let choice = &completion.choices[0];
    assert_eq!(
        choice.text,
        "Olá! \n\n(That's \"hello\" in Portuguese. You could also say \"Oi!\" for a more casual \"hi!\")"
    );
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    assert!(choice.function_call.is_none() && choice.tool_calls.is_empty());
    assert_eq!(
        completion.usage,
        Some(Usage {
            prompt_tokens: 16,
            completion_tokens: 34,
            total_tokens: 50,
            cached_prompt_tokens: Some(0),
            cache_creation_tokens: Some(0),
            reasoning_tokens: None,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        })
    );
}

#[test]
fn tool_answer_has_tool_calls_and_function_call() {
    let interactions = recording("Anthropic__claude-sonnet-4__tool");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "asked").expect("parses");
    let choice = &completion.choices[0];
    assert_eq!(
        choice.text,
        "I'll check the weather in Florence, Italy for you."
    );
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        choice.tool_calls,
        [tool_call(
            "toolu_01XLb9pzgfLa2EMyqWot6Ezt",
            "weather",
            r#"{"location":"Florence,Italy"}"#
        )]
    );
    assert_eq!(
        choice.function_call,
        Some(FunctionCall {
            name: "weather".into(),
            arguments: r#"{"location":"Florence,Italy"}"#.into(),
        })
    );
    let final_answer =
        parse_completion(interactions[1].response.body.as_bytes(), "asked").expect("parses");
    assert_eq!(
        final_answer.choices[0].finish_reason,
        Some(FinishReason::Stop)
    );
    assert!(final_answer.choices[0].text.contains("40°C"));
}

#[test]
fn parallel_tool_uses_stay_separate() {
    let interactions = recording("Anthropic__claude-sonnet-4__multi_tool");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "asked").expect("parses");
    let calls = &completion.choices[0].tool_calls;
    assert_eq!(
        calls,
        &[
            tool_call("toolu_01StBeRxDEwsqcc3arbDgpS9", "add", r#"{"a":2,"b":3}"#),
            tool_call(
                "toolu_01AC6WQhj2iRkdYHgTAGMpVQ",
                "multiply",
                r#"{"a":2,"b":3}"#
            ),
        ]
    );
    assert_eq!(
        completion.choices[0]
            .function_call
            .as_ref()
            .map(|f| f.name.as_str()),
        Some("add")
    );
}

#[test]
fn other_blocks_are_not_answer_text_and_missing_ids_are_made_up() {
    let body = json!({
        "type": "message", "model": "", "role": "assistant", "stop_reason": "max_tokens",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "abc"},
            {"type": "text", "text": "Part one, "},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "text", "text": "part two."},
            {"type": "tool_use", "name": "noop", "input": null}
        ]
    });
    let completion = parse_completion(body.to_string().as_bytes(), "claude-x").expect("parses");
    assert_eq!(completion.model, "claude-x");
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "Part one, part two.");
    assert_eq!(choice.finish_reason, Some(FinishReason::Length));
    // The SDK names a call without an id after its choice and position.
    assert_eq!(choice.tool_calls, [tool_call("call_0_0", "noop", "{}")]);
    assert_eq!(completion.usage, None);
}

#[test]
fn an_error_body_with_a_success_status_is_an_upstream_error() {
    let body = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let error = upstream(parse_completion(body, "m"));
    assert_eq!((error.status, error.message.as_str()), (529, "Overloaded"));
}

#[test]
fn malformed_answers_fail_clearly() {
    for body in [&b"not json"[..], b"{\"content\": 5}", b""] {
        let message = failed(parse_completion(body, "m"));
        assert!(
            message.starts_with("malformed response from upstream: "),
            "{message}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Streams

#[test]
fn recorded_text_stream_is_forwarded_piece_by_piece_with_usage() {
    let interactions = recording("Anthropic__claude-sonnet-4__simple_streaming");
    let replayed = replay_stream(&interactions[0].response.body).expect("stream");
    let completion = &replayed.completion;
    assert_eq!(completion.model, "claude-sonnet-4-20250514");
    let choice = &completion.choices[0];
    assert!(
        choice
            .text
            .starts_with("Olá! (That's \"hi\" in Portuguese)")
    );
    assert_eq!(replayed.text(), choice.text);
    let pieces = replayed
        .chunks
        .iter()
        .filter(|c| !c.deltas.is_empty())
        .count();
    assert_eq!(pieces, 12, "one chunk per text_delta");
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    // Usage goes out at message_start (prompt known) and message_delta (final counts).
    let usages = replayed.usages();
    assert_eq!(
        usages
            .iter()
            .map(|u| (u.prompt_tokens, u.completion_tokens))
            .collect::<Vec<_>>(),
        [(16, 5), (16, 38)]
    );
    assert!(
        replayed.chunks[0].usage.is_some(),
        "usage is sent before any text"
    );
    assert_eq!(completion.usage, usages.last().copied());
    assert_eq!(completion.usage.map(|u| u.total_tokens), Some(54));
}

#[test]
fn recorded_tool_stream_reassembles_the_input() {
    let interactions = recording("Anthropic__claude-sonnet-4__tool_streaming");
    let replayed = replay_stream(&interactions[0].response.body).expect("stream");
    let choice = &replayed.completion.choices[0];
    assert_eq!(
        choice.text,
        "I'll get the weather information for Florence, Italy for you."
    );
    assert_eq!(replayed.text(), choice.text);
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        choice.tool_calls,
        [tool_call(
            "toolu_01N2eM4V43kGCDkq2Lw7ChWQ",
            "weather",
            r#"{"location": "Florence,Italy"}"#
        )]
    );
    assert_eq!(
        choice.function_call.as_ref().map(|f| f.arguments.as_str()),
        Some(r#"{"location": "Florence,Italy"}"#)
    );
    assert_eq!(
        replayed
            .completion
            .usage
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((394, 67))
    );
}

#[test]
fn recorded_parallel_tool_stream_keeps_calls_apart() {
    let interactions = recording("Anthropic__claude-sonnet-4__multi_tool_streaming");
    let replayed = replay_stream(&interactions[0].response.body).expect("stream");
    let calls = &replayed.completion.choices[0].tool_calls;
    assert_eq!(
        calls,
        &[
            tool_call(
                "toolu_01UYxUYC2zRPY8wiutnF48eP",
                "add",
                r#"{"a": 2, "b": 3}"#
            ),
            tool_call(
                "toolu_01VaRx1jpWCvPhi7L4kywAcd",
                "multiply",
                r#"{"a": 2, "b": 3}"#
            ),
        ]
    );
}

#[test]
fn every_recorded_answer_parses() {
    for name in RECORDINGS {
        for (i, interaction) in recording(name).iter().enumerate() {
            let completion = if interaction.requests_stream() {
                replay_stream(&interaction.response.body).map(|r| r.completion)
            } else {
                parse_completion(interaction.response.body.as_bytes(), "asked")
            }
            .unwrap_or_else(|e| panic!("{name}[{i}]: {e:?}"));
            assert_eq!(completion.choices.len(), 1, "{name}[{i}]");
            assert!(!completion.choices[0].text.is_empty(), "{name}[{i}]");
            assert!(completion.choices[0].finish_reason.is_some(), "{name}[{i}]");
            assert!(completion.usage.is_some(), "{name}[{i}]");
        }
    }
}

#[test]
fn cache_usage_in_a_stream_is_reported_and_updated() {
    let mut events = vec![message_start(json!({
        "input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2000,
        "output_tokens": 1
    }))];
    events.extend(text_events(0, &["Hi"]));
    events.extend(message_end("end_turn", json!({"output_tokens": 12})));
    let replayed = replay_stream(&stream_of(&events)).expect("stream");
    assert_eq!(replayed.completion.model, "claude-sonnet-4-5-20250929");
    let expected = Usage {
        prompt_tokens: 2010,
        completion_tokens: 12,
        total_tokens: 2022,
        cached_prompt_tokens: Some(2000),
        cache_creation_tokens: Some(0),
        reasoning_tokens: None,
        image_prompt_tokens: None,
        audio_prompt_tokens: None,
    };
    assert_eq!(replayed.completion.usage, Some(expected));
    assert_eq!(replayed.usages().last(), Some(&expected));
}

#[test]
fn error_events_become_upstream_errors() {
    for (kind, status) in [
        ("overloaded_error", 529),
        ("rate_limit_error", 429),
        ("api_error", 500),
        ("invalid_request_error", 400),
        ("something_new", 500),
    ] {
        let mut events = vec![message_start(
            json!({"input_tokens": 3, "output_tokens": 1}),
        )];
        events.extend(text_events(0, &["Hel"]));
        events.push((
            "error",
            json!({"type": "error", "error": {"type": kind, "message": format!("{kind} happened")}}),
        ));
        let error = upstream(replay_stream(&stream_of(&events)).map(|r| r.completion));
        assert_eq!(error.status, status, "{kind}");
        assert_eq!(error.message, format!("{kind} happened"));
        assert_eq!(error.retry_after, None);
    }
    let events = [(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error"}}),
    )];
    let error = upstream(replay_stream(&stream_of(&events)).map(|r| r.completion));
    assert_eq!(error.message, "the provider reported overloaded_error");
}

#[test]
fn a_stream_cut_before_message_stop_fails() {
    let mut events = vec![message_start(
        json!({"input_tokens": 3, "output_tokens": 1}),
    )];
    events.extend(text_events(0, &["Hel", "lo"]));
    let body = stream_of(&events);
    assert_eq!(
        failed(replay_stream(&body).map(|r| r.completion)),
        "stream ended early"
    );
    // Even with the stop reason: only message_stop says the answer is whole.
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
    ));
    assert_eq!(
        failed(replay_stream(&stream_of(&events)).map(|r| r.completion)),
        "stream ended early"
    );
    assert_eq!(
        failed(replay_stream("").map(|r| r.completion)),
        "stream ended early"
    );
}

#[test]
fn a_stream_cut_mid_event_is_malformed() {
    let mut body = stream_of(&[message_start(json!({"input_tokens": 3}))]);
    body.push_str(
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_del",
    );
    let message = failed(replay_stream(&body).map(|r| r.completion));
    assert!(
        message.starts_with("malformed response from upstream: "),
        "{message}"
    );
}

#[test]
fn pings_and_unknown_events_are_skipped_and_thinking_is_reasoning() {
    let mut events = vec![
        ("ping", json!({"type": "ping"})),
        message_start(json!({"input_tokens": 3, "output_tokens": 1})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me think"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "brand_new_event",
            json!({"type": "brand_new_event", "x": 1}),
        ),
    ];
    events.extend(text_events(1, &["Answer"]));
    events.extend(message_end("end_turn", json!({"output_tokens": 9})));
    let replayed = replay_stream(&stream_of(&events)).expect("stream");
    assert_eq!(replayed.text(), "Answer");
    assert_eq!(replayed.completion.choices[0].text, "Answer");
    let reasoning = &replayed.completion.choices[0].reasoning;
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0].text, "Let me think");
    assert_eq!(reasoning[0].signature.as_deref(), Some("sig"));
    // Events after message_stop are not read.
    let mut body = stream_of(&events);
    body.push_str("data: {not json\n\n");
    assert!(replay_stream(&body).is_ok());
}

#[test]
fn a_tool_without_input_deltas_gets_an_empty_object() {
    let mut events = vec![message_start(
        json!({"input_tokens": 3, "output_tokens": 1}),
    )];
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "now", "input": {}}}),
    ));
    events.push((
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}}),
    ));
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    // A block whose whole input came at its start, and one never stopped.
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "", "name": "given", "input": {"q": 1}}}),
    ));
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 1}),
    ));
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_c", "name": "open", "input": {}}}),
    ));
    events.extend(message_end("tool_use", json!({"output_tokens": 20})));
    let replayed = replay_stream(&stream_of(&events)).expect("stream");
    let choice = &replayed.completion.choices[0];
    assert_eq!(
        choice.tool_calls,
        [
            tool_call("toolu_a", "now", "{}"),
            tool_call("call_0_1", "given", r#"{"q":1}"#),
            tool_call("toolu_c", "open", "{}"),
        ]
    );
    assert_eq!(choice.text, "");
    assert!(replayed.text().is_empty());
}

#[test]
fn input_for_a_block_that_is_no_tool_is_malformed() {
    let mut events = vec![message_start(json!({"input_tokens": 3}))];
    events.extend(text_events(0, &[]));
    events.push((
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
    ));
    let message = failed(replay_stream(&stream_of(&events)).map(|r| r.completion));
    assert!(message.contains("content block 0"), "{message}");
}

// ---------------------------------------------------------------------------------------------
// HTTP: the request sent and the response read (with the SDK's fake responses)

#[test]
fn the_request_carries_the_key_version_and_json_body() {
    let req = request(Prompt::Text("hi".into()));
    let built = message_body(&req, &Settings::default(), false).expect("body");
    let http = upstream_request(&req, false).expect("request");
    assert_eq!(http.method(), "POST");
    assert_eq!(http.url(), "http://127.0.0.1:9/v1/messages");
    assert_eq!(http.header_value("x-api-key"), Some("sk-ant-test"));
    assert_eq!(http.header_value("anthropic-version"), Some("2023-06-01"));
    assert_eq!(http.header_value("authorization"), None);
    assert_eq!(http.header_value("accept"), Some("application/json"));
    assert_eq!(http.header_value("content-type"), Some("application/json"));
    let sent: Value = serde_json::from_slice(http.body_bytes()).expect("JSON body");
    assert_eq!(sent, Value::Object(built.clone()));
    let debug = format!("{http:?}");
    assert!(!debug.contains("sk-ant-test"), "{debug}");

    for key in [None, Some(String::new())] {
        let mut keyless = req.clone();
        keyless.route.api_key = key;
        let http = upstream_request(&keyless, true).expect("request");
        assert_eq!(http.header_value("x-api-key"), None);
        assert_eq!(http.header_value("accept"), Some("text/event-stream"));
        let sent: Value = serde_json::from_slice(http.body_bytes()).expect("JSON body");
        assert_eq!(sent["stream"], json!(true));
    }
}

#[test]
fn error_statuses_become_upstream_errors_with_anthropics_message() {
    let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}"#;
    let error = upstream(read_completion(
        http_response(401, "application/json", body, 16),
        "m",
        Decoder::default(),
    ));
    assert_eq!(
        (error.status, error.message.as_str(), error.retry_after),
        (401, "invalid x-api-key", None)
    );
    let limited = Response::from_chunks(
        429,
        vec![
            ("content-type".into(), "application/json".into()),
            ("retry-after".into(), "13".into()),
        ],
        vec![br#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#.to_vec()],
    );
    let error = upstream(read_stream(
        limited,
        &mut Sink::buffered(),
        "m",
        Decoder::default(),
    ));
    assert_eq!((error.status, error.retry_after), (429, Some(13)));
    assert!(error.message.starts_with("Number of request tokens"));
    let error = upstream(read_completion(
        http_response(
            529,
            "application/json",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            64,
        ),
        "m",
        Decoder::default(),
    ));
    assert_eq!((error.status, error.message.as_str()), (529, "Overloaded"));
}

#[test]
fn a_recorded_stream_reaches_the_sink_in_order() {
    let interactions = recording("Anthropic__claude-sonnet-4__tool_streaming");
    let mut sink = Sink::buffered();
    let completion = read_stream(
        http_response(
            200,
            "text/event-stream; charset=utf-8",
            &interactions[1].response.body,
            100,
        ),
        &mut sink,
        "claude-sonnet-4",
        Decoder::default(),
    )
    .expect("stream");
    let sent = sink.sent();
    let pieces: Vec<&str> = sent
        .iter()
        .flat_map(|chunk| chunk.deltas.iter())
        .map(|delta| delta.text.as_str())
        .collect();
    assert_eq!(pieces.len(), 13);
    assert_eq!(
        pieces[..3],
        ["The", " current", " weather in Florence, Italy shows"]
    );
    assert_eq!(completion.choices[0].text, pieces.concat());
    // Usage first (message_start), text, usage last (message_delta); never both in one chunk.
    assert!(
        sent.first()
            .is_some_and(|c| c.usage.is_some() && c.deltas.is_empty())
    );
    assert!(
        sent.last()
            .is_some_and(|c| c.usage.is_some() && c.deltas.is_empty())
    );
    assert!(
        sent.iter()
            .all(|c| c.usage.is_none() != c.deltas.is_empty())
    );
    assert_eq!(
        completion
            .usage
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((476, 46))
    );
}

#[test]
fn a_json_answer_to_a_stream_request_is_sent_in_one_piece() {
    let interactions = recording("Anthropic__claude-sonnet-4__simple");
    let mut sink = Sink::buffered();
    let completion = read_stream(
        http_response(200, "application/json", &interactions[0].response.body, 50),
        &mut sink,
        "claude-sonnet-4",
        Decoder::default(),
    )
    .expect("answer");
    // The text and the usage, in one chunk.
    assert_eq!(sink.sent().len(), 1);
    assert_eq!(sink.sent()[0].deltas[0].text, completion.choices[0].text);
    assert_eq!(sink.sent()[0].usage, completion.usage);
    assert!(completion.usage.is_some());
}

#[test]
fn a_plain_answer_is_read_whole_and_garbage_fails() {
    let interactions = recording("Anthropic__claude-sonnet-4__multi_tool");
    let completion = read_completion(
        http_response(200, "application/json", &interactions[0].response.body, 13),
        "claude-sonnet-4",
        Decoder::default(),
    )
    .expect("answer");
    assert_eq!(completion.choices[0].tool_calls.len(), 2);
    let message = failed(read_completion(
        http_response(200, "application/json", "<html>oops</html>", 8),
        "m",
        Decoder::default(),
    ));
    assert!(message.starts_with("malformed response"), "{message}");
}

// ---------------------------------------------------------------------------------------------
// Content parts, reasoning and the new finish reasons (WIT 0.2)

fn image(source: Source, media_type: Option<&str>) -> Part {
    Part::Image(Image {
        source,
        media_type: media_type.map(Into::into),
        detail: Some("high".into()),
    })
}

fn document(source: Source, media_type: Option<&str>, title: Option<&str>) -> Part {
    Part::Document(Document {
        source,
        media_type: media_type.map(Into::into),
        title: title.map(Into::into),
    })
}

fn audio() -> Part {
    Part::Audio(Audio {
        data: b"RIFF".to_vec(),
        format: "wav".into(),
    })
}

fn reasoning(text: &str, signature: Option<&str>, redacted: Option<&str>) -> Part {
    Part::Reasoning(Reasoning {
        text: text.into(),
        signature: signature.map(Into::into),
        redacted: redacted.map(Into::into),
    })
}

fn with_parts(role: Role, parts: Vec<Part>) -> Message {
    Message {
        parts,
        ..msg(role, "")
    }
}

#[test]
fn images_are_base64_or_url_sources() {
    let req = request(Prompt::Chat(vec![with_parts(
        Role::User,
        vec![
            Part::Text("What is in these?".into()),
            image(Source::Bytes(b"hi!".to_vec()), Some("image/jpeg")),
            image(Source::Url("https://example.com/cat.png".into()), None),
        ],
    )]));
    assert_eq!(
        body(&req, false)["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "aGkh"}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        ]}])
    );
}

#[test]
fn documents_are_pdf_text_or_url_sources_with_their_title() {
    let (json, _) = chat_json(&[with_parts(
        Role::User,
        vec![
            document(Source::Bytes(b"%PDF".to_vec()), None, Some("report.pdf")),
            document(
                Source::Bytes("héllo".as_bytes().to_vec()),
                Some("text/plain; charset=utf-8"),
                None,
            ),
            document(
                Source::Bytes(b"# notes".to_vec()),
                Some("text/markdown"),
                Some(""),
            ),
            document(
                Source::Url("https://example.com/a.pdf".into()),
                Some("application/pdf"),
                Some("A"),
            ),
            Part::Text("Summarize.".into()),
        ],
    )]);
    assert_eq!(
        json,
        json!([{"role": "user", "content": [
            {"type": "document", "title": "report.pdf",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}},
            {"type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "héllo"}},
            {"type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "# notes"}},
            {"type": "document", "title": "A",
                "source": {"type": "url", "url": "https://example.com/a.pdf"}},
            {"type": "text", "text": "Summarize."},
        ]}])
    );

    let word = document(
        Source::Bytes(b"PK".to_vec()),
        Some("application/msword"),
        None,
    );
    let message = invalid_request(chat(&[with_parts(Role::User, vec![word])]));
    assert_eq!(
        message,
        "messages[0]: anthropic does not take application/msword documents (only \
         application/pdf and text)"
    );
    let latin1 = document(Source::Bytes(vec![0xe9]), Some("text/plain"), None);
    let message = invalid_request(chat(&[with_parts(Role::User, vec![latin1])]));
    assert_eq!(
        message,
        "messages[0]: a text/plain document must be UTF-8 text"
    );
}

#[test]
fn audio_and_media_where_anthropic_takes_none_are_refused() {
    let refused = |messages: Vec<Message>| invalid_request(chat(&messages));
    assert_eq!(
        refused(vec![with_parts(
            Role::User,
            vec![Part::Text("x".into()), audio()]
        )]),
        "messages[0]: anthropic does not take audio parts"
    );
    assert_eq!(
        refused(vec![
            with_parts(
                Role::System,
                vec![image(Source::Url("https://x/y.png".into()), None)]
            ),
            msg(Role::User, "x"),
        ]),
        "messages[0]: anthropic does not take image parts on system messages"
    );
    assert_eq!(
        refused(vec![
            msg(Role::User, "x"),
            with_parts(
                Role::Assistant,
                vec![document(Source::Url("https://x/a.pdf".into()), None, None)]
            ),
        ]),
        "messages[1]: anthropic does not take document parts on assistant messages"
    );
    // In a tool's result too.
    let call = Message {
        tool_calls: vec![tool_call("t1", "speak", "{}")],
        ..msg(Role::Assistant, "")
    };
    let result = Message {
        tool_call_id: Some("t1".into()),
        ..with_parts(Role::Tool, vec![audio()])
    };
    assert_eq!(
        refused(vec![msg(Role::User, "x"), call, result]),
        "messages[2]: anthropic does not take audio parts"
    );
    // The whole request answers 400 the same way.
    let req = request(Prompt::Chat(vec![with_parts(Role::User, vec![audio()])]));
    invalid_request(upstream_request(&req, false));
}

#[test]
fn reasoning_on_system_and_user_messages_is_dropped() {
    let thought = || reasoning("t", Some("sig"), None);
    let (json, system) = chat_json(&[
        with_parts(
            Role::System,
            vec![thought(), Part::Text("Be brief.".into())],
        ),
        with_parts(Role::User, vec![thought(), Part::Text("Hi".into())]),
    ]);
    assert_eq!(system.as_deref(), Some("Be brief."));
    assert_eq!(
        json,
        json!([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    );
}

#[test]
fn tool_results_carry_their_parts_and_errors() {
    let call = Message {
        tool_calls: vec![
            tool_call("t1", "screenshot", "{}"),
            tool_call("t2", "fetch", "{}"),
            tool_call("t3", "fail", "{}"),
        ],
        ..msg(Role::Assistant, "")
    };
    let result = |id: &str, parts: Vec<Part>, is_error: bool| Message {
        tool_call_id: Some(id.into()),
        is_error,
        ..with_parts(Role::Tool, parts)
    };
    let (json, _) = chat_json(&[
        msg(Role::User, "go"),
        call,
        result(
            "t1",
            vec![
                Part::Text("Here:".into()),
                image(Source::Bytes(b"hi!".to_vec()), Some("image/png")),
            ],
            false,
        ),
        result(
            "t2",
            vec![document(Source::Bytes(b"%PDF".to_vec()), None, Some("r"))],
            false,
        ),
        result("t3", vec![Part::Text("boom".into())], true),
        Message {
            tool_call_id: Some("t3".into()),
            ..msg(Role::Tool, "")
        },
    ]);
    assert_eq!(
        json[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "Here:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGkh"}}]},
            {"type": "tool_result", "tool_use_id": "t2", "content": [
                {"type": "document", "title": "r",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}}]},
            {"type": "tool_result", "tool_use_id": "t3", "is_error": true,
                "content": [{"type": "text", "text": "boom"}]},
            {"type": "tool_result", "tool_use_id": "t3"},
        ]})
    );
}

#[test]
fn reasoning_goes_back_first_in_the_assistant_turn() {
    let assistant = Message {
        tool_calls: vec![tool_call("t1", "weather", r#"{"location":"Rome"}"#)],
        ..with_parts(
            Role::Assistant,
            vec![
                Part::Text("Let me check.".into()),
                reasoning("I should call weather.", Some("sig-1"), None),
                reasoning("", None, Some("opaque")),
                // Unsigned (another provider's, or a summary): Anthropic cannot verify it.
                reasoning("unsigned", None, None),
                reasoning("empty signature", Some(""), None),
            ],
        )
    };
    let messages = [
        msg(Role::User, "Weather in Rome?"),
        assistant,
        Message {
            tool_call_id: Some("t1".into()),
            ..msg(Role::Tool, "20 C")
        },
        // Another assistant message merged into the previous one keeps its reasoning first.
        msg(Role::Assistant, "Mild."),
        with_parts(
            Role::Assistant,
            vec![reasoning("Anything else?", Some("sig-2"), None)],
        ),
    ];
    let (json, _) = chat_json(&messages);
    assert_eq!(
        json[1]["content"],
        json!([
            {"type": "thinking", "thinking": "I should call weather.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "t1", "name": "weather", "input": {"location": "Rome"}},
        ])
    );
    assert_eq!(
        json[3]["content"],
        json!([
            {"type": "thinking", "thinking": "Anything else?", "signature": "sig-2"},
            {"type": "text", "text": "Mild."},
        ])
    );
    // Only unsigned reasoning: nothing is left of the message.
    let (json, _) = chat_json(&[
        msg(Role::User, "x"),
        with_parts(Role::Assistant, vec![reasoning("hmm", None, None)]),
    ]);
    assert_eq!(json.as_array().map(Vec::len), Some(1), "{json}");
}

#[test]
fn reasoning_read_from_an_answer_goes_back_as_it_came() {
    let answer = json!({
        "type": "message", "model": "claude-sonnet-4-5", "role": "assistant",
        "stop_reason": "end_turn", "stop_sequence": null,
        "content": [
            {"type": "thinking", "thinking": "Two and two.", "signature": "EqQBCkYIBxgC"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"},
            {"type": "text", "text": "Four."}
        ],
        "usage": {"input_tokens": 10, "output_tokens": 20}
    });
    let completion = parse_completion(answer.to_string().as_bytes(), "m").expect("parses");
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "Four.");
    assert_eq!(
        choice.reasoning,
        [
            Reasoning {
                text: "Two and two.".into(),
                signature: Some("EqQBCkYIBxgC".into()),
                redacted: None,
            },
            Reasoning {
                text: String::new(),
                signature: None,
                redacted: Some("EmwKAhgBEgy3va".into()),
            },
        ]
    );
    // The next turn sends them back unchanged.
    let mut parts: Vec<Part> = choice
        .reasoning
        .iter()
        .cloned()
        .map(Part::Reasoning)
        .collect();
    parts.push(Part::Text(choice.text.clone()));
    let (json, _) = chat_json(&[
        msg(Role::User, "2+2?"),
        with_parts(Role::Assistant, parts),
        msg(Role::User, "Sure?"),
    ]);
    assert_eq!(
        json[1]["content"],
        json!([
            {"type": "thinking", "thinking": "Two and two.", "signature": "EqQBCkYIBxgC"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"},
            {"type": "text", "text": "Four."},
        ])
    );
}

#[test]
fn streamed_thinking_and_its_signature_reach_the_caller() {
    let mut events = vec![
        message_start(json!({"input_tokens": 3, "output_tokens": 1})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
    ];
    for piece in ["Let me ", "think."] {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": piece}}),
        ));
    }
    events.extend([
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "opaque"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
    ]);
    events.extend(text_events(2, &["Answer"]));
    events.extend(message_end("end_turn", json!({"output_tokens": 9})));

    let mut sink = Sink::buffered();
    let response = http_response(200, "text/event-stream", &stream_of(&events), 7);
    let completion = read_stream(response, &mut sink, "m", Decoder::default()).expect("stream");
    let sent: Vec<(u32, String, Option<&str>, Option<&str>)> = (sink.sent_reasoning().iter())
        .map(|d| {
            (
                d.block,
                d.text.clone(),
                d.signature.as_deref(),
                d.redacted.as_deref(),
            )
        })
        .collect();
    let text: String = (sent.iter())
        .filter(|d| d.0 == 0)
        .map(|d| d.1.as_str())
        .collect();
    assert_eq!(text, "Let me think.");
    assert!(
        sent.iter().any(|d| d.0 == 0 && d.2 == Some("sig==")),
        "{sent:?}"
    );
    assert_eq!(sent.last(), Some(&(1, String::new(), None, Some("opaque"))));
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "Answer");
    assert_eq!(
        choice.reasoning,
        [
            Reasoning {
                text: "Let me think.".into(),
                signature: Some("sig==".into()),
                redacted: None,
            },
            Reasoning {
                text: String::new(),
                signature: None,
                redacted: Some("opaque".into()),
            },
        ]
    );
}

#[test]
fn stop_sequence_pause_and_refusal_are_reported() {
    let answer = |reason: &str, sequence: Value| {
        json!({"type": "message", "model": "m", "role": "assistant", "stop_reason": reason,
            "stop_sequence": sequence, "content": [{"type": "text", "text": "x"}]})
    };
    let finish = |body: Value| {
        let completion = parse_completion(body.to_string().as_bytes(), "m").expect("parses");
        completion.choices[0].finish_reason.clone()
    };
    assert_eq!(
        finish(answer("stop_sequence", json!("END"))),
        Some(FinishReason::StopSequence("END".into()))
    );
    assert_eq!(
        finish(answer("pause_turn", Value::Null)),
        Some(FinishReason::Pause)
    );
    assert_eq!(
        finish(answer("refusal", Value::Null)),
        Some(FinishReason::Refusal)
    );

    // Streamed, the stop sequence comes with the message_delta.
    let mut events = vec![message_start(json!({"input_tokens": 3}))];
    events.extend(text_events(0, &["one two"]));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "stop_sequence", "stop_sequence": "three"}, "usage": {"output_tokens": 2}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let replayed = replay_stream(&stream_of(&events)).expect("stream");
    assert_eq!(
        replayed.completion.choices[0].finish_reason,
        Some(FinishReason::StopSequence("three".into()))
    );
    for (reason, expected) in [
        ("pause_turn", FinishReason::Pause),
        ("refusal", FinishReason::Refusal),
    ] {
        let mut events = vec![message_start(json!({"input_tokens": 3}))];
        events.extend(text_events(0, &["x"]));
        events.extend(message_end(reason, json!({"output_tokens": 2})));
        let replayed = replay_stream(&stream_of(&events)).expect("stream");
        assert_eq!(replayed.completion.choices[0].finish_reason, Some(expected));
    }
}

/// The body's `thinking` and `max_tokens` for a reasoning config and params.
fn thinking_body(
    effort: Option<ReasoningEffort>,
    budget_tokens: Option<u32>,
    params: &str,
) -> (Option<Value>, Value) {
    let mut req = request(Prompt::Text("x".into()));
    req.reasoning = Some(ReasoningConfig {
        effort,
        budget_tokens,
    });
    req.params = params.into();
    let body = body(&req, false);
    (body.get("thinking").cloned(), body["max_tokens"].clone())
}

#[test]
fn reasoning_config_becomes_thinking() {
    let enabled = |budget: u32| Some(json!({"type": "enabled", "budget_tokens": budget}));
    for (effort, budget) in [
        (ReasoningEffort::Minimal, 1024),
        (ReasoningEffort::Low, 2048),
        (ReasoningEffort::Medium, 8192),
        (ReasoningEffort::High, 16384),
        (ReasoningEffort::Xhigh, 32000),
    ] {
        let (thinking, _) = thinking_body(Some(effort), None, r#"{"max_tokens":64000}"#);
        assert_eq!(thinking, enabled(budget), "{effort:?}");
    }
    // A budget wins over an effort, and is at least 1024.
    let (thinking, max) = thinking_body(Some(ReasoningEffort::High), Some(3000), "{}");
    assert_eq!((thinking, max), (enabled(3000), json!(4096)));
    let (thinking, _) = thinking_body(None, Some(100), "{}");
    assert_eq!(thinking, enabled(1024));
    // max_tokens not above the budget is raised to the budget plus the default.
    let (thinking, max) = thinking_body(None, Some(4096), "{}");
    assert_eq!((thinking, max), (enabled(4096), json!(4096 + 4096)));
    let (_, max) = thinking_body(
        Some(ReasoningEffort::Medium),
        None,
        r#"{"max_tokens":1000}"#,
    );
    assert_eq!(max, json!(8192 + 4096));
    let (_, max) = thinking_body(
        Some(ReasoningEffort::Medium),
        None,
        r#"{"max_tokens":8193}"#,
    );
    assert_eq!(max, json!(8193));
    let mut req = request(Prompt::Text("x".into()));
    req.route = route(r#"{"default_max_tokens":1000}"#);
    req.reasoning = Some(ReasoningConfig {
        effort: Some(ReasoningEffort::Low),
        budget_tokens: None,
    });
    let settings = req.route.settings::<Settings>().expect("settings");
    let routed = message_body(&req, &settings, false).expect("body");
    assert_eq!(routed["max_tokens"], json!(2048 + 1000));
    // Effort none: no thinking, whatever the params say; no config: the params' thinking passes.
    let params = r#"{"thinking":{"type":"enabled","budget_tokens":2000}}"#;
    let (thinking, max) = thinking_body(Some(ReasoningEffort::None), Some(5000), params);
    assert_eq!((thinking, max), (None, json!(4096)));
    let (thinking, _) = thinking_body(None, None, params);
    assert_eq!(
        thinking,
        Some(json!({"type": "enabled", "budget_tokens": 2000}))
    );
    let mut req = request(Prompt::Text("x".into()));
    req.params = params.into();
    assert_eq!(
        body(&req, false)["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
}

// ---------------------------------------------------------------------------------------------
// The host's output limit

fn limited(max_tokens: u32) -> gateway_plugin_sdk::OutputLimit {
    gateway_plugin_sdk::OutputLimit {
        max_tokens: Some(max_tokens),
        choices: 1,
    }
}

#[test]
fn the_output_limit_is_max_tokens_whatever_the_params_say() {
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"max_tokens_to_sample": 100000}"#.into();
    req.output = limited(4096);
    let sent = body(&req, false);
    assert_eq!(sent["max_tokens"], json!(4096));
    assert!(sent.get("max_tokens_to_sample").is_none(), "{sent}");
    // Without a limit, the legacy name is read as before.
    req.output = gateway_plugin_sdk::OutputLimit::NONE;
    assert_eq!(body(&req, false)["max_tokens"], json!(100000));
}

#[test]
fn a_thinking_budget_is_fitted_inside_the_output_limit() {
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"max_tokens": 3000}"#.into();
    req.reasoning = Some(ReasoningConfig {
        effort: Some(ReasoningEffort::High),
        budget_tokens: None,
    });
    req.output = limited(3000);
    let sent = body(&req, false);
    assert_eq!(sent["max_tokens"], json!(3000));
    assert_eq!(sent["thinking"]["budget_tokens"], json!(1500));
    // A budget below the limit is kept.
    req.reasoning = Some(ReasoningConfig {
        effort: None,
        budget_tokens: Some(2000),
    });
    assert_eq!(body(&req, false)["thinking"]["budget_tokens"], json!(2000));
    // No room for Claude's least budget: refused, saying so.
    req.output = limited(1024);
    let message = invalid_request(upstream_request(&req, false));
    assert!(message.contains("max_tokens = 1024"), "{message}");
}
