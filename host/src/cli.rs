//! The `gateway` command line: serve, and administer projects, keys and invocations.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::clock::{format_time_ms, now_ms, parse_time};
use crate::config::reload::WatchConfigError;
use crate::config::{Config, LogFormat};
use crate::limits::{LimitSet, Period};
use crate::plugins::hot_reload::HotReloadError;
use crate::plugins::{PluginRuntime, RuntimeError};
use crate::reports::{self, ExportFormat, ReportError};
use crate::routing::{RouteError, Routes};
use crate::server::{self, ServeError, admin};
use crate::state::AppState;
use crate::store::journal::{Journal, JournalError};
use crate::store::report::{GroupBy, RecordRange};
use crate::store::{
    InvocationFilter, InvocationLog, KeyScope, KeySpec, LimitUpdate, Store, StoreError,
};

/// Why a command failed; printed as `error: ...`.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("give at least 8 characters of the key")]
    ShortKeyPrefix,
    #[error(
        "give at least one limit to change: --rpm, --tpm, --daily-budget-usd or \
         --monthly-budget-usd (0 clears one)"
    )]
    NoLimitGiven,
    #[error("{0:?} is not an invocation id")]
    NotAnInvocationId(String),
    #[error("no invocation {0}")]
    NoInvocation(String),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("--until must be later than --since")]
    EmptyRange,
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    PluginRuntime(#[from] RuntimeError),
    #[error(transparent)]
    PluginsDir(#[from] HotReloadError),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: std::net::SocketAddr,
        source: std::io::Error,
    },
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
}

#[derive(Parser)]
#[command(
    name = "gateway",
    version,
    about = "LLM inference gateway with WebAssembly provider plugins"
)]
struct Cli {
    /// Configuration file (TOML). Without one, the built-in defaults apply.
    #[arg(long, global = true, env = "GATEWAY_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API.
    Serve,
    /// Bring the database's schema up to date and exit (every command,
    /// `serve` included, does this first; this does only that).
    Migrate,
    /// Manage projects.
    Project {
        #[command(subcommand)]
        command: ProjectCommand,
    },
    /// Manage project API keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Inspect invocation records.
    Invocations {
        #[command(subcommand)]
        command: InvocationsCommand,
    },
    /// Requests, tokens, spend, errors and latency of the invocation records: one total row,
    /// or a row per day, model, route, user, key or project.
    #[command(long_about = USAGE_ABOUT)]
    Usage(UsageArgs),
    /// Inspect provider plugins.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// List the plugins of the running gateway (or, when it is not running,
    /// what it would load from plugins_dir).
    List,
}

