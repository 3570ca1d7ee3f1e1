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
    /// Serving threads, each with its own single-threaded runtime (0: one per
    /// CPU this process may use). Read at start; a hot reload does not change it.
    #[serde(default)]
    pub workers: usize,
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    #[serde(default = "default_true")]
    pub demo_project: bool,
    #[serde(default = "default_request_timeout_secs")]
    pub request_timeout_secs: u64,
    /// Cap on the text of a request after its `{{variables}}` are filled in (prompt and
    /// message contents together). Default: `max_body_bytes`.
    #[serde(default)]
    pub max_expanded_bytes: Option<usize>,
    /// How long a client may take to send a request's headers and body (408 after that).
    #[serde(default = "default_request_read_timeout_secs")]
    pub request_read_timeout_secs: u64,
    /// Open client connections at most; further ones wait in the listen backlog.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Plugin instances at most at once (one per request being served); over it, 503 with
    /// `Retry-After`. Read at start.
    #[serde(default = "default_max_plugin_instances")]
    pub max_plugin_instances: u32,
    /// How long shutdown waits for in-flight requests before ending them (recorded as
    /// cancelled).
    #[serde(default = "default_shutdown_grace_secs")]
    pub shutdown_grace_secs: u64,
    /// What invocation records keep of request and response bodies.
    #[serde(default)]
    pub record_bodies: RecordBodies,
    /// With `record_bodies = "truncated"`: the most kept of each body.
    #[serde(default = "default_record_body_max_bytes")]
    pub record_body_max_bytes: usize,
    /// Records older than this many days are deleted in the background (absent: kept forever).
    #[serde(default)]
    pub record_retention_days: Option<u32>,
    #[serde(default)]
    pub providers: BTreeMap<String, RouteConfig>,
}

/// What an invocation record keeps of the request and response bodies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordBodies {
    /// The whole bodies.
    Full,
    /// At most `record_body_max_bytes` of each.
    #[default]
    Truncated,
    /// No bodies (usage, cost, status and errors are still recorded).
    None,
}

/// One provider route: the id callers put in `providerConfig.provider`.
///
/// Every key of a route is one of these: an unknown one (a misspelt limit, a key of a feature
/// this build lacks) is refused rather than silently ignored. What only the plugin reads goes in
/// the route's own `settings` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
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
    /// `[providers.ID.settings]`: plugin-specific settings, handed to the plugin as JSON. The
    /// gateway does not read them; the plugin checks them on each call.
    #[serde(default)]
    pub settings: toml::Table,
}

/// What one model costs, in dollars per million tokens of each token class (see
/// [`crate::pricing::cost`] for how a call's usage is priced).
///
/// In the config, a route's `[providers.ID.pricing."MODEL"]` table; in the shipped price table
/// (`host/prices.toml`), one entry per plugin and model. An entry replaces the whole price of
/// its model: fields it leaves out are not taken from another source.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "PriceFields")]
pub struct Price {
    /// Prompt tokens neither read from nor written to the provider's cache.
    pub input_per_mtok: f64,
    /// Completion tokens, reasoning tokens included (providers bill them as output).
    pub output_per_mtok: f64,
    /// Prompt tokens read from the provider's cache (OpenAI cached input, Anthropic cache hits,
    /// Gemini context-cache reads). Absent: `input_per_mtok`.
    pub cached_input_per_mtok: Option<f64>,
    /// Prompt tokens written to the provider's cache (Anthropic cache writes). Absent:
    /// `input_per_mtok`.
    pub cache_write_per_mtok: Option<f64>,
    /// Higher prices for calls whose prompt is long (Gemini 2.5 Pro above 200k tokens, Claude
    /// Sonnet 4 and 4.5 above 200k): they apply to every token of such a call.
    pub long_context: Option<LongContextPrice>,
}

/// The prices of a call whose prompt (cached and cache-written tokens included) has more than
/// `above_prompt_tokens` tokens. Fields as in [`Price`]; absent cache prices fall back to this
/// tier's `input_per_mtok`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongContextPrice {
    pub above_prompt_tokens: u32,
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
    #[serde(default)]
    pub cache_write_per_mtok: Option<f64>,
}

