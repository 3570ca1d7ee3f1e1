//! What the plugin sends upstream: variables substituted, text prompts as one user message,
//! parameters passed through, the route's default model; usage and cost in the answer.

use super::*;

#[test]
fn variables_reach_the_upstream_substituted() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = gateway_for(&upstream, "/v1");
    let request = with(
        chat_request(
            &gw.project_id,
            ROUTE,
            "gpt-4o-mini",
            json!([
                {"role": "system", "content": "You are {{persona}}"},
                {"role": "user", "content": "Say {{word}} in {{lang}}, {{word}}!"}
            ]),
        ),
        "variables",
        json!({"persona": "a helpful assistant", "word": "hi", "lang": "Portuguese"}),
    );
    assert_ok(&post(&gw, "/completions", &request));
    let sent = upstream.single_request().json();
    let summaries: Vec<Value> = sent["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(message_summary)
        .collect();
    assert_eq!(
        summaries,
        [
            message_summary(&json!({"role": "system", "content": "You are a helpful assistant"})),
            message_summary(&json!({"role": "user", "content": "Say hi in Portuguese, hi!"}))
        ]
    );
}

#[test]
fn text_prompts_are_sent_as_one_user_message() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = gateway_for(&upstream, "/v1");
    let request = text_request(&gw.project_id, ROUTE, "gpt-4o-mini", "Say hi in Portuguese");
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(body["type"], json!("text"));
    assert_eq!(body["choices"][0]["text"], json!("Olá!"));
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/v1/chat/completions");
    let messages = sent.json()["messages"].clone();
    assert_eq!(messages.as_array().map(Vec::len), Some(1), "{messages}");
    assert_eq!(messages[0]["role"], json!("user"));
    assert_eq!(messages[0]["content"], json!("Say hi in Portuguese"));
}

#[test]
fn params_pass_through_to_the_upstream() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = gateway_for(&upstream, "/v1");
    let mut request = hi_request(&gw);
    let params = &mut request["providerConfig"]["params"];
    params["temperature"] = json!(0.25);
    params["top_p"] = json!(0.5);
    params["max_tokens"] = json!(42);
    params["stop"] = json!(["\n\n", "END"]);
    params["presence_penalty"] = json!(0.1);
    params["frequency_penalty"] = json!(-0.2);
    params["seed"] = json!(7);
    params["n"] = json!(1);
    assert_ok(&post(&gw, "/completions", &request));
    let sent = upstream.single_request().json();
    for (key, value) in [
        ("temperature", json!(0.25)),
        ("top_p", json!(0.5)),
        ("max_tokens", json!(42)),
        ("stop", json!(["\n\n", "END"])),
        ("presence_penalty", json!(0.1)),
        ("frequency_penalty", json!(-0.2)),
        ("seed", json!(7)),
        ("n", json!(1)),
    ] {
        assert_eq!(sent[key], value, "{key} in {sent}");
    }
    assert!(
        sent.get("type").is_none(),
        "`type` is the gateway's: {sent}"
    );
}

#[test]
fn default_model_of_the_route_is_sent_when_params_have_none() {
    let upstream = OpenAiUpstream::replay(&simple_recording());
    let gw = Gateway::builder()
        .route(Route::openai(ROUTE, &upstream.base_url("/v1")).default_model("gpt-4o-mini"))
        .start();
    let request = json!({
        "projectId": gw.project_id,
        "messages": [{"role": "user", "content": "Say hi in Portuguese"}],
        "providerConfig": {"provider": ROUTE, "params": {"type": "chat"}}
    });
    assert_ok(&post(&gw, "/completions", &request));
    assert_eq!(
        upstream.single_request().json()["model"],
        json!("gpt-4o-mini")
    );
}

#[test]
fn usage_is_absent_without_show_usage_and_cost_null_for_unknown_models() {
    let recording = Recording::concat(&[
        Recording::load("OpenAICompatible__llama-cpp-gpt-oss__simple"),
        Recording::load("OpenAICompatible__llama-cpp-gpt-oss__simple"),
    ]);
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = gateway_for(&upstream, "/v1");
    let request = chat_request(
        &gw.project_id,
        ROUTE,
        "a-model-nobody-prices",
        json!([{"role": "user", "content": "hi"}]),
    );
    let body = assert_ok(&post(&gw, "/completions", &request));
    assert!(body.get("usage").is_none(), "{body}");
    assert!(body.get("usage_cost").is_none(), "{body}");

    let body = assert_ok(&post(
        &gw,
        "/completions",
        &with(request, "showUsage", json!(true)),
    ));
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 84, "completion_tokens": 47, "total_tokens": 131}),
        "{body}"
    );
    assert!(
        body.get("usage_cost").is_some_and(Value::is_null),
        "unknown price must be usage_cost: null: {body}"
    );
}
