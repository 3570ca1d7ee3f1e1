//! Embeddings: the request and the reading of its answer.

use super::*;

#[test]
fn embedding_body_has_model_input_and_params() {
    let req = EmbeddingRequest {
        route: route("{}"),
        model: "text-embedding-3-small".into(),
        input: vec!["a".into(), "b".into()],
        params: r#"{"dimensions":8,"input":"evil","model":"evil"}"#.into(),
    };
    let http = embedding(&req).expect("builds");
    assert_eq!(http.url(), "http://127.0.0.1:9/v1/embeddings");
    assert_eq!(http.header_value("accept"), Some("application/json"));
    assert_eq!(
        sent(&http),
        json!({"model": "text-embedding-3-small", "input": ["a", "b"], "dimensions": 8})
    );
}

#[test]
fn embeddings_are_sorted_by_index_with_usage() {
    let body = br#"{"object":"list","model":"text-embedding-3-small",
        "data":[{"object":"embedding","index":1,"embedding":[0.5,-1]},
                {"object":"embedding","index":0,"embedding":[0.25,2]}],
        "usage":{"prompt_tokens":4,"total_tokens":4}}"#;
    let embeddings = parse_embeddings(body, "asked", 2).expect("parses");
    assert_eq!(embeddings.model, "text-embedding-3-small");
    assert_eq!(embeddings.vectors, [vec![0.25, 2.0], vec![0.5, -1.0]]);
    let usage = embeddings.usage.expect("usage");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (4, 0, 4)
    );
}

#[test]
fn base64_embeddings_are_decoded() {
    // [1.0, -2.5] as little-endian f32: 00 00 80 3f 00 00 20 c0.
    let body = br#"{"model":"m","data":[{"index":0,"embedding":"AACAPwAAIMA="}]}"#;
    let embeddings = parse_embeddings(body, "asked", 1).expect("parses");
    assert_eq!(embeddings.vectors, [vec![1.0, -2.5]]);
    assert!(embeddings.usage.is_none());
    // Without padding, and in either alphabet: 0.99999994 is ff ff 7f 3f, "//9/Pw==" or "__9_Pw".
    let body = br#"{"model":"m","data":[{"index":0,"embedding":"AACAPwAAIMA"}]}"#;
    assert_eq!(
        parse_embeddings(body, "asked", 1)
            .expect("no padding")
            .vectors,
        [vec![1.0, -2.5]]
    );
    for text in ["//9/Pw==", "__9_Pw"] {
        let body = format!(r#"{{"model":"m","data":[{{"index":0,"embedding":"{text}"}}]}}"#);
        let vectors = parse_embeddings(body.as_bytes(), "asked", 1)
            .expect(text)
            .vectors;
        assert_eq!(vectors, [vec![0.99999994_f32]], "{text}");
    }
    let bad = br#"{"model":"m","data":[{"index":0,"embedding":"AAA*"}]}"#;
    failed(parse_embeddings(bad, "asked", 1));
    let not_f32s = br#"{"model":"m","data":[{"index":0,"embedding":"AAAA"}]}"#;
    failed(parse_embeddings(not_f32s, "asked", 1));
}

#[test]
fn embeddings_must_match_the_inputs() {
    let body = br#"{"model":"m","data":[{"index":0,"embedding":[1]}]}"#;
    let message = failed(parse_embeddings(body, "asked", 2));
    assert!(message.contains("1 embeddings for 2 inputs"), "{message}");
    failed(parse_embeddings(b"not json", "asked", 1));
}
