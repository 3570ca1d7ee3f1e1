//! Several replicas on one database, and the promise that an answered request's record is never
//! lost: to a `kill -9`, to the database's connections being killed, to the database being
//! unreachable for a while. Each test runs on a fresh PostgreSQL database of its own (skipped,
//! loudly, when no PostgreSQL is reachable, unless `CI` is set); the `kill -9` test also runs on
//! SQLite.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gateway_test_support::postgres::query_one;
use gateway_test_support::refused::refused_serve;
use gateway_test_support::{Gateway, Route, TcpProxy, TestDatabase, assert_ok, text_request};

/// How many client threads load the gateways.
const CLIENTS: usize = 4;
/// How long a record may take to land after the gateway had it (a restart's replay included).
const RECORD_DEADLINE: Duration = Duration::from_secs(60);

fn echo_gateway(db: &TestDatabase) -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
        .database(db)
        .start()
}

// ------------------------------------------------------------------ keys across replicas

/// An MCP session begun on one replica serves on the other: its id is signed with a key made
/// from the caller's API key, so any replica checks it without a store. The tool call made
/// through the second replica is recorded once, in the shared database.
#[test]
fn an_mcp_session_begun_on_one_replica_serves_on_the_other() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let replica = || {
        Gateway::builder()
            .route(Route::echo("demo"))
            .tool_server("t", "test-tool", "")
            .database(&db)
            .start()
    };
    let (a, b) = (replica(), replica());
    let key = a
        .cli(&["key", "create", &a.project_id])
        .checked("key create")
        .last_line();
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "replicas", "version": "1"}}});
    let json = [("Content-Type", "application/json")];
    let r = a.request(
        "POST",
        "/mcp",
        Some(&key),
        &json,
        initialize.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let session = r.header("mcp-session-id").expect("a session id").to_owned();
    let in_session = |gw: &Gateway, body: serde_json::Value| {
        let headers = [
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        gw.request(
            "POST",
            "/mcp",
            Some(&key),
            &headers,
            body.to_string().as_bytes(),
        )
    };
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(in_session(&a, initialized).status, 202);
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "t__reverse", "arguments": {"text": "replica"}}});
    let r = in_session(&b, call);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let answer: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
    assert_eq!(
        answer["result"]["content"][0]["text"], "acilper",
        "{answer}"
    );
    let id = r.header("x-invocation-id").expect("an invocation id");
    // Written by b, read through a: one database.
    let record = a.wait_for_record(id, |record| record["status"] == "success");
    assert_eq!(
        (record["type"].as_str(), record["route"].as_str()),
        (Some("tool"), Some("t"))
    );
}

#[test]
fn a_key_created_through_one_replica_is_served_by_both_and_its_revocation_reaches_both_within_1s() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let a = echo_gateway(&db);
    let b = echo_gateway(&db);
    let key = a
        .cli(&["key", "create", &a.project_id])
        .checked("key create")
        .last_line();
    let body = text_request(&a.project_id, "demo", "echo", "hi");
    for gw in [&a, &b] {
        assert_ok(&gw.post_as("/completions", Some(&key), &body));
    }

    let prefix: String = key.chars().take(20).collect();
    let revoked_at = Instant::now();
    a.cli(&["key", "revoke", &prefix]).checked("key revoke");
    let mut refused = [None, None];
    while refused.iter().any(Option::is_none) && revoked_at.elapsed() < Duration::from_secs(10) {
        for (gw, refused) in [&a, &b].into_iter().zip(refused.iter_mut()) {
            if refused.is_none() && gw.post_as("/completions", Some(&key), &body).status == 401 {
                *refused = Some(revoked_at.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "revoked key refused after: A {:?}, B {:?}",
        refused[0], refused[1]
    );
    for (name, refused) in ["A", "B"].into_iter().zip(refused) {
        let after = refused.unwrap_or_else(|| panic!("replica {name} still serves a revoked key"));
        assert!(
            after < Duration::from_secs(1),
            "replica {name} refused the revoked key only after {after:?}"
        );
    }
    // The other keys of the database still work on both.
    assert_ok(&b.post(
        "/completions",
        &text_request(&b.project_id, "demo", "echo", "x"),
    ));
    assert_ok(&a.post(
        "/completions",
        &text_request(&a.project_id, "demo", "echo", "x"),
    ));
}

// ------------------------------------------------------------------ no answered record lost

#[test]
fn kill_9_of_a_replica_during_load_loses_no_answered_record_postgres() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let a = echo_gateway(&db);
    let mut b = echo_gateway(&db);
    let load = Load::start(&[target(&a), target(&b)]);
    std::thread::sleep(Duration::from_millis(1500));
    b.kill();
    std::thread::sleep(Duration::from_millis(500));
    let tally = load.stop();
    b.restart();
    assert_every_answer_recorded(&a, &tally, "kill -9 (PostgreSQL, 2 replicas)");
}

/// On the default store: SQLite (unless the suite runs with `GATEWAY_TEST_POSTGRES`, then on a
/// database of its own, one replica).
#[test]
fn kill_9_during_load_loses_no_answered_record_sqlite() {
    let mut gw = Gateway::builder().route(Route::echo("demo")).start();
    let load = Load::start(&[target(&gw)]);
    std::thread::sleep(Duration::from_millis(1500));
    gw.kill();
    let tally = load.stop();
    gw.restart();
    let store = if gw.on_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    assert_every_answer_recorded(&gw, &tally, &format!("kill -9 ({store}, 1 replica)"));
}

#[test]
fn the_writers_connections_killed_during_load_lose_nothing_and_it_keeps_answering() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let gw = echo_gateway(&db);
    let load = Load::start(&[target(&gw)]);
    std::thread::sleep(Duration::from_millis(500));
    let mut terminated = 0;
    for _ in 0..5 {
        terminated += db.terminate_backends();
        std::thread::sleep(Duration::from_millis(300));
    }
    let after_last = load.answered_count();
    std::thread::sleep(Duration::from_millis(1000));
    let tally = load.stop();
    println!("pg_terminate_backend ended {terminated} sessions");
    assert!(terminated > 0, "the gateway had no session to end");
    assert!(
        tally.answered.len() > after_last,
        "no answer after the connections were killed"
    );
    tally.assert_all_ok(&gw, "connections killed");
    assert_every_answer_recorded(&gw, &tally, "pg_terminate_backend");
}

