//! Provider routes: which plugin serves a `providerConfig.provider` id, with
//! which upstreams ([`Target`]s), keys, sandboxes and prices.

mod guards;
mod sandbox;
mod target;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use guards::{Chain, Guard, GuardError, Guards};
pub use target::{MASK, Pick, Target, TargetView, Tried, random_u64};

use crate::config::{Config, RouteConfig, TargetConfig};
use crate::error::ApiError;
use crate::redact::{MintedByRoute, Secrets};
pub use sandbox::RouteSandboxError;
use target::{Ejection, Health};

pub struct Route {
    pub id: String,
    /// `id` as the `x-gateway-route` response header carries it, made once.
    pub header: Option<hyper::header::HeaderValue>,
    pub config: RouteConfig,
    pub timeout: Duration,
    /// The most tries of a request to this route, its fallbacks' included.
    pub max_attempts: usize,
    /// Never empty: a route without `targets` has one, its own `base_url`.
    targets: Box<[Target]>,
    ejection: Option<Ejection>,
    /// The gateway's own keys a request to this route may carry upstream: its targets' and
    /// its fallbacks', made into finders once per config.
    pub secrets: Secrets,
    /// The guards its requests go through (`global_guards`, then its own), before a
    /// project's.
    pub guards: Chain,
}

pub struct Routes {
    routes: HashMap<String, Arc<Route>>,
    guards: Guards,
}

/// A route (or a guard) of the config that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("providers.{id}.{source}")]
    Route {
        id: String,
        source: RouteSandboxError,
    },
    #[error(transparent)]
    Guard(#[from] GuardError),
}

impl Routes {
    /// The routes of a validated config (see [`Config::parse`]). An upstream that `previous`
    /// (the routes being replaced by a reload) also had keeps its ejection state: editing a
    /// price does not put a sick upstream back into rotation. Each route's requests redact
    /// what the plugins of it and its fallbacks declare secret (`minted`).
    pub fn from_config(
        config: &Config,
        previous: Option<&Routes>,
        minted: &MintedByRoute,
    ) -> Result<Routes, RouteError> {
        let guards = Guards::from_config(config)?;
        let mut routes = config
            .providers
            .iter()
            .map(|(id, route)| {
                let previous = previous.and_then(|routes| routes.routes.get(id));
                let mut route = Route::new(id, route, config, previous.map(Arc::as_ref))?;
                route.guards = guards.chain(
                    config
                        .global_guards
                        .iter()
                        .chain(route.config.guards.iter()),
                );
                Ok((id.clone(), route))
            })
            .collect::<Result<HashMap<String, Route>, RouteError>>()?;
        let secrets: Vec<(String, Secrets)> = routes
            .iter()
            .map(|(id, route)| {
                let fallbacks = route.config.fallbacks.iter();
                let keys = route.configured_keys().chain(
                    fallbacks
                        .filter_map(|id| routes.get(id))
                        .flat_map(Route::configured_keys),
                );
                let declared = std::iter::once(id)
                    .chain(route.config.fallbacks.iter())
                    .map(|id| minted.of(id))
                    .collect();
                (id.clone(), Secrets::new(keys.map(Some)).minted_by(declared))
            })
            .collect();
        for (id, secrets) in secrets {
            if let Some(route) = routes.get_mut(&id) {
                route.secrets = secrets;
            }
        }
        let routes = routes
            .into_iter()
            .map(|(id, route)| (id, Arc::new(route)))
            .collect();
        Ok(Routes { routes, guards })
    }

    /// Every guard of the config.
    pub fn guards(&self) -> &Guards {
        &self.guards
    }

    /// Every route, by id.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Route>> {
        self.routes.values()
    }

    pub fn get(&self, id: &str) -> Result<Arc<Route>, ApiError> {
        self.routes
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::UnknownRoute(id.to_owned()))
    }
}

