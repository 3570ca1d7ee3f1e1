//! Hot reload of plugins: a `.wasm` file that appears, changes or disappears
//! in the plugins directory is loaded, reloaded or unloaded without a restart.
//! The safe way to install a plugin is to write a temporary name in the
//! directory (a dotfile, or another extension) and rename it to `NAME.wasm`.
//!
//! If the directory itself is removed or moved away, its plugins go as their
//! files would one by one: unloaded, their routes answer 503. Once a
//! directory is back at that path it is watched again and every plugin in it
//! is loaded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::PluginRuntime;
use crate::dir_watch::{DirWatcher, WatchError, watch_dir};

/// Why the plugins directory cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum HotReloadError {
    #[error("cannot create {}: {source}", .dir.display())]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Watch(#[from] WatchError),
}

fn is_plugin_file(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "wasm")
        && !path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'))
}

/// Starts watching `dir`; changes are applied to `runtime`.
pub fn watch(runtime: Arc<PluginRuntime>, dir: &Path) -> Result<DirWatcher, HotReloadError> {
    std::fs::create_dir_all(dir).map_err(|source| HotReloadError::CreateDir {
        dir: dir.to_owned(),
        source,
    })?;
    let watcher = watch_dir("plugins directory", dir, is_plugin_file, move |path| {
        let runtime = runtime.clone();
        async move {
            if path.exists() {
                // Failures are logged and kept in the plugin's status.
                let _ = runtime.load(&path).await;
            } else {
                runtime.unload(&path);
            }
        }
    })?;
    Ok(watcher)
}
