//! Runs the real `gateway` binary for one test: its own temporary directory,
//! config, database, plugins, project, key and port.
//!
//! The database is a SQLite file in that directory, or, when `GATEWAY_TEST_POSTGRES` is set (the
//! suite's PostgreSQL mode), a fresh PostgreSQL database of the gateway's own, dropped with it.
//! Tests of several gateways on one database give each the same [`TestDatabase`].

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ::gateway::config::types::{BaseUrl, Positive};
use ::gateway::config::{Config, Price, RouteConfig};
use serde_json::Value;
use tempfile::TempDir;

use crate::client::{self, Connection, Response, SseResponse};
use crate::postgres::{self, TestDatabase};

/// The plugins every test binary may need; a missing one means the plugins
/// were not built.
const BUNDLED_PLUGINS: [&str; 3] = ["echo", "openai", "faulty"];

/// Startup includes compiling the plugins: be patient on a slow machine.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a graceful shutdown may take before the test gives up.
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the built plugins are: `GATEWAY_TEST_PLUGINS_DIR`, else the
/// workspace's `target/wasm32-wasip2/plugin`.
pub fn built_plugins_dir() -> PathBuf {
    match std::env::var_os("GATEWAY_TEST_PLUGINS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/wasm32-wasip2/plugin"
        )),
    }
}

/// The `gateway` binary cargo built for the running integration test: `CARGO_BIN_EXE_gateway`
/// when cargo sets it at run time, else the one beside the test binary's `deps` directory
/// (`target/<profile>/gateway`), where cargo puts a package's binaries for its tests.
pub fn gateway_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_gateway") {
        return PathBuf::from(path);
    }
    let test_binary = std::env::current_exe().expect("the test binary's path");
    let binary = test_binary
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join(format!("gateway{}", std::env::consts::EXE_SUFFIX)))
        .unwrap_or_else(|| panic!("no target directory above {}", test_binary.display()));
    assert!(
        binary.is_file(),
        "no gateway binary at {}: run the gateway's integration tests through cargo",
        binary.display()
    );
    binary
}

/// One `[providers.ID]` table of the config: a typed [`RouteConfig`], serialized with the rest
/// of the config when the gateway starts.
#[derive(Debug, Clone)]
pub struct Route {
    pub id: String,
    pub config: RouteConfig,
}

impl Route {
    pub fn new(id: &str, plugin: &str) -> Route {
        Route {
            id: id.to_owned(),
            config: RouteConfig::new(plugin),
        }
    }

    /// An echo-plugin route (offline, deterministic).
    pub fn echo(id: &str) -> Route {
        Route::new(id, "echo").default_model("echo")
    }

    /// An openai-plugin route against `base_url`, keyed by the caller.
    pub fn openai(id: &str, base_url: &str) -> Route {
        Route::new(id, "openai").base_url(base_url)
    }

    pub fn base_url(mut self, url: &str) -> Route {
        let url = BaseUrl::try_from(url.to_owned())
            .unwrap_or_else(|e| panic!("route {}: base_url {url:?}: {e}", self.id));
        self.config.base_url = Some(url);
        self
    }

    pub fn api_key_env(mut self, var: &str) -> Route {
        self.config.api_key_env = Some(var.to_owned());
        self
    }

    pub fn default_model(mut self, model: &str) -> Route {
        self.config.default_model = Some(model.to_owned());
        self
    }

    pub fn timeout_secs(mut self, secs: u64) -> Route {
        self.config.timeout_secs =
            Some(Positive::new(NonZeroU64::new(secs).unwrap_or_else(|| {
                panic!("route {}: timeout_secs must be positive", self.id)
            })));
        self
    }

    /// A key of the route's own table (a sandbox limit, `allowed_hosts`, an inline `pricing`
    /// table); `toml_value` is a TOML literal such as `128` or `["host:1"]`. The route is read
    /// again with it, so a key or value the gateway would refuse fails here, naming it.
    pub fn key(mut self, key: &str, toml_value: &str) -> Route {
        let mut table = toml::Table::try_from(&self.config).expect("a route serializes");
        table.insert(key.to_owned(), toml_literal(toml_value));
        self.config = table
            .try_into()
            .unwrap_or_else(|e| panic!("route {}: {key} = {toml_value}: {e}", self.id));
        self
    }

