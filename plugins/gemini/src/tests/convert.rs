//! The request mapping: body, URL, params, messages, tools.

use super::*;

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
