//! Decoding answers: whole Converse answers, ConverseStream's event-stream frames (split
//! anywhere), in-stream exceptions, damaged frames, stop reasons and usage; error answers.

use gateway_plugin_sdk::eventstream::{HeaderValue, encode};
use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::{
    FinishReason, ProviderError, Sink, ToolCall, Usage, read_completion, read_stream,
};
use gateway_test_support::fixtures::{failed, invalid_request, upstream};
use serde_json::{Value, json};

use crate::errors;
use crate::stream::{Decoder, finish_reason, usage};
use crate::wire::WireUsage;

fn event(kind: &str, payload: Value) -> Vec<u8> {
    encode(
        &[
            (":event-type", HeaderValue::from(kind)),
            (":content-type", "application/json".into()),
            (":message-type", "event".into()),
        ],
        payload.to_string().as_bytes(),
    )
}

fn exception(kind: &str, message: &str) -> Vec<u8> {
    encode(
        &[
            (":exception-type", HeaderValue::from(kind)),
            (":content-type", "application/json".into()),
            (":message-type", "exception".into()),
        ],
        json!({ "message": message }).to_string().as_bytes(),
    )
}

fn stream_response(chunks: Vec<Vec<u8>>) -> Response {
    Response::from_chunks(
        200,
        vec![(
            "Content-Type".into(),
            "application/vnd.amazon.eventstream".into(),
        )],
        chunks,
    )
}

/// A ConverseStream answer: reasoning with its signature, text in two pieces, a tool call
/// whose input arrives in two pieces, a tool call without input, stop `tool_use`, usage
/// with cache reads and writes. Bedrock pads events with `p`.
fn tool_stream() -> Vec<Vec<u8>> {
    vec![
        event(
            "messageStart",
            json!({"role": "assistant", "p": "abcdefgh"}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Weather "}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "needed."}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig-9"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"text": "Checking"}, "p": "xyz"}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"text": " now."}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 1})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "weather"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{\"city\":"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "\"Lisbon\"}"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 2})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 3, "start": {"toolUse": {"toolUseId": "tooluse_2", "name": "now"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 3})),
        event("messageStop", json!({"stopReason": "tool_use"})),
        event(
            "metadata",
            json!({"usage": {"inputTokens": 10, "outputTokens": 20, "totalTokens": 80,
            "cacheReadInputTokens": 30, "cacheWriteInputTokens": 20}, "metrics": {"latencyMs": 100}}),
        ),
    ]
}

fn expected_usage() -> Usage {
    Usage {
        cached_prompt_tokens: Some(30),
        cache_creation_tokens: Some(20),
        ..Usage::new(60, 20)
    }
}

#[test]
fn a_stream_of_reasoning_text_and_tool_calls() {
    let frames = tool_stream();
    let mut sink = Sink::buffered();
    let completion =
        read_stream(stream_response(frames), &mut sink, "m", Decoder::default()).unwrap();
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "Checking now.");
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        choice.tool_calls,
        vec![
            ToolCall {
                id: "tooluse_1".into(),
                name: "weather".into(),
                arguments: r#"{"city":"Lisbon"}"#.into()
            },
            ToolCall {
                id: "tooluse_2".into(),
                name: "now".into(),
                arguments: "{}".into()
            },
        ]
    );
    assert_eq!(choice.reasoning.len(), 1);
    assert_eq!(choice.reasoning[0].text, "Weather needed.");
    assert_eq!(choice.reasoning[0].signature.as_deref(), Some("sig-9"));
    assert_eq!(completion.usage, Some(expected_usage()));
    // Text reached the caller as it came, the usage in the last chunk.
    let texts: Vec<&str> = (sink.sent().iter())
        .flat_map(|chunk| &chunk.deltas)
        .map(|delta| delta.text.as_str())
        .collect();
    assert_eq!(texts, ["Checking", " now."]);
    let calls = sink.sent_tool_calls();
    assert_eq!(calls[0].id.as_deref(), Some("tooluse_1"));
    assert_eq!(calls[1].arguments, "{\"city\":");
    assert_eq!(
        sink.sent().last().and_then(|c| c.usage),
        Some(expected_usage())
    );
}

