//! Unit tests of the pure mapping functions, largely against real recorded Gemini traffic.

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::sse::Event;
use gateway_plugin_sdk::sse::Parser;
use gateway_plugin_sdk::{
    Answer, Audio, Completion, CompletionRequest, Document, EmbeddingRequest, FinishReason,
    FunctionCall, FunctionChoice, FunctionDef, Image, Message, Part, Prompt, Provider,
    ProviderError, Reasoning, ReasoningConfig, ReasoningEffort, Role, Route, Sink, Source,
    StreamDecoder, ToolCall, UpstreamError, Usage, read_completion, read_stream,
};
use gateway_test_support::fixtures::{calling, failed, invalid_request, message, named, upstream};
use gateway_test_support::recording::Interaction;
use serde_json::{Map, Value, json};

use crate::Gemini;
use crate::convert::{
    THOUGHT_SIGNATURE_SENTINEL, completion_call, embedding_call, generation_config, model_resource,
    requires_thought_signatures, tool_config,
};
use crate::schema;
use crate::stream::{Decoder, finish_reason, read_embeddings, usage};
use crate::wire::UsageMetadata;

// ---------------------------------------------------------------------------------------------
// Helpers

const KEY: &str = "AIza-test-key-0123456789";

fn route() -> Route {
    Route {
        id: "test".into(),
        base_url: "http://127.0.0.1:9/v1beta".into(),
        api_key: Some(KEY.into()),
        settings: "{}".into(),
        secrets: Vec::new(),
    }
}

fn request(prompt: Prompt) -> CompletionRequest {
    CompletionRequest {
        route: route(),
        model: "gemini-2.5-flash".into(),
        prompt,
        functions: Vec::new(),
        function_choice: None,
        reasoning: None,
        output: gateway_plugin_sdk::OutputLimit::NONE,
        params: "{}".into(),
    }
}

fn chat(messages: Vec<Message>) -> CompletionRequest {
    request(Prompt::Chat(messages))
}

fn tool_calls(calls: &[(&str, &str, &str)]) -> Message {
    Message {
        parts: Vec::new(),
        tool_calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        ..message(Role::Assistant, "")
    }
}

fn tool_result(id: &str, content: &str) -> Message {
    Message {
        tool_call_id: Some(id.into()),
        ..message(Role::Tool, content)
    }
}

fn function(name: &str, description: &str, parameters: Value) -> FunctionDef {
    FunctionDef {
        name: name.into(),
        description: Some(description.into()),
        parameters: Some(parameters.to_string()),
    }
}

/// The calculator functions of the multi-tool recordings, as a caller writes them (JSON Schema).
fn calculator_functions() -> Vec<FunctionDef> {
    let numbers = json!({
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "first number"},
            "b": {"type": "integer", "description": "second number"}
        },
        "required": ["a", "b"],
        "additionalProperties": false,
        "$schema": "http://json-schema.org/draft-07/schema#"
    });
    vec![
        function("add", "Add two numbers", numbers.clone()),
        function("multiply", "Multiply two numbers", numbers),
    ]
}

fn weather_function() -> FunctionDef {
    function(
        "weather",
        "Get weather information for a location",
        json!({
            "type": "object",
            "properties": {"location": {"type": "string", "description": "the city"}},
            "required": ["location"]
        }),
    )
}

/// The `generationConfig` object and the request's own fields.
type Split = (Map<String, Value>, Map<String, Value>);

/// The caller's params split by `generation_config` on the route `test`.
fn config(params: &str) -> Result<Split, ProviderError> {
    generation_config(params, "test")
}

/// The body sent for a text prompt with `params`, and with the weather function.
fn body_with_params(params: &str) -> Value {
    let mut req = request(Prompt::Text("Hi".into()));
    req.functions = vec![weather_function()];
    req.params = params.into();
    body(&req)
}

/// The refusal of `params` by the whole request's mapping, checked to name the route and
/// `param`.
fn refusal(params: &str, param: &str) -> String {
    let mut req = request(Prompt::Text("Hi".into()));
    req.params = params.into();
    let message = invalid_request(completion_call(&req, false));
    assert!(
        message.starts_with(&format!("route `test`: {param}")),
        "{params}: {message}"
    );
    message
}

fn body(request: &CompletionRequest) -> Value {
    json_body(&completion_call(request, false).expect("request builds"))
}

fn json_body(request: &gateway_plugin_sdk::http::Request) -> Value {
    serde_json::from_slice(request.body_bytes()).expect("the body is JSON")
}

fn response(status: u16, content_type: &str, chunks: &[&str]) -> Response {
    Response::from_chunks(
        status,
        vec![("Content-Type".into(), content_type.into())],
        chunks.iter().map(|c| c.as_bytes().to_vec()).collect(),
    )
}

fn parse(body: &str) -> Result<Completion, ProviderError> {
    read_completion(
        response(200, "application/json", &[body]),
        "asked-model",
        Decoder::default(),
    )
}

/// Streams `body` through `read_stream` in 7-byte pieces (crossing event boundaries the way a
/// network does); returns the chunks sent and the completion.
fn stream(
    body: &str,
) -> (
    Vec<gateway_plugin_sdk::Chunk>,
    Result<Completion, ProviderError>,
) {
    let pieces: Vec<&[u8]> = body.as_bytes().chunks(7).collect();
    let response = Response::from_chunks(
        200,
        vec![("Content-Type".into(), "text/event-stream".into())],
        pieces.into_iter().map(<[u8]>::to_vec).collect(),
    );
    let mut sink = Sink::buffered();
    let result = read_stream(response, &mut sink, "asked-model", Decoder::default());
    (sink.sent().to_vec(), result)
}

/// The text sent through the sink, per chunk, for choice 0.
fn sent_texts(chunks: &[gateway_plugin_sdk::Chunk]) -> Vec<String> {
    chunks
        .iter()
        .flat_map(|c| &c.deltas)
        .filter(|d| d.index == 0)
        .map(|d| d.text.clone())
        .collect()
}

fn stream_of(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("data: {e}\r\n\r\n"))
        .collect()
}

fn usage_of(prompt: u32, completion: u32, total: u32, reasoning: Option<u32>) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: total,
        cached_prompt_tokens: None,
        cache_creation_tokens: None,
        reasoning_tokens: reasoning,
        image_prompt_tokens: None,
        audio_prompt_tokens: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Recorded traffic (go-vcr YAML)

/// Whether the recorded call was `streamGenerateContent` (Gemini says so in the URL).
fn is_stream(interaction: &Interaction) -> bool {
    interaction.request.url.contains(":streamGenerateContent")
}

/// The `data:` payloads of a recorded stream.
fn events(interaction: &Interaction) -> Vec<Value> {
    let mut parser = Parser::new();
    let mut events = parser.push(interaction.response.body.as_bytes());
    events.extend(parser.finish());
    events
        .iter()
        .map(|e| serde_json::from_str(&e.data).expect("recorded event is JSON"))
        .collect()
}

fn recording(case: &str) -> Vec<Interaction> {
    gateway_test_support::recording::recording(&format!("Google__gemini-2.5-flash__{case}"))
}

const CASES: &[&str] = &[
    "simple",
    "simple_streaming",
    "tool",
    "tool_streaming",
    "multi_tool",
    "multi_tool_streaming",
];

