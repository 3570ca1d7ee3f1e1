//! `gateway project create|list|limit|guards|tools|usage`.

use std::process::ExitCode;

use serde_json::json;

use super::CliError;
use super::access::audit_change;
use super::args::ProjectCommand;
use crate::clock::{format_time_ms, now_ms};
use crate::config::Config;
use crate::limits::LimitSet;
use crate::server::admin::limits_json;
use crate::store::{Store, StoreError};

pub(super) async fn run(
    store: &Store,
    config: &Config,
    command: ProjectCommand,
) -> Result<ExitCode, CliError> {
    match command {
        ProjectCommand::Create { name } => {
            let project = store.create_project(&name).await?;
            let after = json!({ "id": project.id, "name": project.name });
            let target = format!("project:{}", project.id);
            audit_change(
                store,
                "gateway project create",
                "project.create",
                target,
                None,
                Some(after),
            )
            .await;
            println!("created project {:?}", project.name);
            println!("{}", project.id);
        }
        ProjectCommand::List => {
            let projects = store.projects().await?;
            println!("ID  NAME  CREATED_AT  LIMITS  GUARDS  TOOLS");
            for project in projects {
                println!(
                    "{}  {}  {}  {}  {}  {}",
                    project.id,
                    project.name,
                    format_time_ms(project.created_at_ms),
                    limits_summary(&project.limits),
                    guards_summary(&project.guards),
                    tools_summary(&project.tools)
                );
            }
        }
        ProjectCommand::Limit { project_id, limits } => {
            if limits.is_empty() {
                return Err(CliError::NoLimitGiven);
            }
            let before = store
                .project(&project_id)
                .await?
                .map(|project| json!({ "projectId": project_id, "limits": limits_json(&project.limits) }));
            let now = store
                .update_project_limits(&project_id, &limits.update())
                .await?;
            let after = json!({ "projectId": project_id, "limits": limits_json(&now) });
            let target = format!("project:{project_id}");
            audit_change(
                store,
                "gateway project limit",
                "project.limits.set",
                target,
                before,
                Some(after),
            )
            .await;
            println!("limits of project {project_id}:");
            print_limits(&now);
        }
        ProjectCommand::Guards {
            project_id,
            set,
            clear,
        } => {
            let change = match (set, clear) {
                (Some(guards), _) => Some(guards),
                (None, true) => Some(Vec::new()),
                (None, false) => None,
            };
            let guards = match change {
                Some(guards) => {
                    check_guards(config, &guards)?;
                    let before = store
                        .project(&project_id)
                        .await?
                        .map(|p| json!({ "guards": p.guards }));
                    store.set_project_guards(&project_id, &guards).await?;
                    let after = json!({ "guards": guards });
                    let target = format!("project:{project_id}");
                    audit_change(
                        store,
                        "gateway project guards",
                        "project.guards.set",
                        target,
                        before,
                        Some(after),
                    )
                    .await;
                    guards
                }
                None => {
                    let project = store.project(&project_id).await?;
                    project
                        .ok_or_else(|| StoreError::UnknownProject(project_id.clone()))?
                        .guards
                }
            };
            let shown = if guards.is_empty() {
                "none".to_owned()
            } else {
                guards.join(", ")
            };
            println!("guards of project {project_id}: {shown}");
        }
        ProjectCommand::Tools {
            project_id,
            set,
            clear,
        } => {
            let change = match (set, clear) {
                (Some(tools), _) => Some(tools),
                (None, true) => Some(Vec::new()),
                (None, false) => None,
            };
            let tools = match change {
                Some(tools) => {
                    let before = store
                        .project(&project_id)
                        .await?
                        .map(|p| json!({ "tools": p.tools }));
                    store.set_project_tools(&project_id, &tools).await?;
                    let after = json!({ "tools": tools });
                    let target = format!("project:{project_id}");
                    audit_change(
                        store,
                        "gateway project tools",
                        "project.tools.set",
                        target,
                        before,
                        Some(after),
                    )
                    .await;
                    tools
                }
                None => {
                    let project = store.project(&project_id).await?;
                    project
                        .ok_or_else(|| StoreError::UnknownProject(project_id.clone()))?
                        .tools
                }
            };
            let shown = if tools.is_empty() {
                "all".to_owned()
            } else {
                tools.join(", ")
            };
            println!("tools of project {project_id}: {shown}");
        }
        ProjectCommand::Usage { project_id, period } => {
            if store.project(&project_id).await?.is_none() {
                return Err(StoreError::UnknownProject(project_id).into());
            }
            let since = period.period().start_ms(now_ms());
            let usage = store.usage_since(&project_id, since).await?;
            println!("project {project_id} since {}:", format_time_ms(since));
            println!("requests: {}", usage.requests);
            println!("prompt_tokens: {}", usage.prompt_tokens);
            println!("completion_tokens: {}", usage.completion_tokens);
            println!("total_tokens: {}", usage.total_tokens);
            println!("spend_usd: {}", usage.cost_usd);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per limit: `rpm: 10`, `daily_budget_usd: none`.
pub(super) fn print_limits(limits: &LimitSet) {
    let show = |value: Option<String>| value.unwrap_or_else(|| "none".to_owned());
    println!("rpm: {}", show(limits.rpm.map(|n| n.to_string())));
    println!("tpm: {}", show(limits.tpm.map(|n| n.to_string())));
    println!(
        "daily_budget_usd: {}",
        show(limits.daily_budget_usd.map(|usd| usd.to_string()))
    );
    println!(
        "monthly_budget_usd: {}",
        show(limits.monthly_budget_usd.map(|usd| usd.to_string()))
    );
}

/// A limit set on one line, for tables: `rpm=10,daily_budget_usd=5` or `-`.
fn limits_summary(limits: &LimitSet) -> String {
    let mut parts = Vec::new();
    if let Some(n) = limits.rpm {
        parts.push(format!("rpm={n}"));
    }
    if let Some(n) = limits.tpm {
        parts.push(format!("tpm={n}"));
    }
    if let Some(usd) = limits.daily_budget_usd {
        parts.push(format!("daily_budget_usd={usd}"));
    }
    if let Some(usd) = limits.monthly_budget_usd {
        parts.push(format!("monthly_budget_usd={usd}"));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(",")
    }
}

/// Refuses a guard id that no `[guards.ID]` of the config defines, naming the ones it does.
fn check_guards(config: &Config, guards: &[String]) -> Result<(), CliError> {
    let Some(unknown) = guards.iter().find(|id| !config.guards.contains_key(*id)) else {
        return Ok(());
    };
    let defined = if config.guards.is_empty() {
        "it defines none".to_owned()
    } else {
        let ids: Vec<&str> = config.guards.keys().map(String::as_str).collect();
        format!("it defines {}", ids.join(", "))
    };
    Err(CliError::UnknownGuard {
        id: unknown.clone(),
        defined,
    })
}

/// A project's guards for a table, in order: `pii,words` or `-`.
fn guards_summary(guards: &[String]) -> String {
    if guards.is_empty() {
        "-".to_owned()
    } else {
        guards.join(",")
    }
}

/// A project's tools for a table: `github__*,calc__add`, or `all` (none named: every tool).
fn tools_summary(tools: &[String]) -> String {
    if tools.is_empty() {
        "all".to_owned()
    } else {
        tools.join(",")
    }
}
