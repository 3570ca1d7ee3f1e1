//! (6) MCP, issue 48: a `tools/call` through the gateway's `POST /mcp` against the same call
//! straight to the upstream's MCP server, and a tool plugin's call beside the remote one.
//!
//! Four paths, measured as the others are (interleaved within each run, medians over runs):
//! - `direct tools/call`: the load generator → the fake upstream's `/mcp`, `echo`;
//! - `gateway up__echo`: → the gateway's `/mcp` → `[mcp_servers.up]`, the same upstream;
//! - `gateway weather__current`: → the gateway's `/mcp` → the `rust-tool` plugin
//!   (`[mcp_servers.weather]`), which makes one `GET /v1/forecast` to the upstream;
//! - `direct GET /v1/forecast`: that request straight to the upstream, the plugin row's
//!   baseline.
//!
//! The gateway is one of its own, started for the scenario and stopped after it, so that the
//! other scenarios' gateway has no MCP server and no tool plugin.

use bytes::Bytes;
use hyper::Method;
use hyper::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{Bench, quantile, secs};
use crate::gateway::{Setup, TOOL_PLUGIN};
use crate::load::{self, Expect, LoadResult, Target};
use crate::report::{Table, median, ms, ms_signed};
use crate::upstream::mcp::{
    ECHO, METHOD_HEADER, NAME_HEADER, PROTOCOL_VERSION_HEADER, VERSION as MCP_VERSION,
};

/// The remote server's id in the gateway's config: its tool is `up__echo`.
const REMOTE: &str = "up";
/// The tool plugin's server id: its tool is `weather__current`.
const PLUGIN_SERVER: &str = "weather";
/// The plugin's tool.
const PLUGIN_TOOL: &str = "current";
/// What a client of the stateless revision accepts (streamable-http: both, always).
const ACCEPT: &str = "application/json, text/event-stream";
/// The place asked for; `rust-tool` writes it into the forecast's query as it is here.
const LATITUDE: f64 = 52.52;
const LONGITUDE: f64 = 13.41;

/// A path of the scenario: its request, the process it ends in, and the row its "added"
/// figures are measured against.
struct Path {
    target: Target,
    /// `upstream` or `gateway`: whose CPU time per request the row shows.
    process: &'static str,
    pid: u32,
    baseline: Option<usize>,
}

/// `tools/call` of `tool` with `arguments` as a client of the stateless revision sends it:
/// the `_meta` envelope, and the version, method and tool mirrored in headers.
fn tools_call(
    label: &'static str,
    addr: std::net::SocketAddr,
    tool: &str,
    arguments: Value,
) -> Result<Target, String> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let mut target = Target::post(label, addr, "/mcp", Bytes::from(body.to_string()));
    target.accept = Some(HeaderValue::from_static(ACCEPT));
    target.expect = Expect::JsonRpcResult;
    let header = |value: &str| {
        HeaderValue::from_str(value).map_err(|e| format!("{value:?} is not a header value: {e}"))
    };
    target.headers = vec![
        (
            HeaderName::from_static(PROTOCOL_VERSION_HEADER),
            HeaderValue::from_static(MCP_VERSION),
        ),
        (
            HeaderName::from_static(METHOD_HEADER),
            HeaderValue::from_static("tools/call"),
        ),
        (HeaderName::from_static(NAME_HEADER), header(tool)?),
    ];
    Ok(target)
}

/// The gateway's config lines: the upstream's MCP server and the tool plugin, which may reach
/// the upstream and nothing else.
fn servers_config(upstream: std::net::SocketAddr) -> String {
    let origin = format!("http://{upstream}");
    format!(
        "mcp_servers.{REMOTE} = {{ url = \"{origin}/mcp\" }}\n\
         mcp_servers.{PLUGIN_SERVER} = {{ plugin = \"{TOOL_PLUGIN}\", allowed_hosts = [\"{origin}\"], \
         settings = {{ base_url = \"{origin}\" }} }}\n"
    )
}

