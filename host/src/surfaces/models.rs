//! `GET /v1/models` and `GET /v1/models/{id}` (and `GET /v1beta/models[/{id}]`): the names a
//! caller may send as `model`, in the shape of the caller's SDK: Google's under `/v1beta/` or
//! when the key comes as Google's clients send it (`x-goog-api-key`, `?key=`), Anthropic's when
//! the request carries `anthropic-version` (its SDKs always send it), OpenAI's otherwise.
//! Not a model call: no plugin runs and no invocation is recorded (as for
//! `GET /invocations/{id}`). A key sees only the names its scope lets it use: any
//! other answers 404, as a name that does not exist does.

use std::collections::HashSet;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response, StatusCode, Uri};
use serde_json::{Value, json};
use uuid::Uuid;

use super::checks::percent_decoded;
use super::{anthropic, gemini, openai};
use crate::error::ApiError;
use crate::http::{Body, json_response};
use crate::state::AppState;
use crate::store::KeyScope;

/// The header every Anthropic SDK request carries.
const ANTHROPIC_VERSION: &str = "anthropic-version";
/// Anthropic's model objects have a creation date; the gateway's names have none.
const NO_DATE: &str = "1970-01-01T00:00:00Z";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    OpenAi,
    Anthropic,
    Gemini,
}

/// What Gemini's model objects say a gateway name serves: all of a model's methods the
/// gateway has (whether the route's provider serves each is the provider's to say).
const GEMINI_METHODS: [&str; 5] = [
    "generateContent",
    "streamGenerateContent",
    "countTokens",
    "embedContent",
    "batchEmbedContents",
];

impl Shape {
    fn of(headers: &HeaderMap, uri: &Uri) -> Shape {
        if gemini::lists_models(uri.path())
            || headers.contains_key(crate::auth::GOOGLE_KEY_HEADER)
            || crate::auth::query_key(uri.query()).is_some()
        {
            Shape::Gemini
        } else if headers.contains_key(ANTHROPIC_VERSION) {
            Shape::Anthropic
        } else {
            Shape::OpenAi
        }
    }

    fn entry(self, name: &str, owner: &str) -> Value {
        match self {
            Shape::OpenAi => {
                json!({"id": name, "object": "model", "created": 0, "owned_by": owner})
            }
            Shape::Anthropic => {
                json!({"type": "model", "id": name, "display_name": name, "created_at": NO_DATE})
            }
            Shape::Gemini => json!({"name": format!("models/{name}"), "version": "",
                "displayName": name, "supportedGenerationMethods": GEMINI_METHODS}),
        }
    }

    /// The whole list: OpenAI's `list` object, or Anthropic's page (one page:
    /// `has_more` is false, so the SDKs' auto-pagination stops).
    fn list(self, entries: Vec<(String, String)>) -> Value {
        let first = entries.first().map(|(name, _)| name.clone());
        let last = entries.last().map(|(name, _)| name.clone());
        let data: Vec<Value> = entries
            .iter()
            .map(|(name, owner)| self.entry(name, owner))
            .collect();
        match self {
            Shape::OpenAi => json!({"object": "list", "data": data}),
            Shape::Anthropic => {
                json!({"data": data, "has_more": false, "first_id": first, "last_id": last})
            }
            // One page: no `nextPageToken`, so the SDKs' pagers stop.
            Shape::Gemini => json!({"models": data}),
        }
    }
}

/// `GET /v1/models`.
pub async fn list(state: Arc<AppState>, request: Request<Incoming>, id: Uuid) -> Response<Body> {
    let shape = Shape::of(request.headers(), request.uri());
    let result = async {
        let scope = authenticate(&state, &request, shape).await?;
        Ok(shape.list(entries(&state, &scope)))
    }
    .await;
    answer(shape, result, &id)
}

