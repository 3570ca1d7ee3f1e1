use serde_json::{Value, json};

use super::request::{self, Generate};
use super::response::{self, EmbedAnswer, GenerateAnswer};
use super::{Method, endpoint};
use crate::error::ApiError;
use crate::flow::{CompletionCodec, EmbeddingCodec, Envelope, Kind, Metered};
use crate::plugins::types;
use crate::store::TokenUsage;

fn generate(body: Value) -> Result<Generate, ApiError> {
    request::generate(body.to_string().as_bytes())
}

fn param_of(error: ApiError) -> String {
    match error {
        ApiError::InvalidParam { param, .. } => param,
        other => panic!("not an InvalidParam: {other:?}"),
    }
}

fn user(text: &str) -> Value {
    json!({"role": "user", "parts": [{"text": text}]})
}

#[test]
fn paths_name_a_model_and_a_method() {
    assert_eq!(
        endpoint("/v1beta/models/openai/gpt-4o:generateContent"),
        Some(("openai/gpt-4o", Method::Generate))
    );
    assert_eq!(
        endpoint("/v1/models/fast:streamGenerateContent"),
        Some(("fast", Method::StreamGenerate))
    );
    assert_eq!(
        endpoint("/v1beta/models/g/text-embedding-004:batchEmbedContents"),
        Some(("g/text-embedding-004", Method::BatchEmbedContents))
    );
    // OpenAI's model retrieval, and methods the gateway does not have.
    assert_eq!(endpoint("/v1/models/ft:gpt-4o:org:abc"), None);
    assert_eq!(endpoint("/v1/models/openai/gpt-4o"), None);
    assert_eq!(endpoint("/v1beta/models/m:predict"), None);
    assert_eq!(endpoint("/v1beta/tunedModels/m:generateContent"), None);
    let (get, post) = (hyper::Method::GET, hyper::Method::POST);
    assert!(super::unknown_method("/v1beta/models/m:predict", &get));
    assert!(super::unknown_method("/v1/models/m:predict", &post));
    assert!(!super::unknown_method("/v1/models/ft:gpt-4o:org:abc", &get));
    assert!(!super::unknown_method(
        "/v1beta/models/m:generateContent",
        &post
    ));
    assert!(!super::unknown_method("/v1beta/models/m", &get));
}

