//! What only PostgreSQL has: its URLs and TLS, the pool, the listener, replicas migrating at
//! once, and what its types refuse. The cases both backends share are in `store::tests`.

use std::future::Future;
use std::time::Duration;

use tokio_postgres::config::SslMode;
use uuid::Uuid;

use super::Postgres;
use super::connect::{CONNECT_TIMEOUT, Roots, Tls, Trust, connection, parse_url, tls_for};
use super::invocations::DURATIONS_PER_FETCH;
use super::migrations::MIGRATIONS;
use super::tls::Verify;
use crate::store::report::{self, GroupBy, RecordRange};
use crate::store::tests::test_db::{TestDb, count};
use crate::store::tests::{attempts, guard_outcomes, record};
use crate::store::{
    Attempt, GuardOutcome, GuardStage, GuardVerdictKind, Invocation, KeyMatch, KeySpec, Migrated,
    StoreError, StoredResponse,
};

async fn open(db: &TestDb) -> Postgres {
    let (pg, _) = Postgres::open(&db.url).await.unwrap();
    pg
}

async fn wait_until_listening(pg: &Postgres) {
    let start = std::time::Instant::now();
    while !pg.listening() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the listener did not subscribe"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn migrations_run_once_and_a_newer_schema_is_refused() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let known = MIGRATIONS.len() as i64;
    let (pg, migrated) = Postgres::open(&db.url).await.unwrap();
    assert_eq!(migrated, Migrated { from: 0, to: known });
    pg.create_project("p").await.unwrap();
    drop(pg);

    let (pg, migrated) = Postgres::open(&db.url).await.unwrap();
    assert_eq!(
        migrated,
        Migrated {
            from: known,
            to: known
        }
    );
    assert_eq!(pg.project_count().await.unwrap(), 1);
    drop(pg);

    let sql = db.sql().await;
    assert_eq!(count(&sql, "SELECT count(*) FROM gateway_schema").await, 1);
    sql.execute("UPDATE gateway_schema SET version = $1", &[&(known + 1)])
        .await
        .unwrap();
    let error = Postgres::open(&db.url)
        .await
        .err()
        .expect("a newer schema is refused");
    assert!(
        matches!(
            error,
            StoreError::SchemaTooNew { backend: "PostgreSQL", found, known: k }
                if found == known + 1 && k == known
        ),
        "{error}"
    );
    assert_eq!(
        count(&sql, "SELECT max(version) FROM gateway_schema").await,
        known + 1
    );
    drop(sql);
}

#[tokio::test]
async fn replicas_starting_at_once_migrate_once() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let opened = futures_join(Postgres::open(&db.url), Postgres::open(&db.url)).await;
    let (a, b) = (opened.0.unwrap(), opened.1.unwrap());
    let known = MIGRATIONS.len() as i64;
    let mut froms = [a.1.from, b.1.from];
    froms.sort();
    // Each migration is a transaction of its own: the second replica may
    // take over between two (finding 1..=known), never redo one (its
    // ALTER TABLEs would fail, and so would its open).
    assert_eq!(froms[0], 0, "{froms:?}");
    assert!((1..=known).contains(&froms[1]), "{froms:?}");
    assert_eq!(a.1.to, known);
    assert_eq!(b.1.to, known);
    let sql = db.sql().await;
    assert_eq!(
        count(&sql, "SELECT max(version) FROM gateway_schema").await,
        known
    );
    drop((a, b, sql));
}

async fn futures_join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    tokio::join!(a, b)
}

