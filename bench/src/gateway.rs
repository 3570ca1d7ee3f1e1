//! The gateway under test: the real release binary with a generated config
//! (its own temporary directory, SQLite database and plugins directory), one
//! route served by the real `openai.wasm` (or `bedrock.wasm`, signing each request
//! with SigV4) pointed at the fake upstream, and a project and key made with the
//! gateway's own CLI.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use serde_json::json;
use tempfile::TempDir;

use crate::child::Server;
use crate::load::Target;

/// The route callers name in `providerConfig.provider`.
pub const ROUTE: &str = "bench";
/// The tool plugin the `mcp` scenario serves as `[mcp_servers.weather]` (examples/rust-tool).
pub const TOOL_PLUGIN: &str = "rust-tool";
/// Its file in a plugins directory.
pub const TOOL_PLUGIN_FILE: &str = "rust-tool.wasm";
/// The environment variable that carries the route's (fake) provider key.
const KEY_ENV: &str = "BENCH_UPSTREAM_KEY";
/// The provider key the upstream receives; it checks nothing.
const UPSTREAM_KEY: &str = "sk-bench-not-a-real-key";
/// The same key as a direct caller sends it.
const UPSTREAM_BEARER: &str = "Bearer sk-bench-not-a-real-key";
/// The variables of the bedrock route's (fake) AWS credentials, which it signs with.
const AWS_KEY_ID_ENV: &str = "BENCH_AWS_ACCESS_KEY_ID";
const AWS_SECRET_ENV: &str = "BENCH_AWS_SECRET_ACCESS_KEY";

/// The plugin serving the gateway's route, and so the upstream API it calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// `openai.wasm`, `POST /v1/chat/completions`.
    Openai,
    /// `bedrock.wasm`, `POST /model/MODEL/converse`, signed with SigV4 (whole answers only).
    Bedrock,
}

impl Provider {
    /// The plugin's file stem.
    pub fn plugin(self) -> &'static str {
        match self {
            Provider::Openai => "openai",
            Provider::Bedrock => "bedrock",
        }
    }
}

/// Where the binary and the plugin come from, and how the gateway logs.
#[derive(Debug, Clone)]
pub struct GatewayBuild {
    pub binary: PathBuf,
    /// The plugin serving the route: `openai.wasm` or `bedrock.wasm` (see `provider`).
    pub plugin_wasm: PathBuf,
    pub provider: Provider,
    /// The tool plugin of the `mcp` scenario (`rust-tool.wasm`), needed by that scenario only:
    /// the other gateways' plugin directories do not hold it.
    pub tool_wasm: PathBuf,
    /// `RUST_LOG` for `serve`; `None` runs with the gateway's default (`info`).
    pub log_filter: Option<String>,
    /// The API surface the gateway's requests use.
    pub surface: Surface,
    /// The config's `database` (a `postgres://` URL); `None`: a SQLite file of its own.
    pub database: Option<String>,
    /// The config's `redis_url` (each gateway under a key prefix of its own).
    pub redis: Option<String>,
    /// Give the project and its key every kind of limit (set far above what a run
    /// reaches), so that every request pays for the full limit check.
    pub limits: bool,
    /// Top-level config lines added as they are (`metrics = false`).
    pub config_lines: Vec<String>,
    /// Lines added to the route's table as they are (`cache_ttl_secs = 3600`).
    pub route_lines: Vec<String>,
    /// Headers every request to the gateway carries.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// A guard plugin every request goes through, and its settings (a TOML inline table).
    pub guard: Option<(PathBuf, String)>,
}

/// What `limits` sets, on the project and on the key: the most checks a request can meet.
const LIMIT_FLAGS: [&str; 8] = [
    "--rpm",
    "1000000000",
    "--tpm",
    "1000000000000",
    "--daily-budget-usd",
    "1000000",
    "--monthly-budget-usd",
    "1000000",
];

/// The gateway API a benchmark request goes to: the same chat either way, so
/// that the two can be compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Surface {
    /// `POST /completions`.
    Commonbase,
    /// `POST /v1/chat/completions`.
    Openai,
}

impl GatewayBuild {
    /// Fails with the command that builds what is missing.
    pub fn check(&self) -> Result<(), String> {
        if !self.binary.is_file() {
            return Err(format!(
                "{} not found: build it with `cargo build --release -p gateway` (or use `cargo xtask bench`)",
                self.binary.display()
            ));
        }
        if !self.plugin_wasm.is_file() {
            return Err(format!(
                "{} not found: build the plugins with `cargo xtask plugins` (or use `cargo xtask bench`)",
                self.plugin_wasm.display()
            ));
        }
        Ok(())
    }

    /// Fails with the command that builds the `mcp` scenario's tool plugin when it is missing.
    pub fn check_tool(&self) -> Result<(), String> {
        if !self.tool_wasm.is_file() {
            return Err(format!(
                "{} not found: build it with `cargo xtask plugins` (or use `cargo xtask bench`)",
                self.tool_wasm.display()
            ));
        }
        Ok(())
    }