#[test]
fn any_split_of_the_bytes_reads_the_same() {
    let whole: Vec<u8> = tool_stream().concat();
    let reference = read_stream(
        stream_response(vec![whole.clone()]),
        &mut Sink::buffered(),
        "m",
        Decoder::default(),
    )
    .unwrap();
    for size in [1, 3, 7, 64, 500] {
        let chunks: Vec<Vec<u8>> = whole.chunks(size).map(<[u8]>::to_vec).collect();
        let completion = read_stream(
            stream_response(chunks),
            &mut Sink::buffered(),
            "m",
            Decoder::default(),
        )
        .unwrap();
        assert_eq!(completion, reference, "chunks of {size}");
    }
}

#[test]
fn redacted_reasoning_and_a_stop_sequence() {
    let frames = vec![
        event("messageStart", json!({"role": "assistant"})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"redactedContent": "b3BhcXVl"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"text": "Olá"}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 1})),
        event(
            "messageStop",
            json!({"stopReason": "stop_sequence",
            "additionalModelResponseFields": {"stop_sequence": "END"}}),
        ),
    ];
    // No metadata event: the answer is whole at messageStop.
    let completion = read_stream(
        stream_response(frames),
        &mut Sink::buffered(),
        "m",
        Decoder::default(),
    )
    .unwrap();
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "Olá");
    assert_eq!(choice.reasoning[0].redacted.as_deref(), Some("b3BhcXVl"));
    assert_eq!(
        choice.finish_reason,
        Some(FinishReason::StopSequence("END".into()))
    );
    assert_eq!(completion.usage, None);
}

#[test]
fn a_stream_cut_before_message_stop_fails() {
    let frames = tool_stream()[..7].to_vec();
    let mut sink = Sink::buffered();
    let error = read_stream(stream_response(frames), &mut sink, "m", Decoder::default());
    assert_eq!(failed(error), "stream ended early");
}

#[test]
fn a_damaged_frame_is_an_error_not_a_panic() {
    let mut frames = tool_stream();
    let last = frames[5].len() - 1;
    frames[5][last] ^= 0xff;
    let mut sink = Sink::buffered();
    let message = failed(read_stream(
        stream_response(frames),
        &mut sink,
        "m",
        Decoder::default(),
    ));
    assert!(message.contains("invalid event stream"), "{message}");
    // What arrived before it reached the caller: two pieces of reasoning and its signature.
    assert_eq!(sink.sent_reasoning().len(), 3);
}

#[test]
fn exceptions_in_the_stream_are_mapped_as_answers_errors_are() {
    let run = |frame: Vec<u8>| {
        let frames = vec![
            event("messageStart", json!({"role": "assistant"})),
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
            ),
            frame,
        ];
        read_stream(
            stream_response(frames),
            &mut Sink::buffered(),
            "m",
            Decoder::default(),
        )
    };
    let throttled = upstream(run(exception("throttlingException", "Too many tokens")));
    assert_eq!(
        (throttled.status, throttled.message.as_str()),
        (429, "Too many tokens")
    );
    let invalid = invalid_request(run(exception("validationException", "bad max tokens")));
    assert!(invalid.contains("bad max tokens"), "{invalid}");
    let unavailable = upstream(run(exception("serviceUnavailableException", "")));
    assert_eq!(unavailable.status, 503);
    assert_eq!(
        unavailable.message,
        "Bedrock reported serviceUnavailableException"
    );
    let model = upstream(run(exception("modelStreamErrorException", "model failed")));
    assert_eq!(model.status, 500);
}

