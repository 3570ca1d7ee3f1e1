//! Hot reload of the config file: routes, prices, limits and keys change
//! without a restart. A bad edit is refused with its reason (logged, and in
//! `GET /admin/config`); the config already serving stays.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::routing::Routes;
use crate::server::AppState;
use crate::watch::{DirWatcher, watch_dir};

/// Starts watching the config file at `path`.
pub fn watch_config(state: &Arc<AppState>, path: &Path) -> Result<DirWatcher, String> {
    // Weak: the watch must not keep the state (and its invocation log) alive at shutdown.
    let state = Arc::downgrade(state);
    let file: PathBuf = std::path::absolute(path).map_err(|e| format!("config path: {e}"))?;
    let dir = file
        .parent()
        .ok_or("the config file has no directory")?
        .to_owned();
    let name = file.file_name().map(|n| n.to_owned());
    // Editors often save by writing another file and renaming it over this
    // one, so watch the directory and pick out the file.
    watch_dir(
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
    )
}

fn reload(state: &AppState, file: &Path) {
    if !file.exists() {
        // Mid-rename, or deleted: keep serving what we have.
        return;
    }
    let loaded = Config::load(Some(file)).and_then(|config| {
        let routes = Routes::from_config(&config).map_err(|message| {
            crate::config::ConfigError::Invalid {
                origin: file.display().to_string(),
                message,
            }
        })?;
        Ok((config, routes))
    });
    match loaded {
        Ok((config, routes)) => {
            let previous = state.live();
            for (key, changed) in [
                ("listen", previous.config.listen != config.listen),
                ("database", previous.config.database != config.database),
                (
                    "plugins_dir",
                    previous.config.plugins_dir != config.plugins_dir,
                ),
                (
                    "plugin_cache_dir",
                    previous.config.plugin_cache_dir != config.plugin_cache_dir,
                ),
                ("workers", previous.config.workers != config.workers),
                (
                    "max_connections",
                    previous.config.max_connections != config.max_connections,
                ),
                (
                    "max_plugin_instances",
                    previous.config.max_plugin_instances != config.max_plugin_instances,
                ),
                (
                    "record_retention_days",
                    previous.config.record_retention_days != config.record_retention_days,
                ),
            ] {
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
