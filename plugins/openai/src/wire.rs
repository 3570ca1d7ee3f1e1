//! Serde types of the OpenAI wire format (chat completions, legacy completions, embeddings)
//! and of the rerank APIs the plugin speaks (Cohere's and its copies, Voyage's, TEI's).
//!
//! Response types are deliberately lenient: every field the plugin does not need is ignored, and
//! fields that OpenAI-compatible servers sometimes omit or send as `null` have defaults, so that
//! Groq, llama.cpp, vLLM, Azure and friends parse as well as OpenAI itself.

use std::borrow::Cow;

use gateway_plugin_sdk::{Base64, DataUrl, json};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// One message of a chat completions request, borrowing the texts and media of the
/// conversation's message it stands for.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChatMessage<'a> {
    pub role: &'static str,
    /// Only absent on assistant messages that call tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// A message's `content`: one string (every message whose parts are all text, so that
/// text-only requests read as they always have), or content parts (a user message with media).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<ContentPart<'a>>),
}

/// One of a user message's content parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl<'a> },
    InputAudio { input_audio: InputAudio<'a> },
    File { file: FileData<'a> },
}

/// `image_url` of an image part: an `https:` URL, or the image as a `data:` URL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageUrl<'a> {
    pub url: DataUrl<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'a str>,
}

/// `input_audio` of an audio part: the clip in base64 and its format (`wav`, `mp3`, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputAudio<'a> {
    pub data: Base64<'a>,
    pub format: &'a str,
}

/// `file` of a file part: the document as a `data:` URL and its file name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileData<'a> {
    pub file_data: DataUrl<'a>,
    pub filename: &'a str,
}

/// A tool call on an assistant message of a request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallOut {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCallOut,
}

/// The function part of a request's tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCallOut {
    pub name: String,
    pub arguments: String,
}

/// An entry of the request's `tools`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: ToolFunction,
}

/// The function a tool exposes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolFunction {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// A non-streamed answer of `/chat/completions` or `/completions`, or one `data:` payload of a
/// streamed one.
#[derive(Debug, Default, Deserialize)]
pub struct CompletionResponse {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub choices: Vec<ResponseChoice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Some compatible servers answer errors with status 200 and this field.
    #[serde(default)]
    pub error: Option<Value>,
}

/// One choice of an answer or a stream chunk.
#[derive(Debug, Default, Deserialize)]
pub struct ResponseChoice {
    #[serde(default)]
    pub index: u32,
    /// Chat completions, non-streamed.
    #[serde(default)]
    pub message: Option<ResponseMessage>,
    /// Chat completions, streamed: the new part of the message.
    #[serde(default)]
    pub delta: Option<ResponseMessage>,
    /// Legacy completions.
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub logprobs: Option<Value>,
}

/// The assistant message of a chat choice, or the new part of a streamed one. `refusal` is
/// ignored on purpose: it is not answer text.
#[derive(Debug, Default, Deserialize)]
pub struct ResponseMessage {
    #[serde(default)]
    pub content: Option<String>,
    /// The model's reasoning, as DeepSeek, vLLM and llama.cpp name it.
    #[serde(default, deserialize_with = "string_or_none")]
    pub reasoning_content: Option<String>,
    /// The model's reasoning, as Groq, OpenRouter and Ollama name it.
    #[serde(default, deserialize_with = "string_or_none")]
    pub reasoning: Option<String>,
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub tool_calls: Vec<ToolCallIn>,
    #[serde(default)]
    pub function_call: Option<FunctionCallIn>,
}

/// A string, else `None`: a field some servers fill with something else (an object, `null`)
/// is not worth failing the answer over.
fn string_or_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(text) => Some(text),
        _ => None,
    })
}

/// A tool call of an answer, or a piece of a streamed one (id and name come once, arguments in
/// pieces).
#[derive(Debug, Default, Deserialize)]
pub struct ToolCallIn {
    /// Which call a streamed piece continues.
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub id: Option<String>,
    /// Absent on non-function tool calls (e.g. custom tools), which the gateway cannot express.
    #[serde(default)]
    pub function: Option<FunctionCallIn>,
}

