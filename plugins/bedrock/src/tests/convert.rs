//! The request mapping: body, URL, credentials and signing, params, parts, tools, reasoning.

use gateway_plugin_sdk::{
    Audio, CompletionRequest, Document, FunctionChoice, FunctionDef, Image, Message, Part, Prompt,
    ProviderError, Reasoning, ReasoningConfig, ReasoningEffort, Role, Route, Source, ToolCall,
};
use gateway_test_support::fixtures::{calling, failed, invalid_request, message as msg};
use serde_json::{Value, json};

use crate::convert::{
    Auth, Settings, caller_params, converse_body, model_url, region, upstream_request,
};
use crate::sigv4::AmzDate;

const AWS_SETTINGS: &str = r#"{"region": "us-west-2", "aws_access_key_id_env": "AWS_ACCESS_KEY_ID", "aws_secret_access_key_env": "AWS_SECRET_ACCESS_KEY", "aws_session_token_env": "AWS_SESSION_TOKEN"}"#;
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

/// A route signing with AWS credentials (a session token among them) for us-west-2.
pub(super) fn aws_route() -> Route {
    Route {
        id: "bedrock".into(),
        base_url: "https://bedrock-runtime.us-west-2.amazonaws.com".into(),
        api_key: None,
        settings: AWS_SETTINGS.into(),
        secrets: vec![
            ("aws_access_key_id".into(), "AKIDEXAMPLE".into()),
            ("aws_secret_access_key".into(), SECRET.into()),
            ("aws_session_token".into(), "session-token-1".into()),
        ],
    }
}

fn request(prompt: Prompt) -> CompletionRequest {
    CompletionRequest {
        route: aws_route(),
        model: "anthropic.claude-3-5-sonnet-20240620-v1:0".into(),
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

fn body(request: &CompletionRequest) -> Value {
    Value::Object(converse_body(request, &Settings::default()).expect("body builds"))
}

fn weather() -> FunctionDef {
    FunctionDef {
        name: "weather".into(),
        description: Some("Weather of a city".into()),
        parameters: Some(r#"{"type":"object","properties":{"city":{"type":"string"}}}"#.into()),
    }
}

fn date() -> AmzDate {
    AmzDate::from_unix(1_700_000_000)
}

#[test]
fn a_chat_maps_to_converse_messages_and_system_blocks() {
    let image = Part::Image(Image {
        source: Source::Bytes(b"\x89PNG".to_vec()),
        media_type: Some("image/png".into()),
        detail: Some("high".into()),
    });
    let document = Part::Document(Document {
        source: Source::Bytes(b"%PDF-1.7".to_vec()),
        media_type: Some("application/pdf".into()),
        title: Some("Q3 report.pdf".into()),
    });
    let mut user = msg(Role::User, "What is in these?");
    user.parts.extend([image, document]);
    let mut assistant = msg(Role::Assistant, "Let me check the weather.");
    assistant.parts.insert(
        0,
        Part::Reasoning(Reasoning {
            text: "The user wants weather.".into(),
            signature: Some("sig-1".into()),
            redacted: None,
        }),
    );
    assistant.parts.push(Part::Reasoning(Reasoning {
        text: String::new(),
        signature: None,
        redacted: Some("b3BhcXVl".into()),
    }));
    // Reasoning another provider gave (no signature) is dropped.
    assistant.parts.push(Part::Reasoning(Reasoning {
        text: "unsigned".into(),
        signature: None,
        redacted: None,
    }));
    assistant.tool_calls = vec![ToolCall {
        id: "call.1".into(),
        name: "weather".into(),
        arguments: r#"{"city":"Lisbon"}"#.into(),
    }];
    let result = Message {
        tool_call_id: Some("call.1".into()),
        is_error: true,
        ..msg(Role::Tool, "the service is down")
    };
    let mut request = chat(vec![
        msg(Role::System, "Be brief."),
        user,
        msg(Role::System, "Answer in Portuguese."),
        assistant,
        result,
        msg(Role::User, "And now?"),
    ]);
    request.functions = vec![weather()];
    let body = body(&request);
    assert_eq!(
        body["system"],
        json!([{"text": "Be brief."}, {"text": "Answer in Portuguese."}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"text": "What is in these?"},
                {"image": {"format": "png", "source": {"bytes": "iVBORw=="}}},
                {"document": {"format": "pdf", "name": "Q3 report pdf", "source": {"bytes": "JVBERi0xLjc="}}},
            ]},
            {"role": "assistant", "content": [
                {"reasoningContent": {"reasoningText": {"text": "The user wants weather.", "signature": "sig-1"}}},
                {"reasoningContent": {"redactedContent": "b3BhcXVl"}},
                {"text": "Let me check the weather."},
                {"toolUse": {"toolUseId": "call_1", "name": "weather", "input": {"city": "Lisbon"}}},
            ]},
            {"role": "user", "content": [
                {"toolResult": {"toolUseId": "call_1", "content": [{"text": "the service is down"}], "status": "error"}},
                {"text": "And now?"},
            ]},
        ])
    );
    assert_eq!(
        body["toolConfig"],
        json!({"tools": [{"toolSpec": {"name": "weather", "description": "Weather of a city",
            "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}}}}}],
            "toolChoice": {"auto": {}}})
    );
}

#[test]
fn legacy_function_calls_get_ids_and_their_results_answer_them() {
    let request = chat(vec![
        msg(Role::User, "weather?"),
        calling("weather", ""),
        Message {
            name: Some("weather".into()),
            ..msg(Role::Function, "sunny")
        },
    ]);
    let body = body(&request);
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"toolUse": {"toolUseId": "tooluse_gw_0", "name": "weather", "input": {}}}])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([{"toolResult": {"toolUseId": "tooluse_gw_0", "content": [{"text": "sunny"}]}}])
    );
    let orphan = chat(vec![msg(Role::User, "x"), msg(Role::Tool, "result")]);
    assert!(invalid_request(converse_body(&orphan, &Settings::default())).contains("tool_call_id"));
}

