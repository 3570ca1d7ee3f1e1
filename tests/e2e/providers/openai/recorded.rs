//! The recorded traffic of OpenAI, Azure, Groq and llama.cpp replayed through the openai plugin:
//! simple, streamed, tool and multi-step tool cases, in the Commonbase and OpenAI shapes; what the
//! plugin sent upstream checked against the recorded request.

use super::*;

fn check_simple(name: &str) {
    let recording = Recording::load(name);
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = recorded_gateway(&recording, &upstream);
    let interaction = recording.interaction(0);
    let expected = interaction.answer();

    let request = with(
        request_from(&gw, interaction, Style::Commonbase),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["projectId"], json!(gw.project_id));
    assert_chat_choice(&body, &expected.text, expected.finish_reason.as_deref());
    check_usage(&body, expected.usage, PRICE);
    check_upstream_request(&upstream.single_request(), interaction, Style::Commonbase);

    success_record(&gw, &body, ROUTE, "openai");
}

fn check_streaming(name: &str) {
    let recording = Recording::load(name);
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = recorded_gateway(&recording, &upstream);
    let interaction = recording.interaction(0);
    assert!(interaction.is_sse(), "{name} is not a streaming recording");
    let expected = interaction.answer();

    let request = with(
        request_from(&gw, interaction, Style::Commonbase),
        "showUsage",
        json!(true),
    );
    let response = post_stream(&gw, &request);
    let (partial, last) = split_stream(&response);
    assert!(!partial.is_empty(), "no partial frames: {}", response.raw);
    for frame in &partial {
        assert_eq!(frame["type"], json!("chat"), "{frame}");
        assert_eq!(frame["projectId"], json!(gw.project_id), "{frame}");
    }
    assert_eq!(streamed_text(&partial, 0), expected.text);
    assert_stream_finished(&last, expected.finish_reason.as_deref());
    check_usage(&last, expected.usage, PRICE);
    check_upstream_request(&upstream.single_request(), interaction, Style::Commonbase);

    let record = streamed_record(&gw, &last);
    if let Some((prompt, completion, _)) = expected.usage {
        assert_eq!(record["usage"]["prompt_tokens"], json!(prompt), "{record}");
        assert_eq!(
            record["usage"]["completion_tokens"],
            json!(completion),
            "{record}"
        );
    }
}

/// Step one asks for a function call; step two (when recorded) sends the
/// result back and gets the final answer.
fn check_tool(name: &str, style: Style) {
    let recording = Recording::load(name);
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = recorded_gateway(&recording, &upstream);
    let first = recording.interaction(0);
    let expected = first.answer();
    assert!(!expected.tool_calls.is_empty(), "{name} has no tool call");
    let streamed = first.is_sse();

    let request = request_from(&gw, first, style);
    let choice = if streamed {
        let response = post_stream(&gw, &request);
        let (partial, last) = split_stream(&response);
        assert_eq!(streamed_text(&partial, 0), expected.text);
        last["choices"][0].clone()
    } else {
        let body = assert_ok(&post(&gw, "/completions", &request));
        assert_eq!(body["choices"][0]["text"], json!(expected.text), "{body}");
        body["choices"][0].clone()
    };
    let expected_calls: Vec<(String, String)> = expected
        .tool_calls
        .iter()
        .map(|(_, name, arguments)| (name.clone(), arguments.clone()))
        .collect();
    match style {
        Style::OpenAi => assert_eq!(tool_calls_of(&choice), expected_calls, "{choice}"),
        Style::Commonbase => {
            // Commonbase clients read `function_call`: the first call.
            assert_eq!(
                choice["function_call"]["name"],
                json!(expected_calls[0].0),
                "{choice}"
            );
            assert_eq!(
                choice["function_call"]["arguments"],
                json!(expected_calls[0].1),
                "{choice}"
            );
        }
    }
    // Every call's arguments are the JSON the model produced.
    for (_, arguments) in &expected_calls {
        serde_json::from_str::<Value>(arguments).expect("recorded arguments are JSON");
    }
    let reason = choice["finish_reason"].as_str().unwrap_or_default();
    assert!(
        reason == "tool_calls" || reason == "function_call",
        "finish_reason {reason:?}: {choice}"
    );
    let requests = upstream.requests();
    check_upstream_request(&requests[0], first, style);

    if recording.interactions.len() < 2 {
        return;
    }
    let second = recording.interaction(1);
    let final_answer = second.answer();
    let request = request_from(&gw, second, style);
    if streamed {
        let response = post_stream(&gw, &request);
        let (partial, last) = split_stream(&response);
        assert_eq!(streamed_text(&partial, 0), final_answer.text);
        assert_eq!(
            last["choices"][0]["finish_reason"],
            json!(final_answer.finish_reason)
        );
    } else {
        let body = assert_ok(&post(&gw, "/completions", &request));
        assert_eq!(
            body["choices"][0]["text"],
            json!(final_answer.text),
            "{body}"
        );
        assert_eq!(
            body["choices"][0]["finish_reason"],
            json!(final_answer.finish_reason)
        );
    }
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    check_upstream_request(&requests[1], second, style);
    check_function_result_sent(&requests[1], second);
}

