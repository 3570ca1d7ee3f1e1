//! Redis for tests: each test gets a key prefix of its own on the one server, and every key under
//! it is deleted when it is dropped, so tests sharing the server (and a developer's own data on
//! it) never see each other's counters.
//!
//! The server is `GATEWAY_TEST_REDIS` (a `redis://[:PASSWORD@]HOST[:PORT][/DB]` URL), else
//! [`DEFAULT_URL`]. The client is a few lines of RESP over a `TcpStream`: the tests need PING,
//! SCAN, GET and DEL, not a client library with a runtime of its own.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable naming the test Redis server.
pub const REDIS_ENV: &str = "GATEWAY_TEST_REDIS";
/// Where tests look when `GATEWAY_TEST_REDIS` is not set.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379/0";

/// A reachable server answers well within this; an unreachable one must not stall a test.
const TIMEOUT: Duration = Duration::from_secs(5);

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A key prefix of its own on the test Redis server; its keys are deleted on drop.
#[derive(Debug)]
pub struct TestRedis {
    url: String,
    prefix: String,
}

impl TestRedis {
    /// A fresh prefix on the test server, for a test that needs Redis. When none is reachable
    /// the test should skip: this prints `SKIPPED: no Redis at …` and returns `None`, unless `CI`
    /// is set (CI has Redis, so its absence there is a failure, not a skip).
    pub fn create() -> Option<TestRedis> {
        let url = std::env::var(REDIS_ENV)
            .ok()
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| DEFAULT_URL.to_owned());
        let reachable =
            RedisConnection::open(&url).and_then(|mut conn| conn.command(&["PING"]).map(|_| ()));
        match reachable {
            Ok(()) => {
                let random = uuid::Uuid::now_v7().simple().to_string();
                let prefix = format!(
                    "gwtest:{}:{}:{}:",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed),
                    &random[random.len() - 8..]
                );
                Some(TestRedis { url, prefix })
            }
            Err(error) if std::env::var_os("CI").is_some() => {
                panic!("no Redis at {url} (CI requires it): {error}")
            }
            Err(error) => {
                let message = format!(
                    "\n*** SKIPPED: no Redis at {url} ({error}); \
                     set {REDIS_ENV} to a redis:// URL to run this test ***\n"
                );
                write_to_stderr(&message);
                None
            }
        }
    }

    /// The server's URL, for a gateway's `redis_url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// This test's key prefix, for a gateway's `redis_key_prefix` (`gwtest:PID:N:RANDOM:`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The two config lines pointing a gateway at this server and prefix.
    pub fn config_lines(&self) -> [String; 2] {
        [
            format!("redis_url = {:?}", self.url),
            format!("redis_key_prefix = {:?}", self.prefix),
        ]
    }

    /// Every key under the prefix, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut conn = self.connect();
        let mut keys = scan(&mut conn, &self.prefix).unwrap_or_else(|e| panic!("SCAN: {e}"));
        keys.sort();
        keys
    }

    /// Runs one command; panics on a connection error (a Redis error reply is returned as
    /// [`Reply::Error`]).
    pub fn command(&self, args: &[&str]) -> Reply {
        self.connect()
            .command(args)
            .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
    }

    fn connect(&self) -> RedisConnection {
        RedisConnection::open(&self.url)
            .unwrap_or_else(|e| panic!("cannot connect to Redis at {}: {e}", self.url))
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        let deleted = RedisConnection::open(&self.url).and_then(|mut conn| {
            let keys = scan(&mut conn, &self.prefix)?;
            for batch in keys.chunks(100) {
                let mut args = vec!["DEL"];
                args.extend(batch.iter().map(String::as_str));
                conn.command(&args)?;
            }
            Ok(())
        });
        if let Err(e) = deleted {
            eprintln!(
                "warning: cannot delete the Redis keys under {}: {e}",
                self.prefix
            );
        }
    }
}

/// Straight to the process's stderr: the test harness captures what a test writes through
/// `std::io`, which would hide a skip behind an `ok`.
fn write_to_stderr(message: &str) {
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/stderr")
        .and_then(|mut stderr| stderr.write_all(message.as_bytes()));
    if written.is_err() {
        eprintln!("{message}");
    }
}

/// Every key matching `prefix*` (SCAN, so a busy server is not blocked as by KEYS).
fn scan(conn: &mut RedisConnection, prefix: &str) -> Result<Vec<String>, String> {
    let pattern = format!("{}*", glob_escape(prefix));
    let mut keys = Vec::new();
    let mut cursor = "0".to_owned();
    loop {
        let reply = conn.command(&["SCAN", &cursor, "MATCH", &pattern, "COUNT", "1000"])?;
        let Reply::Array(parts) = reply else {
            return Err(format!("SCAN answered {reply:?}"));
        };
        match parts.as_slice() {
            [Reply::Bulk(Some(next)), Reply::Array(found)] => {
                keys.extend(found.iter().filter_map(Reply::text));
                cursor = String::from_utf8_lossy(next).into_owned();
            }
            _ => return Err(format!("SCAN answered {parts:?}")),
        }
        if cursor == "0" {
            return Ok(keys);
        }
    }
}

