//! The five scenarios of issue 5. Each measures the gateway, the upstream
//! directly and the baseline proxy one after the other inside every run, so
//! slow drifts of a shared machine hit all three alike; figures are medians
//! over the runs, and "added" figures are medians of the per-run differences
//! with the direct path.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tempfile::TempDir;

use crate::Options;
use crate::SoakOptions;
use crate::child::Server;
use crate::gateway::{GatewayBuild, Provider, Setup, TOOL_PLUGIN, TOOL_PLUGIN_FILE, openai_target};
use crate::load::{self, LoadResult, StreamResult, Target};
use crate::report::{Check, Report, Table, Verdict, median, mib, ms, ms_signed, today};
use crate::sys;
use crate::upstream::stream_model;

mod batch;
mod mcp;

/// A scenario of the issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Latency,
    Throughput,
    Streaming,
    Memory,
    ColdStart,
    /// Issue 48's: MCP tool calls (in `all` only with `--smoke`: see [`Scenario::all`]).
    Mcp,
    /// Issue 53's: interactive requests while a batch runs (likewise).
    Batch,
}

impl Scenario {
    pub const ALL: &'static [Scenario] = &[
        Scenario::Latency,
        Scenario::Throughput,
        Scenario::Streaming,
        Scenario::Memory,
        Scenario::ColdStart,
    ];

    /// What `all` runs: the five scenarios of issue 5 and, in a smoke run (where they take a
    /// couple of seconds), `mcp` and `batch` too. A full `mcp` takes about 4 minutes and a
    /// full `batch` about 3: they run on their own, as `bench mcp` and `bench batch`.
    pub fn all(smoke: bool) -> &'static [Scenario] {
        const WITH_SMOKE_ONLY: &[Scenario] = &[
            Scenario::Latency,
            Scenario::Throughput,
            Scenario::Streaming,
            Scenario::Memory,
            Scenario::ColdStart,
            Scenario::Mcp,
            Scenario::Batch,
        ];
        if smoke {
            WITH_SMOKE_ONLY
        } else {
            Scenario::ALL
        }
    }
}

/// Durations and sizes of one invocation.
struct Plan {
    smoke: bool,
    runs: usize,
    warmup: Duration,
    latency_time: Duration,
    saturation_concurrency: usize,
    saturation_time: Duration,
    /// Requests per second of the open-loop runs.
    rates: Vec<f64>,
    rate_time: Duration,
    max_connections: usize,
    stream_frames: u32,
    stream_gap: Duration,
    stream_concurrency: Vec<usize>,
    stream_time: Duration,
    held_streams: usize,
    held_frames: u32,
    held_gap: Duration,
    /// Pause before an "idle" or "after" memory reading.
    settle: Duration,
    cold_starts: usize,
}

impl Plan {
    fn new(options: &Options) -> Plan {
        let mut plan = Plan::defaults(options);
        if let Some(streams) = options.streams {
            plan.held_streams = streams.max(1);
        }
        if let Some(frames) = options.stream_frames {
            plan.held_frames = frames.max(1);
        }
        plan
    }

    fn defaults(options: &Options) -> Plan {
        if options.smoke {
            Plan {
                smoke: true,
                runs: options.runs.unwrap_or(1).max(1),
                warmup: Duration::from_millis(100),
                latency_time: Duration::from_millis(300),
                saturation_concurrency: 8,
                saturation_time: Duration::from_millis(300),
                rates: vec![200.0],
                rate_time: Duration::from_millis(300),
                max_connections: 64,
                stream_frames: 5,
                stream_gap: Duration::from_millis(1),
                stream_concurrency: vec![1, 4],
                stream_time: Duration::from_millis(300),
                held_streams: 20,
                held_frames: 5,
                held_gap: Duration::from_millis(50),
                settle: Duration::from_millis(300),
                cold_starts: 1,
            }
        } else {
            Plan {
                smoke: false,
                runs: options.runs.unwrap_or(3).max(1),
                warmup: Duration::from_millis(500),
                // c=1 and c=64 for 10 s, in interleaved rounds: the load shape of the
                // wrk harness users compare gateways with (issue 25).
                latency_time: Duration::from_secs(10),
                saturation_concurrency: 64,
                saturation_time: Duration::from_secs(10),
                rates: vec![1000.0, 3000.0],
                rate_time: Duration::from_secs(2),
                max_connections: 1000,
                stream_frames: 20,
                stream_gap: Duration::from_millis(2),
                stream_concurrency: vec![1, 32],
                stream_time: Duration::from_secs(2),
                held_streams: 1000,
                held_frames: 40,
                held_gap: Duration::from_millis(250),
                settle: Duration::from_secs(2),
                cold_starts: 3,
            }
        }
    }
}

