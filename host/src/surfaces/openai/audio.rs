//! `POST /v1/audio/transcriptions` and `POST /v1/audio/translations`: audio written down, in
//! its language or in English, in OpenAI's shape, on any route whose plugin transcribes (OpenAI's
//! Whisper and GPT-4o transcribe models, Groq, and the servers that copy the API).
//!
//! The body is a `multipart/form-data` form ([`crate::form`]): `file` (the audio, required),
//! `model` (`ROUTE/MODEL` or an alias), `response_format` (`json`, the default, `text`, `srt`,
//! `verbose_json` or `vtt`); every other field (`language`, `prompt`, `temperature`,
//! `timestamp_granularities[]`, ...) goes to the plugin as a parameter, as a string (a field
//! sent more than once, or named `NAME[]`, as a list under `NAME`), `response_format` too. The
//! answer is written here from the plugin's transcript, in the format asked: OpenAI's JSON
//! (`text`, and `usage` as tokens or as the seconds billed), text, SubRip or WebVTT (from the
//! segments), or the verbose JSON (`task`, `language`, `duration`, `text`, `segments`,
//! `words`). Streamed transcription is not served.

use std::convert::Infallible;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::Endpoint;
use crate::error::ApiError;
use crate::flow::{Ask, Envelope, Head, Kind, Rendered, Transcribe, TranscriptCodec, Written};
use crate::form::{FormError, FormField};
use crate::plugins::types;

/// `POST /v1/audio/transcriptions`.
pub type Transcriptions = Audio<false>;
/// `POST /v1/audio/translations`: into English.
pub type Translations = Audio<true>;

/// An audio upload's form, read.
pub struct Audio<const TRANSLATE: bool> {
    model: Option<String>,
    file: FormField,
    format: Format,
    params: Map<String, Value>,
}

/// What the answer is written as (`response_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Text,
    Srt,
    VerboseJson,
    Vtt,
}

impl Format {
    fn of(name: &str) -> Option<Format> {
        Some(match name {
            "json" => Format::Json,
            "text" => Format::Text,
            "srt" => Format::Srt,
            "verbose_json" => Format::VerboseJson,
            "vtt" => Format::Vtt,
            _ => return None,
        })
    }
}

impl<const TRANSLATE: bool> Audio<TRANSLATE> {
    /// The form's fields taken apart: the file, the model and the format the surface reads,
    /// every other field a parameter.
    fn of(fields: Vec<FormField>) -> Result<Self, ApiError> {
        let mut file = None;
        let mut model = None;
        let mut params = Map::new();
        for field in fields {
            if field.name == "file" {
                if file.is_some() {
                    return Err(ApiError::invalid("file", "send one file"));
                }
                file = Some(field);
                continue;
            }
            let text = String::from_utf8(field.data.to_vec()).map_err(|_| {
                ApiError::invalid(field.name.clone(), "a form field must be UTF-8 text")
            })?;
            if field.is_file() {
                return Err(ApiError::invalid(
                    field.name,
                    "only the field `file` may be a file",
                ));
            }
            match field.name.as_str() {
                "model" => model = Some(text),
                "stream" if text == "true" => {
                    return Err(ApiError::invalid(
                        "stream",
                        "streamed transcription is not served: ask without stream",
                    ));
                }
                "stream" => {}
                name => {
                    let name = name.strip_suffix("[]").unwrap_or(name);
                    let listed = field.name.ends_with("[]");
                    match params.get_mut(name) {
                        Some(Value::Array(values)) => values.push(Value::String(text)),
                        Some(first) => *first = json!([first.take(), text]),
                        None if listed => {
                            params.insert(name.to_owned(), json!([text]));
                        }
                        None => {
                            params.insert(name.to_owned(), Value::String(text));
                        }
                    }
                }
            }
        }
        let Some(file) = file.filter(|file| !file.data.is_empty()) else {
            return Err(ApiError::invalid(
                "file",
                "file is required: the audio to write down",
            ));
        };
        let format = match params.get("response_format") {
            None => Format::Json,
            Some(Value::String(name)) => Format::of(name).ok_or_else(|| {
                ApiError::invalid(
                    "response_format",
                    "response_format must be json, text, srt, verbose_json or vtt",
                )
            })?,
            Some(_) => {
                return Err(ApiError::invalid(
                    "response_format",
                    "send response_format once",
                ));
            }
        };
        let audio = Audio {
            model,
            file,
            format,
            params,
        };
        super::request::require_model(&audio.model)?;
        Ok(audio)
    }
}

