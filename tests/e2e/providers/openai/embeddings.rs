//! Embeddings through the openai plugin: of a string, of an array (sorted by index), an
//! upstream error.

use super::*;

#[test]
fn embeddings_of_a_string() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway_for(&upstream, "/v1");
    let request = embeddings_request(
        &gw.project_id,
        ROUTE,
        "text-embedding-3-small",
        json!("hello world"),
    );
    let body = assert_ok(&post(&gw, "/embeddings", &request));
    assert_eq!(body["type"], json!("embeddings"));
    assert_eq!(body["projectId"], json!(gw.project_id));
    assert_eq!(body["model"], json!("text-embedding-3-small"));
    assert_eq!(
        body["data"],
        json!([{"object": "embedding", "index": 0, "embedding": fake_embedding(0, "hello world")}])
    );
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    let sent = sent.json();
    assert_eq!(sent["model"], json!("text-embedding-3-small"));
    let input = match &sent["input"] {
        Value::String(s) => vec![s.clone()],
        other => serde_json::from_value::<Vec<String>>(other.clone()).expect("input list"),
    };
    assert_eq!(input, ["hello world"]);
}

#[test]
fn embeddings_of_an_array_come_back_sorted_by_index() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway_for(&upstream, "/v1");
    let inputs = ["first input", "second", "the third one"];
    let request = embeddings_request(
        &gw.project_id,
        ROUTE,
        "text-embedding-3-small",
        json!(inputs),
    );
    let body = assert_ok(&post(&gw, "/embeddings", &request));
    let expected: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(i, input)}))
        .collect();
    assert_eq!(body["data"], json!(expected));
    assert_eq!(upstream.single_request().json()["input"], json!(inputs));
    let id = body["invocationId"].as_str().expect("id");
    let record = gw.get_invocation(id).json();
    assert_eq!(record["type"], json!("embeddings"));
    assert_eq!(record["status"], json!("success"));
}

#[test]
fn embeddings_upstream_error_is_502() {
    let upstream = OpenAiUpstream::always(Reply::openai_error(
        500,
        "The server had an error",
        "server_error",
        None,
    ));
    let gw = gateway_for(&upstream, "/v1");
    let request = embeddings_request(&gw.project_id, ROUTE, "text-embedding-3-small", json!("x"));
    let response = post(&gw, "/embeddings", &request);
    assert_error(&response, 502, "");
    assert_eq!(
        response.json()["providerError"],
        json!("The server had an error")
    );
}
