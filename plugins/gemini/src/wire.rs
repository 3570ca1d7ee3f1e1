//! Serde types of the Gemini API's wire format (`generateContent`, `streamGenerateContent`,
//! `batchEmbedContents`).
//!
//! Request types carry only what the plugin sends. Response types are lenient: every field the
//! plugin does not need is ignored, and lists or counts that are missing or `null` take defaults,
//! so a new field or an omitted one never fails an otherwise good answer.

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::{Base64, ProviderError, json, upstream_error};
use serde::{Deserialize, Serialize};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Requests

/// One turn of the conversation (`contents[]`), or the `systemInstruction`, borrowing the media
/// of the conversation's messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Content<'a> {
    /// `"user"` or `"model"`; absent on the system instruction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    pub parts: Vec<Part<'a>>,
}

/// One part of a content: text, a thought summary, media (inline or at a URI), a function call
/// the model made, or a function's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `true` on a replayed thought summary (a reasoning part of an earlier model turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    /// Media sent in the request, base64-encoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob<'a>>,
    /// Media Gemini fetches itself (an `https:` URL, a Files API or `gs://` URI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_data: Option<FileData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCallOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponseOut>,
    /// The signature Gemini put on this part when it wrote it, sent back on the same part
    /// (see `convert::conversation`), or the placeholder of
    /// `convert::THOUGHT_SIGNATURE_SENTINEL` on replayed function calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
}

/// Bytes of a media part (`inlineData`), borrowed from the request's part.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob<'a> {
    pub mime_type: String,
    /// Standard base64, encoded straight into the body as it is written.
    pub data: Base64<'a>,
}

/// A media part at a URI (`fileData`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileData {
    pub mime_type: String,
    pub file_uri: String,
}

impl Part<'_> {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part {
            text: Some(text.into()),
            ..Part::default()
        }
    }
}

/// A function call of an earlier model turn, replayed in the conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCallOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    /// The arguments as a JSON object.
    pub args: Value,
}

/// A function's result, sent in a user turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionResponseOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    /// The result as a JSON object.
    pub response: Value,
}

/// An entry of `tools`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub function_declarations: Vec<FunctionDeclaration>,
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionDeclaration {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments' schema in Gemini's OpenAPI subset (see `schema`); absent for a function
    /// without arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

// ---------------------------------------------------------------------------------------------
// Responses

/// An answer of `generateContent`, and each event of `streamGenerateContent`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse {
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub candidates: Vec<Candidate>,
    #[serde(default)]
    pub prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    pub model_version: Option<String>,
    /// An error reported inside a successful answer (e.g. mid-stream).
    #[serde(default)]
    pub error: Option<Value>,
}

/// One alternative answer.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// Absent when the candidate was stopped before saying anything (e.g. `SAFETY`).
    #[serde(default)]
    pub content: Option<CandidateContent>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// The finish reason in words, where Google gives them (Vertex AI documents it).
    #[serde(default)]
    pub finish_message: Option<String>,
    /// Absent on single-candidate answers of some models: the position then serves.
    #[serde(default)]
    pub index: Option<u32>,
    /// The chosen tokens' log probabilities, when `responseLogprobs` asked for them (in a
    /// stream, those of the event's tokens).
    #[serde(default)]
    pub logprobs_result: Option<LogprobsResult>,
}

/// Log probabilities of an answer's tokens, one entry per decoding step in both lists.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogprobsResult {
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub chosen_candidates: Vec<LogprobsCandidate>,
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub top_candidates: Vec<TopCandidates>,
}

/// The most likely tokens of one decoding step, most likely first.
#[derive(Debug, Default, Deserialize)]
pub struct TopCandidates {
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub candidates: Vec<LogprobsCandidate>,
}

/// A token and its log probability.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogprobsCandidate {
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub log_probability: Option<f64>,
}

/// The content of a candidate.
#[derive(Debug, Default, Deserialize)]
pub struct CandidateContent {
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub parts: Vec<PartIn>,
}

