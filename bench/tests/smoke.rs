//! The harness end to end, as `cargo xtask bench --smoke` runs it: every scenario once, briefly
//! (`mcp` too, which `all` runs only in a smoke run), against the gateway and the plugins of this
//! same test run. It keeps the harness working and asserts no timing (a test machine is shared;
//! figures come from `cargo xtask bench`).
//!
//! Run as part of the workspace's tests (`cargo xtask test`), where cargo builds the gateway's
//! binary beside this one for the gateway's own integration tests: the smoke needs no build of
//! its own, which in CI was a second release build of the gateway with other features.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `gateway` binary beside this package's: cargo puts every package's binaries for the
/// run's integration tests in one directory (`target/<profile>/`).
fn gateway_binary() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_bench"))
        .with_file_name(format!("gateway{}", std::env::consts::EXE_SUFFIX))
}

#[test]
fn every_scenario_runs_once_and_is_reported() {
    let gateway = gateway_binary();
    assert!(
        gateway.exists(),
        "no gateway binary at {}: run the workspace's tests (`cargo xtask test`), which build it",
        gateway.display()
    );
    let out = tempfile::tempdir().expect("a temporary directory");
    let report = out.path().join("report.md");
    let mut bench = Command::new(env!("CARGO_BIN_EXE_bench"));
    bench
        .args(["all", "--smoke", "--gateway"])
        .arg(&gateway)
        .arg("--out")
        .arg(&report);
    // The plugins `cargo xtask test` built; else bench's own default, the target directory's.
    if let Some(dir) = std::env::var_os("GATEWAY_TEST_PLUGINS_DIR").filter(|d| !d.is_empty()) {
        bench.arg("--plugins-dir").arg(dir);
    }
    let output = bench.output().expect("bench runs");
    assert!(
        output.status.success(),
        "bench all --smoke failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&report).expect("the report is written");
    for section in [
        "## 1. Added latency at concurrency 1",
        "## 2. Throughput",
        "## 3. Streaming",
        "## 4. Memory",
        "## 5. Cold start",
        "## 6. MCP tool calls",
        "| gateway up__echo |",
        "| gateway weather__current |",
        "## Targets",
        "| gateway |",
    ] {
        assert!(
            text.contains(section),
            "the report has no {section:?}:\n{text}"
        );
    }
}
