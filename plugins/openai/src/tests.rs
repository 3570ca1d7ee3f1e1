//! Unit tests of the request mapping and the answer decoder, partly against real recorded
//! provider traffic.

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{
    Audio, Completion, CompletionRequest, Document, EmbeddingRequest, FinishReason, FunctionCall,
    FunctionChoice, FunctionDef, Image, Message, Part, Prompt, Provider, ProviderError, Reasoning,
    ReasoningConfig, ReasoningEffort, Role, Route, Sink, Source, ToolCall, read_completion,
    read_stream,
};
use gateway_test_support::fixtures::{calling, failed, invalid_request, message, named};
use gateway_test_support::recording::recording;
use serde_json::{Value, json};

use crate::OpenAi;
use crate::convert::{Settings, chat_messages, completion, embedding, tool_choice, tools};
use crate::stream::{Decoder, parse_embeddings, usage};
use crate::wire::WireUsage;

// ---------------------------------------------------------------------------------------------
// Helpers

fn route(settings: &str) -> Route {
    Route {
        id: "test".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: Some("sk-test".into()),
        settings: settings.into(),
        secrets: Vec::new(),
    }
}

fn request(prompt: Prompt) -> CompletionRequest {
    CompletionRequest {
        route: route("{}"),
        model: "gpt-4o-mini".into(),
        prompt,
        functions: Vec::new(),
        function_choice: None,
        reasoning: None,
        output: gateway_plugin_sdk::OutputLimit::NONE,
        params: "{}".into(),
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

fn messages_json(messages: &[Message]) -> Value {
    serde_json::to_value(chat_messages(messages).expect("messages map")).expect("serializes")
}

/// The JSON body of an upstream request.
fn sent(http: &Request) -> Value {
    serde_json::from_slice(http.body_bytes()).expect("JSON body")
}

fn body(request: &CompletionRequest, stream: bool) -> Value {
    sent(&completion(request, stream).expect("request builds"))
}

fn url(request: &CompletionRequest) -> String {
    completion(request, false)
        .expect("request builds")
        .url()
        .to_owned()
}

fn settings(route: &Route) -> Result<Settings, ProviderError> {
    route.settings::<Settings>()
}

/// Reads a whole answer with the plugin's decoder.
fn parse_completion(body: &[u8], requested_model: &str) -> Result<Completion, ProviderError> {
    read_completion(
        Response::from_chunks(200, Vec::new(), vec![body.to_vec()]),
        requested_model,
        Decoder,
    )
}

/// Feeds an SSE body through the SDK's stream driver in small pieces (to cross chunk boundaries
/// the way a network does), returning the forwarded text per choice and the final completion.
fn replay_stream(body: &str) -> Result<(Vec<(u32, String)>, Completion), ProviderError> {
    let mut sink = Sink::buffered();
    let response = response(200, "text/event-stream", body, 7);
    let completion = read_stream(response, &mut sink, "requested-model", Decoder)?;
    let mut forwarded: Vec<(u32, String)> = Vec::new();
    for delta in sink.sent().iter().flat_map(|chunk| &chunk.deltas) {
        match forwarded.iter_mut().find(|(i, _)| *i == delta.index) {
            Some((_, text)) => text.push_str(&delta.text),
            None => forwarded.push((delta.index, delta.text.clone())),
        }
    }
    Ok((forwarded, completion))
}

// ---------------------------------------------------------------------------------------------
// Recorded traffic (go-vcr YAML, read by `gateway_test_support`)

const OPENAI_FAMILY: &[&str] = &[
    "OpenAI__openai-gpt-4o-mini__simple",
    "OpenAI__openai-gpt-4o-mini__simple_streaming",
    "OpenAI__openai-gpt-4o-mini__tool",
    "OpenAI__openai-gpt-4o-mini__tool_streaming",
    "OpenAI__openai-gpt-4o-mini__multi_tool",
    "OpenAI__openai-gpt-4o-mini__multi_tool_streaming",
    "Azure__azure-gpt-5-mini__simple",
    "Azure__azure-gpt-5-mini__simple_streaming",
    "Azure__azure-gpt-5-mini__tool",
    "Azure__azure-gpt-5-mini__tool_streaming",
    "OpenAICompatible__groq-kimi-k2__simple",
    "OpenAICompatible__groq-kimi-k2__simple_streaming",
    "OpenAICompatible__groq-kimi-k2__tool",
    "OpenAICompatible__groq-kimi-k2__tool_streaming",
    "OpenAICompatible__groq-kimi-k2__multi_tool",
    "OpenAICompatible__groq-kimi-k2__multi_tool_streaming",
    "OpenAICompatible__llama-cpp-gpt-oss__simple",
    "OpenAICompatible__llama-cpp-gpt-oss__simple_streaming",
    "OpenAICompatible__llama-cpp-gpt-oss__tool",
    "OpenAICompatible__llama-cpp-gpt-oss__tool_streaming",
];

// ---------------------------------------------------------------------------------------------
// info

#[test]
fn info_lists_models_with_list_prices() {
    let info = OpenAi::info();
    assert_eq!(info.name, "openai");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    let expected = [
        ("gpt-4o-mini", 0.15, 0.60),
        ("gpt-4o", 2.50, 10.00),
        ("gpt-4.1", 2.00, 8.00),
        ("gpt-4.1-mini", 0.40, 1.60),
        ("gpt-4.1-nano", 0.10, 0.40),
        ("o4-mini", 1.10, 4.40),
        ("gpt-5", 1.25, 10.00),
        ("gpt-5-mini", 0.25, 2.00),
        ("gpt-5-nano", 0.05, 0.40),
        ("text-embedding-3-small", 0.02, 0.0),
        ("text-embedding-3-large", 0.13, 0.0),
        ("text-embedding-ada-002", 0.10, 0.0),
    ];
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
    let mut names: Vec<&str> = info.models.iter().map(|p| p.model.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), info.models.len(), "duplicate model names");
}

// ---------------------------------------------------------------------------------------------
// Requests

#[test]
fn text_prompt_is_one_user_message_with_params_merged() {
    let mut req = request(Prompt::Text("Say hi".into()));
    req.params = r#"{"temperature":0.2,"max_tokens":40,"stop":["\n"],"seed":7,
        "response_format":{"type":"json_object"},
        "model":"evil","messages":[],"stream":true,"stream_options":{},"tools":[],"tool_choice":"required"}"#
        .into();
    assert_eq!(url(&req), "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(
        body(&req, false),
        json!({
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "Say hi"}],
            "temperature": 0.2,
            "max_tokens": 40,
            "stop": ["\n"],
            "seed": 7,
            "response_format": {"type": "json_object"},
        })
    );
}

