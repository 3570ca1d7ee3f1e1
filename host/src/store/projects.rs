//! Projects and their keys as the store keeps them: what a key may do ([`KeyScope`]) and is
//! held to (its and its project's limits), what a change of limits means ([`LimitUpdate`]),
//! and the names and values the store refuses before writing anything.

use std::sync::Arc;

use super::error::StoreError;
use super::responses::Origin;
use crate::limits::LimitSet;

/// A live project API key as the request path sees it (only its hash is
/// stored): whose it is, what it and its project may do, and the limits both
/// are held to. Cached with the key, so a change of any of these goes through
/// the same invalidation as a revocation.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecord {
    pub project_id: String,
    /// The key's first [`crate::keys::PREFIX_LEN`] characters, as stored: how
    /// operators name it, and the subject of its own limits.
    pub prefix: String,
    /// The key's own limits.
    pub limits: LimitSet,
    /// Its project's limits (shared by all the project's keys).
    pub project_limits: LimitSet,
    pub scope: KeyScope,
    /// Its project's guards (ids of `[guards.ID]`), in the order they run after the
    /// top-level and the route's. Shared, not copied: the flow reads them on every request
    /// and a cache hit clones the record.
    pub project_guards: Arc<[String]>,
    /// Its project's `/mcp` tools: globs of `SERVER__TOOL`, empty for all of them. Held to
    /// together with the key's own ([`KeyRecord::allows_tool`]). Shared like the guards.
    pub project_tools: Arc<[String]>,
}

impl KeyRecord {
    /// Whether the key may list and call the `/mcp` tool `name` (`SERVER__TOOL`): its
    /// project's tools allow it, and so does the key's own scope. The one place both are
    /// decided.
    pub fn allows_tool(&self, name: &str) -> bool {
        tools_allow(&self.project_tools, name) && self.scope.allows_tool(name)
    }
}

/// Whether `globs` (of a key's scope or a project's tools) allow the tool `name`: empty, all.
fn tools_allow(globs: &[String], name: &str) -> bool {
    globs.is_empty() || globs.iter().any(|glob| crate::glob::matches(glob, name))
}

/// A key as operators see it: never the key itself (only its hash is stored).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyInfo {
    pub prefix: String,
    /// Unix ms.
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
    pub limits: LimitSet,
    pub scope: KeyScope,
}

/// What a key may be used for. Empty `routes` and `models`: every route and
/// model. Otherwise a request is in scope when its route is one of `routes`
/// or its `ROUTE/MODEL` one of `models`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyScope {
    /// Route ids (`[providers.ID]`) the key may use with any model.
    pub routes: Vec<String>,
    /// `ROUTE/MODEL` pairs the key may use.
    pub models: Vec<String>,
    /// Unix ms after which the key is refused (401).
    pub expires_at_ms: Option<i64>,
    /// Globs (`*`: any run of characters) of the `/mcp` tools (`SERVER__TOOL`) the key may
    /// list and call; empty: all of them. Routes and models do not limit tools, nor tools
    /// routes.
    pub tools: Vec<String>,
}

impl KeyScope {
    /// Whether a request for `model` on `route` is within the scope.
    pub fn allows(&self, route: &str, model: &str) -> bool {
        (self.routes.is_empty() && self.models.is_empty())
            || self.routes.iter().any(|r| r == route)
            || self
                .models
                .iter()
                .any(|m| m.split_once('/') == Some((route, model)))
    }

    /// Whether a key of this scope may see a kept response made with `origin`: as it may use
    /// that route and model ([`KeyScope::allows`]). One of unknown origin is only for keys
    /// of every route and model.
    pub fn allows_origin(&self, origin: &Origin) -> bool {
        match (&origin.route, &origin.model) {
            (Some(route), Some(model)) => self.allows(route, model),
            _ => self.routes.is_empty() && self.models.is_empty(),
        }
    }

    /// Whether the key's own scope allows the `/mcp` tool `name` (`SERVER__TOOL`). Its
    /// project's tools limit it too: requests ask [`KeyRecord::allows_tool`].
    pub fn allows_tool(&self, name: &str) -> bool {
        tools_allow(&self.tools, name)
    }

    /// When the key expired, if it had by `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Option<i64> {
        self.expires_at_ms.filter(|at| now_ms >= *at)
    }
}

/// The longest name the store keeps (a project's name, a route id or `ROUTE/MODEL` of a key's
/// scope), in bytes: names are shown in tables, logs and answers.
const MAX_NAME_BYTES: usize = 256;

/// The largest tokens-per-minute limit the databases hold (a signed 64-bit column).
pub(super) const MAX_TPM: u64 = i64::MAX as u64;

/// Refuses a name longer than [`MAX_NAME_BYTES`] or with a control character (NUL, which
/// PostgreSQL's text refuses; CR and LF, which would forge lines in the CLI's tables and logs).
pub(super) fn check_name(field: &'static str, name: &str) -> Result<(), StoreError> {
    let refused = |message: String| Err(StoreError::Invalid { field, message });
    if name.len() > MAX_NAME_BYTES {
        return refused(format!(
            "{} bytes is longer than a name may be ({MAX_NAME_BYTES} bytes)",
            name.len()
        ));
    }
    match name.chars().find(|c| c.is_control()) {
        Some(c) => refused(format!(
            "control characters ({}) are not allowed in a name",
            c.escape_unicode()
        )),
        None => Ok(()),
    }
}

/// Refuses a project's guards (ids of `[guards.ID]`) the store would not keep: names that
/// [`check_name`] refuses, an empty id, an id given twice.
pub(super) fn check_guards(guards: &[String]) -> Result<(), StoreError> {
    check_project_list("guards", "a guard id", guards)
}

