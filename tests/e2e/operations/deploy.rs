//! What ships to run the gateway where operators run things: the systemd unit
//! (`deploy/systemd/gateway.service`) verified by `systemd-analyze verify` against the gateway this
//! build made, with the sandbox the issue asks for; the container image
//! (`deploy/container/Containerfile`, built by `cargo xtask image`), its configuration read back
//! and the gateway in its file system serving, as its user, with nothing of this machine's.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_test_support::harness::gateway_binary;
use gateway_test_support::{client, skip_outside_ci};
use serde_json::{Value, json};

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
            skip_outside_ci("the systemd unit's verify", &why);
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

/// The image's user and group (`deploy/container/Containerfile`).
const IMAGE_USER: u32 = 65532;
/// The bound on the image's size.
const MAX_IMAGE_BYTES: u64 = 60_000_000;

/// What `cargo xtask test` left of the image (`xtask/src/image.rs`): its configuration as
/// `podman image inspect` gives it, and its file system exported. `None` (said) outside CI when
/// it was not built; under CI, a failure saying why.
fn image() -> Option<(Value, PathBuf)> {
    let Some(dir) = std::env::var_os("GATEWAY_TEST_IMAGE").map(PathBuf::from) else {
        let why = std::env::var("GATEWAY_TEST_NO_IMAGE").unwrap_or_else(|_| {
            "GATEWAY_TEST_IMAGE is not set (`cargo xtask test` builds the image)".into()
        });
        skip_outside_ci("the container image's tests", &why);
        return None;
    };
    let inspect = std::fs::read(dir.join("inspect.json")).expect("the image's inspect.json");
    let inspect: Value = serde_json::from_slice(&inspect).expect("inspect.json is JSON");
    Some((inspect[0].clone(), dir.join("rootfs.tar")))
}

#[test]
fn the_image_is_small_unprivileged_self_contained_and_says_how_to_run_it() {
    let Some((image, rootfs_tar)) = image() else {
        return;
    };
    let size = image["Size"].as_u64().expect("the image's size");
    assert!(
        size < MAX_IMAGE_BYTES,
        "the image is {size} bytes, not under {MAX_IMAGE_BYTES}"
    );
    let config = &image["Config"];
    assert_eq!(config["User"], json!(format!("{IMAGE_USER}:{IMAGE_USER}")));
    assert_eq!(config["WorkingDir"], json!("/var/lib/gateway"));
    assert_eq!(config["Entrypoint"], json!(["/usr/bin/gateway"]));
    assert_eq!(config["Cmd"], json!(["serve"]));
    assert_eq!(config["StopSignal"], json!("SIGTERM"));
    assert!(
        config["Env"]
            .as_array()
            .expect("Env")
            .contains(&json!("GATEWAY_CONFIG=/etc/gateway/gateway.toml")),
        "{config}"
    );
    for port in ["8080/tcp", "9090/tcp"] {
        assert!(config["ExposedPorts"].get(port).is_some(), "{config}");
    }
    for volume in ["/etc/gateway", "/var/lib/gateway"] {
        assert!(config["Volumes"].get(volume).is_some(), "{config}");
    }
    assert_eq!(
        healthcheck(&image)["Test"],
        json!(["CMD", "/usr/bin/gateway", "healthcheck"])
    );
    let labels = &config["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        json!(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        labels["org.opencontainers.image.licenses"],
        json!("Apache-2.0")
    );
    let revision = labels["org.opencontainers.image.revision"]
        .as_str()
        .unwrap_or_default();
    assert!(
        revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit()),
        "the revision label is not a commit: {revision:?}"
    );
    assert!(
        labels.get("org.opencontainers.image.source").is_some(),
        "{labels}"
    );

    let root = tempfile::tempdir().expect("a temporary directory");
    unpack(&rootfs_tar, root.path());
    // The loader the gateway names is in the image (what it loads, the serving test shows).
    let binary = std::fs::read(root.path().join("usr/bin/gateway")).expect("/usr/bin/gateway");
    let loader = interpreter(&binary).expect("a dynamically linked gateway names its loader");
    assert!(
        root.path().join(loader.trim_start_matches('/')).is_file(),
        "the image lacks the gateway's loader {loader}"
    );
    for plugin in [
        "echo",
        "openai",
        "anthropic",
        "gemini",
        "vertex",
        "bedrock",
        "pii-guard",
    ] {
        let file = root
            .path()
            .join(format!("usr/lib/gateway/plugins/{plugin}.wasm"));
        assert!(file.is_file(), "the image lacks {}", file.display());
    }
    assert!(
        root.path()
            .join("etc/ssl/certs/ca-certificates.crt")
            .is_file()
    );
    // Nothing but its data directory is the gateway's to change, were the root file system
    // writable.
    if is_root() {
        for entry in walk(root.path()) {
            let meta = std::fs::symlink_metadata(&entry).expect("metadata");
            let inside = entry.strip_prefix(root.path()).expect("inside");
            let data = inside.starts_with("var/lib/gateway");
            assert_eq!(
                meta.uid(),
                if data { IMAGE_USER } else { 0 },
                "/{} is owned by {}",
                inside.display(),
                meta.uid()
            );
        }
    }
}