/// The recorded answer read through the plugin: (chunks sent, completion).
fn replay(interaction: &Interaction) -> (Vec<gateway_plugin_sdk::Chunk>, Completion) {
    if is_stream(interaction) {
        let (chunks, completion) = stream(&interaction.response.body);
        (chunks, completion.expect("recorded stream reads"))
    } else {
        (
            Vec::new(),
            parse(&interaction.response.body).expect("recorded answer reads"),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// info

#[test]
fn info_lists_models_with_list_prices() {
    let info = Gemini::info();
    assert_eq!(info.name, "gemini");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let expected = [
        ("gemini-2.5-pro", 1.25, 10.0),
        ("gemini-2.5-flash", 0.30, 2.50),
        ("gemini-2.5-flash-lite", 0.10, 0.40),
        ("gemini-2.0-flash", 0.10, 0.40),
        ("gemini-2.0-flash-lite", 0.075, 0.30),
        ("text-embedding-004", 0.0, 0.0),
        ("gemini-embedding-001", 0.15, 0.0),
    ];
    let listed: Vec<(&str, f64, f64)> = info
        .models
        .iter()
        .map(|p| (p.model.as_str(), p.input_per_mtok, p.output_per_mtok))
        .collect();
    assert_eq!(listed, expected);
}

// ---------------------------------------------------------------------------------------------
// Requests

#[test]
fn simple_chat_matches_the_recorded_request() {
    let recorded = recording("simple").remove(0);
    let mut req = chat(vec![
        message(Role::System, "You are a helpful assistant"),
        message(Role::User, "Say hi in Portuguese"),
    ]);
    req.params = r#"{"max_tokens":4000}"#.into();
    let call = completion_call(&req, false).expect("builds");
    assert_eq!(
        call.url(),
        "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:generateContent"
    );
    let sent = json_body(&call);
    let mut expected = recorded.request_json();
    // Google does not need a role on the system instruction; the Go SDK adds one.
    expected["systemInstruction"]
        .as_object_mut()
        .expect("object")
        .remove("role");
    assert_eq!(sent, expected);
}

#[test]
fn streaming_uses_stream_generate_content_with_sse() {
    let req = request(Prompt::Text("hi".into()));
    let call = completion_call(&req, true).expect("builds");
    assert_eq!(
        call.url(),
        "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        call.body_bytes(),
        completion_call(&req, false).expect("builds").body_bytes()
    );
}

#[test]
fn text_prompt_is_one_user_turn() {
    let sent = body(&request(Prompt::Text("Once upon a time".into())));
    assert_eq!(
        sent,
        json!({"contents": [{"role": "user", "parts": [{"text": "Once upon a time"}]}]})
    );
}

#[test]
fn model_names_become_resource_paths() {
    assert_eq!(
        model_resource("gemini-2.5-pro").unwrap(),
        "models/gemini-2.5-pro"
    );
    assert_eq!(
        model_resource("models/gemini-2.5-pro").unwrap(),
        "models/gemini-2.5-pro"
    );
    assert_eq!(
        model_resource("tunedModels/my-model").unwrap(),
        "tunedModels/my-model"
    );
    invalid_request(model_resource("a/b"));
    invalid_request(model_resource("models/"));
    invalid_request(model_resource(" "));

    let mut req = request(Prompt::Text("x".into()));
    req.model = "models/gemini 2?x=1#y".into();
    assert_eq!(
        completion_call(&req, false).unwrap().url(),
        "http://127.0.0.1:9/v1beta/models/gemini%202%3Fx%3D1%23y:generateContent"
    );
    req.model = "tunedModels/t1".into();
    assert_eq!(
        completion_call(&req, true).unwrap().url(),
        "http://127.0.0.1:9/v1beta/tunedModels/t1:streamGenerateContent?alt=sse"
    );
}

#[test]
fn base_url_is_required_and_its_trailing_slash_dropped() {
    let mut req = request(Prompt::Text("x".into()));
    req.route.base_url = "http://h/v1beta/".into();
    assert_eq!(
        completion_call(&req, false).unwrap().url(),
        "http://h/v1beta/models/gemini-2.5-flash:generateContent"
    );
    req.route.base_url = "  ".into();
    let message = failed(completion_call(&req, false));
    assert!(
        message.contains("generativelanguage.googleapis.com"),
        "{message}"
    );
}

#[test]
fn the_key_travels_in_x_goog_api_key_and_never_in_the_url() {
    let req = request(Prompt::Text("x".into()));
    let http = completion_call(&req, true).unwrap();
    assert_eq!(http.method(), "POST");
    assert_eq!(http.header_value("x-goog-api-key"), Some(KEY));
    assert_eq!(http.header_value("authorization"), None);
    assert_eq!(http.header_value("accept"), Some("text/event-stream"));
    assert_eq!(http.header_value("content-type"), Some("application/json"));
    assert!(!http.url().contains(KEY), "{}", http.url());
    assert!(!http.url().contains("key="), "{}", http.url());
    assert!(!format!("{http:?}").contains(KEY));

    let mut keyless = req.clone();
    keyless.route.api_key = None;
    let http = completion_call(&keyless, false).unwrap();
    assert_eq!(http.header_value("x-goog-api-key"), None);
    assert_eq!(http.header_value("accept"), Some("application/json"));
}

#[test]
fn params_map_to_generation_config() {
    let split = config(
        r#"{"temperature":0.2,"top_p":0.9,"top_k":40,"max_tokens":100,"stop":"\n\n","n":2,
            "presence_penalty":0.5,"frequency_penalty":0.25,"seed":7}"#,
    )
    .unwrap();
    assert_eq!(
        Value::Object(split.0.clone()),
        json!({"temperature":0.2,"topP":0.9,"topK":40,"maxOutputTokens":100,
               "stopSequences":["\n\n"],"candidateCount":2,"presencePenalty":0.5,
               "frequencyPenalty":0.25,"seed":7})
    );
    assert!(split.1.is_empty());
}

#[test]
fn gemini_names_win_and_unknown_params_pass_through() {
    let split = config(
        r#"{"maxOutputTokens":10,"max_tokens":99,"stopSequences":["a"],"stop":["b"],
            "thinkingConfig":{"thinkingBudget":0},"responseModalities":["TEXT"],
            "user":null,"stream":true,"stream_options":{"include_usage":true},
            "safety_settings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],
            "cachedContent":"cachedContents/abc",
            "generationConfig":{"temperature":1,"topK":3}, "temperature":0.5}"#,
    )
    .unwrap();
    assert_eq!(
        Value::Object(split.0.clone()),
        json!({"maxOutputTokens":10,"stopSequences":["a"],"thinkingConfig":{"thinkingBudget":0},
               "responseModalities":["TEXT"],"temperature":0.5,"topK":3})
    );
    assert_eq!(
        Value::Object(split.1.clone()),
        json!({"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],
               "cachedContent":"cachedContents/abc"})
    );
    invalid_request(config(r#"{"generationConfig":3}"#));
    invalid_request(config("[1]"));
    assert_eq!(config("").unwrap(), Default::default());
}

#[test]
fn response_format_asks_for_json() {
    let split = config(r#"{"response_format":{"type":"json_object"}}"#).unwrap();
    assert_eq!(
        Value::Object(split.0.clone()),
        json!({"responseMimeType": "application/json"})
    );
    let split = config(
        r#"{"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,
            "schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],
            "additionalProperties":false}}}}"#,
    )
    .unwrap();
    assert_eq!(
        Value::Object(split.0.clone()),
        json!({"responseMimeType": "application/json", "responseSchema": {
            "type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}, "required": ["n"]}})
    );
    let split = config(r#"{"response_format":{"type":"text"}}"#).unwrap();
    assert!(split.0.is_empty());
    invalid_request(config(r#"{"response_format":{"type":"xml"}}"#));
    invalid_request(config(r#"{"response_format":{"type":"json_schema"}}"#));
}

#[test]
fn openai_params_gemini_already_has_map_in_the_sent_body() {
    let sent = body_with_params(
        r#"{"max_completion_tokens":50,"n":2,"seed":7,"response_format":{"type":"json_object"}}"#,
    );
    assert_eq!(
        sent["generationConfig"],
        json!({"maxOutputTokens": 50, "candidateCount": 2, "seed": 7,
               "responseMimeType": "application/json"})
    );
    // `max_tokens` is the older name of the same field, and wins as the first alias.
    let sent = body_with_params(r#"{"max_tokens":20,"max_completion_tokens":50}"#);
    assert_eq!(sent["generationConfig"], json!({"maxOutputTokens": 20}));

    let message = refusal(r#"{"response_format":{"type":"xml"}}"#, "response_format");
    assert!(message.contains("json_schema"), "{message}");
    refusal(r#"{"generationConfig":[]}"#, "generationConfig");
}

/// OpenAI params Gemini has no field for never reach it (Gemini refuses unknown
/// `generationConfig` fields) when leaving them out changes nothing.
#[test]
fn openai_params_without_a_gemini_field_are_dropped() {
    for params in [
        r#"{"parallel_tool_calls":false,"user":"user-123","logit_bias":{},"logprobs":false,
            "stream_options":{"include_usage":true},"temperature":0.5}"#,
        r#"{"parallel_tool_calls":true,"user":null,"logit_bias":null,"logprobs":null,
            "top_logprobs":null,"temperature":0.5}"#,
    ] {
        let sent = body_with_params(params);
        assert_eq!(
            sent["generationConfig"],
            json!({"temperature": 0.5}),
            "{params}"
        );
        let keys: Vec<&String> = sent.as_object().expect("an object").keys().collect();
        assert_eq!(
            keys,
            ["contents", "generationConfig", "tools"],
            "{params}: {sent}"
        );
    }
}

#[test]
fn logprobs_map_to_gemini_names() {
    let generation = |params: &str| Value::Object(config(params).expect("params").0);
    assert_eq!(
        generation(r#"{"logprobs":true}"#),
        json!({"responseLogprobs": true})
    );
    assert_eq!(
        generation(r#"{"logprobs":true,"top_logprobs":5}"#),
        json!({"responseLogprobs": true, "logprobs": 5})
    );
    assert_eq!(
        generation(r#"{"logprobs":true,"top_logprobs":0}"#),
        json!({"responseLogprobs": true, "logprobs": 0})
    );
    // Gemini's own names (its `logprobs` is a count) pass as they are.
    assert_eq!(
        generation(r#"{"responseLogprobs":true,"logprobs":3}"#),
        json!({"responseLogprobs": true, "logprobs": 3})
    );
    assert_eq!(
        generation(r#"{"response_logprobs":true,"top_logprobs":2}"#),
        json!({"responseLogprobs": true, "logprobs": 2})
    );
    assert_eq!(
        generation(r#"{"generationConfig":{"responseLogprobs":true},"top_logprobs":4}"#),
        json!({"responseLogprobs": true, "logprobs": 4})
    );
    assert_eq!(
        body_with_params(r#"{"logprobs":true,"top_logprobs":1}"#)["generationConfig"],
        json!({"responseLogprobs": true, "logprobs": 1})
    );

    assert_eq!(
        refusal(r#"{"top_logprobs":5}"#, "top_logprobs"),
        "route `test`: top_logprobs needs logprobs: true"
    );
    refusal(r#"{"logprobs":false,"top_logprobs":5}"#, "top_logprobs");
    refusal(r#"{"logprobs":true,"top_logprobs":-1}"#, "top_logprobs");
    refusal(r#"{"logprobs":true,"top_logprobs":"5"}"#, "top_logprobs");
    refusal(r#"{"logprobs":"yes"}"#, "logprobs");
}

#[test]
fn logit_bias_is_refused() {
    let message = refusal(r#"{"logit_bias":{"50256":-100}}"#, "logit_bias");
    assert!(
        message.contains("is not supported by the Gemini API"),
        "{message}"
    );
    refusal(r#"{"logit_bias":"strong"}"#, "logit_bias");
}

#[test]
fn functions_become_declarations_matching_the_recording() {
    let recorded = recording("multi_tool").remove(0).request_json();
    let mut req = chat(vec![
        message(
            Role::System,
            "You are a helpful assistant. CRITICAL: Always use both add and multiply at the same time ALWAYS.",
        ),
        message(Role::User, "Add and multiply the number 2 and 3"),
    ]);
    req.functions = calculator_functions();
    req.function_choice = Some(FunctionChoice::Auto);
    req.params = r#"{"maxOutputTokens":4000}"#.into();
    let sent = body(&req);
    assert_eq!(sent["tools"], recorded["tools"]);
    assert_eq!(sent["toolConfig"], recorded["toolConfig"]);
    assert_eq!(sent["contents"], recorded["contents"]);
    assert_eq!(
        sent["systemInstruction"]["parts"],
        recorded["systemInstruction"]["parts"]
    );
    assert_eq!(sent["generationConfig"], recorded["generationConfig"]);
}

#[test]
fn function_choice_maps_to_tool_config_and_travels_only_with_functions() {
    assert_eq!(
        tool_config(&FunctionChoice::None),
        json!({"functionCallingConfig": {"mode": "NONE"}})
    );
    assert_eq!(
        tool_config(&FunctionChoice::Auto),
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
    assert_eq!(
        tool_config(&FunctionChoice::Required),
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    assert_eq!(
        tool_config(&FunctionChoice::Named("weather".into())),
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}})
    );

    let mut req = request(Prompt::Text("x".into()));
    req.function_choice = Some(FunctionChoice::Required);
    let sent = body(&req);
    assert!(sent.get("toolConfig").is_none(), "{sent}");
    assert!(sent.get("tools").is_none(), "{sent}");
    req.functions = vec![weather_function()];
    assert_eq!(
        body(&req)["toolConfig"]["functionCallingConfig"]["mode"],
        json!("ANY")
    );
}

#[test]
fn functions_without_parameters_declare_none() {
    let mut req = request(Prompt::Text("x".into()));
    req.functions = vec![
        FunctionDef {
            name: "now".into(),
            description: None,
            parameters: None,
        },
        function("ping", "Ping", json!({"type": "object", "properties": {}})),
        function("noop", "No-op", json!({})),
    ];
    assert_eq!(
        body(&req)["tools"],
        json!([{"functionDeclarations": [
            {"name": "now"},
            {"name": "ping", "description": "Ping"},
            {"name": "noop", "description": "No-op"}
        ]}])
    );
    req.functions[0].parameters = Some("{not json".into());
    let message = invalid_request(completion_call(&req, false));
    assert!(message.starts_with("functions[0].parameters"), "{message}");
}

#[test]
fn multi_tool_conversation_matches_the_recorded_request() {
    let recorded = recording("multi_tool").remove(1).request_json();
    let mut req = chat(vec![
        message(
            Role::System,
            "You are a helpful assistant. CRITICAL: Always use both add and multiply at the same time ALWAYS.",
        ),
        message(Role::User, "Add and multiply the number 2 and 3"),
        tool_calls(&[
            ("1", "add", r#"{"a":2,"b":3}"#),
            ("2", "multiply", r#"{"a":2,"b":3}"#),
        ]),
        tool_result("1", r#"{"result":"5"}"#),
        tool_result("2", r#"{"result":"6"}"#),
    ]);
    req.functions = calculator_functions();
    req.function_choice = Some(FunctionChoice::Auto);
    req.params = r#"{"maxOutputTokens":4000}"#.into();
    let sent = body(&req);
    let mut expected = recorded["contents"].clone();
    // Thought signatures cannot travel through the gateway's API (see the crate docs).
    for part in expected[1]["parts"].as_array_mut().expect("parts") {
        part.as_object_mut()
            .expect("part")
            .remove("thoughtSignature");
    }
    assert_eq!(sent["contents"], expected);
    assert_eq!(sent["tools"], recorded["tools"]);
}

#[test]
fn legacy_function_call_and_function_result() {
    let sent = body(&chat(vec![
        message(Role::User, "What's the weather in Florence,Italy?"),
        calling("weather", r#"{"location":"Florence,Italy"}"#),
        named(Role::Function, "weather", "40 C"),
    ]));
    assert_eq!(
        sent["contents"],
        json!([
            {"role": "user", "parts": [{"text": "What's the weather in Florence,Italy?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"location": "Florence,Italy"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"output": "40 C"}}}]}
        ])
    );
}

#[test]
fn results_find_their_call_by_id_or_name() {
    let sent = body(&chat(vec![
        message(Role::User, "go"),
        Message {
            parts: vec![Part::Text("Let me check.".into())],
            ..tool_calls(&[("call_a", "lookup", "{}"), ("call_b", "fetch", "")])
        },
        // By id, without a name.
        tool_result("call_b", "[1,2]"),
        // By name, without an id.
        named(Role::Tool, "lookup", "null"),
        message(Role::User, "thanks"),
    ]));
    assert_eq!(
        sent["contents"],
        json!([
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [
                {"text": "Let me check."},
                {"functionCall": {"id": "call_a", "name": "lookup", "args": {}}},
                {"functionCall": {"id": "call_b", "name": "fetch", "args": {}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "call_b", "name": "fetch", "response": {"output": "[1,2]"}}},
                {"functionResponse": {"id": "call_a", "name": "lookup", "response": {"output": "null"}}},
                {"text": "thanks"}
            ]}
        ])
    );
}

#[test]
fn results_that_answer_nothing_known_need_a_name() {
    let error = invalid_request(completion_call(
        &chat(vec![message(Role::User, "go"), tool_result("call_x", "1")]),
        false,
    ));
    assert!(error.starts_with("messages[1]"), "{error}");
    let error = invalid_request(completion_call(
        &chat(vec![
            message(Role::User, "go"),
            message(Role::Function, "1"),
        ]),
        false,
    ));
    assert!(error.starts_with("messages[1]"), "{error}");
    // A function message answers the open call when it gives no name.
    let sent = body(&chat(vec![
        message(Role::User, "go"),
        calling("f", "{}"),
        message(Role::Function, "done"),
    ]));
    assert_eq!(
        sent["contents"][2]["parts"][0]["functionResponse"]["name"],
        json!("f")
    );
}

#[test]
fn call_arguments_must_be_json_objects() {
    for arguments in ["[1]", "{oops", "3"] {
        let error = invalid_request(completion_call(
            &chat(vec![message(Role::User, "go"), calling("f", arguments)]),
            false,
        ));
        assert!(error.contains("function_call.arguments"), "{error}");
        let error = invalid_request(completion_call(
            &chat(vec![
                message(Role::User, "go"),
                tool_calls(&[("c", "f", arguments)]),
            ]),
            false,
        ));
        assert!(error.contains("tool_calls[0].arguments"), "{error}");
    }
}

#[test]
fn system_messages_anywhere_form_the_instruction_and_turns_merge() {
    let sent = body(&chat(vec![
        message(Role::System, "Be brief."),
        message(Role::User, "one"),
        named(Role::User, "bob", "two"),
        message(Role::System, "Answer in French."),
        message(Role::Assistant, "un"),
        message(Role::Assistant, ""),
        message(Role::User, ""),
        message(Role::Assistant, "deux"),
    ]));
    assert_eq!(
        sent["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}, {"text": "Answer in French."}]})
    );
    assert_eq!(
        sent["contents"],
        json!([
            {"role": "user", "parts": [{"text": "one"}, {"text": "two"}]},
            {"role": "model", "parts": [{"text": "un"}, {"text": "deux"}]}
        ])
    );
}

#[test]
fn a_conversation_needs_a_turn() {
    invalid_request(completion_call(&chat(Vec::new()), false));
    invalid_request(completion_call(
        &chat(vec![message(Role::System, "Be brief.")]),
        false,
    ));
    invalid_request(completion_call(
        &request(Prompt::Text(String::new())),
        false,
    ));
}

#[test]
fn gemini_3_replayed_calls_carry_the_signature_placeholder() {
    assert!(requires_thought_signatures("gemini-3-pro-preview"));
    assert!(requires_thought_signatures("models/gemini-3.1-flash"));
    assert!(requires_thought_signatures("gemini-10-ultra"));
    assert!(!requires_thought_signatures("gemini-2.5-flash"));
    assert!(!requires_thought_signatures("gemini-1.5-pro"));
    assert!(!requires_thought_signatures("gemini-exp-1206"));
    assert!(!requires_thought_signatures("gemma-3-27b-it"));

    let messages = vec![
        message(Role::User, "go"),
        tool_calls(&[("c1", "f", "{}"), ("c2", "g", "{}")]),
        tool_result("c1", "1"),
        tool_result("c2", "2"),
    ];
    let mut req = chat(messages);
    req.model = "gemini-3-pro-preview".into();
    let sent = body(&req);
    for part in sent["contents"][1]["parts"].as_array().expect("parts") {
        assert_eq!(part["thoughtSignature"], json!(THOUGHT_SIGNATURE_SENTINEL));
    }
    req.model = "gemini-2.5-pro".into();
    let sent = body(&req);
    for part in sent["contents"][1]["parts"].as_array().expect("parts") {
        assert!(part.get("thoughtSignature").is_none(), "{part}");
    }
}

// ---------------------------------------------------------------------------------------------
// Schemas

#[test]
fn schemas_keep_what_gemini_knows() {
    let converted = schema::convert(&json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "title": "Args",
        "properties": {
            "name": {"type": "string", "minLength": 1, "format": "email", "examples": ["x"]},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
            "mode": {"const": "fast"},
            "note": {"type": ["string", "null"]},
            "size": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
            "either": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "multi": {"type": ["string", "integer"]},
            "pair": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}
        },
        "required": ["name", "ghost"],
        "additionalProperties": false
    }));
    assert_eq!(
        converted,
        json!({
            "type": "OBJECT",
            "title": "Args",
            "properties": {
                "name": {"type": "STRING", "minLength": 1},
                "when": {"type": "STRING", "format": "date-time"},
                "tags": {"type": "ARRAY", "items": {"type": "STRING", "enum": ["a", "b"]}, "maxItems": 3},
                "mode": {"type": "STRING", "enum": ["fast"]},
                "note": {"type": "STRING", "nullable": true},
                "size": {"type": "INTEGER", "minimum": 0, "nullable": true},
                "either": {"anyOf": [{"type": "STRING"}, {"type": "NUMBER"}]},
                "multi": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
                "pair": {"type": "ARRAY", "items": {"type": "NUMBER"}}
            },
            "required": ["name"]
        })
    );
}

#[test]
fn schema_references_are_inlined() {
    let converted = schema::convert(&json!({
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Address", "description": "where they live"},
            "work": {"allOf": [{"$ref": "#/definitions/Address"}]},
            "missing": {"$ref": "#/$defs/Nope"},
            "remote": {"$ref": "https://example.com/schema.json"}
        },
        "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}, "description": "an address"}},
        "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}}
    }));
    assert_eq!(
        converted["properties"],
        json!({
            "home": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "description": "where they live"},
            "work": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}},
            "missing": {},
            "remote": {}
        })
    );
}

#[test]
fn recursive_schemas_are_cut_off() {
    let converted = schema::convert(&json!({
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}
    }));
    // Bounded depth: the conversion ends, and the outer levels are intact.
    assert_eq!(converted["type"], json!("OBJECT"));
    assert_eq!(converted["properties"]["next"]["type"], json!("OBJECT"));
    assert_eq!(schema::convert(&json!(true)), json!({}));
}

// ---------------------------------------------------------------------------------------------
// Embeddings

fn embedding_request(input: &[&str], params: &str) -> EmbeddingRequest {
    EmbeddingRequest {
        route: route(),
        model: "text-embedding-004".into(),
        input: input.iter().map(|s| (*s).into()).collect(),
        params: params.into(),
    }
}

#[test]
fn embeddings_are_one_batch_request_per_input() {
    let call = embedding_call(&embedding_request(
        &["first", "second"],
        r#"{"dimensions":256,"task_type":"RETRIEVAL_DOCUMENT","encoding_format":null}"#,
    ))
    .unwrap();
    assert_eq!(
        call.url(),
        "http://127.0.0.1:9/v1beta/models/text-embedding-004:batchEmbedContents"
    );
    let request = |text: &str| {
        json!({"model": "models/text-embedding-004", "content": {"parts": [{"text": text}]},
               "taskType": "RETRIEVAL_DOCUMENT", "outputDimensionality": 256})
    };
    assert_eq!(
        json_body(&call),
        json!({"requests": [request("first"), request("second")]})
    );
}

#[test]
fn embedding_answers_keep_input_order() {
    let body = br#"{"embeddings":[{"values":[0.5,1.0]},{"values":[-0.25,2.0]}]}"#;
    let embeddings = read_embeddings(body, "text-embedding-004", 2).unwrap();
    assert_eq!(embeddings.vectors, vec![vec![0.5, 1.0], vec![-0.25, 2.0]]);
    assert_eq!(embeddings.model, "text-embedding-004");
    assert_eq!(embeddings.usage, None);
    let message = failed(read_embeddings(body, "m", 3));
    assert!(message.contains("2 embeddings for 3 inputs"), "{message}");
    failed(read_embeddings(b"{\"embeddings\":[{}]}", "m", 1));
    failed(read_embeddings(b"<html>", "m", 1));
}

// ---------------------------------------------------------------------------------------------
// Answers

#[test]
fn every_recorded_answer_reads_with_usage() {
    for case in CASES {
        for (i, interaction) in recording(case).iter().enumerate() {
            let (_, completion) = replay(interaction);
            assert_eq!(completion.model, "gemini-2.5-flash", "{case}[{i}]");
            assert_eq!(completion.choices.len(), 1, "{case}[{i}]");
            assert!(completion.usage.is_some(), "{case}[{i}]");
            assert!(completion.choices[0].finish_reason.is_some(), "{case}[{i}]");
        }
    }
}

#[test]
fn simple_answer_counts_thoughts_as_completion_and_reasoning() {
    for case in ["simple", "simple_streaming"] {
        let (_, completion) = replay(&recording(case)[0]);
        let choice = &completion.choices[0];
        assert_eq!(choice.text, "Olá!");
        assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
        assert_eq!(choice.function_call, None);
        assert!(choice.tool_calls.is_empty());
        let expected = if case == "simple" {
            usage_of(11, 2 + 24, 37, Some(24))
        } else {
            usage_of(11, 2 + 21, 34, Some(21))
        };
        assert_eq!(completion.usage, Some(expected), "{case}");
    }
}

#[test]
fn tool_answer_has_a_tool_call_and_function_call() {
    for case in ["tool", "tool_streaming"] {
        let (_, completion) = replay(&recording(case)[0]);
        let choice = &completion.choices[0];
        assert_eq!(choice.text, "");
        assert_eq!(
            choice.finish_reason,
            Some(FinishReason::ToolCalls),
            "{case}"
        );
        assert_eq!(
            choice.tool_calls,
            vec![ToolCall {
                id: "call_0_0".into(),
                name: "weather".into(),
                arguments: r#"{"location":"Florence,Italy"}"#.into(),
            }]
        );
        assert_eq!(
            choice.function_call,
            Some(FunctionCall {
                name: "weather".into(),
                arguments: r#"{"location":"Florence,Italy"}"#.into(),
            })
        );
    }
}

#[test]
fn multi_tool_answer_keeps_every_call_in_order() {
    for case in ["multi_tool", "multi_tool_streaming"] {
        let (_, completion) = replay(&recording(case)[0]);
        let choice = &completion.choices[0];
        let calls: Vec<(&str, &str)> = choice
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(
            calls,
            [("call_0_0", "add"), ("call_0_1", "multiply")],
            "{case}"
        );
        for call in &choice.tool_calls {
            let args: Value = serde_json::from_str(&call.arguments).expect("JSON");
            assert_eq!(args, json!({"a": 2, "b": 3}));
        }
        assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(
            choice.function_call.as_ref().map(|f| f.name.as_str()),
            Some("add")
        );
    }
}

#[test]
fn streamed_text_is_forwarded_event_by_event() {
    for case in ["tool_streaming", "multi_tool_streaming"] {
        let interaction = &recording(case)[1];
        let recorded: Vec<String> = events(interaction)
            .iter()
            .map(|e| {
                e["candidates"][0]["content"]["parts"][0]["text"]
                    .as_str()
                    .expect("text event")
                    .to_owned()
            })
            .collect();
        assert!(recorded.len() > 1, "{case}");
        let (chunks, completion) = replay(interaction);
        assert_eq!(sent_texts(&chunks), recorded, "{case}");
        assert_eq!(completion.choices[0].text, recorded.concat());
        assert_eq!(
            completion.choices[0].finish_reason,
            Some(FinishReason::Stop)
        );
        // Every event reports usage, and every chunk forwards it; the last is the total.
        assert!(chunks.iter().all(|c| c.usage.is_some()), "{case}");
        let last = events(interaction).last().cloned().expect("events");
        let total = last["usageMetadata"]["totalTokenCount"]
            .as_u64()
            .expect("total");
        assert_eq!(
            completion.usage.map(|u| u64::from(u.total_tokens)),
            Some(total)
        );
        assert_eq!(chunks.last().and_then(|c| c.usage), completion.usage);
    }
}

#[test]
fn finish_reasons_map() {
    assert_eq!(finish_reason("STOP"), FinishReason::Stop);
    assert_eq!(finish_reason("MAX_TOKENS"), FinishReason::Length);
    for reason in [
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
    ] {
        assert_eq!(
            finish_reason(reason),
            FinishReason::ContentFilter,
            "{reason}"
        );
    }
    for reason in [
        "OTHER",
        "LANGUAGE",
        "MALFORMED_FUNCTION_CALL",
        "FINISH_REASON_UNSPECIFIED",
        "NEW",
    ] {
        assert_eq!(finish_reason(reason), FinishReason::Other, "{reason}");
    }
}

#[test]
fn filtered_and_truncated_candidates() {
    let completion = parse(
        r#"{"candidates":[
            {"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"HIGH","blocked":true}]},
            {"content":{"parts":[{"text":"Once upon"}],"role":"model"},"finishReason":"MAX_TOKENS","index":1}
        ],"modelVersion":"gemini-2.0-flash"}"#,
    )
    .unwrap();
    assert_eq!(completion.model, "gemini-2.0-flash");
    assert_eq!(completion.usage, None);
    let summary: Vec<(u32, &str, Option<FinishReason>)> = completion
        .choices
        .iter()
        .map(|c| (c.index, c.text.as_str(), c.finish_reason.clone()))
        .collect();
    assert_eq!(
        summary,
        [
            (0, "", Some(FinishReason::ContentFilter)),
            (1, "Once upon", Some(FinishReason::Length))
        ]
    );
}

#[test]
fn a_blocked_prompt_is_one_filtered_empty_choice() {
    let body = r#"{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},
                   "usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}"#;
    let completion = parse(body).unwrap();
    assert_eq!(completion.model, "asked-model");
    assert_eq!(completion.choices.len(), 1);
    assert_eq!(completion.choices[0].text, "");
    assert_eq!(
        completion.choices[0].finish_reason,
        Some(FinishReason::ContentFilter)
    );
    assert_eq!(completion.usage, Some(usage_of(8, 0, 8, None)));
    // Streamed, it ends the stream properly.
    let (_, streamed) = stream(&format!("data: {}\n\n", body.replace('\n', "")));
    assert_eq!(
        streamed.unwrap().choices[0].finish_reason,
        Some(FinishReason::ContentFilter)
    );
}

#[test]
fn thoughts_are_not_answer_text_and_call_details_are_kept() {
    let completion = parse(
        r#"{"candidates":[{"content":{"parts":[
            {"text":"Let me think about units.","thought":true},
            {"text":"It is "},
            {"text":"warm.","thought":false},
            {"functionCall":{"id":"fc-9","name":"log","args":{"z":1,"a":[true,null]}}},
            {"functionCall":{"name":"now"}},
            {"inlineData":{"mimeType":"image/png","data":"AAAA"}}
        ],"role":"model"},"finishReason":"STOP"}]}"#,
    )
    .unwrap();
    let choice = &completion.choices[0];
    assert_eq!(choice.index, 0);
    assert_eq!(choice.text, "It is warm.");
    assert_eq!(
        choice.tool_calls,
        vec![
            ToolCall {
                id: "fc-9".into(),
                name: "log".into(),
                arguments: r#"{"a":[true,null],"z":1}"#.into(),
            },
            ToolCall {
                id: "call_0_1".into(),
                name: "now".into(),
                arguments: "{}".into(),
            },
        ]
    );
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
}

#[test]
fn candidates_without_an_index_use_their_position() {
    let completion = parse(
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"},
                          {"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}]}"#,
    )
    .unwrap();
    let texts: Vec<(u32, &str)> = completion
        .choices
        .iter()
        .map(|c| (c.index, c.text.as_str()))
        .collect();
    assert_eq!(texts, [(0, "a"), (1, "b")]);
}

#[test]
fn usage_maps_every_token_class() {
    let wire: UsageMetadata = serde_json::from_value(json!({
        "promptTokenCount": 1000, "cachedContentTokenCount": 600, "candidatesTokenCount": 50,
        "thoughtsTokenCount": 200, "toolUsePromptTokenCount": 30, "totalTokenCount": 1280
    }))
    .unwrap();
    assert_eq!(
        usage(&wire),
        Usage {
            prompt_tokens: 1030,
            completion_tokens: 250,
            total_tokens: 1280,
            cached_prompt_tokens: Some(600),
            cache_creation_tokens: None,
            reasoning_tokens: Some(200),
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        }
    );
    let wire: UsageMetadata = serde_json::from_value(
        json!({"promptTokenCount": "7", "candidatesTokenCount": 3.0, "thoughtsTokenCount": "x"}),
    )
    .unwrap();
    assert_eq!(usage(&wire), usage_of(7, 3, 10, None));
    assert_eq!(usage(&UsageMetadata::default()), usage_of(0, 0, 0, None));
}

#[test]
fn google_errors_become_upstream_errors() {
    let body = r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}"#;
    let error = upstream(read_completion(
        Response::from_chunks(
            429,
            vec![
                (
                    "Content-Type".into(),
                    "application/json; charset=UTF-8".into(),
                ),
                ("Retry-After".into(), "17".into()),
            ],
            vec![body.as_bytes().to_vec()],
        ),
        "m",
        Decoder::default(),
    ));
    assert_eq!(
        error,
        UpstreamError {
            status: 429,
            message: "Resource has been exhausted (e.g. check quota).".into(),
            retry_after: Some(17),
        }
    );
    let error = upstream(read_stream(
        response(
            400,
            "application/json",
            &[
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#,
            ],
        ),
        &mut Sink::buffered(),
        "m",
        Decoder::default(),
    ));
    assert_eq!(
        (error.status, error.message.as_str()),
        (400, "API key not valid. Please pass a valid API key.")
    );
}

#[test]
fn an_error_inside_an_answer_is_an_upstream_error() {
    let error = upstream(parse(
        r#"{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}"#,
    ));
    assert_eq!(
        (error.status, error.message.as_str()),
        (500, "Internal error encountered.")
    );
    let (chunks, result) = stream(&stream_of(&[
        json!({"candidates":[{"content":{"parts":[{"text":"Hel"}]},"index":0}]}),
        json!({"error":{"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}),
    ]));
    let error = upstream(result);
    assert_eq!(
        (error.status, error.message.as_str()),
        (503, "The model is overloaded. Please try again later.")
    );
    assert_eq!(sent_texts(&chunks), ["Hel"]);
    let error = upstream(parse(r#"{"error":{"code":0}}"#));
    assert_eq!(
        (error.status, error.message.as_str()),
        (500, r#"{"code":0}"#)
    );
}

#[test]
fn malformed_answers_fail_clearly() {
    for body in ["not json", "", r#"{"candidates":{}}"#, "[1]"] {
        let message = failed(parse(body));
        assert!(
            message.starts_with("malformed response from upstream: "),
            "{body}: {message}"
        );
    }
}

#[test]
fn a_stream_without_a_finish_reason_ended_early() {
    let (chunks, result) = stream(&stream_of(&[json!(
        {"candidates":[{"content":{"parts":[{"text":"Hel"}]},"index":0}],
         "usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4}}
    )]));
    assert_eq!(failed(result), "stream ended early");
    assert_eq!(sent_texts(&chunks), ["Hel"]);
    assert_eq!(chunks[0].usage, Some(usage_of(3, 1, 4, None)));
    assert_eq!(failed(stream("").1), "stream ended early");
}

#[test]
fn a_stream_cut_mid_event_fails() {
    let whole = stream_of(&[
        json!({"candidates":[{"content":{"parts":[{"text":"Olá"}]},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"!"}]},"finishReason":"STOP","index":0}]}),
    ]);
    let cut = &whole[..whole.len() - 30];
    let (chunks, result) = stream(cut);
    let message = failed(result);
    assert!(
        message.starts_with("malformed response from upstream"),
        "{message}"
    );
    assert_eq!(sent_texts(&chunks), ["Olá"]);
}

#[test]
fn stream_events_without_text_or_usage_send_nothing() {
    let (chunks, result) = stream(&stream_of(&[
        // A part the gateway has no place for (thoughts are reasoning now, streamed as such).
        json!({"candidates":[{"content":{"parts":[{"executableCode":{"code":"1"}}]},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"Hi"}]},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[]},"finishReason":"STOP","index":0}]}),
    ]));
    assert_eq!(chunks.len(), 1);
    assert_eq!(sent_texts(&chunks), ["Hi"]);
    assert_eq!(result.unwrap().choices[0].text, "Hi");
}

#[test]
fn a_json_stream_answer_is_read_too() {
    let body = json!([
        {"candidates":[{"content":{"parts":[{"text":"A"}]},"index":0}]},
        {"candidates":[{"content":{"parts":[{"text":"B"}]},"finishReason":"STOP","index":0}],
         "usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3}}
    ])
    .to_string();
    let mut sink = Sink::buffered();
    let response = response(200, "application/json", &[&body]);
    let completion = read_stream(response, &mut sink, "m", Decoder::default()).unwrap();
    // Read whole, so its text goes to the caller in one chunk.
    assert_eq!(sent_texts(sink.sent()), ["AB"]);
    assert_eq!(completion.choices[0].text, "AB");
    assert_eq!(completion.usage, Some(usage_of(1, 2, 3, None)));
}

#[test]
fn decoder_reads_events_directly() {
    let event = |data: &str| Event {
        data: data.into(),
        ..Event::default()
    };
    let mut decoder = Decoder::default();
    let mut answer = Answer::new("m");
    decoder.event(&event("  "), &mut answer).unwrap();
    assert!(!answer.is_complete());
    failed(decoder.event(&event("{"), &mut answer));
    let calls = r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]}"#;
    decoder.event(&event(calls), &mut answer).unwrap();
    let stop = r#"{"candidates":[{"finishReason":"STOP"}]}"#;
    decoder.event(&event(stop), &mut answer).unwrap();
    assert!(answer.is_complete());
    // `STOP` after a call in an earlier event is still a tool-call finish.
    decoder.end(&mut answer).unwrap();
    let completion = answer.finish();
    assert_eq!(
        completion.choices[0].finish_reason,
        Some(FinishReason::ToolCalls)
    );
    assert_eq!(completion.choices[0].tool_calls[0].id, "call_0_0");
}

#[test]
fn logprobs_of_an_answer_are_read_in_openai_shape() {
    let step = |token: &str, logprob: f64, top: Value| json!({"token": token, "logprob": logprob, "bytes": token.as_bytes(), "top_logprobs": top});
    let answer = |tokens: Value| {
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Olá!"}]},
            "finishReason": "STOP", "logprobsResult": tokens}]})
        .to_string()
    };
    let whole = answer(json!({
        "topCandidates": [
            {"candidates": [{"token": "Olá", "tokenId": 1, "logProbability": -0.1},
                            {"token": "Oi", "tokenId": 2, "logProbability": -2.5}]},
            {"candidates": [{"token": "!", "tokenId": 3, "logProbability": -0.01}]}
        ],
        "chosenCandidates": [
            {"token": "Olá", "tokenId": 1, "logProbability": -0.1},
            {"token": "!", "tokenId": 3, "logProbability": -0.01}
        ],
        "logProbabilitySum": -0.11
    }));
    let completion = parse(&whole).unwrap();
    let logprobs: Value =
        serde_json::from_str(completion.choices[0].logprobs.as_deref().expect("logprobs")).unwrap();
    assert_eq!(
        logprobs,
        json!({"content": [
            step("Olá", -0.1, json!([
                {"token": "Olá", "logprob": -0.1, "bytes": "Olá".as_bytes()},
                {"token": "Oi", "logprob": -2.5, "bytes": "Oi".as_bytes()}])),
            step("!", -0.01, json!([{"token": "!", "logprob": -0.01, "bytes": [33]}])),
        ]})
    );

    // Streamed: each event's tokens, in order; no top candidates asked for.
    let event = |token: &str, logprob: f64, finish: Option<&str>| {
        let mut candidate = json!({"content": {"role": "model", "parts": [{"text": token}]},
            "logprobsResult": {"chosenCandidates": [{"token": token, "logProbability": logprob}]}});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        format!("data: {}\r\n\r\n", json!({"candidates": [candidate]}))
    };
    let body = event("Olá", -0.1, None) + &event("!", -0.01, Some("STOP"));
    let completion = stream(&body).1.unwrap();
    let logprobs: Value =
        serde_json::from_str(completion.choices[0].logprobs.as_deref().expect("logprobs")).unwrap();
    assert_eq!(
        logprobs,
        json!({"content": [step("Olá", -0.1, json!([])), step("!", -0.01, json!([]))]})
    );

    // Without `responseLogprobs` there are none.
    assert_eq!(
        parse(&answer(Value::Null)).unwrap().choices[0].logprobs,
        None
    );
}

#[test]
fn route_settings_are_refused() {
    let mut with_setting = request(Prompt::Text("hi".into()));
    with_setting.route.settings = r#"{"legacy_completions": true}"#.into();
    match completion_call(&with_setting, false) {
        Err(ProviderError::Failed(message)) => assert!(
            message.starts_with("route `test`: setting `legacy_completions`: unknown field"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    let mut empty = request(Prompt::Text("hi".into()));
    empty.route.settings = String::new();
    assert!(completion_call(&empty, false).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Content parts, reasoning and usage of the WIT 0.2 contract

fn user_parts(parts: Vec<Part>) -> Message {
    Message {
        parts,
        ..message(Role::User, "")
    }
}

fn image(source: Source, media_type: Option<&str>) -> Part {
    Part::Image(Image {
        source,
        media_type: media_type.map(Into::into),
        detail: Some("high".into()),
    })
}

fn document(source: Source, media_type: Option<&str>) -> Part {
    Part::Document(Document {
        source,
        media_type: media_type.map(Into::into),
        title: Some("report.pdf".into()),
    })
}

fn reasoning(text: &str, signature: Option<&str>) -> Part {
    Part::Reasoning(Reasoning {
        text: text.into(),
        signature: signature.map(Into::into),
        redacted: None,
    })
}

fn url(url: &str) -> Source {
    Source::Url(url.into())
}

/// The `contents` sent for `messages`.
fn contents(messages: Vec<Message>) -> Value {
    body(&chat(messages))["contents"].clone()
}

#[test]
fn images_are_inline_data_or_file_data_in_order() {
    let sent = contents(vec![user_parts(vec![
        Part::Text("What".into()),
        Part::Text("is this?".into()),
        image(Source::Bytes(b"hi!".to_vec()), Some("image/gif")),
        image(url("https://x.test/a.png"), Some("image/webp")),
        image(url("https://x.test/photo.JPG?size=large#top"), None),
        Part::Text("".into()),
        Part::Text("Thanks".into()),
    ])]);
    assert_eq!(
        sent,
        json!([{"role": "user", "parts": [
            {"text": "What\nis this?"},
            {"inlineData": {"mimeType": "image/gif", "data": "aGkh"}},
            {"fileData": {"mimeType": "image/webp", "fileUri": "https://x.test/a.png"}},
            {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://x.test/photo.JPG?size=large#top"}},
            {"text": "\nThanks"}
        ]}])
    );
}

#[test]
fn an_image_url_of_unknown_type_is_refused() {
    for source in ["https://x.test/image", "https://x.test/a.pdf"] {
        let message = invalid_request(completion_call(
            &chat(vec![user_parts(vec![image(url(source), None)])]),
            false,
        ));
        assert!(
            message.starts_with("messages[0]: gemini needs the media type of an image URL"),
            "{message}"
        );
    }
}

#[test]
fn audio_is_inline_data_of_its_format() {
    let clip = |format: &str| {
        Part::Audio(Audio {
            data: b"hi!".to_vec(),
            format: format.into(),
        })
    };
    let sent = contents(vec![user_parts(vec![clip("mp3"), clip("WAV")])]);
    assert_eq!(
        sent,
        json!([{"role": "user", "parts": [
            {"inlineData": {"mimeType": "audio/mp3", "data": "aGkh"}},
            {"inlineData": {"mimeType": "audio/wav", "data": "aGkh"}}
        ]}])
    );
}

#[test]
fn documents_are_inline_data_or_file_data() {
    let sent = contents(vec![user_parts(vec![
        document(Source::Bytes(b"%PDF".to_vec()), Some("application/pdf")),
        document(Source::Bytes(b"hi!".to_vec()), Some("text/plain")),
        document(url("https://x.test/notes.txt"), None),
        document(url("https://x.test/download?id=7"), None),
        document(url("gs://bucket/a"), Some("text/csv")),
    ])]);
    assert_eq!(
        sent,
        json!([{"role": "user", "parts": [
            {"inlineData": {"mimeType": "application/pdf", "data": "JVBERg=="}},
            {"inlineData": {"mimeType": "text/plain", "data": "aGkh"}},
            {"fileData": {"mimeType": "text/plain", "fileUri": "https://x.test/notes.txt"}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "https://x.test/download?id=7"}},
            {"fileData": {"mimeType": "text/csv", "fileUri": "gs://bucket/a"}}
        ]}])
    );
}

#[test]
fn media_in_system_messages_and_tool_results_is_refused() {
    let system = Message {
        parts: vec![
            Part::Text("Be brief.".into()),
            image(url("https://x.test/a.png"), None),
        ],
        ..message(Role::System, "")
    };
    let refused = invalid_request(completion_call(
        &chat(vec![system, message(Role::User, "hi")]),
        false,
    ));
    assert_eq!(
        refused,
        "messages[0]: gemini does not take image parts in system messages"
    );

    let result = Message {
        parts: vec![document(Source::Bytes(b"%PDF".to_vec()), None)],
        ..tool_result("c1", "")
    };
    let refused = invalid_request(completion_call(
        &chat(vec![
            message(Role::User, "go"),
            tool_calls(&[("c1", "fetch", "{}")]),
            result,
        ]),
        false,
    ));
    assert_eq!(
        refused,
        "messages[2]: gemini does not take document parts in tool results"
    );
}

#[test]
fn failed_tool_results_are_sent_as_errors() {
    let failed = |content: &str| Message {
        is_error: true,
        ..tool_result("c1", content)
    };
    let sent = contents(vec![
        message(Role::User, "go"),
        tool_calls(&[("c1", "fetch", "{}")]),
        failed("timed out"),
        tool_calls(&[("c2", "fetch", "{}")]),
        Message {
            tool_call_id: Some("c2".into()),
            ..failed(r#"{"code": 404}"#)
        },
        tool_calls(&[("c3", "fetch", "{}")]),
        tool_result("c3", "ok"),
    ]);
    let responses: Vec<&Value> = [2, 4, 6]
        .iter()
        .map(|&turn| &sent[turn]["parts"][0]["functionResponse"]["response"])
        .collect();
    assert_eq!(
        responses,
        [
            &json!({"error": "timed out"}),
            &json!({"error": {"code": 404}}),
            &json!({"output": "ok"})
        ]
    );
}

#[test]
fn reasoning_config_maps_to_thinking_config() {
    let thinking = |model: &str, effort: Option<ReasoningEffort>, budget: Option<u32>, params| {
        let mut req = request(Prompt::Text("Hi".into()));
        req.model = String::from(model);
        req.params = String::from(params);
        req.reasoning = Some(ReasoningConfig {
            effort,
            budget_tokens: budget,
        });
        body(&req)["generationConfig"]["thinkingConfig"].clone()
    };
    let flash = "gemini-2.5-flash";
    let pro3 = "gemini-3-pro-preview";
    use ReasoningEffort as E;
    let budgets = [
        (E::None, json!({"thinkingBudget": 0})),
        (
            E::Minimal,
            json!({"thinkingBudget": 512, "includeThoughts": true}),
        ),
        (
            E::Low,
            json!({"thinkingBudget": 1024, "includeThoughts": true}),
        ),
        (
            E::Medium,
            json!({"thinkingBudget": 8192, "includeThoughts": true}),
        ),
        (
            E::High,
            json!({"thinkingBudget": 24576, "includeThoughts": true}),
        ),
        (
            E::Xhigh,
            json!({"thinkingBudget": 24576, "includeThoughts": true}),
        ),
    ];
    for (effort, expected) in budgets {
        assert_eq!(
            thinking(flash, Some(effort), None, "{}"),
            expected,
            "{effort:?}"
        );
    }
    for (effort, level) in [
        (E::None, "low"),
        (E::Minimal, "low"),
        (E::Low, "low"),
        (E::Medium, "high"),
        (E::High, "high"),
        (E::Xhigh, "high"),
    ] {
        assert_eq!(
            thinking(pro3, Some(effort), Some(99), "{}"),
            json!({"thinkingLevel": level, "includeThoughts": true}),
            "{effort:?}"
        );
    }
    // A budget is a budget on every model, and wins over an effort where levels do not apply.
    assert_eq!(
        thinking(pro3, None, Some(2048), "{}"),
        json!({"thinkingBudget": 2048, "includeThoughts": true})
    );
    assert_eq!(
        thinking(flash, Some(E::High), Some(2048), "{}"),
        json!({"thinkingBudget": 2048, "includeThoughts": true})
    );
    assert_eq!(
        thinking(flash, None, None, "{}"),
        json!({"includeThoughts": true})
    );
    // Over the params' own thinkingConfig: its other fields stay, its setting is replaced.
    assert_eq!(
        thinking(
            flash,
            Some(E::Low),
            None,
            r#"{"thinkingConfig": {"thinkingLevel": "high", "includeThoughts": false}}"#
        ),
        json!({"thinkingBudget": 1024, "includeThoughts": false})
    );
    let mut req = request(Prompt::Text("Hi".into()));
    req.params = r#"{"thinkingConfig": 3}"#.into();
    req.reasoning = Some(ReasoningConfig {
        effort: Some(E::Low),
        budget_tokens: None,
    });
    assert_eq!(
        invalid_request(completion_call(&req, false)),
        "route `test`: thinkingConfig must be an object"
    );
}

#[test]
fn recorded_signature_round_trips_onto_its_function_call() {
    // The recorded answer: the first of two parallel calls carries the signature.
    let answer = replay(&recording("multi_tool")[0]).1;
    let choice = &answer.choices[0];
    assert_eq!(choice.reasoning.len(), 1);
    assert_eq!(choice.reasoning[0].text, "");
    let signature = choice.reasoning[0].signature.clone().expect("a signature");
    assert!(signature.starts_with("CuwBAb4+9vtZ"), "{signature}");

    // Sent back with the calls, it is on the first call, exactly as recorded.
    let recorded = recording("multi_tool").remove(1).request_json();
    let mut req = chat(vec![
        message(
            Role::System,
            "You are a helpful assistant. CRITICAL: Always use both add and multiply at the same time ALWAYS.",
        ),
        message(Role::User, "Add and multiply the number 2 and 3"),
        Message {
            parts: choice
                .reasoning
                .iter()
                .cloned()
                .map(Part::Reasoning)
                .collect(),
            ..tool_calls(&[
                ("1", "add", r#"{"a":2,"b":3}"#),
                ("2", "multiply", r#"{"a":2,"b":3}"#),
            ])
        },
        tool_result("1", r#"{"result":"5"}"#),
        tool_result("2", r#"{"result":"6"}"#),
    ]);
    req.functions = calculator_functions();
    req.function_choice = Some(FunctionChoice::Auto);
    req.params = r#"{"maxOutputTokens":4000}"#.into();
    assert_eq!(body(&req)["contents"], recorded["contents"]);

    // On Gemini 3 the other call gets no placeholder: Gemini signs only the first of parallel
    // calls.
    req.model = "gemini-3-pro-preview".into();
    assert_eq!(body(&req)["contents"], recorded["contents"]);
}

#[test]
fn reasoning_in_history_goes_back_on_its_parts() {
    let assistant = Message {
        parts: vec![
            reasoning("Plan: greet.", Some("S1")),
            reasoning("unsigned summary", None),
            Part::Reasoning(Reasoning {
                text: String::new(),
                signature: None,
                redacted: Some("opaque".into()),
            }),
            reasoning("", Some("S2")),
            Part::Text("Hello!".into()),
        ],
        ..message(Role::Assistant, "")
    };
    let user = Message {
        parts: vec![reasoning("not mine", Some("X")), Part::Text("Hi".into())],
        ..message(Role::User, "")
    };
    let sent = contents(vec![user, assistant]);
    assert_eq!(
        sent,
        json!([
            {"role": "user", "parts": [{"text": "Hi"}]},
            {"role": "model", "parts": [
                {"text": "Plan: greet.", "thought": true, "thoughtSignature": "S1"},
                {"text": "Hello!", "thoughtSignature": "S2"}
            ]}
        ])
    );

    // With calls: signatures go onto the calls in order; one more goes on the last text part.
    let assistant = Message {
        parts: vec![
            reasoning("", Some("T")),
            reasoning("", Some("C1")),
            reasoning("", Some("C2")),
            Part::Text("Checking.".into()),
        ],
        ..tool_calls(&[("a", "f", "{}"), ("b", "g", "{}")])
    };
    let sent = contents(vec![message(Role::User, "go"), assistant]);
    assert_eq!(
        sent[1]["parts"],
        json!([
            {"text": "Checking.", "thoughtSignature": "T"},
            {"functionCall": {"id": "a", "name": "f", "args": {}}, "thoughtSignature": "C1"},
            {"functionCall": {"id": "b", "name": "g", "args": {}}, "thoughtSignature": "C2"}
        ])
    );
}

#[test]
fn thought_summaries_and_signatures_are_reasoning() {
    let completion = parse(
        r#"{"candidates":[{"content":{"parts":[
            {"text":"Weighing ","thought":true},
            {"text":"units.","thought":true},
            {"text":"It is warm.","thoughtSignature":"S-text"},
            {"text":"Next, the log.","thought":true,"thoughtSignature":"S-thought"},
            {"functionCall":{"name":"log","args":{}},"thoughtSignature":"S-call"}
        ],"role":"model"},"finishReason":"STOP"}]}"#,
    )
    .unwrap();
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "It is warm.");
    let reasoning: Vec<(&str, Option<&str>, Option<&str>)> = (choice.reasoning.iter())
        .map(|r| {
            let (signature, redacted) = (r.signature.as_deref(), r.redacted.as_deref());
            (r.text.as_str(), signature, redacted)
        })
        .collect();
    assert_eq!(
        reasoning,
        [
            ("Weighing units.", None, None),
            ("", Some("S-text"), None),
            ("Next, the log.", Some("S-thought"), None),
            ("", Some("S-call"), None),
        ]
    );
    assert_eq!(choice.tool_calls.len(), 1);
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
}

#[test]
fn streamed_thoughts_and_signatures_reach_the_caller() {
    let body = stream_of(&[
        json!({"candidates":[{"content":{"parts":[{"text":"Let me ","thought":true}],"role":"model"},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"think.","thought":true}],"role":"model"},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"Olá"}],"role":"model"},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"!"}],"role":"model"},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"SIG"}],"role":"model"},
                              "finishReason":"STOP","index":0}],
               "usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"thoughtsTokenCount":9,
                                "totalTokenCount":16}}),
    ]);
    let pieces: Vec<&[u8]> = body.as_bytes().chunks(7).collect();
    let response = Response::from_chunks(
        200,
        vec![("Content-Type".into(), "text/event-stream".into())],
        pieces.into_iter().map(<[u8]>::to_vec).collect(),
    );
    let mut sink = Sink::buffered();
    let completion = read_stream(response, &mut sink, "m", Decoder::default()).unwrap();
    let sent: Vec<(u32, &str, Option<&str>)> = (sink.sent_reasoning().iter())
        .map(|d| (d.block, d.text.as_str(), d.signature.as_deref()))
        .collect();
    assert_eq!(
        sent,
        [
            (0, "Let me ", None),
            (0, "think.", None),
            (1, "", Some("SIG"))
        ]
    );
    assert_eq!(sent_texts(sink.sent()), ["Olá", "!"]);
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "Olá!");
    assert_eq!(
        choice.reasoning,
        [
            Reasoning {
                text: "Let me think.".into(),
                signature: None,
                redacted: None
            },
            Reasoning {
                text: String::new(),
                signature: Some("SIG".into()),
                redacted: None
            }
        ]
    );
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    assert_eq!(completion.usage, Some(usage_of(5, 11, 16, Some(9))));
}

#[test]
fn a_signed_empty_thought_part_closes_its_run() {
    // As Code Assist streams them: the thought text, then an empty thought part with the
    // signature; a later thought opens a new block.
    let (_, completion) = stream(&stream_of(&[
        json!({"candidates":[{"content":{"parts":[{"text":"A","thought":true}]},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"","thought":true,"thoughtSignature":"S"}]},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"B","thought":true}]},"index":0}]}),
        json!({"candidates":[{"content":{"parts":[{"text":"done"}]},"finishReason":"STOP","index":0}]}),
    ]));
    let choice = &completion.unwrap().choices[0];
    let reasoning: Vec<(&str, Option<&str>)> = (choice.reasoning.iter())
        .map(|r| (r.text.as_str(), r.signature.as_deref()))
        .collect();
    assert_eq!(reasoning, [("A", Some("S")), ("B", None)]);
}