impl Route {
    fn new(
        id: &str,
        config: &RouteConfig,
        whole: &Config,
        previous: Option<&Route>,
    ) -> Result<Route, RouteError> {
        let read_key = |var: &String| {
            let key = std::env::var(var).ok().filter(|k| !k.trim().is_empty());
            if key.is_none() {
                tracing::warn!(route = %id, env = %var,
                    "route key variable is not set: callers must send Provider-API-Key");
            }
            key
        };
        let route_key = config.api_key_env.as_ref().and_then(read_key);
        let own;
        let targets: &[TargetConfig] = if config.targets.is_empty() {
            own = config.base_url.clone().map(TargetConfig::new);
            own.as_slice()
        } else {
            &config.targets
        };
        let ejection = config
            .ejection()
            .map(|(after, out_for)| Ejection { after, out_for });
        let error = |source| RouteError::Route {
            id: id.to_owned(),
            source,
        };
        let mut built = Vec::with_capacity(targets.len().max(1));
        for (index, target) in targets.iter().enumerate() {
            let key = match &target.api_key_env {
                Some(var) => read_key(var),
                None => route_key.clone(),
            };
            let health = previous
                .and_then(|route| route.target_at(target.base_url.as_str()))
                .map_or_else(|| Arc::new(Health::default()), |t| t.health.clone());
            let settings = config.target_settings(target);
            built.push(Target::new(
                index,
                Some(target.base_url.as_str()),
                sandbox::sandbox(config, Some(&target.base_url)).map_err(error)?,
                key,
                (
                    config.target_settings_json(target),
                    crate::secrets::read(id, &settings),
                ),
                target.weight.get(),
                health,
            ));
        }
        if built.is_empty() {
            // A route without an upstream (a local plugin): one target that calls nothing.
            built.push(Target::new(
                0,
                None,
                sandbox::sandbox(config, None).map_err(error)?,
                route_key,
                (
                    config.settings_json(),
                    crate::secrets::read(id, &config.settings),
                ),
                1,
                Arc::new(Health::default()),
            ));
        }
        Ok(Route {
            id: id.to_owned(),
            header: hyper::header::HeaderValue::from_str(id).ok(),
            timeout: config.timeout(whole),
            max_attempts: config.max_attempts(whole),
            targets: built.into_boxed_slice(),
            ejection,
            secrets: Secrets::default(),
            guards: Chain::from([]),
            config: config.clone(),
        })
    }

    fn target_at(&self, base_url: &str) -> Option<&Target> {
        self.targets
            .iter()
            .find(|target| target.base_url() == base_url.trim_end_matches('/'))
    }

    pub fn target(&self, index: usize) -> &Target {
        // Indices come from this route's own picks.
        &self.targets[index.min(self.targets.len() - 1)]
    }

    pub fn target_count(&self) -> usize {
        self.targets.len()
    }

    /// The gateway's own provider keys of this route (of each of its targets), and the
    /// secrets its settings name.
    pub fn configured_keys(&self) -> impl Iterator<Item = &str> {
        self.targets.iter().flat_map(|target| {
            target
                .configured_key()
                .into_iter()
                .chain(target.secret_values())
        })
    }

    /// Whether a request with (or without) the caller's own provider key can be sent
    /// anywhere: a 400 naming the header when the route needs a key and has none of its own.
    pub fn check_key(&self, caller_key: bool) -> Result<(), ApiError> {
        if self
            .targets
            .iter()
            .any(|target| self.usable(target, caller_key))
        {
            return Ok(());
        }
        Err(ApiError::BadRequest(format!(
            "provider {:?} needs a provider API key: send yours in the Provider-API-Key header",
            self.id
        )))
    }

    /// Whether a call to `target` has credentials: the caller's key, the target's own, or
    /// secrets its settings name (AWS keys it signs with, a service-account key).
    fn usable(&self, target: &Target, caller_key: bool) -> bool {
        caller_key
            || target.configured_key().is_some()
            || target.has_secrets()
            || !self.config.needs_api_key()
    }

    /// The provider key of a call to `target`: the caller's wins, else the target's own.
    pub fn provider_key(&self, target: &Target, from_caller: Option<&str>) -> Option<String> {
        from_caller.or(target.configured_key()).map(str::to_owned)
    }