#[test]
fn the_gateway_serves_from_the_images_file_system_as_its_user() {
    let Some((image, rootfs_tar)) = image() else {
        return;
    };
    // chroot and a change of user need root; under CI (root here) this must run.
    if !is_root() {
        skip_outside_ci(
            "the image's gateway",
            "it is started by chroot, which needs root",
        );
        return;
    }
    let root = tempfile::tempdir().expect("a temporary directory");
    unpack(&rootfs_tar, root.path());
    // As a container runtime starts it (`in_image`), with its entry point and command; the
    // two ports are this test's (a container's are its own).
    let (api, metrics) = (free_port(), free_port());
    let config = &image["Config"];
    let mut command = in_image(root.path(), config);
    command
        .args(strings(&config["Entrypoint"]))
        .args(strings(&config["Cmd"]))
        .env("GATEWAY_LISTEN", api.to_string())
        .env("GATEWAY_METRICS_LISTEN", metrics.to_string());
    let mut running = Running::spawn(command);
    let up = wait_until_listening(api, &mut running);
    assert!(
        up,
        "the image's gateway did not listen on {api}; stderr:\n{}",
        running.stderr()
    );

    let health = client::request(api, "GET", "/healthz", &[], b"");
    assert_eq!(health.status, 200, "{}", health.text());
    // The image's own HEALTHCHECK command, run in its file system as its user.
    let probe = in_image(root.path(), config)
        .args(strings(&healthcheck(&image)["Test"]).iter().skip(1))
        .env("GATEWAY_LISTEN", api.to_string())
        .output()
        .expect("the healthcheck runs");
    assert!(
        probe.status.success(),
        "healthcheck: {}",
        String::from_utf8_lossy(&probe.stderr)
    );

    // The demo request of the README, with the key the first start printed.
    let (project, key) = running.demo();
    let body = json!({
        "projectId": project, "prompt": "Hello from the image", "showUsage": true,
        "providerConfig": {"provider": "demo", "params": {"type": "text", "model": "echo"}},
    })
    .to_string();
    let answer = client::request(
        api,
        "POST",
        "/completions",
        &[
            ("Authorization", &key),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(
        answer.text().contains("Hello from the image"),
        "{}",
        answer.text()
    );
    // /metrics on its own port, counting that request; not on the API's.
    let scraped = client::request(metrics, "GET", "/metrics", &[], b"");
    assert_eq!(scraped.status, 200);
    assert!(
        scraped.text().contains("gateway_requests_total"),
        "{}",
        scraped.text()
    );
    assert_ne!(
        client::request(api, "GET", "/metrics", &[], b"").status,
        200
    );
    // What it wrote is in its data directory, as its user.
    let db = root.path().join("var/lib/gateway/gateway.db");
    assert_eq!(
        std::fs::metadata(&db).expect("the database").uid(),
        IMAGE_USER
    );
    assert!(root.path().join("var/lib/gateway/plugin-cache").is_dir());

    // SIGTERM, as `docker stop` sends it: a clean exit, the logs JSON (to stderr: stdout
    // carries what the gateway prints for its operator, the demo key).
    let status = running.stop();
    let stderr = running.stderr();
    assert!(status.success(), "exit {status}; stderr:\n{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(!lines.is_empty());
    for line in lines {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
    }
}

/// The image's HEALTHCHECK: in the config in docker's inspect, beside it in podman's.
fn healthcheck(image: &Value) -> &Value {
    image["Config"]
        .get("Healthcheck")
        .or_else(|| image.get("Healthcheck"))
        .expect("a health check")
}

/// A command to run in the unpacked image at `root` as a container runtime would: as the
/// image's user, with the image's environment and nothing of this machine's. chroot starts it
/// in `/`, not the image's WorkingDir: the image's config names only absolute paths.
fn in_image(root: &Path, config: &Value) -> Command {
    let mut command = Command::new("chroot");
    command
        .arg(format!("--userspec={IMAGE_USER}:{IMAGE_USER}"))
        .arg(root)
        .env_clear()
        .envs(
            strings(&config["Env"])
                .iter()
                .filter_map(|e| e.split_once('=')),
        );
    command
}

/// The image's gateway, its stdout and stderr read as they come; killed if dropped running.
struct Running {
    child: Option<Child>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    fn spawn(mut command: Command) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chroot starts the image's gateway");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        for (pipe, into) in [
            (
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
                &stdout,
            ),
            (
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
                &stderr,
            ),
        ] {
            let (Some(pipe), into) = (pipe, Arc::clone(into)) else {
                continue;
            };
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut text = into.lock().unwrap_or_else(|e| e.into_inner());
                    text.push_str(&line);
                    text.push('\n');
                }
            }));
        }
        Running {
            child: Some(child),
            stdout,
            stderr,
            readers,
        }
    }

    fn stdout(&self) -> String {
        self.stdout
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|child| child.try_wait().ok().flatten().is_some())
    }

    /// The demo project's id and key its first start printed (before it listened).
    fn demo(&self) -> (String, String) {
        let stdout = self.stdout();
        let printed = |prefix: &str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(prefix))
                .map(|value| value.trim().to_owned())
                .unwrap_or_else(|| panic!("no {prefix:?} line in stdout:\n{stdout}"))
        };
        (printed("demo project id: "), printed("demo api key: "))
    }

    /// SIGTERM, as `docker stop` sends it; the exit status once the gateway is gone.
    fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let status = child.wait().expect("the gateway's exit");
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Unpacks the exported image as root would (owners kept) into `dir`.
fn unpack(tar: &Path, dir: &Path) {
    let status = Command::new("tar")
        .arg("--extract")
        .arg("--numeric-owner")
        .arg("--same-permissions")
        .arg("--file")
        .arg(tar)
        .arg("--directory")
        .arg(dir)
        .status()
        .expect("tar runs");
    assert!(status.success(), "tar could not unpack {}", tar.display());
}

