//! The anthropic plugin through the gateway, against a fake Messages API that replays real
//! recorded Claude traffic (simple, streaming, tool and multi-step tool cases), fails on
//! demand in Anthropic's error shape, and sends broken or cut streams.

use std::collections::HashMap;
use std::time::Duration;

use gateway_test_support::{
    AnthropicUpstream, Gateway, Interaction, ReceivedRequest, Recording, Reply, Response, Route,
    SseResponse, assert_chat_choice, assert_error, assert_ok, assert_provider_error,
    assert_stream_finished, assert_usage, chat_params, chat_request, chat_request_with_params,
    embeddings_request, list_cost, open_stream_with_provider_key, post_stream_with_provider_key,
    post_with_provider_key, recorded_tests, split_stream, streamed_record, streamed_text,
    success_record, text_request, unique, with, with_param,
};
use serde_json::{Value, json};

mod errors;
mod recorded;
mod requests;
mod usage;

/// The caller's provider key in most tests.
const PROVIDER_KEY: &str = "sk-ant-test-caller-0123456789";
const ROUTE: &str = "claude";
const MODEL: &str = "claude-sonnet-4-20250514";
/// The plugin's list price of claude-sonnet-4 (USD per million input and output tokens), which
/// the gateway applies to its dated snapshots.
const SONNET_PRICE: (f64, f64) = (3.0, 15.0);

fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    post_with_provider_key(gw, path, PROVIDER_KEY, body)
}

fn post_stream(gw: &Gateway, body: &Value) -> SseResponse {
    post_stream_with_provider_key(gw, PROVIDER_KEY, body)
}

/// A gateway with route `claude` (anthropic plugin, caller's key) at `upstream`.
fn gateway_for(upstream: &AnthropicUpstream) -> Gateway {
    Gateway::builder()
        .route(Route::new(ROUTE, "anthropic").base_url(&upstream.base_url("/v1")))
        .start()
}

fn hi_request(gw: &Gateway) -> Value {
    chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([{"role": "user", "content": "Say hi in Portuguese"}]),
    )
}

// ---------------------------------------------------------------- stream events

fn message_start(usage: Value) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-haiku-4-5-20251001", "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage}}),
    )
}

fn text_start() -> (&'static str, Value) {
    (
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    )
}

fn text_delta(text: &str) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    )
}
