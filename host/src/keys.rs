//! Project API keys and personal admin tokens: what they are made of. 160 random bits after a
//! `gw_` (a key) or `gwa_` (an admin token) prefix; only their SHA-256 is stored, with a short
//! prefix in clear so that an operator can name one to revoke without holding it. A leaf: the
//! store makes and finds keys and tokens with it, `auth` checks the ones requests carry.

use sha2::{Digest, Sha256};

/// Every key starts with this, so a leaked key is recognizable in secret scanners.
pub const KEY_PREFIX: &str = "gw_";
/// Every personal admin token starts with this: told from a project key at a glance, and by
/// the admin API before any lookup.
pub const ADMIN_TOKEN_PREFIX: &str = "gwa_";
/// How many leading characters of a key are stored in clear.
pub const PREFIX_LEN: usize = 16;
const RANDOM_BYTES: usize = 20;
const KEY_LEN: usize = KEY_PREFIX.len() + RANDOM_BYTES * 2;

pub fn generate_key() -> String {
    generate(KEY_PREFIX)
}

/// A new personal admin token (shown once; only its hash and [`key_prefix`] are stored).
pub fn generate_admin_token() -> String {
    generate(ADMIN_TOKEN_PREFIX)
}

fn generate(prefix: &str) -> String {
    let mut bytes = [0u8; RANDOM_BYTES];
    #[allow(
        clippy::expect_used,
        reason = "the OS RNG failing means the machine cannot make secrets at all"
    )]
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    let mut key = String::with_capacity(prefix.len() + RANDOM_BYTES * 2);
    key.push_str(prefix);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_distinct_and_whole() {
        let (a, b) = (generate_key(), generate_key());
        assert_ne!(a, b);
        assert!(looks_like_whole_key(&a));
        assert!(!looks_like_whole_key(key_prefix(&a)));
        assert_eq!(key_prefix(&a).len(), PREFIX_LEN);
        let token = generate_admin_token();
        assert!(token.starts_with(ADMIN_TOKEN_PREFIX) && !looks_like_whole_key(&token));
        assert_eq!(token.len(), ADMIN_TOKEN_PREFIX.len() + RANDOM_BYTES * 2);
    }
}
