//! Admission: what every request passes before its body means anything.
//! Declared body size, key, room for the body (`max_inflight_body_bytes`), body,
//! JSON: in the contract's order. The key comes before the body is read, so that
//! nobody without one can make the gateway buffer (or record) a body.

use std::time::Duration;

use hyper::HeaderMap;
use hyper::body::Incoming;

use super::record::{BodyPolicy, Draft};
use super::{Head, Surface};
use crate::config::Config;
use crate::error::ApiError;
use crate::http::{check_declared_length, declared_length, discard_body, read_body};
use crate::inflight::{BodyBytes, ITEM_BYTES};
use crate::state::AppState;
use crate::store::KeyRecord;

/// A request whose caller is known and whose body parsed.
pub(super) struct Admitted<S> {
    /// The caller's key: its project, scope and limits.
    pub key: KeyRecord,
    pub body: S,
    /// The body's bytes in the count of those in flight (and, until the flow counts its
    /// items, an allowance for each JSON object in it): held until the request ends.
    pub inflight: BodyBytes,
    /// The body's length.
    pub body_bytes: usize,
}

/// Where a request's key and body come from.
pub(super) enum Source {
    /// An HTTP request: its key in its headers, its body still to be read.
    Http(Incoming),
    /// A batch's line ([`super::run_line`]): boxed, it adds a pointer to every request's
    /// future, not a body and a key hash.
    Given(Box<Given>),
}

/// A request made by the gateway for a caller, as that caller's key.
pub(super) struct Given {
    /// The hash of the key it runs as: looked up as a request's key is (revoked or expired,
    /// refused).
    pub key_hash: [u8; 32],
    /// A JSON body.
    pub body: bytes::Bytes,
}

pub(super) async fn admit<S: Surface>(
    state: &AppState,
    config: &Config,
    draft: &mut Draft,
    head: &Head,
    source: Source,
) -> Result<Admitted<S>, ApiError> {
    let body = match source {
        Source::Http(body) => body,
        Source::Given(given) => {
            return Box::pin(admit_given(state, config, draft, head, *given)).await;
        }
    };
    let headers = &head.headers;
    let read_timeout = Duration::from_secs(config.request_read_timeout_secs.get());
    let max_body_bytes = config.max_body_bytes.get();
    if let Err(error) = check_declared_length(headers, max_body_bytes) {
        // Up to twice the limit in all, as for a body found too large while reading it.
        discard_body(
            headers,
            body,
            max_body_bytes.saturating_mul(2),
            read_timeout,
        )
        .await;
        return Err(error);
    }
    let key = match authenticate::<S>(state, head).await {
        Ok(key) => key,
        Err(error) => {
            // Read what the client is still sending (without keeping it), so
            // that it gets its 401 rather than a connection reset.
            discard_body(headers, body, max_body_bytes, read_timeout).await;
            return Err(error);
        }
    };
    // From here on the record belongs to the key's project, so its owner can read it.
    draft.caller(&key);
    draft.keep_bodies(BodyPolicy::of(config));
    let limit = config.max_inflight_body_bytes.get();
    let (bytes, inflight) = read_counted(state, config, headers, body).await?;
    let content_type = headers.get(hyper::header::CONTENT_TYPE);
    draft.request(content_type.and_then(|t| t.to_str().ok()), &bytes);
    parsed(head, key, bytes, inflight, limit)
}

/// A body read and counted, parsed.
fn parsed<S: Surface>(
    head: &Head,
    key: KeyRecord,
    bytes: bytes::Bytes,
    mut inflight: BodyBytes,
    limit: usize,
) -> Result<Admitted<S>, ApiError> {
    // Each JSON object becomes an item or more once parsed, which costs many times its bytes
    // (see `ITEM_BYTES`): counted before the parse, so that a body of many tiny items is
    // refused before it costs that. A brace inside a string counts too; the flow counts the
    // items themselves once they are parsed.
    let objects = memchr::memchr_iter(b'{', &bytes).count();
    if !inflight.grow(objects.saturating_mul(ITEM_BYTES), limit) {
        return Err(ApiError::BodiesInFlight(limit));
    }
    let body_bytes = bytes.len();
    // The raw body goes as soon as it is parsed: the request holds only its parsed form.
    let body = S::parse(head, &bytes)?;
    drop(bytes);
    Ok(Admitted {
        key,
        body,
        inflight,
        body_bytes,
    })
}

/// Admits a request the gateway makes as a caller's key: the key looked up by its hash, the
/// body counted in flight like any other.
async fn admit_given<S: Surface>(
    state: &AppState,
    config: &Config,
    draft: &mut Draft,
    head: &Head,
    given: Given,
) -> Result<Admitted<S>, ApiError> {
    let key = crate::auth::key_record_by_hash(&state.store, &given.key_hash).await?;
    draft.caller(&key);
    draft.keep_bodies(BodyPolicy::of(config));
    let limit = config.max_inflight_body_bytes.get();
    let inflight = state
        .inflight
        .reserve(given.body.len(), limit)
        .ok_or(ApiError::BodiesInFlight(limit))?;
    draft.request(Some("application/json"), &given.body);
    parsed(head, key, given.body, inflight, limit)
}

/// Reads a request's body within `max_body_bytes`, counted in `max_inflight_body_bytes` from
/// before it is read when its length is declared (a refused one is never buffered), else from
/// when it is in; the count is held until the returned [`BodyBytes`] is dropped. Only once the
/// caller's key is checked: nobody without one makes the gateway buffer a body.
pub async fn read_counted(
    state: &AppState,
    config: &Config,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<(bytes::Bytes, BodyBytes), ApiError> {
    let read_timeout = Duration::from_secs(config.request_read_timeout_secs.get());
    let max_body_bytes = config.max_body_bytes.get();
    let limit = config.max_inflight_body_bytes.get();
    let mut inflight = match declared_length(headers) {
        Some(length) => match state.inflight.reserve(length, limit) {
            Some(reserved) => Some(reserved),
            None => {
                discard_body(headers, body, max_body_bytes, read_timeout).await;
                return Err(ApiError::BodiesInFlight(limit));
            }
        },
        None => None,
    };
    let bytes = read_body(body, max_body_bytes, read_timeout).await?;
    let inflight = match inflight.take() {
        Some(mut reserved) => {
            reserved.shrink_to(bytes.len());
            reserved
        }
        None => state
            .inflight
            .reserve(bytes.len(), limit)
            .ok_or(ApiError::BodiesInFlight(limit))?,
    };
    Ok((bytes, inflight))
}

/// The request's key, as the store holds it.
async fn authenticate<S: Surface>(state: &AppState, head: &Head) -> Result<KeyRecord, ApiError> {
    let key = S::project_key(head)?;
    crate::auth::key_record(&state.store, key).await
}
