//! Images: the InvokeModel calls of Nova Canvas and Titan Image Generator, run on the SDK's fake
//! host (`gateway_plugin_sdk::testing`), the mapping of the caller's size, quality, `n` and
//! params, and the reading of the answers.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::testing::{self, json};
use gateway_plugin_sdk::{GeneratedImage, ImageRequest, Images, ProviderError, Route, Source};
use gateway_test_support::fixtures::{failed, invalid_request, upstream};
use serde_json::{Value, json};

use super::convert::aws_route;
use crate::Bedrock;
use crate::errors;
use crate::images::{Size, TITAN_SIZES, plan};

const NOVA: &str = "amazon.nova-canvas-v1:0";
const TITAN_V2: &str = "amazon.titan-image-generator-v2:0";
const TITAN_V1: &str = "amazon.titan-image-generator-v1";

const PROMPT: &str = "A lighthouse on a cliff at dusk, oil painting";

/// Two images' bytes, as a model's PNGs would start.
const FIRST: &[u8] = b"\x89PNG\r\n\x1a\nfirst image";
const SECOND: &[u8] = b"\x89PNG\r\n\x1a\nsecond image";

/// Runs Bedrock's `generate_images` on `request` with `upstream` answering its calls, on the
/// SDK's fake host (its check of the route's origin, its record of each request): what it
/// returned, and the requests it sent.
fn run(
    request: ImageRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> (Result<Images, ProviderError>, Vec<Request>) {
    testing::generate_images::<Bedrock>(request, upstream)
}

/// Runs `request` where it must be refused before any call: the refusal.
fn refused(request: ImageRequest) -> String {
    let (refused, sent) = run(request, |request| {
        panic!("no call expected, got {}", request.url())
    });
    assert!(sent.is_empty());
    invalid_request(refused)
}

fn image_request(
    route: Route,
    model: &str,
    n: u32,
    size: Option<&str>,
    quality: Option<&str>,
    params: Value,
) -> ImageRequest {
    ImageRequest {
        route,
        model: model.into(),
        prompt: PROMPT.into(),
        n,
        size: size.map(str::to_owned),
        quality: quality.map(str::to_owned),
        params: params.to_string(),
    }
}

/// One Nova Canvas image at the defaults, on the AWS route, without params.
fn nova_request() -> ImageRequest {
    image_request(aws_route(), NOVA, 1, None, None, json!({}))
}

/// A route whose provider key is a Bedrock API key (no AWS credentials), for us-east-1.
fn api_key_route() -> Route {
    Route {
        id: "bedrock".into(),
        base_url: "https://bedrock-runtime.us-east-1.amazonaws.com".into(),
        api_key: Some("bedrock-api-key-1".into()),
        settings: "{}".into(),
        secrets: Vec::new(),
    }
}

fn body_of(request: &Request) -> Value {
    serde_json::from_slice(request.body_bytes()).expect("a JSON body")
}

/// A 200 answer of `images` (as base64) and `error`, as Nova Canvas and Titan write it.
fn answer(images: &[&[u8]], error: Value) -> Result<Response, ProviderError> {
    let images: Vec<String> = images.iter().map(|bytes| STANDARD.encode(bytes)).collect();
    json(200, &json!({"images": images, "error": error}))
}

fn png(bytes: &[u8]) -> GeneratedImage {
    GeneratedImage {
        source: Source::Bytes(bytes.to_vec()),
        media_type: Some("image/png".into()),
        revised_prompt: None,
    }
}

#[test]
fn nova_canvas_is_one_signed_invoke_model_call() {
    let request = image_request(
        aws_route(),
        NOVA,
        2,
        Some("1280x720"),
        Some("hd"),
        json!({"negative_prompt": "people, text", "seed": 42, "cfg_scale": 6.5,
               "style": "PHOTOREALISM", "response_format": "b64_json", "user": "u-1",
               "output_format": "png", "background": null,
               "taskType": "IMAGE_VARIATION", "imageGenerationConfig": {"width": 1}}),
    );
    let (made, sent) = run(request, |_| answer(&[FIRST, SECOND], Value::Null));

    assert_eq!(sent.len(), 1);
    let call = &sent[0];
    assert_eq!(call.method(), "POST");
    assert_eq!(
        call.url(),
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/amazon.nova-canvas-v1%3A0/invoke"
    );
    assert_eq!(call.header_value("accept"), Some("application/json"));
    assert_eq!(call.header_value("content-type"), Some("application/json"));
    assert_eq!(
        call.header_value("x-amz-security-token"),
        Some("session-token-1")
    );
    let date = call.header_value("x-amz-date").expect("x-amz-date");
    let authorization = call.header_value("authorization").expect("authorization");
    assert!(
        authorization.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/us-west-2/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature=",
            &date[..8]
        )),
        "{authorization}"
    );
    assert_eq!(
        body_of(call),
        json!({
            "taskType": "TEXT_IMAGE",
            "textToImageParams": {
                "text": PROMPT,
                "negativeText": "people, text",
                "style": "PHOTOREALISM",
            },
            "imageGenerationConfig": {
                "numberOfImages": 2,
                "width": 1280,
                "height": 720,
                "quality": "premium",
                "cfgScale": 6.5,
                "seed": 42,
            },
        })
    );

    assert_eq!(
        made.unwrap(),
        Images {
            model: NOVA.into(),
            images: vec![png(FIRST), png(SECOND)],
            usage: None,
            size: Some("1280x720".into()),
            quality: Some("premium".into()),
        }
    );
}

