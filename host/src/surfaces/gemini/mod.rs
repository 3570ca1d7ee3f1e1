//! Google's Gemini API, as `google-genai`, Gemini CLI and Google's REST examples speak it:
//! `POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`,
//! `:countTokens`, `:embedContent` and `:batchEmbedContents` (and the same under `/v1/`, the
//! version `google-genai` 3 calls by default). The model in the path is a route and model
//! (`ROUTE/MODEL`, a route id, or an alias of the config's `[models]`), so that any route, not
//! only a Gemini one, serves a Gemini client. The key comes in `x-goog-api-key` or `?key=`
//! (or as the other surfaces take it); answers, stream chunks and errors are written in
//! Google's shapes. `GET /v1beta/models` is [`crate::surfaces::models`].

mod request;
mod response;

use hyper::Response;
use uuid::Uuid;

use crate::config::Config;
use crate::error::ApiError;
use crate::flow::{Ask, Head, Kind, Surface, Target};
use crate::http::{Body, error_response_with_body};
use request::{Embed, Generate};
use response::{EmbedAnswer, GenerateAnswer};

/// The paths under which a model's methods are served: Google's two API versions.
const MODELS: [&str; 2] = ["/v1beta/models/", "/v1/models/"];

/// A model's method, the part of the path after the model's name and `:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Generate,
    StreamGenerate,
    CountTokens,
    EmbedContent,
    BatchEmbedContents,
}

impl Method {
    fn named(name: &str) -> Option<Method> {
        Some(match name {
            "generateContent" => Method::Generate,
            "streamGenerateContent" => Method::StreamGenerate,
            "countTokens" => Method::CountTokens,
            "embedContent" => Method::EmbedContent,
            "batchEmbedContents" => Method::BatchEmbedContents,
            _ => return None,
        })
    }
}

/// The model (as the path writes it) and the method a path names, if it is a Gemini model's
/// method; any other path is not this surface's (`/v1/models/{id}` is OpenAI's model).
pub fn endpoint(path: &str) -> Option<(&str, Method)> {
    let rest = MODELS.iter().find_map(|prefix| path.strip_prefix(prefix))?;
    let (model, method) = rest.rsplit_once(':')?;
    Some((model, Method::named(method)?))
}

/// Whether the path names a method of a model that is not one of [`endpoint`]'s: under
/// `/v1beta/`, or asked for with `method` other than GET (a GET of `/v1/models/{id}` is OpenAI's
/// model retrieval, and OpenAI's fine-tuned model ids hold `:`).
pub fn unknown_method(path: &str, method: &hyper::Method) -> bool {
    let Some(rest) = MODELS.iter().find_map(|prefix| path.strip_prefix(prefix)) else {
        return false;
    };
    rest.contains(':')
        && endpoint(path).is_none()
        && (path.starts_with(MODELS[0]) || method != hyper::Method::GET)
}

/// Whether the path is the model list of Gemini's API, where every answer is Google's shape.
pub fn lists_models(path: &str) -> bool {
    path == "/v1beta/models" || path.starts_with("/v1beta/models/")
}

/// A request to one of a model's methods.
pub struct Models {
    /// `ROUTE/MODEL`, a route or an alias, percent-decoded.
    model: String,
    call: Call,
}

enum Call {
    Generate { body: Generate, stream: bool },
    Count(Generate),
    Embed { body: Embed, batch: bool },
}

impl Models {
    fn kind(&self) -> Kind {
        match self.call {
            Call::Generate { .. } => Kind::Chat,
            Call::Count(_) => Kind::CountTokens,
            Call::Embed { .. } => Kind::Embeddings,
        }
    }
}

impl Surface for Models {
    const NAME: &'static str = "gemini";
    type Completion = GenerateAnswer;
    type Embeddings = EmbedAnswer;

    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::google_key(&head.headers, head.uri.query())
    }
    fn parse(head: &Head, bytes: &[u8]) -> Result<Self, ApiError> {
        let path = head.uri.path();
        let Some((model, method)) = endpoint(path) else {
            return Err(ApiError::NotFound(format!("no such endpoint: {path}")));
        };
        let model = crate::surfaces::checks::percent_decoded(model)
            .filter(|model| !model.is_empty())
            .ok_or_else(|| ApiError::UnknownModel(model.to_owned()))?;
        let call = match method {
            Method::Generate => Call::Generate {
                body: request::generate(bytes)?,
                stream: false,
            },
            Method::StreamGenerate => {
                let sse = (head.uri.query().unwrap_or_default().split('&')).any(|p| p == "alt=sse");
                if !sse {
                    return Err(ApiError::invalid(
                        "alt",
                        "streamGenerateContent is served as server-sent events only: add \
                         ?alt=sse to the URL",
                    ));
                }
                Call::Generate {
                    body: request::generate(bytes)?,
                    stream: true,
                }
            }
            Method::CountTokens => {
                let body = request::count(bytes)?;
                body.check_model(&model)?;
                Call::Count(body)
            }
            Method::EmbedContent => Call::Embed {
                body: request::embed(bytes, &model)?,
                batch: false,
            },
            Method::BatchEmbedContents => Call::Embed {
                body: request::batch_embed(bytes, &model)?,
                batch: true,
            },
        };
        Ok(Models { model, call })
    }
    /// Gemini's bodies name no end user.
    fn user_id(&self) -> Option<&str> {
        None
    }
    fn check_project(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn target(&self, config: &Config) -> Result<Target, ApiError> {
        let target = config
            .model_target(&self.model)
            .ok_or_else(|| ApiError::UnknownModel(self.model.clone()))?;
        let params = match &self.call {
            Call::Generate { body, .. } | Call::Count(body) => {
                let plugin = config
                    .providers
                    .get(target.route)
                    .map(|p| p.plugin.as_str());
                body.params(plugin.unwrap_or_default())?
            }
            Call::Embed { body, .. } => body.params().clone(),
        };
        Ok(Target {
            route: target.route.to_owned(),
            kind: self.kind(),
            model: target.model.map(str::to_owned),
            params: serde_json::Value::Object(params).to_string(),
        })
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        match kind {
            Kind::Chat | Kind::CountTokens | Kind::Embeddings => Ok(()),
            Kind::Text | Kind::Rerank | Kind::Images | Kind::Transcription | Kind::Speech => {
                Err(ApiError::BadRequest(format!(
                    "Gemini's API serves chat, token counts and embeddings, not {}",
                    kind.as_str()
                )))
            }
        }
    }
    fn stream(&self) -> bool {
        matches!(self.call, Call::Generate { stream: true, .. })
    }
    fn ask(self, _: Kind, config: &Config) -> Result<Ask<GenerateAnswer, EmbedAnswer>, ApiError> {
        let max_part_bytes = config.max_part_bytes.get();
        Ok(match self.call {
            Call::Generate { body, .. } => Ask::Complete {
                prompted: body.prompted(max_part_bytes)?,
                codec: GenerateAnswer {
                    include_thoughts: body.include_thoughts(),
                },
            },
            Call::Count(body) => Ask::Count {
                prompted: body.prompted(max_part_bytes)?,
                codec: response::token_count,
            },
            Call::Embed { body, batch } => Ask::Embed {
                input: body.input,
                codec: EmbedAnswer { batch },
            },
        })
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        response::error_body(error, invocation_id)
    }
}

/// An error of this surface's paths answered outside the flow, in Google's shape.
pub fn error_response(error: &ApiError, id: &Uuid) -> Response<Body> {
    error_response_with_body(error, &response::error_body(error, id), id)
}

#[cfg(test)]
mod tests;
