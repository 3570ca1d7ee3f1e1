//! Operator endpoints under `/admin`, behind the config's `admin_token` (or the admin
//! console's session, `super::session`): plugins, routes and config; projects, keys, their
//! limits, guards, `/mcp` tools and usage (what the CLI does, for operators without a shell on
//! a replica); the invocation records, their usage over time and their export (`records`).

mod records;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;
use uuid::Uuid;

use crate::clock::parse_expiry;
use crate::clock::{format_time_ms, now_ms};
use crate::config::Config;
use crate::error::ApiError;
use crate::http::{Body, check_declared_length, error_response, json_response, read_body};
use crate::limits::{LimitSet, Period};
use crate::plugins::{PluginReport, PluginRuntime};
use crate::state::AppState;
use crate::store::{KeyInfo, KeyScope, KeySpec, LimitUpdate, Project, StoreError};

use super::session::Session;
// Bodies are read as the API surfaces read theirs: a wrong value is refused naming its field
// (`limits.rpm`).
use crate::surfaces::json::parse_object as parse_json;

/// One plugin with the routes it serves, as the admin API reports it.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PluginRow {
    #[serde(flatten)]
    pub report: PluginReport,
    pub routes: Vec<String>,
    /// Its instances and loads since the gateway started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<InstanceCounts>,
}

/// A plugin's counts as the admin API shows them.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct InstanceCounts {
    /// Serving calls now.
    pub active: u64,
    /// Loads of its file that made it serve.
    pub loaded: u64,
    /// Loads of its file that were refused.
    pub rejected: u64,
    /// Calls it crashed.
    pub traps: u64,
}

/// Every plugin `runtime` knows, with the routes of `config` that use it.
pub fn plugin_rows(runtime: &PluginRuntime, config: &Config) -> Vec<PluginRow> {
    let counts = runtime.counts();
    runtime
        .report()
        .into_iter()
        .map(|report| PluginRow {
            routes: config
                .providers
                .iter()
                .filter(|(_, route)| route.plugin == report.plugin)
                .map(|(id, _)| id.clone())
                .collect(),
            instances: counts
                .iter()
                .find(|counts| counts.plugin == report.plugin)
                .map(|counts| InstanceCounts {
                    active: counts.active,
                    loaded: counts.loaded,
                    rejected: counts.rejected,
                    traps: counts.traps.iter().sum(),
                }),
            report,
        })
        .collect()
}

/// Whether the request may use the admin API: it carries the admin token, or the console's
/// live session cookie and, to change anything, that session's CSRF token. A token is counted
/// against `client`'s wrong ones (and not compared once there were too many), as the console's
/// sign-in is.
async fn access(
    state: &AppState,
    request: &Request<Incoming>,
    client: IpAddr,
) -> Result<(), ApiError> {
    let (token, console) = {
        let live = state.live();
        let Some(token) = live.config.admin_token.clone().filter(|t| !t.is_empty()) else {
            return Err(ApiError::AdminUnauthorized);
        };
        (token, live.config.console)
    };
    let headers = request.headers();
    if headers.contains_key(hyper::header::AUTHORIZATION) {
        let attempt = state.sign_ins.attempt(client)?;
        if crate::auth::carries_token(headers, &token) {
            attempt.succeeded();
            return Ok(());
        }
        tracing::warn!(%client, "admin API: a request with a wrong admin token was refused");
    }
    if !console {
        return Err(ApiError::AdminUnauthorized);
    }
    let Some(session) = Session::live(&state.store, headers, &token, now_ms()).await? else {
        return Err(ApiError::AdminUnauthorized);
    };
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    if reads || session.csrf_ok(headers, &token) {
        Ok(())
    } else {
        Err(ApiError::CsrfRefused)
    }
}

/// `GET /admin/plugins`: every plugin, its status and the routes using it.
pub(super) async fn plugins(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: &Uuid,
    client: IpAddr,
) -> Response<Body> {
    if let Err(error) = access(&state, &request, client).await {
        return error_response(&error, id);
    }
    let live = state.live();
    let rows = plugin_rows(&state.runtime, &live.config);
    json_response(StatusCode::OK, &json!({ "plugins": rows }), id)
}

/// `GET /admin/config`: when the serving config was loaded, and why the last
/// edit was refused, if it was.
pub(super) async fn config(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: &Uuid,
    client: IpAddr,
) -> Response<Body> {
    if let Err(error) = access(&state, &request, client).await {
        return error_response(&error, id);
    }
    let live = state.live();
    let routes: Vec<&String> = live.config.providers.keys().collect();
    json_response(
        StatusCode::OK,
        &json!({
            "loadedAt": crate::clock::format_time_ms(live.loaded_at_ms),
            "routes": routes,
            "rejected": state.config_error(),
        }),
        id,
    )
}