    /// A plugin setting, written in the route's `[providers.ID.settings]` table; `toml_value`
    /// is a TOML literal such as `true` or `"x"`.
    pub fn setting(mut self, key: &str, toml_value: &str) -> Route {
        self.config
            .settings
            .insert(key.to_owned(), toml_literal(toml_value));
        self
    }

    pub fn price(mut self, model: &str, input_per_mtok: f64, output_per_mtok: f64) -> Route {
        self.config.pricing.insert(
            model.to_owned(),
            Price::flat(input_per_mtok, output_per_mtok),
        );
        self
    }
}

/// The value a TOML literal (`128`, `"x"`, `["a", "b"]`, `{ a = 1 }`) stands for.
fn toml_literal(literal: &str) -> toml::Value {
    let mut table: toml::Table = format!("value = {literal}")
        .parse()
        .unwrap_or_else(|e| panic!("not a TOML value: {literal}: {e}"));
    table.remove("value").expect("the value just parsed")
}

/// Merges `from` into `into`: tables key by key, any other value replacing what was there.
fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(into)), toml::Value::Table(from)) => merge(into, from),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// Configures and starts a [`Gateway`].
#[derive(Debug, Clone, Default)]
pub struct GatewayBuilder {
    routes: Vec<Route>,
    max_body_bytes: Option<u64>,
    request_timeout_secs: Option<u64>,
    env: Vec<(String, String)>,
    demo_project: bool,
    extra_config: Vec<String>,
    /// Plugins the config's `[guards.ID]` and `[mcp_servers.ID]` name, installed beside the routes'.
    other_plugins: Vec<String>,
    database: Option<SharedDatabase>,
    own_plugin_cache: bool,
}

/// A PostgreSQL database given to the builder: the URL the gateway uses (perhaps through a
/// proxy) and the one the harness reads it through.
#[derive(Debug, Clone)]
struct SharedDatabase {
    gateway_url: String,
    direct_url: String,
}

impl GatewayBuilder {
    /// Lets the gateway create its demo project on start (instead of the
    /// test creating one through the CLI); the gateway's project and key are
    /// then the demo ones it prints.
    pub fn demo_project(mut self, enabled: bool) -> Self {
        self.demo_project = enabled;
        self
    }

    pub fn route(mut self, route: Route) -> Self {
        self.routes.push(route);
        self
    }

    pub fn max_body_bytes(mut self, bytes: u64) -> Self {
        self.max_body_bytes = Some(bytes);
        self
    }

    pub fn request_timeout_secs(mut self, secs: u64) -> Self {
        self.request_timeout_secs = Some(secs);
        self
    }

    /// An environment variable of the `serve` process (route keys, RUST_LOG).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Runs the gateway on `db` (shared with other gateways of the test) instead of a database
    /// of its own; the test's project and key are created in it as usual.
    pub fn database(mut self, db: &TestDatabase) -> Self {
        self.database = Some(SharedDatabase {
            gateway_url: db.url().to_owned(),
            direct_url: db.url().to_owned(),
        });
        self
    }

    /// Like [`GatewayBuilder::database`], the gateway reaching the database through `proxy`
    /// (a [`crate::proxy::TcpProxy`] in front of its server).
    pub fn database_via(mut self, db: &TestDatabase, proxy: std::net::SocketAddr) -> Self {
        self.database = Some(SharedDatabase {
            gateway_url: db.url_via(proxy),
            direct_url: db.url().to_owned(),
        });
        self
    }

    /// Compiled plugins cached where a real gateway caches them by default, in its own plugins
    /// directory (`plugins/.cache`), rather than in the suite's [`shared_plugin_cache`]: for
    /// the tests of the cache itself.
    pub fn own_plugin_cache(mut self) -> Self {
        self.own_plugin_cache = true;
        self
    }