#[test]
fn postgres_unreachable_for_5s_the_gateway_keeps_answering_and_loses_nothing() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let proxy = TcpProxy::start(postgres_addr(&db));
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .database_via(&db, proxy.addr())
        .start();
    let load = Load::start(&[target(&gw)]);
    std::thread::sleep(Duration::from_millis(500));
    proxy.down();
    let down_at = load.answered_count();
    std::thread::sleep(Duration::from_secs(5));
    let during = load.answered_count() - down_at;
    proxy.up();
    std::thread::sleep(Duration::from_millis(500));
    let tally = load.stop();
    println!("answered while PostgreSQL was unreachable: {during}");
    assert!(
        during > 0,
        "nothing answered while PostgreSQL was unreachable"
    );
    tally.assert_all_ok(&gw, "PostgreSQL unreachable");
    assert_every_answer_recorded(&gw, &tally, "PostgreSQL unreachable for 5 s");
}

// ------------------------------------------------------------------ migrations

#[test]
fn migrate_prints_the_version_is_idempotent_and_a_newer_schema_is_refused() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let mut gw = echo_gateway(&db);
    let version = db.query_one("SELECT version FROM gateway_schema");
    let first = gw.cli(&["migrate"]).checked("migrate");
    let second = gw.cli(&["migrate"]).checked("migrate");
    for out in [&first, &second] {
        assert!(
            out.stdout.contains(&version),
            "`migrate` does not print version {version}: {}",
            out.stdout
        );
    }
    assert_eq!(
        first.stdout, second.stdout,
        "a second `migrate` changed something"
    );
    assert_eq!(db.query_one("SELECT version FROM gateway_schema"), version);
    assert_eq!(db.query_one("SELECT count(*) FROM gateway_schema"), "1");

    gw.shutdown();
    db.execute("UPDATE gateway_schema SET version = version + 1");
    for args in [
        &["migrate"][..],
        &["project", "create", "x"],
        &["key", "create", &gw.project_id],
    ] {
        let out = gw.cli(args);
        assert!(
            !out.status.success(),
            "`gateway {}` succeeded",
            args.join(" ")
        );
        assert!(
            out.stderr.contains("newer than this gateway knows"),
            "`gateway {}`: {}",
            args.join(" "),
            out.stderr
        );
    }
    let stderr = refused_serve(gw.config_path(), gw.dir());
    assert!(stderr.contains("newer than this gateway knows"), "{stderr}");
}

// ------------------------------------------------------------------ load and its tally

/// Where a client thread sends: the gateway's address, a key, a request body.
#[derive(Clone)]
struct Target {
    addr: SocketAddr,
    key: String,
    body: String,
}

fn target(gw: &Gateway) -> Target {
    Target {
        addr: gw.addr,
        key: gw.key.clone(),
        body: text_request(&gw.project_id, "demo", "echo", "load").to_string(),
    }
}

/// The PostgreSQL server's address, from the test database's URL.
fn postgres_addr(db: &TestDatabase) -> SocketAddr {
    let rest = db.url().split_once("://").expect("a URL").1;
    let authority = rest.split('/').next().expect("an authority");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host_port = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    };
    let host_port = host_port.replace("localhost", "127.0.0.1");
    host_port
        .parse()
        .unwrap_or_else(|e| panic!("PostgreSQL at {host_port}: {e}"))
}

/// Client threads sending requests round robin to their targets until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    answered: Arc<std::sync::atomic::AtomicUsize>,
    threads: Vec<JoinHandle<Tally>>,
}

