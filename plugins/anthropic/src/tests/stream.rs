//! Reading whole and streamed answers: stop reasons, usage, tool calls, errors.

use super::*;

// ---------------------------------------------------------------------------------------------
// Responses

#[test]
fn stop_reasons_map() {
    assert_eq!(finish_reason("end_turn", None), FinishReason::Stop);
    assert_eq!(
        finish_reason("stop_sequence", Some("END")),
        FinishReason::StopSequence("END".into())
    );
    assert_eq!(finish_reason("stop_sequence", None), FinishReason::Stop);
    assert_eq!(finish_reason("max_tokens", None), FinishReason::Length);
    assert_eq!(
        finish_reason("model_context_window_exceeded", None),
        FinishReason::Length
    );
    assert_eq!(finish_reason("tool_use", None), FinishReason::ToolCalls);
    assert_eq!(finish_reason("refusal", None), FinishReason::Refusal);
    assert_eq!(finish_reason("pause_turn", None), FinishReason::Pause);
    assert_eq!(finish_reason("something_new", None), FinishReason::Other);
}

#[test]
fn usage_counts_cached_tokens_as_prompt_tokens() {
    let wire: WireUsage = serde_json::from_value(json!({
        "input_tokens": 100, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1000,
        "output_tokens": 50, "service_tier": "standard"
    }))
    .expect("usage");
    assert_eq!(
        usage(&wire),
        Usage {
            prompt_tokens: 1300,
            completion_tokens: 50,
            total_tokens: 1350,
            cached_prompt_tokens: Some(1000),
            cache_creation_tokens: Some(200),
            reasoning_tokens: None,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        }
    );
    let wire: WireUsage = serde_json::from_value(
        json!({"input_tokens": 7.0, "output_tokens": null, "cache_read_input_tokens": "x"}),
    )
    .expect("lenient usage");
    assert_eq!(
        usage(&wire),
        Usage {
            prompt_tokens: 7,
            completion_tokens: 0,
            total_tokens: 7,
            cached_prompt_tokens: None,
            cache_creation_tokens: None,
            reasoning_tokens: None,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        }
    );
}

#[test]
fn simple_recorded_answer_parses() {
    let interactions = recording("Anthropic__claude-sonnet-4__simple");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "asked").expect("parses");
    assert_eq!(completion.model, "claude-sonnet-4-20250514");
    assert_eq!(completion.choices.len(), 1);
    let choice = &completion.choices[0];
    assert_eq!(
        choice.text,
        "Olá! \n\n(That's \"hello\" in Portuguese. You could also say \"Oi!\" for a more casual \"hi!\")"
    );
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    assert!(choice.function_call.is_none() && choice.tool_calls.is_empty());
    assert_eq!(
        completion.usage,
        Some(Usage {
            prompt_tokens: 16,
            completion_tokens: 34,
            total_tokens: 50,
            cached_prompt_tokens: Some(0),
            cache_creation_tokens: Some(0),
            reasoning_tokens: None,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
        })
    );
}

#[test]
fn tool_answer_has_tool_calls_and_function_call() {
    let interactions = recording("Anthropic__claude-sonnet-4__tool");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "asked").expect("parses");
    let choice = &completion.choices[0];
    assert_eq!(
        choice.text,
        "I'll check the weather in Florence, Italy for you."
    );
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        choice.tool_calls,
        [tool_call(
            "toolu_01XLb9pzgfLa2EMyqWot6Ezt",
            "weather",
            r#"{"location":"Florence,Italy"}"#
        )]
    );
    assert_eq!(
        choice.function_call,
        Some(FunctionCall {
            name: "weather".into(),
            arguments: r#"{"location":"Florence,Italy"}"#.into(),
        })
    );
    let final_answer =
        parse_completion(interactions[1].response.body.as_bytes(), "asked").expect("parses");
    assert_eq!(
        final_answer.choices[0].finish_reason,
        Some(FinishReason::Stop)
    );
    assert!(final_answer.choices[0].text.contains("40°C"));
}

#[test]
fn parallel_tool_uses_stay_separate() {
    let interactions = recording("Anthropic__claude-sonnet-4__multi_tool");
    let completion =
        parse_completion(interactions[0].response.body.as_bytes(), "asked").expect("parses");
    let calls = &completion.choices[0].tool_calls;
    assert_eq!(
        calls,
        &[
            tool_call("toolu_01StBeRxDEwsqcc3arbDgpS9", "add", r#"{"a":2,"b":3}"#),
            tool_call(
                "toolu_01AC6WQhj2iRkdYHgTAGMpVQ",
                "multiply",
                r#"{"a":2,"b":3}"#
            ),
        ]
    );
    assert_eq!(
        completion.choices[0]
            .function_call
            .as_ref()
            .map(|f| f.name.as_str()),
        Some("add")
    );
}

#[test]
fn other_blocks_are_not_answer_text_and_missing_ids_are_made_up() {
    let body = json!({
        "type": "message", "model": "", "role": "assistant", "stop_reason": "max_tokens",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "abc"},
            {"type": "text", "text": "Part one, "},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "text", "text": "part two."},
            {"type": "tool_use", "name": "noop", "input": null}
        ]
    });
    let completion = parse_completion(body.to_string().as_bytes(), "claude-x").expect("parses");
    assert_eq!(completion.model, "claude-x");
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "Part one, part two.");
    assert_eq!(choice.finish_reason, Some(FinishReason::Length));
    // The SDK names a call without an id after its choice and position.
    assert_eq!(choice.tool_calls, [tool_call("call_0_0", "noop", "{}")]);
    assert_eq!(completion.usage, None);
}