#[test]
fn streaming_body_asks_for_usage_and_ignores_the_callers_stream_options() {
    let mut req = request(Prompt::Text("Say hi".into()));
    req.params = r#"{"stream":false,"stream_options":{"include_usage":false}}"#.into();
    let body = body(&req, true);
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn empty_params_string_is_an_empty_object_and_non_objects_are_rejected() {
    let mut req = request(Prompt::Text("x".into()));
    req.params = String::new();
    assert_eq!(body(&req, false)["model"], json!("gpt-4o-mini"));
    req.params = "[1]".into();
    invalid_request(completion(&req, false));
}

#[test]
fn legacy_completions_setting_sends_text_to_completions() {
    let mut req = request(Prompt::Text("Once upon".into()));
    req.model = "gpt-3.5-turbo-instruct".into();
    req.route = route(r#"{"legacy_completions": true}"#);
    req.params = r#"{"max_tokens":5,"prompt":"ignored","logprobs":2}"#.into();
    assert!(settings(&req.route).expect("settings").legacy_completions);
    let http = completion(&req, true).expect("builds");
    assert_eq!(http.url(), "http://127.0.0.1:9/v1/completions");
    assert_eq!(
        sent(&http),
        json!({
            "model": "gpt-3.5-turbo-instruct",
            "prompt": "Once upon",
            "max_tokens": 5,
            "logprobs": 2,
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[test]
fn legacy_completions_setting_leaves_chat_on_chat_completions_and_refuses_functions() {
    let legacy = route(r#"{"legacy_completions": true}"#);
    let mut chat = request(Prompt::Chat(vec![message(Role::User, "hi")]));
    chat.route = legacy.clone();
    assert!(url(&chat).ends_with("/chat/completions"));

    let mut text = request(Prompt::Text("hi".into()));
    text.route = legacy;
    text.functions = vec![weather_function()];
    let message = invalid_request(completion(&text, false));
    assert!(message.contains("functions"), "{message}");
}

#[test]
fn route_settings_are_checked() {
    assert_eq!(
        settings(&route("")).expect("empty settings"),
        Settings::default()
    );
    let parsed = settings(&route(r#"{"api_key_header":" api-key "}"#)).expect("settings");
    assert_eq!(parsed.api_key_header.as_deref(), Some("api-key"));
    let message = failed(settings(&route(r#"{"legacy_completions":"yes"}"#)));
    assert!(
        message.starts_with("route `test`: setting `legacy_completions`: "),
        "{message}"
    );
    for bad in [r#"{"api_key_header":5}"#, r#"{"api_key_header":" "}"#] {
        let message = failed(settings(&route(bad)));
        assert!(
            message.starts_with("route `test`: setting `api_key_header`: "),
            "{message}"
        );
    }
    // A misspelt setting is refused rather than ignored, also when a call is made.
    let message = failed(settings(&route(
        r#"{"api_key_header":"api-key","other":1}"#,
    )));
    assert!(message.contains("unknown field `other`"), "{message}");
    let mut req = request(Prompt::Text("hi".into()));
    req.route = route(r#"{"legacy_completion": true}"#);
    failed(completion(&req, false));
}

// ---------------------------------------------------------------------------------------------
// Azure OpenAI

fn azure_route(base_url: &str, settings: &str) -> Route {
    Route {
        id: "azure".into(),
        base_url: base_url.into(),
        api_key: Some("azure-key-0123".into()),
        settings: settings.into(),
        secrets: Vec::new(),
    }
}

#[test]
fn azure_api_version_switches_to_deployment_urls() {
    let route = azure_route(
        "https://res.openai.azure.com/",
        r#"{"azure_api_version":"2024-10-21"}"#,
    );
    let parsed = settings(&route).expect("settings");
    assert_eq!(parsed.azure_api_version.as_deref(), Some("2024-10-21"));

    let mut req = request(Prompt::Chat(vec![message(Role::User, "hi")]));
    req.route = route.clone();
    req.model = "my-gpt-5-mini".into();
    let http = completion(&req, true).expect("builds");
    assert_eq!(
        http.url(),
        "https://res.openai.azure.com/openai/deployments/my-gpt-5-mini/chat/completions?api-version=2024-10-21"
    );
    // Same body as OpenAI's, usage asked for in streams.
    let body = sent(&http);
    assert_eq!(body["model"], json!("my-gpt-5-mini"));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));

    let mut text = request(Prompt::Text("Once".into()));
    text.route = azure_route(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2024-10-21","legacy_completions":true}"#,
    );
    text.model = "instruct".into();
    assert_eq!(
        url(&text),
        "https://res.openai.azure.com/openai/deployments/instruct/completions?api-version=2024-10-21"
    );

    let embed = EmbeddingRequest {
        route: route.clone(),
        model: "embed.small_v3".into(),
        input: vec!["a".into()],
        params: "{}".into(),
    };
    assert_eq!(
        embedding(&embed).expect("builds").url(),
        "https://res.openai.azure.com/openai/deployments/embed.small_v3/embeddings?api-version=2024-10-21"
    );
}

#[test]
fn azure_base_url_may_already_end_in_openai() {
    let mut req = request(Prompt::Text("hi".into()));
    req.route = azure_route(
        "https://res.openai.azure.com/openai",
        r#"{"azure_api_version":"2025-04-01-preview"}"#,
    );
    req.model = "gpt4o".into();
    assert_eq!(
        url(&req),
        "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2025-04-01-preview"
    );
}

#[test]
fn azure_deployment_mode_sends_the_key_in_api_key_unless_told_otherwise() {
    let mut req = request(Prompt::Text("hi".into()));
    req.route = azure_route(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2024-10-21"}"#,
    );
    let http = completion(&req, false).expect("request");
    assert_eq!(http.header_value("api-key"), Some("azure-key-0123"));
    assert_eq!(http.header_value("authorization"), None);

    // An explicit header wins (e.g. a proxy in front of Azure with its own header).
    req.route.settings =
        r#"{"azure_api_version":"2024-10-21","api_key_header":"x-proxy-key"}"#.into();
    let http = completion(&req, false).expect("request");
    assert_eq!(http.header_value("x-proxy-key"), Some("azure-key-0123"));
    assert_eq!(http.header_value("api-key"), None);
}

#[test]
fn azure_v1_api_is_a_plain_openai_route_with_the_api_key_header() {
    let mut req = request(Prompt::Text("hi".into()));
    req.route = azure_route(
        "https://res.openai.azure.com/openai/v1",
        r#"{"api_key_header":"api-key"}"#,
    );
    req.model = "gpt-5-mini".into();
    let http = completion(&req, false).expect("request");
    assert_eq!(
        http.url(),
        "https://res.openai.azure.com/openai/v1/chat/completions"
    );
    assert_eq!(http.header_value("api-key"), Some("azure-key-0123"));
    assert_eq!(http.header_value("authorization"), None);
}

#[test]
fn azure_deployment_names_cannot_change_the_url() {
    let route = azure_route(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2024-10-21"}"#,
    );
    for model in [
        "", ".", "..", "a/b", "../x", "a?b", "a#b", "a b", "a%2fb", "dépl",
    ] {
        let mut req = request(Prompt::Text("hi".into()));
        req.route = route.clone();
        req.model = model.into();
        let message = invalid_request(completion(&req, false));
        assert!(message.contains("deployment name"), "{model:?}: {message}");
        let embed = EmbeddingRequest {
            route: route.clone(),
            model: model.into(),
            input: vec!["a".into()],
            params: "{}".into(),
        };
        invalid_request(embedding(&embed));
    }
    // Without deployment mode the model only travels in the body, so any name goes.
    let mut req = request(Prompt::Text("hi".into()));
    req.model = "org/model:tag".into();
    completion(&req, false).expect("builds");
}

#[test]
fn azure_api_version_setting_is_checked() {
    for bad in [
        r#"{"azure_api_version":""}"#,
        r#"{"azure_api_version":"2024-10-21&x=1"}"#,
        r#"{"azure_api_version":20241021}"#,
    ] {
        let message = failed(settings(&route(bad)));
        assert!(
            message.starts_with("route `test`: setting `azure_api_version`: "),
            "{bad}: {message}"
        );
    }
    assert_eq!(
        settings(&route(r#"{"azure_api_version":null}"#))
            .expect("null is absent")
            .azure_api_version,
        None
    );
}

#[test]
fn base_url_is_required_and_its_trailing_slash_dropped() {
    let mut req = request(Prompt::Text("x".into()));
    req.route.base_url = "https://api.openai.com/v1/".into();
    assert_eq!(url(&req), "https://api.openai.com/v1/chat/completions");
    req.route.base_url = String::new();
    let message = failed(completion(&req, false));
    assert!(message.contains("base_url"), "{message}");
}

#[test]
fn chat_roles_names_and_contents_map() {
    let messages = [
        message(Role::System, "Be brief"),
        named(Role::User, "ann", "Hi"),
        message(Role::Assistant, "Hello"),
        Message {
            parts: Vec::new(),
            ..message(Role::User, "")
        },
    ];
    assert_eq!(
        messages_json(&messages),
        json!([
            {"role": "system", "content": "Be brief"},
            {"role": "user", "content": "Hi", "name": "ann"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": ""},
        ])
    );
}

#[test]
fn legacy_function_call_becomes_a_tool_call_answered_by_a_tool_message() {
    let messages = [
        message(Role::User, "Weather in Florence?"),
        calling("weather", r#"{"location":"Florence"}"#),
        named(Role::Function, "weather", "40 C"),
    ];
    assert_eq!(
        messages_json(&messages),
        json!([
            {"role": "user", "content": "Weather in Florence?"},
            {"role": "assistant", "tool_calls": [{"id": "call_1_0", "type": "function",
                "function": {"name": "weather", "arguments": "{\"location\":\"Florence\"}"}}]},
            {"role": "tool", "content": "40 C", "tool_call_id": "call_1_0"},
        ])
    );
}

#[test]
fn function_messages_answer_open_calls_by_name_in_order() {
    let assistant = Message {
        parts: vec![Part::Text("Let me compute.".into())],
        tool_calls: vec![
            ToolCall {
                id: "a1".into(),
                name: "add".into(),
                arguments: "{}".into(),
            },
            ToolCall {
                id: "m1".into(),
                name: "multiply".into(),
                arguments: "{}".into(),
            },
            ToolCall {
                id: "a2".into(),
                name: "add".into(),
                arguments: "{}".into(),
            },
        ],
        // Commonbase clients echo function_call = first tool call; tool_calls win.
        function_call: Some(FunctionCall {
            name: "add".into(),
            arguments: "{}".into(),
        }),
        ..message(Role::Assistant, "")
    };
    let messages = [
        message(Role::User, "go"),
        assistant,
        named(Role::Function, "multiply", "6"),
        named(Role::Function, "add", "5"),
        named(Role::Function, "add", "7"),
    ];
    let json = messages_json(&messages);
    assert_eq!(json[1]["content"], json!("Let me compute."));
    assert_eq!(json[1]["tool_calls"].as_array().map(Vec::len), Some(3));
    let answers: Vec<(&str, &str)> = (2..5)
        .map(|i| {
            (
                json[i]["tool_call_id"].as_str().unwrap_or_default(),
                json[i]["content"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(answers, [("m1", "6"), ("a1", "5"), ("a2", "7")]);
    assert!(
        json.as_array()
            .is_some_and(|m| m[2..].iter().all(|m| m["role"] == "tool"))
    );
}

#[test]
fn function_message_without_a_call_keeps_the_function_role() {
    let messages = [
        message(Role::User, "hi"),
        named(Role::Function, "weather", "40 C"),
        calling("weather", "{}"),
        named(Role::Function, "other", "?"),
    ];
    let json = messages_json(&messages);
    assert_eq!(
        json[1],
        json!({"role": "function", "content": "40 C", "name": "weather"})
    );
    assert_eq!(
        json[3],
        json!({"role": "function", "content": "?", "name": "other"})
    );
}

#[test]
fn tool_messages_keep_their_id_or_find_it_by_name() {
    let messages = [
        calling("weather", "{}"),
        Message {
            tool_call_id: Some("given".into()),
            ..message(Role::Tool, "1")
        },
    ];
    assert_eq!(messages_json(&messages)[1]["tool_call_id"], json!("given"));

    let messages = [calling("weather", "{}"), named(Role::Tool, "weather", "2")];
    assert_eq!(
        messages_json(&messages)[1],
        json!({"role": "tool", "content": "2", "tool_call_id": "call_0_0"})
    );

    let message = invalid_request(chat_messages(&[message(Role::Tool, "3")]));
    assert!(message.contains("messages[0]"), "{message}");
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
    ];
    assert_eq!(
        serde_json::to_value(tools(&functions).expect("tools")).expect("json"),
        json!([
            {"type": "function", "function": {"name": "weather",
                "description": "Get weather information for a location",
                "parameters": {"properties": {"location": {"description": "the city", "type": "string"}},
                    "required": ["location"], "type": "object"}}},
            {"type": "function", "function": {"name": "noop"}},
        ])
    );
    assert_eq!(tool_choice(&FunctionChoice::None), json!("none"));
    assert_eq!(tool_choice(&FunctionChoice::Auto), json!("auto"));
    assert_eq!(tool_choice(&FunctionChoice::Required), json!("required"));
    assert_eq!(
        tool_choice(&FunctionChoice::Named("weather".into())),
        json!({"type": "function", "function": {"name": "weather"}})
    );

    let bad = [FunctionDef {
        parameters: Some("{nope".into()),
        ..weather_function()
    }];
    let message = invalid_request(tools(&bad));
    assert!(message.contains("functions[0].parameters"), "{message}");
}

#[test]
fn tool_choice_travels_only_with_tools() {
    let mut req = request(Prompt::Text("x".into()));
    req.function_choice = Some(FunctionChoice::Auto);
    let without = body(&req, false);
    assert!(without.get("tools").is_none() && without.get("tool_choice").is_none());
    req.functions = vec![weather_function()];
    req.function_choice = Some(FunctionChoice::Named("weather".into()));
    let with = body(&req, false);
    assert_eq!(with["tools"][0]["function"]["name"], json!("weather"));
    assert_eq!(with["tool_choice"]["function"]["name"], json!("weather"));
}

#[test]
fn parallel_tool_calls_travels_only_with_tools() {
    let mut req = request(Prompt::Text("x".into()));
    req.params = r#"{"parallel_tool_calls":false}"#.into();
    assert!(body(&req, false).get("parallel_tool_calls").is_none());
    req.functions = vec![weather_function()];
    assert_eq!(body(&req, false)["parallel_tool_calls"], json!(false));
}

#[test]
fn reasoning_models_get_max_completion_tokens() {
    let mut req = request(Prompt::Text("x".into()));
    req.params = r#"{"max_tokens":100}"#.into();
    for model in [
        "o1",
        "o1-preview",
        "o3-mini",
        "o4-mini-2025-04-16",
        "gpt-5",
        "GPT-5-mini",
        "gpt-5.1",
    ] {
        req.model = model.into();
        let sent = body(&req, false);
        assert_eq!(sent["max_completion_tokens"], json!(100), "{model}");
        assert!(sent.get("max_tokens").is_none(), "{model}");
    }
    // The caller's `max_completion_tokens` wins; `max_tokens` never reaches these models.
    req.model = "gpt-5-nano".into();
    req.params = r#"{"max_tokens":100,"max_completion_tokens":30}"#.into();
    let sent = body(&req, false);
    assert_eq!(sent["max_completion_tokens"], json!(30));
    assert!(sent.get("max_tokens").is_none());

    // Other models (and servers that only know `max_tokens`) keep the name.
    req.params = r#"{"max_tokens":100}"#.into();
    for model in [
        "gpt-4o-mini",
        "gpt-4.1",
        "openai/gpt-5",
        "o10",
        "llama-3.3-70b",
        "gpt-50",
    ] {
        req.model = model.into();
        let sent = body(&req, false);
        assert_eq!(sent["max_tokens"], json!(100), "{model}");
        assert!(sent.get("max_completion_tokens").is_none(), "{model}");
    }
}

/// The second request of the multi-tool recordings carries the whole tool conversation; the same
/// conversation in the gateway's types must map to the same `messages` and `tools`.
#[test]
fn multi_tool_conversation_matches_the_recorded_request() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__multi_tool");
    let recorded: Value = interactions[1].request_json();
    let parameters = r#"{"properties":{"a":{"description":"first number","type":"integer"},"b":{"description":"second number","type":"integer"}},"required":["a","b"],"type":"object"}"#;
    let mut req = request(Prompt::Chat(vec![
        message(
            Role::System,
            "You are a helpful assistant. CRITICAL: Always use both add and multiply at the same time ALWAYS.",
        ),
        message(Role::User, "Add and multiply the number 2 and 3"),
        Message {
            parts: Vec::new(),
            tool_calls: vec![
                ToolCall {
                    id: "call_2wt6qUGrlxczUadZYf3qXyH0".into(),
                    name: "add".into(),
                    arguments: r#"{"a": 2, "b": 3}"#.into(),
                },
                ToolCall {
                    id: "call_vZOWZaH7tzu0rLZeogtafvrf".into(),
                    name: "multiply".into(),
                    arguments: r#"{"a": 2, "b": 3}"#.into(),
                },
            ],
            ..message(Role::Assistant, "")
        },
        named(Role::Function, "add", "5"),
        Message {
            tool_call_id: Some("call_vZOWZaH7tzu0rLZeogtafvrf".into()),
            ..message(Role::Tool, "6")
        },
    ]));
    req.functions = vec![
        FunctionDef {
            name: "add".into(),
            description: Some("Add two numbers".into()),
            parameters: Some(parameters.into()),
        },
        FunctionDef {
            name: "multiply".into(),
            description: Some("Multiply two numbers".into()),
            parameters: Some(parameters.into()),
        },
    ];
    req.function_choice = Some(FunctionChoice::Auto);
    req.params = r#"{"max_tokens":4000}"#.into();

    let mut ours = body(&req, false);
    let mut recorded = recorded;
    // `strict: false` is the API's default; the gateway has no way to ask for strict mode.
    if let Some(tools) = recorded["tools"].as_array_mut() {
        for tool in tools {
            if let Some(function) = tool["function"].as_object_mut() {
                function.remove("strict");
            }
        }
    }
    assert_eq!(ours["messages"], recorded["messages"]);
    assert_eq!(ours["tools"], recorded["tools"]);
    // Everything else too: model, max_tokens, tool_choice.
    if let (Some(ours), Some(recorded)) = (ours.as_object_mut(), recorded.as_object_mut()) {
        ours.remove("messages");
        ours.remove("tools");
        recorded.remove("messages");
        recorded.remove("tools");
    }
    assert_eq!(ours, recorded);
}

#[test]
fn embedding_body_has_model_input_and_params() {
    let req = EmbeddingRequest {
        route: route("{}"),
        model: "text-embedding-3-small".into(),
        input: vec!["a".into(), "b".into()],
        params: r#"{"dimensions":8,"input":"evil","model":"evil"}"#.into(),
    };
    let http = embedding(&req).expect("builds");
    assert_eq!(http.url(), "http://127.0.0.1:9/v1/embeddings");
    assert_eq!(http.header_value("accept"), Some("application/json"));
    assert_eq!(
        sent(&http),
        json!({"model": "text-embedding-3-small", "input": ["a", "b"], "dimensions": 8})
    );
}

// ---------------------------------------------------------------------------------------------
// Responses

#[test]
fn finish_reasons_map() {
    // OpenAI's spelling is the SDK's.
    for (wire, reason) in [
        ("stop", FinishReason::Stop),
        ("length", FinishReason::Length),
        ("tool_calls", FinishReason::ToolCalls),
        ("function_call", FinishReason::FunctionCall),
        ("content_filter", FinishReason::ContentFilter),
        ("eos", FinishReason::Other),
    ] {
        assert_eq!(FinishReason::parse(wire), reason);
    }
}

#[test]
fn usage_maps_details_and_tolerates_odd_counts() {
    let wire: WireUsage = serde_json::from_value(json!({
        "prompt_tokens": 120, "completion_tokens": 80, "total_tokens": 200,
        "prompt_tokens_details": {"cached_tokens": 100, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 64}
    }))
    .expect("usage");
    let mapped = usage(&wire);
    assert_eq!(
        (
            mapped.prompt_tokens,
            mapped.completion_tokens,
            mapped.total_tokens
        ),
        (120, 80, 200)
    );
    assert_eq!(mapped.cached_prompt_tokens, Some(100));
    assert_eq!(mapped.reasoning_tokens, Some(64));
    assert_eq!(mapped.cache_creation_tokens, None);

    let wire: WireUsage = serde_json::from_value(json!({
        "prompt_tokens": 20.0, "completion_tokens": 4, "queue_time": 0.19, "total_tokens": null
    }))
    .expect("usage");
    let mapped = usage(&wire);
    assert_eq!(
        (
            mapped.prompt_tokens,
            mapped.completion_tokens,
            mapped.total_tokens
        ),
        (20, 4, 24)
    );
    assert_eq!(mapped.cached_prompt_tokens, None);

    // DeepSeek: the cache hits in their own field, inside prompt_tokens.
    let wire: WireUsage = serde_json::from_value(json!({
        "prompt_tokens": 1500, "completion_tokens": 10, "total_tokens": 1510,
        "prompt_cache_hit_tokens": 1280, "prompt_cache_miss_tokens": 220
    }))
    .expect("usage");
    assert_eq!(usage(&wire).cached_prompt_tokens, Some(1280));
}

#[test]
fn simple_answers_of_every_family_parse() {
    for (name, model, text) in [
        (
            "OpenAI__openai-gpt-4o-mini__simple",
            "gpt-4o-mini-2024-07-18",
            "Olá!",
        ),
        (
            "Azure__azure-gpt-5-mini__simple",
            "gpt-5-mini-2025-08-07",
            "",
        ),
        (
            "OpenAICompatible__groq-kimi-k2__simple",
            "moonshotai/kimi-k2-instruct-0905",
            "",
        ),
        (
            "OpenAICompatible__llama-cpp-gpt-oss__simple",
            "openai/gpt-oss-20b",
            "Olá!",
        ),
    ] {
        let interactions = recording(name);
        let completion =
            parse_completion(interactions[0].response.body.as_bytes(), "asked").expect(name);
        assert_eq!(completion.model, model, "{name}");
        assert_eq!(completion.choices.len(), 1, "{name}");
        let choice = &completion.choices[0];
        assert!(!choice.text.is_empty(), "{name}");
        if !text.is_empty() {
            assert_eq!(choice.text, text, "{name}");
        }
        assert_eq!(choice.finish_reason, Some(FinishReason::Stop), "{name}");
        assert!(choice.function_call.is_none() && choice.tool_calls.is_empty());
        let usage = completion.usage.expect("usage");
        assert!(
            usage.prompt_tokens > 0 && usage.completion_tokens > 0,
            "{name}"
        );
        assert_eq!(
            usage.total_tokens,
            usage.prompt_tokens + usage.completion_tokens,
            "{name}"
        );
    }
}

#[test]
fn openai_simple_answer_maps_usage_details() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__simple");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "gpt-4o-mini").expect("parses");
    let usage = completion.usage.expect("usage");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (20, 2));
    assert_eq!(usage.cached_prompt_tokens, Some(0));
    assert_eq!(usage.reasoning_tokens, Some(0));
    assert_eq!(completion.choices[0].logprobs, None);
}

#[test]
fn azure_reasoning_tokens_are_reported() {
    let interactions = recording("Azure__azure-gpt-5-mini__simple");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "gpt-5-mini").expect("parses");
    let usage = completion.usage.expect("usage");
    assert!(usage.reasoning_tokens.is_some_and(|r| r > 0));
}

#[test]
fn llama_cpp_reasoning_content_is_not_answer_text() {
    let interactions = recording("OpenAICompatible__llama-cpp-gpt-oss__simple");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "gpt-oss").expect("parses");
    assert_eq!(completion.choices[0].text, "Olá!");
    let reasoning = &completion.choices[0].reasoning;
    assert_eq!(reasoning.len(), 1);
    assert!(
        reasoning[0].text.starts_with("The user says"),
        "{reasoning:?}"
    );
}

#[test]
fn tool_answer_has_tool_calls_and_function_call() {
    for name in [
        "OpenAI__openai-gpt-4o-mini__tool",
        "Azure__azure-gpt-5-mini__tool",
        "OpenAICompatible__groq-kimi-k2__tool",
        "OpenAICompatible__llama-cpp-gpt-oss__tool",
    ] {
        let interactions = recording(name);
        let completion =
            parse_completion(interactions[0].response.body.as_bytes(), "asked").expect(name);
        let choice = &completion.choices[0];
        assert_eq!(
            choice.finish_reason,
            Some(FinishReason::ToolCalls),
            "{name}"
        );
        assert_eq!(choice.tool_calls.len(), 1, "{name}");
        let call = &choice.tool_calls[0];
        assert_eq!(call.name, "weather", "{name}");
        assert!(!call.id.is_empty(), "{name}");
        let arguments: Value = serde_json::from_str(&call.arguments).expect("arguments JSON");
        assert!(
            arguments["location"]
                .as_str()
                .is_some_and(|l| l.starts_with("Florence")),
            "{name}"
        );
        let function_call = choice.function_call.as_ref().expect("function_call");
        assert_eq!(
            (&function_call.name, &function_call.arguments),
            (&call.name, &call.arguments)
        );
        // The tool's result then gets a plain answer.
        let last = interactions.last().expect("interactions");
        let completion = parse_completion(last.response.body.as_bytes(), "asked").expect(name);
        assert!(completion.choices[0].text.contains("40"), "{name}");
        assert!(completion.choices[0].tool_calls.is_empty());
    }
}

#[test]
fn multi_tool_answer_keeps_every_call_in_order() {
    for name in [
        "OpenAI__openai-gpt-4o-mini__multi_tool",
        "OpenAICompatible__groq-kimi-k2__multi_tool",
    ] {
        let interactions = recording(name);
        let completion =
            parse_completion(interactions[0].response.body.as_bytes(), "asked").expect(name);
        let choice = &completion.choices[0];
        let names: Vec<&str> = choice.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["add", "multiply"], "{name}");
        assert_eq!(
            choice.function_call.as_ref().map(|f| f.name.as_str()),
            Some("add")
        );
    }
}

#[test]
fn legacy_completion_answer_parses_text_and_logprobs() {
    let body = br#"{"id":"cmpl-1","object":"text_completion","model":"gpt-3.5-turbo-instruct",
        "choices":[{"text":" there was","index":1,"logprobs":null,"finish_reason":"length"},
                   {"text":" a time","index":0,"logprobs":{"tokens":[" a"," time"]},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6}}"#;
    let completion = parse_completion(body, "asked").expect("parses");
    assert_eq!(completion.choices[0].index, 0);
    assert_eq!(completion.choices[0].text, " a time");
    assert_eq!(
        completion.choices[0].logprobs.as_deref(),
        Some(r#"{"tokens":[" a"," time"]}"#)
    );
    assert_eq!(completion.choices[1].text, " there was");
    assert_eq!(
        completion.choices[1].finish_reason,
        Some(FinishReason::Length)
    );
}

#[test]
fn legacy_function_call_answer_is_kept() {
    let body = br#"{"model":"m","choices":[{"index":0,"finish_reason":"function_call",
        "message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}}]}"#;
    let completion = parse_completion(body, "asked").expect("parses");
    let choice = &completion.choices[0];
    assert_eq!(choice.finish_reason, Some(FinishReason::FunctionCall));
    assert_eq!(choice.text, "");
    assert_eq!(
        choice.function_call.as_ref().map(|f| f.name.as_str()),
        Some("f")
    );
    assert!(completion.usage.is_none());
}

#[test]
fn tool_calls_without_ids_get_one() {
    let body = br#"{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"content":"",
        "tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}}]}"#;
    let completion = parse_completion(body, "asked").expect("parses");
    assert_eq!(completion.model, "asked");
    assert_eq!(completion.choices[0].tool_calls[0].id, "call_0_0");
}

#[test]
fn malformed_answers_fail_clearly() {
    for body in [&b"<html>oops</html>"[..], b"", b"{\"choices\": 5}"] {
        let message = failed(parse_completion(body, "m"));
        assert!(
            message.starts_with("malformed response from upstream: "),
            "{message}"
        );
    }
}

#[test]
fn an_error_object_in_a_success_answer_is_an_upstream_error() {
    let body = br#"{"error":{"message":"model overloaded","type":"server_error","code":503}}"#;
    match parse_completion(body, "m") {
        Err(ProviderError::Upstream(error)) => {
            assert_eq!(error.message, "model overloaded");
            assert_eq!(error.status, 503);
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Streams

#[test]
fn streamed_text_of_every_family_is_forwarded_and_assembled() {
    for name in [
        "OpenAI__openai-gpt-4o-mini__simple_streaming",
        "Azure__azure-gpt-5-mini__simple_streaming",
        "OpenAICompatible__groq-kimi-k2__simple_streaming",
        "OpenAICompatible__llama-cpp-gpt-oss__simple_streaming",
    ] {
        let interactions = recording(name);
        let (forwarded, completion) = replay_stream(&interactions[0].response.body).expect(name);
        assert_eq!(completion.choices.len(), 1, "{name}");
        let choice = &completion.choices[0];
        assert!(!choice.text.is_empty(), "{name}");
        assert_eq!(forwarded, [(0, choice.text.clone())], "{name}");
        assert_eq!(choice.finish_reason, Some(FinishReason::Stop), "{name}");
        assert_ne!(completion.model, "requested-model", "{name}");
        assert!(!completion.model.is_empty(), "{name}");
        let usage = completion.usage.expect("usage");
        assert!(
            usage.prompt_tokens > 0 && usage.completion_tokens > 0,
            "{name}"
        );
    }
}

#[test]
fn streamed_openai_answer_matches_the_recording_exactly() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__tool_streaming");
    let (forwarded, completion) = replay_stream(&interactions[1].response.body).expect("stream");
    let text = "The current temperature in Florence, Italy is 40°C.";
    assert_eq!(forwarded, [(0, text.to_owned())]);
    assert_eq!(completion.choices[0].text, text);
    assert_eq!(completion.model, "gpt-4o-mini-2024-07-18");
    let usage = completion.usage.expect("usage");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (86, 13, 99)
    );
    assert_eq!(usage.cached_prompt_tokens, Some(0));
}

#[test]
fn llama_cpp_reasoning_deltas_are_reasoning_not_text() {
    let interactions = recording("OpenAICompatible__llama-cpp-gpt-oss__simple_streaming");
    let (forwarded, completion) = replay_stream(&interactions[0].response.body).expect("stream");
    let text = &completion.choices[0].text;
    assert!(!text.contains("The user"), "reasoning leaked: {text}");
    assert_eq!(forwarded, [(0, text.clone())]);
    let reasoning = &completion.choices[0].reasoning;
    assert_eq!(reasoning.len(), 1);
    assert!(reasoning[0].text.starts_with("The user"), "{reasoning:?}");
}

#[test]
fn streamed_tool_call_deltas_are_reassembled() {
    for name in [
        "OpenAI__openai-gpt-4o-mini__tool_streaming",
        "Azure__azure-gpt-5-mini__tool_streaming",
        "OpenAICompatible__groq-kimi-k2__tool_streaming",
        "OpenAICompatible__llama-cpp-gpt-oss__tool_streaming",
    ] {
        let interactions = recording(name);
        let (_, completion) = replay_stream(&interactions[0].response.body).expect(name);
        let choice = &completion.choices[0];
        assert_eq!(
            choice.finish_reason,
            Some(FinishReason::ToolCalls),
            "{name}"
        );
        assert_eq!(choice.tool_calls.len(), 1, "{name}");
        let call = &choice.tool_calls[0];
        assert_eq!(call.name, "weather", "{name}");
        assert!(!call.id.is_empty(), "{name}");
        let arguments: Value = serde_json::from_str(&call.arguments)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", call.arguments));
        assert!(
            arguments["location"]
                .as_str()
                .is_some_and(|l| l.starts_with("Florence")),
            "{name}"
        );
        assert_eq!(
            choice.function_call.as_ref().map(|f| f.arguments.as_str()),
            Some(call.arguments.as_str()),
            "{name}"
        );
    }
    let interactions = recording("OpenAI__openai-gpt-4o-mini__tool_streaming");
    let (_, completion) = replay_stream(&interactions[0].response.body).expect("stream");
    let call = &completion.choices[0].tool_calls[0];
    assert_eq!(call.id, "call_qLFv8oQOs68qRuEVmG8TuEJp");
    assert_eq!(call.arguments, r#"{"location":"Florence,Italy"}"#);
}

#[test]
fn streamed_parallel_tool_calls_stay_separate() {
    for name in [
        "OpenAI__openai-gpt-4o-mini__multi_tool_streaming",
        "OpenAICompatible__groq-kimi-k2__multi_tool_streaming",
    ] {
        let interactions = recording(name);
        let (_, completion) = replay_stream(&interactions[0].response.body).expect(name);
        let calls = &completion.choices[0].tool_calls;
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["add", "multiply"], "{name}");
        for call in calls {
            let arguments: Value = serde_json::from_str(&call.arguments).expect("arguments");
            assert_eq!(
                (arguments["a"].as_i64(), arguments["b"].as_i64()),
                (Some(2), Some(3))
            );
        }
        assert_ne!(calls[0].id, calls[1].id);
    }
}

#[test]
fn every_recorded_answer_of_the_openai_family_parses() {
    for name in OPENAI_FAMILY {
        for (i, interaction) in recording(name).iter().enumerate() {
            let completion = if interaction.requests_stream() {
                replay_stream(&interaction.response.body).map(|(_, c)| c)
            } else {
                parse_completion(interaction.response.body.as_bytes(), "asked")
            }
            .unwrap_or_else(|e| panic!("{name}[{i}]: {e:?}"));
            assert!(!completion.choices.is_empty(), "{name}[{i}]");
            assert!(completion.usage.is_some(), "{name}[{i}]");
        }
    }
}

fn stream_of(events: &[&str]) -> String {
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

#[test]
fn an_error_inside_the_stream_is_an_upstream_error() {
    let body = stream_of(&[
        r#"{"model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
        r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#,
    ]);
    match replay_stream(&body) {
        Err(ProviderError::Upstream(error)) => {
            assert_eq!(
                error.message,
                "The server had an error while processing your request."
            );
            assert_eq!(error.status, 500);
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
    let body = "event: error\ndata: {\"message\":\"rate limited\",\"code\":429}\n\n";
    match replay_stream(body) {
        Err(ProviderError::Upstream(error)) => {
            assert_eq!(
                (error.message.as_str(), error.status),
                ("rate limited", 429)
            );
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
}

#[test]
fn a_stream_cut_before_any_finish_fails() {
    let body = stream_of(&[r#"{"model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}"#]);
    assert_eq!(failed(replay_stream(&body)), "stream ended early");
    assert_eq!(failed(replay_stream("")), "stream ended early");
}

#[test]
fn a_stream_with_a_finish_reason_but_no_done_is_complete() {
    let body = stream_of(&[
        r#"{"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
        r#"{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
    ]);
    let (_, completion) = replay_stream(&body).expect("complete");
    assert_eq!(
        completion.choices[0].finish_reason,
        Some(FinishReason::Length)
    );
    assert!(completion.usage.is_none());
}

#[test]
fn malformed_stream_events_fail_clearly() {
    let body = stream_of(&["{not json"]);
    let message = failed(replay_stream(&body));
    assert!(
        message.starts_with("malformed response from upstream: "),
        "{message}"
    );
}

#[test]
fn streamed_choices_logprobs_and_legacy_text_are_assembled() {
    let body = stream_of(&[
        r#"{"model":"gpt-3.5-turbo-instruct","choices":[{"index":1,"text":" B","logprobs":{"tokens":[" B"],"token_logprobs":[-0.5]}},{"index":0,"text":" A","logprobs":null}]}"#,
        r#"{"model":"gpt-3.5-turbo-instruct","choices":[{"index":1,"text":"b","logprobs":{"tokens":["b"],"token_logprobs":[-0.25]},"finish_reason":"stop"}]}"#,
        r#"{"model":"gpt-3.5-turbo-instruct","choices":[{"index":0,"text":"","finish_reason":"length"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}"#,
        "[DONE]",
    ]);
    let (forwarded, completion) = replay_stream(&body).expect("stream");
    assert_eq!(forwarded, [(1, " Bb".to_owned()), (0, " A".to_owned())]);
    let texts: Vec<(u32, &str)> = completion
        .choices
        .iter()
        .map(|c| (c.index, c.text.as_str()))
        .collect();
    assert_eq!(texts, [(0, " A"), (1, " Bb")]);
    let logprobs: Value =
        serde_json::from_str(completion.choices[1].logprobs.as_deref().expect("logprobs"))
            .expect("JSON");
    assert_eq!(
        logprobs,
        json!({"tokens": [" B", "b"], "token_logprobs": [-0.5, -0.25]})
    );
    assert_eq!(completion.choices[0].logprobs, None);
    assert_eq!(completion.usage.map(|u| u.total_tokens), Some(6));
}

#[test]
fn legacy_streamed_function_call_is_assembled() {
    let body = stream_of(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"weather","arguments":""}}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{\"location\":"}}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"function_call":{"arguments":"\"Rome\"}"}}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}"#,
        "[DONE]",
    ]);
    let (forwarded, completion) = replay_stream(&body).expect("stream");
    assert!(forwarded.is_empty());
    assert_eq!(completion.model, "requested-model");
    let choice = &completion.choices[0];
    assert_eq!(choice.finish_reason, Some(FinishReason::FunctionCall));
    let call = choice.function_call.as_ref().expect("function_call");
    assert_eq!(
        (call.name.as_str(), call.arguments.as_str()),
        ("weather", r#"{"location":"Rome"}"#)
    );
}

// ---------------------------------------------------------------------------------------------
// Embeddings

#[test]
fn embeddings_are_sorted_by_index_with_usage() {
    let body = br#"{"object":"list","model":"text-embedding-3-small",
        "data":[{"object":"embedding","index":1,"embedding":[0.5,-1]},
                {"object":"embedding","index":0,"embedding":[0.25,2]}],
        "usage":{"prompt_tokens":4,"total_tokens":4}}"#;
    let embeddings = parse_embeddings(body, "asked", 2).expect("parses");
    assert_eq!(embeddings.model, "text-embedding-3-small");
    assert_eq!(embeddings.vectors, [vec![0.25, 2.0], vec![0.5, -1.0]]);
    let usage = embeddings.usage.expect("usage");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (4, 0, 4)
    );
}

#[test]
fn base64_embeddings_are_decoded() {
    // [1.0, -2.5] as little-endian f32: 00 00 80 3f 00 00 20 c0.
    let body = br#"{"model":"m","data":[{"index":0,"embedding":"AACAPwAAIMA="}]}"#;
    let embeddings = parse_embeddings(body, "asked", 1).expect("parses");
    assert_eq!(embeddings.vectors, [vec![1.0, -2.5]]);
    assert!(embeddings.usage.is_none());
    // Without padding, and in either alphabet: 0.99999994 is ff ff 7f 3f, "//9/Pw==" or "__9_Pw".
    let body = br#"{"model":"m","data":[{"index":0,"embedding":"AACAPwAAIMA"}]}"#;
    assert_eq!(
        parse_embeddings(body, "asked", 1)
            .expect("no padding")
            .vectors,
        [vec![1.0, -2.5]]
    );
    for text in ["//9/Pw==", "__9_Pw"] {
        let body = format!(r#"{{"model":"m","data":[{{"index":0,"embedding":"{text}"}}]}}"#);
        let vectors = parse_embeddings(body.as_bytes(), "asked", 1)
            .expect(text)
            .vectors;
        assert_eq!(vectors, [vec![0.99999994_f32]], "{text}");
    }
    let bad = br#"{"model":"m","data":[{"index":0,"embedding":"AAA*"}]}"#;
    failed(parse_embeddings(bad, "asked", 1));
    let not_f32s = br#"{"model":"m","data":[{"index":0,"embedding":"AAAA"}]}"#;
    failed(parse_embeddings(not_f32s, "asked", 1));
}

#[test]
fn embeddings_must_match_the_inputs() {
    let body = br#"{"model":"m","data":[{"index":0,"embedding":[1]}]}"#;
    let message = failed(parse_embeddings(body, "asked", 2));
    assert!(message.contains("1 embeddings for 2 inputs"), "{message}");
    failed(parse_embeddings(b"not json", "asked", 1));
}

// ---------------------------------------------------------------------------------------------
// HTTP: the request sent and the response read (with the SDK's fake responses)

fn response(status: u16, content_type: &str, body: &str, chunk_size: usize) -> Response {
    Response::from_chunks(
        status,
        vec![("Content-Type".into(), content_type.into())],
        body.as_bytes()
            .chunks(chunk_size.max(1))
            .map(<[u8]>::to_vec)
            .collect(),
    )
}

#[test]
fn the_key_travels_as_bearer_or_in_the_configured_header() {
    let mut req = request(Prompt::Text("hi".into()));
    let http = completion(&req, false).expect("request");
    assert_eq!(http.method(), "POST");
    assert_eq!(http.url(), "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(http.header_value("authorization"), Some("Bearer sk-test"));
    assert_eq!(http.header_value("accept"), Some("application/json"));
    assert_eq!(http.header_value("content-type"), Some("application/json"));
    assert_eq!(sent(&http), body(&req, false));

    req.route.settings = r#"{"api_key_header":"api-key"}"#.into();
    let http = completion(&req, true).expect("request");
    assert_eq!(http.header_value("api-key"), Some("sk-test"));
    assert_eq!(http.header_value("authorization"), None);
    assert_eq!(http.header_value("accept"), Some("text/event-stream"));

    req.route.settings = "{}".into();
    for key in [None, Some(String::new())] {
        req.route.api_key = key;
        let http = completion(&req, false).expect("request");
        assert_eq!(http.header_value("authorization"), None);
    }
}

#[test]
fn error_statuses_become_upstream_errors_with_openais_message() {
    let body = r#"{"error":{"message":"Incorrect API key provided: sk-xx***xx.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    let response = response(401, "application/json", body, 64);
    match read_completion(response, "m", Decoder) {
        Err(ProviderError::Upstream(error)) => {
            assert_eq!(error.status, 401);
            assert_eq!(error.message, "Incorrect API key provided: sk-xx***xx.");
            assert_eq!(error.retry_after, None);
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
    let limited = Response::from_chunks(
        429,
        vec![
            ("content-type".into(), "application/json".into()),
            ("retry-after".into(), "20".into()),
        ],
        vec![br#"{"error":{"message":"Rate limit reached"}}"#.to_vec()],
    );
    match read_stream(limited, &mut Sink::buffered(), "m", Decoder) {
        Err(ProviderError::Upstream(error)) => {
            assert_eq!((error.status, error.retry_after), (429, Some(20)));
            assert_eq!(error.message, "Rate limit reached");
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
}

#[test]
fn a_recorded_stream_reaches_the_sink_delta_by_delta() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__tool_streaming");
    let mut sink = Sink::buffered();
    let completion = read_stream(
        response(
            200,
            "text/event-stream; charset=utf-8",
            &interactions[1].response.body,
            100,
        ),
        &mut sink,
        "gpt-4o-mini",
        Decoder,
    )
    .expect("stream");
    let pieces: Vec<&str> = sink
        .sent()
        .iter()
        .flat_map(|chunk| chunk.deltas.iter())
        .map(|delta| delta.text.as_str())
        .collect();
    assert_eq!(
        pieces,
        [
            "The",
            " current",
            " temperature",
            " in",
            " Florence",
            ",",
            " Italy",
            " is",
            " ",
            "40",
            "°C",
            "."
        ]
    );
    // Text chunks, then the usage as the stream reports it, in a chunk of its own.
    let (usage, text) = sink.sent().split_last().expect("chunks");
    assert!(
        text.iter()
            .all(|c| c.usage.is_none() && !c.deltas.is_empty())
    );
    assert!(usage.deltas.is_empty());
    assert_eq!(usage.usage.map(|u| u.total_tokens), Some(99));
    assert_eq!(completion.choices[0].text, pieces.concat());
    assert_eq!(completion.usage.map(|u| u.total_tokens), Some(99));
}

#[test]
fn a_json_answer_to_a_stream_request_is_sent_in_one_piece() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__simple");
    let mut sink = Sink::buffered();
    let completion = read_stream(
        response(200, "application/json", &interactions[0].response.body, 50),
        &mut sink,
        "gpt-4o-mini",
        Decoder,
    )
    .expect("answer");
    assert_eq!(completion.choices[0].text, "Olá!");
    // One chunk: the text, and the usage (now sent as the answer reports it).
    assert_eq!(sink.sent().len(), 1);
    assert_eq!(sink.sent()[0].deltas[0].text, "Olá!");
    assert_eq!(sink.sent()[0].usage, completion.usage);
}

#[test]
fn a_plain_answer_is_read_whole() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__multi_tool");
    let completion = read_completion(
        response(200, "application/json", &interactions[0].response.body, 13),
        "gpt-4o-mini",
        Decoder,
    )
    .expect("answer");
    assert_eq!(completion.choices[0].tool_calls.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Content parts and reasoning

fn image(source: Source, media_type: Option<&str>, detail: Option<&str>) -> Part {
    Part::Image(Image {
        source,
        media_type: media_type.map(Into::into),
        detail: detail.map(Into::into),
    })
}

fn document(source: Source, media_type: Option<&str>, title: Option<&str>) -> Part {
    Part::Document(Document {
        source,
        media_type: media_type.map(Into::into),
        title: title.map(Into::into),
    })
}

fn with_parts(role: Role, parts: Vec<Part>) -> Message {
    Message {
        parts,
        ..message(role, "")
    }
}

fn thought(text: &str) -> Part {
    Part::Reasoning(Reasoning {
        text: text.into(),
        signature: Some("sig".into()),
        redacted: None,
    })
}

/// The `messages` of the chat completions body of a conversation.
fn sent_messages(messages: Vec<Message>) -> Value {
    body(&request(Prompt::Chat(messages)), false)["messages"].clone()
}

#[test]
fn text_only_messages_keep_one_string_with_texts_joined() {
    let messages = vec![
        with_parts(
            Role::System,
            vec![Part::Text("a".into()), Part::Text("b".into())],
        ),
        with_parts(
            Role::User,
            vec![Part::Text("c".into()), Part::Text("".into())],
        ),
    ];
    assert_eq!(
        sent_messages(messages),
        json!([{"role": "system", "content": "a\nb"}, {"role": "user", "content": "c\n"}])
    );
}

#[test]
fn images_as_bytes_and_urls_become_image_url_parts() {
    let messages = vec![with_parts(
        Role::User,
        vec![
            Part::Text("What is in these?".into()),
            image(
                Source::Bytes(b"hi!".to_vec()),
                Some("image/gif"),
                Some("low"),
            ),
            image(
                Source::Url("https://example.com/cat.png".into()),
                None,
                None,
            ),
        ],
    )];
    let mut req = request(Prompt::Chat(messages));
    req.params = r#"{"temperature":0}"#.into();
    assert_eq!(
        body(&req, false),
        json!({
            "model": "gpt-4o-mini",
            "temperature": 0,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": "data:image/gif;base64,aGkh", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            ]}],
        })
    );
}

#[test]
fn audio_becomes_an_input_audio_part() {
    let messages = vec![with_parts(
        Role::User,
        vec![
            Part::Audio(Audio {
                data: b"hi!".to_vec(),
                format: "wav".into(),
            }),
            Part::Text("Transcribe it".into()),
        ],
    )];
    assert_eq!(
        sent_messages(messages),
        json!([{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "aGkh", "format": "wav"}},
            {"type": "text", "text": "Transcribe it"},
        ]}])
    );
}

#[test]
fn documents_as_bytes_become_file_parts_with_a_name() {
    let messages = vec![with_parts(
        Role::User,
        vec![
            document(Source::Bytes(b"%PDF".to_vec()), None, Some("report.pdf")),
            document(Source::Bytes(b"hi!".to_vec()), Some("text/plain"), None),
        ],
    )];
    assert_eq!(
        sent_messages(messages),
        json!([{"role": "user", "content": [
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERg==", "filename": "report.pdf"}},
            {"type": "file", "file": {"file_data": "data:text/plain;base64,aGkh", "filename": "document.txt"}},
        ]}])
    );
}

#[test]
fn a_document_by_url_is_refused() {
    let messages = vec![with_parts(
        Role::User,
        vec![document(
            Source::Url("https://example.com/a.pdf".into()),
            None,
            None,
        )],
    )];
    let error = invalid_request(completion(&request(Prompt::Chat(messages)), false));
    assert_eq!(
        error,
        "messages[0]: openai does not take document parts by URL; send the document's bytes"
    );
}

#[test]
fn media_on_system_assistant_tool_and_function_messages_is_refused() {
    let picture = || {
        image(
            Source::Url("https://example.com/cat.png".into()),
            None,
            None,
        )
    };
    let cases = [
        (
            with_parts(Role::System, vec![picture()]),
            "image parts on system",
        ),
        (
            with_parts(
                Role::Assistant,
                vec![document(Source::Bytes(Vec::new()), None, None)],
            ),
            "document parts on assistant",
        ),
        (
            Message {
                tool_call_id: Some("call_1".into()),
                ..with_parts(
                    Role::Tool,
                    vec![Part::Audio(Audio {
                        data: Vec::new(),
                        format: "mp3".into(),
                    })],
                )
            },
            "audio parts on tool",
        ),
        (
            Message {
                name: Some("weather".into()),
                ..with_parts(Role::Function, vec![picture()])
            },
            "image parts on function",
        ),
    ];
    for (message, expected) in cases {
        let messages = vec![calling("weather", "{}"), message];
        let error = invalid_request(completion(&request(Prompt::Chat(messages)), false));
        assert_eq!(
            error,
            format!("messages[1]: openai does not take {expected} messages")
        );
    }
}

#[test]
fn a_failed_tool_result_keeps_its_text() {
    let messages = vec![
        calling("weather", "{}"),
        Message {
            tool_call_id: Some("call_0_0".into()),
            is_error: true,
            ..with_parts(
                Role::Tool,
                vec![
                    Part::Text("error:".into()),
                    Part::Text("no such city".into()),
                ],
            )
        },
    ];
    assert_eq!(
        sent_messages(messages)[1],
        json!({"role": "tool", "content": "error:\nno such city", "tool_call_id": "call_0_0"})
    );
}

#[test]
fn reasoning_in_history_is_dropped() {
    let messages = vec![
        message(Role::User, "Weather in Florence?"),
        Message {
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "weather".into(),
                arguments: "{}".into(),
            }],
            ..with_parts(Role::Assistant, vec![thought("I should look it up.")])
        },
        Message {
            tool_call_id: Some("call_1".into()),
            ..message(Role::Tool, "40 C")
        },
        with_parts(
            Role::Assistant,
            vec![thought("Hot."), Part::Text("It is hot.".into())],
        ),
        with_parts(
            Role::User,
            vec![thought("stray"), Part::Text("Thanks".into())],
        ),
        with_parts(Role::Assistant, vec![thought("Nothing to say.")]),
    ];
    assert_eq!(
        sent_messages(messages),
        json!([
            {"role": "user", "content": "Weather in Florence?"},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "weather", "arguments": "{}"}}]},
            {"role": "tool", "content": "40 C", "tool_call_id": "call_1"},
            {"role": "assistant", "content": "It is hot."},
            {"role": "user", "content": "Thanks"},
            {"role": "assistant", "content": ""},
        ])
    );
}

#[test]
fn reasoning_config_becomes_reasoning_effort() {
    let config = |effort, budget_tokens| ReasoningConfig {
        effort,
        budget_tokens,
    };
    for (reasoning, expected) in [
        (config(Some(ReasoningEffort::None), None), Some("none")),
        (
            config(Some(ReasoningEffort::Minimal), None),
            Some("minimal"),
        ),
        (config(Some(ReasoningEffort::Low), None), Some("low")),
        (config(Some(ReasoningEffort::Medium), None), Some("medium")),
        (config(Some(ReasoningEffort::High), None), Some("high")),
        (config(Some(ReasoningEffort::Xhigh), None), Some("xhigh")),
        // The effort wins over the budget.
        (
            config(Some(ReasoningEffort::Low), Some(50_000)),
            Some("low"),
        ),
        (config(None, Some(0)), Some("none")),
        (config(None, Some(1024)), Some("low")),
        (config(None, Some(4095)), Some("low")),
        (config(None, Some(4096)), Some("medium")),
        (config(None, Some(16383)), Some("medium")),
        (config(None, Some(16384)), Some("high")),
        (config(None, None), None),
    ] {
        let mut req = request(Prompt::Text("hi".into()));
        req.reasoning = Some(reasoning);
        let sent = body(&req, false);
        assert_eq!(
            sent.get("reasoning_effort").and_then(Value::as_str),
            expected,
            "{reasoning:?}"
        );
    }
}

#[test]
fn the_typed_reasoning_effort_wins_over_params() {
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"reasoning_effort":"low"}"#.into();
    assert_eq!(body(&req, false)["reasoning_effort"], json!("low"));
    req.reasoning = Some(ReasoningConfig {
        effort: Some(ReasoningEffort::High),
        budget_tokens: None,
    });
    assert_eq!(body(&req, false)["reasoning_effort"], json!("high"));
    // Legacy completions take no reasoning: the body is as before.
    req.route = route(r#"{"legacy_completions":true}"#);
    req.params = "{}".into();
    assert_eq!(body(&req, false).get("reasoning_effort"), None);
}

#[test]
fn reasoning_of_a_whole_answer_is_read_under_either_name() {
    for field in ["reasoning_content", "reasoning"] {
        let body = format!(
            r#"{{"model":"m","choices":[{{"index":0,"finish_reason":"stop",
                "message":{{"role":"assistant","content":"4","{field}":"2 + 2 is 4."}}}}]}}"#
        );
        let completion = parse_completion(body.as_bytes(), "m").expect(field);
        let choice = &completion.choices[0];
        assert_eq!(choice.text, "4", "{field}");
        assert_eq!(
            choice.reasoning,
            [Reasoning {
                text: "2 + 2 is 4.".into(),
                signature: None,
                redacted: None,
            }],
            "{field}"
        );
    }
    // A server sending both names (vLLM while it renames the field) is read once; a reasoning
    // field of another shape is ignored.
    let body = br#"{"choices":[{"index":0,"finish_reason":"stop","message":{"content":"4",
        "reasoning_content":"Sum.","reasoning":"Sum."}}]}"#;
    let completion = parse_completion(body, "m").expect("parses");
    assert_eq!(completion.choices[0].reasoning[0].text, "Sum.");
    let body = br#"{"choices":[{"index":0,"finish_reason":"stop","message":{"content":"4",
        "reasoning":{"effort":"low"},"reasoning_content":null}}]}"#;
    let completion = parse_completion(body, "m").expect("parses");
    assert!(completion.choices[0].reasoning.is_empty());
}

