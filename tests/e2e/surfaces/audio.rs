//! `POST /v1/audio/transcriptions` and `/v1/audio/translations`: audio uploads in OpenAI's form
//! over the openai plugin (the fake reads the form as OpenAI does and hears a WAV's length),
//! answered in each `response_format`, recorded (type `transcription`) with the seconds billed
//! and never the audio's bytes, priced by the second or by tokens; bad uploads refused with a
//! 4xx before anything is held beyond the body limit. The official OpenAI client in
//! `tests/clients/test_openai.py`.

use std::io::{Read, Write};

use gateway_test_support::upstream::openai::{
    FAKE_AUDIO_TOKENS_PER_SECOND, fake_transcript, wav_seconds,
};
use gateway_test_support::{Gateway, OpenAiUpstream, Response, Route, client};
use serde_json::{Value, json};

const PROVIDER_KEY: &str = "audio-caller-key-0123456789";
const BOUNDARY: &str = "e2e-audio-boundary";

/// A canonical WAV of `seconds` of a 440 Hz tone, 8 kHz mono 16-bit.
fn wav(seconds: f64) -> Vec<u8> {
    let rate = 8_000u32;
    let samples = (seconds * f64::from(rate)) as u32;
    let data = samples * 2;
    let mut file = Vec::with_capacity(44 + data as usize);
    file.extend_from_slice(b"RIFF");
    file.extend_from_slice(&(36 + data).to_le_bytes());
    file.extend_from_slice(b"WAVEfmt ");
    file.extend_from_slice(&16u32.to_le_bytes());
    file.extend_from_slice(&1u16.to_le_bytes()); // PCM
    file.extend_from_slice(&1u16.to_le_bytes()); // mono
    file.extend_from_slice(&rate.to_le_bytes());
    file.extend_from_slice(&(rate * 2).to_le_bytes());
    file.extend_from_slice(&2u16.to_le_bytes());
    file.extend_from_slice(&16u16.to_le_bytes());
    file.extend_from_slice(b"data");
    file.extend_from_slice(&data.to_le_bytes());
    for i in 0..samples {
        let t = f64::from(i) / f64::from(rate);
        let sample = ((t * 440.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16;
        file.extend_from_slice(&sample.to_le_bytes());
    }
    file
}

/// A form of text `fields` and the audio `file`.
fn form(fields: &[(&str, &str)], file: Option<(&str, &[u8])>) -> Vec<u8> {
    let file = file.map(|(name, bytes)| (name, "audio/wav", bytes));
    client::form(BOUNDARY, fields, file)
}

fn upload(gw: &Gateway, path: &str, body: &[u8]) -> Response {
    let content_type = format!("multipart/form-data; boundary={BOUNDARY}");
    let headers = [
        ("Authorization", gw.key.as_str()),
        ("Provider-API-Key", PROVIDER_KEY),
        ("Content-Type", content_type.as_str()),
    ];
    client::request(gw.addr, "POST", path, &headers, body)
}

fn invocation(response: &Response) -> String {
    response
        .header("x-invocation-id")
        .unwrap_or_else(|| panic!("no invocation id: {:?}", response.headers))
        .to_owned()
}

fn gateway(upstream: &OpenAiUpstream) -> Gateway {
    Gateway::builder()
        .route(Route::openai("openai", &upstream.base_url("/v1")).default_model("whisper-1"))
        .route(Route::echo("demo"))
        .start()
}

#[test]
fn whisper_writes_a_wav_down_in_each_format_recorded_without_the_audio_and_priced_by_the_second() {
    use gateway_test_support::scrape::{scrape, value};
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let audio = wav(2.5);
    let seconds = wav_seconds(&audio).expect("a WAV");
    let text = fake_transcript("hello.wav", seconds, false);
    let fields = [("model", "openai/whisper-1"), ("language", "en")];
    let response = upload(
        &gw,
        "/v1/audio/transcriptions",
        &form(&fields, Some(("hello.wav", &audio))),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json(),
        json!({"text": text, "usage": {"type": "duration", "seconds": 3}})
    );
    // What the upstream got: the model's own name, the caller's fields, the file as uploaded.
    let sent = upstream.single_request();
    assert_eq!(sent.path_only(), "/v1/audio/transcriptions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    let sent_form = gateway::form::read(sent.header("content-type"), &sent.body).expect("a form");
    let names: Vec<&str> = sent_form.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["model", "language", "response_format", "file"]);
    assert_eq!(&sent_form.fields[0].data[..], b"whisper-1");
    assert_eq!(&sent_form.fields[2].data[..], b"json");
    assert_eq!(sent_form.fields[3].data.len(), audio.len());

    let record = gw.record(&invocation(&response));
    assert_eq!(record["type"], json!("transcription"), "{record}");
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["usage"]["audio_seconds"], json!(3), "{record}");
    // Whisper at $0.0001 a second, from the shipped table.
    let cost = record["usageCost"].as_f64().expect("a cost");
    assert!((cost - 0.0003).abs() < 1e-12, "{record}");
    // The record keeps the form's fields and what the file was, never its bytes.
    let kept = &record["request"];
    assert_eq!(kept["model"], json!("openai/whisper-1"), "{record}");
    assert_eq!(kept["file"]["kind"], json!("audio"), "{record}");
    assert_eq!(kept["file"]["bytes"], json!(audio.len()), "{record}");
    assert_eq!(kept["file"]["file_name"], json!("hello.wav"), "{record}");
    assert_eq!(record["response"]["text"], json!(text), "{record}");
    let samples = scrape(&gw, None);
    let labels = [("route", "openai"), ("model", "whisper-1")];
    assert_eq!(value(&samples, "gateway_audio_seconds_total", &labels), 3.0);

    // Text, SubRip and WebVTT, written by the gateway from the segments; verbose JSON with words.
    let ask = |format: &str| {
        let fields = [("model", "openai/whisper-1"), ("response_format", format)];
        let response = upload(
            &gw,
            "/v1/audio/transcriptions",
            &form(&fields, Some(("hello.wav", &audio))),
        );
        assert_eq!(response.status, 200, "{format}: {}", response.text());
        response
    };
    let plain = ask("text");
    assert_eq!(plain.text(), format!("{text}\n"));
    assert!(
        plain
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/plain"))
    );
    let srt = ask("srt").text();
    assert!(
        srt.starts_with("1\n00:00:00,000 --> 00:00:01,250\n"),
        "{srt}"
    );
    assert!(srt.contains("2\n00:00:01,250 --> 00:00:02,500\n"), "{srt}");
    let vtt = ask("vtt");
    assert!(
        vtt.text()
            .starts_with("WEBVTT\n\n00:00:00.000 --> 00:00:01.250\n"),
        "{}",
        vtt.text()
    );
    assert!(
        vtt.header("content-type")
            .is_some_and(|t| t.starts_with("text/vtt"))
    );
    let fields = [
        ("model", "openai/whisper-1"),
        ("response_format", "verbose_json"),
        ("timestamp_granularities[]", "word"),
        ("timestamp_granularities[]", "segment"),
    ];
    let response = upload(
        &gw,
        "/v1/audio/transcriptions",
        &form(&fields, Some(("hello.wav", &audio))),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let verbose = response.json();
    assert_eq!(verbose["task"], json!("transcribe"));
    assert_eq!(verbose["duration"], json!(2.5));
    assert_eq!(verbose["segments"].as_array().map(Vec::len), Some(2));
    let words = text.split_whitespace().count();
    assert_eq!(
        verbose["words"].as_array().map(Vec::len),
        Some(words),
        "{verbose}"
    );
    let sent = upstream.requests().pop().expect("a request");
    let sent_form = gateway::form::read(sent.header("content-type"), &sent.body).expect("a form");
    let granularities = (sent_form.fields.iter())
        .filter(|f| f.name == "timestamp_granularities[]")
        .count();
    assert_eq!(granularities, 2);
}

#[test]
fn a_translation_and_a_model_billed_by_tokens() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let audio = wav(1.0);
    let response = upload(
        &gw,
        "/v1/audio/translations",
        &form(&[("model", "openai/whisper-1")], Some(("hola.wav", &audio))),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json()["text"],
        json!(fake_transcript("hola.wav", 1.0, true))
    );
    assert_eq!(
        upstream.requests().pop().expect("a request").path_only(),
        "/v1/audio/translations"
    );

    let response = upload(
        &gw,
        "/v1/audio/transcriptions",
        &form(
            &[("model", "openai/gpt-4o-transcribe")],
            Some(("hello.wav", &audio)),
        ),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    let audio_tokens = FAKE_AUDIO_TOKENS_PER_SECOND as u64;
    assert_eq!(answer["usage"]["type"], json!("tokens"), "{answer}");
    assert_eq!(
        answer["usage"]["input_tokens"],
        json!(audio_tokens),
        "{answer}"
    );
    assert_eq!(
        answer["usage"]["input_token_details"]["audio_tokens"],
        json!(audio_tokens)
    );
    let record = gw.record(&invocation(&response));
    assert_eq!(
        record["usage"]["audio_prompt_tokens"],
        json!(audio_tokens),
        "{record}"
    );
    assert!(record["usage"].get("audio_seconds").is_none(), "{record}");
    // gpt-4o-transcribe's shipped prices: audio input $6, text output $10 a million tokens.
    let output = answer["usage"]["output_tokens"]
        .as_u64()
        .expect("output tokens");
    let expected = (audio_tokens as f64 * 6.0 + output as f64 * 10.0) / 1e6;
    let cost = record["usageCost"].as_f64().expect("a cost");
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
    // A format the model does not write: the provider's 400 and message reach the caller.
    let fields = [
        ("model", "openai/gpt-4o-transcribe"),
        ("response_format", "srt"),
    ];
    let response = upload(
        &gw,
        "/v1/audio/transcriptions",
        &form(&fields, Some(("hello.wav", &audio))),
    );
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("not compatible"),
        "{}",
        response.text()
    );
}

#[test]
fn bad_uploads_are_4xx_with_an_invocation_id_and_nothing_goes_upstream() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    let audio = wav(0.5);
    for (body, param) in [
        (form(&[("model", "openai/whisper-1")], None), "file"),
        (form(&[], Some(("a.wav", &audio))), "model"),
        (
            form(
                &[("model", "openai/whisper-1"), ("response_format", "mp3")],
                Some(("a.wav", &audio)),
            ),
            "response_format",
        ),
        (
            form(
                &[("model", "openai/whisper-1"), ("stream", "true")],
                Some(("a.wav", &audio)),
            ),
            "stream",
        ),
    ] {
        let response = upload(&gw, "/v1/audio/transcriptions", &body);
        assert_eq!(response.status, 400, "{param}: {}", response.text());
        assert_eq!(response.json()["error"]["param"], json!(param));
        let record = gw.record(&invocation(&response));
        assert_eq!(record["status"], json!("error"), "{record}");
    }
    // The wrong content type: a JSON body is not an upload.
    let body = json!({"model": "openai/whisper-1", "file": "hello.wav"});
    let response = gw.post_with_headers("/v1/audio/transcriptions", Some(&gw.key), &[], &body);
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("multipart/form-data"),
        "{}",
        response.text()
    );
    invocation(&response);
    // A form cut short.
    let mut cut = form(&[("model", "openai/whisper-1")], Some(("a.wav", &audio)));
    cut.truncate(cut.len() / 2);
    let response = upload(&gw, "/v1/audio/transcriptions", &cut);
    assert_eq!(response.status, 400, "{}", response.text());
    // A route whose plugin does not transcribe.
    let response = upload(
        &gw,
        "/v1/audio/transcriptions",
        &form(&[("model", "demo/echo")], Some(("a.wav", &audio))),
    );
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("does not support transcription"),
        "{}",
        response.text()
    );
    assert!(upstream.requests().is_empty(), "nothing went upstream");
    // A file the provider cannot read: its 400.
    let response = upload(
        &gw,
        "/v1/audio/transcriptions",
        &form(
            &[("model", "openai/whisper-1")],
            Some(("notes.txt", b"just text")),
        ),
    );
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("Invalid file format"),
        "{}",
        response.text()
    );
}

#[test]
fn a_two_gigabyte_upload_is_refused_before_its_body_is_read() {
    let upstream = OpenAiUpstream::start();
    let gw = gateway(&upstream);
    // As curl sends a large upload: it waits for 100 Continue, which never comes.
    let head = format!(
        "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n\
         Content-Length: 2147483648\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        gw.addr, gw.key
    );
    let mut stream = std::net::TcpStream::connect(gw.addr).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("a timeout");
    stream.write_all(head.as_bytes()).expect("the head is sent");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("x-invocation-id:"),
        "{answer}"
    );
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let error: Value = serde_json::from_str(body).unwrap_or_default();
    assert!(error["error"]["message"].as_str().is_some(), "{answer}");
    assert!(upstream.requests().is_empty());
}