/// [`Price`] as written, before its values are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFields {
    input_per_mtok: f64,
    output_per_mtok: f64,
    #[serde(default)]
    cached_input_per_mtok: Option<f64>,
    #[serde(default)]
    cache_write_per_mtok: Option<f64>,
    #[serde(default)]
    long_context: Option<LongContextPrice>,
}

impl TryFrom<PriceFields> for Price {
    type Error = String;

    fn try_from(fields: PriceFields) -> Result<Price, String> {
        let mut values = vec![
            ("input_per_mtok", Some(fields.input_per_mtok)),
            ("output_per_mtok", Some(fields.output_per_mtok)),
            ("cached_input_per_mtok", fields.cached_input_per_mtok),
            ("cache_write_per_mtok", fields.cache_write_per_mtok),
        ];
        if let Some(long) = &fields.long_context {
            values.extend([
                ("long_context.input_per_mtok", Some(long.input_per_mtok)),
                ("long_context.output_per_mtok", Some(long.output_per_mtok)),
                (
                    "long_context.cached_input_per_mtok",
                    long.cached_input_per_mtok,
                ),
                (
                    "long_context.cache_write_per_mtok",
                    long.cache_write_per_mtok,
                ),
            ]);
        }
        // A negative or NaN price would make every cost it touches meaningless.
        for (key, value) in values {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                return Err(format!(
                    "{key} must be a finite number of dollars, not negative (got {value})"
                ));
            }
        }
        Ok(Price {
            input_per_mtok: fields.input_per_mtok,
            output_per_mtok: fields.output_per_mtok,
            cached_input_per_mtok: fields.cached_input_per_mtok,
            cache_write_per_mtok: fields.cache_write_per_mtok,
            long_context: fields.long_context,
        })
    }
}

impl Price {
    /// A price with only input and output prices (cache reads and writes at the input price).
    pub fn flat(input_per_mtok: f64, output_per_mtok: f64) -> Price {
        Price {
            input_per_mtok,
            output_per_mtok,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
            long_context: None,
        }
    }
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
fn default_request_read_timeout_secs() -> u64 {
    30
}
fn default_max_connections() -> usize {
    4096
}
fn default_max_plugin_instances() -> u32 {
    1000
}
fn default_shutdown_grace_secs() -> u64 {
    30
}
fn default_record_body_max_bytes() -> usize {
    64 * 1024
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
        let document = toml::Deserializer::parse(text).map_err(|e| invalid(e.to_string()))?;
        let config: Config =
            serde_path_to_error::deserialize(document).map_err(|e| invalid(placed(&e)))?;
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
        for (key, value) in [
            ("request_timeout_secs", config.request_timeout_secs),
            (
                "request_read_timeout_secs",
                config.request_read_timeout_secs,
            ),
            ("max_connections", config.max_connections as u64),
            (
                "max_plugin_instances",
                u64::from(config.max_plugin_instances),
            ),
            ("max_body_bytes", config.max_body_bytes as u64),
            (
                "max_expanded_bytes",
                config.max_expanded_bytes.map_or(1, |v| v as u64),
            ),
            (
                "record_retention_days",
                config.record_retention_days.map_or(1, u64::from),
            ),
        ] {
            if value == 0 {
                return Err(invalid(format!("{key} must be positive")));
            }
        }
        Ok(config)
    }
}

/// A deserialization error with its place in front (`providers.x.memory_limt_mb: ...`): toml
/// quotes the offending line but not the table it is in, and routes share key names.
fn placed(error: &serde_path_to_error::Error<toml::de::Error>) -> String {
    use serde_path_to_error::Segment;
    let (path, inner) = (error.path(), error.inner());
    if path.iter().next().is_none() {
        return inner.to_string();
    }
    let mut message = format!("{path}: {}", inner.to_string().trim_end());
    let segments: Vec<&Segment> = path.iter().collect();
    // Plugin settings used to be keys of the route itself: say where they live now.
    if let [
        Segment::Map { key: table },
        Segment::Map { .. },
        Segment::Map { .. },
    ] = &segments[..]
        && table == "providers"
        && inner.message().starts_with("unknown field")
    {
        message.push_str(
            "\n(a setting only the route's plugin reads goes in the route's \
             [providers.ID.settings] table)",
        );
    }
    message
}

