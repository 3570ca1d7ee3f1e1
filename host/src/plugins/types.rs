//! What the host and a provider plugin exchange, as the host's own types.
//!
//! These mirror the records of `plugin-sdk/wit/provider.wit` field for field, so the rest
//! of the host (server, API codecs, pricing) never names a bindgen type and a
//! change of the WIT bindings stays inside `plugins/`. The `wit` module converts
//! at the edge, once per call, moving strings and lists rather than copying
//! them.
//!
//! The request's types are `Hash`: the response cache keys an answer by them (`cache`). The
//! answer's types are serde's: the cache keeps them, in Redis as JSON.

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    User,
    Assistant,
    Function,
    Tool,
}

/// A function the model asked to call. `arguments` is JSON text as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

/// A function call in the OpenAI `tool_calls` shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Where a part's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// The bytes themselves, decoded.
    Bytes(Vec<u8>),
    /// An `https:` URL (or a provider's own file reference) the provider fetches.
    Url(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Image {
    pub source: Source,
    /// Always set with bytes.
    pub media_type: Option<String>,
    /// OpenAI's `detail`: `auto`, `low` or `high`.
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Audio {
    pub data: Vec<u8>,
    /// `wav`, `mp3`, ...
    pub format: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Document {
    pub source: Source,
    /// Always set with bytes.
    pub media_type: Option<String>,
    pub title: Option<String>,
}

/// The model's reasoning, as the provider gave it; sent back unchanged on the next turn.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash, serde::Serialize, serde::Deserialize)]
pub struct Reasoning {
    pub text: String,
    /// The provider's signature over `text`.
    pub signature: Option<String>,
    /// Reasoning the provider does not show, as opaque text.
    pub redacted: Option<String>,
}

/// One piece of a message's content.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Part {
    Text(String),
    Image(Image),
    Audio(Audio),
    Document(Document),
    Reasoning(Reasoning),
}

/// The kinds of [`Part`], as errors and records name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKind {
    Text,
    Image,
    Audio,
    Document,
    Reasoning,
}

impl PartKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PartKind::Text => "text",
            PartKind::Image => "image",
            PartKind::Audio => "audio",
            PartKind::Document => "document",
            PartKind::Reasoning => "reasoning",
        }
    }
}

impl Prompt {
    /// Its items, each of which costs the gateway memory beyond its bytes while the request
    /// runs: the messages, their text parts and tool calls (a text prompt is one), and apart
    /// from them the media parts (images, audio, documents), which cost more.
    pub fn items(&self) -> (usize, usize) {
        match self {
            Prompt::Text(_) => (1, 0),
            Prompt::Chat(messages) => messages.iter().fold((0, 0), |(items, media), m| {
                let media_parts = m
                    .parts
                    .iter()
                    .filter(|p| !matches!(p, Part::Text(_) | Part::Reasoning(_)))
                    .count();
                (
                    items + 1 + m.parts.len() - media_parts + m.tool_calls.len(),
                    media + media_parts,
                )
            }),
        }
    }
}

impl Part {
    pub fn kind(&self) -> PartKind {
        match self {
            Part::Text(_) => PartKind::Text,
            Part::Image(_) => PartKind::Image,
            Part::Audio(_) => PartKind::Audio,
            Part::Document(_) => PartKind::Document,
            Part::Reasoning(_) => PartKind::Reasoning,
        }
    }