#[test]
fn an_error_body_with_a_success_status_is_an_upstream_error() {
    let body = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let error = upstream(parse_completion(body, "m"));
    assert_eq!((error.status, error.message.as_str()), (529, "Overloaded"));
}

#[test]
fn malformed_answers_fail_clearly() {
    for body in [&b"not json"[..], b"{\"content\": 5}", b""] {
        let message = failed(parse_completion(body, "m"));
        assert!(
            message.starts_with("malformed response from upstream: "),
            "{message}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Streams

#[test]
fn recorded_text_stream_is_forwarded_piece_by_piece_with_usage() {
    let interactions = recording("Anthropic__claude-sonnet-4__simple_streaming");
    let replayed = replay_stream(&interactions[0].response.body).expect("stream");
    let completion = &replayed.completion;
    assert_eq!(completion.model, "claude-sonnet-4-20250514");
    let choice = &completion.choices[0];
    assert!(
        choice
            .text
            .starts_with("Olá! (That's \"hi\" in Portuguese)")
    );
    assert_eq!(replayed.text(), choice.text);
    let pieces = replayed
        .chunks
        .iter()
        .filter(|c| !c.deltas.is_empty())
        .count();
    assert_eq!(pieces, 12, "one chunk per text_delta");
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    // Usage goes out at message_start (prompt known) and message_delta (final counts).
    let usages = replayed.usages();
    assert_eq!(
        usages
            .iter()
            .map(|u| (u.prompt_tokens, u.completion_tokens))
            .collect::<Vec<_>>(),
        [(16, 5), (16, 38)]
    );
    assert!(
        replayed.chunks[0].usage.is_some(),
        "usage is sent before any text"
    );
    assert_eq!(completion.usage, usages.last().copied());
    assert_eq!(completion.usage.map(|u| u.total_tokens), Some(54));
}

#[test]
fn recorded_tool_stream_reassembles_the_input() {
    let interactions = recording("Anthropic__claude-sonnet-4__tool_streaming");
    let replayed = replay_stream(&interactions[0].response.body).expect("stream");
    let choice = &replayed.completion.choices[0];
    assert_eq!(
        choice.text,
        "I'll get the weather information for Florence, Italy for you."
    );
    assert_eq!(replayed.text(), choice.text);
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        choice.tool_calls,
        [tool_call(
            "toolu_01N2eM4V43kGCDkq2Lw7ChWQ",
            "weather",
            r#"{"location": "Florence,Italy"}"#
        )]
    );
    assert_eq!(
        choice.function_call.as_ref().map(|f| f.arguments.as_str()),
        Some(r#"{"location": "Florence,Italy"}"#)
    );
    assert_eq!(
        replayed
            .completion
            .usage
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((394, 67))
    );
}

#[test]
fn recorded_parallel_tool_stream_keeps_calls_apart() {
    let interactions = recording("Anthropic__claude-sonnet-4__multi_tool_streaming");
    let replayed = replay_stream(&interactions[0].response.body).expect("stream");
    let calls = &replayed.completion.choices[0].tool_calls;
    assert_eq!(
        calls,
        &[
            tool_call(
                "toolu_01UYxUYC2zRPY8wiutnF48eP",
                "add",
                r#"{"a": 2, "b": 3}"#
            ),
            tool_call(
                "toolu_01VaRx1jpWCvPhi7L4kywAcd",
                "multiply",
                r#"{"a": 2, "b": 3}"#
            ),
        ]
    );
}

#[test]
fn every_recorded_answer_parses() {
    for name in RECORDINGS {
        for (i, interaction) in recording(name).iter().enumerate() {
            let completion = if interaction.requests_stream() {
                replay_stream(&interaction.response.body).map(|r| r.completion)
            } else {
                parse_completion(interaction.response.body.as_bytes(), "asked")
            }
            .unwrap_or_else(|e| panic!("{name}[{i}]: {e:?}"));
            assert_eq!(completion.choices.len(), 1, "{name}[{i}]");
            assert!(!completion.choices[0].text.is_empty(), "{name}[{i}]");
            assert!(completion.choices[0].finish_reason.is_some(), "{name}[{i}]");
            assert!(completion.usage.is_some(), "{name}[{i}]");
        }
    }
}

#[test]
fn cache_usage_in_a_stream_is_reported_and_updated() {
    let mut events = vec![message_start(json!({
        "input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2000,
        "output_tokens": 1
    }))];
    events.extend(text_events(0, &["Hi"]));
    events.extend(message_end("end_turn", json!({"output_tokens": 12})));
    let replayed = replay_stream(&stream_of(&events)).expect("stream");
    assert_eq!(replayed.completion.model, "claude-sonnet-4-5-20250929");
    let expected = Usage {
        prompt_tokens: 2010,
        completion_tokens: 12,
        total_tokens: 2022,
        cached_prompt_tokens: Some(2000),
        cache_creation_tokens: Some(0),
        reasoning_tokens: None,
        image_prompt_tokens: None,
        audio_prompt_tokens: None,
    };
    assert_eq!(replayed.completion.usage, Some(expected));
    assert_eq!(replayed.usages().last(), Some(&expected));
}

#[test]
fn error_events_become_upstream_errors() {
    for (kind, status) in [
        ("overloaded_error", 529),
        ("rate_limit_error", 429),
        ("api_error", 500),
        ("invalid_request_error", 400),
        ("something_new", 500),
    ] {
        let mut events = vec![message_start(
            json!({"input_tokens": 3, "output_tokens": 1}),
        )];
        events.extend(text_events(0, &["Hel"]));
        events.push((
            "error",
            json!({"type": "error", "error": {"type": kind, "message": format!("{kind} happened")}}),
        ));
        let error = upstream(replay_stream(&stream_of(&events)).map(|r| r.completion));
        assert_eq!(error.status, status, "{kind}");
        assert_eq!(error.message, format!("{kind} happened"));
        assert_eq!(error.retry_after, None);
    }
    let events = [(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error"}}),
    )];
    let error = upstream(replay_stream(&stream_of(&events)).map(|r| r.completion));
    assert_eq!(error.message, "the provider reported overloaded_error");
}

#[test]
fn a_stream_cut_before_message_stop_fails() {
    let mut events = vec![message_start(
        json!({"input_tokens": 3, "output_tokens": 1}),
    )];
    events.extend(text_events(0, &["Hel", "lo"]));
    let body = stream_of(&events);
    assert_eq!(
        failed(replay_stream(&body).map(|r| r.completion)),
        "stream ended early"
    );
    // Even with the stop reason: only message_stop says the answer is whole.
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
    ));
    assert_eq!(
        failed(replay_stream(&stream_of(&events)).map(|r| r.completion)),
        "stream ended early"
    );
    assert_eq!(
        failed(replay_stream("").map(|r| r.completion)),
        "stream ended early"
    );
}

#[test]
fn a_stream_cut_mid_event_is_malformed() {
    let mut body = stream_of(&[message_start(json!({"input_tokens": 3}))]);
    body.push_str(
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_del",
    );
    let message = failed(replay_stream(&body).map(|r| r.completion));
    assert!(
        message.starts_with("malformed response from upstream: "),
        "{message}"
    );
}

#[test]
fn pings_and_unknown_events_are_skipped_and_thinking_is_reasoning() {
    let mut events = vec![
        ("ping", json!({"type": "ping"})),
        message_start(json!({"input_tokens": 3, "output_tokens": 1})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me think"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "brand_new_event",
            json!({"type": "brand_new_event", "x": 1}),
        ),
    ];
    events.extend(text_events(1, &["Answer"]));
    events.extend(message_end("end_turn", json!({"output_tokens": 9})));
    let replayed = replay_stream(&stream_of(&events)).expect("stream");
    assert_eq!(replayed.text(), "Answer");
    assert_eq!(replayed.completion.choices[0].text, "Answer");
    let reasoning = &replayed.completion.choices[0].reasoning;
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0].text, "Let me think");
    assert_eq!(reasoning[0].signature.as_deref(), Some("sig"));
    // Events after message_stop are not read.
    let mut body = stream_of(&events);
    body.push_str("data: {not json\n\n");
    assert!(replay_stream(&body).is_ok());
}

