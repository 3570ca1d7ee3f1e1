//! Reaching the server: the URL (libpq's options, those tokio-postgres lacks included), TLS
//! after `sslmode`, and the pool's connections.

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{ManagerConfig, Pool, PoolError, RecyclingMethod};
use tokio_postgres::Config;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::tls::{Verify, root_store, rustls_config};
use crate::store::StoreError;

/// Used when the URL sets no `connect_timeout`: a down server must fail in
/// seconds, not after the operating system's minutes.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a query waits for a connection (pool full, or being made).
pub(super) const POOL_TIMEOUT: Duration = Duration::from_secs(10);
/// See [`parse_url`]'s keepalives.
const DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub(super) enum Tls {
    Plain,
    Rustls(MakeRustlsConnect),
}

/// The roots a certificate is checked against, after libpq's `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Roots {
    /// The platform's trust store (no `sslrootcert`, or `sslrootcert=system`).
    Platform,
    /// The PEM certificates of this file (a private CA, a cloud provider's bundle).
    File(std::path::PathBuf),
}

/// What TLS checks of the server, and against what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Trust {
    pub(super) verify: Verify,
    pub(super) roots: Roots,
}

/// Parses a libpq-style URL. tokio-postgres knows `sslmode` up to `require`
/// and no `sslrootcert`: `verify-ca` and `verify-full` are taken out here and
/// given to it as `require`, the checking being done by [`tls_for`]'s
/// verifier, against `sslrootcert`'s roots when the URL names a file. As with
/// libpq, `require` with a root file checks the chain (as `verify-ca`).
pub(super) fn parse_url(url: &str) -> Result<(Config, Trust), StoreError> {
    let mut verify = Verify::Nothing;
    let mut roots = Roots::Platform;
    let url = match url.split_once('?') {
        None => url.to_owned(),
        Some((base, query)) => {
            let mut kept = Vec::new();
            for pair in query.split('&') {
                match pair {
                    "sslmode=verify-ca" => {
                        verify = Verify::Chain;
                        kept.push("sslmode=require");
                    }
                    "sslmode=verify-full" => {
                        verify = Verify::Full;
                        kept.push("sslmode=require");
                    }
                    _ => match pair.strip_prefix("sslrootcert=") {
                        Some("system") => roots = Roots::Platform,
                        Some(path) => {
                            let path = percent_encoding::percent_decode_str(path)
                                .decode_utf8()
                                .map_err(|_| {
                                    StoreError::Pool("sslrootcert: not a UTF-8 path".into())
                                })?;
                            roots = Roots::File(path.into_owned().into());
                        }
                        None => kept.push(pair),
                    },
                }
            }
            if kept.is_empty() {
                base.to_owned()
            } else {
                format!("{base}?{}", kept.join("&"))
            }
        }
    };
    // The error names the option at fault, never the URL (which may hold a password).
    let mut config = Config::from_str(&url)?;
    if config.get_ssl_mode() != SslMode::Require {
        verify = Verify::Nothing;
    } else if verify == Verify::Nothing && matches!(roots, Roots::File(_)) {
        verify = Verify::Chain;
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("gateway");
    }
    // A peer gone without a word (a partition, a dead host) fails queries and
    // drops idle connections within ~30 s, rather than the system's hours: the
    // invocation writer would wait on it, and the listener would miss changes.
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(DEAD_PEER_TIMEOUT);
    }
    let default_keepalives = config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60)
        && config.get_keepalives_interval().is_none()
        && config.get_keepalives_retries().is_none();
    if config.get_keepalives() && default_keepalives {
        config
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(4);
    }
    Ok((config, Trust { verify, roots }))
}

pub(super) fn tls_for(config: &Config, trust: &Trust) -> Result<Tls, StoreError> {
    if config.get_ssl_mode() == SslMode::Disable {
        return Ok(Tls::Plain);
    }
    // Roots the operator named for a check must be there: not a reason to go plain.
    let roots = match &trust.roots {
        Roots::File(path) if trust.verify != Verify::Nothing => Some(root_store(path)?),
        _ => None,
    };
    match rustls_config(trust.verify, roots) {
        Ok(tls) => Ok(Tls::Rustls(MakeRustlsConnect::new(tls))),
        Err(e) if config.get_ssl_mode() == SslMode::Require => Err(StoreError::Pool(format!(
            "TLS is required, but cannot be set up: {e}"
        ))),
        Err(e) => {
            tracing::warn!("PostgreSQL: TLS cannot be set up ({e}); connecting without it");
            Ok(Tls::Plain)
        }
    }
}

pub(super) fn manager_config() -> ManagerConfig {
    ManagerConfig {
        // A closed connection is noticed before reuse; a half-dead one fails
        // its query once, and the caller (or the writer's retry) tries again.
        recycling_method: RecyclingMethod::Fast,
    }
}

pub(super) async fn connection(pool: &Pool) -> Result<deadpool_postgres::Object, StoreError> {
    pool.get().await.map_err(|e| match e {
        PoolError::Timeout(_) => StoreError::Pool(format!(
            "no connection within {}s (is the server up and reachable?)",
            POOL_TIMEOUT.as_secs()
        )),
        PoolError::Backend(e) => StoreError::Pool(crate::causes::with_causes(&e)),
        other => StoreError::Pool(other.to_string()),
    })
}
