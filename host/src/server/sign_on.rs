//! The console's single sign-on routes: `GET /ui/oidc/login` sends the browser to the
//! provider, with what the callback needs to check (`state`, the nonce, the PKCE verifier) in a
//! short-lived signed cookie of its own; `GET /ui/oidc/callback` checks `state`, has the code
//! exchanged and the ID token verified ([`crate::sso`]), gives the user their roles (their
//! groups' by `[oidc.roles]`, and those an owner gave them) and a session, or refuses them.
//! Either way the browser goes back to the console's page, which says why when it was refused;
//! every sign-in and refusal is an audit event.

use std::net::IpAddr;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, LOCATION, SET_COOKIE};
use hyper::{Request, Response, StatusCode};
use uuid::Uuid;

use super::admin::audit::{self, Actor, Change, Event};
use super::session::{Session, SessionUser, cookie_mac, cookies};
use crate::clock::now_ms;
use crate::config::oidc::OidcConfig;
use crate::encoding::{base64url_decode, base64url_encode, hex, unhex};
use crate::http::{Body, typed_response};
use crate::sso::Pending;
use crate::state::AppState;

/// The cookie holding a sign-in's pending check until the provider sends the browser back.
const PENDING_COOKIE: &str = "gateway_oidc";
/// How long a sign-in at the provider may take.
const PENDING_SECS: u64 = 600;

/// `GET /ui/oidc/login`.
pub(super) async fn begin(
    state: &AppState,
    oidc: &OidcConfig,
    key: &str,
    id: &Uuid,
    secure: bool,
) -> Response<Body> {
    let (url, pending) = match state.sso.begin(oidc).await {
        Ok(begun) => begun,
        Err(error) => {
            tracing::error!("console: single sign-on could not begin: {error}");
            return back_to_console(&format!("single sign-on is unavailable: {error}"), id);
        }
    };
    let json = serde_json::to_vec(&pending).unwrap_or_default();
    let payload = base64url_encode(&json);
    let tag = hex(&cookie_mac(key, "oidc-pending", &payload));
    let cookie = format!(
        "{PENDING_COOKIE}={payload}.{tag}; Path=/ui/oidc; Max-Age={PENDING_SECS}; HttpOnly; \
         SameSite=Lax{}",
        if secure { "; Secure" } else { "" }
    );
    let mut response = typed_response(StatusCode::FOUND, "text/plain", "", id);
    if let Ok(location) = HeaderValue::from_str(&url) {
        response.headers_mut().insert(LOCATION, location);
    }
    append_cookie(&mut response, &cookie);
    response
}

