//! Reading whole and streamed answers: finish reasons, usage, tool calls, errors.

use super::*;

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
