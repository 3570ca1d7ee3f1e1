//! Operator endpoints under `/admin`: plugins, routes and config; projects, keys, their
//! limits, guards, `/mcp` tools and usage (what the CLI does, for operators without a shell on
//! a replica); the invocation records, their usage over time and their export (`records`);
//! personal admin tokens (`tokens`) and the audit log (`audit`).
//!
//! Every request is found in the one role table (`table`), its caller identified (`who`: the
//! config's `admin_token`, a personal token, the console's session) and held to its row: a
//! project role sees only its projects (another's is not found, not refused), and every change
//! is an audit event, refused ones too.

pub(super) mod audit;
mod records;
pub mod table;
mod tokens;
mod users;
pub(super) mod who;

pub use tokens::token_json;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;
use uuid::Uuid;

use crate::access::Visible;
use crate::clock::parse_expiry;
use crate::clock::{format_time_ms, now_ms};
use crate::config::Config;
use crate::error::ApiError;
use crate::http::{Body, check_declared_length, error_response, json_response, read_body};
use crate::limits::{LimitSet, Period};
use crate::plugins::{PluginReport, PluginRuntime};
use crate::state::AppState;
use crate::store::{KeyInfo, KeyScope, KeySpec, LimitUpdate, Project, StoreError};

use audit::{Actor, Change, Event};
use table::Rule;
use who::Principal;
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

/// `GET /admin/plugins`: every plugin, its status and the routes using it.
fn plugins(state: &AppState) -> (StatusCode, serde_json::Value) {
    let live = state.live();
    let rows = plugin_rows(&state.runtime, &live.config);
    (StatusCode::OK, json!({ "plugins": rows }))
}