#[test]
fn tool_choices() {
    let with_choice = |choice: Option<FunctionChoice>, messages: Vec<Message>| {
        let mut request = chat(messages);
        request.functions = vec![weather()];
        request.function_choice = choice;
        body(&request)
    };
    let hi = || vec![msg(Role::User, "hi")];
    assert_eq!(
        with_choice(Some(FunctionChoice::Required), hi())["toolConfig"]["toolChoice"],
        json!({"any": {}})
    );
    assert_eq!(
        with_choice(Some(FunctionChoice::Named("weather".into())), hi())["toolConfig"]["toolChoice"],
        json!({"tool": {"name": "weather"}})
    );
    // No "none" in Converse: no tools, unless the conversation holds tool blocks.
    assert!(
        with_choice(Some(FunctionChoice::None), hi())
            .get("toolConfig")
            .is_none()
    );
    let history = vec![
        msg(Role::User, "hi"),
        calling("weather", "{}"),
        Message {
            name: Some("weather".into()),
            ..msg(Role::Function, "sunny")
        },
    ];
    let config = &with_choice(Some(FunctionChoice::None), history)["toolConfig"];
    assert!(
        config["tools"].is_array() && config.get("toolChoice").is_none(),
        "{config}"
    );
    let no_params = FunctionDef {
        name: "now".into(),
        description: None,
        parameters: None,
    };
    let mut request = chat(hi());
    request.functions = vec![no_params];
    assert_eq!(
        body(&request)["toolConfig"]["tools"][0],
        json!({"toolSpec": {"name": "now", "inputSchema": {"json": {"type": "object"}}}})
    );
}