#[test]
fn a_whole_converse_answer() {
    let answer = json!({
        "output": {"message": {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Think.", "signature": "sig-1"}}},
            {"text": "Calling."},
            {"toolUse": {"toolUseId": "tooluse_a", "name": "weather", "input": {"city": "Porto"}}},
            {"citationsContent": {"citations": []}},
        ]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12},
        "metrics": {"latencyMs": 9}
    });
    let response = Response::from_chunks(200, Vec::new(), vec![answer.to_string().into_bytes()]);
    let completion = read_completion(response, "m", Decoder::default()).unwrap();
    let choice = &completion.choices[0];
    assert_eq!(choice.text, "Calling.");
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(choice.tool_calls[0].arguments, r#"{"city":"Porto"}"#);
    assert_eq!(choice.reasoning[0].signature.as_deref(), Some("sig-1"));
    assert_eq!(completion.usage, Some(Usage::new(5, 7)));
    let broken = Response::from_chunks(200, Vec::new(), vec![b"{\"output\":".to_vec()]);
    assert!(failed(read_completion(broken, "m", Decoder::default())).starts_with("malformed"));
}

#[test]
fn stop_reasons_and_usage() {
    for (reason, expected) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("model_context_window_exceeded", FinishReason::Length),
        ("tool_use", FinishReason::ToolCalls),
        ("guardrail_intervened", FinishReason::ContentFilter),
        ("content_filtered", FinishReason::ContentFilter),
        ("something_new", FinishReason::Other),
    ] {
        assert_eq!(finish_reason(reason, None), expected, "{reason}");
    }
    let plain = WireUsage {
        input_tokens: Some(3),
        output_tokens: Some(4),
        ..WireUsage::default()
    };
    assert_eq!(usage(&plain), Usage::new(3, 4));
}

fn error_response(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
    Response::from_chunks(
        status,
        (headers.iter())
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        vec![body.as_bytes().to_vec()],
    )
}

#[test]
fn error_answers_by_their_error_type() {
    let throttled = upstream(Err::<(), _>(errors::from_response(error_response(
        429,
        &[
            (
                "x-amzn-ErrorType",
                "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ),
            ("Retry-After", "3"),
        ],
        r#"{"message":"Too many requests, please wait before trying again."}"#,
    ))));
    assert_eq!((throttled.status, throttled.retry_after), (429, Some(3)));
    assert_eq!(
        throttled.message,
        "Too many requests, please wait before trying again."
    );

    let invalid = errors::from_response(error_response(
        400,
        &[],
        r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"The model returned the following errors: max_tokens: 0 must be greater than 1"}"#,
    ));
    let message = invalid_request(Err::<(), _>(invalid));
    assert!(
        message.starts_with("Bedrock refused the request (ValidationException): The model"),
        "{message}"
    );

    let denied = upstream(Err::<(), _>(errors::from_response(error_response(
        403,
        &[("x-amzn-errortype", "AccessDeniedException")],
        r#"{"Message":"You don't have access to the model with the specified model ID."}"#,
    ))));
    assert_eq!(denied.status, 403);
    assert_eq!(
        denied.message,
        "You don't have access to the model with the specified model ID."
    );

    let signature = upstream(Err::<(), _>(errors::from_response(error_response(
        403,
        &[("x-amzn-errortype", "InvalidSignatureException")],
        r#"{"message":"The request signature we calculated does not match the signature you provided.\n\nThe Canonical String for this request should have been\n'POST\n...x-amz-security-token:SECRET-TOKEN'"}"#,
    ))));
    assert_eq!(
        signature.message,
        "The request signature we calculated does not match the signature you provided."
    );

    for (kind, status) in [
        ("ModelNotReadyException", 503),
        ("ServiceUnavailableException", 503),
        ("InternalServerException", 500),
        ("ModelTimeoutException", 504),
        ("ResourceNotFoundException", 404),
    ] {
        let error = upstream(Err::<(), _>(errors::from_response(error_response(
            418,
            &[("x-amzn-errortype", kind)],
            "{}",
        ))));
        assert_eq!(error.status, status, "{kind}");
        assert_eq!(error.message, format!("Bedrock reported {kind}"));
    }
    let html = upstream(Err::<(), _>(errors::from_response(error_response(
        502,
        &[("content-type", "text/html")],
        "<html>Bad Gateway</html>",
    ))));
    assert_eq!(
        (html.status, html.message.as_str()),
        (502, "<html>Bad Gateway</html>")
    );
    assert!(matches!(
        errors::from_exception("", ""),
        ProviderError::Upstream(ref e) if e.status == 500
    ));
}