#[test]
fn a_tool_without_input_deltas_gets_an_empty_object() {
    let mut events = vec![message_start(
        json!({"input_tokens": 3, "output_tokens": 1}),
    )];
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "now", "input": {}}}),
    ));
    events.push((
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}}),
    ));
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    // A block whose whole input came at its start, and one never stopped.
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "", "name": "given", "input": {"q": 1}}}),
    ));
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 1}),
    ));
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_c", "name": "open", "input": {}}}),
    ));
    events.extend(message_end("tool_use", json!({"output_tokens": 20})));
    let replayed = replay_stream(&stream_of(&events)).expect("stream");
    let choice = &replayed.completion.choices[0];
    assert_eq!(
        choice.tool_calls,
        [
            tool_call("toolu_a", "now", "{}"),
            tool_call("call_0_1", "given", r#"{"q":1}"#),
            tool_call("toolu_c", "open", "{}"),
        ]
    );
    assert_eq!(choice.text, "");
    assert!(replayed.text().is_empty());
}

#[test]
fn input_for_a_block_that_is_no_tool_is_malformed() {
    let mut events = vec![message_start(json!({"input_tokens": 3}))];
    events.extend(text_events(0, &[]));
    events.push((
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
    ));
    let message = failed(replay_stream(&stream_of(&events)).map(|r| r.completion));
    assert!(message.contains("content block 0"), "{message}");
}
