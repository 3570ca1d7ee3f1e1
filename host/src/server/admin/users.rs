//! The console's users an owner gives roles, beside those their groups hold by
//! `[oidc.roles]`: `GET /admin/users`, `POST /admin/users` (`{"email", "role", "projectId"}`),
//! `DELETE /admin/users/{email}` (every role, or `?role=&projectId=` one). The owner's only.

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde_json::json;

use super::audit::Change;
use super::who::Principal;
use super::{Answer, is_blank, parse_json, read_json_body};
use crate::access::{Grant, Role};
use crate::clock::format_time_ms;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{StoreError, UserGrant};

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NewGrant {
    email: String,
    role: String,
    #[serde(default)]
    project_id: Option<String>,
}

/// A user's role as the API lists it.
pub fn user_json(given: &UserGrant) -> serde_json::Value {
    json!({
        "email": given.email,
        "role": given.grant.role().as_str(),
        "projectId": given.grant.project(),
        "createdBy": given.created_by,
        "createdAt": format_time_ms(given.created_at_ms),
    })
}

/// The roles of `email` as audit events show them.
async fn roles_of(state: &AppState, email: &str) -> Result<serde_json::Value, ApiError> {
    let roles: Vec<String> = state
        .store
        .user_grants(Some(email))
        .await?
        .iter()
        .map(|given| given.grant.to_string())
        .collect();
    Ok(json!({ "email": email, "roles": roles }))
}

/// `GET /admin/users`.
pub async fn list(state: &AppState) -> Answer {
    let users: Vec<_> = state
        .store
        .user_grants(None)
        .await?
        .iter()
        .map(user_json)
        .collect();
    Ok((StatusCode::OK, json!({ "users": users })))
}

/// `POST /admin/users`.
pub async fn add(
    state: &AppState,
    request: Request<Incoming>,
    principal: &Principal,
    change: &mut Change,
) -> Answer {
    let bytes = read_json_body(state, request).await?;
    if is_blank(&bytes) {
        return Err(ApiError::BadRequest(
            "send the user's role as a JSON object: {\"email\", \"role\", \"projectId\" (for a \
             project role)}"
                .into(),
        ));
    }
    let body: NewGrant = parse_json(&bytes)?;
    let email = body.email.trim().to_lowercase();
    let role = Role::parse(body.role.trim()).map_err(|m| ApiError::invalid("role", m))?;
    let grant = Grant::new(role, body.project_id.as_deref())
        .map_err(|m| ApiError::invalid("projectId", m))?;
    if let Some(project) = grant.project()
        && state.store.project(project).await?.is_none()
    {
        return Err(StoreError::UnknownProject(project.to_owned()).into());
    }
    change.target = Some(format!("user:{email}"));
    change.before = Some(roles_of(state, &email).await?);
    let added = state
        .store
        .add_user_grant(&email, &grant, &principal.actor)
        .await?;
    change.after = Some(roles_of(state, &email).await?);
    tracing::info!(user = %email, role = %grant, by = %principal.actor, "admin API: gave a user a role");
    let status = if added {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        json!({ "email": email, "role": grant.role().as_str(), "projectId": grant.project(), "added": added }),
    ))
}

/// `DELETE /admin/users/{email}`.
pub async fn remove(
    state: &AppState,
    request: &Request<Incoming>,
    email: &str,
    change: &mut Change,
) -> Answer {
    let email = url::form_urlencoded::parse(format!("e={email}").as_bytes())
        .next()
        .map(|(_, v)| v.trim().to_lowercase())
        .unwrap_or_default();
    let (mut role, mut project) = (None, None);
    for (name, value) in
        url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
    {
        match &*name {
            "role" => role = Some(value.into_owned()),
            "projectId" => project = Some(value.into_owned()),
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {other:?}: only role and projectId"
                )));
            }
        }
    }
    let grant = match role {
        None => None,
        Some(role) => {
            let role = Role::parse(&role).map_err(|m| ApiError::invalid("role", m))?;
            Some(
                Grant::new(role, project.as_deref())
                    .map_err(|m| ApiError::invalid("projectId", m))?,
            )
        }
    };
    change.target = Some(format!("user:{email}"));
    change.before = Some(roles_of(state, &email).await?);
    let removed = state
        .store
        .remove_user_grants(&email, grant.as_ref())
        .await?;
    if removed == 0 {
        return Err(ApiError::NotFound(format!("{email} holds no such role")));
    }
    change.after = Some(roles_of(state, &email).await?);
    Ok((
        StatusCode::OK,
        json!({ "email": email, "removed": removed }),
    ))
}
