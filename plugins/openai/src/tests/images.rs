//! Image generation: the upstream request (OpenAI's and an Azure deployment's), sent through
//! the SDK's fake host, and the reading of its answers (bytes, URLs, GPT Image's usage).

use base64::Engine as _;
use gateway_plugin_sdk::testing::{self, json};
use gateway_plugin_sdk::{GeneratedImage, ImageRequest, Images, TokenCounts, Usage};
use gateway_test_support::fixtures::upstream;

use super::*;

fn image_request(base_url: &str, settings: &str) -> ImageRequest {
    ImageRequest {
        route: Route {
            id: "images".into(),
            base_url: base_url.into(),
            api_key: Some("sk-test".into()),
            settings: settings.into(),
            secrets: Vec::new(),
        },
        model: "dall-e-3".into(),
        prompt: "A lighthouse at dawn".into(),
        n: 1,
        size: Some("1024x1792".into()),
        quality: Some("hd".into()),
        params: "{}".into(),
    }
}

/// What an image generation did: the plugin's result and the requests it sent.
struct Run {
    result: Result<Images, ProviderError>,
    sent: Vec<Request>,
}

fn generate(
    request: ImageRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> Run {
    let (result, sent) = testing::generate_images::<OpenAi>(request, upstream);
    Run { result, sent }
}

fn only(run: &Run) -> &Request {
    let [sent] = run.sent.as_slice() else {
        panic!("one request: {:?}", run.sent)
    };
    sent
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn dall_e_s_request_carries_the_caller_s_keys_and_its_answer_is_read_as_bytes() {
    let mut request = image_request("https://api.openai.com/v1", "{}");
    // Keys the plugin sets are not the caller's to change; the others pass as they are.
    request.params =
        r#"{"style":"natural","response_format":"b64_json","model":"evil","n":7}"#.into();
    let run = generate(request, |_| {
        json(
            200,
            &json!({
                "created": 1_713_833_628,
                "data": [{"b64_json": b64(b"\x89PNG one"), "revised_prompt": "A red lighthouse"}]
            }),
        )
    });
    let sent = only(&run);
    assert_eq!(sent.method(), "POST");
    assert_eq!(sent.url(), "https://api.openai.com/v1/images/generations");
    assert_eq!(sent.header_value("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        super::sent(sent),
        json!({
            "model": "dall-e-3",
            "prompt": "A lighthouse at dawn",
            "size": "1024x1792",
            "quality": "hd",
            "style": "natural",
            "response_format": "b64_json"
        }),
        "n = 1 is left out: DALL-E 3 takes no other"
    );
    assert_eq!(
        run.result.expect("images"),
        Images {
            model: "dall-e-3".into(),
            images: vec![GeneratedImage {
                source: Source::Bytes(b"\x89PNG one".to_vec()),
                media_type: Some("image/png".into()),
                revised_prompt: Some("A red lighthouse".into()),
            }],
            usage: None,
            size: Some("1024x1792".into()),
            quality: Some("hd".into()),
        }
    );
}

#[test]
fn gpt_image_s_tokens_size_quality_and_format_are_read() {
    let mut request = image_request("https://api.openai.com/v1", "{}");
    request.model = "gpt-image-1".into();
    request.n = 2;
    request.size = None;
    request.quality = None;
    request.params = r#"{"output_format":"webp","background":"transparent"}"#.into();
    let run = generate(request, |_| {
        json(
            200,
            &json!({
                "created": 1,
                "data": [{"b64_json": b64(b"one")}, {"b64_json": b64(b"two")}],
                "size": "1024x1024",
                "quality": "medium",
                "usage": {
                    "total_tokens": 2150, "input_tokens": 50, "output_tokens": 2100,
                    "input_tokens_details": {"text_tokens": 40, "image_tokens": 10}
                }
            }),
        )
    });
    let body = super::sent(only(&run));
    assert_eq!(body["n"], json!(2));
    assert_eq!(body["output_format"], json!("webp"));
    assert!(body.get("size").is_none() && body.get("quality").is_none());
    let images = run.result.expect("images");
    let media: Vec<_> = images
        .images
        .iter()
        .map(|i| i.media_type.as_deref())
        .collect();
    assert_eq!(media, [Some("image/webp"), Some("image/webp")]);
    assert_eq!(
        images.usage,
        Some(Usage::counted(TokenCounts {
            prompt: Some(50),
            completion: Some(2100),
            total: Some(2150),
            image_prompt: Some(10),
            ..TokenCounts::default()
        }))
    );
    assert_eq!(
        (images.size.as_deref(), images.quality.as_deref()),
        (Some("1024x1024"), Some("medium"))
    );
}

#[test]
fn a_url_answer_is_kept_as_the_provider_s_url() {
    let mut request = image_request("https://api.openai.com/v1", "{}");
    request.params = r#"{"response_format":"url"}"#.into();
    let run = generate(request, |_| {
        json(
            200,
            &json!({"created": 1, "data": [{"url": "https://files.example/img.png?sig=x"}]}),
        )
    });
    let image = &run.result.expect("images").images[0];
    assert_eq!(
        image.source,
        Source::Url("https://files.example/img.png?sig=x".into())
    );
    assert_eq!(image.media_type, None);
}

#[test]
fn an_azure_deployment_serves_images_at_its_own_url() {
    let request = image_request(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2025-04-01-preview"}"#,
    );
    let run = generate(request, |_| {
        json(
            200,
            &json!({"created": 1, "data": [{"b64_json": b64(b"x")}]}),
        )
    });
    let sent = only(&run);
    assert_eq!(
        sent.url(),
        "https://res.openai.azure.com/openai/deployments/dall-e-3/images/generations?api-version=2025-04-01-preview"
    );
    assert_eq!(sent.header_value("api-key"), Some("sk-test"));
    assert!(run.result.is_ok());
}

#[test]
fn errors_and_answers_that_are_not_images_are_refused() {
    // A refusal by the provider's safety system keeps its status and message.
    let run = generate(image_request("https://api.openai.com/v1", "{}"), |_| {
        json(
            400,
            &json!({"error": {"code": "content_policy_violation", "type": "invalid_request_error",
                "message": "Your request was rejected as a result of our safety system."}}),
        )
    });
    let error = upstream(run.result);
    assert_eq!(error.status, 400);
    assert!(error.message.contains("safety system"), "{}", error.message);
    for (body, why) in [
        (
            json!({"created": 1, "data": [{"b64_json": "not base64!"}]}),
            "not base64",
        ),
        (
            json!({"created": 1, "data": [{"revised_prompt": "x"}]}),
            "neither",
        ),
        (json!({"created": 1}), "without `data`"),
    ] {
        let run = generate(
            image_request("https://api.openai.com/v1", "{}"),
            move |_| json(200, &body),
        );
        match run.result {
            Err(ProviderError::Failed(message)) => assert!(message.contains(why), "{message}"),
            other => panic!("{why}: {other:?}"),
        }
    }
}
