//! Content parts, reasoning and usage of the WIT 0.2 contract.

use super::*;

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
