//! Embeddings: the InvokeModel bodies of Titan and Cohere, and their answers.

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::{EmbeddingRequest, Route};
use gateway_test_support::fixtures::{failed, invalid_request};
use serde_json::json;

use crate::embed::{COHERE_BATCH, Family, bodies, read};

fn request(model: &str, input: Vec<String>, params: serde_json::Value) -> EmbeddingRequest {
    EmbeddingRequest {
        route: Route {
            id: "bedrock".into(),
            base_url: "https://bedrock-runtime.us-east-1.amazonaws.com".into(),
            api_key: Some("k".into()),
            settings: "{}".into(),
            secrets: Vec::new(),
        },
        model: model.into(),
        input,
        params: params.to_string(),
    }
}

#[test]
fn titan_embeds_one_text_per_call() {
    let request = request(
        "amazon.titan-embed-text-v2:0",
        vec!["a".into(), "bb".into()],
        json!({"dimensions": 256, "normalize": true, "encoding_format": "float", "user": "u"}),
    );
    let (family, bodies) = bodies(&request).unwrap();
    assert_eq!(family, Family::Titan);
    assert_eq!(
        bodies,
        vec![
            json!({"inputText": "a", "dimensions": 256, "normalize": true}),
            json!({"inputText": "bb", "dimensions": 256, "normalize": true}),
        ]
    );
}

#[test]
fn cohere_embeds_up_to_96_texts_per_call() {
    let input: Vec<String> = (0..COHERE_BATCH + 4).map(|i| format!("t{i}")).collect();
    let (family, batches) = bodies(&request("cohere.embed-english-v3", input, json!({}))).unwrap();
    assert_eq!(family, Family::Cohere);
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0]["input_type"], json!("search_document"));
    assert_eq!(
        batches[0]["texts"].as_array().map(Vec::len),
        Some(COHERE_BATCH)
    );
    assert_eq!(batches[1]["texts"], json!(["t96", "t97", "t98", "t99"]));
    let query = request(
        "us.cohere.embed-v4:0",
        vec!["q".into()],
        json!({"input_type": "search_query", "truncate": "END", "dimensions": 3}),
    );
    assert_eq!(
        bodies(&query).unwrap().1,
        vec![json!({"texts": ["q"], "input_type": "search_query", "truncate": "END"})]
    );
    let other = request("anthropic.claude-3-haiku", vec!["x".into()], json!({}));
    assert!(invalid_request(bodies(&other)).contains("Titan"));
}

#[test]
fn answers_are_read_with_their_token_counts() {
    let titan = Response::from_chunks(
        200,
        Vec::new(),
        vec![br#"{"embedding":[0.5,-0.25],"inputTextTokenCount":3}"#.to_vec()],
    );
    assert_eq!(
        read(Family::Titan, titan).unwrap(),
        (vec![vec![0.5, -0.25]], Some(3))
    );
    let cohere = Response::from_chunks(
        200,
        vec![("X-Amzn-Bedrock-Input-Token-Count".into(), "7".into())],
        vec![br#"{"id":"x","embeddings":[[1.0],[2.0]],"response_type":"embeddings_floats","texts":["a","b"]}"#.to_vec()],
    );
    assert_eq!(
        read(Family::Cohere, cohere).unwrap(),
        (vec![vec![1.0], vec![2.0]], Some(7))
    );
    let by_type = Response::from_chunks(
        200,
        Vec::new(),
        vec![br#"{"embeddings":{"float":[[0.5]]},"response_type":"embeddings_by_type"}"#.to_vec()],
    );
    assert_eq!(
        read(Family::Cohere, by_type).unwrap(),
        (vec![vec![0.5]], None)
    );
    let int8_only = Response::from_chunks(
        200,
        Vec::new(),
        vec![br#"{"embeddings":{"int8":[[1]]}}"#.to_vec()],
    );
    assert!(failed(read(Family::Cohere, int8_only)).contains("float"));
}
