//! Write provider plugins for the gateway.
//!
//! A provider plugin is a WebAssembly component that turns the gateway's
//! provider-neutral requests into calls to one upstream API (OpenAI, a local
//! model server, ...) and turns the answers back. The gateway handles
//! everything else: authentication, validation, routing, streaming to the
//! caller, and recording every call with its usage and cost.
//!
//! This crate is all a plugin needs. It hides the WIT bindings behind a small
//! Rust API:
//!
//! 1. implement [`Provider`] for a unit struct,
//! 2. call [`export_provider!`] with that struct,
//! 3. build the crate as a `cdylib` for `wasm32-wasip2`.
//!
//! # Setting up the crate
//!
//! ```toml
//! [package]
//! name = "my-provider"
//! edition = "2024"
//!
//! [lib]
//! name = "my_provider"        # the gateway loads `my_provider.wasm` as plugin "my_provider"
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! gateway-plugin-sdk = "0.1"
//! serde = { version = "1", features = ["derive"] }
//! serde_json = "1"
//!
//! [profile.release]
//! opt-level = "s"
//! lto = true
//! strip = true
//! panic = "abort"             # a panic becomes a trap; the gateway answers 502
//! ```
//!
//! Each request runs in its own instance, so the plugin's memory is the
//! gateway's memory per concurrent request. Rust's default wasm stack is
//! 1 MiB; 128 KiB is plenty for a provider and shrinks every instance, in
//! `.cargo/config.toml`:
//!
//! ```toml
//! [target.wasm32-wasip2]
//! rustflags = ["-C", "link-arg=-zstack-size=131072"]
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` and copy
//! `target/wasm32-wasip2/release/my_provider.wasm` into the gateway's
//! `plugins_dir` (copy to a temporary name first, then rename, so the gateway
//! never sees a half-written file).
//!
//! # A complete plugin
//!
//! Most providers answer a completion with one HTTP request. For them,
//! implement [`HttpProvider`] instead of [`Provider`]:
//!
//! - [`HttpProvider::request`] builds the upstream [`http::Request`] from the
//!   [`CompletionRequest`] (the prompt, the caller's params with
//!   [`params_object_except`], the route's key with [`http::Request::api_key`],
//!   typed route settings with [`Route::settings`]);
//! - a [`StreamDecoder`] reads the provider's answer, whole or one stream
//!   event at a time, into an [`Answer`];
//! - the SDK does the rest ([`read_completion`], [`read_stream`]): it sends
//!   the request, turns error answers into [`ProviderError::Upstream`], sends
//!   text and usage to the caller as they arrive, and treats a stream cut
//!   short as an error rather than a short answer.
//!
//! This is `examples/minimal-provider` of the gateway's repository, a complete
//! provider for an OpenAI-compatible chat API (text, chat, streaming, usage):
//!
//! ```no_run,standalone_crate
//! use gateway_plugin_sdk::prelude::*;
//! use serde::Deserialize;
//! use serde_json::{Value, json};
//!
//! #[derive(Default)]
//! struct Minimal;
//!
//! impl HttpProvider for Minimal {
//!     type Decoder = Minimal;
//!     const OUTPUT: OutputFields = OutputFields {
//!         max_tokens: &[&["max_completion_tokens"], &["max_tokens"]],
//!         choices: &[&["n"]],
//!     };
//!
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("minimal", env!("CARGO_PKG_VERSION"), Vec::new())
//!     }
//!
//!     /// The caller's params, the model and the prompt as chat messages.
//!     fn request(call: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
//!         let owned = ["model", "messages", "stream", "stream_options"];
//!         let mut body = params_object_except(&call.params, &owned)?;
//!         let mut messages = Vec::new();
//!         for message in call.prompt.messages().iter() {
//!             let content = message.text_only("minimal")?;
//!             messages.push(json!({"role": message.role.as_str(), "content": content}));
//!         }
//!         body.insert("model".into(), json!(call.model));
//!         body.insert("messages".into(), json!(messages));
//!         body.insert("stream".into(), json!(stream));
//!         if let Some(max) = call.output.max_tokens {
//!             // What the gateway reserved: ask for no more, under every name the API reads.
//!             body.remove("max_completion_tokens");
//!             body.insert("max_tokens".into(), json!(max));
//!             body.insert("n".into(), json!(call.output.choices));
//!         }
//!         if stream {
//!             body.insert("stream_options".into(), json!({"include_usage": true}));
//!         }
//!         let base = call.route.checked_base_url("http://HOST/v1")?;
//!         let request = Request::post(format!("{base}/chat/completions")).streaming(stream);
//!         request.api_key(call.route.api_key.as_deref(), KeyIn::Bearer).json(&body)
//!     }
//! }
//!
//! /// Reads answers (`choices[0].message`) and stream events (`choices[0].delta`,
//! /// then `[DONE]`, which the default [`StreamDecoder::event`] handles).
//! impl StreamDecoder for Minimal {
//!     fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
//!         let reply: Value = serde_json::from_slice(body).map_err(ProviderError::malformed)?;
//!         let choice = &reply["choices"][0];
//!         for part in ["message", "delta"] {
//!             answer.text(0, choice[part]["content"].as_str().unwrap_or(""));
//!         }
//!         if let Some(reason) = choice["finish_reason"].as_str() {
//!             answer.finish_reason(0, FinishReason::parse(reason));
//!             answer.complete();
//!         }
//!         if let Ok(usage) = Usage::deserialize(&reply["usage"]) {
//!             answer.usage(usage);
//!         }
//!         Ok(())
//!     }
//! }
//!
//! export_provider!(Minimal);
//! ```
//!
//! Implement [`Provider`] directly when a call needs more than one upstream
//! request, or none (the gateway's offline echo plugin).
//!
//! # What the gateway guarantees
//!
//! - Every call runs in a **fresh instance**: statics start from scratch each
//!   time, so there is nothing to clean up and nothing to share between calls.
//! - [`CompletionRequest::route`] carries the route's `base_url` (without a
//!   trailing slash), the provider key to use (the caller's or the operator's),
//!   and the operator's plugin settings ([`Route::settings`]).
//!   [`CompletionRequest::params`] holds every other caller parameter
//!   (`temperature`, `max_tokens`, ...) as a JSON object ([`params_object`]).
//! - Outbound HTTP may only reach the host of the route's `base_url`; the
//!   gateway enforces the call's deadline and answers the caller with 504 when
//!   it passes ([`ProviderError::Timeout`]).
//! - Errors map to HTTP statuses for the caller:
//!   [`ProviderError::InvalidRequest`] → 400, [`ProviderError::Upstream`] with
//!   status 429 → 429 (with `Retry-After`), with 400, 404, 413 or 422 (the
//!   provider refused the caller's request) → that status, other upstream
//!   errors and [`ProviderError::Failed`] → 502, [`ProviderError::Timeout`] →
//!   504. [`read_completion`] and [`read_stream`] give an error status as
//!   [`ProviderError::Upstream`] with the provider's message, so a plugin gets
//!   this mapping without a line of its own. A panic is logged (its message
//!   and place) and traps the instance: the caller gets a 502 `plugin_error`
//!   naming the invocation, not the panic's text.
//!
//! # Streaming
//!
//! [`Provider::complete_stream`] sends new text through the [`Sink`] as it
//! arrives and then returns the whole completion, which the gateway sends as
//! the final frame (finish reason, function calls, usage). Its default
//! implementation calls [`Provider::complete`] and sends each choice's text as
//! a single chunk, so a plugin whose upstream cannot stream still works.
//!
//! # Testing a plugin
//!
//! The crate also builds natively, so plugin logic can be unit-tested with
//! `cargo test`. Host calls do not exist off wasm: [`http::Request::send`]
//! panics there, and [`log`] writes to stderr. [`Sink::buffered`] and
//! [`http::Response::from_chunks`] stand in for the host in tests.