/// The dynamic loader an ELF executable names (`PT_INTERP`), if any.
fn interpreter(elf: &[u8]) -> Option<String> {
    assert!(
        elf.len() > 64 && elf[..4] == *b"\x7fELF" && elf[4] == 2 && elf[5] == 1,
        "not a 64-bit little-endian ELF file"
    );
    let read = |at: usize, len: usize| {
        elf[at..at + len]
            .iter()
            .rev()
            .fold(0usize, |n, &b| (n << 8) | usize::from(b))
    };
    let (table, size, count) = (read(0x20, 8), read(0x36, 2), read(0x38, 2));
    const PT_INTERP: usize = 3;
    let header = (0..count)
        .map(|i| table + i * size)
        .find(|&at| read(at, 4) == PT_INTERP)?;
    let (offset, length) = (read(header + 0x08, 8), read(header + 0x20, 8));
    let path = elf.get(offset..offset + length)?;
    Some(
        String::from_utf8_lossy(path)
            .trim_end_matches('\0')
            .to_owned(),
    )
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// Every path under `dir`, `dir` left out.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("an entry").path();
        if std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir()) {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

/// A port of 127.0.0.1 nothing listens on (a moment ago).
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|values| {
            values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits up to a minute (the first start compiles the plugins) for `addr` to take connections;
/// false if the gateway exited first.
fn wait_until_listening(addr: SocketAddr, running: &mut Running) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if TcpStream::connect(addr).is_ok() {
            return true;
        }
        if running.exited() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
