//! The gateway's configuration: one TOML file, every key with a default, checked as it is read.
//!
//! The defaults are `gateway.example.toml` at the repository root, embedded in
//! the binary, so the quick start needs no file at all. A config that parses is
//! one the gateway can serve with: the values check themselves ([`types`]), and
//! an unknown key is refused rather than silently ignored. It builds nothing: the routes
//! and sandboxes made from it are [`crate::routing`]'s, and applying edits of the file while
//! the gateway serves is the state's ([`crate::state::reload`]). Every key is documented in
//! `docs/configuration.md`, which a test holds to the keys serde accepts.

pub mod env;
mod mcp;
pub mod oidc;
mod price;
pub mod types;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use mcp::{McpConfig, McpServerConfig, TOOL_SEPARATOR};
pub use price::{BadPrice, LongContextPrice, MAX_PER_MTOK, MAX_PER_UNIT, Price, valid_per_mtok};
use types::{BaseUrl, HostEntry, MemoryMb, Positive};
pub use types::{OtlpEndpoint, OtlpHeaders, RedisUrl, SampleRatio};

/// The shipped example config; also the configuration used when no file is given.
pub const DEFAULT_CONFIG: &str = include_str!("../../../gateway.example.toml");
/// How messages name [`DEFAULT_CONFIG`] where they would name a file.
pub const DEFAULT_CONFIG_ORIGIN: &str = "(built-in defaults)";

/// Why a config was refused: where (`origin`: the file, or the built-in defaults) and what.
#[derive(Debug)]
pub struct ConfigError {
    pub origin: String,
    pub problem: Problem,
}

impl ConfigError {
    fn new(origin: &str, problem: Problem) -> ConfigError {
        ConfigError {
            origin: origin.to_owned(),
            problem,
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.problem {
            Problem::Read(e) => write!(f, "cannot read config file {}: {e}", self.origin),
            problem => write!(f, "invalid config {}: {problem}", self.origin),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.problem.source()
    }
}

/// What is wrong with a config, in words that begin with the key they name.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// Not TOML.
    #[error("{0}")]
    Syntax(#[source] Box<toml::de::Error>),
    /// TOML, with a key or value the gateway refuses.
    // Boxed: a config error is rare, and `Result<Config, _>` is returned on every load.
    #[error("{}", placed(.0))]
    Invalid(#[source] Box<serde_path_to_error::Error<toml::de::Error>>),
    /// A model alias naming a route the config does not have.
    #[error("models.{alias}.route: no route {route:?} in [providers]")]
    AliasRoute { alias: String, route: String },
    /// A route's `fallbacks` naming a route the config does not have.
    #[error("providers.{route}.fallbacks[{index}]: no route {fallback:?} in [providers]")]
    FallbackRoute {
        route: String,
        index: usize,
        fallback: String,
    },
    /// A route's `fallbacks` naming the route itself.
    #[error("providers.{route}.fallbacks[{index}]: a route cannot fall back to itself")]
    FallbackSelf { route: String, index: usize },
    /// A route named twice in one `fallbacks` list: the second try would only repeat the first.
    #[error("providers.{route}.fallbacks[{index}]: {fallback:?} is already listed")]
    FallbackTwice {
        route: String,
        index: usize,
        fallback: String,
    },
    /// Fallbacks leading back to where they started; `cycle` spells it (`a -> b -> a`), and
    /// `route`'s `fallbacks[index]` is its first step.
    #[error("providers.{route}.fallbacks[{index}]: fallbacks form a cycle: {cycle}")]
    FallbackCycle {
        route: String,
        index: usize,
        cycle: String,
    },
    /// A route's `targets` that cannot be served as written; `reason` says why.
    #[error("providers.{route}.targets: {reason}")]
    Targets { route: String, reason: &'static str },
    /// `eject_secs` on a route that never ejects.
    #[error(
        "providers.{route}.eject_secs: needs eject_after_failures (without it the route never ejects an upstream)"
    )]
    EjectSecs { route: String },
    /// A guard id that no `[guards.ID]` defines.
    #[error("{at}: no guard {id:?} is defined (add a [guards.{id}] table)")]
    UnknownGuard { at: String, id: String },
    /// The same guard twice in one list.
    #[error("{at}: guard {id:?} is already in the list")]
    GuardTwice { at: String, id: String },
    /// An `admin_token` that could be guessed (its length only: the token is never repeated).
    #[error(
        "admin_token: must be at least {min} bytes, not {len} (it signs in to the admin API and \
         the console; make one with `openssl rand -hex 32`, or leave the key out to turn both off)",
        min = MIN_ADMIN_TOKEN_BYTES
    )]
    AdminTokenTooShort { len: usize },
    /// An `[mcp_servers.ID]` that cannot be used: its id (`/mcp` could not name its tools by
    /// it), or keys that do not go together.
    #[error("mcp_servers.{id}: {reason}")]
    McpServer { id: String, reason: &'static str },
    /// An `[oidc]` table that cannot be used.
    #[error("{0}")]
    Oidc(String),
    /// More `retries` than a request's one deadline could sensibly hold.
    #[error(
        "providers.{route}.retries: must be at most {max}, not {retries}",
        max = MAX_RETRIES
    )]
    Retries { route: String, retries: u32 },
    /// A `GATEWAY_*` variable whose value the key it sets refuses (the value is not repeated:
    /// it may be a secret).
    #[error("{var} (sets {key}): {why}")]
    Env {
        var: &'static str,
        key: &'static str,
        why: String,
    },
}

