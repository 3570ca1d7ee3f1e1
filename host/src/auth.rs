//! Reading project API keys from requests, and the project a request's key belongs to (what
//! keys are made of: [`crate::keys`]).

use hyper::HeaderMap;
use hyper::header::AUTHORIZATION;

use crate::clock::{format_time_ms, now_ms};
use crate::error::ApiError;
use crate::keys::hash_key;
use crate::store::{KeyRecord, Store};

/// Whether `headers` carry `token` in `Authorization` (bare or `Bearer`), compared by hash
/// so that the comparison takes the same time whatever matches.
pub fn carries_token(headers: &hyper::HeaderMap, token: &str) -> bool {
    headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(key_from_header)
        .is_some_and(|given| hash_key(given) == hash_key(token))
}

/// The key in an `Authorization` header value: `KEY` or `Bearer KEY`.
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

/// The header Google's clients send their API key in.
pub const GOOGLE_KEY_HEADER: &str = "x-goog-api-key";

/// The `key` parameter of a query, as Google's REST examples send it (empty if given empty).
pub fn query_key(query: Option<&str>) -> Option<&str> {
    (query.unwrap_or_default().split('&'))
        .find_map(|pair| pair.strip_prefix("key="))
        .map(str::trim)
}

/// The project key of a request to the Gemini-format endpoints: `x-goog-api-key` (Google's
/// SDKs), else the `key` query parameter (Google's REST examples; project keys need no
/// percent-decoding), else as [`api_key`] reads it. The query is never logged or recorded: only
/// the path is.
pub fn google_key<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Result<&'a str, ApiError> {
    if let Some(value) = headers.get(GOOGLE_KEY_HEADER) {
        let value = value.to_str().map_err(|_| ApiError::InvalidKey)?.trim();
        return (!value.is_empty())
            .then_some(value)
            .ok_or(ApiError::MissingKey);
    }
    match query_key(query) {
        Some("") => Err(ApiError::MissingKey),
        Some(key) => Ok(key),
        None => api_key(headers),
    }
}

/// What the store holds of `key`; an unknown, revoked or expired key is refused.
pub async fn key_record(store: &Store, key: &str) -> Result<KeyRecord, ApiError> {
    key_record_by_hash(store, &hash_key(key)).await
}

/// What the store holds of the key whose hash is `hash` (a batch's lines run as the key that
/// made it, kept by its hash); an unknown, revoked or expired key is refused.
pub async fn key_record_by_hash(store: &Store, hash: &[u8; 32]) -> Result<KeyRecord, ApiError> {
    let record = store.find_key(hash).await?.ok_or(ApiError::InvalidKey)?;
    if let Some(at) = record.scope.expired(now_ms()) {
        return Err(ApiError::KeyExpired(format_time_ms(at)));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_forms() {
        assert_eq!(key_from_header("gw_abc"), Some("gw_abc"));
        assert_eq!(key_from_header("Bearer gw_abc"), Some("gw_abc"));
        assert_eq!(key_from_header("bearer  gw_abc "), Some("gw_abc"));
        assert_eq!(key_from_header("Basic xyz"), None);
        assert_eq!(key_from_header("Bearer "), None);
        assert_eq!(key_from_header(""), None);
    }

    #[test]
    fn google_key_forms() {
        let mut headers = HeaderMap::new();
        assert!(matches!(
            google_key(&headers, None),
            Err(ApiError::MissingKey)
        ));
        assert_eq!(
            google_key(&headers, Some("alt=sse&key=gw_q")).ok(),
            Some("gw_q")
        );
        assert!(matches!(
            google_key(&headers, Some("key=")),
            Err(ApiError::MissingKey)
        ));
        // `monkey=` is not `key=`.
        assert!(google_key(&headers, Some("monkey=gw_q")).is_err());
        headers.insert(AUTHORIZATION, "Bearer gw_b".parse().unwrap());
        assert_eq!(google_key(&headers, Some("alt=sse")).ok(), Some("gw_b"));
        headers.insert(GOOGLE_KEY_HEADER, "gw_g".parse().unwrap());
        assert_eq!(google_key(&headers, Some("key=gw_q")).ok(), Some("gw_g"));
    }
}
