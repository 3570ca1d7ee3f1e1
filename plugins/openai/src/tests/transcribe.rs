//! Transcription: the form sent to `/audio/transcriptions` (or `/translations`, or an Azure
//! deployment's), through the SDK's fake host, and the reading of its answers (Whisper's
//! seconds, GPT-4o transcribe's tokens, segments and words).

use gateway_plugin_sdk::testing::{self, json};
use gateway_plugin_sdk::{
    TokenCounts, TranscriptSegment, Transcription, TranscriptionRequest, Usage,
};
use gateway_test_support::fixtures::upstream;

use super::*;

fn request(base_url: &str, settings: &str, params: &str) -> TranscriptionRequest {
    TranscriptionRequest {
        route: Route {
            id: "audio".into(),
            base_url: base_url.into(),
            api_key: Some("sk-test".into()),
            settings: settings.into(),
            secrets: Vec::new(),
        },
        model: "whisper-1".into(),
        audio: b"RIFF\x00\x01 audio".to_vec(),
        file_name: "hello.wav".into(),
        media_type: Some("audio/wav".into()),
        translate: false,
        params: params.into(),
    }
}

fn transcribe(
    request: TranscriptionRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> (Result<Transcription, ProviderError>, Request) {
    let (result, sent) = testing::transcribe::<OpenAi>(request, upstream);
    let [sent] = <[Request; 1]>::try_from(sent).expect("one request");
    (result, sent)
}

/// The fields of a sent form, as `(name, file name, bytes)`, read back with the boundary its
/// content type names.
fn fields(sent: &Request) -> Vec<(String, Option<String>, Vec<u8>)> {
    let content_type = sent.header_value("content-type").expect("a content type");
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .expect("a form");
    let body = sent.body_bytes();
    let delimiter = format!("--{boundary}");
    let text = String::from_utf8_lossy(body);
    assert!(text.ends_with(&format!("{delimiter}--\r\n")), "{text}");
    let mut out = Vec::new();
    for part in text.split(&delimiter).skip(1) {
        let Some(part) = part.strip_prefix("\r\n") else {
            continue;
        };
        let (head, value) = part.split_once("\r\n\r\n").expect("a part's head");
        let name = head
            .split("name=\"")
            .nth(1)
            .and_then(|r| r.split('"').next());
        let file = head
            .split("filename=\"")
            .nth(1)
            .and_then(|r| r.split('"').next());
        let value = value.strip_suffix("\r\n").unwrap_or(value);
        out.push((
            name.unwrap_or_default().to_owned(),
            file.map(str::to_owned),
            value.as_bytes().to_vec(),
        ));
    }
    out
}

fn field<'a>(fields: &'a [(String, Option<String>, Vec<u8>)], name: &str) -> Vec<&'a [u8]> {
    (fields.iter())
        .filter(|(n, _, _)| n == name)
        .map(|(_, _, value)| value.as_slice())
        .collect()
}