/// A part of an answer. Parts the gateway cannot express (executable code, ...) deserialize
/// with every field empty and are skipped; so is inline data in completions (only the images of
/// `image_output` read it).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartIn {
    #[serde(default)]
    pub text: Option<String>,
    /// `true` on thought summaries, which are not answer text, and on the draft images Gemini 3
    /// Pro Image makes while it thinks, which are not the answer's images.
    #[serde(default)]
    pub thought: Option<bool>,
    /// Media the model made (the image of an image model), base64-encoded.
    #[serde(default)]
    pub inline_data: Option<BlobIn>,
    #[serde(default)]
    pub function_call: Option<FunctionCallIn>,
    /// The model's reasoning state behind this part, to send back on the same part.
    #[serde(default)]
    pub thought_signature: Option<String>,
}

/// Bytes of a media part of an answer (`inlineData`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobIn {
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Standard base64.
    #[serde(default)]
    pub data: String,
}

/// A function call the model made; `args` arrives whole, never in pieces.
#[derive(Debug, Default, Deserialize)]
pub struct FunctionCallIn {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub args: Option<Value>,
}

/// Why the prompt itself was refused.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptFeedback {
    #[serde(default)]
    pub block_reason: Option<String>,
    /// The block reason in words, where Google gives them (Vertex AI documents it).
    #[serde(default)]
    pub block_reason_message: Option<String>,
}

/// Token counts. Counts are read leniently (see [`json::count_or_numeric_string`]).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    /// The prompt, including cached content.
    #[serde(default, deserialize_with = "json::count_or_numeric_string")]
    pub prompt_token_count: Option<u32>,
    /// The answer, without thoughts.
    #[serde(default, deserialize_with = "json::count_or_numeric_string")]
    pub candidates_token_count: Option<u32>,
    #[serde(default, deserialize_with = "json::count_or_numeric_string")]
    pub total_token_count: Option<u32>,
    #[serde(default, deserialize_with = "json::count_or_numeric_string")]
    pub cached_content_token_count: Option<u32>,
    /// Thinking tokens, billed as output.
    #[serde(default, deserialize_with = "json::count_or_numeric_string")]
    pub thoughts_token_count: Option<u32>,
    /// Results of built-in tools (search, code execution) fed back to the model, billed as input.
    #[serde(default, deserialize_with = "json::count_or_numeric_string")]
    pub tool_use_prompt_token_count: Option<u32>,
    /// The prompt's tokens by modality (`TEXT`, `IMAGE`, `AUDIO`, `VIDEO`, `DOCUMENT`).
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub prompt_tokens_details: Vec<ModalityTokenCount>,
}

/// Tokens of one modality.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModalityTokenCount {
    #[serde(default)]
    pub modality: Option<String>,
    #[serde(default, deserialize_with = "json::count_or_numeric_string")]
    pub token_count: Option<u32>,
}

/// An answer of `batchEmbedContents`.
#[derive(Debug, Default, Deserialize)]
pub struct BatchEmbedResponse {
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub embeddings: Vec<ContentEmbedding>,
}

/// One vector of a batch.
#[derive(Debug, Deserialize)]
pub struct ContentEmbedding {
    pub values: Vec<f32>,
}

/// `countTokens`' answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CountTokensResponse {
    pub total_tokens: u32,
}

/// Gemini answers a request whose API key is wrong with 400 `INVALID_ARGUMENT` (reason
/// `API_KEY_INVALID`), which the gateway would pass on as the caller's fault; it is the route's
/// key, as a 401 is from every other provider, so it becomes one (the gateway's 502). Any other
/// response comes back as it was.
pub fn key_refused(mut response: Response) -> Result<Response, ProviderError> {
    if response.status != 400 {
        return Ok(response);
    }
    let headers = std::mem::take(&mut response.headers);
    let body = response.bytes()?;
    let reasons = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|body| body["error"]["details"].as_array().cloned())
        .unwrap_or_default();
    if reasons
        .iter()
        .any(|detail| detail["reason"] == "API_KEY_INVALID")
    {
        return Err(upstream_error(401, &body, None));
    }
    Ok(Response::from_chunks(400, headers, vec![body]))
}
