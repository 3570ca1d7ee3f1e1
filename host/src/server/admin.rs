//! Operator endpoints under `/admin`, behind the config's `admin_token`.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use uuid::Uuid;

use crate::config::Config;
use crate::error::ApiError;
use crate::http::{Body, error_response, json_response};
use crate::plugins::{PluginReport, PluginRuntime};
use crate::state::AppState;

/// One plugin with the routes it serves, as the admin API reports it.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PluginRow {
    #[serde(flatten)]
    pub report: PluginReport,
    pub routes: Vec<String>,
}

/// Every plugin `runtime` knows, with the routes of `config` that use it.
pub fn plugin_rows(runtime: &PluginRuntime, config: &Config) -> Vec<PluginRow> {
    runtime
        .report()
        .into_iter()
        .map(|report| PluginRow {
            routes: config
                .providers
                .iter()
                .filter(|(_, route)| route.plugin == report.plugin)
                .map(|(id, _)| id.clone())
                .collect(),
            report,
        })
        .collect()
}

fn authorized(state: &AppState, request: &Request<Incoming>) -> bool {
    let live = state.live();
    let Some(token) = live.config.admin_token.as_deref().filter(|t| !t.is_empty()) else {
        return false;
    };
    let given = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::auth::key_from_header);
    // Compare hashes so the comparison takes the same time whatever matches.
    given.is_some_and(|given| crate::auth::hash_key(given) == crate::auth::hash_key(token))
}

/// `GET /admin/plugins`: every plugin, its status and the routes using it.
pub(super) fn plugins(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: &Uuid,
) -> Response<Body> {
    if !authorized(&state, &request) {
        return error_response(&ApiError::AdminUnauthorized, id);
    }
    let live = state.live();
    let rows = plugin_rows(&state.runtime, &live.config);
    json_response(StatusCode::OK, &json!({ "plugins": rows }), id)
}

/// `GET /admin/config`: when the serving config was loaded, and why the last
/// edit was refused, if it was.
pub(super) fn config(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: &Uuid,
) -> Response<Body> {
    if !authorized(&state, &request) {
        return error_response(&ApiError::AdminUnauthorized, id);
    }
    let live = state.live();
    let routes: Vec<&String> = live.config.providers.keys().collect();
    json_response(
        StatusCode::OK,
        &json!({
            "loadedAt": crate::store::format_time_ms(live.loaded_at_ms),
            "routes": routes,
            "rejected": state.config_error(),
        }),
        id,
    )
}
