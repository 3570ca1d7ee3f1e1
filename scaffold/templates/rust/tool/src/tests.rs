//! The tool run natively against a scripted upstream, without a gateway: `cargo test`.
use gateway_plugin_sdk::testing::{ToolCall, json};
use serde_json::json;

use super::Plugin;

fn server() -> ToolCall {
    ToolCall::server("items")
        .settings(&json!({"base_url": "https://api.example.com"}))
        .allow_hosts(&["api.example.com"])
}

#[test]
fn looks_up_an_item() {
    let item = json!({"id": "42", "name": "The answer"});
    let answer = item.clone();
    let run = server().call_tool::<Plugin>("lookup", &json!({"id": "42"}), move |_| json(200, &answer));
    let result = run.result.expect("a result");
    assert!(!result.is_error);
    let structured: serde_json::Value =
        serde_json::from_str(result.structured_content.as_deref().expect("structured")).expect("JSON");
    assert_eq!(structured, item);
    assert_eq!(run.sent[0].url(), "https://api.example.com/items/42");
}

#[test]
fn a_missing_item_is_a_result_the_model_reads() {
    let run = server().call_tool::<Plugin>("lookup", &json!({"id": "nope"}), |_| json(404, &json!({})));
    assert!(run.result.expect("a result").is_error);
}

#[test]
fn a_bad_id_sends_nothing() {
    let run = server().call_tool::<Plugin>("lookup", &json!({"id": "../etc"}), |_| unreachable!());
    assert!(run.result.expect("a result").is_error);
    assert!(run.sent.is_empty());
}
