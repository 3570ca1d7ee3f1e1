//! Embeddings: the request and the reading of its answer.

use super::*;

fn embedding_request(input: &[&str], params: &str) -> EmbeddingRequest {
    EmbeddingRequest {
        route: route(),
        model: "text-embedding-004".into(),
        input: input.iter().map(|s| (*s).into()).collect(),
        params: params.into(),
    }
}

#[test]
fn embeddings_are_one_batch_request_per_input() {
    let call = embedding_call(&embedding_request(
        &["first", "second"],
        r#"{"dimensions":256,"task_type":"RETRIEVAL_DOCUMENT","encoding_format":null}"#,
    ))
    .unwrap();
    assert_eq!(
        call.url(),
        "http://127.0.0.1:9/v1beta/models/text-embedding-004:batchEmbedContents"
    );
    let request = |text: &str| {
        json!({"model": "models/text-embedding-004", "content": {"parts": [{"text": text}]},
               "taskType": "RETRIEVAL_DOCUMENT", "outputDimensionality": 256})
    };
    assert_eq!(
        json_body(&call),
        json!({"requests": [request("first"), request("second")]})
    );
}

#[test]
fn embedding_answers_keep_input_order() {
    let body = br#"{"embeddings":[{"values":[0.5,1.0]},{"values":[-0.25,2.0]}]}"#;
    let embeddings = read_embeddings(body, "text-embedding-004", 2).unwrap();
    assert_eq!(embeddings.vectors, vec![vec![0.5, 1.0], vec![-0.25, 2.0]]);
    assert_eq!(embeddings.model, "text-embedding-004");
    assert_eq!(embeddings.usage, None);
    let message = failed(read_embeddings(body, "m", 3));
    assert!(message.contains("2 embeddings for 3 inputs"), "{message}");
    failed(read_embeddings(b"{\"embeddings\":[{}]}", "m", 1));
    failed(read_embeddings(b"<html>", "m", 1));
}

#[test]
fn a_token_count_asks_count_tokens_with_the_generate_content_body() {
    let mut request = chat(vec![
        message(Role::System, "Be brief."),
        message(Role::User, "Hello!"),
    ]);
    request.functions.push(weather_function());
    let generate = json_body(&completion_call(&request, false).unwrap());
    let call = crate::convert::count_call(&request).unwrap();
    assert_eq!(
        call.url(),
        "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:countTokens"
    );
    let mut expected = generate;
    expected["model"] = json!("models/gemini-2.5-flash");
    assert_eq!(
        json_body(&call),
        json!({ "generateContentRequest": expected })
    );
}
