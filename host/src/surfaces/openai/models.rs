//! `GET /v1/models` and `GET /v1/models/{id}`: the names a caller may send
//! as `model`, in OpenAI's list format. Not a model call: no plugin runs and
//! no invocation is recorded (as for `GET /invocations/{id}`).

use std::collections::HashSet;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use super::response::error_body;
use crate::error::ApiError;
use crate::http::{Body, error_response_with_body, json_response};
use crate::state::AppState;

/// `GET /v1/models`.
pub async fn list(state: Arc<AppState>, request: Request<Incoming>, id: Uuid) -> Response<Body> {
    let result = async {
        authenticate(&state, &request).await?;
        Ok(json!({"object": "list", "data": entries(&state)}))
    }
    .await;
    answer(result, &id)
}

/// `GET /v1/models/{model}`; `model` as it is in the path (percent-encoded:
/// OpenAI's SDKs encode the `/` of `ROUTE/MODEL`).
pub async fn retrieve(
    state: Arc<AppState>,
    request: Request<Incoming>,
    model: &str,
    id: Uuid,
) -> Response<Body> {
    let result = async {
        authenticate(&state, &request).await?;
        let model =
            percent_decode(model).ok_or_else(|| ApiError::UnknownModel(model.to_owned()))?;
        entries(&state)
            .into_iter()
            .find(|entry| entry["id"] == json!(model))
            .ok_or(ApiError::UnknownModel(model))
    }
    .await;
    answer(result, &id)
}

async fn authenticate(state: &AppState, request: &Request<Incoming>) -> Result<String, ApiError> {
    let key = crate::auth::api_key(request.headers())?;
    crate::auth::project_of(&state.store, key).await
}

fn answer(result: Result<Value, ApiError>, id: &Uuid) -> Response<Body> {
    match result {
        Ok(body) => json_response(StatusCode::OK, &body, id),
        Err(error) => error_response_with_body(&error, &error_body(&error), id),
    }
}

/// Every alias (owned by its route), then per route its default model and
/// every model its loaded plugin knows, as `ROUTE/MODEL`; each name once.
fn entries(state: &AppState) -> Vec<Value> {
    let live = state.live();
    let config = &live.config;
    let mut names: Vec<(String, &str)> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut add = |name: String, owner| {
        if seen.insert(name.clone()) {
            names.push((name, owner));
        }
    };
    for (alias, target) in &config.models {
        add(alias.clone(), target.route.as_str());
    }
    for (route, route_config) in &config.providers {
        let known: Vec<String> = state
            .runtime
            .get(&route_config.plugin)
            .map(|plugin| plugin.info.models.iter().map(|m| m.model.clone()).collect())
            .unwrap_or_default();
        for model in route_config.default_model.iter().chain(&known) {
            add(format!("{route}/{model}"), route.as_str());
        }
    }
    names
        .into_iter()
        .map(
            |(name, owner)| json!({"id": name, "object": "model", "created": 0, "owned_by": owner}),
        )
        .collect()
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
}