    /// A guard `[guards.ID]` served by `plugin` (installed with the routes' plugins);
    /// `rest` is more of its table in TOML (`settings = { mode = "deny" }`,
    /// `guard_stream = "observe"`), or empty.
    pub fn guard(mut self, id: &str, plugin: &str, rest: &str) -> Self {
        self.extra_config
            .push(format!("[guards.{id}]\nplugin = {plugin:?}\n{rest}"));
        self.other_plugins.push(plugin.to_owned());
        self
    }

    /// An MCP server `[mcp_servers.ID]` that is tool plugin `plugin` (installed with the
    /// routes' plugins); `rest` is more of its table in TOML (`allowed_hosts = [...]`), or empty.
    pub fn tool_server(mut self, id: &str, plugin: &str, rest: &str) -> Self {
        self.extra_config
            .push(format!("[mcp_servers.{id}]\nplugin = {plugin:?}\n{rest}"));
        self.other_plugins.push(plugin.to_owned());
        self
    }

    /// A top-level config line in TOML (e.g. `admin_token = "x"`), merged into the config.
    pub fn config_line(mut self, line: &str) -> Self {
        self.extra_config.push(line.to_owned());
        self
    }

    /// The config file's text: the gateway's [`Config`] with this builder's settings and
    /// routes, serialized. Read back by [`Config::parse`], so a test configuring something the
    /// gateway would refuse fails here with the gateway's own message.
    fn config(
        &self,
        database: String,
        journal_dir: Option<PathBuf>,
        plugins_dir: PathBuf,
    ) -> String {
        let positive = |value: u64, key: &str| {
            usize::try_from(value)
                .ok()
                .and_then(NonZeroUsize::new)
                .map(Positive::new)
                .unwrap_or_else(|| panic!("{key} must be positive"))
        };
        let mut config = Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            database,
            journal_dir,
            plugins_dir,
            demo_project: self.demo_project,
            providers: self
                .routes
                .iter()
                .map(|route| (route.id.clone(), route.config.clone()))
                .collect(),
            ..Config::default()
        };
        if !self.own_plugin_cache {
            config.plugin_cache_dir = Some(shared_plugin_cache().to_owned());
        }
        if let Some(bytes) = self.max_body_bytes {
            config.max_body_bytes = positive(bytes, "max_body_bytes");
        }
        if let Some(secs) = self.request_timeout_secs {
            config.request_timeout_secs = Positive::new(
                NonZeroU64::new(secs).expect("request_timeout_secs must be positive"),
            );
        }
        let mut table = toml::Table::try_from(&config).expect("the config serializes");
        for line in &self.extra_config {
            let extra: toml::Table = line
                .parse()
                .unwrap_or_else(|e| panic!("config line {line:?} is not TOML: {e}"));
            merge(&mut table, extra);
        }
        let text = toml::to_string(&table).expect("the config serializes");
        let config = Config::parse(&text, "the test's config")
            .unwrap_or_else(|e| panic!("the gateway would refuse this config: {e}"));
        toml::to_string(&config).expect("the config serializes")
    }

    pub fn start(self) -> Gateway {
        Gateway::start(self)
    }
}

/// A project and one of its keys.
#[derive(Debug, Clone)]
pub struct Project {
    pub id: String,
    pub key: String,
}

/// The output of one CLI command.
#[derive(Debug)]
pub struct CliOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// The last non-empty stdout line.
    pub fn last_line(&self) -> String {
        self.stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
            .unwrap_or_else(|| panic!("command printed nothing; stderr: {}", self.stderr))
    }
}

