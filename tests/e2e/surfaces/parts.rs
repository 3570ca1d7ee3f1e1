//! Images, audio and documents: read by the surfaces (OpenAI chat `content` arrays, the
//! Commonbase API's messages), bounded by `max_part_bytes`, translated by each provider
//! plugin into its wire format (checked on the body the fake upstream received), and refused
//! with 400 by plugins of the 0.1 line, which take text only.

use gateway_test_support::{
    AnthropicUpstream, Gateway, GeminiUpstream, OpenAiUpstream, Recording, Reply, Response, Route,
    assert_ok, chat_request, post_with_provider_key, text_request,
};
use serde_json::{Value, json};

/// `hi!` as base64: three bytes.
const PNG_DATA: &str = "data:image/png;base64,aGkh";

/// The JSON of a 200 answer.
fn ok(response: &Response) -> Value {
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

fn post_openai(gw: &Gateway, body: &Value) -> Response {
    gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[
            ("Authorization", &format!("Bearer {}", gw.key)),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

/// A user message with text, an image, an audio clip and a PDF, in OpenAI's shape.
fn media_message() -> Value {
    json!({"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": PNG_DATA, "detail": "low"}},
        {"type": "input_audio", "input_audio": {"data": "aGk=", "format": "wav"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERg==", "filename": "a.pdf"}},
    ]})
}

const ECHOED: &str = "What is this? [image image/png, 3 bytes] [audio wav, 2 bytes] \
                      [document application/pdf, 4 bytes]";

#[test]
fn parts_reach_the_plugin_from_the_openai_and_commonbase_surfaces() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let chat = json!({"model": "demo/echo", "messages": [media_message()]});
    let answer = ok(&post_openai(&gw, &chat));
    assert_eq!(answer["choices"][0]["message"]["content"], ECHOED);

    let commonbase = chat_request(&gw.project_id, "demo", "echo", json!([media_message()]));
    let answer = assert_ok(&gw.post("/completions", &commonbase));
    assert_eq!(answer["choices"][0]["text"], ECHOED);
}

#[test]
fn a_part_over_max_part_bytes_is_413_and_one_under_it_is_served() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("max_part_bytes = 3")
        .start();
    let image = |url: &str| {
        json!({"model": "demo/echo", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}]}]})
    };
    ok(&post_openai(&gw, &image(PNG_DATA)));
    let over = post_openai(&gw, &image("data:image/png;base64,aGkhIQ=="));
    assert_eq!(over.status, 413, "{}", over.text());
    let error = over.json();
    assert_eq!(
        error["error"]["param"], "messages[0].content[0].image_url.url",
        "{error}"
    );
    assert!(over.header("x-invocation-id").is_some(), "{error}");
}

/// Sends [`media_message`] without its audio (which not every provider takes) to `route`.
fn send_media(gw: &Gateway, route: &str, model: &str, provider_key: &str) {
    let mut message = media_message();
    message["content"].as_array_mut().unwrap().remove(2);
    let request = chat_request(&gw.project_id, route, model, json!([message]));
    assert_ok(&post_with_provider_key(
        gw,
        "/completions",
        provider_key,
        &request,
    ));
}