/// A function call of an answer or a piece of one (also the legacy `function_call` field).
#[derive(Debug, Default, Deserialize)]
pub struct FunctionCallIn {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

/// Token counts as OpenAI reports them. Counts are read leniently (see [`json::count`]).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct WireUsage {
    #[serde(default, deserialize_with = "json::count")]
    pub prompt_tokens: Option<u32>,
    #[serde(default, deserialize_with = "json::count")]
    pub completion_tokens: Option<u32>,
    #[serde(default, deserialize_with = "json::count")]
    pub total_tokens: Option<u32>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
    /// DeepSeek's name for the cached part of `prompt_tokens` (its answers may lack
    /// `prompt_tokens_details`).
    #[serde(default, deserialize_with = "json::count")]
    pub prompt_cache_hit_tokens: Option<u32>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct PromptTokensDetails {
    #[serde(default, deserialize_with = "json::count")]
    pub cached_tokens: Option<u32>,
    #[serde(default, deserialize_with = "json::count")]
    pub audio_tokens: Option<u32>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct CompletionTokensDetails {
    #[serde(default, deserialize_with = "json::count")]
    pub reasoning_tokens: Option<u32>,
}

/// An answer of `/embeddings`.
#[derive(Debug, Default, Deserialize)]
pub struct EmbeddingResponse {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub data: Vec<EmbeddingData>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

/// One vector of an embeddings answer.
#[derive(Debug, Deserialize)]
pub struct EmbeddingData {
    #[serde(default)]
    pub index: u32,
    pub embedding: EmbeddingVector,
}

/// A vector as floats, or as base64 of little-endian f32 when the caller asked for
/// `encoding_format: "base64"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingVector {
    Floats(Vec<f32>),
    Base64(String),
}

/// An answer of a Cohere-style `/rerank` (Cohere v2, Jina, vLLM, Infinity, LocalAI). Each
/// result's `document` (Jina's and vLLM's by default) is ignored: the gateway has the texts.
#[derive(Debug, Default, Deserialize)]
pub struct RerankResponse {
    #[serde(default)]
    pub model: Option<String>,
    /// Absent on an error answered with status 200 (then `error` says why).
    #[serde(default)]
    pub results: Option<Vec<RerankResultIn>>,
    /// `total_tokens` (Jina, vLLM, Voyage) or `prompt_tokens` (Infinity, LocalAI).
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Cohere's billing.
    #[serde(default)]
    pub meta: Option<RerankMeta>,
    #[serde(default)]
    pub error: Option<Value>,
}

/// An answer of `/images/generations`. `data`'s images are borrowed from the body: a base64
/// image is megabytes, decoded once into its bytes.
#[derive(Debug, Default, Deserialize)]
pub struct ImagesResponse<'a> {
    /// Absent on an error answered with status 200 (then `error` says why).
    #[serde(default, borrow)]
    pub data: Option<Vec<ImageOut<'a>>>,
    /// GPT Image's tokens (`input_tokens`, `output_tokens`, `input_tokens_details`).
    #[serde(default)]
    pub usage: Option<ImageUsage>,
    /// GPT Image's, as made.
    #[serde(default)]
    pub size: Option<String>,
    #[serde(default)]
    pub quality: Option<String>,
    #[serde(default)]
    pub output_format: Option<String>,
    #[serde(default)]
    pub error: Option<Value>,
}

/// One image of an [`ImagesResponse`]: its base64 bytes or a URL.
#[derive(Debug, Default, Deserialize)]
pub struct ImageOut<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub b64_json: Option<Cow<'a, str>>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub revised_prompt: Option<String>,
}

/// A string borrowed from the body where it has no escapes (base64 has none), else copied:
/// serde's own `Cow<str>` always copies.
fn borrowed_text<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'de, str>>, D::Error> {
    struct Text;
    impl<'de> serde::de::Visitor<'de> for Text {
        type Value = Option<Cow<'de, str>>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(text)))
        }
        fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(text.to_owned())))
        }
        fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(text)))
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_str(Text)
        }
    }
    deserializer.deserialize_option(Text)
}

/// An answer of `/audio/transcriptions` or `/audio/translations` as `json` or `verbose_json`.
#[derive(Debug, Default, Deserialize)]
pub struct TranscriptionResponse {
    /// Absent on an error answered with status 200 (then `error` says why).
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub language: Option<String>,
    /// Seconds, as a number (some servers write it as a string).
    #[serde(default, deserialize_with = "json::lenient_seconds")]
    pub duration: Option<f64>,
    #[serde(default)]
    pub segments: Option<Vec<TimedText>>,
    #[serde(default)]
    pub words: Option<Vec<TimedWord>>,
    #[serde(default)]
    pub usage: Option<TranscriptionUsage>,
    #[serde(default)]
    pub error: Option<Value>,
}

