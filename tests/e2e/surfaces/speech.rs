//! `POST /v1/audio/speech`: text spoken over the openai plugin (the fake checks the body as
//! OpenAI does and speaks [`fake_speech`] a word at a time), the audio streamed to the caller as
//! the provider sends it, recorded (type `speech`) as a summary of the audio, never its bytes,
//! priced by the character (`tts-1`) or by the tokens of the provider's events
//! (`gpt-4o-mini-tts`); bad bodies refused with a 4xx; audio its provider cut short cuts the
//! caller's body. The official OpenAI client in `tests/clients/test_openai.py`.

use std::io::Read;

use gateway_test_support::upstream::openai::{fake_speech, fake_speech_tokens};
use gateway_test_support::upstream::{Ending, Reply};
use gateway_test_support::{Gateway, OpenAiUpstream, Response, Route, client};
use serde_json::{Value, json};

const PROVIDER_KEY: &str = "speech-caller-key-0123456789";

fn speak(gw: &Gateway, body: &Value) -> Response {
    let headers = [
        ("Authorization", gw.key.as_str()),
        ("Provider-API-Key", PROVIDER_KEY),
        ("Content-Type", "application/json"),
    ];
    let body = body.to_string();
    client::request(
        gw.addr,
        "POST",
        "/v1/audio/speech",
        &headers,
        body.as_bytes(),
    )
}

fn invocation(response: &Response) -> String {
    response
        .header("x-invocation-id")
        .unwrap_or_else(|| panic!("no invocation id: {:?}", response.headers))
        .to_owned()
}

fn gateway(upstream: &OpenAiUpstream) -> Gateway {
    Gateway::builder()
        .route(Route::openai("openai", &upstream.base_url("/v1")).default_model("tts-1"))
        .route(Route::echo("demo"))
        .start()
}

