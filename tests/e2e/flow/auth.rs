//! Who may call: a request's key (bare or bearer, checked before its body is parsed), revoked
//! keys, a key of another project (403), the project id checked before the route; each refusal
//! recorded.

use gateway_test_support::{Gateway, assert_error, assert_ok, embeddings_request, text_request};
use serde_json::json;

use crate::common::{check_error_record, hello};

#[test]
fn missing_key_is_401_and_recorded() {
    let gw = Gateway::demo();
    let response = gw.post_as("/completions", None, &hello(&gw));
    let id = assert_error(&response, 401, "");
    check_error_record(&gw.record(&id), &id, 401);
    let line = gw.listed_line(&id);
    assert!(line.split_whitespace().any(|c| c == "401"), "{line}");
}

#[test]
fn unknown_key_is_401() {
    let gw = Gateway::demo();
    let response = gw.post_as("/completions", Some("not-a-real-key-123456"), &hello(&gw));
    let id = assert_error(&response, 401, "");
    check_error_record(&gw.record(&id), &id, 401);
}

#[test]
fn unknown_bearer_key_is_401() {
    let gw = Gateway::demo();
    let response = gw.post_as(
        "/completions",
        Some("Bearer not-a-real-key-123456"),
        &hello(&gw),
    );
    assert_error(&response, 401, "");
}

#[test]
fn bare_and_bearer_keys_both_work() {
    let gw = Gateway::demo();
    assert_ok(&gw.post_as("/completions", Some(&gw.key), &hello(&gw)));
    let bearer = format!("Bearer {}", gw.key);
    assert_ok(&gw.post_as("/completions", Some(&bearer), &hello(&gw)));
}

#[test]
fn key_is_checked_before_the_body_is_parsed() {
    let gw = Gateway::demo();
    let response = gw.request("POST", "/completions", None, &[], b"{not json");
    assert_error(&response, 401, "");
}

/// The first answer to `key` that is not a success, within the second a revocation may take to
/// reach a serving process (at once with SQLite; through a notification with PostgreSQL).
fn post_after_revocation(gw: &Gateway, key: &str) -> gateway_test_support::Response {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let response = gw.post_as("/completions", Some(key), &hello(gw));
        if response.status != 200 || std::time::Instant::now() > deadline {
            return response;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn revoked_key_is_401() {
    let gw = Gateway::demo();
    assert_ok(&gw.post("/completions", &hello(&gw)));
    let prefix: String = gw.key.chars().take(20).collect();
    let out = gw.cli(&["key", "revoke", &prefix]).checked("key revoke");
    assert_eq!(out.last_line(), "revoked 1 key(s)");
    let response = post_after_revocation(&gw, &gw.key);
    let id = assert_error(&response, 401, "");
    check_error_record(&gw.record(&id), &id, 401);
}

#[test]
fn revoking_one_key_keeps_the_projects_other_keys() {
    let gw = Gateway::demo();
    let second = gw
        .cli(&["key", "create", &gw.project_id])
        .checked("key create")
        .last_line();
    assert_ne!(second, gw.key);
    let prefix: String = gw.key.chars().take(20).collect();
    gw.cli(&["key", "revoke", &prefix]).checked("key revoke");
    assert_error(&post_after_revocation(&gw, &gw.key), 401, "");
    assert_ok(&gw.post_as("/completions", Some(&second), &hello(&gw)));
}

#[test]
fn revoke_without_a_match_exits_1() {
    let gw = Gateway::demo();
    let out = gw.cli(&["key", "revoke", "zzzzzzzzzzzzzzzzzzzz"]);
    assert_eq!(out.status.code(), Some(1), "{} {}", out.stdout, out.stderr);
    assert_ok(&gw.post("/completions", &hello(&gw)));
}

#[test]
fn revoke_with_a_short_prefix_is_refused() {
    let gw = Gateway::demo();
    let prefix: String = gw.key.chars().take(4).collect();
    let out = gw.cli(&["key", "revoke", &prefix]);
    assert!(
        !out.status.success(),
        "a 4-character prefix must be refused: {}",
        out.stdout
    );
    assert_ok(&gw.post("/completions", &hello(&gw)));
}

#[test]
fn key_of_another_project_is_403_and_recorded() {
    let gw = Gateway::demo();
    let other = gw.create_project("other");
    let response = gw.post_as("/completions", Some(&other.key), &hello(&gw));
    let id = assert_error(&response, 403, "");
    check_error_record(&gw.record(&id), &id, 403);
    // The other project's key works for the other project.
    let request = text_request(&other.id, "demo", "echo", "mine");
    assert_ok(&gw.post_as("/completions", Some(&other.key), &request));
}

#[test]
fn key_of_another_project_is_403_for_embeddings() {
    let gw = Gateway::demo();
    let other = gw.create_project("other");
    let request = embeddings_request(&gw.project_id, "demo", "echo", json!("x"));
    let response = gw.post_with_headers("/embeddings", Some(&other.key), &[], &request);
    assert_error(&response, 403, "");
}

#[test]
fn project_id_is_checked_before_the_route() {
    let gw = Gateway::demo();
    let other = gw.create_project("other");
    let request = text_request(&gw.project_id, "no-such-route", "echo", "x");
    let response = gw.post_as("/completions", Some(&other.key), &request);
    assert_error(&response, 403, "");
}
