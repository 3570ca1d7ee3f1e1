//! The admin console's sessions: a cookie signed (HMAC-SHA256) with the console's key (the
//! config's `admin_token`, or with single sign-on and no admin token, a key made from the OpenID
//! client's secret: [`super::console`]), so that every replica with the same config accepts
//! it, and changing it signs everyone out. A session signed in with the admin token is the
//! owner's (`v1`); one signed in through the OpenID provider (`v2`) carries its user's name and
//! the roles their groups held at sign-in. Signing out records the cookie's SHA-256 in the store until the cookie
//! would have expired ([`crate::store::Store::sign_out_session`]): the cookie, and any copy of
//! it, is refused from then on by every replica of the database. A session's CSRF token is the
//! same key's MAC of the cookie: a page of another site can neither read it nor send the header
//! it goes in without a CORS preflight, which the gateway never grants.

use hmac::{Hmac, Mac};
use hyper::HeaderMap;
use hyper::header::COOKIE;
use sha2::{Digest, Sha256};

use crate::access::Grant;
use crate::encoding::{base64url_decode, base64url_encode, hex, unhex};
use crate::store::{Store, StoreError};

/// The cookie's name.
pub const COOKIE_NAME: &str = "gateway_session";
/// The header a signed-in page sends its CSRF token in, on every change.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The cookie's format, in its first field: another format is refused, not misread. `v1`: the
/// admin token's; `v2`: a user's, with a fourth field.
const VERSION: &str = "v1";
const USER_VERSION: &str = "v2";

type HmacSha256 = Hmac<Sha256>;

/// A signed-in console session, as its cookie carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Unix ms; the session is refused from then on.
    pub expires_at_ms: i64,
    /// Who signed in through the OpenID provider; None for the admin token.
    pub user: Option<SessionUser>,
    /// The cookie's value: `v1.EXPIRES_MS.NONCE.MAC`, or `v2.EXPIRES_MS.NONCE.USER.MAC`.
    value: String,
}

/// A user signed in through the OpenID provider.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionUser {
    /// Their email (or the provider's subject when it gave none).
    #[serde(rename = "u")]
    pub name: String,
    /// The roles their groups held at sign-in, as [`Grant::parse`] reads them.
    #[serde(rename = "g")]
    pub grants: Vec<String>,
}

impl SessionUser {
    /// Their roles by their groups (one that no longer reads as a role is none).
    pub fn grants(&self) -> Vec<Grant> {
        self.grants
            .iter()
            .filter_map(|text| Grant::parse(text).ok())
            .collect()
    }
}

/// The values of the request's cookies named `name` (a browser may send more than one).
pub fn cookies<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(move |(cookie, _)| *cookie == name)
        .map(|(_, value)| value)
}

/// What the console's sessions (and a sign-in's pending cookie) are signed with: the config's
/// `admin_token`; with none, a key of the OpenID client's secret (`[oidc] client_secret_env`);
/// None when there is neither, or the console is off.
pub fn console_key(config: &crate::config::Config) -> Option<String> {
    if !config.console {
        return None;
    }
    if let Some(token) = config.admin_token.as_deref().filter(|t| !t.is_empty()) {
        return Some(token.to_owned());
    }
    let name = config.oidc.as_ref()?.client_secret_env.as_ref()?;
    let secret = std::env::var(name).ok().filter(|s| !s.is_empty())?;
    // Not the secret itself: a MAC under it of what the key is for.
    let derived = mac(&secret, "console-key", "gateway console sessions");
    Some(hex(&derived.finalize().into_bytes()))
}

/// The key's MAC of `message` for `purpose`, as bytes: what the console signs beside its
/// sessions (a sign-in's pending cookie) is signed the same way.
pub fn cookie_mac(key: &str, purpose: &str, message: &str) -> Vec<u8> {
    mac(key, purpose, message).finalize().into_bytes().to_vec()
}

/// The key's MAC of `message` for `purpose` (the cookie's, or its CSRF token's: one never
/// passes for the other).
fn mac(admin_token: &str, purpose: &str, message: &str) -> HmacSha256 {
    // Any key length is accepted (HMAC hashes a long one), so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(admin_token.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(purpose.as_bytes());
    mac.update(b"\0");
    mac.update(message.as_bytes());
    mac
}

impl Session {
    /// A new session of the admin token, of `lifetime_secs` from `now_ms`.
    pub fn issue(key: &str, now_ms: i64, lifetime_secs: u64) -> Session {
        Session::issue_as(key, now_ms, lifetime_secs, None)
    }

