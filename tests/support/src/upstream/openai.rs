//! OpenAI's API as the fake serves it: chat completions from the script; `/embeddings` and the
//! legacy `/completions` computed from the request; errors as `{"error": {"message", "type",
//! "param", "code"}}`.
//!
//! Beside it, the rerank servers an OpenAI-compatible route may point at, told apart by the
//! route's base URL (`/v2/rerank` is Cohere's; under `/voyage/`, Voyage AI's; under `/tei/`,
//! text-embeddings-inference's; any other `/rerank`, Jina's and vLLM's), each computing its
//! ranking with [`fake_relevance`] and refusing (400) a body key its API does not take.
//!
//! `/images/generations` makes [`fake_png`]s of the prompt (DALL-E's `url`s on request, GPT
//! Image's tokens, size and quality), refusing a key OpenAI's reference does not list, a
//! `response_format` to GPT Image (which has none), more than one image of DALL-E 3, and the
//! prompt `refuse me` as OpenAI's safety system refuses one.
//!
//! `/audio/transcriptions` and `/audio/translations` read the form as OpenAI does (a field its
//! reference does not list, a missing file or model, a format the model does not write: 400)
//! and answer [`fake_transcript`] of the file: a WAV's length read from its header, billed as
//! Whisper bills (`usage.type: "duration"`) or as GPT-4o transcribe does (tokens); a file that
//! is not WAV, MP3 or Ogg is refused as OpenAI refuses one ("Invalid file format.").
//!
//! `/audio/speech` checks its body as OpenAI does (a key its reference does not list, a voice
//! it does not have, a format it does not make, more than 4,096 characters, events asked of
//! `tts-1`: 400) and speaks [`fake_speech`] of the text: its bytes written a word at a time, or,
//! with `stream_format: "sse"`, as base64 `speech.audio.delta` events and a last
//! `speech.audio.done` with [`fake_speech_tokens`].

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    Provider, ReceivedRequest, Reply, fake_embedding, fake_png, fake_relevance, rerank_tokens,
};

/// The OpenAI-compatible API.
pub struct OpenAi;

impl Provider for OpenAi {
    const NAME: &'static str = "fake-openai";

    fn is_generation(path: &str) -> bool {
        path.ends_with("/chat/completions")
    }

    fn computed(request: &ReceivedRequest) -> Option<Reply> {
        let path = request.path_only();
        if path.ends_with("/embeddings") {
            Some(embeddings(request))
        } else if path.ends_with("/rerank") {
            Some(rerank(request))
        } else if path.ends_with("/images/generations") {
            Some(images(request))
        } else if path.ends_with("/audio/transcriptions") || path.ends_with("/audio/translations") {
            Some(transcription(request, path.ends_with("/translations")))
        } else if path.ends_with("/audio/speech") {
            Some(speech(request))
        } else if path.ends_with("/completions") && !Self::is_generation(path) {
            Some(legacy_completion(request))
        } else {
            None
        }
    }

    fn error(status: u16, message: &str) -> Reply {
        Reply::openai_error(status, &format!("fake upstream: {message}"), "fake", None)
    }
}

