//! Protocol details: strict JSON (bytes after the body, duplicate fields), wrong methods (405 with
//! `Allow`, recorded on a model endpoint), many headers, and HTTP/2 with prior knowledge beside
//! HTTP/1.1.

use super::*;

// ------------------------------------------------------------------ 10, 14: protocol details

#[test]
fn bytes_after_the_json_body_are_a_400() {
    let gw = Gateway::demo();
    let body = format!("{} xyz", text_request(&gw.project_id, "demo", "echo", "hi"));
    let response = gw.request("POST", "/completions", Some(&gw.key), &[], body.as_bytes());
    let id = assert_error(&response, 400, "trailing characters");
    assert_eq!(gw.record(&id)["httpStatus"], json!(400));
    let body = format!("{}\n\n", text_request(&gw.project_id, "demo", "echo", "hi"));
    let response = gw.request("POST", "/completions", Some(&gw.key), &[], body.as_bytes());
    assert_ok(&response);
}

#[test]
fn a_duplicate_field_is_named() {
    let gw = Gateway::demo();
    let body = format!(
        r#"{{"projectId": "{}", "prompt": "a", "prompt": "b",
            "providerConfig": {{"provider": "demo", "params": {{"type": "text"}}}}}}"#,
        gw.project_id
    );
    let response = gw.request("POST", "/completions", Some(&gw.key), &[], body.as_bytes());
    assert_error(&response, 400, "duplicate field `prompt`");
    assert!(
        !response.text().contains("invalid field ."),
        "{}",
        response.text()
    );
}

#[test]
fn wrong_methods_are_405_with_allow() {
    let gw = Gateway::demo();
    for (method, path, allowed) in [
        ("POST", "/admin/plugins", "GET"),
        ("DELETE", "/admin/config", "GET"),
        ("POST", "/healthz", "GET"),
        ("GET", "/completions", "POST"),
    ] {
        let response = gw.request(method, path, None, &[], b"");
        assert_error(&response, 405, allowed);
        assert_eq!(response.header("allow"), Some(allowed), "{method} {path}");
    }
}

#[test]
fn a_wrong_method_on_a_model_endpoint_is_recorded() {
    let gw = Gateway::demo();
    for (method, path) in [
        ("GET", "/completions"),
        ("PUT", "/embeddings"),
        ("GET", "/v1/chat/completions"),
        ("DELETE", "/v1/completions"),
        ("GET", "/v1/embeddings"),
        ("GET", "/v1/messages"),
    ] {
        let response = gw.request(method, path, Some(&gw.key), &[], b"");
        assert_eq!(response.status, 405, "{method} {path}: {}", response.text());
        assert_eq!(response.header("allow"), Some("POST"), "{method} {path}");
        let id = response
            .header("x-invocation-id")
            .unwrap_or_else(|| panic!("{method} {path}: no x-invocation-id"))
            .to_owned();
        // Each in its surface's own error shape.
        let body = response.json();
        match path {
            "/completions" | "/embeddings" => assert_eq!(body["invocationId"], json!(id)),
            "/v1/messages" => assert_eq!(body["request_id"], json!(id)),
            _ => assert_eq!(body["error"]["type"], json!("invalid_request_error")),
        }
        let record = gw.record(&id);
        assert_eq!(
            record["httpStatus"],
            json!(405),
            "{method} {path}: {record}"
        );
        assert_eq!(
            record["status"],
            json!("error"),
            "{method} {path}: {record}"
        );
    }
}

#[test]
fn requests_with_many_headers_are_served_up_to_256() {
    let gw = Gateway::demo();
    let names: Vec<String> = (0..200).map(|i| format!("x-extra-{i}")).collect();
    let headers: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
    assert_eq!(
        gw.request("GET", "/healthz", None, &headers[..101], b"")
            .status,
        200
    );
    assert_eq!(
        gw.request("GET", "/healthz", None, &headers, b"").status,
        200
    );
    let names: Vec<String> = (0..300).map(|i| format!("x-extra-{i}")).collect();
    let headers: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
    assert_eq!(
        gw.request("GET", "/healthz", None, &headers, b"").status,
        431
    );
}

// ------------------------------------------------------------------ 11: HTTP/2

#[test]
fn http2_with_prior_knowledge_is_served_beside_http1() {
    let gw = Gateway::demo();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let url = format!("http://{}/completions", gw.addr);
    let (plain, streamed) = runtime.block_on(async {
        let client = reqwest::Client::builder()
            .http2_prior_knowledge()
            .build()
            .expect("client");
        let send = |body: Value| {
            client
                .post(&url)
                .header("Authorization", format!("Bearer {}", gw.key))
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .send()
        };
        let plain = send(text_request(&gw.project_id, "demo", "echo", "over h2"))
            .await
            .expect("h2 request");
        let plain = (
            plain.version(),
            plain.status(),
            plain.text().await.expect("body"),
        );
        let stream = send(with(
            text_request(&gw.project_id, "demo", "echo", "streamed over h2"),
            "stream",
            json!(true),
        ))
        .await
        .expect("h2 stream");
        let streamed = (stream.version(), stream.text().await.expect("stream body"));
        (plain, streamed)
    });
    assert_eq!(plain.0, reqwest::Version::HTTP_2);
    assert_eq!(plain.1, 200, "{}", plain.2);
    let body: Value = serde_json::from_str(&plain.2).expect("JSON");
    assert_eq!(body["choices"][0]["text"], json!("over h2"), "{body}");
    assert_eq!(streamed.0, reqwest::Version::HTTP_2);
    let frames = parse_sse(&streamed.1);
    assert_eq!(frames.last().expect("frames")["completed"], json!(true));
    // HTTP/1.1 on the same listener.
    assert_eq!(gw.get("/healthz", None).status, 200);
}
