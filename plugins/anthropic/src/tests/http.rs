//! The request sent and the response read (with the SDK's fake responses).

use super::*;

#[test]
fn the_request_carries_the_key_version_and_json_body() {
    let req = request(Prompt::Text("hi".into()));
    let built = message_body(&req, &Settings::default(), false).expect("body");
    let http = upstream_request(&req, false).expect("request");
    assert_eq!(http.method(), "POST");
    assert_eq!(http.url(), "http://127.0.0.1:9/v1/messages");
    assert_eq!(http.header_value("x-api-key"), Some("sk-ant-test"));
    assert_eq!(http.header_value("anthropic-version"), Some("2023-06-01"));
    assert_eq!(http.header_value("authorization"), None);
    assert_eq!(http.header_value("accept"), Some("application/json"));
    assert_eq!(http.header_value("content-type"), Some("application/json"));
    let sent: Value = serde_json::from_slice(http.body_bytes()).expect("JSON body");
    assert_eq!(sent, Value::Object(built.clone()));
    let debug = format!("{http:?}");
    assert!(!debug.contains("sk-ant-test"), "{debug}");

    for key in [None, Some(String::new())] {
        let mut keyless = req.clone();
        keyless.route.api_key = key;
        let http = upstream_request(&keyless, true).expect("request");
        assert_eq!(http.header_value("x-api-key"), None);
        assert_eq!(http.header_value("accept"), Some("text/event-stream"));
        let sent: Value = serde_json::from_slice(http.body_bytes()).expect("JSON body");
        assert_eq!(sent["stream"], json!(true));
    }
}

#[test]
fn error_statuses_become_upstream_errors_with_anthropics_message() {
    let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}"#;
    let error = upstream(read_completion(
        http_response(401, "application/json", body, 16),
        "m",
        Decoder::default(),
    ));
    assert_eq!(
        (error.status, error.message.as_str(), error.retry_after),
        (401, "invalid x-api-key", None)
    );
    let limited = Response::from_chunks(
        429,
        vec![
            ("content-type".into(), "application/json".into()),
            ("retry-after".into(), "13".into()),
        ],
        vec![br#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#.to_vec()],
    );
    let error = upstream(read_stream(
        limited,
        &mut Sink::buffered(),
        "m",
        Decoder::default(),
    ));
    assert_eq!((error.status, error.retry_after), (429, Some(13)));
    assert!(error.message.starts_with("Number of request tokens"));
    let error = upstream(read_completion(
        http_response(
            529,
            "application/json",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            64,
        ),
        "m",
        Decoder::default(),
    ));
    assert_eq!((error.status, error.message.as_str()), (529, "Overloaded"));
}

#[test]
fn a_recorded_stream_reaches_the_sink_in_order() {
    let interactions = recording("Anthropic__claude-sonnet-4__tool_streaming");
    let mut sink = Sink::buffered();
    let completion = read_stream(
        http_response(
            200,
            "text/event-stream; charset=utf-8",
            &interactions[1].response.body,
            100,
        ),
        &mut sink,
        "claude-sonnet-4",
        Decoder::default(),
    )
    .expect("stream");
    let sent = sink.sent();
    let pieces: Vec<&str> = sent
        .iter()
        .flat_map(|chunk| chunk.deltas.iter())
        .map(|delta| delta.text.as_str())
        .collect();
    assert_eq!(pieces.len(), 13);
    assert_eq!(
        pieces[..3],
        ["The", " current", " weather in Florence, Italy shows"]
    );
    assert_eq!(completion.choices[0].text, pieces.concat());
    // Usage first (message_start), text, usage last (message_delta); never both in one chunk.
    assert!(
        sent.first()
            .is_some_and(|c| c.usage.is_some() && c.deltas.is_empty())
    );
    assert!(
        sent.last()
            .is_some_and(|c| c.usage.is_some() && c.deltas.is_empty())
    );
    assert!(
        sent.iter()
            .all(|c| c.usage.is_none() != c.deltas.is_empty())
    );
    assert_eq!(
        completion
            .usage
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((476, 46))
    );
}

#[test]
fn a_json_answer_to_a_stream_request_is_sent_in_one_piece() {
    let interactions = recording("Anthropic__claude-sonnet-4__simple");
    let mut sink = Sink::buffered();
    let completion = read_stream(
        http_response(200, "application/json", &interactions[0].response.body, 50),
        &mut sink,
        "claude-sonnet-4",
        Decoder::default(),
    )
    .expect("answer");
    // The text and the usage, in one chunk.
    assert_eq!(sink.sent().len(), 1);
    assert_eq!(sink.sent()[0].deltas[0].text, completion.choices[0].text);
    assert_eq!(sink.sent()[0].usage, completion.usage);
    assert!(completion.usage.is_some());
}

#[test]
fn a_plain_answer_is_read_whole_and_garbage_fails() {
    let interactions = recording("Anthropic__claude-sonnet-4__multi_tool");
    let completion = read_completion(
        http_response(200, "application/json", &interactions[0].response.body, 13),
        "claude-sonnet-4",
        Decoder::default(),
    )
    .expect("answer");
    assert_eq!(completion.choices[0].tool_calls.len(), 2);
    let message = failed(read_completion(
        http_response(200, "application/json", "<html>oops</html>", 8),
        "m",
        Decoder::default(),
    ));
    assert!(message.starts_with("malformed response"), "{message}");
}

#[test]
fn a_token_count_sends_the_message_body_less_what_only_an_answer_needs() {
    let mut req = request(Prompt::Chat(vec![
        msg(Role::System, "Be brief."),
        msg(Role::User, "hi"),
    ]));
    req.params =
        json!({"temperature": 0.5, "max_tokens": 99, "stop": ["x"], "user": "u1"}).to_string();
    req.functions.push(FunctionDef {
        name: "get_weather".into(),
        description: Some("The weather".into()),
        parameters: Some(r#"{"type":"object"}"#.into()),
    });
    req.function_choice = Some(FunctionChoice::Auto);
    let http = crate::convert::count_request(&req).expect("request");
    assert_eq!(http.url(), "http://127.0.0.1:9/v1/messages/count_tokens");
    assert_eq!(http.header_value("x-api-key"), Some("sk-ant-test"));
    assert_eq!(http.header_value("anthropic-version"), Some("2023-06-01"));
    let sent: Value = serde_json::from_slice(http.body_bytes()).expect("JSON body");
    let mut keys: Vec<&str> = sent
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["messages", "model", "system", "tool_choice", "tools"]
    );
    assert_eq!(sent["system"], json!("Be brief."));
    let built = message_body(&req, &Settings::default(), false).expect("body");
    assert_eq!(sent["messages"], built["messages"]);
    assert_eq!(sent["tools"], built["tools"]);
}
