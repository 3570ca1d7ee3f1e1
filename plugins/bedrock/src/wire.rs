//! Serde types of the Bedrock Runtime's Converse API (`POST /model/{modelId}/converse` and
//! `/converse-stream`, whose events arrive in AWS event-stream frames) and of the embedding,
//! rerank and image models' InvokeModel answers.
//!
//! Converse's content blocks are objects keyed by their kind (`{"text": ...}`,
//! `{"toolUse": {...}}`), which serde's externally tagged enums write and read as they are.
//! Request types serialize exactly what the plugin sends; response types are lenient: fields
//! the plugin does not need are ignored (Bedrock pads stream events with a `p` field), and
//! blocks of kinds it does not know (citations, guard content, added later) parse as `Other`.

use gateway_plugin_sdk::blocks::{Turn, TurnBlock};
use gateway_plugin_sdk::{Base64, json};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a Converse request, borrowing the conversation's media.
pub type WireMessage<'a> = Turn<Block<'a>>;

/// A content block of a request message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Block<'a> {
    Text(String),
    Image(ImageBlock<'a>),
    Document(DocumentBlock<'a>),
    ToolUse(ToolUse),
    ToolResult(ToolResult<'a>),
    ReasoningContent(ReasoningBlock),
}

impl TurnBlock for Block<'_> {
    fn is_tool_result(&self) -> bool {
        matches!(self, Block::ToolResult(_))
    }

    fn is_reasoning(&self) -> bool {
        matches!(self, Block::ReasoningContent(_))
    }
}

/// `{"format": "png", "source": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageBlock<'a> {
    pub format: &'static str,
    pub source: MediaSource<'a>,
}

/// `{"format": "pdf", "name": "...", "source": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DocumentBlock<'a> {
    pub format: &'static str,
    pub name: String,
    pub source: MediaSource<'a>,
}

/// Where an image's or a document's bytes are.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MediaSource<'a> {
    /// The bytes, base64-encoded straight into the body as it is written.
    Bytes(Base64<'a>),
    /// An object in S3 (`s3://bucket/key`), which Bedrock reads itself.
    S3Location { uri: &'a str },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUse {
    pub tool_use_id: String,
    pub name: String,
    pub input: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult<'a> {
    pub tool_use_id: String,
    /// Text, image and document blocks (none for a tool that returned nothing).
    pub content: Vec<Block<'a>>,
    /// Only sent for a failed tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
}

/// `reasoningContent` of a request: readable reasoning with its signature, or hidden
/// reasoning as the opaque bytes (base64) Bedrock gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReasoningBlock {
    ReasoningText {
        text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    RedactedContent(String),
}

/// An entry of `toolConfig.tools`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub tool_spec: ToolSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: InputSchema,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputSchema {
    pub json: Value,
}

/// A whole Converse answer.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseResponse {
    #[serde(default)]
    pub output: Option<Output>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Model-specific fields of the answer; Claude's name the stop sequence it wrote.
    #[serde(default)]
    pub additional_model_response_fields: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Output {
    #[serde(default)]
    pub message: Option<OutputMessage>,
}

#[derive(Debug, Default, Deserialize)]
pub struct OutputMessage {
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub content: Vec<ContentBlock>,
}

/// A content block of an answer: one of its fields is set. Blocks of other kinds (citations,
/// guard content, kinds added later) have none of them and are not answer text.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentBlock {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_use: Option<AnswerToolUse>,
    #[serde(default)]
    pub reasoning_content: Option<AnswerReasoning>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerToolUse {
    #[serde(default)]
    pub tool_use_id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub input: Value,
}

/// `reasoningContent` of an answer: `reasoningText` (text and signature) or `redactedContent`
/// (base64 bytes).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerReasoning {
    #[serde(default)]
    pub reasoning_text: Option<ReasoningText>,
    #[serde(default)]
    pub redacted_content: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ReasoningText {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub signature: Option<String>,
}

/// Token counts as Bedrock reports them (`inputTokens`, ...): Anthropic's, under other names.
pub use gateway_plugin_sdk::blocks::WireUsage;

/// `contentBlockStart` of a stream: only tool calls announce themselves.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStart {
    #[serde(default)]
    pub content_block_index: u32,
    #[serde(default)]
    pub start: Option<StartBody>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartBody {
    #[serde(default)]
    pub tool_use: Option<AnswerToolUse>,
}

/// `contentBlockDelta` of a stream.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDelta {
    #[serde(default)]
    pub content_block_index: u32,
    #[serde(default)]
    pub delta: Option<Delta>,
}

/// The `delta` of a `contentBlockDelta`: one of its fields is set.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delta {
    #[serde(default)]
    pub text: Option<String>,
    /// A piece of a tool call's input, as JSON text.
    #[serde(default)]
    pub tool_use: Option<ToolUseDelta>,
    #[serde(default)]
    pub reasoning_content: Option<ReasoningDelta>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ToolUseDelta {
    #[serde(default)]
    pub input: String,
}

/// A piece of streamed reasoning: text, the block's signature, or its hidden content.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningDelta {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub signature: Option<String>,
    #[serde(default)]
    pub redacted_content: Option<String>,
}

/// `contentBlockStop` of a stream.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStop {
    #[serde(default)]
    pub content_block_index: u32,
}

/// `messageStop` of a stream.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStop {
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub additional_model_response_fields: Option<Value>,
}

/// `metadata` of a stream: the usage, last.
#[derive(Debug, Default, Deserialize)]
pub struct Metadata {
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

/// Titan Text Embeddings' answer (one input per call).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitanEmbedding {
    #[serde(default)]
    pub embedding: Option<Vec<f32>>,
    #[serde(default, deserialize_with = "json::count")]
    pub input_text_token_count: Option<u32>,
}

/// Cohere Embed's answer: `embeddings` is the list of vectors, or (when the request named
/// `embedding_types`) an object of lists by type, of which the plugin reads `float`.
#[derive(Debug, Default, Deserialize)]
pub struct CohereEmbeddings {
    #[serde(default)]
    pub embeddings: Option<CohereVectors>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum CohereVectors {
    Floats(Vec<Vec<f32>>),
    ByType {
        #[serde(default)]
        float: Option<Vec<Vec<f32>>>,
    },
}

/// CountTokens' answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CountTokensResponse {
    pub input_tokens: u32,
}

/// A rerank model's answer through InvokeModel, Cohere Rerank's and Amazon Rerank's alike:
/// each ranked document's index in the request and its score, the most relevant first
/// (Cohere's `id` is not read).
#[derive(Debug, Deserialize)]
pub struct RerankAnswer {
    pub results: Vec<RankedDocument>,
}

#[derive(Debug, Deserialize)]
pub struct RankedDocument {
    /// Wider than the SDK's `u32`, so that an index too large for it is refused with its value.
    pub index: u64,
    pub relevance_score: f64,
}

/// An Amazon image model's answer through InvokeModel, Nova Canvas's and Titan Image
/// Generator's alike: the images as base64 text, or why the content moderation withheld them.
#[derive(Debug, Deserialize)]
pub struct ImagesAnswer {
    #[serde(default)]
    pub images: Option<Vec<String>>,
    #[serde(default)]
    pub error: Option<String>,
}
