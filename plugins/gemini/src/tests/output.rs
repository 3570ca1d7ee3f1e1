//! The host's output limit.

use super::*;

#[test]
fn the_output_limit_is_written_over_geminis_own_names() {
    let mut req = request(Prompt::Text("Hi".into()));
    req.params = r#"{"max_tokens": 100, "generationConfig": {"max_output_tokens": 50000,
        "candidateCount": 8, "thinkingConfig": {"thinkingBudget": -1}}}"#
        .into();
    req.output = gateway_plugin_sdk::OutputLimit {
        max_tokens: Some(100),
        choices: 1,
    };
    let sent = body(&req);
    let config = &sent["generationConfig"];
    assert_eq!(config["maxOutputTokens"], json!(100));
    for gone in ["max_output_tokens", "candidateCount", "candidate_count"] {
        assert!(config.get(gone).is_none(), "{gone}: {sent}");
    }
    // Dynamic thinking is brought down to the limit too.
    assert_eq!(config["thinkingConfig"]["thinkingBudget"], json!(100));
    let http = completion_call(&req, false).expect("request builds");
    gateway_plugin_sdk::check_output(&req.output, &crate::convert::OUTPUT, http.body_bytes())
        .expect("what the plugin builds passes");
    req.output.choices = 2;
    assert_eq!(body(&req)["generationConfig"]["candidateCount"], json!(2));
}