/// Request bodies of the admin API are small JSON objects.
const MAX_ADMIN_BODY: usize = 64 * 1024;
/// What a key's prefix in a path must at least hold, as the CLI's `key revoke`.
const MIN_KEY_PREFIX: usize = 8;

/// A limits object of a request body: absent, null or 0 = no limit.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct LimitsBody {
    rpm: Option<u32>,
    tpm: Option<u64>,
    #[serde(alias = "daily_budget_usd")]
    daily_budget_usd: Option<f64>,
    #[serde(alias = "monthly_budget_usd")]
    monthly_budget_usd: Option<f64>,
}

impl LimitsBody {
    /// The limit set it stands for (zeros are no limit); a negative budget is refused rather
    /// than read as "none", which is surely not what was meant.
    fn limit_set(&self) -> Result<LimitSet, ApiError> {
        for (name, usd) in [
            ("dailyBudgetUsd", self.daily_budget_usd),
            ("monthlyBudgetUsd", self.monthly_budget_usd),
        ] {
            if usd.is_some_and(|usd| !usd.is_finite() || usd < 0.0) {
                return Err(ApiError::BadRequest(format!(
                    "{name} must be a number of dollars, not negative (0 or null: no budget)"
                )));
            }
        }
        let requested = LimitSet {
            rpm: self.rpm,
            tpm: self.tpm,
            daily_budget_usd: self.daily_budget_usd,
            monthly_budget_usd: self.monthly_budget_usd,
        };
        let update = LimitUpdate::replace(requested);
        // Before anything is stored: a project is created before its limits are set.
        update.check()?;
        Ok(update.apply(LimitSet::default()))
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NewProject {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    limits: Option<LimitsBody>,
}

/// A `PUT` body of a project's guards: the whole list, in order (`[]`: none).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GuardsBody {
    guards: Vec<String>,
}

/// A `PUT` body of a project's `/mcp` tools: the whole list of globs (`[]`: every tool).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsBody {
    tools: Vec<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct NewKey {
    limits: Option<LimitsBody>,
    routes: Vec<String>,
    models: Vec<String>,
    /// Globs of the `/mcp` tools (`SERVER__TOOL`) the key may use.
    tools: Vec<String>,
    expires: Option<String>,
}

fn limits_json(limits: &LimitSet) -> serde_json::Value {
    json!({
        "rpm": limits.rpm,
        "tpm": limits.tpm,
        "dailyBudgetUsd": limits.daily_budget_usd,
        "monthlyBudgetUsd": limits.monthly_budget_usd,
    })
}

fn project_json(project: &Project) -> serde_json::Value {
    json!({
        "id": project.id,
        "name": project.name,
        "createdAt": format_time_ms(project.created_at_ms),
        "limits": limits_json(&project.limits),
        "guards": project.guards,
        "tools": project.tools,
    })
}

/// One of the project, key and usage endpoints, by the path's segments after `/admin`.
enum Endpoint<'a> {
    Projects,
    Project(&'a str),
    ProjectKeys(&'a str),
    ProjectLimits(&'a str),
    ProjectGuards(&'a str),
    ProjectTools(&'a str),
    ProjectUsage(&'a str),
    Key(&'a str),
    KeyLimits(&'a str),
    Invocations,
    Invocation(&'a str),
    InvocationsCsv,
    Usage,
    Routes,
}

impl<'a> Endpoint<'a> {
    fn of(path: &'a str) -> Option<Endpoint<'a>> {
        let rest = path.strip_prefix("/admin/")?;
        let segments: Vec<&str> = rest.split('/').collect();
        // An empty id or prefix (`/admin/keys/`) names nothing.
        Some(match segments[..] {
            ["projects"] => Endpoint::Projects,
            ["projects", id] if !id.is_empty() => Endpoint::Project(id),
            ["projects", id, "keys"] if !id.is_empty() => Endpoint::ProjectKeys(id),
            ["projects", id, "limits"] if !id.is_empty() => Endpoint::ProjectLimits(id),
            ["projects", id, "guards"] if !id.is_empty() => Endpoint::ProjectGuards(id),
            ["projects", id, "tools"] if !id.is_empty() => Endpoint::ProjectTools(id),
            ["projects", id, "usage"] if !id.is_empty() => Endpoint::ProjectUsage(id),
            ["keys", prefix] if !prefix.is_empty() => Endpoint::Key(prefix),
            ["keys", prefix, "limits"] if !prefix.is_empty() => Endpoint::KeyLimits(prefix),
            ["invocations"] => Endpoint::Invocations,
            ["invocations.csv"] => Endpoint::InvocationsCsv,
            ["invocations", id] if !id.is_empty() => Endpoint::Invocation(id),
            ["usage"] => Endpoint::Usage,
            ["routes"] => Endpoint::Routes,
            _ => return None,
        })
    }

    /// The method(s) the endpoint answers, as `Allow` lists them.
    fn allowed(&self) -> &'static str {
        match self {
            Endpoint::Projects => "GET, POST",
            Endpoint::Project(_) => "GET",
            Endpoint::ProjectKeys(_) => "GET, POST",
            Endpoint::ProjectGuards(_) | Endpoint::ProjectTools(_) => "GET, PUT",
            Endpoint::ProjectLimits(_) | Endpoint::KeyLimits(_) => "PUT",
            Endpoint::ProjectUsage(_)
            | Endpoint::Invocations
            | Endpoint::Invocation(_)
            | Endpoint::InvocationsCsv
            | Endpoint::Usage
            | Endpoint::Routes => "GET",
            Endpoint::Key(_) => "DELETE",
        }
    }
}

/// Whether `path` is one of [`manage`]'s.
pub(super) fn manages(path: &str) -> bool {
    Endpoint::of(path).is_some()
}

/// `/admin/projects...`, `/admin/keys/...`, `/admin/invocations...`, `/admin/usage` and
/// `/admin/routes`: projects, keys, their limits; records, usage, routes.
pub(super) async fn manage(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: &Uuid,
    client: IpAddr,
) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let Some(endpoint) = Endpoint::of(&path) else {
        return error_response(&ApiError::NotFound(format!("no such endpoint: {path}")), id);
    };
    let method = request.method().clone();
    let known = endpoint
        .allowed()
        .split(", ")
        .any(|allowed| allowed == method.as_str());
    if !known {
        return error_response(&ApiError::MethodNotAllowed(endpoint.allowed()), id);
    }
    if let Err(error) = access(&state, &request, client).await {
        return error_response(&error, id);
    }
    let answer = match endpoint {
        Endpoint::InvocationsCsv => return records::export(state, &request, id).await,
        Endpoint::Invocations => records::list(&state, &request).await,
        Endpoint::Invocation(invocation) => records::show(&state, invocation).await,
        Endpoint::Usage => records::usage(&state, &request).await,
        Endpoint::Routes => Ok(routes(&state)),
        Endpoint::ProjectKeys(project_id) if method == Method::GET => {
            project_keys(&state, project_id).await
        }
        Endpoint::Projects if method == Method::GET => list_projects(&state).await,
        Endpoint::Projects => create_project(&state, request).await,
        Endpoint::Project(project_id) => show_project(&state, project_id).await,
        Endpoint::ProjectKeys(project_id) => create_key(&state, request, project_id).await,
        Endpoint::ProjectLimits(project_id) => {
            set_project_limits(&state, request, project_id).await
        }
        Endpoint::ProjectGuards(project_id) if method == Method::GET => {
            project_guards(&state, project_id).await
        }
        Endpoint::ProjectGuards(project_id) => {
            set_project_guards(&state, request, project_id).await
        }
        Endpoint::ProjectTools(project_id) if method == Method::GET => {
            project_tools(&state, project_id).await
        }
        Endpoint::ProjectTools(project_id) => set_project_tools(&state, request, project_id).await,
        Endpoint::ProjectUsage(project_id) => usage(&state, &request, project_id).await,
        Endpoint::Key(prefix) => revoke_keys(&state, prefix).await,
        Endpoint::KeyLimits(prefix) => set_key_limits(&state, request, prefix).await,
    };
    match answer {
        Ok((status, body)) => json_response(status, &body, id),
        Err(error) => error_response(&error, id),
    }
}

type Answer = Result<(StatusCode, serde_json::Value), ApiError>;

/// The request's body, within the admin API's size limit and the config's read timeout.
async fn read_json_body(state: &AppState, request: Request<Incoming>) -> Result<Bytes, ApiError> {
    check_declared_length(request.headers(), MAX_ADMIN_BODY)?;
    let timeout = Duration::from_secs(state.live().config.request_read_timeout_secs.get());
    read_body(request.into_body(), MAX_ADMIN_BODY, timeout).await
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

fn check_key_prefix(prefix: &str) -> Result<(), ApiError> {
    if prefix.chars().count() < MIN_KEY_PREFIX {
        return Err(ApiError::BadRequest(format!(
            "give at least {MIN_KEY_PREFIX} characters of the key"
        )));
    }
    Ok(())
}

async fn list_projects(state: &AppState) -> Answer {
    let projects = state.store.projects().await?;
    let rows: Vec<_> = projects.iter().map(project_json).collect();
    Ok((StatusCode::OK, json!({ "projects": rows })))
}

/// The project `project_id`, or 404.
async fn project(state: &AppState, project_id: &str) -> Result<Project, ApiError> {
    let project = state.store.project(project_id).await?;
    Ok(project.ok_or_else(|| StoreError::UnknownProject(project_id.to_owned()))?)
}

async fn show_project(state: &AppState, project_id: &str) -> Answer {
    Ok((
        StatusCode::OK,
        project_json(&project(state, project_id).await?),
    ))
}

fn guards_json(project_id: &str, guards: &[String]) -> serde_json::Value {
    json!({ "projectId": project_id, "guards": guards })
}

async fn project_guards(state: &AppState, project_id: &str) -> Answer {
    let project = project(state, project_id).await?;
    Ok((StatusCode::OK, guards_json(project_id, &project.guards)))
}

/// `PUT /admin/projects/{id}/guards`: replaces the project's guards with the body's list, each
/// an id of the serving config's `[guards.ID]`.
async fn set_project_guards(
    state: &AppState,
    request: Request<Incoming>,
    project_id: &str,
) -> Answer {
    let bytes = read_json_body(state, request).await?;
    if is_blank(&bytes) {
        return Err(ApiError::BadRequest(
            "send the guards as a JSON object: {\"guards\": [\"ID\", ...]} ([] clears them)".into(),
        ));
    }
    let body: GuardsBody = parse_json(&bytes)?;
    {
        let live = state.live();
        let defined = &live.config.guards;
        if let Some(unknown) = body.guards.iter().find(|id| !defined.contains_key(*id)) {
            let ids: Vec<&str> = defined.keys().map(String::as_str).collect();
            let listed = if ids.is_empty() {
                "it defines none".to_owned()
            } else {
                format!("it defines {}", ids.join(", "))
            };
            return Err(ApiError::InvalidParam {
                param: "guards".into(),
                message: format!(
                    "guards: no guard {unknown:?} is defined in the config ({listed})"
                ),
            });
        }
    }
    state
        .store
        .set_project_guards(project_id, &body.guards)
        .await?;
    tracing::info!(project = %project_id, guards = ?body.guards, "admin API: set the project's guards");
    Ok((StatusCode::OK, guards_json(project_id, &body.guards)))
}

fn tools_json(project_id: &str, tools: &[String]) -> serde_json::Value {
    json!({ "projectId": project_id, "tools": tools })
}

async fn project_tools(state: &AppState, project_id: &str) -> Answer {
    let project = project(state, project_id).await?;
    Ok((StatusCode::OK, tools_json(project_id, &project.tools)))
}

/// `PUT /admin/projects/{id}/tools`: replaces the project's `/mcp` tools with the body's globs
/// (`SERVER__TOOL`, `*` any run of characters; `[]`: every tool), which its keys are held to
/// besides their own.
async fn set_project_tools(
    state: &AppState,
    request: Request<Incoming>,
    project_id: &str,
) -> Answer {
    let bytes = read_json_body(state, request).await?;
    if is_blank(&bytes) {
        return Err(ApiError::BadRequest(
            "send the tools as a JSON object: {\"tools\": [\"SERVER__TOOL or glob\", ...]} \
             ([] allows every tool)"
                .into(),
        ));
    }
    let body: ToolsBody = parse_json(&bytes)?;
    if let Some(tool) = body.tools.iter().find(|t| t.trim().is_empty()) {
        return Err(ApiError::InvalidParam {
            param: "tools".into(),
            message: format!("tools: {tool:?} is not a tool glob"),
        });
    }
    state
        .store
        .set_project_tools(project_id, &body.tools)
        .await?;
    tracing::info!(project = %project_id, tools = ?body.tools, "admin API: set the project's tools");
    Ok((StatusCode::OK, tools_json(project_id, &body.tools)))
}

async fn create_project(state: &AppState, request: Request<Incoming>) -> Answer {
    let bytes = read_json_body(state, request).await?;
    let body: NewProject = parse_json(&bytes)?;
    let name = body.name.as_deref().map(str::trim).unwrap_or_default();
    if name.is_empty() {
        return Err(ApiError::BadRequest("give the project a name".into()));
    }
    // Checked before anything is created, so a refused body leaves no project behind.
    let limits = body
        .limits
        .as_ref()
        .map(LimitsBody::limit_set)
        .transpose()?;
    let mut project = state.store.create_project(name).await?;
    if let Some(limits) = limits {
        project.limits = state
            .store
            .update_project_limits(&project.id, &LimitUpdate::replace(limits))
            .await?;
    }
    tracing::info!(project = %project.id, "admin API: created a project");
    Ok((StatusCode::CREATED, project_json(&project)))
}

async fn create_key(state: &AppState, request: Request<Incoming>, project_id: &str) -> Answer {
    let bytes = read_json_body(state, request).await?;
    let body: NewKey = if is_blank(&bytes) {
        NewKey::default()
    } else {
        parse_json(&bytes)?
    };
    let limits = match &body.limits {
        Some(limits) => limits.limit_set()?,
        None => LimitSet::default(),
    };
    if let Some(route) = body.routes.iter().find(|r| r.trim().is_empty()) {
        return Err(ApiError::BadRequest(format!("{route:?} is not a route id")));
    }
    for model in &body.models {
        if !matches!(model.split_once('/'), Some((r, m)) if !r.is_empty() && !m.is_empty()) {
            return Err(ApiError::BadRequest(format!(
                "{model:?} is not ROUTE/MODEL (e.g. openai/gpt-4o-mini)"
            )));
        }
    }
    if let Some(tool) = body.tools.iter().find(|t| t.trim().is_empty()) {
        return Err(ApiError::BadRequest(format!("{tool:?} is not a tool glob")));
    }
    let expires_at_ms = body
        .expires
        .as_deref()
        .map(|text| parse_expiry(text, now_ms()))
        .transpose()
        .map_err(|message| ApiError::InvalidParam {
            param: "expires".into(),
            message: format!("expires: {message}"),
        })?;
    let spec = KeySpec {
        limits,
        scope: KeyScope {
            routes: body.routes,
            models: body.models,
            expires_at_ms,
            tools: body.tools,
        },
    };
    let key = state.store.create_key(project_id, &spec).await?;
    let prefix = crate::keys::key_prefix(&key).to_owned();
    tracing::info!(project = %project_id, key = %prefix, "admin API: created a key");
    Ok((
        StatusCode::CREATED,
        json!({
            "key": key,
            "prefix": prefix,
            "projectId": project_id,
            "limits": limits_json(&spec.limits),
            "routes": spec.scope.routes,
            "models": spec.scope.models,
            "tools": spec.scope.tools,
            "expiresAt": spec.scope.expires_at_ms.map(format_time_ms),
        }),
    ))
}

fn key_json(key: &KeyInfo) -> serde_json::Value {
    json!({
        "prefix": key.prefix,
        "createdAt": format_time_ms(key.created_at_ms),
        "revokedAt": key.revoked_at_ms.map(format_time_ms),
        "expiresAt": key.scope.expires_at_ms.map(format_time_ms),
        "limits": limits_json(&key.limits),
        "routes": key.scope.routes,
        "models": key.scope.models,
        "tools": key.scope.tools,
    })
}

/// `GET /admin/projects/{id}/keys`: its keys (never more of one than its prefix), newest first.
async fn project_keys(state: &AppState, project_id: &str) -> Answer {
    project(state, project_id).await?;
    let keys = state.store.project_keys(project_id).await?;
    let keys: Vec<_> = keys.iter().map(key_json).collect();
    Ok((
        StatusCode::OK,
        json!({ "projectId": project_id, "keys": keys }),
    ))
}

/// `GET /admin/routes`: the serving routes, their targets' ejection state and their plugins'
/// settings with what may be a secret masked.
fn routes(state: &AppState) -> (StatusCode, serde_json::Value) {
    let live = state.live();
    let plugins = state.runtime.report();
    let now = now_ms();
    let mut routes: Vec<_> = live.routes.all().collect();
    routes.sort_by(|a, b| a.id.cmp(&b.id));
    let rows: Vec<_> = routes
        .iter()
        .map(|route| {
            let config = &route.config;
            let targets: Vec<_> = route
                .target_views()
                .into_iter()
                .map(|target| {
                    let left_ms = target
                        .ejected_for
                        .map(|left| i64::try_from(left.as_millis()).unwrap_or(i64::MAX));
                    json!({
                        "baseUrl": target.base_url,
                        "weight": target.weight,
                        "ejected": left_ms.is_some(),
                        "ejectedUntil": left_ms.map(|left| format_time_ms(now.saturating_add(left))),
                        "settings": target.settings,
                    })
                })
                .collect();
            let status = plugins
                .iter()
                .find(|plugin| plugin.plugin == config.plugin)
                .map(|plugin| plugin.status.clone());
            json!({
                "id": route.id,
                "plugin": config.plugin,
                "pluginStatus": status,
                "defaultModel": config.default_model,
                "cacheTtlSecs": config.cache_ttl_secs.map(|ttl| ttl.get()),
                "cacheScope": config.cache_scope,
                "guards": config.guards,
                "fallbacks": config.fallbacks,
                "retries": config.retries,
                "settings": targets.first().map(|target| target["settings"].clone()),
                "targets": targets,
            })
        })
        .collect();
    (StatusCode::OK, json!({ "routes": rows }))
}

async fn revoke_keys(state: &AppState, prefix: &str) -> Answer {
    check_key_prefix(prefix)?;
    let revoked = state.store.revoke_keys(prefix).await?;
    if revoked == 0 {
        return Err(ApiError::NotFound(format!(
            "no live key starts with {prefix:?}"
        )));
    }
    let shown: String = prefix.chars().take(crate::keys::PREFIX_LEN).collect();
    tracing::info!(key = %shown, revoked, "admin API: revoked keys");
    Ok((StatusCode::OK, json!({ "revoked": revoked })))
}

/// A `PUT` body of limits: the whole set, so an empty body is refused rather than read as
/// "clear every limit".
async fn limits_of(state: &AppState, request: Request<Incoming>) -> Result<LimitSet, ApiError> {
    let bytes = read_json_body(state, request).await?;
    if is_blank(&bytes) {
        return Err(ApiError::BadRequest(
            "send the limits as a JSON object: {\"rpm\", \"tpm\", \"dailyBudgetUsd\", \
             \"monthlyBudgetUsd\"} (null or absent: no limit)"
                .into(),
        ));
    }
    parse_json::<LimitsBody>(&bytes)?.limit_set()
}

async fn set_project_limits(
    state: &AppState,
    request: Request<Incoming>,
    project_id: &str,
) -> Answer {
    let limits = limits_of(state, request).await?;
    let now = state
        .store
        .update_project_limits(project_id, &LimitUpdate::replace(limits))
        .await?;
    tracing::info!(project = %project_id, "admin API: set the project's limits");
    Ok((
        StatusCode::OK,
        json!({ "projectId": project_id, "limits": limits_json(&now) }),
    ))
}

async fn set_key_limits(state: &AppState, request: Request<Incoming>, prefix: &str) -> Answer {
    check_key_prefix(prefix)?;
    let limits = limits_of(state, request).await?;
    let (stored, now) = state
        .store
        .update_key_limits(prefix, &LimitUpdate::replace(limits))
        .await?;
    tracing::info!(key = %stored, "admin API: set the key's limits");
    Ok((
        StatusCode::OK,
        json!({ "prefix": stored, "limits": limits_json(&now) }),
    ))
}

async fn usage(state: &AppState, request: &Request<Incoming>, project_id: &str) -> Answer {
    let mut period = Period::Day;
    for pair in request.uri().query().unwrap_or_default().split('&') {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("", _) => {}
            ("period", "day") => period = Period::Day,
            ("period", "month") => period = Period::Month,
            ("period", other) => {
                return Err(ApiError::BadRequest(format!(
                    "period {other:?}: use day or month"
                )));
            }
            (name, _) => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {name:?}: only period=day|month"
                )));
            }
        }
    }
    if state.store.project(project_id).await?.is_none() {
        return Err(StoreError::UnknownProject(project_id.to_owned()).into());
    }
    let since = period.start_ms(now_ms());
    // Records are written in batches: the ones this process answered count too.
    state.log.flush().await;
    let usage = state.store.usage_since(project_id, since).await?;
    Ok((
        StatusCode::OK,
        json!({
            "projectId": project_id,
            "period": match period {
                Period::Day => "day",
                Period::Month => "month",
            },
            "since": format_time_ms(since),
            "requests": usage.requests,
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "totalTokens": usage.total_tokens,
            "spendUsd": usage.cost_usd,
        }),
    ))
}
