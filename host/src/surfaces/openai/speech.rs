//! `POST /v1/audio/speech`: text spoken, in OpenAI's shape, on any route whose plugin speaks
//! (OpenAI's `tts-1`, `tts-1-hd` and `gpt-4o-mini-tts`, Azure's deployments of them, and the
//! servers that copy the API). The audio is the answer's body, sent as the provider sends it.
//!
//! The body: `model` (`ROUTE/MODEL` or an alias), `input` (the text, at most
//! [`MAX_INPUT_CHARACTERS`] characters, OpenAI's bound), `voice` (a name, or a custom voice as
//! `{"id": "voice_..."}`), `response_format` (`mp3`, the default, `opus`, `aac`, `flac`, `wav`
//! or `pcm`: the answer's `Content-Type` is the format's); every other field (`speed`,
//! `instructions`, ...) goes to the plugin as a parameter. `stream_format: "sse"` (the audio as
//! base64 events) is not served: the gateway streams the audio itself, as bytes.

use std::convert::Infallible;

use serde::de::MapAccess;
use serde_json::{Map, Value};

use super::Endpoint;
use super::request::{self, Body, Fields, read};
use crate::error::ApiError;
use crate::flow::{Ask, Head, Kind, Speak};

/// The most characters one speech may say: OpenAI's bound on `input`.
pub const MAX_INPUT_CHARACTERS: usize = 4096;

/// `POST /v1/audio/speech`.
pub struct Speech {
    body: Body<SpeechFields>,
    /// The voice's name or id, checked.
    voice: String,
    format: Format,
}

/// The fields the surface reads itself.
#[derive(Debug, Default)]
pub struct SpeechFields {
    model: Option<String>,
    input: Option<String>,
    voice: Option<Value>,
    response_format: Option<String>,
    stream_format: Option<String>,
}

impl Fields for SpeechFields {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "model" => read(map, &mut self.model),
            "input" => read(map, &mut self.input),
            "voice" => read(map, &mut self.voice),
            "response_format" => read(map, &mut self.response_format),
            "stream_format" => read(map, &mut self.stream_format),
            _ => Ok(false),
        }
    }
}

/// The audio formats OpenAI's API makes (`response_format`), with the media type each is
/// answered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Mp3,
    Opus,
    Aac,
    Flac,
    Wav,
    Pcm,
}

impl Format {
    const ALL: [Format; 6] = [
        Format::Mp3,
        Format::Opus,
        Format::Aac,
        Format::Flac,
        Format::Wav,
        Format::Pcm,
    ];

    fn name(self) -> &'static str {
        match self {
            Format::Mp3 => "mp3",
            Format::Opus => "opus",
            Format::Aac => "aac",
            Format::Flac => "flac",
            Format::Wav => "wav",
            Format::Pcm => "pcm",
        }
    }

    fn media_type(self) -> &'static str {
        match self {
            Format::Mp3 => "audio/mpeg",
            // Opus in an Ogg container (RFC 7845).
            Format::Opus => "audio/ogg",
            Format::Aac => "audio/aac",
            Format::Flac => "audio/flac",
            Format::Wav => "audio/wav",
            // 24 kHz, 16-bit signed little-endian samples, no header (OpenAI's `pcm`).
            Format::Pcm => "audio/pcm",
        }
    }

    fn of(name: Option<&str>) -> Result<Format, ApiError> {
        let Some(name) = name else {
            return Ok(Format::Mp3);
        };
        (Format::ALL.into_iter())
            .find(|format| format.name() == name)
            .ok_or_else(|| {
                ApiError::invalid(
                    "response_format",
                    "response_format must be one of mp3, opus, aac, flac, wav or pcm",
                )
            })
    }
}

impl SpeechFields {
    /// What must hold before routing: a model, a text within its bound, a voice, a format the
    /// API makes, and the audio as bytes.
    fn check(&self) -> Result<(String, Format), ApiError> {
        request::require_model(&self.model)?;
        match self.input.as_deref() {
            None => return Err(ApiError::invalid("input", "input is required")),
            Some(input) if input.trim().is_empty() => {
                return Err(ApiError::invalid("input", "input must not be empty"));
            }
            Some(input) if input.chars().count() > MAX_INPUT_CHARACTERS => {
                return Err(ApiError::invalid(
                    "input",
                    format!("input must be at most {MAX_INPUT_CHARACTERS} characters"),
                ));
            }
            Some(_) => {}
        }
        let voice = voice(self.voice.as_ref())?;
        let format = Format::of(self.response_format.as_deref())?;
        match self.stream_format.as_deref() {
            None | Some("audio") => {}
            Some("sse") => {
                return Err(ApiError::invalid(
                    "stream_format",
                    "stream_format \"sse\" is not served: the gateway streams the audio \
                     itself (ask with \"audio\", the default)",
                ));
            }
            Some(_) => {
                return Err(ApiError::invalid(
                    "stream_format",
                    "stream_format must be \"audio\" or \"sse\"",
                ));
            }
        }
        Ok((voice, format))
    }
}