    /// The bytes the part carries (its text, its decoded media, or its URL).
    pub fn size(&self) -> usize {
        match self {
            Part::Text(text) => text.len(),
            Part::Image(Image { source, .. }) | Part::Document(Document { source, .. }) => {
                match source {
                    Source::Bytes(bytes) => bytes.len(),
                    Source::Url(url) => url.len(),
                }
            }
            Part::Audio(audio) => audio.data.len(),
            Part::Reasoning(reasoning) => {
                reasoning.text.len()
                    + reasoning.signature.as_ref().map_or(0, String::len)
                    + reasoning.redacted.as_ref().map_or(0, String::len)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Message {
    pub role: Role,
    /// The content, in order; empty when the message has none.
    pub parts: Vec<Part>,
    /// The function's name on `function` and `tool` messages; the author's name otherwise.
    pub name: Option<String>,
    /// On assistant messages that called a function.
    pub function_call: Option<FunctionCall>,
    /// On assistant messages that called tools.
    pub tool_calls: Vec<ToolCall>,
    /// On `tool` messages: the call this message answers.
    pub tool_call_id: Option<String>,
    /// On `tool` messages: the tool failed.
    pub is_error: bool,
}

impl Message {
    /// A message of `role` with no name, calls or parts.
    pub fn new(role: Role, parts: Vec<Part>) -> Message {
        Message {
            role,
            parts,
            name: None,
            function_call: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionDef {
    pub name: String,
    pub description: Option<String>,
    /// JSON Schema of the arguments, as JSON text.
    pub parameters: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FunctionChoice {
    None,
    Auto,
    /// The model must call some function.
    Required,
    /// The model must call this function.
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// The values its settings name by `NAME_env` / `NAME_file_env` (0.2 plugins only).
    pub secrets: Vec<(String, String)>,
}

/// How hard a reasoning model should think, as OpenAI names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasoningEffort {
    None,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl ReasoningEffort {
    pub fn parse(effort: &str) -> Option<ReasoningEffort> {
        Some(match effort {
            "none" => ReasoningEffort::None,
            "minimal" => ReasoningEffort::Minimal,
            "low" => ReasoningEffort::Low,
            "medium" => ReasoningEffort::Medium,
            "high" => ReasoningEffort::High,
            "xhigh" => ReasoningEffort::Xhigh,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::Xhigh => "xhigh",
        }
    }
}

/// The caller's wish for the model's reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ReasoningConfig {
    pub effort: Option<ReasoningEffort>,
    /// At most this many tokens of reasoning.
    pub budget_tokens: Option<u32>,
}

/// How much an answer may hold, as the host decided it: what its limits reserved, and what
/// the plugin asks its upstream for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutputLimit {
    /// Completion tokens per choice, reasoning included; `None`: the caller set none and no
    /// limit needs one (the provider's default applies).
    pub max_tokens: Option<u32>,
    /// The most choices (OpenAI's `n`), at least 1.
    pub choices: u32,
}

impl Default for OutputLimit {
    fn default() -> Self {
        OutputLimit {
            max_tokens: None,
            choices: 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    pub route: Route,
    pub model: String,
    pub prompt: Prompt,
    pub functions: Vec<FunctionDef>,
    pub function_choice: Option<FunctionChoice>,
    /// Set when the caller asked for reasoning (or for none).
    pub reasoning: Option<ReasoningConfig>,
    /// The answer's size, which the plugin keeps to.
    pub output: OutputLimit,
    /// Every other key of `providerConfig.params` as a JSON object.
    pub params: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FinishReason {
    Stop,
    Length,
    FunctionCall,
    ToolCalls,
    ContentFilter,
    /// The model wrote this one of the request's stop sequences.
    StopSequence(String),
    /// The provider paused a long turn; sending the conversation back continues it.
    Pause,
    /// The model declined to answer.
    Refusal,
    Other,
}

impl FinishReason {
    /// The reason's canonical name (the traces' and the records').
    pub fn as_str(&self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::FunctionCall => "function_call",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::StopSequence(_) => "stop_sequence",
            FinishReason::Pause => "pause",
            FinishReason::Refusal => "refusal",
            FinishReason::Other => "other",
        }
    }

    /// The reason as OpenAI (and the Commonbase API) name it: a stop sequence
    /// is `stop`, a refusal `content_filter`, a pause `length` (the answer is
    /// unfinished, as when it runs out of tokens).
    pub fn openai_str(&self) -> &'static str {
        match self {
            FinishReason::StopSequence(_) => "stop",
            FinishReason::Refusal => "content_filter",
            FinishReason::Pause => "length",
            other => other.as_str(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
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
    /// Prompt tokens of images (included in `prompt_tokens`).
    pub image_prompt_tokens: Option<u32>,
    /// Prompt tokens of audio (included in `prompt_tokens`).
    pub audio_prompt_tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Choice {
    pub index: u32,
    /// The whole text of this choice (also at the end of a stream).
    pub text: String,
    /// What the model reasoned before `text`, in order.
    pub reasoning: Vec<Reasoning>,
    pub finish_reason: Option<FinishReason>,
    pub function_call: Option<FunctionCall>,
    pub tool_calls: Vec<ToolCall>,
    /// The provider's logprobs object as JSON text.
    pub logprobs: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// A piece of streamed reasoning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningDelta {
    /// The choice.
    pub index: u32,
    /// Identifies the block among the choice's (increasing, not necessarily dense).
    pub block: u32,
    pub text: String,
    pub signature: Option<String>,
    pub redacted: Option<String>,
}

/// A piece of a streamed tool call.
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

/// One step of a streamed completion: text, reasoning and tool-call pieces,
/// and the usage so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunk {
    pub deltas: Vec<TextDelta>,
    pub reasoning: Vec<ReasoningDelta>,
    pub tool_calls: Vec<ToolCallDelta>,
    /// Usage so far, when the provider reports it mid-stream.
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingRequest {
    pub route: Route,
    pub model: String,
    pub input: Vec<String>,
    /// Every other key of `providerConfig.params`, as a JSON object.
    pub params: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Embeddings {
    pub model: String,
    /// One vector per input, in input order.
    pub vectors: Vec<Vec<f32>>,
    pub usage: Option<Usage>,
}

/// How many tokens a prompt takes, as its model counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCount {
    pub input_tokens: u32,
    /// An estimate, not the provider's or the model tokenizer's own count.
    pub estimated: bool,
}

/// Documents to order by their relevance to a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerankRequest {
    pub route: Route,
    pub model: String,
    pub query: String,
    /// In the caller's order: a result's `index` points here.
    pub documents: Vec<String>,
    /// Only this many results, the most relevant; `None`: one for every document.
    pub top_n: Option<u32>,
    /// Every other key of the caller's body, as a JSON object.
    pub params: String,
}

/// One document's place in a [`Reranking`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RerankResult {
    /// The document's position in the request.
    pub index: u32,
    pub relevance_score: f64,
}

/// The documents ordered by relevance, the most relevant first.
#[derive(Debug, Clone, PartialEq)]
pub struct Reranking {
    pub model: String,
    pub results: Vec<RerankResult>,
    /// The tokens read (as prompt tokens), where the provider reports them.
    pub usage: Option<Usage>,
    /// The search units the provider bills, where it bills by them.
    pub search_units: Option<u32>,
}

/// Images to make from a text prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRequest {
    pub route: Route,
    pub model: String,
    pub prompt: String,
    /// How many images (1 to 10).
    pub n: u32,
    /// `WIDTHxHEIGHT` as OpenAI writes it, or `auto`; `None`: the model's default.
    pub size: Option<String>,
    /// As OpenAI or the provider names it; `None`: the model's default.
    pub quality: Option<String>,
    /// Every other key of the caller's body, as a JSON object.
    pub params: String,
}

/// One image a model made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedImage {
    /// Its bytes, or the provider's URL for it.
    pub source: Source,
    /// Always set with bytes.
    pub media_type: Option<String>,
    /// The prompt the model drew, when it rewrote the caller's.
    pub revised_prompt: Option<String>,
}

/// The images a model made, with what the provider bills for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Images {
    pub model: String,
    /// At least one, at most the request's `n` (the flow holds plugins to it).
    pub images: Vec<GeneratedImage>,
    /// Tokens, where the provider bills images by them.
    pub usage: Option<Usage>,
    /// The size and quality made and billed; `None`: the request's.
    pub size: Option<String>,
    pub quality: Option<String>,
}

/// Audio to write down, in its language or in English.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptionRequest {
    pub route: Route,
    pub model: String,
    /// The file's bytes, as uploaded.
    pub audio: Vec<u8>,
    pub file_name: String,
    pub media_type: Option<String>,
    /// Into English (a translation).
    pub translate: bool,
    /// Every other field of the caller's form, as a JSON object.
    pub params: String,
}

/// A stretch of a transcript with its times, in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptSegment {
    pub start: f64,
    pub end: f64,
    pub text: String,
}

/// Audio written down, with what the provider bills for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcription {
    pub model: String,
    pub text: String,
    pub language: Option<String>,
    /// The audio's length in seconds, where the provider tells it.
    pub duration: Option<f64>,
    pub segments: Vec<TranscriptSegment>,
    pub words: Vec<TranscriptSegment>,
    /// Tokens, where the provider bills by them.
    pub usage: Option<Usage>,
    /// Seconds of audio, where the provider bills by them.
    pub seconds: Option<u32>,
}

/// Text to speak; the audio goes to the caller as the plugin sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeechRequest {
    pub route: Route,
    pub model: String,
    pub input: String,
    pub voice: String,
    /// As OpenAI names it: `mp3`, `opus`, `aac`, `flac`, `wav` or `pcm`.
    pub format: String,
    /// Every other key of the caller's body, as a JSON object.
    pub params: String,
}

/// How a speech ended, once its audio was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Speech {
    pub model: String,
    /// Tokens, where the provider bills speech by them.
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

/// What a guard is shown of a request (`guard.wit`): never the route's keys or secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedRequest {
    /// The guard's id in the config.
    pub guard: String,
    /// The guard's settings, as a JSON object.
    pub settings: String,
    pub route: String,
    pub model: String,
    pub input: GuardInput,
    pub functions: Vec<FunctionDef>,
    pub params: String,
}

/// What a request asks the model, as a guard sees (and may rewrite) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardInput {
    Prompt(Prompt),
    Embedding(Vec<String>),
}

/// What a rewrite changed: how many of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: String,
    pub count: u32,
}