/// `GET /ui/oidc/callback`.
pub(super) async fn finish(
    state: &AppState,
    request: &Request<Incoming>,
    oidc: &OidcConfig,
    key: &str,
    id: &Uuid,
    client: IpAddr,
) -> Response<Body> {
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let refuse = |actor: String, why: String| async move {
        tracing::warn!(%client, %actor, "console: a single sign-on was refused: {why}");
        signed(
            state,
            &actor,
            "none",
            "sign_in.failed",
            StatusCode::UNAUTHORIZED,
            client,
            id,
        )
        .await;
        let mut response = back_to_console(&why, id);
        append_cookie(&mut response, &clear_pending());
        response
    };
    let Some(pending) = pending_of(request, key) else {
        let why = "the sign-in began in another browser or took too long: sign in again";
        return refuse("unknown".into(), why.into()).await;
    };
    if let Some(error) = param("error") {
        let description = param("error_description").unwrap_or_default();
        return refuse(
            "unknown".into(),
            format!("the provider said {error}: {description}"),
        )
        .await;
    }
    let state_ok = param("state").is_some_and(|given| {
        // Compared as MACs: the time taken tells nothing of how much of it was right.
        cookie_mac(key, "state", given) == cookie_mac(key, "state", &pending.state)
    });
    if !state_ok {
        return refuse(
            "unknown".into(),
            "the sign-in's state does not match".into(),
        )
        .await;
    }
    let Some(code) = param("code") else {
        return refuse("unknown".into(), "the provider sent no code".into()).await;
    };
    let signed_in = match state.sso.finish(oidc, &pending, code).await {
        Ok(signed_in) => signed_in,
        Err(error) => return refuse("unknown".into(), error.to_string()).await,
    };
    let name = signed_in.email.clone().unwrap_or(signed_in.subject.clone());
    let by_groups = oidc.grants(&signed_in.groups);
    let given = match state.store.user_grants(Some(&name)).await {
        Ok(given) => given,
        Err(error) => return refuse(format!("user:{name}"), error.to_string()).await,
    };
    if by_groups.is_empty() && given.is_empty() {
        let why = format!(
            "{name} holds no role in this gateway: ask an owner (their groups map to none, \
             and none was given to them)"
        );
        return refuse(format!("user:{name}"), why).await;
    }
    let lifetime = state.live().config.console_session_secs.get();
    let user = SessionUser {
        name: name.clone(),
        grants: by_groups.iter().map(ToString::to_string).collect(),
    };
    let roles = crate::access::Grants::new(
        by_groups
            .into_iter()
            .chain(given.into_iter().map(|g| g.grant))
            .collect(),
    );
    let now = now_ms();
    let session = Session::issue_as(key, now, lifetime, Some(user));
    let secure = oidc.redirect_url.starts_with("https://");
    tracing::info!(user = %name, roles = %roles.summary(), "console: signed in with single sign-on");
    let actor = format!("user:{name}");
    signed(
        state,
        &actor,
        &roles.summary(),
        "sign_in",
        StatusCode::OK,
        client,
        id,
    )
    .await;
    let mut response = typed_response(StatusCode::SEE_OTHER, "text/plain", "", id);
    response
        .headers_mut()
        .insert(LOCATION, HeaderValue::from_static("/ui/"));
    append_cookie(&mut response, &session.set_cookie(now, secure));
    append_cookie(&mut response, &clear_pending());
    response
}

/// The pending check the request's cookie carries, if it was signed with `key` (and so made
/// by this gateway for this browser).
fn pending_of(request: &Request<Incoming>, key: &str) -> Option<Pending> {
    cookies(request.headers(), PENDING_COOKIE).find_map(|value| {
        let (payload, tag) = value.rsplit_once('.')?;
        let expected = cookie_mac(key, "oidc-pending", payload);
        // Compared as MACs of MACs: constant time whatever matches.
        let given = unhex(tag)?;
        (cookie_mac(key, "compare", &hex(&given)) == cookie_mac(key, "compare", &hex(&expected)))
            .then_some(())?;
        serde_json::from_slice(&base64url_decode(payload).ok()?).ok()
    })
}

fn clear_pending() -> String {
    format!("{PENDING_COOKIE}=; Path=/ui/oidc; Max-Age=0; HttpOnly; SameSite=Lax")
}

fn append_cookie(response: &mut Response<Body>, cookie: &str) {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(SET_COOKIE, value);
    }
}

/// Back to the console's page, which shows `why` on its sign-in form.
fn back_to_console(why: &str, id: &Uuid) -> Response<Body> {
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("signin", why)
        .finish();
    let mut response = typed_response(StatusCode::SEE_OTHER, "text/plain", "", id);
    if let Ok(location) = HeaderValue::from_str(&format!("/ui/?{query}")) {
        response.headers_mut().insert(LOCATION, location);
    }
    response
}

/// A single sign-on, or its refusal, in the audit log.
async fn signed(
    state: &AppState,
    actor: &str,
    role: &str,
    action: &'static str,
    status: StatusCode,
    client: IpAddr,
    id: &Uuid,
) {
    let event = Event {
        actor: Actor {
            name: actor,
            role: role.to_owned(),
            via: "console",
        },
        client,
        action,
        endpoint: "GET /ui/oidc/callback".into(),
        change: Change::default(),
        status,
        request_id: *id,
    };
    audit::append(state, event).await;
}
