//! The Anthropic Messages API: `POST /v1/messages`, as Anthropic's SDKs and
//! the tools built on them speak it. The key comes in `x-api-key` (or as a
//! bearer token), the route and model in `model` (`ROUTE/MODEL`, a route id,
//! or an alias of the config's `[models]`), and answers, stream events and
//! errors are written in Anthropic's shapes, whatever provider answered.

pub mod batches;
mod request;
mod response;

use std::convert::Infallible;

use hyper::Response;
use uuid::Uuid;

use crate::config::Config;
use crate::error::ApiError;
use crate::flow::{Ask, Envelope, Head, Kind, Surface, Target};
use crate::http::{Body, error_response_with_body};
use crate::plugins::types;
use request::MessagesRequest;
use response::MessageAnswer;

/// `POST /v1/messages`: a chat completion, whole or streamed.
pub struct Messages(MessagesRequest);

impl Surface for Messages {
    const NAME: &'static str = "anthropic";
    type Completion = MessageAnswer;
    type Embeddings = Infallible;

    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::api_key(&head.headers)
    }
    fn parse(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        request::parse(body).map(Messages)
    }
    fn user_id(&self) -> Option<&str> {
        self.0.user_id()
    }
    /// The body names no project: the key's is the request's.
    fn check_project(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn target(&self, config: &Config) -> Result<Target, ApiError> {
        self.0.target(config)
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        match kind {
            Kind::Chat => Ok(()),
            Kind::Text
            | Kind::Embeddings
            | Kind::CountTokens
            | Kind::Rerank
            | Kind::Images
            | Kind::Transcription
            | Kind::Speech => Err(ApiError::BadRequest(format!(
                "POST /v1/messages serves chat, not {:?}",
                kind.as_str()
            ))),
        }
    }
    fn stream(&self) -> bool {
        self.0.stream()
    }
    fn ask(self, _: Kind, config: &Config) -> Result<Ask<MessageAnswer, Infallible>, ApiError> {
        Ok(Ask::Complete {
            prompted: self.0.prompted(config.max_part_bytes.get())?,
            codec: MessageAnswer::default(),
        })
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        response::error_body(error, invocation_id)
    }
}

/// `POST /v1/messages/count_tokens`: how many tokens a message's prompt takes, as
/// `{"input_tokens": N}` (with `"estimated": true` where the number is an estimate).
pub struct CountTokens(MessagesRequest);

impl Surface for CountTokens {
    const NAME: &'static str = "anthropic";
    type Completion = Infallible;
    type Embeddings = Infallible;

    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::api_key(&head.headers)
    }
    fn parse(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        request::parse_count(body).map(CountTokens)
    }
    fn user_id(&self) -> Option<&str> {
        self.0.user_id()
    }
    fn check_project(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn target(&self, config: &Config) -> Result<Target, ApiError> {
        self.0.target(config)
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        match kind {
            Kind::CountTokens => Ok(()),
            Kind::Text
            | Kind::Chat
            | Kind::Embeddings
            | Kind::Rerank
            | Kind::Images
            | Kind::Transcription
            | Kind::Speech => Err(ApiError::BadRequest(format!(
                "POST /v1/messages/count_tokens counts chat prompts, not {:?}",
                kind.as_str()
            ))),
        }
    }
    fn stream(&self) -> bool {
        false
    }
    fn ask(self, _: Kind, config: &Config) -> Result<Ask<Infallible, Infallible>, ApiError> {
        Ok(Ask::Count {
            prompted: self.0.prompted(config.max_part_bytes.get())?,
            codec: token_count,
        })
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        response::error_body(error, invocation_id)
    }
}

/// Anthropic's answer to `count_tokens`, an estimate marked as one.
fn token_count(_: &Envelope<'_>, count: types::TokenCount) -> String {
    let answer = serde_json::json!({"input_tokens": count.input_tokens});
    crate::surfaces::json::count_answer(answer, count)
}

/// An error of this surface's paths answered outside the flow (a wrong
/// method), in Anthropic's shape.
pub fn error_response(error: &ApiError, id: &Uuid) -> Response<Body> {
    error_response_with_body(error, &response::error_body(error, id), id)
}
