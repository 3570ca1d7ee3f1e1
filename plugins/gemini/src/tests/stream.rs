//! Reading whole and streamed answers.

use super::*;

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

/// Google's answer to a wrong API key is a 400 with reason `API_KEY_INVALID`: the route's key,
/// read as a 401; any other response is left as it came, its body whole.
#[test]
fn a_refused_key_is_a_401_and_other_answers_pass() {
    let refused = json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}});
    let response = Response::from_chunks(400, Vec::new(), vec![refused.to_string().into_bytes()]);
    match crate::wire::key_refused(response) {
        Err(ProviderError::Upstream(UpstreamError {
            status, message, ..
        })) => {
            assert_eq!(status, 401);
            assert_eq!(message, "API key not valid. Please pass a valid API key.");
        }
        other => panic!("not a 401: {other:?}"),
    }
    let other = json!({"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}});
    let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    let body = other.to_string().into_bytes();
    let response = Response::from_chunks(400, headers, vec![body.clone()]);
    let passed = crate::wire::key_refused(response).unwrap();
    assert_eq!(passed.status, 400);
    assert_eq!(passed.header("content-type"), Some("application/json"));
    assert_eq!(passed.bytes().unwrap(), body);
    let ok = Response::from_chunks(200, Vec::new(), vec![b"{}".to_vec()]);
    assert_eq!(crate::wire::key_refused(ok).unwrap().status, 200);
}
