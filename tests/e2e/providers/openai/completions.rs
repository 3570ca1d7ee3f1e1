//! A route of the legacy completions API: text sent to `/v1/completions`, whole and streamed.

use super::*;

fn legacy_gateway(upstream: &OpenAiUpstream) -> Gateway {
    Gateway::builder()
        .route(
            Route::openai(ROUTE, &upstream.base_url("/v1")).setting("legacy_completions", "true"),
        )
        .start()
}

#[test]
fn legacy_completions_route_sends_text_to_completions() {
    let upstream = OpenAiUpstream::start();
    let gw = legacy_gateway(&upstream);
    let request = text_request(
        &gw.project_id,
        ROUTE,
        "gpt-3.5-turbo-instruct",
        "Once upon a time",
    );
    let body = assert_ok(&post(
        &gw,
        "/completions",
        &with(request, "showUsage", json!(true)),
    ));
    assert_eq!(body["type"], json!("text"));
    assert_eq!(
        body["choices"][0]["text"],
        json!(legacy_text("Once upon a time"))
    );
    assert_eq!(body["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9})
    );
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/completions");
    let sent = sent.json();
    assert_eq!(sent["model"], json!("gpt-3.5-turbo-instruct"));
    let prompt = match &sent["prompt"] {
        Value::Array(items) => items[0].clone(),
        other => other.clone(),
    };
    assert_eq!(prompt, json!("Once upon a time"));
    assert!(sent.get("messages").is_none(), "{sent}");
}

#[test]
fn legacy_completions_stream() {
    let upstream = OpenAiUpstream::start();
    let gw = legacy_gateway(&upstream);
    let request = with(
        text_request(&gw.project_id, ROUTE, "gpt-3.5-turbo-instruct", "tell me"),
        "stream",
        json!(true),
    );
    let response = post_stream(&gw, &request);
    let (partial, last) = split_stream(&response);
    assert_eq!(streamed_text(&partial, 0), legacy_text("tell me"));
    assert_eq!(last["choices"][0]["finish_reason"], json!("stop"));
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/completions");
    assert_eq!(sent.json()["stream"], json!(true));
}