/// Polls `find_key` until the key is refused; panics after `within`.
async fn refused_within(pg: &Postgres, hash: &[u8; 32], within: Duration) -> Duration {
    let start = std::time::Instant::now();
    while pg.find_key(hash).await.unwrap().is_some() {
        assert!(
            start.elapsed() < within,
            "the revoked key was still accepted after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

#[tokio::test]
async fn the_listener_resubscribes_after_its_connection_is_killed() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let (first, second) = (open(&db).await, open(&db).await);
    wait_until_listening(&first).await;
    wait_until_listening(&second).await;
    let project = first.create_project("p").await.unwrap();
    first
        .insert_key(
            &project.id,
            "gw_0123456789ab",
            &[9; 32],
            &KeySpec::default(),
        )
        .await
        .unwrap();
    assert!(first.find_key(&[9; 32]).await.unwrap().is_some());

    let sql = db.sql().await;
    let killed = count(
        &sql,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name LIKE '%(changes)'",
    )
    .await;
    assert_eq!(killed, 2);
    // It notices (and reads through meanwhile), then waits at least
    // LISTEN_RETRY_MIN before subscribing again.
    let start = std::time::Instant::now();
    while first.listening() {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the kill went unnoticed"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    wait_until_listening(&first).await;
    wait_until_listening(&second).await;
    assert!(first.find_key(&[9; 32]).await.unwrap().is_some());
    assert_eq!(second.revoke(&KeyMatch::Hash([9; 32])).await.unwrap(), 1);
    refused_within(&first, &[9; 32], Duration::from_secs(1)).await;
    drop((first, second, sql));
}

#[tokio::test]
async fn while_not_listening_every_lookup_reads_the_database() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let pg = open(&db).await;
    let project = pg.create_project("p").await.unwrap();
    pg.insert_key(
        &project.id,
        "gw_0123456789ab",
        &[9; 32],
        &KeySpec::default(),
    )
    .await
    .unwrap();
    // Stand in for a listener that is down.
    pg.changes.set_connected(false);
    assert!(pg.find_key(&[9; 32]).await.unwrap().is_some());
    let sql = db.sql().await;
    sql.execute("UPDATE api_keys SET revoked_at = 1", &[])
        .await
        .unwrap();
    assert!(pg.find_key(&[9; 32]).await.unwrap().is_none());
    drop((pg, sql));
}

/// PostgreSQL's TEXT and JSONB cannot hold NUL, which a raw body or an error may: it is
/// stored as U+FFFD rather than failing its whole batch. Attempts and guard outcomes are JSONB,
/// which an operator can query. (The round trip of every field is a case of both backends.)
#[tokio::test]
async fn nul_is_stored_as_a_replacement_character_and_attempts_as_jsonb() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let pg = open(&db).await;
    let full = Invocation {
        attempts: attempts(),
        guards: guard_outcomes(),
        ..Invocation::begun(Uuid::now_v7(), 2_000)
    };
    let with_nul = Invocation {
        request: Some("raw\0body".into()),
        attempts: vec![Attempt {
            route: "r\0".into(),
            target: Some("\0".into()),
            status: None,
            error: Some("cut\0off".into()),
            duration_ms: 1,
        }],
        guards: vec![GuardOutcome {
            guard: "g\0".into(),
            stage: GuardStage::Response,
            verdict: GuardVerdictKind::Rewrite,
            reason: Some("\0".into()),
            changes: [("e\0mail".to_owned(), 1)].into(),
            applied: true,
        }],
        ..Invocation::begun(Uuid::now_v7(), 3_000)
    };
    pg.insert_invocations(&[full.clone(), with_nul.clone()])
        .unwrap();
    assert_eq!(pg.invocation(&full.id).await.unwrap(), Some(full));
    let read_with_nul = pg.invocation(&with_nul.id).await.unwrap().unwrap();
    assert_eq!(read_with_nul.request, Some("raw\u{FFFD}body".into()));
    assert_eq!(
        read_with_nul.attempts,
        [Attempt {
            route: "r\u{FFFD}".into(),
            target: Some("\u{FFFD}".into()),
            status: None,
            error: Some("cut\u{FFFD}off".into()),
            duration_ms: 1,
        }]
    );
    assert_eq!(
        read_with_nul.guards,
        [GuardOutcome {
            guard: "g\u{FFFD}".into(),
            stage: GuardStage::Response,
            verdict: GuardVerdictKind::Rewrite,
            reason: Some("\u{FFFD}".into()),
            changes: [("e\u{FFFD}mail".to_owned(), 1)].into(),
            applied: true,
        }]
    );
    let sql = db.sql().await;
    assert_eq!(
        count(
            &sql,
            r#"SELECT count(*) FROM invocations WHERE attempts @> '[{"route": "fallback"}]'"#
        )
        .await,
        1
    );
    assert_eq!(
        count(
            &sql,
            r#"SELECT count(*) FROM invocations WHERE guards @> '[{"verdict": "deny", "applied": false}]'"#
        )
        .await,
        1
    );
    drop((pg, sql));
}

/// Kept responses are JSON texts, which never hold NUL; a body that did is kept with U+FFFD
/// rather than refused, and an id with NUL (the caller's to give) is looked for without the
/// server refusing the query.
#[tokio::test]
async fn nul_in_a_kept_response_is_stored_as_a_replacement_character() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let pg = open(&db).await;
    let response = StoredResponse {
        id: "resp_0123456789abcdef0123456789abcdef".into(),
        project_id: "p".into(),
        invocation_id: Uuid::now_v7(),
        created_at_ms: 1,
        body: "raw\0body".into(),
        context: "[\0]".into(),
        parent: Some("resp_\0".into()),
        conversation_bytes: 3,
        origin: Default::default(),
    };
    pg.put_response(&response).await.unwrap();
    let read = pg.response("p", &response.id).await.unwrap().unwrap();
    assert_eq!(
        (read.body.as_str(), read.context.as_str()),
        ("raw\u{FFFD}body", "[\u{FFFD}]")
    );
    assert_eq!(read.parent.as_deref(), Some("resp_\u{FFFD}"));
    assert_eq!(pg.response("p", "resp_\0").await.unwrap(), None);
    assert_eq!(pg.conversation("p", "resp_\0").await.unwrap(), None);
    assert_eq!(pg.response_head("p\0", &response.id).await.unwrap(), None);
    assert_eq!(pg.response("p\0", &response.id).await.unwrap(), None);
    assert!(!pg.delete_response("p\0", &response.id).await.unwrap());
    assert!(pg.delete_response("p", &response.id).await.unwrap());
}