/// The processes every scenario shares.
struct Bench {
    plan: Plan,
    build: GatewayBuild,
    cache_key: String,
    /// Whether the gateway accepts `cache_key`; learnt on first use.
    cache_supported: Option<bool>,
    /// Holds the upstream's and proxy's logs.
    logs: TempDir,
    upstream: Server,
    proxy: Server,
    /// The long-running gateway of scenarios 1-3, started on first use.
    gateway: Option<(Setup, Server)>,
    report: Report,
}

const LABELS: [&str; 3] = ["direct", "proxy", "gateway"];

/// Closed-loop results per run and path, and the CPU time per request (ns) of
/// each path's server process, per run and path.
type ClosedRuns = (Vec<Vec<LoadResult>>, Vec<Vec<f64>>);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

impl Bench {
    /// The bench's gateway and its report's head; `mcp_only`: the report is `mcp`'s alone, and
    /// its head names that scenario's paths.
    fn start(options: &Options, snapshot: bool, mcp_only: bool) -> Result<Bench, String> {
        let plan = Plan::new(options);
        let binary = options
            .gateway
            .clone()
            .unwrap_or_else(|| target_dir().join("release/gateway"));
        let paths = if mcp_only {
            format!(
                "paths: `direct` = load generator → the fake upstream's MCP server (`tools/call`) or its `GET /v1/forecast`; \
                 `gateway` = → `{}`'s `POST /mcp` (auth, scopes, JSON-RPC, SQLite invocation log) → the remote server (`up__echo`) \
                 or the `{TOOL_PLUGIN}` plugin (`weather__current`, one request through the host's HTTP import) → upstream. \
                 All on 127.0.0.1, HTTP/1.1 keep-alive. Times in ms.",
                binary.display(),
            )
        } else {
            format!(
                "paths: `direct` = load generator → fake upstream; `proxy` = → bare hyper reverse proxy → upstream; \
                 `gateway` = → `{}` (auth, validation, {}.wasm plugin instance, SQLite invocation log) → upstream. \
                 All on 127.0.0.1, HTTP/1.1 keep-alive. Times in ms.",
                binary.display(),
                options.provider.plugin()
            )
        };
        let plugins_dir = options
            .plugins_dir
            .clone()
            .unwrap_or_else(|| target_dir().join("wasm32-wasip2/plugin"));
        let build = GatewayBuild {
            binary,
            plugin_wasm: plugins_dir.join(format!("{}.wasm", options.provider.plugin())),
            provider: options.provider,
            tool_wasm: plugins_dir.join(TOOL_PLUGIN_FILE),
            log_filter: options.gateway_log.clone(),
            surface: options.surface,
            database: options.database.clone(),
            redis: options.redis.clone(),
            limits: options.limits,
            config_lines: options.config_lines.clone(),
            route_lines: options.route_lines.clone(),
            headers: options.headers.clone(),
            guard: (options.guard.clone()).map(|wasm| (wasm, options.guard_settings.clone())),
        };
        build.check()?;
        let logs = tempfile::Builder::new()
            .prefix("bench-logs-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        // Private copies: a rebuild while the benchmark runs must not change
        // what later scenarios (and the cold starts) measure. Not for `soak`,
        // whose profiles must still find the binary's symbols after it ends.
        let build = if snapshot {
            build.snapshot(logs.path())?
        } else {
            build
        };
        let upstream = spawn_self("upstream", &["upstream"], logs.path())?;
        let proxy_args = ["proxy", "--upstream", &upstream.addr.to_string()];
        let proxy = spawn_self("proxy", &proxy_args, logs.path())?;

        let mut report = Report::default();
        report.header = vec![
            format!("date: {}", today()),
            format!("machine: {}", sys::machine()),
            format!("command: `{}`", command_line()),
            format!("commit: {}", git_commit()),
            format!(
                "runs: {} (figures are medians over the runs; \"added\" = median of the per-run differences with `direct`){}",
                plan.runs,
                if plan.smoke {
                    " — **smoke run: durations far too short for the figures to mean anything**"
                } else {
                    ""
                }
            ),
            paths,
        ];
        Ok(Bench {
            plan,
            build,
            cache_key: options.cache_key.clone(),
            cache_supported: None,
            logs,
            upstream,
            proxy,
            gateway: None,
            report,
        })
    }

    /// The shared gateway, started on first use.
    fn gateway(&mut self) -> Result<(&Setup, &mut Server), String> {
        if self.gateway.is_none() {
            let setup = Setup::new(&self.build, self.upstream.addr, "")?;
            let server = setup.serve("gateway")?;
            self.gateway = Some((setup, server));
        }
        match &mut self.gateway {
            Some((setup, server)) => {
                server.check_alive()?;
                Ok((setup, server))
            }
            None => Err("the gateway did not start".into()),
        }
    }

    /// The three paths for a chat with `model`.
    fn targets(&mut self, model: &str, stream: bool) -> Result<[Target; 3], String> {
        let upstream = self.upstream.addr;
        let proxy = self.proxy.addr;
        let (setup, server) = self.gateway()?;
        let gateway = setup.target(server.addr, model, stream)?;
        Ok([
            openai_target("direct", upstream, model, stream),
            openai_target("proxy", proxy, model, stream),
            gateway,
        ])
    }

    /// A closed-loop run on `target` and the CPU time per request (ns) of `pid`.
    fn closed_with_cpu(
        &self,
        target: &Target,
        pid: u32,
        concurrency: usize,
        duration: Duration,
    ) -> Result<(LoadResult, f64), String> {
        let before = sys::cpu_time(pid);
        let result = load::closed_loop(target, concurrency, self.plan.warmup, duration)?;
        let used = match (before, sys::cpu_time(pid)) {
            (Some(before), Some(after)) => after.saturating_sub(before).as_nanos() as f64,
            _ => f64::NAN,
        };
        let per_request = used / result.all_ok.max(1) as f64;
        Ok((result, per_request))
    }

    /// A fresh gateway setup whose config points `cache_key` at an empty
    /// directory (returned, to be kept alive), or without it when this build
    /// does not know the key.
    fn setup_with_cache(&mut self) -> Result<(Setup, Option<TempDir>), String> {
        if self.cache_supported == Some(false) {
            return Ok((Setup::new(&self.build, self.upstream.addr, "")?, None));
        }
        let cache = tempfile::Builder::new()
            .prefix("bench-plugin-cache-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let extra = format!(
            "{} = {}\n",
            self.cache_key,
            serde_json::to_string(&cache.path().join("cache").to_string_lossy())
                .map_err(|e| e.to_string())?
        );
        match Setup::new(&self.build, self.upstream.addr, &extra) {
            Ok(setup) => {
                self.cache_supported = Some(true);
                Ok((setup, Some(cache)))
            }
            // The config rejects unknown keys: this build has no plugin cache.
            Err(e) if e.contains("unknown field") => {
                self.cache_supported = Some(false);
                Ok((Setup::new(&self.build, self.upstream.addr, "")?, None))
            }
            Err(e) => Err(e),
        }
    }

    /// The process each path ends in: the upstream, the proxy, the gateway.
    fn pids(&self) -> [u32; 3] {
        [
            self.upstream.pid(),
            self.proxy.pid(),
            self.gateway.as_ref().map(|(_, s)| s.pid()).unwrap_or(0),
        ]
    }

    /// Fails the run when a server died; records failed requests as problems.
    fn health(&mut self) -> Result<(), String> {
        self.upstream.check_alive()?;
        self.proxy.check_alive()?;
        if let Some((_, server)) = &mut self.gateway {
            server.check_alive()?;
        }
        Ok(())
    }

    fn note_errors(
        &mut self,
        what: &str,
        label: &str,
        ok: u64,
        errors: u64,
        first: &Option<String>,
    ) {
        // A handful of failures among thousands is noted; more means something is broken.
        if errors == 0 {
            return;
        }
        let detail = first.as_deref().unwrap_or("no detail");
        let message =
            format!("{what}, {label}: {errors} failed requests ({ok} succeeded); first: {detail}");
        if ok == 0 || errors * 100 > ok + errors {
            self.report.problems.push(message);
        } else {
            eprintln!("bench: note: {message}");
        }
    }

    /// Measures every target once per run (`plan.runs` rows, a row's results
    /// in the targets' order), checking the servers' health after each run.
    /// Each run starts one target further along, so that no path always runs
    /// first or last (after a pause, or on caches another path warmed).
    fn repeat<R>(
        &mut self,
        targets: &[Target],
        measure: impl Fn(&Self, usize, &Target) -> Result<R, String>,
    ) -> Result<Vec<Vec<R>>, String> {
        let mut runs = Vec::new();
        for run in 0..self.plan.runs {
            let mut row: Vec<Option<R>> = targets.iter().map(|_| None).collect();
            for k in 0..targets.len() {
                let i = (run + k) % targets.len();
                row[i] = Some(measure(self, i, &targets[i])?);
            }
            runs.push(row.into_iter().flatten().collect());
            self.health()?;
        }
        Ok(runs)
    }

    /// Closed-loop runs of every target on `concurrency` connections for
    /// `duration`: the results and, per run and path, the CPU time per request
    /// (ns) of the process that path ends in (upstream, proxy, gateway).
    fn closed_runs(
        &mut self,
        targets: &[Target],
        concurrency: usize,
        duration: Duration,
    ) -> Result<ClosedRuns, String> {
        let pids = self.pids();
        let runs = self.repeat(targets, |bench, i, target| {
            bench.closed_with_cpu(target, pids[i], concurrency, duration)
        })?;
        Ok(runs.into_iter().map(|row| row.into_iter().unzip()).unzip())
    }

    /// Notes the failed requests of every result of `runs` (see
    /// [`Bench::note_errors`]); `counts` gives a result's successes, failures
    /// and first failure.
    fn note_run_errors<R>(
        &mut self,
        what: &str,
        runs: &[Vec<R>],
        counts: impl Fn(&R) -> (u64, u64, Option<String>),
    ) {
        for run in runs {
            for (result, label) in run.iter().zip(LABELS) {
                let (ok, errors, first) = counts(result);
                self.note_errors(what, label, ok, errors, &first);
            }
        }
    }

    fn latency(&mut self) -> Result<(), String> {
        eprintln!("bench: (1) added latency at concurrency 1");
        let targets = self.targets("bench", false)?;
        let (runs, cpu) = self.closed_runs(&targets, 1, self.plan.latency_time)?;
        let mut table = Table::new(&[
            "path",
            "req/s",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "added p50",
            "added p99",
            "CPU per request (its server process)",
        ]);
        for (i, label) in LABELS.iter().enumerate() {
            let of =
                |f: &dyn Fn(&LoadResult) -> f64| median(runs.iter().map(|r| f(&r[i])).collect());
            let added = |q: f64| {
                median(
                    runs.iter()
                        .map(|r| quantile(&r[i].latency, q) - quantile(&r[0].latency, q))
                        .collect(),
                )
            };
            table.row(vec![
                (*label).to_owned(),
                format!("{:.0}", of(&|r| r.rate())),
                ms(of(&|r| quantile(&r.latency, 0.5))),
                ms(of(&|r| quantile(&r.latency, 0.9))),
                ms(of(&|r| quantile(&r.latency, 0.99))),
                ms(of(&|r| quantile(&r.latency, 0.999))),
                ms(of(&|r| r.latency.max() as f64)),
                if i == 0 {
                    "".into()
                } else {
                    ms_signed(added(0.5))
                },
                if i == 0 {
                    "".into()
                } else {
                    ms_signed(added(0.99))
                },
                cpu_cell(&cpu, i),
            ]);
            if i == 2 {
                let p50 = added(0.5);
                let p99 = added(0.99);
                self.report.check(Check::at_most(
                    "added latency at c=1, p50",
                    "<= 0.150 ms",
                    p50,
                    150_000.0,
                    format!("{} ms", ms(p50)),
                ));
                self.report.check(Check::at_most(
                    "added latency at c=1, p99",
                    "<= 0.500 ms",
                    p99,
                    500_000.0,
                    format!("{} ms", ms(p99)),
                ));
            }
        }
        self.note_run_errors("latency", &runs, load_counts);
        let intro = format!(
            "Closed loop, one connection, one request at a time, non-streamed chat completion \
             (fixed ~300-byte answer). {} s measured after {} s warm-up, per path and run.",
            secs(self.plan.latency_time),
            secs(self.plan.warmup)
        );
        self.report
            .section("1. Added latency at concurrency 1", &intro, &[&table]);
        Ok(())
    }

    fn throughput(&mut self) -> Result<(), String> {
        eprintln!("bench: (2) saturation throughput and latency at fixed rates");
        let targets = self.targets("bench", false)?;
        let concurrency = self.plan.saturation_concurrency;
        let (runs, cpu) = self.closed_runs(&targets, concurrency, self.plan.saturation_time)?;
        let mut saturation = Table::new(&[
            "path",
            "req/s",
            "p50",
            "p99",
            "p99.9",
            "vs proxy",
            "CPU per request (its server process)",
        ]);
        for (i, label) in LABELS.iter().enumerate() {
            let of =
                |f: &dyn Fn(&LoadResult) -> f64| median(runs.iter().map(|r| f(&r[i])).collect());
            let vs_proxy = median(
                runs.iter()
                    .map(|r| r[i].rate() / r[1].rate().max(1e-9))
                    .collect(),
            );
            saturation.row(vec![
                (*label).to_owned(),
                format!("{:.0}", of(&|r| r.rate())),
                ms(of(&|r| quantile(&r.latency, 0.5))),
                ms(of(&|r| quantile(&r.latency, 0.99))),
                ms(of(&|r| quantile(&r.latency, 0.999))),
                format!("{vs_proxy:.2}x"),
                cpu_cell(&cpu, i),
            ]);
            if i == 2 {
                // Issue 25's target, there against nginx's proxy_pass; the
                // baseline here is the bench's own hyper proxy.
                self.report.check(Check::at_least(
                    "saturation throughput vs bare proxy",
                    ">= 0.25x",
                    vs_proxy,
                    0.25,
                    format!(
                        "{vs_proxy:.2}x ({:.0} vs {:.0} req/s)",
                        of(&|r| r.rate()),
                        median(runs.iter().map(|r| r[1].rate()).collect())
                    ),
                ));
            }
        }
        self.note_run_errors("saturation", &runs, load_counts);

        let mut fixed = Table::new(&[
            "rate",
            "path",
            "answered/s",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "unanswered",
        ]);
        for &rate in &self.plan.rates.clone() {
            let runs = self.repeat(&targets, |bench, _, target| {
                let plan = &bench.plan;
                load::open_loop(
                    target,
                    rate,
                    plan.warmup,
                    plan.rate_time,
                    plan.max_connections,
                )
            })?;
            for (i, label) in LABELS.iter().enumerate() {
                let of = |f: &dyn Fn(&LoadResult) -> f64| {
                    median(runs.iter().map(|r| f(&r[i])).collect())
                };
                fixed.row(vec![
                    format!("{rate:.0}/s"),
                    (*label).to_owned(),
                    format!("{:.0}", of(&|r| r.rate())),
                    ms(of(&|r| quantile(&r.latency, 0.5))),
                    ms(of(&|r| quantile(&r.latency, 0.9))),
                    ms(of(&|r| quantile(&r.latency, 0.99))),
                    ms(of(&|r| quantile(&r.latency, 0.999))),
                    ms(of(&|r| r.latency.max() as f64)),
                    format!("{:.0}", of(&|r| r.unfinished as f64)),
                ]);
            }
            self.note_run_errors(&format!("open loop at {rate:.0}/s"), &runs, load_counts);
        }
        let intro = format!(
            "Saturation: closed loop on {concurrency} connections, {} s per path and run. \
             Fixed rates: open loop (requests sent on a fixed schedule by a separate pacer thread, \
             up to {} connections), {} s per path and run; latency is counted from each request's \
             *intended* send time, so a stall shows up as the queue it causes. The gateway writes \
             an invocation record to SQLite for every request throughout.",
            secs(self.plan.saturation_time),
            self.plan.max_connections,
            secs(self.plan.rate_time)
        );
        self.report
            .section("2. Throughput", &intro, &[&saturation, &fixed]);
        Ok(())
    }

    /// Whether the route's plugin streams against the fake upstream (bedrock's does not).
    fn streams(&self, scenario: &str) -> bool {
        let streams = self.build.provider == Provider::Openai;
        if !streams {
            eprintln!(
                "bench: ({scenario}) skipped: the fake upstream streams only for `--provider openai`"
            );
        }
        streams
    }

    fn streaming(&mut self) -> Result<(), String> {
        eprintln!("bench: (3) streaming");
        if !self.streams("3") {
            return Ok(());
        }
        let frames = self.plan.stream_frames;
        let model = stream_model(frames, self.plan.stream_gap);
        let targets = self.targets(&model, true)?;
        let mut table = Table::new(&[
            "streams at once",
            "path",
            "streams/s",
            "first frame p50",
            "first frame p99",
            "gap p99",
            "gap stretch p99",
            "delivery p50",
            "delivery p99",
            "added first frame p50",
            "added gap stretch p99",
            "added delivery p50",
        ]);
        for &concurrency in &self.plan.stream_concurrency.clone() {
            let runs = self.repeat(&targets, |bench, _, target| {
                load::stream_loop(
                    target,
                    concurrency,
                    frames,
                    bench.plan.warmup,
                    bench.plan.stream_time,
                )
            })?;
            for (i, label) in LABELS.iter().enumerate() {
                let of = |f: &dyn Fn(&StreamResult) -> f64| {
                    median(runs.iter().map(|r| f(&r[i])).collect())
                };
                let added = |f: &dyn Fn(&StreamResult) -> f64| {
                    median(runs.iter().map(|r| f(&r[i]) - f(&r[0])).collect())
                };
                let first50 = |r: &StreamResult| quantile(&r.first_frame, 0.5);
                let stretch99 = |r: &StreamResult| quantile(&r.stretch, 0.99);
                let delivery50 = |r: &StreamResult| quantile(&r.delivery, 0.5);
                table.row(vec![
                    concurrency.to_string(),
                    (*label).to_owned(),
                    format!(
                        "{:.0}",
                        of(&|r| r.streams as f64 / self.plan.stream_time.as_secs_f64())
                    ),
                    ms(of(&first50)),
                    ms(of(&|r| quantile(&r.first_frame, 0.99))),
                    ms(of(&|r| quantile(&r.gap, 0.99))),
                    ms(of(&stretch99)),
                    ms(of(&delivery50)),
                    ms(of(&|r| quantile(&r.delivery, 0.99))),
                    if i == 0 {
                        "".into()
                    } else {
                        ms_signed(added(&first50))
                    },
                    if i == 0 {
                        "".into()
                    } else {
                        ms_signed(added(&stretch99))
                    },
                    if i == 0 {
                        "".into()
                    } else {
                        ms_signed(added(&delivery50))
                    },
                ]);
                if i == 2 && concurrency == 1 {
                    let first = added(&first50);
                    let gap = added(&stretch99);
                    self.report.check(Check::at_most(
                        "streaming: added time to first frame (c=1, p50)",
                        "<= 0.300 ms",
                        first,
                        300_000.0,
                        format!("{} ms", ms(first)),
                    ));
                    self.report.check(Check::at_most(
                        "streaming: added inter-frame gap p99 (c=1)",
                        "<= 0.100 ms",
                        gap,
                        100_000.0,
                        format!(
                            "{} ms (p99 of each gap's stretch beyond the upstream's own gap)",
                            ms(gap)
                        ),
                    ));
                }
            }
            self.note_run_errors(&format!("streaming at c={concurrency}"), &runs, |r| {
                (r.streams, r.errors, r.first_error.clone())
            });
        }
        let intro = format!(
            "Closed loop of streamed chat completions: the upstream writes {frames} content frames \
             {} ms apart (then a finish frame, a usage frame and `[DONE]`); {} s per path, \
             concurrency and run. *first frame*: request sent → first content frame read. *delivery*: \
             upstream's write of a frame → its arrival here (each frame carries its \
             CLOCK_MONOTONIC write time through the gateway). *gap*: between consecutive content \
             frames (includes the upstream's own timer jitter). *gap stretch*: how much longer a \
             gap arrived than the upstream wrote it (the difference of two consecutive \
             deliveries; the upstream's jitter cancels out): the added inter-frame gap.",
            self.plan.stream_gap.as_secs_f64() * 1000.0,
            secs(self.plan.stream_time)
        );
        self.report.section("3. Streaming", &intro, &[&table]);
        Ok(())
    }

    fn memory(&mut self) -> Result<(), String> {
        eprintln!("bench: (4) memory");
        if !self.streams("4") {
            return Ok(());
        }
        let plan = &self.plan;
        let count = plan.held_streams;
        let frames = plan.held_frames;
        let model = stream_model(frames, plan.held_gap);
        let settle = plan.settle;
        let mut table = Table::new(&[
            "process",
            "idle RSS, first start (MiB)",
            "idle RSS, restart with warm plugin cache",
            &format!("RSS with all {count} streams open"),
            "peak RSS during the load",
            "RSS after the load",
            "after / idle",
        ]);

        // A fresh gateway: its idle memory must not include earlier scenarios.
        // Its first start compiles the plugin in-process; a restart with a
        // warm compiled-plugin cache (when the build has one) does not, and is
        // the steady state the streams then run against.
        let (setup, _cache) = self.setup_with_cache()?;
        let first = setup.serve("gateway-memory-first")?;
        std::thread::sleep(settle);
        let first_idle = sys::memory(first.pid()).ok_or("cannot read the gateway's memory")?;
        drop(first);
        let mut gateway = setup.serve("gateway-memory")?;
        let gateway_target = setup.target(gateway.addr, &model, true)?;
        let proxy_args = ["proxy", "--upstream", &self.upstream.addr.to_string()];
        let mut proxy = spawn_self("proxy-memory", &proxy_args, self.logs.path())?;
        let proxy_target = openai_target("proxy", proxy.addr, &model, true);

        let mut gateway_figures = None;
        for (server, target) in [(&mut gateway, &gateway_target), (&mut proxy, &proxy_target)] {
            std::thread::sleep(settle);
            let pid = server.pid();
            let idle = sys::memory(pid).ok_or("cannot read the server's memory")?;
            let held = load::hold_streams(target, count, frames, pid)?;
            std::thread::sleep(settle);
            let after = sys::memory(pid).ok_or("cannot read the server's memory")?;
            // The kernel's high-water mark catches a peak between two samples.
            let peak_kib = held.peak_rss_kib.max(after.hwm_kib);
            server.check_alive()?;
            if held.errors > 0 {
                self.report.problems.push(format!(
                    "memory, {}: {} of {count} streams failed; first: {}",
                    target.label,
                    held.errors,
                    held.first_error.as_deref().unwrap_or("no detail")
                ));
            }
            let all_open = held
                .all_started
                .map(|m| mib(m.rss_kib as f64))
                .unwrap_or_else(|| "(never all open)".into());
            let is_gateway = target.label == "gateway";
            let warm = is_gateway && self.cache_supported == Some(true);
            table.row(vec![
                target.label.to_owned(),
                mib(if is_gateway {
                    first_idle.rss_kib
                } else {
                    idle.rss_kib
                } as f64),
                if warm {
                    mib(idle.rss_kib as f64)
                } else {
                    "—".into()
                },
                all_open,
                mib(peak_kib as f64),
                mib(after.rss_kib as f64),
                format!("{:.2}", after.rss_kib as f64 / idle.rss_kib.max(1) as f64),
            ]);
            if is_gateway {
                gateway_figures = Some((idle, peak_kib, after, warm));
            }
        }
        drop(gateway);
        drop(proxy);
        drop(setup);

        if let Some((idle, peak, after, warm)) = gateway_figures {
            let first_mib = first_idle.rss_kib as f64 / 1024.0;
            self.report.check(Check::at_most(
                "RSS idle, first start (compiles the plugin in-process)",
                "<= 40 MiB",
                first_mib,
                40.0,
                format!("{first_mib:.1} MiB"),
            ));
            let idle_mib = idle.rss_kib as f64 / 1024.0;
            let mut warm_check = Check::at_most(
                "RSS idle, restart with warm plugin cache",
                "<= 40 MiB",
                idle_mib,
                40.0,
                format!("{idle_mib:.1} MiB"),
            );
            if !warm {
                warm_check.verdict =
                    Verdict::NotMeasured(format!("no `{}` in this build", self.cache_key));
            }
            self.report.check(warm_check);
            let peak_mib = peak as f64 / 1024.0;
            let mut streams_check = Check::at_most(
                "RSS with 1000 concurrent streams",
                "<= 150 MiB",
                peak_mib,
                150.0,
                format!("{peak_mib:.1} MiB peak ({count} streams)"),
            );
            if count < 1000 {
                streams_check.verdict =
                    Verdict::NotMeasured(format!("only {count} streams in this run"));
            }
            self.report.check(streams_check);
            let ratio = after.rss_kib as f64 / idle.rss_kib.max(1) as f64;
            self.report.check(Check::at_most(
                "RSS after the load vs idle",
                "within 10% (<= 1.10x)",
                ratio,
                1.10,
                format!("{ratio:.2}x ({} MiB)", mib(after.rss_kib as f64)),
            ));
        }
        let intro = format!(
            "A fresh gateway (and a fresh baseline proxy for comparison): `VmRSS` from \
             /proc/PID/status {} s after start (idle; for the gateway after its first start and \
             after a restart with the compiled plugin cached, which then serves the streams), \
             once all {count} streams (one connection \
             each, {frames} frames {} ms apart) have delivered their first frame, the peak \
             sampled every 20 ms while they run, and {} s after they ended.",
            secs(settle),
            self.plan.held_gap.as_millis(),
            secs(settle)
        );
        self.report.section("4. Memory", &intro, &[&table]);
        Ok(())
    }

    fn cold_start(&mut self) -> Result<(), String> {
        eprintln!("bench: (5) cold start");
        let key = self.cache_key.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        // (listening, first answer) of the first start of a fresh install and of its restart.
        let mut fresh: Vec<(Duration, Duration)> = Vec::new();
        let mut restart: Vec<(Duration, Duration)> = Vec::new();
        for _ in 0..self.plan.cold_starts {
            let (setup, _cache) = self.setup_with_cache()?;
            for times in [&mut fresh, &mut restart] {
                let mut server = setup.serve("gateway-coldstart")?;
                let target = setup.target(server.addr, "bench", false)?;
                rt.block_on(load::once(&target))
                    .map_err(|e| format!("cold start: the first request failed: {e}"))?;
                let answered = server.spawned_at.elapsed();
                times.push((server.ready_at - server.spawned_at, answered));
                server.stop();
            }
        }
        let cache_supported = self.cache_supported;
        let cache_note = match cache_supported {
            Some(true) => format!("`{key}` set to an empty directory for the first start"),
            _ => format!(
                "this gateway build has no `{key}` config key (no compiled-plugin cache yet): \
                 the restart row is the same work as the first start"
            ),
        };
        let mut table = Table::new(&[
            "start",
            "to `listening` (median)",
            "to first answer (median)",
            "first answer min",
            "first answer max",
        ]);
        let restart_label = if cache_supported == Some(true) {
            "restart, warm compiled-plugin cache"
        } else {
            "restart, same directory (no cache)"
        };
        for (label, times) in [
            ("first start, fresh directory (no cache)", &fresh),
            (restart_label, &restart),
        ] {
            let listening = median(times.iter().map(|t| t.0.as_secs_f64() * 1e9).collect());
            let answers: Vec<f64> = times.iter().map(|t| t.1.as_secs_f64() * 1e9).collect();
            table.row(vec![
                label.to_owned(),
                ms(listening),
                ms(median(answers.clone())),
                ms(answers.iter().copied().fold(f64::INFINITY, f64::min)),
                ms(answers.iter().copied().fold(0.0, f64::max)),
            ]);
        }
        let warm = median(restart.iter().map(|t| t.1.as_secs_f64() * 1e3).collect());
        let mut check = Check::at_most(
            "restart to first served request, warm cache (issue 3)",
            "< 100 ms",
            warm,
            100.0,
            format!("{warm:.1} ms"),
        );
        if cache_supported != Some(true) {
            check.verdict = Verdict::NotMeasured(format!("no `{key}` in this build"));
        }
        self.report.check(check);
        let intro = format!(
            "Process spawn → `gateway listening` on stdout → first `POST /completions` answered \
             (new connection, new upstream connection), {} time(s) each. The project and key \
             are created beforehand with the CLI. Plugin cache: {cache_note}.",
            self.plan.cold_starts
        );
        self.report.section("5. Cold start", &intro, &[&table]);
        Ok(())
    }
}

/// Runs `scenarios`, prints the report and writes it to the output file.
pub fn run(options: &Options, scenarios: &[Scenario]) -> Result<(), String> {
    let started = Instant::now();
    let mcp_only = !scenarios.is_empty() && scenarios.iter().all(|s| matches!(s, Scenario::Mcp));
    let mut bench = Bench::start(options, true, mcp_only)?;
    for scenario in scenarios {
        match scenario {
            Scenario::Latency => bench.latency()?,
            Scenario::Throughput => bench.throughput()?,
            Scenario::Streaming => bench.streaming()?,
            Scenario::Memory => bench.memory()?,
            Scenario::ColdStart => bench.cold_start()?,
            Scenario::Mcp => bench.mcp()?,
            Scenario::Batch => bench.batch()?,
        }
    }
    bench.report.header.push(format!(
        "wall time: {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    let text = bench.report.render();
    println!("{text}");
    let out = match &options.out {
        Some(path) => path.clone(),
        None if options.smoke => std::env::temp_dir().join("gateway-bench-smoke.md"),
        None => workspace_root().join("bench/results/latest.md"),
    };
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&out, &text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!("bench: report written to {}", out.display());
    if bench.report.problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} problem(s), see the report's last section",
            bench.report.problems.len()
        ))
    }
}

