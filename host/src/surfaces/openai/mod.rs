//! The OpenAI-compatible API: `POST /v1/chat/completions`, `POST
//! /v1/completions` (legacy text), `POST /v1/embeddings` and the Responses API
//! ([`responses`]: `/v1/responses`), image generation ([`images`]:
//! `/v1/images/generations`), transcription ([`audio`]: `/v1/audio/transcriptions` and
//! `/translations`), speech ([`speech`]: `/v1/audio/speech`), the Files API ([`files`]:
//! `/v1/files`) and the Batch API ([`batches`]: `/v1/batches`), and beside them the rerank API the same clients'
//! stacks call ([`rerank`]: `/v1/rerank`), so that OpenAI's
//! SDKs and the tools built on them reach every route (`GET /v1/models` is
//! [`crate::surfaces::models`], shared with Anthropic's SDKs).
//!
//! The project comes from the key (`Authorization: Bearer`, or `x-api-key`);
//! `model` names the route and model (`ROUTE/MODEL`, a route id, or an alias
//! of the config's `[models]`); every body field this surface does not read
//! goes to the plugin as a parameter, under OpenAI's own name.

mod audio;
pub mod batches;
pub mod files;
mod images;
mod request;
mod rerank;
mod response;
pub mod responses;
mod speech;

use std::convert::Infallible;

use hyper::Response;
use uuid::Uuid;

use crate::config::Config;
use crate::error::ApiError;
use crate::flow::{Ask, Head, Kind, Prompted, Surface, Target};
use request::{Body, ChatFields, Common, EmbeddingFields, TextFields};
use response::{CompletionAnswer, EmbeddingAnswer, Object};

pub use audio::{Transcriptions, Translations};
pub use images::Images;
pub use rerank::Rerank;
pub use responses::{InputTokens, Responses};
pub use speech::Speech;

/// `POST /v1/chat/completions`.
pub type ChatCompletions = Completion<ChatFields>;

/// `POST /v1/completions`.
pub type Completions = Completion<TextFields>;

/// A request to one of the two completion endpoints, which differ only in
/// their body's fields ([`CompletionFields`]).
pub struct Completion<F>(Body<F>);

/// `POST /v1/embeddings`.
pub struct Embeddings(Body<EmbeddingFields>);

/// The key of a request to an endpoint no flow answers (files, batches): `x-api-key` or
/// `Authorization`, as the flow reads it.
async fn caller(
    state: &crate::state::AppState,
    headers: &hyper::HeaderMap,
) -> Result<crate::store::KeyRecord, ApiError> {
    let key = crate::auth::api_key(headers)?;
    crate::auth::key_record(&state.store, key).await
}

/// `id` if it is `prefix` and 32 hex digits, as the gateway makes the ids of files and
/// batches (a UUIDv7's: they sort by creation time); another is answered as an unknown
/// `object` is, without reading the store.
fn made_id<'a>(id: &'a str, prefix: &str, object: &str) -> Result<&'a str, ApiError> {
    let hex = id.strip_prefix(prefix).unwrap_or_default();
    if hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id)
    } else {
        Err(no_such(object, id))
    }
}

/// What a key is told of an id that is none of its project's `object`s (`File`, `Batch`):
/// that there is none.
fn no_such(object: &str, id: &str) -> ApiError {
    ApiError::NotFound(format!("No such {object} object: {id}"))
}

/// A page of a listing as OpenAI's list object: `items` read one past the page (`limit`),
/// which says whether there are more.
fn list_page<T>(
    mut items: Vec<T>,
    limit: u32,
    id: impl Fn(&T) -> &str,
    object: impl Fn(&T) -> serde_json::Value,
) -> serde_json::Value {
    let has_more = items.len() > limit as usize;
    items.truncate(limit as usize);
    serde_json::json!({
        "object": "list",
        "data": items.iter().map(object).collect::<Vec<_>>(),
        "first_id": items.first().map(&id),
        "last_id": items.last().map(&id),
        "has_more": has_more,
    })
}