/// The whole config file. A key left out takes its value from [`Config::default`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub listen: SocketAddr,
    /// SQLite file path, or a `sqlite://PATH` URL (one machine); or a
    /// `postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=...` URL (several replicas).
    pub database: String,
    /// Where invocation records wait, on this machine, until the database has
    /// them (so an answered request's record survives a crash or a database
    /// outage). One directory per gateway process. Default: beside a SQLite
    /// file (`DB.records`), `./data/records` with PostgreSQL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_dir: Option<PathBuf>,
    pub plugins_dir: PathBuf,
    /// Compiled plugins are kept here across restarts (default: `.cache` in
    /// `plugins_dir`). Empty string: no cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_cache_dir: Option<PathBuf>,
    /// Where rate-limit and budget counters live, shared by every replica
    /// using the same Redis and prefix (absent: in this process). Read at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_url: Option<RedisUrl>,
    /// Prefix of every Redis key the gateway writes.
    pub redis_key_prefix: String,
    /// With `redis_url`: each replica takes a block of each limit (1%) ahead of its requests
    /// and decides them in process until it is used, instead of two Redis calls a request.
    /// Never beyond a limit; a replica may refuse while others hold unused blocks. Read at
    /// start.
    pub limit_leases: bool,
    /// Bearer token for the `/admin/...` endpoints; without one they answer 401. At least
    /// [`MIN_ADMIN_TOKEN_BYTES`] bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<String>,
    /// Whether `/ui` serves the admin console (where `admin_token` or `[oidc]` is set: either
    /// signs in to it).
    pub console: bool,
    /// `[oidc]`: single sign-on to the console with an OpenID Connect provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oidc: Option<oidc::OidcConfig>,
    /// How long a console session lasts after signing in.
    pub console_session_secs: Positive<NonZeroU64>,
    /// Whether requests are counted for `GET /metrics` (false: nothing is recorded and
    /// `/metrics` answers 404). Read at start.
    pub metrics: bool,
    /// Bearer token `GET /metrics` requires (absent: it is open, like `/healthz`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_token: Option<String>,
    /// Where `GET /metrics` is served instead of the main listener (e.g. an address only the
    /// monitoring network reaches). Read at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<SocketAddr>,
    /// Where spans are exported, over OTLP/HTTP (protobuf): the collector's URL
    /// (`http://HOST:4318`; spans go to its `/v1/traces`). Absent: the gateway makes no spans,
    /// and passes a caller's `traceparent` on to the upstream as it came. Read at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<OtlpEndpoint>,
    /// Headers of every export (a collector's auth). Read at start.
    #[serde(skip_serializing_if = "OtlpHeaders::is_empty")]
    pub otlp_headers: OtlpHeaders,
    /// Share of new traces exported (0.0 to 1.0); a request whose caller's `traceparent` says
    /// sampled or not is exported or not as the caller decided. Read at start.
    pub trace_sample_ratio: SampleRatio,
    /// Serving threads, each with its own single-threaded runtime (0: one per
    /// CPU this process may use). Read at start; a hot reload does not change it.
    pub workers: usize,
    pub max_body_bytes: Positive<NonZeroUsize>,
    /// The request bodies of every request in flight together, in bytes; a request whose body
    /// would take the sum over it is refused (503, `Retry-After: 1`). A body is counted from
    /// the moment it is read (or, when its `Content-Length` is declared, before reading it)
    /// until its request ends, stream included.
    pub max_inflight_body_bytes: Positive<NonZeroUsize>,
    /// Cap on a Responses API conversation continued with `previous_response_id`: the kept
    /// conversation and the new request together, in bytes; over it: 400 naming
    /// `previous_response_id`.
    pub max_conversation_bytes: Positive<NonZeroUsize>,
    /// Cap on one file uploaded to `/v1/files`; over it: 413.
    pub max_file_bytes: Positive<NonZeroU64>,
    /// Cap on a project's files together, each upload in progress counted at the most it may
    /// take; over it: 413.
    pub max_project_file_bytes: Positive<NonZeroU64>,
    /// Batch lines this gateway runs at once, all batches together.
    pub batch_concurrency: Positive<NonZeroU32>,
    /// How long a line a gateway took stays its own without being renewed (every third of it,
    /// while the line runs): a gateway that died gives its lines up this long after.
    pub batch_lease_secs: Positive<NonZeroU64>,
    pub demo_project: bool,
    pub request_timeout_secs: Positive<NonZeroU64>,
    /// Tries at upstreams one request may make at most, retries, other targets and fallbacks
    /// together (routes may override: the requested route's value holds for the request).
    pub max_attempts: Positive<NonZeroU32>,
    /// Cap on the text of a request after its `{{variables}}` are filled in (prompt and
    /// message contents together). Default: `max_body_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_expanded_bytes: Option<Positive<NonZeroUsize>>,
    /// Cap on one image, audio clip or document of a request once decoded from base64; over
    /// it: 413. The body holds it as base64 too, so `max_body_bytes` must leave room for it.
    pub max_part_bytes: Positive<NonZeroUsize>,
    /// How long a client may take to send a request's headers and body (408 after that); a new
    /// connection whose first request's headers have not arrived by then is closed.
    pub request_read_timeout_secs: Positive<NonZeroU64>,
    /// How long a client connection with no request in flight stays open after its last
    /// answer (HTTP/1.1 keep-alive and HTTP/2 alike). The routes' `idle_timeout_ms` is the
    /// upstream side.
    pub client_idle_timeout_secs: Positive<NonZeroU64>,
    /// Open client connections at most; further ones wait in the listen backlog.
    pub max_connections: Positive<NonZeroUsize>,
    /// Plugin instances at most at once (one per request being served); over it, 503 with
    /// `Retry-After`. Read at start.
    pub max_plugin_instances: Positive<NonZeroU32>,
    /// Instances made ahead of a slow plugin's calls (Python) copy its memory image in as
    /// they are made, from a second compilation of the plugin: a lower median latency for
    /// more memory and CPU (docs/plugins.md, "Instances made ahead"). Read at start.
    pub plugin_copy_ahead: bool,
    /// How long shutdown waits for in-flight requests before ending them (recorded as
    /// cancelled). Zero: no wait.
    pub shutdown_grace_secs: u64,
    /// How the log on stderr is written. Read at start.
    pub log_format: LogFormat,
    /// What invocation records keep of request and response bodies.
    pub record_bodies: RecordBodies,
    /// With `record_bodies = "truncated"`: the most kept of each body.
    pub record_body_max_bytes: usize,
    /// Records older than this many days are deleted in the background (absent: kept forever).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_retention_days: Option<Positive<NonZeroU32>>,
    /// Audit events older than this many days are deleted in the background (absent: kept
    /// forever). Nothing else deletes or changes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_retention_days: Option<Positive<NonZeroU32>>,
    /// A price table in the format of `host/prices.toml` (written by `gateway prices import`)
    /// whose prices come before the shipped table's, after the routes' `pricing` tables.
    /// Watched and reloaded when it changes; an edit that does not parse is refused and the
    /// prices already loaded stay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prices_file: Option<PathBuf>,
    /// The bytes the response cache may keep in this process (entries of routes with
    /// `cache_ttl_secs`; with `redis_url`, only while Redis is unreachable). Read at start.
    pub cache_max_bytes: Positive<NonZeroU64>,
    pub providers: BTreeMap<String, RouteConfig>,
    /// `[guards.ID]`: guard plugins that check requests before they reach a provider and
    /// answers before they reach the caller. A route, `global_guards` or a project names them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub guards: BTreeMap<String, GuardConfig>,
    /// Guards every request goes through, on every route, before the route's own. (Not a
    /// top-level `guards = [...]`: TOML cannot make `guards` both this list and the
    /// `[guards.ID]` tables.)
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub global_guards: Vec<String>,
    /// `[models.ALIAS]`: names the OpenAI- and Anthropic-format endpoints
    /// accept as `model`, each standing for a route and one of its models.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, ModelAlias>,
    /// `[mcp]`: the bounds of tool calls through `POST /mcp`.
    pub mcp: McpConfig,
    /// `[mcp_servers.ID]`: the MCP servers whose tools `POST /mcp` serves, as `ID__TOOL`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
}

