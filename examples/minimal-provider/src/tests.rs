//! The provider run natively against a scripted upstream (`gateway_plugin_sdk::testing`): what
//! it sends, and what it makes of whole and streamed answers.

use gateway_plugin_sdk::testing::{Call, json, sse};
use gateway_plugin_sdk::{FinishReason, ProviderError};

use super::Minimal;

const BASE: &str = "https://api.example.com/v1";

#[test]
fn sends_the_chat_and_reads_the_answer() {
    let run = Call::text("gpt-test", "Say hi")
        .base_url(BASE)
        .api_key("sk-test")
        .params(&serde_json::json!({"temperature": 0.5, "model": "ignored"}))
        .output(Some(20), 1)
        .complete::<Minimal>(|_| {
            json(
                200,
                &serde_json::json!({
                    "choices": [{"message": {"content": "Hi!"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                }),
            )
        });
    let completion = run.result.expect("an answer");
    assert_eq!(completion.choices[0].text, "Hi!");
    assert_eq!(
        completion.choices[0].finish_reason,
        Some(FinishReason::Stop)
    );
    assert_eq!(
        completion
            .usage
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((3, 2))
    );
    let [sent] = run.sent.as_slice() else {
        panic!("one request: {:?}", run.sent)
    };
    assert_eq!(sent.url(), format!("{BASE}/chat/completions"));
    assert_eq!(sent.header_value("authorization"), Some("Bearer sk-test"));
    let body: serde_json::Value = serde_json::from_slice(sent.body_bytes()).expect("JSON");
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["max_tokens"], 20);
    assert_eq!(body["messages"][0]["content"], "Say hi");
}

#[test]
fn streams_text_as_it_arrives() {
    let run = Call::text("gpt-test", "Say hi")
        .base_url(BASE)
        .stream::<Minimal>(|_| {
            sse([
                r#"{"choices":[{"delta":{"content":"Hel"}}]}"#,
                r#"{"choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ])
        });
    assert_eq!(run.streamed_text(0), "Hello");
    assert_eq!(run.chunks.len(), 2);
    assert_eq!(run.result.expect("an answer").choices[0].text, "Hello");
}

#[test]
fn an_error_answer_is_the_upstreams() {
    let run = Call::text("gpt-test", "Say hi")
        .base_url(BASE)
        .complete::<Minimal>(|_| {
            json(429, &serde_json::json!({"error": {"message": "slow down"}}))
        });
    match run.result {
        Err(ProviderError::Upstream(error)) => {
            assert_eq!(error.status, 429);
            assert!(error.message.contains("slow down"), "{}", error.message);
        }
        other => panic!("{other:?}"),
    }
}
