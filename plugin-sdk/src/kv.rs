//! State kept between requests: each request runs in a fresh plugin instance,
//! so what one call learns (an access token it minted) is lost for the next
//! unless it is kept here.
//!
//! The gateway keeps the entries in its memory, per route and plugin (no other
//! route or plugin sees them), bounded per route (the oldest go first), with a
//! time to live. Each gateway process has its own: with several replicas each
//! mints its own token. Values are treated as secrets (never logged); keys are
//! not, so never put a secret in a key.
//!
//! ```
//! use std::time::Duration;
//! use gateway_plugin_sdk::kv;
//!
//! let mut minted = 0;
//! for _ in 0..3 {
//!     let token = kv::get_or_refresh("token", Duration::from_secs(600), || {
//!         minted += 1;
//!         Ok::<_, String>(b"ya29.token".to_vec())
//!     })
//!     .unwrap();
//!     assert_eq!(token, b"ya29.token");
//! }
//! assert_eq!(minted, 1);
//! ```
//!
//! Off wasm (in native unit tests) the same functions work on an in-memory map
//! of the current thread, with the same expiry, so a plugin's tests can check
//! its caching; [`clear`] empties it.

use std::time::Duration;

/// The value under `key`, unless it expired, was deleted or was evicted.
pub fn get(key: &str) -> Option<Vec<u8>> {
    imp::get(key)
}

/// Keeps `value` under `key` for `ttl` (zero: until the gateway's bounds
/// evict it), replacing what was there.
pub fn set(key: &str, value: &[u8], ttl: Duration) {
    imp::set(key, value, millis(ttl));
}

/// Removes the entry under `key`, if any (a token the upstream refused).
pub fn delete(key: &str) {
    imp::delete(key);
}

/// Declares `value` a secret of the route for `ttl` (zero: until the route's plugins have
/// declared 64 newer ones): from now on, this request included, the gateway replaces it with
/// `[redacted]` in everything the route's requests answer, record and log, as it does the
/// route's configured keys. Call it for every credential the plugin mints and sends upstream;
/// [`get_or_refresh`] and [`get_or_refresh_with`] call it for what they mint. A value shorter
/// than 8 bytes or longer than 16 KiB is not taken (the gateway logs a warning).
pub fn secret(value: &str, ttl: Duration) {
    imp::secret(value, millis(ttl));
}

/// How long after its `ttl` a value [`get_or_refresh_with`] minted is still redacted: a
/// request that read it just before it expired may still be answering with it.
pub const SECRET_GRACE: Duration = Duration::from_secs(15 * 60);

/// The value under `key`; when there is none, `mint` makes it and it is kept
/// for `ttl` (zero: not kept). An error of `mint` is returned and nothing is kept.
/// What `mint` makes is a credential: it is declared [`secret`] (when it is text) for its
/// `ttl` and [`SECRET_GRACE`] more.
pub fn get_or_refresh<E>(
    key: &str,
    ttl: Duration,
    mint: impl FnOnce() -> Result<Vec<u8>, E>,
) -> Result<Vec<u8>, E> {
    get_or_refresh_with(key, || mint().map(|value| (value, ttl)))
}

/// Like [`get_or_refresh`], for values whose lifetime is known only once they
/// are made (an OAuth token's `expires_in`): `mint` returns the value and its
/// time to live. A zero `ttl` from `mint` keeps nothing (the value is used once).
pub fn get_or_refresh_with<E>(
    key: &str,
    mint: impl FnOnce() -> Result<(Vec<u8>, Duration), E>,
) -> Result<Vec<u8>, E> {
    if let Some(value) = get(key) {
        return Ok(value);
    }
    let (value, ttl) = mint()?;
    if let Ok(text) = std::str::from_utf8(&value) {
        let lifetime = if ttl.is_zero() {
            ttl
        } else {
            ttl.saturating_add(SECRET_GRACE)
        };
        secret(text, lifetime);
    }
    if !ttl.is_zero() {
        set(key, &value, ttl);
    }
    Ok(value)
}

/// Empties the current thread's store and its declared secrets (native builds only: unit
/// tests).
#[cfg(not(target_arch = "wasm32"))]
pub fn clear() {
    imp::clear();
}

/// The secrets declared on the current thread, each with its time to live in milliseconds,
/// in order (native builds only: a plugin's unit tests check that it declares what it mints).
#[cfg(not(target_arch = "wasm32"))]
pub fn declared_secrets() -> Vec<(String, u64)> {
    imp::secrets()
}

