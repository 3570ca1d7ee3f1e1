//! Azure OpenAI through the openai plugin, against a fake upstream replaying recorded Azure
//! traffic: deployment URLs with `api-version` and the `api-key` header (route setting
//! `azure_api_version`), and Azure's v1 API as a plain OpenAI-compatible route.

use gateway_test_support::{
    Gateway, OpenAiUpstream, Recording, Response, Route, SseResponse, assert_error, assert_ok,
    chat_request, embeddings_request, fake_embedding, post_stream_with_provider_key,
    post_with_provider_key, split_stream, streamed_text, with,
};
use serde_json::{Value, json};

const AZURE_KEY: &str = "azure-test-key-0123456789";
const API_VERSION: &str = "2024-10-21";
/// The recordings' deployment, named after its model as Azure's quick start does.
const DEPLOYMENT: &str = "gpt-5-mini";

fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    post_with_provider_key(gw, path, AZURE_KEY, body)
}

fn post_stream(gw: &Gateway, body: &Value) -> SseResponse {
    post_stream_with_provider_key(gw, AZURE_KEY, body)
}

/// A route in deployment mode at `upstream`, whose base URL is the resource endpoint.
fn deployment_gateway(upstream: &OpenAiUpstream) -> Gateway {
    Gateway::builder()
        .route(
            Route::openai("azure", &upstream.base_url(""))
                .setting("azure_api_version", &format!("\"{API_VERSION}\"")),
        )
        .start()
}

fn hello(gw: &Gateway, model: &str) -> Value {
    with(
        chat_request(
            &gw.project_id,
            "azure",
            model,
            json!([{"role": "user", "content": "Say hi in Portuguese"}]),
        ),
        "showUsage",
        json!(true),
    )
}

/// The recorded answer's text and usage: (text, prompt, completion, reasoning).
fn recorded(name: &str) -> (String, u64, u64, u64) {
    let recording = Recording::load(name);
    let interaction = recording.interaction(0);
    let answer = interaction.answer();
    let (prompt, completion, _) = answer.usage.expect("recorded usage");
    let usage = if interaction.is_sse() {
        interaction
            .sse_payloads()
            .into_iter()
            .rev()
            .find(|p| p["usage"].is_object())
            .map(|p| p["usage"].clone())
            .expect("a usage chunk")
    } else {
        serde_json::from_str::<Value>(&interaction.response.body).expect("JSON")["usage"].clone()
    };
    let reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
        .as_u64()
        .expect("reasoning tokens");
    (answer.text, prompt, completion, reasoning)
}

/// The shipped table's gpt-5-mini price (input, output) with nothing cached.
fn gpt_5_mini_cost(prompt: u64, completion: u64) -> f64 {
    (prompt as f64 * 0.25 + completion as f64 * 2.00) / 1e6
}

fn assert_cost(body: &Value, key: &str, expected: f64) {
    let cost = body[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {body}"));
    assert!(
        (cost - expected).abs() < 1e-12,
        "{key} {cost} != {expected}"
    );
}

#[test]
fn deployment_urls_carry_the_api_version_and_the_key_in_api_key() {
    let name = "Azure__azure-gpt-5-mini__simple";
    let upstream = OpenAiUpstream::replay(&Recording::load(name));
    let gw = deployment_gateway(&upstream);
    let body = assert_ok(&post(&gw, "/completions", &hello(&gw, DEPLOYMENT)));

    let request = upstream.single_request();
    assert_eq!(
        request.path,
        format!("/openai/deployments/{DEPLOYMENT}/chat/completions?api-version={API_VERSION}")
    );
    assert_eq!(request.header("api-key"), Some(AZURE_KEY));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(
        request.json()["messages"][0]["content"],
        json!("Say hi in Portuguese")
    );

    let (text, prompt, completion, reasoning) = recorded(name);
    assert_eq!(body["choices"][0]["text"], json!(text), "{body}");
    assert_cost(&body, "usage_cost", gpt_5_mini_cost(prompt, completion));
    let record = gw
        .get_invocation(body["invocationId"].as_str().expect("id"))
        .json();
    assert_eq!(
        record["usage"]["reasoning_tokens"],
        json!(reasoning),
        "{record}"
    );
    assert_eq!(record["plugin"], json!("openai"));
}

#[test]
fn deployment_streams_ask_for_usage_and_are_priced() {
    let name = "Azure__azure-gpt-5-mini__simple_streaming";
    let upstream = OpenAiUpstream::replay(&Recording::load(name));
    let gw = deployment_gateway(&upstream);
    let request = with(hello(&gw, DEPLOYMENT), "stream", json!(true));
    let (partial, last) = split_stream(&post_stream(&gw, &request));

    let sent = upstream.single_request();
    assert!(
        sent.path.starts_with(&format!(
            "/openai/deployments/{DEPLOYMENT}/chat/completions?"
        )),
        "{}",
        sent.path
    );
    assert_eq!(
        sent.json()["stream_options"],
        json!({"include_usage": true})
    );
    let (text, prompt, completion, _) = recorded(name);
    assert_eq!(streamed_text(&partial, 0), text);
    assert_cost(&last, "usage_cost", gpt_5_mini_cost(prompt, completion));
}

#[test]
fn deployment_embeddings_use_the_deployment_url() {
    let upstream = OpenAiUpstream::start();
    let gw = deployment_gateway(&upstream);
    let request = embeddings_request(&gw.project_id, "azure", "embed-small", json!(["a b", "c"]));
    let body = assert_ok(&post(&gw, "/embeddings", &request));
    assert_eq!(
        body["data"][1]["embedding"],
        json!(fake_embedding(1, "c")),
        "{body}"
    );
    let sent = upstream.single_request();
    assert_eq!(
        sent.path,
        format!("/openai/deployments/embed-small/embeddings?api-version={API_VERSION}")
    );
    assert_eq!(sent.header("api-key"), Some(AZURE_KEY));
}

#[test]
fn a_model_that_is_no_deployment_name_is_refused_before_any_upstream_call() {
    let upstream = OpenAiUpstream::start();
    let gw = deployment_gateway(&upstream);
    for model in ["../../v1/other", "dep?api-version=1", "a/b"] {
        assert_error(
            &post(&gw, "/completions", &hello(&gw, model)),
            400,
            "deployment name",
        );
    }
    assert!(upstream.requests().is_empty());
}

#[test]
fn the_v1_api_is_a_plain_openai_route_with_the_api_key_header() {
    let name = "Azure__azure-gpt-5-mini__simple";
    let recording = Recording::load(name);
    let upstream = OpenAiUpstream::replay(&recording);
    let base_path = recording.interaction(0).base_path();
    assert_eq!(base_path, "/openai/v1");
    let gw = Gateway::builder()
        .route(
            Route::openai("azure", &upstream.base_url(&base_path))
                .setting("api_key_header", "\"api-key\""),
        )
        .start();
    let body = assert_ok(&post(&gw, "/completions", &hello(&gw, DEPLOYMENT)));
    let sent = upstream.single_request();
    assert_eq!(sent.path, "/openai/v1/chat/completions");
    assert_eq!(sent.header("api-key"), Some(AZURE_KEY));
    assert_eq!(sent.header("authorization"), None);
    let (text, prompt, completion, _) = recorded(name);
    assert_eq!(body["choices"][0]["text"], json!(text));
    assert_cost(&body, "usage_cost", gpt_5_mini_cost(prompt, completion));
}