#[test]
fn each_provider_plugin_sends_parts_in_its_wire_format() {
    let openai = OpenAiUpstream::script(vec![Reply::recorded(
        Recording::load("OpenAI__openai-gpt-4o-mini__simple").interaction(0),
    )]);
    let anthropic = AnthropicUpstream::script(vec![Reply::recorded(
        Recording::load("Anthropic__claude-sonnet-4__simple").interaction(0),
    )]);
    let gemini = GeminiUpstream::script(vec![Reply::recorded(
        Recording::load("Google__gemini-2.5-flash__simple").interaction(0),
    )]);
    let gw = Gateway::builder()
        .route(Route::openai("oa", &openai.base_url("/v1")))
        .route(Route::new("an", "anthropic").base_url(&anthropic.base_url("/v1")))
        .route(Route::new("ge", "gemini").base_url(&gemini.base_url("/v1beta")))
        .start();

    send_media(&gw, "oa", "gpt-4o-mini", "sk-test");
    let sent = openai.single_request().json();
    assert_eq!(
        sent["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": PNG_DATA, "detail": "low"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERg==", "filename": "a.pdf"}},
        ]),
        "{sent}"
    );

    send_media(&gw, "an", "claude-sonnet-4-20250514", "sk-ant-test");
    let sent = anthropic.single_request().json();
    let blocks = &sent["messages"][0]["content"];
    assert_eq!(
        blocks[0],
        json!({"type": "text", "text": "What is this?"}),
        "{sent}"
    );
    assert_eq!(
        blocks[1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGkh"}}),
        "{sent}"
    );
    assert_eq!(blocks[2]["type"], "document", "{sent}");
    assert_eq!(
        blocks[2]["source"],
        json!({"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}),
        "{sent}"
    );

    send_media(&gw, "ge", "gemini-2.5-flash", "AIza-test");
    let sent = gemini.single_request().json();
    let parts = &sent["contents"][0]["parts"];
    assert_eq!(parts[0], json!({"text": "What is this?"}), "{sent}");
    assert_eq!(
        parts[1],
        json!({"inlineData": {"mimeType": "image/png", "data": "aGkh"}}),
        "{sent}"
    );
    assert_eq!(
        parts[2],
        json!({"inlineData": {"mimeType": "application/pdf", "data": "JVBERg=="}}),
        "{sent}"
    );
}

#[test]
fn a_provider_refuses_with_400_the_parts_it_cannot_take() {
    let anthropic = AnthropicUpstream::start();
    let gw = Gateway::builder()
        .route(Route::new("an", "anthropic").base_url(&anthropic.base_url("/v1")))
        .start();
    let request = chat_request(
        &gw.project_id,
        "an",
        "claude-sonnet-4-20250514",
        json!([media_message()]),
    );
    let refused = post_with_provider_key(&gw, "/completions", "sk-ant-test", &request);
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(refused.text().contains("audio"), "{}", refused.text());
    assert_eq!(anthropic.request_count(), 0);
}

/// `legacy.wasm` is built against the frozen 0.1.0 world, `legacy012.wasm` against 0.1.2;
/// the host serves the 0.2 line and keeps the 0.1 bindings, converting at the edge.
#[test]
fn plugins_of_the_0_1_line_serve_text_and_refuse_media_naming_themselves() {
    let gw = Gateway::builder()
        .route(Route::new("old", "legacy"))
        .route(Route::new("old012", "legacy012"))
        .start();
    for (route, plugin) in [("old", "legacy"), ("old012", "legacy012")] {
        let answer = assert_ok(&gw.post(
            "/completions",
            &text_request(&gw.project_id, route, plugin, "hello"),
        ));
        assert_eq!(answer["choices"][0]["text"], format!("{plugin}: hello"));

        let texts = json!([{"role": "user", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]);
        let answer = assert_ok(&gw.post(
            "/completions",
            &chat_request(&gw.project_id, route, plugin, texts),
        ));
        assert_eq!(answer["choices"][0]["text"], format!("{plugin}: a\nb"));

        let refused = gw.post(
            "/completions",
            &chat_request(&gw.project_id, route, plugin, json!([media_message()])),
        );
        assert_eq!(refused.status, 400, "{}", refused.text());
        let text = refused.text();
        assert!(
            text.contains(&format!("`{plugin}`")) && text.contains("image parts"),
            "{text}"
        );
    }

    // 0.1.2's `send-tool-calls` still reaches a streaming caller.
    let mut streamed = json!({"model": "old012/legacy012", "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]});
    let answer = post_openai(&gw, &streamed);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let text = answer.text();
    assert!(
        text.contains("call_legacy012") && text.contains("lookup"),
        "{text}"
    );
    streamed["stream"] = json!(false);
    ok(&post_openai(&gw, &streamed));
}

/// Anthropic's image and document blocks (base64 and URL sources) and a failed tool result
/// with an image, through the Anthropic surface to an Anthropic route (as they came) and to a
/// Gemini route (`inlineData`, `fileData`, `functionResponse.error`).
#[test]
fn anthropic_media_blocks_reach_every_provider() {
    use gateway_test_support::anthropic_client::post_messages;
    let anthropic = AnthropicUpstream::each_call(Reply::recorded(
        Recording::load("Anthropic__claude-sonnet-4__simple").interaction(0),
    ));
    let gemini = GeminiUpstream::each_call(Reply::recorded(
        Recording::load("Google__gemini-2.5-flash__simple").interaction(0),
    ));
    let gw = Gateway::builder()
        .route(Route::new("an", "anthropic").base_url(&anthropic.base_url("/v1")))
        .route(Route::new("ge", "gemini").base_url(&gemini.base_url("/v1beta")))
        .start();
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGkh"}});
    let pdf = json!({"type": "document", "title": "Report",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}});
    let remote =
        json!({"type": "image", "source": {"type": "url", "url": "https://x.test/cat.jpg"}});
    let body = |model: &str| {
        json!({"model": model, "max_tokens": 100, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Compare"}, image, pdf, remote]}]})
    };
    let headers = [("Provider-API-Key", "sk-test")];

    let answer = post_messages(&gw, &headers, &body("an/claude-sonnet-4-20250514"));
    assert_eq!(answer.status, 200, "{}", answer.text());
    let sent = anthropic.single_request().json();
    assert_eq!(
        sent["messages"][0]["content"],
        json!([{"type": "text", "text": "Compare"}, image, pdf, remote]),
        "{sent}"
    );

    let answer = post_messages(&gw, &headers, &body("ge/gemini-2.5-flash"));
    assert_eq!(answer.status, 200, "{}", answer.text());
    let sent = gemini.single_request().json();
    assert_eq!(
        sent["contents"][0]["parts"],
        json!([{"text": "Compare"},
            {"inlineData": {"mimeType": "image/png", "data": "aGkh"}},
            {"inlineData": {"mimeType": "application/pdf", "data": "JVBERg=="}},
            {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://x.test/cat.jpg"}}]),
        "{sent}"
    );

    // A source the gateway cannot hand over is a 400 naming it.
    let mut refused = body("an/claude-sonnet-4-20250514");
    refused["messages"][0]["content"][1]["source"] = json!({"type": "file", "file_id": "file_1"});
    let answer = post_messages(&gw, &headers, &refused);
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(
        answer.text().contains("messages[0].content[1].source.type"),
        "{}",
        answer.text()
    );
}

/// With `record_bodies = "truncated"` (the default) a record keeps each media payload as
/// `{kind, media_type, bytes, sha256}`, never its bytes; `full` keeps the body as it came.
#[test]
fn records_keep_a_summary_of_media_never_their_bytes() {
    use base64::Engine as _;
    let bytes: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let body = json!({"model": "demo/echo", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}},
        {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}]}]});
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let answer = post_openai(&gw, &body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let id = answer
        .header("x-invocation-id")
        .expect("x-invocation-id")
        .to_owned();
    let record = gw.record(&id);
    // The record shows a JSON body as JSON.
    let kept = &record["request"];
    assert!(kept.is_object(), "{record}");
    assert!(!kept.to_string().contains(&data[..100]), "{kept}");
    let content = &kept["messages"][0]["content"];
    assert_eq!(content[0]["text"], "see");
    let image = &content[1]["image_url"]["url"];
    assert_eq!(image["kind"], "image", "{kept}");
    assert_eq!(image["media_type"], "image/png");
    assert_eq!(image["bytes"], 3000);
    assert_eq!(image["sha256"].as_str().map(str::len), Some(64));
    assert_eq!(content[2]["input_audio"]["data"]["kind"], "audio", "{kept}");
    assert_eq!(content[2]["input_audio"]["data"]["sha256"], image["sha256"]);

    let full = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("record_bodies = \"full\"")
        .start();
    let answer = post_openai(&full, &body);
    let id = answer
        .header("x-invocation-id")
        .expect("x-invocation-id")
        .to_owned();
    let record = full.record(&id);
    assert!(record["request"].to_string().contains(&data), "{record}");
}

/// A 20 MiB image (the default `max_part_bytes`) is served; a byte more is 413. The peak memory
/// the request took is printed as a `[memory figure]`.
#[test]
fn a_20_mib_image_is_served_and_one_byte_more_is_413() {
    use base64::Engine as _;
    const MIB: usize = 1024 * 1024;
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(&format!("max_body_bytes = {}", 32 * MIB))
        .start();
    let image = |size: usize| {
        let data = base64::engine::general_purpose::STANDARD.encode(vec![7u8; size]);
        json!({"model": "demo/echo", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "big"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}]}]})
    };
    let body = image(20 * MIB);
    let before = crate::hardening::proc_status_kib(&gw, "VmHWM");
    let answer = ok(&post_openai(&gw, &body));
    let peak = crate::hardening::proc_status_kib(&gw, "VmHWM");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        format!("big [image image/png, {} bytes]", 20 * MIB)
    );
    eprintln!(
        "[memory figure] a 20 MiB image ({:.1} MB body): peak RSS {:.1} MB above the gateway's \
         peak before it",
        body.to_string().len() as f64 / 1e6,
        peak.saturating_sub(before) as f64 * 1024.0 / 1e6
    );
    let over = post_openai(&gw, &image(20 * MIB + 1));
    assert_eq!(over.status, 413, "{}", over.text());
}

