//! Usage and cost: cache reads and writes counted as prompt tokens, recorded apart and priced,
//! whole and in a stream's final frame.

use super::*;

fn cached_usage() -> Value {
    json!({"input_tokens": 100, "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 1000, "output_tokens": 50})
}

/// The gateway's usage for [`cached_usage`]: cache reads and writes are prompt tokens.
const CACHED_USAGE: (u64, u64, u64) = (1300, 50, 1350);

/// The cost the gateway reports for [`cached_usage`] at the list price `(input, output)` of a
/// model priced by the shipped table: 100 plain input tokens, 1000 cache reads at 0.1x input,
/// 200 five-minute cache writes at 1.25x input, 50 output tokens.
fn cached_cost((input, output): (f64, f64)) -> f64 {
    (100.0 * input + 1000.0 * input * 0.1 + 200.0 * input * 1.25 + 50.0 * output) / 1e6
}

#[test]
fn cache_tokens_are_prompt_tokens_recorded_apart_and_priced() {
    let answer = json!({
        "id": "msg_cached", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "From the cache."}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": cached_usage()
    });
    let upstream = AnthropicUpstream::script(vec![Reply::json(200, &answer)]);
    let gw = gateway_for(&upstream);
    let request = with(
        chat_request(
            &gw.project_id,
            ROUTE,
            "claude-sonnet-4-5-20250929",
            json!([{"role": "user", "content": "again"}]),
        ),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["choices"][0]["text"], json!("From the cache."));
    // claude-sonnet-4-5 list prices.
    assert_usage(&body, CACHED_USAGE, cached_cost((3.0, 15.0)));
    let id = body["invocationId"].as_str().expect("id");
    let record = gw.get_invocation(id).json();
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": 1300, "completion_tokens": 50, "total_tokens": 1350,
            "cached_prompt_tokens": 1000, "cache_creation_tokens": 200}),
        "{record}"
    );
    assert_eq!(record["usageCost"], body["usage_cost"], "{record}");
}

#[test]
fn streamed_cache_usage_reaches_the_final_frame() {
    let upstream = AnthropicUpstream::script(vec![Reply::anthropic_events(&[
        message_start(
            json!({"input_tokens": 100, "cache_creation_input_tokens": 200,
            "cache_read_input_tokens": 1000, "output_tokens": 1}),
        ),
        text_start(),
        ("ping", json!({"type": "ping"})),
        text_delta("Cached "),
        text_delta("answer."),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 50}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])]);
    let gw = gateway_for(&upstream);
    let request = with(
        with(
            chat_request(
                &gw.project_id,
                ROUTE,
                "claude-haiku-4-5-20251001",
                json!([{"role": "user", "content": "again"}]),
            ),
            "stream",
            json!(true),
        ),
        "showUsage",
        json!(true),
    );
    let response = post_stream(&gw, &request);
    let (partial, last) = split_stream(&response);
    assert_eq!(streamed_text(&partial, 0), "Cached answer.");
    assert_eq!(last["choices"][0]["finish_reason"], json!("length"));
    // claude-haiku-4-5 list prices.
    assert_usage(&last, CACHED_USAGE, cached_cost((1.0, 5.0)));
    let id = last["invocationId"].as_str().expect("id");
    let record = gw.wait_for_record(id, |r| r["status"] == json!("success"));
    assert_eq!(record["usage"]["cached_prompt_tokens"], json!(1000));
    assert_eq!(record["usage"]["cache_creation_tokens"], json!(200));
}
