//! `gateway key create|limit|revoke`.

use std::process::ExitCode;

use serde_json::json;

use super::CliError;
use super::access::audit_change;
use super::args::KeyCommand;
use super::project::print_limits;
use crate::clock::format_time_ms;
use crate::limits::LimitSet;
use crate::server::admin::limits_json;
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
            let prefix = crate::keys::key_prefix(&key).to_owned();
            let after = json!({
                "prefix": prefix,
                "projectId": project_id,
                "routes": spec.scope.routes,
                "models": spec.scope.models,
                "tools": spec.scope.tools,
                "expiresAt": spec.scope.expires_at_ms.map(format_time_ms),
                "limits": limits_json(&spec.limits),
            });
            let target = format!("key:{prefix}");
            audit_change(
                store,
                "gateway key create",
                "key.create",
                target,
                None,
                Some(after),
            )
            .await;
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
            let before = match &store.live_keys(&key_prefix).await?[..] {
                [(_, key)] => {
                    Some(json!({ "prefix": key.prefix, "limits": limits_json(&key.limits) }))
                }
                _ => None,
            };
            let (prefix, now) = store
                .update_key_limits(&key_prefix, &limits.update())
                .await?;
            let after = json!({ "prefix": prefix, "limits": limits_json(&now) });
            let target = format!("key:{prefix}");
            audit_change(
                store,
                "gateway key limit",
                "key.limits.set",
                target,
                before,
                Some(after),
            )
            .await;
            println!("limits of key {prefix}:");
            print_limits(&now);
            Ok(ExitCode::SUCCESS)
        }
        KeyCommand::Revoke { key_prefix } => {
            if key_prefix.chars().count() < 8 {
                return Err(CliError::ShortKeyPrefix);
            }
            let before: Vec<_> = store
                .live_keys(&key_prefix)
                .await?
                .iter()
                .map(|(project, key)| json!({ "projectId": project, "prefix": key.prefix }))
                .collect();
            let revoked = store.revoke_keys(&key_prefix).await?;
            println!("revoked {revoked} key(s)");
            if revoked > 0 {
                let shown: String = key_prefix.chars().take(crate::keys::PREFIX_LEN).collect();
                audit_change(
                    store,
                    "gateway key revoke",
                    "key.revoke",
                    format!("key:{shown}"),
                    Some(json!({ "keys": before })),
                    Some(json!({ "revoked": revoked })),
                )
                .await;
            }
            Ok(if revoked == 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}
