//! Memory given back once a burst is over.
//!
//! Two things keep a burst's memory after it ends: the instance pool (every
//! slot an instance ran in keeps the pages it wrote, see
//! [`PluginRuntime::recycle`]) and the allocator, which keeps freed pages
//! in its heaps. Once no plugin instance has run for a moment, both are handed
//! back: a gateway's idle memory should not be the peak of its busiest minute.
//! A burst of connections that never reach a plugin (slow or refused clients,
//! whose bodies were buffered) counts as a burst too.

use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::PluginRuntime;

const CHECK_EVERY: Duration = Duration::from_millis(500);
/// Checks in a row without a running instance before memory is released.
const QUIET_CHECKS: u32 = 2;
/// Fewer warm slots than this are not worth a new pool (each keeps ~100 KiB).
const RECYCLE_ABOVE_WARM_SLOTS: u32 = 64;

/// Client connections closed so far (see [`connection_closed`]).
static CONNECTIONS_CLOSED: AtomicU64 = AtomicU64::new(0);

/// Tells the trimmer a client connection ended: its buffers are free heap now.
pub fn connection_closed() {
    CONNECTIONS_CLOSED.fetch_add(1, Ordering::Relaxed);
}

/// Releases memory after every burst, for as long as `runtime` lives.
pub fn spawn(runtime: Weak<PluginRuntime>) {
    tokio::spawn(async move {
        let mut quiet = 0;
        let mut trimmed_at = 0;
        loop {
            tokio::time::sleep(CHECK_EVERY).await;
            let Some(runtime) = runtime.upgrade() else {
                return;
            };
            let (running, warm_slots) = runtime.pool_usage();
            quiet = if running == 0 { quiet + 1 } else { 0 };
            let activity = runtime.instances_started.load(Ordering::Relaxed)
                + CONNECTIONS_CLOSED.load(Ordering::Relaxed);
            if quiet < QUIET_CHECKS || activity == trimmed_at {
                continue;
            }
            trimmed_at = activity;
            if warm_slots > RECYCLE_ABOVE_WARM_SLOTS {
                match runtime.recycle() {
                    Ok(()) => tracing::info!(warm_slots, "released the plugin pool's memory"),
                    Err(e) => tracing::warn!("could not renew the plugin pool: {e}"),
                }
            }
            runtime.drop_prepared();
            crate::allocator::release_heap();
        }
    });
}
