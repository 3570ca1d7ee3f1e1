//! What every request reads: the serving config (hot-reloadable, one snapshot
//! per request), the plugin runtime, the store and the invocation log, and the
//! signal that shutdown's grace period is over. [`reload`] swaps the serving config when its
//! file changes, and the prices when the config's `prices_file` does.

pub mod reload;

use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::config::Config;
use crate::limits::Limiter;
use crate::plugins::PluginRuntime;
use crate::pricing::PriceTable;
use crate::routing::Routes;
use crate::store::{InvocationLog, Store};

pub struct AppState {
    live: RwLock<Arc<Live>>,
    /// Why the last config edit was refused, until a good one arrives.
    config_error: RwLock<Option<String>>,
    pub runtime: Arc<PluginRuntime>,
    pub store: Store,
    pub log: InvocationLog,
    /// Rate-limit and budget counters (in process, or in the config's Redis).
    pub limiter: Limiter,
    /// Answers kept for routes with `cache_ttl_secs` (in process, or in the config's Redis).
    pub cache: crate::cache::ResponseCache,
    /// What `GET /metrics` shows.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// `metrics_listen` as the gateway started: where `/metrics` is served instead of the
    /// main listener.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Spans and the trace context passed upstream.
    pub traces: crate::traces::Traces,
    /// The request bodies in flight (`max_inflight_body_bytes`).
    pub inflight: crate::inflight::InflightBodies,
    /// Wrong admin tokens per client address (the console's sign-in, the admin API's bearer).
    pub sign_ins: crate::limits::SignInThrottle,
    /// The console's OpenID client (`[oidc]`): the provider's discovery document and keys.
    pub sso: crate::sso::Sso,
    /// Told when a batch is created or cancelled: this gateway's batch runner looks at once,
    /// rather than at its next poll.
    pub batch_wake: tokio::sync::Notify,
    /// How busy the serving threads are: what the batch runner leaves them.
    pub serving_load: crate::worker::Load,
    /// Set when shutdown's grace period is over: requests still running end now.
    abort: watch::Sender<bool>,
    /// One receiver per call running apart from its caller's connection ([`Apart`]): shutdown
    /// waits for them as for connections, since a caller that left holds no connection open.
    apart: watch::Sender<()>,
}

/// A call running in a task of its own, apart from its caller's connection (which may close
/// first): held until the call is recorded, so that shutdown waits for it.
pub struct Apart {
    _held: watch::Receiver<()>,
}

/// The hot-reloadable part of the state: a request uses one snapshot throughout.
pub struct Live {
    pub config: Config,
    /// Shared with the next snapshot when only the prices change.
    pub routes: Arc<Routes>,
    /// The config's `prices_file` as last loaded (empty without one).
    pub prices: Arc<PriceTable>,
    /// The `[mcp_servers]` `/mcp` fronts; a server a reload leaves unchanged is kept, with
    /// its session and tool list.
    pub tools: Arc<crate::tools::Servers>,
    pub loaded_at_ms: i64,
}

impl AppState {
    pub fn new(
        config: Config,
        routes: Routes,
        prices: PriceTable,
        runtime: Arc<PluginRuntime>,
        store: Store,
        log: InvocationLog,
        traces: crate::traces::Traces,
    ) -> AppState {
        let limiter = match &config.redis_url {
            None => Limiter::local(),
            Some(url) => {
                let limiter = if config.limit_leases {
                    Limiter::redis_leased
                } else {
                    Limiter::redis
                };
                limiter(url.as_str(), &config.redis_key_prefix).unwrap_or_else(|e| {
                    // The config checked the URL as it was read: this is not expected.
                    tracing::error!("{e}: counting rate limits in this process only");
                    Limiter::local()
                })
            }
        };
        let cache = crate::cache::ResponseCache::new(
            config.cache_max_bytes.get(),
            (config.redis_url.as_ref()).map(|url| (url.as_str(), config.redis_key_prefix.as_str())),
        );
        let workers = match config.workers {
            0 => crate::worker::default_count(),
            n => n,
        };
        let metrics = Arc::new(crate::metrics::Metrics::new(config.metrics, workers));
        AppState {
            metrics,
            metrics_listen: config.metrics_listen,
            traces,
            live: RwLock::new(Arc::new(Live {
                tools: Arc::new(crate::tools::Servers::build(&config, None, &runtime)),
                config,
                routes: Arc::new(routes),
                prices: Arc::new(prices),
                loaded_at_ms: crate::clock::now_ms(),
            })),
            config_error: RwLock::new(None),
            runtime,
            store,
            log,
            limiter,
            cache,
            inflight: crate::inflight::InflightBodies::default(),
            sign_ins: crate::limits::SignInThrottle::default(),
            sso: crate::sso::Sso::new(),
            batch_wake: tokio::sync::Notify::new(),
            serving_load: crate::worker::Load::default(),
            abort: watch::Sender::new(false),
            apart: watch::Sender::new(()),
        }
    }

    /// A call begins to run apart from its caller's connection: see [`Apart`].
    pub fn apart(&self) -> Apart {
        Apart {
            _held: self.apart.subscribe(),
        }
    }

    /// Resolves once no call runs apart from its caller ([`AppState::apart`]).
    pub async fn apart_ended(&self) {
        self.apart.closed().await;
    }

    /// Resolves once the requests still in flight must end (shutdown's grace is over).
    pub async fn aborted(&self) {
        let mut abort = self.abort.subscribe();
        if abort.wait_for(|aborted| *aborted).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Ends the requests still in flight: see [`AppState::aborted`].
    pub(crate) fn abort_in_flight(&self) {
        self.abort.send_replace(true);
    }

    pub fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Swaps in a new config, with new prices or (`None`) those serving; requests already
    /// running keep the snapshot they started with.
    pub fn replace_config(&self, config: Config, routes: Routes, prices: Option<PriceTable>) {
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        // Taken under the lock, so that prices reloaded meanwhile are not lost.
        let prices = prices.map_or_else(|| live.prices.clone(), Arc::new);
        *live = Arc::new(Live {
            tools: Arc::new(crate::tools::Servers::build(
                &config,
                Some(&live.tools),
                &self.runtime,
            )),
            config,
            routes: Arc::new(routes),
            prices,
            loaded_at_ms: crate::clock::now_ms(),
        });
        drop(live);
        *self.config_error.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Swaps in new prices, the config and routes unchanged (`loaded_at_ms` is the config's).
    pub fn replace_prices(&self, prices: PriceTable) {
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        *live = Arc::new(Live {
            config: live.config.clone(),
            routes: live.routes.clone(),
            tools: live.tools.clone(),
            prices: Arc::new(prices),
            loaded_at_ms: live.loaded_at_ms,
        });
    }

    pub fn reject_config(&self, reason: String) {
        *self.config_error.write().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    }

    pub fn config_error(&self) -> Option<String> {
        self.config_error
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
