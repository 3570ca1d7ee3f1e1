//! `/v1/chat/completions` beyond the recorded cases: parameters passing through, the legacy
//! `functions`, tool calls a plugin did not stream, model aliases and `x-api-key`.

use super::*;

/// What the surface does not read reaches the OpenAI upstream under its own name; `user` is
/// also the record's user; `developer` is a system message.
#[test]
fn parameters_pass_through_and_user_is_recorded() {
    let recording = OpenAi.recording("simple");
    let upstream = Upstream::replay(OpenAi, &recording);
    let gw = gateway_for(OpenAi, &upstream);
    let body = json!({
        "model": OpenAi.target(),
        "messages": [{"role": "developer", "content": "Be brief"}, {"role": "user", "content": "Say hi in Portuguese"}],
        "temperature": 0.25,
        "max_completion_tokens": 77,
        "seed": 7,
        "reasoning_effort": "low",
        "user": "end-user-9",
        "top_p": null,
    });
    let response = post(&gw, "/v1/chat/completions", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = upstream.requests()[0].json();
    assert_eq!(sent["model"], json!("gpt-4o-mini"));
    assert_eq!(sent["temperature"], json!(0.25));
    assert_eq!(sent["max_completion_tokens"], json!(77));
    assert_eq!(sent["seed"], json!(7));
    assert_eq!(sent["reasoning_effort"], json!("low"));
    assert_eq!(sent["user"], json!("end-user-9"));
    assert!(sent.get("top_p").is_none(), "a null is not given: {sent}");
    assert_eq!(sent["messages"][0]["role"], json!("system"), "{sent}");
    let id = response.header("x-invocation-id").expect("id");
    let record = success_record(&gw, id, OpenAi);
    assert_eq!(record["userId"], json!("end-user-9"));
}

/// Legacy `functions` / `function_call`: the answer carries `function_call`, not `tool_calls`,
/// whole and streamed.
#[test]
fn legacy_functions_answer_with_function_call() {
    let (whole, streamed) = (OpenAi.recording("tool"), OpenAi.recording("tool_streaming"));
    let interactions = [whole.interaction(0), streamed.interaction(0)];
    let upstream = Upstream::OpenAi(OpenAiUpstream::script(
        interactions.iter().map(|i| Reply::recorded(i)).collect(),
    ));
    let gw = gateway_for(OpenAi, &upstream);
    for (n, interaction) in interactions.into_iter().enumerate() {
        let expected = expected(OpenAi, interaction);
        let mut body = request_from(OpenAi, interaction);
        let tools = body
            .as_object_mut()
            .expect("object")
            .remove("tools")
            .expect("tools");
        body.as_object_mut().expect("object").remove("tool_choice");
        body["functions"] = tools
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["function"].clone())
            .collect();
        body["function_call"] = json!("auto");
        let (name, arguments) = (
            &expected.calls[0].1,
            &expected.argument_texts.as_ref().expect("texts")[0],
        );
        if n == 0 {
            let response = post(&gw, "/v1/chat/completions", &body);
            assert_eq!(response.status, 200, "{}", response.text());
            let answer = response.json();
            let choice = &answer["choices"][0];
            assert_eq!(
                choice["message"]["function_call"],
                json!({"name": name, "arguments": arguments}),
                "{answer}"
            );
            assert!(choice["message"].get("tool_calls").is_none(), "{answer}");
            assert_eq!(choice["finish_reason"], json!("function_call"));
        } else {
            let stream = post_stream(&gw, "/v1/chat/completions", &body);
            assert!(stream.done, "{}", stream.raw);
            let calls: Vec<Value> = stream
                .chunks
                .iter()
                .flat_map(|c| c["choices"].as_array().cloned().unwrap_or_default())
                .filter_map(|c| c["delta"].get("function_call").cloned())
                .collect();
            assert_eq!(
                calls,
                [json!({"name": name, "arguments": arguments})],
                "{}",
                stream.raw
            );
            assert!(!stream.raw.contains("tool_calls"), "{}", stream.raw);
            let finish: Vec<&Value> = stream
                .chunks
                .iter()
                .filter_map(|c| c["choices"][0].get("finish_reason"))
                .filter(|r| !r.is_null())
                .collect();
            assert_eq!(finish, [&json!("function_call")]);
        }
    }
}

/// A plugin that does not stream its calls (echo) has them sent whole in the final chunks,
/// with an id; `tool_choice` naming a function makes echo call it.
#[test]
fn calls_not_streamed_by_the_plugin_come_in_the_last_chunks() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let body = json!({
        "model": "demo",
        "messages": [{"role": "user", "content": "weather in Rome"}],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "stream": true,
    });
    let stream = post_stream(&gw, "/v1/chat/completions", &body);
    let out = reassemble(&stream);
    assert_eq!(out.calls.len(), 1, "{}", stream.raw);
    assert_eq!(out.calls[0].1, "weather");
    assert!(!out.calls[0].0.is_empty());
    assert_eq!(
        parse_json(&out.calls[0].2),
        json!({"input": "weather in Rome"})
    );
    assert_eq!(out.finish_reason.as_deref(), Some("tool_calls"));
    assert!(
        out.usage.is_none(),
        "no usage chunk without include_usage: {}",
        stream.raw
    );
    assert_eq!(out.text, "");
    // The opening chunk of a choice that only calls has null content.
    assert_eq!(
        stream.chunks[0]["choices"][0]["delta"]["content"],
        Value::Null
    );
}

/// `model` as an alias of the config, and `x-api-key` instead of `Authorization`.
#[test]
fn aliases_and_x_api_key() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("[models.fast]\nroute = \"demo\"\nmodel = \"echo\"")
        .start();
    let body = json!({"model": "fast", "messages": [{"role": "user", "content": "hola amigo"}]});
    let response = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("x-api-key", &gw.key)],
        body.to_string().as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        json!("hola amigo")
    );
    assert_eq!(answer["model"], json!("echo"));
    assert_eq!(answer["usage"]["total_tokens"], json!(4));
    let cost = response.header("x-gateway-cost-usd").expect("cost header");
    assert_eq!(cost.parse::<f64>().ok(), Some(0.0));

    let bad = gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[("x-api-key", "gw_not_a_key")],
        body.to_string().as_bytes(),
    );
    assert_openai_error(
        &bad,
        401,
        "authentication_error",
        None,
        Some("invalid_api_key"),
        "key",
    );
}