#[test]
fn streamed_reasoning_reaches_the_sink_before_the_text() {
    let body = stream_of(&[
        r#"{"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning":"Two "}}]}"#,
        r#"{"model":"m","choices":[{"index":0,"delta":{"reasoning":"plus two."}}]}"#,
        r#"{"model":"m","choices":[{"index":0,"delta":{"content":"4","reasoning":null}}]}"#,
        r#"{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let mut sink = Sink::buffered();
    let response = response(200, "text/event-stream", &body, 11);
    let completion = read_stream(response, &mut sink, "m", Decoder).expect("stream");
    let sent: Vec<(u32, u32, &str)> = (sink.sent_reasoning().into_iter())
        .map(|delta| (delta.index, delta.block, delta.text.as_str()))
        .collect();
    assert_eq!(sent, [(0, 0, "Two "), (0, 0, "plus two.")]);
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "4");
    assert_eq!(choice.reasoning[0].text, "Two plus two.");
    assert_eq!(choice.reasoning[0].signature, None);
}

#[test]
fn audio_prompt_tokens_are_reported() {
    let wire: WireUsage = serde_json::from_value(json!({
        "prompt_tokens": 300, "completion_tokens": 5, "total_tokens": 305,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 250}
    }))
    .expect("usage");
    let mapped = usage(&wire);
    assert_eq!(mapped.audio_prompt_tokens, Some(250));
    assert_eq!(mapped.image_prompt_tokens, None);
}

