//! A PostgreSQL database of a test's own, on the local server.

use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::{Client, Config, NoTls};
use uuid::Uuid;

use crate::causes::with_causes;

const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database of its own on the local server, dropped with it (also when
/// the test fails).
pub(in crate::store) struct TestDb {
    admin_url: String,
    name: String,
    pub(in crate::store) url: String,
}

impl TestDb {
    /// None (after a loud message) when no server is reachable, unless CI is set.
    pub(in crate::store) async fn create() -> Option<TestDb> {
        let admin_url = std::env::var("GATEWAY_TEST_POSTGRES")
            .ok()
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| DEFAULT_ADMIN_URL.to_owned());
        let admin = match admin(&admin_url).await {
            Ok(admin) => admin,
            Err(e) if std::env::var_os("CI").is_some() => {
                panic!("no PostgreSQL at {admin_url} (CI requires it): {e}")
            }
            Err(e) => {
                eprintln!(
                    "\n*** SKIPPED: no PostgreSQL at {admin_url} ({}) ***\n",
                    with_causes(&e)
                );
                return None;
            }
        };
        let random = Uuid::now_v7().simple().to_string();
        let name = format!("gw_unit_{}_{}", std::process::id(), &random[20..]);
        // Concurrent CREATE DATABASE may find the template busy for a moment.
        let mut attempts = 0;
        while let Err(e) = admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
        {
            attempts += 1;
            assert!(attempts < 20, "CREATE DATABASE {name}: {e}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (base, _) = admin_url.rsplit_once('/').unwrap();
        let url = format!("{base}/{name}");
        Some(TestDb {
            admin_url,
            name,
            url,
        })
    }

    /// A plain connection to the test database, for SQL behind the store's back.
    pub(in crate::store) async fn sql(&self) -> Client {
        let (client, connection) = tokio_postgres::connect(&self.url, NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    }
}

async fn admin(url: &str) -> Result<Client, tokio_postgres::Error> {
    let mut config = Config::from_str(url)?;
    config.connect_timeout(Duration::from_secs(5));
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Inside the test's runtime, which cannot be blocked on: a thread of its own.
        let (url, sql) = (
            self.admin_url.clone(),
            format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async { admin(&url).await?.batch_execute(&sql).await })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop the test database {}", self.name);
        }
    }
}

/// `count(*)` (or any one BIGINT) of `query`.
pub(in crate::store) async fn count(sql: &Client, query: &str) -> i64 {
    sql.query_one(query, &[]).await.unwrap().get(0)
}