#![deny(missing_docs)]

mod answer;
mod assembler;
pub mod blocks;
mod calls;
pub mod eventstream;
pub mod form;
#[cfg(feature = "golden")]
pub mod golden;
pub mod guard;
pub mod http;
pub mod json;
pub mod kv;
pub mod log;
pub mod ndjson;
pub mod output;
mod params;
mod parts;
pub mod sse;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
pub mod tool;
mod upstream;
mod usage;

pub use answer::{
    Answer, Framing, StreamDecoder, read_completion, read_stream, read_stream_framed,
};
pub use assembler::StreamAssembler;
pub use calls::{OpenCall, OpenCalls};
pub use output::check_output;
pub use params::{
    params_object, params_object_except, take_default_only_params, take_stop_sequences,
};
pub use parts::{Base64, DataUrl};
pub use upstream::{embedded_error, upstream_error};
pub use usage::TokenCounts;

use __private::gateway::provider::types as wit;

/// Who wrote a chat [`Message`].
pub use wit::Role;

/// A (legacy, single) function call of an assistant message: the function's
/// name and its arguments as JSON text.
pub use wit::FunctionCall;

/// A tool call of an assistant message: its id (which the tool's result
/// names), the function's name and its arguments as JSON text.
pub use wit::ToolCall;

/// One message of a chat prompt: its role and content [`Part`]s, and what
/// it says of function calls.
pub use wit::Message;

/// One piece of a message's content: text, an image, audio, a document, or
/// (on assistant messages of earlier turns) the model's reasoning.
pub use wit::Part;

/// Where an image's or a document's bytes are: in the request
/// ([`Source::as_base64`], [`DataUrl`]), or at a URL ([`Source::url`]).
pub use wit::Source;

/// An image part: its source, media type and OpenAI's `detail`.
pub use wit::Image;

/// An audio part: the clip's bytes and format (`wav`, `mp3`, ...).
pub use wit::Audio;

/// A document part (a PDF, a text file): its source, media type and title.
pub use wit::Document;

/// The model's reasoning: readable text, the provider's signature over it,
/// or hidden reasoning as opaque text. Send it back as it came.
pub use wit::Reasoning;

/// How hard a reasoning model should think, as OpenAI names it.
pub use wit::ReasoningEffort;

/// The caller's wish for reasoning: an effort, a token budget, or both.
pub use wit::ReasoningConfig;

/// A function the caller offers the model; `parameters` is a JSON Schema as JSON text.
pub use wit::FunctionDef;

/// Whether and which function the model must call (`functionCall` of the caller's request).
pub use wit::FunctionChoice;

/// The caller's prompt: a text prompt or a chat conversation.
pub use wit::Prompt;

/// The route a request came by: its id, the upstream's `base_url`, the
/// provider key to use, the operator's plugin settings and the secrets they
/// name ([`Route::secret`]).
pub use wit::Route;

/// A completion to perform, already validated by the gateway.
pub use wit::CompletionRequest;

/// How much the answer may hold, as the gateway decided and reserved it: ask the upstream for
/// no more (see [`output`]).
pub use wit::OutputLimit;

/// Why the model stopped.
pub use wit::FinishReason;

/// Token counts of a call; the gateway prices calls from them.
pub use wit::Usage;

/// One choice (alternative answer) of a completion.
pub use wit::Choice;

/// The result of a completion: the answering model, its choices and usage.
pub use wit::Completion;

/// New text of one choice of a streamed completion.
pub use wit::TextDelta;

/// A partial result of a streamed completion: new text, reasoning and
/// tool-call pieces, and the usage so far when the upstream reported it.
pub use wit::Chunk;

/// A piece of a streamed tool call: its choice and position, its id and
/// function name on the first piece that knows them, and the next piece of
/// its arguments. [`read_stream`] sends them for every [`Answer::tool_call`].
pub use wit::ToolCallDelta;

