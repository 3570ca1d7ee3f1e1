//! `gateway key create|limit|revoke`.

use std::process::ExitCode;

use super::CliError;
use super::args::KeyCommand;
use super::project::print_limits;
use crate::limits::LimitSet;
use crate::store::{KeyScope, KeySpec, Store};

pub(super) async fn run(store: &Store, command: KeyCommand) -> Result<ExitCode, CliError> {
    match command {
        KeyCommand::Create {
            project_id,
            limits,
            routes,
            models,
            tools,
            expires,
        } => {
            let spec = KeySpec {
                limits: limits.update().apply(LimitSet::default()),
                scope: KeyScope {
                    routes,
                    models,
                    expires_at_ms: expires,
                    tools,
                },
            };
            let key = store.create_key(&project_id, &spec).await?;
            println!("created a key for project {project_id}; it is shown only this once:");
            println!("{key}");
            Ok(ExitCode::SUCCESS)
        }
        KeyCommand::Limit { key_prefix, limits } => {
            if key_prefix.chars().count() < 8 {
                return Err(CliError::ShortKeyPrefix);
            }
            if limits.is_empty() {
                return Err(CliError::NoLimitGiven);
            }
            let (prefix, now) = store
                .update_key_limits(&key_prefix, &limits.update())
                .await?;
            println!("limits of key {prefix}:");
            print_limits(&now);
            Ok(ExitCode::SUCCESS)
        }
        KeyCommand::Revoke { key_prefix } => {
            if key_prefix.chars().count() < 8 {
                return Err(CliError::ShortKeyPrefix);
            }
            let revoked = store.revoke_keys(&key_prefix).await?;
            println!("revoked {revoked} key(s)");
            Ok(if revoked == 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}
