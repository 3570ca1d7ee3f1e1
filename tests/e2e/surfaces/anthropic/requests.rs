//! Requests beyond the recorded cases: `system` as a string or blocks, parameters under their
//! canonical names (and back again to an Anthropic route), stop reasons, cached prompt tokens, a
//! plugin of the 0.1 WIT line streaming messages.

use super::*;

#[test]
fn system_as_a_string_or_as_blocks_reaches_the_upstream() {
    let (upstream, gw) = anthropic_gateway();
    let mut body = hi("claude/claude-sonnet-4-20250514");
    body["system"] = json!("Be brief.");
    assert_eq!(post_messages(&gw, WITH_PROVIDER_KEY, &body).status, 200);
    body["system"] = json!([
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Answer in Portuguese."},
    ]);
    assert_eq!(post_messages(&gw, WITH_PROVIDER_KEY, &body).status, 200);
    let sent: Vec<Value> = upstream
        .requests()
        .iter()
        .map(ReceivedRequest::json)
        .collect();
    assert_eq!(sent[0]["system"], json!("Be brief."));
    assert_eq!(sent[1]["system"], json!("Be brief.\nAnswer in Portuguese."));
    for body in &sent {
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "Say hi in Portuguese"}]}])
        );
        assert_eq!(body["max_tokens"], json!(50));
    }

    // To an OpenAI route, the system prompt is the first message.
    let (upstream, gw) = openai_gateway(Reply::recorded(&simple(
        "OpenAI__openai-gpt-4o-mini__simple",
    )));
    let mut body = hi("oai/gpt-4o-mini");
    body["system"] = json!([{"type": "text", "text": "Be brief."}]);
    assert_eq!(post_messages(&gw, WITH_PROVIDER_KEY, &body).status, 200);
    assert_eq!(
        upstream.single_request().json()["messages"],
        json!([{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hi in Portuguese"}])
    );
}

#[test]
fn parameters_take_their_canonical_names_and_unknown_ones_pass_through() {
    let (upstream, gw) =
        openai_gateway(Reply::recorded(&simple("OpenAI__openai-gpt-4o-mini__tool")));
    let mut body = hi("oai/gpt-4o-mini");
    body["stop_sequences"] = json!(["END", "STOP"]);
    body["temperature"] = json!(0.25);
    body["top_p"] = json!(0.5);
    body["metadata"] = json!({"user_id": "user-7"});
    body["service_tier"] = json!("flex");
    body["tools"] = json!([{"name": "weather", "description": "Get the weather",
        "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}]);
    body["tool_choice"] =
        json!({"type": "tool", "name": "weather", "disable_parallel_tool_use": true});
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = upstream.single_request().json();
    assert_eq!(sent["max_tokens"], json!(50));
    assert_eq!(sent["stop"], json!(["END", "STOP"]));
    assert_eq!(sent["temperature"], json!(0.25));
    assert_eq!(sent["top_p"], json!(0.5));
    assert_eq!(sent["user"], json!("user-7"));
    assert_eq!(sent["service_tier"], json!("flex"));
    assert_eq!(sent["parallel_tool_calls"], json!(false));
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
    assert_eq!(
        sent["tools"][0]["function"]["parameters"],
        body["tools"][0]["input_schema"]
    );
    for anthropic_name in ["stop_sequences", "metadata"] {
        assert!(sent.get(anthropic_name).is_none(), "{sent}");
    }
    let record = gw.get_invocation(&invocation_id(&response.headers)).json();
    assert_eq!(record["userId"], json!("user-7"));

    // `any` is "some tool"; `none` is none.
    let (upstream, gw) =
        openai_gateway(Reply::recorded(&simple("OpenAI__openai-gpt-4o-mini__tool")));
    for (choice, sent_choice) in [("any", "required"), ("none", "none"), ("auto", "auto")] {
        body["tool_choice"] = json!({"type": choice});
        assert_eq!(post_messages(&gw, WITH_PROVIDER_KEY, &body).status, 200);
        let sent = upstream.requests().last().expect("sent").json();
        assert_eq!(sent["tool_choice"], json!(sent_choice));
        assert!(sent.get("parallel_tool_calls").is_none(), "{sent}");
    }
}

/// A whole OpenAI answer with `finish_reason` and usage.
fn openai_answer(finish_reason: &str, text: &str, usage: Value) -> Reply {
    Reply::json(
        200,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason}],
            "usage": usage,
        }),
    )
}

#[test]
fn stop_reasons_map_to_anthropic_words() {
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    for (finish, stop) in [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
    ] {
        let (_upstream, gw) = openai_gateway(openai_answer(finish, "Olá", usage.clone()));
        let body = post_messages(&gw, WITH_PROVIDER_KEY, &hi("oai/gpt-4o-mini")).json();
        assert_eq!(body["stop_reason"], json!(stop), "{finish}: {body}");
        let mut streamed = hi("oai/gpt-4o-mini");
        streamed["stream"] = json!(true);
        // A server that answers whole to a stream request still streams to the caller.
        let (_, _, delta) = read_stream(&stream_messages(&gw, WITH_PROVIDER_KEY, &streamed));
        assert_eq!(
            delta["delta"]["stop_reason"],
            json!(stop),
            "{finish}: {delta}"
        );
    }
}

#[test]
fn cached_prompt_tokens_are_not_input_tokens() {
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105,
        "prompt_tokens_details": {"cached_tokens": 30}});
    let (_upstream, gw) = openai_gateway(openai_answer("stop", "Olá", usage));
    let body = post_messages(&gw, WITH_PROVIDER_KEY, &hi("oai/gpt-4o-mini")).json();
    assert_eq!(body["usage"], usage_object(70, 5, 30, 0), "{body}");
}

