//! What ships to run the gateway where operators run things: the systemd unit
//! (`deploy/systemd/gateway.service`) verified by `systemd-analyze verify` against the gateway this
//! build made, with the sandbox the issue asks for.

use std::path::Path;
use std::process::Command;

use gateway_test_support::harness::gateway_binary;

/// The unit as shipped.
fn unit() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/systemd/gateway.service");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_systemd_unit_verifies_and_keeps_its_sandbox() {
    let unit = unit();
    let shipped = "ExecStart=/usr/local/bin/gateway serve";
    assert!(
        unit.contains(shipped),
        "the unit no longer runs {shipped:?}"
    );
    // `verify` checks that ExecStart's binary exists: this build's stands in for the installed one.
    let binary = gateway_binary();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let copy = dir.path().join("gateway.service");
    let here = format!("ExecStart={} serve", binary.display());
    std::fs::write(&copy, unit.replace(shipped, &here)).expect("the unit's copy");
    let verified = match Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
    {
        Ok(verified) => verified,
        // Said loudly, and a failure under CI, which must run everything (.ci/run installs
        // Debian's systemd package for it).
        Err(e) => {
            let why = format!("systemd-analyze (Debian's systemd package) could not be run: {e}");
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("*** SKIPPED the systemd unit's verify: {why} ***");
            return;
        }
    };
    let said = String::from_utf8_lossy(&verified.stderr);
    assert!(verified.status.success(), "systemd-analyze verify: {said}");
    // Nothing to warn of either (an unknown or misspelt setting is a warning, not a failure).
    assert!(
        !said.contains("gateway.service"),
        "systemd-analyze verify: {said}"
    );

    let settings: Vec<&str> = unit.lines().map(str::trim).collect();
    for wanted in [
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "ProtectSystem=strict",
        "StateDirectory=gateway",
        "Environment=GATEWAY_CONFIG=/etc/gateway/gateway.toml",
        "KillSignal=SIGTERM",
    ] {
        assert!(settings.contains(&wanted), "the unit lost {wanted:?}");
    }
    // SIGKILL comes after the gateway's default shutdown grace (30 s) and its records' flush.
    let stop = settings
        .iter()
        .find_map(|line| line.strip_prefix("TimeoutStopSec="))
        .and_then(|secs| secs.parse::<u64>().ok())
        .expect("TimeoutStopSec in seconds");
    assert!(
        stop > 30,
        "TimeoutStopSec={stop} is within the shutdown grace"
    );
    // The WebAssembly runtime makes the code it compiles executable.
    assert!(
        !settings
            .iter()
            .any(|line| line.starts_with("MemoryDenyWriteExecute=")),
        "MemoryDenyWriteExecute would stop every plugin from loading"
    );
}
