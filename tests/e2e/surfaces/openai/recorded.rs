//! The recorded cases (simple, tool, multi-step tools; whole and streamed) of each provider
//! through `/v1/chat/completions`: the answer, its chunks, usage, cost and record checked against
//! what was recorded.

use super::*;

fn check_simple(provider: Provider, case: &str) {
    let recording = provider.recording(case);
    let upstream = Upstream::replay(provider, &recording);
    let gw = gateway_for(provider, &upstream);
    let interaction = recording.interaction(0);
    let expected = expected(provider, interaction);
    let body = request_from(provider, interaction);
    if interaction.is_sse() {
        let stream = post_stream(&gw, "/v1/chat/completions", &body);
        let out = check_stream(&gw, provider, &stream, &expected);
        assert!(out.calls.is_empty());
    } else {
        let response = post(&gw, "/v1/chat/completions", &body);
        check_completion(&gw, provider, &response, &expected);
    }
    assert_eq!(upstream.requests().len(), 1);
}

/// Step one asks for tool calls; step two sends the results back and gets the final answer.
fn check_tool(provider: Provider, case: &str) {
    let recording = provider.recording(case);
    let upstream = Upstream::replay(provider, &recording);
    let gw = gateway_for(provider, &upstream);
    for (step, interaction) in recording.interactions.iter().enumerate().take(2) {
        let expected = expected(provider, interaction);
        if step == 0 {
            assert!(!expected.calls.is_empty(), "{case} has no tool call");
        }
        let body = request_from(provider, interaction);
        if interaction.is_sse() {
            let stream = post_stream(&gw, "/v1/chat/completions", &body);
            let out = check_stream(&gw, provider, &stream, &expected);
            if step == 0 && provider != Gemini {
                // The arguments came in pieces as the model wrote them, not whole at the end.
                assert!(
                    out.argument_pieces > expected.calls.len(),
                    "{} pieces: {}",
                    out.argument_pieces,
                    stream.raw
                );
            }
        } else {
            let response = post(&gw, "/v1/chat/completions", &body);
            check_completion(&gw, provider, &response, &expected);
        }
    }
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
}

recorded_tests! {
    openai_simple => check_simple(OpenAi, "simple");
    openai_simple_streaming => check_simple(OpenAi, "simple_streaming");
    openai_tool => check_tool(OpenAi, "tool");
    openai_tool_streaming => check_tool(OpenAi, "tool_streaming");
    openai_multi_tool => check_tool(OpenAi, "multi_tool");
    openai_multi_tool_streaming => check_tool(OpenAi, "multi_tool_streaming");
    anthropic_simple => check_simple(Anthropic, "simple");
    anthropic_simple_streaming => check_simple(Anthropic, "simple_streaming");
    anthropic_tool => check_tool(Anthropic, "tool");
    anthropic_tool_streaming => check_tool(Anthropic, "tool_streaming");
    anthropic_multi_tool => check_tool(Anthropic, "multi_tool");
    anthropic_multi_tool_streaming => check_tool(Anthropic, "multi_tool_streaming");
    gemini_simple => check_simple(Gemini, "simple");
    gemini_simple_streaming => check_simple(Gemini, "simple_streaming");
    gemini_tool => check_tool(Gemini, "tool");
    gemini_tool_streaming => check_tool(Gemini, "tool_streaming");
    gemini_multi_tool => check_tool(Gemini, "multi_tool");
    gemini_multi_tool_streaming => check_tool(Gemini, "multi_tool_streaming");
}
