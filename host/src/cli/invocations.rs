//! `gateway invocations list|show|export`.

use std::process::ExitCode;

use super::CliError;
use super::args::InvocationsCommand;
use crate::clock::format_time_ms;
use crate::store::{InvocationFilter, Store};

pub(super) async fn run(store: &Store, command: InvocationsCommand) -> Result<ExitCode, CliError> {
    match command {
        InvocationsCommand::List {
            project,
            user,
            limit,
        } => {
            let filter = InvocationFilter {
                project_id: project,
                user_id: user,
                limit,
            };
            let records = store.list_invocations(&filter).await?;
            println!("ID  CREATED_AT  STATUS  HTTP_STATUS  ROUTE  MODEL  TOKENS  COST");
            for r in records {
                let dash = || "-".to_owned();
                println!(
                    "{}  {}  {}  {}  {}  {}  {}  {}",
                    r.id,
                    format_time_ms(r.created_at_ms),
                    r.status.as_str(),
                    r.http_status,
                    r.route.clone().unwrap_or_else(dash),
                    r.model.clone().unwrap_or_else(dash),
                    r.usage
                        .map(|u| u.total_tokens.to_string())
                        .unwrap_or_else(dash),
                    r.cost_usd.map(|c| format!("{c:.6}")).unwrap_or_else(dash),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        InvocationsCommand::Show { id } => {
            let Ok(uuid) = uuid::Uuid::parse_str(&id) else {
                return Err(CliError::NotAnInvocationId(id));
            };
            match store.invocation(&uuid).await? {
                Some(record) => {
                    let text = serde_json::to_string_pretty(&record.to_json())?;
                    println!("{text}");
                    Ok(ExitCode::SUCCESS)
                }
                None => Err(CliError::NoInvocation(id)),
            }
        }
        InvocationsCommand::Export {
            since,
            until,
            project,
            format,
        } => super::usage::export(store, project, since, until, format).await,
    }
}