/// The answer of an endpoint no flow answers: its JSON, or its error in OpenAI's shape.
fn answer(result: Result<serde_json::Value, ApiError>, id: &Uuid) -> Response<crate::http::Body> {
    match result {
        Ok(body) => crate::http::json_response(hyper::StatusCode::OK, &body, id),
        Err(error) => error_response(&error, id),
    }
}

/// An error of one of this surface's paths that no request flow answers
/// (a wrong method), in OpenAI's shape.
pub fn error_response(error: &ApiError, id: &Uuid) -> Response<crate::http::Body> {
    crate::http::error_response_with_body(error, &response::error_body(error, id), id)
}

/// Where `model` points, with the rest of the body as the plugin's parameters.
fn target(
    config: &Config,
    model: &Option<String>,
    kind: Kind,
    params: &serde_json::Map<String, serde_json::Value>,
) -> Result<Target, ApiError> {
    let model = request::require_model(model)?;
    let target = config
        .model_target(model)
        .ok_or_else(|| ApiError::UnknownModel(model.to_owned()))?;
    Ok(Target {
        route: target.route.to_owned(),
        kind,
        model: target.model.map(str::to_owned),
        params: request::params_text(params),
    })
}

/// Each endpoint serves the one kind its path names.
fn serves(kind: Kind, served: Kind, path: &str) -> Result<(), ApiError> {
    if kind == served {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!(
            "{path} does not serve {} requests",
            kind.as_str()
        )))
    }
}

/// One of the endpoints beside the completions and embeddings (images, transcription, speech, and
/// the rerank the same clients call): one kind by its path, a body that names no project, an
/// answer the flow sends whole or as bytes (never frames of a stream). Each reads its body and
/// says what it asks; the rest of [`Surface`] is written once, below.
trait Endpoint: Sized + Send + 'static {
    const KIND: Kind;
    const PATH: &'static str;
    /// The body, checked for shape and for what must hold before routing.
    fn read(head: &Head, body: &[u8]) -> Result<Self, ApiError>;
    /// The body's `model`, and every field the endpoint does not read itself.
    fn model_and_params(&self) -> (&Option<String>, &serde_json::Map<String, serde_json::Value>);
    /// The caller's end user, for the record.
    fn user(&self) -> Option<&str>;
    /// What it asks of the plugin.
    fn asks(self) -> Result<Ask<Infallible, Infallible>, ApiError>;
}

impl<E: Endpoint> Surface for E {
    const NAME: &'static str = "openai";
    type Completion = Infallible;
    type Embeddings = Infallible;

    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::api_key(&head.headers)
    }
    fn parse(head: &Head, body: &[u8]) -> Result<Self, ApiError> {
        E::read(head, body)
    }
    fn user_id(&self) -> Option<&str> {
        self.user()
    }
    fn check_project(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn target(&self, config: &Config) -> Result<Target, ApiError> {
        let (model, params) = self.model_and_params();
        target(config, model, E::KIND, params)
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        serves(kind, E::KIND, E::PATH)
    }
    fn stream(&self) -> bool {
        false
    }
    fn ask(self, _: Kind, _: &Config) -> Result<Ask<Infallible, Infallible>, ApiError> {
        self.asks()
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        response::error_body(error, invocation_id)
    }
}

/// What a completion endpoint's body holds and asks of the plugin.
pub trait CompletionFields: request::Fields + Send + 'static {
    const KIND: Kind;
    const PATH: &'static str;
    fn common(&self) -> &Common;
    /// The checks that need the whole body (after its fields' types).
    fn check(&self) -> Result<(), ApiError>;
    /// What it asks of the plugin, its texts moved out of the body; images,
    /// audio and documents at most `max_part_bytes` each.
    fn ask(self, max_part_bytes: usize) -> Result<Ask<CompletionAnswer, Infallible>, ApiError>;
}

