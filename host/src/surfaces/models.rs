//! `GET /v1/models` and `GET /v1/models/{id}`: the names a caller may send
//! as `model`, in the shape of the caller's SDK: Anthropic's when the request
//! carries `anthropic-version` (its SDKs always send it), OpenAI's otherwise.
//! Not a model call: no plugin runs and no invocation is recorded (as for
//! `GET /invocations/{id}`). A key sees only the names its scope lets it use: any
//! other answers 404, as a name that does not exist does.

use std::collections::HashSet;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{anthropic, openai};
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
}

impl Shape {
    fn of(headers: &HeaderMap) -> Shape {
        if headers.contains_key(ANTHROPIC_VERSION) {
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
        }
    }
}

/// `GET /v1/models`.
pub async fn list(state: Arc<AppState>, request: Request<Incoming>, id: Uuid) -> Response<Body> {
    let shape = Shape::of(request.headers());
    let result = async {
        let scope = authenticate(&state, &request).await?;
        Ok(shape.list(entries(&state, &scope)))
    }
    .await;
    answer(request.headers(), result, &id)
}

/// `GET /v1/models/{model}`; `model` as it is in the path (percent-encoded:
/// the SDKs encode the `/` of `ROUTE/MODEL`).
pub async fn retrieve(
    state: Arc<AppState>,
    request: Request<Incoming>,
    model: &str,
    id: Uuid,
) -> Response<Body> {
    let shape = Shape::of(request.headers());
    let result = async {
        let scope = authenticate(&state, &request).await?;
        let model =
            percent_decode(model).ok_or_else(|| ApiError::UnknownModel(model.to_owned()))?;
        entries(&state, &scope)
            .into_iter()
            .find(|(name, _)| *name == model)
            .map(|(name, owner)| shape.entry(&name, &owner))
            .ok_or(ApiError::UnknownModel(model))
    }
    .await;
    answer(request.headers(), result, &id)
}

/// `error` in the shape of the caller's SDK (see the module's doc).
pub fn error_response(headers: &HeaderMap, error: &ApiError, id: &Uuid) -> Response<Body> {
    match Shape::of(headers) {
        Shape::OpenAi => openai::error_response(error, id),
        Shape::Anthropic => anthropic::error_response(error, id),
    }
}

/// The scope of the request's key.
async fn authenticate(state: &AppState, request: &Request<Incoming>) -> Result<KeyScope, ApiError> {
    let key = crate::auth::api_key(request.headers())?;
    Ok(crate::auth::key_record(&state.store, key).await?.scope)
}

fn answer(headers: &HeaderMap, result: Result<Value, ApiError>, id: &Uuid) -> Response<Body> {
    match result {
        Ok(body) => json_response(StatusCode::OK, &body, id),
        Err(error) => error_response(headers, &error, id),
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

/// `%XX` sequences decoded; `None` when they do not make UTF-8 text.
fn percent_decode(text: &str) -> Option<String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(|text| text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("r%2Fm").as_deref(), Some("r/m"));
        assert_eq!(percent_decode("r/m").as_deref(), Some("r/m"));
        // Not an escape: left as it is (and then names no model).
        assert_eq!(percent_decode("a%2").as_deref(), Some("a%2"));
        assert_eq!(percent_decode("%FF"), None);
        assert_eq!(percent_decode("%C3%A9").as_deref(), Some("é"));
    }

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