#[tokio::test]
async fn killed_pool_connections_are_replaced() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let pg = open(&db).await;
    pg.insert_invocations(&[record(0)]).unwrap();
    let sql = db.sql().await;
    let killed = count(
        &sql,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'gateway'",
    )
    .await;
    assert!(killed >= 1);
    // pg_terminate_backend only signals: wait for the backends to be gone.
    let start = std::time::Instant::now();
    while count(
        &sql,
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'gateway'",
    )
    .await
        > 0
    {
        assert!(start.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A connection the server closed is not handed out again.
    pg.insert_invocations(&[record(1)]).unwrap();
    assert_eq!(count(&sql, "SELECT count(*) FROM invocations").await, 2);
    drop((pg, sql));
}

#[tokio::test]
async fn a_down_server_fails_in_seconds_and_shows_no_password() {
    let start = std::time::Instant::now();
    // Nothing listens on port 1.
    let error = Postgres::open("postgres://u:secret-password@127.0.0.1:1/db")
        .await
        .err()
        .expect("no server");
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    let text = error.to_string();
    assert!(!text.contains("secret-password"), "{text}");
    assert!(text.contains("connect"), "{text}");

    let error = Postgres::open("postgres://u:secret-password@127.0.0.1:1/db?sslmode=bogus")
        .await
        .err()
        .expect("a bad option");
    assert!(!error.to_string().contains("secret-password"), "{error}");
}

#[test]
fn urls_accept_libpq_options() {
    let (config, trust) =
        parse_url("postgresql://u:p@db.example:6543/gw?sslmode=verify-full&connect_timeout=3")
            .unwrap();
    assert_eq!(config.get_ssl_mode(), SslMode::Require);
    assert_eq!(trust.verify, Verify::Full);
    assert_eq!(trust.roots, Roots::Platform);
    assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(3)));
    assert_eq!(config.get_dbname(), Some("gw"));
    assert_eq!(config.get_ports(), [6543]);
    assert_eq!(config.get_password(), Some(&b"p"[..]));
    let (_, trust) = parse_url("postgres://u@h/db?sslmode=verify-ca").unwrap();
    assert_eq!(trust.verify, Verify::Chain);
    let (config, trust) = parse_url("postgres://u@h/db").unwrap();
    assert_eq!(config.get_ssl_mode(), SslMode::Prefer);
    assert_eq!(trust.verify, Verify::Nothing);
    // sslrootcert: a file (percent-decoded), or `system`; `require` with a file checks
    // the chain, as libpq does.
    let (config, trust) =
        parse_url("postgres://u@h/db?sslrootcert=/etc/my%20ca.pem&sslmode=require").unwrap();
    assert_eq!(config.get_ssl_mode(), SslMode::Require);
    assert_eq!(
        trust,
        Trust {
            verify: Verify::Chain,
            roots: Roots::File("/etc/my ca.pem".into())
        }
    );
    let (_, trust) = parse_url("postgres://u@h/db?sslmode=verify-full&sslrootcert=system").unwrap();
    assert_eq!(trust.roots, Roots::Platform);
    assert_eq!(trust.verify, Verify::Full);
    let (_, trust) = parse_url("postgres://u@h/db?sslrootcert=/ca.pem").unwrap();
    assert_eq!(trust.verify, Verify::Nothing, "prefer checks nothing");
    assert_eq!(config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
    let (config, _) = parse_url("postgres://u:hidden@h/db").unwrap();
    assert!(!format!("{config:?}").contains("hidden"));
}

