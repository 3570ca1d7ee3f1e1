//! `/v1/completions`, the legacy text endpoint: `text_completion` objects on an echo route and on
//! an openai route.

use super::*;

/// The legacy text endpoint: `text_completion` objects, whole and streamed, with usage.
#[test]
fn legacy_text_completions() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let response = post(
        &gw,
        "/v1/completions",
        &json!({"model": "demo/echo", "prompt": ["one two three"]}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    let id = response.header("x-invocation-id").expect("id");
    assert_eq!(body["id"], json!(format!("cmpl-{}", id.replace('-', ""))));
    assert_eq!(body["object"], json!("text_completion"));
    assert_eq!(
        body["choices"],
        json!([{"text": "one two three", "index": 0, "logprobs": null, "finish_reason": "stop"}])
    );
    assert_eq!(body["usage"]["prompt_tokens"], json!(3));

    let stream = post_stream(
        &gw,
        "/v1/completions",
        &json!({"model": "demo", "prompt": "one two three", "stream": true, "stream_options": {"include_usage": true}}),
    );
    assert_eq!(stream.status, 200, "{}", stream.raw);
    assert!(stream.done, "{}", stream.raw);
    let mut text = String::new();
    for chunk in &stream.chunks {
        assert_eq!(chunk["object"], json!("text_completion"), "{chunk}");
        for choice in chunk["choices"].as_array().expect("choices") {
            text.push_str(choice["text"].as_str().expect("text"));
        }
    }
    assert_eq!(text, "one two three");
    let pieces = stream
        .chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        })
        .count();
    assert!(pieces >= 3, "streamed word by word: {}", stream.raw);
    let last = stream.chunks.last().expect("chunks");
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["completion_tokens"], json!(3));
    let finish = &stream.chunks[stream.chunks.len() - 2]["choices"][0];
    assert_eq!(finish["finish_reason"], json!("stop"));

    let two = post(
        &gw,
        "/v1/completions",
        &json!({"model": "demo", "prompt": ["a", "b"]}),
    );
    assert_openai_error(
        &two,
        400,
        "invalid_request_error",
        Some("prompt"),
        None,
        "one prompt",
    );
    let tokens = post(
        &gw,
        "/v1/completions",
        &json!({"model": "demo", "prompt": [[1, 2]]}),
    );
    assert_openai_error(
        &tokens,
        400,
        "invalid_request_error",
        Some("prompt"),
        None,
        "token",
    );
}

/// `/v1/completions` through the openai plugin to an upstream's legacy `/completions`.
#[test]
fn legacy_text_completions_reach_the_openai_plugin() {
    let upstream = Upstream::OpenAi(OpenAiUpstream::start());
    let var = unique("OPENAI_SURFACE_KEY_");
    let gw = Gateway::builder()
        .route(route_for(OpenAi, &upstream.base_url(), &var).setting("legacy_completions", "true"))
        .env(&var, PROVIDER_KEY)
        .start();
    let body = json!({"model": "oai/gpt-3.5-turbo-instruct", "prompt": "Once upon a time", "max_tokens": 9});
    let response = post(&gw, "/v1/completions", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(answer["object"], json!("text_completion"));
    assert_eq!(answer["model"], json!("gpt-3.5-turbo-instruct"));
    assert_eq!(
        answer["choices"][0]["text"],
        json!(legacy_text("Once upon a time"))
    );
    assert_eq!(answer["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(answer["usage"]["prompt_tokens"], json!(4));
    assert_eq!(answer["usage"]["completion_tokens"], json!(5));
    let sent = upstream.requests()[0].clone();
    assert_eq!(sent.path, "/v1/completions");
    assert_eq!(sent.json()["max_tokens"], json!(9));
}
