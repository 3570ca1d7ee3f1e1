//! Content parts, reasoning and the new finish reasons (WIT 0.2).

use super::*;

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