/// The voice asked for: a name (`alloy`), or a custom voice's id (`{"id": "voice_1234"}`).
/// Whether the provider has it is the provider's to say.
fn voice(voice: Option<&Value>) -> Result<String, ApiError> {
    let named = match voice {
        None | Some(Value::Null) => {
            return Err(ApiError::invalid("voice", "voice is required"));
        }
        Some(Value::String(name)) => name.as_str(),
        Some(Value::Object(custom)) => match custom.get("id") {
            Some(Value::String(id)) if custom.len() == 1 => id.as_str(),
            _ => {
                return Err(ApiError::invalid(
                    "voice",
                    "a custom voice is an object with one string field, id",
                ));
            }
        },
        Some(_) => {
            return Err(ApiError::invalid(
                "voice",
                "voice must be a string or {\"id\": ...}",
            ));
        }
    };
    if named.trim().is_empty() || named.len() > 256 {
        return Err(ApiError::invalid(
            "voice",
            "voice must be a name of 1 to 256 bytes",
        ));
    }
    Ok(named.to_owned())
}

impl Endpoint for Speech {
    const KIND: Kind = Kind::Speech;
    const PATH: &'static str = "/v1/audio/speech";

    fn read(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let body: Body<SpeechFields> = request::parse_body(body)?;
        let (voice, format) = body.fields.check()?;
        request::user(&body.params)?;
        Ok(Speech {
            body,
            voice,
            format,
        })
    }
    fn model_and_params(&self) -> (&Option<String>, &Map<String, Value>) {
        (&self.body.fields.model, &self.body.params)
    }
    fn user(&self) -> Option<&str> {
        request::user(&self.body.params).ok().flatten()
    }
    fn asks(mut self) -> Result<Ask<Infallible, Infallible>, ApiError> {
        Ok(Ask::Speak(Speak {
            input: self.body.fields.input.take().unwrap_or_default(),
            voice: self.voice,
            format: self.format.name().to_owned(),
            media_type: self.format.media_type(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::flow::Surface;

    fn head() -> Head {
        hyper::Request::new(()).into_parts().0
    }

    fn parsed(body: Value) -> Result<Speech, ApiError> {
        Speech::parse(&head(), body.to_string().as_bytes())
    }

    fn refused_param(body: Value) -> String {
        match parsed(body) {
            Err(ApiError::InvalidParam { param, .. }) => param,
            Err(other) => panic!("refused otherwise: {other:?}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn a_speech_asks_the_text_voice_and_format_and_passes_the_rest() {
        let speech = parsed(serde_json::json!({
            "model": "openai/tts-1", "input": "Hello there", "voice": "alloy",
            "response_format": "opus", "speed": 1.25, "instructions": "cheerful",
        }))
        .unwrap();
        assert_eq!(
            speech.body.params.get("speed"),
            Some(&serde_json::json!(1.25))
        );
        assert!(speech.body.params.contains_key("instructions"));
        let Ok(Ask::Speak(asked)) = speech.ask(Kind::Speech, &Config::default()) else {
            panic!("not a speech")
        };
        assert_eq!(asked.input, "Hello there");
        assert_eq!(asked.voice, "alloy");
        assert_eq!(
            (asked.format.as_str(), asked.media_type),
            ("opus", "audio/ogg")
        );
    }

    #[test]
    fn mp3_is_the_default_and_a_custom_voice_is_its_id() {
        let speech = parsed(serde_json::json!({
            "model": "m", "input": "Hi", "voice": {"id": "voice_1234"},
        }))
        .unwrap();
        let Ok(Ask::Speak(asked)) = speech.ask(Kind::Speech, &Config::default()) else {
            panic!("not a speech")
        };
        assert_eq!(asked.voice, "voice_1234");
        assert_eq!(
            (asked.format.as_str(), asked.media_type),
            ("mp3", "audio/mpeg")
        );
    }

    #[test]
    fn bad_bodies_are_refused_naming_their_field() {
        let long = "a".repeat(MAX_INPUT_CHARACTERS + 1);
        for (body, param) in [
            (serde_json::json!({"input": "x", "voice": "alloy"}), "model"),
            (serde_json::json!({"model": "m", "voice": "alloy"}), "input"),
            (
                serde_json::json!({"model": "m", "input": " ", "voice": "alloy"}),
                "input",
            ),
            (
                serde_json::json!({"model": "m", "input": long, "voice": "alloy"}),
                "input",
            ),
            (serde_json::json!({"model": "m", "input": "x"}), "voice"),
            (
                serde_json::json!({"model": "m", "input": "x", "voice": 7}),
                "voice",
            ),
            (
                serde_json::json!({"model": "m", "input": "x", "voice": {"name": "a"}}),
                "voice",
            ),
            (
                serde_json::json!({"model": "m", "input": "x", "voice": ""}),
                "voice",
            ),
            (
                serde_json::json!({"model": "m", "input": "x", "voice": "a", "response_format": "ogg"}),
                "response_format",
            ),
            (
                serde_json::json!({"model": "m", "input": "x", "voice": "a", "stream_format": "sse"}),
                "stream_format",
            ),
        ] {
            assert_eq!(refused_param(body.clone()), param, "{body}");
        }
        // Characters, not bytes: 4,096 of a two-byte letter are within the bound.
        let wide = "é".repeat(MAX_INPUT_CHARACTERS);
        assert!(parsed(serde_json::json!({"model": "m", "input": wide, "voice": "a"})).is_ok());
    }
}
