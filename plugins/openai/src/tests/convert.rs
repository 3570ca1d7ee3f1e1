//! The request mapping: body, URL, params, messages, tools.

use super::*;

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