    pub fn model(&self, requested: Option<String>) -> Result<String, ApiError> {
        requested
            .or_else(|| self.config.default_model.clone())
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "a model is required: provider {:?} has no default model (name one in \
                     providerConfig.params.model, or as ROUTE/MODEL on the /v1/ endpoints)",
                    self.id
                ))
            })
    }

    /// The target of this request's next try on this route: by weight among those usable
    /// (with a key) and in rotation, preferring those `tried` has not seen. A route of one
    /// target that never ejects answers at once.
    pub fn pick(&self, tried: Tried, caller_key: bool) -> Pick {
        if self.targets.len() == 1 && self.ejection.is_none() {
            return match self.usable(&self.targets[0], caller_key) {
                true => Pick::Target(0),
                false => Pick::NoneLeft,
            };
        }
        let now = Instant::now();
        let usable = |target: &&Target| self.usable(target, caller_key);
        let mut candidates: Vec<&Target> = self.targets.iter().filter(usable).collect();
        let untried: Vec<&Target> = candidates
            .iter()
            .copied()
            .filter(|target| !tried.has(target.index))
            .collect();
        if !untried.is_empty() {
            candidates = untried;
        }
        target::pick(&candidates, self.ejection.as_ref(), now, self.timeout)
    }

    /// Whether a target this request has not tried yet could take its next try.
    pub fn has_untried(&self, tried: Tried, caller_key: bool) -> bool {
        let now = Instant::now();
        self.targets.iter().any(|target| {
            !tried.has(target.index)
                && self.usable(target, caller_key)
                && self
                    .ejection
                    .as_ref()
                    .is_none_or(|_| target.health.in_rotation(now, self.timeout))
        })
    }

    /// Its targets as the admin console shows them, ejection state included.
    pub fn target_views(&self) -> Vec<TargetView> {
        let now = Instant::now();
        self.targets
            .iter()
            .map(|target| {
                let out = self
                    .ejection
                    .as_ref()
                    .and_then(|_| target.out_for(now, self.timeout));
                target.view(out)
            })
            .collect()
    }

    /// What became of a try on `target`: `Some(true)` it answered, `Some(false)` it failed
    /// in a way another try could avoid (what ejection counts), `None` it was cut short.
    pub fn report(&self, target: &Target, outcome: Option<bool>) {
        if let Some(ejection) = &self.ejection {
            target.health.report(outcome, ejection, &self.id, target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = r#"
[providers.pool]
plugin = "openai"
allowed_hosts = ["extra.example:443"]
settings = { api_key_header = "api-key", legacy_completions = true }
[[providers.pool.targets]]
base_url = "https://a.example/v1"
weight = 3
[[providers.pool.targets]]
base_url = "https://b.example/v1/"
settings = { api_key_header = "x-key" }
"#;

    fn url(text: &str) -> reqwest::Url {
        reqwest::Url::parse(text).expect("a URL")
    }

    #[test]
    fn each_target_reaches_its_own_host_with_its_settings_laid_over_the_routes() {
        let config = Config::parse(POOL, "test").expect("parses");
        let routes = Routes::from_config(&config, None, &MintedByRoute::default()).expect("builds");
        let pool = routes.get("pool").expect("the route");
        assert_eq!(pool.target_count(), 2);
        assert!(
            pool.config.needs_api_key(),
            "targets are upstreams: a key is needed"
        );
        let (a, b) = (pool.target(0), pool.target(1));
        assert!(
            a.sandbox
                .allowed
                .permits(&url("https://a.example/v1/chat/completions"))
        );
        assert!(
            !a.sandbox
                .allowed
                .permits(&url("https://b.example/v1/chat/completions"))
        );
        assert!(
            b.sandbox
                .allowed
                .permits(&url("https://b.example/v1/chat/completions"))
        );
        assert!(b.sandbox.allowed.permits(&url("https://extra.example/x")));
        let a_route = a.wit_route("pool", Some("k".into()));
        assert_eq!(a_route.base_url, "https://a.example/v1");
        assert_eq!(
            a_route.settings,
            r#"{"api_key_header":"api-key","legacy_completions":true}"#
        );
        let b_route = b.wit_route("pool", None);
        assert_eq!(b_route.base_url, "https://b.example/v1");
        assert_eq!(
            b_route.settings,
            r#"{"api_key_header":"x-key","legacy_completions":true}"#
        );
        assert_eq!(a.host.as_deref(), Some("a.example"));
    }

    #[test]
    fn without_a_key_anywhere_the_route_asks_the_caller_for_one() {
        let config = Config::parse(POOL, "test").expect("parses");
        let routes = Routes::from_config(&config, None, &MintedByRoute::default()).expect("builds");
        let pool = routes.get("pool").expect("the route");
        assert!(matches!(
            pool.check_key(false),
            Err(ApiError::BadRequest(_))
        ));
        assert!(pool.check_key(true).is_ok());
        assert_eq!(pool.pick(Tried::default(), false), Pick::NoneLeft);
    }

    #[test]
    fn a_reload_keeps_the_health_of_the_targets_it_keeps() {
        let config = Config::parse(POOL, "test").expect("parses");
        let before = Routes::from_config(&config, None, &MintedByRoute::default()).expect("builds");
        let moved = POOL.replace("https://b.example/v1/", "https://c.example/v1");
        let after = Routes::from_config(
            &Config::parse(&moved, "test").expect("parses"),
            Some(&before),
            &MintedByRoute::default(),
        )
        .expect("builds");
        let (old, new) = (
            before.get("pool").expect("old"),
            after.get("pool").expect("new"),
        );
        assert!(Arc::ptr_eq(&old.target(0).health, &new.target(0).health));
        assert!(!Arc::ptr_eq(&old.target(1).health, &new.target(1).health));
    }
}
