//! The response cache: whole, successful answers kept by the request that got them (see
//! [`key`]), so that the same request again is answered without a plugin call.
//!
//! Entries live in this process ([`memory`], bounded by `cache_max_bytes`) or, with
//! `redis_url` set, in Redis for every replica ([`shared`]); while Redis does not answer,
//! this process's store takes over (one warning per outage, as the limits do). What is
//! cached, for how long and for whom is the routes' config, read by the flow.

mod key;
mod memory;
mod shared;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use key::{CacheKey, Question, Scope, key};

use crate::plugins::types;

/// An answer as the plugin gave it (before guards judged it: they judge every hit again).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Answer {
    Completion(types::Completion),
    Embeddings(types::Embeddings),
}

/// A cached answer, with what it cost when it was stored (`None`: its model's price was
/// unknown), which is what a hit saves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub answer: Answer,
    pub cost_usd: Option<f64>,
}

pub struct ResponseCache {
    memory: memory::Memory,
    shared: Option<shared::Shared>,
}

impl ResponseCache {
    /// A cache of at most `max_bytes` in this process, in Redis at `redis` (URL, key prefix)
    /// when given. A Redis URL that does not read leaves the cache in this process (logged).
    pub fn new(max_bytes: u64, redis: Option<(&str, &str)>) -> ResponseCache {
        let shared = redis.and_then(|(url, prefix)| {
            shared::Shared::new(url, prefix)
                .inspect_err(|e| {
                    tracing::error!("cache: {e}: caching in this process only");
                })
                .ok()
        });
        ResponseCache {
            memory: memory::Memory::new(max_bytes),
            shared,
        }
    }

    /// The entry under `key`, if one lives.
    pub async fn get(&self, key: &CacheKey) -> Option<Arc<Entry>> {
        if let Some(shared) = &self.shared
            && shared.link.available()
        {
            // Boxed here and below: a Redis call's future (connecting included) is large; boxed,
            // it takes a pointer's room in every request's future, which is copied as it
            // starts, whether the route caches or not.
            match Box::pin(shared.get(key)).await {
                Ok(found) => {
                    shared.link.answered();
                    return found.map(Arc::new);
                }
                Err(e) => shared.link.failed(&e),
            }
        }
        self.memory.get(key)
    }

    /// Keeps `entry` under `key` for `ttl`, replacing what was there.
    pub async fn put(&self, key: CacheKey, entry: Entry, ttl: Duration) {
        if let Some(shared) = &self.shared
            && shared.link.available()
        {
            match serde_json::to_vec(&entry) {
                Ok(json) => match Box::pin(shared.put(&key, &json, ttl)).await {
                    Ok(()) => {
                        shared.link.answered();
                        return;
                    }
                    Err(e) => shared.link.failed(&e),
                },
                // The answer's types all write as JSON; this is not expected.
                Err(e) => {
                    tracing::error!("cache: an answer does not write as JSON: {e}");
                    return;
                }
            }
        }
        if let Ok(size) = crate::encoding::json_len(&entry) {
            self.memory.put(key, Arc::new(entry), size, ttl);
        }
    }

    /// The bytes of the entries in this process (those in Redis are Redis's to count).
    pub fn bytes(&self) -> u64 {
        self.memory.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Entry {
        Entry {
            answer: Answer::Completion(types::Completion {
                model: "m".into(),
                choices: vec![types::Choice {
                    index: 0,
                    text: text.into(),
                    reasoning: Vec::new(),
                    finish_reason: Some(types::FinishReason::Stop),
                    function_call: None,
                    tool_calls: Vec::new(),
                    logprobs: None,
                }],
                usage: Some(types::Usage {
                    prompt_tokens: 3,
                    completion_tokens: 2,
                    total_tokens: 5,
                    ..types::Usage::default()
                }),
            }),
            cost_usd: Some(0.5),
        }
    }

    fn key_of(text: &str) -> CacheKey {
        let input = [text.to_owned()];
        key(
            Scope::Route,
            None,
            "r",
            "m",
            Question::Embed { input: &input },
            "{}",
        )
    }

    fn text(entry: &Entry) -> &str {
        match &entry.answer {
            Answer::Completion(c) => &c.choices[0].text,
            Answer::Embeddings(_) => panic!("not a completion"),
        }
    }

    #[tokio::test]
    async fn an_entry_lives_its_ttl_and_a_new_one_replaces_it() {
        let cache = ResponseCache::new(1 << 20, None);
        assert!(cache.get(&key_of("a")).await.is_none());
        cache
            .put(key_of("a"), entry("one"), Duration::from_millis(300))
            .await;
        assert_eq!(text(&cache.get(&key_of("a")).await.unwrap()), "one");
        assert!(cache.get(&key_of("b")).await.is_none());
        cache
            .put(key_of("a"), entry("two"), Duration::from_millis(300))
            .await;
        assert_eq!(text(&cache.get(&key_of("a")).await.unwrap()), "two");
        assert!(cache.bytes() > 0);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(cache.get(&key_of("a")).await.is_none());
    }

    #[tokio::test]
    async fn the_cache_keeps_to_its_bytes() {
        let cache = ResponseCache::new(4096, None);
        let long = "x".repeat(1000);
        for i in 0..20 {
            cache
                .put(
                    key_of(&i.to_string()),
                    entry(&long),
                    Duration::from_secs(60),
                )
                .await;
        }
        assert!(cache.bytes() <= 4096, "{} bytes", cache.bytes());
        // An answer larger than the whole cache is not kept.
        cache
            .put(
                key_of("big"),
                entry(&"y".repeat(8192)),
                Duration::from_secs(60),
            )
            .await;
        assert!(cache.bytes() <= 4096, "{} bytes", cache.bytes());
        assert!(cache.get(&key_of("big")).await.is_none());
    }

    #[test]
    fn an_entry_reads_back_from_its_json() {
        let json = serde_json::to_vec(&entry("hello")).unwrap();
        let back: Entry = serde_json::from_slice(&json).unwrap();
        assert_eq!(text(&back), "hello");
        assert_eq!(back.cost_usd, Some(0.5));
    }
}
