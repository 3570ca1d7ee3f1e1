//! The request bodies in flight, all requests together (`max_inflight_body_bytes`): a
//! large body costs a few times its size while its request runs (the parsed request, the
//! plugin's copy, the upstream body), so their sum bounds what a burst of large requests
//! can take. A body is counted by a [`BodyBytes`] guard that its request holds to its end,
//! however it ends (answer, error, stream end, client gone, shutdown): dropping the guard
//! gives the bytes back, so the count cannot leak.

use std::sync::Arc;
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
        assert!(inflight.reserve(usize::MAX, usize::MAX).is_some());
        assert!(
            inflight.reserve(1, usize::MAX).is_some(),
            "the first was given back"
        );
    }
}
