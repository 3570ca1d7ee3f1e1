//! The plugin run natively against a scripted upstream, without a gateway: `cargo test`.
use gateway_plugin_sdk::testing::{Call, json, ndjson};
use gateway_plugin_sdk::{FinishReason, ProviderError};
use serde_json::json;

use super::Plugin;

const BASE: &str = "https://api.example.com/v1";

#[test]
fn sends_the_chat_and_reads_the_answer() {
    let run = Call::text("example-model", "Say hi")
        .base_url(BASE)
        .api_key("key-1")
        .output(Some(20), 1)
        .complete::<Plugin>(|_| {
            let usage = json!({"input_tokens": 3, "output_tokens": 2});
            json(200, &json!({"text": "Hi!", "finish_reason": "stop", "usage": usage}))
        });
    let completion = run.result.expect("an answer");
    assert_eq!(completion.choices[0].text, "Hi!");
    assert_eq!(completion.choices[0].finish_reason, Some(FinishReason::Stop));
    let usage = completion.usage.expect("usage");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (3, 2));
    let [sent] = run.sent.as_slice() else {
        panic!("one request: {:?}", run.sent)
    };
    assert_eq!(sent.url(), format!("{BASE}/generate"));
    assert_eq!(sent.header_value("authorization"), Some("Bearer key-1"));
    let body: serde_json::Value = serde_json::from_slice(sent.body_bytes()).expect("JSON");
    let messages = json!([{"role": "user", "content": "Say hi"}]);
    assert_eq!(body, json!({"model": "example-model", "messages": messages, "stream": false, "max_tokens": 20}));
}

#[test]
fn streams_the_lines_as_they_arrive() {
    let run = Call::text("example-model", "Say hi")
        .base_url(BASE)
        .stream::<Plugin>(|_| {
            let usage = json!({"input_tokens": 3, "output_tokens": 2});
            ndjson([
                json!({"text": "Hel"}),
                json!({"text": "lo"}),
                json!({"finish_reason": "stop", "usage": usage}),
            ])
        });
    assert_eq!(run.streamed_text(0), "Hello");
    let completion = run.result.expect("an answer");
    assert_eq!(completion.usage.map(|u| u.completion_tokens), Some(2));
    let body: serde_json::Value = serde_json::from_slice(run.sent[0].body_bytes()).expect("JSON");
    assert_eq!(body["stream"], true);
}

#[test]
fn an_error_keeps_the_upstreams_status() {
    let run = Call::text("example-model", "Say hi")
        .base_url(BASE)
        .complete::<Plugin>(|_| json(429, &json!({"error": "slow down"})));
    match run.result {
        Err(ProviderError::Upstream(error)) => assert_eq!(error.status, 429),
        other => panic!("{other:?}"),
    }
}