/// A running `gateway serve`; terminated (SIGTERM, then SIGKILL) on drop.
pub struct Gateway {
    pub addr: SocketAddr,
    /// The project created for the test.
    pub project_id: String,
    /// A key of that project.
    pub key: String,
    dir: TempDir,
    config: PathBuf,
    database: GatewayDatabase,
    /// Extra environment of the `serve` process.
    env: Vec<(String, String)>,
    child: Option<Child>,
    exit: Option<ExitStatus>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Gateway {
    pub fn builder() -> GatewayBuilder {
        GatewayBuilder::default()
    }

    /// A gateway with one echo route named `demo`.
    pub fn demo() -> Gateway {
        Gateway::builder().route(Route::echo("demo")).start()
    }

    fn start(builder: GatewayBuilder) -> Gateway {
        let dir = tempfile::Builder::new()
            .prefix("gateway-test-")
            .tempdir()
            .expect("create a temporary directory");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).expect("create the plugins directory");
        install_plugins(&builder.routes, &builder.other_plugins, &plugins);

        // An explicit journal directory with PostgreSQL: its default is relative to the working
        // directory, which the CLI commands do not share with `serve`.
        let (database, config) = match (&builder.database, postgres::suite_admin_url()) {
            (Some(shared), _) => (
                GatewayDatabase::Postgres {
                    url: shared.direct_url.clone(),
                    _own: None,
                },
                builder.config(
                    shared.gateway_url.clone(),
                    Some(dir.path().join("records")),
                    plugins,
                ),
            ),
            (None, Some(admin_url)) => {
                let db = TestDatabase::create_in(&admin_url);
                let config = builder.config(
                    db.url().to_owned(),
                    Some(dir.path().join("records")),
                    plugins,
                );
                (
                    GatewayDatabase::Postgres {
                        url: db.url().to_owned(),
                        _own: Some(db),
                    },
                    config,
                )
            }
            (None, None) => (
                GatewayDatabase::Sqlite,
                builder.config(
                    dir.path().join("gateway.db").to_string_lossy().into_owned(),
                    None,
                    plugins,
                ),
            ),
        };
        let config_path = dir.path().join("gateway.toml");
        std::fs::write(&config_path, &config).expect("write the config");

        let (project_id, key) = if builder.demo_project {
            // Filled in from what `serve` prints.
            (String::new(), String::new())
        } else {
            let project_id = cli_in(&config_path, &["project", "create", "test-project"])
                .checked("project create")
                .last_line();
            let key = cli_in(&config_path, &["key", "create", &project_id])
                .checked("key create")
                .last_line();
            (project_id, key)
        };

        let mut gateway = Gateway {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            project_id,
            key,
            dir,
            config: config_path,
            database,
            env: builder.env,
            child: None,
            exit: None,
            stdout: Arc::new(Mutex::new(Vec::new())),
            stderr: Arc::new(Mutex::new(Vec::new())),
            readers: Vec::new(),
        };
        gateway.spawn_serve();
        if builder.demo_project {
            gateway.project_id = gateway.printed("demo project id: ");
            gateway.key = gateway.printed("demo api key: ");
        }
        gateway
    }

