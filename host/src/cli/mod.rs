//! The `gateway` command line: serve, and administer projects, keys and invocations. The words
//! are in [`args`]; each group of commands has its file; `serve` is the application itself,
//! wired in [`crate::server::app`].

mod access;
mod args;
mod checks;
mod invocations;
mod key;
mod plugins;
mod prices;
mod project;
mod scaffold;
mod usage;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::config::{Config, LogFormat};
use crate::plugins::RuntimeError;
use crate::reports::ReportError;
use crate::server::app::StartError;
use crate::store::{Store, StoreError};
use args::{Cli, Command, PluginsCommand, PricesCommand};

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
    /// A guard id that no `[guards.ID]` of the config defines.
    #[error(
        "no guard {id:?} is defined in the config ({defined}): add a [guards.{id}] table, or \
         give the --config that has it"
    )]
    UnknownGuard { id: String, defined: String },
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
    Start(#[from] StartError),
    #[error(transparent)]
    Prices(#[from] prices::PricesError),
    #[error(transparent)]
    Scaffold(#[from] scaffold::ScaffoldError),
    /// A value the command refuses, named by its flag.
    #[error("{0}")]
    Invalid(String),
    #[error("cannot write the export: {0}")]
    Write(#[from] std::io::Error),
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
    if let Command::CheckConfig { file } = &cli.command {
        return checks::check_config(file.as_deref().or(cli.config.as_deref()));
    }
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

/// Runs `command`; every command but `plugins list`, `plugin new`, `prices import` and
/// `healthcheck` opens the store first (migrating it).
async fn execute(
    command: Command,
    config: Config,
    config_path: Option<PathBuf>,
) -> Result<ExitCode, CliError> {
    let store = || Store::open(&config.database);
    match command {
        Command::Plugins {
            command: PluginsCommand::List,
        } => plugins::list(&config).await,
        Command::Prices {
            command: PricesCommand::Import { file, out },
        } => prices::import(&config, config_path.as_deref(), &file, out.as_deref()),
        Command::Serve => {
            let store = store().await?;
            crate::server::app::serve(config, config_path, store).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate => migrate(&store().await?),
        Command::Project { command } => project::run(&store().await?, &config, command).await,
        Command::Key { command } => key::run(&store().await?, command).await,
        Command::Invocations { command } => invocations::run(&store().await?, command).await,
        Command::Usage(args) => usage::usage(&store().await?, args).await,
        Command::Plugin { command } => scaffold::run(command),
        // Answered before the config was loaded.
        Command::CheckConfig { .. } => Ok(ExitCode::SUCCESS),
        Command::Healthcheck { url } => Ok(checks::healthcheck(&config, url).await),
        Command::AdminToken { command } => access::admin_token(&store().await?, command).await,
        Command::Audit { command } => access::audit(&store().await?, command).await,
        Command::Users { command } => access::users(&store().await?, command).await,
    }
}

/// `gateway migrate`: what opening the store did.
fn migrate(store: &Store) -> Result<ExitCode, CliError> {
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