impl<const TRANSLATE: bool> Endpoint for Audio<TRANSLATE> {
    const KIND: Kind = Kind::Transcription;
    const PATH: &'static str = if TRANSLATE {
        "/v1/audio/translations"
    } else {
        "/v1/audio/transcriptions"
    };

    fn read(head: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let content_type = head.headers.get(hyper::header::CONTENT_TYPE);
        let content_type = content_type.and_then(|value| value.to_str().ok());
        let form = crate::form::read(content_type, body).map_err(|error| match error {
            FormError::TextTooLong(ref field) => {
                ApiError::invalid(field.clone(), error.to_string())
            }
            error => ApiError::BadRequest(error.to_string()),
        })?;
        Self::of(form.fields)
    }
    fn model_and_params(&self) -> (&Option<String>, &Map<String, Value>) {
        (&self.model, &self.params)
    }
    fn user(&self) -> Option<&str> {
        None
    }
    fn asks(self) -> Result<Ask<Infallible, Infallible>, ApiError> {
        let file = self.file;
        Ok(Ask::Transcribe(Transcribe {
            audio: file.data.to_vec(),
            file_name: file.file_name.unwrap_or_else(|| "audio".into()),
            media_type: file.content_type,
            translate: TRANSLATE,
            codec: Box::new(Answer(self.format)),
        }))
    }
}

/// Writes a transcript in the format its caller asked for.
struct Answer(Format);