/// A piece of streamed reasoning: its choice and block, the next piece of
/// text, and the block's signature or hidden content when they arrive.
/// [`read_stream`] sends them for every [`Answer::reasoning`].
pub use wit::ReasoningDelta;

/// Embeddings to compute, one vector per `input` string.
pub use wit::EmbeddingRequest;

/// The result of an embedding request.
pub use wit::Embeddings;

/// How many tokens a prompt takes ([`Provider::count_tokens`]), and whether the number is an
/// estimate.
pub use wit::TokenCount;

/// Documents to order by their relevance to a query ([`Provider::rerank`]).
pub use wit::RerankRequest;

/// One document's place in a [`Reranking`]: its index in the request and its score.
pub use wit::RerankResult;

/// The documents of a [`RerankRequest`] ordered by relevance, the most relevant first, with
/// the tokens or search units the provider bills.
pub use wit::Reranking;

/// Images to make from a text prompt ([`Provider::generate_images`]).
pub use wit::ImageRequest;

/// One image a model made: its bytes (or the provider's URL for it), its media type, and the
/// prompt the model drew when it rewrote the caller's.
pub use wit::GeneratedImage;

/// The images of an [`ImageRequest`], with the tokens, size and quality the provider bills.
pub use wit::Images;

/// Audio to write down ([`Provider::transcribe`]), in its language or in English.
pub use wit::TranscriptionRequest;

/// A stretch of a [`Transcription`] (a segment, or a word) with its start and end in seconds.
pub use wit::TranscriptSegment;

/// The transcript of a [`TranscriptionRequest`], with the tokens or seconds the provider bills.
pub use wit::Transcription;

/// Text to speak ([`Provider::speak`]): its voice, and the audio's format as OpenAI names it.
pub use wit::SpeechRequest;

/// How a [`SpeechRequest`] ended, once its audio was sent: the model, and the tokens where the
/// provider bills speech by them (the gateway counts the input's characters itself).
pub use wit::Speech;

/// An error answer of the upstream API: its HTTP status, the provider's
/// message and the `Retry-After` seconds.
pub use wit::UpstreamError;

/// Why a call failed; the gateway turns it into the caller's HTTP status.
pub use wit::ProviderError;

/// A model's default price; operators may override it per route.
pub use wit::ModelPrice;

/// What a plugin is: its name, version and the models it knows with their prices.
pub use wit::PluginInfo;

impl Role {
    /// The role's name as OpenAI-style APIs spell it: `"system"`, `"user"`,
    /// `"assistant"`, `"function"` or `"tool"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Function => "function",
            Role::Tool => "tool",
        }
    }
}

impl ReasoningEffort {
    /// The effort as OpenAI names it (`reasoning_effort`, `reasoning.effort`): `"none"`,
    /// `"minimal"`, `"low"`, `"medium"`, `"high"` or `"xhigh"`.
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

impl Route {
    /// The route's `base_url` without surrounding whitespace or trailing
    /// slashes, ready for `format!("{base}/path")`.
    ///
    /// An empty one is an operator's mistake: [`ProviderError::Failed`]
    /// naming the route and saying to set it to `example` (e.g.
    /// `"https://api.example.com/v1"`).
    pub fn checked_base_url(&self, example: &str) -> Result<&str, ProviderError> {
        let base = self.base_url.trim().trim_end_matches('/');
        if base.is_empty() {
            return Err(ProviderError::Failed(format!(
                "route `{}` has no base_url; set it to {example}",
                self.id
            )));
        }
        Ok(base)
    }

    /// The secret the route's settings name as `NAME_env` (or `NAME_file_env`, then
    /// `name` is `NAME_file`): the value the host read from its environment when the
    /// route loaded, if the variable was set.
    ///
    /// ```
    /// # use gateway_plugin_sdk::Route;
    /// let route = Route {
    ///     id: "bedrock".into(),
    ///     base_url: String::new(),
    ///     api_key: None,
    ///     settings: r#"{"aws_secret_access_key_env": "AWS_SECRET_ACCESS_KEY"}"#.into(),
    ///     secrets: vec![("aws_secret_access_key".into(), "wJalr...".into())],
    /// };
    /// assert_eq!(route.secret("aws_secret_access_key"), Some("wJalr..."));
    /// assert_eq!(route.secret("aws_session_token"), None);
    /// ```
    pub fn secret(&self, name: &str) -> Option<&str> {
        self.secrets
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
    }
}

impl ProviderError {
    /// The error for an upstream answer the plugin cannot read:
    /// [`ProviderError::Failed`] with `error`, which should not quote the
    /// answer (it may be huge).
    pub fn malformed(error: impl std::fmt::Display) -> Self {
        ProviderError::Failed(format!("malformed response from upstream: {error}"))
    }

    /// The error prefixed with the position of the message it is about (`messages[i]: `),
    /// when it is the caller's ([`ProviderError::InvalidRequest`]); others as they are.
    pub fn at_message(self, i: usize) -> Self {
        match self {
            ProviderError::InvalidRequest(message) => {
                ProviderError::InvalidRequest(format!("messages[{i}]: {message}"))
            }
            other => other,
        }
    }
}

impl Default for Chunk {
    /// A chunk with nothing in it, to fill with `..Chunk::default()`.
    fn default() -> Self {
        Chunk {
            deltas: Vec::new(),
            reasoning: Vec::new(),
            tool_calls: Vec::new(),
            usage: None,
        }
    }
}

impl PluginInfo {
    /// A plugin named `name` (the name the gateway reports; its routes refer
    /// to the `.wasm` file's stem), at `version`, knowing `models`.
    pub fn new(name: &str, version: &str, models: Vec<ModelPrice>) -> Self {
        PluginInfo {
            name: name.to_owned(),
            version: version.to_owned(),
            models,
        }
    }
}

impl Prompt {
    /// About the bytes of the prompt's texts once written as JSON, with room for each
    /// message's keys: what a plugin sizes its upstream body's buffer by
    /// ([`Request::json_sized`](crate::http::Request::json_sized)), so that a large prompt is
    /// written without the buffer growing (and copying) as it fills.
    pub fn json_size_hint(&self) -> usize {
        let text = |text: &Option<String>| text.as_ref().map_or(0, String::len);
        let parts = |parts: &[Part]| parts.iter().map(Part::json_size_hint).sum::<usize>();
        match self {
            Prompt::Text(text) => text.len() + 64,
            Prompt::Chat(messages) => messages
                .iter()
                .map(|message| {
                    let calls: usize = (message.tool_calls.iter())
                        .map(|call| call.id.len() + call.name.len() + call.arguments.len() + 64)
                        .sum();
                    let function_call = (message.function_call.as_ref())
                        .map_or(0, |call| call.name.len() + call.arguments.len() + 64);
                    parts(&message.parts)
                        + text(&message.name)
                        + text(&message.tool_call_id)
                        + calls
                        + function_call
                        + 64
                })
                .sum(),
        }
    }

