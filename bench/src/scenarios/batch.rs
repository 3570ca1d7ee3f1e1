//! (7) Batches, issue 53: the gateway's interactive requests while a batch runs on the same
//! gateway, against the same requests with no batch.
//!
//! One gateway of its own (the other scenarios' gateway runs no batch). In each run, two
//! windows each of c=1 (latency) and c=`saturation_concurrency` (throughput) on the gateway
//! path: one with no batch, one with a batch of chat completions against the same fake
//! upstream running (`LINES` lines, created just before the window, followed by another when
//! it ends, the last cancelled after the window), the two in alternating order from run to
//! run. The batches' lines answered during a window are their pace.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Bench, quantile, secs};
use crate::gateway::{ROUTE, Setup};
use crate::load::{self, LoadResult, Target};
use crate::report::{Table, median, ms};

/// A full run's batch: the 10,000 lines.
const LINES: usize = 10_000;
const SMOKE_LINES: usize = 200;
const BOUNDARY: &str = "bench-batch-boundary";

impl Bench {
    pub(super) fn batch(&mut self) -> Result<(), String> {
        eprintln!("bench: (7) interactive requests while a batch runs");
        let lines = if self.plan.smoke { SMOKE_LINES } else { LINES };
        let setup = Setup::new(&self.build, self.upstream.addr, "")?;
        let mut gateway = setup.serve("gateway-batch")?;
        let target = setup.target(gateway.addr, "bench", false)?;
        let file = upload(gateway.addr, &setup.key, &input(lines))?;
        // Windows: (with a batch, concurrency, duration); per run, the results in that order.
        let shapes = [
            (1, self.plan.latency_time),
            (self.plan.saturation_concurrency, self.plan.saturation_time),
        ];
        let mut rows: Vec<[Vec<(LoadResult, f64)>; 2]> =
            vec![[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
        for run in 0..self.plan.runs {
            for (shape, &(concurrency, duration)) in shapes.iter().enumerate() {
                let order = if (run + shape) % 2 == 0 {
                    [false, true]
                } else {
                    [true, false]
                };
                for with_batch in order {
                    let measured = self.window(
                        &setup,
                        gateway.addr,
                        &target,
                        &file,
                        with_batch,
                        concurrency,
                        duration,
                    )?;
                    rows[shape][usize::from(with_batch)].push(measured);
                    gateway.check_alive()?;
                }
            }
        }
        let mut table = Table::new(&[
            "load",
            "batch",
            "req/s",
            "p50",
            "p90",
            "p99",
            "max",
            "batch lines/s",
        ]);
        for (shape, &(concurrency, _)) in shapes.iter().enumerate() {
            for with_batch in [false, true] {
                let results = &rows[shape][usize::from(with_batch)];
                let of = |f: &dyn Fn(&LoadResult) -> f64| {
                    median(results.iter().map(|(r, _)| f(r)).collect())
                };
                table.row(vec![
                    format!("c={concurrency}"),
                    if with_batch {
                        format!("{lines} lines running")
                    } else {
                        "none".into()
                    },
                    format!("{:.0}", of(&|r| r.rate())),
                    ms(of(&|r| quantile(&r.latency, 0.5))),
                    ms(of(&|r| quantile(&r.latency, 0.9))),
                    ms(of(&|r| quantile(&r.latency, 0.99))),
                    ms(of(&|r| r.latency.max() as f64)),
                    if with_batch {
                        format!(
                            "{:.0}",
                            median(results.iter().map(|(_, pace)| *pace).collect())
                        )
                    } else {
                        String::new()
                    },
                ]);
                for (result, _) in results {
                    self.note_errors(
                        &format!("batch, c={concurrency}"),
                        if with_batch {
                            "with a batch"
                        } else {
                            "no batch"
                        },
                        result.all_ok,
                        result.errors,
                        &result.first_error,
                    );
                }
            }
        }
        let intro = format!(
            "The gateway path only (non-streamed chat completion, as in 1 and 2), on a gateway of \
             its own: closed loop at c=1 for {} s and at c={} for {} s after {} s warm-up, with no \
             batch and with a batch of {lines} chat completions against the same fake upstream \
             running (created just before the window, followed by another of the same file when it \
             ends, the last cancelled after the window; the runner's `batch_concurrency` at its \
             default), in alternating order. `batch lines/s`: the batches' lines answered during \
             the window.",
            secs(self.plan.latency_time),
            self.plan.saturation_concurrency,
            secs(self.plan.saturation_time),
            secs(self.plan.warmup),
        );
        self.report.section(
            "7. Interactive requests under a running batch",
            &intro,
            &[&table],
        );
        drop(gateway);
        Ok(())
    }

    /// One closed-loop window on `target`; with a batch of `file` running through it when
    /// `with_batch`: the result, and the batch's lines answered per second during it.
    #[allow(clippy::too_many_arguments)]
    fn window(
        &mut self,
        setup: &Setup,
        gateway: SocketAddr,
        target: &Target,
        file: &str,
        with_batch: bool,
        concurrency: usize,
        duration: Duration,
    ) -> Result<(LoadResult, f64), String> {
        if !with_batch {
            let result = load::closed_loop(target, concurrency, self.plan.warmup, duration)?;
            return Ok((result, 0.0));
        }
        // A batch runs throughout the window: one that ends is followed by the next.
        let keeper = Keeper {
            gateway,
            key: setup.key.clone(),
            file: file.to_owned(),
        };
        let first = keeper.create()?;
        let stop = Arc::new(AtomicBool::new(false));
        let keeping = {
            let stop = stop.clone();
            std::thread::spawn(move || keeper.keep(first, &stop))
        };
        let started = Instant::now();
        let result = load::closed_loop(target, concurrency, self.plan.warmup, duration);
        let elapsed = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let ended = keeping
            .join()
            .map_err(|_| "batch: the thread keeping a batch running panicked".to_owned())??;
        Ok((result?, ended as f64 / elapsed))
    }
}

/// Keeps a batch of `file` running on `gateway`.
struct Keeper {
    gateway: SocketAddr,
    key: String,
    file: String,
}

impl Keeper {
    /// A new batch's path.
    fn create(&self) -> Result<String, String> {
        let body = json!({"input_file_id": self.file, "endpoint": "/v1/chat/completions",
            "completion_window": "24h"});
        let created = request(
            self.gateway,
            "POST",
            "/v1/batches",
            &self.key,
            "application/json",
            body.to_string().as_bytes(),
        )?;
        let id = created["id"].as_str().ok_or("a batch without an id")?;
        Ok(format!("/v1/batches/{id}"))
    }

    fn get(&self, path: &str) -> Result<Value, String> {
        request(self.gateway, "GET", path, &self.key, "", b"")
    }

    /// Until `stop`: the batch at `path` running, and the next created when it ends; then
    /// the last cancelled, and waited for. The lines that ended meanwhile.
    fn keep(&self, mut path: String, stop: &AtomicBool) -> Result<u64, String> {
        let ended_of = |batch: &Value| {
            let counts = &batch["request_counts"];
            counts["completed"].as_u64().unwrap_or(0) + counts["failed"].as_u64().unwrap_or(0)
        };
        let mut ended = 0;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            let batch = self.get(&path)?;
            if batch["status"] == "completed" {
                ended += ended_of(&batch);
                path = self.create()?;
            }
        }
        ended += ended_of(&self.get(&path)?);
        // A batch that completed meanwhile cannot be cancelled (409): it ended all the same.
        let cancel = format!("{path}/cancel");
        let _ = request(self.gateway, "POST", &cancel, &self.key, "", b"");
        // The next window starts with no batch running.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let batch = self.get(&path)?;
            if batch["status"] == "cancelled" || batch["status"] == "completed" {
                return Ok(ended);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "batch: {path} did not end after its cancel: {batch}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The batch's input: `lines` chat completions of the bench's model.
fn input(lines: usize) -> String {
    let mut text = String::new();
    for i in 0..lines {
        let line = json!({
            "custom_id": format!("line-{i}"),
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": format!("{ROUTE}/bench"), "messages": [{"role": "user", "content": "Hello"}]},
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    text
}

/// Uploads `text` as a `batch` file; its id.
fn upload(gateway: SocketAddr, key: &str, text: &str) -> Result<String, String> {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"batch.jsonl\"\r\n\
         Content-Type: application/jsonl\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(text.as_bytes());
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    let content_type = format!("multipart/form-data; boundary={BOUNDARY}");
    let file = request(gateway, "POST", "/v1/files", key, &content_type, &body)?;
    file["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("batch: the upload was answered {file}"))
}

/// One HTTP/1.1 request on a connection of its own; the JSON of its 2xx answer.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: &str,
    content_type: &str,
    body: &[u8],
) -> Result<Value, String> {
    let failed = |e: std::io::Error| format!("batch: {method} {path}: {e}");
    let mut stream = TcpStream::connect(addr).map_err(failed)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(failed)?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !content_type.is_empty() {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).map_err(failed)?;
    stream.write_all(body).map_err(failed)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(failed)?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("batch: {method} {path}: no answer"))?;
    let status = head.split(' ').nth(1).unwrap_or_default();
    if !status.starts_with('2') {
        return Err(format!("batch: {method} {path}: {head}\n{body}"));
    }
    serde_json::from_str(body).map_err(|e| format!("batch: {method} {path}: {e}: {body}"))
}