/// `text` with the glob pattern's special characters escaped, for SCAN's MATCH.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '^') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// One RESP reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    /// A simple string's or bulk string's text.
    pub fn text(&self) -> Option<String> {
        match self {
            Reply::Simple(s) => Some(s.clone()),
            Reply::Bulk(Some(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        }
    }
}

/// One connection, after AUTH and SELECT when the URL asks for them.
struct RedisConnection {
    reader: BufReader<TcpStream>,
}

impl RedisConnection {
    fn open(url: &str) -> Result<RedisConnection, String> {
        let target = Target::parse(url)?;
        let stream =
            TcpStream::connect_timeout(&target.addr, TIMEOUT).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
            .map_err(|e| e.to_string())?;
        let mut conn = RedisConnection {
            reader: BufReader::new(stream),
        };
        if let Some(password) = &target.password {
            conn.expect_ok(&["AUTH", password])?;
        }
        if target.db != 0 {
            conn.expect_ok(&["SELECT", &target.db.to_string()])?;
        }
        Ok(conn)
    }

    fn expect_ok(&mut self, args: &[&str]) -> Result<(), String> {
        match self.command(args)? {
            Reply::Error(e) => Err(format!("{}: {e}", args[0])),
            _ => Ok(()),
        }
    }

    fn command(&mut self, args: &[&str]) -> Result<Reply, String> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        self.reader
            .get_mut()
            .write_all(&request)
            .map_err(|e| e.to_string())?;
        self.read_reply()
    }

    fn read_reply(&mut self) -> Result<Reply, String> {
        let mut line = String::new();
        let read = self
            .reader
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Err("the server closed the connection".to_owned());
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(line.char_indices().nth(1).map_or(0, |(i, _)| i));
        let number = || {
            rest.parse::<i64>()
                .map_err(|e| format!("bad RESP line {line:?}: {e}"))
        };
        match kind {
            "+" => Ok(Reply::Simple(rest.to_owned())),
            "-" => Ok(Reply::Error(rest.to_owned())),
            ":" => Ok(Reply::Integer(number()?)),
            "$" => {
                let Ok(len) = usize::try_from(number()?) else {
                    return Ok(Reply::Bulk(None));
                };
                let mut data = vec![0; len + 2];
                std::io::Read::read_exact(&mut self.reader, &mut data)
                    .map_err(|e| e.to_string())?;
                data.truncate(len);
                Ok(Reply::Bulk(Some(data)))
            }
            "*" => {
                let Ok(count) = usize::try_from(number()?) else {
                    return Ok(Reply::Array(Vec::new()));
                };
                (0..count)
                    .map(|_| self.read_reply())
                    .collect::<Result<_, _>>()
                    .map(Reply::Array)
            }
            _ => Err(format!("unexpected RESP line {line:?}")),
        }
    }
}

/// What a `redis://[:PASSWORD@]HOST[:PORT][/DB]` URL names.
struct Target {
    addr: SocketAddr,
    password: Option<String>,
    db: u32,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("redis://")
            .ok_or_else(|| format!("{url:?}: the tests speak only redis:// URLs"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, host_port) = match authority.rsplit_once('@') {
            Some((userinfo, host_port)) => (Some(userinfo), host_port),
            None => (None, authority),
        };
        let password = userinfo
            .map(|info| info.split_once(':').map_or(info, |(_, password)| password))
            .filter(|password| !password.is_empty())
            .map(str::to_owned);
        let host_port = if host_port.contains(':') {
            host_port.to_owned()
        } else {
            format!("{host_port}:6379")
        };
        let addr = host_port
            .to_socket_addrs()
            .map_err(|e| format!("{host_port}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host_port}: no address"))?;
        let db = match path.split('?').next().unwrap_or("") {
            "" => 0,
            db => db.parse().map_err(|e| format!("database {db:?}: {e}"))?,
        };
        Ok(Target { addr, password, db })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_address_password_and_database() {
        let t = Target::parse("redis://:secret@127.0.0.1:6380/3").expect("a URL");
        assert_eq!(t.addr, SocketAddr::from(([127, 0, 0, 1], 6380)));
        assert_eq!(t.password.as_deref(), Some("secret"));
        assert_eq!(t.db, 3);
        let t = Target::parse("redis://127.0.0.1").expect("a URL");
        assert_eq!(t.addr.port(), 6379);
        assert_eq!((t.password, t.db), (None, 0));
        assert!(Target::parse("rediss://127.0.0.1").is_err());
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]"), "a\\*b\\?\\[c\\]");
    }
}