    /// Copies the binary and the plugins into `dir` and returns the copies (the tool plugin
    /// when there is one).
    pub fn snapshot(&self, dir: &Path) -> Result<GatewayBuild, String> {
        let binary = dir.join("gateway");
        let plugin_wasm = dir.join(format!("{}.wasm", self.provider.plugin()));
        let tool_wasm = dir.join(TOOL_PLUGIN_FILE);
        let mut copies = vec![(&self.binary, &binary), (&self.plugin_wasm, &plugin_wasm)];
        if self.tool_wasm.is_file() {
            copies.push((&self.tool_wasm, &tool_wasm));
        }
        for (from, to) in copies {
            std::fs::copy(from, to)
                .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
        }
        Ok(GatewayBuild {
            binary,
            plugin_wasm,
            provider: self.provider,
            tool_wasm,
            log_filter: self.log_filter.clone(),
            surface: self.surface,
            database: self.database.clone(),
            redis: self.redis.clone(),
            limits: self.limits,
            config_lines: self.config_lines.clone(),
            route_lines: self.route_lines.clone(),
            headers: self.headers.clone(),
            guard: self.guard.clone(),
        })
    }
}

/// A configured gateway: directory, config, project and key. Serve it with [`Setup::serve`].
pub struct Setup {
    build: GatewayBuild,
    dir: TempDir,
    config: PathBuf,
    pub project_id: String,
    pub key: String,
}

impl Setup {
    /// Writes the config (`extra` is appended to its top-level keys), installs
    /// the plugin and creates a project and key.
    pub fn new(build: &GatewayBuild, upstream: SocketAddr, extra: &str) -> Result<Setup, String> {
        Setup::with_plugins(build, upstream, extra, &[])
    }

    /// [`Setup::new`] with more plugins (`.wasm` files) in its plugins directory.
    pub fn with_plugins(
        build: &GatewayBuild,
        upstream: SocketAddr,
        extra: &str,
        more_plugins: &[&Path],
    ) -> Result<Setup, String> {
        build.check()?;
        let dir = tempfile::Builder::new()
            .prefix("gateway-bench-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        // Config, database, plugins and logs in separate directories, as a
        // deployment has them: the gateway watches the config's and the
        // plugins' directories, and writes to the database or the log must not
        // wake those watchers.
        let plugins = dir.path().join("plugins");
        for sub in ["etc", "data", "plugins", "logs"] {
            let path = dir.path().join(sub);
            std::fs::create_dir(&path).map_err(|e| format!("cannot create {path:?}: {e}"))?;
        }
        let plugin = build.provider.plugin();
        std::fs::copy(&build.plugin_wasm, plugins.join(format!("{plugin}.wasm")))
            .map_err(|e| format!("cannot copy {}: {e}", build.plugin_wasm.display()))?;
        for wasm in more_plugins {
            let name = wasm
                .file_name()
                .ok_or("a plugin path without a file name")?;
            std::fs::copy(wasm, plugins.join(name))
                .map_err(|e| format!("cannot copy {}: {e}", wasm.display()))?;
        }

        let mut config = String::new();
        let _ = writeln!(config, "listen = \"127.0.0.1:0\"");
        match &build.database {
            // Every gateway of a run shares the database (each with a project of its own)
            // and keeps its own journal.
            Some(url) => {
                let _ = writeln!(config, "database = \"{url}\"");
                let _ = writeln!(
                    config,
                    "journal_dir = {}",
                    toml_path(&dir.path().join("data/records"))
                );
            }
            None => {
                let _ = writeln!(
                    config,
                    "database = {}",
                    toml_path(&dir.path().join("data/gateway.db"))
                );
            }
        }
        if let Some(url) = &build.redis {
            let _ = writeln!(config, "redis_url = \"{url}\"");
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let prefix = format!("bench:{}:{nanos}:", std::process::id());
            let _ = writeln!(config, "redis_key_prefix = \"{prefix}\"");
        }
        let _ = writeln!(config, "plugins_dir = {}", toml_path(&plugins));
        let _ = writeln!(config, "demo_project = false");
        for line in &build.config_lines {
            let line = line.replace("{upstream}", &upstream.to_string());
            let _ = writeln!(config, "{line}");
        }
        if let Some((wasm, settings)) = &build.guard {
            let stem = wasm.file_stem().and_then(|s| s.to_str()).unwrap_or("guard");
            std::fs::copy(wasm, plugins.join(format!("{stem}.wasm")))
                .map_err(|e| format!("cannot copy {}: {e}", wasm.display()))?;
            let _ = writeln!(config, "global_guards = [\"bench\"]");
            let _ = writeln!(
                config,
                "guards.bench = {{ plugin = \"{stem}\", settings = {settings} }}"
            );
        }
        config.push_str(extra);
        let _ = writeln!(config, "\n[providers.{ROUTE}]");
        let _ = writeln!(config, "plugin = \"{plugin}\"");
        let _ = writeln!(config, "default_model = \"bench\"");
        for line in &build.route_lines {
            let _ = writeln!(config, "{line}");
        }
        match build.provider {
            Provider::Openai => {
                let _ = writeln!(config, "base_url = \"http://{upstream}/v1\"");
                let _ = writeln!(config, "api_key_env = \"{KEY_ENV}\"");
            }
            Provider::Bedrock => {
                let _ = writeln!(config, "base_url = \"http://{upstream}\"");
                let _ = writeln!(config, "[providers.{ROUTE}.settings]");
                let _ = writeln!(config, "region = \"us-east-1\"");
                let _ = writeln!(config, "aws_access_key_id_env = \"{AWS_KEY_ID_ENV}\"");
                let _ = writeln!(config, "aws_secret_access_key_env = \"{AWS_SECRET_ENV}\"");
            }
        }
        let config_path = dir.path().join("etc/gateway.toml");
        std::fs::write(&config_path, &config)
            .map_err(|e| format!("cannot write {}: {e}", config_path.display()))?;

        let mut setup = Setup {
            build: build.clone(),
            dir,
            config: config_path,
            project_id: String::new(),
            key: String::new(),
        };
        setup.project_id = setup.cli(&["project", "create", "bench"])?;
        let project_id = setup.project_id.clone();
        let mut create_key = vec!["key", "create", &project_id];
        if build.limits {
            let mut limit = vec!["project", "limit", &project_id];
            limit.extend(LIMIT_FLAGS);
            setup.cli(&limit)?;
            create_key.extend(LIMIT_FLAGS);
        }
        setup.key = setup.cli(&create_key)?;
        Ok(setup)
    }

    /// Runs a CLI command; returns its last stdout line.
    fn cli(&self, args: &[&str]) -> Result<String, String> {
        let output = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run `gateway {}`: {e}", args.join(" ")))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(format!(
                "`gateway {}` failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| format!("`gateway {}` printed nothing", args.join(" ")))
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.build.binary);
        command
            .arg("--config")
            .arg(&self.config)
            .current_dir(self.dir.path())
            .env_remove("GATEWAY_CONFIG")
            .env(KEY_ENV, UPSTREAM_KEY)
            .env(AWS_KEY_ID_ENV, "AKIDBENCHNOTAREALKEY")
            .env(AWS_SECRET_ENV, "bench/not/a/real/secret/access/key0000");
        match &self.build.log_filter {
            Some(filter) => command.env("RUST_LOG", filter),
            None => command.env_remove("RUST_LOG"),
        };
        command
    }