/// A guard's decision on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestVerdict {
    Allow,
    Deny(String),
    Rewrite {
        input: GuardInput,
        changes: Vec<Change>,
    },
}

/// A guard's decision on an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerVerdict {
    Allow,
    Deny(String),
    /// The text of each choice, in order.
    Rewrite {
        texts: Vec<String>,
        changes: Vec<Change>,
    },
}

/// A tool plugin's tool (`wit/tool.wit`), its JSON texts as the plugin wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDef {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: String,
    pub output_schema: Option<String>,
    pub annotations: Option<String>,
}

/// Where a tool plugin's call runs: its server's id, settings and secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    pub server: String,
    pub settings: String,
    pub secrets: Vec<(String, String)>,
}

/// What an embedded resource holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceBody {
    Text(String),
    Blob(Vec<u8>),
}

/// One block of a tool's result, as MCP's content blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolContent {
    Text(String),
    Image {
        data: Vec<u8>,
        media_type: String,
    },
    Audio {
        data: Vec<u8>,
        media_type: String,
    },
    ResourceLink {
        uri: String,
        name: String,
        title: Option<String>,
        description: Option<String>,
        media_type: Option<String>,
    },
    Resource {
        uri: String,
        media_type: Option<String>,
        body: ResourceBody,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub content: Vec<ToolContent>,
    /// JSON text.
    pub structured_content: Option<String>,
    pub is_error: bool,
}

/// A tool call the plugin could not make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    UnknownTool(String),
    InvalidArguments(String),
    Failed(String),
}