/// Milliseconds, at least 1 for a non-zero duration (zero means "no expiry").
fn millis(ttl: Duration) -> u64 {
    if ttl.is_zero() {
        return 0;
    }
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use crate::__private::gateway::provider::kv as host;

    pub fn get(key: &str) -> Option<Vec<u8>> {
        host::get(key)
    }

    pub fn set(key: &str, value: &[u8], ttl_ms: u64) {
        host::set(key, value, ttl_ms);
    }

    pub fn delete(key: &str) {
        host::delete(key);
    }

    pub fn secret(value: &str, ttl_ms: u64) {
        host::secret(value, ttl_ms);
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    /// Each key's value and when it expires (`None`: never).
    type Entries = HashMap<String, (Vec<u8>, Option<Instant>)>;

    thread_local! {
        static ENTRIES: RefCell<Entries> = RefCell::new(HashMap::new());
        static SECRETS: RefCell<Vec<(String, u64)>> = const { RefCell::new(Vec::new()) };
    }

    pub fn secret(value: &str, ttl_ms: u64) {
        SECRETS.with_borrow_mut(|secrets| secrets.push((value.to_owned(), ttl_ms)));
    }

    pub fn secrets() -> Vec<(String, u64)> {
        SECRETS.with_borrow(Clone::clone)
    }

    pub fn get(key: &str) -> Option<Vec<u8>> {
        ENTRIES.with_borrow_mut(|entries| {
            let live = entries
                .get(key)
                .is_some_and(|(_, expires)| expires.is_none_or(|at| Instant::now() < at));
            if !live {
                entries.remove(key);
                return None;
            }
            entries.get(key).map(|(value, _)| value.clone())
        })
    }

    pub fn set(key: &str, value: &[u8], ttl_ms: u64) {
        let expires = (ttl_ms > 0).then(|| Instant::now() + Duration::from_millis(ttl_ms));
        ENTRIES.with_borrow_mut(|entries| {
            entries.insert(key.to_owned(), (value.to_vec(), expires));
        });
    }

    pub fn delete(key: &str) {
        ENTRIES.with_borrow_mut(|entries| {
            entries.remove(key);
        });
    }

    pub fn clear() {
        ENTRIES.with_borrow_mut(HashMap::clear);
        SECRETS.with_borrow_mut(Vec::clear);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_until_its_ttl() {
        clear();
        set("k", b"v", Duration::from_millis(30));
        assert_eq!(get("k").as_deref(), Some(&b"v"[..]));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(get("k"), None);
    }

    #[test]
    fn a_failed_mint_keeps_nothing_and_a_later_one_is_kept() {
        clear();
        let failed: Result<Vec<u8>, &str> =
            get_or_refresh("t", Duration::from_secs(60), || Err("token endpoint down"));
        assert_eq!(failed, Err("token endpoint down"));
        assert_eq!(get("t"), None);
        let minted = get_or_refresh_with("t", || {
            Ok::<_, ()>((b"a".to_vec(), Duration::from_secs(60)))
        });
        assert_eq!(minted.as_deref(), Ok(&b"a"[..]));
        let again = get_or_refresh_with("t", || {
            Ok::<_, ()>((b"b".to_vec(), Duration::from_secs(60)))
        });
        assert_eq!(
            again.as_deref(),
            Ok(&b"a"[..]),
            "the kept value, not a new one"
        );
        delete("t");
        assert_eq!(get("t"), None);
    }

    #[test]
    fn a_zero_ttl_from_mint_is_used_once() {
        clear();
        let once = get_or_refresh_with("z", || Ok::<_, ()>((b"z".to_vec(), Duration::ZERO)));
        assert_eq!(once.as_deref(), Ok(&b"z"[..]));
        assert_eq!(get("z"), None);
        // Still a secret, until newer ones displace it.
        assert_eq!(declared_secrets(), [("z".to_owned(), 0)]);
    }

    #[test]
    fn what_is_minted_is_declared_secret_once_for_its_lifetime_and_a_grace() {
        clear();
        for _ in 0..3 {
            let token = get_or_refresh_with("t", || {
                Ok::<_, ()>((b"ya29.minted".to_vec(), Duration::from_secs(3000)))
            });
            assert_eq!(token.as_deref(), Ok(&b"ya29.minted"[..]));
        }
        let lifetime = Duration::from_secs(3000) + SECRET_GRACE;
        assert_eq!(
            declared_secrets(),
            [("ya29.minted".to_owned(), lifetime.as_millis() as u64)]
        );
        // What is no text is no secret the gateway can look for.
        let _ = get_or_refresh_with("b", || Ok::<_, ()>((vec![0xff, 0xfe], Duration::ZERO)));
        assert_eq!(declared_secrets().len(), 1);
    }

    #[test]
    fn durations_become_whole_milliseconds() {
        assert_eq!(millis(Duration::ZERO), 0);
        assert_eq!(millis(Duration::from_micros(10)), 1);
        assert_eq!(millis(Duration::from_secs(2)), 2000);
    }
}
