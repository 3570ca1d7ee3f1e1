//! A `gateway serve` that must refuse to start (a bad config, a schema newer than the binary):
//! run until it exits by itself, its stderr kept.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::harness::gateway_binary;

/// How long a refusing gateway may take to exit (a slow first plugin compile included).
const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `gateway serve --config CONFIG` in `dir` until it exits; returns its status and stderr.
/// A gateway still running after a minute is killed and the test fails: it should have refused.
pub fn serve_until_exit(config: &Path, dir: &Path) -> (ExitStatus, String) {
    let mut child = Command::new(gateway_binary())
        .args(["serve", "--config"])
        .arg(config)
        .current_dir(dir)
        .env_remove("GATEWAY_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn `gateway serve`");
    let mut stderr = child.stderr.take().expect("piped stderr");
    // Read while it runs, so a chatty gateway never blocks on a full pipe.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        match child.try_wait().expect("wait for `gateway serve`") {
            Some(status) => break status,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = reader.join().unwrap_or_default();
                panic!("`gateway serve` was still running after {PATIENCE:?}; stderr:\n{stderr}");
            }
        }
    };
    (status, reader.join().expect("stderr reader"))
}

/// Asserts `gateway serve --config CONFIG` (in `dir`) refuses to start; returns its stderr.
pub fn refused_serve(config: &Path, dir: &Path) -> String {
    let (status, stderr) = serve_until_exit(config, dir);
    assert!(!status.success(), "exited with {status}; stderr:\n{stderr}");
    assert!(
        !stderr.contains("gateway listening"),
        "it listened anyway:\n{stderr}"
    );
    stderr
}

/// Runs `gateway serve` on a config of its own directory with `routes` (TOML, as an operator
/// writes it) after the usual top-level keys; asserts it refuses to start and returns its stderr.
pub fn refused_start(routes: &str) -> String {
    let dir = tempfile::Builder::new()
        .prefix("gateway-refused-")
        .tempdir()
        .expect("create a temporary directory");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("create the plugins directory");
    let config = dir.path().join("gateway.toml");
    let quoted = |path: &Path| serde_json::to_string(&path.to_string_lossy()).expect("a string");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndatabase = {}\nplugins_dir = {}\ndemo_project = false\n\n{routes}",
            quoted(&dir.path().join("gateway.db")),
            quoted(&plugins),
        ),
    )
    .expect("write the config");
    refused_serve(&config, dir.path())
}
