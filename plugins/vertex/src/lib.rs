//! The Google Vertex AI provider plugin: Gemini (and Google's embedding models) and Anthropic's
//! Claude, as Google Cloud serves them.
//!
//! Route (see `gateway.example.toml`):
//!
//! ```toml
//! [providers.vertex]
//! plugin = "vertex"
//! base_url = "https://us-central1-aiplatform.googleapis.com"  # global: https://aiplatform.googleapis.com
//! allowed_hosts = ["oauth2.googleapis.com"]                    # the key's token_uri
//! default_model = "gemini-2.5-flash"
//! [providers.vertex.settings]
//! project = "my-project"
//! location = "us-central1"                                     # or "global"
//! credentials_file_env = "GOOGLE_APPLICATION_CREDENTIALS"
//! ```
//!
//! Settings (others are refused):
//! - `project`, `location` (a region, or `global`): the URL's
//!   `{base_url}/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}`.
//!   `base_url` is the endpoint of the location (`https://{location}-aiplatform.googleapis.com`,
//!   `https://aiplatform.googleapis.com` for `global`): the host the sandbox lets the plugin
//!   reach.
//! - `credentials_file_env`: the environment variable holding the path of a service account's
//!   JSON key (the gateway reads the file when it builds the route); or `credentials_env`: the
//!   variable holding the JSON key itself. Not both.
//! - `default_max_tokens`: Claude's `max_tokens` when the caller gives none (as the anthropic
//!   plugin's setting; default 4096).
//!
//! Credentials: with a key, the plugin signs a JWT (RS256: `iss` the key's `client_email`,
//! `scope` cloud-platform, `aud` the key's `token_uri`, an hour long) and exchanges it at the
//! key's `token_uri` (`https://oauth2.googleapis.com/token`: the route's `allowed_hosts` must
//! name its host) for an access token, which it keeps in the gateway's `kv` store, under the
//! account's email, until five minutes before it expires: one token serves every call of the
//! account in this gateway process (each replica mints its own). A token the model endpoint
//! refuses (401) is forgotten, so the next call mints another. A token endpoint's refusal
//! (`invalid_grant`, ...) is a 502 naming the endpoint and its OAuth error, never the key or a
//! token. Without `credentials_*` the route's key (`api_key_env`, or the caller's
//! Provider-API-Key) is used as the access token as it is, e.g. the output of
//! `gcloud auth print-access-token` (which expires within the hour: for short use).
//!
//! Publisher: a model whose name starts with `claude` is Anthropic's
//! (`claude-sonnet-4@20250514`, `claude-opus-4-1@20250805`): `rawPredict` / `streamRawPredict`
//! with the anthropic plugin's Messages API body without `model` and with
//! `"anthropic_version": "vertex-2023-10-16"`, answers read by its decoder. Any other model is
//! Google's: `generateContent` / `streamGenerateContent?alt=sse` with the gemini plugin's body
//! and decoder. So everything those plugins' docs say of params, parts, tools, reasoning,
//! finish reasons and usage holds here (the mapping code is theirs, not a copy).
//!
//! Embeddings (Google's models only): `predict` with one instance per input
//! (`{"content", "task_type"?, "title"?}`; `dimensions` is `parameters.outputDimensionality`);
//! `gemini-embedding-*` models take one input per call, so they get one call per input. Token
//! counts are the predictions' `statistics.token_count`.
//!
//! Images, with the gemini plugin's bodies and reading of the answers (see its `images` module):
//! Imagen models (`imagen-*`) through `predict`, with what only Vertex AI takes
//! (`negative_prompt`, `seed`, `enhance_prompt`, `add_watermark`, `storage_uri`; `labels` as the
//! body's field); Gemini's image models (`gemini-2.5-flash-image`, `gemini-3-pro-image-preview`,
//! any model whose id holds `-image`) through `generateContent` on the Google publisher, one image
//! a request, with what only Vertex AI takes of them (`person_generation`, and `output_format` /
//! `output_compression` as `imageConfig.imageOutputOptions`). Their tokens are their usage.

