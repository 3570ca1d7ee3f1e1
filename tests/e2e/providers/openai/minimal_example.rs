//! The SDK's proof: `examples/minimal-provider`, a whole provider in under 70 lines, serves the
//! recorded OpenAI traffic with text, usage and cost, as a plain answer and as a stream; and so
//! does the same example built outside the repository against the packed SDK
//! (`minimal-outside.wasm`, by `cargo xtask test`), as an author would build it.

use super::*;

const MINIMAL: &str = "min";

fn gateway(recording: &Recording, upstream: &OpenAiUpstream) -> Gateway {
    gateway_of("minimal", recording, upstream)
}

fn gateway_of(plugin: &str, recording: &Recording, upstream: &OpenAiUpstream) -> Gateway {
    let first = recording.interaction(0);
    let model = first.request_json()["model"]
        .as_str()
        .expect("model")
        .to_owned();
    Gateway::builder()
        .route(
            Route::new(MINIMAL, plugin)
                .base_url(&upstream.base_url(&first.base_path()))
                .price(&model, PRICE.0, PRICE.1),
        )
        .start()
}

/// The recorded conversation as a request to the minimal route.
fn request(gw: &Gateway, interaction: &Interaction) -> Value {
    let recorded = interaction.request_json();
    let mut body = chat_request_with_params(
        &gw.project_id,
        MINIMAL,
        json!({"type": "chat", "model": recorded["model"]}),
        convert_messages(&recorded["messages"], Style::Commonbase),
    );
    body["showUsage"] = json!(true);
    body
}

#[test]
fn serves_a_chat_with_usage_and_cost() {
    let recording = Recording::load("OpenAI__openai-gpt-4o-mini__simple");
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = gateway(&recording, &upstream);
    let interaction = recording.interaction(0);
    let expected = interaction.answer();
    let body = assert_ok(&post(&gw, "/completions", &request(&gw, interaction)));
    assert_chat_choice(&body, &expected.text, expected.finish_reason.as_deref());
    check_usage(&body, expected.usage, PRICE);
    let sent = upstream.single_request();
    assert_eq!(sent.path, interaction.path());
    let sent: Value = serde_json::from_slice(&sent.body).expect("JSON");
    assert_eq!(sent["messages"], interaction.request_json()["messages"]);
    assert_eq!(sent["stream"], json!(false));
    success_record(&gw, &body, MINIMAL, "minimal");
}

#[test]
fn streams_a_chat_with_usage() {
    let recording = Recording::load("OpenAI__openai-gpt-4o-mini__simple_streaming");
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = gateway(&recording, &upstream);
    let interaction = recording.interaction(0);
    let expected = interaction.answer();
    let mut body = request(&gw, interaction);
    body["stream"] = json!(true);
    let response = post_stream(&gw, &body);
    let (partial, last) = split_stream(&response);
    assert!(partial.len() > 1, "not streamed: {}", response.raw);
    assert_eq!(streamed_text(&partial, 0), expected.text);
    assert_stream_finished(&last, expected.finish_reason.as_deref());
    check_usage(&last, expected.usage, PRICE);
    let sent: Value = serde_json::from_slice(&upstream.single_request().body).expect("JSON");
    assert_eq!(sent["stream"], json!(true));
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    streamed_record(&gw, &last);
}

#[test]
fn sends_a_text_prompt_as_one_user_message() {
    let recording = Recording::load("OpenAI__openai-gpt-4o-mini__simple");
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = gateway(&recording, &upstream);
    let expected = recording.interaction(0).answer();
    let model = recording.interaction(0).request_json()["model"].clone();
    let mut body = text_request(&gw.project_id, MINIMAL, "", "Say hi");
    body["providerConfig"]["params"]["model"] = model;
    let body = assert_ok(&post(&gw, "/completions", &body));
    assert_eq!(body["choices"][0]["text"], json!(expected.text));
    let sent: Value = serde_json::from_slice(&upstream.single_request().body).expect("JSON");
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": "Say hi"}])
    );
}

#[test]
fn the_example_built_outside_against_the_packed_sdk_serves_the_same() {
    let recording = Recording::load("OpenAI__openai-gpt-4o-mini__simple");
    let upstream = OpenAiUpstream::replay(&recording);
    let gw = gateway_of("minimal-outside", &recording, &upstream);
    let interaction = recording.interaction(0);
    let expected = interaction.answer();
    let body = assert_ok(&post(&gw, "/completions", &request(&gw, interaction)));
    assert_chat_choice(&body, &expected.text, expected.finish_reason.as_deref());
    check_usage(&body, expected.usage, PRICE);
    success_record(&gw, &body, MINIMAL, "minimal-outside");
}
