//! The cache in Redis, shared by every replica with the same `redis_url` and
//! `redis_key_prefix`: one `GET` per lookup, one `SET ... PX` per answer stored, the entry as
//! JSON under `PREFIX` + `cache:` + the key in hex, expiring with its time to live.

use std::time::Duration;

use redis::RedisResult;

use super::{CacheKey, Entry};
use crate::redis_link::{CALL_TIMEOUT, RedisLink};

pub(super) struct Shared {
    pub link: RedisLink,
    prefix: String,
}

impl Shared {
    pub fn new(url: &str, prefix: &str) -> RedisResult<Shared> {
        Ok(Shared {
            link: RedisLink::new(url, "cache", "caching in this process")?,
            prefix: format!("{prefix}cache:"),
        })
    }

    fn name(&self, key: &CacheKey) -> String {
        format!("{}{}", self.prefix, key.hex())
    }

    /// The entry under `key`; an entry that does not read (written by another version)
    /// is none.
    pub async fn get(&self, key: &CacheKey) -> RedisResult<Option<Entry>> {
        let name = self.name(key);
        let call = async {
            let mut conn = self.link.connection().await?;
            redis::cmd("GET").arg(&name).query_async(&mut conn).await
        };
        let found: Option<Vec<u8>> =
            RedisLink::timed(tokio::time::timeout(CALL_TIMEOUT, call).await)?;
        Ok(found.and_then(|json| serde_json::from_slice(&json).ok()))
    }

    pub async fn put(&self, key: &CacheKey, json: &[u8], ttl: Duration) -> RedisResult<()> {
        let name = self.name(key);
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let call = async {
            let mut conn = self.link.connection().await?;
            redis::cmd("SET")
                .arg(&name)
                .arg(json)
                .arg("PX")
                .arg(ttl_ms)
                .query_async::<()>(&mut conn)
                .await
        };
        RedisLink::timed(tokio::time::timeout(CALL_TIMEOUT, call).await)
    }
}