/// `GET /v1/models/{model}`; `model` as it is in the path (percent-encoded:
/// the SDKs encode the `/` of `ROUTE/MODEL`; Google's do not, and write `models/` before it).
pub async fn retrieve(
    state: Arc<AppState>,
    request: Request<Incoming>,
    model: &str,
    id: Uuid,
) -> Response<Body> {
    let shape = Shape::of(request.headers(), request.uri());
    let result = async {
        let scope = authenticate(&state, &request, shape).await?;
        let model =
            percent_decoded(model).ok_or_else(|| ApiError::UnknownModel(model.to_owned()))?;
        entries(&state, &scope)
            .into_iter()
            .find(|(name, _)| *name == model)
            .map(|(name, owner)| shape.entry(&name, &owner))
            .ok_or(ApiError::UnknownModel(model))
    }
    .await;
    answer(shape, result, &id)
}

/// `error` in the shape of the caller's SDK (see the module's doc).
pub fn error_response(
    headers: &HeaderMap,
    uri: &Uri,
    error: &ApiError,
    id: &Uuid,
) -> Response<Body> {
    shaped_error(Shape::of(headers, uri), error, id)
}

fn shaped_error(shape: Shape, error: &ApiError, id: &Uuid) -> Response<Body> {
    match shape {
        Shape::OpenAi => openai::error_response(error, id),
        Shape::Anthropic => anthropic::error_response(error, id),
        Shape::Gemini => gemini::error_response(error, id),
    }
}

/// The scope of the request's key, read where the caller's SDK sends it.
async fn authenticate(
    state: &AppState,
    request: &Request<Incoming>,
    shape: Shape,
) -> Result<KeyScope, ApiError> {
    let key = match shape {
        Shape::Gemini => crate::auth::google_key(request.headers(), request.uri().query())?,
        Shape::OpenAi | Shape::Anthropic => crate::auth::api_key(request.headers())?,
    };
    Ok(crate::auth::key_record(&state.store, key).await?.scope)
}

fn answer(shape: Shape, result: Result<Value, ApiError>, id: &Uuid) -> Response<Body> {
    match result {
        Ok(body) => json_response(StatusCode::OK, &body, id),
        Err(error) => shaped_error(shape, &error, id),
    }
}

/// Every alias (owned by its route), then per route its default model and
/// every model its loaded plugin knows, as `ROUTE/MODEL`; each name once, and
/// only those within `scope`.
fn entries(state: &AppState, scope: &KeyScope) -> Vec<(String, String)> {
    let live = state.live();
    let config = &live.config;
    let mut names: Vec<(String, String)> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut add = |name: String, owner: &str| {
        if seen.insert(name.clone()) {
            names.push((name, owner.to_owned()));
        }
    };
    for (alias, target) in &config.models {
        let default_model = || {
            config
                .providers
                .get(&target.route)?
                .default_model
                .as_deref()
        };
        let model = target.model.as_deref().or_else(default_model).unwrap_or("");
        if scope.allows(&target.route, model) {
            add(alias.clone(), &target.route);
        }
    }
    for (route, route_config) in &config.providers {
        let known: Vec<String> = state
            .runtime
            .get(&route_config.plugin)
            .map(|plugin| plugin.info.models.iter().map(|m| m.model.clone()).collect())
            .unwrap_or_default();
        for model in route_config.default_model.iter().chain(&known) {
            if scope.allows(route, model) {
                add(format!("{route}/{model}"), route);
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_of_the_list() {
        let entries = || {
            vec![
                ("fast".to_owned(), "groq".to_owned()),
                ("groq/m".to_owned(), "groq".to_owned()),
            ]
        };
        let openai = Shape::OpenAi.list(entries());
        assert_eq!(openai["object"], "list");
        assert_eq!(
            openai["data"][1],
            json!({"id": "groq/m", "object": "model", "created": 0, "owned_by": "groq"})
        );
        let anthropic = Shape::Anthropic.list(entries());
        assert_eq!(anthropic["has_more"], false);
        assert_eq!(anthropic["first_id"], "fast");
        assert_eq!(anthropic["last_id"], "groq/m");
        assert_eq!(
            anthropic["data"][0],
            json!({"type": "model", "id": "fast", "display_name": "fast", "created_at": NO_DATE})
        );
        assert_eq!(Shape::Anthropic.list(Vec::new())["first_id"], Value::Null);
    }
}
