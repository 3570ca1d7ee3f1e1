//! Hot reload of the config file: routes, prices, limits and keys change
//! without a restart. A bad edit is refused with its reason (logged, and in
//! `GET /admin/config`); the config already serving stays.
//!
//! The config's `prices_file` is watched the same way: an edit that parses replaces the prices
//! of the next requests; one that does not is refused with its reason in the log, and the
//! prices already loaded stay. A config edit that names another `prices_file` loads it (or is
//! refused if it cannot be) and moves the watch to it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::AppState;
use crate::config::{Config, ConfigError};
use crate::dir_watch::{DirWatcher, WatchError, watch_dir};
use crate::pricing::{PriceTable, PricesFileError};
use crate::routing::{RouteError, Routes};

/// Why the config file cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum WatchConfigError {
    #[error("config path: {0}")]
    Path(std::io::Error),
    #[error("the config file has no directory")]
    NoDirectory,
    #[error(transparent)]
    Watch(#[from] WatchError),
}

/// Why an edit of the config file was refused.
#[derive(Debug, thiserror::Error)]
enum ReloadError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("invalid config {origin}: {source}")]
    Routes { origin: String, source: RouteError },
    #[error("invalid config {origin}: prices_file: {source}")]
    Prices {
        origin: String,
        source: PricesFileError,
    },
}

/// The prices of the config's `prices_file` (an empty table without one).
pub fn load_prices(config: &Config) -> Result<PriceTable, PricesFileError> {
    match &config.prices_file {
        Some(path) => PriceTable::load(path),
        None => Ok(PriceTable::default()),
    }
}

/// The watches of the config file and of its `prices_file`; dropping it ends both.
pub struct ConfigWatch {
    _config: DirWatcher,
    _prices: Arc<Mutex<Option<DirWatcher>>>,
}

/// Starts watching the config file at `path`, and the prices file it names.
pub fn watch_config(state: &Arc<AppState>, path: &Path) -> Result<ConfigWatch, WatchConfigError> {
    // Weak: the watch must not keep the state (and its invocation log) alive at shutdown.
    let weak = Arc::downgrade(state);
    let prices = Arc::new(Mutex::new(match &state.live().config.prices_file {
        Some(file) => Some(watch_prices(weak.clone(), file)?),
        None => None,
    }));
    let file: PathBuf = std::path::absolute(path).map_err(WatchConfigError::Path)?;
    let (dir, name) = split(&file)?;
    let prices_watch = prices.clone();
    // Editors often save by writing another file and renaming it over this
    // one, so watch the directory and pick out the file.
    let watcher = watch_dir(
        "config file's directory",
        &dir,
        move |changed| is_the_file(changed, name.as_deref()),
        move |_| {
            let weak = weak.clone();
            let file = file.clone();
            let prices_watch = prices_watch.clone();
            async move {
                let Some(state) = weak.upgrade() else {
                    return;
                };
                let Some(moved) = reload(&state, &file) else {
                    return;
                };
                // The config names another prices file (or none): watch that one instead.
                let watch = match moved {
                    Some(path) => match watch_prices(weak, &path) {
                        Ok(watch) => Some(watch),
                        Err(error) => {
                            tracing::error!(file = %path.display(), "cannot watch the prices \
                                file: its edits apply at the next restart: {error}");
                            None
                        }
                    },
                    None => None,
                };
                *prices_watch.lock().unwrap_or_else(|p| p.into_inner()) = watch;
            }
        },
    )?;
    Ok(ConfigWatch {
        _config: watcher,
        _prices: prices,
    })
}

/// Kubernetes mounts a ConfigMap's files as links through this link, and updates them all at
/// once by renaming a new one over it: the file's own name sees no event.
const CONFIGMAP_LINK: &str = "..data";

/// Whether a change in the watched directory may be a change of the file named `name`: the file
/// itself, or the ConfigMap link it may go through.
fn is_the_file(changed: &Path, name: Option<&std::ffi::OsStr>) -> bool {
    let changed = changed.file_name();
    changed == name || changed == Some(std::ffi::OsStr::new(CONFIGMAP_LINK))
}

