//! The admin console at `/ui/`: its page and assets, embedded in the binary (`host/ui/`), and
//! signing in and out. What its pages show comes from the admin API (`admin`), which takes the
//! session's cookie as it takes the admin token. On where `admin_token` is set and `console`
//! is not turned off.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, HeaderName, HeaderValue, LOCATION, SET_COOKIE,
};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;
use uuid::Uuid;

use super::admin::audit::{Actor, Change, Event};
use super::session::{Session, clear_cookie, console_key};
use crate::access::{Grant, Grants, Need};
use crate::clock::{format_time_ms, now_ms};
use crate::error::ApiError;
use crate::http::{Body, error_response, json_response, read_body, typed_response};
use crate::state::AppState;
use crate::surfaces::json::parse_object;

/// A file of the console, served at `/ui/assets/{name}`.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: [Asset; 5] = [
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../ui/app.js"),
    },
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../ui/app.css"),
    },
    // uPlot (MIT), unchanged from its npm package: see host/ui/vendor/README.md.
    Asset {
        name: "uPlot.iife.min.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../ui/vendor/uPlot.iife.min.js"),
    },
    Asset {
        name: "uPlot.min.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../ui/vendor/uPlot.min.css"),
    },
    Asset {
        name: "uPlot.LICENSE",
        content_type: "text/plain; charset=utf-8",
        bytes: include_bytes!("../../ui/vendor/uPlot.LICENSE"),
    },
];

const INDEX: &[u8] = include_bytes!("../../ui/index.html");

/// Scripts and styles of the gateway's own only, no inline ones, not framed by another site:
/// what the page shows of the records (anyone's text) can never run.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; \
                   base-uri 'none'; form-action 'self'";

/// A sign-in's body: `{"token": "..."}`.
const MAX_LOGIN_BODY: usize = 4 * 1024;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    token: String,
}