impl Bench {
    pub(super) fn mcp(&mut self) -> Result<(), String> {
        eprintln!("bench: (6) MCP tool calls");
        self.build.check_tool()?;
        let upstream = self.upstream.addr;
        let setup = Setup::with_plugins(
            &self.build,
            upstream,
            &servers_config(upstream),
            &[self.build.tool_wasm.as_path()],
        )?;
        let mut gateway = setup.serve("gateway-mcp")?;
        let paths = self.mcp_paths(&setup, gateway.addr, gateway.pid())?;

        // One call on each path first: a path that fails at once (a plugin that did not
        // load, a protocol mismatch) fails the scenario with its answer, and the gateway has
        // found the server's era and tools before anything is timed.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        for path in &paths {
            rt.block_on(load::once(&path.target)).map_err(|e| {
                format!(
                    "mcp: the first call on `{}` failed: {e}\nthe gateway's log ends with:\n{}",
                    path.target.label,
                    gateway.log_tail()
                )
            })?;
        }
        drop(rt);

        let targets: Vec<Target> = paths.iter().map(|p| p.target.clone()).collect();
        let pids: Vec<u32> = paths.iter().map(|p| p.pid).collect();
        let mut tables = Vec::new();
        for (concurrency, duration) in [
            (1, self.plan.latency_time),
            (self.plan.saturation_concurrency, self.plan.saturation_time),
        ] {
            let runs = self.repeat(&targets, |bench, i, target| {
                bench.closed_with_cpu(target, pids[i], concurrency, duration)
            })?;
            gateway.check_alive()?;
            for run in &runs {
                for ((result, _), path) in run.iter().zip(&paths) {
                    self.note_errors(
                        &format!("mcp at c={concurrency}"),
                        path.target.label,
                        result.ok,
                        result.errors,
                        &result.first_error,
                    );
                }
            }
            tables.push(if concurrency == 1 {
                latency_table(&paths, &runs)
            } else {
                saturation_table(&paths, &runs, concurrency)
            });
        }
        drop(gateway);
        drop(setup);

        let intro = format!(
            "`tools/call` over MCP's stateless revision ({MCP_VERSION}: `_meta` envelope, \
             `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, JSON answers). \
             *direct tools/call*: to the fake upstream's `/mcp` (tool `echo`, answers its text) \
             without a key; *gateway up__echo*: the same call through the gateway's `POST /mcp` \
             (key, tool scope, request limits, invocation record) to `[mcp_servers.{REMOTE}]` on \
             that upstream; *gateway weather__current*: the `{TOOL_PLUGIN}` tool plugin \
             (`[mcp_servers.{PLUGIN_SERVER}]`, a fresh instance per call) which makes one \
             `GET /v1/forecast` to the upstream (fixed Open-Meteo answer); *direct GET \
             /v1/forecast*: that request alone. \"added\" is against `direct tools/call` for \
             `up__echo` and against `direct GET /v1/forecast` for `weather__current`. An answer \
             counts only as a JSON-RPC `result` (not `error`, not `isError`). Closed loop, \
             1 connection for {} s, then {} connections for {} s, after {} s warm-up, per path \
             and run; a gateway of its own.",
            secs(self.plan.latency_time),
            self.plan.saturation_concurrency,
            secs(self.plan.saturation_time),
            secs(self.plan.warmup)
        );
        let tables: Vec<&Table> = tables.iter().collect();
        self.report.section("6. MCP tool calls", &intro, &tables);
        Ok(())
    }

    fn mcp_paths(
        &self,
        setup: &Setup,
        gateway: std::net::SocketAddr,
        gateway_pid: u32,
    ) -> Result<Vec<Path>, String> {
        let upstream = self.upstream.addr;
        let upstream_pid = self.upstream.pid();
        let through_gateway = |label, tool: &str, arguments| -> Result<Target, String> {
            let mut target = tools_call(label, gateway, tool, arguments)?;
            target.authorization = Some(setup.bearer()?);
            target.headers.extend(setup.headers().iter().cloned());
            Ok(target)
        };
        let place = json!({"latitude": LATITUDE, "longitude": LONGITUDE});
        let mut forecast = Target::post(
            "direct GET /v1/forecast",
            upstream,
            &format!(
                "/v1/forecast?latitude={LATITUDE}&longitude={LONGITUDE}\
                 &current=temperature_2m,wind_speed_10m"
            ),
            Bytes::new(),
        );
        forecast.method = Method::GET;
        Ok(vec![
            Path {
                target: tools_call(
                    "direct tools/call",
                    upstream,
                    ECHO,
                    json!({"text": "hello"}),
                )?,
                process: "upstream",
                pid: upstream_pid,
                baseline: None,
            },
            Path {
                target: through_gateway(
                    "gateway up__echo",
                    &format!("{REMOTE}__{ECHO}"),
                    json!({"text": "hello"}),
                )?,
                process: "gateway",
                pid: gateway_pid,
                baseline: Some(0),
            },
            Path {
                target: through_gateway(
                    "gateway weather__current",
                    &format!("{PLUGIN_SERVER}__{PLUGIN_TOOL}"),
                    place,
                )?,
                process: "gateway",
                pid: gateway_pid,
                baseline: Some(3),
            },
            Path {
                target: forecast,
                process: "upstream",
                pid: upstream_pid,
                baseline: None,
            },
        ])
    }
}

