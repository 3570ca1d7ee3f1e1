//! Hot reload: the plugins directory is watched, and a `.wasm` file that
//! appears, changes or disappears is loaded, reloaded or unloaded without a
//! restart.
//!
//! Events are debounced: a file is looked at only once it has been quiet for
//! a moment, so a slow copy is not loaded half-written (and if it were, it
//! would fail validation and the previous version would keep serving). The
//! safe way to install a plugin is still to write a temporary name in the
//! directory and rename it to `NAME.wasm`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::PluginRuntime;

/// How long a file must be quiet before it is (re)loaded.
const DEBOUNCE: Duration = Duration::from_millis(250);

/// Keeps the watch alive; dropping it stops hot reload.
pub struct PluginWatcher {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PluginWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn is_plugin_file(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "wasm")
        && !path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'))
}

/// Starts watching `dir`; changes are applied to `runtime`.
pub fn watch(runtime: Arc<PluginRuntime>, dir: &Path) -> Result<PluginWatcher, String> {
    let (tx, mut rx) = mpsc::unbounded_channel::<PathBuf>();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) => {
                for path in event.paths.into_iter().filter(|p| is_plugin_file(p)) {
                    let _ = tx.send(path);
                }
            }
            Err(e) => tracing::warn!("plugin directory watch error: {e}"),
        })
        .map_err(|e| format!("cannot watch the plugins directory: {e}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;

    let task = tokio::spawn(async move {
        let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
        loop {
            let next_due = pending.values().min().copied();
            tokio::select! {
                path = rx.recv() => match path {
                    Some(path) => {
                        pending.insert(path, Instant::now() + DEBOUNCE);
                    }
                    None => return,
                },
                _ = async {
                    match next_due {
                        Some(due) => tokio::time::sleep_until(due).await,
                        None => std::future::pending().await,
                    }
                } => {
                    let now = Instant::now();
                    let due: Vec<PathBuf> = pending
                        .iter()
                        .filter(|(_, at)| **at <= now)
                        .map(|(path, _)| path.clone())
                        .collect();
                    for path in due {
                        pending.remove(&path);
                        if path.exists() {
                            // Failures are logged and kept in the plugin's status.
                            let _ = runtime.load(&path).await;
                        } else {
                            runtime.unload(&path);
                        }
                    }
                }
            }
        }
    });
    Ok(PluginWatcher {
        _watcher: watcher,
        task,
    })
}