/// Whether `path` is the console's.
pub(super) fn serves(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// `/ui`, `/ui/` (the page), `/ui/assets/{name}`, `/ui/session`, `/ui/login`, `/ui/logout`;
/// `client` is the address the request came from (whose wrong tokens are counted).
pub(super) async fn serve(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: &Uuid,
    client: IpAddr,
) -> Response<Body> {
    let (key, admin_token, oidc) = {
        let live = state.live();
        let admin_token = live.config.admin_token.is_some();
        (
            console_key(&live.config),
            admin_token,
            live.config.oidc.clone(),
        )
    };
    let Some(token) = key else {
        let error = ApiError::NotFound(
            "the admin console is off: it needs the config's admin_token or [oidc] (and \
             console not set to false)"
                .into(),
        );
        return error_response(&error, id);
    };
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    let secure = request
        .headers()
        .get("x-forwarded-proto")
        .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"));
    match (path.as_str(), &method, &oidc) {
        ("/ui/sign-in", &Method::GET, _) => {
            let body = json!({ "adminToken": admin_token, "sso": oidc.is_some() });
            return json_response(StatusCode::OK, &body, id);
        }
        ("/ui/oidc/login", &Method::GET, Some(oidc)) => {
            let secure = secure || oidc.redirect_url.starts_with("https://");
            return super::sign_on::begin(&state, oidc, &token, id, secure).await;
        }
        ("/ui/oidc/callback", &Method::GET, Some(oidc)) => {
            return super::sign_on::finish(&state, &request, oidc, &token, id, client).await;
        }
        ("/ui/login", &Method::POST, _) if !admin_token => {
            let error = ApiError::NotFound(
                "this gateway has no admin_token to sign in with: sign in with single sign-on"
                    .into(),
            );
            return error_response(&error, id);
        }
        _ => {}
    }
    let answer = match (path.as_str(), &method) {
        // The page's assets are named relative to `/ui/`.
        ("/ui", &Method::GET | &Method::HEAD) => {
            let mut response = typed_response(StatusCode::PERMANENT_REDIRECT, "text/plain", "", id);
            response
                .headers_mut()
                .insert(LOCATION, HeaderValue::from_static("/ui/"));
            return response;
        }
        ("/ui/", &Method::GET | &Method::HEAD) => Ok(page("text/html; charset=utf-8", INDEX, id)),
        ("/ui/session", &Method::GET) => session(&state, &request, &token, id).await,
        ("/ui/login", &Method::POST) => login(&state, request, &token, id, client).await,
        ("/ui/logout", &Method::POST) => return logout(&state, &request, &token, id, client).await,
        (asset, &Method::GET | &Method::HEAD) if asset.starts_with("/ui/assets/") => {
            let name = &asset["/ui/assets/".len()..];
            ASSETS
                .iter()
                .find(|asset| asset.name == name)
                .map(|asset| page(asset.content_type, asset.bytes, id))
                .ok_or_else(|| ApiError::NotFound(format!("no such file: {asset}")))
        }
        ("/ui" | "/ui/", _) => Err(ApiError::MethodNotAllowed("GET")),
        ("/ui/session", _) => Err(ApiError::MethodNotAllowed("GET")),
        ("/ui/login" | "/ui/logout", _) => Err(ApiError::MethodNotAllowed("POST")),
        _ => Err(ApiError::NotFound(format!("no such page: {path}"))),
    };
    answer.unwrap_or_else(|error| error_response(&error, id))
}

/// The page or one of its files, with the headers that keep it from being framed, sniffed or
/// kept stale after an upgrade.
fn page(content_type: &'static str, bytes: &'static [u8], id: &Uuid) -> Response<Body> {
    let mut response = typed_response(StatusCode::OK, content_type, bytes, id);
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    // CSP's `frame-ancestors` for the browsers that predate it (and for proxies that strip
    // CSP): the same refusal to be framed.
    headers.insert(
        HeaderName::from_static("x-frame-options"),
        HeaderValue::from_static("DENY"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        HeaderName::from_static("referrer-policy"),
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// What a signed-in page is told of its session.
fn session_json(session: &Session, token: &str) -> serde_json::Value {
    json!({
        "csrf": session.csrf_token(token),
        "expiresAt": format_time_ms(session.expires_at_ms),
    })
}

/// `GET /ui/session`: the browser's session and its CSRF token, or 401.
async fn session(
    state: &AppState,
    request: &Request<Incoming>,
    token: &str,
    id: &Uuid,
) -> Result<Response<Body>, ApiError> {
    let session = Session::live(&state.store, request.headers(), token, now_ms())
        .await?
        .ok_or(ApiError::AdminUnauthorized)?;
    let mut body = session_json(&session, token);
    let grants = match &session.user {
        None => Grants::one(Grant::Owner),
        Some(user) => super::admin::who::user(state, user).await?.grants,
    };
    body["user"] = json!(session.user.as_ref().map(|user| user.name.clone()));
    body["roles"] = json!(grants.iter().map(ToString::to_string).collect::<Vec<_>>());
    body["can"] = can_json(&grants);
    Ok(json_response(StatusCode::OK, &body, id))
}

/// What the page may offer the roles `grants` hold (the admin API decides all the same): reads
/// and changes of what is no project's, the owner's, and the projects it sees and changes.
fn can_json(grants: &Grants) -> serde_json::Value {
    let projects = |need: Need| -> serde_json::Value {
        if grants.allows(need, None) {
            return json!("all");
        }
        let held: Vec<&str> = grants
            .iter()
            .filter(|grant| {
                grant
                    .project()
                    .is_some_and(|p| grants.allows(need, Some(p)))
            })
            .filter_map(|grant| grant.project())
            .collect();
        json!(held)
    };
    json!({
        "read": grants.allows(Need::Read, None),
        "change": grants.allows(Need::Change, None),
        "owner": grants.allows(Need::Owner, None),
        "readProjects": projects(Need::ReadProject),
        "changeProjects": projects(Need::ChangeProject),
    })
}

/// `POST /ui/login`: a session for the admin token, in an HttpOnly, SameSite=Strict cookie.
/// An address that sent too many wrong tokens is refused (429) before anything is read.
async fn login(
    state: &AppState,
    request: Request<Incoming>,
    token: &str,
    id: &Uuid,
    client: IpAddr,
) -> Result<Response<Body>, ApiError> {
    let attempt = state.sign_ins.attempt(client).inspect_err(|throttled| {
        tracing::debug!(%client, retry_after_secs = throttled.retry_after_secs,
            "admin console: a sign-in was refused unread: too many wrong tokens");
    })?;
    let (lifetime, read_timeout) = {
        let live = state.live();
        (
            live.config.console_session_secs.get(),
            Duration::from_secs(live.config.request_read_timeout_secs.get()),
        )
    };
    // Behind a proxy that ends TLS the cookie is sent over HTTPS only.
    let secure = request
        .headers()
        .get("x-forwarded-proto")
        .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"));
    crate::http::check_declared_length(request.headers(), MAX_LOGIN_BODY)?;
    let bytes = read_body(request.into_body(), MAX_LOGIN_BODY, read_timeout).await?;
    let login: Login = parse_object(&bytes)?;
    // Compared as hashes: the time taken tells nothing of how much of the token was right.
    if crate::keys::hash_key(login.token.trim()) != crate::keys::hash_key(token) {
        tracing::warn!(%client, "admin console: a sign-in with a wrong admin token was refused");
        let refused = ApiError::WrongAdminToken;
        signed(
            state,
            "unknown",
            "sign_in.failed",
            "POST /ui/login",
            &refused.status(),
            client,
            id,
        )
        .await;
        return Err(refused);
    }
    attempt.succeeded();
    signed(
        state,
        "admin_token",
        "sign_in",
        "POST /ui/login",
        &StatusCode::OK,
        client,
        id,
    )
    .await;
    let now = now_ms();
    let session = Session::issue(token, now, lifetime);
    let mut response = json_response(StatusCode::OK, &session_json(&session, token), id);
    set_cookie(&mut response, &session.set_cookie(now, secure));
    tracing::info!("admin console: signed in");
    Ok(response)
}

/// `POST /ui/logout`: the session signed out (its cookie refused from then on, copies
/// included, by every replica) and the cookie cleared. With a session, only with its CSRF
/// token (another site cannot sign the operator out).
async fn logout(
    state: &AppState,
    request: &Request<Incoming>,
    token: &str,
    id: &Uuid,
    client: IpAddr,
) -> Response<Body> {
    let mut had_session = None;
    let signed_out = match Session::live(&state.store, request.headers(), token, now_ms()).await {
        Ok(Some(session)) if !session.csrf_ok(request.headers(), token) => {
            return error_response(&ApiError::CsrfRefused, id);
        }
        Ok(Some(session)) => {
            let signed_out = session.sign_out(&state.store).await.map_err(ApiError::from);
            had_session = Some(session);
            signed_out
        }
        // Expired, signed out already, or no session: only the browser's cookie to clear.
        Ok(None) => Ok(()),
        Err(error) => Err(ApiError::from(error)),
    };
    let mut response = match signed_out {
        Ok(()) => {
            tracing::info!("admin console: signed out");
            let user = had_session.as_ref().and_then(|s| s.user.as_ref());
            if let Some(session) = &had_session {
                let actor = match &session.user {
                    Some(user) => format!("user:{}", user.name),
                    None => "admin_token".to_owned(),
                };
                let ok = StatusCode::OK;
                signed(
                    state,
                    &actor,
                    "sign_out",
                    "POST /ui/logout",
                    &ok,
                    client,
                    id,
                )
                .await;
            }
            // A user signs out at the provider too, where it offers it: the page goes there.
            let oidc = state.live().config.oidc.clone();
            let end_session = match (user, &oidc) {
                (Some(_), Some(oidc)) => {
                    let back = oidc
                        .redirect_url
                        .replace(crate::config::oidc::CALLBACK_PATH, "/ui/");
                    state.sso.end_session_url(oidc, &back).await
                }
                _ => None,
            };
            match end_session {
                Some(url) => json_response(StatusCode::OK, &json!({ "endSession": url }), id),
                None => typed_response(StatusCode::NO_CONTENT, "text/plain", "", id),
            }
        }
        // The browser forgets the cookie all the same; the error says it was not revoked.
        Err(error) => {
            tracing::error!("admin console: a sign-out could not be recorded: {error}");
            error_response(&error, id)
        }
    };
    set_cookie(&mut response, &clear_cookie());
    response
}

/// A sign-in, failed sign-in or sign-out of the console, in the audit log.
async fn signed(
    state: &AppState,
    actor: &str,
    action: &'static str,
    endpoint: &str,
    status: &StatusCode,
    client: IpAddr,
    id: &Uuid,
) {
    let role = match actor {
        "unknown" => "none",
        "admin_token" => "owner",
        // A user's roles are in their sign-in's event.
        _ => "user",
    };
    let event = Event {
        actor: Actor {
            name: actor,
            role: role.into(),
            via: "console",
        },
        client,
        action,
        endpoint: endpoint.to_owned(),
        change: Change::default(),
        status: *status,
        request_id: *id,
    };
    super::admin::audit::append(state, event).await;
}

fn set_cookie(response: &mut Response<Body>, cookie: &str) {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
}
