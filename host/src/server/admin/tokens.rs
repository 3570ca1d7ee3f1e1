//! Personal admin tokens through the admin API: `GET /admin/tokens` (the caller's own; the
//! owner's: everyone's), `POST /admin/tokens` (a token of a role within the caller's, shown
//! once), `DELETE /admin/tokens/{prefix}` (the caller's own; the owner: any). A personal token
//! makes no tokens: one that leaked could otherwise outlive its own revocation.

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde_json::json;

use super::audit::Change;
use super::who::Principal;
use super::{Answer, is_blank, parse_json, read_json_body};
use crate::access::{Grant, Need, Role, token_expiry};
use crate::clock::{format_time_ms, now_ms};
use crate::error::ApiError;
use crate::keys::{PREFIX_LEN, generate_admin_token, key_prefix};
use crate::state::AppState;
use crate::store::{AdminToken, NewAdminToken, StoreError};

/// A `POST /admin/tokens` body.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NewToken {
    name: String,
    role: String,
    #[serde(default)]
    project_id: Option<String>,
    /// `90d`, a date, a time, or `never`; absent: 90 days.
    #[serde(default)]
    expires: Option<String>,
}

/// A token as the API lists it: never the token, only its prefix.
pub fn token_json(token: &AdminToken) -> serde_json::Value {
    json!({
        "prefix": token.prefix,
        "name": token.name,
        "role": token.grant.role().as_str(),
        "projectId": token.grant.project(),
        "createdBy": token.created_by,
        "createdAt": format_time_ms(token.created_at_ms),
        "expiresAt": token.expires_at_ms.map(format_time_ms),
        "revokedAt": token.revoked_at_ms.map(format_time_ms),
        "lastUsedAt": token.last_used_at_ms.map(format_time_ms),
        "live": token.live(now_ms()),
    })
}

/// Whether `principal` may see and revoke `token`: its own, or any for the owner. A token is
/// its own too (it may revoke itself).
fn sees(principal: &Principal, token: &AdminToken) -> bool {
    principal.grants.allows(Need::Owner, None)
        || token.created_by == principal.actor
        || principal.actor == format!("token:{}", token.prefix)
}

/// `GET /admin/tokens`.
pub async fn list(state: &AppState, principal: &Principal) -> Answer {
    let tokens: Vec<_> = state
        .store
        .admin_tokens()
        .await?
        .iter()
        .filter(|token| sees(principal, token))
        .map(token_json)
        .collect();
    Ok((StatusCode::OK, json!({ "tokens": tokens })))
}

/// `POST /admin/tokens`.
pub async fn create(
    state: &AppState,
    request: Request<Incoming>,
    principal: &Principal,
    change: &mut Change,
) -> Answer {
    if principal.token {
        return Err(ApiError::AdminForbidden(
            "a personal admin token makes no tokens: sign in to the console, use the admin \
             token, or `gateway admin-token create`"
                .into(),
        ));
    }
    let bytes = read_json_body(state, request).await?;
    if is_blank(&bytes) {
        return Err(ApiError::BadRequest(
            "send the token as a JSON object: {\"name\", \"role\", \"projectId\" (for a project \
             role), \"expires\" (90d when absent; never)}"
                .into(),
        ));
    }
    let body: NewToken = parse_json(&bytes)?;
    let role = Role::parse(body.role.trim()).map_err(|m| ApiError::invalid("role", m))?;
    let grant = Grant::new(role, body.project_id.as_deref())
        .map_err(|m| ApiError::invalid("projectId", m))?;
    if !principal.grants.covers(&grant) {
        return Err(ApiError::AdminForbidden(format!(
            "{} ({}) may not make a token of {grant}: a token's role is within its maker's",
            principal.actor,
            principal.grants.summary()
        )));
    }
    if let Some(project) = grant.project()
        && state.store.project(project).await?.is_none()
    {
        return Err(StoreError::UnknownProject(project.to_owned()).into());
    }
    let expires_at_ms = token_expiry(body.expires.as_deref(), now_ms())
        .map_err(|m| ApiError::invalid("expires", format!("expires: {m}")))?;
    let secret = generate_admin_token();
    let new = NewAdminToken {
        name: body.name,
        grant,
        created_by: principal.actor.clone(),
        expires_at_ms,
    };
    let token = state.store.create_admin_token(&secret, &new).await?;
    tracing::info!(token = %token.prefix, role = %token.grant, by = %principal.actor,
        "admin API: made an admin token");
    let made = token_json(&token);
    change.target = Some(format!("token:{}", token.prefix));
    change.after = Some(made.clone());
    let mut answer = made;
    answer["token"] = json!(secret);
    Ok((StatusCode::CREATED, answer))
}

/// `DELETE /admin/tokens/{prefix}`: the prefix as listed (or the whole token).
pub async fn revoke(
    state: &AppState,
    given: &str,
    principal: &Principal,
    change: &mut Change,
) -> Answer {
    if given.chars().count() < PREFIX_LEN {
        return Err(ApiError::BadRequest(format!(
            "give the token's prefix as listed ({PREFIX_LEN} characters)"
        )));
    }
    let prefix = key_prefix(given);
    change.target = Some(format!("token:{prefix}"));
    let now = now_ms();
    let tokens: Vec<AdminToken> = state
        .store
        .admin_tokens()
        .await?
        .into_iter()
        .filter(|token| token.prefix == prefix && token.live(now) && sees(principal, token))
        .collect();
    if tokens.is_empty() {
        return Err(ApiError::NotFound(format!(
            "no live admin token of yours starts with {prefix:?}"
        )));
    }
    let before: Vec<_> = tokens.iter().map(token_json).collect();
    change.before = Some(json!({ "tokens": before }));
    let revoked = state.store.revoke_admin_tokens(prefix).await?;
    tracing::info!(token = %prefix, revoked, by = %principal.actor, "admin API: revoked admin tokens");
    change.after = Some(json!({ "revoked": revoked }));
    Ok((StatusCode::OK, json!({ "revoked": revoked })))
}