#[test]
fn whisper_is_sent_a_form_and_its_seconds_are_read() {
    let params = r#"{"language":"en","temperature":"0.2","timestamp_granularities":["word","segment"],
        "response_format":"srt","model":"evil","file":"evil"}"#;
    let (result, sent) = transcribe(request("https://api.openai.com/v1", "{}", params), |_| {
        json(
            200,
            &json!({
                "task": "transcribe", "language": "english", "duration": 2.4, "text": "Hello there.",
                "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": 2.4, "text": " Hello there.",
                              "tokens": [50364, 2425], "temperature": 0.0, "avg_logprob": -0.2,
                              "compression_ratio": 0.8, "no_speech_prob": 0.01}],
                "words": [{"word": "Hello", "start": 0.0, "end": 0.6}],
                "usage": {"type": "duration", "seconds": 3}
            }),
        )
    });
    assert_eq!(sent.url(), "https://api.openai.com/v1/audio/transcriptions");
    assert_eq!(sent.header_value("authorization"), Some("Bearer sk-test"));
    let fields = fields(&sent);
    assert_eq!(field(&fields, "model"), [b"whisper-1"]);
    assert_eq!(field(&fields, "language"), [b"en"]);
    assert_eq!(field(&fields, "temperature"), [b"0.2"]);
    assert_eq!(
        field(&fields, "timestamp_granularities[]"),
        [&b"word"[..], b"segment"]
    );
    // srt is written by the gateway from the segments: verbose_json is what is asked.
    assert_eq!(field(&fields, "response_format"), [b"verbose_json"]);
    let file = fields
        .iter()
        .find(|(name, _, _)| name == "file")
        .expect("the file");
    assert_eq!(file.1.as_deref(), Some("hello.wav"));
    assert_eq!(file.2, b"RIFF\x00\x01 audio");
    assert_eq!(fields.len(), 7, "{fields:?}");
    let transcription = result.expect("a transcription");
    assert_eq!(
        transcription,
        Transcription {
            model: "whisper-1".into(),
            text: "Hello there.".into(),
            language: Some("english".into()),
            duration: Some(2.4),
            segments: vec![TranscriptSegment {
                start: 0.0,
                end: 2.4,
                text: " Hello there.".into()
            }],
            words: vec![TranscriptSegment {
                start: 0.0,
                end: 0.6,
                text: "Hello".into()
            }],
            usage: None,
            seconds: Some(3),
        }
    );
}

#[test]
fn gpt_4o_transcribe_s_tokens_are_read_and_json_is_asked_for_json() {
    let mut request = request(
        "https://api.openai.com/v1",
        "{}",
        r#"{"response_format":"text"}"#,
    );
    request.model = "gpt-4o-transcribe".into();
    let (result, sent) = transcribe(request, |_| {
        json(
            200,
            &json!({"text": "Hello there.", "usage": {"type": "tokens", "input_tokens": 20,
                "input_token_details": {"text_tokens": 4, "audio_tokens": 16},
                "output_tokens": 5, "total_tokens": 25}}),
        )
    });
    assert_eq!(field(&fields(&sent), "response_format"), [b"json"]);
    let transcription = result.expect("a transcription");
    assert_eq!(
        transcription.usage,
        Some(Usage::counted(TokenCounts {
            prompt: Some(20),
            completion: Some(5),
            total: Some(25),
            audio_prompt: Some(16),
            ..TokenCounts::default()
        }))
    );
    assert_eq!(transcription.seconds, None);
}

#[test]
fn a_translation_and_an_azure_deployment_go_to_their_own_urls() {
    let mut translation = request("http://whisper.test/v1", "{}", "{}");
    translation.translate = true;
    // A compatible server that reports no usage but the duration (as a string): billed by it.
    let (result, sent) = transcribe(translation, |_| {
        json(200, &json!({"text": "Hello.", "duration": "1.2"}))
    });
    assert_eq!(sent.url(), "http://whisper.test/v1/audio/translations");
    assert_eq!(result.expect("a transcription").seconds, Some(2));
    let azure = request(
        "https://res.openai.azure.com",
        r#"{"azure_api_version":"2025-04-01-preview"}"#,
        "{}",
    );
    let (result, sent) = transcribe(azure, |_| json(200, &json!({"text": "Hello."})));
    assert_eq!(
        sent.url(),
        "https://res.openai.azure.com/openai/deployments/whisper-1/audio/transcriptions?api-version=2025-04-01-preview"
    );
    assert_eq!(sent.header_value("api-key"), Some("sk-test"));
    assert!(result.is_ok());
}

#[test]
fn errors_and_answers_without_text_are_refused() {
    let (result, _) = transcribe(request("https://api.openai.com/v1", "{}", "{}"), |_| {
        json(
            400,
            &json!({"error": {"message": "Invalid file format.", "type": "invalid_request_error"}}),
        )
    });
    let error = upstream(result);
    assert_eq!(error.status, 400);
    assert!(
        error.message.contains("Invalid file format"),
        "{}",
        error.message
    );
    let (result, _) = transcribe(request("https://api.openai.com/v1", "{}", "{}"), |_| {
        json(200, &json!({"language": "en"}))
    });
    assert!(
        matches!(&result, Err(ProviderError::Failed(m)) if m.contains("without `text`")),
        "{result:?}"
    );
}