impl Reply {
    /// A chat completion of `model` saying `text`, reporting `usage` (OpenAI's usage object).
    pub fn openai_answer(model: &str, text: &str, usage: Value) -> Reply {
        Reply::json(
            200,
            &json!({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                    "logprobs": null, "finish_reason": "stop"}],
                "usage": usage
            }),
        )
    }

    /// An error in OpenAI's shape, with `retry-after` when given.
    pub fn openai_error(
        status: u16,
        message: &str,
        code: &str,
        retry_after: Option<&str>,
    ) -> Reply {
        let kind = match status {
            401 | 404 => "invalid_request_error",
            429 => "rate_limit_exceeded",
            _ => "server_error",
        };
        let body = json!({
            "error": {"message": message, "type": kind, "param": null, "code": code}
        });
        Reply::json(status, &body).retry_after(retry_after)
    }

    /// A chat completion stream of `frames` words ([`slow_word`]), one every `gap`, then the
    /// finish reason, the usage and `[DONE]`.
    pub fn openai_slow_stream(frames: usize, gap: Duration) -> Reply {
        let chunk = |delta: Value, finish: Value| {
            json!({
                "id": "chatcmpl-slow", "object": "chat.completion.chunk", "created": 0, "model": "slow-model",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
                "usage": null
            })
        };
        let mut events = vec![sse_event(&chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        ))];
        for i in 0..frames {
            events.push(sse_event(&chunk(
                json!({"content": slow_word(i)}),
                Value::Null,
            )));
        }
        events.push(sse_event(&chunk(json!({}), json!("stop"))));
        events.push(sse_event(&json!({
            "id": "chatcmpl-slow", "object": "chat.completion.chunk", "created": 0, "model": "slow-model",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": frames, "total_tokens": 5 + frames}
        })));
        events.push("data: [DONE]\n\n".to_owned());
        Reply::events(events).gap(gap)
    }
}

fn sse_event(payload: &Value) -> String {
    format!("data: {payload}\n\n")
}

/// The word the slow stream sends as its `i`th piece of text.
pub fn slow_word(i: usize) -> String {
    format!("w{i} ")
}

/// The inputs of an embeddings or legacy request (`input` or `prompt`), as a list.
fn inputs(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => Vec::new(),
    }
}

fn embeddings(request: &ReceivedRequest) -> Reply {
    let body = request.json();
    let inputs = inputs(&body["input"]);
    let words: usize = inputs.iter().map(|s| s.split_whitespace().count()).sum();
    // Reverse order: the plugin must sort by `index`.
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, input)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(i, input)}))
        .collect();
    let answer = json!({
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": words, "total_tokens": words}
    });
    Reply::json(200, &answer)
}

/// The text the fake upstream's legacy completion answers for `prompt`.
pub fn legacy_text(prompt: &str) -> String {
    format!("legacy: {prompt}")
}

fn legacy_completion(request: &ReceivedRequest) -> Reply {
    let body = request.json();
    let prompt = inputs(&body["prompt"]).join("\n");
    let text = legacy_text(&prompt);
    let prompt_tokens = prompt.split_whitespace().count();
    let completion_tokens = text.split_whitespace().count();
    let usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens
    });
    if body["stream"].as_bool() == Some(true) {
        let chunk = |text: &str, finish: Value, usage: Value| {
            json!({
                "id": "cmpl-fake", "object": "text_completion", "created": 0, "model": body["model"],
                "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": finish}],
                "usage": usage
            })
        };
        let mut events: Vec<String> = text
            .split_inclusive(' ')
            .map(|word| sse_event(&chunk(word, Value::Null, Value::Null)))
            .collect();
        events.push(sse_event(&chunk("", json!("stop"), Value::Null)));
        events.push(sse_event(&json!({
            "id": "cmpl-fake", "object": "text_completion", "created": 0, "model": body["model"],
            "choices": [], "usage": usage
        })));
        events.push("data: [DONE]\n\n".to_owned());
        return Reply::events(events);
    }
    let answer = json!({
        "id": "cmpl-fake",
        "object": "text_completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": "stop"}],
        "usage": usage
    });
    Reply::json(200, &answer)
}

/// The body keys of `POST /images/generations` in OpenAI's reference.
const IMAGE_KEYS: &[&str] = &[
    "model",
    "prompt",
    "n",
    "size",
    "quality",
    "response_format",
    "style",
    "user",
    "background",
    "moderation",
    "output_compression",
    "output_format",
    "partial_images",
    "stream",
];

/// GPT Image's output tokens of one 1024x1024 image at medium quality.
pub const FAKE_IMAGE_TOKENS: u64 = 1056;