    /// The prompt as a conversation: a chat's messages, or a text prompt as
    /// one user message (how chat APIs take a text prompt).
    pub fn messages(&self) -> std::borrow::Cow<'_, [Message]> {
        match self {
            Prompt::Chat(messages) => std::borrow::Cow::Borrowed(messages),
            Prompt::Text(text) => {
                std::borrow::Cow::Owned(vec![Message::text_message(Role::User, text.clone())])
            }
        }
    }
}

impl FinishReason {
    /// The reason spelled as OpenAI-style APIs spell it (`"stop"`,
    /// `"length"`, `"function_call"`, `"tool_calls"`, `"content_filter"`);
    /// any other spelling is [`FinishReason::Other`].
    pub fn parse(reason: &str) -> Self {
        match reason {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "function_call" => FinishReason::FunctionCall,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            _ => FinishReason::Other,
        }
    }

    /// The reason's name: `"stop"`, `"length"`, `"function_call"`,
    /// `"tool_calls"`, `"content_filter"`, `"stop_sequence"`, `"pause"`,
    /// `"refusal"` or `"other"`.
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
}

impl ModelPrice {
    /// A price list from `(model, input_per_mtok, output_per_mtok)` rows, in
    /// row order: the compact way to write [`PluginInfo::models`].
    ///
    /// ```
    /// use gateway_plugin_sdk::ModelPrice;
    ///
    /// let models = ModelPrice::table(&[("mini-1", 0.1, 0.4), ("mini-embed", 0.02, 0.0)]);
    /// assert_eq!(models[1].model, "mini-embed");
    /// assert_eq!(models[0].output_per_mtok, 0.4);
    /// ```
    pub fn table(rows: &[(&str, f64, f64)]) -> Vec<ModelPrice> {
        rows.iter()
            .map(|&(model, input, output)| ModelPrice {
                model: model.into(),
                input_per_mtok: input,
                output_per_mtok: output,
            })
            .collect()
    }
}

/// A provider plugin: the functions the gateway calls.
///
/// Implement it for a unit struct and export that struct with
/// [`export_provider!`]. Each request runs in a fresh plugin instance, so
/// implementations need no state between calls.
pub trait Provider {
    /// Describes the plugin. Called once when the gateway loads it.
    fn info() -> PluginInfo;

    /// Performs a completion and returns the whole answer.
    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError>;

    /// Performs a completion, sending new text through `sink` as it arrives,
    /// then returns the whole completion (every choice's entire text, finish
    /// reasons, function calls and usage).
    ///
    /// When [`Sink::send`] fails the caller is gone: return its error
    /// promptly.
    ///
    /// Default: calls [`Provider::complete`] and sends each choice's whole
    /// text as one chunk.
    fn complete_stream(
        request: CompletionRequest,
        sink: &mut Sink,
    ) -> Result<Completion, ProviderError> {
        let completion = Self::complete(request)?;
        for choice in &completion.choices {
            sink.text(choice.index, &choice.text)?;
        }
        Ok(completion)
    }

    /// Computes embeddings, one vector per input in input order.
    ///
    /// Default: `Err(ProviderError::InvalidRequest("<name> does not support embeddings"))`.
    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        let _ = request;
        Err(unsupported(&Self::info().name, "embeddings"))
    }

    /// How many tokens `request`'s prompt takes for its model, generating nothing: ask the
    /// provider where it has an endpoint for it (`request.output` is only the host's default).
    ///
    /// Default: `Ok(None)`, the plugin cannot say; the gateway then counts with the model's
    /// tokenizer where it has it, and estimates otherwise.
    fn count_tokens(request: CompletionRequest) -> Result<Option<TokenCount>, ProviderError> {
        let _ = request;
        Ok(None)
    }

    /// Orders `request.documents` by their relevance to `request.query`, the most relevant
    /// first, at most `request.top_n` of them.
    ///
    /// Default: `Err(ProviderError::InvalidRequest("<name> does not support rerank"))`.
    fn rerank(request: RerankRequest) -> Result<Reranking, ProviderError> {
        let _ = request;
        Err(unsupported(&Self::info().name, "rerank"))
    }

    /// Makes `request.n` images from `request.prompt` (at least one): their bytes with their
    /// media type, or the provider's URLs for them.
    ///
    /// Default: `Err(ProviderError::InvalidRequest("<name> does not support image generation"))`.
    fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
        let _ = request;
        Err(unsupported(&Self::info().name, "image generation"))
    }

    /// Writes `request.audio` down (in English when `request.translate`): the text, and the
    /// segments and words with their times where the provider gives them.
    ///
    /// Default: `Err(ProviderError::InvalidRequest("<name> does not support transcription"))`.
    fn transcribe(request: TranscriptionRequest) -> Result<Transcription, ProviderError> {
        let _ = request;
        Err(unsupported(&Self::info().name, "transcription"))
    }

    /// Speaks `request.input`: the audio, in `request.format`, goes to the caller through
    /// `audio` as the upstream sends it ([`AudioSink::send`], [`AudioSink::copy`]); the result
    /// says how it ended. An error before any audio was sent may be tried again or on a
    /// fallback route; after, the caller's answer is cut.
    ///
    /// Default: `Err(ProviderError::InvalidRequest("<name> does not support speech"))`.
    fn speak(request: SpeechRequest, audio: &mut AudioSink) -> Result<Speech, ProviderError> {
        let _ = (request, audio);
        Err(unsupported(&Self::info().name, "speech"))
    }
}