/// The provider plugins write media into the upstream body as base64 straight from the bytes:
/// a 20 MiB image reaches an Anthropic route within the sandbox's default memory limit.
#[test]
fn a_20_mib_image_reaches_an_anthropic_route_within_the_default_sandbox() {
    use base64::Engine as _;
    const MIB: usize = 1024 * 1024;
    let anthropic = AnthropicUpstream::script(vec![Reply::recorded(
        Recording::load("Anthropic__claude-sonnet-4__simple").interaction(0),
    )]);
    let gw = Gateway::builder()
        .route(Route::new("an", "anthropic").base_url(&anthropic.base_url("/v1")))
        .config_line(&format!("max_body_bytes = {}", 32 * MIB))
        .start();
    let data = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 20 * MIB]);
    let body = json!({"model": "an/claude-sonnet-4-20250514", "messages": [{"role": "user",
        "content": [{"type": "text", "text": "big"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}]}]});
    let before = crate::hardening::proc_status_kib(&gw, "VmHWM");
    let answer = post_with_provider_key(&gw, "/v1/chat/completions", "sk-ant-test", &body);
    let peak = crate::hardening::proc_status_kib(&gw, "VmHWM");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let sent = anthropic.single_request().json();
    let source = &sent["messages"][0]["content"][1]["source"];
    assert_eq!(
        source["type"], "base64",
        "{}",
        sent["messages"][0]["content"][0]
    );
    assert_eq!(source["data"].as_str().map(str::len), Some(data.len()));
    eprintln!(
        "[memory figure] a 20 MiB image to an anthropic route: peak RSS {:.1} MB above the \
         gateway's peak before it",
        peak.saturating_sub(before) as f64 * 1024.0 / 1e6
    );
}
