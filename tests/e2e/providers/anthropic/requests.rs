//! The request the plugin sends: the key, `anthropic-version`, the system field, the default
//! `max_tokens`, legacy parameter names, the route's key or the caller's; embeddings refused.

use super::*;

fn simple_reply() -> Reply {
    Reply::recorded(Recording::load("Anthropic__claude-sonnet-4__simple").interaction(0))
}

#[test]
fn request_has_the_key_version_system_field_and_default_max_tokens() {
    let upstream = AnthropicUpstream::script(vec![simple_reply()]);
    let gw = gateway_for(&upstream);
    let request = chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Say hi"},
            {"role": "user", "content": "in Portuguese"},
            {"role": "system", "content": "Be brief."},
        ]),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert!(
        body["choices"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Olá"))
    );
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(PROVIDER_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        sent.json(),
        json!({
            "model": MODEL,
            "max_tokens": 4096,
            "system": "You are a helpful assistant.\n\nBe brief.",
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Say hi"}, {"type": "text", "text": "in Portuguese"}]}],
        })
    );
}

#[test]
fn text_prompts_are_one_user_message() {
    let upstream = AnthropicUpstream::script(vec![simple_reply()]);
    let gw = gateway_for(&upstream);
    let request = text_request(&gw.project_id, ROUTE, MODEL, "Say hi in Portuguese");
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["type"], json!("text"));
    assert!(body["choices"][0].get("role").is_none(), "{body}");
    let sent = upstream.single_request().json();
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Say hi in Portuguese"}]}])
    );
    assert!(sent.get("system").is_none(), "{sent}");
}

#[test]
fn legacy_parameter_names_are_accepted() {
    let upstream = AnthropicUpstream::script(vec![simple_reply(), simple_reply()]);
    let gw = gateway_for(&upstream);
    let mut request = hi_request(&gw);
    let params = &mut request["providerConfig"]["params"];
    params["max_tokens_to_sample"] = json!(256);
    params["stop_sequences"] = json!(["\n\nHuman:"]);
    params["top_k"] = json!(10);
    params["top_p"] = json!(0.8);
    params["temperature"] = json!(0.3);
    params["metadata"] = json!({"user_id": "user-42"});
    assert_ok(&post(&gw, "/completions", &request));
    let request = with_param(
        with_param(hi_request(&gw), "stop", json!("END")),
        "max_tokens",
        json!(99),
    );
    assert_ok(&post(&gw, "/completions", &request));

    let requests = upstream.requests();
    let first = requests[0].json();
    for (key, value) in [
        ("max_tokens", json!(256)),
        ("stop_sequences", json!(["\n\nHuman:"])),
        ("top_k", json!(10)),
        ("top_p", json!(0.8)),
        ("temperature", json!(0.3)),
        ("metadata", json!({"user_id": "user-42"})),
    ] {
        assert_eq!(first[key], value, "{key} in {first}");
    }
    assert!(first.get("max_tokens_to_sample").is_none(), "{first}");
    let second = requests[1].json();
    assert_eq!(second["max_tokens"], json!(99), "{second}");
    assert_eq!(second["stop_sequences"], json!(["END"]), "{second}");
    assert!(second.get("stop").is_none(), "{second}");
}

#[test]
fn route_key_travels_as_x_api_key_and_the_callers_key_wins() {
    let upstream = AnthropicUpstream::script(vec![simple_reply(), simple_reply()]);
    let var = unique("GATEWAY_TEST_ANTHROPIC_KEY_");
    let route_key = unique("sk-ant-route-");
    let gw = Gateway::builder()
        .route(
            Route::new(ROUTE, "anthropic")
                .base_url(&upstream.base_url("/v1"))
                .api_key_env(&var)
                .default_model("claude-sonnet-4-5"),
        )
        .env(&var, &route_key)
        .start();
    // No model in params: the route's default is sent.
    let request = json!({
        "projectId": gw.project_id,
        "messages": [{"role": "user", "content": "Say hi in Portuguese"}],
        "providerConfig": {"provider": ROUTE, "params": {"type": "chat"}}
    });
    let answer = gw.post("/completions", &request);
    assert_ok(&answer);
    assert!(!answer.text().contains(&route_key));
    assert_ok(&post(&gw, "/completions", &request));
    let requests = upstream.requests();
    assert_eq!(requests[0].header("x-api-key"), Some(route_key.as_str()));
    assert_eq!(requests[1].header("x-api-key"), Some(PROVIDER_KEY));
    assert_eq!(requests[0].json()["model"], json!("claude-sonnet-4-5"));
}

#[test]
fn embeddings_are_refused() {
    let upstream = AnthropicUpstream::script(Vec::new());
    let gw = gateway_for(&upstream);
    let request = embeddings_request(&gw.project_id, ROUTE, MODEL, json!("hello"));
    assert_error(&post(&gw, "/embeddings", &request), 400, "embeddings");
    assert!(upstream.requests().is_empty());
}