impl TranscriptCodec for Answer {
    fn answer(&self, _: &Envelope<'_>, written: &Written<'_>) -> Rendered {
        let transcription = written.transcription;
        let (body, content_type) = match self.0 {
            Format::Json => (json_answer(written).to_string(), JSON),
            Format::VerboseJson => (verbose_answer(written).to_string(), JSON),
            Format::Text => (format!("{}\n", transcription.text), TEXT),
            Format::Srt => (subtitles(transcription, Cues::Srt), TEXT),
            Format::Vtt => (subtitles(transcription, Cues::Vtt), VTT),
        };
        Rendered { body, content_type }
    }
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";
const VTT: &str = "text/vtt; charset=utf-8";

/// `usage` as OpenAI writes it: the tokens billed, or the seconds.
fn usage(written: &Written<'_>) -> Option<Value> {
    if let Some(metered) = &written.usage {
        let usage = metered.usage;
        let audio = usage.audio_prompt_tokens.unwrap_or(0);
        return Some(json!({
            "type": "tokens",
            "input_tokens": usage.prompt_tokens,
            "input_token_details": {
                "text_tokens": usage.prompt_tokens.saturating_sub(audio),
                "audio_tokens": audio,
            },
            "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        }));
    }
    let seconds = written.seconds?;
    Some(json!({"type": "duration", "seconds": seconds}))
}

fn json_answer(written: &Written<'_>) -> Value {
    let mut answer = json!({ "text": written.transcription.text });
    if let Some(usage) = usage(written) {
        answer["usage"] = usage;
    }
    answer
}

fn verbose_answer(written: &Written<'_>) -> Value {
    let transcription = written.transcription;
    let segments: Vec<Value> = (transcription.segments.iter().enumerate())
        .map(|(id, segment)| {
            json!({"id": id, "start": segment.start, "end": segment.end, "text": segment.text})
        })
        .collect();
    let mut answer = json!({
        "task": if written.translate { "translate" } else { "transcribe" },
        "language": transcription.language.as_deref().unwrap_or(if written.translate {
            "english"
        } else {
            ""
        }),
        "duration": transcription.duration.or_else(|| last_end(transcription)),
        "text": transcription.text,
        "segments": segments,
    });
    if !transcription.words.is_empty() {
        let words: Vec<Value> = (transcription.words.iter())
            .map(|word| json!({"word": word.text, "start": word.start, "end": word.end}))
            .collect();
        answer["words"] = Value::Array(words);
    }
    if let Some(usage) = usage(written) {
        answer["usage"] = usage;
    }
    answer
}

/// When the transcript's last stretch ends: its length, where the provider did not tell it.
fn last_end(transcription: &types::Transcription) -> Option<f64> {
    (transcription.segments.iter())
        .chain(&transcription.words)
        .map(|stretch| stretch.end)
        .reduce(f64::max)
}

#[derive(Clone, Copy)]
enum Cues {
    Srt,
    Vtt,
}

/// The transcript as SubRip or WebVTT cues: one a segment, or the whole text as one cue when the
/// provider gave no segments.
fn subtitles(transcription: &types::Transcription, cues: Cues) -> String {
    let whole = [types::TranscriptSegment {
        start: 0.0,
        end: transcription.duration.unwrap_or(0.0),
        text: transcription.text.clone(),
    }];
    let segments = if transcription.segments.is_empty() {
        &whole[..]
    } else {
        &transcription.segments[..]
    };
    let mut out = String::new();
    if let Cues::Vtt = cues {
        out.push_str("WEBVTT\n\n");
    }
    for (i, segment) in segments.iter().enumerate() {
        if let Cues::Srt = cues {
            let _ = writeln!(out, "{}", i + 1);
        }
        let separator = if let Cues::Srt = cues { ',' } else { '.' };
        let _ = writeln!(
            out,
            "{} --> {}\n{}\n",
            timestamp(segment.start, separator),
            timestamp(segment.end, separator),
            segment.text.trim()
        );
    }
    out
}

/// `HH:MM:SS,mmm` (SubRip) or `HH:MM:SS.mmm` (WebVTT).
fn timestamp(seconds: f64, separator: char) -> String {
    let millis = (seconds.max(0.0) * 1000.0).round() as u64;
    let (hours, rest) = (millis / 3_600_000, millis % 3_600_000);
    let (minutes, rest) = (rest / 60_000, rest % 60_000);
    let (secs, millis) = (rest / 1000, rest % 1000);
    format!("{hours:02}:{minutes:02}:{secs:02}{separator}{millis:03}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::flow::Surface;
    use crate::store::TokenUsage;

    fn form(parts: &[(&str, Option<&str>, &[u8])]) -> (Head, Vec<u8>) {
        let mut body = Vec::new();
        for (name, file_name, data) in parts {
            body.extend_from_slice(b"--B\r\nContent-Disposition: form-data; name=\"");
            body.extend_from_slice(name.as_bytes());
            body.push(b'"');
            if let Some(file_name) = file_name {
                body.extend_from_slice(format!("; filename=\"{file_name}\"").as_bytes());
                body.extend_from_slice(b"\r\nContent-Type: audio/wav");
            }
            body.extend_from_slice(b"\r\n\r\n");
            body.extend_from_slice(data);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"--B--\r\n");
        let request = hyper::Request::builder()
            .header("content-type", "multipart/form-data; boundary=B")
            .body(())
            .unwrap();
        (request.into_parts().0, body)
    }

    fn refusal(parts: &[(&str, Option<&str>, &[u8])]) -> String {
        let (head, body) = form(parts);
        match Transcriptions::parse(&head, &body) {
            Ok(_) => panic!("taken"),
            Err(ApiError::InvalidParam { param, .. }) => param,
            Err(error) => format!("{error:?}"),
        }
    }

    #[test]
    fn the_form_s_file_model_and_format_are_read_and_the_rest_goes_to_the_plugin() {
        let (head, body) = form(&[
            ("model", None, b"r/whisper-1"),
            ("file", Some("a.wav"), b"RIFF\x00\x01"),
            ("language", None, b"en"),
            ("timestamp_granularities[]", None, b"word"),
            ("response_format", None, b"srt"),
            ("stream", None, b"false"),
        ]);
        let audio = Transcriptions::parse(&head, &body).unwrap();
        assert_eq!(audio.format, Format::Srt);
        assert_eq!(
            Value::Object(audio.params.clone()),
            json!({"language": "en", "timestamp_granularities": ["word"], "response_format": "srt"})
        );
        let Ok(Ask::Transcribe(asked)) = audio.ask(Kind::Transcription, &Config::default()) else {
            panic!("not a transcription");
        };
        assert_eq!(asked.audio, b"RIFF\x00\x01");
        assert_eq!(asked.file_name, "a.wav");
        assert_eq!(asked.media_type.as_deref(), Some("audio/wav"));
        assert!(!asked.translate);
    }

    #[test]
    fn a_form_without_what_a_transcription_needs_is_refused_naming_the_field() {
        let file = ("file", Some("a.wav"), &b"RIFF"[..]);
        assert_eq!(refusal(&[("model", None, b"r/m")]), "file");
        assert_eq!(refusal(&[file]), "model");
        assert_eq!(refusal(&[("model", None, b"r/m"), file, file]), "file");
        let bad_format = ("response_format", None, &b"mp3"[..]);
        assert_eq!(
            refusal(&[("model", None, b"r/m"), file, bad_format]),
            "response_format"
        );
        let stream = ("stream", None, &b"true"[..]);
        assert_eq!(refusal(&[("model", None, b"r/m"), file, stream]), "stream");
        let other_file = ("prompt", Some("p.txt"), &b"hi"[..]);
        assert_eq!(
            refusal(&[("model", None, b"r/m"), file, other_file]),
            "prompt"
        );
        // Not a form at all.
        let head = hyper::Request::builder()
            .header("content-type", "application/json")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let error = Transcriptions::parse(&head, b"{}").err().unwrap();
        assert!(matches!(error, ApiError::BadRequest(_)), "{error:?}");
        assert!(error.to_string().contains("multipart/form-data"), "{error}");
    }

    fn transcription() -> types::Transcription {
        let segment = |start, end, text: &str| types::TranscriptSegment {
            start,
            end,
            text: text.into(),
        };
        types::Transcription {
            model: "whisper-1".into(),
            text: "Hello there. General Kenobi.".into(),
            language: Some("english".into()),
            duration: Some(3.5),
            segments: vec![
                segment(0.0, 1.25, " Hello there."),
                segment(1.25, 3661.5, " General Kenobi."),
            ],
            words: vec![segment(0.0, 0.5, "Hello")],
            usage: None,
            seconds: Some(4),
        }
    }

    fn rendered(format: Format, transcription: &types::Transcription) -> Rendered {
        let envelope = Envelope {
            invocation_id: "id",
            project_id: "p",
            kind: Kind::Transcription,
            model: "m",
        };
        let written = Written {
            transcription,
            translate: false,
            usage: None,
            seconds: transcription.seconds,
        };
        Answer(format).answer(&envelope, &written)
    }

    #[test]
    fn each_format_is_written_as_openai_writes_it() {
        let transcription = transcription();
        let json: Value =
            serde_json::from_str(&rendered(Format::Json, &transcription).body).unwrap();
        assert_eq!(
            json,
            json!({"text": "Hello there. General Kenobi.", "usage": {"type": "duration", "seconds": 4}})
        );
        let text = rendered(Format::Text, &transcription);
        assert_eq!(text.body, "Hello there. General Kenobi.\n");
        assert_eq!(text.content_type, TEXT);
        assert_eq!(
            rendered(Format::Srt, &transcription).body,
            "1\n00:00:00,000 --> 00:00:01,250\nHello there.\n\n\
             2\n00:00:01,250 --> 01:01:01,500\nGeneral Kenobi.\n\n"
        );
        let vtt = rendered(Format::Vtt, &transcription);
        assert!(
            vtt.body
                .starts_with("WEBVTT\n\n00:00:00.000 --> 00:00:01.250\nHello there.\n\n"),
            "{}",
            vtt.body
        );
        assert_eq!(vtt.content_type, VTT);
        let verbose: Value =
            serde_json::from_str(&rendered(Format::VerboseJson, &transcription).body).unwrap();
        assert_eq!(verbose["task"], json!("transcribe"));
        assert_eq!(verbose["language"], json!("english"));
        assert_eq!(verbose["duration"], json!(3.5));
        assert_eq!(
            verbose["segments"][1],
            json!({"id": 1, "start": 1.25, "end": 3661.5, "text": " General Kenobi."})
        );
        assert_eq!(
            verbose["words"],
            json!([{"word": "Hello", "start": 0.0, "end": 0.5}])
        );
        // No segments: one cue of the whole text.
        let plain = types::Transcription {
            segments: Vec::new(),
            ..transcription
        };
        assert_eq!(
            rendered(Format::Srt, &plain).body,
            "1\n00:00:00,000 --> 00:00:03,500\nHello there. General Kenobi.\n\n"
        );
    }

    #[test]
    fn tokens_are_written_as_openai_s_token_usage() {
        let transcription = types::Transcription {
            seconds: None,
            ..transcription()
        };
        let usage = TokenUsage {
            prompt_tokens: 30,
            completion_tokens: 8,
            total_tokens: 38,
            audio_prompt_tokens: Some(25),
            ..TokenUsage::default()
        };
        let written = Written {
            transcription: &transcription,
            translate: true,
            usage: Some(crate::flow::Metered {
                usage: &usage,
                cost_usd: None,
            }),
            seconds: None,
        };
        let envelope = Envelope {
            invocation_id: "id",
            project_id: "p",
            kind: Kind::Transcription,
            model: "m",
        };
        let json: Value =
            serde_json::from_str(&Answer(Format::Json).answer(&envelope, &written).body).unwrap();
        assert_eq!(
            json["usage"],
            json!({"type": "tokens", "input_tokens": 30,
                   "input_token_details": {"text_tokens": 5, "audio_tokens": 25},
                   "output_tokens": 8, "total_tokens": 38})
        );
        let verbose = Answer(Format::VerboseJson).answer(&envelope, &written).body;
        assert!(verbose.contains(r#""task":"translate""#), "{verbose}");
    }
}
