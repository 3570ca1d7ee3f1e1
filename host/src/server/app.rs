//! The application, wired: `gateway serve` from an opened store to a graceful stop. In order:
//! the journal (refusing a second process on it), the demo project, the plugin runtime and its
//! directory watch, the listeners, the invocation writer and retention, routes and traces, the
//! state every request reads, the config file's watch; then serving until SIGTERM or SIGINT;
//! then the writer's flush and the traces' export.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::ServeError;
use crate::config::Config;
use crate::plugins::hot_reload::HotReloadError;
use crate::plugins::{PluginRuntime, RuntimeError};
use crate::routing::{RouteError, Routes};
use crate::state::AppState;
use crate::state::reload::WatchConfigError;
use crate::store::journal::{Journal, JournalError};
use crate::store::{InvocationLog, KeySpec, Store, StoreError};

/// Why the gateway could not start serving, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    PluginRuntime(#[from] RuntimeError),
    #[error(transparent)]
    PluginsDir(#[from] HotReloadError),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the batch runner: {0}")]
    BatchRunner(std::io::Error),
    #[error("cannot start the invocation writer: {0}")]
    InvocationWriter(std::io::Error),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    WatchConfig(#[from] WatchConfigError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("traces: {0}")]
    Traces(#[from] crate::traces::TracesError),
    #[error(transparent)]
    Prices(#[from] crate::pricing::PricesFileError),
}

pub async fn serve(
    config: Config,
    config_path: Option<PathBuf>,
    store: Store,
) -> Result<(), StartError> {
    // A prices file that cannot be read is refused before anything starts.
    let prices = crate::state::reload::load_prices(&config)?;
    // Then: a second process on the same journal directory is refused
    // before it changes anything.
    let journal = match config.journal_dir() {
        Some(dir) => Some(Journal::open(&dir)?),
        None => None,
    };
    if config.demo_project && store.project_count().await? == 0 {
        let project = store.create_project("demo").await?;
        let key = store.create_key(&project.id, &KeySpec::default()).await?;
        println!("demo project id: {}", project.id);
        println!("demo api key: {key}");
        println!(
            "(the key is shown only this once; `gateway key create {}` makes another)",
            project.id
        );
    }

    let workers = match config.workers {
        0 => crate::worker::default_count(),
        n => n,
    };
    let runtime = Arc::new(
        PluginRuntime::with_max_instances(
            config.plugin_cache_dir().as_deref(),
            config.max_plugin_instances.get(),
        )?
        .with_copy_ahead(config.plugin_copy_ahead),
    );
    let (loaded, _rejected) = runtime.load_dir(&config.plugins_dir).await;
    let _watcher = crate::plugins::hot_reload::watch(runtime.clone(), &config.plugins_dir)?;
    crate::plugins::trim::spawn(Arc::downgrade(&runtime));
    for (id, route) in &config.providers {
        if !loaded.contains(&route.plugin) {
            tracing::warn!(route = %id, plugin = %route.plugin,
                "the route's plugin is not loaded: the route answers 503");
        }
    }

    let listen_error = |source| StartError::Listen {
        address: config.listen,
        source,
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(listen_error)?;
    let address = listener.local_addr().map_err(listen_error)?;
    let (log, writer) =
        InvocationLog::start(store.clone(), journal).map_err(StartError::InvocationWriter)?;
    if let Some(days) = config.record_retention_days {
        crate::store::retention::spawn(store.clone(), days.get());
    }
    crate::store::retention::spawn_files(store.clone());
    if let Some(days) = config.audit_retention_days {
        crate::store::retention::spawn_audit(store.clone(), days.get());
    }
    let metrics_listener = match config.metrics_listen {
        Some(address) => {
            let listen_error = |source| StartError::Listen { address, source };
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(listen_error)?;
            Some((listener.local_addr().map_err(listen_error)?, listener))
        }
        None => None,
    };
    let routes = Routes::from_config(&config, None, runtime.minted())?;
    let traces = crate::traces::Traces::start(&config)?;
    // Not the state: the invocation writer ends only once every handle of the state is gone.
    let flushing = traces.clone();
    let state = Arc::new(AppState::new(
        config, routes, prices, runtime, store, log, traces,
    ));
    let metrics_server = metrics_listener.map(|(address, listener)| {
        println!("metrics on http://{address}/metrics");
        tokio::spawn(super::serve_metrics(listener, Arc::downgrade(&state)))
    });
    let _config_watcher = match &config_path {
        Some(path) => Some(crate::state::reload::watch_config(&state, path)?),
        None => None,
    };
    let runner = crate::batch::Runner::start(state.clone()).map_err(StartError::BatchRunner)?;
    // Heard from before the line that says the gateway listens: a SIGTERM sent on reading it
    // must stop the gateway, not be lost in tokio's registration of its handler.
    let shutdown = shutdown_signal();
    // The batch runner stops taking lines with the listener, and drains beside it.
    let stop_runner = runner.stopper();
    let shutdown = async move {
        shutdown.await;
        stop_runner();
    };
    println!("gateway listening on http://{address}");
    let limiter = state.limiter.clone();
    let served = super::serve(listener, state, workers, shutdown).await;
    runner.stop().await;
    drop(_config_watcher);
    // What this replica's leases hold unused goes back to the other replicas.
    let _ = tokio::time::timeout(Duration::from_secs(2), limiter.release()).await;
    if let Some(task) = metrics_server {
        task.abort();
    }
    // The writer ends once every request task has dropped its handle; a task
    // stuck past the grace period must not hold the process forever.
    if tokio::time::timeout(Duration::from_secs(10), writer.shutdown())
        .await
        .is_err()
    {
        tracing::error!("some invocation records could not be flushed before exit");
    }
    let _ = tokio::task::spawn_blocking(move || flushing.shutdown()).await;
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// The handlers are installed by the call, not when the future is first polled: tokio loses
/// a signal that arrives between installing its handler and subscribing its listener.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let signals = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = signals else {
            tracing::error!("cannot listen for shutdown signals; stop the process with SIGKILL");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
    }
}
