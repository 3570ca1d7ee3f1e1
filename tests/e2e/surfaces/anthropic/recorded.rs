//! Each recorded case (simple, tool, multi-step tools) of each provider sent the way an Anthropic
//! client sends it, whole and streamed: the answer's content blocks, stop reason and usage, a
//! stream's events in their exact order, and what the plugin sent upstream.

use super::*;

// ---------------------------------------------------------------- recorded cases, whole

fn check_whole(provider: Provider, name: &str) {
    let recording = Recording::load(name);
    let (upstream, gw) = start(provider, &recording);
    for (step, interaction) in recording.interactions.iter().enumerate() {
        assert!(!interaction.is_sse(), "{name} is a streaming recording");
        let expected = expected(provider, interaction);
        let response = post_messages(
            &gw,
            WITH_PROVIDER_KEY,
            &anthropic_request(provider, interaction),
        );
        assert_eq!(response.status, 200, "{}", response.text());
        assert_eq!(response.header("content-type"), Some("application/json"));
        let id = invocation_id(&response.headers);
        let body = response.json();
        assert_eq!(body, expected_message(&id, &expected), "step {step}");

        let record = gw.get_invocation(&id).json();
        assert_eq!(record["status"], json!("success"), "{record}");
        assert_eq!(record["route"], json!(provider.route()));
        assert_eq!(record["plugin"], json!(provider.plugin()));
        assert_eq!(record["type"], json!("chat"));
        assert_eq!(record["stream"], json!(false));
        assert_eq!(record["response"], body, "the record keeps the answer");
        check_record_usage(&record, &expected);
        // The cost goes in a header, the Messages API having no field for it.
        let header: f64 = response
            .header("x-gateway-cost-usd")
            .expect("x-gateway-cost-usd")
            .parse()
            .expect("a number");
        let recorded_cost = record["usageCost"].as_f64().expect("usageCost");
        assert!(
            (header - recorded_cost).abs() < 1e-9,
            "{header} != {recorded_cost}"
        );

        let requests = upstream.requests();
        assert_eq!(requests.len(), step + 1, "one upstream call per request");
        check_upstream_request(provider, &requests[step], interaction);
    }
}

recorded_tests! {
    anthropic_simple => check_whole(Provider::Anthropic, "Anthropic__claude-sonnet-4__simple");
    anthropic_tool => check_whole(Provider::Anthropic, "Anthropic__claude-sonnet-4__tool");
    anthropic_multi_tool => check_whole(Provider::Anthropic, "Anthropic__claude-sonnet-4__multi_tool");
    openai_simple => check_whole(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__simple");
    openai_tool => check_whole(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__tool");
    openai_multi_tool => check_whole(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__multi_tool");
    gemini_simple => check_whole(Provider::Gemini, "Google__gemini-2.5-flash__simple");
    gemini_tool => check_whole(Provider::Gemini, "Google__gemini-2.5-flash__tool");
    gemini_multi_tool => check_whole(Provider::Gemini, "Google__gemini-2.5-flash__multi_tool");
}

fn check_stream(provider: Provider, name: &str) {
    let recording = Recording::load(name);
    let (upstream, gw) = start(provider, &recording);
    for (step, interaction) in recording.interactions.iter().enumerate() {
        let expected = expected(provider, interaction);
        let request = anthropic_request(provider, interaction);
        assert_eq!(
            request["stream"],
            json!(true),
            "{name} is not a streaming recording"
        );
        let response = stream_messages(&gw, WITH_PROVIDER_KEY, &request);
        let id = invocation_id(&response.headers);
        let (message, blocks, delta) = read_stream(&response);

        // The opening: no content, no usage known yet, the model asked for.
        assert_eq!(
            message,
            json!({"id": message_id(&id), "type": "message", "role": "assistant",
                "model": recorded_model(provider, interaction), "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": usage_object(0, 0, 0, 0)}),
        );
        // The blocks: the text first (when there is any), then each call.
        let mut blocks = blocks.into_iter();
        if !expected.text.is_empty() {
            let Some(Block::Text(pieces)) = blocks.next() else {
                panic!("no text block first: {}", response.raw)
            };
            assert_eq!(pieces.concat(), expected.text);
            if let Some(recorded) = &expected.text_pieces {
                assert_eq!(&pieces, recorded, "one text_delta per recorded delta");
            }
        }
        let calls: Vec<(Value, Vec<String>)> = blocks
            .map(|block| match block {
                Block::Tool(start, pieces) => (start, pieces),
                Block::Text(_) => panic!("a text block after the calls: {}", response.raw),
            })
            .collect();
        assert_eq!(calls.len(), expected.calls.len(), "{}", response.raw);
        for (position, ((start, pieces), call)) in calls.iter().zip(&expected.calls).enumerate() {
            assert_eq!(
                start,
                &json!({"type": "tool_use", "id": call_id(call, position), "name": call.1, "input": {}})
            );
            assert!(pieces.iter().all(|p| !p.is_empty()), "{pieces:?}");
            let input: Value =
                serde_json::from_str(&pieces.concat()).expect("the pieces make JSON");
            assert_eq!(
                input, call.2,
                "the partial_json pieces reassemble the input"
            );
            if let Some(recorded) = &expected.json_pieces {
                assert_eq!(
                    pieces, &recorded[position],
                    "one input_json_delta per recorded one"
                );
            }
        }
        assert_eq!(
            delta,
            json!({"type": "message_delta",
                "delta": {"stop_reason": expected.stop_reason, "stop_sequence": null},
                "usage": expected.usage}),
        );

        let record = gw.wait_for_record(&id, |r| r["status"] == json!("success"));
        assert_eq!(record["stream"], json!(true));
        assert_eq!(record["route"], json!(provider.route()));
        assert_eq!(record["plugin"], json!(provider.plugin()));
        assert_eq!(
            record["response"],
            expected_message(&id, &expected),
            "the record keeps the whole message"
        );
        check_record_usage(&record, &expected);

        let requests = upstream.requests();
        assert_eq!(requests.len(), step + 1, "one upstream call per request");
        check_upstream_request(provider, &requests[step], interaction);
    }
}

recorded_tests! {
    anthropic_simple_streaming => check_stream(Provider::Anthropic, "Anthropic__claude-sonnet-4__simple_streaming");
    anthropic_tool_streaming => check_stream(Provider::Anthropic, "Anthropic__claude-sonnet-4__tool_streaming");
    anthropic_multi_tool_streaming => check_stream(Provider::Anthropic, "Anthropic__claude-sonnet-4__multi_tool_streaming");
    openai_simple_streaming => check_stream(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__simple_streaming");
    openai_tool_streaming => check_stream(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__tool_streaming");
    openai_multi_tool_streaming => check_stream(Provider::OpenAi, "OpenAI__openai-gpt-4o-mini__multi_tool_streaming");
    gemini_simple_streaming => check_stream(Provider::Gemini, "Google__gemini-2.5-flash__simple_streaming");
    gemini_tool_streaming => check_stream(Provider::Gemini, "Google__gemini-2.5-flash__tool_streaming");
    gemini_multi_tool_streaming => check_stream(Provider::Gemini, "Google__gemini-2.5-flash__multi_tool_streaming");
}
