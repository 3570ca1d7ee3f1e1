//! `bench`: what the gateway costs, measured against going straight to the
//! upstream and against a bare hyper reverse proxy, in one run on one machine.
//!
//! ```sh
//! cargo xtask bench            # builds the gateway, the plugins and this; runs `all`
//! cargo xtask bench --smoke    # a few seconds on the test build; what CI runs (tests/smoke.rs too)
//! target/release/bench all --runs 3 --out bench/results/latest.md
//! ```
//!
//! See `BENCHMARKS.md` for the scenarios, the figures and how to read them.

mod child;
mod gateway;
mod load;
mod proxy;
mod report;
mod scenarios;
mod serve;
mod sys;
mod upstream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use scenarios::Scenario;

#[derive(Parser)]
#[command(
    name = "bench",
    about = "Benchmark the gateway against direct-to-upstream and a bare hyper proxy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every scenario of issue 5, in order (with `--smoke`, `mcp` and `batch` too).
    All(Options),
    /// (1) Added latency at concurrency 1.
    Latency(Options),
    /// (2) Saturation throughput and latency at fixed rates.
    Throughput(Options),
    /// (3) Streaming: time to first frame, gaps between frames.
    Streaming(Options),
    /// (4) Gateway memory idle, under many streams, after the load.
    Memory(Options),
    /// (5) Process start to first served request.
    Coldstart(Options),
    /// (6) MCP `tools/call` through the gateway (a remote server's tool and a tool plugin's)
    /// against the same call straight to the upstream: c=1 latency, saturation throughput.
    Mcp(Options),
    /// (7) Interactive requests (c=1 latency, saturation throughput) while a 10,000-line batch
    /// runs on the same gateway, against the same requests with no batch.
    Batch(Options),
    /// Steady load on one path for profiling (`perf record -g -p PID`); prints the PIDs.
    Soak(SoakOptions),
    /// Runs the fake upstream (used by the harness itself).
    #[command(hide = true)]
    Upstream {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
    },
    /// Runs the baseline proxy (used by the harness itself).
    #[command(hide = true)]
    Proxy {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        #[arg(long)]
        upstream: SocketAddr,
    },
}

/// Options every scenario takes.
#[derive(Args, Clone, Debug)]
pub struct Options {
    /// A few seconds in all, for CI: checks that everything works, times nothing seriously.
    #[arg(long)]
    pub smoke: bool,
    /// Repetitions of each measurement; the report shows the median (default 3, smoke 1).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Where the markdown report is written (default bench/results/latest.md; smoke: a temp file).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The gateway binary (default target/release/gateway).
    #[arg(long)]
    pub gateway: Option<PathBuf>,
    /// The directory with openai.wasm, and rust-tool.wasm for `mcp` (default
    /// target/wasm32-wasip2/plugin).
    #[arg(long)]
    pub plugins_dir: Option<PathBuf>,
    /// RUST_LOG for the gateway (default: unset, i.e. the gateway's own default, `info`).
    #[arg(long)]
    pub gateway_log: Option<String>,
    /// Streams held open at once in the memory scenario (default 1000, smoke 20).
    #[arg(long)]
    pub streams: Option<usize>,
    /// Content frames per stream in the memory scenario (250 ms apart; default 40, smoke 5).
    #[arg(long)]
    pub stream_frames: Option<u32>,
    /// The config key of the compiled-plugin cache directory, tried in the cold-start
    /// scenario; a gateway that does not know it is measured without a cache.
    #[arg(long, default_value = "plugin_cache_dir")]
    pub cache_key: String,
    /// Which of the gateway's API surfaces the gateway's requests use: `commonbase`
    /// (`POST /completions`) or `openai` (`POST /v1/chat/completions`, model `ROUTE/MODEL`).
    #[arg(long, value_enum, default_value_t = gateway::Surface::Commonbase)]
    pub surface: gateway::Surface,
    /// The plugin serving the gateway's route: `openai` (the fake upstream's chat completions)
    /// or `bedrock` (its Bedrock Converse, each request signed with SigV4: the cost of a cloud
    /// provider's plugin; whole answers only, so not for `streaming` and `memory`). The
    /// `direct` and `proxy` paths always call the OpenAI-compatible endpoint.
    #[arg(long, value_enum, default_value_t = gateway::Provider::Openai)]
    pub provider: gateway::Provider,
    /// The gateways' `database`: a `postgres://` URL of an existing database, shared by the
    /// run's gateways (default: a SQLite file each). A gateway older than PostgreSQL support
    /// refuses it.
    #[arg(long)]
    pub database: Option<String>,
    /// The gateways' `redis_url` for their rate-limit counters (each gateway under a key
    /// prefix of its own). Without `--limits` nothing is counted.
    #[arg(long)]
    pub redis: Option<String>,
    /// Set every kind of limit (rpm, tpm, daily and monthly budget) on the project and
    /// on the key, far above what the run reaches: every request pays for the whole check.
    #[arg(long)]
    pub limits: bool,
    /// A top-level line added to the gateways' config, as it is (`--config-line "metrics =
    /// false"`); repeatable. `{upstream}` in it stands for the fake upstream's address, whose
    /// `/v1/traces` is an OTLP sink (`--config-line 'otlp_endpoint = "http://{upstream}"'`).
    #[arg(long = "config-line")]
    pub config_lines: Vec<String>,
    /// A line added to the gateways' route table, as it is (`--route-line "cache_ttl_secs =
    /// 3600"`: every request after the first is answered from the response cache); repeatable.
    #[arg(long = "route-line")]
    pub route_lines: Vec<String>,
    /// A header every request to the gateways carries, `NAME: VALUE` (`--header
    /// "x-gateway-cache: no-cache"`: each request misses the cache and stores its answer);
    /// repeatable.
    #[arg(long = "header", value_parser = gateway::parse_header)]
    pub headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
    /// A guard plugin (`.wasm`) every request goes through (`global_guards`), with its
    /// `[guards.bench.settings]` given as TOML by `--guard-settings`: the cost of a guard.
    #[arg(long)]
    pub guard: Option<std::path::PathBuf>,
    /// The guard's settings, a TOML inline table (`{ mode = "redact" }`).
    #[arg(long, default_value = "{}")]
    pub guard_settings: String,
}

/// Options of `soak`.
#[derive(Args, Clone, Debug)]
pub struct SoakOptions {
    #[command(flatten)]
    pub common: Options,
    /// `direct`, `proxy` or `gateway`.
    #[arg(long, default_value = "gateway")]
    pub target: String,
    /// Connections in the closed loop.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// How long the load runs.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// Stream the answers.
    #[arg(long)]
    pub stream: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::All(options) => scenarios::run(&options, Scenario::all(options.smoke)),
        Command::Latency(options) => scenarios::run(&options, &[Scenario::Latency]),
        Command::Throughput(options) => scenarios::run(&options, &[Scenario::Throughput]),
        Command::Streaming(options) => scenarios::run(&options, &[Scenario::Streaming]),
        Command::Memory(options) => scenarios::run(&options, &[Scenario::Memory]),
        Command::Coldstart(options) => scenarios::run(&options, &[Scenario::ColdStart]),
        Command::Mcp(options) => scenarios::run(&options, &[Scenario::Mcp]),
        Command::Batch(options) => scenarios::run(&options, &[Scenario::Batch]),
        Command::Soak(options) => scenarios::soak(&options),
        Command::Upstream { listen } => upstream::run(listen),
        Command::Proxy { listen, upstream } => proxy::run(listen, upstream),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bench: {message}");
            ExitCode::FAILURE
        }
    }
}
