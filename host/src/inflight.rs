//! The request bodies in flight, all requests together (`max_inflight_body_bytes`): a
//! large body costs a few times its size while its request runs (the parsed request, the
//! plugin's copy, the upstream body), so their sum bounds what a burst of large requests
//! can take. A body is counted by a [`BodyBytes`] guard that its request holds to its end,
//! however it ends (answer, error, stream end, client gone, shutdown): dropping the guard
//! gives the bytes back, so the count cannot leak.

use std::sync::Arc;

/// What each item of a request (a message, a text part, a tool call, a function, an input to
/// embed) costs the gateway while the request runs, beyond its bytes in the body: the item in
/// the host's types, in the WIT's layout twice (the host's copy the plugin call borrows, the
/// plugin's), and in the plugin's own types. Measured ~0.4-0.8 KB an item for one-character
/// items (tests/e2e/hardening/memory.rs, `[memory figure]`); a body of many tiny items costs many
/// times its size, so each is counted as this much more than its bytes, and the sum of what
/// requests in flight hold stays near what they take from the machine.
pub const ITEM_BYTES: usize = 1024;
/// The same for an image, audio clip or document part: its decoded bytes, its media type and
/// the summary its record keeps besides (measured ~1.0 KB a tiny image, up to ~2.6 KB).
pub const MEDIA_ITEM_BYTES: usize = 3 * 1024;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bytes of the request bodies in flight (shared by every serving thread).
#[derive(Debug, Default, Clone)]
pub struct InflightBodies {
    bytes: Arc<AtomicUsize>,
}

impl InflightBodies {
    /// Counts `bytes` more if the sum stays within `limit`; `None` (nothing counted) if not.
    pub fn reserve(&self, bytes: usize, limit: usize) -> Option<BodyBytes> {
        self.bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&sum| sum <= limit)
            })
            .ok()?;
        Some(BodyBytes {
            bytes,
            count: self.bytes.clone(),
        })
    }

    /// The bytes counted now.
    pub fn current(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }
}

/// A body's bytes in the count of [`InflightBodies`], given back when this is dropped.
#[derive(Debug)]
pub struct BodyBytes {
    bytes: usize,
    count: Arc<AtomicUsize>,
}

impl BodyBytes {
    /// The bytes counted.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Counts `more` bytes as well if the sum of all stays within `limit` (what the request
    /// turned out to hold beyond its body: see [`ITEM_BYTES`]); `false` (nothing more
    /// counted) if not.
    pub fn grow(&mut self, more: usize, limit: usize) -> bool {
        let grown = self
            .count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(more).filter(|&sum| sum <= limit)
            });
        if grown.is_ok() {
            self.bytes += more;
        }
        grown.is_ok()
    }

    /// Counts `bytes` instead, more or fewer, more only if the sum of all stays within `limit`
    /// (`false`, and the count as it was, if not).
    pub fn resize(&mut self, bytes: usize, limit: usize) -> bool {
        if bytes <= self.bytes {
            self.shrink_to(bytes);
            return true;
        }
        self.grow(bytes - self.bytes, limit)
    }

    /// Counts `bytes` instead (a body read shorter than it was declared; never more): what
    /// is given back is what is counted.
    pub fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.bytes {
            self.count.fetch_sub(self.bytes - bytes, Ordering::AcqRel);
            self.bytes = bytes;
        }
    }
}

impl Drop for BodyBytes {
    fn drop(&mut self) {
        self.count.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_counted_within_the_limit_and_given_back_on_drop() {
        let inflight = InflightBodies::default();
        let first = inflight.reserve(600, 1000).expect("fits");
        assert!(inflight.reserve(401, 1000).is_none(), "over the limit");
        assert_eq!(inflight.current(), 600, "a refusal counts nothing");
        let mut second = inflight.reserve(400, 1000).expect("exactly the limit");
        second.shrink_to(100);
        second.shrink_to(300);
        assert_eq!((second.bytes(), inflight.current()), (100, 700));
        drop(first);
        assert_eq!(inflight.current(), 100);
        drop(second);
        assert_eq!(inflight.current(), 0);
        let mut third = inflight.reserve(100, 1000).expect("fits");
        assert!(third.grow(700, 1000), "800 in all fits");
        assert!(!third.grow(201, 1000), "over the limit");
        assert_eq!((third.bytes(), inflight.current()), (800, 800));
        assert!(third.resize(300, 1000) && third.bytes() == 300);
        assert!(!third.resize(1001, 1000) && third.bytes() == 300);
        assert!(third.resize(1000, 1000) && inflight.current() == 1000);
        drop(third);
        assert_eq!(inflight.current(), 0, "what grew is given back too");
        assert!(inflight.reserve(usize::MAX, usize::MAX).is_some());
        assert!(
            inflight.reserve(1, usize::MAX).is_some(),
            "the first was given back"
        );
    }
}