    /// A new session of `user` (None: the admin token's).
    pub fn issue_as(
        key: &str,
        now_ms: i64,
        lifetime_secs: u64,
        user: Option<SessionUser>,
    ) -> Session {
        let lifetime_ms = i64::try_from(lifetime_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        let expires_at_ms = now_ms.saturating_add(lifetime_ms);
        let mut nonce = [0u8; 16];
        // Without the OS's randomness two sessions of one millisecond share a CSRF token:
        // still each signed, so no reason to refuse the sign-in.
        let _ = getrandom::fill(&mut nonce);
        let signed = match &user {
            None => format!("{VERSION}.{expires_at_ms}.{}", hex(&nonce)),
            Some(user) => {
                let json = serde_json::to_vec(user).unwrap_or_default();
                format!(
                    "{USER_VERSION}.{expires_at_ms}.{}.{}",
                    hex(&nonce),
                    base64url_encode(&json)
                )
            }
        };
        let tag = hex(&mac(key, "session", &signed).finalize().into_bytes());
        Session {
            expires_at_ms,
            user,
            value: format!("{signed}.{tag}"),
        }
    }

    /// The live session the request's `Cookie` headers carry, signed with `admin_token`.
    pub fn of_request(headers: &HeaderMap, admin_token: &str, now_ms: i64) -> Option<Session> {
        cookies(headers, COOKIE_NAME).find_map(|value| Session::verify(value, admin_token, now_ms))
    }

    fn verify(value: &str, admin_token: &str, now_ms: i64) -> Option<Session> {
        let (signed, tag) = value.rsplit_once('.')?;
        let mut fields = signed.split('.');
        let (version, expires, _nonce) = (fields.next()?, fields.next()?, fields.next()?);
        let user_field = match version {
            VERSION => None,
            USER_VERSION => Some(fields.next()?),
            _ => return None,
        };
        if fields.next().is_some() {
            return None;
        }
        mac(admin_token, "session", signed)
            .verify_slice(&unhex(tag)?)
            .ok()?;
        let expires_at_ms: i64 = expires.parse().ok()?;
        let user = match user_field {
            None => None,
            Some(field) => Some(serde_json::from_slice(&base64url_decode(field).ok()?).ok()?),
        };
        (expires_at_ms > now_ms).then(|| Session {
            expires_at_ms,
            user,
            value: value.to_owned(),
        })
    }

    /// The live session the request carries: signed with `admin_token`, not expired, and not
    /// signed out (which the store is asked, from its cache mostly).
    pub async fn live(
        store: &Store,
        headers: &HeaderMap,
        admin_token: &str,
        now_ms: i64,
    ) -> Result<Option<Session>, StoreError> {
        let Some(session) = Session::of_request(headers, admin_token, now_ms) else {
            return Ok(None);
        };
        let signed_out = store.session_signed_out(&session.id()).await?;
        Ok((!signed_out).then_some(session))
    }

    /// What the store knows the session by: its cookie's SHA-256 (the cookie itself, which
    /// signs in, is never stored).
    pub fn id(&self) -> [u8; 32] {
        Sha256::digest(self.value.as_bytes()).into()
    }

    /// Signs the session out: its cookie, wherever it was copied, no longer signs in.
    pub async fn sign_out(&self, store: &Store) -> Result<(), StoreError> {
        store.sign_out_session(&self.id(), self.expires_at_ms).await
    }

    /// The session's CSRF token, which the page sends in [`CSRF_HEADER`].
    pub fn csrf_token(&self, admin_token: &str) -> String {
        hex(&mac(admin_token, "csrf", &self.value)
            .finalize()
            .into_bytes())
    }

    /// Whether the request carries this session's CSRF token (compared in constant time).
    pub fn csrf_ok(&self, headers: &HeaderMap, admin_token: &str) -> bool {
        let Some(given) = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(unhex)
        else {
            return false;
        };
        mac(admin_token, "csrf", &self.value)
            .verify_slice(&given)
            .is_ok()
    }

    /// The `Set-Cookie` value that signs the browser in: unreadable by scripts, never sent
    /// by another site's requests, gone when the session ends; `secure` when the page was
    /// reached over HTTPS.
    pub fn set_cookie(&self, now_ms: i64, secure: bool) -> String {
        let max_age = (self.expires_at_ms - now_ms).max(0) / 1000;
        format!(
            "{COOKIE_NAME}={}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{}",
            self.value,
            if secure { "; Secure" } else { "" }
        )
    }
}

/// The `Set-Cookie` value that signs the browser out.
pub fn clear_cookie() -> String {
    format!("{COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict")
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    const TOKEN: &str = "admin-token-0123456789-0123456789";

    fn cookie_headers(cookie: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, HeaderValue::from_str(cookie).unwrap());
        headers
    }

    fn cookie_of(session: &Session) -> String {
        let set = session.set_cookie(0, false);
        set.split(';').next().unwrap().to_owned()
    }