#[test]
fn a_conversation_with_calls_media_and_signatures_reads_into_messages() {
    let body = generate(json!({
        "systemInstruction": {"parts": [{"text": "be brief"}, {"text": "be kind"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "what is in it?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"inline_data": {"mime_type": "audio/mpeg", "data": "AAAA"}}]},
            {"role": "model", "parts": [
                {"text": "looking", "thought": true, "thoughtSignature": "t1"},
                {"text": "I will call"},
                {"functionCall": {"name": "see", "args": {"x": 1}}, "thoughtSignature": "c1"},
                {"functionCall": {"name": "see", "args": {"x": 2}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "see", "response": {"output": "a cat"}}},
                {"functionResponse": {"name": "see", "response": {"error": "blurred"}}},
                {"text": "and?"}]},
        ],
    }))
    .unwrap();
    let types::Prompt::Chat(messages) = body.prompt(1 << 20).unwrap() else {
        panic!("chat")
    };
    let roles: Vec<types::Role> = messages.iter().map(|m| m.role).collect();
    use types::Role::{Assistant, System, Tool, User};
    assert_eq!(roles, [System, User, Assistant, Tool, Tool, User]);
    assert_eq!(
        messages[0].parts,
        [types::Part::Text("be brief\nbe kind".into())]
    );
    assert!(matches!(&messages[1].parts[1], types::Part::Image(i)
        if i.media_type.as_deref() == Some("image/png")));
    assert!(matches!(&messages[1].parts[2], types::Part::Audio(a) if a.format == "mp3"));
    let model = &messages[2];
    assert_eq!(
        model.parts,
        [
            types::Part::Reasoning(types::Reasoning {
                text: "looking".into(),
                signature: Some("t1".into()),
                redacted: None
            }),
            types::Part::Reasoning(types::Reasoning {
                text: String::new(),
                signature: Some("c1".into()),
                redacted: None
            }),
            types::Part::Text("I will call".into()),
        ]
    );
    let ids: Vec<&str> = model.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_1", "call_2"]);
    assert_eq!(model.tool_calls[1].arguments, r#"{"x":2}"#);
    // Responses without ids answer the open calls of their name in order.
    assert_eq!(messages[3].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(messages[4].tool_call_id.as_deref(), Some("call_2"));
    assert!(!messages[3].is_error && messages[4].is_error);
    assert_eq!(
        messages[3].parts,
        [types::Part::Text(r#"{"output":"a cat"}"#.into())]
    );
}

#[test]
fn generation_config_takes_canonical_names_and_gemini_only_fields_stay_with_gemini() {
    let body = generate(json!({
        "contents": [user("hi")],
        "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
        "cachedContent": "cachedContents/1",
        "generationConfig": {"temperature": 0.2, "topP": 0.9, "top_k": 4,
            "maxOutputTokens": 50, "stopSequences": ["END"], "candidateCount": 2, "seed": 7,
            "responseMimeType": "application/json",
            "responseSchema": {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}},
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true},
            "responseModalities": ["TEXT"]},
    }))
    .unwrap();
    let openai = Value::Object(body.params("openai").unwrap());
    assert_eq!(
        openai,
        json!({"temperature": 0.2, "top_p": 0.9, "top_k": 4, "max_tokens": 50, "stop": ["END"],
            "n": 2, "seed": 7, "cachedContent": "cachedContents/1", "responseModalities": ["TEXT"],
            "response_format": {"type": "json_schema", "json_schema": {"name": "response",
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}})
    );
    let gemini = body.params("gemini").unwrap();
    assert!(gemini.contains_key("safetySettings"));
    assert_eq!(
        body.reasoning().unwrap(),
        Some(types::ReasoningConfig {
            effort: None,
            budget_tokens: Some(1024)
        })
    );
    assert!(body.include_thoughts());

    let thinking = |config: Value| {
        generate(json!({"contents": [user("x")],
            "generationConfig": {"thinkingConfig": config}}))
        .unwrap()
        .reasoning()
    };
    let effort = |effort| {
        Some(types::ReasoningConfig {
            effort: Some(effort),
            budget_tokens: None,
        })
    };
    assert_eq!(
        thinking(json!({"thinkingBudget": 0})).unwrap(),
        effort(types::ReasoningEffort::None)
    );
    assert_eq!(thinking(json!({"thinkingBudget": -1})).unwrap(), None);
    assert_eq!(
        thinking(json!({"thinkingLevel": "HIGH"})).unwrap(),
        effort(types::ReasoningEffort::High)
    );
    assert_eq!(
        param_of(thinking(json!({"thinkingBudget": -5})).unwrap_err()),
        "generationConfig.thinkingConfig.thinkingBudget"
    );
}

#[test]
fn tools_and_their_config() {
    let body = generate(json!({
        "contents": [user("x")],
        "tools": [{"functionDeclarations": [
            {"name": "f", "description": "d", "parameters": {"type": "OBJECT"}},
            {"name": "g", "parametersJsonSchema": {"type": "object", "properties": {}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["g"]}},
    }))
    .unwrap();
    let functions = body.functions().unwrap();
    assert_eq!(
        functions[0].parameters.as_deref(),
        Some(r#"{"type":"object"}"#)
    );
    assert_eq!(functions[1].name, "g");
    assert_eq!(
        body.function_choice().unwrap(),
        Some(types::FunctionChoice::Named("g".into()))
    );

    let search = generate(json!({"contents": [user("x")], "tools": [{"googleSearch": {}}]}));
    assert_eq!(
        param_of(search.unwrap().functions().unwrap_err()),
        "tools[0].googleSearch"
    );
    let choice = |config: Value| {
        generate(json!({"contents": [user("x")], "toolConfig": {"functionCallingConfig": config}}))
            .unwrap()
            .function_choice()
    };
    assert_eq!(
        choice(json!({"mode": "NONE"})).unwrap(),
        Some(types::FunctionChoice::None)
    );
    assert_eq!(
        choice(json!({"mode": "ANY"})).unwrap(),
        Some(types::FunctionChoice::Required)
    );
    assert_eq!(
        param_of(choice(json!({"mode": "SOMETIMES"})).unwrap_err()),
        "toolConfig.functionCallingConfig.mode"
    );
}

#[test]
fn bad_bodies_are_refused_by_place() {
    assert_eq!(
        param_of(generate(json!({"contents": []})).unwrap_err()),
        "contents"
    );
    let part = |part: Value| {
        generate(json!({"contents": [{"role": "user", "parts": [part]}]}))
            .unwrap()
            .prompt(64)
            .unwrap_err()
    };
    assert_eq!(
        param_of(part(json!({"executableCode": {"code": "1"}}))),
        "contents[0].parts[0]"
    );
    assert_eq!(
        param_of(part(json!({"inlineData": {"data": "AAAA"}}))),
        "contents[0].parts[0].inlineData.mimeType"
    );
    assert!(matches!(
        part(json!({"inlineData": {"mimeType": "image/png", "data": "A".repeat(200)}})),
        ApiError::PartTooLarge { .. }
    ));
    let orphan = generate(json!({"contents": [{"role": "user", "parts": [
        {"functionResponse": {"name": "f", "response": {}}}]}]}));
    assert_eq!(
        param_of(orphan.unwrap().prompt(64).unwrap_err()),
        "contents[0].parts[0].functionResponse"
    );
    let role = generate(json!({"contents": [{"role": "robot", "parts": [{"text": "x"}]}]}));
    assert_eq!(
        param_of(role.unwrap().prompt(64).unwrap_err()),
        "contents[0].role"
    );
}

#[test]
fn counts_take_contents_or_a_whole_request() {
    let count = |body: Value| request::count(body.to_string().as_bytes());
    let plain = count(json!({"contents": [user("hi")]})).unwrap();
    assert!(plain.check_model("r/m").is_ok());
    let whole = count(json!({"generateContentRequest": {"model": "models/r/m",
        "contents": [user("hi")], "systemInstruction": {"parts": [{"text": "s"}]}}}))
    .unwrap();
    assert!(whole.check_model("r/m").is_ok());
    assert_eq!(
        param_of(whole.check_model("r/other").unwrap_err()),
        "generateContentRequest.model"
    );
    let types::Prompt::Chat(messages) = whole.prompt(64).unwrap() else {
        panic!("chat")
    };
    assert_eq!(messages.len(), 2);
    assert_eq!(param_of(count(json!({})).unwrap_err()), "contents");
    let both = count(json!({"contents": [user("a")],
        "generateContentRequest": {"contents": [user("b")]}}));
    assert_eq!(param_of(both.unwrap_err()), "generateContentRequest");
}

#[test]
fn embeddings_one_or_a_batch() {
    let one = request::embed(
        json!({"content": {"parts": [{"text": "a"}, {"text": "b"}]},
            "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 8})
        .to_string()
        .as_bytes(),
        "g/e",
    )
    .unwrap();
    assert_eq!(one.input, ["a\nb"]);
    assert_eq!(
        Value::Object(one.params().clone()),
        json!({"taskType": "RETRIEVAL_QUERY", "dimensions": 8})
    );
    let batch = |requests: Value| {
        request::batch_embed(json!({"requests": requests}).to_string().as_bytes(), "g/e")
    };
    let two = batch(json!([
        {"model": "models/g/e", "content": {"parts": [{"text": "x"}]}},
        {"model": "models/g/e", "content": {"parts": [{"text": "y"}]}}]))
    .unwrap();
    assert_eq!(two.input, ["x", "y"]);
    let other_model =
        batch(json!([{"model": "models/h/e", "content": {"parts": [{"text": "x"}]}}]));
    assert_eq!(param_of(other_model.unwrap_err()), "requests[0].model");
    let mixed = batch(json!([
        {"content": {"parts": [{"text": "x"}]}, "title": "one"},
        {"content": {"parts": [{"text": "y"}]}, "title": "two"}]));
    assert_eq!(param_of(mixed.unwrap_err()), "requests[1]");
    let image = batch(json!([{"content": {"parts": [{"inlineData": {}}]}}]));
    assert_eq!(param_of(image.unwrap_err()), "requests[0].content.parts[0]");
    assert_eq!(param_of(batch(json!([])).unwrap_err()), "requests");
}

const ID: &str = "0190b6a2-7c1e-7d2a-9b3c-0123456789ab";

fn envelope() -> Envelope<'static> {
    Envelope {
        invocation_id: ID,
        project_id: "p",
        kind: Kind::Chat,
        model: "asked",
    }
}

fn signed(text: &str, signature: &str) -> types::Reasoning {
    types::Reasoning {
        text: text.into(),
        signature: Some(signature.into()),
        redacted: None,
    }
}

fn answer() -> types::Completion {
    types::Completion {
        model: "answered".into(),
        choices: vec![types::Choice {
            index: 0,
            text: "It is a cat.".into(),
            reasoning: vec![
                signed("hmm", "t1"),
                signed("", "s-text"),
                signed("", "s-call"),
            ],
            finish_reason: Some(types::FinishReason::ToolCalls),
            function_call: None,
            tool_calls: vec![types::ToolCall {
                id: "call_1".into(),
                name: "see".into(),
                arguments: r#"{"x":1}"#.into(),
            }],
            logprobs: None,
        }],
        usage: None,
    }
}

fn usage() -> TokenUsage {
    TokenUsage {
        prompt_tokens: 10,
        completion_tokens: 7,
        total_tokens: 17,
        reasoning_tokens: Some(3),
        cached_prompt_tokens: Some(4),
        ..TokenUsage::default()
    }
}

#[test]
fn a_whole_answer_in_gemini_shape() {
    let usage = usage();
    let metered = Metered {
        usage: &usage,
        cost_usd: None,
    };
    let codec = GenerateAnswer {
        include_thoughts: true,
    };
    let text = codec.completion(&envelope(), &answer(), Some(metered));
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        body,
        json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"text": "hmm", "thought": true, "thoughtSignature": "t1"},
                {"text": "It is a cat.", "thoughtSignature": "s-text"},
                {"functionCall": {"id": "call_1", "name": "see", "args": {"x": 1}},
                    "thoughtSignature": "s-call"}]},
                "finishReason": "STOP", "index": 0}],
            "modelVersion": "answered",
            "responseId": ID,
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4,
                "totalTokenCount": 17, "cachedContentTokenCount": 4, "thoughtsTokenCount": 3},
        })
    );
    // Thoughts only when asked for; signatures always, for the next turn.
    let quiet = GenerateAnswer {
        include_thoughts: false,
    };
    let body: Value =
        serde_json::from_str(&quiet.completion(&envelope(), &answer(), None)).unwrap();
    let parts = &body["candidates"][0]["content"]["parts"];
    assert_eq!(parts.as_array().unwrap().len(), 2);
    assert_eq!(parts[0]["thoughtSignature"], "s-text");
    assert!(body.get("usageMetadata").is_none());
}

/// The JSON of each `data:` event in `bytes`.
fn events(bytes: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).unwrap();
    text.split("\r\n\r\n")
        .filter(|e| !e.is_empty())
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

#[test]
fn a_stream_in_gemini_chunks() {
    let mut codec = GenerateAnswer {
        include_thoughts: true,
    };
    let envelope = envelope();
    let thought = codec
        .reasoning_frame(
            &envelope,
            &[types::ReasoningDelta {
                index: 0,
                block: 0,
                text: "hmm".into(),
                signature: None,
                redacted: None,
            }],
        )
        .unwrap();
    assert_eq!(
        events(&thought)[0]["candidates"][0]["content"]["parts"],
        json!([{"text": "hmm", "thought": true}])
    );
    let text = codec.delta_frame(
        &envelope,
        &[types::TextDelta {
            index: 0,
            text: "It is".into(),
        }],
    );
    let text = &events(&text)[0];
    assert_eq!(
        text["candidates"][0]["content"]["parts"],
        json!([{"text": "It is"}])
    );
    assert_eq!(text["responseId"], ID);
    // Calls go whole in the last chunk, with the signatures that were not sent.
    let usage = usage();
    let metered = Metered {
        usage: &usage,
        cost_usd: None,
    };
    let last = codec.last_frame(&envelope, &answer(), Some(metered));
    let last = &events(&last)[0];
    assert_eq!(
        last["candidates"][0]["content"]["parts"],
        json!([{"text": "", "thoughtSignature": "s-text"},
            {"functionCall": {"id": "call_1", "name": "see", "args": {"x": 1}},
                "thoughtSignature": "s-call"}])
    );
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["totalTokenCount"], 17);
    let mut quiet = GenerateAnswer {
        include_thoughts: false,
    };
    let piece = types::ReasoningDelta {
        index: 0,
        block: 0,
        text: "hmm".into(),
        signature: None,
        redacted: None,
    };
    assert!(quiet.reasoning_frame(&envelope, &[piece]).is_none());
}

