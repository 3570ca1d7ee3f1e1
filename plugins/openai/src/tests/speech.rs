//! Speech: the body sent to `/audio/speech` (or an Azure deployment's), through the SDK's fake
//! host, and the audio sent on to the caller: bytes as they come, or (GPT speech models) the
//! base64 events read back into bytes with their tokens.

use gateway_plugin_sdk::testing::{self, json};
use gateway_plugin_sdk::{AudioSink, Speech, SpeechRequest, TokenCounts, Usage};
use gateway_test_support::fixtures::upstream;

use super::*;

fn request(base_url: &str, settings: &str, model: &str, params: &str) -> SpeechRequest {
    SpeechRequest {
        route: Route {
            id: "voice".into(),
            base_url: base_url.into(),
            api_key: Some("sk-test".into()),
            settings: settings.into(),
            secrets: Vec::new(),
        },
        model: model.into(),
        input: "Hello there".into(),
        voice: "alloy".into(),
        format: "opus".into(),
        params: params.into(),
    }
}

fn speak(
    request: SpeechRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> (Result<Speech, ProviderError>, AudioSink, Request) {
    let (result, audio, sent) = testing::speak::<OpenAi>(request, upstream);
    let [sent] = <[Request; 1]>::try_from(sent).expect("one request");
    (result, audio, sent)
}

fn body(sent: &Request) -> Value {
    serde_json::from_slice(sent.body_bytes()).expect("a JSON body")
}

#[test]
fn tts_1_is_sent_its_body_and_its_bytes_go_on_as_they_come() {
    let params = r#"{"speed":1.25,"model":"evil","input":"evil","stream_format":"sse"}"#;
    let base = "https://api.openai.com/v1";
    let (result, audio, sent) = speak(request(base, "{}", "tts-1", params), |_| {
        let headers = vec![("content-type".into(), "audio/ogg".into())];
        Ok(Response::from_chunks(
            200,
            headers,
            vec![b"OggS".to_vec(), b"-rest".to_vec()],
        ))
    });
    assert_eq!(sent.url(), "https://api.openai.com/v1/audio/speech");
    assert_eq!(sent.header_value("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent.header_value("accept"), Some("audio/*"));
    assert_eq!(
        body(&sent),
        json!({"model": "tts-1", "input": "Hello there", "voice": "alloy",
               "response_format": "opus", "speed": 1.25})
    );
    assert_eq!(
        result,
        Ok(Speech {
            model: "tts-1".into(),
            usage: None
        })
    );
    assert_eq!((audio.sent(), audio.sends()), (&b"OggS-rest"[..], 2));
}

#[test]
fn gpt_speech_models_are_asked_for_events_whose_audio_and_tokens_are_read() {
    let base = "https://api.openai.com/v1";
    let mut speech = request(base, "{}", "gpt-4o-mini-tts", r#"{"instructions":"warm"}"#);
    speech.voice = "voice_1234".into();
    let (result, audio, sent) = speak(speech, |_| {
        let events = concat!(
            "data: {\"type\":\"speech.audio.delta\",\"audio\":\"SUQz\"}\n\n",
            "data: {\"type\":\"speech.audio.delta\",\"audio\":\"YWJj\"}\n\n",
            "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":4,",
            "\"output_tokens\":120,\"total_tokens\":124}}\n\n",
        );
        let headers = vec![("content-type".into(), "text/event-stream".into())];
        Ok(Response::from_chunks(
            200,
            headers,
            vec![events.as_bytes().to_vec()],
        ))
    });
    assert_eq!(sent.header_value("accept"), Some("text/event-stream"));
    assert_eq!(
        body(&sent),
        json!({"model": "gpt-4o-mini-tts", "input": "Hello there", "voice": {"id": "voice_1234"},
               "response_format": "opus", "instructions": "warm", "stream_format": "sse"})
    );
    let usage = Usage::counted(TokenCounts {
        prompt: Some(4),
        completion: Some(120),
        total: Some(124),
        ..TokenCounts::default()
    });
    assert_eq!(
        result,
        Ok(Speech {
            model: "gpt-4o-mini-tts".into(),
            usage: Some(usage)
        })
    );
    assert_eq!((audio.sent(), audio.sends()), (&b"ID3abc"[..], 2));
}

#[test]
fn an_event_stream_cut_before_its_end_is_an_error_after_its_audio() {
    let base = "https://api.openai.com/v1";
    let (result, audio, _) = speak(request(base, "{}", "gpt-4o-mini-tts", "{}"), |_| {
        let events = "data: {\"type\":\"speech.audio.delta\",\"audio\":\"SUQz\"}\n\n";
        let headers = vec![("content-type".into(), "text/event-stream".into())];
        Ok(Response::from_chunks(
            200,
            headers,
            vec![events.as_bytes().to_vec()],
        ))
    });
    assert!(failed(result).contains("speech.audio.done"));
    assert_eq!(audio.sent(), b"ID3");
}

#[test]
fn an_unknown_voice_is_the_upstream_s_400_and_no_audio() {
    let base = "https://api.openai.com/v1";
    let (result, audio, _) = speak(request(base, "{}", "tts-1", "{}"), |_| {
        json(
            400,
            &json!({"error": {"message": "Invalid voice 'nobody'", "type": "invalid_request_error",
                              "param": "voice", "code": null}}),
        )
    });
    let error = upstream(result);
    assert_eq!(error.status, 400);
    assert!(error.message.contains("Invalid voice"), "{}", error.message);
    assert!(audio.sent().is_empty());
}

#[test]
fn azure_deployments_speak_bytes_at_their_deployment_url() {
    let settings = r#"{"azure_api_version":"2025-03-01-preview"}"#;
    let base = "https://res.openai.azure.com";
    let (result, audio, sent) = speak(request(base, settings, "gpt-4o-mini-tts", "{}"), |_| {
        Ok(Response::from_chunks(
            200,
            Vec::new(),
            vec![b"ID3".to_vec()],
        ))
    });
    assert_eq!(
        sent.url(),
        "https://res.openai.azure.com/openai/deployments/gpt-4o-mini-tts/audio/speech?api-version=2025-03-01-preview"
    );
    assert_eq!(sent.header_value("api-key"), Some("sk-test"));
    assert!(body(&sent).get("stream_format").is_none());
    assert!(result.is_ok());
    assert_eq!(audio.sent(), b"ID3");
}
