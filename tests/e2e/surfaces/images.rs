//! `POST /v1/images/generations`: OpenAI's image API over the openai plugin (DALL-E by the
//! image, GPT Image by tokens, the fake as strict as OpenAI's reference about the body's keys),
//! answered in OpenAI's shape, recorded (type `images`) with the images made and never their
//! bytes, priced by the image at its size and quality. Bedrock's, Gemini's and Vertex's image
//! models are in `providers::*`; the official OpenAI client in `tests/clients/test_openai.py`.

use base64::Engine as _;
use gateway_test_support::upstream::{FAKE_IMAGE_TOKENS, fake_png};
use gateway_test_support::{Gateway, OpenAiUpstream, Reply, Response, Route};
use serde_json::{Value, json};

const PROVIDER_KEY: &str = "images-caller-key-0123456789";
const PROMPT: &str = "a lighthouse at dawn";

fn generate(gw: &Gateway, body: &Value) -> Response {
    gw.post_with_headers(
        "/v1/images/generations",
        Some(&gw.key),
        &[("Provider-API-Key", PROVIDER_KEY)],
        body,
    )
}

fn invocation(response: &Response) -> String {
    response
        .header("x-invocation-id")
        .unwrap_or_else(|| panic!("no invocation id: {:?}", response.headers))
        .to_owned()
}

fn decoded(text: &Value) -> Vec<u8> {
    let text = text
        .as_str()
        .unwrap_or_else(|| panic!("not base64: {text}"));
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("base64")
}

fn cost_header(response: &Response) -> f64 {
    let header = response.header("x-gateway-cost-usd").map(str::parse::<f64>);
    header.and_then(Result::ok).expect("the cost header")
}

#[test]
fn dall_e_s_images_are_answered_in_openai_s_shape_recorded_without_bytes_and_priced_by_size() {
    use gateway_test_support::scrape::{scrape, value};
    let upstream = OpenAiUpstream::start();
    // No route price: DALL-E 3's come from the shipped table, by size and quality.
    let gw = Gateway::builder()
        .route(Route::openai("openai", &upstream.base_url("/v1")).default_model("dall-e-3"))
        .start();
    let body = json!({
        "model": "openai/dall-e-3", "prompt": PROMPT, "size": "1024x1792", "quality": "hd",
        "style": "natural", "response_format": "b64_json", "user": "user-7",
    });
    let response = generate(&gw, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    let png = fake_png(&format!("{PROMPT}#0"));
    assert_eq!(decoded(&answer["data"][0]["b64_json"]), png, "{answer}");
    assert_eq!(
        answer["data"][0]["revised_prompt"],
        json!(format!("{PROMPT}, in fine detail"))
    );
    assert_eq!(answer["data"].as_array().map(Vec::len), Some(1));
    assert!(answer["created"].as_u64().is_some(), "{answer}");
    assert_eq!(
        (&answer["size"], &answer["quality"]),
        (&json!("1024x1792"), &json!("hd"))
    );
    assert!(
        answer.get("usage").is_none(),
        "DALL-E counts no tokens: {answer}"
    );

    let sent = upstream.single_request();
    sent.assert_json_post("/v1/images/generations");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    assert_eq!(
        sent.json(),
        json!({"model": "dall-e-3", "prompt": PROMPT, "size": "1024x1792", "quality": "hd",
               "style": "natural", "response_format": "b64_json", "user": "user-7"})
    );

    let id = invocation(&response);
    let record = gw.record(&id);
    assert_eq!(record["type"], json!("images"), "{record}");
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["userId"], json!("user-7"), "{record}");
    assert_eq!(record["usage"]["images"], json!(1), "{record}");
    assert_eq!(record["usageCost"], json!(0.12), "hd 1024x1792: {record}");
    assert_eq!(cost_header(&response), 0.12);
    // The record has what the image was, never its bytes.
    let kept = &record["response"];
    let summary = &kept["data"][0]["b64_json"];
    assert_eq!(summary["kind"], json!("image"), "{kept}");
    assert_eq!(summary["media_type"], json!("image/png"));
    assert_eq!(summary["bytes"], json!(png.len()));
    assert_eq!(summary["sha256"].as_str().map(str::len), Some(64));
    let b64 = answer["data"][0]["b64_json"].as_str().unwrap_or_default();
    assert!(!record.to_string().contains(b64), "{record}");

    let samples = scrape(&gw, None);
    let labels = [("route", "openai"), ("model", "dall-e-3")];
    assert_eq!(value(&samples, "gateway_images_total", &labels), 1.0);
    assert_eq!(value(&samples, "gateway_cost_usd_total", &labels), 0.12);
}