impl CompletionFields for ChatFields {
    const KIND: Kind = Kind::Chat;
    const PATH: &'static str = "/v1/chat/completions";
    fn common(&self) -> &Common {
        &self.common
    }
    fn check(&self) -> Result<(), ApiError> {
        request::check_chat(self)
    }
    fn ask(mut self, max_part_bytes: usize) -> Result<Ask<CompletionAnswer, Infallible>, ApiError> {
        // In the order of the errors a caller gets: the conversation's first.
        let prompt = request::chat_prompt(&mut self, max_part_bytes)?;
        Ok(Ask::Complete {
            prompted: Prompted {
                prompt,
                functions: request::functions(&self)?,
                function_choice: request::function_choice(&self)?,
                reasoning: request::reasoning(&self)?,
            },
            codec: CompletionAnswer::new(
                Object::Chat,
                request::legacy_functions(&self),
                self.common.include_usage(),
            ),
        })
    }
}

impl CompletionFields for TextFields {
    const KIND: Kind = Kind::Text;
    const PATH: &'static str = "/v1/completions";
    fn common(&self) -> &Common {
        &self.common
    }
    fn check(&self) -> Result<(), ApiError> {
        request::check_text(self)
    }
    fn ask(mut self, _: usize) -> Result<Ask<CompletionAnswer, Infallible>, ApiError> {
        Ok(Ask::Complete {
            prompted: Prompted {
                prompt: request::text_prompt(&mut self)?,
                functions: Vec::new(),
                function_choice: None,
                reasoning: None,
            },
            codec: CompletionAnswer::new(Object::Text, false, self.common.include_usage()),
        })
    }
}

impl<F: CompletionFields> Surface for Completion<F> {
    const NAME: &'static str = "openai";
    type Completion = CompletionAnswer;
    type Embeddings = Infallible;

    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::api_key(&head.headers)
    }
    fn parse(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let body: Body<F> = request::parse_body(body)?;
        body.fields.check()?;
        request::check_params(F::KIND, &body.params)?;
        request::user(&body.params)?;
        Ok(Completion(body))
    }
    fn user_id(&self) -> Option<&str> {
        request::user(&self.0.params).ok().flatten()
    }
    fn check_project(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn target(&self, config: &Config) -> Result<Target, ApiError> {
        target(
            config,
            &self.0.fields.common().model,
            F::KIND,
            &self.0.params,
        )
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        serves(kind, F::KIND, F::PATH)
    }
    fn stream(&self) -> bool {
        self.0.fields.common().stream.unwrap_or(false)
    }
    fn ask(self, _: Kind, config: &Config) -> Result<Ask<CompletionAnswer, Infallible>, ApiError> {
        self.0.fields.ask(config.max_part_bytes.get())
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        response::error_body(error, invocation_id)
    }
}

impl Surface for Embeddings {
    const NAME: &'static str = "openai";
    type Completion = Infallible;
    type Embeddings = EmbeddingAnswer;

    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::api_key(&head.headers)
    }
    fn parse(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let body: Body<EmbeddingFields> = request::parse_body(body)?;
        request::check_embeddings(&body.fields)?;
        request::check_params(Kind::Embeddings, &body.params)?;
        request::user(&body.params)?;
        Ok(Embeddings(body))
    }
    fn user_id(&self) -> Option<&str> {
        request::user(&self.0.params).ok().flatten()
    }
    fn check_project(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn target(&self, config: &Config) -> Result<Target, ApiError> {
        target(
            config,
            &self.0.fields.model,
            Kind::Embeddings,
            &self.0.params,
        )
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        serves(kind, Kind::Embeddings, "/v1/embeddings")
    }
    fn stream(&self) -> bool {
        false
    }
    fn ask(mut self, _: Kind, _: &Config) -> Result<Ask<Infallible, EmbeddingAnswer>, ApiError> {
        Ok(Ask::Embed {
            input: request::embedding_input(&mut self.0.fields)?,
            codec: EmbeddingAnswer {
                format: self.0.fields.encoding_format.unwrap_or_default(),
            },
        })
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        response::error_body(error, invocation_id)
    }
}
