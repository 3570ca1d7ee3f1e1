//! `cargo xtask`: the project's two everyday commands, so a fresh clone needs
//! nothing but a Rust toolchain.
//!
//! - `cargo xtask serve [ARGS]`: builds the bundled plugins, installs them into
//!   the plugins directory and runs `gateway serve` (release build).
//! - `cargo xtask test [ARGS]`: builds the plugins, then runs the whole test
//!   suite (`cargo test --release --workspace`).
//! - `cargo xtask plugins`: only builds the plugins.
//! - `cargo xtask bench [ARGS]`: builds the plugins, the gateway and the
//!   benchmark harness (release), then runs `bench ARGS` (default: `all`; see BENCHMARKS.md).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const WASM_TARGET: &str = "wasm32-wasip2";
/// Cargo packages built to plugins, and the `.wasm` files they produce.
const PLUGINS: &[(&str, &str)] = &[
    ("echo-provider", "echo"),
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("gemini", "gemini"),
    ("faulty-plugin", "faulty"),
    ("hostile-plugin", "hostile"),
    ("legacy-plugin", "legacy"),
];
/// Plugins installed for `serve`; the rest exist for the tests.
const BUNDLED: &[&str] = &["echo", "openai", "anthropic", "gemini"];
const DEFAULT_PLUGINS_DIR: &str = "data/plugins";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("test") => test(&args[1..]),
        Some("plugins") => build_plugins().map(|_| ()),
        Some("bench") => bench(&args[1..]),
        _ => {
            Err("usage: cargo xtask serve [gateway args] | test [cargo test args] | plugins | bench [bench args]".into())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `cargo SUBCOMMAND --manifest-path <workspace>`, run from the caller's
/// directory so relative paths (config, data) mean what the caller meant.
fn cargo(subcommand: &str) -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .arg(subcommand)
        .arg("--manifest-path")
        .arg(workspace_root().join("Cargo.toml"));
    command
}

fn run(mut command: Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed ({status})"))
    }
}

fn ensure_wasm_target() -> Result<(), String> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == WASM_TARGET)
        })
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    eprintln!("xtask: installing the {WASM_TARGET} target (once)");
    let mut command = Command::new("rustup");
    command.args(["target", "add", WASM_TARGET]);
    run(command)
}

/// Builds every plugin; returns the directory holding the `.wasm` files.
fn build_plugins() -> Result<PathBuf, String> {
    ensure_wasm_target()?;
    let mut command = cargo("build");
    command.args(["--profile", "plugin", "--target", WASM_TARGET]);
    for (package, _) in PLUGINS {
        command.args(["-p", package]);
    }
    run(command)?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let dir = target_dir.join(WASM_TARGET).join("plugin");
    for (_, file) in PLUGINS {
        let path = dir.join(format!("{file}.wasm"));
        if !path.exists() {
            return Err(format!("the build did not produce {}", path.display()));
        }
    }
    Ok(dir)
}

/// Copies a plugin into place the safe way: write a temporary name, then rename,
/// so a gateway watching the directory never sees a half-written file.
fn install(from: &Path, dir: &Path, name: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let temporary = dir.join(format!(".{name}.wasm.tmp"));
    let target = dir.join(format!("{name}.wasm"));
    std::fs::copy(from, &temporary)
        .and_then(|_| std::fs::rename(&temporary, &target))
        .map_err(|e| format!("cannot install {}: {e}", target.display()))
}

fn serve(args: &[String]) -> Result<(), String> {
    let built = build_plugins()?;
    // The plugins go where the gateway will look: the config's plugins_dir
    // when it is given and sets one, else the default.
    let plugins_dir =
        configured_plugins_dir(args).unwrap_or_else(|| PathBuf::from(DEFAULT_PLUGINS_DIR));
    for name in BUNDLED {
        install(&built.join(format!("{name}.wasm")), &plugins_dir, name)?;
    }
    let mut command = cargo("run");
    command.args(["--release", "--quiet", "-p", "gateway", "--", "serve"]);
    command.args(args);
    run(command)
}

/// `plugins_dir` from `--config FILE` / `GATEWAY_CONFIG`, when set there.
fn configured_plugins_dir(args: &[String]) -> Option<PathBuf> {
    let from_args = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--config=").map(str::to_owned))
        });
    let file = from_args.or_else(|| std::env::var("GATEWAY_CONFIG").ok())?;
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "plugins_dir").then(|| PathBuf::from(value.trim().trim_matches('"')))
    })
}

fn test(args: &[String]) -> Result<(), String> {
    let built = build_plugins()?;
    let mut command = cargo("test");
    command
        // Every failure at once, not just the first test binary's.
        .args(["--release", "--workspace", "--no-fail-fast"])
        .args(args)
        .env("GATEWAY_TEST_PLUGINS_DIR", built);
    run(command)
}

fn bench(args: &[String]) -> Result<(), String> {
    let built = build_plugins()?;
    let mut command = cargo("build");
    command.args(["--release", "--quiet", "-p", "gateway", "-p", "bench"]);
    run(command)?;
    let mut command = cargo("run");
    command.args(["--release", "--quiet", "-p", "bench", "--"]);
    // Options alone (`--smoke`) mean the whole benchmark.
    if args.first().is_none_or(|a| a.starts_with('-')) {
        command.arg("all");
    }
    command.args(args).arg("--plugins-dir").arg(built);
    run(command)
}