/// `GET /admin/config`: when the serving config was loaded, and why the last
/// edit was refused, if it was.
fn config(state: &AppState) -> (StatusCode, serde_json::Value) {
    let live = state.live();
    let routes: Vec<&String> = live.config.providers.keys().collect();
    (
        StatusCode::OK,
        json!({
            "loadedAt": crate::clock::format_time_ms(live.loaded_at_ms),
            "routes": routes,
            "rejected": state.config_error(),
        }),
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

/// A limit set as the admin API and audit events show it.
pub fn limits_json(limits: &LimitSet) -> serde_json::Value {
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

/// An admin endpoint, by the path's segments after `/admin`.
enum Endpoint<'a> {
    Plugins,
    Config,
    Routes,
    Audit,
    Projects,
    Project(&'a str),
    ProjectKeys(&'a str),
    ProjectLimits(&'a str),
    ProjectGuards(&'a str),
    ProjectTools(&'a str),
    ProjectUsage(&'a str),
    ProjectBatches(&'a str),
    Key(&'a str),
    KeyLimits(&'a str),
    Invocations,
    Invocation(&'a str),
    InvocationsCsv,
    Usage,
    Tokens,
    Token(&'a str),
    Users,
    User(&'a str),
}

impl<'a> Endpoint<'a> {
    fn of(path: &'a str) -> Option<Endpoint<'a>> {
        let rest = path.strip_prefix("/admin/")?;
        let segments: Vec<&str> = rest.split('/').collect();
        // An empty id or prefix (`/admin/keys/`) names nothing.
        Some(match segments[..] {
            ["plugins"] => Endpoint::Plugins,
            ["config"] => Endpoint::Config,
            ["routes"] => Endpoint::Routes,
            ["audit"] => Endpoint::Audit,
            ["projects"] => Endpoint::Projects,
            ["projects", id] if !id.is_empty() => Endpoint::Project(id),
            ["projects", id, "keys"] if !id.is_empty() => Endpoint::ProjectKeys(id),
            ["projects", id, "limits"] if !id.is_empty() => Endpoint::ProjectLimits(id),
            ["projects", id, "guards"] if !id.is_empty() => Endpoint::ProjectGuards(id),
            ["projects", id, "tools"] if !id.is_empty() => Endpoint::ProjectTools(id),
            ["projects", id, "usage"] if !id.is_empty() => Endpoint::ProjectUsage(id),
            ["projects", id, "batches"] if !id.is_empty() => Endpoint::ProjectBatches(id),
            ["keys", prefix] if !prefix.is_empty() => Endpoint::Key(prefix),
            ["keys", prefix, "limits"] if !prefix.is_empty() => Endpoint::KeyLimits(prefix),
            ["invocations"] => Endpoint::Invocations,
            ["invocations.csv"] => Endpoint::InvocationsCsv,
            ["invocations", id] if !id.is_empty() => Endpoint::Invocation(id),
            ["usage"] => Endpoint::Usage,
            ["tokens"] => Endpoint::Tokens,
            ["tokens", prefix] if !prefix.is_empty() => Endpoint::Token(prefix),
            ["users"] => Endpoint::Users,
            ["users", email] if !email.is_empty() => Endpoint::User(email),
            _ => return None,
        })
    }

    /// Its path as the role table ([`table::RULES`]) writes it.
    fn pattern(&self) -> &'static str {
        match self {
            Endpoint::Plugins => "/admin/plugins",
            Endpoint::Config => "/admin/config",
            Endpoint::Routes => "/admin/routes",
            Endpoint::Audit => "/admin/audit",
            Endpoint::Projects => "/admin/projects",
            Endpoint::Project(_) => "/admin/projects/{id}",
            Endpoint::ProjectKeys(_) => "/admin/projects/{id}/keys",
            Endpoint::ProjectLimits(_) => "/admin/projects/{id}/limits",
            Endpoint::ProjectGuards(_) => "/admin/projects/{id}/guards",
            Endpoint::ProjectTools(_) => "/admin/projects/{id}/tools",
            Endpoint::ProjectUsage(_) => "/admin/projects/{id}/usage",
            Endpoint::ProjectBatches(_) => "/admin/projects/{id}/batches",
            Endpoint::Key(_) => "/admin/keys/{prefix}",
            Endpoint::KeyLimits(_) => "/admin/keys/{prefix}/limits",
            Endpoint::Invocations => "/admin/invocations",
            Endpoint::InvocationsCsv => "/admin/invocations.csv",
            Endpoint::Invocation(_) => "/admin/invocations/{invocation}",
            Endpoint::Usage => "/admin/usage",
            Endpoint::Tokens => "/admin/tokens",
            Endpoint::Token(_) => "/admin/tokens/{prefix}",
            Endpoint::Users => "/admin/users",
            Endpoint::User(_) => "/admin/users/{email}",
        }
    }

    /// The project it names in its path.
    fn project(&self) -> Option<&'a str> {
        match self {
            Endpoint::Project(id)
            | Endpoint::ProjectKeys(id)
            | Endpoint::ProjectLimits(id)
            | Endpoint::ProjectGuards(id)
            | Endpoint::ProjectTools(id)
            | Endpoint::ProjectUsage(id)
            | Endpoint::ProjectBatches(id) => Some(id),
            _ => None,
        }
    }
}

/// Whether `path` is one of [`manage`]'s.
pub(super) fn manages(path: &str) -> bool {
    Endpoint::of(path).is_some()
}

/// Every endpoint under `/admin/`, each held to its row of the role table; `client` is the
/// address the request came from (whose wrong credentials are counted, and which audit events
/// name).
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
    let pattern = endpoint.pattern();
    let Some(rule) = table::rule(request.method().as_str(), pattern) else {
        return error_response(&ApiError::MethodNotAllowed(table::allowed(pattern)), id);
    };
    let endpoint_name = format!("{} {}", rule.method, rule.path);
    let principal = match who::identify(&state, &request, client).await {
        Ok(principal) => principal,
        Err(refused) => {
            if let Some(actor) = &refused.failed {
                let event = Event {
                    actor: Actor {
                        name: actor,
                        role: "none".into(),
                        via: "api",
                    },
                    client,
                    action: "sign_in.failed",
                    endpoint: endpoint_name,
                    change: Change::default(),
                    status: refused.error.status(),
                    request_id: *id,
                };
                audit::append(&state, event).await;
            }
            return error_response(&refused.error, id);
        }
    };
    let mut change = Change::default();
    let answer = match allow(&state, &principal, rule, &endpoint).await {
        Ok(()) => {
            let visible = principal.grants.visible();
            match endpoint {
                Endpoint::InvocationsCsv => {
                    return records::export(state, &request, id, &visible).await;
                }
                Endpoint::Audit => return audit::list(&state, &request, id).await,
                endpoint => {
                    let asked = Asked {
                        principal: &principal,
                        visible: &visible,
                        change: &mut change,
                    };
                    answer(&state, request, endpoint, asked).await
                }
            }
        }
        Err(error) => Err(error),
    };
    let status = match &answer {
        Ok((status, _)) => *status,
        Err(error) => error.status(),
    };
    if let Some(action) = rule.action {
        if change.target.is_none() {
            change.target = endpoint_target(&path);
        }
        let event = Event {
            actor: Actor::from(&principal),
            client,
            action,
            endpoint: endpoint_name,
            change,
            status,
            request_id: *id,
        };
        audit::append(&state, event).await;
    }
    match answer {
        Ok((status, body)) => json_response(status, &body, id),
        Err(error) => error_response(&error, id),
    }
}

/// What a change was done to, from its path alone (when its handler did not get as far as
/// saying): `project:ID`, `key:PREFIX`, `token:PREFIX`, `user:EMAIL`. A whole key in a path is named by its
/// stored prefix only.
fn endpoint_target(path: &str) -> Option<String> {
    let endpoint = Endpoint::of(path)?;
    let shown = |text: &str| {
        text.chars()
            .take(crate::keys::PREFIX_LEN)
            .collect::<String>()
    };
    match endpoint {
        Endpoint::Key(prefix) | Endpoint::KeyLimits(prefix) => {
            Some(format!("key:{}", shown(prefix)))
        }
        Endpoint::Token(prefix) => Some(format!("token:{}", shown(prefix))),
        Endpoint::User(email) => Some(format!("user:{email}")),
        endpoint => endpoint.project().map(|id| format!("project:{id}")),
    }
}

/// Whether `principal` may do what `rule` is, on what `endpoint` names: a project it may not
/// see is not found (as one that does not exist), and so is a key of one; what it sees and may
/// not do is refused.
async fn allow(
    state: &AppState,
    principal: &Principal,
    rule: &Rule,
    endpoint: &Endpoint<'_>,
) -> Result<(), ApiError> {
    let grants = &principal.grants;
    let visible = grants.visible();
    let refused = || {
        ApiError::AdminForbidden(format!(
            "{} ({}) may not {} {}",
            principal.actor,
            grants.summary(),
            rule.method,
            rule.path
        ))
    };
    if let Endpoint::Key(prefix) | Endpoint::KeyLimits(prefix) = endpoint {
        check_key_prefix(prefix)?;
        let mut projects: Vec<String> = state
            .store
            .live_keys(prefix)
            .await?
            .into_iter()
            .map(|(project, _)| project)
            .collect();
        projects.sort();
        projects.dedup();
        let seen = projects.iter().filter(|p| visible.contains(p)).count();
        if seen == 0 {
            // None it may see: as if there were none, which whoever may change some key is
            // told, and anyone else refused as for any key.
            let changes_keys = grants.allows(rule.need, None)
                || grants
                    .iter()
                    .any(|g| g.role() == crate::access::Role::ProjectAdmin);
            return Err(if changes_keys {
                ApiError::NotFound(format!("no live key starts with {prefix:?}"))
            } else {
                refused()
            });
        }
        if seen < projects.len() {
            return Err(ApiError::Conflict(
                "keys of more than one project start with this prefix: give more of the key".into(),
            ));
        }
        return match projects.iter().all(|p| grants.allows(rule.need, Some(p))) {
            true => Ok(()),
            false => Err(refused()),
        };
    }
    let project = endpoint.project();
    if grants.allows(rule.need, project) {
        return Ok(());
    }
    match project {
        Some(hidden) if !visible.contains(hidden) => {
            Err(StoreError::UnknownProject(hidden.to_owned()).into())
        }
        _ => Err(refused()),
    }
}

/// What a handler is given besides the request: who asked, what it sees, and where it says
/// what it changed.
struct Asked<'a> {
    principal: &'a Principal,
    visible: &'a Visible,
    change: &'a mut Change,
}

/// The answer of an endpoint the caller may use (the CSV export and the audit log, which
/// answer in their own formats, aside).
async fn answer(
    state: &AppState,
    request: Request<Incoming>,
    endpoint: Endpoint<'_>,
    asked: Asked<'_>,
) -> Answer {
    let get = request.method() == Method::GET;
    let Asked {
        principal,
        visible,
        change,
    } = asked;
    match endpoint {
        Endpoint::Plugins => Ok(plugins(state)),
        Endpoint::Config => Ok(config(state)),
        Endpoint::Routes => Ok(routes(state)),
        Endpoint::Invocations => records::list(state, &request, visible).await,
        Endpoint::Invocation(invocation) => records::show(state, invocation, visible).await,
        Endpoint::Usage => records::usage(state, &request, visible).await,
        Endpoint::Projects if get => list_projects(state, visible).await,
        Endpoint::Projects => create_project(state, request, change).await,
        Endpoint::Project(project_id) => show_project(state, project_id).await,
        Endpoint::ProjectKeys(project_id) if get => project_keys(state, project_id).await,
        Endpoint::ProjectKeys(project_id) => create_key(state, request, project_id, change).await,
        Endpoint::ProjectLimits(project_id) => {
            set_project_limits(state, request, project_id, change).await
        }
        Endpoint::ProjectGuards(project_id) if get => project_guards(state, project_id).await,
        Endpoint::ProjectGuards(project_id) => {
            set_project_guards(state, request, project_id, change).await
        }
        Endpoint::ProjectTools(project_id) if get => project_tools(state, project_id).await,
        Endpoint::ProjectTools(project_id) => {
            set_project_tools(state, request, project_id, change).await
        }
        Endpoint::ProjectUsage(project_id) => usage(state, &request, project_id).await,
        Endpoint::ProjectBatches(project_id) => batches(state, &request, project_id).await,
        Endpoint::Key(prefix) => revoke_keys(state, prefix, change).await,
        Endpoint::KeyLimits(prefix) => set_key_limits(state, request, prefix, change).await,
        Endpoint::Tokens if get => tokens::list(state, principal).await,
        Endpoint::Tokens => tokens::create(state, request, principal, change).await,
        Endpoint::Token(prefix) => tokens::revoke(state, prefix, principal, change).await,
        Endpoint::Users if get => users::list(state).await,
        Endpoint::Users => users::add(state, request, principal, change).await,
        Endpoint::User(email) => users::remove(state, &request, email, change).await,
        // Answered by `manage` in their own formats.
        Endpoint::InvocationsCsv | Endpoint::Audit => Err(ApiError::Internal(
            "an endpoint with its own answer reached the JSON ones".into(),
        )),
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

async fn list_projects(state: &AppState, visible: &Visible) -> Answer {
    let projects = state.store.projects().await?;
    let rows: Vec<_> = projects
        .iter()
        .filter(|project| visible.contains(&project.id))
        .map(project_json)
        .collect();
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
    change: &mut Change,
) -> Answer {
    change.before = Some(guards_json(
        project_id,
        &project(state, project_id).await?.guards,
    ));
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
    change.after = Some(guards_json(project_id, &body.guards));
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
    change: &mut Change,
) -> Answer {
    change.before = Some(tools_json(
        project_id,
        &project(state, project_id).await?.tools,
    ));
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
    change.after = Some(tools_json(project_id, &body.tools));
    Ok((StatusCode::OK, tools_json(project_id, &body.tools)))
}

async fn create_project(
    state: &AppState,
    request: Request<Incoming>,
    change: &mut Change,
) -> Answer {
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
    change.target = Some(format!("project:{}", project.id));
    change.after = Some(project_json(&project));
    Ok((StatusCode::CREATED, project_json(&project)))
}

async fn create_key(
    state: &AppState,
    request: Request<Incoming>,
    project_id: &str,
    change: &mut Change,
) -> Answer {
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
    let made = json!({
        "prefix": prefix,
        "projectId": project_id,
        "limits": limits_json(&spec.limits),
        "routes": spec.scope.routes,
        "models": spec.scope.models,
        "tools": spec.scope.tools,
        "expiresAt": spec.scope.expires_at_ms.map(format_time_ms),
    });
    change.target = Some(format!("key:{prefix}"));
    // The key itself is shown once, to its maker: never to the audit log.
    change.after = Some(made.clone());
    let mut answer = made;
    answer["key"] = json!(key);
    Ok((StatusCode::CREATED, answer))
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

async fn revoke_keys(state: &AppState, prefix: &str, change: &mut Change) -> Answer {
    check_key_prefix(prefix)?;
    let before: Vec<_> = state
        .store
        .live_keys(prefix)
        .await?
        .iter()
        .map(|(project, key)| json!({ "projectId": project, "key": key_json(key) }))
        .collect();
    change.before = Some(json!({ "keys": before }));
    let revoked = state.store.revoke_keys(prefix).await?;
    if revoked == 0 {
        return Err(ApiError::NotFound(format!(
            "no live key starts with {prefix:?}"
        )));
    }
    let shown: String = prefix.chars().take(crate::keys::PREFIX_LEN).collect();
    tracing::info!(key = %shown, revoked, "admin API: revoked keys");
    change.after = Some(json!({ "revoked": revoked }));
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
    change: &mut Change,
) -> Answer {
    change.before = Some(json!({
        "projectId": project_id,
        "limits": limits_json(&project(state, project_id).await?.limits),
    }));
    let limits = limits_of(state, request).await?;
    let now = state
        .store
        .update_project_limits(project_id, &LimitUpdate::replace(limits))
        .await?;
    tracing::info!(project = %project_id, "admin API: set the project's limits");
    let after = json!({ "projectId": project_id, "limits": limits_json(&now) });
    change.after = Some(after.clone());
    Ok((StatusCode::OK, after))
}

async fn set_key_limits(
    state: &AppState,
    request: Request<Incoming>,
    prefix: &str,
    change: &mut Change,
) -> Answer {
    check_key_prefix(prefix)?;
    if let [(_, key)] = &state.store.live_keys(prefix).await?[..] {
        change.before = Some(json!({ "prefix": key.prefix, "limits": limits_json(&key.limits) }));
    }
    let limits = limits_of(state, request).await?;
    let (stored, now) = state
        .store
        .update_key_limits(prefix, &LimitUpdate::replace(limits))
        .await?;
    tracing::info!(key = %stored, "admin API: set the key's limits");
    let after = json!({ "prefix": stored, "limits": limits_json(&now) });
    change.target = Some(format!("key:{stored}"));
    change.after = Some(after.clone());
    Ok((StatusCode::OK, after))
}

/// The most batches `GET /admin/projects/{id}/batches` lists.
const MAX_BATCHES_LISTED: u32 = 200;

/// `GET /admin/projects/{id}/batches`: the project's newest batches of both APIs (`limit`, 1 to
/// 200, default 50), with their progress.
async fn batches(state: &AppState, request: &Request<Incoming>, project_id: &str) -> Answer {
    let mut limit = 50;
    for (name, value) in
        url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
    {
        match name.as_ref() {
            "limit" => {
                limit = crate::surfaces::checks::page_limit(&value, MAX_BATCHES_LISTED)
                    .ok_or_else(|| {
                        ApiError::BadRequest(format!(
                            "limit {value:?}: a whole number from 1 to {MAX_BATCHES_LISTED}"
                        ))
                    })?;
            }
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {other:?}: only limit"
                )));
            }
        }
    }
    if state.store.project(project_id).await?.is_none() {
        return Err(StoreError::UnknownProject(project_id.to_owned()).into());
    }
    let batches = state.store.project_batches(project_id, limit).await?;
    let time = |ms: Option<i64>| ms.map(format_time_ms);
    let listed: Vec<serde_json::Value> = batches
        .iter()
        .map(|batch| {
            json!({
                "id": batch.id,
                "api": crate::batch::api(&batch.endpoint),
                "endpoint": batch.endpoint,
                "status": batch.status.as_str(),
                "total": batch.total,
                "completed": batch.completed,
                "failed": batch.failed,
                "createdAt": format_time_ms(batch.created_at_ms),
                "expiresAt": format_time_ms(batch.expires_at_ms),
                "endedAt": time(batch.ended_at_ms()),
            })
        })
        .collect();
    Ok((
        StatusCode::OK,
        json!({ "projectId": project_id, "batches": listed }),
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