#[test]
fn titan_at_the_defaults_with_an_api_key() {
    for (model, path) in [
        (TITAN_V2, "amazon.titan-image-generator-v2%3A0"),
        (TITAN_V1, "amazon.titan-image-generator-v1"),
    ] {
        let request = image_request(api_key_route(), model, 1, None, None, json!({}));
        let (made, sent) = run(request, |_| {
            // Titan leaves `error` out when all went well.
            json(200, &json!({"images": [STANDARD.encode(FIRST)]}))
        });

        assert_eq!(sent.len(), 1, "{model}");
        let call = &sent[0];
        assert_eq!(
            call.url(),
            format!("https://bedrock-runtime.us-east-1.amazonaws.com/model/{path}/invoke")
        );
        assert_eq!(
            call.header_value("authorization"),
            Some("Bearer bedrock-api-key-1")
        );
        assert_eq!(call.header_value("x-amz-date"), None);
        assert_eq!(
            body_of(call),
            json!({
                "taskType": "TEXT_IMAGE",
                "textToImageParams": {"text": PROMPT},
                "imageGenerationConfig": {
                    "numberOfImages": 1,
                    "width": 1024,
                    "height": 1024,
                    "quality": "standard",
                },
            }),
            "{model}"
        );
        assert_eq!(
            made.unwrap(),
            Images {
                model: model.into(),
                images: vec![png(FIRST)],
                usage: None,
                size: Some("1024x1024".into()),
                quality: Some("standard".into()),
            }
        );
    }
}

#[test]
fn titan_takes_negative_text_seed_and_cfg_scale_but_no_style() {
    let params = json!({"negative_prompt": "blurry", "seed": 7, "cfg_scale": 8.0});
    let request = image_request(aws_route(), TITAN_V2, 3, Some("1173x640"), None, params);
    let planned = plan(&request).unwrap();
    assert_eq!(
        planned.body,
        json!({
            "taskType": "TEXT_IMAGE",
            "textToImageParams": {"text": PROMPT, "negativeText": "blurry"},
            "imageGenerationConfig": {
                "numberOfImages": 3,
                "width": 1173,
                "height": 640,
                "quality": "standard",
                "cfgScale": 8.0,
                "seed": 7,
            },
        })
    );
    assert_eq!(
        planned.size,
        Size {
            width: 1173,
            height: 640
        }
    );

    let styled = image_request(
        aws_route(),
        TITAN_V1,
        1,
        None,
        None,
        json!({"style": "PHOTOREALISM"}),
    );
    let message = refused(styled);
    assert!(
        message.starts_with("style: Titan Image Generator takes no style"),
        "{message}"
    );
    // A null style is no style.
    let unstyled = image_request(aws_route(), TITAN_V1, 1, None, None, json!({"style": null}));
    assert!(plan(&unstyled).is_ok());
}

#[test]
fn nova_sizes_are_its_bounds() {
    let made = |size: Option<&str>| {
        let request = image_request(aws_route(), NOVA, 1, size, None, json!({}));
        plan(&request).map(|planned| planned.size.to_string())
    };
    for (size, expected) in [
        (None, "1024x1024"),
        (Some("auto"), "1024x1024"),
        (Some("320x320"), "320x320"),
        (Some("320x1280"), "320x1280"),
        (Some("4096x1024"), "4096x1024"),
        (Some("2048x2048"), "2048x2048"),
        (Some("1536x1024"), "1536x1024"),
        (Some("1024x1536"), "1024x1536"),
    ] {
        assert_eq!(made(size), Ok(expected.to_owned()), "{size:?}");
    }
    for size in [
        "304x304",   // a side below 320
        "4112x1024", // a side above 4096
        "1000x1000", // not multiples of 16
        "2064x2048", // more than 4,194,304 pixels
        "320x1296",  // taller than 1:4
        "1296x320",  // wider than 4:1
    ] {
        let message = invalid_request(made(Some(size)));
        assert_eq!(
            message,
            format!(
                "size {size}: Nova Canvas makes sides of 320 to 4096 pixels, multiples of 16, \
                 with an aspect ratio from 1:4 to 4:1 and at most 4194304 pixels"
            )
        );
    }
    for size in ["1024", "1024X1024", "x1024", "1024x", "big", "", "-1x1024"] {
        let message = invalid_request(made(Some(size)));
        assert_eq!(
            message,
            format!("size {size:?} is not WIDTHxHEIGHT (such as 1024x1024) or auto")
        );
    }
}