impl Config {
    /// The cap on a request's text once its variables are filled in.
    pub fn max_expanded_bytes(&self) -> usize {
        self.max_expanded_bytes.unwrap_or(self.max_body_bytes)
    }

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
    fn the_settings_table_reaches_the_plugin_as_json() {
        let config = Config::parse(
            "[providers.x]\nplugin = \"openai\"\n[providers.x.settings]\n\
             legacy_completions = true\napi_key_header = \"api-key\"\n",
            "test",
        )
        .expect("parses");
        assert_eq!(
            config.providers["x"].settings_json(),
            r#"{"api_key_header":"api-key","legacy_completions":true}"#
        );
        let config = Config::parse("[providers.x]\nplugin = \"openai\"\n", "test").expect("parses");
        assert_eq!(config.providers["x"].settings_json(), "{}");
    }

    #[test]
    fn a_misspelt_route_key_is_refused_with_its_route_and_the_known_keys() {
        let err = Config::parse(
            "[providers.y]\nplugin = \"echo\"\n\
             [providers.x]\nplugin = \"openai\"\nmemory_limt_mb = 128\n",
            "test",
        )
        .expect_err("an unknown route key is refused")
        .to_string();
        assert!(err.contains("providers.x.memory_limt_mb"), "{err}");
        assert!(err.contains("unknown field `memory_limt_mb`"), "{err}");
        for known in [
            "`memory_limit_mb`",
            "`cpu_time_ms`",
            "`settings`",
            "`pricing`",
        ] {
            assert!(err.contains(known), "{known} not listed: {err}");
        }
        assert!(err.contains("[providers.ID.settings]"), "{err}");
    }

    /// The example config lists the keys a route may have; serde's "expected one of" list is
    /// the struct's own, so a key added to [`RouteConfig`] and not to the example fails here.
    #[test]
    fn the_example_names_every_route_key() {
        let err = Config::parse("[providers.x]\nplugin = \"echo\"\nnot_a_key = 1\n", "test")
            .expect_err("an unknown route key is refused")
            .to_string();
        let (_, expected) = err
            .split_once("expected one of")
            .expect("serde lists the keys");
        let keys: Vec<&str> = expected
            .lines()
            .next()
            .unwrap_or_default()
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        assert!(keys.contains(&"memory_limit_mb"), "{err}");
        let documented = DEFAULT_CONFIG
            .split_once("# Route keys:")
            .map(|(_, rest)| {
                rest.split_once("\n#\n")
                    .map_or(rest, |(paragraph, _)| paragraph)
            })
            .expect("the example has a `Route keys:` paragraph");
        let words: Vec<&str> = documented
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        for key in keys {
            assert!(
                words.contains(&key),
                "route key {key} is missing from the example's `Route keys:` paragraph"
            );
        }
    }

    #[test]
    fn a_plugin_setting_left_on_the_route_or_an_unknown_table_is_refused() {
        for (text, key) in [
            (
                "[providers.x]\nplugin = \"openai\"\nlegacy_completions = true\n",
                "providers.x.legacy_completions",
            ),
            (
                "[providers.x]\nplugin = \"openai\"\n[providers.x.setting]\nlegacy_completions = true\n",
                "providers.x.setting",
            ),
        ] {
            let err = Config::parse(text, "test").expect_err(text).to_string();
            assert!(err.contains(key), "{text}: {err}");
            assert!(err.contains("`settings`"), "{text}: {err}");
        }
    }