/// What a plugin answers for a function it does not serve: the caller's request was wrong
/// for the route, a 400.
fn unsupported(plugin: &str, what: &str) -> ProviderError {
    ProviderError::InvalidRequest(format!("{plugin} does not support {what}"))
}

/// A provider that answers each completion with one upstream HTTP request:
/// implement this, and the SDK implements [`Provider`] for it.
///
/// A call goes through three steps, each a method with a default that any
/// implementation may replace while keeping the others:
/// [`send`](HttpProvider::send) (the upstream request of
/// [`HttpProvider::request`], its output limit checked, sent and logged at
/// debug level as with [`http::Request::send_logged`]), then
/// [`read_whole`](HttpProvider::read_whole) or
/// [`read_streamed`](HttpProvider::read_streamed) (a fresh
/// [`HttpProvider::Decoder`] through [`read_completion`], or
/// [`read_stream_framed`] with [`HttpProvider::FRAMING`]). Implement
/// [`Provider`] directly when a call needs more than one request.
pub trait HttpProvider {
    /// Reads the upstream's answers; a new one (`Default`) for every call.
    type Decoder: StreamDecoder + Default;

    /// How the upstream's streams are cut into events: by their
    /// `Content-Type` ([`Framing::Auto`], the default: SSE, newline-delimited
    /// JSON or AWS event streams), or always one way.
    const FRAMING: Framing = Framing::Auto;

    /// Describes the plugin. Called once when the gateway loads it.
    fn info() -> PluginInfo;

    /// Where the bodies [`request`](HttpProvider::request) builds say how long the answer may
    /// be. The drivers refuse to send a body that asks for more than the request's
    /// [`OutputLimit`] ([`check_output`]), so `request` must write that limit there.
    const OUTPUT: output::OutputFields;

    /// The upstream request for `request`, asking for an event stream when
    /// `stream`: for no more than `request.output` (see [`output`]).
    fn request(request: &CompletionRequest, stream: bool) -> Result<http::Request, ProviderError>;

    /// Sends the upstream request for `request` and returns its response, whatever its
    /// status. Default: [`HttpProvider::request`], refused if it asks for more than the
    /// output limit ([`check_output`]), sent with [`http::Request::send_logged`]. Replace it
    /// to sign the request or to send it otherwise; keep the output check.
    fn send(request: &CompletionRequest, stream: bool) -> Result<http::Response, ProviderError> {
        checked_request::<Self>(request, stream)?.send_logged()
    }

    /// Reads a whole answer. Default: [`read_completion`] with a fresh decoder.
    fn read_whole(
        response: http::Response,
        request: &CompletionRequest,
    ) -> Result<Completion, ProviderError> {
        read_completion(response, &request.model, Self::Decoder::default())
    }

    /// Reads a streamed answer into `sink`. Default: [`read_stream_framed`] with a fresh
    /// decoder and [`HttpProvider::FRAMING`].
    fn read_streamed(
        response: http::Response,
        sink: &mut Sink,
        request: &CompletionRequest,
    ) -> Result<Completion, ProviderError> {
        let decoder = Self::Decoder::default();
        read_stream_framed(response, sink, &request.model, decoder, Self::FRAMING)
    }

    /// Computes embeddings, as [`Provider::embed`] (whose default this is).
    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        let _ = request;
        Err(unsupported(&Self::info().name, "embeddings"))
    }

    /// Counts the prompt's tokens, as [`Provider::count_tokens`] (whose default this is:
    /// `Ok(None)`, the gateway counts).
    fn count_tokens(request: CompletionRequest) -> Result<Option<TokenCount>, ProviderError> {
        let _ = request;
        Ok(None)
    }

    /// Reranks documents, as [`Provider::rerank`] (whose default this is).
    fn rerank(request: RerankRequest) -> Result<Reranking, ProviderError> {
        let _ = request;
        Err(unsupported(&Self::info().name, "rerank"))
    }

    /// Makes images, as [`Provider::generate_images`] (whose default this is).
    fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
        let _ = request;
        Err(unsupported(&Self::info().name, "image generation"))
    }

    /// Writes audio down, as [`Provider::transcribe`] (whose default this is).
    fn transcribe(request: TranscriptionRequest) -> Result<Transcription, ProviderError> {
        let _ = request;
        Err(unsupported(&Self::info().name, "transcription"))
    }

    /// Speaks text, as [`Provider::speak`] (whose default this is).
    fn speak(request: SpeechRequest, audio: &mut AudioSink) -> Result<Speech, ProviderError> {
        let _ = (request, audio);
        Err(unsupported(&Self::info().name, "speech"))
    }
}

impl<T: HttpProvider> Provider for T {
    fn info() -> PluginInfo {
        <T as HttpProvider>::info()
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let response = T::send(&request, false)?;
        T::read_whole(response, &request)
    }