    /// Starts `gateway serve` and waits until it listens.
    fn spawn_serve(&mut self) {
        let mut command = Command::new(gateway_binary());
        command
            .args(["serve", "--config"])
            .arg(&self.config)
            .current_dir(self.dir.path())
            .env_remove("GATEWAY_CONFIG")
            .env_remove("RUST_LOG")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawn `gateway serve`");

        let (lines_tx, lines_rx) = mpsc::channel::<String>();
        let out_pipe = child.stdout.take().expect("piped stdout");
        let err_pipe = child.stderr.take().expect("piped stderr");
        let out_buf = self.stdout.clone();
        let stdout_reader = std::thread::spawn(move || {
            for line in BufReader::new(out_pipe).lines() {
                let Ok(line) = line else { break };
                lock(&out_buf).push(line.clone());
                // The test may no longer listen; the line is kept anyway.
                let _ = lines_tx.send(line);
            }
        });
        let err_buf = self.stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut pipe = err_pipe;
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => lock(&err_buf).extend_from_slice(&buf[..n]),
                }
            }
        });
        self.child = Some(child);
        self.exit = None;
        self.readers = vec![stdout_reader, stderr_reader];
        self.addr = self.wait_listening(&lines_rx);
    }

    /// Starts `gateway serve` again (same config, database and journal) after
    /// [`Gateway::shutdown`] or [`Gateway::kill`]; returns the new process's stdout lines. It
    /// listens on a new port: [`Gateway::addr`] changes.
    pub fn restart(&mut self) -> Vec<String> {
        assert!(self.child.is_none(), "the gateway is still running");
        let before = self.stdout().len();
        self.spawn_serve();
        self.stdout()[before..].to_vec()
    }

    fn wait_listening(&mut self, lines: &mpsc::Receiver<String>) -> SocketAddr {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.trim().strip_prefix("gateway listening on http://") {
                        return rest
                            .trim_end_matches('/')
                            .parse()
                            .unwrap_or_else(|e| panic!("bad address in {line:?}: {e}"));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "gateway did not print `gateway listening on http://...` within {START_TIMEOUT:?}; stderr:\n{}",
                    self.logs()
                ),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.wait_exit();
                    panic!(
                        "gateway exited ({status}) before listening; stdout:\n{}\nstderr:\n{}",
                        self.stdout().join("\n"),
                        self.logs()
                    )
                }
            }
        }
    }

    /// The value of the stdout line starting with `prefix`.
    pub fn printed(&self, prefix: &str) -> String {
        let lines = self.stdout();
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix).map(|v| v.trim().to_owned()))
            .unwrap_or_else(|| panic!("no `{prefix}` line in stdout: {lines:?}"))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Installs the built plugin `built` into the gateway's plugins directory as `as_name`, the
    /// safe way (a temporary name, then a rename): a hot reload sees it whole.
    pub fn install_plugin(&self, built: &str, as_name: &str) {
        let plugins = self.dir().join("plugins");
        let temporary = plugins.join(format!(".{as_name}.wasm.partial"));
        std::fs::copy(
            built_plugins_dir().join(format!("{built}.wasm")),
            &temporary,
        )
        .expect("copy the plugin");
        std::fs::rename(&temporary, plugins.join(format!("{as_name}.wasm"))).expect("rename");
    }

    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// The gateway's stderr (its logs) so far.
    pub fn logs(&self) -> String {
        String::from_utf8_lossy(&lock(&self.stderr)).into_owned()
    }

    /// Waits until at least `at_least` lines of the log say `message`. The log is read from the
    /// gateway's stderr by a thread of its own: a line written before an answer was sent may
    /// reach [`Gateway::logs`] a moment after the answer, later still on a loaded machine.
    pub fn wait_for_log(&self, message: &str, at_least: usize) {
        let count = || self.logs().lines().filter(|l| l.contains(message)).count();
        let deadline = Instant::now() + Duration::from_secs(30);
        while count() < at_least {
            assert!(
                Instant::now() < deadline,
                "never saw {at_least} log line(s) saying {message:?}; logs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The gateway's stdout lines so far.
    pub fn stdout(&self) -> Vec<String> {
        lock(&self.stdout).clone()
    }

    /// Everything the gateway stored: with SQLite the bytes of every database file (the file,
    /// its WAL and shared-memory files, the invocation journal beside it); with PostgreSQL the
    /// text of every row of every table, and the journal's files.
    pub fn db_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        match &self.database {
            GatewayDatabase::Sqlite => {
                let entries = std::fs::read_dir(self.dir.path()).expect("list the test directory");
                for entry in entries.flatten() {
                    if entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with("gateway.db")
                    {
                        read_all(&entry.path(), &mut bytes);
                    }
                }
                assert!(!bytes.is_empty(), "no database file in the test directory");
            }
            GatewayDatabase::Postgres { url, .. } => {
                bytes.extend(postgres::dump_text(url).into_bytes());
                assert!(!bytes.is_empty(), "nothing stored in the database");
                read_all(&self.dir.path().join("records"), &mut bytes);
            }
        }
        bytes
    }

    /// How many rows `table` of the gateway's database holds (`api_keys`: every key made,
    /// revoked or not), read from the database itself rather than through the gateway.
    pub fn row_count(&self, table: &str) -> u64 {
        let count = self.number(&format!("SELECT count(*) FROM {table}"));
        u64::try_from(count).unwrap_or_else(|_| panic!("{table}: a count of {count}"))
    }

    /// The whole number `sql` selects (one row, one column), read from the gateway's
    /// database itself: `SELECT count(*) ...`, `SELECT CAST(sum(...) AS BIGINT) ...`.
    pub fn number(&self, sql: &str) -> i64 {
        match &self.database {
            GatewayDatabase::Sqlite => {
                let db = rusqlite::Connection::open(self.dir.path().join("gateway.db"))
                    .expect("open the gateway's SQLite database");
                db.query_row(sql, [], |row| row.get::<_, i64>(0))
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
            GatewayDatabase::Postgres { url, .. } => postgres::simple_query(url, sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .first()
                .and_then(|row| row.first().cloned().flatten())
                .and_then(|number| number.parse().ok())
                .unwrap_or_else(|| panic!("{sql}: no number")),
        }
    }

    /// Whether this gateway runs on PostgreSQL (the suite's PostgreSQL mode, or a shared
    /// database).
    pub fn on_postgres(&self) -> bool {
        matches!(self.database, GatewayDatabase::Postgres { .. })
    }

    /// Runs `gateway ARGS --config FILE`.
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        cli_in(&self.config, args)
    }

    /// Runs `gateway ARGS` with the config named by `GATEWAY_CONFIG` instead
    /// of `--config`.
    pub fn cli_env_config(&self, args: &[&str]) -> CliOutput {
        let output = Command::new(gateway_binary())
            .args(args)
            .env("GATEWAY_CONFIG", &self.config)
            .env_remove("RUST_LOG")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run `gateway {}`: {e}", args.join(" ")));
        CliOutput {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs a CLI command that must succeed; returns its stdout.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        self.cli(args).checked(&args.join(" ")).stdout
    }

    /// Creates another project with a key.
    pub fn create_project(&self, name: &str) -> Project {
        let id = self
            .cli(&["project", "create", name])
            .checked("project create")
            .last_line();
        let key = self
            .cli(&["key", "create", &id])
            .checked("key create")
            .last_line();
        Project { id, key }
    }

    /// The invocation record through `gateway invocations show` (works for
    /// every record, whatever project it belongs to). Records are written
    /// off the request path in batches, so this waits for it to land.
    pub fn record(&self, id: &str) -> Value {
        self.wait_for_record(id, |_| true)
    }

    /// The lines of `gateway invocations list ARGS`, without the column
    /// header line if it prints one.
    pub fn list_invocations(&self, args: &[&str]) -> Vec<String> {
        let mut full = vec!["invocations", "list"];
        full.extend_from_slice(args);
        self.cli_ok(&full)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter(|l| !(l.starts_with("ID ") && l.contains("CREATED_AT")))
            .map(str::to_owned)
            .collect()
    }

    /// The `invocations list` line of `id`, waiting for the record to land.
    pub fn listed_line(&self, id: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(line) = self
                .list_invocations(&[])
                .into_iter()
                .find(|l| l.starts_with(id))
            {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "invocation {id} never appeared in `invocations list`"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls `invocations show` until the record of `id` satisfies
    /// `condition` (for records written after the response ended, like a
    /// cancelled stream's). Panics after a minute.
    pub fn wait_for_record(&self, id: &str, condition: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self.cli(&["invocations", "show", id]);
            if out.status.success()
                && let Ok(record) = serde_json::from_str::<Value>(&out.stdout)
                && condition(&record)
            {
                return record;
            }
            assert!(
                Instant::now() < deadline,
                "invocation {id} never reached the expected state; last output: {} {}",
                out.stdout,
                out.stderr
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends a request with `Authorization: KEY` when a key is given.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        extra_headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let headers = headers(key, extra_headers, !body.is_empty());
        client::request(self.addr, method, path, &headers, body)
    }

    /// Sends a request as [`Gateway::request`] does and reads nothing: drop the stream to hang
    /// up before the answer.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        extra_headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::net::TcpStream {
        let headers = headers(key, extra_headers, !body.is_empty());
        client::send(self.addr, method, path, &headers, body)
    }

    /// POSTs `body` as JSON with the test project's key.
    pub fn post(&self, path: &str, body: &Value) -> Response {
        self.post_as(path, Some(&self.key), body)
    }

    /// POSTs `body` as JSON with `key` (none: no Authorization header).
    pub fn post_as(&self, path: &str, key: Option<&str>, body: &Value) -> Response {
        self.request("POST", path, key, &[], body.to_string().as_bytes())
    }

    /// POSTs with extra headers.
    pub fn post_with_headers(
        &self,
        path: &str,
        key: Option<&str>,
        extra_headers: &[(&str, &str)],
        body: &Value,
    ) -> Response {
        self.request(
            "POST",
            path,
            key,
            extra_headers,
            body.to_string().as_bytes(),
        )
    }

    /// POSTs a streaming request and reads the answer to its end.
    pub fn post_stream(&self, path: &str, body: &Value) -> SseResponse {
        self.post_stream_with_headers(path, Some(&self.key), &[], body)
    }

    pub fn post_stream_with_headers(
        &self,
        path: &str,
        key: Option<&str>,
        extra_headers: &[(&str, &str)],
        body: &Value,
    ) -> SseResponse {
        let mut conn = self.open_stream_with_headers(path, key, extra_headers, body);
        let raw = String::from_utf8_lossy(&conn.read_to_end()).into_owned();
        let event_stream = conn
            .header("content-type")
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let frames = if event_stream {
            client::parse_sse(&raw)
        } else {
            Vec::new()
        };
        SseResponse {
            status: conn.status,
            headers: conn.headers.clone(),
            raw,
            frames,
        }
    }

    /// Opens a streaming request; read it frame by frame, drop it to
    /// disconnect.
    pub fn open_stream(&self, path: &str, body: &Value) -> Connection {
        self.open_stream_with_headers(path, Some(&self.key), &[], body)
    }

    pub fn open_stream_with_headers(
        &self,
        path: &str,
        key: Option<&str>,
        extra_headers: &[(&str, &str)],
        body: &Value,
    ) -> Connection {
        let mut extra = vec![("Accept", "text/event-stream")];
        extra.extend_from_slice(extra_headers);
        let headers = headers(key, &extra, true);
        Connection::open(
            self.addr,
            "POST",
            path,
            &headers,
            body.to_string().as_bytes(),
        )
    }

    /// Replaces the config file the way editors do: a temporary file renamed over it.
    pub fn rewrite_config(&self, text: &str) {
        let temporary = self.config.with_extension("toml.swp");
        std::fs::write(&temporary, text).expect("write the config");
        std::fs::rename(&temporary, &self.config).expect("rename over the config");
    }

    /// `GET /admin/config` with the config's `admin_token`; it must answer 200.
    pub fn admin_config(&self, admin_token: &str) -> Value {
        let response = self.get("/admin/config", Some(admin_token));
        assert_eq!(response.status, 200, "{}", response.text());
        response.json()
    }

    /// `GET path` with `key`.
    pub fn get(&self, path: &str, key: Option<&str>) -> Response {
        self.request("GET", path, key, &[], b"")
    }

    /// `GET /invocations/{id}` with the test project's key.
    pub fn get_invocation(&self, id: &str) -> Response {
        self.get(&format!("/invocations/{id}"), Some(&self.key))
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        if let Some(child) = &self.child {
            signal(child.id(), libc::SIGTERM);
        }
    }

    /// Waits for the process to exit (after [`Gateway::terminate`]); panics
    /// (after killing it) if it takes longer than a minute.
    pub fn wait_exit(&mut self) -> ExitStatus {
        if let Some(status) = self.exit {
            return status;
        }
        let mut child = self.child.take().expect("the gateway process");
        let deadline = Instant::now() + EXIT_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "gateway did not exit within {EXIT_TIMEOUT:?}; stderr:\n{}",
                        self.logs()
                    );
                }
            }
        };
        // The pipes close with the process: collect everything it wrote.
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        self.exit = Some(status);
        status
    }

    /// SIGTERM, then waits for the exit.
    pub fn shutdown(&mut self) -> ExitStatus {
        self.terminate();
        self.wait_exit()
    }

    /// SIGKILL (a crash: nothing of the process runs after it), then waits for the exit;
    /// [`Gateway::restart`] starts it again on the same config, database and journal.
    pub fn kill(&mut self) -> ExitStatus {
        if let Some(child) = &self.child {
            signal(child.id(), libc::SIGKILL);
        }
        self.wait_exit()
    }
}

/// Where a gateway keeps its state.
enum GatewayDatabase {
    /// `gateway.db` in the gateway's directory.
    Sqlite,
    /// A PostgreSQL database: the gateway's own (dropped with it) or a test's.
    Postgres {
        url: String,
        /// Held only to be dropped after the process.
        _own: Option<TestDatabase>,
    },
}

/// Appends the bytes of the file at `path`, or of every file under it.
fn read_all(path: &Path, bytes: &mut Vec<u8>) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            read_all(&entry.path(), bytes);
        }
    } else {
        // A journal file may be truncated or removed as it is read: nothing then.
        bytes.extend(std::fs::read(path).unwrap_or_default());
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        signal(child.id(), libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers; the pid is our own child, not yet reaped.
    unsafe {
        libc::kill(pid, sig);
    }
}

fn headers<'a>(
    key: Option<&'a str>,
    extra: &[(&'a str, &'a str)],
    json_body: bool,
) -> Vec<(&'a str, &'a str)> {
    let mut headers = Vec::new();
    if json_body {
        headers.push(("Content-Type", "application/json"));
    }
    if let Some(key) = key {
        headers.push(("Authorization", key));
    }
    headers.extend_from_slice(extra);
    headers
}

