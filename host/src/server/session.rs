//! The admin console's sessions: a cookie signed (HMAC-SHA256) with the config's
//! `admin_token`, so that every replica with the same token accepts it, and changing the token
//! signs everyone out. Signing out records the cookie's SHA-256 in the store until the cookie
//! would have expired ([`crate::store::Store::sign_out_session`]): the cookie, and any copy of
//! it, is refused from then on by every replica of the database. A session's CSRF token is the
//! same key's MAC of the cookie: a page of another site can neither read it nor send the header
//! it goes in without a CORS preflight, which the gateway never grants.

use hmac::{Hmac, Mac};
use hyper::HeaderMap;
use hyper::header::COOKIE;
use sha2::{Digest, Sha256};

use crate::encoding::{hex, unhex};
use crate::store::{Store, StoreError};

/// The cookie's name.
pub const COOKIE_NAME: &str = "gateway_session";
/// The header a signed-in page sends its CSRF token in, on every change.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The cookie's format, in its first field: another format is refused, not misread.
const VERSION: &str = "v1";

type HmacSha256 = Hmac<Sha256>;

/// A signed-in console session, as its cookie carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Unix ms; the session is refused from then on.
    pub expires_at_ms: i64,
    /// The cookie's value: `v1.EXPIRES_MS.NONCE.MAC`.
    value: String,
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
    /// A new session of `lifetime_secs` from `now_ms`.
    pub fn issue(admin_token: &str, now_ms: i64, lifetime_secs: u64) -> Session {
        let lifetime_ms = i64::try_from(lifetime_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        let expires_at_ms = now_ms.saturating_add(lifetime_ms);
        let mut nonce = [0u8; 16];
        // Without the OS's randomness two sessions of one millisecond share a CSRF token:
        // still each signed, so no reason to refuse the sign-in.
        let _ = getrandom::fill(&mut nonce);
        let signed = format!("{VERSION}.{expires_at_ms}.{}", hex(&nonce));
        let tag = hex(&mac(admin_token, "session", &signed).finalize().into_bytes());
        Session {
            expires_at_ms,
            value: format!("{signed}.{tag}"),
        }
    }

    /// The live session the request's `Cookie` headers carry, signed with `admin_token`.
    pub fn of_request(headers: &HeaderMap, admin_token: &str, now_ms: i64) -> Option<Session> {
        headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(name, _)| *name == COOKIE_NAME)
            .find_map(|(_, value)| Session::verify(value, admin_token, now_ms))
    }

    fn verify(value: &str, admin_token: &str, now_ms: i64) -> Option<Session> {
        let (signed, tag) = value.rsplit_once('.')?;
        let mut fields = signed.split('.');
        let (version, expires, _nonce) = (fields.next()?, fields.next()?, fields.next()?);
        if version != VERSION || fields.next().is_some() {
            return None;
        }
        mac(admin_token, "session", signed)
            .verify_slice(&unhex(tag)?)
            .ok()?;
        let expires_at_ms: i64 = expires.parse().ok()?;
        (expires_at_ms > now_ms).then(|| Session {
            expires_at_ms,
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
