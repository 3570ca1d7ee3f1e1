//! Hot reload of the config file: routes, prices, limits and keys change
//! without a restart. A bad edit is refused with its reason (logged, and in
//! `GET /admin/config`); the config already serving stays.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::AppState;
use crate::config::{Config, ConfigError};
use crate::dir_watch::{DirWatcher, WatchError, watch_dir};
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
}

/// Starts watching the config file at `path`.
pub fn watch_config(state: &Arc<AppState>, path: &Path) -> Result<DirWatcher, WatchConfigError> {
    // Weak: the watch must not keep the state (and its invocation log) alive at shutdown.
    let state = Arc::downgrade(state);
    let file: PathBuf = std::path::absolute(path).map_err(WatchConfigError::Path)?;
    let dir = file
        .parent()
        .ok_or(WatchConfigError::NoDirectory)?
        .to_owned();
    let name = file.file_name().map(|n| n.to_owned());
    // Editors often save by writing another file and renaming it over this
    // one, so watch the directory and pick out the file.
    let watcher = watch_dir(
        "config file's directory",
        &dir,
        move |changed| changed.file_name().map(|n| n.to_owned()) == name,
        move |_| {
            let state = state.upgrade();
            let file = file.clone();
            async move {
                if let Some(state) = state {
                    reload(&state, &file);
                }
            }
        },
    )?;
    Ok(watcher)
}

fn reload(state: &AppState, file: &Path) {
    if !file.exists() {
        // Mid-rename, or deleted: keep serving what we have.
        return;
    }
    let current = state.live();
    let loaded = Config::load(Some(file))
        .map_err(ReloadError::from)
        .and_then(|config| {
            let routes = Routes::from_config(&config, Some(&current.routes)).map_err(|source| {
                ReloadError::Routes {
                    origin: file.display().to_string(),
                    source,
                }
            })?;
            Ok((config, routes))
        });
    match loaded {
        Ok((config, routes)) => {
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
                record_retention_days
            );
            for (key, changed) in restart_only {
                if changed {
                    tracing::warn!(key, "this config change takes effect at the next restart");
                }
            }
            let count = config.providers.len();
            state.replace_config(config, routes);
            tracing::info!(routes = count, file = %file.display(), "config reloaded");
        }
        Err(e) => {
            tracing::error!(file = %file.display(),
                "config change refused, the previous config keeps serving: {e}");
            state.reject_config(e.to_string());
        }
    }
}