/// Steady load on one path while the operator profiles a process.
pub fn soak(options: &SoakOptions) -> Result<(), String> {
    let mut bench = Bench::start(&options.common, false, false)?;
    let model = if options.stream {
        stream_model(bench.plan.stream_frames, bench.plan.stream_gap)
    } else {
        "bench".to_owned()
    };
    let targets = bench.targets(&model, options.stream)?;
    let target = targets
        .iter()
        .find(|t| t.label == options.target)
        .ok_or_else(|| {
            format!(
                "unknown target {:?}: direct, proxy or gateway",
                options.target
            )
        })?;
    let gateway_pid = bench.gateway.as_ref().map(|(_, s)| s.pid()).unwrap_or(0);
    eprintln!(
        "bench: soak on {} for {} s at c={}; pids: gateway {gateway_pid}, proxy {}, upstream {}",
        target.label,
        options.seconds,
        options.concurrency,
        bench.proxy.pid(),
        bench.upstream.pid()
    );
    let duration = Duration::from_secs(options.seconds);
    if options.stream {
        let r = load::stream_loop(
            target,
            options.concurrency,
            bench.plan.stream_frames,
            Duration::ZERO,
            duration,
        )?;
        println!(
            "{} streams, {} errors; first frame p50 {} ms p99 {} ms; gap p99 {} ms; delivery p50 {} ms p99 {} ms",
            r.streams,
            r.errors,
            ms(quantile(&r.first_frame, 0.5)),
            ms(quantile(&r.first_frame, 0.99)),
            ms(quantile(&r.gap, 0.99)),
            ms(quantile(&r.delivery, 0.5)),
            ms(quantile(&r.delivery, 0.99)),
        );
    } else {
        let r = load::closed_loop(target, options.concurrency, Duration::ZERO, duration)?;
        println!(
            "{:.0} req/s, {} errors; p50 {} ms, p99 {} ms, p99.9 {} ms",
            r.rate(),
            r.errors,
            ms(quantile(&r.latency, 0.5)),
            ms(quantile(&r.latency, 0.99)),
            ms(quantile(&r.latency, 0.999)),
        );
    }
    Ok(())
}

fn quantile(histogram: &Histogram<u64>, q: f64) -> f64 {
    if histogram.is_empty() {
        return f64::NAN;
    }
    histogram.value_at_quantile(q) as f64
}

/// A load result's successes, failures and first failure, for [`Bench::note_run_errors`].
fn load_counts(result: &LoadResult) -> (u64, u64, Option<String>) {
    (result.ok, result.errors, result.first_error.clone())
}

/// The median CPU time per request of path `i`'s server process.
fn cpu_cell(cpu: &[Vec<f64>], i: usize) -> String {
    format!(
        "{:.0} µs ({})",
        median(cpu.iter().map(|c| c[i]).collect()) / 1e3,
        ["upstream", "proxy", "gateway"][i]
    )
}

fn secs(d: Duration) -> String {
    format!("{}", d.as_secs_f64())
}

/// Starts this same binary as the upstream or the proxy.
fn spawn_self(name: &str, args: &[&str], logs: &Path) -> Result<Server, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut command = Command::new(exe);
    command.args(args);
    Server::spawn(name, command, logs.join(format!("{name}.log")))
}

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("bench {}", args.join(" "))
}

fn git_commit() -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=7"])
        .current_dir(workspace_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}
