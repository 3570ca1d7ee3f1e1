//! PostgreSQL databases for tests: each test (or each gateway, in the suite's PostgreSQL mode)
//! gets a fresh database of its own, dropped when it is dropped.
//!
//! The admin URL is `GATEWAY_TEST_POSTGRES` (the suite's PostgreSQL mode: every gateway then runs
//! on PostgreSQL); for the tests that need PostgreSQL whatever the mode, else
//! `GATEWAY_TEST_POSTGRES_SERVER` (how `cargo xtask test` names the server to its SQLite pass),
//! else [`DEFAULT_ADMIN_URL`].

use std::io::Write;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// The environment variable that switches the whole suite to PostgreSQL: an admin URL.
pub const POSTGRES_ENV: &str = "GATEWAY_TEST_POSTGRES";
/// Where the PostgreSQL-only tests look outside the suite's PostgreSQL mode.
pub const SERVER_ENV: &str = "GATEWAY_TEST_POSTGRES_SERVER";
/// Where the PostgreSQL-only tests look when neither variable is set.
pub const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A reachable server answers well within this; an unreachable one must not stall a test.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

static NEXT: AtomicU64 = AtomicU64::new(0);

/// `GATEWAY_TEST_POSTGRES` when set (non-empty): the suite runs every gateway on PostgreSQL.
pub fn suite_admin_url() -> Option<String> {
    std::env::var(POSTGRES_ENV)
        .ok()
        .filter(|url| !url.is_empty())
}

/// One database of its own, `DROP DATABASE … WITH (FORCE)` on drop.
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
    admin_url: String,
    url: String,
}

impl TestDatabase {
    /// A fresh database for a test that needs PostgreSQL. When none is reachable the test
    /// should skip: this prints `SKIPPED: no PostgreSQL at …` and returns `None`, unless `CI` is
    /// set (CI has PostgreSQL, so its absence there is a failure, not a skip).
    pub fn create() -> Option<TestDatabase> {
        let admin_url = suite_admin_url()
            .or_else(|| std::env::var(SERVER_ENV).ok().filter(|url| !url.is_empty()))
            .unwrap_or_else(|| DEFAULT_ADMIN_URL.to_owned());
        match TestDatabase::try_create(&admin_url) {
            Ok(db) => Some(db),
            Err(error) if std::env::var_os("CI").is_some() => {
                panic!("no PostgreSQL at {admin_url} (CI requires it): {error}")
            }
            Err(error) => {
                let message = format!(
                    "\n*** SKIPPED: no PostgreSQL at {admin_url} ({error}); \
                     set {POSTGRES_ENV} to an admin URL to run this test ***\n"
                );
                // Straight to the process's stderr: the test harness captures what a test
                // writes through `std::io`, which would hide the skip behind an `ok`.
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/stderr")
                    .and_then(|mut stderr| stderr.write_all(message.as_bytes()));
                if written.is_err() {
                    eprintln!("{message}");
                }
                None
            }
        }
    }

    /// A fresh database on the server of `admin_url`; panics when it cannot be made (the suite's
    /// PostgreSQL mode was asked for, so a missing server is a failure).
    pub fn create_in(admin_url: &str) -> TestDatabase {
        TestDatabase::try_create(admin_url)
            .unwrap_or_else(|e| panic!("cannot create a test database at {admin_url}: {e}"))
    }