#[test]
fn params_map_to_inference_config() {
    let params = json!({"max_tokens": 300, "temperature": 0.2, "top_p": 0.9, "stop": "END",
        "stop_sequences": ["STOP", "END"], "top_k": 40, "seed": 7, "user": "u-1", "n": 1,
        "metadata": {"user_id": "u-1"}, "store": false,
        "presence_penalty": 0, "response_format": {"type": "text"}, "stream_options": {},
        "parallel_tool_calls": true, "guardrailConfig": {"guardrailIdentifier": "g"}});
    let body = caller_params(&params.to_string(), "bedrock").unwrap();
    assert_eq!(
        Value::Object(body),
        json!({
            "inferenceConfig": {"maxTokens": 300, "temperature": 0.2, "topP": 0.9,
                "stopSequences": ["STOP", "END"]},
            "additionalModelRequestFields": {"top_k": 40},
            "guardrailConfig": {"guardrailIdentifier": "g"},
        })
    );
    // A caller's own inferenceConfig keeps what it sets; OpenAI's names fill the rest.
    let params = json!({"inferenceConfig": {"maxTokens": 5}, "max_completion_tokens": 9,
        "temperature": 1});
    let body = caller_params(&params.to_string(), "bedrock").unwrap();
    assert_eq!(
        body["inferenceConfig"],
        json!({"maxTokens": 5, "temperature": 1})
    );
    for (refused, named) in [
        (json!({"n": 2}), "n = 2"),
        (
            json!({"response_format": {"type": "json_object"}}),
            "response_format",
        ),
        (json!({"frequency_penalty": 0.5}), "frequency_penalty"),
        (json!({"logprobs": true}), "logprobs"),
        (json!({"logit_bias": {"1": 2}}), "logit_bias"),
        (json!({"parallel_tool_calls": false}), "parallel_tool_calls"),
        (json!({"stop": [1]}), "stop must be"),
        (json!({"inferenceConfig": 3}), "inferenceConfig must be"),
    ] {
        let message = invalid_request(caller_params(&refused.to_string(), "bedrock"));
        assert!(
            message.contains(named) && message.contains("`bedrock`"),
            "{message}"
        );
    }
}

#[test]
fn claude_thinking_from_the_reasoning_config() {
    let mut request = chat(vec![msg(Role::User, "think")]);
    request.params = json!({"max_tokens": 1000}).to_string();
    request.reasoning = Some(ReasoningConfig {
        effort: Some(ReasoningEffort::Low),
        budget_tokens: None,
    });
    let sent = body(&request);
    assert_eq!(
        sent["additionalModelRequestFields"]["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    // max_tokens not above the budget: raised by the default room.
    assert_eq!(sent["inferenceConfig"]["maxTokens"], json!(2048 + 4096));

    request.params = json!({"max_tokens": 20000}).to_string();
    request.reasoning = Some(ReasoningConfig {
        effort: None,
        budget_tokens: Some(500),
    });
    let sent = body(&request);
    assert_eq!(
        sent["additionalModelRequestFields"]["thinking"]["budget_tokens"],
        json!(1024)
    );
    assert_eq!(sent["inferenceConfig"]["maxTokens"], json!(20000));

    request.params =
        json!({"additionalModelRequestFields": {"thinking": {"type": "enabled"}}}).to_string();
    request.reasoning = Some(ReasoningConfig {
        effort: Some(ReasoningEffort::None),
        budget_tokens: Some(4000),
    });
    assert!(body(&request).get("additionalModelRequestFields").is_none());

    // Another model family: no Claude field.
    request.model = "amazon.nova-pro-v1:0".into();
    request.params = "{}".into();
    request.reasoning = Some(ReasoningConfig {
        effort: Some(ReasoningEffort::High),
        budget_tokens: None,
    });
    assert!(body(&request).get("additionalModelRequestFields").is_none());
    // A cross-region profile id of Claude is Claude.
    request.model = "us.anthropic.claude-sonnet-4-20250514-v1:0".into();
    assert!(body(&request)["additionalModelRequestFields"]["thinking"].is_object());
}

#[test]
fn parts_bedrock_cannot_take_are_refused() {
    let with_part = |part: Part| {
        let mut message = msg(Role::User, "see");
        message.parts.push(part);
        invalid_request(converse_body(&chat(vec![message]), &Settings::default()))
    };
    let audio = with_part(Part::Audio(Audio {
        data: vec![1],
        format: "wav".into(),
    }));
    assert!(audio.contains("audio"), "{audio}");
    let url = with_part(Part::Image(Image {
        source: Source::Url("https://example.com/cat.png".into()),
        media_type: None,
        detail: None,
    }));
    assert!(url.contains("s3://"), "{url}");
    let tiff = with_part(Part::Image(Image {
        source: Source::Bytes(vec![1]),
        media_type: Some("image/tiff".into()),
        detail: None,
    }));
    assert!(tiff.contains("image/tiff"), "{tiff}");
    let zip = with_part(Part::Document(Document {
        source: Source::Bytes(vec![1]),
        media_type: Some("application/zip".into()),
        title: None,
    }));
    assert!(zip.contains("application/zip"), "{zip}");
    let mut system = msg(Role::System, "x");
    system.parts.push(Part::Image(Image {
        source: Source::Bytes(vec![1]),
        media_type: Some("image/png".into()),
        detail: None,
    }));
    let refused = invalid_request(converse_body(
        &chat(vec![system, msg(Role::User, "hi")]),
        &Settings::default(),
    ));
    assert!(refused.contains("system"), "{refused}");
    let empty = invalid_request(converse_body(
        &chat(vec![msg(Role::System, "only a system prompt")]),
        &Settings::default(),
    ));
    assert!(empty.contains("at least one"), "{empty}");
}

#[test]
fn s3_media_and_document_names() {
    let mut message = msg(Role::User, "");
    message.parts = vec![
        Part::Image(Image {
            source: Source::Url("s3://bucket/cat.JPEG".into()),
            media_type: None,
            detail: None,
        }),
        Part::Document(Document {
            source: Source::Url("s3://bucket/notes.md".into()),
            media_type: Some("text/markdown".into()),
            title: Some("notes".into()),
        }),
        Part::Document(Document {
            source: Source::Bytes(b"a,b".to_vec()),
            media_type: Some("text/csv; charset=utf-8".into()),
            title: Some("notes".into()),
        }),
        Part::Document(Document {
            source: Source::Bytes(b"plain".to_vec()),
            media_type: Some("text/x-log".into()),
            title: None,
        }),
    ];
    let body = body(&chat(vec![message]));
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"image": {"format": "jpeg", "source": {"s3Location": {"uri": "s3://bucket/cat.JPEG"}}}},
            {"document": {"format": "md", "name": "notes", "source": {"s3Location": {"uri": "s3://bucket/notes.md"}}}},
            {"document": {"format": "csv", "name": "notes (2)", "source": {"bytes": "YSxi"}}},
            {"document": {"format": "txt", "name": "document-3", "source": {"bytes": "cGxhaW4="}}},
        ])
    );
}

