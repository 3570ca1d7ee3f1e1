//! Serde types of Anthropic's Messages API (`POST /v1/messages`, JSON and the SSE event stream).
//!
//! Request types serialize exactly what the plugin sends. Response types are lenient: fields the
//! plugin does not need are ignored, and content blocks, deltas and events of kinds it does not
//! know (server tools, citations, event types added later) parse as `Other` instead of
//! failing the whole answer, as Anthropic's versioning policy asks clients to do.

use gateway_plugin_sdk::Base64;
use gateway_plugin_sdk::blocks::{Turn, TurnBlock};
use gateway_plugin_sdk::json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a Messages API request, borrowing the media of the conversation's messages.
pub type WireMessage<'a> = Turn<Block<'a>>;

/// A content block of a request message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block<'a> {
    Text {
        text: String,
    },
    Image {
        source: MediaSource<'a>,
    },
    Document {
        source: MediaSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// The model's reasoning of an earlier turn, sent back with the signature Anthropic gave it.
    Thinking {
        thinking: String,
        signature: String,
    },
    /// Reasoning Anthropic did not show, sent back as the opaque data it gave.
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        /// Absent for an empty result: Anthropic rejects empty text blocks. Text, image and
        /// document blocks only.
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Vec<Block<'a>>>,
        /// Only sent when set: the tool failed.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl TurnBlock for Block<'_> {
    fn is_tool_result(&self) -> bool {
        matches!(self, Block::ToolResult { .. })
    }

    /// `thinking` or `redacted_thinking`.
    fn is_reasoning(&self) -> bool {
        matches!(
            self,
            Block::Thinking { .. } | Block::RedactedThinking { .. }
        )
    }
}

/// Where an image's or a document's content is (`source` of `image` and `document` blocks),
/// borrowed from the request's part.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MediaSource<'a> {
    /// The bytes, base64-encoded straight into the body as it is written: images (`image/png`,
    /// ...) and PDFs (`application/pdf`).
    Base64 {
        media_type: &'a str,
        data: Base64<'a>,
    },
    /// A plain text document, as text (`media_type` is always `text/plain`).
    Text {
        media_type: &'static str,
        data: &'a str,
    },
    /// A URL Anthropic fetches itself.
    Url { url: &'a str },
}

/// An entry of the request's `tools`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
}

/// A non-streamed answer of `/messages` (also the `message` of a stream's `message_start`).
#[derive(Debug, Default, Deserialize)]
pub struct MessageResponse {
    /// `"message"`, or `"error"` when an error arrives with a success status.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default, deserialize_with = "json::null_as_default")]
    pub content: Vec<ContentBlock>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The stop sequence the model wrote, with `stop_reason: "stop_sequence"`.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    #[serde(default)]
    pub error: Option<ErrorBody>,
}

/// A content block of an answer.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// The model's reasoning; a stream starts it empty and sends it in deltas.
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    /// Reasoning Anthropic does not show: opaque data to send back as it came.
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    /// Server tool results and other kinds that are not answer text.
    #[serde(other)]
    Other,
}

/// Token counts as Anthropic reports them. `input_tokens` excludes the cached part: cache reads
/// and cache writes are counted separately.
pub use gateway_plugin_sdk::blocks::WireUsage;

/// Anthropic's error object: `{"type": "overloaded_error", "message": "Overloaded"}`.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ErrorBody {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// One event of a streamed answer, told apart by its `type` (which repeats the SSE event name).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart {
        message: MessageResponse,
    },
    ContentBlockStart {
        index: u32,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u32,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        #[serde(default)]
        error: ErrorBody,
    },
    /// Event types added after this plugin was written.
    #[serde(other)]
    Other,
}

/// The `delta` of a `content_block_delta` event.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: String,
    },
    /// The signature of a thinking block, just before the block ends.
    SignatureDelta {
        #[serde(default)]
        signature: String,
    },
    /// Citations and kinds added later: not answer text.
    #[serde(other)]
    Other,
}

/// The `delta` of a `message_delta` event.
#[derive(Debug, Default, Deserialize)]
pub struct MessageDeltaBody {
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub stop_sequence: Option<String>,
}

/// `POST /messages/count_tokens`'s answer.
#[derive(Debug, Deserialize)]
pub struct TokenCount {
    pub input_tokens: u32,
}