    fn complete_stream(
        request: CompletionRequest,
        sink: &mut Sink,
    ) -> Result<Completion, ProviderError> {
        let response = T::send(&request, true)?;
        T::read_streamed(response, sink, &request)
    }

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        <T as HttpProvider>::embed(request)
    }

    fn count_tokens(request: CompletionRequest) -> Result<Option<TokenCount>, ProviderError> {
        <T as HttpProvider>::count_tokens(request)
    }

    fn rerank(request: RerankRequest) -> Result<Reranking, ProviderError> {
        <T as HttpProvider>::rerank(request)
    }

    fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
        <T as HttpProvider>::generate_images(request)
    }

    fn transcribe(request: TranscriptionRequest) -> Result<Transcription, ProviderError> {
        <T as HttpProvider>::transcribe(request)
    }

    fn speak(request: SpeechRequest, audio: &mut AudioSink) -> Result<Speech, ProviderError> {
        <T as HttpProvider>::speak(request, audio)
    }
}

/// `T`'s upstream request, unless it asks for more than the host's output limit.
fn checked_request<T: HttpProvider + ?Sized>(
    request: &CompletionRequest,
    stream: bool,
) -> Result<http::Request, ProviderError> {
    let upstream = T::request(request, stream)?;
    check_output(&request.output, &T::OUTPUT, upstream.body_bytes())?;
    Ok(upstream)
}

/// The items most plugins use, for `use gateway_plugin_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::http::{KeyIn, Request, Response};
    pub use crate::output::OutputFields;
    pub use crate::sse::Event;
    pub use crate::{
        Answer, Completion, CompletionRequest, EmbeddingRequest, Embeddings, FinishReason, Framing,
        HttpProvider, Message, ModelPrice, OutputLimit, Part, PluginInfo, Prompt, Provider,
        ProviderError, Role, Sink, StreamDecoder, TokenCount, Usage, export_provider,
        params_object_except, read_completion, read_stream, read_stream_framed,
    };
}

/// Exports `$t` (a type implementing [`Provider`]) as the component's
/// `provider` world implementation.
///
/// Invoke it once, at the top level of the plugin's `cdylib` crate:
///
/// ```no_run,standalone_crate
/// use gateway_plugin_sdk::{Completion, CompletionRequest, PluginInfo, Provider, ProviderError};
///
/// struct MyProvider;
///
/// impl Provider for MyProvider {
///     fn info() -> PluginInfo {
///         PluginInfo {
///             name: "my_provider".into(),
///             version: env!("CARGO_PKG_VERSION").into(),
///             models: Vec::new(),
///         }
///     }
///
///     fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
///         Err(ProviderError::InvalidRequest(format!("{} is not served", request.model)))
///     }
/// }
///
/// gateway_plugin_sdk::export_provider!(MyProvider);
/// ```
///
/// Use it exactly once per component: it defines the component's `info`,
/// `complete`, `complete-stream`, `embed`, `count-tokens`, `rerank`, `generate-images` and
/// `transcribe` and `speak` exports.
#[macro_export]
macro_rules! export_provider {
    ($t:ty) => {
        const _: () = {
            type __GatewayPluginExport = $crate::__private::Adapter<$t>;
    $crate::__private::export!(__GatewayPluginExport with_types_in $crate::__private);
        };
    };
}

/// Partial results of a streamed completion, delivered to the caller as they
/// arrive.
///
/// The gateway hands one to [`Provider::complete_stream`].
#[derive(Debug)]
pub struct Sink {
    target: SinkTarget,
}

#[derive(Debug)]
enum SinkTarget {
    /// The host's `sink` import; `closed` once the caller has gone.
    Host {
        closed: bool,
    },
    Buffer {
        chunks: Vec<Chunk>,
    },
}

const CALLER_GONE: &str = "the caller disconnected";

/// Sends through the host's `sink` with `send`, unless the caller is gone (`closed`), which
/// a failed send says too: then the error a plugin returns.
fn to_caller(
    closed: &mut bool,
    send: impl FnOnce() -> Result<(), ()>,
) -> Result<(), ProviderError> {
    if !*closed && send().is_err() {
        *closed = true;
    }
    if *closed {
        return Err(ProviderError::Failed(CALLER_GONE.into()));
    }
    Ok(())
}

impl Sink {
    /// The sink of the running call.
    fn host() -> Self {
        Sink {
            target: SinkTarget::Host { closed: false },
        }
    }

    /// A sink that keeps every chunk in memory instead of sending it: for
    /// testing a plugin's [`Provider::complete_stream`] natively. Read the
    /// chunks back with [`Sink::sent`].
    pub fn buffered() -> Self {
        Sink {
            target: SinkTarget::Buffer { chunks: Vec::new() },
        }
    }

    /// The chunks a [`Sink::buffered`] sink received, in order (always empty
    /// for the host's sink).
    pub fn sent(&self) -> &[Chunk] {
        match &self.target {
            SinkTarget::Buffer { chunks, .. } => chunks,
            SinkTarget::Host { .. } => &[],
        }
    }

    /// The tool-call pieces a [`Sink::buffered`] sink received, in order.
    pub fn sent_tool_calls(&self) -> Vec<&ToolCallDelta> {
        self.sent()
            .iter()
            .flat_map(|chunk| &chunk.tool_calls)
            .collect()
    }

    /// The reasoning pieces a [`Sink::buffered`] sink received, in order.
    pub fn sent_reasoning(&self) -> Vec<&ReasoningDelta> {
        self.sent()
            .iter()
            .flat_map(|chunk| &chunk.reasoning)
            .collect()
    }

    /// Sends a chunk to the caller.
    ///
    /// Returns `Err(ProviderError::Failed("the caller disconnected"))` when
    /// the caller is gone: stop working and return that error.
    pub fn send(&mut self, chunk: Chunk) -> Result<(), ProviderError> {
        match &mut self.target {
            SinkTarget::Host { closed } => {
                to_caller(closed, || __private::gateway::provider::sink::send(&chunk))
            }
            SinkTarget::Buffer { chunks, .. } => {
                chunks.push(chunk);
                Ok(())
            }
        }
    }

