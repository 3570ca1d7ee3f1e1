//! Who an admin request is ([`Principal`]): the config's `admin_token` (the break-glass and
//! automation credential: owner), a personal admin token (`gwa_...`: its own role, its use
//! noted), or the console's session (and, to change anything, its CSRF token): the admin
//! token's (owner), or a user's signed in through the OpenID provider (the roles their groups
//! held at sign-in and those an owner gave them: [`user`]). Every bearer
//! credential is counted against its client's wrong ones before it is compared, as the
//! console's sign-in is.

use std::net::IpAddr;

use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::{Method, Request};

use crate::access::{Grant, Grants};
use crate::auth::key_from_header;
use crate::clock::{format_time_ms, now_ms};
use crate::error::ApiError;
use crate::keys::{ADMIN_TOKEN_PREFIX, hash_key};
use crate::state::AppState;

use super::super::session::{Session, SessionUser, console_key};

/// How the admin API was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Api,
    Console,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Api => "api",
            Via::Console => "console",
        }
    }
}

/// Who a request is, and the roles it holds.
#[derive(Debug, Clone)]
pub struct Principal {
    /// As audit events name it: `admin_token`, `token:PREFIX`.
    pub actor: String,
    pub grants: Grants,
    pub via: Via,
    /// Signed in with a personal token (which makes no tokens: see `tokens`).
    pub token: bool,
}

impl Principal {
    /// The holder of the config's `admin_token`.
    fn admin_token(via: Via) -> Principal {
        Principal {
            actor: "admin_token".into(),
            grants: Grants::one(Grant::Owner),
            via,
            token: false,
        }
    }
}

/// Why a request was not let in.
pub struct Refused {
    pub error: ApiError,
    /// A credential was presented and was wrong, expired or revoked: a failed sign-in, whose
    /// actor this names (`unknown` when it named no one).
    pub failed: Option<String>,
}

impl From<ApiError> for Refused {
    fn from(error: ApiError) -> Refused {
        Refused {
            error,
            failed: None,
        }
    }
}

/// Who `request` is, or why it is refused.
pub async fn identify(
    state: &AppState,
    request: &Request<Incoming>,
    client: IpAddr,
) -> Result<Principal, Refused> {
    let (admin_token, console_key) = {
        let live = state.live();
        let token = live.config.admin_token.clone().filter(|t| !t.is_empty());
        (token, console_key(&live.config))
    };
    let headers = request.headers();
    let now = now_ms();
    let mut failed = None;
    let given = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(key_from_header);
    if let Some(given) = given {
        let attempt = state.sign_ins.attempt(client).map_err(ApiError::from)?;
        if given.starts_with(ADMIN_TOKEN_PREFIX) {
            match state
                .store
                .use_admin_token(given, now)
                .await
                .map_err(ApiError::from)?
            {
                Some(token) if token.live(now) => {
                    attempt.succeeded();
                    return Ok(Principal {
                        actor: format!("token:{}", token.prefix),
                        grants: Grants::one(token.grant),
                        via: Via::Api,
                        token: true,
                    });
                }
                Some(token) => {
                    let why = match token.revoked_at_ms {
                        Some(at) => format!("was revoked at {}", format_time_ms(at)),
                        None => format!(
                            "expired at {}",
                            format_time_ms(token.expires_at_ms.unwrap_or_default())
                        ),
                    };
                    tracing::warn!(%client, token = %token.prefix,
                        "admin API: a request with a dead admin token was refused: it {why}");
                    return Err(Refused {
                        error: ApiError::AdminTokenRefused(format!(
                            "the admin token {} {why}",
                            token.prefix
                        )),
                        failed: Some(format!("token:{}", token.prefix)),
                    });
                }
                None => {}
            }
        } else if admin_token
            .as_deref()
            .is_some_and(|token| hash_key(given) == hash_key(token))
        {
            attempt.succeeded();
            return Ok(Principal::admin_token(Via::Api));
        }
        tracing::warn!(%client, "admin API: a request with a wrong admin token was refused");
        failed = Some("unknown".to_owned());
    }
    if let Some(key) = console_key {
        let session = Session::live(&state.store, headers, &key, now)
            .await
            .map_err(ApiError::from)?;
        if let Some(session) = session {
            let reads = matches!(*request.method(), Method::GET | Method::HEAD);
            if !reads && !session.csrf_ok(headers, &key) {
                return Err(ApiError::CsrfRefused.into());
            }
            return match &session.user {
                None => Ok(Principal::admin_token(Via::Console)),
                Some(user) => self::user(state, user).await.map_err(Refused::from),
            };
        }
    }
    Err(Refused {
        error: ApiError::AdminUnauthorized,
        failed,
    })
}

/// A user signed in through the OpenID provider: the roles their groups held at sign-in and
/// those an owner gave them (`gateway users add`). One who holds none now is signed out, as
/// far as the admin API is concerned.
pub async fn user(state: &AppState, user: &SessionUser) -> Result<Principal, ApiError> {
    let mut grants = user.grants();
    grants.extend(
        state
            .store
            .user_grants(Some(&user.name))
            .await?
            .into_iter()
            .map(|given| given.grant),
    );
    if grants.is_empty() {
        return Err(ApiError::AdminForbidden(format!(
            "{} holds no role: an owner can give one (gateway users add)",
            user.name
        )));
    }
    Ok(Principal {
        actor: format!("user:{}", user.name),
        grants: Grants::new(grants),
        via: Via::Console,
        token: false,
    })
}
