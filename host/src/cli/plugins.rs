//! `gateway plugins list`.

use std::process::ExitCode;
use std::time::Duration;

use super::CliError;
use crate::config::Config;
use crate::plugins::PluginRuntime;
use crate::server::admin;

/// Asks the running gateway; when none answers, loads the plugins directory itself.
pub(super) async fn list(config: &Config) -> Result<ExitCode, CliError> {
    let from_server = async {
        let token = config.admin_token.as_deref()?;
        let url = format!("http://{}/admin/plugins", config.listen);
        let response = reqwest::Client::new()
            .get(url)
            .bearer_auth(token)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let bytes = response.error_for_status().ok()?.bytes().await.ok()?;
        let body: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        serde_json::from_value::<Vec<admin::PluginRow>>(body["plugins"].clone()).ok()
    };
    let rows = match from_server.await {
        Some(rows) => rows,
        None => {
            println!(
                "(no running gateway answered on {} with the admin token: showing what {} holds)",
                config.listen,
                config.plugins_dir.display()
            );
            let runtime = PluginRuntime::new(config.plugin_cache_dir().as_deref())?;
            runtime.load_dir(&config.plugins_dir).await;
            admin::plugin_rows(&runtime, config)
        }
    };
    println!("PLUGIN  NAME  VERSION  WIT  STATUS  LOADED_AT  HASH  FILE  ROUTES");
    for row in rows {
        let r = &row.report;
        let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let mut status = match &r.reason {
            Some(reason) => format!("{} ({reason})", r.status),
            None => r.status.clone(),
        };
        // The version serving and a newer file that is not (yet) are two facts.
        match &r.next {
            Some(next) if next.status == "loading" => {
                status.push_str(&format!("; a new version loading since {}", next.since));
            }
            Some(next) => status.push_str(&format!(
                "; a new version refused at {} ({})",
                next.since,
                next.reason.as_deref().unwrap_or("-")
            )),
            None => {}
        }
        println!(
            "{}  {}  {}  {}  {}  {}  {}  {}  {}",
            r.plugin,
            dash(&r.name),
            dash(&r.version),
            dash(&r.wit_version),
            status,
            dash(&r.loaded_at),
            r.hash
                .as_deref()
                .map(|h| &h[..h.len().min(12)])
                .unwrap_or("-"),
            r.file,
            if row.routes.is_empty() {
                "-".to_owned()
            } else {
                row.routes.join(",")
            },
        );
    }
    Ok(ExitCode::SUCCESS)
}