/// `[guards.ID]`: a guard plugin and its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardConfig {
    /// File stem of the guard plugin.
    pub plugin: String,
    /// How a streamed answer meets this guard (see [`GuardStream`]).
    #[serde(default)]
    pub guard_stream: GuardStream,
    /// Memory of one guard instance (default: a route's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_mb: Option<MemoryMb>,
    /// CPU time of one check (default: a route's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time_ms: Option<Positive<NonZeroU64>>,
    /// `[guards.ID.settings]`: handed to the guard as JSON with every check.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub settings: toml::Table,
}

/// How a guard judges a streamed answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardStream {
    /// The stream is held until the whole answer is checked, then sent (rewritten, or refused):
    /// the guard decides what the caller sees, and the caller sees nothing until the end.
    #[default]
    Buffer,
    /// The stream goes to the caller as it comes; the whole answer is checked at its end and
    /// the verdict recorded and counted, but not applied: nothing waits, nothing is enforced.
    Observe,
}

/// `[models.ALIAS]`: what a model alias stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelAlias {
    /// The route (`[providers.ID]`).
    pub route: String,
    /// The route's model; absent: the route's `default_model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Where a `model` of the OpenAI- or Anthropic-format endpoints points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelTarget<'a> {
    pub route: &'a str,
    /// `None`: the route's default model.
    pub model: Option<&'a str>,
}

