//! Routing config refused at start: fallbacks to unknown routes or in a cycle, too many retries,
//! `base_url` with `targets`, bad targets, `eject_secs` alone.

use super::*;

/// An echo route `id` with `extra` lines.
fn echo_route(id: &str, extra: &str) -> String {
    format!("[providers.{id}]\nplugin = \"echo\"\ndefault_model = \"echo\"\n{extra}\n")
}

#[test]
fn a_fallback_to_an_unknown_route_is_refused_at_start() {
    let stderr = refused_start(&echo_route("a", "fallbacks = [\"nowhere\"]"));
    assert!(
        stderr.contains("providers.a.fallbacks") && stderr.contains("nowhere"),
        "the key and the unknown route are not named:\n{stderr}"
    );
}

#[test]
fn a_fallback_cycle_is_refused_at_start() {
    let stderr = refused_start(&format!(
        "{}{}{}",
        echo_route("a", "fallbacks = [\"b\"]"),
        echo_route("b", "fallbacks = [\"c\"]"),
        echo_route("c", "fallbacks = [\"a\"]"),
    ));
    assert!(
        stderr.contains("fallbacks") && stderr.contains("cycle"),
        "the cycle is not named:\n{stderr}"
    );
}

#[test]
fn a_route_falling_back_to_itself_is_refused_at_start() {
    let stderr = refused_start(&echo_route("a", "fallbacks = [\"a\"]"));
    assert!(
        stderr.contains("providers.a.fallbacks"),
        "the key is not named:\n{stderr}"
    );
}

#[test]
fn more_than_ten_retries_are_refused_at_start() {
    let stderr = refused_start(&echo_route("a", "retries = 11"));
    assert!(
        stderr.contains("providers.a.retries"),
        "the key is not named:\n{stderr}"
    );
}

#[test]
fn fallbacks_through_a_chain_without_a_cycle_start() {
    // The control of the refusals above: the same shape without the closing edge serves.
    let gw = Gateway::builder()
        .route(fallbacks(Route::echo("a"), &["b"]))
        .route(fallbacks(Route::echo("b"), &["c"]))
        .route(Route::echo("c"))
        .start();
    let response = gw.post(
        "/completions",
        &chat_request(
            &gw.project_id,
            "a",
            "echo",
            json!([{"role": "user", "content": "hi"}]),
        ),
    );
    assert_ok(&response);
    assert_eq!(response.header("x-gateway-route"), Some("a"));
}

#[test]
fn a_route_with_both_base_url_and_targets_is_refused_at_start() {
    let stderr = refused_start(&echo_route(
        "a",
        "base_url = \"http://127.0.0.1:9/v1\"\n[[providers.a.targets]]\nbase_url = \"http://127.0.0.1:10/v1\"",
    ));
    assert!(
        stderr.contains("providers.a.targets") && stderr.contains("not both"),
        "the key and the reason are not named:\n{stderr}"
    );
}

#[test]
fn a_target_of_weight_zero_or_with_an_unknown_key_is_refused_at_start() {
    for (extra, named) in [("weight = 0", "weight"), ("wieght = 2", "wieght")] {
        let stderr = refused_start(&echo_route(
            "a",
            &format!("[[providers.a.targets]]\nbase_url = \"http://127.0.0.1:10/v1\"\n{extra}"),
        ));
        assert!(
            stderr.contains("providers.a.targets") && stderr.contains(named),
            "{extra}: the key is not named:\n{stderr}"
        );
    }
}

#[test]
fn eject_secs_without_eject_after_failures_is_refused_at_start() {
    let stderr = refused_start(&echo_route("a", "eject_secs = 5"));
    assert!(
        stderr.contains("providers.a.eject_secs") && stderr.contains("eject_after_failures"),
        "the key is not named:\n{stderr}"
    );
}
