//! The host's output limit.

use super::*;

fn limited(max_tokens: u32) -> gateway_plugin_sdk::OutputLimit {
    gateway_plugin_sdk::OutputLimit {
        max_tokens: Some(max_tokens),
        choices: 1,
    }
}

#[test]
fn the_output_limit_is_max_tokens_whatever_the_params_say() {
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"max_tokens_to_sample": 100000}"#.into();
    req.output = limited(4096);
    let sent = body(&req, false);
    assert_eq!(sent["max_tokens"], json!(4096));
    assert!(sent.get("max_tokens_to_sample").is_none(), "{sent}");
    // Without a limit, the legacy name is read as before.
    req.output = gateway_plugin_sdk::OutputLimit::NONE;
    assert_eq!(body(&req, false)["max_tokens"], json!(100000));
}

#[test]
fn a_thinking_budget_is_fitted_inside_the_output_limit() {
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"max_tokens": 3000}"#.into();
    req.reasoning = Some(ReasoningConfig {
        effort: Some(ReasoningEffort::High),
        budget_tokens: None,
    });
    req.output = limited(3000);
    let sent = body(&req, false);
    assert_eq!(sent["max_tokens"], json!(3000));
    assert_eq!(sent["thinking"]["budget_tokens"], json!(1500));
    // A budget below the limit is kept.
    req.reasoning = Some(ReasoningConfig {
        effort: None,
        budget_tokens: Some(2000),
    });
    assert_eq!(body(&req, false)["thinking"]["budget_tokens"], json!(2000));
    // No room for Claude's least budget: refused, saying so.
    req.output = limited(1024);
    let message = invalid_request(upstream_request(&req, false));
    assert!(message.contains("max_tokens = 1024"), "{message}");
}
