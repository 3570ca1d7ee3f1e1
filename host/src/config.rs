//! The gateway's configuration: one TOML file, every key with a default.
//!
//! The defaults are `gateway.example.toml` at the repository root, embedded in
//! the binary, so the quick start needs no file at all.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::plugins::{AllowedHosts, Limits, MAX_MEMORY_LIMIT_BYTES, Sandbox};

/// The shipped example config; also the configuration used when no file is given.
pub const DEFAULT_CONFIG: &str = include_str!("../../gateway.example.toml");

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config {origin}: {message}")]
    Invalid { origin: String, message: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// SQLite file path, or a `sqlite://PATH` URL.
    #[serde(default = "default_database")]
    pub database: String,
    #[serde(default = "default_plugins_dir")]
    pub plugins_dir: PathBuf,
    /// Compiled plugins are kept here across restarts (default: `.cache` in
    /// `plugins_dir`). Empty string: no cache.
    #[serde(default)]
    pub plugin_cache_dir: Option<PathBuf>,
    /// Bearer token for the `/admin/...` endpoints; without one they answer 401.
    #[serde(default)]
    pub admin_token: Option<String>,
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    #[serde(default = "default_true")]
    pub demo_project: bool,
    #[serde(default = "default_request_timeout_secs")]
    pub request_timeout_secs: u64,
    #[serde(default)]
    pub providers: BTreeMap<String, RouteConfig>,
}

/// One provider route: the id callers put in `providerConfig.provider`.
#[derive(Debug, Clone, Deserialize)]
pub struct RouteConfig {
    /// File stem of the plugin serving this route.
    pub plugin: String,
    /// Base URL of the upstream API. Its host is the only one the plugin may reach.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Environment variable holding the gateway's provider key for this route.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Whether a provider key is needed at all. Default: only routes with an
    /// upstream (`base_url`) need one; set false for local servers without auth.
    #[serde(default)]
    pub api_key_required: Option<bool>,
    #[serde(default)]
    pub default_model: Option<String>,
    /// Total time of one provider call (default: the top-level `request_timeout_secs`).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    #[serde(default)]
    pub pricing: BTreeMap<String, Price>,
    /// Hosts (`host:port`, or URLs) the plugin may reach besides `base_url`'s.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Sandbox limits of the route's plugin instances; absent ones keep the defaults.
    #[serde(default)]
    pub memory_limit_mb: Option<u64>,
    #[serde(default)]
    pub cpu_time_ms: Option<u64>,
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    #[serde(default)]
    pub first_byte_timeout_ms: Option<u64>,
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    #[serde(default)]
    pub max_response_bytes: Option<u64>,
    #[serde(default)]
    pub max_http_requests: Option<u32>,
    /// Every other key: plugin-specific settings, handed to the plugin as JSON.
    #[serde(flatten)]
    pub settings: toml::Table,
}

/// Dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn default_database() -> String {
    "./data/gateway.db".to_owned()
}
fn default_plugins_dir() -> PathBuf {
    PathBuf::from("./data/plugins")
}
fn default_max_body_bytes() -> usize {
    4 * 1024 * 1024
}
fn default_true() -> bool {
    true
}
fn default_request_timeout_secs() -> u64 {
    120
}

impl Config {
    /// Loads `path`, or the built-in defaults when there is none.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                Config::parse(&text, &path.display().to_string())
            }
            None => Config::parse(DEFAULT_CONFIG, "(built-in defaults)"),
        }
    }

    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.to_owned(),
            message,
        };
        let config: Config = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        for (id, route) in &config.providers {
            route
                .limits()
                .and(route.allowed_hosts())
                .map_err(|e| invalid(format!("providers.{id}.{e}")))?;
            if route.timeout_secs == Some(0) {
                return Err(invalid(format!(
                    "providers.{id}.timeout_secs must be positive"
                )));
            }
        }
        if config.request_timeout_secs == 0 {
            return Err(invalid("request_timeout_secs must be positive".into()));
        }
        Ok(config)
    }
}

impl Config {
    /// Where compiled plugins are cached, if anywhere.
    pub fn plugin_cache_dir(&self) -> Option<PathBuf> {
        match &self.plugin_cache_dir {
            None => Some(self.plugins_dir.join(".cache")),
            Some(dir) if dir.as_os_str().is_empty() => None,
            Some(dir) => Some(dir.clone()),
        }
    }
}

impl RouteConfig {
    pub fn needs_api_key(&self) -> bool {
        self.api_key_required.unwrap_or(self.base_url.is_some())
    }

