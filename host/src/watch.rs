//! Debounced watching of files in a directory, for hot reload of plugins and
//! of the config.
//!
//! A path is handed to the handler only once it has been quiet for a moment,
//! so a file being copied is not read half-written (and if it were, it would
//! fail validation and the previous version would keep serving).

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{EventKind, ModifyKind, RenameMode};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long a file must be quiet before it is handled.
const DEBOUNCE: Duration = Duration::from_millis(250);

/// A file renamed into place is complete (the safe way to install one), so it
/// needs no waiting; anything else might still be being written.
fn settle_time(kind: &EventKind) -> Duration {
    match kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)) => Duration::ZERO,
        _ => DEBOUNCE,
    }
}

/// Keeps a watch alive; dropping it stops it.
pub struct DirWatcher {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DirWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `dir` (not recursively) and calls `handle` with each path that
/// `wanted` accepts, once it has settled (created, changed or removed).
pub fn watch_dir<F, Fut>(
    dir: &Path,
    wanted: impl Fn(&Path) -> bool + Send + 'static,
    handle: F,
) -> Result<DirWatcher, String>
where
    F: Fn(PathBuf) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<(PathBuf, Duration)>();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) => {
                let settle = settle_time(&event.kind);
                for path in event.paths.into_iter().filter(|p| wanted(p)) {
                    let _ = tx.send((path, settle));
                }
            }
            Err(e) => tracing::warn!("file watch error: {e}"),
        })
        .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;

    let task = tokio::spawn(async move {
        let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
        loop {
            let next_due = pending.values().min().copied();
            tokio::select! {
                event = rx.recv() => match event {
                    Some((path, settle)) => {
                        pending.insert(path, Instant::now() + settle);
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
                        handle(path).await;
                    }
                }
            }
        }
    });
    Ok(DirWatcher {
        _watcher: watcher,
        task,
    })
}
