//! The host's output limit.

use super::*;

fn limited(max_tokens: u32, choices: u32) -> gateway_plugin_sdk::OutputLimit {
    gateway_plugin_sdk::OutputLimit {
        max_tokens: Some(max_tokens),
        choices,
    }
}

#[test]
fn the_output_limit_is_written_over_every_name_of_the_callers() {
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"max_tokens": 90000, "max_completion_tokens": 90000, "n": 9}"#.into();
    req.output = limited(50, 2);
    let sent = body(&req, false);
    assert_eq!(sent["max_completion_tokens"], json!(50));
    assert!(sent.get("max_tokens").is_none(), "{sent}");
    assert_eq!(sent["n"], json!(2));
    // The name the caller used, for servers that know only `max_tokens`.
    req.params = r#"{"max_tokens": 90000}"#.into();
    req.output = limited(50, 1);
    let sent = body(&req, false);
    assert_eq!(sent["max_tokens"], json!(50));
    assert!(sent.get("n").is_none() && sent.get("max_completion_tokens").is_none());
    // The caller's own `n` stays, at the limit's.
    req.params = r#"{"max_tokens": 90000, "n": 1}"#.into();
    assert_eq!(body(&req, false)["n"], json!(1));
    req.params = r#"{"max_tokens": 90000}"#.into();
    // A reasoning model refuses `max_tokens`.
    req.model = "o3-mini".into();
    assert_eq!(body(&req, false)["max_completion_tokens"], json!(50));
    // No limit: the caller's params as they were.
    req.output = gateway_plugin_sdk::OutputLimit::NONE;
    req.model = "gpt-4o-mini".into();
    assert_eq!(body(&req, false)["max_tokens"], json!(90000));
}

#[test]
fn best_of_above_the_limits_choices_is_refused() {
    let mut req = request(Prompt::Text("hi".into()));
    req.route = route(r#"{"legacy_completions": true}"#);
    req.params = r#"{"best_of": 20}"#.into();
    req.output = limited(50, 1);
    let message = invalid_request(completion(&req, false));
    assert!(message.contains("best_of = 20"), "{message}");
    req.params = r#"{"best_of": 1}"#.into();
    assert_eq!(body(&req, false)["max_tokens"], json!(50));
}

#[test]
fn the_sdk_refuses_a_body_over_the_limit() {
    use gateway_plugin_sdk::HttpProvider;
    let over = br#"{"model": "m", "max_tokens": 51}"#;
    let refused = gateway_plugin_sdk::check_output(&limited(50, 1), &OpenAi::OUTPUT, over);
    assert!(
        matches!(refused, Err(ProviderError::Failed(_))),
        "{refused:?}"
    );
    let mut req = request(Prompt::Text("hi".into()));
    req.params = r#"{"max_tokens": 90000, "n": 3}"#.into();
    req.output = limited(50, 3);
    let http = completion(&req, false).expect("request builds");
    gateway_plugin_sdk::check_output(&req.output, &OpenAi::OUTPUT, http.body_bytes())
        .expect("what the plugin builds passes");
}