    pub fn timeout(&self, config: &Config) -> Duration {
        Duration::from_secs(self.timeout_secs.unwrap_or(config.request_timeout_secs))
    }

    /// The limits of this route's plugin instances.
    pub fn limits(&self) -> Result<Limits, String> {
        let defaults = Limits::default();
        let positive = |value: Option<u64>, key: &str| match value {
            Some(0) => Err(format!("{key} must be positive")),
            other => Ok(other),
        };
        let ms = |value: Option<u64>, key: &str, default: Duration| {
            positive(value, key).map(|v| v.map(Duration::from_millis).unwrap_or(default))
        };
        let memory_bytes = match positive(self.memory_limit_mb, "memory_limit_mb")? {
            None => defaults.memory_bytes,
            Some(mb) if mb * 1024 * 1024 > MAX_MEMORY_LIMIT_BYTES as u64 => {
                return Err(format!(
                    "memory_limit_mb must be at most {}",
                    MAX_MEMORY_LIMIT_BYTES / 1024 / 1024
                ));
            }
            Some(mb) => (mb * 1024 * 1024) as usize,
        };
        Ok(Limits {
            memory_bytes,
            cpu_time: ms(self.cpu_time_ms, "cpu_time_ms", defaults.cpu_time)?,
            connect_timeout: ms(
                self.connect_timeout_ms,
                "connect_timeout_ms",
                defaults.connect_timeout,
            )?,
            first_byte_timeout: ms(
                self.first_byte_timeout_ms,
                "first_byte_timeout_ms",
                defaults.first_byte_timeout,
            )?,
            idle_timeout: ms(
                self.idle_timeout_ms,
                "idle_timeout_ms",
                defaults.idle_timeout,
            )?,
            max_response_bytes: positive(self.max_response_bytes, "max_response_bytes")?
                .unwrap_or(defaults.max_response_bytes),
            max_http_requests: match self.max_http_requests {
                Some(0) => return Err("max_http_requests must be positive".into()),
                Some(n) => n,
                None => defaults.max_http_requests,
            },
        })
    }

    /// The hosts this route's plugin may reach.
    pub fn allowed_hosts(&self) -> Result<AllowedHosts, String> {
        let mut allowed = match &self.base_url {
            Some(url) => AllowedHosts::from_base_url(url).map_err(|e| format!("base_url: {e}"))?,
            None => AllowedHosts::none(),
        };
        for (i, host) in self.allowed_hosts.iter().enumerate() {
            allowed
                .add(host)
                .map_err(|e| format!("allowed_hosts[{i}]: {e}"))?;
        }
        Ok(allowed)
    }

    /// The sandbox of this route's plugin instances.
    pub fn sandbox(&self) -> Result<Sandbox, String> {
        Sandbox::new(self.allowed_hosts()?, self.limits()?)
    }

    /// The route's plugin settings as a JSON object text.
    pub fn settings_json(&self) -> String {
        serde_json::to_string(&self.settings).unwrap_or_else(|_| "{}".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_config_is_the_default_and_parses() {
        let config = Config::load(None).expect("built-in config parses");
        for route in ["demo", "openai", "cb-openai-eu", "cb-openai-us"] {
            assert!(
                config.providers.contains_key(route),
                "missing route {route}"
            );
        }
        let eu = &config.providers["cb-openai-eu"];
        assert_eq!(eu.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        assert_eq!(eu.pricing["gpt-4o-mini"].output_per_mtok, 0.60);
        assert!(config.providers["openai"].api_key_env.is_none());
    }

    #[test]
    fn unknown_route_keys_become_plugin_settings() {
        let config = Config::parse(
            "[providers.x]\nplugin = \"openai\"\nlegacy_completions = true\n",
            "test",
        )
        .unwrap();
        assert_eq!(
            config.providers["x"].settings_json(),
            r#"{"legacy_completions":true}"#
        );
    }

    #[test]
    fn bad_values_are_rejected_with_their_place() {
        let err = Config::parse("listen = 5", "test").unwrap_err().to_string();
        assert!(err.contains("listen"), "{err}");
        let err = Config::parse(
            "[providers.x]\nplugin = \"openai\"\nbase_url = \"not a url\"\n",
            "test",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("providers.x.base_url"), "{err}");
        let err = Config::parse(
            "[providers.x]\nplugin = \"openai\"\nmemory_limit_mb = 0\n",
            "test",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("providers.x.memory_limit_mb"), "{err}");
    }
}
