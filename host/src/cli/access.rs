//! `gateway admin-token create|list|revoke` and `gateway audit export`, and the audit event
//! of every change the CLI makes ([`audit_change`]): its actor is `cli:USER` (the operating
//! system's user), its role `owner` (whoever reaches the database may do anything), its
//! address none.

use std::io::Write;
use std::process::ExitCode;

use serde_json::Value;

use super::CliError;
use super::args::{AdminTokenCommand, AuditCommand, UsersCommand};
use crate::access::{Grant, token_expiry};
use crate::clock::{format_time_ms, now_ms};
use crate::keys::{PREFIX_LEN, generate_admin_token, key_prefix};
use crate::reports::audit_json;
use crate::store::{AuditEvent, AuditFilter, NewAdminToken, Outcome, Store};

/// Events read a page at a time by `audit export`.
const EXPORT_PAGE: u32 = 1000;

/// Who runs the CLI, as audit events name them.
fn actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .ok()
        .filter(|user| !user.trim().is_empty());
    format!("cli:{}", user.as_deref().unwrap_or("unknown"))
}

/// Records a change the CLI made (`verb`: `gateway key create`) to `target`. The change is
/// done: an event the database will not take is a warning, not a failed command.
pub(super) async fn audit_change(
    store: &Store,
    verb: &str,
    action: &str,
    target: String,
    before: Option<Value>,
    after: Option<Value>,
) {
    let event = AuditEvent {
        id: uuid::Uuid::now_v7(),
        at_ms: now_ms(),
        actor: actor(),
        role: "owner".into(),
        via: "cli".into(),
        address: None,
        action: action.into(),
        endpoint: verb.into(),
        target: Some(target),
        before,
        after,
        outcome: Outcome::Ok,
        status: 0,
        request_id: None,
    };
    if let Err(error) = store.append_audit_event(&event).await {
        eprintln!("warning: the change is made, and the audit log could not record it: {error}");
    }
}

