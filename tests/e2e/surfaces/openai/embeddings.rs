//! `/v1/embeddings`: vectors as floats and as base64.

use super::*;

fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            other => panic!("not standard base64: {other:?} in {text}"),
        }
    };
    assert_eq!(text.len() % 4, 0, "padded: {text}");
    let mut out = Vec::new();
    for group in text.as_bytes().chunks(4) {
        let pad = group.iter().filter(|c| **c == b'=').count();
        let n = group
            .iter()
            .map(|c| if *c == b'=' { 0 } else { value(*c) })
            .fold(0u32, |n, v| (n << 6) | v);
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    out
}

#[test]
fn embeddings_as_floats_and_base64() {
    let upstream = Upstream::OpenAi(OpenAiUpstream::start());
    let gw = gateway_for(OpenAi, &upstream);
    let inputs = ["hello world", "bye"];
    let model = "oai/text-embedding-3-small";

    let response = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": model, "input": inputs, "dimensions": 3, "user": "u-e"}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["object"], json!("list"));
    assert_eq!(body["model"], json!("text-embedding-3-small"));
    for (i, input) in inputs.iter().enumerate() {
        let item = &body["data"][i];
        assert_eq!(item["object"], json!("embedding"));
        assert_eq!(item["index"], json!(i));
        assert_eq!(item["embedding"], json!(fake_embedding(i, input)), "{body}");
    }
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 3, "total_tokens": 3}),
        "{body}"
    );
    let sent = upstream.requests()[0].json();
    assert_eq!(sent["dimensions"], json!(3), "{sent}");
    assert_eq!(sent["user"], json!("u-e"), "{sent}");
    assert!(
        sent.get("encoding_format").is_none_or(|f| f == "float"),
        "{sent}"
    );
    let id = response.header("x-invocation-id").expect("id");
    let record = success_record(&gw, id, OpenAi);
    assert_eq!(record["userId"], json!("u-e"));

    // What OpenAI's Python SDK asks for by default.
    let response = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": model, "input": "hello world", "encoding_format": "base64"}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    let encoded = body["data"][0]["embedding"].as_str().expect("base64 text");
    let floats: Vec<f64> = decode_base64(encoded)
        .chunks(4)
        .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect();
    assert_eq!(floats, fake_embedding(0, "hello world"));

    let hex = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": model, "input": "x", "encoding_format": "hex"}),
    );
    assert_openai_error(
        &hex,
        400,
        "invalid_request_error",
        Some("encoding_format"),
        None,
        "hex",
    );
    let tokens = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": model, "input": [[1, 2, 3]]}),
    );
    assert_openai_error(
        &tokens,
        400,
        "invalid_request_error",
        Some("input"),
        None,
        "token",
    );
}