/// A segment of a verbose transcript (its other keys, `tokens`, `avg_logprob`, ..., ignored).
#[derive(Debug, Deserialize)]
pub struct TimedText {
    pub start: f64,
    pub end: f64,
    pub text: String,
}

/// A word of a verbose transcript.
#[derive(Debug, Deserialize)]
pub struct TimedWord {
    pub start: f64,
    pub end: f64,
    pub word: String,
}

/// A transcription's usage: tokens (`type: "tokens"`, GPT-4o transcribe) or the seconds billed
/// (`type: "duration"`, Whisper).
#[derive(Debug, Default, Deserialize)]
pub struct TranscriptionUsage {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "json::lenient_seconds")]
    pub seconds: Option<f64>,
    #[serde(default, deserialize_with = "json::count")]
    pub input_tokens: Option<u32>,
    #[serde(default, deserialize_with = "json::count")]
    pub output_tokens: Option<u32>,
    #[serde(default, deserialize_with = "json::count")]
    pub total_tokens: Option<u32>,
    #[serde(default)]
    pub input_token_details: Option<TranscriptionInputDetails>,
}

/// `usage.input_token_details` of a transcription.
#[derive(Debug, Default, Deserialize)]
pub struct TranscriptionInputDetails {
    #[serde(default, deserialize_with = "json::count")]
    pub audio_tokens: Option<u32>,
}

/// GPT Image's usage of an image generation; GPT speech models report a speech's in the same
/// fields (without the details).
#[derive(Debug, Default, Deserialize)]
pub struct ImageUsage {
    #[serde(default, deserialize_with = "json::count")]
    pub input_tokens: Option<u32>,
    #[serde(default, deserialize_with = "json::count")]
    pub output_tokens: Option<u32>,
    #[serde(default, deserialize_with = "json::count")]
    pub total_tokens: Option<u32>,
    #[serde(default)]
    pub input_tokens_details: Option<ImageInputDetails>,
}

/// One event of `/audio/speech`'s stream (`stream_format: "sse"`): a piece of the audio
/// (`speech.audio.delta`), or the end with the tokens billed (`speech.audio.done`).
#[derive(Debug, Default, Deserialize)]
pub struct SpeechEvent<'a> {
    #[serde(default, rename = "type", borrow)]
    pub kind: Option<Cow<'a, str>>,
    /// Base64.
    #[serde(default, borrow)]
    pub audio: Option<Cow<'a, str>>,
    #[serde(default)]
    pub usage: Option<ImageUsage>,
    /// An error a server sent as an event.
    #[serde(default)]
    pub error: Option<Value>,
}

/// `usage.input_tokens_details` of an image generation.
#[derive(Debug, Default, Deserialize)]
pub struct ImageInputDetails {
    #[serde(default, deserialize_with = "json::count")]
    pub image_tokens: Option<u32>,
}

/// Voyage AI's answer of `/rerank`.
#[derive(Debug, Default, Deserialize)]
pub struct VoyageRerankResponse {
    #[serde(default)]
    pub model: Option<String>,
    pub data: Vec<RerankResultIn>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

/// One document's score in a Cohere-style or Voyage answer.
#[derive(Debug, Deserialize)]
pub struct RerankResultIn {
    pub index: u32,
    pub relevance_score: f64,
}

/// One document's score in text-embeddings-inference's answer (a bare list of them).
#[derive(Debug, Deserialize)]
pub struct TeiRank {
    pub index: u32,
    pub score: f64,
}

/// Cohere's `meta` of an answer.
#[derive(Debug, Default, Deserialize)]
pub struct RerankMeta {
    #[serde(default)]
    pub billed_units: Option<BilledUnits>,
}

/// Cohere's `meta.billed_units`. Its schema types the counts as numbers, not integers, so
/// they are read leniently (see [`json::count`]).
#[derive(Debug, Default, Deserialize)]
pub struct BilledUnits {
    #[serde(default, deserialize_with = "json::count")]
    pub search_units: Option<u32>,
}