/// `gateway admin-token ...`.
pub(super) async fn admin_token(
    store: &Store,
    command: AdminTokenCommand,
) -> Result<ExitCode, CliError> {
    match command {
        AdminTokenCommand::Create {
            role,
            project,
            expires,
            name,
        } => {
            let grant = Grant::new(role, project.as_deref()).map_err(CliError::Invalid)?;
            if let Some(project) = grant.project()
                && store.project(project).await?.is_none()
            {
                return Err(crate::store::StoreError::UnknownProject(project.to_owned()).into());
            }
            let expires_at_ms = token_expiry(expires.as_deref(), now_ms())
                .map_err(|m| CliError::Invalid(format!("--expires: {m}")))?;
            let secret = generate_admin_token();
            let new = NewAdminToken {
                name: name.unwrap_or_else(|| format!("{grant} token")),
                grant,
                created_by: actor(),
                expires_at_ms,
            };
            let token = store.create_admin_token(&secret, &new).await?;
            let after = crate::server::admin::token_json(&token);
            let target = format!("token:{}", token.prefix);
            audit_change(
                store,
                "gateway admin-token create",
                "token.create",
                target,
                None,
                Some(after),
            )
            .await;
            let expiry = token.expires_at_ms.map_or_else(
                || "never expires".to_owned(),
                |at| format!("expires {}", format_time_ms(at)),
            );
            println!(
                "made the admin token {} ({}, {expiry}); it is shown only this once:",
                token.prefix, token.grant
            );
            println!("{secret}");
            Ok(ExitCode::SUCCESS)
        }
        AdminTokenCommand::List => {
            let now = now_ms();
            println!("PREFIX  NAME  ROLE  CREATED_BY  CREATED_AT  EXPIRES_AT  LAST_USED_AT  STATE");
            let dash = || "-".to_owned();
            for token in store.admin_tokens().await? {
                let state = match (token.revoked_at_ms, token.live(now)) {
                    (Some(_), _) => "revoked",
                    (None, true) => "live",
                    (None, false) => "expired",
                };
                println!(
                    "{}  {}  {}  {}  {}  {}  {}  {state}",
                    token.prefix,
                    token.name,
                    token.grant,
                    token.created_by,
                    format_time_ms(token.created_at_ms),
                    token.expires_at_ms.map(format_time_ms).unwrap_or_else(dash),
                    token
                        .last_used_at_ms
                        .map(format_time_ms)
                        .unwrap_or_else(dash),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        AdminTokenCommand::Revoke { prefix } => {
            if prefix.chars().count() < PREFIX_LEN {
                return Err(CliError::Invalid(format!(
                    "give the token's prefix as listed ({PREFIX_LEN} characters)"
                )));
            }
            let prefix = key_prefix(&prefix).to_owned();
            let now = now_ms();
            let before: Vec<Value> = store
                .admin_tokens()
                .await?
                .iter()
                .filter(|token| token.prefix == prefix && token.live(now))
                .map(crate::server::admin::token_json)
                .collect();
            let revoked = store.revoke_admin_tokens(&prefix).await?;
            println!("revoked {revoked} admin token(s)");
            if revoked == 0 {
                return Ok(ExitCode::FAILURE);
            }
            audit_change(
                store,
                "gateway admin-token revoke",
                "token.revoke",
                format!("token:{prefix}"),
                Some(serde_json::json!({ "tokens": before })),
                Some(serde_json::json!({ "revoked": revoked })),
            )
            .await;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `gateway audit export`: JSON lines, oldest first, a page at a time.
pub(super) async fn audit(store: &Store, command: AuditCommand) -> Result<ExitCode, CliError> {
    let AuditCommand::Export {
        since,
        until,
        actor,
        action,
    } = command;
    if let (Some(since), Some(until)) = (since, until)
        && until <= since
    {
        return Err(CliError::EmptyRange);
    }
    let mut filter = AuditFilter {
        since_ms: since,
        until_ms: until,
        actor,
        action,
        limit: EXPORT_PAGE,
        ..AuditFilter::default()
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    loop {
        let page = store.audit_events(&filter).await?;
        for event in &page {
            writeln!(out, "{}", audit_json(event))?;
        }
        if page.len() < EXPORT_PAGE as usize {
            break;
        }
        filter.after = page.last().map(|event| event.id);
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `gateway users ...`.
pub(super) async fn users(store: &Store, command: UsersCommand) -> Result<ExitCode, CliError> {
    let roles = |email: &str| {
        let email = email.trim().to_lowercase();
        async move {
            let roles: Vec<String> = store
                .user_grants(Some(&email))
                .await?
                .iter()
                .map(|given| given.grant.to_string())
                .collect();
            Ok::<_, CliError>(serde_json::json!({ "email": email, "roles": roles }))
        }
    };
    match command {
        UsersCommand::Add {
            email,
            role,
            project,
        } => {
            let grant = Grant::new(role, project.as_deref()).map_err(CliError::Invalid)?;
            if let Some(project) = grant.project()
                && store.project(project).await?.is_none()
            {
                return Err(crate::store::StoreError::UnknownProject(project.to_owned()).into());
            }
            let before = roles(&email).await?;
            let added = store.add_user_grant(&email, &grant, &actor()).await?;
            let after = roles(&email).await?;
            let target = format!("user:{}", email.trim().to_lowercase());
            if added {
                audit_change(
                    store,
                    "gateway users add",
                    "user.add",
                    target,
                    Some(before),
                    Some(after),
                )
                .await;
                println!("{} is {grant} now", email.trim().to_lowercase());
            } else {
                println!("{} was {grant} already", email.trim().to_lowercase());
            }
            Ok(ExitCode::SUCCESS)
        }
        UsersCommand::List => {
            println!("EMAIL  ROLE  CREATED_BY  CREATED_AT");
            for given in store.user_grants(None).await? {
                println!(
                    "{}  {}  {}  {}",
                    given.email,
                    given.grant,
                    given.created_by,
                    format_time_ms(given.created_at_ms)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        UsersCommand::Remove {
            email,
            role,
            project,
        } => {
            let grant = role
                .map(|role| Grant::new(role, project.as_deref()))
                .transpose()
                .map_err(CliError::Invalid)?;
            let before = roles(&email).await?;
            let removed = store.remove_user_grants(&email, grant.as_ref()).await?;
            println!("took back {removed} role(s)");
            if removed == 0 {
                return Ok(ExitCode::FAILURE);
            }
            let after = roles(&email).await?;
            let target = format!("user:{}", email.trim().to_lowercase());
            audit_change(
                store,
                "gateway users remove",
                "user.remove",
                target,
                Some(before),
                Some(after),
            )
            .await;
            Ok(ExitCode::SUCCESS)
        }
    }
}