/// An image generation computed from the request: one [`fake_png`] of the prompt for each image
/// asked (`"{prompt}#{i}"`).
fn images(request: &ReceivedRequest) -> Reply {
    use base64::Engine as _;
    let body = request.json();
    let refuse = |message: &str| Reply::openai_error(400, message, "invalid_request_error", None);
    let Some(fields) = body.as_object() else {
        return refuse("the body is not an object");
    };
    if let Some(key) = fields
        .keys()
        .find(|key| !IMAGE_KEYS.contains(&key.as_str()))
    {
        return refuse(&format!("Unknown parameter: '{key}'."));
    }
    let (Some(model), Some(prompt)) = (body["model"].as_str(), body["prompt"].as_str()) else {
        return refuse("model and prompt are required strings");
    };
    let n = body.get("n").map_or(Some(1), Value::as_u64).unwrap_or(0);
    let gpt_image = model.starts_with("gpt-image");
    if !(1..=10).contains(&n) || (model == "dall-e-3" && n != 1) {
        return refuse(&format!("n = {n} is not taken by {model}"));
    }
    if gpt_image && fields.contains_key("response_format") {
        return refuse("Unknown parameter: 'response_format'.");
    }
    if prompt == "refuse me" {
        return Reply::openai_error(
            400,
            "Your request was rejected as a result of our safety system.",
            "invalid_request_error",
            Some("content_policy_violation"),
        );
    }
    let urls = body["response_format"] == "url";
    let data: Vec<Value> = (0..n)
        .map(|i| {
            let mut image = if urls {
                json!({ "url": format!("https://images.fake-openai.test/{i}.png") })
            } else {
                let png = fake_png(&format!("{prompt}#{i}"));
                json!({ "b64_json": base64::engine::general_purpose::STANDARD.encode(png) })
            };
            if model == "dall-e-3" {
                image["revised_prompt"] = json!(format!("{prompt}, in fine detail"));
            }
            image
        })
        .collect();
    let mut answer = json!({ "created": 1_700_000_000, "data": data });
    if gpt_image {
        let input = prompt.split_whitespace().count() as u64;
        let output = FAKE_IMAGE_TOKENS * n;
        answer["size"] = json!(body["size"].as_str().unwrap_or("1024x1024"));
        answer["quality"] = json!(body["quality"].as_str().unwrap_or("medium"));
        answer["output_format"] = json!(body["output_format"].as_str().unwrap_or("png"));
        answer["usage"] = json!({
            "total_tokens": input + output,
            "input_tokens": input,
            "output_tokens": output,
            "input_tokens_details": {"text_tokens": input, "image_tokens": 0},
        });
    }
    Reply::json(200, &answer)
}

/// The body keys of `POST /audio/speech` in OpenAI's reference.
const SPEECH_KEYS: &[&str] = &[
    "model",
    "input",
    "voice",
    "instructions",
    "response_format",
    "speed",
    "stream_format",
];

/// The built-in voices of OpenAI's speech models.
pub const SPEECH_VOICES: &[&str] = &[
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse",
    "marin", "cedar",
];

/// The audio the fake speaks for `input` in `voice` and `format`: ASCII (the fake's bodies are
/// text), starting with the format's magic bytes, one piece a word.
pub fn fake_speech(input: &str, voice: &str, format: &str) -> Vec<String> {
    let magic = match format {
        "mp3" => "ID3",
        "opus" => "OggS",
        "flac" => "fLaC",
        "wav" => "RIFF",
        _ => "",
    };
    let mut pieces = vec![format!("{magic}[{voice}]")];
    pieces.extend(input.split_whitespace().map(|word| format!("<{word}>")));
    pieces
}

/// GPT speech models' tokens for `input` and its audio, as the fake counts them: a token a word
/// read, ten a word spoken.
pub fn fake_speech_tokens(input: &str) -> (u64, u64) {
    let words = input.split_whitespace().count() as u64;
    (words, words * 10)
}

