//! `gateway check-config` and `gateway healthcheck`: what a deployment asks of the binary
//! before it serves (is this config one `serve` takes?) and while it does (is it up?), where
//! the image has no shell and no curl to ask with.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use crate::config::{self, Config, env};
use crate::store::Database;

/// Loads `path` (else the built-in defaults) with this environment's `GATEWAY_*` variables
/// over it and checks it as `serve` would, without opening the database or loading plugins.
/// 0 and one line on stdout, or 2 (as every command given a bad config) and the problem on
/// stderr.
pub(super) fn check_config(path: Option<&Path>) -> ExitCode {
    let overrides = env::from_env();
    let origin = path.map_or_else(
        || config::DEFAULT_CONFIG_ORIGIN.to_owned(),
        |p| p.display().to_string(),
    );
    let config = match Config::load_with(path, &overrides) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let database = match Database::parse(&config.database) {
        Ok(Database::Sqlite(_)) => "SQLite",
        Ok(Database::Postgres(_)) => "PostgreSQL",
        // Not the store's error: it repeats the value, which may hold a password.
        Err(_) => {
            eprintln!(
                "error: invalid config {origin}: database: neither a SQLite path, a sqlite:// \
                 URL nor a postgres:// URL"
            );
            return ExitCode::from(2);
        }
    };
    let vars: Vec<&str> = overrides.iter().map(|(var, _)| *var).collect();
    println!(
        "{origin}: ok: {} routes, {} guards, {} MCP servers; {database}{}{}",
        config.providers.len(),
        config.guards.len(),
        config.mcp_servers.len(),
        if config.redis_url.is_some() {
            " + Redis"
        } else {
            ""
        },
        if vars.is_empty() {
            String::new()
        } else {
            format!("; from the environment: {}", vars.join(", "))
        },
    );
    ExitCode::SUCCESS
}

/// `GET /healthz` of the gateway serving `config` (or `url`): 0 on a 200 within 5 seconds,
/// else 1 and why on stderr.
pub(super) async fn healthcheck(config: &Config, url: Option<String>) -> ExitCode {
    let url = url.unwrap_or_else(|| format!("http://{}/healthz", reachable(config.listen)));
    let answer = reqwest::Client::new()
        .get(&url)
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    match answer {
        Ok(response) if response.status().is_success() => {
            println!("{url}: {}", response.status());
            ExitCode::SUCCESS
        }
        Ok(response) => {
            eprintln!("error: {url}: {}", response.status());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where a listener on `listen` is reached from this machine: a wildcard address by loopback.
fn reachable(listen: SocketAddr) -> SocketAddr {
    match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), listen.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), listen.port())
        }
        _ => listen,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_listener_is_asked_on_loopback() {
        for (listen, asked) in [
            ("0.0.0.0:8080", "127.0.0.1:8080"),
            ("[::]:9", "[::1]:9"),
            ("10.1.2.3:80", "10.1.2.3:80"),
        ] {
            let listen: SocketAddr = listen.parse().expect("an address");
            assert_eq!(reachable(listen).to_string(), asked);
        }
    }
}
