//! Project API keys: generation, hashing, reading them from requests, and
//! the project a request's key belongs to.
//!
//! Keys are 160 random bits; only their SHA-256 is stored, with a short
//! prefix so an operator can name a key to revoke without holding it.

use hyper::HeaderMap;
use hyper::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::store::{KeyRecord, Store};

/// Every key starts with this, so a leaked key is recognizable in secret scanners.
pub const KEY_PREFIX: &str = "gw_";
/// How many leading characters of a key are stored in clear.
pub const PREFIX_LEN: usize = 16;
const RANDOM_BYTES: usize = 20;
const KEY_LEN: usize = KEY_PREFIX.len() + RANDOM_BYTES * 2;

pub fn generate_key() -> String {
    let mut bytes = [0u8; RANDOM_BYTES];
    // The OS RNG failing means the machine cannot make secrets at all.
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    let mut key = String::with_capacity(KEY_LEN);
    key.push_str(KEY_PREFIX);
    for byte in bytes {
        key.push_str(&format!("{byte:02x}"));
    }
    key
}

pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

pub fn key_prefix(key: &str) -> &str {
    key.get(..PREFIX_LEN).unwrap_or(key)
}

/// True when `text` has the shape of a whole key rather than a prefix of one.
pub fn looks_like_whole_key(text: &str) -> bool {
    text.len() == KEY_LEN && text.starts_with(KEY_PREFIX)
}

/// The key in an `Authorization` header value: `KEY` or `Bearer KEY`.
/// Whether `headers` carry `token` in `Authorization` (bare or `Bearer`), compared by hash
/// so that the comparison takes the same time whatever matches.
pub fn carries_token(headers: &hyper::HeaderMap, token: &str) -> bool {
    headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(key_from_header)
        .is_some_and(|given| hash_key(given) == hash_key(token))
}

pub fn key_from_header(value: &str) -> Option<&str> {
    let value = value.trim();
    let key = match value.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        Some(_) => return None,
        // A scheme with no key after it.
        None if value.eq_ignore_ascii_case("bearer") => return None,
        None => value,
    };
    (!key.is_empty()).then_some(key)
}

/// The project key a request sends in its `Authorization` header.
pub fn bearer_key(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers.get(AUTHORIZATION).ok_or(ApiError::MissingKey)?;
    let value = value.to_str().map_err(|_| ApiError::InvalidKey)?;
    key_from_header(value).ok_or(ApiError::MissingKey)
}

/// The project key of a request to the OpenAI- and Anthropic-format
/// endpoints: `x-api-key` (Anthropic's SDKs) when present, else
/// `Authorization` (OpenAI's SDKs, and Anthropic's with `auth_token`).
pub fn api_key(headers: &HeaderMap) -> Result<&str, ApiError> {
    match headers.get(API_KEY_HEADER) {
        Some(value) => {
            let value = value.to_str().map_err(|_| ApiError::InvalidKey)?.trim();
            (!value.is_empty())
                .then_some(value)
                .ok_or(ApiError::MissingKey)
        }
        None => bearer_key(headers),
    }
}

const API_KEY_HEADER: &str = "x-api-key";

/// What the store holds of `key`; an unknown, revoked or expired key is refused.
pub async fn key_record(store: &Store, key: &str) -> Result<KeyRecord, ApiError> {
    let record = store
        .find_key(&hash_key(key))
        .await?
        .ok_or(ApiError::InvalidKey)?;
    if let Some(at) = record.scope.expired(crate::store::now_ms()) {
        return Err(ApiError::KeyExpired(crate::store::format_time_ms(at)));
    }
    Ok(record)
}

/// The project `key` belongs to; an unknown, revoked or expired key is refused.
pub async fn project_of(store: &Store, key: &str) -> Result<String, ApiError> {
    Ok(key_record(store, key).await?.project_id)
}

/// When a key given `--expires TEXT` (or the admin API's `expires`) stops
/// working, in Unix ms: a duration from `now_ms` (`30d`, `12h`, `1w`), a
/// date (`2026-12-31`: the key works through that UTC day), or an RFC 3339
/// time (`2026-12-31T18:00:00Z`); at most [`MAX_EXPIRY_DAYS`] ahead.
pub fn parse_expiry(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    let at = |time: std::time::SystemTime| {
        time.duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    };
    let expires = if let Ok(duration) = humantime::parse_duration(text) {
        now_ms.saturating_add(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
    } else if let Ok(day) = humantime::parse_rfc3339(&format!("{text}T00:00:00Z")) {
        at(day) + 24 * 3600 * 1000
    } else if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        at(time)
    } else {
        return Err(format!(
            "{text:?} is neither a duration (30d, 12h), a date (2026-12-31) nor a time \
             (2026-12-31T18:00:00Z)"
        ));
    };
    if expires <= now_ms {
        return Err(format!("{text:?} is not in the future"));
    }
    if expires > now_ms.saturating_add(MAX_EXPIRY_DAYS * 86_400_000) {
        return Err(format!(
            "{text:?} is more than 100 years ahead ({MAX_EXPIRY_DAYS}d), the most an expiry may \
             be; a key that should not expire is made without one"
        ));
    }
    Ok(expires)
}

/// How far ahead a key's expiry may be: 100 years. Anything later is a stand-in for "never"
/// (which is no expiry at all), and could not be written as an RFC 3339 time past year 9999.
pub const MAX_EXPIRY_DAYS: i64 = 36_500;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_forms() {
        let now = 1_700_000_000_000;
        assert_eq!(parse_expiry("30d", now), Ok(now + 30 * 86_400_000));
        assert_eq!(parse_expiry("12h", now), Ok(now + 12 * 3_600_000));
        // 2099-12-31 ends at 2100-01-01T00:00:00Z.
        assert_eq!(parse_expiry("2099-12-31", now), Ok(4_102_444_800_000));
        assert_eq!(
            parse_expiry("2099-12-31T18:00:00Z", now),
            Ok(4_102_444_800_000 - 6 * 3_600_000)
        );
        assert!(parse_expiry("2001-01-01", now).is_err());
        assert!(parse_expiry("soon", now).is_err());
        assert!(parse_expiry("0s", now).is_err());
        // At most 100 years ahead: the maximum is an expiry, a millisecond more is not.
        assert_eq!(
            parse_expiry("36500d", now),
            Ok(now + MAX_EXPIRY_DAYS * 86_400_000)
        );
        for far in ["36500d 1ms", "8000y", "9999-12-31", "9999-12-31T23:59:59Z"] {
            let refused = parse_expiry(far, now).unwrap_err();
            assert!(refused.contains("100 years"), "{far}: {refused}");
        }
    }

    #[test]
    fn generated_keys_are_distinct_and_whole() {
        let (a, b) = (generate_key(), generate_key());
        assert_ne!(a, b);
        assert!(looks_like_whole_key(&a));
        assert!(!looks_like_whole_key(key_prefix(&a)));
        assert_eq!(key_prefix(&a).len(), PREFIX_LEN);
    }

    #[test]
    fn header_forms() {
        assert_eq!(key_from_header("gw_abc"), Some("gw_abc"));
        assert_eq!(key_from_header("Bearer gw_abc"), Some("gw_abc"));
        assert_eq!(key_from_header("bearer  gw_abc "), Some("gw_abc"));
        assert_eq!(key_from_header("Basic xyz"), None);
        assert_eq!(key_from_header("Bearer "), None);
        assert_eq!(key_from_header(""), None);
    }
}