/// A speech computed from its body.
fn speech(request: &ReceivedRequest) -> Reply {
    let refuse = |param: &str, message: &str| {
        let body = json!({"error": {"message": message, "type": "invalid_request_error",
                                    "param": param, "code": null}});
        Reply::json(400, &body)
    };
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&request.body) else {
        return refuse("", "We could not parse the JSON body of your request.");
    };
    if let Some(key) = body.keys().find(|key| !SPEECH_KEYS.contains(&key.as_str())) {
        return refuse(
            key,
            &format!("Unrecognized request argument supplied: {key}"),
        );
    }
    let text = |key: &str| body.get(key).and_then(Value::as_str);
    let (Some(model), Some(input)) = (text("model"), text("input")) else {
        return refuse("input", "model and input are required");
    };
    if input.chars().count() > 4096 {
        return refuse("input", "input must be at most 4096 characters");
    }
    let voice = match body.get("voice") {
        Some(Value::String(voice)) if SPEECH_VOICES.contains(&voice.as_str()) => voice.clone(),
        Some(Value::Object(custom)) => match custom.get("id").and_then(Value::as_str) {
            Some(id) if id.starts_with("voice_") => id.to_owned(),
            _ => return refuse("voice", "Invalid custom voice"),
        },
        other => {
            let named = other.map(Value::to_string).unwrap_or_default();
            return refuse("voice", &format!("Invalid value for 'voice': {named}."));
        }
    };
    let format = text("response_format").unwrap_or("mp3");
    let content_type = match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/ogg",
        "aac" => "audio/aac",
        "flac" => "audio/flac",
        "wav" => "audio/wav",
        "pcm" => "audio/pcm",
        _ => {
            return refuse(
                "response_format",
                &format!("Invalid response_format: {format}"),
            );
        }
    };
    let pieces = fake_speech(input, &voice, format);
    match text("stream_format") {
        None | Some("audio") => Reply::Pieces {
            status: 200,
            content_type: content_type.to_owned(),
            headers: Vec::new(),
            pieces,
            gap: Duration::from_millis(2),
            ending: super::Ending::Finish,
        },
        Some("sse") if model.starts_with("tts-1") => refuse(
            "stream_format",
            "stream_format 'sse' is not supported for tts-1",
        ),
        Some("sse") => {
            use base64::Engine as _;
            let encode = |piece: &String| base64::engine::general_purpose::STANDARD.encode(piece);
            let mut events: Vec<String> = (pieces.iter())
                .map(|piece| {
                    sse_event(&json!({"type": "speech.audio.delta", "audio": encode(piece)}))
                })
                .collect();
            let (input_tokens, output_tokens) = fake_speech_tokens(input);
            events.push(sse_event(&json!({"type": "speech.audio.done", "usage": {
                "input_tokens": input_tokens, "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens}})));
            Reply::events(events).gap(Duration::from_millis(2))
        }
        Some(other) => refuse("stream_format", &format!("Invalid stream_format: {other}")),
    }
}

/// The form fields of `POST /audio/transcriptions` in OpenAI's reference (`translations` takes
/// fewer; the fake takes the same).
const TRANSCRIPTION_FIELDS: &[&str] = &[
    "file",
    "model",
    "language",
    "prompt",
    "response_format",
    "temperature",
    "timestamp_granularities[]",
    "chunking_strategy",
    "include[]",
    "stream",
];

/// The seconds of audio in a WAV file (`None` for anything else): its data chunk's size over its
/// byte rate, as a canonical 44-byte header writes them.
pub fn wav_seconds(file: &[u8]) -> Option<f64> {
    if file.len() < 44 || &file[..4] != b"RIFF" || &file[8..12] != b"WAVE" {
        return None;
    }
    let word = |at: usize| u32::from_le_bytes([file[at], file[at + 1], file[at + 2], file[at + 3]]);
    let byte_rate = word(28);
    (byte_rate > 0).then(|| f64::from(word(40)) / f64::from(byte_rate))
}

/// What the fake hears in a file: its name and length, in English when translated.
pub fn fake_transcript(file_name: &str, seconds: f64, translate: bool) -> String {
    let language = if translate { "in English, " } else { "" };
    format!("{language}{seconds:.1} seconds of {file_name}")
}

/// GPT-4o transcribe's audio tokens a second of audio, as the fake counts them.
pub const FAKE_AUDIO_TOKENS_PER_SECOND: f64 = 10.0;

/// A transcription computed from the uploaded form.
fn transcription(request: &ReceivedRequest, translate: bool) -> Reply {
    let refuse = |message: &str| Reply::openai_error(400, message, "invalid_request_error", None);
    let content_type = request.header("content-type");
    let form = match gateway::form::read(content_type, &request.body) {
        Ok(form) => form,
        Err(error) => return refuse(&error.to_string()),
    };
    let mut file = None;
    let mut fields: Vec<(String, String)> = Vec::new();
    for field in form.fields {
        if !TRANSCRIPTION_FIELDS.contains(&field.name.as_str()) {
            return refuse(&format!("Unknown parameter: '{}'.", field.name));
        }
        if field.name == "file" {
            file = Some(field);
        } else {
            fields.push((
                field.name,
                String::from_utf8_lossy(&field.data).into_owned(),
            ));
        }
    }
    let value = |name: &str| {
        (fields.iter())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let (Some(file), Some(model)) = (file, value("model")) else {
        return refuse("file and model are required");
    };
    let format = value("response_format").unwrap_or("json");
    let whisper = model.starts_with("whisper");
    let formats: &[&str] = if whisper {
        &["json", "text", "srt", "verbose_json", "vtt"]
    } else {
        &["json", "text"]
    };
    if !formats.contains(&format) {
        return refuse(&format!(
            "response_format '{format}' is not compatible with model '{model}'."
        ));
    }
    let seconds = match wav_seconds(&file.data) {
        Some(seconds) => seconds,
        None if file.data.starts_with(b"ID3") || file.data.starts_with(b"OggS") => 1.0,
        None => return refuse("Invalid file format."),
    };
    let file_name = file.file_name.unwrap_or_default();
    let text = fake_transcript(&file_name, seconds, translate);
    let usage = if whisper {
        json!({"type": "duration", "seconds": seconds.ceil() as u64})
    } else {
        let audio = (seconds * FAKE_AUDIO_TOKENS_PER_SECOND).ceil() as u64;
        let output = text.split_whitespace().count() as u64;
        json!({"type": "tokens", "input_tokens": audio, "input_token_details":
               {"text_tokens": 0, "audio_tokens": audio}, "output_tokens": output,
               "total_tokens": audio + output})
    };
    match format {
        "text" => Reply::raw(200, "text/plain; charset=utf-8", format!("{text}\n")),
        "verbose_json" => {
            let half = seconds / 2.0;
            let (first, second) = text.split_at(text.find(" of ").unwrap_or(text.len()));
            let mut answer = json!({
                "task": if translate { "translate" } else { "transcribe" },
                "language": "english",
                "duration": seconds,
                "text": text,
                "segments": [
                    {"id": 0, "seek": 0, "start": 0.0, "end": half, "text": first,
                     "tokens": [1, 2], "temperature": 0.0, "avg_logprob": -0.1,
                     "compression_ratio": 1.0, "no_speech_prob": 0.0},
                    {"id": 1, "seek": 0, "start": half, "end": seconds, "text": second,
                     "tokens": [3], "temperature": 0.0, "avg_logprob": -0.1,
                     "compression_ratio": 1.0, "no_speech_prob": 0.0},
                ],
                "usage": usage,
            });
            let granularities = fields
                .iter()
                .filter(|(n, _)| n == "timestamp_granularities[]");
            if granularities.clone().any(|(_, v)| v == "word") {
                let words: Vec<&str> = text.split_whitespace().collect();
                let step = seconds / words.len().max(1) as f64;
                answer["words"] = (words.iter().enumerate())
                    .map(|(i, word)| {
                        json!({"word": word, "start": step * i as f64, "end": step * (i + 1) as f64})
                    })
                    .collect();
            }
            Reply::json(200, &answer)
        }
        // srt and vtt are the gateway's to write; the fake need not.
        "srt" | "vtt" => refuse("the fake writes no subtitles"),
        _ => Reply::json(200, &json!({"text": text, "usage": usage})),
    }
}

/// The rerank APIs the fake serves, by where the route points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RerankApi {
    Cohere,
    Jina,
    Voyage,
    Tei,
}

impl RerankApi {
    fn of(path: &str) -> RerankApi {
        if path.ends_with("/v2/rerank") {
            RerankApi::Cohere
        } else if path.contains("/voyage/") {
            RerankApi::Voyage
        } else if path.contains("/tei/") {
            RerankApi::Tei
        } else {
            RerankApi::Jina
        }
    }

    /// The body keys each API's reference lists.
    fn keys(self) -> &'static [&'static str] {
        match self {
            RerankApi::Cohere => &["model", "query", "documents", "top_n", "max_tokens_per_doc"],
            RerankApi::Jina => &["model", "query", "documents", "top_n", "return_documents"],
            RerankApi::Voyage => &[
                "model",
                "query",
                "documents",
                "top_k",
                "return_documents",
                "truncation",
            ],
            RerankApi::Tei => &[
                "query",
                "texts",
                "raw_scores",
                "return_text",
                "truncate",
                "truncation_direction",
            ],
        }
    }
}

/// A rerank answer computed from the request, in the shape of the API its path names.
fn rerank(request: &ReceivedRequest) -> Reply {
    let api = RerankApi::of(request.path_only());
    let body = request.json();
    let refuse = |message: String| Reply::openai_error(400, &message, "invalid_request", None);
    let Some(fields) = body.as_object() else {
        return refuse("the body is not an object".into());
    };
    if let Some(key) = fields
        .keys()
        .find(|key| !api.keys().contains(&key.as_str()))
    {
        return refuse(format!("{api:?} takes no field {key:?}"));
    }
    let list = if api == RerankApi::Tei {
        "texts"
    } else {
        "documents"
    };
    let (Some(query), Some(documents)) = (body["query"].as_str(), body[list].as_array()) else {
        return refuse(format!("query and {list} are required"));
    };
    let Some(documents) = documents
        .iter()
        .map(|d| d.as_str().map(str::to_owned))
        .collect::<Option<Vec<String>>>()
    else {
        return refuse(format!("{list} must be strings"));
    };
    let mut ranked: Vec<(usize, f64)> = (documents.iter().enumerate())
        .map(|(i, document)| (i, fake_relevance(query, document)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let top = if api == RerankApi::Voyage {
        "top_k"
    } else {
        "top_n"
    };
    if let Some(n) = body[top].as_u64() {
        ranked.truncate(n as usize);
    }
    let tokens = rerank_tokens(query, &documents);
    let answer = match api {
        RerankApi::Cohere => json!({
            "id": "rerank-fake",
            "results": ranked.iter().map(|&(index, score)| json!({"index": index, "relevance_score": score})).collect::<Vec<_>>(),
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        }),
        RerankApi::Jina => json!({
            "model": body["model"],
            "usage": {"total_tokens": tokens},
            "results": ranked.iter().map(|&(index, score)| json!({
                "index": index, "relevance_score": score, "document": {"text": documents[index]},
            })).collect::<Vec<_>>(),
        }),
        RerankApi::Voyage => json!({
            "object": "list",
            "data": ranked.iter().map(|&(index, score)| json!({"index": index, "relevance_score": score})).collect::<Vec<_>>(),
            "model": body["model"],
            "usage": {"total_tokens": tokens},
        }),
        // Every text, in the order given: the plugin sorts and cuts.
        RerankApi::Tei => Value::Array(
            (documents.iter().enumerate())
                .map(|(index, document)| json!({"index": index, "score": fake_relevance(query, document)}))
                .collect(),
        ),
    };
    Reply::json(200, &answer)
}
