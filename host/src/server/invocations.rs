//! `GET /invocations/{id}`: a caller reads the record of one of its own
//! project's requests.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use uuid::Uuid;

use crate::error::ApiError;
use crate::http::{Body, error_response, json_response};
use crate::state::AppState;
use crate::store::Origin;

/// The record `id_text` names, if it belongs to the project of the caller's
/// key and, for a key limited to some routes or models, if the key made it or could have
/// (as it reads kept responses); any other record is "not found", so that ids of other
/// projects' requests, and another route's request and answer, reveal nothing.
pub(super) async fn get(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id_text: &str,
    request_id: Uuid,
) -> Response<Body> {
    let result = async {
        let key = crate::auth::bearer_key(request.headers())?;
        let key = crate::auth::key_record(&state.store, key).await?;
        let not_found = || ApiError::NotFound(format!("no invocation {id_text} in this project"));
        let id = Uuid::parse_str(id_text).map_err(|_| not_found())?;
        // Records are written in batches: make sure this one has landed.
        state.log.flush().await;
        let record = state.store.invocation(&id).await?.ok_or_else(not_found)?;
        if record.project_id.as_deref() != Some(key.project_id.as_str()) {
            return Err(not_found());
        }
        let own = record.key_prefix.as_deref() == Some(key.prefix.as_str());
        let origin = Origin {
            route: record.route.clone(),
            model: record.model.clone(),
        };
        if !own && !key.scope.allows_origin(&origin) {
            return Err(not_found());
        }
        Ok(record.to_json())
    }
    .await;
    match result {
        Ok(body) => json_response(StatusCode::OK, &body, &request_id),
        Err(error) => error_response(&error, &request_id),
    }
}