impl CliOutput {
    /// Panics with the output unless the command succeeded.
    pub fn checked(self, what: &str) -> CliOutput {
        assert!(
            self.status.success(),
            "`gateway {what}` failed ({}):\nstdout: {}\nstderr: {}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }
}

fn cli_in(config: &Path, args: &[&str]) -> CliOutput {
    let output = Command::new(gateway_binary())
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("GATEWAY_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `gateway {}`: {e}", args.join(" ")));
    CliOutput {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `start` (a gateway's start) after any other started this way: the first start of a
/// gateway loading Python or JavaScript components compiles them (an 18 MB component is tens of
/// seconds of CPU for cranelift) into the suite's [`shared_plugin_cache`], and the next ones
/// load them from it, instead of every test compiling the same component at once.
pub fn one_at_a_time<T>(start: impl FnOnce() -> T) -> T {
    static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = STARTING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    start()
}

/// The compiled-plugin cache every test gateway shares (unless it asks for its own): each
/// plugin is compiled once per suite run rather than once per gateway, which was most of the
/// suite's CPU time. The gateway's cache is made for sharing (entries are named by the plugin's
/// hash and the engine's, written under a temporary name and renamed, read whole). It lives
/// beside the built plugins; entries older than the newest plugin file are dropped when the
/// suite starts, so it holds one generation of builds.
pub fn shared_plugin_cache() -> &'static Path {
    static CACHE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| {
        let built = built_plugins_dir();
        let dir = built.join(".test-cache");
        let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let newest_plugin = std::fs::read_dir(&built)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "wasm"))
            .filter_map(|path| modified(&path))
            .max();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if modified(&path) < newest_plugin {
                // Another suite may be reading it: it only compiles again.
                let _ = std::fs::remove_file(&path);
            }
        }
        dir
    })
}

