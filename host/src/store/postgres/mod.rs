//! The PostgreSQL backend, for several replicas on one database.
//!
//! Connections live on a small runtime of the backend's own: the gateway
//! serves on several threads, each with its own current-thread runtime, and a
//! connection's driver task spawned on one of them would die with it and stall
//! the others' queries while that thread is busy. Every query is therefore
//! spawned onto this runtime and awaited from wherever it was asked for (any
//! runtime), and the invocation writer's blocking call waits on a channel.
//!
//! Key changes (and console sign-outs) reach every replica through `NOTIFY
//! gateway_changes`, sent in the transaction of the change; a listener task on a
//! connection of its own turns each notification into a new [`Changes`] epoch,
//! which empties the key and session caches.

mod access;
mod batches;
pub(super) mod connect;
mod files;
mod invocations;
mod keys;
mod listen;
pub(super) mod migrations;
mod responses;
mod rows;
mod runtime;
mod sessions;
#[cfg(test)]
mod tests;
mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::{Manager, Pool, Runtime};
use tokio_postgres::NoTls;

use super::key_cache::{Changes, KeyCache};
use super::{Migrated, StoreError};
use connect::{POOL_TIMEOUT, Tls, manager_config, parse_url, tls_for};
use runtime::OwnRuntime;

const POOL_SIZE: usize = 8;

pub(super) struct Postgres {
    pool: Pool,
    keys: KeyCache,
    /// Whether each console session looked up was signed out.
    sessions: KeyCache<bool>,
    /// When a key lookup last found the database unreachable.
    down_since: std::sync::Mutex<Option<Instant>>,
    changes: Arc<Changes>,
    // Last: dropped after the pool and cache, whatever they hold.
    runtime: OwnRuntime,
}

impl Postgres {
    /// Connects to the database of `url` and applies the migrations it lacks.
    pub(super) async fn open(url: &str) -> Result<(Postgres, Migrated), StoreError> {
        let (config, trust) = parse_url(url)?;
        let tls = tls_for(&config, &trust)?;
        let runtime = OwnRuntime::new()?;
        let handle = runtime
            .handle()
            .ok_or_else(|| StoreError::Task("PostgreSQL's runtime is gone".into()))?
            .clone();
        let manager = match &tls {
            Tls::Plain => Manager::from_config(config.clone(), NoTls, manager_config()),
            Tls::Rustls(tls) => Manager::from_config(config.clone(), tls.clone(), manager_config()),
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_TIMEOUT))
            .create_timeout(Some(POOL_TIMEOUT))
            .recycle_timeout(Some(POOL_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Pool(e.to_string()))?;
        let migrated = handle
            .spawn(migrations::migrate(pool.clone()))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))??;
        let changes = Arc::new(Changes::new());
        handle.spawn(listen::listen(config, tls, changes.clone()));
        let db = Postgres {
            pool,
            keys: KeyCache::notified(changes.clone()),
            sessions: KeyCache::notified(changes.clone()),
            down_since: std::sync::Mutex::new(None),
            changes,
            runtime,
        };
        Ok((db, migrated))
    }

    /// Runs `work` on the backend's runtime and waits for it from any runtime.
    pub(super) async fn run<T, F>(&self, work: impl FnOnce(Pool) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let handle = self
            .runtime
            .handle()
            .ok_or_else(|| StoreError::Task("PostgreSQL's runtime is gone".into()))?;
        handle
            .spawn(work(self.pool.clone()))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// Whether change notifications are received (else every key lookup reads the database).
    #[cfg(test)]
    pub(in crate::store) fn listening(&self) -> bool {
        self.changes.epoch().is_some()
    }
}
