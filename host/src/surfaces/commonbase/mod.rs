//! The Commonbase API: `POST /completions` and `POST /embeddings`, with the
//! project named in the body (`projectId`), the route and model in
//! `providerConfig`, `{{variables}}` in prompts, and answers (and `data:`
//! stream frames) in Commonbase's JSON shape.

mod request;
mod response;
mod variables;

use std::convert::Infallible;

use uuid::Uuid;

use crate::config::Config;
use crate::error::ApiError;
use crate::flow::{Ask, Head, Kind, Prompted, Surface, Target};
use crate::surfaces::checks;
use request::{CompletionBody, EmbeddingBody};
use response::{CompletionAnswer, EmbeddingAnswer};

/// `POST /completions`: text and chat completions, whole or streamed.
pub struct Completions(CompletionBody);

/// `POST /embeddings`.
pub struct Embeddings(EmbeddingBody);

impl Surface for Completions {
    const NAME: &'static str = "commonbase";
    type Completion = CompletionAnswer;
    type Embeddings = Infallible;

    fn parse(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let body: CompletionBody = request::parse_body(body)?;
        checks::user_id("userId", body.user_id.as_deref())?;
        Ok(Completions(body))
    }
    fn user_id(&self) -> Option<&str> {
        self.0.user_id.as_deref()
    }
    fn check_project(&self, key_project: &str) -> Result<(), ApiError> {
        request::check_project(key_project, &self.0.project_id)
    }
    fn target(&self, _: &Config) -> Result<Target, ApiError> {
        request::target(&self.0.provider_config)
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        match kind {
            Kind::Embeddings => Err(ApiError::BadRequest(
                "params.type \"embeddings\" is served by POST /embeddings".into(),
            )),
            Kind::Text | Kind::Chat => Ok(()),
            // The body has no way to ask these.
            Kind::CountTokens => Err(ApiError::BadRequest(
                "token counts are served by POST /v1/messages/count_tokens and \
                 POST /v1/responses/input_tokens"
                    .into(),
            )),
            Kind::Rerank => Err(ApiError::BadRequest(
                "reranks are served by POST /v1/rerank".into(),
            )),
            Kind::Images => Err(ApiError::BadRequest(
                "images are made by POST /v1/images/generations".into(),
            )),
            Kind::Transcription => Err(ApiError::BadRequest(
                "audio is written down by POST /v1/audio/transcriptions".into(),
            )),
            Kind::Speech => Err(ApiError::BadRequest(
                "text is spoken by POST /v1/audio/speech".into(),
            )),
        }
    }
    fn stream(&self) -> bool {
        self.0.stream.unwrap_or(false)
    }
    fn ask(
        self,
        kind: Kind,
        config: &Config,
    ) -> Result<Ask<CompletionAnswer, Infallible>, ApiError> {
        let mut body = self.0;
        // The conversation's texts move out of the body; its other fields stay for the rest.
        let prompt = request::prompt(
            &mut body,
            kind,
            config.max_expanded_bytes(),
            config.max_part_bytes.get(),
        )?;
        let body = &body;
        Ok(Ask::Complete {
            prompted: Prompted {
                prompt,
                functions: request::functions(body)?,
                function_choice: request::function_choice(body)?,
                reasoning: None,
            },
            codec: CompletionAnswer {
                show_usage: body.show_usage.unwrap_or(false),
            },
        })
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        error.body(invocation_id)
    }
}

impl Surface for Embeddings {
    const NAME: &'static str = "commonbase";
    type Completion = Infallible;
    type Embeddings = EmbeddingAnswer;

    fn parse(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let body: EmbeddingBody = request::parse_body(body)?;
        checks::user_id("userId", body.user_id.as_deref())?;
        Ok(Embeddings(body))
    }
    fn user_id(&self) -> Option<&str> {
        self.0.user_id.as_deref()
    }
    fn check_project(&self, key_project: &str) -> Result<(), ApiError> {
        request::check_project(key_project, &self.0.project_id)
    }
    fn target(&self, _: &Config) -> Result<Target, ApiError> {
        request::target(&self.0.provider_config)
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        match kind {
            Kind::Embeddings => Ok(()),
            Kind::Text
            | Kind::Chat
            | Kind::CountTokens
            | Kind::Rerank
            | Kind::Images
            | Kind::Transcription
            | Kind::Speech => Err(ApiError::BadRequest(format!(
                "POST /embeddings needs params.type \"embeddings\", not {:?}",
                kind.as_str()
            ))),
        }
    }
    fn stream(&self) -> bool {
        false
    }
    fn ask(self, _: Kind, _: &Config) -> Result<Ask<Infallible, EmbeddingAnswer>, ApiError> {
        let input = self
            .0
            .input
            .ok_or_else(|| ApiError::BadRequest("input is required".into()))?
            .into_list()?;
        Ok(Ask::Embed {
            input,
            codec: EmbeddingAnswer,
        })
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        error.body(invocation_id)
    }
}