#[test]
fn the_request_is_signed_for_the_routes_region() {
    let mut request = chat(vec![msg(Role::User, "hi")]);
    request.model = "us.anthropic.claude-3-5-sonnet-20240620-v1:0".into();
    let sent = upstream_request(&request, false, &date()).unwrap();
    assert_eq!(
        sent.url(),
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/us.anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    );
    assert_eq!(sent.header_value("accept"), Some("application/json"));
    assert_eq!(sent.header_value("content-type"), Some("application/json"));
    assert_eq!(sent.header_value("x-amz-date"), Some("20231114T221320Z"));
    assert_eq!(
        sent.header_value("x-amz-security-token"),
        Some("session-token-1")
    );
    let authorization = sent.header_value("authorization").unwrap();
    assert!(
        authorization.starts_with(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-west-2/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="
        ),
        "{authorization}"
    );
    let body: Value = serde_json::from_slice(sent.body_bytes()).unwrap();
    assert_eq!(
        body,
        json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    );

    let streamed = upstream_request(&request, true, &date()).unwrap();
    assert!(
        streamed.url().ends_with("v1%3A0/converse-stream"),
        "{}",
        streamed.url()
    );
    assert_eq!(
        streamed.header_value("accept"),
        Some("application/vnd.amazon.eventstream")
    );
}

#[test]
fn an_api_key_without_aws_credentials_is_a_bearer_token() {
    let mut request = chat(vec![msg(Role::User, "hi")]);
    request.route.settings = "{}".into();
    request.route.secrets = Vec::new();
    request.route.api_key = Some("bedrock-api-key-1".into());
    let sent = upstream_request(&request, false, &date()).unwrap();
    assert_eq!(
        sent.header_value("authorization"),
        Some("Bearer bedrock-api-key-1")
    );
    assert_eq!(sent.header_value("x-amz-date"), None);
    // With AWS credentials configured, they sign (a caller's key does not replace them).
    let mut signed = chat(vec![msg(Role::User, "hi")]);
    signed.route.api_key = Some("caller-key".into());
    let sent = upstream_request(&signed, false, &date()).unwrap();
    assert!(
        sent.header_value("authorization")
            .unwrap()
            .starts_with("AWS4-HMAC-SHA256")
    );
}