    #[test]
    fn a_session_reads_back_until_it_expires() {
        let session = Session::issue(TOKEN, 1_000, 60);
        assert_eq!(session.expires_at_ms, 61_000);
        let headers = cookie_headers(&format!("other=1; {}; last=2", cookie_of(&session)));
        assert_eq!(
            Session::of_request(&headers, TOKEN, 60_999),
            Some(session.clone())
        );
        assert_eq!(Session::of_request(&headers, TOKEN, 61_000), None);
        // Another token (a changed config, another gateway) signs everyone out.
        assert_eq!(Session::of_request(&headers, "another-token", 2_000), None);
    }

    #[test]
    fn a_users_session_carries_their_name_and_roles() {
        let user = SessionUser {
            name: "alice@example.com".into(),
            grants: vec!["viewer".into(), "project_admin:p1".into()],
        };
        let session = Session::issue_as(TOKEN, 0, 60, Some(user.clone()));
        let headers = cookie_headers(&cookie_of(&session));
        let read = Session::of_request(&headers, TOKEN, 1).unwrap();
        assert_eq!(read.user.as_ref(), Some(&user));
        assert_eq!(
            user.grants(),
            [Grant::Viewer, Grant::ProjectAdmin("p1".into())]
        );
        // Another user's name or roles in a signed cookie: refused.
        let cookie = cookie_of(&session);
        let mut parts: Vec<&str> = cookie.split('.').collect();
        let forged = base64url_encode(br#"{"u":"mallory@example.com","g":["owner"]}"#);
        parts[3] = &forged;
        let headers = cookie_headers(&parts.join("."));
        assert_eq!(Session::of_request(&headers, TOKEN, 1), None);
    }

    #[test]
    fn a_changed_cookie_is_refused() {
        let session = Session::issue(TOKEN, 0, 60);
        let cookie = cookie_of(&session);
        let value = cookie.split_once('=').unwrap().1;
        let (signed, tag) = value.rsplit_once('.').unwrap();
        // A later expiry with the old MAC; another version; a cut MAC; a MAC of garbage.
        let later = signed.replacen("60000", "99999999", 1);
        for forged in [
            format!("{later}.{tag}"),
            format!("v2{}.{tag}", &signed[2..]),
            format!("{signed}.{}", &tag[..10]),
            format!("{signed}.zz"),
            format!("{signed}.x.{tag}"),
            String::new(),
        ] {
            let headers = cookie_headers(&format!("{COOKIE_NAME}={forged}"));
            assert_eq!(Session::of_request(&headers, TOKEN, 1), None, "{forged}");
        }
    }

    #[test]
    fn the_csrf_token_is_the_sessions_own() {
        let session = Session::issue(TOKEN, 0, 60);
        let other = Session::issue(TOKEN, 0, 60);
        let mut headers = HeaderMap::new();
        assert!(!session.csrf_ok(&headers, TOKEN), "none sent");
        headers.insert(
            CSRF_HEADER,
            HeaderValue::from_str(&other.csrf_token(TOKEN)).unwrap(),
        );
        assert!(!session.csrf_ok(&headers, TOKEN), "another session's");
        headers.insert(
            CSRF_HEADER,
            HeaderValue::from_str(&session.csrf_token(TOKEN)).unwrap(),
        );
        assert!(session.csrf_ok(&headers, TOKEN));
        assert!(!session.csrf_ok(&headers, "another-token"));
    }

    /// Signed out, a session's cookie (and any copy of it) is refused by every handle on the
    /// database; another session is not.
    #[tokio::test]
    async fn a_signed_out_session_is_no_longer_live() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let (gateway, replica) = (
            Store::open_sqlite(&path).unwrap(),
            Store::open_sqlite(&path).unwrap(),
        );
        let session = Session::issue(TOKEN, 0, 60);
        let other = Session::issue(TOKEN, 0, 60);
        let headers = cookie_headers(&cookie_of(&session));
        let others = cookie_headers(&cookie_of(&other));
        for store in [&gateway, &replica] {
            let live = Session::live(store, &headers, TOKEN, 1).await.unwrap();
            assert_eq!(live, Some(session.clone()));
        }
        session.sign_out(&gateway).await.unwrap();
        for store in [&gateway, &replica] {
            assert_eq!(
                Session::live(store, &headers, TOKEN, 1).await.unwrap(),
                None
            );
            assert!(
                Session::live(store, &others, TOKEN, 1)
                    .await
                    .unwrap()
                    .is_some()
            );
        }
        assert_ne!(session.id(), other.id());
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_expires() {
        let session = Session::issue(TOKEN, 0, 3600);
        let set = session.set_cookie(1_000, true);
        for part in [
            "Path=/",
            "Max-Age=3599",
            "HttpOnly",
            "SameSite=Strict",
            "Secure",
        ] {
            assert!(set.contains(part), "{set}");
        }
        assert!(!session.set_cookie(0, false).contains("Secure"));
        assert!(clear_cookie().contains("Max-Age=0"));
    }
}
