//! Persistent state: projects, API keys, invocation records.
//!
//! [`Store`] is the one interface the rest of the gateway uses; SQLite is its
//! embedded backend (a PostgreSQL backend joins it as another variant).
//! Invocation records are written off the request path by [`writer`].

mod key_cache;
pub mod retention;
mod sqlite;
pub mod writer;

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use uuid::Uuid;

pub use writer::InvocationLog;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot create the database directory {0}: {1}")]
    Directory(String, std::io::Error),
    #[error("no project with id {0}")]
    UnknownProject(String),
    #[error("unsupported database {0:?}: give a SQLite file path or a sqlite:// URL")]
    Unsupported(String),
    /// A blocking database task panicked or was cancelled.
    #[error("database task failed: {0}")]
    Task(String),
}

/// A project's API key as stored: only its hash is kept.
#[derive(Debug, Clone)]
pub struct KeyRecord {
    pub project_id: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Project {
    pub id: String,
    pub name: String,
}

/// Token counts of one call, normalized across providers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_creation_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvocationStatus {
    Success,
    Error,
    /// The caller went away before the answer was complete.
    Cancelled,
}

impl InvocationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InvocationStatus::Success => "success",
            InvocationStatus::Error => "error",
            InvocationStatus::Cancelled => "cancelled",
        }
    }

    fn parse(text: &str) -> InvocationStatus {
        match text {
            "success" => InvocationStatus::Success,
            "cancelled" => InvocationStatus::Cancelled,
            _ => InvocationStatus::Error,
        }
    }
}

/// One call through the gateway, successful or not.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub id: Uuid,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub route: Option<String>,
    pub plugin: Option<String>,
    pub model: Option<String>,
    /// "text", "chat" or "embeddings".
    pub kind: Option<String>,
    pub stream: bool,
    pub status: InvocationStatus,
    pub http_status: u16,
    pub error: Option<String>,
    pub provider_error: Option<String>,
    pub usage: Option<TokenUsage>,
    pub cost_usd: Option<f64>,
    /// Unix time in milliseconds.
    pub created_at_ms: i64,
    pub duration_ms: i64,
    /// The request body as received (JSON text, or the raw text when it was not JSON).
    pub request: Option<String>,
    /// The response body sent (for streams: the assembled final response).
    pub response: Option<String>,
}

impl Invocation {
    /// The record as `GET /invocations/{id}` and `gateway invocations show` present it.
    pub fn to_json(&self) -> serde_json::Value {
        let embed = |text: &Option<String>| match text {
            None => serde_json::Value::Null,
            Some(text) => serde_json::from_str(text)
                .unwrap_or_else(|_| serde_json::Value::String(text.clone())),
        };
        serde_json::json!({
            "id": self.id.to_string(),
            "projectId": self.project_id,
            "userId": self.user_id,
            "route": self.route,
            "plugin": self.plugin,
            "model": self.model,
            "type": self.kind,
            "stream": self.stream,
            "status": self.status.as_str(),
            "httpStatus": self.http_status,
            "error": self.error,
            "providerError": self.provider_error,
            "usage": self.usage,
            "usageCost": self.cost_usd,
            "createdAt": format_time_ms(self.created_at_ms),
            "durationMs": self.duration_ms,
            "request": embed(&self.request),
            "response": embed(&self.response),
        })
    }
}

pub fn format_time_ms(ms: i64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(time).to_string()
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[derive(Debug, Clone, Default)]
pub struct InvocationFilter {
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub limit: u32,
}

/// The gateway's state store.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
}

#[derive(Clone)]
enum Backend {
    Sqlite(Arc<sqlite::Sqlite>),
}

impl Store {
    /// Opens the database named by the config's `database`: a SQLite file
    /// path or `sqlite://PATH`.
    pub fn open(database: &str) -> Result<Store, StoreError> {
        let path = match database.split_once("://") {
            None => database,
            Some(("sqlite", path)) => path,
            Some(_) => return Err(StoreError::Unsupported(database.to_owned())),
        };
        Store::open_sqlite(Path::new(path))
    }

    /// Opens (creating and migrating as needed) the SQLite database at `path`.
    pub fn open_sqlite(path: &Path) -> Result<Store, StoreError> {
        Ok(Store {
            backend: Backend::Sqlite(Arc::new(sqlite::Sqlite::open(path)?)),
        })
    }

    pub async fn create_project(&self, name: &str) -> Result<Project, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.create_project(name),
        }
    }

    pub async fn project_count(&self) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.project_count(),
        }
    }

    /// Creates a key for `project_id` and returns it; only its hash is stored.
    pub async fn create_key(&self, project_id: &str) -> Result<String, StoreError> {
        let key = crate::auth::generate_key();
        match &self.backend {
            Backend::Sqlite(db) => db.insert_key(
                project_id,
                crate::auth::key_prefix(&key),
                &crate::auth::hash_key(&key),
            )?,
        }
        Ok(key)
    }

    /// Revokes the keys matching `prefix` (or the one whole key); returns how many.
    pub async fn revoke_keys(&self, prefix: &str) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => {
                if crate::auth::looks_like_whole_key(prefix) {
                    db.revoke_by_hash(&crate::auth::hash_key(prefix))
                } else {
                    // Only the first PREFIX_LEN characters are stored.
                    let stored: String = prefix.chars().take(crate::auth::PREFIX_LEN).collect();
                    db.revoke_by_prefix(&stored)
                }
            }
        }
    }

    /// The live (not revoked) key with this hash.
    pub async fn find_key(&self, hash: &[u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.find_key(hash),
        }
    }

    /// Commits `batch` in one transaction; blocking, for the writer thread.
    pub fn insert_invocations(&self, batch: &[Invocation]) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.insert_invocations(batch),
        }
    }

    /// Deletes at most `limit` invocation records created before `cutoff_ms`
    /// (Unix ms); returns how many. Blocking, for [`retention`].
    pub fn delete_invocations_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.delete_invocations_before(cutoff_ms, limit),
        }
    }

    pub async fn invocation(&self, id: &Uuid) -> Result<Option<Invocation>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.invocation(id),
        }
    }

    pub async fn list_invocations(
        &self,
        filter: &InvocationFilter,
    ) -> Result<Vec<Invocation>, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.list_invocations(filter),
        }
    }
}