/// Results per run and path, each with the CPU time per request (ns) of the path's process.
type Runs = [Vec<(LoadResult, f64)>];

fn of(runs: &Runs, i: usize, f: impl Fn(&LoadResult) -> f64) -> f64 {
    median(runs.iter().map(|r| f(&r[i].0)).collect())
}

fn cpu(runs: &Runs, path: &Path, i: usize) -> String {
    format!(
        "{:.0} µs ({})",
        median(runs.iter().map(|r| r[i].1).collect()) / 1e3,
        path.process
    )
}

fn latency_table(paths: &[Path], runs: &Runs) -> Table {
    let mut table = Table::new(&[
        "c=1: path",
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
    for (i, path) in paths.iter().enumerate() {
        let added = |q: f64| match path.baseline {
            None => String::new(),
            Some(b) => ms_signed(median(
                runs.iter()
                    .map(|r| quantile(&r[i].0.latency, q) - quantile(&r[b].0.latency, q))
                    .collect(),
            )),
        };
        table.row(vec![
            path.target.label.to_owned(),
            format!("{:.0}", of(runs, i, LoadResult::rate)),
            ms(of(runs, i, |r| quantile(&r.latency, 0.5))),
            ms(of(runs, i, |r| quantile(&r.latency, 0.9))),
            ms(of(runs, i, |r| quantile(&r.latency, 0.99))),
            ms(of(runs, i, |r| quantile(&r.latency, 0.999))),
            ms(of(runs, i, |r| r.latency.max() as f64)),
            added(0.5),
            added(0.99),
            cpu(runs, path, i),
        ]);
    }
    table
}

fn saturation_table(paths: &[Path], runs: &Runs, concurrency: usize) -> Table {
    let mut table = Table::new(&[
        &format!("c={concurrency}: path"),
        "req/s",
        "p50",
        "p99",
        "p99.9",
        "vs its direct path",
        "CPU per request (its server process)",
    ]);
    for (i, path) in paths.iter().enumerate() {
        let versus = match path.baseline {
            None => String::new(),
            Some(b) => format!(
                "{:.2}x",
                median(
                    runs.iter()
                        .map(|r| r[i].0.rate() / r[b].0.rate().max(1e-9))
                        .collect()
                )
            ),
        };
        table.row(vec![
            path.target.label.to_owned(),
            format!("{:.0}", of(runs, i, LoadResult::rate)),
            ms(of(runs, i, |r| quantile(&r.latency, 0.5))),
            ms(of(runs, i, |r| quantile(&r.latency, 0.99))),
            ms(of(runs, i, |r| quantile(&r.latency, 0.999))),
            versus,
            cpu(runs, path, i),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_config_is_toml_the_gateway_reads() {
        let text = servers_config("127.0.0.1:4000".parse().unwrap());
        assert!(text.contains("mcp_servers.up = { url = \"http://127.0.0.1:4000/mcp\" }"));
        assert!(text.contains("allowed_hosts = [\"http://127.0.0.1:4000\"]"));
        assert!(text.contains("settings = { base_url = \"http://127.0.0.1:4000\" }"));
    }
}
