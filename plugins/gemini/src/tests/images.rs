//! Images: Imagen's `predict` request and Gemini's image models' `generateContent` request,
//! sent through the SDK's fake host, and the reading of their answers.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::testing::{self, json};
use gateway_plugin_sdk::{GeneratedImage, ImageRequest, Images};

use super::*;

const MODEL: &str = "imagen-4.0-generate-001";

/// The bytes of the images the tests' upstream answers with (any bytes do: the plugin does not
/// look inside them).
const FIRST: &[u8] = b"\x89PNG\r\n\x1a\nfirst";
const SECOND: &[u8] = b"\xff\xd8\xff\xe0second";

fn image_request(model: &str, n: u32, size: Option<&str>, params: &str) -> ImageRequest {
    ImageRequest {
        route: route(),
        model: model.into(),
        prompt: "a red fox in the snow".into(),
        n,
        size: size.map(Into::into),
        quality: None,
        params: params.into(),
    }
}

/// What a run did: the plugin's result and the requests it sent.
struct Run {
    result: Result<Images, ProviderError>,
    sent: Vec<Request>,
}

/// Runs the plugin's `generate_images` of `request` on the SDK's fake host, `status` and `body`
/// answering every request.
fn generate(request: ImageRequest, status: u16, body: Value) -> Run {
    let (result, sent) = testing::generate_images::<Gemini>(request, move |_| json(status, &body));
    Run { result, sent }
}

/// Imagen's answer: one prediction per image, with its media type.
fn predictions(images: &[(&[u8], &str)]) -> Value {
    let predictions: Vec<Value> = images
        .iter()
        .map(|(bytes, mime_type)| {
            json!({"bytesBase64Encoded": STANDARD.encode(bytes), "mimeType": mime_type})
        })
        .collect();
    json!({ "predictions": predictions })
}

/// The body sent for `request` (answered with one image).
fn sent_body(request: ImageRequest) -> Value {
    let run = generate(request, 200, predictions(&[(FIRST, "image/png")]));
    run.result.expect("the request is served");
    let [sent] = run.sent.as_slice() else {
        panic!("one request: {:?}", run.sent)
    };
    json_body(sent)
}

/// The `parameters` sent for `request`.
fn parameters(request: ImageRequest) -> Value {
    sent_body(request)["parameters"].clone()
}

/// The refusal of `request`, checked to send nothing.
fn refusal(request: ImageRequest) -> String {
    let run = generate(request, 200, predictions(&[(FIRST, "image/png")]));
    assert!(run.sent.is_empty(), "nothing is sent: {:?}", run.sent);
    invalid_request(run.result)
}

#[test]
fn imagen_is_asked_with_predict_and_its_images_decoded() {
    let run = generate(
        image_request(MODEL, 2, None, "{}"),
        200,
        predictions(&[(FIRST, "image/png"), (SECOND, "image/jpeg")]),
    );
    let [sent] = run.sent.as_slice() else {
        panic!("one request: {:?}", run.sent)
    };
    assert_eq!(sent.method(), "POST");
    assert_eq!(
        sent.url(),
        "http://127.0.0.1:9/v1beta/models/imagen-4.0-generate-001:predict"
    );
    assert_eq!(sent.header_value("x-goog-api-key"), Some(KEY));
    assert_eq!(sent.header_value("content-type"), Some("application/json"));
    assert!(!sent.url().contains(KEY));
    assert_eq!(
        json_body(sent),
        json!({
            "instances": [{"prompt": "a red fox in the snow"}],
            "parameters": {"sampleCount": 2, "includeRaiReason": true}
        })
    );
    assert_eq!(
        run.result.unwrap(),
        Images {
            model: MODEL.into(),
            images: vec![
                GeneratedImage {
                    source: Source::Bytes(FIRST.to_vec()),
                    media_type: Some("image/png".into()),
                    revised_prompt: None,
                },
                GeneratedImage {
                    source: Source::Bytes(SECOND.to_vec()),
                    media_type: Some("image/jpeg".into()),
                    revised_prompt: None,
                },
            ],
            usage: None,
            // Left to the model: its default, a 1K square.
            size: Some("1024x1024".into()),
            quality: None,
        }
    );
}

#[test]
fn a_model_resource_name_is_taken_and_its_id_encoded() {
    let run = generate(
        image_request("models/imagen-3.0-generate-002", 1, None, "{}"),
        200,
        predictions(&[(FIRST, "image/png")]),
    );
    assert_eq!(
        run.sent[0].url(),
        "http://127.0.0.1:9/v1beta/models/imagen-3.0-generate-002:predict"
    );
    assert_eq!(run.result.unwrap().model, "models/imagen-3.0-generate-002");
}

