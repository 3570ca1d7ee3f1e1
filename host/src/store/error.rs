//! What the store's calls fail with.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("PostgreSQL: {}", postgres_message(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// No connection could be had from the pool (the server is down, or the URL is wrong).
    #[error("PostgreSQL: {0}")]
    Pool(String),
    #[error(
        "the {backend} database's schema is at version {found}, newer than this gateway knows \
         ({known}): run a gateway at least as new as the one that migrated it"
    )]
    SchemaTooNew {
        backend: &'static str,
        found: i64,
        known: i64,
    },
    #[error("cannot create the database directory {0}: {1}")]
    Directory(String, std::io::Error),
    #[error("no project with id {0}")]
    UnknownProject(String),
    #[error("no live key starts with {0:?}")]
    UnknownKey(String),
    #[error("{count} live keys start with {prefix:?}: give more of the key")]
    AmbiguousKey { prefix: String, count: usize },
    #[error(
        "unsupported database {0:?}: give a SQLite file path, a sqlite:// URL or a postgres:// URL"
    )]
    Unsupported(String),
    /// A blocking database task panicked or was cancelled.
    #[error("database task failed: {0}")]
    Task(String),
    /// A value the store does not keep as given (a name too long or with control characters,
    /// a limit beyond its column): refused before anything is written. `field` is as the CLI
    /// and the admin API name it.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}

/// tokio-postgres's own Display is only the error's kind ("db error"): the
/// server's message, or the cause of an I/O error, is what tells an operator why.
fn postgres_message(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return db.to_string();
    }
    match std::error::Error::source(error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    }
}

impl StoreError {
    /// The database could not be reached (down, unreachable, connection
    /// lost), as opposed to refusing what was asked of it.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Pool(_) => true,
            // Classes 08 (connection exception) and 57 (operator
            // intervention: the server shutting down, the session terminated)
            // are the server going away, not a refusal.
            StoreError::Postgres(error) => match error.as_db_error() {
                None => true,
                Some(db) => matches!(&db.code().code()[..2], "08" | "57"),
            },
            _ => false,
        }
    }
}