recorded_tests! {
    openai_simple => check_simple("OpenAI__openai-gpt-4o-mini__simple");
    openai_streaming => check_streaming("OpenAI__openai-gpt-4o-mini__simple_streaming");
    openai_tool => check_tool("OpenAI__openai-gpt-4o-mini__tool", Style::Commonbase);
    openai_tool_openai_shape => check_tool("OpenAI__openai-gpt-4o-mini__tool", Style::OpenAi);
    openai_tool_streaming => check_tool("OpenAI__openai-gpt-4o-mini__tool_streaming", Style::Commonbase);
    openai_multi_tool => check_tool("OpenAI__openai-gpt-4o-mini__multi_tool", Style::OpenAi);
    openai_multi_tool_streaming => check_tool("OpenAI__openai-gpt-4o-mini__multi_tool_streaming", Style::OpenAi);

    groq_simple => check_simple("OpenAICompatible__groq-kimi-k2__simple");
    groq_streaming => check_streaming("OpenAICompatible__groq-kimi-k2__simple_streaming");
    groq_tool => check_tool("OpenAICompatible__groq-kimi-k2__tool", Style::Commonbase);
    groq_tool_streaming => check_tool("OpenAICompatible__groq-kimi-k2__tool_streaming", Style::Commonbase);
    groq_multi_tool => check_tool("OpenAICompatible__groq-kimi-k2__multi_tool", Style::OpenAi);
    groq_multi_tool_streaming => check_tool("OpenAICompatible__groq-kimi-k2__multi_tool_streaming", Style::OpenAi);

    llama_cpp_simple => check_simple("OpenAICompatible__llama-cpp-gpt-oss__simple");
    llama_cpp_streaming => check_streaming("OpenAICompatible__llama-cpp-gpt-oss__simple_streaming");
    llama_cpp_tool => check_tool("OpenAICompatible__llama-cpp-gpt-oss__tool", Style::Commonbase);
    llama_cpp_tool_streaming => check_tool("OpenAICompatible__llama-cpp-gpt-oss__tool_streaming", Style::Commonbase);

    azure_simple => check_simple("Azure__azure-gpt-5-mini__simple");
    azure_streaming => check_streaming("Azure__azure-gpt-5-mini__simple_streaming");
    azure_tool => check_tool("Azure__azure-gpt-5-mini__tool", Style::Commonbase);
    azure_tool_streaming => check_tool("Azure__azure-gpt-5-mini__tool_streaming", Style::Commonbase);
}

/// The recorded tool-call argument deltas, reassembled by the gateway, are
/// exactly the JSON text the model produced, and partial frames carry no
/// half-built calls.
#[test]
fn streamed_tool_call_arguments_are_reassembled_from_deltas() {
    let name = "OpenAI__openai-gpt-4o-mini__tool_streaming";
    let recording = Recording::load(name);
    let first = recording.interaction(0);
    // The recording really splits the arguments over several events.
    let argument_events = first
        .sse_payloads()
        .iter()
        .filter(|p| p["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].is_string())
        .count();
    assert!(argument_events > 3, "{argument_events}");
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = recorded_gateway(&recording, &upstream);
    let response = post_stream(&gw, &request_from(&gw, first, Style::OpenAi));
    let (partial, last) = split_stream(&response);
    for frame in &partial {
        assert!(
            frame["choices"][0]["function_call"].is_null()
                && frame["choices"][0]["tool_calls"]
                    .as_array()
                    .is_none_or(|c| c.is_empty()),
            "partial frame with a call: {frame}"
        );
    }
    let calls = tool_calls_of(&last["choices"][0]);
    assert_eq!(calls.len(), 1, "{last}");
    assert_eq!(calls[0].0, "weather");
    assert_eq!(calls[0].1, "{\"location\":\"Florence,Italy\"}");
    assert_eq!(
        last["choices"][0]["function_call"]["arguments"],
        json!("{\"location\":\"Florence,Italy\"}"),
        "Commonbase clients read function_call: {last}"
    );
}