    fn try_create(admin_url: &str) -> Result<TestDatabase, tokio_postgres::Error> {
        let random = uuid::Uuid::now_v7().simple().to_string();
        let name = format!(
            "gw_test_{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            &random[random.len() - 8..]
        );
        // Concurrent CREATE DATABASE may briefly find the template busy: try again.
        let mut attempts = 0;
        loop {
            match simple_query(admin_url, &format!("CREATE DATABASE {name}")) {
                Ok(_) => break,
                Err(e) if attempts < 10 && e.as_db_error().is_some() => {
                    attempts += 1;
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(TestDatabase {
            url: with_database(admin_url, &name),
            admin_url: admin_url.to_owned(),
            name,
        })
    }

    /// The database's URL, for a gateway's `database`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL with another host and port (a proxy in front of the server).
    pub fn url_via(&self, addr: std::net::SocketAddr) -> String {
        let (scheme, rest) = self.url.split_once("://").expect("a URL");
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let user = authority
            .rsplit_once('@')
            .map(|(user, _)| format!("{user}@"))
            .unwrap_or_default();
        format!("{scheme}://{user}{addr}{path}")
    }

    /// Runs SQL (one or several statements); panics on an error.
    pub fn execute(&self, sql: &str) {
        simple_query(&self.url, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// The rows of a query, each column as text (`None` for NULL).
    pub fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        simple_query(&self.url, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The one value of a one-row, one-column query.
    pub fn query_one(&self, sql: &str) -> String {
        let rows = self.query(sql);
        rows.first()
            .and_then(|row| row.first().cloned().flatten())
            .unwrap_or_else(|| panic!("{sql}: no value ({rows:?})"))
    }

    /// Every row of every table of the public schema as JSON text: what the database stores, for
    /// tests that check a secret is stored nowhere.
    pub fn dump_text(&self) -> String {
        dump_text(&self.url)
    }

    /// Ends every other session on this database (`pg_terminate_backend`): what a gateway sees
    /// when the server restarts or a network link drops. Returns how many were ended.
    pub fn terminate_backends(&self) -> usize {
        let sql = format!(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = '{}' AND pid <> pg_backend_pid()",
            self.name
        );
        // From the admin database, so this session is not among the ones it counts.
        simple_query(&self.admin_url, &sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .first()
            .and_then(|row| row.first().cloned().flatten())
            .and_then(|count| count.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        if let Err(e) = simple_query(&self.admin_url, &sql) {
            eprintln!("warning: cannot drop test database {}: {e}", self.name);
        }
    }
}

/// The first value of `sql`'s first row on the database at `url` (`NULL` as empty), or why there
/// is none.
pub fn query_one(url: &str, sql: &str) -> Result<String, String> {
    let rows = simple_query(url, sql).map_err(|e| e.to_string())?;
    rows.first()
        .and_then(|row| row.first().cloned())
        .map(Option::unwrap_or_default)
        .ok_or_else(|| format!("{sql}: no row"))
}

/// Every row of every table of the public schema of the database at `url`, as JSON text.
pub fn dump_text(url: &str) -> String {
    let query = |sql: &str| simple_query(url, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let tables = query(
        "SELECT quote_ident(table_name) FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1",
    );
    let mut text = String::new();
    for table in tables
        .into_iter()
        .filter_map(|row| row.into_iter().next().flatten())
    {
        for row in query(&format!("SELECT row_to_json(t)::text FROM {table} t")) {
            text.push_str(&table);
            text.push(' ');
            text.push_str(row.first().cloned().flatten().as_deref().unwrap_or(""));
            text.push('\n');
        }
    }
    text
}

/// `admin_url` naming database `name` instead (its query string kept).
fn with_database(admin_url: &str, name: &str) -> String {
    let (scheme, rest) = admin_url
        .split_once("://")
        .unwrap_or_else(|| panic!("not a URL: {admin_url}"));
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, format!("?{query}")),
        None => (rest, String::new()),
    };
    let authority = before_query.split('/').next().unwrap_or(before_query);
    format!("{scheme}://{authority}/{name}{query}")
}

/// Runs `sql` on a connection of its own, on a runtime of its own: tests call this from plain
/// threads, and a connection per call keeps them independent of one another.
pub(crate) fn simple_query(
    url: &str,
    sql: &str,
) -> Result<Vec<Vec<Option<String>>>, tokio_postgres::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let client = connect(url).await?;
        let messages = client.simple_query(sql).await?;
        Ok(messages
            .into_iter()
            .filter_map(|message| match message {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_owned))
                        .collect(),
                ),
                _ => None,
            })
            .collect())
    })
}

async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let mut config = tokio_postgres::Config::from_str(url)?;
    config.connect_timeout(CONNECT_TIMEOUT);
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        // Ends with the client; an error then is the server closing, nothing to report.
        let _ = connection.await;
    });
    Ok(client)
}
