//! The `gateway` command line: serve, and administer projects, keys and invocations.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::plugins::PluginRuntime;
use crate::routing::Routes;
use crate::server::{self, AppState};
use crate::store::{InvocationFilter, InvocationLog, Store, format_time_ms};

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
}

#[derive(Subcommand)]
enum ProjectCommand {
    /// Create a project; prints its id as the last line.
    Create { name: String },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Create an API key for a project; prints the key (shown only this once) as the last line.
    Create { project_id: String },
    /// Revoke every key starting with this prefix (at least 8 characters) or the one whole key.
    Revoke { key_prefix: String },
}

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
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
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
    match runtime.block_on(execute(cli.command, config)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn execute(command: Command, config: Config) -> Result<ExitCode, String> {
    let store = Store::open(&config.database).map_err(|e| e.to_string())?;
    match command {
        Command::Serve => serve(config, store).await,
        Command::Project {
            command: ProjectCommand::Create { name },
        } => {
            let project = store
                .create_project(&name)
                .await
                .map_err(|e| e.to_string())?;
            println!("created project {:?}", project.name);
            println!("{}", project.id);
            Ok(ExitCode::SUCCESS)
        }
        Command::Key {
            command: KeyCommand::Create { project_id },
        } => {
            let key = store
                .create_key(&project_id)
                .await
                .map_err(|e| e.to_string())?;
            println!("created a key for project {project_id}; it is shown only this once:");
            println!("{key}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Key {
            command: KeyCommand::Revoke { key_prefix },
        } => {
            if key_prefix.chars().count() < 8 {
                return Err("give at least 8 characters of the key".into());
            }
            let revoked = store
                .revoke_keys(&key_prefix)
                .await
                .map_err(|e| e.to_string())?;
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
            let records = store
                .list_invocations(&filter)
                .await
                .map_err(|e| e.to_string())?;
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
        Command::Invocations {
            command: InvocationsCommand::Show { id },
        } => {
            let uuid = uuid::Uuid::parse_str(&id)
                .map_err(|_| format!("{id:?} is not an invocation id"))?;
            match store.invocation(&uuid).await.map_err(|e| e.to_string())? {
                Some(record) => {
                    let text = serde_json::to_string_pretty(&record.to_json())
                        .map_err(|e| e.to_string())?;
                    println!("{text}");
                    Ok(ExitCode::SUCCESS)
                }
                None => Err(format!("no invocation {id}")),
            }
        }
    }
}

async fn serve(config: Config, store: Store) -> Result<ExitCode, String> {
    if config.demo_project && store.project_count().await.map_err(|e| e.to_string())? == 0 {
        let project = store
            .create_project("demo")
            .await
            .map_err(|e| e.to_string())?;
        let key = store
            .create_key(&project.id)
            .await
            .map_err(|e| e.to_string())?;
        println!("demo project id: {}", project.id);
        println!("demo api key: {key}");
        println!(
            "(the key is shown only this once; `gateway key create {}` makes another)",
            project.id
        );
    }

    let runtime = Arc::new(PluginRuntime::new()?);
    let (loaded, rejected) = runtime.load_dir(&config.plugins_dir).await;
    for (file, reason) in &rejected {
        tracing::error!(file = %file.display(), "plugin rejected: {reason}");
    }
    for (id, route) in &config.providers {
        if !loaded.contains(&route.plugin) {
            tracing::warn!(route = %id, plugin = %route.plugin,
                "the route's plugin is not loaded: the route answers 503");
        }
    }

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let (log, writer) = InvocationLog::start(store.clone());
    let state = Arc::new(AppState {
        routes: Routes::from_config(&config)?,
        config,
        runtime,
        store,
        log,
    });
    println!("gateway listening on http://{address}");
    server::serve(listener, state, shutdown_signal()).await;
    // The writer ends once every request task has dropped its handle; a task
    // stuck past the grace period must not hold the process forever.
    if tokio::time::timeout(Duration::from_secs(10), writer.shutdown())
        .await
        .is_err()
    {
        tracing::error!("some invocation records could not be flushed before exit");
    }
    tracing::info!("stopped");
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