#[test]
fn tls_is_set_up_unless_disabled() {
    let tls = |url: &str| {
        let (config, trust) = parse_url(url).unwrap();
        tls_for(&config, &trust).unwrap()
    };
    assert!(matches!(
        tls("postgres://u@h/db?sslmode=disable"),
        Tls::Plain
    ));
    for mode in ["prefer", "require", "verify-ca", "verify-full"] {
        let url = format!("postgres://u@h/db?sslmode={mode}");
        assert!(matches!(tls(&url), Tls::Rustls(_)), "{mode}");
    }
}

/// Against this machine's server when it offers TLS (Debian's self-signed
/// `localhost` certificate): `require` encrypts, `verify-full` refuses a
/// certificate that does not name the host.
#[tokio::test]
async fn tls_modes_against_the_local_server() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let sql = db.sql().await;
    let offered: String = sql.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    if offered != "on" {
        eprintln!("the local server offers no TLS: only the plain connection is tested");
        drop(sql);
        return;
    }
    let (pg, _) = Postgres::open(&format!("{}?sslmode=require", db.url))
        .await
        .unwrap();
    let encrypted = pg
        .run(|pool| async move {
            let client = connection(&pool).await?;
            let row = client
                .query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .await?;
            Ok(row.try_get::<_, bool>(0)?)
        })
        .await
        .unwrap();
    assert!(encrypted);
    drop(pg);
    let refused = Postgres::open(&format!(
        "{}?sslmode=verify-full",
        db.url.replace("localhost", "127.0.0.1")
    ))
    .await
    .err()
    .expect("a certificate for localhost is refused for 127.0.0.1");
    assert!(refused.to_string().contains("certificate"), "{refused}");

    // sslrootcert: the server's own (self-signed) certificate as the root.
    let cert_file: String = sql
        .query_one("SHOW ssl_cert_file", &[])
        .await
        .unwrap()
        .get(0);
    if std::fs::read(&cert_file).is_err() {
        eprintln!("cannot read the server's certificate {cert_file}: sslrootcert untested");
        drop(sql);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("server root.pem");
    std::fs::copy(&cert_file, &root).unwrap();
    let with_root = |url: &str, mode: &str, root: &std::path::Path| {
        let root = root.display().to_string().replace(' ', "%20");
        format!("{url}?sslmode={mode}&sslrootcert={root}")
    };
    let by_ip = db.url.replace("localhost", "127.0.0.1");
    let by_name = by_ip.replace("127.0.0.1", "localhost");
    for (url, mode) in [
        (&by_name, "verify-full"),
        (&by_ip, "verify-ca"),
        (&by_ip, "require"),
    ] {
        let opened = Postgres::open(&with_root(url, mode, &root)).await;
        assert!(opened.is_ok(), "{mode}: {:?}", opened.err());
    }
    let refused = Postgres::open(&with_root(&by_ip, "verify-full", &root))
        .await
        .err()
        .expect("the root holds, the name does not");
    assert!(refused.to_string().contains("certificate"), "{refused}");
    // A root that signed nothing of the server's: refused even with `require`.
    let other = dir.path().join("other.pem");
    std::fs::write(&other, OTHER_ROOT).unwrap();
    for mode in ["require", "verify-ca", "verify-full"] {
        let refused = Postgres::open(&with_root(&by_name, mode, &other))
            .await
            .err()
            .unwrap_or_else(|| panic!("{mode}: a root that signed nothing"));
        assert!(
            refused.to_string().contains("certificate"),
            "{mode}: {refused}"
        );
    }
    let missing = Postgres::open(&with_root(
        &by_name,
        "verify-full",
        &dir.path().join("none"),
    ))
    .await
    .err()
    .expect("a missing root file");
    assert!(missing.to_string().contains("sslrootcert"), "{missing}");
    drop(sql);
}