/// A size asked of a model: (model, size, aspectRatio, sampleImageSize, the size the answer
/// reports).
type SizeCase<'a> = (
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
);

#[test]
fn sizes_are_imagens_aspect_ratios() {
    let cases: &[SizeCase] = &[
        (MODEL, None, None, None, "1024x1024"),
        (MODEL, Some("auto"), None, None, "1024x1024"),
        (MODEL, Some("1024x1024"), Some("1:1"), None, "1024x1024"),
        (MODEL, Some("896x1280"), Some("3:4"), None, "896x1280"),
        (MODEL, Some("1280x896"), Some("4:3"), None, "1280x896"),
        (MODEL, Some("768x1408"), Some("9:16"), None, "768x1408"),
        (MODEL, Some("1408x768"), Some("16:9"), None, "1408x768"),
        // Exactly one of the ratios: Imagen's size of it, reported as asked.
        (MODEL, Some("1920x1080"), Some("16:9"), None, "1920x1080"),
        (MODEL, Some("512x512"), Some("1:1"), None, "512x512"),
        (MODEL, Some("600x800"), Some("3:4"), None, "600x800"),
        // 2K on the models that make it.
        (
            MODEL,
            Some("2048x2048"),
            Some("1:1"),
            Some("2K"),
            "2048x2048",
        ),
        (
            MODEL,
            Some("1792x2560"),
            Some("3:4"),
            Some("2K"),
            "1792x2560",
        ),
        (
            "imagen-4.0-ultra-generate-001",
            Some("2816x1536"),
            Some("16:9"),
            Some("2K"),
            "2816x1536",
        ),
        // Imagen 4 Fast makes no 2K: a square is a square.
        (
            "imagen-4.0-fast-generate-001",
            Some("2048x2048"),
            Some("1:1"),
            None,
            "2048x2048",
        ),
    ];
    for (model, size, ratio, image_size, reported) in cases {
        let request = image_request(model, 1, *size, "{}");
        let run = generate(request, 200, predictions(&[(FIRST, "image/png")]));
        let parameters = &json_body(&run.sent[0])["parameters"];
        let field = |name: &str| parameters.get(name).and_then(Value::as_str);
        assert_eq!(field("aspectRatio"), *ratio, "{model} {size:?}");
        assert_eq!(field("sampleImageSize"), *image_size, "{model} {size:?}");
        let images = run.result.unwrap();
        assert_eq!(images.size.as_deref(), Some(*reported), "{model} {size:?}");
    }
}

#[test]
fn other_sizes_are_refused_with_the_sizes_imagen_takes() {
    for size in [
        "1000x500",
        "1024",
        "big",
        "0x0",
        "1024x",
        "x1024",
        "1024X1024x2",
    ] {
        let message = refusal(image_request(MODEL, 1, Some(size), "{}"));
        assert!(
            message.starts_with(&format!("route `test`: size {size:?}")),
            "{message}"
        );
        assert!(
            message.contains("1024x1024, 896x1280, 1280x896, 768x1408, 1408x768, 2048x2048"),
            "{message}"
        );
    }
    // A 2K size that is no ratio of Imagen's, on a model without 2K.
    let message = refusal(image_request(
        "imagen-3.0-generate-002",
        1,
        Some("1792x2560"),
        "{}",
    ));
    assert!(message.contains("size \"1792x2560\""), "{message}");
    assert!(!message.contains("2048x2048"), "{message}");
}