// Checked when the crate compiles: a zero here is a build error, not a panic.
const MAX_BODY_BYTES: Positive<NonZeroUsize> =
    Positive::new(NonZeroUsize::new(4 * 1024 * 1024).expect("not zero"));
const MAX_PART_BYTES: Positive<NonZeroUsize> =
    Positive::new(NonZeroUsize::new(20 * 1024 * 1024).expect("not zero"));
const MAX_INFLIGHT_BODY_BYTES: Positive<NonZeroUsize> =
    Positive::new(NonZeroUsize::new(512 * 1024 * 1024).expect("not zero"));
/// Four bodies of the largest size: a long agent's conversation, not an unbounded one.
const MAX_CONVERSATION_BYTES: Positive<NonZeroUsize> =
    Positive::new(NonZeroUsize::new(16 * 1024 * 1024).expect("not zero"));
/// OpenAI's Batch API's own cap on an input file (200 MB).
const MAX_FILE_BYTES: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(200 * 1024 * 1024).expect("not zero"));
/// Twenty-five of the largest files.
const MAX_PROJECT_FILE_BYTES: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(5 * 1024 * 1024 * 1024).expect("not zero"));
/// Few enough that a 2-core gateway's interactive requests keep their latency under a running
/// batch (BENCHMARKS.md).
const BATCH_CONCURRENCY: Positive<NonZeroU32> =
    Positive::new(NonZeroU32::new(8).expect("not zero"));
const BATCH_LEASE_SECS: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(60).expect("not zero"));
const REQUEST_TIMEOUT_SECS: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(120).expect("not zero"));
const REQUEST_READ_TIMEOUT_SECS: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(30).expect("not zero"));
/// Twelve hours: a working day, signed in once.
const CONSOLE_SESSION_SECS: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(12 * 3600).expect("not zero"));
const CLIENT_IDLE_TIMEOUT_SECS: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(60).expect("not zero"));
const MAX_CONNECTIONS: Positive<NonZeroUsize> =
    Positive::new(NonZeroUsize::new(4096).expect("not zero"));
const MAX_PLUGIN_INSTANCES: Positive<NonZeroU32> =
    Positive::new(NonZeroU32::new(1000).expect("not zero"));
const CACHE_MAX_BYTES: Positive<NonZeroU64> =
    Positive::new(NonZeroU64::new(256 * 1024 * 1024).expect("not zero"));
const MAX_ATTEMPTS: Positive<NonZeroU32> = Positive::new(NonZeroU32::new(6).expect("not zero"));
/// The completion tokens reserved for a request without `max_tokens` on a route that names
/// none: the output cap most models' APIs default to or allow without a long-output option.
pub const RESERVE_MAX_TOKENS: u64 = 4096;

impl Default for Config {
    /// What an empty config file gives: every key at its default, and no routes.
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database: "./data/gateway.db".to_owned(),
            journal_dir: None,
            plugins_dir: PathBuf::from("./data/plugins"),
            plugin_cache_dir: None,
            redis_url: None,
            redis_key_prefix: "gateway:".to_owned(),
            limit_leases: false,
            admin_token: None,
            console: true,
            oidc: None,
            console_session_secs: CONSOLE_SESSION_SECS,
            metrics: true,
            metrics_token: None,
            metrics_listen: None,
            otlp_endpoint: None,
            otlp_headers: OtlpHeaders::default(),
            trace_sample_ratio: SampleRatio::ALL,
            workers: 0,
            max_body_bytes: MAX_BODY_BYTES,
            max_inflight_body_bytes: MAX_INFLIGHT_BODY_BYTES,
            max_conversation_bytes: MAX_CONVERSATION_BYTES,
            max_file_bytes: MAX_FILE_BYTES,
            max_project_file_bytes: MAX_PROJECT_FILE_BYTES,
            batch_concurrency: BATCH_CONCURRENCY,
            batch_lease_secs: BATCH_LEASE_SECS,
            demo_project: true,
            request_timeout_secs: REQUEST_TIMEOUT_SECS,
            max_attempts: MAX_ATTEMPTS,
            max_expanded_bytes: None,
            max_part_bytes: MAX_PART_BYTES,
            request_read_timeout_secs: REQUEST_READ_TIMEOUT_SECS,
            client_idle_timeout_secs: CLIENT_IDLE_TIMEOUT_SECS,
            max_connections: MAX_CONNECTIONS,
            max_plugin_instances: MAX_PLUGIN_INSTANCES,
            plugin_copy_ahead: false,
            shutdown_grace_secs: 30,
            log_format: LogFormat::default(),
            record_bodies: RecordBodies::default(),
            record_body_max_bytes: 64 * 1024,
            record_retention_days: None,
            audit_retention_days: None,
            prices_file: None,
            cache_max_bytes: CACHE_MAX_BYTES,
            providers: BTreeMap::new(),
            guards: BTreeMap::new(),
            global_guards: Vec::new(),
            models: BTreeMap::new(),
            mcp: McpConfig::default(),
            mcp_servers: BTreeMap::new(),
        }
    }
}