/// Refuses a project's tools (globs of `SERVER__TOOL`) the store would not keep, as
/// [`check_guards`] refuses guards: an empty glob would match no tool at all.
pub(super) fn check_tools(tools: &[String]) -> Result<(), StoreError> {
    check_project_list("tools", "a tool glob", tools)
}

/// Refuses a list of a project's `field` (each item `what`) that holds a name [`check_name`]
/// refuses, an empty item or an item given twice.
fn check_project_list(field: &'static str, what: &str, items: &[String]) -> Result<(), StoreError> {
    for (n, item) in items.iter().enumerate() {
        check_name(field, item)?;
        if item.is_empty() {
            return Err(StoreError::Invalid {
                field,
                message: format!("{what} is empty"),
            });
        }
        if items[..n].contains(item) {
            return Err(StoreError::Invalid {
                field,
                message: format!("{item:?} is named twice"),
            });
        }
    }
    Ok(())
}

/// What a new key is created with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeySpec {
    pub limits: LimitSet,
    pub scope: KeyScope,
}

impl KeySpec {
    /// Refuses what the store would not keep as given: limits beyond their columns, names
    /// that [`check_name`] refuses.
    pub(super) fn check(&self) -> Result<(), StoreError> {
        LimitUpdate::replace(self.limits).check()?;
        for route in &self.scope.routes {
            check_name("routes", route)?;
        }
        for model in &self.scope.models {
            check_name("models", model)?;
        }
        for tool in &self.scope.tools {
            check_name("tools", tool)?;
        }
        Ok(())
    }
}

/// A change of some limits: `None` leaves a limit as it is, `Some(0)` (or a
/// non-positive budget) clears it, anything else sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitUpdate {
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub daily_budget_usd: Option<f64>,
    pub monthly_budget_usd: Option<f64>,
}

impl LimitUpdate {
    /// The update that makes a subject's limits exactly `limits` (what a
    /// `PUT` of the admin API means).
    pub fn replace(limits: LimitSet) -> LimitUpdate {
        LimitUpdate {
            rpm: Some(limits.rpm.unwrap_or(0)),
            tpm: Some(limits.tpm.unwrap_or(0)),
            daily_budget_usd: Some(limits.daily_budget_usd.unwrap_or(0.0)),
            monthly_budget_usd: Some(limits.monthly_budget_usd.unwrap_or(0.0)),
        }
    }

    /// Refuses a limit the databases cannot hold as given, rather than storing another one.
    pub fn check(&self) -> Result<(), StoreError> {
        match self.tpm {
            Some(tpm) if tpm > MAX_TPM => Err(StoreError::Invalid {
                field: "tpm",
                message: format!("{tpm} is more than the largest limit stored ({MAX_TPM})"),
            }),
            _ => Ok(()),
        }
    }

    /// `limits` with this update applied; cleared limits are `None`, so a
    /// stored set never holds a zero.
    pub fn apply(&self, limits: LimitSet) -> LimitSet {
        let budget = |new: Option<f64>, old: Option<f64>| match new {
            None => old,
            Some(usd) if usd.is_finite() && usd > 0.0 => Some(usd),
            Some(_) => None,
        };
        LimitSet {
            rpm: match self.rpm {
                None => limits.rpm,
                Some(n) => (n > 0).then_some(n),
            },
            tpm: match self.tpm {
                None => limits.tpm,
                Some(n) => (n > 0).then_some(n),
            },
            daily_budget_usd: budget(self.daily_budget_usd, limits.daily_budget_usd),
            monthly_budget_usd: budget(self.monthly_budget_usd, limits.monthly_budget_usd),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    pub id: String,
    pub name: String,
    /// Unix ms.
    pub created_at_ms: i64,
    pub limits: LimitSet,
    /// The guards (ids of `[guards.ID]`) its requests go through after the top-level and
    /// the route's, in order.
    pub guards: Vec<String>,
    /// Globs of the `/mcp` tools (`SERVER__TOOL`) its keys may list and call (each key's own
    /// scope limits it further); empty: all of them.
    pub tools: Vec<String>,
}

/// Which key(s) an operator's argument names: a whole key (by its hash), or
/// the keys whose stored prefix starts with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyMatch {
    Hash([u8; 32]),
    /// A `LIKE` pattern, its `\`, `%` and `_` escaped (with `ESCAPE '\'`).
    Pattern(String),
}

impl KeyMatch {
    pub(crate) fn of(prefix: &str) -> KeyMatch {
        if crate::keys::looks_like_whole_key(prefix) {
            return KeyMatch::Hash(crate::keys::hash_key(prefix));
        }
        // Only the first PREFIX_LEN characters are stored.
        let stored: String = prefix.chars().take(crate::keys::PREFIX_LEN).collect();
        let escaped = stored
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        KeyMatch::Pattern(format!("{escaped}%"))
    }

    /// What an error may say the operator asked for: the prefix as given
    /// (unescaped), never a whole key (a hash stands for one: the caller
    /// knows its prefix, see
    /// [`Store::update_key_limits`](super::Store::update_key_limits)).
    pub(in crate::store) fn shown(&self) -> String {
        match self {
            KeyMatch::Hash(_) => String::new(),
            KeyMatch::Pattern(pattern) => {
                let mut shown = String::with_capacity(pattern.len());
                let mut chars = pattern.strip_suffix('%').unwrap_or(pattern).chars();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => shown.extend(chars.next()),
                        c => shown.push(c),
                    }
                }
                shown
            }
        }
    }
}
