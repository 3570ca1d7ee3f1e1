//! The guard's checks run natively, without a gateway: `cargo test`.
use gateway_plugin_sdk::guard::RequestVerdict;
use gateway_plugin_sdk::testing::Check;
use serde_json::json;

use super::Plugin;

#[test]
fn denies_a_blocked_word_in_any_case() {
    let check = Check::text("example-model", "Tell me about PROJECT-X").settings(&json!({"words": ["project-x"]}));
    assert_eq!(
        check.check_request::<Plugin>(),
        RequestVerdict::deny("the request mentions \"project-x\"")
    );
}

#[test]
fn allows_the_rest() {
    let check = Check::text("example-model", "Tell me about the weather").settings(&json!({"words": ["project-x"]}));
    assert_eq!(check.check_request::<Plugin>(), RequestVerdict::Allow);
}

#[test]
fn checks_embedding_inputs_too() {
    let check = Check::embedding("example-model", &["fine", "project-x notes"]).settings(&json!({"words": ["project-x"]}));
    assert!(matches!(check.check_request::<Plugin>(), RequestVerdict::Deny(_)));
}
