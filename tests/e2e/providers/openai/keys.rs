//! The provider key: the caller's, sent upstream as a bearer and nowhere else, or the route's
//! from its environment variable, the caller's winning.

use super::*;

#[test]
fn provider_key_reaches_the_upstream_as_bearer_and_nowhere_else() {
    let secret = unique("sk-secret-");
    let recording = Recording::concat(&[
        simple_recording(),
        Recording::load("OpenAI__openai-gpt-4o-mini__simple_streaming"),
    ]);
    let upstream = OpenAiUpstream::replay(&recording);
    let failing = OpenAiUpstream::always(Reply::openai_error(
        401,
        "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_api_key",
        None,
    ));
    let mut gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")))
        .route(Route::openai("failing", &failing.base_url("/v1")))
        .env("RUST_LOG", "debug")
        .start();
    let headers = [("Provider-API-Key", secret.as_str())];
    let mut answers = Vec::new();

    let plain = gw.post_with_headers("/completions", Some(&gw.key), &headers, &hi_request(&gw));
    assert_ok(&plain);
    answers.push(plain.text());
    let streamed = gw.post_stream_with_headers(
        "/completions",
        Some(&gw.key),
        &headers,
        &with(hi_request(&gw), "stream", json!(true)),
    );
    split_stream(&streamed);
    answers.push(streamed.raw.clone());
    let embedded = gw.post_with_headers(
        "/embeddings",
        Some(&gw.key),
        &headers,
        &embeddings_request(&gw.project_id, ROUTE, "text-embedding-3-small", json!("x")),
    );
    assert_ok(&embedded);
    answers.push(embedded.text());
    let mut failed_request = hi_request(&gw);
    failed_request["providerConfig"]["provider"] = json!("failing");
    let failed = gw.post_with_headers("/completions", Some(&gw.key), &headers, &failed_request);
    let failed_id = assert_error(&failed, 502, "");
    answers.push(failed.text());
    answers.push(gw.get_invocation(&failed_id).text());

    for request in upstream.requests().iter().chain(failing.requests().iter()) {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {secret}").as_str()),
            "{}",
            request.path
        );
    }
    assert_eq!(upstream.requests().len(), 3);

    let status = gw.shutdown();
    assert!(status.success(), "{status}");
    // The random part alone, in case a prefix is stripped or the key is cut.
    let distinctive = &secret["sk-secret-".len()..];
    for answer in &answers {
        assert!(!answer.contains(distinctive), "key in an answer: {answer}");
    }
    let logs = gw.logs();
    assert!(!logs.is_empty(), "RUST_LOG=debug should produce logs");
    assert!(
        !logs.contains(distinctive),
        "provider key in the logs:\n{logs}"
    );
    let db = gw.db_bytes();
    assert!(
        !contains_bytes(&db, distinctive.as_bytes()),
        "provider key in the database files"
    );
}

#[test]
fn missing_provider_key_is_400() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = gateway_for(&upstream, "/v1");
    let response = gw.post("/completions", &hi_request(&gw));
    let id = assert_error(&response, 400, "Provider-API-Key");
    let record = gw.get_invocation(&id).json();
    assert_eq!(record["status"], json!("error"));
    assert_eq!(record["httpStatus"], json!(400));
    assert!(upstream.requests().is_empty(), "the upstream was called");
}

#[test]
fn route_key_variable_that_is_unset_means_the_caller_must_send_one() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let var = unique("GATEWAY_TEST_UNSET_KEY_");
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")).api_key_env(&var))
        .start();
    let response = gw.post("/completions", &hi_request(&gw));
    assert_error(&response, 400, "Provider-API-Key");
    assert_ok(&post(&gw, "/completions", &hi_request(&gw)));
    assert_eq!(
        upstream.single_request().header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
}

#[test]
fn route_key_is_used_without_a_header_and_the_header_wins() {
    let recording = Recording::concat(&[simple_recording(), simple_recording()]);
    let upstream = OpenAiUpstream::replay(&recording);
    let var = unique("GATEWAY_TEST_ROUTE_KEY_");
    let route_key = unique("sk-route-");
    let mut gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")).api_key_env(&var))
        .env(&var, &route_key)
        .env("RUST_LOG", "debug")
        .start();
    assert_ok(&gw.post("/completions", &hi_request(&gw)));
    assert_ok(&post(&gw, "/completions", &hi_request(&gw)));
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {route_key}").as_str())
    );
    assert_eq!(
        requests[1].header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    gw.shutdown();
    let distinctive = &route_key["sk-route-".len()..];
    assert!(!gw.logs().contains(distinctive), "route key in the logs");
    assert!(
        !contains_bytes(&gw.db_bytes(), distinctive.as_bytes()),
        "route key in the database"
    );
}
