//! What the host and a provider plugin exchange, as the host's own types.
//!
//! These mirror the records of `plugin-sdk/wit/provider.wit` field for field, so the rest
//! of the host (server, API codecs, pricing) never names a bindgen type and a
//! change of the WIT bindings stays inside `plugins/`. The `wit` module converts
//! at the edge, once per call, moving strings and lists rather than copying
//! them.

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Function,
    Tool,
}

/// A function the model asked to call. `arguments` is JSON text as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

/// A function call in the OpenAI `tool_calls` shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: Option<String>,
    /// The function's name on `function` and `tool` messages; the author's name otherwise.
    pub name: Option<String>,
    /// On assistant messages that called a function.
    pub function_call: Option<FunctionCall>,
    /// On assistant messages that called tools.
    pub tool_calls: Vec<ToolCall>,
    /// On `tool` messages: the call this message answers.
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionDef {
    pub name: String,
    pub description: Option<String>,
    /// JSON Schema of the arguments, as JSON text.
    pub parameters: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FunctionChoice {
    None,
    Auto,
    /// The model must call some function.
    Required,
    /// The model must call this function.
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// `type: "text"`: a single prompt string.
    Text(String),
    /// `type: "chat"`: a conversation.
    Chat(Vec<Message>),
}

/// The gateway route serving the request, as the plugin sees it (the default: none yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    /// The route id callers name in `providerConfig.provider`.
    pub id: String,
    /// Base URL of the upstream API, without a trailing slash; empty when the route has none.
    pub base_url: String,
    /// The provider key: the caller's `Provider-API-Key`, else the route's configured key.
    pub api_key: Option<String>,
    /// The route's plugin-specific settings from the config, as a JSON object.
    pub settings: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    pub route: Route,
    pub model: String,
    pub prompt: Prompt,
    pub functions: Vec<FunctionDef>,
    pub function_choice: Option<FunctionChoice>,
    /// Every other key of `providerConfig.params` as a JSON object.
    pub params: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    FunctionCall,
    ToolCalls,
    ContentFilter,
    Other,
}

impl FinishReason {
    /// The reason's canonical name (the Commonbase API's, and the traces').
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::FunctionCall => "function_call",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other => "other",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    /// Prompt tokens served from the provider's cache (included in `prompt_tokens`).
    pub cached_prompt_tokens: Option<u32>,
    /// Prompt tokens written to the provider's cache (included in `prompt_tokens`).
    pub cache_creation_tokens: Option<u32>,
    /// Reasoning tokens (included in `completion_tokens`).
    pub reasoning_tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub index: u32,
    /// The whole text of this choice (also at the end of a stream).
    pub text: String,
    pub finish_reason: Option<FinishReason>,
    pub function_call: Option<FunctionCall>,
    pub tool_calls: Vec<ToolCall>,
    /// The provider's logprobs object as JSON text.
    pub logprobs: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The model that answered, as the provider names it.
    pub model: String,
    pub choices: Vec<Choice>,
    pub usage: Option<Usage>,
}

/// New text for one choice of a streamed completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDelta {
    pub index: u32,
    pub text: String,
}

/// A piece of a streamed tool call (`sink.send-tool-calls`, WIT 0.1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallDelta {
    /// The choice.
    pub index: u32,
    /// The call's position among the choice's tool calls.
    pub call: u32,
    pub id: Option<String>,
    pub name: Option<String>,
    /// The next piece of the arguments' JSON text.
    pub arguments: String,
}

/// One step of a streamed completion: text (`sink.send`) or tool-call pieces
/// (`sink.send-tool-calls`), and the usage so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunk {
    pub deltas: Vec<TextDelta>,
    /// Usage so far, when the provider reports it mid-stream.
    pub usage: Option<Usage>,
    pub tool_calls: Vec<ToolCallDelta>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingRequest {
    pub route: Route,
    pub model: String,
    pub input: Vec<String>,
    /// Every other key of `providerConfig.params`, as a JSON object.
    pub params: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    pub model: String,
    /// One vector per input, in input order.
    pub vectors: Vec<Vec<f32>>,
    pub usage: Option<Usage>,
}

/// The upstream answered with an error status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamError {
    pub status: u16,
    /// The provider's own error message.
    pub message: String,
    /// From a `retry-after` header, in seconds.
    pub retry_after: Option<u32>,
}

/// An error the plugin answered with (it ran fine; the request did not).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The request cannot be served as given (unsupported type, bad parameter).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("the upstream answered {}: {}", .0.status, .0.message)]
    Upstream(UpstreamError),
    /// The upstream did not answer in time.
    #[error("timeout: {0}")]
    Timeout(String),
    /// Anything else: transport failure, an answer the plugin cannot read.
    #[error("{0}")]
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelPrice {
    pub model: String,
    /// Dollars per million prompt tokens.
    pub input_per_mtok: f64,
    /// Dollars per million completion tokens.
    pub output_per_mtok: f64,
}

/// What a plugin says about itself when it loads.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    /// Models the plugin knows, with default prices (routes may override them).
    pub models: Vec<ModelPrice>,
}