/// How the log is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One readable line per event.
    #[default]
    Text,
    /// One JSON object per line, with the current span's fields (a request's invocation id).
    Json,
}

/// What an invocation record keeps of the request and response bodies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
/// the route's own `settings` table. Absent sandbox limits keep the defaults of [`Limits`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// File stem of the plugin serving this route.
    pub plugin: String,
    /// Base URL of the upstream API. Its host is the only one the plugin may reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<BaseUrl>,
    /// Environment variable holding the gateway's provider key for this route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Whether a provider key is needed at all. Default: only routes with an
    /// upstream (`base_url`) need one; set false for local servers without auth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_required: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// Total time of one provider call (default: the top-level `request_timeout_secs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<Positive<NonZeroU64>>,
    /// Hosts (`host:port`, or URLs) the plugin may reach besides `base_url`'s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<HostEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_mb: Option<MemoryMb>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_time_ms: Option<Positive<NonZeroU64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_timeout_ms: Option<Positive<NonZeroU64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_byte_timeout_ms: Option<Positive<NonZeroU64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<Positive<NonZeroU64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<Positive<NonZeroU64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_http_requests: Option<Positive<NonZeroU32>>,
    /// Entries the route's plugin may keep between requests (the `kv` import: a minted access
    /// token); over it the oldest go. Default 256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_max_entries: Option<Positive<NonZeroU32>>,
    /// Bytes (keys and values) those entries may take; over it the oldest go. Default 1 MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_max_bytes: Option<Positive<NonZeroU64>>,
    /// Further tries of a failed call on this route (upstream 429/5xx, connection failure,
    /// connect or first-byte timeout), with exponential backoff and full jitter.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// The backoff's base: try n waits a random time up to `retry_backoff_ms * 2^n`,
    /// capped at a few seconds. Default 200.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_backoff_ms: Option<Positive<NonZeroU64>>,
    /// Routes that take the request, in order, when this one fails with a retryable error
    /// after its retries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<String>,
    /// The most tries a request to this route makes, its fallbacks' included (default: the
    /// top-level `max_attempts`). A fallback's own value does not count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<Positive<NonZeroU32>>,
    /// Whether, as a fallback of a route of the same plugin, this route gets the caller's
    /// `Provider-API-Key`. Without it the caller's key goes only to the requested route's
    /// upstreams, and this route uses its own key (or is skipped without one).
    #[serde(default, skip_serializing_if = "is_false")]
    pub forward_caller_key: bool,
    /// The completion tokens a request that sets no `max_tokens` is assumed to ask for when
    /// its tokens and cost are reserved against tokens-per-minute limits and budgets (default:
    /// the `default_max_tokens` plugin setting, else [`RESERVE_MAX_TOKENS`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_max_tokens: Option<Positive<NonZeroU32>>,
    /// `[[providers.ID.targets]]`: the upstreams (deployments, regions, keys) the route spreads
    /// its requests over by weight, in place of its own `base_url`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetConfig>,
    /// Consecutive retryable failures that take an upstream of this route out of rotation
    /// for `eject_secs` (absent: never).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eject_after_failures: Option<Positive<NonZeroU32>>,
    /// How long an ejected upstream stays out before one probe request decides. Default 30.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eject_secs: Option<Positive<NonZeroU64>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pricing: BTreeMap<String, Price>,
    /// Guards (`[guards.ID]`) this route's requests go through, after `global_guards`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<String>,
    /// How long a successful answer of this route is kept and given again to the same
    /// request (absent: the route does not cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_ttl_secs: Option<Positive<NonZeroU64>>,
    /// Who reads the route's cached answers (see [`CacheScope`]).
    #[serde(default, skip_serializing_if = "CacheScope::is_default")]
    pub cache_scope: CacheScope,
    /// `[providers.ID.settings]`: plugin-specific settings, handed to the plugin as JSON. The
    /// gateway does not read them; the plugin checks them on each call.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub settings: toml::Table,
}

/// Who may be given an answer a route cached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Only requests of the project whose request got it: a project never sees another's.
    #[default]
    Project,
    /// Every caller of the route (answers to prompts no project keeps secret).
    Route,
}

impl CacheScope {
    fn is_default(&self) -> bool {
        *self == CacheScope::Project
    }
}