#[test]
fn tts_1_streams_its_audio_recorded_as_a_summary_and_priced_by_the_character() {
    use gateway_test_support::scrape::{scrape, value};
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let input = "Hello there, gateway";
    let response = speak(
        &gw,
        &json!({"model": "openai/tts-1", "input": input, "voice": "alloy",
                "response_format": "opus", "speed": 1.1}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("audio/ogg"));
    assert_eq!(response.header("x-gateway-route"), Some("openai"));
    // Streamed as it came: no length known before the end.
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    let audio = fake_speech(input, "alloy", "opus").concat();
    assert_eq!(response.text(), audio);
    // What the upstream got: the model's own name, the voice, the format, the caller's speed.
    let sent = upstream.single_request();
    assert_eq!(sent.path_only(), "/v1/audio/speech");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    let body: Value = serde_json::from_slice(&sent.body).expect("a JSON body");
    assert_eq!(
        body,
        json!({"model": "tts-1", "input": input, "voice": "alloy", "response_format": "opus",
               "speed": 1.1})
    );

    let record = gw.record(&invocation(&response));
    assert_eq!(record["type"], json!("speech"), "{record}");
    assert_eq!(record["status"], json!("success"), "{record}");
    let characters = input.chars().count();
    assert_eq!(record["usage"]["characters"], json!(characters), "{record}");
    // tts-1 at $15 a million characters, from the shipped table.
    let cost = record["usageCost"].as_f64().expect("a cost");
    assert!(
        (cost - characters as f64 * 15.0 / 1e6).abs() < 1e-12,
        "{record}"
    );
    // The record keeps what the audio was, never its bytes.
    let kept = &record["response"];
    assert_eq!(
        kept,
        &json!({"kind": "audio", "media_type": "audio/ogg", "bytes": audio.len(),
                "sha256": gateway::encoding::sha256_hex(audio.as_bytes())}),
        "{record}"
    );
    assert_eq!(record["request"]["input"], json!(input), "{record}");
    let samples = scrape(&gw, None);
    let labels = [("route", "openai"), ("model", "tts-1")];
    assert_eq!(
        value(&samples, "gateway_speech_characters_total", &labels),
        characters as f64
    );
}

#[test]
fn gpt_speech_bills_the_tokens_of_its_events_and_the_caller_gets_bytes() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let input = "Warm words for a cold morning";
    let response = speak(
        &gw,
        &json!({"model": "openai/gpt-4o-mini-tts", "input": input,
                "voice": {"id": "voice_1234"}, "instructions": "Speak warmly."}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("audio/mpeg"));
    assert_eq!(
        response.text(),
        fake_speech(input, "voice_1234", "mp3").concat()
    );
    let body: Value = serde_json::from_slice(&upstream.single_request().body).expect("a JSON body");
    assert_eq!(body["stream_format"], json!("sse"), "{body}");
    assert_eq!(body["voice"], json!({"id": "voice_1234"}), "{body}");
    assert_eq!(body["instructions"], json!("Speak warmly."), "{body}");

    let record = gw.record(&invocation(&response));
    let (read, spoken) = fake_speech_tokens(input);
    assert_eq!(record["usage"]["prompt_tokens"], json!(read), "{record}");
    assert_eq!(
        record["usage"]["completion_tokens"],
        json!(spoken),
        "{record}"
    );
    // gpt-4o-mini-tts's shipped prices: text in $0.60, audio out $12 a million tokens.
    let expected = (read as f64 * 0.60 + spoken as f64 * 12.0) / 1e6;
    let cost = record["usageCost"].as_f64().expect("a cost");
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
}

#[test]
fn bad_speech_is_a_4xx_with_an_invocation_id() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let long = "word ".repeat(1000);
    for (body, param) in [
        (json!({"model": "openai/tts-1", "voice": "alloy"}), "input"),
        (
            json!({"model": "openai/tts-1", "input": long, "voice": "alloy"}),
            "input",
        ),
        (json!({"model": "openai/tts-1", "input": "Hi"}), "voice"),
        (
            json!({"model": "openai/tts-1", "input": "Hi", "voice": "alloy", "response_format": "ogg"}),
            "response_format",
        ),
        (
            json!({"model": "openai/tts-1", "input": "Hi", "voice": "alloy", "stream_format": "sse"}),
            "stream_format",
        ),
    ] {
        let response = speak(&gw, &body);
        assert_eq!(response.status, 400, "{param}: {}", response.text());
        assert_eq!(response.json()["error"]["param"], json!(param));
        let record = gw.record(&invocation(&response));
        assert_eq!(record["status"], json!("error"), "{record}");
    }
    assert!(upstream.requests().is_empty(), "nothing went upstream");
    // A voice the provider does not have: its 400 and message reach the caller, recorded.
    let response = speak(
        &gw,
        &json!({"model": "openai/tts-1", "input": "Hi", "voice": "nobody"}),
    );
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("Invalid value for 'voice'"),
        "{}",
        response.text()
    );
    let record = gw.record(&invocation(&response));
    assert_eq!(record["status"], json!("error"), "{record}");
    // A route whose plugin does not speak.
    let response = speak(
        &gw,
        &json!({"model": "demo/echo", "input": "Hi", "voice": "alloy"}),
    );
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("does not support speech"),
        "{}",
        response.text()
    );
}

#[test]
fn audio_its_provider_cuts_short_cuts_the_callers_body() {
    let upstream = OpenAiUpstream::always(Reply::Pieces {
        status: 200,
        content_type: "audio/mpeg".into(),
        headers: Vec::new(),
        pieces: vec!["ID3first".into(), "second".into()],
        gap: std::time::Duration::from_millis(5),
        ending: Ending::Cut,
    });
    let gw = gateway(&upstream);
    let body = json!({"model": "openai/tts-1", "input": "Hi there", "voice": "alloy"}).to_string();
    let headers = [
        ("Authorization", gw.key.as_str()),
        ("Provider-API-Key", PROVIDER_KEY),
        ("Content-Type", "application/json"),
    ];
    let mut stream = client::send(
        gw.addr,
        "POST",
        "/v1/audio/speech",
        &headers,
        body.as_bytes(),
    );
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw.contains("ID3first"), "{raw}");
    // The body has no last chunk: the caller cannot take the part for the whole.
    assert!(!raw.ends_with("0\r\n\r\n"), "{raw}");
    let id = raw
        .lines()
        .find_map(|line| line.strip_prefix("x-invocation-id: "))
        .expect("an invocation id")
        .trim()
        .to_owned();
    let record = gw.record(&id);
    assert_eq!(record["status"], json!("error"), "{record}");
    assert_eq!(record["type"], json!("speech"), "{record}");
}