#[test]
fn prompt_token_details_give_image_and_audio_tokens() {
    let wire: UsageMetadata = serde_json::from_value(json!({
        "promptTokenCount": 1600, "candidatesTokenCount": 10, "totalTokenCount": 1610,
        "promptTokensDetails": [
            {"modality": "TEXT", "tokenCount": 42},
            {"modality": "IMAGE", "tokenCount": 1290},
            {"modality": "AUDIO", "tokenCount": "268"}
        ]
    }))
    .unwrap();
    let usage = usage(&wire);
    assert_eq!(
        (usage.image_prompt_tokens, usage.audio_prompt_tokens),
        (Some(1290), Some(268))
    );
    assert_eq!(usage.prompt_tokens, 1600);

    let wire: UsageMetadata = serde_json::from_value(json!({
        "promptTokenCount": 42, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 42}]
    }))
    .unwrap();
    let usage = crate::stream::usage(&wire);
    assert_eq!(
        (usage.image_prompt_tokens, usage.audio_prompt_tokens),
        (None, None)
    );
}

#[test]
fn gemini_reports_no_stop_sequence_pause_or_refusal() {
    // A stop sequence ends the answer with `STOP` (Gemini does not say which one), so it is a
    // plain stop; Gemini's refusals are its safety reasons.
    let mut req = request(Prompt::Text("Count".into()));
    req.params = r#"{"stop":["5"]}"#.into();
    assert_eq!(
        body(&req)["generationConfig"],
        json!({"stopSequences": ["5"]})
    );
    let completion = parse(
        r#"{"candidates":[{"content":{"parts":[{"text":"1 2 3 4 "}]},"finishReason":"STOP"}]}"#,
    )
    .unwrap();
    assert_eq!(
        completion.choices[0].finish_reason,
        Some(FinishReason::Stop)
    );
    for reason in [
        "PROHIBITED_CONTENT",
        "SPII",
        "BLOCKLIST",
        "RECITATION",
        "SAFETY",
    ] {
        assert_eq!(
            finish_reason(reason),
            FinishReason::ContentFilter,
            "{reason}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The host's output limit

#[test]
fn the_output_limit_is_written_over_geminis_own_names() {
    let mut req = request(Prompt::Text("Hi".into()));
    req.params = r#"{"max_tokens": 100, "generationConfig": {"max_output_tokens": 50000,
        "candidateCount": 8, "thinkingConfig": {"thinkingBudget": -1}}}"#
        .into();
    req.output = gateway_plugin_sdk::OutputLimit {
        max_tokens: Some(100),
        choices: 1,
    };
    let sent = body(&req);
    let config = &sent["generationConfig"];
    assert_eq!(config["maxOutputTokens"], json!(100));
    for gone in ["max_output_tokens", "candidateCount", "candidate_count"] {
        assert!(config.get(gone).is_none(), "{gone}: {sent}");
    }
    // Dynamic thinking is brought down to the limit too.
    assert_eq!(config["thinkingConfig"]["thinkingBudget"], json!(100));
    let http = completion_call(&req, false).expect("request builds");
    gateway_plugin_sdk::check_output(&req.output, &crate::convert::OUTPUT, http.body_bytes())
        .expect("what the plugin builds passes");
    req.output.choices = 2;
    assert_eq!(body(&req)["generationConfig"]["candidateCount"], json!(2));
}