/// The most `retries` a route may have.
const MAX_RETRIES: u32 = 10;
/// The shortest `admin_token` a config may set: with sign-ins throttled per client address
/// (`limits::signin`), a random token of 32 bytes is out of reach of guessing.
pub const MIN_ADMIN_TOKEN_BYTES: usize = 32;
/// The most `targets` a route may have (a request keeps which it tried in one word).
pub const MAX_TARGETS: usize = 64;
const DEFAULT_EJECT_SECS: u64 = 30;

/// `[[providers.ID.targets]]`: one upstream of a route. What it leaves out is the route's: its
/// key (`api_key_env`) and plugin settings (its `settings` table is laid over the route's, key
/// by key, so a target can change `api_key_header` or the Azure `azure_api_version`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    pub base_url: BaseUrl,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The target's share of the route's requests, against the other targets' weights.
    #[serde(default = "weight_one")]
    pub weight: Positive<NonZeroU32>,
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub settings: toml::Table,
}

fn weight_one() -> Positive<NonZeroU32> {
    Positive::new(NonZeroU32::MIN)
}

impl TargetConfig {
    /// A target at `base_url` with weight 1, every other key the route's.
    pub fn new(base_url: BaseUrl) -> TargetConfig {
        TargetConfig {
            base_url,
            api_key_env: None,
            weight: weight_one(),
            settings: toml::Table::new(),
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Config {
    /// Loads `path`, or the built-in defaults when there is none, with the `GATEWAY_*`
    /// variables of this process's environment over it ([`env`]).
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        Config::load_with(path, &env::from_env())
    }

    /// Loads `path` (or the built-in defaults) with `overrides` (`(variable, value)`) over it.
    pub fn load_with(
        path: Option<&Path>,
        overrides: &[(&str, String)],
    ) -> Result<Config, ConfigError> {
        match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| {
                    ConfigError::new(&path.display().to_string(), Problem::Read(source))
                })?;
                Config::parse_with(&text, &path.display().to_string(), overrides)
            }
            None => Config::parse_with(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN, overrides),
        }
    }

    /// Parses a config file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        Config::parse_with(text, origin, &[])
    }

    /// Parses a config file's text with `overrides` over it, then checks the whole: a value
    /// from the environment is held to what the file's would be.
    pub fn parse_with(
        text: &str,
        origin: &str,
        overrides: &[(&str, String)],
    ) -> Result<Config, ConfigError> {
        let document = toml::Deserializer::parse(text)
            .map_err(|source| ConfigError::new(origin, Problem::Syntax(Box::new(source))))?;
        let mut config: Config = serde_path_to_error::deserialize(document)
            .map_err(|source| ConfigError::new(origin, Problem::Invalid(Box::new(source))))?;
        env::apply(&mut config, overrides)
            .map_err(|(var, key, why)| ConfigError::new(origin, Problem::Env { var, key, why }))?;
        if let Some((alias, target)) = config
            .models
            .iter()
            .find(|(_, target)| !config.providers.contains_key(&target.route))
        {
            return Err(ConfigError::new(
                origin,
                Problem::AliasRoute {
                    alias: alias.clone(),
                    route: target.route.clone(),
                },
            ));
        }
        if let Some(token) = config
            .admin_token
            .as_deref()
            .filter(|token| token.len() < MIN_ADMIN_TOKEN_BYTES)
        {
            return Err(ConfigError::new(
                origin,
                Problem::AdminTokenTooShort { len: token.len() },
            ));
        }
        config.check_routing(origin)?;
        config.check_guards(origin)?;
        if let Some((id, reason)) = config
            .mcp_servers
            .iter()
            .find_map(|(id, server)| mcp::server_problem(id, server).map(|reason| (id, reason)))
        {
            return Err(ConfigError::new(
                origin,
                Problem::McpServer {
                    id: id.clone(),
                    reason,
                },
            ));
        }
        let admin_token = config.admin_token.is_some();
        if let Some(problem) = config.oidc.as_ref().and_then(|o| o.problem(admin_token)) {
            return Err(ConfigError::new(origin, Problem::Oidc(problem)));
        }
        Ok(config)
    }

    /// Every guard a route or `global_guards` names is a `[guards.ID]`.
    fn check_guards(&self, origin: &str) -> Result<(), ConfigError> {
        let lists = std::iter::once(("global_guards".to_owned(), &self.global_guards)).chain(
            self.providers
                .iter()
                .map(|(id, route)| (format!("providers.{id}.guards"), &route.guards)),
        );
        for (at, list) in lists {
            for (index, id) in list.iter().enumerate() {
                if !self.guards.contains_key(id) {
                    return Err(ConfigError::new(
                        origin,
                        Problem::UnknownGuard {
                            at: format!("{at}[{index}]"),
                            id: id.clone(),
                        },
                    ));
                }
                if list[..index].contains(id) {
                    return Err(ConfigError::new(
                        origin,
                        Problem::GuardTwice {
                            at: format!("{at}[{index}]"),
                            id: id.clone(),
                        },
                    ));
                }
            }
        }
        Ok(())
    }

    /// The checks of `retries` and `fallbacks` that span routes, so that the request flow can
    /// follow fallbacks without meeting an unknown route or going round in circles.
    fn check_routing(&self, origin: &str) -> Result<(), ConfigError> {
        for (route, config) in &self.providers {
            if config.retries > MAX_RETRIES {
                return Err(ConfigError::new(
                    origin,
                    Problem::Retries {
                        route: route.clone(),
                        retries: config.retries,
                    },
                ));
            }
            let targets = |reason| {
                Err(ConfigError::new(
                    origin,
                    Problem::Targets {
                        route: route.clone(),
                        reason,
                    },
                ))
            };
            if !config.targets.is_empty() && config.base_url.is_some() {
                return targets(
                    "a route has either a base_url or targets, not both (give each target its base_url)",
                );
            }
            if config.targets.len() > MAX_TARGETS {
                return targets("a route has at most 64 targets");
            }
            if config.eject_secs.is_some() && config.eject_after_failures.is_none() {
                return Err(ConfigError::new(
                    origin,
                    Problem::EjectSecs {
                        route: route.clone(),
                    },
                ));
            }
            for (index, fallback) in config.fallbacks.iter().enumerate() {
                if !self.providers.contains_key(fallback) {
                    return Err(ConfigError::new(
                        origin,
                        Problem::FallbackRoute {
                            route: route.clone(),
                            index,
                            fallback: fallback.clone(),
                        },
                    ));
                }
                if fallback == route {
                    return Err(ConfigError::new(
                        origin,
                        Problem::FallbackSelf {
                            route: route.clone(),
                            index,
                        },
                    ));
                }
                if config.fallbacks[..index].contains(fallback) {
                    return Err(ConfigError::new(
                        origin,
                        Problem::FallbackTwice {
                            route: route.clone(),
                            index,
                            fallback: fallback.clone(),
                        },
                    ));
                }
            }
        }
        match self.fallback_cycle() {
            Some((route, index, cycle)) => Err(ConfigError::new(
                origin,
                Problem::FallbackCycle {
                    route: route.to_owned(),
                    index,
                    cycle,
                },
            )),
            None => Ok(()),
        }
    }

    /// The first cycle among the routes' fallbacks, in route order: the route and fallback
    /// index where it starts, and the cycle spelled out. Every fallback names a known route
    /// other than its own by now.
    fn fallback_cycle(&self) -> Option<(&str, usize, String)> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Unseen,
            OnPath,
            Done,
        }
        let routes: Vec<&str> = self.providers.keys().map(String::as_str).collect();
        let position = |route: &str| routes.binary_search(&route).ok();
        let mut marks = vec![Mark::Unseen; routes.len()];
        for start in 0..routes.len() {
            if marks[start] != Mark::Unseen {
                continue;
            }
            // Depth first without recursion: each frame is a route and its next fallback to
            // follow, so the path's frames are also the cycle's steps when one closes.
            let mut path: Vec<(usize, usize)> = vec![(start, 0)];
            marks[start] = Mark::OnPath;
            while let Some(frame) = path.last_mut() {
                let route = frame.0;
                let Some(fallback) = self.providers[routes[route]].fallbacks.get(frame.1) else {
                    marks[route] = Mark::Done;
                    path.pop();
                    continue;
                };
                frame.1 += 1;
                let Some(target) = position(fallback) else {
                    continue;
                };
                match marks[target] {
                    Mark::Done => {}
                    Mark::Unseen => {
                        marks[target] = Mark::OnPath;
                        path.push((target, 0));
                    }
                    Mark::OnPath => {
                        let from = path.iter().position(|&(r, _)| r == target)?;
                        let steps = &path[from..];
                        let mut cycle: Vec<&str> = steps.iter().map(|&(r, _)| routes[r]).collect();
                        cycle.push(routes[target]);
                        // Each frame's count is already past the fallback it followed.
                        let index = steps[0].1 - 1;
                        return Some((routes[target], index, cycle.join(" -> ")));
                    }
                }
            }
        }
        None
    }

    /// What a `model` names: an alias (`[models.ALIAS]`), `ROUTE/MODEL` (the
    /// first `/` splits, so `openrouter/openai/gpt-4o` is route `openrouter`,
    /// model `openai/gpt-4o`), or a bare route id (its default model). `None`
    /// when it is none of these.
    pub fn model_target<'a>(&'a self, model: &'a str) -> Option<ModelTarget<'a>> {
        if let Some(alias) = self.models.get(model) {
            return Some(ModelTarget {
                route: &alias.route,
                model: alias.model.as_deref(),
            });
        }
        match model.split_once('/') {
            Some((route, model)) if !route.is_empty() && !model.is_empty() => Some(ModelTarget {
                route,
                model: Some(model),
            }),
            Some(_) => None,
            None => self.providers.contains_key(model).then_some(ModelTarget {
                route: model,
                model: None,
            }),
        }
    }

    /// The cap on a request's text once its variables are filled in.
    pub fn max_expanded_bytes(&self) -> usize {
        self.max_expanded_bytes.unwrap_or(self.max_body_bytes).get()
    }

    /// The invocation journal's directory (`journal_dir`, or its default);
    /// `None` for an in-memory SQLite database, whose records die with the
    /// process anyway.
    pub fn journal_dir(&self) -> Option<PathBuf> {
        if let Some(dir) = &self.journal_dir {
            return Some(dir.clone());
        }
        match crate::store::Database::parse(&self.database) {
            Ok(crate::store::Database::Sqlite(path)) if path.as_os_str() == ":memory:" => None,
            Ok(crate::store::Database::Sqlite(path)) => {
                let mut dir = path.as_os_str().to_owned();
                dir.push(".records");
                Some(PathBuf::from(dir))
            }
            // An unsupported `database` fails when the store opens, before this matters.
            Ok(crate::store::Database::Postgres(_)) | Err(_) => {
                Some(PathBuf::from("./data/records"))
            }
        }
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

impl RouteConfig {
    /// A route served by `plugin`, every other key absent.
    pub fn new(plugin: impl Into<String>) -> RouteConfig {
        RouteConfig {
            plugin: plugin.into(),
            base_url: None,
            api_key_env: None,
            api_key_required: None,
            default_model: None,
            timeout_secs: None,
            allowed_hosts: Vec::new(),
            memory_limit_mb: None,
            cpu_time_ms: None,
            connect_timeout_ms: None,
            first_byte_timeout_ms: None,
            idle_timeout_ms: None,
            max_response_bytes: None,
            max_http_requests: None,
            kv_max_entries: None,
            kv_max_bytes: None,
            retries: 0,
            retry_backoff_ms: None,
            fallbacks: Vec::new(),
            max_attempts: None,
            forward_caller_key: false,
            reserve_max_tokens: None,
            targets: Vec::new(),
            eject_after_failures: None,
            eject_secs: None,
            pricing: BTreeMap::new(),
            guards: Vec::new(),
            cache_ttl_secs: None,
            cache_scope: CacheScope::default(),
            settings: toml::Table::new(),
        }
    }

    /// How long the route keeps its answers, if it caches them.
    pub fn cache_ttl(&self) -> Option<Duration> {
        self.cache_ttl_secs
            .map(|secs| Duration::from_secs(secs.get()))
    }

    pub fn needs_api_key(&self) -> bool {
        self.api_key_required
            .unwrap_or(self.base_url.is_some() || !self.targets.is_empty())
    }

    /// How long an ejected upstream of this route stays out of rotation, if the route ejects.
    pub fn ejection(&self) -> Option<(u32, Duration)> {
        let secs = self.eject_secs.map_or(DEFAULT_EJECT_SECS, Positive::get);
        self.eject_after_failures
            .map(|after| (after.get(), Duration::from_secs(secs)))
    }

    /// The completion tokens reserved for a request that sets no `max_tokens` (see
    /// [`RouteConfig::reserve_max_tokens`]).
    pub fn reserve_max_tokens(&self) -> u64 {
        match self.reserve_max_tokens {
            Some(n) => u64::from(n.get()),
            None => self
                .settings
                .get("default_max_tokens")
                .and_then(toml::Value::as_integer)
                .and_then(|n| u64::try_from(n).ok())
                .filter(|n| *n > 0)
                .unwrap_or(RESERVE_MAX_TOKENS),
        }
    }

    /// The most tries of a request to this route (see [`RouteConfig::max_attempts`]).
    pub fn max_attempts(&self, config: &Config) -> usize {
        self.max_attempts.unwrap_or(config.max_attempts).get() as usize
    }

    pub fn timeout(&self, config: &Config) -> Duration {
        Duration::from_secs(
            self.timeout_secs
                .unwrap_or(config.request_timeout_secs)
                .get(),
        )
    }

    /// The route's plugin settings as a JSON object text.
    pub fn settings_json(&self) -> String {
        serde_json::to_string(&self.settings).unwrap_or_else(|_| "{}".to_owned())
    }

    /// The plugin settings of a call to `target`: the route's, with the target's laid over them.
    pub fn target_settings(&self, target: &TargetConfig) -> std::borrow::Cow<'_, toml::Table> {
        if target.settings.is_empty() {
            return std::borrow::Cow::Borrowed(&self.settings);
        }
        let mut settings = self.settings.clone();
        settings.extend(target.settings.clone());
        std::borrow::Cow::Owned(settings)
    }

    /// [`RouteConfig::target_settings`] as the JSON object the plugin reads.
    pub fn target_settings_json(&self, target: &TargetConfig) -> String {
        serde_json::to_string(&self.target_settings(target)).unwrap_or_else(|_| "{}".to_owned())
    }
}

#[cfg(test)]
mod tests;