#[test]
fn gpt_image_s_images_are_priced_by_their_tokens_and_a_route_s_image_price_comes_first() {
    let upstream = OpenAiUpstream::start();
    let pricing = r#"{ "dall-e-2 512x512" = { input_per_mtok = 0.0, output_per_mtok = 0.0, per_image = 0.5 } }"#;
    let gw = Gateway::builder()
        .route(Route::openai("openai", &upstream.base_url("/v1")).key("pricing", pricing))
        .start();
    let body =
        json!({"model": "openai/gpt-image-1", "prompt": PROMPT, "n": 2, "output_format": "webp"});
    let response = generate(&gw, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    let images = answer["data"].as_array().expect("data");
    assert_eq!(images.len(), 2);
    for (i, image) in images.iter().enumerate() {
        assert_eq!(
            decoded(&image["b64_json"]),
            fake_png(&format!("{PROMPT}#{i}"))
        );
    }
    let words = PROMPT.split_whitespace().count() as u64;
    let output = 2 * FAKE_IMAGE_TOKENS;
    assert_eq!(
        answer["usage"],
        json!({"input_tokens": words, "output_tokens": output, "total_tokens": words + output,
               "input_tokens_details": {"text_tokens": words, "image_tokens": 0}}),
    );
    assert_eq!(answer["quality"], json!("medium"));
    let record = gw.record(&invocation(&response));
    assert_eq!(record["usage"]["images"], json!(2), "{record}");
    assert_eq!(
        record["usage"]["completion_tokens"],
        json!(output),
        "{record}"
    );
    let kept = &record["response"]["data"][1]["b64_json"];
    assert_eq!(kept["media_type"], json!("image/webp"), "{record}");
    // The shipped gpt-image-1 price: $5 a million prompt tokens, $40 a million output tokens.
    let expected = (words as f64 * 5.0 + output as f64 * 40.0) / 1e6;
    let cost = record["usageCost"].as_f64().expect("a cost");
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");

    // A route's entry for a size wins over the shipped table's.
    let body = json!({"model": "openai/dall-e-2", "prompt": PROMPT, "size": "512x512", "n": 3});
    let response = generate(&gw, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let record = gw.record(&invocation(&response));
    assert_eq!(record["usage"]["images"], json!(3), "{record}");
    assert_eq!(record["usageCost"], json!(1.5), "{record}");
}

#[test]
fn a_provider_s_urls_are_answered_as_they_are() {
    let upstream = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(Route::openai("openai", &upstream.base_url("/v1")))
        .start();
    let body =
        json!({"model": "openai/dall-e-2", "prompt": PROMPT, "n": 2, "response_format": "url"});
    let response = generate(&gw, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(
        answer["data"],
        json!([{"url": "https://images.fake-openai.test/0.png"},
               {"url": "https://images.fake-openai.test/1.png"}])
    );
    assert_eq!(
        upstream.single_request().json()["response_format"],
        json!("url")
    );
    let record = gw.record(&invocation(&response));
    assert_eq!(record["usage"]["images"], json!(2), "{record}");
    assert_eq!(
        record["usageCost"],
        json!(0.04),
        "two 1024x1024 images: {record}"
    );
}

#[test]
fn a_bad_image_body_is_a_400_naming_the_field_and_is_recorded() {
    let upstream = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(Route::openai("openai", &upstream.base_url("/v1")))
        .start();
    for (body, param) in [
        (json!({"model": "openai/dall-e-2"}), "prompt"),
        (json!({"model": "openai/dall-e-2", "prompt": " "}), "prompt"),
        (
            json!({"model": "openai/dall-e-2", "prompt": "a", "n": 0}),
            "n",
        ),
        (
            json!({"model": "openai/dall-e-2", "prompt": "a", "n": 11}),
            "n",
        ),
        (
            json!({"model": "openai/dall-e-2", "prompt": "a", "n": "2"}),
            "n",
        ),
        (
            json!({"model": "openai/dall-e-2", "prompt": "a", "stream": true}),
            "stream",
        ),
        (
            json!({"model": "openai/dall-e-2", "prompt": "a", "response_format": "png"}),
            "response_format",
        ),
        (json!({"prompt": "a"}), "model"),
    ] {
        let response = generate(&gw, &body);
        assert_eq!(response.status, 400, "{body}: {}", response.text());
        let error = response.json();
        assert_eq!(error["error"]["param"], json!(param), "{body}: {error}");
        let record = gw.record(&invocation(&response));
        assert_eq!(record["status"], json!("error"), "{record}");
    }
    // Not JSON at all (a form, as the edits endpoint takes): a 400 with its invocation id.
    let form = b"model=openai%2Fdall-e-2&prompt=a";
    let response = gw.request("POST", "/v1/images/generations", Some(&gw.key), &[], form);
    assert_eq!(response.status, 400, "{}", response.text());
    invocation(&response);
    assert!(upstream.requests().is_empty(), "nothing went upstream");
}

#[test]
fn a_route_whose_plugin_makes_no_images_says_so_and_a_provider_s_refusal_is_the_caller_s() {
    let upstream = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(Route::openai("openai", &upstream.base_url("/v1")))
        .route(Route::echo("demo"))
        .start();
    let response = generate(&gw, &json!({"model": "demo/echo", "prompt": PROMPT}));
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response
            .text()
            .contains("does not support image generation"),
        "{}",
        response.text()
    );
    let record = gw.record(&invocation(&response));
    assert_eq!(record["type"], json!("images"), "{record}");

    // OpenAI's safety system refuses a prompt: its 400 and message reach the caller.
    let response = generate(
        &gw,
        &json!({"model": "openai/dall-e-2", "prompt": "refuse me"}),
    );
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("safety system"),
        "{}",
        response.text()
    );
    let record = gw.record(&invocation(&response));
    assert_eq!(record["status"], json!("error"), "{record}");
    assert!(
        record["usage"].is_null(),
        "nothing made, nothing billed: {record}"
    );
}

#[test]
fn more_images_than_asked_or_none_is_a_502() {
    for data in [
        json!([{"b64_json": "AAAA"}, {"b64_json": "AAAA"}]),
        json!([]),
    ] {
        let upstream =
            OpenAiUpstream::always(Reply::json(200, &json!({"created": 1, "data": data})));
        let gw = Gateway::builder()
            .route(Route::openai("r", &upstream.base_url("/v1")))
            .start();
        let response = generate(&gw, &json!({"model": "r/dall-e-2", "prompt": PROMPT}));
        assert_eq!(response.status, 502, "{data}: {}", response.text());
        assert!(
            response.text().contains("for a request of 1"),
            "{}",
            response.text()
        );
    }
}

#[test]
fn an_image_prompt_goes_through_the_guards() {
    let upstream = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(Route::openai("r", &upstream.base_url("/v1")).key("guards", r#"["pii"]"#))
        .guard("pii", "pii-guard", "")
        .start();
    let body = json!({"model": "r/dall-e-2", "prompt": "a card for jane.doe@example.com"});
    let response = generate(&gw, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = upstream.single_request().json();
    assert_eq!(sent["prompt"], json!("a card for [EMAIL]"), "{sent}");
    let record = gw.record(&invocation(&response));
    assert_eq!(record["guards"][0]["verdict"], json!("rewrite"), "{record}");
}