/// The absolute file's directory and name.
fn split(file: &Path) -> Result<(PathBuf, Option<std::ffi::OsString>), WatchConfigError> {
    let dir = file
        .parent()
        .ok_or(WatchConfigError::NoDirectory)?
        .to_owned();
    Ok((dir, file.file_name().map(|n| n.to_owned())))
}

/// Watches the prices file at `path`: each edit that parses replaces the serving prices.
fn watch_prices(state: Weak<AppState>, path: &Path) -> Result<DirWatcher, WatchConfigError> {
    let file: PathBuf = std::path::absolute(path).map_err(WatchConfigError::Path)?;
    let (dir, name) = split(&file)?;
    // `gateway prices import` writes another file and renames it over this one.
    let watcher = watch_dir(
        "prices file's directory",
        &dir,
        move |changed| is_the_file(changed, name.as_deref()),
        move |_| {
            let state = state.upgrade();
            let file = file.clone();
            async move {
                if let Some(state) = state {
                    reload_prices(&state, &file);
                }
            }
        },
    )?;
    Ok(watcher)
}

fn reload_prices(state: &AppState, file: &Path) {
    if !file.exists() {
        // Mid-rename, or deleted: keep the prices we have.
        return;
    }
    match PriceTable::load(file) {
        Ok(prices) => {
            let models = prices.len();
            let as_of = prices.as_of.clone();
            state.replace_prices(prices);
            tracing::info!(models, as_of, file = %file.display(), "prices reloaded");
        }
        Err(e) => {
            tracing::error!(file = %file.display(),
                "prices change refused, the previous prices keep serving: {e}");
        }
    }
}

/// Applies an edit of the config file, or refuses it. `Some` when it applied and named another
/// `prices_file` than before (`Some(None)`: none now), to be watched instead.
fn reload(state: &AppState, file: &Path) -> Option<Option<PathBuf>> {
    if !file.exists() {
        // Mid-rename, or deleted: keep serving what we have.
        return None;
    }
    let current = state.live();
    let loaded = Config::load(Some(file))
        .map_err(ReloadError::from)
        .and_then(|config| {
            let routes =
                Routes::from_config(&config, Some(&current.routes), state.runtime.minted())
                    .map_err(|source| ReloadError::Routes {
                        origin: file.display().to_string(),
                        source,
                    })?;
            // The same file as before is the prices watch's to reload.
            let prices = if config.prices_file == current.config.prices_file {
                None
            } else {
                Some(load_prices(&config).map_err(|source| ReloadError::Prices {
                    origin: file.display().to_string(),
                    source,
                })?)
            };
            Ok((config, routes, prices))
        });
    match loaded {
        Ok((config, routes, prices)) => {
            // The keys read only at start, each named by its field so the two cannot differ.
            macro_rules! changed {
                ($($key:ident),*) => {
                    [$((stringify!($key), current.config.$key != config.$key)),*]
                };
            }
            let restart_only = changed!(
                listen,
                database,
                plugins_dir,
                plugin_cache_dir,
                workers,
                metrics,
                metrics_listen,
                otlp_endpoint,
                otlp_headers,
                trace_sample_ratio,
                log_format,
                max_connections,
                max_plugin_instances,
                plugin_copy_ahead,
                record_retention_days,
                audit_retention_days,
                redis_url,
                redis_key_prefix,
                limit_leases,
                cache_max_bytes
            );
            for (key, changed) in restart_only {
                if changed {
                    tracing::warn!(key, "this config change takes effect at the next restart");
                }
            }
            let count = config.providers.len();
            let moved = prices.is_some().then(|| config.prices_file.clone());
            state.replace_config(config, routes, prices);
            tracing::info!(routes = count, file = %file.display(), "config reloaded");
            moved
        }
        Err(e) => {
            tracing::error!(file = %file.display(),
                "config change refused, the previous config keeps serving: {e}");
            state.reject_config(e.to_string());
            None
        }
    }
}