#[test]
fn embeddings_counts_and_errors_in_google_shape() {
    let vectors = [vec![0.5f32, 1.0], vec![0.25]];
    let one: Value = serde_json::from_str(&EmbedAnswer { batch: false }.embeddings(
        &envelope(),
        &vectors[..1],
        None,
    ))
    .unwrap();
    assert_eq!(one, json!({"embedding": {"values": [0.5, 1.0]}}));
    let two: Value =
        serde_json::from_str(&EmbedAnswer { batch: true }.embeddings(&envelope(), &vectors, None))
            .unwrap();
    assert_eq!(
        two,
        json!({"embeddings": [{"values": [0.5, 1.0]}, {"values": [0.25]}]})
    );
    let count = |estimated| {
        let count = types::TokenCount {
            input_tokens: 9,
            estimated,
        };
        serde_json::from_str::<Value>(&response::token_count(&envelope(), count)).unwrap()
    };
    assert_eq!(count(false), json!({"totalTokens": 9}));
    assert_eq!(count(true), json!({"totalTokens": 9, "estimated": true}));

    let id = uuid::Uuid::parse_str(ID).unwrap();
    let error = ApiError::invalid("contents", "contents: at least one content is required");
    let body = response::error_body(&error, &id);
    assert_eq!(body["error"]["code"], 400);
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(body["error"]["details"][0]["requestId"], ID);
    let body = response::error_body(&ApiError::InvalidKey, &id);
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED");
}