    #[test]
    fn an_unknown_top_level_key_is_refused_with_the_known_keys() {
        let err = Config::parse("request_timeout = 5\n", "test")
            .expect_err("an unknown top-level key is refused")
            .to_string();
        assert!(err.contains("unknown field `request_timeout`"), "{err}");
        for known in ["`request_timeout_secs`", "`listen`", "`providers`"] {
            assert!(err.contains(known), "{known} not listed: {err}");
        }
        // The hint about plugin settings is for route keys only.
        assert!(!err.contains("settings]"), "{err}");
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

    /// The example config with its commented-out routes switched on.
    fn example_with_commented_routes() -> String {
        let mut text = DEFAULT_CONFIG.to_owned();
        let mut in_route = false;
        for line in DEFAULT_CONFIG.lines() {
            let Some(rest) = line.strip_prefix("# ") else {
                in_route = false;
                continue;
            };
            if rest.starts_with("[providers.") {
                in_route = true;
            } else if !(in_route
                && rest.split_once(" = ").is_some_and(|(key, _)| {
                    key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                }))
            {
                in_route = false;
                continue;
            }
            text.push_str(rest);
            text.push('\n');
        }
        text
    }

    #[test]
    fn every_commented_route_of_the_example_parses() {
        let text = example_with_commented_routes();
        let config = Config::parse(&text, "example with commented routes").expect("parses");
        for route in [
            "anthropic",
            "gemini",
            "azure",
            "azure-deployments",
            "groq",
            "mistral",
            "together",
            "deepseek",
            "fireworks",
            "openrouter",
            "vllm",
            "llama-cpp",
            "ollama",
        ] {
            let route = config
                .providers
                .get(route)
                .unwrap_or_else(|| panic!("no commented route {route} in the example"));
            assert!(route.base_url.is_some() && route.default_model.is_some());
        }
        let deployments = &config.providers["azure-deployments"];
        assert_eq!(
            deployments.settings_json(),
            r#"{"azure_api_version":"2024-10-21"}"#
        );
        assert_eq!(
            config.providers["azure"].settings_json(),
            r#"{"api_key_header":"api-key"}"#
        );
        assert_eq!(
            config.providers["anthropic"].settings_json(),
            r#"{"default_max_tokens":4096}"#
        );
        for route in ["gemini", "groq", "ollama"] {
            assert_eq!(config.providers[route].settings_json(), "{}", "{route}");
        }
        assert_eq!(
            deployments.pricing["my-gpt-4o-mini"].cached_input_per_mtok,
            Some(0.075)
        );
        assert!(!config.providers["ollama"].needs_api_key());
    }

    fn route_price(pricing: &str) -> Result<Price, String> {
        let text =
            format!("[providers.x]\nplugin = \"openai\"\n[providers.x.pricing.\"m\"]\n{pricing}\n");
        Config::parse(&text, "test")
            .map(|config| config.providers["x"].pricing["m"])
            .map_err(|e| e.to_string())
    }

    #[test]
    fn prices_take_optional_cache_and_long_context_prices() {
        assert_eq!(
            route_price("input_per_mtok = 3\noutput_per_mtok = 15"),
            Ok(Price::flat(3.0, 15.0))
        );
        let price = route_price(
            "input_per_mtok = 3\noutput_per_mtok = 15\ncached_input_per_mtok = 0.3\n\
             cache_write_per_mtok = 3.75\n\
             long_context = { above_prompt_tokens = 200000, input_per_mtok = 6, output_per_mtok = 22.5 }",
        )
        .expect("parses");
        assert_eq!(price.cached_input_per_mtok, Some(0.3));
        assert_eq!(price.cache_write_per_mtok, Some(3.75));
        assert_eq!(
            price.long_context,
            Some(LongContextPrice {
                above_prompt_tokens: 200_000,
                input_per_mtok: 6.0,
                output_per_mtok: 22.5,
                cached_input_per_mtok: None,
                cache_write_per_mtok: None,
            })
        );
    }

    #[test]
    fn bad_prices_are_rejected_with_their_place() {
        for (pricing, needle) in [
            ("input_per_mtok = -1\noutput_per_mtok = 1", "input_per_mtok"),
            (
                "input_per_mtok = 1\noutput_per_mtok = 1\ncached_input_per_mtok = nan",
                "cached_input_per_mtok",
            ),
            (
                "input_per_mtok = 1\noutput_per_mtok = 1\ncache_write_per_mtok = inf",
                "cache_write_per_mtok",
            ),
            (
                "input_per_mtok = 1\noutput_per_mtok = 1\n\
                 long_context = { above_prompt_tokens = 10, input_per_mtok = -2, output_per_mtok = 1 }",
                "long_context.input_per_mtok",
            ),
            // A misspelt key would otherwise silently bill at the input price.
            (
                "input_per_mtok = 1\noutput_per_mtok = 1\ncached_input_price = 0.1",
                "cached_input_price",
            ),
            ("input_per_mtok = 1", "output_per_mtok"),
        ] {
            let err = route_price(pricing).expect_err(pricing);
            // toml points at the offending line; the message names the key.
            assert!(err.contains(needle), "{pricing}: {err}");
        }
    }
}