    /// Sends the text of every choice of `completion` that has text, as one
    /// chunk without usage; sends nothing when no choice has text.
    ///
    /// For a streaming call whose upstream answered in one piece (a server
    /// that ignores the request to stream): the caller still gets the text
    /// before the final frame.
    pub fn completion_text(&mut self, completion: &Completion) -> Result<(), ProviderError> {
        let deltas: Vec<TextDelta> = completion
            .choices
            .iter()
            .filter(|c| !c.text.is_empty())
            .map(|c| TextDelta {
                index: c.index,
                text: c.text.clone(),
            })
            .collect();
        if deltas.is_empty() {
            return Ok(());
        }
        self.send(Chunk {
            deltas,
            ..Chunk::default()
        })
    }

    /// Sends new text for choice `index` (does nothing for empty text).
    pub fn text(&mut self, index: u32, text: &str) -> Result<(), ProviderError> {
        if text.is_empty() {
            return Ok(());
        }
        self.send(Chunk {
            deltas: vec![TextDelta {
                index,
                text: text.to_owned(),
            }],
            ..Chunk::default()
        })
    }
}

/// The audio of a speech ([`Provider::speak`]), delivered to the caller as it arrives.
#[derive(Debug)]
pub struct AudioSink {
    target: AudioTarget,
}

#[derive(Debug)]
enum AudioTarget {
    /// The host's `sink.send-audio` import; `closed` once the caller has gone.
    Host {
        closed: bool,
    },
    Buffer {
        bytes: Vec<u8>,
        sends: usize,
    },
}

impl AudioSink {
    /// The sink of the running call.
    fn host() -> Self {
        AudioSink {
            target: AudioTarget::Host { closed: false },
        }
    }

    /// A sink that keeps the audio in memory instead of sending it: for testing a plugin's
    /// [`Provider::speak`] natively. Read it back with [`AudioSink::sent`].
    pub fn buffered() -> Self {
        AudioSink {
            target: AudioTarget::Buffer {
                bytes: Vec::new(),
                sends: 0,
            },
        }
    }

    /// The audio a [`AudioSink::buffered`] sink received (always empty for the host's sink).
    pub fn sent(&self) -> &[u8] {
        match &self.target {
            AudioTarget::Buffer { bytes, .. } => bytes,
            AudioTarget::Host { .. } => &[],
        }
    }

    /// How many sends of audio a [`AudioSink::buffered`] sink received: the audio went in
    /// pieces, as it came, rather than whole at the end.
    pub fn sends(&self) -> usize {
        match &self.target {
            AudioTarget::Buffer { sends, .. } => *sends,
            AudioTarget::Host { .. } => 0,
        }
    }

    /// Sends the next bytes of audio to the caller (nothing for none).
    ///
    /// Returns `Err(ProviderError::Failed("the caller disconnected"))` when the caller is
    /// gone: stop working and return that error.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), ProviderError> {
        if bytes.is_empty() {
            return Ok(());
        }
        match &mut self.target {
            AudioTarget::Host { closed } => to_caller(closed, || {
                __private::gateway::provider::sink::send_audio(bytes)
            }),
            AudioTarget::Buffer { bytes: kept, sends } => {
                kept.extend_from_slice(bytes);
                *sends += 1;
                Ok(())
            }
        }
    }

    /// Sends `response`'s body to the caller chunk by chunk, as it arrives; how many bytes it
    /// sent. A body cut short is an error (the caller's answer is then cut too).
    pub fn copy(&mut self, mut response: http::Response) -> Result<u64, ProviderError> {
        let mut sent = 0u64;
        while let Some(chunk) = response.chunk()? {
            self.send(&chunk)?;
            sent += chunk.len() as u64;
        }
        Ok(sent)
    }
}

/// Implementation details used by [`export_provider!`]; not part of the API.
#[doc(hidden)]
// The generated ABI glue for `embed` takes one argument per flattened field.
#[allow(clippy::too_many_arguments)]
pub mod __private {
    use core::marker::PhantomData;

    wit_bindgen::generate!({
        world: "provider",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "gateway_plugin_sdk::__private",
        additional_derives: [PartialEq],
        // `response` owns a resource handle, which cannot be compared.
        additional_derives_ignore: ["response", "incoming-body"],
    });

    /// Bridges a [`crate::Provider`] to the generated `Guest` trait.
    pub struct Adapter<T: ?Sized>(PhantomData<fn() -> T>);

    impl<T: crate::Provider + ?Sized> Guest for Adapter<T> {
        fn info() -> PluginInfo {
            report_panics();
            T::info()
        }

        fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
            report_panics();
            T::complete(request)
        }

        fn complete_stream(request: CompletionRequest) -> Result<Completion, ProviderError> {
            report_panics();
            T::complete_stream(request, &mut crate::Sink::host())
        }

        fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
            report_panics();
            T::embed(request)
        }

        fn count_tokens(request: CompletionRequest) -> Result<Option<TokenCount>, ProviderError> {
            report_panics();
            T::count_tokens(request)
        }

        fn rerank(request: RerankRequest) -> Result<Reranking, ProviderError> {
            report_panics();
            T::rerank(request)
        }

        fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
            report_panics();
            T::generate_images(request)
        }

        fn transcribe(request: TranscriptionRequest) -> Result<Transcription, ProviderError> {
            report_panics();
            T::transcribe(request)
        }

        fn speak(request: SpeechRequest) -> Result<Speech, ProviderError> {
            report_panics();
            T::speak(request, &mut crate::AudioSink::host())
        }
    }

    /// Sends panic messages to the host's log before the instance traps, so
    /// the operator can see why a call failed with 502.
    pub(crate) fn report_panics() {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            std::panic::set_hook(Box::new(|panic| {
                crate::log::error(&format!("plugin panicked: {panic}"));
            }));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider that only implements the required functions.
    struct Minimal;

    impl Provider for Minimal {
        fn info() -> PluginInfo {
            PluginInfo {
                name: "minimal".into(),
                version: "1".into(),
                models: Vec::new(),
            }
        }

        fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
            let mut assembler = StreamAssembler::new();
            assembler.push_text(0, "zero");
            assembler.push_text(1, "");
            assembler.push_text(2, "two");
            Ok(assembler.finish(request.model))
        }
    }

    fn route() -> Route {
        Route {
            id: "r".into(),
            base_url: String::new(),
            api_key: None,
            settings: String::new(),
            secrets: Vec::new(),
        }
    }

    #[test]
    fn default_complete_stream_sends_each_choice_once() {
        let request = CompletionRequest {
            route: route(),
            model: "m".into(),
            prompt: Prompt::Text("hi".into()),
            functions: Vec::new(),
            function_choice: None,
            reasoning: None,
            output: OutputLimit::NONE,
            params: String::new(),
        };
        let mut sink = Sink::buffered();
        let completion = Minimal::complete_stream(request, &mut sink).unwrap();
        assert_eq!(completion.choices.len(), 3);
        let sent: Vec<(u32, &str)> = sink
            .sent()
            .iter()
            .flat_map(|chunk| &chunk.deltas)
            .map(|delta| (delta.index, delta.text.as_str()))
            .collect();
        assert_eq!(sent, [(0, "zero"), (2, "two")]);
    }

    #[test]
    fn default_embed_is_unsupported() {
        let request = EmbeddingRequest {
            route: route(),
            model: "m".into(),
            input: vec!["x".into()],
            params: String::new(),
        };
        assert_eq!(
            Minimal::embed(request),
            Err(ProviderError::InvalidRequest(
                "minimal does not support embeddings".into()
            ))
        );
    }

    #[test]
    fn default_rerank_images_and_transcription_are_unsupported() {
        let request = RerankRequest {
            route: route(),
            model: "m".into(),
            query: "q".into(),
            documents: vec!["d".into()],
            top_n: None,
            params: String::new(),
        };
        assert_eq!(
            Minimal::rerank(request),
            Err(ProviderError::InvalidRequest(
                "minimal does not support rerank".into()
            ))
        );
        let request = ImageRequest {
            route: route(),
            model: "m".into(),
            prompt: "a cat".into(),
            n: 1,
            size: None,
            quality: None,
            params: String::new(),
        };
        assert_eq!(
            Minimal::generate_images(request),
            Err(ProviderError::InvalidRequest(
                "minimal does not support image generation".into()
            ))
        );
        let request = TranscriptionRequest {
            route: route(),
            model: "m".into(),
            audio: vec![1, 2, 3],
            file_name: "a.wav".into(),
            media_type: None,
            translate: false,
            params: String::new(),
        };
        assert_eq!(
            Minimal::transcribe(request),
            Err(ProviderError::InvalidRequest(
                "minimal does not support transcription".into()
            ))
        );
        let request = SpeechRequest {
            route: route(),
            model: "m".into(),
            input: "hello".into(),
            voice: "alloy".into(),
            format: "mp3".into(),
            params: String::new(),
        };
        let mut audio = AudioSink::buffered();
        assert_eq!(
            Minimal::speak(request, &mut audio),
            Err(ProviderError::InvalidRequest(
                "minimal does not support speech".into()
            ))
        );
        assert!(audio.sent().is_empty());
    }

    #[test]
    fn an_audio_sink_copies_a_body_chunk_by_chunk() {
        let body =
            http::Response::from_chunks(200, Vec::new(), vec![b"ID3".to_vec(), b"abc".to_vec()]);
        let mut audio = AudioSink::buffered();
        assert_eq!(audio.copy(body), Ok(6));
        assert_eq!((audio.sent(), audio.sends()), (&b"ID3abc"[..], 2));
    }

    #[test]
    fn sink_completion_text_is_one_chunk_of_nonempty_choices() {
        let mut assembler = StreamAssembler::new();
        assembler.push_text(0, "zero");
        assembler.push_text(1, "");
        assembler.push_text(2, "two");
        let mut sink = Sink::buffered();
        sink.completion_text(&assembler.finish("m".into())).unwrap();
        assert_eq!(
            sink.sent(),
            [Chunk {
                deltas: vec![
                    TextDelta {
                        index: 0,
                        text: "zero".into()
                    },
                    TextDelta {
                        index: 2,
                        text: "two".into()
                    }
                ],
                ..Chunk::default()
            }]
        );
        let mut empty = StreamAssembler::new();
        empty.push_text(0, "");
        sink = Sink::buffered();
        sink.completion_text(&empty.finish("m".into())).unwrap();
        assert!(sink.sent().is_empty());
    }

    #[test]
    fn checked_base_url() {
        let mut route = route();
        route.base_url = " https://api.example.com/v1// ".into();
        assert_eq!(
            route.checked_base_url("X"),
            Ok("https://api.example.com/v1")
        );
        route.base_url = " / ".into();
        assert_eq!(
            route.checked_base_url("https://api.example.com/v1"),
            Err(ProviderError::Failed(
                "route `r` has no base_url; set it to https://api.example.com/v1".into()
            ))
        );
    }

    #[test]
    fn sink_text_skips_empty_text() {
        let mut sink = Sink::buffered();
        sink.text(0, "").unwrap();
        sink.text(1, "a").unwrap();
        assert_eq!(
            sink.sent(),
            [Chunk {
                deltas: vec![TextDelta {
                    index: 1,
                    text: "a".into()
                }],
                ..Chunk::default()
            }]
        );
    }

    #[test]
    fn names() {
        assert_eq!(Role::Assistant.as_str(), "assistant");
        assert_eq!(Role::Tool.as_str(), "tool");
        assert_eq!(FinishReason::FunctionCall.as_str(), "function_call");
        assert_eq!(FinishReason::ContentFilter.as_str(), "content_filter");
        assert_eq!(
            FinishReason::StopSequence("END".into()).as_str(),
            "stop_sequence"
        );
    }
}