/// Copies the plugins the routes use into the test's own plugins directory,
/// so each gateway compiles only what it serves. Copies, not links: a
/// rebuild of the plugins during a test run must not change a running test.
fn install_plugins(routes: &[Route], others: &[String], into: &Path) {
    let source = built_plugins_dir();
    let mut installed: Vec<&str> = Vec::new();
    let names = (routes.iter().map(|route| route.config.plugin.as_str()))
        .chain(others.iter().map(String::as_str));
    for name in names {
        if installed.contains(&name) {
            continue;
        }
        let file = source.join(format!("{name}.wasm"));
        if !file.is_file() {
            if BUNDLED_PLUGINS.contains(&name) {
                panic!(
                    "plugin {} is missing: build the plugins first with `cargo xtask test` \
                     (or `cargo xtask plugins`), or point GATEWAY_TEST_PLUGINS_DIR at them",
                    file.display()
                );
            }
            // Deliberately absent (tests of a route whose plugin is not loaded).
            continue;
        }
        std::fs::copy(&file, into.join(format!("{name}.wasm")))
            .unwrap_or_else(|e| panic!("cannot copy {}: {e}", file.display()));
        installed.push(name);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gateway {
    /// The process id of the running `gateway serve` (to read its memory use
    /// from `/proc`), `None` when it is not running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}
