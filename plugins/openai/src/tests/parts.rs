//! Content parts and reasoning.

use super::*;

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