mod auth;
mod call;
mod embed;

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{
    Completion, CompletionRequest, EmbeddingRequest, Embeddings, ImageRequest, Images, ModelPrice,
    PluginInfo, Provider, ProviderError, Route, Sink, TokenCount, check_output, read_completion,
    read_stream,
};
use gemini::images::{ImageCall, Service};

use crate::auth::Credentials;
use crate::call::{Publisher, Settings};

/// The Messages API version Claude on Vertex AI takes, in the body.
pub const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Vertex's ids of Claude models (`@` and a date) at Anthropic's list prices, USD per million
/// tokens: the gateway matches these names exactly (its `-suffix` rule does not cover `@`).
/// Undated names (`claude-sonnet-4-5`) take the anthropic plugin's prices, Gemini's the gemini
/// plugin's: Vertex's list prices are the same.
const CLAUDE_VERSIONS: &[(&str, f64, f64)] = &[
    ("claude-opus-4-1@20250805", 15.00, 75.00),
    ("claude-opus-4@20250514", 15.00, 75.00),
    ("claude-sonnet-4-5@20250929", 3.00, 15.00),
    ("claude-sonnet-4@20250514", 3.00, 15.00),
    ("claude-3-7-sonnet@20250219", 3.00, 15.00),
    ("claude-haiku-4-5@20251001", 1.00, 5.00),
    ("claude-3-5-haiku@20241022", 0.80, 4.00),
    ("claude-3-haiku@20240307", 0.25, 1.25),
];

/// Google's embedding models on Vertex, USD per million input tokens.
const EMBEDDING_PRICES: &[(&str, f64, f64)] = &[
    ("text-embedding-005", 0.025, 0.0),
    ("text-multilingual-embedding-002", 0.025, 0.0),
];

/// Vertex AI as a gateway provider.
pub struct Vertex;

/// One call's route, settings and credentials.
struct Call<'a> {
    route: &'a Route,
    settings: Settings,
    credentials: Credentials<'a>,
}

impl<'a> Call<'a> {
    fn new(route: &'a Route) -> Result<Call<'a>, ProviderError> {
        let settings = Settings::of(route)?;
        let credentials = auth::credentials(route, &settings)?;
        Ok(Call {
            route,
            settings,
            credentials,
        })
    }

    /// A `POST` of `method` on `model`, without its credentials yet.
    fn post(&self, model: &str, method: &str, stream: bool) -> Result<Request, ProviderError> {
        let url = call::model_url(self.route, &self.settings, model, method)?;
        Ok(Request::post(url).streaming(stream))
    }

    /// Sends `request` with the access token (got only now, so that a request refused while it
    /// was built costs no token); a 401 answer forgets the token (see [`auth::forget`]).
    fn send(&self, request: Request) -> Result<Response, ProviderError> {
        let token = auth::access_token(self.route, &self.credentials, Request::send_logged)?;
        let response = request.bearer(&token).send_logged()?;
        if response.status == 401 {
            auth::forget(&self.credentials);
        }
        Ok(response)
    }
}

/// The upstream request of a completion on `call` (without its credentials), and who answers it.
fn completion_request(
    call: &Call<'_>,
    request: &CompletionRequest,
    stream: bool,
) -> Result<(Request, Publisher), ProviderError> {
    let publisher = Publisher::of(&request.model);
    let http = call.post(&request.model, publisher.completion_method(stream), stream)?;
    let http = match publisher {
        Publisher::Google => gemini::completion_body(http, request)?,
        Publisher::Anthropic => {
            let settings = anthropic::Settings {
                default_max_tokens: call.settings.default_max_tokens,
            };
            anthropic::with_body(http, request, &settings, stream, |body| {
                body.remove("model");
                body.insert("anthropic_version".into(), ANTHROPIC_VERSION.into());
            })?
        }
    };
    let fields = match publisher {
        Publisher::Google => &gemini::OUTPUT,
        Publisher::Anthropic => &anthropic::OUTPUT,
    };
    check_output(&request.output, fields, http.body_bytes())?;
    Ok((http, publisher))
}

impl Provider for Vertex {
    fn info() -> PluginInfo {
        let mut models = ModelPrice::table(gemini::MODEL_PRICES);
        models.extend(ModelPrice::table(EMBEDDING_PRICES));
        models.extend(ModelPrice::table(anthropic::MODEL_PRICES));
        models.extend(ModelPrice::table(CLAUDE_VERSIONS));
        PluginInfo::new("vertex", env!("CARGO_PKG_VERSION"), models)
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let call = Call::new(&request.route)?;
        let (http, publisher) = completion_request(&call, &request, false)?;
        let response = call.send(http)?;
        match publisher {
            Publisher::Google => {
                read_completion(response, &request.model, gemini::Decoder::default())
            }
            Publisher::Anthropic => {
                read_completion(response, &request.model, anthropic::Decoder::default())
            }
        }
    }

