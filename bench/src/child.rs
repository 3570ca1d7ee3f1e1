//! Server processes under test (the gateway, the fake upstream, the baseline
//! proxy): started, awaited until they print where they listen, stopped on drop.
//!
//! Each runs as its own process so the load generator never shares a runtime
//! (or an allocator) with what it measures, and so memory is per process.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sys;

/// The line every server prints once it accepts connections.
const READY_MARKER: &str = "listening on http://";
/// Longest wait for a server to start (the gateway compiles its plugins first).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a SIGTERM may take before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running server process.
pub struct Server {
    /// What it is, for messages.
    pub name: String,
    pub addr: SocketAddr,
    /// When `spawn` was called.
    pub spawned_at: Instant,
    /// When it printed that it listens.
    pub ready_at: Instant,
    child: Option<Child>,
    log: PathBuf,
    stdout_reader: Option<JoinHandle<()>>,
}

impl Server {
    /// Spawns `command` (its stderr goes to `log`) and waits for its
    /// `... listening on http://ADDR` line.
    pub fn spawn(name: &str, mut command: Command, log: PathBuf) -> Result<Server, String> {
        let log_file =
            File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // A file, not a pipe: nothing in this process has to keep reading
            // the logs while it measures, and a full pipe can't stall the server.
            .stderr(Stdio::from(log_file));
        let spawned_at = Instant::now();
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {name} ({command:?}): {e}"))?;
        let Some(stdout) = child.stdout.take() else {
            return Err(format!("{name}: no stdout pipe"));
        };
        let (lines_tx, lines_rx) = mpsc::channel::<String>();
        let stdout_reader = std::thread::spawn(move || {
            // Keeps draining after the ready line so the server never blocks on stdout.
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = lines_tx.send(line);
            }
        });
        let mut server = Server {
            name: name.to_owned(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            spawned_at,
            ready_at: spawned_at,
            child: Some(child),
            log,
            stdout_reader: Some(stdout_reader),
        };
        let deadline = spawned_at + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines_rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(at) = line.find(READY_MARKER) {
                        let rest = line[at + READY_MARKER.len()..].trim().trim_end_matches('/');
                        server.ready_at = Instant::now();
                        server.addr = rest
                            .parse()
                            .map_err(|e| format!("{name}: bad address in {line:?}: {e}"))?;
                        return Ok(server);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "{name} did not start within {START_TIMEOUT:?}; its log ends with:\n{}",
                        server.log_tail()
                    ));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = server
                        .child
                        .as_mut()
                        .and_then(|c| c.wait().ok())
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "unknown status".into());
                    server.child = None;
                    return Err(format!(
                        "{name} exited ({status}) before listening; its log ends with:\n{}",
                        server.log_tail()
                    ));
                }
            }
        }
    }

    /// The process id (for `/proc` and `perf -p`).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// The last few KiB of the server's stderr.
    pub fn log_tail(&self) -> String {
        const TAIL: u64 = 4096;
        let Ok(mut file) = File::open(&self.log) else {
            return String::new();
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL)));
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        text
    }

    /// Fails if the process has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => Ok(()),
            Some(Ok(Some(status))) => Err(format!(
                "{} exited ({status}); its log ends with:\n{}",
                self.name,
                self.log_tail()
            )),
            Some(Err(e)) => Err(format!("{}: cannot check the process: {e}", self.name)),
            None => Err(format!("{} is not running", self.name)),
        }
    }

    /// SIGTERM, then SIGKILL after a grace period.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        sys::signal(child.id(), libc::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
        if let Some(reader) = self.stdout_reader.take() {
            let _ = reader.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