#[derive(Subcommand)]
enum ProjectCommand {
    /// Create a project; prints its id as the last line.
    Create { name: String },
    /// List every project with its limits, oldest first.
    List,
    /// Change a project's rate limits and budgets (shared by all its keys); prints them after
    /// the change.
    Limit {
        project_id: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Requests, tokens and spend of a project since the current UTC day or month began.
    Usage {
        project_id: String,
        #[arg(long, value_enum, default_value_t = PeriodArg::Day)]
        period: PeriodArg,
    },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Create an API key for a project; prints the key (shown only this once) as the last line.
    Create {
        project_id: String,
        #[command(flatten)]
        limits: LimitArgs,
        /// Route ids the key may use (with any model); default: every route.
        #[arg(long, value_delimiter = ',', value_name = "ROUTE,...", value_parser = parse_route)]
        routes: Vec<String>,
        /// ROUTE/MODEL pairs the key may use; default: every model.
        #[arg(long, value_delimiter = ',', value_name = "ROUTE/MODEL,...", value_parser = parse_route_model)]
        models: Vec<String>,
        /// When the key stops working: a duration (30d, 12h), a date (the key works through
        /// that UTC day) or an RFC 3339 time.
        #[arg(long, value_name = "30d|DATE|TIME", value_parser = parse_expires)]
        expires: Option<i64>,
    },
    /// Change one key's own rate limits and budgets; prints its prefix and its limits after
    /// the change.
    Limit {
        /// At least 8 characters of the key, or the whole key.
        key_prefix: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Revoke every key starting with this prefix (at least 8 characters) or the one whole key.
    Revoke { key_prefix: String },
}

/// The limit flags `project limit`, `key create` and `key limit` share. Absent: unchanged
/// (for `key create`: none); 0: cleared.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
struct LimitArgs {
    /// Requests per minute (0 clears).
    #[arg(long, value_name = "N")]
    rpm: Option<u32>,
    /// Tokens (prompt + completion) per minute (0 clears).
    #[arg(long, value_name = "N")]
    tpm: Option<u64>,
    /// Spend per UTC day, in US dollars (0 clears).
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    daily_budget_usd: Option<f64>,
    /// Spend per UTC month, in US dollars (0 clears).
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    monthly_budget_usd: Option<f64>,
}

impl LimitArgs {
    fn update(self) -> LimitUpdate {
        LimitUpdate {
            rpm: self.rpm,
            tpm: self.tpm,
            daily_budget_usd: self.daily_budget_usd,
            monthly_budget_usd: self.monthly_budget_usd,
        }
    }

    fn is_empty(&self) -> bool {
        self.update() == LimitUpdate::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PeriodArg {
    Day,
    Month,
}

impl PeriodArg {
    fn period(self) -> Period {
        match self {
            PeriodArg::Day => Period::Day,
            PeriodArg::Month => Period::Month,
        }
    }
}

/// A budget in dollars: finite and not negative (0 clears it).
fn parse_budget(text: &str) -> Result<f64, String> {
    let usd: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of dollars"))?;
    if !usd.is_finite() || usd < 0.0 {
        return Err(format!(
            "{text:?}: a budget is a finite amount of dollars, not negative (0 clears it)"
        ));
    }
    Ok(usd)
}

/// One route id of a key's scope (`a,,b` is a typo, not "every route").
fn parse_route(text: &str) -> Result<String, String> {
    let route = text.trim();
    if route.is_empty() {
        return Err("an empty route id".to_owned());
    }
    Ok(route.to_owned())
}

/// One `ROUTE/MODEL` of a key's scope.
fn parse_route_model(text: &str) -> Result<String, String> {
    match text.trim().split_once('/') {
        Some((route, model)) if !route.is_empty() && !model.is_empty() => {
            Ok(text.trim().to_owned())
        }
        _ => Err(format!(
            "{text:?} is not ROUTE/MODEL (e.g. openai/gpt-4o-mini)"
        )),
    }
}

fn parse_expires(text: &str) -> Result<i64, String> {
    crate::clock::parse_expiry(text, now_ms())
}

/// One line per limit: `rpm: 10`, `daily_budget_usd: none`.
fn print_limits(limits: &LimitSet) {
    let show = |value: Option<String>| value.unwrap_or_else(|| "none".to_owned());
    println!("rpm: {}", show(limits.rpm.map(|n| n.to_string())));
    println!("tpm: {}", show(limits.tpm.map(|n| n.to_string())));
    println!(
        "daily_budget_usd: {}",
        show(limits.daily_budget_usd.map(|usd| usd.to_string()))
    );
    println!(
        "monthly_budget_usd: {}",
        show(limits.monthly_budget_usd.map(|usd| usd.to_string()))
    );
}

/// A limit set on one line, for tables: `rpm=10,daily_budget_usd=5` or `-`.
fn limits_summary(limits: &LimitSet) -> String {
    let mut parts = Vec::new();
    if let Some(n) = limits.rpm {
        parts.push(format!("rpm={n}"));
    }
    if let Some(n) = limits.tpm {
        parts.push(format!("tpm={n}"));
    }
    if let Some(usd) = limits.daily_budget_usd {
        parts.push(format!("daily_budget_usd={usd}"));
    }
    if let Some(usd) = limits.monthly_budget_usd {
        parts.push(format!("monthly_budget_usd={usd}"));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(",")
    }
}

const USAGE_ABOUT: &str = "\
Requests, tokens, spend, errors and latency of the invocation records: a table, or with --json
a JSON document {\"filter\": {\"project_id\", \"since\", \"until\", \"by\"}, \"rows\": [...]}.

A row has its group's values (day, model, route, user_id, key_prefix, project_id: the ones --by
asked for; null, in the table `-`, where the records have none) and these numbers:

  JSON                   TABLE
  requests               REQUESTS        every record, whatever its outcome
  errors                 ERRORS          records whose status is not success: error,
                                         rate_limited and cancelled all count
  prompt_tokens          PROMPT          tokens as the providers reported them
  completion_tokens      COMPLETION
  total_tokens           TOTAL
  cached_prompt_tokens   CACHED_PROMPT   prompt tokens read from the provider's cache
  cache_creation_tokens  CACHE_CREATION  prompt tokens written to it
  reasoning_tokens       REASONING
  cost_usd               COST_USD        the recorded costs added up (calls of a model
                                         without a price add nothing)
  p50_duration_ms        P50_MS          nearest-rank percentiles of duration_ms: the
  p95_duration_ms        P95_MS          smallest of the group's durations that 50% (95%)
                                         of them are not above (null, `-`: no records)

Rows are ordered by their group values (missing values last); without --by there is one row,
of zeros when no record matches. Records still on their way to the database (the writer's
queue, the journal of a gateway that is down) are not counted yet.";

/// The options of `gateway usage`.
#[derive(clap::Args, Debug)]
struct UsageArgs {
    /// Only this project's invocations.
    #[arg(long, value_name = "PROJECT_ID")]
    project: Option<String>,
    /// Invocations created at or after this: a date (YYYY-MM-DD, UTC midnight) or an RFC 3339
    /// time (2026-05-01T12:00:00Z, 2026-05-01T14:00:00+02:00); default: all time.
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    since: Option<i64>,
    /// Invocations created before this (exclusive): a date or time as for --since; default: no
    /// end.
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    until: Option<i64>,
    /// A row per value of: day (the UTC date), model, route, user, key (its stored prefix) or
    /// project; several, comma-separated (day,model), for a row per combination. Default: one
    /// row for everything.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GROUP,...")]
    by: Vec<ByArg>,
    /// Print a JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

impl UsageArgs {
    /// The groups asked for, each once, in the order given.
    fn groups(&self) -> Vec<GroupBy> {
        let mut groups = Vec::new();
        for group in self.by.iter().map(|by| by.group()) {
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        groups
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ByArg {
    /// The UTC date of the record's creation.
    Day,
    Model,
    /// The route id.
    Route,
    /// The caller's user id.
    User,
    /// The stored prefix of the project key used.
    Key,
    Project,
}

impl ByArg {
    fn group(self) -> GroupBy {
        match self {
            ByArg::Day => GroupBy::Day,
            ByArg::Model => GroupBy::Model,
            ByArg::Route => GroupBy::Route,
            ByArg::User => GroupBy::User,
            ByArg::Key => GroupBy::Key,
            ByArg::Project => GroupBy::Project,
        }
    }
}

const EXPORT_ABOUT: &str = "\
Write the invocation records of a period to stdout, oldest first (by created_at, then id), for
analysis elsewhere. Records are read a thousand at a time: an export of any length holds one
page in memory.

--format jsonl (the default): one JSON object a line, the record as `invocations show` and
GET /invocations/{id} present it (request and response bodies, attempts) plus keyPrefix.

--format csv: a header line, then one line a record (RFC 4180 quoting), without bodies:
  id, created_at, project_id, key_prefix, user_id, route, plugin, model, type, stream, status,
  http_status, duration_ms, prompt_tokens, completion_tokens, total_tokens,
  cached_prompt_tokens, cache_creation_tokens, reasoning_tokens, cost_usd, error
created_at is RFC 3339 (UTC, milliseconds); a missing value is an empty field.

Records hold only the prefix of a project key, never a whole key, nor a provider key.";

#[derive(Subcommand)]
enum InvocationsCommand {
    /// List invocations, newest first.
    List {
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        user: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show one invocation record as JSON.
    Show { id: String },
    /// Write the invocation records of a period to stdout, oldest first, as JSON lines or CSV.
    #[command(long_about = EXPORT_ABOUT)]
    Export {
        /// Records created at or after this: a date (YYYY-MM-DD, UTC midnight) or an RFC 3339
        /// time (2026-05-01T12:00:00Z, 2026-05-01T14:00:00+02:00).
        #[arg(long, value_name = "DATE", value_parser = parse_time)]
        since: i64,
        /// Records created before this (exclusive): a date or time as for --since; default:
        /// no end.
        #[arg(long, value_name = "DATE", value_parser = parse_time)]
        until: Option<i64>,
        /// Only this project's records.
        #[arg(long, value_name = "PROJECT_ID")]
        project: Option<String>,
        /// How to write the records: JSON lines (bodies included) or CSV (flat, no bodies).
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
    },
}

/// The records a report covers; refused when the bounds leave nothing or the project does
/// not exist (a mistyped id would otherwise read as a project without usage).
async fn record_range(
    store: &Store,
    project_id: Option<String>,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
) -> Result<RecordRange, CliError> {
    if let (Some(since), Some(until)) = (since_ms, until_ms)
        && until <= since
    {
        return Err(CliError::EmptyRange);
    }
    if let Some(project_id) = &project_id
        && store.project(project_id).await?.is_none()
    {
        return Err(StoreError::UnknownProject(project_id.clone()).into());
    }
    Ok(RecordRange {
        project_id,
        since_ms,
        until_ms,
    })
}

/// `RUST_LOG`, or `info`. tokio-postgres logs every statement's parameters at debug level:
/// those are invocation records (request bodies, upstream error texts), which must not reach the
/// logs, so it stays at `info` unless `RUST_LOG` names it.
fn log_filter() -> tracing_subscriber::EnvFilter {
    let spec = std::env::var("RUST_LOG").unwrap_or_default();
    let filter =
        tracing_subscriber::EnvFilter::try_new(if spec.is_empty() { "info" } else { &spec })
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    if spec.contains("tokio_postgres") {
        return filter;
    }
    match "tokio_postgres=info".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// The log on stderr, in the config's `log_format`.
fn init_logging(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(log_filter());
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        // The current span (a request's, with its invocation id) on every line; the list of
        // enclosing spans would only repeat it.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    // reqwest is built without a default TLS provider; this process uses ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(config.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(execute(cli.command, config, cli.config)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn execute(
    command: Command,
    config: Config,
    config_path: Option<PathBuf>,
) -> Result<ExitCode, CliError> {
    if let Command::Plugins {
        command: PluginsCommand::List,
    } = command
    {
        return list_plugins(&config).await;
    }
    let store = Store::open(&config.database).await?;
    match command {
        Command::Serve => serve(config, config_path, store).await,
        Command::Migrate => {
            let migrated = store.migrated();
            let backend = store.backend_name();
            if migrated.from == migrated.to {
                println!(
                    "the {backend} schema is up to date (version {})",
                    migrated.to
                );
            } else {
                println!(
                    "migrated the {backend} schema from version {} to {}",
                    migrated.from, migrated.to
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Project {
            command: ProjectCommand::Create { name },
        } => {
            let project = store.create_project(&name).await?;
            println!("created project {:?}", project.name);
            println!("{}", project.id);
            Ok(ExitCode::SUCCESS)
        }
        Command::Project {
            command: ProjectCommand::List,
        } => {
            let projects = store.projects().await?;
            println!("ID  NAME  CREATED_AT  LIMITS");
            for project in projects {
                println!(
                    "{}  {}  {}  {}",
                    project.id,
                    project.name,
                    format_time_ms(project.created_at_ms),
                    limits_summary(&project.limits)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Project {
            command: ProjectCommand::Limit { project_id, limits },
        } => {
            if limits.is_empty() {
                return Err(CliError::NoLimitGiven);
            }
            let now = store
                .update_project_limits(&project_id, &limits.update())
                .await?;
            println!("limits of project {project_id}:");
            print_limits(&now);
            Ok(ExitCode::SUCCESS)
        }
        Command::Project {
            command: ProjectCommand::Usage { project_id, period },
        } => {
            if store.project(&project_id).await?.is_none() {
                return Err(StoreError::UnknownProject(project_id).into());
            }
            let since = period.period().start_ms(now_ms());
            let usage = store.usage_since(&project_id, since).await?;
            println!("project {project_id} since {}:", format_time_ms(since));
            println!("requests: {}", usage.requests);
            println!("prompt_tokens: {}", usage.prompt_tokens);
            println!("completion_tokens: {}", usage.completion_tokens);
            println!("total_tokens: {}", usage.total_tokens);
            println!("spend_usd: {}", usage.cost_usd);
            Ok(ExitCode::SUCCESS)
        }
        Command::Key {
            command:
                KeyCommand::Create {
                    project_id,
                    limits,
                    routes,
                    models,
                    expires,
                },
        } => {
            let spec = KeySpec {
                limits: limits.update().apply(LimitSet::default()),
                scope: KeyScope {
                    routes,
                    models,
                    expires_at_ms: expires,
                },
            };
            let key = store.create_key(&project_id, &spec).await?;
            println!("created a key for project {project_id}; it is shown only this once:");
            println!("{key}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Key {
            command: KeyCommand::Limit { key_prefix, limits },
        } => {
            if key_prefix.chars().count() < 8 {
                return Err(CliError::ShortKeyPrefix);
            }
            if limits.is_empty() {
                return Err(CliError::NoLimitGiven);
            }
            let (prefix, now) = store
                .update_key_limits(&key_prefix, &limits.update())
                .await?;
            println!("limits of key {prefix}:");
            print_limits(&now);
            Ok(ExitCode::SUCCESS)
        }
        Command::Key {
            command: KeyCommand::Revoke { key_prefix },
        } => {
            if key_prefix.chars().count() < 8 {
                return Err(CliError::ShortKeyPrefix);
            }
            let revoked = store.revoke_keys(&key_prefix).await?;
            println!("revoked {revoked} key(s)");
            Ok(if revoked == 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Invocations {
            command:
                InvocationsCommand::List {
                    project,
                    user,
                    limit,
                },
        } => {
            let filter = InvocationFilter {
                project_id: project,
                user_id: user,
                limit,
            };
            let records = store.list_invocations(&filter).await?;
            println!("ID  CREATED_AT  STATUS  HTTP_STATUS  ROUTE  MODEL  TOKENS  COST");
            for r in records {
                let dash = || "-".to_owned();
                println!(
                    "{}  {}  {}  {}  {}  {}  {}  {}",
                    r.id,
                    format_time_ms(r.created_at_ms),
                    r.status.as_str(),
                    r.http_status,
                    r.route.clone().unwrap_or_else(dash),
                    r.model.clone().unwrap_or_else(dash),
                    r.usage
                        .map(|u| u.total_tokens.to_string())
                        .unwrap_or_else(dash),
                    r.cost_usd.map(|c| format!("{c:.6}")).unwrap_or_else(dash),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugins { .. } => unreachable!("handled before the store opens"),
        Command::Usage(args) => {
            let range = record_range(&store, args.project.clone(), args.since, args.until).await?;
            let groups = args.groups();
            let rows = store.usage(&range, &groups).await?;
            let text = if args.json {
                let document = reports::usage_json(&range, &groups, &rows);
                serde_json::to_string_pretty(&document)? + "\n"
            } else {
                reports::usage_table(&groups, &rows)
            };
            match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(ReportError::Write(e).into())
                }
                // Written, or the reader went away (`| head`) having what it wanted.
                _ => Ok(ExitCode::SUCCESS),
            }
        }
        Command::Invocations {
            command:
                InvocationsCommand::Export {
                    since,
                    until,
                    project,
                    format,
                },
        } => {
            let range = record_range(&store, project, Some(since), until).await?;
            match reports::export(&store, &range, format, std::io::stdout()).await {
                Ok(_) => Ok(ExitCode::SUCCESS),
                // The reader went away (`| head`): it had what it wanted.
                Err(ReportError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => Err(e.into()),
            }
        }
        Command::Invocations {
            command: InvocationsCommand::Show { id },
        } => {
            let Ok(uuid) = uuid::Uuid::parse_str(&id) else {
                return Err(CliError::NotAnInvocationId(id));
            };
            match store.invocation(&uuid).await? {
                Some(record) => {
                    let text = serde_json::to_string_pretty(&record.to_json())?;
                    println!("{text}");
                    Ok(ExitCode::SUCCESS)
                }
                None => Err(CliError::NoInvocation(id)),
            }
        }
    }
}

async fn serve(
    config: Config,
    config_path: Option<PathBuf>,
    store: Store,
) -> Result<ExitCode, CliError> {
    // First: a second process on the same journal directory is refused
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
    let runtime = Arc::new(PluginRuntime::with_max_instances(
        config.plugin_cache_dir().as_deref(),
        config.max_plugin_instances.get(),
    )?);
    let (loaded, _rejected) = runtime.load_dir(&config.plugins_dir).await;
    let _watcher = crate::plugins::hot_reload::watch(runtime.clone(), &config.plugins_dir)?;
    crate::plugins::trim::spawn(Arc::downgrade(&runtime));
    for (id, route) in &config.providers {
        if !loaded.contains(&route.plugin) {
            tracing::warn!(route = %id, plugin = %route.plugin,
                "the route's plugin is not loaded: the route answers 503");
        }
    }

    let listen_error = |source| CliError::Listen {
        address: config.listen,
        source,
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(listen_error)?;
    let address = listener.local_addr().map_err(listen_error)?;
    let (log, writer) =
        InvocationLog::start(store.clone(), journal).map_err(CliError::InvocationWriter)?;
    if let Some(days) = config.record_retention_days {
        crate::store::retention::spawn(store.clone(), days.get());
    }
    let metrics_listener = match config.metrics_listen {
        Some(address) => {
            let listen_error = |source| CliError::Listen { address, source };
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(listen_error)?;
            Some((listener.local_addr().map_err(listen_error)?, listener))
        }
        None => None,
    };
    let routes = Routes::from_config(&config, None)?;
    let traces = crate::traces::Traces::start(&config)?;
    // Not the state: the invocation writer ends only once every handle of the state is gone.
    let flushing = traces.clone();
    let state = Arc::new(AppState::new(config, routes, runtime, store, log, traces));
    let metrics_server = metrics_listener.map(|(address, listener)| {
        println!("metrics on http://{address}/metrics");
        tokio::spawn(server::serve_metrics(listener, Arc::downgrade(&state)))
    });
    let _config_watcher = match &config_path {
        Some(path) => Some(crate::config::reload::watch_config(&state, path)?),
        None => None,
    };
    println!("gateway listening on http://{address}");
    let served = server::serve(listener, state, workers, shutdown_signal()).await;
    drop(_config_watcher);
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
    Ok(ExitCode::SUCCESS)
}

/// Asks the running gateway; when none answers, loads the plugins directory itself.
async fn list_plugins(config: &Config) -> Result<ExitCode, CliError> {
    let from_server = async {
        let token = config.admin_token.as_deref()?;
        let url = format!("http://{}/admin/plugins", config.listen);
        let response = reqwest::Client::new()
            .get(url)
            .bearer_auth(token)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let bytes = response.error_for_status().ok()?.bytes().await.ok()?;
        let body: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        serde_json::from_value::<Vec<admin::PluginRow>>(body["plugins"].clone()).ok()
    };
    let rows = match from_server.await {
        Some(rows) => rows,
        None => {
            println!(
                "(no running gateway answered on {} with the admin token: showing what {} holds)",
                config.listen,
                config.plugins_dir.display()
            );
            let runtime = PluginRuntime::new(config.plugin_cache_dir().as_deref())?;
            runtime.load_dir(&config.plugins_dir).await;
            admin::plugin_rows(&runtime, config)
        }
    };
    println!("PLUGIN  NAME  VERSION  WIT  STATUS  LOADED_AT  HASH  FILE  ROUTES");
    for row in rows {
        let r = &row.report;
        let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let status = match &r.reason {
            Some(reason) => format!("{} ({reason})", r.status),
            None => r.status.clone(),
        };
        println!(
            "{}  {}  {}  {}  {}  {}  {}  {}  {}",
            r.plugin,
            dash(&r.name),
            dash(&r.version),
            dash(&r.wit_version),
            status,
            dash(&r.loaded_at),
            r.hash
                .as_deref()
                .map(|h| &h[..h.len().min(12)])
                .unwrap_or("-"),
            r.file,
            if row.routes.is_empty() {
                "-".to_owned()
            } else {
                row.routes.join(",")
            },
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot listen for shutdown signals; stop the process with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        let mut full = vec!["gateway"];
        full.extend_from_slice(args);
        Cli::try_parse_from(full).map(|cli| cli.command)
    }

    #[test]
    fn limit_flags_become_an_update() {
        let Ok(Command::Project {
            command: ProjectCommand::Limit { project_id, limits },
        }) = parse(&[
            "project",
            "limit",
            "p1",
            "--rpm",
            "0",
            "--daily-budget-usd",
            "2.5",
        ])
        else {
            panic!("not parsed as `project limit`");
        };
        assert_eq!(project_id, "p1");
        assert_eq!(
            limits.update(),
            LimitUpdate {
                rpm: Some(0),
                daily_budget_usd: Some(2.5),
                ..LimitUpdate::default()
            }
        );
        assert!(!limits.is_empty());
        assert!(LimitArgs::default().is_empty());
    }

    #[test]
    fn bad_budgets_models_and_expiries_are_refused_by_parsing() {
        for args in [
            &["key", "create", "p", "--daily-budget-usd=-1"][..],
            &["key", "create", "p", "--monthly-budget-usd", "NaN"],
            &["key", "create", "p", "--monthly-budget-usd", "inf"],
            &["key", "create", "p", "--models", "gpt-4o"],
            &["key", "create", "p", "--models", "openai/"],
            &["key", "create", "p", "--routes", "a,,b"],
            &["key", "create", "p", "--expires", "2001-01-01"],
            &["key", "limit", "gw_12345678", "--tpm=-5"],
        ] {
            assert!(parse(args).is_err(), "{args:?} was accepted");
        }
    }

    #[test]
    fn key_create_reads_its_scope() {
        let Ok(Command::Key {
            command:
                KeyCommand::Create {
                    routes,
                    models,
                    expires,
                    limits,
                    ..
                },
        }) = parse(&[
            "key",
            "create",
            "p",
            "--routes",
            "a,b",
            "--models",
            "a/x,c/y",
            "--expires",
            "1d",
            "--tpm",
            "100",
        ])
        else {
            panic!("not parsed as `key create`");
        };
        assert_eq!(routes, ["a", "b"]);
        assert_eq!(models, ["a/x", "c/y"]);
        assert!(expires.is_some_and(|at| at > now_ms()));
        assert_eq!(limits.update().apply(LimitSet::default()).tpm, Some(100));
    }

    #[test]
    fn usage_reads_its_groups_once_each_in_order_and_its_times() {
        let Ok(Command::Usage(args)) = parse(&[
            "usage",
            "--by",
            "day,model",
            "--by",
            "model,key",
            "--since",
            "2026-05-01",
            "--until",
            "2026-05-01T12:00:00+02:00",
            "--json",
        ]) else {
            panic!("not parsed as `usage`");
        };
        assert_eq!(args.groups(), [GroupBy::Day, GroupBy::Model, GroupBy::Key]);
        assert_eq!(args.since, Some(1_777_593_600_000));
        assert_eq!(args.until, Some(1_777_593_600_000 + 10 * 3_600_000));
        assert!(args.json);
        let Ok(Command::Usage(args)) = parse(&["usage"]) else {
            panic!("not parsed as `usage`");
        };
        assert!(args.groups().is_empty());
        assert_eq!((args.since, args.until, args.project), (None, None, None));
    }

    #[test]
    fn a_bad_time_is_refused_naming_its_flag() {
        for (args, flag) in [
            (&["usage", "--since", "last week"][..], "--since"),
            (&["usage", "--until", "2026-02-30"], "--until"),
            (&["invocations", "export", "--since", "1/5/2026"], "--since"),
            (
                &[
                    "invocations",
                    "export",
                    "--since",
                    "2026-05-01",
                    "--until",
                    "x",
                ],
                "--until",
            ),
            (&["invocations", "export", "--format", "csv"], "--since"),
        ] {
            let error = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} was accepted"));
            assert!(error.to_string().contains(flag), "{args:?}: {error}");
        }
        let Ok(Command::Invocations {
            command: InvocationsCommand::Export { format, since, .. },
        }) = parse(&["invocations", "export", "--since", "2026-05-01"])
        else {
            panic!("not parsed as `invocations export`");
        };
        assert_eq!((format, since), (ExportFormat::Jsonl, 1_777_593_600_000));
    }
}