#[test]
fn titan_sizes_are_its_list() {
    let made = |model: &str, size: &str| {
        let request = image_request(aws_route(), model, 1, Some(size), None, json!({}));
        plan(&request).map(|planned| planned.size.to_string())
    };
    for model in [TITAN_V2, TITAN_V1] {
        for &(width, height) in TITAN_SIZES {
            let size = format!("{width}x{height}");
            assert_eq!(made(model, &size), Ok(size.clone()), "{model}");
        }
        for size in ["1280x720", "1408x1408", "2048x2048", "1024x768"] {
            let message = invalid_request(made(model, size));
            assert!(
                message.starts_with(&format!(
                    "size {size}: Titan Image Generator makes only 1024x1024, 768x768, \
                     512x512, 768x1152,"
                )) && message.ends_with(", 1152x640, 1173x640"),
                "{message}"
            );
        }
    }
    assert_eq!(TITAN_SIZES.len(), 25);
}

#[test]
fn quality_is_standard_or_premium() {
    let quality = |model: &str, asked: Option<&str>| {
        let request = image_request(aws_route(), model, 1, None, asked, json!({}));
        plan(&request).map(|planned| {
            let sent = planned.body["imageGenerationConfig"]["quality"].clone();
            assert_eq!(sent, json!(planned.quality));
            planned.quality
        })
    };
    for model in [NOVA, TITAN_V2] {
        for asked in [
            None,
            Some("standard"),
            Some("low"),
            Some("medium"),
            Some("auto"),
        ] {
            assert_eq!(quality(model, asked), Ok("standard"), "{asked:?}");
        }
        for asked in ["hd", "high", "premium"] {
            assert_eq!(quality(model, Some(asked)), Ok("premium"), "{asked}");
        }
        for asked in ["ultra", "HD", ""] {
            let message = invalid_request(quality(model, Some(asked)));
            assert!(
                message.starts_with(&format!("quality {asked:?}: ")),
                "{message}"
            );
            assert!(message.contains("standard") && message.contains("premium"));
        }
    }
}

#[test]
fn n_is_one_to_five_images() {
    for (model, name) in [(NOVA, "Nova Canvas"), (TITAN_V2, "Titan Image Generator")] {
        let request = image_request(aws_route(), model, 5, None, None, json!({}));
        assert_eq!(
            plan(&request).unwrap().body["imageGenerationConfig"]["numberOfImages"],
            json!(5)
        );
        for n in [6, 10, 0] {
            let request = image_request(aws_route(), model, n, None, None, json!({}));
            assert_eq!(
                refused(request),
                format!("n = {n}: {name} makes 1 to 5 images a request")
            );
        }
    }
}

#[test]
fn other_params_pass_for_bedrock_to_judge() {
    let request = image_request(
        aws_route(),
        NOVA,
        1,
        None,
        None,
        json!({"output_format": "PNG", "background": "transparent", "moderation": null}),
    );
    let body = plan(&request).unwrap().body;
    assert_eq!(body["background"], json!("transparent"));
    assert_eq!(body.get("output_format"), None);
    assert_eq!(body.get("moderation"), None);

    for format in [json!("jpeg"), json!("webp"), json!(1)] {
        let request = image_request(
            aws_route(),
            NOVA,
            1,
            None,
            None,
            json!({ "output_format": format }),
        );
        assert_eq!(
            refused(request),
            format!(
                "output_format {format}: Bedrock's image models make PNG only; leave \
                 output_format out or set it to png"
            )
        );
    }
    let request = image_request(
        aws_route(),
        NOVA,
        1,
        None,
        None,
        json!(["not", "an object"]),
    );
    assert_eq!(refused(request), "params must be a JSON object");
}

