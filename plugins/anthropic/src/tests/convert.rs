//! The request mapping: body, URL, params, messages, tools.

use super::*;

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