    fn complete_stream(
        request: CompletionRequest,
        sink: &mut Sink,
    ) -> Result<Completion, ProviderError> {
        let call = Call::new(&request.route)?;
        let (http, publisher) = completion_request(&call, &request, true)?;
        let response = call.send(http)?;
        match publisher {
            Publisher::Google => {
                read_stream(response, sink, &request.model, gemini::Decoder::default())
            }
            Publisher::Anthropic => read_stream(
                response,
                sink,
                &request.model,
                anthropic::Decoder::default(),
            ),
        }
    }

    fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
        if Publisher::of(&request.model) == Publisher::Anthropic {
            return Err(ProviderError::InvalidRequest(format!(
                "{} is a Claude model: Vertex AI serves embeddings of Google's models only \
                 (e.g. text-embedding-005, gemini-embedding-001)",
                request.model
            )));
        }
        let call = Call::new(&request.route)?;
        let mut embeddings = Embeddings {
            model: request.model.clone(),
            vectors: Vec::with_capacity(request.input.len()),
            usage: None,
        };
        for inputs in request.input.chunks(embed::batch_size(&request.model)) {
            let body = embed::predict_body(inputs, &request.params)?;
            let http = call.post(&request.model, "predict", false)?.json(&body)?;
            let response = call.send(http)?.error_for_status()?;
            embed::read_predictions(&response.bytes()?, inputs.len(), &mut embeddings)?;
        }
        Ok(embeddings)
    }

    /// Imagen's images (`predict`) and those of Gemini's image models (`generateContent`), with
    /// the gemini plugin's bodies and reading of the answers.
    fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
        // Refused before any credentials are sought: a model that makes no images costs no token.
        let image = ImageCall::of(&request, Service::VertexAi)?;
        let call = Call::new(&request.route)?;
        let http = call
            .post(&request.model, image.method(), false)?
            .json(image.body())?;
        let response = call.send(http)?.error_for_status()?;
        image.read(&response.bytes()?, &request)
    }

    /// Vertex AI's own count of a Gemini prompt (`countTokens`, free of charge): the
    /// `generateContent` body less what `CountTokensRequest` has no field for. Claude on Vertex
    /// is counted by the gateway.
    fn count_tokens(request: CompletionRequest) -> Result<Option<TokenCount>, ProviderError> {
        if Publisher::of(&request.model) == Publisher::Anthropic {
            return Ok(None);
        }
        let call = Call::new(&request.route)?;
        let mut body = gemini::completion_fields(&request)?;
        body.retain(|key, _| COUNT_FIELDS.contains(&key.as_str()));
        let http = call
            .post(&request.model, "countTokens", false)?
            .json(&body)?;
        let counted: gemini::CountTokensResponse = call.send(http)?.error_for_status()?.json()?;
        Ok(Some(TokenCount {
            input_tokens: counted.total_tokens,
            estimated: false,
        }))
    }
}

/// What Vertex AI's `CountTokensRequest` takes of a `generateContent` body.
const COUNT_FIELDS: &[&str] = &["contents", "systemInstruction", "tools", "generationConfig"];

gateway_plugin_sdk::export_provider!(Vertex);

#[cfg(test)]
mod tests;
