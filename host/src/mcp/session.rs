//! Sessions of the handshake era (`Mcp-Session-Id`), kept nowhere: a session id says what the
//! session is (its protocol version, when it began) and is signed with a key made from the
//! caller's API key, which every request of the session carries. Any replica can check it
//! without a store or a shared secret, and an id is worth nothing without the key it was
//! made for.
//!
//! `DELETE /mcp` ends a session on the replica that receives it (a list of ended ids, kept
//! until they would have expired anyway); another replica accepts the id until it expires.
//! A session holds no state but its version, so an id used after its end grants nothing its
//! key does not.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How long a session lasts from its `initialize`; a client then gets 404 and, as the spec
/// has it, begins a new one.
pub const LIFETIME_MS: i64 = 24 * 3600 * 1000;
/// Ended sessions this process remembers at most; past it the oldest are forgotten first.
const MAX_ENDED: usize = 100_000;

static ENDED: LazyLock<Mutex<HashMap<String, i64>>> = LazyLock::new(Default::default);

/// A session id for a session of `version` begun at `now_ms`, for the caller of `api_key`.
pub fn mint(api_key: &str, version: &str, now_ms: i64) -> String {
    let mut nonce = [0u8; 12];
    // Without randomness the id is still unique enough per key (time and version); the
    // nonce only keeps two sessions begun in the same millisecond apart.
    let _ = getrandom::fill(&mut nonce);
    let payload = format!("{version}.{now_ms}.{}", URL_SAFE_NO_PAD.encode(nonce));
    let signature = URL_SAFE_NO_PAD.encode(sign(api_key, &payload));
    format!("{payload}.{signature}")
}

/// Why a session id is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not one the gateway made for this key (or tampered with).
    Unknown,
    Expired,
    Ended,
}

/// The protocol version of the session `id`, if it is a live session of the caller of
/// `api_key`.
pub fn check(api_key: &str, id: &str, now_ms: i64) -> Result<String, Refused> {
    let (payload, signature) = id.rsplit_once('.').ok_or(Refused::Unknown)?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| Refused::Unknown)?;
    let mut mac = mac(api_key);
    mac.update(payload.as_bytes());
    mac.verify_slice(&signature).map_err(|_| Refused::Unknown)?;
    let mut parts = payload.split('.');
    let (Some(version), Some(begun)) = (parts.next(), parts.next()) else {
        return Err(Refused::Unknown);
    };
    let begun: i64 = begun.parse().map_err(|_| Refused::Unknown)?;
    if now_ms >= begun.saturating_add(LIFETIME_MS) {
        return Err(Refused::Expired);
    }
    if ended().contains_key(id) {
        return Err(Refused::Ended);
    }
    Ok(version.to_owned())
}

/// Ends the session `id` (already [`check`]ed) on this process.
pub fn end(id: &str, now_ms: i64) {
    let mut ended = ended();
    if ended.len() >= MAX_ENDED {
        ended.retain(|_, expires| *expires > now_ms);
        if ended.len() >= MAX_ENDED {
            // Still full of live ids: forget the half that expire first.
            let mut expiries: Vec<i64> = ended.values().copied().collect();
            expiries.sort_unstable();
            let cut = expiries[expiries.len() / 2];
            ended.retain(|_, expires| *expires > cut);
        }
    }
    let begun = id
        .split('.')
        .nth(1)
        .and_then(|b| b.parse::<i64>().ok())
        .unwrap_or(now_ms);
    ended.insert(id.to_owned(), begun.saturating_add(LIFETIME_MS));
}

fn ended() -> std::sync::MutexGuard<'static, HashMap<String, i64>> {
    ENDED.lock().unwrap_or_else(PoisonError::into_inner)
}

fn mac(api_key: &str) -> Hmac<Sha256> {
    // Any key length is accepted (HMAC hashes a long one), so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(api_key.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    // What the MAC is for: the API key signs nothing else with this prefix.
    mac.update(b"gateway mcp session\0");
    mac
}

fn sign(api_key: &str, payload: &str) -> Vec<u8> {
    let mut mac = mac(api_key);
    mac.update(payload.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_its_keys_until_it_expires_or_ends() {
        let now = 1_700_000_000_000;
        let id = mint("gw_one", "2025-11-25", now);
        assert_eq!(check("gw_one", &id, now + 1).as_deref(), Ok("2025-11-25"));
        assert_eq!(check("gw_two", &id, now + 1), Err(Refused::Unknown));
        assert_eq!(
            check("gw_one", &id, now + LIFETIME_MS),
            Err(Refused::Expired)
        );
        let forged = id.replacen("2025-11-25", "2025-06-18", 1);
        assert_eq!(check("gw_one", &forged, now), Err(Refused::Unknown));
        assert_eq!(check("gw_one", "nonsense", now), Err(Refused::Unknown));
        end(&id, now);
        assert_eq!(check("gw_one", &id, now + 2), Err(Refused::Ended));
        let other = mint("gw_one", "2025-11-25", now);
        assert_ne!(other, id);
        assert!(check("gw_one", &other, now).is_ok());
    }
}