#[test]
fn the_callers_aspect_ratio_and_image_size_are_over_the_size() {
    let request = image_request(MODEL, 1, Some("1024x1024"), r#"{"aspect_ratio": "16:9"}"#);
    let run = generate(request, 200, predictions(&[(FIRST, "image/png")]));
    assert_eq!(json_body(&run.sent[0])["parameters"]["aspectRatio"], "16:9");
    assert_eq!(run.result.unwrap().size.as_deref(), Some("1408x768"));

    let request = image_request(MODEL, 1, None, r#"{"image_size": "2K"}"#);
    let run = generate(request, 200, predictions(&[(FIRST, "image/png")]));
    assert_eq!(
        json_body(&run.sent[0])["parameters"]["sampleImageSize"],
        "2K"
    );
    assert_eq!(run.result.unwrap().size.as_deref(), Some("2048x2048"));

    // A ratio the plugin does not know is Google's to judge; the answer reports no size of its
    // own.
    let request = image_request(MODEL, 1, None, r#"{"aspectRatio": "21:9"}"#);
    let run = generate(request, 200, predictions(&[(FIRST, "image/png")]));
    assert_eq!(json_body(&run.sent[0])["parameters"]["aspectRatio"], "21:9");
    assert_eq!(run.result.unwrap().size, None);
}

#[test]
fn n_is_one_to_four() {
    for n in 1..=4 {
        let parameters = parameters(image_request(MODEL, n, None, "{}"));
        assert_eq!(parameters["sampleCount"], n);
    }
    for n in [0, 5, 10] {
        let message = refusal(image_request(MODEL, n, None, "{}"));
        assert_eq!(
            message,
            format!("route `test`: n is {n}, but Imagen makes 1 to 4 images a request")
        );
    }
    // `n` is the plugin's to send: the caller's sampleCount does not change it.
    let parameters = parameters(image_request(MODEL, 2, None, r#"{"sampleCount": 4}"#));
    assert_eq!(parameters["sampleCount"], 2);
}

#[test]
fn imagen_has_no_quality_setting() {
    for quality in [None, Some("auto"), Some("standard"), Some("Standard")] {
        let mut request = image_request(MODEL, 1, None, "{}");
        request.quality = quality.map(Into::into);
        let run = generate(request, 200, predictions(&[(FIRST, "image/png")]));
        assert_eq!(run.result.unwrap().quality, None, "{quality:?}");
        assert!(
            json_body(&run.sent[0])["parameters"]
                .get("quality")
                .is_none()
        );
    }
    for quality in ["hd", "high", "low", "premium"] {
        let mut request = image_request(MODEL, 1, None, "{}");
        request.quality = Some(quality.into());
        let message = refusal(request);
        assert!(
            message.starts_with(&format!("route `test`: quality {quality:?}")),
            "{message}"
        );
        assert!(message.contains("2048x2048"), "{message}");
    }
}

#[test]
fn params_go_into_parameters_under_imagens_names() {
    let parameters = parameters(image_request(
        MODEL,
        1,
        None,
        r#"{"person_generation": "allow_adult", "output_format": "jpeg",
            "output_compression": 80, "language": "en", "safety_setting": "block_low_and_above",
            "include_rai_reason": false, "guidanceScale": 7, "sampleImageSize": "1K",
            "response_format": "b64_json", "user": "u-1", "style": null}"#,
    ));
    assert_eq!(
        parameters,
        json!({
            "sampleCount": 1,
            "personGeneration": "allow_adult",
            "outputOptions": {"mimeType": "image/jpeg", "compressionQuality": 80},
            "language": "en",
            "safetySetting": "block_low_and_above",
            "includeRaiReason": false,
            "guidanceScale": 7,
            "sampleImageSize": "1K",
        })
    );
    // A field the plugin does not know is Google's to judge, as in embeddings.
    let parameters = parameters_of(r#"{"newField": {"a": 1}, "output_format": "png"}"#);
    assert_eq!(parameters["newField"], json!({"a": 1}));
    assert_eq!(
        parameters["outputOptions"],
        json!({"mimeType": "image/png"})
    );
}

fn parameters_of(params: &str) -> Value {
    parameters(image_request(MODEL, 1, None, params))
}

#[test]
fn output_formats_are_png_and_jpeg() {
    for (format, mime_type) in [
        ("png", "image/png"),
        ("jpeg", "image/jpeg"),
        ("JPG", "image/jpeg"),
    ] {
        let params = json!({ "output_format": format }).to_string();
        assert_eq!(
            parameters_of(&params)["outputOptions"]["mimeType"],
            mime_type
        );
    }
    for format in [json!("webp"), json!(1)] {
        let params = json!({ "output_format": format }).to_string();
        let message = refusal(image_request(MODEL, 1, None, &params));
        assert!(
            message.starts_with(&format!("route `test`: output_format {format}")),
            "{message}"
        );
    }
    let message = refusal(image_request(MODEL, 1, None, r#"{"outputOptions": "png"}"#));
    assert!(
        message.contains("outputOptions must be an object"),
        "{message}"
    );
}

#[test]
fn what_only_vertex_ai_takes_is_refused_by_name() {
    for name in [
        "negative_prompt",
        "negativePrompt",
        "seed",
        "enhance_prompt",
        "add_watermark",
        "storage_uri",
        "labels",
    ] {
        let params = json!({ name: "x" }).to_string();
        let message = refusal(image_request(MODEL, 1, None, &params));
        assert_eq!(
            message,
            format!(
                "route `test`: {name} is not supported by Imagen on the Gemini API \
                 (Vertex AI takes it)"
            )
        );
    }
}

#[test]
fn models_that_make_no_images_are_refused() {
    for model in ["gemini-2.5-flash", "text-embedding-004", "dall-e-3"] {
        let message = refusal(image_request(model, 1, None, "{}"));
        assert_eq!(
            message,
            format!(
                "{model} is not an image model: the gemini plugin makes images with Imagen \
                 models (e.g. imagen-4.0-generate-001) and Gemini's image models (e.g. \
                 gemini-2.5-flash-image)"
            )
        );
    }
}

#[test]
fn predictions_without_bytes_are_skipped_and_the_enhanced_prompt_kept() {
    let body = json!({"predictions": [
        {"raiFilteredReason": "Your current safety filter threshold filtered out 1 generated images."},
        {"bytesBase64Encoded": STANDARD.encode(FIRST), "prompt": "A red fox in fresh snow, golden hour"},
        // No media type: Imagen's default, PNG.
        {"bytesBase64Encoded": STANDARD.encode(SECOND), "prompt": "a red fox in the snow"},
        {"contentType": "Positive Prompt", "safetyAttributes": {"categories": [], "scores": []}},
    ]});
    let images = generate(image_request(MODEL, 3, None, "{}"), 200, body)
        .result
        .unwrap();
    assert_eq!(
        images.images,
        vec![
            GeneratedImage {
                source: Source::Bytes(FIRST.to_vec()),
                media_type: Some("image/png".into()),
                revised_prompt: Some("A red fox in fresh snow, golden hour".into()),
            },
            GeneratedImage {
                source: Source::Bytes(SECOND.to_vec()),
                media_type: Some("image/png".into()),
                // The caller's own prompt is no rewrite.
                revised_prompt: None,
            },
        ]
    );
}

#[test]
fn an_answer_without_images_is_googles_refusal_with_its_reason() {
    let reason = "Your current safety filter threshold filtered out 2 generated images. You will \
                  not be charged for blocked images. Support codes: 56562880";
    let body = json!({"predictions": [{"raiFilteredReason": reason}]});
    let error = upstream(generate(image_request(MODEL, 2, None, "{}"), 200, body).result);
    assert_eq!(error.status, 400);
    assert_eq!(
        error.message,
        format!("Imagen made no image: its safety filters removed every one ({reason})")
    );
    assert_eq!(error.retry_after, None);

    // Without includeRaiReason Google answers an empty object.
    for body in [
        json!({}),
        json!({"predictions": null}),
        json!({"predictions": []}),
    ] {
        let error = upstream(generate(image_request(MODEL, 1, None, "{}"), 200, body).result);
        assert_eq!(error.status, 400);
        assert!(
            error.message.contains("Google gave no reason"),
            "{}",
            error.message
        );
    }
}

#[test]
fn upstream_errors_are_passed_on() {
    let body = json!({"error": {"code": 429, "message": "Resource has been exhausted",
        "status": "RESOURCE_EXHAUSTED"}});
    let error = upstream(generate(image_request(MODEL, 1, None, "{}"), 429, body).result);
    assert_eq!(error.status, 429);
    assert!(
        error.message.contains("Resource has been exhausted"),
        "{}",
        error.message
    );

    // A refused prompt is Google's 400, the caller's.
    let body = json!({"error": {"code": 400, "message": "The prompt could not be submitted.",
        "status": "INVALID_ARGUMENT"}});
    let error = upstream(generate(image_request(MODEL, 1, None, "{}"), 400, body).result);
    assert_eq!(error.status, 400);

    // A wrong key is the route's: a 401, as for completions.
    let body = json!({"error": {"code": 400, "message": "API key not valid.",
        "status": "INVALID_ARGUMENT", "details": [{"reason": "API_KEY_INVALID"}]}});
    let error = upstream(generate(image_request(MODEL, 1, None, "{}"), 400, body).result);
    assert_eq!(error.status, 401);
}

#[test]
fn answers_that_cannot_be_read_fail() {
    let body =
        json!({"predictions": [{"bytesBase64Encoded": "not base64!", "mimeType": "image/png"}]});
    let message = failed(generate(image_request(MODEL, 1, None, "{}"), 200, body).result);
    assert!(
        message.contains("predictions[0].bytesBase64Encoded"),
        "{message}"
    );
    let body = json!({"predictions": {"bytesBase64Encoded": "AAAA"}});
    failed(generate(image_request(MODEL, 1, None, "{}"), 200, body).result);
    let (result, _) =
        testing::generate_images::<Gemini>(image_request(MODEL, 1, None, "{}"), |_| {
            Ok(response(200, "text/html", &["<html>"]))
        });
    failed(result);
}

#[test]
fn more_images_than_asked_are_cut_to_n() {
    let body = predictions(&[(FIRST, "image/png"), (SECOND, "image/png")]);
    let images = generate(image_request(MODEL, 1, None, "{}"), 200, body)
        .result
        .unwrap();
    assert_eq!(images.images.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Gemini's image models: `generateContent`

const FLASH_IMAGE: &str = "gemini-2.5-flash-image";
const PRO_IMAGE: &str = "gemini-3-pro-image-preview";

/// The tokens Gemini 2.5 Flash Image bills an image at (Google's table).
const IMAGE_TOKENS: u32 = 1290;

/// Gemini's answer: one candidate holding `images` (bytes and media type), with its usage (6
/// prompt tokens, [`IMAGE_TOKENS`] an image).
fn candidates(images: &[(&[u8], &str)]) -> Value {
    let parts: Vec<Value> = images
        .iter()
        .map(|(bytes, mime_type)| {
            json!({"inlineData": {"mimeType": mime_type, "data": STANDARD.encode(bytes)}})
        })
        .collect();
    let output = IMAGE_TOKENS * images.len() as u32;
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": 6, "candidatesTokenCount": output,
            "totalTokenCount": 6 + output,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 6}],
            "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": output}]},
        "modelVersion": FLASH_IMAGE,
        "responseId": "deO6aLeTE4fYvdIPuIm_kQQ",
    })
}

/// The body sent for `request` (answered with one image).
fn sent_generate_body(request: ImageRequest) -> Value {
    let run = generate(request, 200, candidates(&[(FIRST, "image/png")]));
    run.result.expect("the request is served");
    let [sent] = run.sent.as_slice() else {
        panic!("one request: {:?}", run.sent)
    };
    json_body(sent)
}

/// The refusal of `request`, checked to send nothing.
fn generate_refusal(request: ImageRequest) -> String {
    let run = generate(request, 200, candidates(&[(FIRST, "image/png")]));
    assert!(run.sent.is_empty(), "nothing is sent: {:?}", run.sent);
    invalid_request(run.result)
}

/// The upstream error an answer `body` to a Gemini image model's call is read as.
fn unanswered(body: Value) -> UpstreamError {
    upstream(generate(image_request(FLASH_IMAGE, 1, None, "{}"), 200, body).result)
}

#[test]
fn gemini_image_models_are_asked_with_generate_content_and_their_images_read() {
    // Text beside the image, and the drafts a thinking model makes, are not the answer's images.
    let mut answer = candidates(&[(FIRST, "image/png")]);
    let parts = answer["candidates"][0]["content"]["parts"]
        .as_array_mut()
        .unwrap();
    parts.insert(0, json!({"text": "Here is a red fox in the snow."}));
    parts.insert(
        0,
        json!({"thought": true, "inlineData": {"mimeType": "image/jpeg",
                                               "data": STANDARD.encode(SECOND)}}),
    );
    let run = generate(image_request(FLASH_IMAGE, 1, None, "{}"), 200, answer);
    let [sent] = run.sent.as_slice() else {
        panic!("one request: {:?}", run.sent)
    };
    assert_eq!(sent.method(), "POST");
    assert_eq!(
        sent.url(),
        "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash-image:generateContent"
    );
    assert_eq!(sent.header_value("x-goog-api-key"), Some(KEY));
    assert_eq!(sent.header_value("content-type"), Some("application/json"));
    assert!(!sent.url().contains(KEY));
    assert_eq!(
        json_body(sent),
        json!({
            "contents": [{"role": "user", "parts": [{"text": "a red fox in the snow"}]}],
            "generationConfig": {"responseModalities": ["IMAGE"]},
        })
    );
    assert_eq!(
        run.result.unwrap(),
        Images {
            model: FLASH_IMAGE.into(),
            images: vec![GeneratedImage {
                source: Source::Bytes(FIRST.to_vec()),
                media_type: Some("image/png".into()),
                revised_prompt: None,
            }],
            // Billed by tokens: the image is output.
            usage: Some(usage_of(6, IMAGE_TOKENS, 6 + IMAGE_TOKENS, None)),
            // Left to the model: its default, a 1K square.
            size: Some("1024x1024".into()),
            quality: None,
        }
    );

    // A resource name is taken, its id encoded; Gemini 3 Pro Image's thinking is billed as
    // output, as in completions.
    let mut answer = candidates(&[(SECOND, "image/jpeg")]);
    answer["usageMetadata"]["thoughtsTokenCount"] = json!(200);
    answer["usageMetadata"]["totalTokenCount"] = json!(6 + IMAGE_TOKENS + 200);
    let run = generate(
        image_request(&format!("models/{PRO_IMAGE}"), 1, None, "{}"),
        200,
        answer,
    );
    assert_eq!(
        run.sent[0].url(),
        "http://127.0.0.1:9/v1beta/models/gemini-3-pro-image-preview:generateContent"
    );
    let images = run.result.unwrap();
    assert_eq!(images.model, format!("models/{PRO_IMAGE}"));
    assert_eq!(images.images[0].media_type.as_deref(), Some("image/jpeg"));
    assert_eq!(
        images.usage,
        Some(usage_of(
            6,
            IMAGE_TOKENS + 200,
            6 + IMAGE_TOKENS + 200,
            Some(200)
        ))
    );
}

/// A size asked of a Gemini image model: (model, size, aspectRatio, imageSize, the size the
/// answer reports).
type GeminiSizeCase<'a> = (
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
);

#[test]
fn sizes_are_the_gemini_models_aspect_ratios_and_sizes() {
    let other = "gemini-3.1-flash-image-preview";
    let cases: &[GeminiSizeCase] = &[
        (FLASH_IMAGE, None, None, None, Some("1024x1024")),
        (FLASH_IMAGE, Some("auto"), None, None, Some("1024x1024")),
        (
            FLASH_IMAGE,
            Some("1024x1024"),
            Some("1:1"),
            None,
            Some("1024x1024"),
        ),
        // The model's own sizes, which are not all exactly their ratio.
        (
            FLASH_IMAGE,
            Some("1344x768"),
            Some("16:9"),
            None,
            Some("1344x768"),
        ),
        (
            FLASH_IMAGE,
            Some("832x1248"),
            Some("2:3"),
            None,
            Some("832x1248"),
        ),
        (
            FLASH_IMAGE,
            Some("1536x672"),
            Some("21:9"),
            None,
            Some("1536x672"),
        ),
        // Exactly one of the ratios: reported as asked.
        (
            FLASH_IMAGE,
            Some("1536x1024"),
            Some("3:2"),
            None,
            Some("1536x1024"),
        ),
        (
            FLASH_IMAGE,
            Some("800x1000"),
            Some("4:5"),
            None,
            Some("800x1000"),
        ),
        // No 2K on Gemini 2.5 Flash Image: a square is a square.
        (
            FLASH_IMAGE,
            Some("2048x2048"),
            Some("1:1"),
            None,
            Some("2048x2048"),
        ),
        // Gemini 3 Pro Image's 1K, 2K and 4K sizes.
        (PRO_IMAGE, None, None, None, Some("1024x1024")),
        (
            PRO_IMAGE,
            Some("848x1264"),
            Some("2:3"),
            None,
            Some("848x1264"),
        ),
        (
            PRO_IMAGE,
            Some("2048x2048"),
            Some("1:1"),
            Some("2K"),
            Some("2048x2048"),
        ),
        (
            PRO_IMAGE,
            Some("5504x3072"),
            Some("16:9"),
            Some("4K"),
            Some("5504x3072"),
        ),
        // Another model's sizes are not known: its ratios are.
        (other, None, None, None, None),
        (
            other,
            Some("1920x1080"),
            Some("16:9"),
            None,
            Some("1920x1080"),
        ),
    ];
    for (model, size, ratio, image_size, reported) in cases {
        let request = image_request(model, 1, *size, "{}");
        let run = generate(request, 200, candidates(&[(FIRST, "image/png")]));
        let config = &json_body(&run.sent[0])["generationConfig"];
        let field = |name: &str| config["imageConfig"].get(name).and_then(Value::as_str);
        assert_eq!(field("aspectRatio"), *ratio, "{model} {size:?}");
        assert_eq!(field("imageSize"), *image_size, "{model} {size:?}");
        if ratio.is_none() {
            assert!(config.get("imageConfig").is_none(), "{config}");
        }
        let images = run.result.unwrap();
        assert_eq!(images.size.as_deref(), *reported, "{model} {size:?}");
    }
}

#[test]
fn other_sizes_are_refused_with_the_sizes_the_gemini_model_makes() {
    let ratios = "or any width x height of ratio 1:1, 2:3, 3:2, 3:4, 4:3, 4:5, 5:4, 9:16, 16:9 \
                  or 21:9";
    for size in ["1000x300", "1792x1024", "1024", "0x0"] {
        let message = generate_refusal(image_request(FLASH_IMAGE, 1, Some(size), "{}"));
        assert_eq!(
            message,
            format!(
                "route `test`: size {size:?} is not one gemini-2.5-flash-image makes: it takes \
                 auto, 1024x1024, 832x1248, 1248x832, 864x1184, 1184x864, 896x1152, 1152x896, \
                 768x1344, 1344x768, 1536x672, {ratios}"
            )
        );
    }
    let message = generate_refusal(image_request(PRO_IMAGE, 1, Some("1000x300"), "{}"));
    assert!(
        message.contains("1376x768, 1584x672, 2048x2048"),
        "{message}"
    );
    assert!(message.ends_with("6336x2688, or any width x height of ratio 1:1, 2:3, 3:2, 3:4, 4:3, 4:5, 5:4, 9:16, 16:9 or 21:9"), "{message}");
    let message = generate_refusal(image_request(
        "gemini-3.1-flash-image-preview",
        1,
        Some("1000x300"),
        "{}",
    ));
    assert!(
        message.ends_with(&format!("makes: it takes auto, {ratios}")),
        "{message}"
    );
}

#[test]
fn gemini_image_models_make_one_image_a_request() {
    for n in [0, 2, 4] {
        let message = generate_refusal(image_request(FLASH_IMAGE, n, None, "{}"));
        assert_eq!(
            message,
            format!(
                "route `test`: n is {n}, but gemini-2.5-flash-image makes one image a request \
                 (Gemini's image models take no candidateCount above 1): ask n 1"
            )
        );
    }
    // `n` is the plugin's: the caller's candidateCount does not change it.
    let body = sent_generate_body(image_request(
        FLASH_IMAGE,
        1,
        None,
        r#"{"candidateCount": 3, "candidate_count": 2}"#,
    ));
    assert_eq!(
        body["generationConfig"],
        json!({"responseModalities": ["IMAGE"]})
    );

    // More images than asked (interleaved in one answer) are cut to n.
    let body = candidates(&[(FIRST, "image/png"), (SECOND, "image/png")]);
    let images = generate(image_request(FLASH_IMAGE, 1, None, "{}"), 200, body)
        .result
        .unwrap();
    assert_eq!(images.images.len(), 1);
    assert_eq!(images.images[0].source, Source::Bytes(FIRST.to_vec()));
}

#[test]
fn gemini_image_models_have_no_quality_setting() {
    for quality in [None, Some("auto"), Some("standard")] {
        let mut request = image_request(FLASH_IMAGE, 1, None, "{}");
        request.quality = quality.map(Into::into);
        let run = generate(request, 200, candidates(&[(FIRST, "image/png")]));
        assert_eq!(run.result.unwrap().quality, None, "{quality:?}");
    }
    let mut request = image_request(FLASH_IMAGE, 1, None, "{}");
    request.quality = Some("hd".into());
    assert_eq!(
        generate_refusal(request),
        "route `test`: quality \"hd\" is not one gemini-2.5-flash-image takes: it has no quality \
         setting (auto or standard); for 2K or 4K images ask a size such as 2048x2048 or \
         4096x4096 of gemini-3-pro-image-preview"
    );
}

#[test]
fn params_are_image_config_fields_or_generation_config_fields_as_in_completions() {
    let body = sent_generate_body(image_request(
        PRO_IMAGE,
        1,
        Some("1024x1024"),
        r#"{"aspect_ratio": "4:5", "image_size": "2K", "seed": 7, "temperature": 0.5,
            "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT",
                                 "threshold": "BLOCK_ONLY_HIGH"}],
            "thinkingConfig": {"includeThoughts": false},
            "response_format": "b64_json", "user": "u-1", "style": null}"#,
    ));
    assert_eq!(
        body,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "a red fox in the snow"}]}],
            "generationConfig": {
                "responseModalities": ["IMAGE"],
                // The caller's ratio and tier are over the size's.
                "imageConfig": {"aspectRatio": "4:5", "imageSize": "2K"},
                "seed": 7,
                "temperature": 0.5,
                "thinkingConfig": {"includeThoughts": false},
            },
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT",
                                "threshold": "BLOCK_ONLY_HIGH"}],
        })
    );
    let run = generate(
        image_request(
            PRO_IMAGE,
            1,
            Some("1024x1024"),
            r#"{"aspect_ratio": "4:5", "image_size": "2K"}"#,
        ),
        200,
        candidates(&[(FIRST, "image/png")]),
    );
    // The size made: Gemini 3 Pro Image's 4:5 at 2K.
    assert_eq!(run.result.unwrap().size.as_deref(), Some("1856x2304"));

    // An imageConfig object (of its own or in generationConfig) is the starting point; the
    // caller's responseModalities are over the plugin's; a field the plugin does not know is
    // Google's to judge, as in completions.
    for params in [
        r#"{"imageConfig": {"aspectRatio": "3:2"}, "responseModalities": ["TEXT", "IMAGE"],
            "newField": {"a": 1}}"#,
        r#"{"generationConfig": {"imageConfig": {"aspectRatio": "3:2"},
            "responseModalities": ["TEXT", "IMAGE"]}, "newField": {"a": 1}}"#,
    ] {
        let request = image_request(FLASH_IMAGE, 1, Some("1024x1024"), params);
        let run = generate(request, 200, candidates(&[(FIRST, "image/png")]));
        assert_eq!(
            json_body(&run.sent[0])["generationConfig"],
            json!({"responseModalities": ["TEXT", "IMAGE"], "imageConfig": {"aspectRatio": "3:2"},
                   "newField": {"a": 1}}),
            "{params}"
        );
        // The ratio made is not the size's: the model's own size of it.
        assert_eq!(run.result.unwrap().size.as_deref(), Some("1248x832"));
    }
    let message = generate_refusal(image_request(
        FLASH_IMAGE,
        1,
        None,
        r#"{"imageConfig": "3:2"}"#,
    ));
    assert_eq!(message, "route `test`: imageConfig must be an object");
}

