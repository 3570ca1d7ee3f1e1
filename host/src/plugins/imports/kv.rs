//! The `kv` import: the entries a plugin keeps between requests, in its route's space
//! ([`crate::plugins::kv`]). Values are secrets to the host: never logged. `secret` adds a value
//! the plugin minted to its route's redaction set ([`crate::redact::Minted`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::PluginState;
use crate::plugins::kv::Space;
use crate::plugins::wit::kv;

impl PluginState {
    /// The call's space, looked up on the first `kv` call (most calls make none).
    fn kv_space(&mut self) -> Arc<Mutex<Space>> {
        match &self.kv_space {
            Some(space) => space.clone(),
            None => {
                let space = self.kv.space(&self.route, &self.plugin);
                self.kv_space = Some(space.clone());
                space
            }
        }
    }
}

impl kv::Host for PluginState {
    async fn get(&mut self, key: String) -> Option<Vec<u8>> {
        let space = self.kv_space();
        let mut space = space.lock().unwrap_or_else(PoisonError::into_inner);
        space.get(&key, Instant::now())
    }

    async fn set(&mut self, key: String, value: Vec<u8>, ttl_ms: u64) {
        let bounds = self.sandbox.limits.kv;
        let ttl = (ttl_ms > 0).then(|| Duration::from_millis(ttl_ms));
        let space = self.kv_space();
        let mut space = space.lock().unwrap_or_else(PoisonError::into_inner);
        space.set(key, value, ttl, Instant::now(), bounds);
    }

    async fn delete(&mut self, key: String) {
        let space = self.kv_space();
        let mut space = space.lock().unwrap_or_else(PoisonError::into_inner);
        space.remove(&key);
    }

    async fn secret(&mut self, value: String, ttl_ms: u64) {
        let ttl = (ttl_ms > 0).then(|| Duration::from_millis(ttl_ms));
        let minted = self.kv.minted().of(&self.route);
        if let Err(refused) = minted.declare(&value, ttl, Instant::now()) {
            // Never the value: a secret refused is still a secret.
            tracing::warn!(
                plugin = %self.plugin,
                route = %self.route,
                invocation_id = %self.invocation_id,
                "a secret the plugin declared was not taken: {refused}"
            );
        }
    }
}