/// What the clients saw.
#[derive(Default)]
struct Tally {
    /// The invocation id of every answer (whatever its status).
    answered: Vec<String>,
    /// Answers other than 200: status and body.
    not_ok: Vec<(u16, String)>,
    /// Requests without an answer (connection refused or cut: the replica was killed).
    unanswered: usize,
}

impl Load {
    fn start(targets: &[Target]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads = (0..CLIENTS)
            .map(|client| {
                let targets = targets.to_vec();
                let stop = stop.clone();
                let answered = answered.clone();
                std::thread::spawn(move || {
                    let mut tally = Tally::default();
                    let mut turn = client;
                    while !stop.load(Ordering::SeqCst) {
                        let target = &targets[turn % targets.len()];
                        turn += 1;
                        match post(target) {
                            Some((status, id, body)) => {
                                if let Some(id) = id {
                                    tally.answered.push(id);
                                    answered.fetch_add(1, Ordering::SeqCst);
                                }
                                if status != 200 {
                                    tally.not_ok.push((status, body));
                                }
                            }
                            None => {
                                tally.unanswered += 1;
                                // A killed replica refuses at once: do not spin on it.
                                std::thread::sleep(Duration::from_millis(10));
                            }
                        }
                    }
                    tally
                })
            })
            .collect();
        Load {
            stop,
            answered,
            threads,
        }
    }

    /// How many answers carried an invocation id so far.
    fn answered_count(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }

    fn stop(self) -> Tally {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Tally::default();
        for thread in self.threads {
            let tally = thread.join().expect("a client thread");
            all.answered.extend(tally.answered);
            all.not_ok.extend(tally.not_ok);
            all.unanswered += tally.unanswered;
        }
        all
    }
}

impl Tally {
    /// Every request was answered 200 (the gateway's errors in the message otherwise).
    fn assert_all_ok(&self, gw: &Gateway, what: &str) {
        let logs = gw.logs();
        let errors: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("ERROR"))
            .take(5)
            .collect();
        assert!(
            self.not_ok.is_empty(),
            "{what}: {} of {} answers were not 200, e.g. {:?}; the gateway's first errors:\n{}",
            self.not_ok.len(),
            self.answered.len(),
            self.not_ok.first(),
            errors.join("\n")
        );
        assert_eq!(self.unanswered, 0, "{what}: requests without an answer");
    }
}

/// One request on a connection of its own: status, the answer's invocation id and its body;
/// `None` when no answer came (the replica is gone).
fn post(target: &Target) -> Option<(u16, Option<String>, String)> {
    let mut stream = TcpStream::connect_timeout(&target.addr, Duration::from_secs(5)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    let request = format!(
        "POST /completions HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
        target.addr,
        target.key,
        target.body.len(),
        target.body
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut raw = Vec::new();
    // A cut connection after a complete answer still counts as an answer.
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .lines()
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse::<u16>()
        .ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    // Only a whole answer counts: its body must be complete JSON (chunked or not, the id is
    // read from it).
    let id = invocation_id(body);
    if id.is_none() && status == 200 {
        return None;
    }
    Some((status, id, body.to_owned()))
}

/// The `invocationId` of a JSON body (possibly chunked: the value itself is never split in
/// answers this small).
fn invocation_id(body: &str) -> Option<String> {
    let start = body.find("\"invocationId\":\"")? + "\"invocationId\":\"".len();
    let len = body[start..].find('"')?;
    Some(body[start..start + len].to_owned())
}

/// Every answered id has a record (polling: a restarted replica replays its journal in the
/// background); prints the count of answered and lost.
fn assert_every_answer_recorded(gw: &Gateway, tally: &Tally, what: &str) {
    assert!(!tally.answered.is_empty(), "{what}: nothing was answered");
    let deadline = Instant::now() + RECORD_DEADLINE;
    let missing = loop {
        let stored: HashSet<String> = gw
            .list_invocations(&["--limit", "10000000"])
            .into_iter()
            .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
            .collect();
        let missing: Vec<&String> = tally
            .answered
            .iter()
            .filter(|id| !stored.contains(*id))
            .collect();
        if missing.is_empty() || Instant::now() > deadline {
            break missing;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    println!(
        "{what}: {} answered, {} lost, {} requests without an answer, {} answers not 200",
        tally.answered.len(),
        missing.len(),
        tally.unanswered,
        tally.not_ok.len()
    );
    assert!(
        missing.is_empty(),
        "{what}: {} of {} answered requests have no record, e.g. {:?}",
        missing.len(),
        tally.answered.len(),
        missing.iter().take(5).collect::<Vec<_>>()
    );
}

#[test]
fn the_proxy_cuts_and_restores_the_database() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let proxy = TcpProxy::start(postgres_addr(&db));
    let via = db.url_via(proxy.addr());
    assert_eq!(query_one(&via, "SELECT 1").as_deref(), Ok("1"));
    proxy.down();
    assert!(query_one(&via, "SELECT 1").is_err(), "the proxy is down");
    proxy.up();
    assert_eq!(query_one(&via, "SELECT 1").as_deref(), Ok("1"));
}
