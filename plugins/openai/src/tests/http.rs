//! The request sent and the response read (with the SDK's fake responses).

use super::*;

#[test]
fn the_key_travels_as_bearer_or_in_the_configured_header() {
    let mut req = request(Prompt::Text("hi".into()));
    let http = completion(&req, false).expect("request");
    assert_eq!(http.method(), "POST");
    assert_eq!(http.url(), "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(http.header_value("authorization"), Some("Bearer sk-test"));
    assert_eq!(http.header_value("accept"), Some("application/json"));
    assert_eq!(http.header_value("content-type"), Some("application/json"));
    assert_eq!(sent(&http), body(&req, false));

    req.route.settings = r#"{"api_key_header":"api-key"}"#.into();
    let http = completion(&req, true).expect("request");
    assert_eq!(http.header_value("api-key"), Some("sk-test"));
    assert_eq!(http.header_value("authorization"), None);
    assert_eq!(http.header_value("accept"), Some("text/event-stream"));

    req.route.settings = "{}".into();
    for key in [None, Some(String::new())] {
        req.route.api_key = key;
        let http = completion(&req, false).expect("request");
        assert_eq!(http.header_value("authorization"), None);
    }
}

#[test]
fn error_statuses_become_upstream_errors_with_openais_message() {
    let body = r#"{"error":{"message":"Incorrect API key provided: sk-xx***xx.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    let response = response(401, "application/json", body, 64);
    match read_completion(response, "m", Decoder) {
        Err(ProviderError::Upstream(error)) => {
            assert_eq!(error.status, 401);
            assert_eq!(error.message, "Incorrect API key provided: sk-xx***xx.");
            assert_eq!(error.retry_after, None);
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
    let limited = Response::from_chunks(
        429,
        vec![
            ("content-type".into(), "application/json".into()),
            ("retry-after".into(), "20".into()),
        ],
        vec![br#"{"error":{"message":"Rate limit reached"}}"#.to_vec()],
    );
    match read_stream(limited, &mut Sink::buffered(), "m", Decoder) {
        Err(ProviderError::Upstream(error)) => {
            assert_eq!((error.status, error.retry_after), (429, Some(20)));
            assert_eq!(error.message, "Rate limit reached");
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
}

#[test]
fn a_recorded_stream_reaches_the_sink_delta_by_delta() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__tool_streaming");
    let mut sink = Sink::buffered();
    let completion = read_stream(
        response(
            200,
            "text/event-stream; charset=utf-8",
            &interactions[1].response.body,
            100,
        ),
        &mut sink,
        "gpt-4o-mini",
        Decoder,
    )
    .expect("stream");
    let pieces: Vec<&str> = sink
        .sent()
        .iter()
        .flat_map(|chunk| chunk.deltas.iter())
        .map(|delta| delta.text.as_str())
        .collect();
    assert_eq!(
        pieces,
        [
            "The",
            " current",
            " temperature",
            " in",
            " Florence",
            ",",
            " Italy",
            " is",
            " ",
            "40",
            "°C",
            "."
        ]
    );
    // Text chunks, then the usage as the stream reports it, in a chunk of its own.
    let (usage, text) = sink.sent().split_last().expect("chunks");
    assert!(
        text.iter()
            .all(|c| c.usage.is_none() && !c.deltas.is_empty())
    );
    assert!(usage.deltas.is_empty());
    assert_eq!(usage.usage.map(|u| u.total_tokens), Some(99));
    assert_eq!(completion.choices[0].text, pieces.concat());
    assert_eq!(completion.usage.map(|u| u.total_tokens), Some(99));
}

#[test]
fn a_json_answer_to_a_stream_request_is_sent_in_one_piece() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__simple");
    let mut sink = Sink::buffered();
    let completion = read_stream(
        response(200, "application/json", &interactions[0].response.body, 50),
        &mut sink,
        "gpt-4o-mini",
        Decoder,
    )
    .expect("answer");
    assert_eq!(completion.choices[0].text, "Olá!");
    // One chunk: the text, and the usage (now sent as the answer reports it).
    assert_eq!(sink.sent().len(), 1);
    assert_eq!(sink.sent()[0].deltas[0].text, "Olá!");
    assert_eq!(sink.sent()[0].usage, completion.usage);
}

#[test]
fn a_plain_answer_is_read_whole() {
    let interactions = recording("OpenAI__openai-gpt-4o-mini__multi_tool");
    let completion = read_completion(
        response(200, "application/json", &interactions[0].response.body, 13),
        "gpt-4o-mini",
        Decoder,
    )
    .expect("answer");
    assert_eq!(completion.choices[0].tool_calls.len(), 2);
}