#[test]
fn missing_credentials_name_the_setting_and_variable_never_a_value() {
    let mut route = aws_route();
    route
        .secrets
        .retain(|(name, _)| name != "aws_secret_access_key");
    let settings: Settings = route.settings().unwrap();
    let message = failed(Auth::of(&route, &settings));
    assert!(
        message.contains("aws_secret_access_key_env") && message.contains("AWS_SECRET_ACCESS_KEY"),
        "{message}"
    );
    assert!(!message.contains("AKIDEXAMPLE") && !message.contains("session-token-1"));

    let mut route = aws_route();
    route
        .secrets
        .retain(|(name, _)| name != "aws_session_token");
    let message = failed(Auth::of(&route, &settings));
    assert!(message.contains("aws_session_token_env"), "{message}");

    let mut half = aws_route();
    half.settings = r#"{"aws_access_key_id_env": "K"}"#.into();
    let settings: Settings = half.settings().unwrap();
    assert!(failed(Auth::of(&half, &settings)).contains("set both"));

    let mut none = aws_route();
    none.settings = "{}".into();
    let message = failed(Auth::of(&none, &Settings::default()));
    assert!(message.contains("no credentials"), "{message}");

    let mut unknown = aws_route();
    unknown.settings = r#"{"aws_region": "x"}"#.into();
    assert!(failed(unknown.settings::<Settings>()).contains("aws_region"));
}

#[test]
fn region_from_the_setting_else_the_base_url() {
    let mut route = aws_route();
    route.settings = "{}".into();
    assert_eq!(region(&route, &Settings::default()).unwrap(), "us-west-2");
    route.base_url = "https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com/".into();
    assert_eq!(
        region(&route, &Settings::default()).unwrap(),
        "us-gov-west-1"
    );
    route.base_url = "http://127.0.0.1:9".into();
    assert!(failed(region(&route, &Settings::default())).contains("region"));
    let settings = Settings {
        region: Some("eu-central-1".into()),
        ..Settings::default()
    };
    assert_eq!(region(&route, &settings).unwrap(), "eu-central-1");
}

#[test]
fn model_ids_are_one_path_segment() {
    let route = aws_route();
    assert_eq!(
        model_url(&route, "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.meta.llama3-1-8b-instruct-v1:0", "converse").unwrap(),
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Ainference-profile%2Fus.meta.llama3-1-8b-instruct-v1%3A0/converse"
    );
    assert!(invalid_request(model_url(&route, " ", "converse")).contains("model"));
    let mut no_base = aws_route();
    no_base.base_url = String::new();
    assert!(matches!(
        model_url(&no_base, "m", "converse"),
        Err(ProviderError::Failed(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// The host's output limit

#[test]
fn the_output_limit_is_max_tokens_under_every_name_and_holds_the_thinking_budget() {
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"inferenceConfig": {"maxTokens": 90000},
        "additionalModelRequestFields": {"max_tokens": 90000, "top_k": 5}}"#
        .into();
    req.reasoning = Some(ReasoningConfig {
        effort: Some(ReasoningEffort::High),
        budget_tokens: None,
    });
    req.output = gateway_plugin_sdk::OutputLimit {
        max_tokens: Some(3000),
        choices: 1,
    };
    let sent = body(&req);
    assert_eq!(sent["inferenceConfig"]["maxTokens"], json!(3000));
    let fields = &sent["additionalModelRequestFields"];
    assert_eq!(fields["max_tokens"], json!(3000));
    assert_eq!(fields["thinking"]["budget_tokens"], json!(1500));
    assert_eq!(fields["top_k"], json!(5));
    let http =
        upstream_request(&req, false, &AmzDate::from_unix(1_700_000_000)).expect("request builds");
    gateway_plugin_sdk::check_output(&req.output, &crate::convert::OUTPUT, http.body_bytes())
        .expect("what the plugin builds passes");
    req.output.max_tokens = Some(1000);
    let message = invalid_request(upstream_request(
        &req,
        false,
        &AmzDate::from_unix(1_700_000_000),
    ));
    assert!(message.contains("max_tokens = 1000"), "{message}");
}