#[test]
fn what_only_vertex_ai_takes_of_gemini_image_models_is_refused_by_name() {
    for name in [
        "person_generation",
        "personGeneration",
        "output_format",
        "output_compression",
        "imageOutputOptions",
        "labels",
    ] {
        let params = json!({ name: "x" }).to_string();
        let message = generate_refusal(image_request(FLASH_IMAGE, 1, None, &params));
        assert_eq!(
            message,
            format!(
                "route `test`: {name} is not supported by gemini-2.5-flash-image on the Gemini \
                 API (Vertex AI takes it)"
            )
        );
    }
}

#[test]
fn an_answer_without_an_image_is_googles_refusal_with_its_reason() {
    let cases = [
        // A blocked prompt: no candidate.
        (
            json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                   "usageMetadata": {"promptTokenCount": 6, "totalTokenCount": 6}}),
            "the prompt was blocked: PROHIBITED_CONTENT",
        ),
        (
            json!({"promptFeedback": {"blockReason": "OTHER",
                                      "blockReasonMessage": "The prompt was blocked."}}),
            "the prompt was blocked: OTHER: The prompt was blocked.",
        ),
        // The image was filtered: a candidate without content, or without parts.
        (
            json!({"candidates": [{"finishReason": "IMAGE_SAFETY", "index": 0}]}),
            "IMAGE_SAFETY",
        ),
        (
            json!({"candidates": [{"content": {"parts": []}, "finishReason": "IMAGE_PROHIBITED_CONTENT",
                                   "finishMessage": "Unable to show the generated image."}]}),
            "IMAGE_PROHIBITED_CONTENT: Unable to show the generated image.",
        ),
        // Words instead of a picture, with the words' reason or without one.
        (
            json!({"candidates": [{"content": {"parts": [{"text": "I can't draw that."}]},
                                   "finishReason": "IMAGE_SAFETY"}]}),
            "IMAGE_SAFETY",
        ),
        (
            json!({"candidates": [{"content": {"parts": [{"text": "I can't "}, {"text": "draw that."}]},
                                   "finishReason": "STOP"}]}),
            "it answered text only: \"I can't draw that.\"",
        ),
        // Only a draft made while thinking.
        (
            json!({"candidates": [{"content": {"parts": [{"thought": true, "inlineData":
                {"mimeType": "image/png", "data": STANDARD.encode(FIRST)}}]}, "finishReason": "NO_IMAGE"}]}),
            "NO_IMAGE",
        ),
        (json!({}), "Google gave no reason"),
        (json!({"candidates": null}), "Google gave no reason"),
    ];
    for (body, why) in cases {
        let error = unanswered(body.clone());
        assert_eq!(error.status, 400, "{body}");
        assert_eq!(
            error.message,
            format!("gemini-2.5-flash-image made no image ({why})"),
            "{body}"
        );
        assert_eq!(error.retry_after, None);
    }
}