#[test]
fn an_error_in_the_answer_is_a_refusal() {
    let error = "This request has been blocked by our content filters because the generated \
                 image(s) may conflict with our AUP or AWS Responsible AI Policy.";
    for images in [&[][..], &[FIRST][..]] {
        let (refused, sent) = run(nova_request(), move |_| answer(images, json!(error)));
        assert_eq!(sent.len(), 1);
        assert_eq!(
            invalid_request(refused),
            format!("Bedrock made no images: {error}")
        );
    }
    // An empty error is none.
    let (made, _) = run(nova_request(), |_| answer(&[FIRST], json!("")));
    assert_eq!(made.unwrap().images, vec![png(FIRST)]);
}

fn error_answer(status: u16, kind: &str, message: &str) -> Response {
    Response::from_chunks(
        status,
        vec![
            ("x-amzn-ErrorType".into(), kind.into()),
            ("content-type".into(), "application/json".into()),
            ("Retry-After".into(), "2".into()),
        ],
        vec![json!({ "message": message }).to_string().into_bytes()],
    )
}

#[test]
fn bedrock_errors_are_mapped_as_for_every_call() {
    let filtered = "This request has been blocked by our content filters. Please adjust your \
                    text prompt to submit a new request.";
    let (refused, sent) = run(nova_request(), move |_| {
        Ok(error_answer(400, "ValidationException", filtered))
    });
    assert_eq!(sent.len(), 1);
    assert_eq!(
        invalid_request(refused),
        format!("Bedrock refused the request (ValidationException): {filtered}")
    );

    let cases = [
        (429, "ThrottlingException", "Too many requests"),
        (
            403,
            "AccessDeniedException",
            "You don't have access to the model",
        ),
        (500, "InternalServerException", "Internal server error"),
    ];
    for (status, kind, message) in cases {
        let (failed, _) = run(nova_request(), move |_| {
            Ok(error_answer(status, kind, message))
        });
        assert_eq!(
            failed,
            Err(errors::from_response(error_answer(status, kind, message))),
            "{kind}"
        );
    }
    let (throttled, _) = run(nova_request(), |_| {
        Ok(error_answer(429, "ThrottlingException", "slow down"))
    });
    let throttled = upstream(throttled);
    assert_eq!(
        (throttled.status, throttled.retry_after, throttled.message),
        (429, Some(2), "slow down".to_owned())
    );
}

#[test]
fn answers_without_images_or_base64_are_refused() {
    let cases = [
        (json!({"images": []}), "an answer without images"),
        (
            json!({"images": null, "error": null}),
            "an answer without images",
        ),
        (json!({}), "an answer without images"),
        (
            json!({"images": [STANDARD.encode(FIRST), "not base64!"]}),
            "image 1 is not base64",
        ),
        (json!({"images": [STANDARD.encode(FIRST), 7]}), "malformed"),
        (json!({"images": "one"}), "malformed"),
    ];
    for (body, expected) in cases {
        let (made, _) = run(nova_request(), move |_| json(200, &body));
        let message = failed(made);
        assert!(
            message.starts_with("malformed response from upstream") && message.contains(expected),
            "{expected}: {message}"
        );
    }
    let (made, _) = run(nova_request(), |_| {
        Ok(Response::from_chunks(
            200,
            Vec::new(),
            vec![b"<html>OK</html>".to_vec()],
        ))
    });
    assert!(failed(made).starts_with("malformed response from upstream"));
}

#[test]
fn other_models_make_no_images() {
    for model in [
        "stability.sd3-large-v1:0",
        "amazon.titan-embed-text-v2:0",
        "amazon.nova-pro-v1:0",
        "anthropic.claude-3-haiku",
    ] {
        let request = image_request(aws_route(), model, 1, None, None, json!({}));
        let message = refused(request);
        assert!(
            message.starts_with(&format!("{model} does not make images: "))
                && message.contains(NOVA)
                && message.contains(TITAN_V2)
                && message.contains(TITAN_V1),
            "{message}"
        );
    }
    // Profiles and ARNs name the same models.
    let arn = "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-canvas-v1:0";
    let request = image_request(aws_route(), arn, 1, None, None, json!({}));
    assert!(plan(&request).is_ok());
}

#[test]
fn the_callers_errors_come_before_any_call() {
    // Each refused by the plugin, whatever the route: no call, no credentials read.
    let no_credentials = Route {
        settings:
            r#"{"aws_access_key_id_env": "UNSET_ID", "aws_secret_access_key_env": "UNSET_KEY"}"#
                .into(),
        secrets: Vec::new(),
        ..aws_route()
    };
    for (n, size, quality) in [
        (9, None, None),
        (1, Some("100x100"), None),
        (1, None, Some("best")),
    ] {
        let request = image_request(no_credentials.clone(), NOVA, n, size, quality, json!({}));
        let message = refused(request);
        assert!(
            message.starts_with("n = ")
                || message.starts_with("size ")
                || message.starts_with("quality "),
            "{message}"
        );
    }
}