/// A CA certificate whose key was thrown away: it signed nothing.
const OTHER_ROOT: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBvjCCAWWgAwIBAgIUNE9rFZ8F0tOzPAmzqlrxFSXe7WEwCgYIKoZIzj0EAwIw\n\
NDEyMDAGA1UEAwwpZ2F0ZXdheSB0ZXN0czogYSByb290IHRoYXQgc2lnbmVkIG5v\n\
dGhpbmcwIBcNMjYxMTI0MjMyOTU2WhgPMjEyNjEwMzEyMzI5NTZaMDQxMjAwBgNV\n\
BAMMKWdhdGV3YXkgdGVzdHM6IGEgcm9vdCB0aGF0IHNpZ25lZCBub3RoaW5nMFkw\n\
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAESSVquUfcVRHcYAsrbiklJYdt+2QqXdMv\n\
XZFoIYknTKFD9zQQoFYHmPxkA70RvS2HxKW9w5jN9UuUBar7kWSWP6NTMFEwHQYD\n\
VR0OBBYEFFqLPJpO/uiFGumJGRdFIpaiJ3HSMB8GA1UdIwQYMBaAFFqLPJpO/uiF\n\
GumJGRdFIpaiJ3HSMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIg\n\
TQkY0UT19xhGkOrej0G+mNZpcg3+bm0UgGVKtUtP+dwCIHQRwB0Jg/kQRAO7/HOj\n\
nKr0vGGrjVCqMvuuJBV/j+aG\n\
-----END CERTIFICATE-----\n";

#[tokio::test]
async fn usage_reads_exactly_what_sqlite_reads_for_the_same_records() {
    use crate::store::report::fixture;
    let Some(db) = TestDb::create().await else {
        return;
    };
    let pg = open(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let (sqlite, _) = crate::store::sqlite::Sqlite::open(&dir.path().join("g.db")).unwrap();
    let records = fixture::records();
    pg.insert_invocations(&records).unwrap();
    sqlite.insert_invocations(&records).unwrap();
    for (range, by) in fixture::cases() {
        let from_pg = pg.usage(&range, &by).await.unwrap();
        assert_eq!(
            from_pg,
            sqlite.usage(&range, &by).unwrap(),
            "{range:?} by {by:?}"
        );
    }
    // A range of more durations than one fetch of the portal.
    let many: Vec<Invocation> = (0..(DURATIONS_PER_FETCH as i64 + 7))
        .map(|n| Invocation {
            model: Some(if n % 2 == 0 { "even" } else { "odd" }.into()),
            duration_ms: n,
            ..Invocation::begun(Uuid::now_v7(), 1)
        })
        .collect();
    pg.insert_invocations(&many).unwrap();
    let range = RecordRange {
        until_ms: Some(2),
        ..RecordRange::default()
    };
    let rows = pg.usage(&range, &[GroupBy::Model]).await.unwrap();
    let n = many.len() as i64;
    let picked: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.group[0].clone(),
                r.requests,
                r.p50_duration_ms,
                r.p95_duration_ms,
            )
        })
        .collect();
    // Evens 0, 2, ..., 10006 (5004 of them), odds 1, 3, ..., 10005 (5003).
    let (evens, odds) = ((n + 1) / 2, n / 2);
    let rank =
        |percent: u64, count: i64| report::nearest_rank(percent, count as u64).unwrap() as i64;
    assert_eq!(
        picked,
        [
            (
                Some("even".to_owned()),
                evens as u64,
                Some(2 * (rank(50, evens) - 1)),
                Some(2 * (rank(95, evens) - 1))
            ),
            (
                Some("odd".to_owned()),
                odds as u64,
                Some(2 * rank(50, odds) - 1),
                Some(2 * rank(95, odds) - 1)
            ),
        ]
    );
}