/// A plugin built against WIT 0.1.0 (no streamed tool calls) streams through the same events.
#[test]
fn a_plugin_of_an_earlier_wit_version_streams_messages_too() {
    let gw = Gateway::builder()
        .route(Route::new("old", "legacy"))
        .start();
    let mut body = hi("old/legacy");
    body["stream"] = json!(true);
    let response = stream_messages(&gw, &[], &body);
    let (message, blocks, delta) = read_stream(&response);
    assert_eq!(message["model"], json!("legacy"));
    let [Block::Text(pieces)] = &blocks[..] else {
        panic!("one text block: {}", response.raw)
    };
    assert_eq!(pieces.concat(), "legacy: Say hi in Portuguese");
    assert_eq!(delta["delta"]["stop_reason"], json!("end_turn"));
    assert_eq!(delta["usage"], usage_object(0, 0, 0, 0));

    body["stream"] = json!(false);
    let whole = post_messages(&gw, &[], &body);
    assert_eq!(whole.status, 200, "{}", whole.text());
    assert_eq!(
        whole.json()["content"],
        json!([{"type": "text", "text": "legacy: Say hi in Portuguese"}])
    );
}

/// Anthropic to Anthropic, the parameters arrive under their own names again.
#[test]
fn parameters_round_trip_to_an_anthropic_route() {
    let (upstream, gw) = anthropic_gateway();
    let mut body = hi("claude/claude-sonnet-4-20250514");
    body["stop_sequences"] = json!(["END"]);
    body["temperature"] = json!(0.5);
    body["top_p"] = json!(0.75);
    body["top_k"] = json!(20);
    body["metadata"] = json!({"user_id": "user-9"});
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    body["tools"] = json!([{"name": "weather", "input_schema": {"type": "object"}}]);
    body["tool_choice"] = json!({"type": "any", "disable_parallel_tool_use": true});
    let response = post_messages(&gw, WITH_PROVIDER_KEY, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = upstream.single_request().json();
    for key in [
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "metadata",
        "thinking",
    ] {
        assert_eq!(sent[key], body[key], "{key}: {sent}");
    }
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true}),
        "{sent}"
    );
    for canonical in ["stop", "user", "parallel_tool_calls"] {
        assert!(sent.get(canonical).is_none(), "{canonical}: {sent}");
    }
    let record = gw.get_invocation(&invocation_id(&response.headers)).json();
    assert_eq!(record["userId"], json!("user-9"));
}