#[test]
fn gemini_image_errors_are_passed_on_and_bad_answers_fail() {
    let body = json!({"error": {"code": 400, "message": "Multiple candidates is not enabled for \
        models/gemini-2.5-flash-image", "status": "INVALID_ARGUMENT"}});
    let error = upstream(generate(image_request(FLASH_IMAGE, 1, None, "{}"), 400, body).result);
    assert_eq!(error.status, 400);
    assert!(
        error.message.contains("Multiple candidates"),
        "{}",
        error.message
    );
    // A wrong key is the route's: a 401, as for completions.
    let body = json!({"error": {"code": 400, "message": "API key not valid.",
        "status": "INVALID_ARGUMENT", "details": [{"reason": "API_KEY_INVALID"}]}});
    let error = upstream(generate(image_request(FLASH_IMAGE, 1, None, "{}"), 400, body).result);
    assert_eq!(error.status, 401);
    // An error inside a successful answer.
    let body = json!({"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}});
    let error = upstream(generate(image_request(FLASH_IMAGE, 1, None, "{}"), 200, body).result);
    assert_eq!(error.status, 500);

    let mut body = candidates(&[(FIRST, "image/png")]);
    body["candidates"][0]["content"]["parts"][0]["inlineData"]["data"] = json!("not base64!");
    let message = failed(generate(image_request(FLASH_IMAGE, 1, None, "{}"), 200, body).result);
    assert!(
        message.contains("candidates[0].content.parts[0].inlineData.data"),
        "{message}"
    );
    let body = json!({"candidates": {"content": {}}});
    failed(generate(image_request(FLASH_IMAGE, 1, None, "{}"), 200, body).result);
}
