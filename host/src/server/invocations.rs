//! `GET /invocations/{id}`: a caller reads the record of one of its own
//! project's requests.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use uuid::Uuid;

use crate::error::ApiError;
use crate::http::{Body, error_response, json_response};
use crate::state::AppState;

/// The record `id_text` names, if it belongs to the project of the caller's
/// key; any other record is "not found", so that ids of other projects'
/// requests reveal nothing.
pub(super) async fn get(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id_text: &str,
    request_id: Uuid,
) -> Response<Body> {
    let result = async {
        let key = crate::auth::bearer_key(request.headers())?;
        let project = crate::auth::project_of(&state.store, key).await?;
        let not_found = || ApiError::NotFound(format!("no invocation {id_text} in this project"));
        let id = Uuid::parse_str(id_text).map_err(|_| not_found())?;
        // Records are written in batches: make sure this one has landed.
        state.log.flush().await;
        let record = state.store.invocation(&id).await?.ok_or_else(not_found)?;
        if record.project_id.as_deref() != Some(project.as_str()) {
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