    /// Starts `gateway serve` and waits until it listens; its log goes to `logs/NAME.log`.
    pub fn serve(&self, name: &str) -> Result<Server, String> {
        let mut command = self.command();
        command.arg("serve");
        let log = self.dir.path().join(format!("logs/{name}.log"));
        Server::spawn(name, command, log)
    }

    /// The gateway's request for a chat with `model` (see
    /// [`crate::upstream::stream_model`]), streamed or not, on the build's
    /// [`Surface`].
    pub fn target(&self, addr: SocketAddr, model: &str, stream: bool) -> Result<Target, String> {
        if self.build.surface == Surface::Openai {
            let mut target = openai_target("gateway", addr, &format!("{ROUTE}/{model}"), stream);
            target.authorization = Some(self.bearer()?);
            target.headers = self.build.headers.clone();
            return Ok(target);
        }
        let mut body = json!({
            "projectId": self.project_id,
            "messages": [{"role": "user", "content": "Hello"}],
            "providerConfig": {"provider": ROUTE, "params": {"type": "chat", "model": model}},
        });
        if stream {
            body["stream"] = json!(true);
        }
        let mut target = Target::post(
            "gateway",
            addr,
            "/completions",
            Bytes::from(body.to_string()),
        );
        target.authorization = Some(
            HeaderValue::from_str(&self.key)
                .map_err(|e| format!("the key is not a header value: {e}"))?,
        );
        target.stream = stream;
        target.headers = self.build.headers.clone();
        Ok(target)
    }

    /// `Authorization: Bearer KEY` with the setup's key.
    pub fn bearer(&self) -> Result<HeaderValue, String> {
        HeaderValue::from_str(&format!("Bearer {}", self.key))
            .map_err(|e| format!("the key is not a header value: {e}"))
    }

    /// The `--header` headers every request to the gateway carries.
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.build.headers
    }
}

/// A `--header` value: `NAME: VALUE`.
pub fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = (text.split_once(':')).ok_or("expected NAME: VALUE")?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|e| e.to_string())?;
    let value = HeaderValue::from_str(value.trim()).map_err(|e| e.to_string())?;
    Ok((name, value))
}

/// The same chat sent straight to an OpenAI-compatible server (the upstream
/// itself, or the baseline proxy in front of it).
pub fn openai_target(label: &'static str, addr: SocketAddr, model: &str, stream: bool) -> Target {
    let mut body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Hello"}],
    });
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    let mut target = Target::post(
        label,
        addr,
        "/v1/chat/completions",
        Bytes::from(body.to_string()),
    );
    target.authorization = Some(HeaderValue::from_static(UPSTREAM_BEARER));
    target.stream = stream;
    target
}

/// A TOML basic string (JSON's escapes are a subset of TOML's).
fn toml_path(path: &Path) -> String {
    serde_json::to_string(&path.to_string_lossy()).unwrap_or_else(|_| "\"\"".into())
}
