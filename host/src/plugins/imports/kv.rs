//! The `kv` import: the entries a plugin keeps between requests, in its route's space
//! ([`crate::plugins::kv`]). Values are secrets to the host: never logged.

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
}