/// Everything a body goes through before the plugin is called.
fn validate(bytes: &[u8]) -> Result<(), ApiError> {
    let body = request::generate(bytes)?;
    body.params("openai")?;
    body.prompt(1 << 10)?;
    body.functions()?;
    body.function_choice()?;
    body.reasoning()?;
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// Any bytes in, and request-shaped bodies with odd parts: a 4xx or a valid request, never
    /// a panic.
    #[test]
    fn any_body_is_a_client_error_or_a_request(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        part in "\\{\"(text|inlineData|fileData|functionCall|functionResponse|thought|x)\": (\"a\"|5|null|\\[\\]|\\{\\}|\\{\"name\": \"f\"\\}|\\{\"mimeType\": \"image/png\", \"data\": \"AA\"\\})\\}",
        role in "(user|model|function|x)",
        config in "\\{\"(thinkingConfig|responseSchema|responseMimeType|maxOutputTokens)\": (\"a\"|5|null|\\{\\}|\\{\"thinkingBudget\": -3\\})\\}",
    ) {
        for bytes in [
            bytes,
            format!(r#"{{"contents": [{{"role": "{role}", "parts": [{part}]}}],
                "systemInstruction": {{"parts": [{part}]}}, "generationConfig": {config}}}"#)
                .into_bytes(),
        ] {
            if let Err(e) = validate(&bytes) {
                proptest::prop_assert!(e.status().is_client_error(), "{e} is not a 4xx");
            }
        }
    }
}