// ---------------------------------------------------------------------------------------------
// The host's output limit

fn limited(max_tokens: u32, choices: u32) -> gateway_plugin_sdk::OutputLimit {
    gateway_plugin_sdk::OutputLimit {
        max_tokens: Some(max_tokens),
        choices,
    }
}

#[test]
fn the_output_limit_is_written_over_every_name_of_the_callers() {
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"max_tokens": 90000, "max_completion_tokens": 90000, "n": 9}"#.into();
    req.output = limited(50, 2);
    let sent = body(&req, false);
    assert_eq!(sent["max_completion_tokens"], json!(50));
    assert!(sent.get("max_tokens").is_none(), "{sent}");
    assert_eq!(sent["n"], json!(2));
    // The name the caller used, for servers that know only `max_tokens`.
    req.params = r#"{"max_tokens": 90000}"#.into();
    req.output = limited(50, 1);
    let sent = body(&req, false);
    assert_eq!(sent["max_tokens"], json!(50));
    assert!(sent.get("n").is_none() && sent.get("max_completion_tokens").is_none());
    // The caller's own `n` stays, at the limit's.
    req.params = r#"{"max_tokens": 90000, "n": 1}"#.into();
    assert_eq!(body(&req, false)["n"], json!(1));
    req.params = r#"{"max_tokens": 90000}"#.into();
    // A reasoning model refuses `max_tokens`.
    req.model = "o3-mini".into();
    assert_eq!(body(&req, false)["max_completion_tokens"], json!(50));
    // No limit: the caller's params as they were.
    req.output = gateway_plugin_sdk::OutputLimit::NONE;
    req.model = "gpt-4o-mini".into();
    assert_eq!(body(&req, false)["max_tokens"], json!(90000));
}

#[test]
fn best_of_above_the_limits_choices_is_refused() {
    let mut req = request(Prompt::Text("hi".into()));
    req.route = route(r#"{"legacy_completions": true}"#);
    req.params = r#"{"best_of": 20}"#.into();
    req.output = limited(50, 1);
    let message = invalid_request(completion(&req, false));
    assert!(message.contains("best_of = 20"), "{message}");
    req.params = r#"{"best_of": 1}"#.into();
    assert_eq!(body(&req, false)["max_tokens"], json!(50));
}

#[test]
fn the_sdk_refuses_a_body_over_the_limit() {
    use gateway_plugin_sdk::HttpProvider;
    let over = br#"{"model": "m", "max_tokens": 51}"#;
    let refused = gateway_plugin_sdk::check_output(&limited(50, 1), &OpenAi::OUTPUT, over);
    assert!(
        matches!(refused, Err(ProviderError::Failed(_))),
        "{refused:?}"
    );
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"max_tokens": 90000, "n": 3}"#.into();
    req.output = limited(50, 3);
    let http = completion(&req, false).expect("request builds");
    gateway_plugin_sdk::check_output(&req.output, &OpenAi::OUTPUT, http.body_bytes())
        .expect("what the plugin builds passes");
}
